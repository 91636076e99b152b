/* SPDX-License-Identifier: MIT */
/*
 * doctor, group "ports": per port of every RDMA device of the host model,
 *   port.state       ACTIVE and LinkUp (NCCL uses ACTIVE ports only);
 *   port.link_layer  against the linkTypes of the pools that select the device (or would
 *                    select it but for linkTypes, when no pool does);
 *   port.rate        against the best rate among the ACTIVE ports of the same PCI device ID
 *                    and link layer on the node (a CX-7 at 200 Gb/s beside CX-7s at 400);
 *                    a device without PCI IDs (rxe, siw) is not compared: skip;
 *   port.roce_gid    RoCE: the netdev's IPv4 address has a RoCE v2 GID (::ffff:a.b.c.d);
 *   port.mtu         RoCE: the netdev's MTU and the RoCE MTU the kernel derives from it.
 *
 * Reads the model (device.h) and, below the sysfs root, the ports' GID tables
 * (class/infiniband/<dev>/ports/<p>/{gids,gid_attrs/types,gid_attrs/ndevs}/<i>) and the
 * netdev's class/net/<if>/mtu. Nothing outside the roots, nothing logged.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "doctor-ports.h"
#include "doctor.h"
#include "selector.h"
#include "sysfs.h"

#define GID_SLOTS_MAX 4096 /* rxe has 1024; bound on the entries of one GID table read */

/* What a port's GID table says about IPv4 (RoCE v2 and v1 entries) and its netdev. */
struct port_gids {
	bool listed; /* gid_attrs/types could be listed */
	int v2_index, v1_index; /* first IPv4-mapped GID of each type; -1 none */
	uint8_t v2_gid[16], v1_gid[16];
	char ndev[RDP_IFNAME_MAX]; /* the netdev of the first valid slot naming one */
};

static void fmt_ipv4(const uint8_t gid[static 16], char buf[static 16])
{
	snprintf(buf, 16, "%u.%u.%u.%u", gid[12], gid[13], gid[14], gid[15]);
}

static int read_slot(int dirfd, const char *name, char *buf, size_t size)
{
	return dirfd < 0 ? -EBADF : rdp_sysfs_read_attr_at(dirfd, name, buf, size);
}

/* Reads the GID table of a port: every slot whose type reads (empty slots fail: skipped). */
static int read_port_gids(int sys, const char *dev, unsigned int port, struct port_gids *g)
{
	char path[RDP_SYSFS_PATH_MAX], type[32], gidbuf[64], ndev[RDP_IFNAME_MAX];
	char **names = NULL;
	size_t n = 0;
	int types_fd = -1, gids_fd = -1, ndevs_fd = -1, r;

	*g = (struct port_gids){.v2_index = -1, .v1_index = -1};
	snprintf(path, sizeof(path), "class/infiniband/%s/ports/%u/gid_attrs/types", dev, port);
	r = rdp_sysfs_list_dir(sys, path, GID_SLOTS_MAX, &names, &n);
	if (r == -ENOMEM)
		return r;
	if (r < 0)
		return 0;
	g->listed = true;
	types_fd = rdp_sysfs_open(sys, path, O_RDONLY | O_DIRECTORY);
	snprintf(path, sizeof(path), "class/infiniband/%s/ports/%u/gids", dev, port);
	gids_fd = rdp_sysfs_open(sys, path, O_RDONLY | O_DIRECTORY);
	snprintf(path, sizeof(path), "class/infiniband/%s/ports/%u/gid_attrs/ndevs", dev, port);
	ndevs_fd = rdp_sysfs_open(sys, path, O_RDONLY | O_DIRECTORY);
	for (size_t i = 0; i < n; i++) {
		uint8_t gid[16];
		long idx;
		bool v2;

		if (rdp_parse_long(names[i], 0, 65535, &idx) < 0 ||
		    read_slot(types_fd, names[i], type, sizeof(type)) <= 0)
			continue;
		if (!g->ndev[0] && read_slot(ndevs_fd, names[i], ndev, sizeof(ndev)) > 0 &&
		    rdp_is_ifname(ndev))
			memcpy(g->ndev, ndev, sizeof(ndev));
		v2 = strcmp(type, "RoCE v2") == 0;
		if ((v2 ? g->v2_index : g->v1_index) >= 0 ||
		    read_slot(gids_fd, names[i], gidbuf, sizeof(gidbuf)) <= 0 ||
		    rdp_parse_gid(gidbuf, gid) < 0 || !rdp_gid_is_ipv4_mapped(gid))
			continue;
		if (v2) {
			g->v2_index = (int)idx;
			memcpy(g->v2_gid, gid, 16);
		} else {
			g->v1_index = (int)idx;
			memcpy(g->v1_gid, gid, 16);
		}
	}
	rdp_sysfs_names_free(names, n);
	if (types_fd >= 0)
		close(types_fd);
	if (gids_fd >= 0)
		close(gids_fd);
	if (ndevs_fd >= 0)
		close(ndevs_fd);
	return 0;
}

