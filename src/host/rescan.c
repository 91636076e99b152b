/* SPDX-License-Identifier: MIT */
/*
 * The cheap path of a rescan proves "a full discovery now would return the previous model"
 * or gives up; it never builds a model itself. Giving up costs one full discovery, so every
 * doubt (a failed read, a value that would make a problem, more netdevs than the model
 * keeps) is a reason to give up rather than to reason about what discovery would have done.
 *
 * Why the structural checks are enough: the kernel creates the class/infiniband entry when it
 * registers an ib device and removes it when it unregisters it; a re-registration (driver
 * rebind, firmware reset, rename, netns move) makes a new kernfs node, which has a new inode
 * number. So an entry with the same name, inode number and link target is the same
 * registration, and what is fixed for a registration (see rescan.h) need not be read again.
 * The same holds for the uverbs/umad/issm entries that discovery maps to ib devices. Fake
 * trees on disk filesystems may reuse inode numbers; the link targets are compared for them.
 */
#define _GNU_SOURCE
#include "rescan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "devnode.h"
#include "discovery.h"
#include "macro.h"
#include "sysfs.h"

#define DEV_DIR "infiniband" /* below the dev root */
#define DEV_PREFIX "/dev/infiniband/"

/* ---- snapshots of the class directories ---- */

struct snap_entry {
	char *name;
	uint64_t ino;
	char *link; /* class/infiniband: the link's text; NULL when not a symlink */
	unsigned long seen; /* the scan generation that saw it */
};

struct snap_dir {
	int err; /* 0, or why the directory could not be listed (-ENOENT: absent) */
	bool links; /* compare link texts too */
	bool unusable; /* something went wrong that the cheap path cannot judge */
	struct snap_entry *v; /* sorted by strcmp() of name */
	size_t n, cap;
};

enum { SNAP_IB, SNAP_VERBS, SNAP_MAD, SNAP_MAX };

static const char *const snap_paths[SNAP_MAX] = {
	[SNAP_IB] = "class/infiniband",
	[SNAP_VERBS] = "class/infiniband_verbs",
	[SNAP_MAD] = "class/infiniband_mad",
};

/* A /dev/infiniband name the model depends on, whether it must exist, and its number. */
struct watch {
	const char *name; /* points into the host model, or a literal */
	bool want;
	dev_t num; /* the number sysfs named for it (0: none) */
	unsigned long seen;
};

/* One full discovery and what the cheap path needs to check it later. */
struct cache {
	struct rdp_host *host;
	struct rdp_discovery_record *rec;
	struct snap_dir snap[SNAP_MAX];
	struct watch *watch; /* sorted by strcmp() of name */
	size_t n_watch;
	char (*pf_netdev)[RDP_IFNAME_MAX]; /* per rec->pf_dirs: read during a cheap scan */
	unsigned long *pf_gen; /* the scan generation pf_netdev[i] was read in */
	bool fast_ok; /* the cheap path may be tried on this model */
};

struct rdp_scanner {
	int sys, dev;
	unsigned int flags; /* enum rdp_discover_flags, for every discovery */
	struct cache c;
	unsigned long gen;
	struct rdp_scanner_stats stats;
};

static void snap_done(struct snap_dir *d)
{
	for (size_t i = 0; i < d->n; i++) {
		rdp_free(d->v[i].name);
		rdp_free(d->v[i].link);
	}
	rdp_free(d->v);
	*d = (struct snap_dir){0};
}

static void cache_done(struct cache *c)
{
	rdp_host_free(c->host);
	rdp_discovery_record_free(c->rec);
	for (size_t i = 0; i < SNAP_MAX; i++)
		snap_done(&c->snap[i]);
	rdp_free(c->watch);
	rdp_free(c->pf_netdev);
	rdp_free(c->pf_gen);
	*c = (struct cache){0};
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct snap_entry *)a)->name, ((const struct snap_entry *)b)->name);
}

static int cmp_name_entry(const void *key, const void *e)
{
	return strcmp(key, ((const struct snap_entry *)e)->name);
}

static int snap_add(int dirfd, const char *name, uint64_t ino, unsigned char type, void *userdata)
{
	struct snap_dir *d = userdata;
	char target[RDP_SYSFS_PATH_MAX];
	struct snap_entry e = {.ino = ino};
	int r;

	(void)type;
	if (d->links) {
		r = rdp_sysfs_readlinkat(dirfd, name, target, sizeof(target));
		if (r >= 0 && !(e.link = rdp_strdup(target)))
			return -ENOMEM;
		if (r < 0 && r != -EINVAL)
			d->unusable = true;
	}
	if (d->n == d->cap) {
		size_t ncap = d->cap ? d->cap * 2 : 16;
		struct snap_entry *nv = rdp_reallocarray(d->v, ncap, sizeof(*nv));

		if (!nv) {
			rdp_free(e.link);
			return -ENOMEM;
		}
		d->v = nv;
		d->cap = ncap;
	}
	e.name = rdp_strdup(name);
	if (!e.name) {
		rdp_free(e.link);
		return -ENOMEM;
	}
	d->v[d->n++] = e;
	return 0;
}

