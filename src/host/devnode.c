/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "devnode.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sysfs.h"

static enum rdp_devnode_status judge(const struct stat *st, dev_t want,
				     struct rdp_devnode_result *res)
{
	if (S_ISCHR(st->st_mode)) {
		if (want != 0 && st->st_rdev != want) {
			res->actual = st->st_rdev;
			return RDP_DEVNODE_MISMATCH;
		}
		return RDP_DEVNODE_OK;
	}
	if (S_ISREG(st->st_mode) && st->st_size == 0)
		return RDP_DEVNODE_OK; /* a stand-in: nothing to compare */
	return RDP_DEVNODE_NOT_CHR;
}

enum rdp_devnode_status rdp_devnode_check(int dev_fd, const char *rel, dev_t want,
					  struct rdp_devnode_result *ret)
{
	struct rdp_devnode_result res = {.status = RDP_DEVNODE_OK};
	struct stat st;
	int fd;

	fd = rdp_sysfs_open(dev_fd, rel, O_PATH);
	if (fd < 0) {
		if (fd == -ENOENT || fd == -ENOTDIR) {
			res.status = RDP_DEVNODE_MISSING;
		} else {
			res.status = RDP_DEVNODE_ERROR;
			res.error = fd;
		}
	} else {
		if (fstat(fd, &st) < 0) {
			res.status = RDP_DEVNODE_ERROR;
			res.error = -errno;
		} else {
			res.status = judge(&st, want, &res);
		}
		close(fd);
	}
	if (ret)
		*ret = res;
	return res.status;
}

char *rdp_devnum_format(dev_t d, char *buf, size_t size)
{
	snprintf(buf, size, "%u:%u", major(d), minor(d));
	return buf;
}

char *rdp_devnode_reason(const struct rdp_devnode_result *r, const char *path, const char *name,
			 dev_t want, char *buf, size_t size)
{
	char a[24], w[24];

	switch (r->status) {
	case RDP_DEVNODE_OK:
		snprintf(buf, size, "%s is as sysfs names it", path);
		break;
	case RDP_DEVNODE_MISSING:
		snprintf(buf, size, "%s missing", path);
		break;
	case RDP_DEVNODE_MISMATCH:
		snprintf(buf, size, "%s is %s, sysfs %s says %s", path,
			 rdp_devnum_format(r->actual, a, sizeof(a)), name,
			 rdp_devnum_format(want, w, sizeof(w)));
		break;
	case RDP_DEVNODE_NOT_CHR:
		snprintf(buf, size, "%s is not a character device", path);
		break;
	case RDP_DEVNODE_ERROR:
		snprintf(buf, size, "%s: %s", path, strerror(-r->error));
		break;
	}
	return buf;
}
