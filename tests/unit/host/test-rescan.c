/* SPDX-License-Identifier: MIT */
/*
 * rescan.c: on a copy of every generated fixture node, and after each change made to the copy
 * (port state, NUMA node, unplug, re-plug through sysfsgen.py; netdev renames, GID table,
 * rate, firmware, char devices, rdma_cm, netns mode, bad values by hand), the scanner's model
 * must equal a full discovery's field by field, say "changed" exactly when the model changed,
 * and the scan after that must find nothing and take the cheap path (where the model has no
 * problems). Allocation failures are injected into scans.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "alloc.h"
#include "macro.h"
#include "discovery.h"
#include "rescan.h"
#include "sysfs.h"
#include "test.h"

static const char *srcdir;
static char work[PATH_MAX];
static char sysdir[PATH_MAX + 8], devdir[PATH_MAX + 8];

static _printf_(1, 2) void py(const char *fmt, ...)
{
	char code[4096], cmd[8192];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(code, sizeof(code), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 -c \"import sys; sys.path.insert(0, '%s/tests/fixtures'); "
		 "import sysfsgen as g; %s\"",
		 srcdir, code);
	if (system(cmd) != 0) {
		fprintf(stderr, "failed: %s\n", cmd);
		exit(2);
	}
}

static _printf_(2, 3) void put(const char *value, const char *fmt, ...)
{
	char rel[PATH_MAX], path[PATH_MAX * 2];
	va_list ap;
	FILE *f;

	va_start(ap, fmt);
	vsnprintf(rel, sizeof(rel), fmt, ap);
	va_end(ap);
	snprintf(path, sizeof(path), "%s/%s", work, rel);
	/* Never write through a link: the fixtures' failing entries are links to a directory. */
	if (unlink(path) < 0 && errno != ENOENT) {
		perror(path);
		exit(2);
	}
	if (!value && strncmp(rel, "sys/", 4) == 0 && strstr(rel, "/gid_attrs/")) {
		/* An empty GID slot's attribute, as the fixtures make it (tests/fixtures/README) */
		char target[PATH_MAX] = "";

		for (const char *c = rel + 4; (c = strchr(c, '/')); c++)
			strcat(target, "../");
		strcat(target, ".unreadable");
		if (symlink(target, path) < 0) {
			perror(path);
			exit(2);
		}
		return;
	}
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	if (value)
		fprintf(f, "%s\n", value);
	fclose(f);
}

static bool has_problems(const struct rdp_host *h)
{
	if (h->n_problems)
		return true;
	for (size_t i = 0; i < h->n_devices; i++)
		if (h->devices[i].n_problems)
			return true;
	return false;
}

static unsigned int scan_flags; /* the scanner's discovery flags; full() uses them too */

static struct rdp_host *full(void)
{
	struct rdp_host *h = NULL;
	int sfd, dfd, r;

	r = rdp_sysfs_open_roots(sysdir, devdir, &sfd, &dfd);
	if (r >= 0) {
		r = rdp_discover_flags_at(sfd, dfd, scan_flags, &h, NULL);
		close(sfd);
		close(dfd);
	}
	if (r < 0) {
		fprintf(stderr, "discovery of %s failed\n", sysdir);
		exit(2);
	}
	return h;
}

/*
 * After a change: the scan equals a full discovery and says whether it differs from *prev;
 * the next scan finds nothing and, on a model without problems, is cheap. *prev moves on.
 */
static void step(struct rdp_scanner *s, struct rdp_host **prev, const char *what)
{
	struct rdp_host *f;
	int r, r2;

	r = rdp_scanner_scan(s, RDP_SCAN_AUTO);
	f = full();
	EXPECT_TRUE(r >= 0);
	if (r < 0 || !rdp_host_equal(rdp_scanner_host(s), f)) {
		test_failed++;
		fprintf(stderr, "%s: %s: scanner model differs from a full discovery\n", work,
			what);
	}
	EXPECT_EQ(r, !rdp_host_equal(*prev, f));
	r2 = rdp_scanner_scan(s, RDP_SCAN_AUTO);
	EXPECT_EQ(r2, 0);
	EXPECT_TRUE(rdp_host_equal(rdp_scanner_host(s), f));
	if (!has_problems(f) && rdp_scanner_stats(s)->last_full) {
		test_failed++;
		fprintf(stderr, "%s: %s: an unchanged rescan took the full path\n", work, what);
	}
	rdp_host_free(*prev);
	*prev = f;
}