/* The netdev of a RoCE port: its GID table's, else the device's only one; NULL: none. */
static const char *port_netdev(const struct rdp_device *d, const struct port_gids *g)
{
	if (g->ndev[0])
		return g->ndev;
	return d->n_netdevs == 1 ? d->netdevs[0] : NULL;
}

static void subject_of(const struct rdp_device *d, const struct rdp_port *p, char *buf,
		       size_t size)
{
	snprintf(buf, size, "%s port %u", d->name, p->num);
}

/* ---- port.state ---- */

static int check_state(const struct rdp_device *d, const struct rdp_port *p, const char *subj,
		       struct rdp_doctor_report *r)
{
	static const char symptom[] =
		"NCCL uses ACTIVE ports only: with none among the pod's devices it logs "
		"\"NET/IB : No device found.\" and falls back to \"Using network Socket\"";
	const char *phys = p->phys_state_name[0] ? p->phys_state_name : "unknown";
	char fix[512];

	if (p->state == RDP_PORT_STATE_UNKNOWN)
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.state", RDP_CHECK_SKIP, subj, NULL,
				      NULL, "state unreadable (see `rdma-dp discover` problems)");
	if (rdp_port_state_is_active(p->state) && (p->phys_state == 5 || p->phys_state < 0))
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.state", RDP_CHECK_OK, subj, NULL,
				      NULL, "state %s, physical state %s",
				      p->state_name[0] ? p->state_name : "ACTIVE", phys);
	if ((p->state == RDP_PORT_INIT || p->state == RDP_PORT_ARMED) && p->phys_state == 5 &&
	    p->link_layer == RDP_LINK_INFINIBAND) {
		snprintf(fix, sizeof(fix),
			 "run a subnet manager on the fabric (opensm on a host, or the switch's or "
			 "UFM's SM); `ibstat %s %u` shows the SM LID once one answers",
			 d->name, p->num);
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.state", RDP_CHECK_FAIL, subj,
				      symptom, fix,
				      "state %s, physical state %s: the link is up but no subnet "
				      "manager has configured the port",
				      p->state_name, phys);
	}
	if (d->rdma_driver[0] && d->n_netdevs > 0)
		snprintf(fix, sizeof(fix),
			 "%s's port follows its netdev: bring %s up and give it a carrier (`ip link "
			 "set %s up`; `ip link show %s`: a veth needs its peer up too)",
			 d->rdma_driver, d->netdevs[0], d->netdevs[0], d->netdevs[0]);
	else if (d->rdma_driver[0])
		snprintf(fix, sizeof(fix),
			 "%s's port follows its netdev, which is gone: `rdma link delete %s`, then "
			 "`rdma link add` it again on an existing netdev",
			 d->rdma_driver, d->name);
	else if (p->link_layer == RDP_LINK_ETHER && d->n_netdevs > 0)
		snprintf(fix, sizeof(fix),
			 "bring the link up: `ip link set %s up`, then check the cable, "
			 "transceiver and switch port (`ethtool %s`, `mlxlink -d %s`)",
			 d->netdevs[0], d->netdevs[0], d->pci_address[0] ? d->pci_address : d->name);
	else
		snprintf(fix, sizeof(fix),
			 "check the cable, transceiver and switch port (`mlxlink -d %s`, `ibstat "
			 "%s %u`); a Disabled port is enabled with `ibportstate`",
			 d->pci_address[0] ? d->pci_address : d->name, d->name, p->num);
	return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.state", RDP_CHECK_FAIL, subj, symptom, fix,
			      "state %s, physical state %s",
			      p->state_name[0] ? p->state_name : "?", phys);
}

