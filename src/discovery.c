/* SPDX-License-Identifier: MIT */
/* PLACEHOLDER until discovery lands: keeps the tree linking. */
#include "discovery.h"

#include <errno.h>

int rdp_discover(const char *sysfs_root, const char *dev_root, struct rdp_host **ret)
{
	(void)sysfs_root;
	(void)dev_root;
	(void)ret;
	return -ENOSYS;
}