static const struct rdp_device *find_ether(const struct rdp_host *h)
{
	for (size_t i = 0; i < h->n_devices; i++)
		if (h->devices[i].n_ports && h->devices[i].ports[0].link_layer == RDP_LINK_ETHER &&
		    h->devices[i].n_problems == 0 && h->devices[i].pci_address[0])
			return &h->devices[i];
	return NULL;
}

static char pristine_dir[PATH_MAX];

static int count_entries(const char *path)
{
	struct dirent *de;
	DIR *dir = opendir(path);
	int n = 0;

	if (!dir)
		return 0;
	while ((de = readdir(dir)))
		n += de->d_name[0] != '.';
	closedir(dir);
	return n;
}

static const struct rdp_device *find_vf(const struct rdp_host *h)
{
	for (size_t i = 0; i < h->n_devices; i++)
		if (h->devices[i].is_vf && h->devices[i].n_problems == 0)
			return &h->devices[i];
	return NULL;
}

/*
 * A char device node re-created with another number than sysfs names (a stale /dev, a name
 * the kernel gave to another device), then put back. Only where the nodes are real.
 */
static void renumber(struct rdp_scanner *s, struct rdp_host **prev, const char *path,
		     const char *what)
{
	char msg[128];
	struct stat st;

	if (stat(path, &st) < 0 || !S_ISCHR(st.st_mode))
		return;
	EXPECT_TRUE(unlink(path) == 0);
	if (mknod(path, S_IFCHR | 0600, makedev(major(st.st_rdev), minor(st.st_rdev) + 100)) < 0) {
		EXPECT_TRUE(mknod(path, st.st_mode, st.st_rdev) == 0);
		return;
	}
	snprintf(msg, sizeof(msg), "%s with another number", what);
	step(s, prev, msg);
	EXPECT_TRUE(unlink(path) == 0);
	EXPECT_TRUE(mknod(path, st.st_mode, st.st_rdev) == 0);
	snprintf(msg, sizeof(msg), "%s with its number back", what);
	step(s, prev, msg);
}

/* An upper_<up> link in the class/net dir of netdev lower, as a VLAN on it makes. */
static void upper(const char *lower, const char *up, bool add)
{
	char path[PATH_MAX * 2];

	if (!*lower)
		return;
	snprintf(path, sizeof(path), "%s/class/net/%s/upper_%s", sysdir, lower, up);
	if (add)
		EXPECT_TRUE(symlink("../lo", path) == 0);
	else
		EXPECT_TRUE(unlink(path) == 0);
}

