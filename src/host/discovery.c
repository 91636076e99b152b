/* SPDX-License-Identifier: MIT */
/*
 * Discovery walks class/infiniband and, for each device, the links the kernel gives it: the
 * ibdev's `device` (its parent: a PCI function, or an auxiliary device under one), the PCI
 * function's `physfn`/`virtfnN` and `driver`, `net/` and the RoCE GID tables. Char devices
 * are matched through the `ibdev` files of class/infiniband_{verbs,mad}, indexed once per
 * discovery so that the cost stays linear in the number of devices.
 *
 * Only a failing root or memory ends discovery; anything wrong with one device becomes a
 * problem string on that device.
 */
#include "discovery.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "alloc.h"
#include "devnode.h"
#include "macro.h"
#include "quote.h"
#include "sysfs.h"

#define MAX_PROBLEMS 64 /* per device; the rest are summarised in one line */
#define MAX_GIDS 4096 /* entries of one port's GID table we look at */
#define MAX_CDEV_ENTRIES 65536 /* entries of class/infiniband_{verbs,mad} */
#define MAX_PF_ENTRIES 65536 /* entries of a PF directory (attributes + virtfnN links) */
#define MAX_VALUE_IN_PROBLEM 64 /* bytes of a bad value quoted in a problem */

enum cdev_kind {
	CDEV_UVERBS,
	CDEV_UMAD,
	CDEV_ISSM,
};

struct cdev {
	char ibdev[RDP_IBDEV_NAME_MAX];
	unsigned int port; /* 0 for uverbs */
	enum cdev_kind kind;
	unsigned int num;
	char name[24];
	dev_t devnum; /* what <class>/<name>/dev says; 0 when unreadable */
};

struct vf_link {
	unsigned int index;
	char *path; /* canonical */
};

struct pf_info {
	char *path; /* canonical PF directory */
	char netdev[RDP_IFNAME_MAX];
	struct vf_link *vfs;
	size_t n_vfs;
};

struct ctx {
	int sys, dev;
	struct rdp_host *host;
	struct cdev *cdevs;
	size_t n_cdevs;
	struct pf_info *pfs;
	size_t n_pfs;
	struct rdp_discovery_device *rec; /* the device being discovered, when recording */
	unsigned int flags; /* enum rdp_discover_flags */
};

static void ctx_done(struct ctx *c)
{
	for (size_t i = 0; i < c->n_pfs; i++) {
		for (size_t j = 0; j < c->pfs[i].n_vfs; j++)
			rdp_free(c->pfs[i].vfs[j].path);
		rdp_free(c->pfs[i].vfs);
		rdp_free(c->pfs[i].path);
	}
	rdp_free(c->pfs);
	rdp_free(c->cdevs);
}

/* ---- small helpers ---- */

static int strv_add(char ***v, size_t *n, const char *s)
{
	char **nv;
	char *copy;

	copy = rdp_strdup(s);
	if (!copy)
		return -ENOMEM;
	nv = rdp_reallocarray(*v, *n + 1, sizeof(**v));
	if (!nv) {
		rdp_free(copy);
		return -ENOMEM;
	}
	nv[(*n)++] = copy;
	*v = nv;
	return 0;
}

static _printf_(3, 0) int vadd_problem(char ***v, size_t *n, const char *fmt, va_list ap)
{
	char buf[512];

	if (*n > MAX_PROBLEMS)
		return 0;
	if (*n == MAX_PROBLEMS)
		return strv_add(v, n, "more problems not shown");
	vsnprintf(buf, sizeof(buf), fmt, ap);
	return strv_add(v, n, buf);
}

static _printf_(2, 3) int problem(struct rdp_device *d, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vadd_problem(&d->problems, &d->n_problems, fmt, ap);
	va_end(ap);
	return r;
}

static _printf_(2, 3) int host_problem(struct rdp_host *h, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vadd_problem(&h->problems, &h->n_problems, fmt, ap);
	va_end(ap);
	return r;
}

static const char *errstr(int r)
{
	switch (-r) {
	case EFBIG:
	case ERANGE:
	case ENAMETOOLONG:
		return "value too long";
	case EBADMSG:
		return "value contains a NUL byte";
	case E2BIG:
		return "too many entries";
	default:
		return strerror(-r);
	}
}

static _printf_(3, 4) int path_fmt(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size)
		return -ENAMETOOLONG;
	return 0;
}

/* The parent directory of a canonical path, in place ("a/b" -> "a", "a" -> ""). */
static void path_dirname(char *p)
{
	char *s = strrchr(p, '/');

	if (s)
		*s = '\0';
	else
		*p = '\0';
}

static int add_netdev(struct rdp_device *d, const char *name)
{
	for (size_t i = 0; i < d->n_netdevs; i++)
		if (strcmp(d->netdevs[i], name) == 0)
			return 0;
	if (d->n_netdevs >= RDP_MAX_NETDEVS)
		return 0;
	return strv_add(&d->netdevs, &d->n_netdevs, name);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Reads dir/attr (label names it in problems). Returns 1 when read, 0 when it could not be
 * (a problem is recorded unless quiet_enoent and it is absent), -ENOMEM.
 */
static int read_attr(struct ctx *c, struct rdp_device *d, const char *dir, const char *attr,
		     const char *label, bool quiet_enoent, char *buf, size_t size)
{
	char path[RDP_SYSFS_PATH_MAX];
	int r;

	r = path_fmt(path, sizeof(path), "%s/%s", dir, attr);
	if (r >= 0)
		r = rdp_sysfs_read_attr(c->sys, path, buf, size);
	if (r >= 0)
		return 1;
	if (r == -ENOENT && quiet_enoent)
		return 0;
	r = problem(d, "%s: %s", label, errstr(r));
	return r < 0 ? r : 0;
}

static int unparsable(struct rdp_device *d, const char *label, const char *value)
{
	char q[MAX_VALUE_IN_PROBLEM + 8];

	return problem(d, "%s: unparsable value \"%s\"", label,
		       rdp_printable(value, MAX_VALUE_IN_PROBLEM, q, sizeof(q)));
}

/* Adds the valid netdev names of dir/net. */
static int add_net_dir(struct ctx *c, struct rdp_device *d, const char *dir)
{
	char path[RDP_SYSFS_PATH_MAX];
	char **names = NULL;
	size_t n = 0;
	int r;

	if (path_fmt(path, sizeof(path), "%s/net", dir) < 0)
		return 0;
	r = rdp_sysfs_list_dir(c->sys, path, RDP_MAX_NETDEVS, &names, &n);
	if (r == -ENOMEM)
		return r;
	if (r == -E2BIG)
		return problem(d, "net: more than %d netdevs", RDP_MAX_NETDEVS);
	if (r < 0)
		return 0;
	for (size_t i = 0; i < n && r >= 0; i++)
		if (rdp_is_ifname(names[i]))
			r = add_netdev(d, names[i]);
	rdp_sysfs_names_free(names, n);
	return r < 0 ? r : 0;
}

/* ---- char device index ---- */

static int cmp_cdev(const void *a, const void *b)
{
	const struct cdev *x = a, *y = b;
	int r = strcmp(x->ibdev, y->ibdev);

	if (r)
		return r;
	if (x->port != y->port)
		return x->port < y->port ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->num != y->num)
		return x->num < y->num ? -1 : 1;
	return 0;
}

