/* SPDX-License-Identifier: MIT */
/*
 * discovery.c on sysfs trees this test builds itself (PF, VFs, an mlx5 SF, irdma through its
 * auxiliary device, rxe, a RoCE LAG bond, broken entries), then on the generated fixture nodes
 * when RDP_FIXTURES has them. Allocation failures are injected into a whole discovery.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "alloc.h"
#include "discovery.h"
#include "macro.h"
#include "test.h"

static char tmpdir[1024];

static void mkdirs(const char *path)
{
	char buf[PATH_MAX];

	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST) {
			perror(buf);
			exit(2);
		}
		*p = '/';
	}
	if (mkdir(buf, 0755) < 0 && errno != EEXIST) {
		perror(buf);
		exit(2);
	}
}

static void parent_dirs(const char *path)
{
	char buf[PATH_MAX];
	char *slash;

	snprintf(buf, sizeof(buf), "%s", path);
	slash = strrchr(buf, '/');
	if (slash) {
		*slash = '\0';
		mkdirs(buf);
	}
}

/* W("sys/a/b", "value"): a sysfs attribute, with the kernel's trailing newline. */
static void W(const char *rel, const char *value)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
	parent_dirs(path);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fprintf(f, "%s\n", value);
	fclose(f);
}

/* An empty file (a /dev node stand-in, or an empty GID slot). */
static void E(const char *rel)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
	parent_dirs(path);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fclose(f);
}

static void D(const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
	mkdirs(path);
}

/* L("target", "sys/link") */
static void L(const char *target, const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
	parent_dirs(path);
	if (symlink(target, path) < 0) {
		perror(path);
		exit(2);
	}
}

static void rm_rf(const char *dir)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
	static char bufs[8][PATH_MAX];
	static int i;
	va_list ap;
	char *b = bufs[i++ % 8];

	va_start(ap, f);
	vsnprintf(b, PATH_MAX, f, ap);
	va_end(ap);
	return b;
}

/* A PCI function at sys/<dir> with the usual attributes and driver link. */
static void pci_fn(const char *dir, const char *vendor, const char *device, const char *class,
		   const char *numa, const char *driver)
{
	int depth = 0;

	for (const char *p = dir; *p; p++)
		depth += *p == '/';
	W(fmt("sys/%s/vendor", dir), vendor);
	W(fmt("sys/%s/device", dir), device);
	W(fmt("sys/%s/class", dir), class);
	if (numa)
		W(fmt("sys/%s/numa_node", dir), numa);
	if (driver) {
		char up[256] = "";

		for (int i = 0; i <= depth; i++)
			strcat(up, "../");
		D(fmt("sys/bus/pci/drivers/%s", driver));
		L(fmt("%sbus/pci/drivers/%s", up, driver), fmt("sys/%s/driver", dir));
	}
}

/* An ibdev at sys/<dir>/infiniband/<name> with a class link and the core attributes. */
static void ibdev(const char *dir, const char *name, const char *guid)
{
	const char *ib = fmt("sys/%s/infiniband/%s", dir, name);

	W(fmt("%s/node_guid", ib), guid);
	W(fmt("%s/fw_ver", ib), "28.41.1000");
	W(fmt("%s/hca_type", ib), "MT4129");
	W(fmt("%s/node_type", ib), "1: CA");
	L(fmt("../../%s/infiniband/%s", dir, name), fmt("sys/class/infiniband/%s", name));
}

static void port(const char *dir, const char *name, int num, const char *state, const char *ll,
		 const char *rate)
{
	const char *p = fmt("sys/%s/infiniband/%s/ports/%d", dir, name, num);

	W(fmt("%s/state", p), state);
	W(fmt("%s/phys_state", p), "5: LinkUp");
	W(fmt("%s/link_layer", p), ll);
	W(fmt("%s/rate", p), rate);
}

static void gid(const char *dir, const char *name, int num, int idx, const char *gidval,
		const char *type, const char *ndev)
{
	const char *p = fmt("sys/%s/infiniband/%s/ports/%d", dir, name, num);

	W(fmt("%s/gids/%d", p, idx), gidval);
	if (type) {
		W(fmt("%s/gid_attrs/types/%d", p, idx), type);
		W(fmt("%s/gid_attrs/ndevs/%d", p, idx), ndev);
	} else {
		E(fmt("%s/gid_attrs/types/%d", p, idx));
		E(fmt("%s/gid_attrs/ndevs/%d", p, idx));
	}
}

/* uverbsN (port 0) or umadN/issmN under sys/<dir>, with class link and optional dev node. */
static void cdev(const char *dir, const char *sub, const char *cname, const char *ibname,
		 int portnum, bool node)
{
	const char *class =
		strcmp(sub, "infiniband_verbs") == 0 ? "infiniband_verbs" : "infiniband_mad";

	W(fmt("sys/%s/%s/%s/ibdev", dir, sub, cname), ibname);
	if (portnum)
		W(fmt("sys/%s/%s/%s/port", dir, sub, cname), fmt("%d", portnum));
	L(fmt("../../%s/%s/%s", dir, sub, cname), fmt("sys/class/%s/%s", class, cname));
	if (node)
		E(fmt("dev/infiniband/%s", cname));
}