/* By-hand changes on one device d (name copied: the model moves on under us). */
static void hand_changes(struct rdp_scanner *s, struct rdp_host **prev, const char *name)
{
	/* d is valid until the first step(), which frees *prev */
	const struct rdp_device *d = rdp_host_find(*prev, name);
	char net[PATH_MAX * 2], from[PATH_MAX * 3], to[PATH_MAX * 3], cdev[64] = "";
	bool ether = d->n_ports && d->ports[0].link_layer == RDP_LINK_ETHER;
	bool vf = d->is_vf, d_pci = d->pci_address[0] != '\0';
	int gid_index = d->n_ports ? d->ports[0].roce_v2_ipv4_gid_index : -1;
	char pf_ibdev[RDP_IBDEV_NAME_MAX] = "";
	char netdev0[RDP_IFNAME_MAX] = "", pf_netdev[RDP_IFNAME_MAX];

	snprintf(pf_netdev, sizeof(pf_netdev), "%s", d->pf_netdev);
	for (size_t i = 0; vf && i < (*prev)->n_devices; i++)
		if (strcmp((*prev)->devices[i].pci_address, d->pf_pci_address) == 0)
			snprintf(pf_ibdev, sizeof(pf_ibdev), "%s", (*prev)->devices[i].name);
	if (d->n_netdevs)
		snprintf(netdev0, sizeof(netdev0), "%s", d->netdevs[0]);

	if (d->n_char_devices)
		snprintf(cdev, sizeof(cdev), "%s", d->char_devices[0] + strlen("/dev/"));
	if (d->n_netdevs && d->pci_address[0]) {
		snprintf(net, sizeof(net), "%s/class/infiniband/%s/device/net", sysdir, name);
		snprintf(from, sizeof(from), "%s/%s", net, netdev0);
		snprintf(to, sizeof(to), "%s/renamed0", net);
		if (rename(from, to) == 0) {
			step(s, prev, "netdev renamed");
			EXPECT_TRUE(rename(to, from) == 0);
			step(s, prev, "netdev renamed back");
		}
	}
	put("100 Gb/sec (4X EDR)", "sys/class/infiniband/%s/ports/1/rate", name);
	step(s, prev, "rate");
	put("99.99.9999", "sys/class/infiniband/%s/fw_ver", name);
	step(s, prev, "fw_ver");
	put("x", "sys/class/infiniband/%s/device/numa_node", name);
	step(s, prev, "numa_node unparsable");
	put("0", "sys/class/infiniband/%s/device/numa_node", name);
	step(s, prev, "numa_node fixed");
	if (ether) {
		char types[PATH_MAX * 2];
		int last;

		snprintf(types, sizeof(types), "%s/class/infiniband/%s/ports/1/gid_attrs/types",
			 sysdir, name);
		last = count_entries(types) - 1;
		if (gid_index >= 0) {
			put(NULL, "sys/class/infiniband/%s/ports/1/gid_attrs/types/%d", name,
			    gid_index);
			step(s, prev, "IPv4 address removed (GID table)");
		}
		/* An address on the device's own netdev: only the GID index changes. */
		put("RoCE v2", "sys/class/infiniband/%s/ports/1/gid_attrs/types/%d", name, last);
		put(*netdev0 ? netdev0 : NULL, "sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/%d",
		    name, last);
		put("0000:0000:0000:0000:0000:ffff:0a00:0007",
		    "sys/class/infiniband/%s/ports/1/gids/%d", name, last);
		step(s, prev, "IPv4 address added (GID table)");
		/* The same on a VLAN (an upper device of the netdev): a new netdev. */
		upper(netdev0, "vlan7", true);
		step(s, prev, "VLAN created, no address");
		put("vlan7", "sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/%d", name, last);
		step(s, prev, "IPv4 address on a VLAN");
		put(NULL, "sys/class/infiniband/%s/ports/1/gid_attrs/types/%d", name, last);
		step(s, prev, "IPv4 address removed");
		/*
		 * Empty slots modelled as missing files (a tree, not a kernel): a slot whose
		 * files appear after a full scan holds a new GID all the same.
		 */
		snprintf(from, sizeof(from), "%s/class/infiniband/%s/ports/1/gid_attrs/types/%d",
			 sysdir, name, last);
		snprintf(to, sizeof(to), "%s/class/infiniband/%s/ports/1/gid_attrs/ndevs/%d",
			 sysdir, name, last);
		EXPECT_TRUE(unlink(from) == 0 && unlink(to) == 0);
		step(s, prev, "empty slot without files");
		EXPECT_TRUE(rdp_scanner_scan(s, RDP_SCAN_FULL) == 0);
		upper(netdev0, "vlan8", true);
		put("RoCE v2", "sys/class/infiniband/%s/ports/1/gid_attrs/types/%d", name, last);
		put("vlan8", "sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/%d", name, last);
		step(s, prev, "IPv4 address in a slot that had no files");
		put(NULL, "sys/class/infiniband/%s/ports/1/gid_attrs/types/%d", name, last);
		put(NULL, "sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/%d", name, last);
		step(s, prev, "that address removed");
		upper(netdev0, "vlan7", false);
		upper(netdev0, "vlan8", false);
		step(s, prev, "VLANs deleted");
		/* A slot that becomes valid and one that becomes invalid, kernel-shaped. */
		py("g.set_gid('%s', '%s', 1, %d, g.ipv4_gid('10.1.2.3'), g.GID_TYPE_V2, '%s')",
		   sysdir, name, last - 1, netdev0);
		step(s, prev, "GID slot filled (address added)");
		py("g.clear_gid('%s', '%s', 1, %d)", sysdir, name, last - 1);
		step(s, prev, "GID slot emptied (address removed)");
		py("g.clear_gid('%s', '%s', 1, 0)", sysdir, name);
		py("g.clear_gid('%s', '%s', 1, 1)", sysdir, name);
		step(s, prev, "default GIDs emptied");
	}
	if (*netdev0 && d_pci) {
		/* More entries than discovery lists (names that are no netdev names). */
		for (int i = 0; i <= RDP_MAX_NETDEVS; i++) {
			snprintf(from, sizeof(from), "%s/class/infiniband/%s/device/net/x:%d",
				 sysdir, name, i);
			EXPECT_TRUE(mkdir(from, 0755) == 0);
		}
		step(s, prev, "too many net entries");
		for (int i = 0; i <= RDP_MAX_NETDEVS; i++) {
			snprintf(from, sizeof(from), "%s/class/infiniband/%s/device/net/x:%d",
				 sysdir, name, i);
			EXPECT_TRUE(rmdir(from) == 0);
		}
		step(s, prev, "net entries back");
	}
	if (vf) {
		/* Without the PF's own ib device, only the VFs' pf_netdev shows a PF rename. */
		if (*pf_ibdev) {
			py("g.unplug('%s', '%s', '%s')", sysdir, devdir, pf_ibdev);
			step(s, prev, "PF ib device unplugged");
		}
		snprintf(net, sizeof(net), "%s/class/infiniband/%s/device/physfn/net", sysdir,
			 name);
		snprintf(from, sizeof(from), "%s/%s", net, pf_netdev);
		snprintf(to, sizeof(to), "%s/0pf", net);
		if (rename(from, to) == 0) {
			step(s, prev, "PF netdev renamed");
			EXPECT_TRUE(rename(to, from) == 0);
			step(s, prev, "PF netdev renamed back");
		}
		if (*pf_ibdev) {
			py("g.replug('%s', '%s', '%s', '%s')", sysdir, devdir, pristine_dir,
			   pf_ibdev);
			step(s, prev, "PF ib device re-plugged");
		}
	}
	if (*cdev) {
		snprintf(from, sizeof(from), "%s/%s", devdir, cdev);
		snprintf(to, sizeof(to), "%s/%s.gone", devdir, cdev);
		EXPECT_TRUE(rename(from, to) == 0);
		/* A symlink counts when it leads somewhere, as discovery's exists check. */
		EXPECT_TRUE(symlink(strrchr(to, '/') + 1, from) == 0);
		step(s, prev, "char device node a symlink to it");
		EXPECT_TRUE(unlink(from) == 0);
		EXPECT_TRUE(symlink("nowhere", from) == 0);
		step(s, prev, "char device node a dangling symlink");
		EXPECT_TRUE(unlink(from) == 0);
		step(s, prev, "char device node removed");
		EXPECT_TRUE(rename(to, from) == 0);
		step(s, prev, "char device node back");
		renumber(s, prev, from, "char device node");
	}
}

