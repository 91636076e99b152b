/* SPDX-License-Identifier: MIT */
/*
 * Discovery: reads the RDMA devices of a host into the device model, from a sysfs root and a
 * dev root only (no netlink, nothing read outside the two roots). A device whose sysfs is
 * partial is still reported, with problems saying what is missing; it never hides others.
 */
#pragma once
#include "device.h"

#define RDP_DEFAULT_SYSFS_ROOT "/sys"
#define RDP_DEFAULT_DEV_ROOT "/dev"

/*
 * Returns 0 and a host model (possibly with no devices, e.g. no /sys/class/infiniband), or a
 * negative errno when the roots themselves cannot be opened (-ENOENT, -ENOTDIR, -EACCES) or
 * memory runs out.
 */
int rdp_discover(const char *sysfs_root, const char *dev_root, struct rdp_host **ret);

/*
 * The same on roots the caller opened (rdp_sysfs_open_root()), e.g. to name the root that
 * failed, or to keep them open across rescans. The fds stay owned by the caller.
 */
int rdp_discover_at(int sysfs_fd, int dev_fd, struct rdp_host **ret);
