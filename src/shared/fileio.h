/* SPDX-License-Identifier: MIT */
/*
 * Whole-file I/O done one way: writing a whole buffer, replacing a file atomically (what the
 * CDI specs, the DRA checkpoint and the metrics textfile need: a reader sees the old file or
 * the new one, never a part), and reading a bounded regular file.
 */
#pragma once
#include <stddef.h>
#include <sys/types.h>

/* Writes all len bytes of buf to fd, again after EINTR and short writes. 0, -errno, or -EIO
 * when write() returns 0. */
int rdp_write_all(int fd, const void *buf, size_t len);

/*
 * Makes <dirfd>/name hold exactly data[0..len), mode `mode`: a temporary file
 * "<tmp_prefix><6 random characters><tmp_suffix>" created in the same directory (O_EXCL,
 * never followed through a symlink), written, fchmod'ed, fsync'ed, renamed over name, then
 * the directory fsync'ed. The temporary file is removed on any failure. Returns 0 or -errno
 * (-ENAMETOOLONG when the temporary name does not fit in 255 bytes).
 */
int rdp_replace_file_at(int dirfd, const char *name, const char *tmp_prefix,
			const char *tmp_suffix, const void *data, size_t len, mode_t mode);

/*
 * Reads the regular file open as fd, of at most max bytes: *ret (NUL-terminated; rdp_free())
 * and *ret_len. -EINVAL when it is not a regular file, -EFBIG when it is (or grows) larger
 * than max, -ENOMEM, -errno.
 */
int rdp_read_file_fd(int fd, size_t max, char **ret, size_t *ret_len);