/* Two class/infiniband links that trade targets: same names, other registrations. */
static void swap_links(struct rdp_scanner *s, struct rdp_host **prev, const char *a, const char *b)
{
	char la[PATH_MAX * 2], lb[PATH_MAX * 2], ta[PATH_MAX], tb[PATH_MAX];
	ssize_t na, nb;

	snprintf(la, sizeof(la), "%s/class/infiniband/%s", sysdir, a);
	snprintf(lb, sizeof(lb), "%s/class/infiniband/%s", sysdir, b);
	na = readlink(la, ta, sizeof(ta) - 1);
	nb = readlink(lb, tb, sizeof(tb) - 1);
	if (na < 0 || nb < 0)
		return;
	ta[na] = tb[nb] = '\0';
	for (int k = 0; k < 2; k++) {
		EXPECT_TRUE(unlink(la) == 0 && unlink(lb) == 0);
		EXPECT_TRUE(symlink(k ? ta : tb, la) == 0 && symlink(k ? tb : ta, lb) == 0);
		step(s, prev, k ? "class links back" : "class links swapped");
	}
}

static void host_changes(struct rdp_scanner *s, struct rdp_host **prev)
{
	char from[PATH_MAX * 2], to[PATH_MAX * 2];
	struct stat st;

	snprintf(from, sizeof(from), "%s/module/ib_core/parameters/netns_mode", sysdir);
	if (stat(from, &st) == 0) {
		put("N", "sys/module/ib_core/parameters/netns_mode");
		step(s, prev, "netns exclusive");
		put("Y", "sys/module/ib_core/parameters/netns_mode");
		step(s, prev, "netns shared");
	}
	snprintf(from, sizeof(from), "%s/infiniband/rdma_cm", devdir);
	snprintf(to, sizeof(to), "%s/infiniband/rdma_cm.gone", devdir);
	if (rename(from, to) == 0) {
		step(s, prev, "rdma_cm removed");
		EXPECT_TRUE(rename(to, from) == 0);
		step(s, prev, "rdma_cm back");
	}
	renumber(s, prev, from, "rdma_cm");
}