static int snap_take(int sys, const char *path, bool links, struct snap_dir *d)
{
	int r;

	d->links = links;
	r = rdp_sysfs_scan_dir(sys, path, snap_add, d);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		/* Judge only a clean absence; partial listings are for full discoveries. */
		for (size_t i = 0; i < d->n; i++) {
			rdp_free(d->v[i].name);
			rdp_free(d->v[i].link);
		}
		d->n = 0;
		d->err = r;
		d->unusable = r != -ENOENT;
		return 0;
	}
	if (d->n > 1)
		qsort(d->v, d->n, sizeof(*d->v), cmp_entry);
	return 0;
}

struct snap_check {
	const struct snap_dir *d;
	unsigned long gen;
	size_t seen;
};

static int snap_check_one(int dirfd, const char *name, uint64_t ino, unsigned char type,
			  void *userdata)
{
	struct snap_check *k = userdata;
	struct snap_entry *e;
	char target[RDP_SYSFS_PATH_MAX];
	int r;

	(void)type;
	if (k->d->n == 0)
		return 1;
	e = bsearch(name, k->d->v, k->d->n, sizeof(*e), cmp_name_entry);
	if (!e || e->ino != ino || e->seen == k->gen)
		return 1;
	if (k->d->links) {
		r = rdp_sysfs_readlinkat(dirfd, name, target, sizeof(target));
		if (r == -EINVAL ? e->link != NULL : r < 0 || !e->link || strcmp(e->link, target))
			return 1;
	}
	e->seen = k->gen;
	k->seen++;
	return 0;
}

/* True when the directory holds exactly the entries of its snapshot. */
static bool snap_same(int sys, const char *path, const struct snap_dir *d, unsigned long gen)
{
	struct snap_check k = {.d = d, .gen = gen};
	int r;

	r = rdp_sysfs_scan_dir(sys, path, snap_check_one, &k);
	if (d->err)
		return r == d->err;
	return r == 0 && k.seen == d->n;
}

/* ---- the cheap path ---- */

/* Up to RDP_MAX_NETDEVS distinct names; more would need discovery's order to know which stay. */
struct netset {
	char v[RDP_MAX_NETDEVS][RDP_IFNAME_MAX];
	size_t n;
	bool overflow;
};

static void netset_add(struct netset *ns, const char *name)
{
	for (size_t i = 0; i < ns->n; i++)
		if (strcmp(ns->v[i], name) == 0)
			return;
	size_t len = strlen(name);

	/* Too many, or a name no netdev can have: let a full discovery judge. */
	if (ns->n == RDP_MAX_NETDEVS || len >= RDP_IFNAME_MAX) {
		ns->overflow = true;
		return;
	}
	memcpy(ns->v[ns->n++], name, len + 1);
}

