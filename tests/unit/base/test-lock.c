/* SPDX-License-Identifier: MIT */
/* One daemon per node: the lock file, between two processes (fork). */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "lock.h"
#include "test.h"

static char base[] = "/tmp/rdp-lock-XXXXXX";
static char dir[256];

/*
 * A child that takes the lock, says so on the pipe, then waits for how to end: 'x' exit(0),
 * 'k' to be SIGKILLed (it just sleeps).
 */
static pid_t holder_child(int *ctl)
{
	int up[2], down[2];
	pid_t pid;

	if (pipe(up) < 0 || pipe(down) < 0)
		abort();
	pid = fork();
	if (pid == 0) {
		struct rdp_lock *l = NULL;
		char c = 0;

		close(up[0]);
		close(down[1]);
		if (rdp_lock_new(dir, &l) < 0 || rdp_lock_try(l, NULL) < 0)
			_exit(2);
		c = 'L';
		if (write(up[1], &c, 1) != 1)
			_exit(3);
		if (read(down[0], &c, 1) != 1)
			_exit(4);
		if (c == 'x')
			_exit(0); /* no unlock: the kernel releases the lock on exit */
		pause();
		_exit(5);
	}
	close(up[1]);
	close(down[0]);
	{
		char c = 0;

		EXPECT_EQ(read(up[0], &c, 1), 1);
		EXPECT_EQ(c, 'L');
	}
	close(up[0]);
	*ctl = down[1];
	return pid;
}

static void test_missing_parent(void)
{
	struct rdp_lock *l = NULL;
	char p[300];

	snprintf(p, sizeof(p), "%s/nope/.rdma-dp", base);
	EXPECT_EQ(rdp_lock_new(p, &l), 0);
	EXPECT_EQ(rdp_lock_try(l, NULL), -ENOENT);
	EXPECT_EQ(rdp_lock_state(l), RDP_LOCK_UNLOCKED);
	rdp_lock_free(l);
}

static void test_two_processes(char how)
{
	struct rdp_lock *l = NULL;
	pid_t holder = -1, child;
	int ctl = -1, status = 0;
	char c = how;

	child = holder_child(&ctl);
	EXPECT_EQ(rdp_lock_new(dir, &l), 0);
	/* held elsewhere: refused at once, naming the holder */
	EXPECT_EQ(rdp_lock_try(l, &holder), -EWOULDBLOCK);
	EXPECT_EQ(holder, child);
	EXPECT_EQ(rdp_lock_state(l), RDP_LOCK_UNLOCKED);
	EXPECT_EQ(rdp_lock_check(l), 0);
	/* still refused on a retry while the holder lives */
	EXPECT_EQ(rdp_lock_try(l, &holder), -EWOULDBLOCK);

	if (how == 'k')
		kill(child, SIGKILL);
	else
		EXPECT_EQ(write(ctl, &c, 1), 1);
	EXPECT_EQ(waitpid(child, &status, 0), child);
	if (how == 'k')
		EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	else
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(ctl);

	/* the holder is gone: taken over, our pid in the file */
	EXPECT_EQ(rdp_lock_try(l, &holder), 0);
	EXPECT_EQ(rdp_lock_state(l), RDP_LOCK_HELD);
	EXPECT_EQ(rdp_lock_check(l), 1);
	EXPECT_EQ(rdp_lock_try(l, NULL), 0); /* idempotent */
	{
		char path[300], buf[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, RDP_LOCK_FILE);
		EXPECT_STREQ(rdp_lock_path(l), path);
		f = fopen(path, "r");
		EXPECT_TRUE(f && fgets(buf, sizeof(buf), f));
		if (f)
			fclose(f);
		EXPECT_EQ(atol(buf), getpid());
	}
	/* released: the file stays, another one can take it */
	rdp_lock_release(l, false);
	EXPECT_EQ(rdp_lock_state(l), RDP_LOCK_UNLOCKED);
	{
		struct stat st;
		char path[300];

		snprintf(path, sizeof(path), "%s/%s", dir, RDP_LOCK_FILE);
		EXPECT_EQ(stat(path, &st), 0);
	}
	rdp_lock_free(l);
}