static void test_node(const char *fixtures, const char *node)
{
	char pristine[PATH_MAX];
	struct rdp_scanner *s = NULL;
	struct rdp_host *prev;
	char first[RDP_IBDEV_NAME_MAX] = "", last[RDP_IBDEV_NAME_MAX] = "";
	int r;

	snprintf(pristine, sizeof(pristine), "%s/%s", fixtures, node);
	snprintf(pristine_dir, sizeof(pristine_dir), "%s", pristine);
	snprintf(work, sizeof(work), "%s/rescan-%d-%s", getenv("TMPDIR") ?: "/tmp", getpid(), node);
	snprintf(sysdir, sizeof(sysdir), "%s/sys", work);
	snprintf(devdir, sizeof(devdir), "%s/dev", work);
	py("g.copy_node('%s', '%s')", pristine, work);

	prev = full();
	r = rdp_scanner_new_flags(sysdir, devdir, scan_flags, &s);
	EXPECT_EQ(r, 0);
	if (r < 0)
		return;
	EXPECT_EQ(rdp_scanner_scan(s, RDP_SCAN_AUTO), 1);
	EXPECT_TRUE(rdp_host_equal(rdp_scanner_host(s), prev));
	step(s, &prev, "nothing");
	EXPECT_EQ(rdp_scanner_scan(s, RDP_SCAN_FULL), 0);
	EXPECT_TRUE(rdp_scanner_stats(s)->last_full);

	for (size_t i = 0; i < prev->n_devices; i++) {
		const struct rdp_device *d = &prev->devices[i];

		if (!d->n_ports || !d->pci_address[0])
			continue;
		if (!*first)
			snprintf(first, sizeof(first), "%s", d->name);
		snprintf(last, sizeof(last), "%s", d->name);
	}
	for (int k = 0; k < 2 && *first; k++) {
		const char *n = k ? last : first;

		if (k && strcmp(first, last) == 0)
			break;
		py("g.set_port_state('%s', '%s', 1, 'DOWN')", sysdir, n);
		step(s, &prev, "port down");
		py("g.set_port_state('%s', '%s', 1, 'DOWN', phys_state='Polling')", sysdir, n);
		step(s, &prev, "phys_state polling");
		py("g.set_port_state('%s', '%s', 1, 'ACTIVE')", sysdir, n);
		step(s, &prev, "port up");
		py("g.set_numa_node('%s', '%s', 1)", sysdir, n);
		step(s, &prev, "numa 1");
		py("g.set_numa_node('%s', '%s', -1)", sysdir, n);
		step(s, &prev, "numa -1");
		py("g.unplug('%s', '%s', '%s')", sysdir, devdir, n);
		step(s, &prev, "unplug");
		py("g.replug('%s', '%s', '%s', '%s')", sysdir, devdir, pristine, n);
		step(s, &prev, "replug");
		hand_changes(s, &prev, n);
	}
	for (int k = 0; k < 2; k++) {
		const struct rdp_device *e = k ? find_vf(prev) : find_ether(prev);

		if (e && strcmp(e->name, first) && strcmp(e->name, last)) {
			char n[RDP_IBDEV_NAME_MAX];

			snprintf(n, sizeof(n), "%s", e->name);
			hand_changes(s, &prev, n);
		}
	}
	host_changes(s, &prev);
	if (*first && strcmp(first, last))
		swap_links(s, &prev, first, last);

	/* Back to where it began: a fresh copy gives the pristine model again. */
	rdp_scanner_free(s);
	rdp_host_free(prev);
	py("import shutil; shutil.rmtree('%s')", work);
}

