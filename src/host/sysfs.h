/* SPDX-License-Identifier: MIT */
/*
 * Reading a sysfs (or dev) tree below a root directory, and parsing its value formats.
 *
 * Every path is relative to a root dirfd and resolved as if the root were "/" (chroot-like):
 * a symlink with an absolute target, or ".." climbing above the root, stays inside the root.
 * Nothing here follows a path out of the tree it was given. No policy, no logging.
 *
 * The parsers at the end are pure functions over NUL-terminated strings (fuzzed separately).
 * All return 0 or a negative errno and leave ret_* untouched on failure.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDP_SYSFS_ATTR_MAX 4096 /* bytes of one attribute file (a sysfs page) */
#define RDP_SYSFS_PATH_MAX 4096 /* bytes of a path below the root */
#define RDP_SYSFS_MAX_SYMLINKS 40 /* as the kernel's MAXSYMLINKS */

/*
 * Opens path as a root: O_PATH|O_DIRECTORY|O_CLOEXEC. -ENOENT, -ENOTDIR, -EACCES...
 */
int rdp_sysfs_open_root(const char *path, int *ret_fd);

/* Opens the sysfs root and the dev root; both or neither (the errno of the one that failed). */
int rdp_sysfs_open_roots(const char *sysfs_root, const char *dev_root, int *ret_sys, int *ret_dev);

/*
 * Opens path below root with flags (O_CLOEXEC is added), resolving inside the root.
 * Returns the new fd, or a negative errno.
 */
int rdp_sysfs_open(int root, const char *path, int flags);

/*
 * Whether rdp_sysfs_open() may use openat2(RESOLVE_IN_ROOT) (the default) or must walk the
 * path itself, as it does where openat2 is missing. For tests of both paths.
 */
void rdp_sysfs_use_openat2(bool enable);

/* True when path resolves (inside root) to an existing object. */
bool rdp_sysfs_exists(int root, const char *path);

/*
 * Reads a small attribute into buf (size bytes including the NUL) and strips one trailing
 * "\n". Returns the length of the value, or:
 *   -ENOENT / -EACCES / -EISDIR / ...  from open,
 *   -EINVAL ...                        from read (sysfs: an empty GID slot),
 *   -EFBIG   the file is larger than RDP_SYSFS_ATTR_MAX,
 *   -ERANGE  the value does not fit in buf (never truncated),
 *   -EBADMSG the value contains a NUL byte.
 * buf is left untouched on failure.
 */
int rdp_sysfs_read_attr(int root, const char *path, char *buf, size_t size);

/*
 * rdp_sysfs_read_attr() of the entry name (one component, no "/") of the directory dirfd, as
 * opened by rdp_sysfs_open(root, dir, O_RDONLY | O_DIRECTORY): for reading many entries of one
 * directory (a GID table) without resolving the whole path each time. A symlink is not
 * followed (-ELOOP), so nothing outside the directory is read. -EINVAL for a bad name.
 */
int rdp_sysfs_read_attr_at(int dirfd, const char *name, char *buf, size_t size);
/*
 * readlinkat(dirfd, name) into buf, NUL-terminated: the target's length, -ENAMETOOLONG when it
 * does not fit, or the negative errno.
 */
int rdp_sysfs_readlinkat(int dirfd, const char *name, char *buf, size_t size);

/*
 * Reads the target of the symlink at path (the last component is not followed; the
 * directories leading to it are resolved inside root). Returns the length, -EINVAL when it
 * is not a symlink, -ERANGE when buf is too small.
 */
int rdp_sysfs_read_link(int root, const char *path, char *buf, size_t size);

/*
 * Resolves path to its canonical location below root, following every symlink component by
 * component with chroot semantics. The result is relative to root without a leading "/"
 * ("" is the root itself). Returns its length, -ENOENT when a component (or a link target)
 * does not exist, -ELOOP, -ENAMETOOLONG, -ENOTDIR...
 */
int rdp_sysfs_resolve(int root, const char *path, char *buf, size_t size);

/*
 * Lists a directory below root: every entry but "." and "..", sorted in natural order (strverscmp: mlx5_2 before mlx5_10). Fails with
 * -E2BIG when it holds more than max entries. Free with rdp_sysfs_names_free().
 */
int rdp_sysfs_list_dir(int root, const char *path, size_t max, char ***ret_names, size_t *ret_n);
void rdp_sysfs_names_free(char **names, size_t n);