#define GID_LL "fe80:0000:0000:0000:0ac0:ebff:fe00:0001"
#define GID_V4 "0000:0000:0000:0000:0000:ffff:0a00:0001"

static void build_tree(void)
{
	const char *ib_pf = "devices/pci0000:00/0000:00:01.0/0000:18:00.0";
	const char *roce_pf = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0";
	const char *vf0 = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.2";
	const char *vf1 = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.3";
	const char *sf = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/mlx5_core.sf.2";
	const char *e810 = "devices/pci0000:16/0000:16:02.0/0000:17:00.0";
	const char *aux = "devices/pci0000:16/0000:16:02.0/0000:17:00.0/ice.roce.0";
	const char *lag = "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0";
	const char *bad = "devices/pci0000:00/0000:00:02.0/0000:af:00.0";
	const char *odd = "devices/pci0000:00/0000:00:03.0/0000:b0:00.0";

	W("sys/class/infiniband_verbs/abi_version", "6");
	W("sys/class/infiniband_mad/abi_version", "5");
	E("dev/infiniband/rdma_cm");
	W("sys/module/ib_core/parameters/netns_mode", "N");

	/* An IB PF; its uverbs number deliberately differs from its name's. */
	pci_fn(ib_pf, "0x15b3", "0x1021", "0x020700", "0", "mlx5_core");
	D(fmt("sys/%s/net/ibp24s0", ib_pf));
	ibdev(ib_pf, "mlx5_0", "58a2:e103:001b:2576");
	L("../../../0000:18:00.0", fmt("sys/%s/infiniband/mlx5_0/device", ib_pf));
	port(ib_pf, "mlx5_0", 1, "4: ACTIVE", "InfiniBand", "400 Gb/sec (4X NDR)");
	cdev(ib_pf, "infiniband_verbs", "uverbs7", "mlx5_0", 0, true);
	cdev(ib_pf, "infiniband_mad", "umad0", "mlx5_0", 1, true);
	cdev(ib_pf, "infiniband_mad", "issm0", "mlx5_0", 1, true);

	/* A RoCE PF with two VFs and an SF. */
	pci_fn(roce_pf, "0x15b3", "0x101d", "0x020000", "1", "mlx5_core");
	D(fmt("sys/%s/net/ens3f0np0", roce_pf));
	L("../0000:3b:00.2", fmt("sys/%s/virtfn0", roce_pf));
	L("../0000:3b:00.3", fmt("sys/%s/virtfn1", roce_pf));
	ibdev(roce_pf, "mlx5_1", "0ac0:eb03:0000:0001");
	L("../../../0000:3b:00.0", fmt("sys/%s/infiniband/mlx5_1/device", roce_pf));
	port(roce_pf, "mlx5_1", 1, "4: ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)");
	gid(roce_pf, "mlx5_1", 1, 0, GID_LL, "IB/RoCE v1", "ens3f0np0");
	gid(roce_pf, "mlx5_1", 1, 1, GID_LL, "RoCE v2", "ens3f0np0");
	gid(roce_pf, "mlx5_1", 1, 2, GID_V4, "IB/RoCE v1", "ens3f0np0");
	gid(roce_pf, "mlx5_1", 1, 3, GID_V4, "RoCE v2", "ens3f0np0");
	gid(roce_pf, "mlx5_1", 1, 4, "0000:0000:0000:0000:0000:0000:0000:0000", NULL, NULL);
	gid(roce_pf, "mlx5_1", 1, 10, GID_V4, "RoCE v2", "ens3f0np0.100");
	cdev(roce_pf, "infiniband_verbs", "uverbs0", "mlx5_1", 0, true);

	pci_fn(vf0, "0x15b3", "0x101e", "0x020000", "1", "mlx5_core");
	L("../0000:3b:00.0", fmt("sys/%s/physfn", vf0));
	D(fmt("sys/%s/net/ens3f0v0", vf0));
	ibdev(vf0, "mlx5_2", "0ac0:eb03:0000:0002");
	L("../../../0000:3b:00.2", fmt("sys/%s/infiniband/mlx5_2/device", vf0));
	port(vf0, "mlx5_2", 1, "4: ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)");
	gid(vf0, "mlx5_2", 1, 0, GID_LL, "RoCE v2", "ens3f0v0");
	cdev(vf0, "infiniband_verbs", "uverbs1", "mlx5_2", 0, true);

	pci_fn(vf1, "0x15b3", "0x101e", "0x020000", "1", "mlx5_core");
	L("../0000:3b:00.0", fmt("sys/%s/physfn", vf1));
	D(fmt("sys/%s/net/ens3f0v1", vf1));
	ibdev(vf1, "mlx5_3", "0ac0:eb03:0000:0003");
	L("../../../0000:3b:00.3", fmt("sys/%s/infiniband/mlx5_3/device", vf1));
	port(vf1, "mlx5_3", 1, "1: DOWN", "Ethernet", "100 Gb/sec (4X EDR)");
	cdev(vf1, "infiniband_verbs", "uverbs2", "mlx5_3", 0, false); /* no /dev node */

	W(fmt("sys/%s/sfnum", sf), "2");
	D(fmt("sys/%s/net/en3f0pf0sf2", sf));
	ibdev(sf, "mlx5_4", "0ac0:eb03:0000:0004");
	L("../../../mlx5_core.sf.2", fmt("sys/%s/infiniband/mlx5_4/device", sf));
	port(sf, "mlx5_4", 1, "4: ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)");
	cdev(roce_pf, "infiniband_verbs", "uverbs4", "mlx5_4", 0, true);

	/* irdma, parented to ice's auxiliary device; no uverbs at all. */
	pci_fn(e810, "0x8086", "0x159b", "0x020000", "0", "ice");
	D(fmt("sys/%s/net/ens5f0", e810));
	ibdev(aux, "irdma0", "b496:9103:0000:0001");
	L("../../../ice.roce.0", fmt("sys/%s/infiniband/irdma0/device", aux));
	port(aux, "irdma0", 1, "4: ACTIVE", "Ethernet", "25 Gb/sec (1X EDR)");
	gid(aux, "irdma0", 1, 0, GID_V4, "RoCE v2", "ens5f0");

	/* rxe: virtual, no device link, its netdev in `parent`. */
	ibdev("devices/virtual", "rxe0", "0000:0000:0000:0000");
	W("sys/devices/virtual/infiniband/rxe0/parent", "eth0");
	port("devices/virtual", "rxe0", 1, "4: ACTIVE", "Ethernet", "2.5 Gb/sec (1X)");
	gid("devices/virtual", "rxe0", 1, 0, GID_LL, "RoCE v2", "eth0");
	gid("devices/virtual", "rxe0", 1, 1, GID_V4, "RoCE v2", "eth0");
	cdev("devices/virtual", "infiniband_verbs", "uverbs5", "rxe0", 0, true);

	/* siw on a netdev without a parent device: virtual, an RNIC. */
	ibdev("devices/virtual", "siw0", "0000:0000:0000:0002");
	W("sys/devices/virtual/infiniband/siw0/node_type", "4: RNIC");
	W("sys/devices/virtual/infiniband/siw0/node_desc", "Software iWARP stack");
	port("devices/virtual", "siw0", 1, "4: ACTIVE", "Ethernet", "25 Gb/sec (1X EDR)");
	/* siw on the E810's netdev: its device link is the NIC's PCI function (ice). */
	ibdev(e810, "siw1", "0000:0000:0000:0003");
	L("../../../0000:17:00.0", fmt("sys/%s/infiniband/siw1/device", e810));
	W(fmt("sys/%s/infiniband/siw1/node_type", e810), "4: RNIC");
	W(fmt("sys/%s/infiniband/siw1/node_desc", e810), "Software iWARP stack");
	port(e810, "siw1", 1, "4: ACTIVE", "Ethernet", "25 Gb/sec (1X EDR)");

	/* RoCE LAG: mlx5_bond_0 on the first PF, its GIDs on bond0. */
	pci_fn(lag, "0x15b3", "0x101d", "0x020000", "0", "mlx5_core");
	D(fmt("sys/%s/net/ens1f0np0", lag));
	ibdev(lag, "mlx5_bond_0", "0ac0:eb03:0000:0010");
	L("../../../0000:5e:00.0", fmt("sys/%s/infiniband/mlx5_bond_0/device", lag));
	port(lag, "mlx5_bond_0", 1, "4: ACTIVE", "Ethernet", "200 Gb/sec (4X HDR)");
	gid(lag, "mlx5_bond_0", 1, 0, GID_LL, "IB/RoCE v1", "bond0");
	gid(lag, "mlx5_bond_0", 1, 1, GID_V4, "RoCE v2", "bond0");
	cdev(lag, "infiniband_verbs", "uverbs6", "mlx5_bond_0", 0, true);

	/* Broken: no node_guid/fw_ver, no ports, dangling device link. */
	W(fmt("sys/%s/infiniband/mlx5_9/node_type", bad), "1: CA");
	L(fmt("../../%s/infiniband/mlx5_9", bad), "sys/class/infiniband/mlx5_9");
	L("../../../0000:af:00.7", fmt("sys/%s/infiniband/mlx5_9/device", bad));
	cdev(bad, "infiniband_verbs", "uverbs9", "mlx5_9", 0, true);

	/* Odd values everywhere, and an unbound PCI function. */
	pci_fn(odd, "0x15b3", "0x10", "0x0207", "abc", NULL);
	W(fmt("sys/%s/infiniband/mlx5_8/node_guid", odd), "zz");
	W(fmt("sys/%s/infiniband/mlx5_8/fw_ver", odd), "1.0");
	L(fmt("../../%s/infiniband/mlx5_8", odd), "sys/class/infiniband/mlx5_8");
	L("../../../0000:b0:00.0", fmt("sys/%s/infiniband/mlx5_8/device", odd));
	W(fmt("sys/%s/infiniband/mlx5_8/ports/1/state", odd), "weird");
	W(fmt("sys/%s/infiniband/mlx5_8/ports/1/link_layer", odd), "Token Ring");
	W(fmt("sys/%s/infiniband/mlx5_8/ports/1/rate", odd), "fast");
	cdev(odd, "infiniband_verbs", "uverbs8", "mlx5_8", 0, true);
	W("sys/class/infiniband_verbs/uverbs../ibdev", "mlx5_8"); /* not a uverbs name */

	/* A dangling class link, and an absolute one (resolved inside the root). */
	L("../../devices/nowhere/infiniband/mlx5_gone", "sys/class/infiniband/mlx5_gone");
	L(fmt("/%s/infiniband/mlx5_0", ib_pf), "sys/class/infiniband/abs0");
}