/* ---- port.link_layer ---- */

static bool pool_has(const struct rdp_pool *pool, size_t di)
{
	for (size_t i = 0; i < pool->n_devices; i++)
		if (pool->devices[i] == di)
			return true;
	return false;
}

static bool in_any_pool(const struct rdp_pools *pools, size_t di)
{
	for (size_t i = 0; i < pools->n; i++)
		if (pool_has(&pools->v[i], di))
			return true;
	return false;
}

static bool any_link_types(const struct rdp_pools *pools)
{
	for (size_t i = 0; i < pools->n; i++)
		if (pools->v[i].res->sel.link_types.n)
			return true;
	return false;
}

static bool link_types_name(const struct rdp_selectors *s, enum rdp_link_layer l)
{
	for (size_t i = 0; i < s->link_types.n; i++)
		if (rdp_link_type_parse(s->link_types.v[i]) == l)
			return true;
	return false;
}

/* "[ether, ETH]" */
static void fmt_link_types(const struct rdp_selectors *s, char *buf, size_t size)
{
	size_t len = 0;

	len += (size_t)snprintf(buf, size, "[");
	for (size_t i = 0; i < s->link_types.n && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "",
					s->link_types.v[i]);
	if (len < size)
		snprintf(buf + len, size - len, "]");
}

/*
 * Whether the pool means d and only its linkTypes keep it out: its other selectors match d
 * and either name d itself (ifNames, pfNames, rootDevices) or select nothing on this node (a
 * pool whose every device is in the other mode, as a VPI card left in its default mode). A
 * pool that took other devices with generic selectors (vendors, deviceIDs, drivers) and
 * leaves d out by linkTypes does what such a config means: dgx-h100's CX-7s are split by
 * link layer that way.
 */
static bool means_but_link_types(const struct rdp_pool *pool, const struct rdp_device *d)
{
	struct rdp_selectors t = pool->res->sel;
	struct rdp_sel_explain ex;

	t.link_types.n = 0;
	t.link_types.v = NULL;
	if (!rdp_selectors_empty(&t) && !rdp_selectors_match(&t, d, &ex))
		return false;
	if (pool->n_devices == 0)
		return true;
	return !rdp_selectors_empty(&t) &&
	       (ex.result[RDP_SEL_IF_NAMES] == RDP_SEL_MATCH ||
		ex.result[RDP_SEL_PF_NAMES] == RDP_SEL_MATCH ||
		ex.result[RDP_SEL_ROOT_DEVICES] == RDP_SEL_MATCH);
}

static const char *ll_word(enum rdp_link_layer l)
{
	return l == RDP_LINK_INFINIBAND ? "InfiniBand" : l == RDP_LINK_ETHER ? "Ethernet" : "unknown";
}

