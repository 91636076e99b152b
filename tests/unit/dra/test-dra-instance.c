/* SPDX-License-Identifier: MIT */
/* dra-instance: socket names per pod UID, the lock between instances, stale sockets. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dra-instance.h"
#include "test.h"

#define UID "0b6c7a4e-3f7d-4a52-9c1e-2d1f7e0a9b11"

static void test_names(void)
{
	char buf[128];

	EXPECT_TRUE(rdp_dra_instance_uid_valid(UID));
	EXPECT_TRUE(!rdp_dra_instance_uid_valid(""));
	EXPECT_TRUE(!rdp_dra_instance_uid_valid(NULL));
	EXPECT_TRUE(!rdp_dra_instance_uid_valid("../x"));
	EXPECT_TRUE(!rdp_dra_instance_uid_valid("a/b"));
	EXPECT_TRUE(!rdp_dra_instance_uid_valid("a.b"));
	memset(buf, 'a', 65);
	buf[65] = '\0';
	EXPECT_TRUE(!rdp_dra_instance_uid_valid(buf));
	buf[64] = '\0';
	EXPECT_TRUE(rdp_dra_instance_uid_valid(buf));

	EXPECT_EQ(rdp_dra_reg_socket_name("rdma.rdma-dp.io", UID, buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "rdma.rdma-dp.io-" UID "-reg.sock");
	EXPECT_EQ(rdp_dra_reg_socket_name("rdma.rdma-dp.io", NULL, buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "rdma.rdma-dp.io-reg.sock");
	EXPECT_EQ(rdp_dra_reg_socket_name("rdma.rdma-dp.io", "", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "rdma.rdma-dp.io-reg.sock");
	EXPECT_EQ(rdp_dra_service_socket_name(UID, buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "dra-" UID ".sock");
	EXPECT_EQ(rdp_dra_service_socket_name(NULL, buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "dra.sock");
	EXPECT_EQ(rdp_dra_service_socket_name("x/y", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_dra_reg_socket_name("rdma.rdma-dp.io", UID, buf, 20), -ENAMETOOLONG);
}

/* A second process cannot take the lock while this one holds it, and can once released. */
static void test_lock(const char *dir)
{
	int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int fd = rdp_dra_lock_open_at(dirfd);
	struct stat st;
	char path[512];
	pid_t pid;
	int status = -1;

	EXPECT_TRUE(fd >= 0);
	snprintf(path, sizeof(path), "%s/%s", dir, RDP_DRA_LOCK_FILE);
	EXPECT_EQ(stat(path, &st), 0);
	EXPECT_EQ(st.st_mode & 0777, 0600);
	EXPECT_EQ(rdp_dra_lock_take(fd), 0);
	EXPECT_EQ(rdp_dra_lock_take(-1), 0);
	pid = fork();
	if (pid == 0) {
		/* another instance: its own open file description */
		int f2 = open(path, O_RDWR | O_CLOEXEC);

		_exit(f2 >= 0 && flock(f2, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK ? 0 : 1);
	}
	EXPECT_EQ(waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	rdp_dra_lock_release(fd);
	pid = fork();
	if (pid == 0) {
		int f2 = open(path, O_RDWR | O_CLOEXEC);

		_exit(f2 >= 0 && flock(f2, LOCK_EX | LOCK_NB) == 0 ? 0 : 1);
	}
	EXPECT_EQ(waitpid(pid, &status, 0), pid);
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(fd);
	close(dirfd);
}

static int bound(const char *dir, const char *name, bool listening)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", dir, name);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	if (listening && listen(fd, 4) < 0)
		return -1;
	return fd;
}

static bool exists(const char *dir, const char *name)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return access(path, F_OK) == 0;
}

static void test_stale(const char *dir)
{
	int live = bound(dir, "rdma.rdma-dp.io-live-reg.sock", true);
	int dead = bound(dir, "rdma.rdma-dp.io-dead-reg.sock", false);
	int old = bound(dir, "rdma.rdma-dp.io-reg.sock", false);
	int mine = bound(dir, "rdma.rdma-dp.io-mine-reg.sock", false);
	int other = bound(dir, "other.example.com-reg.sock", false);
	char path[512];
	FILE *f;

	EXPECT_TRUE(live >= 0 && dead >= 0 && old >= 0 && mine >= 0 && other >= 0);
	close(dead); /* its file stays: a pod killed before it removed it */
	close(old);
	snprintf(path, sizeof(path), "%s/rdma.rdma-dp.io-file-reg.sock", dir);
	f = fopen(path, "w"); /* not a socket: left alone */
	if (f)
		fclose(f);
	EXPECT_EQ(rdp_dra_remove_stale_sockets(dir, "rdma.rdma-dp.io-", "-reg.sock",
					       "rdma.rdma-dp.io-mine-reg.sock"), 2);
	EXPECT_TRUE(exists(dir, "rdma.rdma-dp.io-live-reg.sock"));
	EXPECT_TRUE(!exists(dir, "rdma.rdma-dp.io-dead-reg.sock"));
	EXPECT_TRUE(!exists(dir, "rdma.rdma-dp.io-reg.sock"));
	EXPECT_TRUE(exists(dir, "rdma.rdma-dp.io-mine-reg.sock"));
	EXPECT_TRUE(exists(dir, "other.example.com-reg.sock"));
	EXPECT_TRUE(exists(dir, "rdma.rdma-dp.io-file-reg.sock"));
	EXPECT_EQ(rdp_dra_remove_stale_sockets("/nonexistent-dir-xyz", "a", "b", NULL), -ENOENT);
	close(live);
	close(mine);
	close(other);
}

int main(void)
{
	char dir[] = "/tmp/test-dra-instance-XXXXXX";
	char cmd[128];

	if (!mkdtemp(dir))
		return 1;
	test_names();
	test_lock(dir);
	test_stale(dir);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	return test_summary("test-dra-instance");
}