/* The number <class>/<name>/dev names, 0 when it cannot be read or parsed. */
static dev_t read_devnum(int sys, const char *class, const char *name)
{
	char path[RDP_SYSFS_PATH_MAX], buf[32];
	unsigned int maj, min;

	if (path_fmt(path, sizeof(path), "%s/%s/dev", class, name) < 0 ||
	    rdp_sysfs_read_attr(sys, path, buf, sizeof(buf)) < 0 ||
	    rdp_parse_devnum(buf, &maj, &min) < 0)
		return 0;
	return makedev(maj, min);
}

static int index_class(struct ctx *c, const char *class, bool mad)
{
	char path[RDP_SYSFS_PATH_MAX], buf[RDP_IBDEV_NAME_MAX], portbuf[16];
	char **names = NULL;
	size_t n = 0;
	int r;

	r = rdp_sysfs_list_dir(c->sys, class, MAX_CDEV_ENTRIES, &names, &n);
	if (r == -ENOENT)
		return 0;
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return host_problem(c->host, "%s: %s", class, errstr(r));

	for (size_t i = 0; i < n; i++) {
		struct cdev e = {};
		struct cdev *nv;
		long port = 0;

		if (!mad && rdp_is_numbered_name(names[i], "uverbs", &e.num))
			e.kind = CDEV_UVERBS;
		else if (mad && rdp_is_numbered_name(names[i], "umad", &e.num))
			e.kind = CDEV_UMAD;
		else if (mad && rdp_is_numbered_name(names[i], "issm", &e.num))
			e.kind = CDEV_ISSM;
		else
			continue; /* abi_version and anything unknown */
		snprintf(e.name, sizeof(e.name), "%s", names[i]);

		if (path_fmt(path, sizeof(path), "%s/%s/ibdev", class, names[i]) < 0)
			continue;
		r = rdp_sysfs_read_attr(c->sys, path, buf, sizeof(buf));
		if (r <= 0) {
			r = host_problem(c->host, "%s: %s", path, r == 0 ? "empty" : errstr(r));
			if (r < 0)
				goto out;
			continue;
		}
		memcpy(e.ibdev, buf, (size_t)r + 1);
		if (mad) {
			if (path_fmt(path, sizeof(path), "%s/%s/port", class, names[i]) < 0)
				continue;
			r = rdp_sysfs_read_attr(c->sys, path, portbuf, sizeof(portbuf));
			if (r >= 0)
				r = rdp_parse_long(portbuf, 1, 65535, &port);
			if (r < 0) {
				r = host_problem(c->host, "%s: %s", path,
						 r == -EINVAL ? "unparsable value" : errstr(r));
				if (r < 0)
					goto out;
				continue;
			}
		}
		e.port = (unsigned int)port;
		e.devnum = read_devnum(c->sys, class, names[i]);
		nv = rdp_reallocarray(c->cdevs, c->n_cdevs + 1, sizeof(*nv));
		if (!nv) {
			r = -ENOMEM;
			goto out;
		}
		c->cdevs = nv;
		c->cdevs[c->n_cdevs++] = e;
	}
	r = 0;
out:
	rdp_sysfs_names_free(names, n);
	return r;
}

static int build_cdev_index(struct ctx *c)
{
	int r;

	r = index_class(c, "class/infiniband_verbs", false);
	if (r < 0)
		return r;
	r = index_class(c, "class/infiniband_mad", true);
	if (r < 0)
		return r;
	if (c->n_cdevs > 1)
		qsort(c->cdevs, c->n_cdevs, sizeof(*c->cdevs), cmp_cdev);
	return 0;
}

