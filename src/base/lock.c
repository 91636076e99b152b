/* SPDX-License-Identifier: MIT */
/* One daemon per node: see lock.h. */
#include "lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "macro.h"

struct rdp_lock {
	char *dir;
	char *path;
	int fd; /* open and flock()ed while HELD, else -1 */
	enum rdp_lock_state state;
};

int rdp_lock_new(const char *dir, struct rdp_lock **ret)
{
	struct rdp_lock *l = rdp_calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	l->fd = -1;
	l->state = RDP_LOCK_UNLOCKED;
	l->dir = rdp_strdup(dir);
	l->path = rdp_asprintf("%s/%s", dir, RDP_LOCK_FILE);
	if (!l->dir || !l->path) {
		rdp_lock_free(l);
		return -ENOMEM;
	}
	*ret = l;
	return 0;
}

/* The pid a holder wrote into the file: a decimal number and a newline, else 0. */
static pid_t read_holder(int fd)
{
	char buf[24];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	char *end;
	long v;

	if (n <= 0)
		return 0;
	buf[n] = '\0';
	errno = 0;
	v = strtol(buf, &end, 10);
	if (errno || end == buf || *end != '\n' || v <= 0 || v > 0x7fffffff)
		return 0;
	return (pid_t)v;
}

static int write_pid(int fd)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());

	if (ftruncate(fd, 0) < 0)
		return -errno;
	if (pwrite(fd, buf, (size_t)n, 0) != n)
		return errno ? -errno : -EIO;
	return 0;
}

/* Does the path name the inode fd has open? 1, 0, or -errno. */
static int same_file(const char *path, int fd)
{
	struct stat a, b;

	if (fstat(fd, &a) < 0)
		return -errno;
	if (lstat(path, &b) < 0)
		return errno == ENOENT ? 0 : -errno;
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int rdp_lock_try(struct rdp_lock *l, pid_t *holder)
{
	if (holder)
		*holder = 0;
	if (l->state == RDP_LOCK_HELD)
		return 0;
	/*
	 * Locked the file the path names, and not one unlinked meanwhile (a holder that exits
	 * removes its file and the directory): a few rounds at most.
	 */
	for (int round = 0; round < 8; round++) {
		_cleanup_close_ int fd = -1;
		int k;

		if (mkdir(l->dir, 0750) < 0 && errno != EEXIST)
			return -errno;
		fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0644);
		if (fd < 0 && errno == ENOENT)
			continue; /* the directory went between mkdir and open */
		if (fd < 0)
			return -errno;
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			k = -errno;
			if (k == -EWOULDBLOCK && holder)
				*holder = read_holder(fd);
			return k;
		}
		k = same_file(l->path, fd);
		if (k < 0)
			return k;
		if (k == 0)
			continue; /* unlinked or replaced between open and flock */
		k = write_pid(fd);
		if (k < 0)
			return k;
		l->fd = TAKE_FD(fd);
		l->state = RDP_LOCK_HELD;
		return 0;
	}
	return -ESTALE;
}

int rdp_lock_check(struct rdp_lock *l)
{
	if (l->state != RDP_LOCK_HELD)
		return 0;
	return same_file(l->path, l->fd);
}

enum rdp_lock_state rdp_lock_state(const struct rdp_lock *l)
{
	return l->state;
}

const char *rdp_lock_path(const struct rdp_lock *l)
{
	return l->path;
}

void rdp_lock_release(struct rdp_lock *l, bool remove)
{
	/* Unlink before unlocking: a waiter that locks the old inode then sees it unlinked. */
	if (remove && l->state == RDP_LOCK_HELD && same_file(l->path, l->fd) == 1)
		(void)unlink(l->path);
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	l->state = RDP_LOCK_UNLOCKED;
}

struct rdp_lock *rdp_lock_free(struct rdp_lock *l)
{
	if (!l)
		return NULL;
	rdp_lock_release(l, false);
	rdp_free(l->dir);
	rdp_free(l->path);
	rdp_free(l);
	return NULL;
}