static int check_link_layer(const struct rdp_doctor_ctx *c, size_t di, const struct rdp_port *p,
			    const char *subj, struct rdp_doctor_report *r)
{
	const struct rdp_device *d = &c->host->devices[di];
	const char *pname = d->pci_address[0] ? d->pci_address : d->name;
	char ok_pools[512] = "", lt[256], fix[512];
	size_t ok_len = 0;
	bool in_some = in_any_pool(c->pools, di);

	for (size_t i = 0; i < c->pools->n; i++) {
		const struct rdp_pool *pool = &c->pools->v[i];
		const struct rdp_selectors *s = &pool->res->sel;
		bool selected = pool_has(pool, di);

		if (s->link_types.n == 0)
			continue;
		if (link_types_name(s, p->link_layer)) {
			if (selected && ok_len < sizeof(ok_pools))
				ok_len += (size_t)snprintf(ok_pools + ok_len, sizeof(ok_pools) - ok_len,
							   "%s%s", ok_len ? ", " : "",
							   pool->res->name);
			continue;
		}
		fmt_link_types(s, lt, sizeof(lt));
		if (d->rdma_driver[0])
			snprintf(fix, sizeof(fix),
				 "%s's link layer is fixed (%s): change the linkTypes of resource %s",
				 d->rdma_driver, ll_word(p->link_layer), pool->res->name);
		else
			snprintf(fix, sizeof(fix),
				 "set the port's link type on the NIC (`mlxconfig -d %s set "
				 "LINK_TYPE_P%u=%d`, then reset the NIC) or change the linkTypes of "
				 "resource %s",
				 pname, p->num, p->link_layer == RDP_LINK_INFINIBAND ? 2 : 1,
				 pool->res->name);
		if (selected)
			return rdp_doctor_add(
				r, RDP_GROUP_PORTS, "port.link_layer", RDP_CHECK_FAIL, subj,
				"pods of the resource get a port of the other link layer: their RoCE "
				"settings (NCCL_IB_GID_INDEX, the netdev's IP) or IB settings do not "
				"apply, and NCCL connects to peers it cannot reach (\"Call to "
				"ibv_modify_qp failed\")",
				fix, "%s port of %s, which resource %s selects (linkTypes %s)",
				ll_word(p->link_layer), d->name, pool->res->name, lt);
		if (!in_some && means_but_link_types(pool, d))
			return rdp_doctor_add(
				r, RDP_GROUP_PORTS, "port.link_layer", RDP_CHECK_FAIL, subj,
				"the resource has no device for it: pods asking for it stay Pending, "
				"or get other devices; without one NCCL logs \"NET/IB : No device "
				"found.\"",
				fix,
				"%s port; resource %s (linkTypes %s) %s %s on every other "
				"selector, so %s is in no pool",
				ll_word(p->link_layer), pool->res->name, lt,
				pool->n_devices ? "names" : "has no device and matches", d->name,
				d->name);
	}
	if (ok_len)
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.link_layer", RDP_CHECK_OK, subj, NULL,
				      NULL, "%s, as the linkTypes of %s expect",
				      ll_word(p->link_layer), ok_pools);
	if (!any_link_types(c->pools))
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.link_layer", RDP_CHECK_OK, subj,
				      NULL, NULL, "%s (no resource selects by linkTypes)",
				      ll_word(p->link_layer));
	return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.link_layer", RDP_CHECK_OK, subj, NULL, NULL,
			      "%s (no resource with linkTypes selects %s)", ll_word(p->link_layer),
			      d->name);
}

/* ---- port.rate ---- */

/*
 * A RoCE LAG device (mlx5_bond_0): one of its netdevs is a bonding master. Its port's rate
 * is the bond's (2 x 100 Gb/s gives 200), so it is compared with other LAG devices only.
 */
static bool is_lag(int sys, const struct rdp_device *d)
{
	char path[RDP_SYSFS_PATH_MAX];

	for (size_t i = 0; i < d->n_netdevs; i++) {
		snprintf(path, sizeof(path), "class/net/%s/bonding", d->netdevs[i]);
		if (rdp_sysfs_exists(sys, path))
			return true;
	}
	return false;
}

/*
 * The best rate among the ACTIVE ports with d's vendor and device ID, p's link layer, and d's
 * LAG-ness; 0 none.
 */
