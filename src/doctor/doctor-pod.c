/* SPDX-License-Identifier: MIT */
/*
 * The pod group of `rdma-dp doctor` (see doctor-pod.h for what it reads and how "visible"
 * is decided; each check's texts are next to it below).
 */
#define _GNU_SOURCE
#include "doctor-pod.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "alloc.h"
#include "doctor.h"
#include "macro.h"
#include "sysfs.h"

/* ------------------------------------------------------------------------------------------ */
/* Pure parsers */

void rdp_nccl_list_parse(const char *s, size_t max, struct rdp_nccl_list *ret)
{
	memset(ret, 0, sizeof(*ret));
	if (max > RDP_NCCL_IB_MAX_ENTRIES)
		max = RDP_NCCL_IB_MAX_ENTRIES;
	if (!s)
		return;
	if (*s == '^') {
		ret->exclude = true;
		s++;
	}
	if (*s == '=') {
		ret->exact = true;
		s++;
	}
	while (*s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		size_t nlen = 0;
		const char *colon = memchr(s, ':', len);

		nlen = colon ? (size_t)(colon - s) : len;
		if (nlen > 0) { /* NCCL skips an entry without a name (",," or ":1") */
			if (ret->n >= max) {
				ret->n_dropped++;
			} else {
				struct rdp_nccl_entry *e = &ret->v[ret->n++];
				size_t keep = nlen < RDP_NCCL_NAME_MAX ? nlen : RDP_NCCL_NAME_MAX - 1;

				memcpy(e->name, s, keep);
				e->name[keep] = '\0';
				e->bad_name = nlen >= RDP_NCCL_NAME_MAX;
				e->port = -1;
				if (colon) {
					const char *p = colon + 1, *pend = s + len;
					long v = 0;
					size_t digits = 0;

					while (p < pend && *p >= '0' && *p <= '9' && digits < 9) {
						v = v * 10 + (*p - '0');
						p++;
						digits++;
					}
					if (p == pend || *p == ':') {
						/* "" (any port) or a number */
						if (digits > 0)
							e->port = (int)v;
						e->bad_port = digits > 0 && v < 1;
					} else {
						e->port = digits > 0 ? (int)v : 0;
						e->bad_port = true;
					}
				}
			}
		}
		if (!end)
			break;
		s = end + 1;
	}
}

bool rdp_nccl_entry_matches(const struct rdp_nccl_entry *e, bool exact, const char *name,
			    int port)
{
	bool name_ok = exact ? strcmp(name, e->name) == 0
			     : strncmp(name, e->name, strlen(e->name)) == 0;

	return name_ok && (e->port == -1 || port == -1 || e->port == port);
}

bool rdp_nccl_list_selects(const struct rdp_nccl_list *l, const char *name, int port)
{
	bool any = l->n == 0; /* matchIfList: an empty list matches everything... */

	/* ...so "^" alone excludes everything, as in NCCL */
	for (size_t i = 0; i < l->n && !any; i++)
		any = rdp_nccl_entry_matches(&l->v[i], l->exact, name, port);
	return any != l->exclude;
}

/* The line of buf[0..len) starting at *pos into line (cut to size, NUL-terminated); moves
 * *pos past it. False at the end. */
static bool next_line(const char *buf, size_t len, size_t *pos, char *line, size_t size)
{
	size_t start = *pos, n = 0;

	if (start >= len)
		return false;
	while (*pos < len && buf[*pos] != '\n')
		(*pos)++;
	n = *pos - start;
	if (n >= size)
		n = size - 1;
	memcpy(line, buf + start, n);
	line[n] = '\0';
	/* a NUL inside the line ends it: the parsers below see a shorter line */
	if (*pos < len)
		(*pos)++;
	return true;
}

static int parse_limit(const char *tok, uint64_t *ret)
{
	char *end;
	unsigned long long v;

	if (strcmp(tok, "unlimited") == 0) {
		*ret = RDP_RLIM_UNLIMITED;
		return 0;
	}
	if (*tok < '0' || *tok > '9')
		return -EBADMSG;
	errno = 0;
	v = strtoull(tok, &end, 10);
	if (errno || *end)
		return -EBADMSG;
	*ret = v;
	return 0;
}

int rdp_proc_limits_memlock(const char *buf, size_t len, uint64_t *ret_soft, uint64_t *ret_hard)
{
	static const char key[] = "Max locked memory";
	char line[256];
	size_t pos = 0;

	while (next_line(buf, len, &pos, line, sizeof(line))) {
		char soft[32], hard[32];
		uint64_t s, h;

		if (strncmp(line, key, sizeof(key) - 1) != 0 || line[sizeof(key) - 1] != ' ')
			continue;
		if (sscanf(line + sizeof(key) - 1, " %31s %31s", soft, hard) != 2)
			return -EBADMSG;
		if (parse_limit(soft, &s) < 0 || parse_limit(hard, &h) < 0)
			return -EBADMSG;
		*ret_soft = s;
		*ret_hard = h;
		return 0;
	}
	return -ENOENT;
}

int rdp_proc_status_capeff(const char *buf, size_t len, uint64_t *ret)
{
	char line[256];
	size_t pos = 0;

	while (next_line(buf, len, &pos, line, sizeof(line))) {
		const char *p = line + 7;
		char *end;
		unsigned long long v;

		if (strncmp(line, "CapEff:", 7) != 0)
			continue;
		while (*p == '\t' || *p == ' ')
			p++;
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
		      (*p >= 'A' && *p <= 'F')))
			return -EBADMSG;
		errno = 0;
		v = strtoull(p, &end, 16);
		if (errno || *end)
			return -EBADMSG;
		*ret = v;
		return 0;
	}
	return -ENOENT;
}

/* Copies a mountinfo field, undoing the kernel's octal escapes (\040 space, \011, \012,
 * \134). */
static void unescape(const char *s, size_t n, char *out, size_t size)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 1 < size; i++) {
		if (s[i] == '\\' && i + 3 < n && s[i + 1] >= '0' && s[i + 1] <= '3' &&
		    s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
			out[o++] = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 +
					  (s[i + 3] - '0'));
			i += 3;
		} else {
			out[o++] = s[i];
		}
	}
	out[o] = '\0';
}