static const struct rdp_device *find(const struct rdp_host *h, const char *name)
{
	const struct rdp_device *d = rdp_host_find(h, name);

	if (!d)
		fprintf(stderr, "device %s not found\n", name);
	return d;
}

static bool has(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], s) == 0)
			return true;
	return false;
}

static bool has_problem(const struct rdp_device *d, const char *needle)
{
	for (size_t i = 0; i < d->n_problems; i++)
		if (strstr(d->problems[i], needle))
			return true;
	fprintf(stderr, "%s: no problem containing \"%s\"; has:\n", d->name, needle);
	for (size_t i = 0; i < d->n_problems; i++)
		fprintf(stderr, "  %s\n", d->problems[i]);
	return false;
}

static void check_tree(const struct rdp_host *h)
{
	/* clang-format off */
	static const char *const names[] = {
		"abs0", "irdma0", "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_8",
		"mlx5_9", "mlx5_bond_0", "mlx5_gone", "rxe0", "siw0", "siw1",
	};
	/* clang-format on */
	const struct rdp_device *d;

	EXPECT_EQ(h->n_devices, ARRAY_SIZE(names));
	for (size_t i = 0; i < h->n_devices && i < ARRAY_SIZE(names); i++)
		EXPECT_STREQ(h->devices[i].name, names[i]);
	EXPECT_STREQ(h->rdma_cm, "/dev/infiniband/rdma_cm");
	EXPECT_EQ(h->netns_mode, RDP_NETNS_EXCLUSIVE);

	if ((d = find(h, "mlx5_0"))) {
		EXPECT_STREQ(d->pci_address, "0000:18:00.0");
		EXPECT_STREQ(d->vendor, "15b3");
		EXPECT_STREQ(d->device_id, "1021");
		EXPECT_STREQ(d->pci_class, "020700");
		EXPECT_STREQ(d->driver, "mlx5_core");
		EXPECT_EQ(d->numa_node, 0);
		EXPECT_TRUE(!d->is_vf);
		EXPECT_EQ(d->vf_index, -1);
		EXPECT_STREQ(d->pf_pci_address, "");
		EXPECT_STREQ(d->node_guid, "58a2:e103:001b:2576");
		EXPECT_STREQ(d->fw_ver, "28.41.1000");
		EXPECT_STREQ(d->hca_type, "MT4129");
		EXPECT_EQ(d->n_netdevs, 1);
		EXPECT_TRUE(has(d->netdevs, d->n_netdevs, "ibp24s0"));
		EXPECT_EQ(d->n_ports, 1);
		if (d->n_ports == 1) {
			EXPECT_EQ(d->ports[0].num, 1);
			EXPECT_EQ(d->ports[0].state, RDP_PORT_ACTIVE);
			EXPECT_STREQ(d->ports[0].state_name, "ACTIVE");
			EXPECT_EQ(d->ports[0].phys_state, 5);
			EXPECT_STREQ(d->ports[0].phys_state_name, "LinkUp");
			EXPECT_EQ(d->ports[0].link_layer, RDP_LINK_INFINIBAND);
			EXPECT_STREQ(d->ports[0].rate, "400 Gb/sec (4X NDR)");
			EXPECT_EQ(d->ports[0].roce_v2_ipv4_gid_index, -1);
		}
		/* uverbs7 found through its ibdev file, not guessed from the name. */
		EXPECT_EQ(d->n_char_devices, 3);
		if (d->n_char_devices == 3) {
			EXPECT_STREQ(d->char_devices[0], "/dev/infiniband/uverbs7");
			EXPECT_STREQ(d->char_devices[1], "/dev/infiniband/umad0");
			EXPECT_STREQ(d->char_devices[2], "/dev/infiniband/issm0");
		}
		EXPECT_EQ(d->n_problems, 0);
		EXPECT_TRUE(rdp_device_is_active(d));
		/* Stand-in nodes (empty files), no `dev` in sysfs: usable, no number to check. */
		EXPECT_TRUE(rdp_device_is_usable(d));
		EXPECT_STREQ(d->unusable_reason, "");
		EXPECT_EQ(rdp_device_char_devnum(d, 0), 0);
	}
	if ((d = find(h, "mlx5_1"))) {
		EXPECT_STREQ(d->pci_address, "0000:3b:00.0");
		EXPECT_STREQ(d->pci_class, "020000");
		EXPECT_EQ(d->numa_node, 1);
		EXPECT_TRUE(!d->is_vf);
		EXPECT_EQ(d->ports[0].link_layer, RDP_LINK_ETHER);
		/* v2 at 1 is link-local; 3 is the first v2 IPv4 one. */
		EXPECT_EQ(d->ports[0].roce_v2_ipv4_gid_index, 3);
		EXPECT_EQ(d->n_netdevs, 2);
		if (d->n_netdevs == 2) {
			EXPECT_STREQ(d->netdevs[0], "ens3f0np0");
			EXPECT_STREQ(d->netdevs[1], "ens3f0np0.100");
		}
		EXPECT_EQ(d->n_problems, 0);
	}
	if ((d = find(h, "mlx5_2"))) {
		EXPECT_STREQ(d->pci_address, "0000:3b:00.2");
		EXPECT_STREQ(d->device_id, "101e");
		EXPECT_TRUE(d->is_vf);
		EXPECT_EQ(d->vf_index, 0);
		EXPECT_STREQ(d->pf_pci_address, "0000:3b:00.0");
		EXPECT_STREQ(d->pf_netdev, "ens3f0np0");
		EXPECT_EQ(d->ports[0].roce_v2_ipv4_gid_index, -1);
		EXPECT_EQ(d->n_netdevs, 1);
		EXPECT_TRUE(has(d->netdevs, d->n_netdevs, "ens3f0v0"));
		EXPECT_EQ(d->n_problems, 0);
	}
	if ((d = find(h, "mlx5_3"))) {
		EXPECT_TRUE(d->is_vf);
		EXPECT_EQ(d->vf_index, 1);
		EXPECT_STREQ(d->pf_netdev, "ens3f0np0");
		EXPECT_EQ(d->ports[0].state, RDP_PORT_DOWN);
		EXPECT_TRUE(!rdp_device_is_active(d));
		EXPECT_EQ(d->n_char_devices, 0);
		EXPECT_TRUE(has_problem(d, "uverbs2: /dev/infiniband/uverbs2 missing"));
		EXPECT_EQ(d->usability, RDP_UNUSABLE_UVERBS_NODE);
		EXPECT_STREQ(d->unusable_reason, "/dev/infiniband/uverbs2 missing");
	}
	if ((d = find(h, "mlx5_4"))) {
		/* The SF resolves to its PF's function, with its own netdev only. */
		EXPECT_STREQ(d->pci_address, "0000:3b:00.0");
		EXPECT_STREQ(d->device_id, "101d");
		EXPECT_STREQ(d->driver, "mlx5_core");
		EXPECT_TRUE(!d->is_vf);
		EXPECT_EQ(d->n_netdevs, 1);
		EXPECT_TRUE(has(d->netdevs, d->n_netdevs, "en3f0pf0sf2"));
		EXPECT_EQ(d->n_problems, 0);
	}
	if ((d = find(h, "irdma0"))) {
		EXPECT_STREQ(d->pci_address, "0000:17:00.0");
		EXPECT_STREQ(d->vendor, "8086");
		EXPECT_STREQ(d->device_id, "159b");
		EXPECT_STREQ(d->driver, "ice");
		EXPECT_TRUE(has(d->netdevs, d->n_netdevs, "ens5f0"));
		EXPECT_EQ(d->n_netdevs, 1);
		EXPECT_EQ(d->ports[0].roce_v2_ipv4_gid_index, 0);
		EXPECT_TRUE(has_problem(d, "no uverbs device"));
	}
	if ((d = find(h, "rxe0"))) {
		EXPECT_STREQ(d->pci_address, "");
		EXPECT_STREQ(d->vendor, "");
		EXPECT_STREQ(d->driver, "");
		/* Its `parent` and no device link: soft-RoCE, whatever its name. */
		EXPECT_STREQ(d->rdma_driver, "rdma_rxe");
		EXPECT_EQ(d->numa_node, -1);
		EXPECT_EQ(d->n_netdevs, 1);
		EXPECT_TRUE(has(d->netdevs, d->n_netdevs, "eth0"));
		EXPECT_EQ(d->ports[0].roce_v2_ipv4_gid_index, 1);
		EXPECT_STREQ(d->ports[0].rate, "2.5 Gb/sec (1X)");
		EXPECT_EQ(d->n_char_devices, 1);
		EXPECT_EQ(d->n_problems, 0);
	}
	if ((d = find(h, "siw0"))) {
		EXPECT_STREQ(d->driver, "");
		EXPECT_STREQ(d->rdma_driver, "siw");
	}
	if ((d = find(h, "siw1"))) {
		EXPECT_STREQ(d->driver, "ice");
		EXPECT_STREQ(d->rdma_driver, "siw");
		EXPECT_TRUE(has(d->netdevs, d->n_netdevs, "ens5f0"));
	}
	/* Hardware: the PCI function's driver says it. */
	if ((d = find(h, "irdma0")))
		EXPECT_STREQ(d->rdma_driver, "");
	if ((d = find(h, "mlx5_bond_0"))) {
		EXPECT_STREQ(d->pci_address, "0000:5e:00.0");
		EXPECT_TRUE(has(d->netdevs, d->n_netdevs, "bond0"));
		EXPECT_EQ(d->ports[0].roce_v2_ipv4_gid_index, 1);
	}
	if ((d = find(h, "mlx5_9"))) {
		EXPECT_TRUE(has_problem(d, "node_guid: No such file or directory"));
		EXPECT_TRUE(has_problem(d, "fw_ver: No such file or directory"));
		EXPECT_TRUE(has_problem(d, "ports: No such file or directory"));
		EXPECT_TRUE(has_problem(d, "device link dangling"));
		EXPECT_STREQ(d->pci_address, "");
		EXPECT_EQ(d->n_ports, 0);
		EXPECT_EQ(d->n_char_devices, 1);
	}
	if ((d = find(h, "mlx5_8"))) {
		EXPECT_TRUE(has_problem(d, "ports/1/state: unparsable value \"weird\""));
		EXPECT_TRUE(has_problem(d, "ports/1/phys_state: No such file or directory"));
		EXPECT_TRUE(has_problem(d, "ports/1/link_layer: unparsable value \"Token Ring\""));
		EXPECT_TRUE(has_problem(d, "ports/1/rate: unparsable value \"fast\""));
		EXPECT_TRUE(has_problem(d, "node_guid: unparsable value \"zz\""));
		EXPECT_TRUE(has_problem(d, "device: unparsable value \"0x10\""));
		EXPECT_TRUE(has_problem(d, "class: unparsable value \"0x0207\""));
		EXPECT_TRUE(has_problem(d, "numa_node: unparsable value \"abc\""));
		EXPECT_TRUE(has_problem(d, "driver: no driver bound"));
		EXPECT_STREQ(d->pci_address, "0000:b0:00.0");
		EXPECT_STREQ(d->vendor, "15b3");
		EXPECT_STREQ(d->device_id, "");
		EXPECT_EQ(d->numa_node, -1);
		EXPECT_EQ(d->n_ports, 1);
		EXPECT_EQ(d->ports[0].state, RDP_PORT_STATE_UNKNOWN);
		EXPECT_EQ(d->ports[0].link_layer, RDP_LINK_UNKNOWN);
		EXPECT_STREQ(d->ports[0].rate, "");
		EXPECT_EQ(d->n_char_devices, 1);
	}
	if ((d = find(h, "mlx5_gone"))) {
		EXPECT_TRUE(has_problem(d, "dangling link"));
		EXPECT_EQ(d->n_ports, 0);
	}
	if ((d = find(h, "abs0"))) {
		EXPECT_STREQ(d->pci_address, "0000:18:00.0");
		EXPECT_TRUE(has_problem(d, "no uverbs device"));
	}
}