static unsigned long best_rate(int sys, const struct rdp_host *h, const struct rdp_device *d,
			       const struct rdp_port *p, const char **ret_rate,
			       const struct rdp_device **ret_dev, unsigned int *ret_port)
{
	bool lag = is_lag(sys, d);
	unsigned long best = 0;

	for (size_t i = 0; i < h->n_devices; i++) {
		const struct rdp_device *o = &h->devices[i];

		if (strcmp(o->device_id, d->device_id) != 0 || strcmp(o->vendor, d->vendor) != 0 ||
		    is_lag(sys, o) != lag)
			continue;
		for (size_t k = 0; k < o->n_ports; k++) {
			const struct rdp_port *q = &o->ports[k];
			struct rdp_rate rt;

			if (q->link_layer != p->link_layer || !rdp_port_state_is_active(q->state) ||
			    rdp_parse_rate(q->rate, &rt) < 0 || rt.mbps <= best)
				continue;
			best = rt.mbps;
			*ret_rate = q->rate;
			*ret_dev = o;
			*ret_port = q->num;
		}
	}
	return best;
}

static int check_rate(const struct rdp_doctor_ctx *c, const struct rdp_device *d,
		      const struct rdp_port *p, const char *subj, struct rdp_doctor_report *r)
{
	const struct rdp_device *bd = NULL;
	const char *brate = NULL;
	unsigned int bport = 0;
	struct rdp_rate rt;
	unsigned long best;
	char fix[512];

	if (!rdp_port_state_is_active(p->state))
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.rate", RDP_CHECK_SKIP, subj, NULL,
				      NULL, "port not ACTIVE (port.state): rate %s not compared",
				      p->rate[0] ? p->rate : "unknown");
	if (rdp_parse_rate(p->rate, &rt) < 0)
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.rate", RDP_CHECK_SKIP, subj, NULL,
				      NULL, "rate unreadable (\"%s\")", p->rate);
	/*
	 * No PCI IDs (rxe, siw): no model whose line rate it should reach; its rate is what
	 * the driver derives from its netdev's speed (rxe on a veth 10 Gb/s, on virtio-net 2.5),
	 * so two soft devices are no more alike than their netdevs.
	 */
	if (!d->vendor[0] || !d->device_id[0])
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.rate", RDP_CHECK_SKIP, subj, NULL,
				      NULL,
				      "%s: %s has no PCI device ID (%s), its rate follows its "
				      "netdev%s%s: not compared with other devices",
				      p->rate, d->name,
				      d->rdma_driver[0] ? d->rdma_driver : "a software device",
				      d->n_netdevs ? " " : "", d->n_netdevs ? d->netdevs[0] : "");
	best = best_rate(c->sys_fd, c->host, d, p, &brate, &bd, &bport);
	if (rt.mbps >= best)
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.rate", RDP_CHECK_OK, subj, NULL, NULL,
				      "%s, the best of the node's %s:%s %s ports", p->rate,
				      d->vendor[0] ? d->vendor : "-", d->device_id[0] ? d->device_id : "-",
				      ll_word(p->link_layer));
	if (p->link_layer == RDP_LINK_ETHER && d->n_netdevs > 0)
		snprintf(fix, sizeof(fix),
			 "check the cable or transceiver and the switch port's speed (`ethtool %s`, "
			 "`mlxlink -d %s`); reseat or replace it",
			 d->netdevs[0], d->pci_address[0] ? d->pci_address : d->name);
	else
		snprintf(fix, sizeof(fix),
			 "check the cable or transceiver and the switch port (`mlxlink -d %s`, "
			 "`ibstat %s %u`); a width below the others' is a bad lane: reseat or replace",
			 d->pci_address[0] ? d->pci_address : d->name, d->name, p->num);
	return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.rate", RDP_CHECK_WARN, subj,
			      "bandwidth below line rate on this rail (NCCL logs \"speed change "
			      "detected\"); collectives run at the slowest rail's speed",
			      fix, "%s, below %s of %s port %u (same device ID %s:%s)", p->rate, brate,
			      bd->name, bport, d->vendor, d->device_id);
}

/* ---- port.roce_gid ---- */

