/* SPDX-License-Identifier: MIT */
#include "dra-instance.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"

bool rdp_dra_instance_uid_valid(const char *uid)
{
	size_t n;

	if (!uid)
		return false;
	n = strlen(uid);
	if (n == 0 || n > RDP_DRA_INSTANCE_UID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = uid[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '-'))
			return false;
	}
	return true;
}

static int name(char *buf, size_t len, const char *head, const char *uid, const char *tail)
{
	int n;

	if (uid && *uid && !rdp_dra_instance_uid_valid(uid))
		return -EINVAL;
	n = snprintf(buf, len, "%s%s%s%s", head, uid && *uid ? "-" : "", uid && *uid ? uid : "",
		     tail);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int rdp_dra_reg_socket_name(const char *driver, const char *uid, char *buf, size_t len)
{
	return name(buf, len, driver, uid, "-reg.sock");
}

int rdp_dra_service_socket_name(const char *uid, char *buf, size_t len)
{
	return name(buf, len, "dra", uid, ".sock");
}

int rdp_dra_lock_open_at(int dirfd)
{
	int fd = openat(dirfd, RDP_DRA_LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	return fd < 0 ? -errno : fd;
}

int rdp_dra_lock_take(int fd)
{
	if (fd < 0)
		return 0;
	while (flock(fd, LOCK_EX) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

void rdp_dra_lock_release(int fd)
{
	if (fd >= 0)
		(void)flock(fd, LOCK_UN);
}

/* True when nothing listens on path: connect() refused (or the socket file is not one). */
static bool refused(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	_cleanup_close_ int fd = -1;

	if (strlen(path) >= sizeof(sa.sun_path))
		return false;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return false;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return false;
	return errno == ECONNREFUSED;
}

int rdp_dra_remove_stale_sockets(const char *dir, const char *prefix, const char *suffix,
				 const char *keep)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t lp = strlen(prefix), ls = strlen(suffix);
	int removed = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		char path[PATH_MAX];
		struct stat st;
		int k;

		if (n < lp || n < ls || strncmp(e->d_name, prefix, lp) != 0 ||
		    strcmp(e->d_name + n - ls, suffix) != 0 || (keep && strcmp(e->d_name, keep) == 0))
			continue;
		k = snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (k < 0 || (size_t)k >= sizeof(path))
			continue;
		if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode) || !refused(path))
			continue;
		nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
		if (!refused(path))
			continue;
		if (unlink(path) == 0)
			removed++;
	}
	closedir(d);
	return removed;
}