static void test_tree(const char *sys, const char *dev)
{
	struct rdp_host *h = NULL;
	unsigned long allocs;
	int r;

	rdp_alloc_fail_at(0);
	r = rdp_discover(sys, dev, &h);
	allocs = rdp_alloc_count();
	EXPECT_EQ(r, 0);
	if (h)
		check_tree(h);
	h = rdp_host_free(h);

	/* Every allocation failing in turn: a clean -ENOMEM, nothing returned, nothing leaked. */
	EXPECT_TRUE(allocs > 10);
	for (unsigned long n = 1; n <= allocs; n++) {
		struct rdp_host *x = NULL;

		rdp_alloc_fail_at(n);
		r = rdp_discover(sys, dev, &x);
		if (r != -ENOMEM)
			fprintf(stderr, "failing allocation %lu: %d\n", n, r);
		EXPECT_EQ(r, -ENOMEM);
		EXPECT_TRUE(x == NULL);
		rdp_host_free(x);
	}
	rdp_alloc_fail_at(0);
}

static void test_roots(const char *sys)
{
	struct rdp_host *h = NULL;

	EXPECT_EQ(rdp_discover("/nonexistent/rdp-sys", "/dev", &h), -ENOENT);
	EXPECT_EQ(rdp_discover(sys, "/nonexistent/rdp-dev", &h), -ENOENT);
	EXPECT_TRUE(h == NULL);
}

