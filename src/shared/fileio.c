/* SPDX-License-Identifier: MIT */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"

int rdp_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A new temporary file in dirfd; its name in tmp. */
static int create_temp(int dirfd, const char *prefix, const char *suffix, char *tmp, size_t size)
{
	static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

	for (int attempt = 0; attempt < 100; attempt++) {
		unsigned char rnd[6];
		char sfx[7];
		int fd, n;

		if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
			/* No entropy yet: uniqueness is all that is needed here. */
			struct timespec ts;
			unsigned long x;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			x = (unsigned long)getpid() * 2654435761UL + (unsigned long)attempt * 40503UL +
			    (unsigned long)ts.tv_nsec;
			for (size_t i = 0; i < sizeof(rnd); i++, x >>= 5)
				rnd[i] = (unsigned char)x;
		}
		for (size_t i = 0; i < 6; i++)
			sfx[i] = chars[rnd[i] % (sizeof(chars) - 1)];
		sfx[6] = '\0';
		n = snprintf(tmp, size, "%s%s%s", prefix, sfx, suffix);
		if (n < 0 || (size_t)n >= size)
			return -ENAMETOOLONG;
		fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0)
			return fd;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

int rdp_replace_file_at(int dirfd, const char *name, const char *tmp_prefix,
			const char *tmp_suffix, const void *data, size_t len, mode_t mode)
{
	char tmp[256];
	int fd, r;

	fd = create_temp(dirfd, tmp_prefix, tmp_suffix, tmp, sizeof(tmp));
	if (fd < 0)
		return fd;
	r = rdp_write_all(fd, data, len);
	if (r >= 0 && fchmod(fd, mode) < 0)
		r = -errno;
	if (r >= 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r >= 0)
		r = -errno;
	if (r >= 0 && renameat(dirfd, tmp, dirfd, name) < 0)
		r = -errno;
	if (r < 0) {
		unlinkat(dirfd, tmp, 0);
		return r;
	}
	return fsync(dirfd) < 0 ? -errno : 0;
}

int rdp_read_file_fd(int fd, size_t max, char **ret, size_t *ret_len)
{
	struct stat st;
	char *buf;
	size_t len = 0;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -EINVAL;
	if ((uintmax_t)st.st_size > max)
		return -EFBIG;
	buf = rdp_malloc(max + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + len, max + 1 - len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			rdp_free(buf);
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > max) { /* grew after fstat */
			rdp_free(buf);
			return -EFBIG;
		}
	}
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}