/* Every allocation of a changed scan fails in turn: -ENOMEM, the old model kept, no leak. */
static void test_failmalloc(const char *fixtures)
{
	struct rdp_scanner *s = NULL;
	struct rdp_host *before, *after;
	unsigned long count;
	int r;

	snprintf(work, sizeof(work), "%s/rescan-%d-fm", getenv("TMPDIR") ?: "/tmp", getpid());
	snprintf(sysdir, sizeof(sysdir), "%s/sys", work);
	snprintf(devdir, sizeof(devdir), "%s/dev", work);
	py("g.copy_node('%s/sriov', '%s')", fixtures, work);
	before = full();
	EXPECT_EQ(rdp_scanner_new(sysdir, devdir, &s), 0);
	EXPECT_EQ(rdp_scanner_scan(s, RDP_SCAN_AUTO), 1);

	rdp_alloc_fail_at(0);
	EXPECT_EQ(rdp_scanner_scan(s, RDP_SCAN_AUTO), 0);
	EXPECT_EQ(rdp_alloc_count(), 0); /* nothing changed: nothing allocated */

	put("1: DOWN", "sys/class/infiniband/%s/ports/1/state", before->devices[0].name);
	after = full();
	rdp_alloc_fail_at(0);
	EXPECT_EQ(rdp_scanner_scan(s, RDP_SCAN_FULL), 1);
	count = rdp_alloc_count();
	put("4: ACTIVE", "sys/class/infiniband/%s/ports/1/state", before->devices[0].name);
	EXPECT_EQ(rdp_scanner_scan(s, RDP_SCAN_AUTO), 1);
	put("1: DOWN", "sys/class/infiniband/%s/ports/1/state", before->devices[0].name);
	for (unsigned long i = 1; i <= count; i++) {
		rdp_alloc_fail_at(i);
		r = rdp_scanner_scan(s, RDP_SCAN_AUTO);
		rdp_alloc_fail_at(0);
		if (r == -ENOMEM) {
			EXPECT_TRUE(rdp_host_equal(rdp_scanner_host(s), before));
			continue;
		}
		EXPECT_EQ(r, 1);
		EXPECT_TRUE(rdp_host_equal(rdp_scanner_host(s), after));
		put("4: ACTIVE", "sys/class/infiniband/%s/ports/1/state", before->devices[0].name);
		EXPECT_EQ(rdp_scanner_scan(s, RDP_SCAN_AUTO), 1);
		put("1: DOWN", "sys/class/infiniband/%s/ports/1/state", before->devices[0].name);
	}
	rdp_alloc_fail_at(0);
	rdp_scanner_free(s);
	rdp_host_free(before);
	rdp_host_free(after);
	py("import shutil; shutil.rmtree('%s')", work);
}

