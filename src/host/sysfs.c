/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "sysfs.h"
#include "number.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc.h"
#include "macro.h"

int rdp_sysfs_open_root(const char *path, int *ret_fd)
{
	int fd;

	if (!path || !*path)
		return -EINVAL;
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	return 0;
}

int rdp_sysfs_open_roots(const char *sysfs_root, const char *dev_root, int *ret_sys, int *ret_dev)
{
	_cleanup_close_ int sys = -1;
	int dev = -1, r;

	r = rdp_sysfs_open_root(sysfs_root, &sys);
	if (r < 0)
		return r;
	r = rdp_sysfs_open_root(dev_root, &dev);
	if (r < 0)
		return r;
	*ret_sys = TAKE_FD(sys);
	*ret_dev = dev;
	return 0;
}

/* Appends "/" (unless at the root) and the n bytes of comp to the canonical path buf. */
static int path_push(char *buf, size_t *len, size_t size, const char *comp, size_t n)
{
	size_t need = *len + (*len ? 1 : 0) + n + 1;

	if (need > size)
		return -ENAMETOOLONG;
	if (*len)
		buf[(*len)++] = '/';
	memcpy(buf + *len, comp, n);
	*len += n;
	buf[*len] = '\0';
	return 0;
}

static void path_pop(char *buf, size_t *len)
{
	char *slash = memrchr(buf, '/', *len);

	*len = slash ? (size_t)(slash - buf) : 0;
	buf[*len] = '\0';
}

/*
 * Userspace resolution with chroot semantics. cur holds the canonical path resolved so far
 * (never containing a symlink), todo the part still to walk; a symlink found on the way is
 * replaced by its target in todo. follow_last=false stops before following the final
 * component (for readlink).
 */
static int resolve(int root, const char *path, bool follow_last, char *ret, size_t size)
{
	char cur[RDP_SYSFS_PATH_MAX], todo[RDP_SYSFS_PATH_MAX], target[RDP_SYSFS_PATH_MAX];
	size_t len = 0, todo_len, pos = 0;
	unsigned int links = 0;

	todo_len = strlen(path);
	if (todo_len >= sizeof(todo))
		return -ENAMETOOLONG;
	memcpy(todo, path, todo_len + 1);
	cur[0] = '\0';

	while (pos < todo_len) {
		const char *comp = todo + pos;
		size_t n = strcspn(comp, "/");
		bool last;
		ssize_t t;
		int r;

		pos += n;
		while (pos < todo_len && todo[pos] == '/')
			pos++;
		last = pos >= todo_len;
		if (n == 0 || (n == 1 && comp[0] == '.'))
			continue;
		if (n == 2 && comp[0] == '.' && comp[1] == '.') {
			path_pop(cur, &len);
			continue;
		}
		r = path_push(cur, &len, sizeof(cur), comp, n);
		if (r < 0)
			return r;
		t = readlinkat(root, cur, target, sizeof(target));
		if (t < 0) {
			if (errno == EINVAL)
				continue; /* exists and is not a symlink */
			return -errno;
		}
		if (last && !follow_last)
			break;
		if (t == 0)
			return -ENOENT;
		if ((size_t)t >= sizeof(target))
			return -ENAMETOOLONG;
		if (++links > RDP_SYSFS_MAX_SYMLINKS)
			return -ELOOP;
		/* The rest of the walk becomes: target + "/" + what was left. */
		{
			size_t rest = todo_len - pos;

			if ((size_t)t + 1 + rest + 1 > sizeof(todo))
				return -ENAMETOOLONG;
			memmove(todo + t + 1, todo + pos, rest + 1);
			memcpy(todo, target, t);
			todo[t] = '/';
			todo_len = t + 1 + rest;
			pos = 0;
		}
		if (target[0] == '/') {
			len = 0;
			cur[0] = '\0';
		} else {
			path_pop(cur, &len);
		}
	}
	if (len + 1 > size)
		return -ENAMETOOLONG;
	memcpy(ret, cur, len + 1);
	return (int)len;
}

/* openat2() with RESOLVE_IN_ROOT does what resolve() does, in one system call. */
static bool have_openat2 = true;

int rdp_sysfs_readlinkat(int dirfd, const char *name, char *buf, size_t size)
{
	ssize_t n = readlinkat(dirfd, name, buf, size);

	if (n < 0)
		return -errno;
	if ((size_t)n >= size)
		return -ENAMETOOLONG;
	buf[n] = '\0';
	return (int)n;
}