static void test_empty(void)
{
	char sys[PATH_MAX], dev[PATH_MAX];
	struct rdp_host *h = NULL;

	snprintf(sys, sizeof(sys), "%s/empty/sys", tmpdir);
	snprintf(dev, sizeof(dev), "%s/empty/dev", tmpdir);
	mkdirs(sys);
	mkdirs(dev);
	EXPECT_EQ(rdp_discover(sys, dev, &h), 0);
	if (h) {
		EXPECT_EQ(h->n_devices, 0);
		EXPECT_EQ(h->netns_mode, RDP_NETNS_SHARED);
		EXPECT_STREQ(h->rdma_cm, "");
	}
	rdp_host_free(h);
}

/* ---- the generated fixture nodes ---- */

static struct rdp_host *fixture(const char *dir, const char *node)
{
	char sys[PATH_MAX], dev[PATH_MAX];
	struct rdp_host *h = NULL;
	int r;

	snprintf(sys, sizeof(sys), "%s/%s/sys", dir, node);
	snprintf(dev, sizeof(dev), "%s/%s/dev", dir, node);
	r = rdp_discover(sys, dev, &h);
	if (r < 0)
		fprintf(stderr, "fixture %s: %s\n", node, strerror(-r));
	EXPECT_EQ(r, 0);
	return h;
}