static int check_roce_gid(const struct rdp_doctor_ctx *c, const struct rdp_device *d,
			  const struct rdp_port *p, const struct port_gids *g, const char *subj,
			  struct rdp_doctor_report *r)
{
	const char *nd = port_netdev(d, g);
	char ip[16], fix[512];

	if (p->roce_v2_ipv4_gid_index >= 0) {
		/* The model's index; the address from the table where it read the same slot. */
		if (g->v2_index == p->roce_v2_ipv4_gid_index)
			fmt_ipv4(g->v2_gid, ip);
		else
			snprintf(ip, sizeof(ip), "?");
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.roce_gid", RDP_CHECK_OK, subj, NULL,
				      NULL, "RoCE v2 IPv4 GID at index %d (::ffff:%s on %s)",
				      p->roce_v2_ipv4_gid_index, ip, nd ? nd : "?");
	}
	if (!g->listed)
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.roce_gid", RDP_CHECK_SKIP, subj, NULL,
				      NULL, "GID table (ports/%u/gid_attrs/types) unreadable",
				      p->num);
	if (g->v1_index >= 0) {
		fmt_ipv4(g->v1_gid, ip);
		if (strncmp(d->driver, "mlx4", 4) == 0)
			snprintf(fix, sizeof(fix),
				 "ConnectX-3 Pro: load mlx4_core with roce_mode=2 (ConnectX-3 has "
				 "RoCE v1 only); otherwise NCCL_IB_ROCE_VERSION_NUM=1 with "
				 "NCCL_IB_GID_INDEX=%d uses the v1 GID, on one L2 segment only",
				 g->v1_index);
		else
			snprintf(fix, sizeof(fix),
				 "enable RoCE v2 on the NIC (its firmware's RoCE mode, e.g. mlxconfig "
				 "-d %s; check `cat /sys/class/infiniband/%s/ports/%u/gid_attrs/types/*`); "
				 "meanwhile NCCL_IB_ROCE_VERSION_NUM=1 with NCCL_IB_GID_INDEX=%d uses the "
				 "v1 GID, on one L2 segment only",
				 d->pci_address[0] ? d->pci_address : d->name, d->name, p->num,
				 g->v1_index);
		return rdp_doctor_add(
			r, RDP_GROUP_PORTS, "port.roce_gid", RDP_CHECK_FAIL, subj,
			"NCCL looks for a RoCE v2 IPv4 GID (NCCL_IB_ROCE_VERSION_NUM=2, "
			"NCCL_IB_ADDR_FAMILY=AF_INET): without one it picks another GID and "
			"connections fail: \"Call to ibv_modify_qp failed with 22 Invalid argument\"",
			fix,
			"%s has IPv4 %s (RoCE v1 GID at index %d) but no RoCE v2 GID for it",
			nd ? nd : "the netdev", ip, g->v1_index);
	}
	/*
	 * No ::ffff: GID of any type: the kernel adds one per IPv4 address of the netdev, so the
	 * netdev has none as the GID table shows it; without netlink nothing else says so.
	 */
	return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.roce_gid", RDP_CHECK_SKIP, subj, NULL,
			      NULL,
			      "no IPv4 address on %s as its GID table shows (no ::ffff:a.b.c.d GID "
			      "of any type): NCCL over RoCE needs one (`ip addr add ... dev %s`)",
			      nd ? nd : "its netdev", nd ? nd : "<netdev>");
}

/* ---- port.mtu ---- */

/* The kernel's iboe_get_mtu() (include/rdma/ib_addr.h): bytes; 0 below 256. */
int rdp_doctor_roce_mtu(long netdev_mtu)
{
	/* GRH 40 + UDP 8 + BTH 12 + XRC ext 4 + AtomicETH 28 + ICRC 4 */
	long m = netdev_mtu - 96;

	for (int v = 4096; v >= 256; v /= 2)
		if (m >= v)
			return v;
	return 0;
}