static int fd_path(int fd, char *buf, size_t size)
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	return rdp_sysfs_readlinkat(AT_FDCWD, proc, buf, size);
}

/*
 * The kernel resolves (inside the root) and /proc names the result: a few system calls
 * instead of one readlinkat() per component. Returns -EAGAIN when this way is not available
 * (no openat2, no /proc, a root reached through another mount...): walk instead.
 */
static int resolve_fast(int root, const char *path, char *ret, size_t size)
{
	char real[RDP_SYSFS_PATH_MAX], rootpath[RDP_SYSFS_PATH_MAX];
	_cleanup_close_ int fd = -1;
	const char *rel;
	size_t rl;
	int r;

	fd = rdp_sysfs_open(root, path, O_PATH);
	if (fd < 0)
		return fd == -ENOSYS ? -EAGAIN : fd;
	if (!have_openat2)
		return -EAGAIN; /* opened by the walk already: let the walk say where */
	if (fd_path(fd, real, sizeof(real)) < 0 || fd_path(root, rootpath, sizeof(rootpath)) < 0)
		return -EAGAIN;
	rl = strlen(rootpath);
	if (strcmp(rootpath, "/") == 0)
		rel = real + 1;
	else if (strncmp(real, rootpath, rl) == 0 && (real[rl] == '/' || real[rl] == '\0'))
		rel = real[rl] ? real + rl + 1 : real + rl;
	else
		return -EAGAIN;
	r = (int)strlen(rel);
	if ((size_t)r + 1 > size)
		return -ENAMETOOLONG;
	memcpy(ret, rel, (size_t)r + 1);
	return r;
}

int rdp_sysfs_resolve(int root, const char *path, char *buf, size_t size)
{
	int r;

	if (have_openat2) {
		r = resolve_fast(root, path, buf, size);
		if (r != -EAGAIN)
			return r;
	}
	return resolve(root, path, true, buf, size);
}

void rdp_sysfs_use_openat2(bool enable)
{
	have_openat2 = enable;
}

int rdp_sysfs_open(int root, const char *path, int flags)
{
	char canon[RDP_SYSFS_PATH_MAX];
	int fd, r;

	flags |= O_CLOEXEC;
	if (have_openat2) {
		struct open_how how = {
			.flags = (uint64_t)flags,
			.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
		};
		int tries = 0;

		do
			fd = (int)syscall(SYS_openat2, root, *path ? path : ".", &how, sizeof(how));
		while (fd < 0 && (errno == EAGAIN || errno == EINTR) && ++tries < 8);
		if (fd >= 0)
			return fd;
		/* Not there, or filtered by a seccomp profile: fall back to the walk below. */
		if (errno != ENOSYS && errno != EPERM && errno != E2BIG)
			return -errno;
		have_openat2 = false;
	}
	r = resolve(root, path, true, canon, sizeof(canon));
	if (r < 0)
		return r;
	fd = openat(root, *canon ? canon : ".", flags | O_NOFOLLOW);
	return fd < 0 ? -errno : fd;
}