static _printf_(1, 2) int sh(const char *f, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, f);
	vsnprintf(cmd, sizeof(cmd), f, ap);
	va_end(ap);
	return system(cmd);
}

/* The sysfs `dev` of a class device of the copy, as a dev_t. */
static dev_t sysfs_devnum(const char *root, const char *class, const char *name)
{
	char path[PATH_MAX * 2];
	unsigned int maj = 0, min = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/sys/class/%s/%s/dev", root, class, name);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%u:%u", &maj, &min) != 2)
		maj = min = 0;
	if (f)
		fclose(f);
	return makedev(maj, min);
}

static struct rdp_host *discover_copy(const char *root)
{
	char sys[PATH_MAX + 8], dev[PATH_MAX + 8];
	struct rdp_host *h = NULL;

	snprintf(sys, sizeof(sys), "%s/sys", root);
	snprintf(dev, sizeof(dev), "%s/dev", root);
	EXPECT_EQ(rdp_discover(sys, dev, &h), 0);
	return h;
}

/*
 * Usability on a copy of seed000 (mlx5_0 on uverbs0): device numbers as sysfs names them,
 * a node with another number, a stand-in, rdma_cm missing; ACTIVE_DEFER is active.
 */
static void test_usability(const char *fixtures)
{
	char root[PATH_MAX], node[PATH_MAX * 2], cm[PATH_MAX * 2];
	const struct rdp_device *d;
	struct rdp_host *h;
	struct stat st;
	dev_t want, want_cm;

	snprintf(root, sizeof(root), "%s/usable", tmpdir);
	if (sh("cp -a '%s/seed000' '%s'", fixtures, root) != 0) {
		EXPECT_TRUE(false);
		return;
	}
	snprintf(node, sizeof(node), "%s/dev/infiniband/uverbs0", root);
	snprintf(cm, sizeof(cm), "%s/dev/infiniband/rdma_cm", root);
	want = sysfs_devnum(root, "infiniband_verbs", "uverbs0");
	want_cm = sysfs_devnum(root, "misc", "rdma_cm");
	EXPECT_TRUE(want != 0 && want_cm != 0);

	if ((h = discover_copy(root)) && (d = find(h, "mlx5_0"))) {
		EXPECT_TRUE(rdp_device_is_usable(d));
		EXPECT_STREQ(d->char_devices[0], "/dev/infiniband/uverbs0");
		EXPECT_EQ(rdp_device_char_devnum(d, 0), want);
		EXPECT_EQ(h->rdma_cm_devnum, want_cm);
	}
	rdp_host_free(h);

	if (stat(node, &st) == 0 && S_ISCHR(st.st_mode) && unlink(node) == 0 &&
	    mknod(node, S_IFCHR | 0600, makedev(major(want), minor(want) + 50)) == 0) {
		char reason[RDP_REASON_MAX];

		snprintf(reason, sizeof(reason),
			 "/dev/infiniband/uverbs0 is %u:%u, sysfs uverbs0 says %u:%u", major(want),
			 minor(want) + 50, major(want), minor(want));
		if ((h = discover_copy(root)) && (d = find(h, "mlx5_0"))) {
			EXPECT_EQ(d->usability, RDP_UNUSABLE_UVERBS_NODE);
			EXPECT_STREQ(d->unusable_reason, reason);
			EXPECT_TRUE(!has(d->char_devices, d->n_char_devices,
					 "/dev/infiniband/uverbs0"));
			EXPECT_TRUE(has_problem(d, "uverbs0: /dev/infiniband/uverbs0 is "));
		}
		rdp_host_free(h);
	} else {
		printf("test-discovery: fixture nodes are no char devices or mknod refused: "
		       "skipped the number mismatch\n");
	}

	/* An empty regular file stands in for the node: taken as it is. */
	unlink(node);
	EXPECT_EQ(sh("touch '%s'", node), 0);
	if ((h = discover_copy(root)) && (d = find(h, "mlx5_0")))
		EXPECT_TRUE(rdp_device_is_usable(d));
	rdp_host_free(h);
	/* ... but not one with contents. */
	EXPECT_EQ(sh("echo x > '%s'", node), 0);
	if ((h = discover_copy(root)) && (d = find(h, "mlx5_0"))) {
		EXPECT_EQ(d->usability, RDP_UNUSABLE_UVERBS_NODE);
		EXPECT_STREQ(d->unusable_reason,
			     "/dev/infiniband/uverbs0 is not a character device");
	}
	rdp_host_free(h);
	EXPECT_EQ(sh("truncate -s 0 '%s'", node), 0);

	/* No rdma_cm: nothing is usable; the reason says so. */
	EXPECT_EQ(unlink(cm), 0);
	if ((h = discover_copy(root)) && (d = find(h, "mlx5_0"))) {
		EXPECT_EQ(d->usability, RDP_UNUSABLE_NO_RDMA_CM);
		EXPECT_STREQ(d->unusable_reason, "/dev/infiniband/rdma_cm missing");
		EXPECT_STREQ(h->rdma_cm, "");
	}
	rdp_host_free(h);

	/* ACTIVE_DEFER (5) counts as active. */
	EXPECT_EQ(sh("echo '5: ACTIVE_DEFER' > '%s/sys/class/infiniband/mlx5_0/ports/1/state'",
		     root),
		  0);
	if ((h = discover_copy(root)) && (d = find(h, "mlx5_0"))) {
		EXPECT_EQ(d->ports[0].state, RDP_PORT_ACTIVE_DEFER);
		EXPECT_STREQ(d->ports[0].state_name, "ACTIVE_DEFER");
		EXPECT_TRUE(rdp_device_is_active(d));
	}
	rdp_host_free(h);
}