static int cmp_ifname(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* The same names as the model's (sorted, distinct) netdevs. */
static bool netset_same(struct netset *ns, const struct rdp_device *d)
{
	if (ns->overflow || ns->n != d->n_netdevs)
		return false;
	if (ns->n > 1)
		qsort(ns->v, ns->n, sizeof(ns->v[0]), cmp_ifname);
	for (size_t i = 0; i < ns->n; i++)
		if (strcmp(ns->v[i], d->netdevs[i]) != 0)
			return false;
	return true;
}

/* Reads the attribute at the formatted path. Returns its length or a negative errno. */
static _printf_(4, 5) int read_fmt(int sys, char *buf, size_t size, const char *fmt, ...)
{
	char path[RDP_SYSFS_PATH_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	return rdp_sysfs_read_attr(sys, path, buf, size);
}

/* A state attribute reads as it did ("4: ACTIVE"), with discovery's buffer sizes. */
static bool state_same(int sys, const char *ibdir, unsigned int port, const char *attr, int num,
		       const char *name, size_t name_size)
{
	char buf[128], nm[32];
	int v;

	if (name_size > sizeof(nm) ||
	    read_fmt(sys, buf, sizeof(buf), "%s/ports/%u/%s", ibdir, port, attr) < 0 ||
	    rdp_parse_state(buf, &v, nm, name_size) < 0)
		return false;
	return v == num && strcmp(nm, name) == 0;
}

struct slot_walk {
	const struct rdp_discovery_port *rp;
	size_t n;
};

static int cmp_slot(const void *key, const void *e)
{
	unsigned int x = *(const unsigned int *)key, y = *(const unsigned int *)e;

	return x < y ? -1 : x > y;
}

static int slot_entry(int dirfd, const char *name, uint64_t ino, unsigned char type,
		      void *userdata)
{
	struct slot_walk *w = userdata;
	unsigned int slot;
	long v;

	(void)dirfd;
	(void)ino;
	(void)type;
	/* Names that are no slot numbers are skipped by discovery too. */
	if (name[0] == '-' || rdp_parse_long(name, 0, 65535, &v) < 0)
		return 0;
	slot = (unsigned int)v;
	if (!w->rp->n_gid_slots ||
	    !bsearch(&slot, w->rp->gid_slots, w->rp->n_gid_slots, sizeof(slot), cmp_slot))
		return 1;
	w->n++;
	return 0;
}

/*
 * gid_attrs/types lists the slots discovery read. A kernel's table has a fixed size, but in
 * a tree an empty slot may be a missing file that appears later.
 */
static bool gid_slots_same(int sys, const char *ibdir, const struct rdp_port *p,
			   const struct rdp_discovery_port *rp)
{
	char path[RDP_SYSFS_PATH_MAX];
	struct slot_walk w = {.rp = rp};
	int r;

	if ((size_t)snprintf(path, sizeof(path), "%s/ports/%u/gid_attrs/types", ibdir, p->num) >=
	    sizeof(path))
		return false;
	r = rdp_sysfs_scan_dir(sys, path, slot_entry, &w);
	if (!rp->gids_listed)
		return r < 0; /* as discovery, which learnt nothing from the table */
	return r == 0 && w.n == rp->n_gid_slots;
}

/*
 * An Ethernet port's GID table, read as discovery reads it: the netdevs named by valid slots
 * go to ns, and the first RoCE v2 slot holding an IPv4-mapped GID must be the model's.
 */
static bool gids_same(int sys, const char *ibdir, const struct rdp_port *p,
		      const struct rdp_discovery_port *rp, struct netset *ns)
{
	char type[32], ndev[64], gidbuf[64];
	int index = -1;

	if (!gid_slots_same(sys, ibdir, p, rp))
		return false;
	if (!rp->gids_listed)
		return p->roce_v2_ipv4_gid_index < 0;
	for (size_t i = 0; i < rp->n_gid_slots; i++) {
		unsigned int slot = rp->gid_slots[i];
		uint8_t gid[16];

		/* An empty slot fails (EINVAL; an empty file in fixtures): skipped, as discovery.
		 */
		if (read_fmt(sys, type, sizeof(type), "%s/ports/%u/gid_attrs/types/%u", ibdir,
			     p->num, slot) <= 0)
			continue;
		if (read_fmt(sys, ndev, sizeof(ndev), "%s/ports/%u/gid_attrs/ndevs/%u", ibdir,
			     p->num, slot) > 0 &&
		    rdp_is_ifname(ndev))
			netset_add(ns, ndev);
		if (index >= 0 || strcmp(type, "RoCE v2") != 0)
			continue;
		if (read_fmt(sys, gidbuf, sizeof(gidbuf), "%s/ports/%u/gids/%u", ibdir, p->num,
			     slot) <= 0)
			continue;
		if (rdp_parse_gid(gidbuf, gid) == 0 && rdp_gid_is_ipv4_mapped(gid))
			index = (int)slot;
	}
	return index == p->roce_v2_ipv4_gid_index;
}

/*
 * RDP_DISCOVER_NO_GID_INDEX: the netdevs of the slots that named one at the last full
 * discovery, read again (ndevs/<i> only) into ns. Slots that filled since are covered by
 * uppers_known(), not read. Returns false when the table cannot be read at all.
 */
struct ndev_walk {
	struct netset *ns;
	size_t n;
};

/* Every slot of the table, as discovery's scan_gid_ndevs() reads it. */
static int ndev_entry(int dirfd, const char *name, uint64_t ino, unsigned char type,
		      void *userdata)
{
	struct ndev_walk *w = userdata;
	char ndev[64];
	long v;

	(void)ino;
	(void)type;
	if (name[0] == '-' || rdp_parse_long(name, 0, 65535, &v) < 0)
		return 0;
	if (++w->n > 4096) /* discovery's MAX_GIDS: a problem there */
		return 1;
	if (rdp_sysfs_read_attr_at(dirfd, name, ndev, sizeof(ndev)) > 0 && rdp_is_ifname(ndev))
		netset_add(w->ns, ndev);
	return 0;
}

static bool gid_ndevs_read(int sys, const char *ibdir, const struct rdp_port *p,
			   const struct rdp_discovery_port *rp, bool all, struct netset *ns)
{
	char path[RDP_SYSFS_PATH_MAX], ndev[64], name[16];
	_cleanup_close_ int dfd = -1;

	if ((size_t)snprintf(path, sizeof(path), "%s/ports/%u/gid_attrs/ndevs", ibdir, p->num) >=
	    sizeof(path))
		return false;
	if (all) {
		struct ndev_walk w = {.ns = ns};
		int r = rdp_sysfs_scan_dir(sys, path, ndev_entry, &w);

		/* as discovery: a table that cannot be listed yields nothing */
		return rp->gids_listed ? r == 0 : r < 0;
	}
	if (!rp->gids_listed)
		return true; /* the table could not be listed: discovery learnt nothing either */
	if (!rp->n_valid_slots)
		return true;
	dfd = rdp_sysfs_open(sys, path, O_RDONLY | O_DIRECTORY);
	if (dfd < 0)
		return false;
	for (size_t i = 0; i < rp->n_valid_slots; i++) {
		snprintf(name, sizeof(name), "%u", rp->valid_slots[i]);
		if (rdp_sysfs_read_attr_at(dfd, name, ndev, sizeof(ndev)) > 0 && rdp_is_ifname(ndev))
			netset_add(ns, ndev);
	}
	return true;
}

struct upper_walk {
	const struct rdp_device *d;
	bool unknown; /* an upper device the model does not name */
};

static int upper_entry(int dirfd, const char *name, uint64_t ino, unsigned char type,
		       void *userdata)
{
	struct upper_walk *w = userdata;
	const char *up;

	(void)dirfd;
	(void)ino;
	(void)type;
	if (strncmp(name, "upper_", 6) != 0)
		return 0;
	up = name + 6;
	for (size_t i = 0; i < w->d->n_netdevs; i++)
		if (strcmp(w->d->netdevs[i], up) == 0)
			return 0;
	w->unknown = true;
	return 1;
}

/*
 * The kernel gives a RoCE port's GID table entries only for the port's netdev and the devices
 * stacked on it (VLAN, macvlan, bond master; roce_gid_mgmt.c: is_eth_port_of_netdev_filter,
 * is_ndev_for_default_gid_filter), each visible as an upper_<name> link in the lower
 * device's directory. When every upper device of every netdev of the model is in the model,
 * a slot that filled since the last full discovery can only name a netdev the model has
 * already: the netdevs are exact without reading the empty slots.
 *
 * A netdev's directory is <parent>/net/<name>, which class/net/<name> links to; for the
 * netdevs this scan found in the device's net/ directory netdir (in_net) that path is used
 * as it is, which spares resolving the class link.
 */
static bool uppers_known(int sys, const struct rdp_device *d, const char *netdir,
			 const char (*in_net)[RDP_IFNAME_MAX], size_t n_in_net)
{
	char path[RDP_SYSFS_PATH_MAX];

	for (size_t i = 0; i < d->n_netdevs; i++) {
		struct upper_walk w = {.d = d};
		bool local = false;
		size_t n;
		int r;

		for (size_t j = 0; j < n_in_net && !local; j++)
			local = strcmp(in_net[j], d->netdevs[i]) == 0;
		n = local ? (size_t)snprintf(path, sizeof(path), "%s/net/%s", netdir, d->netdevs[i])
			  : (size_t)snprintf(path, sizeof(path), "class/net/%s", d->netdevs[i]);
		if (n >= sizeof(path))
			return false;
		r = rdp_sysfs_scan_dir(sys, path, upper_entry, &w);
		if (w.unknown || (r < 0 && r != -ENOENT))
			return false;
	}
	return true;
}

struct net_walk {
	struct netset *ns; /* add valid names here, or */
	char *first; /* keep the first valid name in natural order (RDP_IFNAME_MAX) */
	size_t n; /* entries seen */
};

static int net_entry(int dirfd, const char *name, uint64_t ino, unsigned char type, void *userdata)
{
	struct net_walk *w = userdata;

	(void)dirfd;
	(void)ino;
	(void)type;
	w->n++;
	if (!rdp_is_ifname(name))
		return 0;
	if (w->ns)
		netset_add(w->ns, name);
	else if (!*w->first || strverscmp(name, w->first) < 0)
		snprintf(w->first, RDP_IFNAME_MAX, "%s", name);
	return 0;
}

/* Lists <dir>/net into w. Returns 0 or a negative errno. */
static int list_net(int sys, const char *dir, struct net_walk *w)
{
	char path[RDP_SYSFS_PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/net", dir) >= sizeof(path))
		return -ENAMETOOLONG;
	return rdp_sysfs_scan_dir(sys, path, net_entry, w);
}

/* A VF's PF: its first netdev, once per scan, as discovery's pf_load() finds it. */
static const char *pf_netdev(struct rdp_scanner *s, size_t pf)
{
	char *first = s->c.pf_netdev[pf];
	struct net_walk w = {.first = first};

	if (s->c.pf_gen[pf] == s->gen)
		return first;
	s->c.pf_gen[pf] = s->gen;
	first[0] = '\0';
	/* discovery lists at most RDP_MAX_NETDEVS entries and takes none when there are more */
	if (list_net(s->sys, s->c.rec->pf_dirs[pf], &w) < 0 || w.n > RDP_MAX_NETDEVS)
		first[0] = '\0';
	return first;
}

/* The model's netdevs are exactly the names of ns (distinct names). */
static bool netset_covers(const struct netset *ns, const struct rdp_device *d)
{
	if (ns->overflow || ns->n != d->n_netdevs)
		return false;
	for (size_t i = 0; i < ns->n; i++) {
		bool found = false;

		for (size_t j = 0; j < d->n_netdevs && !found; j++)
			found = strcmp(ns->v[i], d->netdevs[j]) == 0;
		if (!found)
			return false;
	}
	return true;
}

/*
 * RDP_DISCOVER_NO_GID_INDEX: the netdevs the GID tables of d's Ethernet ports add to ns (which
 * holds those of net/ and `parent` already).
 *
 * Discovery's netdevs are N = NET | PARENT | GID. When uppers_known(), a slot can name only a
 * netdev of the model (see there), so GID (now) is within the model's netdevs. If NET | PARENT
 * (read in this scan) are already all the model's netdevs, N is the model's whatever the
 * slots say: none is read. This is the common case: the slots name the port's own netdev,
 * which net/ lists. Otherwise (bond0 of a RoCE LAG, a VLAN with an address) the slots that
 * named a netdev at the last full discovery are read again; with an unknown upper device,
 * every slot is.
 */
static bool gid_netdevs(struct rdp_scanner *s, const struct rdp_device *d,
			const struct rdp_discovery_device *rd, struct netset *ns, size_t n_net)
{
	bool all_slots;

	all_slots = !uppers_known(s->sys, d, rd->netdir, ns->v, n_net);
	if (!all_slots && d->n_netdevs < RDP_MAX_NETDEVS && netset_covers(ns, d))
		return true;
	for (size_t i = 0; i < d->n_ports; i++)
		if (d->ports[i].link_layer == RDP_LINK_ETHER &&
		    !gid_ndevs_read(s->sys, rd->ibdir, &d->ports[i], &rd->ports[i], all_slots, ns))
			return false;
	return true;
}

/* Whether a full discovery of this one device would give d again (d has no problems). */
static bool device_same(struct rdp_scanner *s, const struct rdp_device *d,
			const struct rdp_discovery_device *rd)
{
	char buf[128];
	struct netset ns;
	bool roce = false;
	size_t n_net;
	int r;

	ns.n = 0;
	ns.overflow = false;
	if (!rd->ibdir || !rd->pci || !rd->netdir || rd->n_ports != d->n_ports)
		return false;

	if (!(s->flags & RDP_DISCOVER_NO_FW_VER) &&
	    (read_fmt(s->sys, buf, sizeof(d->fw_ver), "%s/fw_ver", rd->ibdir) < 0 ||
	     strcmp(buf, d->fw_ver) != 0))
		return false;

	for (size_t i = 0; i < d->n_ports; i++) {
		const struct rdp_port *p = &d->ports[i];

		if (!state_same(s->sys, rd->ibdir, p->num, "state", p->state, p->state_name,
				sizeof(p->state_name)))
			return false;
		if (!(s->flags & RDP_DISCOVER_NO_LINK_DETAILS)) {
			if (!state_same(s->sys, rd->ibdir, p->num, "phys_state", p->phys_state,
					p->phys_state_name, sizeof(p->phys_state_name)))
				return false;
			/* p->rate is one that parsed: an equal one parses too */
			if (read_fmt(s->sys, buf, sizeof(buf), "%s/ports/%u/rate", rd->ibdir,
				     p->num) < 0 ||
			    strcmp(buf, p->rate) != 0)
				return false;
		}
		if (p->link_layer != RDP_LINK_ETHER || (s->flags & RDP_DISCOVER_NO_GID_TABLE))
			continue;
		if (s->flags & RDP_DISCOVER_NO_GID_INDEX)
			roce = true; /* after net/ and parent: see gid_netdevs() */
		else if (!gids_same(s->sys, rd->ibdir, p, &rd->ports[i], &ns))
			return false;
	}

	if (*rd->pci) {
		int numa = -1;

		r = read_fmt(s->sys, buf, sizeof(buf), "%s/numa_node", rd->pci);
		if ((r < 0 && r != -ENOENT) || (r >= 0 && rdp_parse_numa_node(buf, &numa) < 0) ||
		    numa != d->numa_node)
			return false;
	}

	if (*rd->netdir) {
		struct net_walk w = {.ns = &ns};

		r = list_net(s->sys, rd->netdir, &w);
		/* More entries than discovery lists is a problem there; any error is doubt. */
		if ((r < 0 && r != -ENOENT) || w.n > RDP_MAX_NETDEVS)
			return false;
	}
	/* With RDP_DISCOVER_NO_GID_INDEX (roce), ns was empty before: ns.v[0, n_net) is net/ */
	n_net = ns.n;
	if (rd->has_parent) {
		r = read_fmt(s->sys, buf, sizeof(buf), "%s/parent", rd->ibdir);
		if (r > 0 && rdp_is_ifname(buf))
			netset_add(&ns, buf);
		else if (r < 0 && r != -ENOENT)
			return false;
	}
	if (roce && !gid_netdevs(s, d, rd, &ns, n_net))
		return false;
	if (!netset_same(&ns, d))
		return false;

	if (rd->pf >= 0 && strcmp(pf_netdev(s, (size_t)rd->pf), d->pf_netdev) != 0)
		return false;
	return true;
}

static int cmp_watch(const void *a, const void *b)
{
	return strcmp(((const struct watch *)a)->name, ((const struct watch *)b)->name);
}

static int cmp_name_watch(const void *key, const void *w)
{
	return strcmp(key, ((const struct watch *)w)->name);
}

struct dev_walk {
	struct rdp_scanner *s;
	size_t found;
};

static int dev_entry(int dirfd, const char *name, uint64_t ino, unsigned char type, void *userdata)
{
	struct dev_walk *w = userdata;
	struct watch *e;
	char rel[RDP_DEVPATH_MAX + 16];

	(void)dirfd;
	(void)ino;
	e = bsearch(name, w->s->c.watch, w->s->c.n_watch, sizeof(*e), cmp_name_watch);
	if (!e)
		return 0;
	/*
	 * Judged as discovery judges it (devnode.h): one fstatat for a char device, the full
	 * check (resolving links inside the root) for anything else.
	 */
	if (type == DT_CHR) {
		struct stat st;

		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISCHR(st.st_mode) ||
		    (e->num != 0 && st.st_rdev != e->num))
			return 0;
	} else {
		snprintf(rel, sizeof(rel), DEV_DIR "/%s", name);
		if (rdp_devnode_check(w->s->dev, rel, e->num, NULL) != RDP_DEVNODE_OK)
			return 0;
	}
	if (e->seen != w->s->gen) {
		e->seen = w->s->gen;
		w->found++;
	}
	return 0;
}

/* The char devices and rdma_cm exist exactly where the model says they do. */
static bool dev_same(struct rdp_scanner *s)
{
	struct dev_walk w = {.s = s};
	size_t want = 0;
	int r;

	r = rdp_sysfs_scan_dir(s->dev, DEV_DIR, dev_entry, &w);
	if (r < 0 && r != -ENOENT)
		return false;
	for (size_t i = 0; i < s->c.n_watch; i++) {
		bool seen = s->c.watch[i].seen == s->gen;

		if (seen != s->c.watch[i].want)
			return false;
		want += seen;
	}
	return want == w.found;
}

static bool netns_same(struct rdp_scanner *s)
{
	enum rdp_netns_mode m = RDP_NETNS_SHARED;
	char buf[16];
	bool shared;
	int r;

	r = rdp_sysfs_read_attr(s->sys, "module/ib_core/parameters/netns_mode", buf, sizeof(buf));
	if (r >= 0) {
		if (rdp_parse_bool(buf, &shared) < 0)
			return false;
		m = shared ? RDP_NETNS_SHARED : RDP_NETNS_EXCLUSIVE;
	} else if (r != -ENOENT) {
		return false;
	}
	return m == s->c.host->netns_mode;
}

/* True when a full discovery now would return the model of s->c. Allocates nothing. */
static bool host_same(struct rdp_scanner *s)
{
	const struct rdp_host *h = s->c.host;

	s->gen++;
	for (size_t i = 0; i < SNAP_MAX; i++)
		if (!snap_same(s->sys, snap_paths[i], &s->c.snap[i], s->gen))
			return false;
	if (!netns_same(s) || !dev_same(s))
		return false;
	for (size_t i = 0; i < h->n_devices; i++)
		if (!device_same(s, &h->devices[i], &s->c.rec->devices[i]))
			return false;
	return true;
}

/* ---- full discoveries ---- */

static bool host_has_problems(const struct rdp_host *h)
{
	if (h->n_problems)
		return true;
	for (size_t i = 0; i < h->n_devices; i++)
		if (h->devices[i].n_problems)
			return true;
	return false;
}

/* Whether the cheap path can judge c's model; fills what it needs. Returns 0 or -ENOMEM. */
static int cache_prepare(struct cache *c)
{
	const struct rdp_host *h = c->host;
	const struct snap_dir *ib = &c->snap[SNAP_IB];
	size_t n = 1;

	c->fast_ok = false;
	if (host_has_problems(h) || c->rec->n_devices != h->n_devices || ib->n != h->n_devices)
		return 0;
	for (size_t i = 0; i < SNAP_MAX; i++)
		if (c->snap[i].unusable)
			return 0;
	/* Discovery saw the devices the snapshot taken before it saw (none came or went). */
	for (size_t i = 0; i < h->n_devices; i++)
		if (!bsearch(h->devices[i].name, ib->v, ib->n, sizeof(*ib->v), cmp_name_entry))
			return 0;

	for (size_t i = 0; i < h->n_devices; i++)
		n += h->devices[i].n_char_devices;
	c->watch = rdp_calloc(n, sizeof(*c->watch));
	if (!c->watch)
		return -ENOMEM;
	c->watch[c->n_watch++] = (struct watch){
		.name = "rdma_cm", .want = h->rdma_cm[0] != '\0', .num = h->rdma_cm_devnum};
	for (size_t i = 0; i < h->n_devices; i++) {
		const struct rdp_device *d = &h->devices[i];

		for (size_t j = 0; j < d->n_char_devices; j++) {
			if (strncmp(d->char_devices[j], DEV_PREFIX, strlen(DEV_PREFIX)) != 0)
				return 0;
			c->watch[c->n_watch++] = (struct watch){
				.name = d->char_devices[j] + strlen(DEV_PREFIX),
				.want = true,
				.num = rdp_device_char_devnum(d, j)};
		}
	}
	qsort(c->watch, c->n_watch, sizeof(*c->watch), cmp_watch);
	for (size_t i = 1; i < c->n_watch; i++)
		if (strcmp(c->watch[i - 1].name, c->watch[i].name) == 0)
			return 0;

	if (c->rec->n_pf_dirs) {
		c->pf_netdev = rdp_calloc(c->rec->n_pf_dirs, sizeof(*c->pf_netdev));
		c->pf_gen = rdp_calloc(c->rec->n_pf_dirs, sizeof(*c->pf_gen));
		if (!c->pf_netdev || !c->pf_gen)
			return -ENOMEM;
	}
	c->fast_ok = true;
	return 0;
}

static int full_scan(struct rdp_scanner *s)
{
	struct cache c = {0};
	bool changed;
	int r;

	/*
	 * The class directories first: whatever changes after this (even during the
	 * discovery) differs from the snapshot at the next scan, which then looks again.
	 */
	for (size_t i = 0; i < SNAP_MAX; i++) {
		r = snap_take(s->sys, snap_paths[i], i == SNAP_IB, &c.snap[i]);
		if (r < 0)
			goto fail;
	}
	r = rdp_discover_flags_at(s->sys, s->dev, s->flags, &c.host, &c.rec);
	if (r < 0)
		goto fail;
	r = cache_prepare(&c);
	if (r < 0)
		goto fail;

	changed = !s->c.host || !rdp_host_equal(s->c.host, c.host);
	cache_done(&s->c);
	s->c = c;
	s->stats.full++;
	s->stats.last_full = true;
	return changed;
fail:
	cache_done(&c);
	return r;
}

int rdp_scanner_scan(struct rdp_scanner *s, enum rdp_scan_mode mode)
{
	int r;

	if (mode == RDP_SCAN_AUTO && s->c.host && s->c.fast_ok && host_same(s)) {
		s->stats.scans++;
		s->stats.last_full = false;
		return 0;
	}
	r = full_scan(s);
	if (r < 0)
		return r;
	s->stats.scans++;
	s->stats.changed += r;
	return r;
}

void rdp_scanner_set_flags(struct rdp_scanner *s, unsigned int flags)
{
	if (s->flags == flags)
		return;
	s->flags = flags;
	s->c.fast_ok = false; /* the model was made with the old flags */
}

const struct rdp_host *rdp_scanner_host(const struct rdp_scanner *s)
{
	return s->c.host;
}

const struct rdp_scanner_stats *rdp_scanner_stats(const struct rdp_scanner *s)
{
	return &s->stats;
}

int rdp_scanner_new(const char *sysfs_root, const char *dev_root, struct rdp_scanner **ret)
{
	return rdp_scanner_new_flags(sysfs_root, dev_root, 0, ret);
}

int rdp_scanner_new_flags(const char *sysfs_root, const char *dev_root, unsigned int flags,
			  struct rdp_scanner **ret)
{
	_cleanup_close_ int sys = -1, dev = -1;
	struct rdp_scanner *s;
	int r;

	r = rdp_sysfs_open_roots(sysfs_root, dev_root, &sys, &dev);
	if (r < 0)
		return r;
	s = rdp_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->sys = TAKE_FD(sys);
	s->dev = TAKE_FD(dev);
	s->flags = flags;
	*ret = s;
	return 0;
}

struct rdp_scanner *rdp_scanner_free(struct rdp_scanner *s)
{
	if (!s)
		return NULL;
	cache_done(&s->c);
	close(s->sys);
	close(s->dev);
	rdp_free(s);
	return NULL;
}

/* ---- comparing models ---- */

static bool strv_equal(char *const *a, size_t na, char *const *b, size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (strcmp(a[i], b[i]) != 0)
			return false;
	return true;
}

static bool port_equal(const struct rdp_port *a, const struct rdp_port *b)
{
	return a->num == b->num && a->state == b->state &&
	       strcmp(a->state_name, b->state_name) == 0 && a->phys_state == b->phys_state &&
	       strcmp(a->phys_state_name, b->phys_state_name) == 0 &&
	       a->link_layer == b->link_layer && strcmp(a->rate, b->rate) == 0 &&
	       a->roce_v2_ipv4_gid_index == b->roce_v2_ipv4_gid_index;
}

static bool devnums_equal(const struct rdp_device *a, const struct rdp_device *b)
{
	for (size_t i = 0; i < a->n_char_devices; i++)
		if (rdp_device_char_devnum(a, i) != rdp_device_char_devnum(b, i))
			return false;
	return true;
}

static bool device_equal(const struct rdp_device *a, const struct rdp_device *b)
{
	if (strcmp(a->name, b->name) || strcmp(a->pci_address, b->pci_address) ||
	    strcmp(a->vendor, b->vendor) || strcmp(a->device_id, b->device_id) ||
	    strcmp(a->pci_class, b->pci_class) || strcmp(a->driver, b->driver) ||
	    a->numa_node != b->numa_node || a->is_vf != b->is_vf || a->vf_index != b->vf_index ||
	    a->is_sf != b->is_sf || a->sf_num != b->sf_num ||
	    !!a->pci_path != !!b->pci_path || (a->pci_path && strcmp(a->pci_path, b->pci_path)) ||
	    strcmp(a->pf_pci_address, b->pf_pci_address) || strcmp(a->pf_netdev, b->pf_netdev) ||
	    strcmp(a->node_guid, b->node_guid) || strcmp(a->fw_ver, b->fw_ver) ||
	    strcmp(a->hca_type, b->hca_type) || a->n_ports != b->n_ports ||
	    a->usability != b->usability || strcmp(a->unusable_reason, b->unusable_reason))
		return false;
	for (size_t i = 0; i < a->n_ports; i++)
		if (!port_equal(&a->ports[i], &b->ports[i]))
			return false;
	return strv_equal(a->netdevs, a->n_netdevs, b->netdevs, b->n_netdevs) &&
	       strv_equal(a->char_devices, a->n_char_devices, b->char_devices, b->n_char_devices) &&
	       devnums_equal(a, b) &&
	       strv_equal(a->problems, a->n_problems, b->problems, b->n_problems);
}

bool rdp_host_equal(const struct rdp_host *a, const struct rdp_host *b)
{
	if (a->n_devices != b->n_devices || strcmp(a->rdma_cm, b->rdma_cm) ||
	    a->rdma_cm_devnum != b->rdma_cm_devnum ||
	    a->netns_mode != b->netns_mode ||
	    !strv_equal(a->problems, a->n_problems, b->problems, b->n_problems))
		return false;
	for (size_t i = 0; i < a->n_devices; i++)
		if (!device_equal(&a->devices[i], &b->devices[i]))
			return false;
	return true;
}