/* Within one process, a second lock object conflicts too (flock is per open file). */
static void test_same_process_and_unlink(void)
{
	struct rdp_lock *a = NULL, *b = NULL;
	pid_t holder = 0;
	char path[300];

	EXPECT_EQ(rdp_lock_new(dir, &a), 0);
	EXPECT_EQ(rdp_lock_new(dir, &b), 0);
	EXPECT_EQ(rdp_lock_try(a, NULL), 0);
	EXPECT_EQ(rdp_lock_try(b, &holder), -EWOULDBLOCK);
	EXPECT_EQ(holder, getpid());

	/* someone removes the lock file: the holder notices, the lock protects nothing now */
	snprintf(path, sizeof(path), "%s/%s", dir, RDP_LOCK_FILE);
	EXPECT_EQ(unlink(path), 0);
	EXPECT_EQ(rdp_lock_check(a), 0);
	/* a new file at the path: b takes it; a must release and wait for b */
	EXPECT_EQ(rdp_lock_try(b, NULL), 0);
	rdp_lock_release(a, true); /* not its file any more: removes nothing */
	EXPECT_EQ(access(path, F_OK), 0);
	EXPECT_EQ(rdp_lock_try(a, &holder), -EWOULDBLOCK);
	EXPECT_EQ(holder, getpid());
	rdp_lock_free(b);
	EXPECT_EQ(rdp_lock_try(a, NULL), 0);
	rdp_lock_free(a);
}

/* A foreign lock file: garbage content gives holder 0, not a made-up pid. */
static void test_garbage_holder(void)
{
	struct rdp_lock *a = NULL, *b = NULL;
	pid_t holder = -1;
	char path[300];
	FILE *f;

	EXPECT_EQ(rdp_lock_new(dir, &a), 0);
	EXPECT_EQ(rdp_lock_new(dir, &b), 0);
	EXPECT_EQ(rdp_lock_try(a, NULL), 0);
	snprintf(path, sizeof(path), "%s/%s", dir, RDP_LOCK_FILE);
	f = fopen(path, "r+");
	EXPECT_TRUE(f != NULL);
	if (f) {
		fputs("12x\n", f);
		fclose(f);
	}
	EXPECT_EQ(rdp_lock_try(b, &holder), -EWOULDBLOCK);
	EXPECT_EQ(holder, 0);
	rdp_lock_free(a);
	rdp_lock_free(b);
}

/*
 * A holder that stops cleanly removes its file and directory; a waiter that had the old file
 * open and locks it after the holder's close starts over on a new file.
 */
static void test_remove_on_release(void)
{
	struct rdp_lock *a = NULL, *b = NULL;
	char path[300];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, RDP_LOCK_FILE);
	EXPECT_EQ(rdp_lock_new(dir, &a), 0);
	EXPECT_EQ(rdp_lock_new(dir, &b), 0);
	EXPECT_EQ(rdp_lock_try(a, NULL), 0);
	fd = open(path, O_RDWR); /* the waiter's open of the old inode */
	EXPECT_TRUE(fd >= 0);
	rdp_lock_release(a, true);
	EXPECT_EQ(access(path, F_OK), -1);
	EXPECT_EQ(rmdir(dir), 0);
	/* the old inode is free to lock, but it is not the lock any more */
	EXPECT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
	close(fd);
	EXPECT_EQ(rdp_lock_try(b, NULL), 0); /* re-creates the directory and the file */
	EXPECT_EQ(rdp_lock_check(b), 1);
	EXPECT_EQ(rdp_lock_try(a, NULL), -EWOULDBLOCK);
	rdp_lock_free(a);
	rdp_lock_free(b);
}

int main(void)
{
	char path[300];

	if (!mkdtemp(base))
		return 1;
	snprintf(dir, sizeof(dir), "%s/.rdma-dp", base);
	test_missing_parent();
	test_two_processes('x');
	test_two_processes('k');
	test_same_process_and_unlink();
	test_garbage_holder();
	test_remove_on_release();
	snprintf(path, sizeof(path), "%s/%s", dir, RDP_LOCK_FILE);
	unlink(path);
	rmdir(dir);
	rmdir(base);
	return test_summary("test-lock");
}