static void test_fixtures(const char *dir)
{
	const struct rdp_device *d;
	struct rdp_host *h;

	if ((h = fixture(dir, "dgx-h100"))) {
		EXPECT_EQ(h->n_devices, 12);
		if ((d = find(h, "mlx5_0"))) {
			EXPECT_STREQ(d->pci_address, "0000:18:00.0");
			EXPECT_EQ(d->numa_node, 0);
			EXPECT_TRUE(has(d->netdevs, d->n_netdevs, "ibp24s0"));
			EXPECT_EQ(d->ports[0].link_layer, RDP_LINK_INFINIBAND);
			EXPECT_EQ(d->n_problems, 0);
		}
		if ((d = find(h, "mlx5_6"))) {
			EXPECT_STREQ(d->pci_address, "0000:9a:00.0");
			EXPECT_EQ(d->numa_node, 1);
		}
		/* uverbs numbering follows registration order: read from the ibdev files. */
		for (size_t i = 0; i < h->n_devices; i++) {
			d = &h->devices[i];
			EXPECT_TRUE(d->n_char_devices >= 1);
			EXPECT_EQ(d->n_problems, 0);
		}
		if ((d = find(h, "mlx5_1")) && d->n_char_devices > 0)
			EXPECT_STREQ(d->char_devices[0], "/dev/infiniband/uverbs8");
		EXPECT_STREQ(h->rdma_cm, "/dev/infiniband/rdma_cm");
		rdp_host_free(h);
	}
	if ((h = fixture(dir, "sriov"))) {
		size_t vfs = 0;

		for (size_t i = 0; i < h->n_devices; i++) {
			d = &h->devices[i];
			if (!d->is_vf)
				continue;
			vfs++;
			EXPECT_STREQ(d->pf_netdev, "ens3f0");
			EXPECT_STREQ(d->pf_pci_address, "0000:3b:00.0");
			EXPECT_TRUE(d->vf_index >= 0);
		}
		EXPECT_TRUE(vfs >= 2);
		if ((d = find(h, "mlx5_1")))
			EXPECT_EQ(d->vf_index, 0);
		rdp_host_free(h);
	}
	if ((h = fixture(dir, "mlx4"))) {
		if ((d = find(h, "mlx4_0"))) {
			size_t umad = 0;

			EXPECT_EQ(d->n_ports, 2);
			for (size_t i = 0; i < d->n_char_devices; i++)
				umad += strstr(d->char_devices[i], "/umad") != NULL;
			EXPECT_EQ(umad, 2);
		}
		rdp_host_free(h);
	}
	if ((h = fixture(dir, "roce-lag"))) {
		if ((d = find(h, "mlx5_bond_0")))
			EXPECT_TRUE(has(d->netdevs, d->n_netdevs, "bond0"));
		rdp_host_free(h);
	}
	if ((h = fixture(dir, "broken"))) {
		size_t with_problems = 0;

		for (size_t i = 0; i < h->n_devices; i++)
			with_problems += h->devices[i].n_problems > 0;
		EXPECT_TRUE(h->n_devices >= 2);
		EXPECT_TRUE(with_problems >= 1);
		EXPECT_TRUE(with_problems < h->n_devices); /* the broken ones hide no others */
		rdp_host_free(h);
	}
	if ((h = fixture(dir, "no-rdma"))) {
		EXPECT_EQ(h->n_devices, 0);
		rdp_host_free(h);
	}
	if ((h = fixture(dir, "exclusive"))) {
		EXPECT_EQ(h->netns_mode, RDP_NETNS_EXCLUSIVE);
		rdp_host_free(h);
	}
	if ((h = fixture(dir, "rxe"))) {
		if ((d = find(h, "rxe0"))) {
			EXPECT_STREQ(d->pci_address, "");
			EXPECT_STREQ(d->rdma_driver, "rdma_rxe");
			EXPECT_TRUE(d->n_netdevs >= 1);
		}
		rdp_host_free(h);
	}
}

int main(void)
{
	const char *fixtures = getenv("RDP_FIXTURES");
	char sys[PATH_MAX], dev[PATH_MAX], probe[PATH_MAX];

	snprintf(tmpdir, sizeof(tmpdir), "%s/rdp-test-discovery-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	build_tree();
	snprintf(sys, sizeof(sys), "%s/sys", tmpdir);
	snprintf(dev, sizeof(dev), "%s/dev", tmpdir);

	test_tree(sys, dev);
	test_roots(sys);
	test_empty();

	if (fixtures) {
		snprintf(probe, sizeof(probe), "%s/dgx-h100/sys/class/infiniband", fixtures);
		if (access(probe, F_OK) == 0) {
			test_fixtures(fixtures);
			test_usability(fixtures);
		} else {
			printf("test-discovery: no generated fixtures in %s, skipped those\n",
			       fixtures);
		}
	}

	rm_rf(tmpdir);
	return test_summary("test-discovery");
}
