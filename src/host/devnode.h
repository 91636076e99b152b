/* SPDX-License-Identifier: MIT */
/*
 * Device nodes under a dev root, checked against the device number sysfs names for them
 * (the `dev` attribute, "231:192"). Discovery, the rescanner and the Allocate path all judge a
 * node with rdp_devnode_check(), so that the three always agree:
 *   - a character device is right when its st_rdev is the number sysfs names (or sysfs names
 *     none, want == 0: it is then taken as it is);
 *   - an empty regular file is a stand-in for a character device (fixture trees made where
 *     mknod is refused, see tests/fixtures/sysfsgen.py): it has no number to compare and is
 *     taken as present, exactly as discovery always took any existing path;
 *   - anything else is not a character device.
 * Paths resolve inside the root as in sysfs.h. No logging, no allocation.
 */
#pragma once
#include <stddef.h>
#include <sys/types.h>

enum rdp_devnode_status {
	RDP_DEVNODE_OK = 0,
	RDP_DEVNODE_MISSING, /* no such path (ENOENT, ENOTDIR) */
	RDP_DEVNODE_MISMATCH, /* a character device with another number */
	RDP_DEVNODE_NOT_CHR, /* neither a character device nor an empty regular file */
	RDP_DEVNODE_ERROR, /* cannot be examined (EACCES, ELOOP, ...) */
};

struct rdp_devnode_result {
	enum rdp_devnode_status status;
	dev_t actual; /* MISMATCH: the node's number */
	int error; /* ERROR: the negative errno */
};

/*
 * Judges the node at rel ("infiniband/uverbs3", relative to the dev root dev_fd) against want
 * (0: sysfs names no number). Returns the status, also stored in *ret when ret is not NULL.
 */
enum rdp_devnode_status rdp_devnode_check(int dev_fd, const char *rel, dev_t want,
					  struct rdp_devnode_result *ret);

/*
 * A sentence for a status other than OK, naming the node as path ("/dev/infiniband/uverbs3")
 * and the sysfs name of the number (name, "uverbs3"):
 *   "/dev/infiniband/uverbs5 missing"
 *   "/dev/infiniband/uverbs3 is 231:195, sysfs uverbs3 says 231:192"
 *   "/dev/infiniband/uverbs3 is not a character device"
 *   "/dev/infiniband/uverbs3: Permission denied"
 * Always NUL-terminated (truncated to size). Returns buf.
 */
char *rdp_devnode_reason(const struct rdp_devnode_result *r, const char *path, const char *name,
			 dev_t want, char *buf, size_t size);

/* "231:192" into buf (at least 24 bytes). Returns buf. */
char *rdp_devnum_format(dev_t d, char *buf, size_t size);