static int add_char_device(struct rdp_device *d, const char *path, dev_t devnum)
{
	dev_t *nv = rdp_reallocarray(d->char_devnums, d->n_char_devices + 1, sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	d->char_devnums = nv;
	nv[d->n_char_devices] = devnum;
	return strv_add(&d->char_devices, &d->n_char_devices, path);
}

static void set_usability(struct rdp_device *d, enum rdp_usability u, const char *reason)
{
	d->usability = u;
	snprintf(d->unusable_reason, sizeof(d->unusable_reason), "%s", reason);
}

/*
 * Lists the char devices of d that are as sysfs names them (devnode.h), records a problem for
 * each that is not, and judges whether its uverbs node makes it usable (rdma_cm comes later).
 */
static int fill_char_devices(struct ctx *c, struct rdp_device *d)
{
	char devpath[RDP_DEVPATH_MAX + 16], rel[64], why[RDP_REASON_MAX];
	char uverbs_why[RDP_REASON_MAX] = "";
	size_t lo = 0, hi = c->n_cdevs;
	bool uverbs = false, uverbs_ok = false;
	int r;

	/* Lower bound of this ibdev in the sorted index. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(c->cdevs[mid].ibdev, d->name) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < c->n_cdevs && strcmp(c->cdevs[i].ibdev, d->name) == 0; i++) {
		const struct cdev *e = &c->cdevs[i];
		struct rdp_devnode_result res;
		bool ok;

		snprintf(rel, sizeof(rel), "infiniband/%s", e->name);
		snprintf(devpath, sizeof(devpath), "/dev/infiniband/%s", e->name);
		ok = rdp_devnode_check(c->dev, rel, e->devnum, &res) == RDP_DEVNODE_OK;
		if (ok) {
			r = add_char_device(d, devpath, e->devnum);
		} else {
			rdp_devnode_reason(&res, devpath, e->name, e->devnum, why, sizeof(why));
			r = problem(d, "%s: %s", e->name, why);
			if (e->kind == CDEV_UVERBS && !uverbs_why[0])
				snprintf(uverbs_why, sizeof(uverbs_why), "%s", why);
		}
		if (r < 0)
			return r;
		if (e->kind == CDEV_UVERBS) {
			uverbs = true;
			uverbs_ok |= ok;
		}
	}
	if (!uverbs) {
		set_usability(d, RDP_UNUSABLE_NO_UVERBS, "sysfs names no uverbs device for it");
		return problem(d, "no uverbs device");
	}
	if (uverbs_ok)
		set_usability(d, RDP_USABLE, "");
	else
		set_usability(d, RDP_UNUSABLE_UVERBS_NODE, uverbs_why);
	return 0;
}

/* ---- ports ---- */

static int cmp_uint(const void *a, const void *b)
{
	unsigned int x = *(const unsigned int *)a, y = *(const unsigned int *)b;

	return x < y ? -1 : x > y;
}

/*
 * Lists dir as numbered entries (ports/1, gids/0...): their numbers, sorted. Entries that are
 * not numbers are returned in *ret_bad (count only).
 */
static int list_numbers(struct ctx *c, const char *dir, size_t max, long min, long maxnum,
			unsigned int **ret, size_t *ret_n, size_t *ret_bad)
{
	unsigned int *v = NULL;
	char **names = NULL;
	size_t n = 0, k = 0, bad = 0;
	int r;

	r = rdp_sysfs_list_dir(c->sys, dir, max, &names, &n);
	if (r < 0)
		return r;
	if (n > 0) {
		v = rdp_calloc(n, sizeof(*v));
		if (!v) {
			rdp_sysfs_names_free(names, n);
			return -ENOMEM;
		}
	}
	for (size_t i = 0; i < n; i++) {
		long x;

		if (names[i][0] != '-' && rdp_parse_long(names[i], min, maxnum, &x) == 0)
			v[k++] = (unsigned int)x;
		else
			bad++;
	}
	rdp_sysfs_names_free(names, n);
	if (k > 1)
		qsort(v, k, sizeof(*v), cmp_uint);
	*ret = v;
	*ret_n = k;
	*ret_bad = bad;
	return 0;
}

/*
 * RDP_DISCOVER_NO_GID_INDEX: the netdevs of the GID table only, one read of ndevs/<i> per
 * slot through one directory fd. An empty slot fails to read (EINVAL on the kernel; EISDIR
 * in the fixtures), as does a valid slot with no netdev: skipped. A slot that is a symlink is
 * no kernel attribute: it fails too (O_NOFOLLOW), so nothing is read outside the root.
 */
static int scan_gid_ndevs(struct ctx *c, struct rdp_device *d, const char *portdir,
			  struct rdp_port *p)
{
	char path[RDP_SYSFS_PATH_MAX], ndev[64], name[16];
	_cleanup_close_ int dfd = -1;
	unsigned int *idx = NULL, *valid = NULL;
	size_t n = 0, bad = 0, nv = 0;
	int r;

	if (path_fmt(path, sizeof(path), "%s/gid_attrs/ndevs", portdir) < 0)
		return 0;
	r = list_numbers(c, path, MAX_GIDS, 0, 65535, &idx, &n, &bad);
	if (r == -ENOMEM)
		return r;
	if (r == -E2BIG)
		return problem(d, "ports/%u/gid_attrs/ndevs: more than %d entries", p->num,
			       MAX_GIDS);
	if (r < 0)
		return 0; /* no GID attributes (old kernel): nothing to learn */
	dfd = rdp_sysfs_open(c->sys, path, O_RDONLY | O_DIRECTORY);
	if (n && c->rec && !(valid = rdp_calloc(n, sizeof(*valid)))) {
		rdp_free(idx);
		return -ENOMEM;
	}
	r = 0;
	for (size_t i = 0; dfd >= 0 && i < n && r >= 0; i++) {
		snprintf(name, sizeof(name), "%u", idx[i]);
		if (rdp_sysfs_read_attr_at(dfd, name, ndev, sizeof(ndev)) <= 0)
			continue;
		if (valid)
			valid[nv++] = idx[i];
		if (rdp_is_ifname(ndev))
			r = add_netdev(d, ndev);
	}
	if (c->rec) {
		struct rdp_discovery_port *rp = &c->rec->ports[p - d->ports];

		rp->gids_listed = true;
		rp->gid_slots = TAKE_PTR(idx);
		rp->n_gid_slots = n;
		rp->valid_slots = TAKE_PTR(valid);
		rp->n_valid_slots = nv;
	}
	rdp_free(idx);
	rdp_free(valid);
	return r;
}

/* RoCE: netdevs of the GID table and the first RoCE v2 IPv4 GID index. */
static int scan_gids(struct ctx *c, struct rdp_device *d, const char *portdir, struct rdp_port *p)
{
	char path[RDP_SYSFS_PATH_MAX], type[32], ndev[64], gidbuf[64];
	unsigned int *idx = NULL;
	size_t n = 0, bad = 0;
	int r;

	if (path_fmt(path, sizeof(path), "%s/gid_attrs/types", portdir) < 0)
		return 0;
	r = list_numbers(c, path, MAX_GIDS, 0, 65535, &idx, &n, &bad);
	if (r == -ENOMEM)
		return r;
	if (r == -E2BIG)
		return problem(d, "ports/%u/gid_attrs/types: more than %d entries", p->num,
			       MAX_GIDS);
	if (r < 0)
		return 0; /* no GID attributes (old kernel): nothing to learn */

	r = 0;
	for (size_t i = 0; i < n && r >= 0; i++) {
		uint8_t gid[16];

		/* An empty slot fails with EINVAL: skip it, as NCCL does. */
		if (path_fmt(path, sizeof(path), "%s/gid_attrs/types/%u", portdir, idx[i]) < 0 ||
		    rdp_sysfs_read_attr(c->sys, path, type, sizeof(type)) <= 0)
			continue;
		if (path_fmt(path, sizeof(path), "%s/gid_attrs/ndevs/%u", portdir, idx[i]) >= 0 &&
		    rdp_sysfs_read_attr(c->sys, path, ndev, sizeof(ndev)) > 0 &&
		    rdp_is_ifname(ndev))
			r = add_netdev(d, ndev);
		if (r < 0 || p->roce_v2_ipv4_gid_index >= 0 || strcmp(type, "RoCE v2") != 0)
			continue;
		if (path_fmt(path, sizeof(path), "%s/gids/%u", portdir, idx[i]) < 0 ||
		    rdp_sysfs_read_attr(c->sys, path, gidbuf, sizeof(gidbuf)) <= 0)
			continue;
		if (rdp_parse_gid(gidbuf, gid) == 0 && rdp_gid_is_ipv4_mapped(gid))
			p->roce_v2_ipv4_gid_index = (int)idx[i];
	}
	if (c->rec) {
		/* A rescan reads the same slots: the table's size is fixed while registered. */
		struct rdp_discovery_port *rp = &c->rec->ports[p - d->ports];

		rp->gids_listed = true;
		rp->gid_slots = TAKE_PTR(idx);
		rp->n_gid_slots = n;
	}
	rdp_free(idx);
	return r;
}

static int read_state(struct ctx *c, struct rdp_device *d, const char *portdir, unsigned int num,
		      const char *attr, int *ret_num, char *name, size_t name_size)
{
	char buf[128], label[64];
	int r;

	snprintf(label, sizeof(label), "ports/%u/%s", num, attr);
	r = read_attr(c, d, portdir, attr, label, false, buf, sizeof(buf));
	if (r <= 0)
		return r;
	if (rdp_parse_state(buf, ret_num, name, name_size) < 0)
		return unparsable(d, label, buf);
	return 0;
}

static int fill_port(struct ctx *c, struct rdp_device *d, const char *ibdir, struct rdp_port *p)
{
	char portdir[RDP_SYSFS_PATH_MAX], buf[128], label[64];
	struct rdp_rate rate;
	int r, ll;

	p->state = RDP_PORT_STATE_UNKNOWN;
	p->phys_state = -1;
	p->roce_v2_ipv4_gid_index = -1;
	if (path_fmt(portdir, sizeof(portdir), "%s/ports/%u", ibdir, p->num) < 0)
		return problem(d, "ports/%u: path too long", p->num);

	r = read_state(c, d, portdir, p->num, "state", &p->state, p->state_name,
		       sizeof(p->state_name));
	if (r < 0)
		return r;
	if (!(c->flags & RDP_DISCOVER_NO_LINK_DETAILS)) {
		r = read_state(c, d, portdir, p->num, "phys_state", &p->phys_state,
			       p->phys_state_name, sizeof(p->phys_state_name));
		if (r < 0)
			return r;
	}

	snprintf(label, sizeof(label), "ports/%u/link_layer", p->num);
	r = read_attr(c, d, portdir, "link_layer", label, false, buf, sizeof(buf));
	if (r < 0)
		return r;
	if (r > 0) {
		/* "Unknown" is the kernel's word for IB_LINK_LAYER_UNSPECIFIED (efa): none. */
		if (rdp_parse_link_layer(buf, &ll) == 0)
			p->link_layer = (enum rdp_link_layer)ll;
		else if (strcmp(buf, "Unknown") != 0 && (r = unparsable(d, label, buf)) < 0)
			return r;
	}

	if (c->flags & RDP_DISCOVER_NO_LINK_DETAILS) {
		r = 0;
	} else {
		snprintf(label, sizeof(label), "ports/%u/rate", p->num);
		r = read_attr(c, d, portdir, "rate", label, false, buf, sizeof(buf));
	}
	if (r < 0)
		return r;
	if (r > 0) {
		if (rdp_parse_rate(buf, &rate) == 0 && strlen(buf) < sizeof(p->rate))
			memcpy(p->rate, buf, strlen(buf) + 1);
		else if ((r = unparsable(d, label, buf)) < 0)
			return r;
	}

	if (p->link_layer == RDP_LINK_ETHER && !(c->flags & RDP_DISCOVER_NO_GID_TABLE))
		return c->flags & RDP_DISCOVER_NO_GID_INDEX ? scan_gid_ndevs(c, d, portdir, p)
							    : scan_gids(c, d, portdir, p);
	return 0;
}

static int fill_ports(struct ctx *c, struct rdp_device *d, const char *ibdir)
{
	char path[RDP_SYSFS_PATH_MAX];
	unsigned int *nums = NULL;
	size_t n = 0, bad = 0;
	int r;

	if (path_fmt(path, sizeof(path), "%s/ports", ibdir) < 0)
		return problem(d, "ports: path too long");
	r = list_numbers(c, path, RDP_MAX_PORTS, 1, 65535, &nums, &n, &bad);
	if (r == -ENOMEM)
		return r;
	if (r == -E2BIG)
		return problem(d, "ports: more than %d ports", RDP_MAX_PORTS);
	if (r < 0)
		return problem(d, "ports: %s", errstr(r));
	if (bad > 0 && (r = problem(d, "ports: %zu entries are not port numbers", bad)) < 0)
		goto out;
	if (n == 0) {
		r = problem(d, "ports: no ports");
		goto out;
	}
	d->ports = rdp_calloc(n, sizeof(*d->ports));
	if (!d->ports) {
		r = -ENOMEM;
		goto out;
	}
	d->n_ports = n;
	if (c->rec) {
		c->rec->ports = rdp_calloc(n, sizeof(*c->rec->ports));
		if (!c->rec->ports) {
			r = -ENOMEM;
			goto out;
		}
		c->rec->n_ports = n;
	}
	for (size_t i = 0; i < n; i++) {
		d->ports[i].num = nums[i];
		r = fill_port(c, d, ibdir, &d->ports[i]);
		if (r < 0)
			goto out;
	}
	r = 0;
out:
	rdp_free(nums);
	return r;
}

/* ---- the parent device ---- */

static bool is_pci_function(struct ctx *c, const char *dir)
{
	char path[RDP_SYSFS_PATH_MAX];

	if (!rdp_is_pci_address(rdp_path_basename(dir)))
		return false;
	if (path_fmt(path, sizeof(path), "%s/vendor", dir) < 0)
		return false;
	return rdp_sysfs_exists(c->sys, path);
}

/* "<module>.<name>.<id>" as auxiliary devices are named: mlx5_core.sf.2, ice.roce.0. */
static bool is_aux_name(const char *s)
{
	const char *d1 = strchr(s, '.'), *d2, *p;

	if (!d1 || d1 == s)
		return false;
	d2 = strchr(d1 + 1, '.');
	if (!d2 || d2 == d1 + 1 || strchr(d2 + 1, '.'))
		return false;
	for (p = d2 + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return p > d2 + 1;
}

static struct pf_info *pf_find(struct ctx *c, const char *path)
{
	for (size_t i = 0; i < c->n_pfs; i++)
		if (strcmp(c->pfs[i].path, path) == 0)
			return &c->pfs[i];
	return NULL;
}

/* Reads a PF once per discovery: its first netdev and where its virtfnN links point. */
static int pf_load(struct ctx *c, const char *pfdir, struct pf_info **ret)
{
	char path[RDP_SYSFS_PATH_MAX], target[RDP_SYSFS_PATH_MAX];
	struct pf_info *nv, pf = {};
	char **names = NULL;
	size_t n = 0;
	int r;

	pf.path = rdp_strdup(pfdir);
	if (!pf.path)
		return -ENOMEM;

	r = path_fmt(path, sizeof(path), "%s/net", pfdir);
	if (r >= 0)
		r = rdp_sysfs_list_dir(c->sys, path, RDP_MAX_NETDEVS, &names, &n);
	if (r == -ENOMEM)
		goto fail;
	if (r >= 0) {
		for (size_t i = 0; i < n; i++)
			if (rdp_is_ifname(names[i])) {
				snprintf(pf.netdev, sizeof(pf.netdev), "%s", names[i]);
				break;
			}
		rdp_sysfs_names_free(names, n);
	}
	names = NULL;
	n = 0;

	r = rdp_sysfs_list_dir(c->sys, pfdir, MAX_PF_ENTRIES, &names, &n);
	if (r == -ENOMEM)
		goto fail;
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct vf_link *nvf;
		unsigned int idx;
		char *canon;

		if (!rdp_is_numbered_name(names[i], "virtfn", &idx))
			continue;
		if (path_fmt(path, sizeof(path), "%s/%s", pfdir, names[i]) < 0)
			continue;
		r = rdp_sysfs_read_link(c->sys, path, target, sizeof(target));
		if (r < 0) {
			r = 0;
			continue;
		}
		/* VFs are siblings of the PF ("../0000:18:00.1"): no walk needed for those. */
		if (strncmp(target, "../", 3) == 0 && !strchr(target + 3, '/') &&
		    rdp_is_pci_address(target + 3)) {
			char parent[RDP_SYSFS_PATH_MAX];

			snprintf(parent, sizeof(parent), "%s", pfdir);
			path_dirname(parent);
			canon = *parent ? rdp_asprintf("%s/%s", parent, target + 3)
					: rdp_strdup(target + 3);
		} else {
			r = rdp_sysfs_resolve(c->sys, path, target, sizeof(target));
			if (r < 0) {
				r = 0;
				continue;
			}
			canon = rdp_strdup(target);
		}
		if (!canon) {
			r = -ENOMEM;
			break;
		}
		nvf = rdp_reallocarray(pf.vfs, pf.n_vfs + 1, sizeof(*nvf));
		if (!nvf) {
			rdp_free(canon);
			r = -ENOMEM;
			break;
		}
		pf.vfs = nvf;
		pf.vfs[pf.n_vfs++] = (struct vf_link){.index = idx, .path = canon};
		r = 0;
	}
	rdp_sysfs_names_free(names, n);
	if (r == -ENOMEM)
		goto fail;

	nv = rdp_reallocarray(c->pfs, c->n_pfs + 1, sizeof(*nv));
	if (!nv) {
		r = -ENOMEM;
		goto fail;
	}
	c->pfs = nv;
	c->pfs[c->n_pfs] = pf;
	*ret = &c->pfs[c->n_pfs++];
	return 0;
fail:
	for (size_t i = 0; i < pf.n_vfs; i++)
		rdp_free(pf.vfs[i].path);
	rdp_free(pf.vfs);
	rdp_free(pf.path);
	return r;
}

/*
 * PCI IDs that only virtual functions have (sysfs.md §3, §11). Cloud VMs (Azure, AWS) pass
 * such VFs through without their PF, so no physfn link says what they are.
 */
static bool is_vf_device_id(const char *vendor, const char *device)
{
	static const struct {
		const char *vendor, *device;
	} vf_ids[] = {
		{ "15b3", "1012" }, { "15b3", "1014" }, { "15b3", "1016" }, /* CIB, CX-4, CX-4 Lx */
		{ "15b3", "1018" }, { "15b3", "101a" }, { "15b3", "101c" }, /* CX-5, CX-5 Ex, CX-6 */
		{ "15b3", "101e" }, { "15b3", "a2d3" }, { "15b3", "1004" }, /* mlx5Gen, BF, CX-3 */
		{ "14e4", "1806" }, { "14e4", "1807" }, { "14e4", "1808" }, /* BCM575xx */
		{ "14e4", "1809" }, { "8086", "1889" },                     /* E810 (iavf) */
	};

	for (size_t i = 0; i < ARRAY_SIZE(vf_ids); i++)
		if (strcmp(vendor, vf_ids[i].vendor) == 0 && strcmp(device, vf_ids[i].device) == 0)
			return true;
	return false;
}

static int fill_vf(struct ctx *c, struct rdp_device *d, const char *pci)
{
	char path[RDP_SYSFS_PATH_MAX], pfdir[RDP_SYSFS_PATH_MAX];
	struct pf_info *pf;
	int r;

	if (path_fmt(path, sizeof(path), "%s/physfn", pci) < 0)
		return 0;
	r = rdp_sysfs_read_link(c->sys, path, pfdir, sizeof(pfdir));
	if (r == -ENOENT) {
		/* A VF whose PF is not visible (a VM), or not a VF at all. */
		d->is_vf = is_vf_device_id(d->vendor, d->device_id);
		return 0;
	}
	d->is_vf = true;
	if (r >= 0)
		r = rdp_sysfs_resolve(c->sys, path, pfdir, sizeof(pfdir));
	if (r < 0)
		return problem(d, "physfn: %s", r == -ENOENT ? "link dangling" : errstr(r));
	if (!rdp_is_pci_address(rdp_path_basename(pfdir)))
		return problem(d, "physfn: %s is not a PCI function", pfdir);

	snprintf(d->pf_pci_address, sizeof(d->pf_pci_address), "%s", rdp_path_basename(pfdir));
	pf = pf_find(c, pfdir);
	if (!pf) {
		r = pf_load(c, pfdir, &pf);
		if (r < 0)
			return r;
	}
	snprintf(d->pf_netdev, sizeof(d->pf_netdev), "%s", pf->netdev);
	if (c->rec)
		c->rec->pf = (long)(pf - c->pfs);
	for (size_t i = 0; i < pf->n_vfs; i++)
		if (strcmp(pf->vfs[i].path, pci) == 0) {
			d->vf_index = (int)pf->vfs[i].index;
			return 0;
		}
	return problem(d, "physfn: no virtfn link of PF %s points to this VF", d->pf_pci_address);
}

static int fill_pci(struct ctx *c, struct rdp_device *d, const char *pci)
{
	char buf[128], target[RDP_SYSFS_PATH_MAX], path[RDP_SYSFS_PATH_MAX];
	const char *drv;
	int r;

	snprintf(d->pci_address, sizeof(d->pci_address), "%s", rdp_path_basename(pci));

	r = read_attr(c, d, pci, "vendor", "vendor", false, buf, sizeof(buf));
	if (r > 0 && rdp_parse_hex_id(buf, d->vendor) < 0)
		r = unparsable(d, "vendor", buf);
	if (r < 0)
		return r;
	r = read_attr(c, d, pci, "device", "device", false, buf, sizeof(buf));
	if (r > 0 && rdp_parse_hex_id(buf, d->device_id) < 0)
		r = unparsable(d, "device", buf);
	if (r < 0)
		return r;
	r = read_attr(c, d, pci, "class", "class", false, buf, sizeof(buf));
	if (r > 0 && rdp_parse_pci_class(buf, d->pci_class) < 0)
		r = unparsable(d, "class", buf);
	if (r < 0)
		return r;
	r = read_attr(c, d, pci, "numa_node", "numa_node", true, buf, sizeof(buf));
	if (r > 0 && rdp_parse_numa_node(buf, &d->numa_node) < 0)
		r = unparsable(d, "numa_node", buf);
	if (r < 0)
		return r;

	if (path_fmt(path, sizeof(path), "%s/driver", pci) < 0)
		return 0;
	r = rdp_sysfs_read_link(c->sys, path, target, sizeof(target));
	if (r < 0) {
		r = problem(d, "driver: %s", r == -ENOENT ? "no driver bound" : errstr(r));
		if (r < 0)
			return r;
	} else {
		drv = rdp_path_basename(target);
		if (*drv && strlen(drv) < sizeof(d->driver))
			memcpy(d->driver, drv, strlen(drv) + 1);
	}
	return fill_vf(c, d, pci);
}

/*
 * Finds the parent of the ibdev at ibdir, then its PCI function and where its netdevs live.
 * pci and netdir get "" when there is none.
 */
static int find_parent(struct ctx *c, struct rdp_device *d, const char *ibdir, char *pci,
		       char *netdir, size_t size)
{
	char path[RDP_SYSFS_PATH_MAX], parent[RDP_SYSFS_PATH_MAX], up[RDP_SYSFS_PATH_MAX];
	int r;

	*pci = *netdir = '\0';
	if (path_fmt(path, sizeof(path), "%s/device", ibdir) < 0)
		return 0;
	r = rdp_sysfs_read_link(c->sys, path, parent, sizeof(parent));
	if (r == -ENOENT) {
		/*
		 * No device link: a virtual device (rxe, siw under devices/virtual), unless
		 * the ibdev sits in <PCI function>/infiniband/ and only its link is lost.
		 */
		snprintf(up, sizeof(up), "%s", ibdir);
		path_dirname(up);
		if (strcmp(rdp_path_basename(up), "infiniband") != 0)
			return 0;
		path_dirname(up);
		if (!is_pci_function(c, up))
			return 0;
		snprintf(pci, size, "%s", up);
		snprintf(netdir, size, "%s", up);
		return problem(d, "device link missing");
	}
	if (r >= 0)
		r = rdp_sysfs_resolve(c->sys, path, parent, sizeof(parent));
	if (r < 0)
		return problem(d, "device link %s", r == -ENOENT ? "dangling" : errstr(r));

	if (is_pci_function(c, parent)) {
		snprintf(pci, size, "%s", parent);
		snprintf(netdir, size, "%s", parent);
		return 0;
	}
	/* An auxiliary device (mlx5_core.sf.N, ice.roce.N, bnxt_en.rdma.N) under a PCI function. */
	snprintf(up, sizeof(up), "%s", parent);
	path_dirname(up);
	if (is_aux_name(rdp_path_basename(parent)) && is_pci_function(c, up)) {
		snprintf(pci, size, "%s", up);
		if (strstr(rdp_path_basename(parent), ".sf.")) {
			char num[16];
			long v;

			/* sfnum is what devlink was given: stable, unlike the aux index N. */
			r = read_attr(c, d, parent, "sfnum", "sfnum", false, num, sizeof(num));
			if (r < 0)
				return r;
			if (r > 0 && rdp_parse_long(num, 0, INT32_MAX, &v) == 0) {
				d->is_sf = true;
				d->sf_num = (unsigned int)v;
			}
			else if (r > 0 && (r = unparsable(d, "sfnum", num)) < 0)
				return r;
		}
		/* A sub-function has netdevs of its own; other aux devices share the PF's. */
		if (strstr(rdp_path_basename(parent), ".sf.") ||
		    (path_fmt(path, sizeof(path), "%s/net", parent) >= 0 &&
		     rdp_sysfs_exists(c->sys, path)))
			snprintf(netdir, size, "%s", parent);
		else
			snprintf(netdir, size, "%s", up);
		return 0;
	}
	snprintf(netdir, size, "%s", parent);
	return problem(d, "parent device %s is not a PCI function", parent);
}

/* ---- one device ---- */

/*
 * siw (soft-iWARP): node type RNIC, and siw's node_desc, which siw gives no way to change
 * (no modify_device), or no PCI function at all (siw on a netdev without a parent device).
 * Its `device` link is its netdev's parent, often the NIC's PCI function, whose driver is the
 * NIC's: only these attributes tell siw from a hardware iWARP device (irdma, cxgb4).
 */
static int find_siw(struct ctx *c, struct rdp_device *d, const char *ibdir, bool has_pci)
{
	char path[RDP_SYSFS_PATH_MAX], buf[128], name[32];
	int num, r;

	if (path_fmt(path, sizeof(path), "%s/node_type", ibdir) < 0)
		return 0;
	r = rdp_sysfs_read_attr(c->sys, path, buf, sizeof(buf));
	if (r <= 0 || rdp_parse_state(buf, &num, name, sizeof(name)) < 0 || num != 4)
		return 0; /* node_type is not judged here: only whether it says RNIC */
	if (!has_pci) {
		snprintf(d->rdma_driver, sizeof(d->rdma_driver), "siw");
		return 0;
	}
	if (path_fmt(path, sizeof(path), "%s/node_desc", ibdir) < 0)
		return 0;
	r = rdp_sysfs_read_attr(c->sys, path, buf, sizeof(buf));
	if (r > 0 && strcmp(buf, "Software iWARP stack") == 0)
		snprintf(d->rdma_driver, sizeof(d->rdma_driver), "siw");
	return 0;
}

static int discover_device(struct ctx *c, const char *name, struct rdp_device *d)
{
	char class[RDP_SYSFS_PATH_MAX], ibdir[RDP_SYSFS_PATH_MAX], buf[128];
	char pci[RDP_SYSFS_PATH_MAX], netdir[RDP_SYSFS_PATH_MAX], path[RDP_SYSFS_PATH_MAX];
	int r;

	snprintf(d->name, sizeof(d->name), "%s", name);
	d->numa_node = -1;
	d->vf_index = -1;
	/* Until fill_char_devices() judges it. */
	set_usability(d, RDP_UNUSABLE_INCOMPLETE,
		      "discovery did not reach its char devices (see problems)");

	snprintf(class, sizeof(class), "class/infiniband/%s", name);
	r = rdp_sysfs_resolve(c->sys, class, ibdir, sizeof(ibdir));
	if (r < 0) {
		char target[RDP_SYSFS_PATH_MAX], q[256];

		if (r == -ENOENT && rdp_sysfs_read_link(c->sys, class, target, sizeof(target)) >= 0)
			return problem(d, "%s: dangling link to %s", class,
				       rdp_printable(target, sizeof(q) - 8, q, sizeof(q)));
		return problem(d, "%s: %s", class, errstr(r));
	}
	if (c->rec && !(c->rec->ibdir = rdp_strdup(ibdir)))
		return -ENOMEM;

	r = read_attr(c, d, ibdir, "node_guid", "node_guid", false, buf, sizeof(buf));
	if (r > 0 && rdp_parse_guid(buf, d->node_guid) < 0)
		r = unparsable(d, "node_guid", buf);
	if (r < 0)
		return r;
	if (!(c->flags & RDP_DISCOVER_NO_FW_VER)) {
		r = read_attr(c, d, ibdir, "fw_ver", "fw_ver", false, d->fw_ver,
			      sizeof(d->fw_ver));
		if (r < 0)
			return r;
	}
	/* hca_type is a driver attribute (mlx4, mlx5, ...): absent on others, no problem. */
	r = read_attr(c, d, ibdir, "hca_type", "hca_type", true, d->hca_type, sizeof(d->hca_type));
	if (r < 0)
		return r;

	r = fill_ports(c, d, ibdir);
	if (r < 0)
		return r;

	r = find_parent(c, d, ibdir, pci, netdir, sizeof(pci));
	if (r < 0)
		return r;
	if (c->rec && (!(c->rec->pci = rdp_strdup(pci)) || !(c->rec->netdir = rdp_strdup(netdir))))
		return -ENOMEM;
	if (*pci) {
		d->pci_path = rdp_strdup(pci);
		if (!d->pci_path)
			return -ENOMEM;
		r = fill_pci(c, d, pci);
		if (r < 0)
			return r;
	}
	if (*netdir) {
		r = add_net_dir(c, d, netdir);
		if (r < 0)
			return r;
	}
	/* rxe names its netdev in `parent`. */
	if (path_fmt(path, sizeof(path), "%s/parent", ibdir) >= 0) {
		r = rdp_sysfs_read_attr(c->sys, path, buf, sizeof(buf));
		if (c->rec)
			c->rec->has_parent = r != -ENOENT;
		/* rxe's own attribute; with no device link: soft-RoCE (device.h). */
		if (r != -ENOENT && !*pci && !*netdir)
			snprintf(d->rdma_driver, sizeof(d->rdma_driver), "rdma_rxe");
		if (r > 0 && rdp_is_ifname(buf) && (r = add_netdev(d, buf)) < 0)
			return r;
	}
	r = find_siw(c, d, ibdir, *pci != '\0');
	if (r < 0)
		return r;
	if (d->n_netdevs > 1)
		qsort(d->netdevs, d->n_netdevs, sizeof(*d->netdevs), cmp_str);

	return fill_char_devices(c, d);
}

/* ---- the host ---- */

static int read_netns_mode(struct ctx *c)
{
	char buf[16], q[MAX_VALUE_IN_PROBLEM + 8];
	bool shared;
	int r;

	r = rdp_sysfs_read_attr(c->sys, "module/ib_core/parameters/netns_mode", buf, sizeof(buf));
	if (r == -ENOENT)
		return 0; /* ib_core not loaded, or built without the parameter: the default */
	if (r < 0)
		return host_problem(c->host, "module/ib_core/parameters/netns_mode: %s", errstr(r));
	if (rdp_parse_bool(buf, &shared) < 0)
		return host_problem(c->host,
				    "module/ib_core/parameters/netns_mode: unparsable value \"%s\"",
				    rdp_printable(buf, MAX_VALUE_IN_PROBLEM, q, sizeof(q)));
	c->host->netns_mode = shared ? RDP_NETNS_SHARED : RDP_NETNS_EXCLUSIVE;
	return 0;
}

/*
 * The host's rdma_cm, judged as the char devices are (against class/misc/rdma_cm/dev). Without
 * it no device is usable: each gets the reason.
 */
static int find_rdma_cm(struct ctx *c)
{
	const char *path = "/dev/infiniband/rdma_cm";
	char why[RDP_REASON_MAX];
	struct rdp_devnode_result res;
	dev_t want = read_devnum(c->sys, "class/misc", "rdma_cm");
	int r;

	if (rdp_devnode_check(c->dev, "infiniband/rdma_cm", want, &res) == RDP_DEVNODE_OK) {
		snprintf(c->host->rdma_cm, sizeof(c->host->rdma_cm), "%s", path);
		c->host->rdma_cm_devnum = want;
		return 0;
	}
	if (c->host->n_devices == 0)
		return 0;
	rdp_devnode_reason(&res, path, "rdma_cm", want, why, sizeof(why));
	r = host_problem(c->host, "%s", why);
	if (r < 0)
		return r;
	for (size_t i = 0; i < c->host->n_devices; i++) {
		struct rdp_device *d = &c->host->devices[i];
		size_t n = strlen(d->unusable_reason), k;

		if (d->usability == RDP_USABLE) {
			set_usability(d, RDP_UNUSABLE_NO_RDMA_CM, why);
		} else if (n + 3 < sizeof(d->unusable_reason)) {
			/* "<first reason>; <rdma_cm's>", truncated to fit. */
			memcpy(d->unusable_reason + n, "; ", 2);
			n += 2;
			k = strnlen(why, sizeof(d->unusable_reason) - n - 1);
			memcpy(d->unusable_reason + n, why, k);
			d->unusable_reason[n + k] = '\0';
		}
	}
	return 0;
}

struct rdp_discovery_record *rdp_discovery_record_free(struct rdp_discovery_record *rec)
{
	if (!rec)
		return NULL;
	for (size_t i = 0; i < rec->n_devices; i++) {
		struct rdp_discovery_device *d = &rec->devices[i];

		for (size_t j = 0; j < d->n_ports; j++) {
			rdp_free(d->ports[j].gid_slots);
			rdp_free(d->ports[j].valid_slots);
		}
		rdp_free(d->ports);
		rdp_free(d->ibdir);
		rdp_free(d->pci);
		rdp_free(d->netdir);
	}
	rdp_free(rec->devices);
	for (size_t i = 0; i < rec->n_pf_dirs; i++)
		rdp_free(rec->pf_dirs[i]);
	rdp_free(rec->pf_dirs);
	rdp_free(rec);
	return NULL;
}

/* Moves the PF directories found into the record, in c->pfs order (rdp_discovery_device.pf). */
static int record_pfs(struct ctx *c, struct rdp_discovery_record *rec)
{
	if (c->n_pfs == 0)
		return 0;
	rec->pf_dirs = rdp_calloc(c->n_pfs, sizeof(*rec->pf_dirs));
	if (!rec->pf_dirs)
		return -ENOMEM;
	for (size_t i = 0; i < c->n_pfs; i++)
		rec->pf_dirs[i] = TAKE_PTR(c->pfs[i].path);
	rec->n_pf_dirs = c->n_pfs;
	return 0;
}

static int discover(int sysfs_fd, int dev_fd, unsigned int flags, struct rdp_host **ret,
		    struct rdp_discovery_record **ret_rec)
{
	struct ctx c = {.sys = sysfs_fd, .dev = dev_fd, .flags = flags};
	struct rdp_discovery_record *rec = NULL;
	char **names = NULL;
	size_t n = 0, k = 0;
	int r;

	c.host = rdp_calloc(1, sizeof(*c.host));
	if (!c.host)
		return -ENOMEM;
	if (ret_rec) {
		rec = rdp_calloc(1, sizeof(*rec));
		if (!rec) {
			r = -ENOMEM;
			goto fail;
		}
	}

	r = rdp_sysfs_list_dir(sysfs_fd, "class/infiniband", RDP_MAX_DEVICES, &names, &n);
	if (r == -ENOMEM)
		goto fail;
	if (r < 0 && r != -ENOENT) {
		r = host_problem(c.host, "class/infiniband: %s", errstr(r));
		if (r < 0)
			goto fail;
	}

	r = build_cdev_index(&c);
	if (r < 0)
		goto fail;

	if (n > 0) {
		c.host->devices = rdp_calloc(n, sizeof(*c.host->devices));
		if (!c.host->devices) {
			r = -ENOMEM;
			goto fail;
		}
		if (rec) {
			rec->devices = rdp_calloc(n, sizeof(*rec->devices));
			if (!rec->devices) {
				r = -ENOMEM;
				goto fail;
			}
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (strlen(names[i]) >= RDP_IBDEV_NAME_MAX) {
			r = host_problem(c.host, "class/infiniband: skipped a name of %zu bytes",
					 strlen(names[i]));
			if (r < 0)
				goto fail;
			continue;
		}
		/* Counted before it is filled, so that a failure frees what it holds. */
		c.host->n_devices = ++k;
		if (rec) {
			rec->n_devices = k;
			c.rec = &rec->devices[k - 1];
			c.rec->pf = -1;
		}
		r = discover_device(&c, names[i], &c.host->devices[k - 1]);
		if (r < 0)
			goto fail;
	}

	r = read_netns_mode(&c);
	if (r < 0)
		goto fail;
	r = find_rdma_cm(&c);
	if (r < 0)
		goto fail;
	if (rec && (r = record_pfs(&c, rec)) < 0)
		goto fail;

	rdp_sysfs_names_free(names, n);
	ctx_done(&c);
	*ret = c.host;
	if (ret_rec)
		*ret_rec = rec;
	return 0;
fail:
	rdp_sysfs_names_free(names, n);
	ctx_done(&c);
	rdp_host_free(c.host);
	rdp_discovery_record_free(rec);
	return r;
}

int rdp_discover_at(int sysfs_fd, int dev_fd, struct rdp_host **ret)
{
	return discover(sysfs_fd, dev_fd, 0, ret, NULL);
}

int rdp_discover_record_at(int sysfs_fd, int dev_fd, struct rdp_host **ret,
			   struct rdp_discovery_record **ret_rec)
{
	return discover(sysfs_fd, dev_fd, 0, ret, ret_rec);
}

int rdp_discover_flags_at(int sysfs_fd, int dev_fd, unsigned int flags, struct rdp_host **ret,
			  struct rdp_discovery_record **ret_rec)
{
	return discover(sysfs_fd, dev_fd, flags, ret, ret_rec);
}

int rdp_discover(const char *sysfs_root, const char *dev_root, struct rdp_host **ret)
{
	_cleanup_close_ int sys = -1, dev = -1;
	int r;

	r = rdp_sysfs_open_roots(sysfs_root, dev_root, &sys, &dev);
	if (r < 0)
		return r;
	return rdp_discover_at(sys, dev, ret);
}