/*
 * Called by rdp_sysfs_scan_dir() for one entry: dirfd is the directory (open for the scan only,
 * e.g. for readlinkat()), name the entry, ino and type its d_ino and d_type (DT_*, DT_UNKNOWN
 * where the filesystem does not say). A non-zero return stops the scan.
 */
typedef int (*rdp_sysfs_entry_cb)(int dirfd, const char *name, uint64_t ino, unsigned char type,
				  void *userdata);

/*
 * Calls cb for every entry of the directory at path below root but "." and "..", in the order
 * the filesystem returns them (unsorted). Allocates nothing: for rescans that must stay cheap.
 * Returns 0, a negative errno from open or getdents (-ENOENT, -ENOTDIR...), or the first
 * non-zero value cb returned.
 */
int rdp_sysfs_scan_dir(int root, const char *path, rdp_sysfs_entry_cb cb, void *userdata);

/* The last component of a relative or absolute path ("a/b" -> "b"; "" -> ""). */
const char *rdp_path_basename(const char *path);

/* ---- pure parsers ---- */

/* Decimal integer in [min, max]: optional '-', digits, nothing else (no spaces, no '+'). */
int rdp_parse_long(const char *s, long min, long max, long *ret);
/*
 * A counter file's value (a file of ports/N/counters or hw_counters): a decimal u64 of 1 to
 * 20 digits and nothing else (no sign, no space: the newline is stripped before). -EINVAL,
 * -ERANGE past 2^64-1; *ret untouched on failure.
 */
int rdp_parse_counter(const char *s, uint64_t *ret);

/*
 * "%d: %s" as in ports/N/state ("4: ACTIVE") and phys_state ("5: LinkUp", "7: Phy Test").
 * The number is 0..255; the name is non-empty printable ASCII and fits name_size.
 */
int rdp_parse_state(const char *s, int *ret_num, char *ret_name, size_t name_size);

/* A 16-bit PCI ID: "0x15b3" or "15b3" (exactly 4 hex digits) -> "15b3" (lower case). */
int rdp_parse_hex_id(const char *s, char ret[static 5]);

/* A PCI class "0x020700" (6 hex digits, 0x optional) -> "020700". */
int rdp_parse_pci_class(const char *s, char ret[static 7]);

/* A GUID "58a2:e103:001b:2576": 4 groups of 4 hex digits -> lower case copy. */
int rdp_parse_guid(const char *s, char ret[static 20]);

/* A GID "fe80:0000:0000:0000:c470:bd03:00cf:4964": 8 groups of 4 hex digits, uncompressed. */
int rdp_parse_gid(const char *s, uint8_t ret[static 16]);

/* True when gid is an IPv4-mapped address (::ffff:a.b.c.d), as RoCE v2 IPv4 GIDs are. */
bool rdp_gid_is_ipv4_mapped(const uint8_t gid[static 16]);

/* "major:minor" as in a dev file ("231:192"): major 0..4095, minor 0..2^20-1. */
int rdp_parse_devnum(const char *s, unsigned int *ret_major, unsigned int *ret_minor);

/* numa_node: -1 (no affinity) .. 65535. */
int rdp_parse_numa_node(const char *s, int *ret);

/* A port rate, "%d%s Gb/sec (%dX%s)": "400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X)". */
struct rdp_rate {
	unsigned long mbps; /* 400000; 2500 */
	unsigned int width; /* 4 */
	char speed[8]; /* "NDR"; "" when the kernel gives none (SDR) */
};
int rdp_parse_rate(const char *s, struct rdp_rate *ret);

/* "InfiniBand" / "Ethernet" (case-insensitive) -> 1 / 2 as enum rdp_link_layer; else -EINVAL. */
int rdp_parse_link_layer(const char *s, int *ret);

/* A kernel bool module parameter: "Y"/"1" -> true, "N"/"0" -> false. */
int rdp_parse_bool(const char *s, bool *ret);

/* A netdev name as the kernel's dev_valid_name(): 1..15 bytes, not "." or "..", no '/', ':',
 * space or control byte. */
bool rdp_is_ifname(const char *s);

/* A PCI address "0000:18:00.0" (domain 4-8 hex digits, bus 2, device 2 <= 1f, function 0-7). */
bool rdp_is_pci_address(const char *s);

/*
 * A char device name as the kernel makes them under /dev/infiniband: prefix followed by a
 * decimal number ("uverbs12" for "uverbs"), bounded length. Stores the number in *ret_num.
 */
bool rdp_is_numbered_name(const char *s, const char *prefix, unsigned int *ret_num);