/* Whether mount point m holds path (m is path or a parent directory of it). */
static bool holds(const char *m, const char *path)
{
	size_t n = strlen(m);

	if (strcmp(m, "/") == 0)
		return path[0] == '/';
	return strncmp(path, m, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The size= of tmpfs super options ("rw,size=65536k,mode=1777"), in bytes; 0 when none. */
static uint64_t tmpfs_size(const char *opts)
{
	const char *p = opts;

	while (p && *p) {
		if (strncmp(p, "size=", 5) == 0) {
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(p + 5, &end, 10);
			if (errno || end == p + 5)
				return 0;
			switch (*end) {
			case 'k': case 'K': return v > UINT64_MAX >> 10 ? 0 : v << 10;
			case 'm': case 'M': return v > UINT64_MAX >> 20 ? 0 : v << 20;
			case 'g': case 'G': return v > UINT64_MAX >> 30 ? 0 : v << 30;
			default: return v;
			}
		}
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return 0;
}

int rdp_mountinfo_find(const char *buf, size_t len, const char *path, struct rdp_mount *ret)
{
	char line[4096];
	size_t pos = 0, best = 0;
	bool found = false;

	memset(ret, 0, sizeof(*ret));
	while (next_line(buf, len, &pos, line, sizeof(line))) {
		/* id parent maj:min root mount-point options [optional...] - fstype source super */
		char *f[6] = {0}, *save = NULL, *tok, *sep;
		char mp[sizeof(ret->mount_point)];
		size_t nf = 0, n;

		sep = strstr(line, " - ");
		if (!sep)
			continue;
		*sep = '\0';
		for (tok = strtok_r(line, " ", &save); tok && nf < 6; tok = strtok_r(NULL, " ", &save))
			f[nf++] = tok;
		if (nf < 6)
			continue;
		unescape(f[4], strlen(f[4]), mp, sizeof(mp));
		if (!holds(mp, path))
			continue;
		n = strlen(mp);
		if (found && n < best)
			continue;
		{
			char *rest = sep + 3, *fs, *src, *sup, *s2 = NULL;

			fs = strtok_r(rest, " ", &s2);
			src = fs ? strtok_r(NULL, " ", &s2) : NULL;
			sup = src ? strtok_r(NULL, " ", &s2) : NULL;
			if (!fs)
				continue;
			found = true;
			best = n;
			snprintf(ret->mount_point, sizeof(ret->mount_point), "%s", mp);
			snprintf(ret->fstype, sizeof(ret->fstype), "%s", fs);
			ret->size = strcmp(fs, "tmpfs") == 0 && sup ? tmpfs_size(sup) : 0;
		}
	}
	return found ? 0 : -ENOENT;
}

int rdp_environ_get(const char *buf, size_t len, const char *name, char *val, size_t size)
{
	size_t nl = strlen(name), pos = 0;

	while (pos < len) {
		const char *e = buf + pos;
		const char *z = memchr(e, '\0', len - pos);
		size_t elen = z ? (size_t)(z - e) : len - pos;

		if (elen > nl && memcmp(e, name, nl) == 0 && e[nl] == '=') {
			size_t vl = elen - nl - 1, keep = vl < size ? vl : size - 1;

			if (size) {
				memcpy(val, e + nl + 1, keep);
				val[keep] = '\0';
			}
			return vl > INT32_MAX ? INT32_MAX : (int)vl;
		}
		pos += elen + 1;
	}
	return -ENOENT;
}

size_t rdp_environ_each_prefix(const char *buf, size_t len, const char *prefix,
			       void (*cb)(const char *name, size_t name_len, const char *value,
					  size_t value_len, void *userdata),
			       void *userdata)
{
	size_t pl = strlen(prefix), pos = 0, n = 0;

	while (pos < len) {
		const char *e = buf + pos;
		const char *z = memchr(e, '\0', len - pos);
		size_t elen = z ? (size_t)(z - e) : len - pos;
		const char *eq = memchr(e, '=', elen);

		if (eq && elen >= pl && memcmp(e, prefix, pl) == 0) {
			n++;
			if (cb)
				cb(e, (size_t)(eq - e), eq + 1, elen - (size_t)(eq - e) - 1, userdata);
		}
		pos += elen + 1;
	}
	return n;
}

size_t rdp_proc_net_dev_names(const char *buf, size_t len, char (*names)[RDP_NCCL_NAME_MAX],
			      size_t max)
{
	char line[512];
	size_t pos = 0, n = 0, lineno = 0;

	while (next_line(buf, len, &pos, line, sizeof(line))) {
		char *p = line, *colon;
		size_t l;

		if (lineno++ < 2)
			continue; /* "Inter-|   Receive ..." and " face |bytes ..." */
		while (*p == ' ')
			p++;
		colon = strchr(p, ':');
		if (!colon || colon == p)
			continue;
		l = (size_t)(colon - p);
		if (n < max) {
			size_t keep = l < RDP_NCCL_NAME_MAX ? l : RDP_NCCL_NAME_MAX - 1;

			memcpy(names[n], p, keep);
			names[n][keep] = '\0';
		}
		n++;
	}
	return n;
}

/* ------------------------------------------------------------------------------------------ */
/* What the checks read */

#define PROC_FILE_MAX (1u << 20) /* environ is at most ~ARG_MAX; limits/status are small */
#define POD_MAX_IFACES 1024
#define POD_MAX_GIVEN 1024

struct pod_port {
	unsigned int num;
	int state; /* RDP_PORT_*, -1 unknown */
	int link; /* RDP_LINK_* */
};

struct pod_dev {
	char name[RDP_IBDEV_NAME_MAX];
	char uverbs[32]; /* "uverbs3"; "" when sysfs names none */
	bool node; /* dev/infiniband/<uverbs> exists: libibverbs lists it */
	struct pod_port *ports;
	size_t n_ports;
};

struct pod {
	const struct rdp_doctor_ctx *c;
	char pid[24]; /* "self" or the number */
	char where[64]; /* "/proc/self" or "/proc/123", for messages */
	int root_fd; /* /proc/<pid>/root; -1 for self */
	int sys_fd, dev_fd; /* the container's /sys and /dev; -1 when not opened */
	bool own_fds;
	char *env;
	size_t env_len;
	int env_err;
	struct pod_dev *devs;
	size_t n_devs;
	int devs_err; /* listing /sys/class/infiniband: 0, -ENOENT... */
	char **given; /* devices named by RDMA_DEVICE_* */
	size_t n_given;
	size_t n_given_vars;
};

static void pod_done(struct pod *p)
{
	for (size_t i = 0; i < p->n_devs; i++)
		rdp_free(p->devs[i].ports);
	rdp_free(p->devs);
	for (size_t i = 0; i < p->n_given; i++)
		rdp_free(p->given[i]);
	rdp_free(p->given);
	rdp_free(p->env);
	if (p->own_fds) {
		if (p->sys_fd >= 0)
			close(p->sys_fd);
		if (p->dev_fd >= 0)
			close(p->dev_fd);
	}
	if (p->root_fd >= 0)
		close(p->root_fd);
}

/* Reads /proc/<pid>/<name> (at most PROC_FILE_MAX bytes, NUL-terminated). 0 or -errno. */
static int read_proc(const struct pod *p, const char *name, char **ret, size_t *ret_len)
{
	char path[96];
	_cleanup_free_ char *buf = NULL;
	size_t len = 0, cap = 0;
	int fd;

	if (p->c->proc_fd < 0)
		return -EBADF;
	snprintf(path, sizeof(path), "%s/%s", p->pid, name);
	fd = openat(p->c->proc_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n;

		if (len + 1 >= cap) {
			size_t ncap = cap ? cap * 2 : 4096;
			char *nb;

			if (ncap > PROC_FILE_MAX + 1)
				ncap = PROC_FILE_MAX + 1;
			if (len + 1 >= ncap)
				break; /* at the bound: the rest is not read */
			nb = rdp_realloc(buf, ncap);
			if (!nb) {
				close(fd);
				return -ENOMEM;
			}
			buf = nb;
			cap = ncap;
		}
		n = read(fd, buf + len, cap - 1 - len);
		if (n < 0) {
			int e = errno;

			if (e == EINTR)
				continue;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (!buf) {
		buf = rdp_malloc(1);
		if (!buf)
			return -ENOMEM;
	}
	buf[len] = '\0';
	*ret = TAKE_PTR(buf);
	*ret_len = len;
	return 0;
}

static void given_cb(const char *name, size_t name_len, const char *value, size_t value_len,
		     void *userdata)
{
	struct pod *p = userdata;
	size_t i = 0;

	(void)name;
	(void)name_len;
	/* "mlx5_0:1,mlx5_3:1": device names before ':' */
	while (i < value_len) {
		size_t j = i, k;
		bool dup = false;

		while (j < value_len && value[j] != ',')
			j++;
		k = i;
		while (k < j && value[k] != ':')
			k++;
		if (k > i && k - i < RDP_IBDEV_NAME_MAX && p->n_given < POD_MAX_GIVEN) {
			for (size_t x = 0; x < p->n_given && !dup; x++)
				dup = strlen(p->given[x]) == k - i &&
				      memcmp(p->given[x], value + i, k - i) == 0;
			if (!dup) {
				char *s = rdp_strndup(value + i, k - i);
				char **v = s ? rdp_reallocarray(p->given, p->n_given + 1,
								sizeof(*v))
					     : NULL;

				if (!v) {
					rdp_free(s);
					p->n_given_vars = SIZE_MAX; /* out of memory */
					return;
				}
				v[p->n_given++] = s;
				p->given = v;
			}
		}
		i = j + 1;
	}
}

static int read_ports(struct pod *p, struct pod_dev *d)
{
	char path[RDP_SYSFS_PATH_MAX], buf[64];
	char **names = NULL;
	size_t n = 0;
	int r;

	snprintf(path, sizeof(path), "class/infiniband/%s/ports", d->name);
	r = rdp_sysfs_list_dir(p->sys_fd, path, RDP_MAX_PORTS, &names, &n);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0; /* no ports: nothing NCCL can use */
	d->ports = rdp_calloc(n ? n : 1, sizeof(*d->ports));
	if (!d->ports) {
		rdp_sysfs_names_free(names, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		struct pod_port *pp = &d->ports[d->n_ports];
		unsigned int num;
		char sname[16];
		int v;

		if (!rdp_is_numbered_name(names[i], "", &num) || num == 0)
			continue;
		pp->num = num;
		pp->state = -1;
		pp->link = RDP_LINK_UNKNOWN;
		snprintf(path, sizeof(path), "class/infiniband/%s/ports/%s/state", d->name,
			 names[i]);
		if (rdp_sysfs_read_attr(p->sys_fd, path, buf, sizeof(buf)) >= 0 &&
		    rdp_parse_state(buf, &v, sname, sizeof(sname)) >= 0)
			pp->state = v;
		snprintf(path, sizeof(path), "class/infiniband/%s/ports/%s/link_layer", d->name,
			 names[i]);
		if (rdp_sysfs_read_attr(p->sys_fd, path, buf, sizeof(buf)) >= 0 &&
		    rdp_parse_link_layer(buf, &v) >= 0)
			pp->link = v;
		d->n_ports++;
	}
	rdp_sysfs_names_free(names, n);
	return 0;
}

/* The RDMA devices of the container's /sys and which have a uverbs node in its /dev. */
static int read_devices(struct pod *p)
{
	char **names = NULL, **uv = NULL;
	size_t n = 0, nuv = 0;
	int r;

	if (p->sys_fd < 0) {
		p->devs_err = -EBADF;
		return 0;
	}
	r = rdp_sysfs_list_dir(p->sys_fd, "class/infiniband", RDP_MAX_DEVICES, &names, &n);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		p->devs_err = r;
		return 0;
	}
	p->devs = rdp_calloc(n ? n : 1, sizeof(*p->devs));
	if (!p->devs) {
		rdp_sysfs_names_free(names, n);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (strlen(names[i]) >= RDP_IBDEV_NAME_MAX)
			continue;
		snprintf(p->devs[p->n_devs].name, RDP_IBDEV_NAME_MAX, "%s", names[i]);
		p->n_devs++;
	}
	rdp_sysfs_names_free(names, n);
	for (size_t i = 0; i < p->n_devs; i++) {
		r = read_ports(p, &p->devs[i]);
		if (r < 0)
			return r;
	}
	/* uverbsN -> ibdev: class/infiniband_verbs/uverbsN/ibdev */
	r = rdp_sysfs_list_dir(p->sys_fd, "class/infiniband_verbs", RDP_MAX_DEVICES, &uv, &nuv);
	if (r == -ENOMEM)
		return r;
	for (size_t i = 0; r >= 0 && i < nuv; i++) {
		char path[RDP_SYSFS_PATH_MAX], ibdev[RDP_IBDEV_NAME_MAX];
		unsigned int num;

		if (!rdp_is_numbered_name(uv[i], "uverbs", &num))
			continue;
		snprintf(path, sizeof(path), "class/infiniband_verbs/%s/ibdev", uv[i]);
		if (rdp_sysfs_read_attr(p->sys_fd, path, ibdev, sizeof(ibdev)) < 0)
			continue;
		for (size_t j = 0; j < p->n_devs; j++) {
			struct pod_dev *d = &p->devs[j];

			if (strcmp(d->name, ibdev) != 0 || d->uverbs[0])
				continue;
			snprintf(d->uverbs, sizeof(d->uverbs), "uverbs%u", num);
			snprintf(path, sizeof(path), "infiniband/%s", d->uverbs);
			d->node = p->dev_fd >= 0 && rdp_sysfs_exists(p->dev_fd, path);
		}
	}
	if (r >= 0)
		rdp_sysfs_names_free(uv, nuv);
	return 0;
}

static int pod_open(const struct rdp_doctor_ctx *c, struct pod *p)
{
	int r;

	memset(p, 0, sizeof(*p));
	p->c = c;
	p->root_fd = p->sys_fd = p->dev_fd = -1;
	if (c->pid > 0)
		snprintf(p->pid, sizeof(p->pid), "%ld", (long)c->pid);
	else
		snprintf(p->pid, sizeof(p->pid), "self");
	snprintf(p->where, sizeof(p->where), "/proc/%s", p->pid);
	if (c->pid > 0) {
		char path[64];

		p->own_fds = true;
		if (c->proc_fd >= 0) {
			snprintf(path, sizeof(path), "%s/root", p->pid);
			/* a plain openat: /proc/<pid>/root is a magic link */
			p->root_fd = openat(c->proc_fd, path, O_PATH | O_DIRECTORY | O_CLOEXEC);
		}
		if (p->root_fd >= 0) {
			p->sys_fd = rdp_sysfs_open(p->root_fd, "sys", O_PATH | O_DIRECTORY);
			p->dev_fd = rdp_sysfs_open(p->root_fd, "dev", O_PATH | O_DIRECTORY);
		}
	} else {
		p->sys_fd = c->sys_fd;
		p->dev_fd = c->dev_fd;
	}
	r = read_proc(p, "environ", &p->env, &p->env_len);
	if (r == -ENOMEM)
		return r;
	p->env_err = r;
	if (r == 0) {
		rdp_environ_each_prefix(p->env, p->env_len, "RDMA_DEVICE_", given_cb, p);
		if (p->n_given_vars == SIZE_MAX)
			return -ENOMEM;
		p->n_given_vars =
			rdp_environ_each_prefix(p->env, p->env_len, "RDMA_DEVICE_", NULL, NULL);
	}
	return read_devices(p);
}

static bool port_counts(const struct pod_port *pp)
{
	return rdp_port_state_is_active(pp->state) &&
	       (pp->link == RDP_LINK_INFINIBAND || pp->link == RDP_LINK_ETHER);
}

static const char *env_get(const struct pod *p, const char *name, char *val, size_t size)
{
	if (p->env_err < 0 || rdp_environ_get(p->env, p->env_len, name, val, size) < 0)
		return NULL;
	return val;
}

static size_t n_visible(const struct pod *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n_devs; i++)
		n += p->devs[i].node;
	return n;
}

/* Appends s to buf (size bytes) with ", " between items; "..." when full. */
static void list_add(char *buf, size_t size, const char *s)
{
	size_t l = strlen(buf);

	if (l + 4 >= size)
		return;
	snprintf(buf + l, size - l, "%s%s", l ? ", " : "", s);
	if (strlen(buf) + 4 >= size)
		memcpy(buf + size - 4, "...", 4);
}

static void fmt_size(uint64_t v, char *buf, size_t size)
{
	if (v >= (1ull << 30) && v % (1ull << 30) == 0)
		snprintf(buf, size, "%" PRIu64 " GiB", v >> 30);
	else if (v >= (1ull << 20) && v % (1ull << 20) == 0)
		snprintf(buf, size, "%" PRIu64 " MiB", v >> 20);
	else if (v >= 1024 && v % 1024 == 0)
		snprintf(buf, size, "%" PRIu64 " KiB", v >> 10);
	else
		snprintf(buf, size, "%" PRIu64 " bytes", v);
}

#define ADD(r, id, st, subj, sym, fix, ...)                                                        \
	do {                                                                                       \
		int _r = rdp_doctor_add(r, RDP_GROUP_POD, id, st, subj, sym, fix, __VA_ARGS__);    \
		if (_r < 0)                                                                        \
			return _r;                                                                 \
	} while (0)

/* ------------------------------------------------------------------------------------------ */
/* pod.devices */

#define SYM_NO_DEVICE "\"NET/IB : No device found.\", then \"Using network Socket\""
#define FIX_GIVE_DEVICE                                                                            \
	"Request the RDMA resource in the container's resources.limits (e.g. "                 \
	"rdma/hca_shared_devices_a: 1) so the device plugin adds /dev/infiniband/uverbsN and "  \
	"rdma_cm; with RDMA netns mode exclusive the device must also be moved into the pod's " \
	"network namespace (rdma-cni)"

static bool is_given(const struct pod *p, const char *name)
{
	for (size_t i = 0; i < p->n_given; i++)
		if (strcmp(p->given[i], name) == 0)
			return true;
	return false;
}

/*
 * What counts as openable: open(O_RDWR) succeeds, or fails with ENXIO/ENODEV, which the
 * kernel returns only after the path lookup, the mode bits and the device cgroup allowed the
 * open (no driver registered that device number: a fixture, or a driver going away). ENOENT,
 * EACCES, EPERM (device cgroup) and anything else fail.
 */
static int try_open(int dev_fd, const char *path)
{
	int fd = rdp_sysfs_open(dev_fd, path, O_RDWR | O_NOCTTY | O_NONBLOCK);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

static int check_devices(struct pod *p, struct rdp_doctor_report *r)
{
	static const char id[] = "pod.devices";
	size_t expected = 0;
	int e;

	if (p->sys_fd < 0) {
		ADD(r, id, RDP_CHECK_SKIP, "", NULL, NULL, "cannot open %s/root/sys", p->where);
		return 0;
	}
	if (p->n_devs == 0) {
		ADD(r, id, RDP_CHECK_FAIL, "", SYM_NO_DEVICE, FIX_GIVE_DEVICE,
		    "no RDMA device in the container's /sys/class/infiniband (%s)",
		    p->devs_err == -ENOENT ? "no such directory" : "empty");
		return 0;
	}
	for (size_t i = 0; i < p->n_given; i++) {
		bool found = false;

		for (size_t j = 0; j < p->n_devs && !found; j++)
			found = strcmp(p->devs[j].name, p->given[i]) == 0;
		if (!found)
			ADD(r, id, RDP_CHECK_FAIL, p->given[i], SYM_NO_DEVICE,
			    "With RDMA netns mode exclusive (rdma system show), move the device "
			    "into the pod's network namespace (rdma-cni) or switch the node to "
			    "shared mode",
			    "%s is in the container's RDMA_DEVICE_* variables but not in its "
			    "/sys/class/infiniband (%zu other devices there)",
			    p->given[i], p->n_devs);
	}
	for (size_t i = 0; i < p->n_devs; i++) {
		struct pod_dev *d = &p->devs[i];
		char path[64];

		if (p->n_given ? !is_given(p, d->name) : !d->node)
			continue; /* not this container's: no node is expected */
		expected++;
		if (!d->uverbs[0]) {
			ADD(r, id, RDP_CHECK_FAIL, d->name, SYM_NO_DEVICE,
			    "Load ib_uverbs on the node (modprobe ib_uverbs)",
			    "sysfs names no uverbs device for %s (class/infiniband_verbs/*/ibdev)",
			    d->name);
			continue;
		}
		snprintf(path, sizeof(path), "infiniband/%s", d->uverbs);
		e = p->dev_fd >= 0 ? try_open(p->dev_fd, path) : -EBADF;
		if (e == 0)
			ADD(r, id, RDP_CHECK_OK, d->name, NULL, NULL,
			    "/dev/infiniband/%s opens read-write", d->uverbs);
		else if (e == -ENXIO || e == -ENODEV)
			ADD(r, id, RDP_CHECK_OK, d->name, NULL, NULL,
			    "/dev/infiniband/%s present and allowed (no driver behind it here)",
			    d->uverbs);
		else if (e == -ENOENT)
			ADD(r, id, RDP_CHECK_FAIL, d->name,
			    SYM_NO_DEVICE " (libibverbs lists no device without its "
					  "/dev/infiniband/uverbsN)",
			    FIX_GIVE_DEVICE,
			    "/dev/infiniband/%s of %s is missing in the container", d->uverbs,
			    d->name);
		else
			ADD(r, id, RDP_CHECK_FAIL, d->name,
			    "\"Call to ibv_open_device failed\", then \"Using network Socket\"",
			    "Give the container the device through the device plugin (not a "
			    "hostPath mount): the runtime's device cgroup must allow the char "
			    "device (231:*), and the node's mode must allow read-write",
			    "open(\"/dev/infiniband/%s\", O_RDWR) of %s: %s", d->uverbs, d->name,
			    strerror(-e));
	}
	if (expected == 0)
		ADD(r, id, RDP_CHECK_FAIL, "", SYM_NO_DEVICE, FIX_GIVE_DEVICE,
		    "none of the %zu RDMA devices in /sys/class/infiniband has its "
		    "/dev/infiniband/uverbsN in the container",
		    p->n_devs);
	e = p->dev_fd >= 0 ? try_open(p->dev_fd, "infiniband/rdma_cm") : -EBADF;
	if (e == 0 || e == -ENXIO || e == -ENODEV)
		ADD(r, id, RDP_CHECK_OK, "rdma_cm", NULL, NULL, "/dev/infiniband/rdma_cm %s",
		    e == 0 ? "opens read-write" : "present and allowed (no driver behind it here)");
	else
		ADD(r, id, RDP_CHECK_WARN, "rdma_cm",
		    "NCCL does not use it; UCX/MPI connection setup over RDMA CM fails "
		    "(rdma_create_event_channel)",
		    "Load rdma_ucm on the node (modprobe rdma_ucm); the device plugin adds "
		    "/dev/infiniband/rdma_cm with every device",
		    "open(\"/dev/infiniband/rdma_cm\", O_RDWR): %s", strerror(-e));
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* pod.memlock */

/* Below this a finite limit without CAP_IPC_LOCK fails; above it, warns. NCCL pins its
 * buffers (NCCL_BUFFSIZE 4 MiB per channel and peer, tens of channels) and, with user buffer
 * registration, the application's: a few hundred MiB at least, GiBs with large models. */
#define MEMLOCK_FAIL_BELOW (1ull << 30)

static int check_memlock(struct pod *p, struct rdp_doctor_report *r)
{
	static const char id[] = "pod.memlock";
	_cleanup_free_ char *lim = NULL, *st = NULL;
	size_t llen = 0, slen = 0;
	uint64_t soft, hard, cap = 0;
	bool have_cap = false, ipc_lock = false;
	char ssoft[32], shard[32];
	int e;

	e = read_proc(p, "limits", &lim, &llen);
	if (e == -ENOMEM)
		return e;
	if (e < 0) {
		ADD(r, id, RDP_CHECK_SKIP, "", NULL, NULL, "cannot read %s/limits: %s", p->where,
		    strerror(-e));
		return 0;
	}
	e = rdp_proc_limits_memlock(lim, llen, &soft, &hard);
	if (e < 0) {
		ADD(r, id, RDP_CHECK_SKIP, "", NULL, NULL,
		    "%s/limits has no readable \"Max locked memory\" line", p->where);
		return 0;
	}
	e = read_proc(p, "status", &st, &slen);
	if (e == -ENOMEM)
		return e;
	if (e == 0 && rdp_proc_status_capeff(st, slen, &cap) == 0) {
		have_cap = true;
		ipc_lock = cap & (1ull << RDP_CAP_IPC_LOCK);
	}
	if (soft == RDP_RLIM_UNLIMITED)
		snprintf(ssoft, sizeof(ssoft), "unlimited");
	else
		fmt_size(soft, ssoft, sizeof(ssoft));
	if (hard == RDP_RLIM_UNLIMITED)
		snprintf(shard, sizeof(shard), "unlimited");
	else
		fmt_size(hard, shard, sizeof(shard));
	if (soft == RDP_RLIM_UNLIMITED) {
		ADD(r, id, RDP_CHECK_OK, "", NULL, NULL, "RLIMIT_MEMLOCK unlimited");
	} else if (ipc_lock) {
		ADD(r, id, RDP_CHECK_OK, "", NULL, NULL,
		    "RLIMIT_MEMLOCK %s, but CAP_IPC_LOCK is in CapEff (%016" PRIx64
		    "): the limit does not apply to ibv_reg_mr",
		    ssoft, cap);
	} else {
		ADD(r, id, soft < MEMLOCK_FAIL_BELOW ? RDP_CHECK_FAIL : RDP_CHECK_WARN, "",
		    "\"Call to ibv_reg_mr failed with error Cannot allocate memory\" (the kernel "
		    "refuses to pin pages beyond RLIMIT_MEMLOCK without CAP_IPC_LOCK)",
		    "With CDI (serve --use-cdi, or the DRA driver) rdma-dp's OCI hook sets the "
		    "limit (config \"memlock\", default unlimited): check that the pod's CDI spec "
		    "names the hook, /opt/rdma-dp/bin/rdma-dp exists on the node, and nothing "
		    "sets its own memlock ulimit (the spec's own wins); with device specs (no CDI) "
		    "no device plugin can set it (Kubernetes has no per-pod rlimits): add "
		    "capabilities: add: [\"IPC_LOCK\"] to the container's securityContext, or "
		    "run the container runtime with memlock unlimited (LimitMEMLOCK=infinity; "
		    "docker --ulimit memlock=-1)",
		    "RLIMIT_MEMLOCK %s (hard %s) and %s; NCCL pins GiBs of buffers",
		    ssoft, shard,
		    have_cap ? "CAP_IPC_LOCK not in CapEff" : "CapEff unreadable");
	}
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* pod.shm */

#define SHM_FAIL_BELOW (256ull << 20) /* 64 MiB, the runtime default, fails with 8 GPUs */
#define SHM_WARN_BELOW (1ull << 30) /* about 1 GiB is what NCCL's docs and users advise */
#define TMPFS_MAGIC_ 0x01021994

static int check_shm(struct pod *p, struct rdp_doctor_report *r)
{
	static const char id[] = "pod.shm";
	static const char sym[] =
		"\"Error: failed to extend /dev/shm/nccl-XXXXXX to N bytes\" (NCCL's "
		"shared-memory transport between the GPUs of the node; errno 28)";
	static const char fix[] =
		"Mount an emptyDir with medium: Memory at /dev/shm (sizeLimit 1Gi or more); "
		"docker: --shm-size=1g; or NCCL_SHM_DISABLE=1 (a slower path)";
	_cleanup_free_ char *mi = NULL;
	size_t len = 0;
	struct rdp_mount m;
	char ssize[32];
	int e, fd = -1;

	if (p->root_fd >= 0)
		fd = rdp_sysfs_open(p->root_fd, "dev/shm", O_RDONLY | O_DIRECTORY);
	else if (p->dev_fd >= 0)
		fd = rdp_sysfs_open(p->dev_fd, "shm", O_RDONLY | O_DIRECTORY);
	if (fd == -ENOENT || fd == -ENOTDIR) {
		ADD(r, id, RDP_CHECK_FAIL, "/dev/shm",
		    "NCCL cannot create its /dev/shm/nccl-* segments (shared-memory transport)",
		    fix, "no /dev/shm directory in the container");
		return 0;
	}
	e = read_proc(p, "mountinfo", &mi, &len);
	if (e == -ENOMEM) {
		if (fd >= 0)
			close(fd);
		return e;
	}
	if (e < 0 || rdp_mountinfo_find(mi, len, "/dev/shm", &m) < 0) {
		if (fd >= 0)
			close(fd);
		ADD(r, id, RDP_CHECK_SKIP, "/dev/shm", NULL, NULL, "cannot read %s/mountinfo%s%s",
		    p->where, e < 0 ? ": " : " (no mount holds /dev/shm)", e < 0 ? strerror(-e) : "");
		return 0;
	}
	if (m.size == 0 && strcmp(m.fstype, "tmpfs") == 0 && fd >= 0) {
		struct statfs sf;

		/* no size= option: the tmpfs default (half the RAM), or ask the filesystem */
		if (fstatfs(fd, &sf) == 0 && (unsigned long)sf.f_type == TMPFS_MAGIC_)
			m.size = (uint64_t)sf.f_blocks * (uint64_t)sf.f_bsize;
	}
	if (fd >= 0)
		close(fd);
	if (strcmp(m.fstype, "tmpfs") != 0) {
		ADD(r, id, RDP_CHECK_OK, "/dev/shm", NULL, NULL,
		    "/dev/shm is on the %s mount at %s (not a size-limited tmpfs)", m.fstype,
		    m.mount_point);
		return 0;
	}
	if (m.size == 0) {
		ADD(r, id, RDP_CHECK_OK, "/dev/shm", NULL, NULL,
		    "tmpfs at %s without size= (the tmpfs default: half the RAM)", m.mount_point);
		return 0;
	}
	fmt_size(m.size, ssize, sizeof(ssize));
	if (m.size < SHM_FAIL_BELOW)
		ADD(r, id, RDP_CHECK_FAIL, "/dev/shm", sym, fix,
		    "tmpfs at %s of %s (64 MiB is the container runtime's default)",
		    m.mount_point, ssize);
	else if (m.size < SHM_WARN_BELOW)
		ADD(r, id, RDP_CHECK_WARN, "/dev/shm", sym, fix,
		    "tmpfs at %s of %s, below the 1 GiB advised for NCCL", m.mount_point, ssize);
	else
		ADD(r, id, RDP_CHECK_OK, "/dev/shm", NULL, NULL, "tmpfs at %s of %s",
		    m.mount_point, ssize);
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* pod.nccl_ib_hca */

#define ENV_VAL_MAX 4096

static int skip_env(struct pod *p, struct rdp_doctor_report *r, const char *id)
{
	ADD(r, id, RDP_CHECK_SKIP, "", NULL, NULL,
	    "cannot read %s/environ: %s (a debug container needs the target's user or "
	    "CAP_SYS_PTRACE)",
	    p->where, strerror(-p->env_err));
	return 0;
}

/* The visible, counting ports an entry names, as "mlx5_0:1, ..."; *n their number; *other
 * the devices it names beyond its own name (prefix match). */
static void entry_ports(const struct pod *p, const struct rdp_nccl_list *l,
			const struct rdp_nccl_entry *e, char *sel, size_t size, size_t *n,
			size_t *n_inactive, char *other, size_t osize)
{
	*n = *n_inactive = 0;
	sel[0] = other[0] = '\0';
	for (size_t i = 0; i < p->n_devs; i++) {
		const struct pod_dev *d = &p->devs[i];
		bool named = false;

		if (!d->node)
			continue;
		for (size_t j = 0; j < d->n_ports; j++) {
			char s[RDP_IBDEV_NAME_MAX + 16];

			if (!rdp_nccl_entry_matches(e, l->exact, d->name, (int)d->ports[j].num))
				continue;
			named = true;
			if (!port_counts(&d->ports[j])) {
				(*n_inactive)++;
				continue;
			}
			snprintf(s, sizeof(s), "%s:%u", d->name, d->ports[j].num);
			list_add(sel, size, s);
			(*n)++;
		}
		if (named && strcmp(d->name, e->name) != 0)
			list_add(other, osize, d->name);
	}
}

/* Whether entry e names devices given to the container (RDMA_DEVICE_*) whose uverbs node
 * is missing; their names into buf. */
static bool names_missing_node(const struct pod *p, const struct rdp_nccl_list *l,
			       const struct rdp_nccl_entry *e, char *buf, size_t size)
{
	buf[0] = '\0';
	for (size_t i = 0; i < p->n_devs; i++) {
		const struct pod_dev *d = &p->devs[i];

		if (d->node || !is_given(p, d->name) || !rdp_nccl_entry_matches(e, l->exact, d->name, -1))
			continue;
		list_add(buf, size, d->name);
	}
	return buf[0] != '\0';
}

static bool is_visible_name(const struct pod *p, const char *name)
{
	for (size_t i = 0; i < p->n_devs; i++)
		if (p->devs[i].node && strcmp(p->devs[i].name, name) == 0)
			return true;
	return false;
}

/* The visible ports NCCL selects with l, as text, and their number. */
static size_t selected_ports(const struct pod *p, const struct rdp_nccl_list *l, char *buf,
			     size_t size)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < p->n_devs; i++)
		for (size_t j = 0; p->devs[i].node && j < p->devs[i].n_ports; j++) {
			char s[RDP_IBDEV_NAME_MAX + 16];

			if (!port_counts(&p->devs[i].ports[j]) ||
			    !rdp_nccl_list_selects(l, p->devs[i].name, (int)p->devs[i].ports[j].num))
				continue;
			snprintf(s, sizeof(s), "%s:%u", p->devs[i].name, p->devs[i].ports[j].num);
			list_add(buf, size, s);
			n++;
		}
	return n;
}

static int check_nccl_ib_hca(struct pod *p, struct rdp_doctor_report *r)
{
	static const char id[] = "pod.nccl_ib_hca";
	static const char fix_exact[] =
		"Name the devices exactly with a leading '=' (NCCL_IB_HCA==mlx5_0:1), as rdma-dp "
		"sets it for the devices it allocated (envFromDevices), or unset it";
	char val[ENV_VAL_MAX], sel[1024];
	struct rdp_nccl_list l;
	size_t nsel, problems = 0;

	if (p->env_err < 0)
		return skip_env(p, r, id);
	if (!env_get(p, "NCCL_IB_HCA", val, sizeof(val))) {
		rdp_nccl_list_parse(NULL, RDP_NCCL_IB_MAX_ENTRIES, &l);
		nsel = selected_ports(p, &l, sel, sizeof(sel));
		ADD(r, id, RDP_CHECK_OK, "", NULL, NULL,
		    "NCCL_IB_HCA unset: NCCL picks all %zu visible ACTIVE ports%s%s", nsel,
		    nsel ? ": " : "", sel);
		return 0;
	}
	rdp_nccl_list_parse(val, RDP_NCCL_IB_MAX_ENTRIES, &l);
	nsel = selected_ports(p, &l, sel, sizeof(sel));
	for (size_t i = 0; i < l.n; i++) {
		const struct rdp_nccl_entry *e = &l.v[i];
		char mine[1024], other[1024];
		size_t n, ninact;

		if (e->bad_name || e->bad_port) {
			problems++;
			ADD(r, id, RDP_CHECK_FAIL, e->name,
			    e->bad_name ? "NCCL copies the name into a 64-byte buffer (overrun)"
					: "the entry selects no port (NCCL reads the port with atoi)",
			    "Write entries as <device>[:<port>] with a port number from 1",
			    "NCCL_IB_HCA=%s: entry \"%s\" %s", val, e->name,
			    e->bad_name ? "is longer than 63 bytes" : "has a port that is not a number >= 1");
			continue;
		}
		entry_ports(p, &l, e, mine, sizeof(mine), &n, &ninact, other, sizeof(other));
		if (!l.exclude && n == 0 && names_missing_node(p, &l, e, other, sizeof(other))) {
			/* the cause is the missing node: pod.devices fails for it */
			problems++;
			ADD(r, id, RDP_CHECK_SKIP, e->name, NULL, NULL,
			    "NCCL_IB_HCA=%s: entry \"%s\" names %s, given to the container but "
			    "without its uverbs node (see pod.devices)",
			    val, e->name, other);
		} else if (n == 0 && n_visible(p) == 0) {
			problems++;
			ADD(r, id, RDP_CHECK_SKIP, e->name, NULL, NULL,
			    "NCCL_IB_HCA=%s: the container sees no RDMA device (see pod.devices)",
			    val);
		} else if (!l.exclude && n == 0) {
			problems++;
			ADD(r, id, RDP_CHECK_FAIL, e->name,
			    nsel == 0 ? SYM_NO_DEVICE
				      : "NCCL runs on the other entries' HCAs only: fewer NICs, "
					"less bandwidth",
			    fix_exact,
			    "NCCL_IB_HCA=%s: entry \"%s\" names %s among the %zu devices the "
			    "container sees",
			    val, e->name,
			    ninact ? "only ports that are not ACTIVE" : "no port", n_visible(p));
		} else if (!l.exact && other[0] && is_visible_name(p, e->name)) {
			problems++;
			ADD(r, id, RDP_CHECK_WARN, e->name,
			    l.exclude ? "NCCL also leaves out those devices"
				      : "NCCL also runs traffic over those devices (NET/IB lists "
					"them among its devices)",
			    fix_exact,
			    "NCCL_IB_HCA=%s: entry \"%s\" without '=' is a prefix: it also %s %s",
			    val, e->name, l.exclude ? "excludes" : "selects", other);
		}
	}
	if (l.n_dropped) {
		problems++;
		ADD(r, id, RDP_CHECK_WARN, "", "NCCL ignores the entries beyond the 32nd",
		    "Name at most 32 HCAs", "NCCL_IB_HCA has %zu entries (NCCL keeps 32)",
		    l.n + l.n_dropped);
	}
	if (nsel == 0 && n_visible(p) == 0) {
		if (problems == 0)
			ADD(r, id, RDP_CHECK_SKIP, "", NULL, NULL,
			    "NCCL_IB_HCA=%s, but the container sees no RDMA device (see pod.devices)",
			    val);
		return 0;
	}
	if (nsel == 0 && (l.exclude || problems == 0)) {
		problems++;
		ADD(r, id, RDP_CHECK_FAIL, "", SYM_NO_DEVICE, fix_exact,
		    "NCCL_IB_HCA=%s selects none of the %zu visible devices' ACTIVE ports", val,
		    n_visible(p));
	} else if (nsel > RDP_NCCL_IB_MAX_ENTRIES) {
		problems++;
		ADD(r, id, RDP_CHECK_WARN, "", "NCCL uses the first 32 HCA ports only",
		    "Name at most 32 ports in NCCL_IB_HCA",
		    "NCCL_IB_HCA=%s selects %zu ports (NCCL's MAX_IB_DEVS is 32)", val, nsel);
	}
	if (problems == 0)
		ADD(r, id, RDP_CHECK_OK, "", NULL, NULL, "NCCL_IB_HCA=%s selects %s%s", val, sel,
		    l.exact ? "" : " (prefix match, no other device named)");
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* pod.nccl_socket_ifname */

static int check_nccl_socket_ifname(struct pod *p, struct rdp_doctor_report *r)
{
	static const char id[] = "pod.nccl_socket_ifname";
	char val[ENV_VAL_MAX], all[1024] = "", sel[1024] = "";
	_cleanup_free_ char *nd = NULL;
	char(*names)[RDP_NCCL_NAME_MAX] = NULL;
	size_t len = 0, n = 0, nsel = 0, nother = 0;
	struct rdp_nccl_list l;
	int e;

	if (p->env_err < 0)
		return skip_env(p, r, id);
	names = rdp_calloc(POD_MAX_IFACES, sizeof(*names));
	if (!names)
		return -ENOMEM;
	e = read_proc(p, "net/dev", &nd, &len);
	if (e == 0) {
		n = rdp_proc_net_dev_names(nd, len, names, POD_MAX_IFACES);
	} else if (e != -ENOMEM && p->sys_fd >= 0) {
		char **ls = NULL;
		size_t nls = 0;

		/* the container's /sys/class/net (sysfs shows the netns that mounted it) */
		e = rdp_sysfs_list_dir(p->sys_fd, "class/net", POD_MAX_IFACES, &ls, &nls);
		for (size_t i = 0; e == 0 && i < nls; i++)
			snprintf(names[n++], RDP_NCCL_NAME_MAX, "%s", ls[i]);
		if (e == 0)
			rdp_sysfs_names_free(ls, nls);
	}
	if (e == -ENOMEM) {
		rdp_free(names);
		return e;
	}
	if (e < 0) {
		rdp_free(names);
		ADD(r, id, RDP_CHECK_SKIP, "", NULL, NULL,
		    "cannot read %s/net/dev nor the container's /sys/class/net: %s", p->where,
		    strerror(-e));
		return 0;
	}
	if (n > POD_MAX_IFACES)
		n = POD_MAX_IFACES;
	for (size_t i = 0; i < n; i++) {
		list_add(all, sizeof(all), names[i]);
		nother += strcmp(names[i], "lo") != 0;
	}
	if (!env_get(p, "NCCL_SOCKET_IFNAME", val, sizeof(val))) {
		rdp_free(names);
		if (nother == 0)
			ADD(r, id, RDP_CHECK_WARN, "",
			    "NCCL falls back to lo: its bootstrap cannot reach other nodes",
			    "Give the pod a network interface (its pod network, or a Multus "
			    "attachment) and set NCCL_SOCKET_IFNAME to it",
			    "NCCL_SOCKET_IFNAME unset and the container has no interface but lo (%s)",
			    all);
		else
			ADD(r, id, RDP_CHECK_OK, "", NULL, NULL,
			    "NCCL_SOCKET_IFNAME unset: NCCL picks ib* first, then any interface "
			    "but docker*, lo, virbr* (the container has: %s)",
			    all);
		return 0;
	}
	rdp_nccl_list_parse(val, RDP_NCCL_IF_MAX_ENTRIES, &l);
	for (size_t i = 0; i < n; i++)
		if (rdp_nccl_list_selects(&l, names[i], -1)) {
			list_add(sel, sizeof(sel), names[i]);
			nsel++;
		}
	rdp_free(names);
	if (nsel == 0)
		ADD(r, id, RDP_CHECK_FAIL, "",
		    "\"NET/IB : No IP interface found.\" (NET/IB and the bootstrap need an IP "
		    "interface; NCCL init fails)",
		    "Set NCCL_SOCKET_IFNAME to an interface of the pod (eth0 on the pod network, "
		    "net1... for Multus attachments), or unset it",
		    "NCCL_SOCKET_IFNAME=%s matches no interface of the container's network "
		    "namespace (%s)",
		    val, all);
	else
		ADD(r, id, RDP_CHECK_OK, "", NULL, NULL,
		    "NCCL_SOCKET_IFNAME=%s selects %s (NCCL also needs an IP address on it; "
		    "not checked)",
		    val, sel);
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* pod.nccl_gid_index */

/* Reads GID slot i of a port: 1 valid (type in typ), 0 empty/unreadable, -ENOENT no slot. */
static int read_gid(const struct pod *p, const char *dev, unsigned int port, long i,
		    uint8_t gid[16], char *typ, size_t tsize)
{
	char path[RDP_SYSFS_PATH_MAX], buf[128];
	static const uint8_t zero[16];
	int e;

	snprintf(path, sizeof(path), "class/infiniband/%s/ports/%u/gids/%ld", dev, port, i);
	e = rdp_sysfs_read_attr(p->sys_fd, path, buf, sizeof(buf));
	if (e == -ENOENT)
		return -ENOENT;
	if (e < 0 || rdp_parse_gid(buf, gid) < 0 || memcmp(gid, zero, 16) == 0)
		return 0;
	snprintf(path, sizeof(path), "class/infiniband/%s/ports/%u/gid_attrs/types/%ld", dev,
		 port, i);
	if (rdp_sysfs_read_attr(p->sys_fd, path, typ, tsize) < 0)
		snprintf(typ, tsize, "?");
	return 1;
}

/* The first RoCE v2 IPv4 slot of a port, -1 none (at most 256 slots looked at). */
static long find_v2_ipv4(const struct pod *p, const char *dev, unsigned int port)
{
	for (long i = 0; i < 256; i++) {
		uint8_t gid[16];
		char typ[32];
		int e = read_gid(p, dev, port, i, gid, typ, sizeof(typ));

		if (e == -ENOENT)
			break;
		if (e == 1 && strcmp(typ, "RoCE v2") == 0 && rdp_gid_is_ipv4_mapped(gid))
			return i;
	}
	return -1;
}

static int check_nccl_gid_index(struct pod *p, struct rdp_doctor_report *r)
{
	static const char id[] = "pod.nccl_gid_index";
	static const char sym[] =
		"\"Call to ibv_modify_qp failed with 22 Invalid argument\" (the QP's source GID "
		"cannot be used on the port)";
	char val[ENV_VAL_MAX], hca[ENV_VAL_MAX], *end;
	struct rdp_nccl_list l;
	size_t nports = 0;
	long idx;

	if (p->env_err < 0)
		return skip_env(p, r, id);
	if (!env_get(p, "NCCL_IB_GID_INDEX", val, sizeof(val))) {
		ADD(r, id, RDP_CHECK_OK, "", NULL, NULL,
		    "NCCL_IB_GID_INDEX unset: NCCL >= 2.21 picks a RoCE v2 IPv4 GID on RoCE ports "
		    "(before 2.21 the default was 0)");
		return 0;
	}
	errno = 0;
	idx = strtol(val, &end, 0);
	if (errno || end == val || *end || idx < -1 || idx > 65535) {
		ADD(r, id, RDP_CHECK_FAIL, "", sym, "Unset NCCL_IB_GID_INDEX or give an index",
		    "NCCL_IB_GID_INDEX=%s is not a GID index", val);
		return 0;
	}
	if (idx == -1) {
		ADD(r, id, RDP_CHECK_OK, "", NULL, NULL,
		    "NCCL_IB_GID_INDEX=-1: NCCL picks the GID (the default since 2.21)");
		return 0;
	}
	rdp_nccl_list_parse(env_get(p, "NCCL_IB_HCA", hca, sizeof(hca)), RDP_NCCL_IB_MAX_ENTRIES,
			    &l);
	for (size_t i = 0; i < p->n_devs; i++) {
		const struct pod_dev *d = &p->devs[i];

		for (size_t j = 0; d->node && j < d->n_ports; j++) {
			const struct pod_port *pp = &d->ports[j];
			char subj[RDP_IBDEV_NAME_MAX + 16], typ[32] = "", fix[256];
			uint8_t gid[16];
			long good;
			int e;

			if (!port_counts(pp) || !rdp_nccl_list_selects(&l, d->name, (int)pp->num))
				continue;
			nports++;
			snprintf(subj, sizeof(subj), "%s port %u", d->name, pp->num);
			e = read_gid(p, d->name, pp->num, idx, gid, typ, sizeof(typ));
			if (pp->link == RDP_LINK_INFINIBAND) {
				if (e == 1)
					ADD(r, id, RDP_CHECK_OK, subj, NULL, NULL,
					    "InfiniBand port: GID %ld is valid (on IB it matters for "
					    "routing only)", idx);
				else
					ADD(r, id, RDP_CHECK_FAIL, subj, sym,
					    "Unset NCCL_IB_GID_INDEX (InfiniBand uses GID 0)",
					    "NCCL_IB_GID_INDEX=%ld: InfiniBand port has %s", idx,
					    e < 0 ? "no such GID slot" : "an empty GID there");
				continue;
			}
			if (e == 1 && strcmp(typ, "RoCE v2") == 0) {
				char sgid[64];

				if (gid[0] == 0xfe && (gid[1] & 0xc0) == 0x80) {
					ADD(r, id, RDP_CHECK_WARN, subj,
					    "link-local: reaches only the same L2 segment (NCCL's own "
					    "choice skips fe80:: GIDs)",
					    "Unset NCCL_IB_GID_INDEX, or point it at the RoCE v2 IPv4 GID",
					    "NCCL_IB_GID_INDEX=%ld is a RoCE v2 link-local (fe80::) GID",
					    idx);
					continue;
				}
				if (rdp_gid_is_ipv4_mapped(gid))
					snprintf(sgid, sizeof(sgid), "::ffff:%u.%u.%u.%u", gid[12],
						 gid[13], gid[14], gid[15]);
				else
					snprintf(sgid, sizeof(sgid), "IPv6");
				ADD(r, id, RDP_CHECK_OK, subj, NULL, NULL,
				    "NCCL_IB_GID_INDEX=%ld is RoCE v2 (%s)", idx, sgid);
				continue;
			}
			good = find_v2_ipv4(p, d->name, pp->num);
			if (good >= 0)
				snprintf(fix, sizeof(fix),
					 "Unset NCCL_IB_GID_INDEX (NCCL >= 2.21 picks the RoCE v2 "
					 "GID; NCCL_IB_ADDR_RANGE narrows it) or set it to %ld, this "
					 "port's RoCE v2 IPv4 GID",
					 good);
			else
				snprintf(fix, sizeof(fix),
					 "Unset NCCL_IB_GID_INDEX; the port has no RoCE v2 IPv4 GID: "
					 "give its netdev (in the pod) an IPv4 address");
			ADD(r, id, RDP_CHECK_FAIL, subj, sym, fix, "NCCL_IB_GID_INDEX=%ld: %s", idx,
			    e < 0    ? "the port has no such GID slot"
			    : e == 0 ? "the GID slot is empty"
				     : strcmp(typ, "IB/RoCE v1") == 0 ? "the GID is RoCE v1"
								       : "the GID is not RoCE v2");
		}
	}
	if (nports == 0)
		ADD(r, id, RDP_CHECK_SKIP, "", NULL, NULL,
		    "NCCL_IB_GID_INDEX=%ld, but no visible ACTIVE port is selected", idx);
	return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* pod.nccl_disable */

static size_t n_gpus(const struct pod *p)
{
	char **ls = NULL;
	size_t n = 0, g = 0;

	if (p->dev_fd < 0 || rdp_sysfs_list_dir(p->dev_fd, ".", 65536, &ls, &n) < 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		unsigned int num;

		g += rdp_is_numbered_name(ls[i], "nvidia", &num);
	}
	rdp_sysfs_names_free(ls, n);
	return g;
}

static int check_nccl_disable(struct pod *p, struct rdp_doctor_report *r)
{
	static const char id[] = "pod.nccl_disable";
	static const char sym_socket[] =
		"\"Using network Socket\": NCCL runs inter-node traffic over TCP, not RDMA";
	char val[ENV_VAL_MAX], names[1024] = "", *end;
	size_t nv = n_visible(p), problems = 0;

	if (p->env_err < 0)
		return skip_env(p, r, id);
	for (size_t i = 0; i < p->n_devs; i++)
		if (p->devs[i].node)
			list_add(names, sizeof(names), p->devs[i].name);
	if (env_get(p, "NCCL_IB_DISABLE", val, sizeof(val))) {
		long v;

		errno = 0;
		v = strtol(val, &end, 0);
		if (!errno && end != val && v != 0 && nv > 0) {
			problems++;
			ADD(r, id, RDP_CHECK_FAIL, "NCCL_IB_DISABLE", sym_socket,
			    "Unset NCCL_IB_DISABLE (often left over from a run without RDMA)",
			    "NCCL_IB_DISABLE=%s while the container sees %zu RDMA devices (%s)", val,
			    nv, names);
		}
	}
	if (env_get(p, "NCCL_NET", val, sizeof(val)) && strcasecmp(val, "Socket") == 0 && nv > 0) {
		problems++;
		ADD(r, id, RDP_CHECK_FAIL, "NCCL_NET", sym_socket, "Unset NCCL_NET (or set it to IB)",
		    "NCCL_NET=%s while the container sees %zu RDMA devices (%s)", val, nv, names);
	}
	if (env_get(p, "NCCL_NET_GDR_LEVEL", val, sizeof(val))) {
		size_t ng = n_gpus(p);

		if ((strcasecmp(val, "LOC") == 0 || strcmp(val, "0") == 0) && ng > 0 && nv > 0) {
			problems++;
			ADD(r, id, RDP_CHECK_WARN, "NCCL_NET_GDR_LEVEL",
			    "GPUDirect RDMA off: the NICs move GPU data through host memory (more "
			    "PCIe traffic, lower bandwidth)",
			    "Unset NCCL_NET_GDR_LEVEL (NCCL uses GPUDirect RDMA up to PXB by default)",
			    "NCCL_NET_GDR_LEVEL=%s with %zu GPUs and %zu RDMA devices in the "
			    "container",
			    val, ng, nv);
		}
	}
	if (problems == 0)
		ADD(r, id, RDP_CHECK_OK, "", NULL, NULL,
		    "no NCCL variable turns off NET/IB or GPUDirect RDMA (%zu RDMA devices visible)",
		    nv);
	return 0;
}

/* ------------------------------------------------------------------------------------------ */

int rdp_doctor_pod(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	int (*const checks[])(struct pod *, struct rdp_doctor_report *) = {
		check_devices,	     check_memlock,		 check_shm,
		check_nccl_ib_hca,   check_nccl_socket_ifname, check_nccl_gid_index,
		check_nccl_disable,
	};
	struct pod p;
	int e;

	e = pod_open(c, &p);
	for (size_t i = 0; e == 0 && i < ARRAY_SIZE(checks); i++)
		e = checks[i](&p, r);
	pod_done(&p);
	return e;
}
