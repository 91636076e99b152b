/* SPDX-License-Identifier: MIT */
/* The one loop that writes a whole buffer to a file. */
#pragma once
#include <stddef.h>

/* Writes all len bytes of buf to fd, again after EINTR and short writes. 0, -errno, or -EIO
 * when write() returns 0. */
int rdp_write_all(int fd, const void *buf, size_t len);