bool rdp_sysfs_exists(int root, const char *path)
{
	int fd = rdp_sysfs_open(root, path, O_PATH);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static int read_fd(int fd, char *buf, size_t size);

int rdp_sysfs_read_attr(int root, const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = -1;

	fd = rdp_sysfs_open(root, path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return fd;
	return read_fd(fd, buf, size);
}

int rdp_sysfs_read_attr_at(int dirfd, const char *name, char *buf, size_t size)
{
	_cleanup_close_ int fd = -1;

	if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return -EINVAL;
	fd = openat(dirfd, name, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	return read_fd(fd, buf, size);
}

/* Reads one attribute from fd: see rdp_sysfs_read_attr(). */
static int read_fd(int fd, char *buf, size_t size)
{
	char tmp[RDP_SYSFS_ATTR_MAX + 1];
	size_t len = 0;

	for (;;) {
		ssize_t n = read(fd, tmp + len, sizeof(tmp) - len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len >= sizeof(tmp))
			return -EFBIG;
		/* sysfs hands out an attribute in one read; a short read is its end. */
		if ((size_t)n < sizeof(tmp) - (len - (size_t)n))
			break;
	}
	if (len > 0 && tmp[len - 1] == '\n')
		len--;
	if (memchr(tmp, '\0', len))
		return -EBADMSG;
	if (len + 1 > size)
		return -ERANGE;
	memcpy(buf, tmp, len);
	buf[len] = '\0';
	return (int)len;
}

int rdp_sysfs_read_link(int root, const char *path, char *buf, size_t size)
{
	char canon[RDP_SYSFS_PATH_MAX], target[RDP_SYSFS_PATH_MAX];
	ssize_t n;
	int r;

	const char *base = strrchr(path, '/');

	if (have_openat2 && base && base[1] && strcmp(base + 1, ".") != 0 &&
	    strcmp(base + 1, "..") != 0 && (size_t)(base - path) < sizeof(canon)) {
		/* Open the directory inside the root, then read the link there. */
		_cleanup_close_ int dfd = -1;

		memcpy(canon, path, (size_t)(base - path));
		canon[base - path] = '\0';
		dfd = rdp_sysfs_open(root, canon, O_PATH | O_DIRECTORY);
		if (dfd < 0)
			return dfd;
		n = readlinkat(dfd, base + 1, target, sizeof(target));
	} else {
		r = resolve(root, path, false, canon, sizeof(canon));
		if (r < 0)
			return r;
		if (!*canon)
			return -EINVAL;
		n = readlinkat(root, canon, target, sizeof(target));
	}
	if (n < 0)
		return -errno;
	if ((size_t)n >= sizeof(target))
		return -ENAMETOOLONG;
	if ((size_t)n + 1 > size)
		return -ERANGE;
	memcpy(buf, target, n);
	buf[n] = '\0';
	return (int)n;
}

static int cmp_names(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

void rdp_sysfs_names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rdp_free(names[i]);
	rdp_free(names);
}

int rdp_sysfs_list_dir(int root, const char *path, size_t max, char ***ret_names, size_t *ret_n)
{
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *dir;
	int fd, r = 0;

	fd = rdp_sysfs_open(root, path, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	dir = fdopendir(fd);
	if (!dir) {
		r = -errno;
		close(fd);
		return r;
	}
	for (;;) {
		errno = 0;
		de = readdir(dir);
		if (!de) {
			if (errno)
				r = -errno;
			break;
		}
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n >= max) {
			r = -E2BIG;
			break;
		}
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			char **nv = rdp_reallocarray(names, ncap, sizeof(*names));

			if (!nv) {
				r = -ENOMEM;
				break;
			}
			names = nv;
			cap = ncap;
		}
		names[n] = rdp_strdup(de->d_name);
		if (!names[n]) {
			r = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(dir);
	if (r < 0) {
		rdp_sysfs_names_free(names, n);
		return r;
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), cmp_names);
	*ret_names = names;
	*ret_n = n;
	return 0;
}

int rdp_sysfs_scan_dir(int root, const char *path, rdp_sysfs_entry_cb cb, void *userdata)
{
	/* 8 KiB: a few hundred entries per getdents64() call, and small enough for any stack. */
	char buf[8192] __attribute__((aligned(8)));
	_cleanup_close_ int fd = -1;

	fd = rdp_sysfs_open(root, path, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return fd;
	for (;;) {
		ssize_t n = getdents64(fd, buf, sizeof(buf));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return 0;
		for (ssize_t off = 0; off < n;) {
			const struct dirent64 *de = (const struct dirent64 *)(buf + off);
			int r;

			off += de->d_reclen;
			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
				continue;
			r = cb(fd, de->d_name, (uint64_t)de->d_ino, de->d_type, userdata);
			if (r)
				return r;
		}
	}
}

const char *rdp_path_basename(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* ---- pure parsers ---- */

int rdp_parse_long(const char *s, long min, long max, long *ret)
{
	const char *p = s;
	char *end;
	long v;

	if (!s)
		return -EINVAL;
	if (*p == '-')
		p++;
	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno || *end)
		return -EINVAL;
	if (v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

int rdp_parse_state(const char *s, int *ret_num, char *ret_name, size_t name_size)
{
	const char *colon, *name;
	char num[8];
	size_t n;
	long v;
	int r;

	if (!s)
		return -EINVAL;
	colon = strchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof(num) || colon[1] != ' ')
		return -EINVAL;
	memcpy(num, s, colon - s);
	num[colon - s] = '\0';
	if (num[0] == '-')
		return -EINVAL;
	r = rdp_parse_long(num, 0, 255, &v);
	if (r < 0)
		return r;
	name = colon + 2;
	n = strlen(name);
	if (n == 0 || n >= name_size)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (!isprint((unsigned char)name[i]))
			return -EINVAL;
	if (name[0] == ' ' || name[n - 1] == ' ')
		return -EINVAL;
	*ret_num = (int)v;
	memcpy(ret_name, name, n + 1);
	return 0;
}

/* Copies exactly n hex digits from s, lower-cased, into out (n + 1 bytes); s must end there. */
static int parse_hex_digits(const char *s, size_t n, char *out)
{
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	if (strlen(s) != n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (!isxdigit((unsigned char)s[i]))
			return -EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		out[i] = (char)tolower((unsigned char)s[i]);
	out[n] = '\0';
	return 0;
}

int rdp_parse_hex_id(const char *s, char ret[static 5])
{
	char tmp[5];
	int r;

	if (!s)
		return -EINVAL;
	r = parse_hex_digits(s, 4, tmp);
	if (r < 0)
		return r;
	memcpy(ret, tmp, sizeof(tmp));
	return 0;
}

int rdp_parse_pci_class(const char *s, char ret[static 7])
{
	char tmp[7];
	int r;

	if (!s)
		return -EINVAL;
	r = parse_hex_digits(s, 6, tmp);
	if (r < 0)
		return r;
	memcpy(ret, tmp, sizeof(tmp));
	return 0;
}

/* groups x 4 hex digits separated by ':' -> lower-cased copy in out and bytes in bytes. */
static int parse_hex_groups(const char *s, size_t groups, char *out, uint8_t *bytes)
{
	size_t len = groups * 5 - 1;

	if (!s || strlen(s) != len)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (i % 5 == 4) {
			if (s[i] != ':')
				return -EINVAL;
		} else if (!isxdigit((unsigned char)s[i])) {
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < len; i++) {
		out[i] = (char)tolower((unsigned char)s[i]);
		if (i % 5 != 4 && bytes) {
			unsigned int d = isdigit((unsigned char)out[i])
						 ? (unsigned int)(out[i] - '0')
						 : (unsigned int)(out[i] - 'a' + 10);
			size_t nib = (i / 5) * 4 + i % 5;

			if (nib % 2 == 0)
				bytes[nib / 2] = (uint8_t)(d << 4);
			else
				bytes[nib / 2] |= (uint8_t)d;
		}
	}
	out[len] = '\0';
	return 0;
}

int rdp_parse_guid(const char *s, char ret[static 20])
{
	char tmp[20];
	int r;

	r = parse_hex_groups(s, 4, tmp, NULL);
	if (r < 0)
		return r;
	memcpy(ret, tmp, sizeof(tmp));
	return 0;
}

int rdp_parse_gid(const char *s, uint8_t ret[static 16])
{
	char tmp[40];
	uint8_t b[16];
	int r;

	r = parse_hex_groups(s, 8, tmp, b);
	if (r < 0)
		return r;
	memcpy(ret, b, sizeof(b));
	return 0;
}

bool rdp_gid_is_ipv4_mapped(const uint8_t gid[static 16])
{
	static const uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

	return memcmp(gid, prefix, sizeof(prefix)) == 0;
}

int rdp_parse_devnum(const char *s, unsigned int *ret_major, unsigned int *ret_minor)
{
	const char *colon;
	char major[12];
	long ma, mi;
	int r;

	if (!s)
		return -EINVAL;
	colon = strchr(s, ':');
	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(major))
		return -EINVAL;
	memcpy(major, s, colon - s);
	major[colon - s] = '\0';
	if (major[0] == '-' || colon[1] == '-')
		return -EINVAL;
	r = rdp_parse_long(major, 0, (1L << 12) - 1, &ma);
	if (r < 0)
		return r;
	r = rdp_parse_long(colon + 1, 0, (1L << 20) - 1, &mi);
	if (r < 0)
		return r;
	*ret_major = (unsigned int)ma;
	*ret_minor = (unsigned int)mi;
	return 0;
}

int rdp_parse_numa_node(const char *s, int *ret)
{
	long v;
	int r;

	r = rdp_parse_long(s, -1, 65535, &v);
	if (r < 0)
		return r;
	*ret = (int)v;
	return 0;
}

/* Decimal digits at *p into *v (bounded), advancing *p; at least one digit. */
static int take_digits(const char **p, unsigned long max, unsigned long *v, size_t *ndigits)
{
	unsigned long x = 0;
	size_t n = 0;

	while (isdigit((unsigned char)**p)) {
		x = x * 10 + (unsigned long)(**p - '0');
		if (x > max)
			return -ERANGE;
		(*p)++;
		n++;
	}
	if (n == 0)
		return -EINVAL;
	*v = x;
	if (ndigits)
		*ndigits = n;
	return 0;
}

int rdp_parse_rate(const char *s, struct rdp_rate *ret)
{
	struct rdp_rate rate = {};
	unsigned long gb, frac = 0, width;
	const char *p = s;
	size_t nfrac = 0, n;
	int r;

	if (!s)
		return -EINVAL;
	r = take_digits(&p, 1000000, &gb, NULL);
	if (r < 0)
		return r;
	if (*p == '.') {
		p++;
		r = take_digits(&p, 999, &frac, &nfrac);
		if (r < 0 || nfrac > 3)
			return -EINVAL;
		while (nfrac++ < 3)
			frac *= 10;
	}
	if (strncmp(p, " Gb/sec (", 9) != 0)
		return -EINVAL;
	p += 9;
	r = take_digits(&p, 64, &width, NULL);
	if (r < 0 || width == 0)
		return -EINVAL;
	if (*p++ != 'X')
		return -EINVAL;
	if (*p == ' ') {
		p++;
		n = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
		if (n == 0 || n >= sizeof(rate.speed))
			return -EINVAL;
		memcpy(rate.speed, p, n);
		rate.speed[n] = '\0';
		p += n;
	}
	if (strcmp(p, ")") != 0)
		return -EINVAL;
	rate.mbps = gb * 1000 + frac;
	rate.width = (unsigned int)width;
	*ret = rate;
	return 0;
}

int rdp_parse_link_layer(const char *s, int *ret)
{
	if (!s)
		return -EINVAL;
	if (strcasecmp(s, "InfiniBand") == 0)
		*ret = 1;
	else if (strcasecmp(s, "Ethernet") == 0)
		*ret = 2;
	else
		return -EINVAL;
	return 0;
}

int rdp_parse_bool(const char *s, bool *ret)
{
	if (!s)
		return -EINVAL;
	if (strcmp(s, "Y") == 0 || strcmp(s, "1") == 0 || strcmp(s, "y") == 0)
		*ret = true;
	else if (strcmp(s, "N") == 0 || strcmp(s, "0") == 0 || strcmp(s, "n") == 0)
		*ret = false;
	else
		return -EINVAL;
	return 0;
}

static bool hex_run(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

bool rdp_is_ifname(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= 16 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '/' || s[i] == ':' || s[i] <= ' ' || s[i] == 0x7f)
			return false;
	return true;
}

bool rdp_is_pci_address(const char *s)
{
	size_t dom, len;

	if (!s)
		return false;
	len = strlen(s);
	dom = strcspn(s, ":");
	if (dom < 4 || dom > 8 || !hex_run(s, dom))
		return false;
	/* ":BB:DD.F" */
	if (len != dom + 8)
		return false;
	s += dom;
	if (s[0] != ':' || !hex_run(s + 1, 2) || s[3] != ':' || !hex_run(s + 4, 2) || s[6] != '.')
		return false;
	/* Device numbers are 5 bits: 00..1f. */
	if (s[4] > '1')
		return false;
	return s[7] >= '0' && s[7] <= '7';
}

bool rdp_is_numbered_name(const char *s, const char *prefix, unsigned int *ret_num)
{
	size_t pl = strlen(prefix);
	unsigned long v;
	const char *p;

	if (strncmp(s, prefix, pl) != 0)
		return false;
	p = s + pl;
	/* No leading zeros but "0" itself, at most 9 digits: the kernel's "%s%d". */
	if (!isdigit((unsigned char)*p) || (p[0] == '0' && p[1]) || strlen(p) > 9)
		return false;
	if (take_digits(&p, 999999999, &v, NULL) < 0 || *p)
		return false;
	if (ret_num)
		*ret_num = (unsigned int)v;
	return true;
}

int rdp_parse_counter(const char *s, uint64_t *ret)
{
	uint64_t v;
	int n = rdp_decimal_prefix(s, &v);

	if (n < 0)
		return n;
	if (s[n])
		return -EINVAL;
	*ret = v;
	return 0;
}