/* New flags: the next scan is a full discovery with them, and says whether the model changed. */
static void test_set_flags(const char *fixtures)
{
	static const unsigned int flags[] = {RDP_DISCOVER_SERVE,
					     RDP_DISCOVER_SERVE | RDP_DISCOVER_NO_GID_TABLE,
					     RDP_DISCOVER_SERVE};
	struct rdp_scanner *s = NULL;
	struct rdp_host *f;

	snprintf(work, sizeof(work), "%s/rescan-%d-flags", getenv("TMPDIR") ?: "/tmp", getpid());
	snprintf(sysdir, sizeof(sysdir), "%s/sys", work);
	snprintf(devdir, sizeof(devdir), "%s/dev", work);
	py("g.copy_node('%s/roce-lag', '%s')", fixtures, work);
	EXPECT_EQ(rdp_scanner_new_flags(sysdir, devdir, flags[0], &s), 0);
	EXPECT_EQ(rdp_scanner_scan(s, RDP_SCAN_AUTO), 1);
	for (size_t i = 1; i < ARRAY_SIZE(flags); i++) {
		rdp_scanner_set_flags(s, flags[i]);
		/* bond0 is named only by mlx5_bond_0's GID table: it goes and comes back */
		EXPECT_EQ(rdp_scanner_scan(s, RDP_SCAN_AUTO), 1);
		EXPECT_TRUE(rdp_scanner_stats(s)->last_full);
		scan_flags = flags[i];
		f = full();
		EXPECT_TRUE(rdp_host_equal(rdp_scanner_host(s), f));
		rdp_host_free(f);
		EXPECT_EQ(rdp_scanner_scan(s, RDP_SCAN_AUTO), 0);
		EXPECT_TRUE(!rdp_scanner_stats(s)->last_full);
		rdp_scanner_set_flags(s, flags[i]); /* the same: nothing to redo */
		EXPECT_EQ(rdp_scanner_scan(s, RDP_SCAN_AUTO), 0);
		EXPECT_TRUE(!rdp_scanner_stats(s)->last_full);
	}
	rdp_scanner_free(s);
	py("import shutil; shutil.rmtree('%s')", work);
}

static void test_roots(void)
{
	struct rdp_scanner *s = NULL;

	EXPECT_EQ(rdp_scanner_new("/nonexistent-rdp", "/dev", &s), -ENOENT);
	EXPECT_TRUE(s == NULL);
	EXPECT_TRUE(rdp_scanner_free(NULL) == NULL);
}

int main(void)
{
	const char *fixtures = getenv("RDP_FIXTURES");
	char probe[PATH_MAX];
	struct dirent *de;
	DIR *dir;

	srcdir = getenv("RDP_SRCDIR");
	test_roots();
	if (!fixtures || !srcdir || !(dir = opendir(fixtures))) {
		printf("test-rescan: RDP_FIXTURES / RDP_SRCDIR not set, fixture tests skipped\n");
		return test_summary("test-rescan");
	}
	while ((de = readdir(dir))) {
		struct stat st;

		if (de->d_name[0] == '.')
			continue;
		snprintf(probe, sizeof(probe), "%s/%s/sys", fixtures, de->d_name);
		if (stat(probe, &st) == 0 && S_ISDIR(st.st_mode))
			test_node(fixtures, de->d_name);
	}
	closedir(dir);
	/* The daemon's scanner (no GID index) on the nodes with RoCE ports. */
	scan_flags = RDP_DISCOVER_NO_GID_INDEX;
	for (size_t i = 0; i < 4; i++) {
		static const char *const roce[] = {"roce-lag", "sriov", "rxe", "irdma-bnxt"};

		snprintf(probe, sizeof(probe), "%s/%s/sys", fixtures, roce[i]);
		if (access(probe, F_OK) == 0)
			test_node(fixtures, roce[i]);
	}
	/* The daemon's scanner with every field it does not serve left out. */
	scan_flags = RDP_DISCOVER_SERVE;
	for (size_t i = 0; i < 5; i++) {
		static const char *const nodes[] = {"roce-lag", "sriov", "rxe", "irdma-bnxt",
						    "port-down"};

		snprintf(probe, sizeof(probe), "%s/%s/sys", fixtures, nodes[i]);
		if (access(probe, F_OK) == 0)
			test_node(fixtures, nodes[i]);
	}
	/* A config without ifNames selectors: no GID table read. */
	scan_flags = RDP_DISCOVER_SERVE | RDP_DISCOVER_NO_GID_TABLE;
	for (size_t i = 0; i < 2; i++) {
		static const char *const nodes[] = {"roce-lag", "sriov"};

		snprintf(probe, sizeof(probe), "%s/%s/sys", fixtures, nodes[i]);
		if (access(probe, F_OK) == 0)
			test_node(fixtures, nodes[i]);
	}
	snprintf(probe, sizeof(probe), "%s/roce-lag/sys", fixtures);
	if (access(probe, F_OK) == 0)
		test_set_flags(fixtures);
	scan_flags = 0;
	snprintf(probe, sizeof(probe), "%s/sriov/sys", fixtures);
	if (access(probe, F_OK) == 0)
		test_failmalloc(fixtures);
	return test_summary("test-rescan");
}