static int check_mtu(const struct rdp_doctor_ctx *c, const struct rdp_device *d,
		     const struct port_gids *g, const char *subj, struct rdp_doctor_report *r)
{
	const char *nd = port_netdev(d, g);
	char path[RDP_SYSFS_PATH_MAX], buf[32], fix[512];
	long mtu;
	int roce, n;

	if (!nd)
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.mtu", RDP_CHECK_SKIP, subj, NULL, NULL,
				      "no netdev known for the port (GID table names none)");
	snprintf(path, sizeof(path), "class/net/%s/mtu", nd);
	n = rdp_sysfs_read_attr(c->sys_fd, path, buf, sizeof(buf));
	if (n < 0 || rdp_parse_long(buf, 0, 16 * 1024 * 1024, &mtu) < 0)
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.mtu", RDP_CHECK_SKIP, subj, NULL, NULL,
				      "%s/class/net/%s/mtu unreadable (%s)", c->sysfs_root, nd,
				      n < 0 ? strerror(-n) : "not a number");
	roce = rdp_doctor_roce_mtu(mtu);
	if (roce >= 4096)
		return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.mtu", RDP_CHECK_OK, subj, NULL, NULL,
				      "%s MTU %ld: RoCE MTU 4096", nd, mtu);
	snprintf(fix, sizeof(fix),
		 "`ip link set dev %s mtu 9000` (persist it in the node's network config) with the "
		 "same or larger MTU on the switch ports and peers; an MTU of 4192 or more gives "
		 "RoCE MTU 4096",
		 nd);
	return rdp_doctor_add(r, RDP_GROUP_PORTS, "port.mtu", RDP_CHECK_WARN, subj,
			      "each RDMA packet carries at most the RoCE MTU of payload instead of "
			      "4096 bytes: lower bandwidth, more packets per message (NCCL's IB "
			      "logs print the MTU as an enum: \"mtu 3\" is 1024, \"mtu 5\" 4096)",
			      fix,
			      "%s MTU %ld: RoCE MTU %d (the MTU minus 96 bytes of RoCE headers, "
			      "rounded down to 256/512/1024/2048/4096)",
			      nd, mtu, roce);
}

int rdp_doctor_ports(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	char subj[RDP_IBDEV_NAME_MAX + 16];
	int k;

	if (!c->host || c->host->n_devices == 0) {
		k = rdp_doctor_add(r, RDP_GROUP_PORTS, "port.state", RDP_CHECK_SKIP, "", NULL, NULL,
				   "no RDMA device under %s/class/infiniband (stack.* says why)",
				   c->sysfs_root ? c->sysfs_root : "the sysfs root");
		return k == -ENOMEM ? k : 0;
	}
	if (!c->config || !c->pools) {
		k = rdp_doctor_add(r, RDP_GROUP_PORTS, "port.link_layer", RDP_CHECK_SKIP, "", NULL,
				   NULL, "no config (--config-file): link layers not compared to the "
				   "resources' linkTypes");
		if (k == -ENOMEM)
			return k;
	}
	for (size_t di = 0; di < c->host->n_devices; di++) {
		const struct rdp_device *d = &c->host->devices[di];

		for (size_t pi = 0; pi < d->n_ports; pi++) {
			const struct rdp_port *p = &d->ports[pi];
			struct port_gids g = {.v2_index = -1, .v1_index = -1};

			subject_of(d, p, subj, sizeof(subj));
			k = check_state(d, p, subj, r);
			if (k >= 0 && c->config && c->pools)
				k = check_link_layer(c, di, p, subj, r);
			if (k >= 0)
				k = check_rate(c, d, p, subj, r);
			if (k >= 0 && p->link_layer == RDP_LINK_ETHER)
				k = read_port_gids(c->sys_fd, d->name, p->num, &g);
			if (k >= 0 && p->link_layer == RDP_LINK_ETHER)
				k = check_roce_gid(c, d, p, &g, subj, r);
			if (k >= 0 && p->link_layer == RDP_LINK_ETHER)
				k = check_mtu(c, d, &g, subj, r);
			if (k == -ENOMEM)
				return k;
		}
	}
	return 0;
}
