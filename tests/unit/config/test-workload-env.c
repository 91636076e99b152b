/* SPDX-License-Identifier: MIT */
/* workload-env.c: RDMA_DEVICE_*, NCCL_IB_HCA, UCX_NET_DEVICES and the constants, on hand-made hosts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "macro.h"
#include "config.h"
#include "device.h"
#include "pool.h"
#include "test.h"
#include "workload-env.h"

/* A device with ports of the given states and link layers; usable unless says otherwise. */
static void make_device(struct rdp_device *d, const char *name, const char *pci, size_t n_ports,
			const int *states, const enum rdp_link_layer *links)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	snprintf(d->pci_address, sizeof(d->pci_address), "%s", pci);
	d->numa_node = -1;
	d->vf_index = -1;
	d->ports = rdp_calloc(n_ports ? n_ports : 1, sizeof(*d->ports));
	d->n_ports = n_ports;
	for (size_t i = 0; i < n_ports; i++) {
		d->ports[i].num = (unsigned int)i + 1;
		d->ports[i].state = states[i];
		d->ports[i].link_layer = links[i];
		d->ports[i].roce_v2_ipv4_gid_index = -1;
	}
}

static const int active[] = { RDP_PORT_ACTIVE, RDP_PORT_ACTIVE };
static const enum rdp_link_layer ib[] = { RDP_LINK_INFINIBAND, RDP_LINK_INFINIBAND };
static const enum rdp_link_layer eth[] = { RDP_LINK_ETHER, RDP_LINK_ETHER };

/*
 * DGX-like: mlx5_0..mlx5_11 in name order (mlx5_9 before mlx5_10, as discovery sorts);
 * IB compute NICs 0,3,4,5,6,9,10,11, Ethernet storage 1,2,7,8; mlx5_4's port DOWN,
 * mlx5_5's ACTIVE_DEFER, mlx5_6's link layer unknown. Then mlx4_0: port 1 IB, port 2
 * Ethernet, both ACTIVE.
 */
static struct rdp_host *dgx(void)
{
	struct rdp_host *h = rdp_calloc(1, sizeof(*h));
	static const char *const names[] = { "mlx5_0", "mlx5_1", "mlx5_2",  "mlx5_3",
					     "mlx5_4", "mlx5_5", "mlx5_6",  "mlx5_7",
					     "mlx5_8", "mlx5_9", "mlx5_10", "mlx5_11" };
	static const char *const pci[] = { "0000:18:00.0", "0000:29:00.0", "0000:29:00.1",
					   "0000:40:00.0", "0000:4f:00.0", "0000:5e:00.0",
					   "0000:9a:00.0", "0000:a9:00.0", "0000:a9:00.1",
					   "0000:c0:00.0", "0000:ce:00.0", "0000:dc:00.0" };
	static const int down[] = { RDP_PORT_DOWN }, defer[] = { RDP_PORT_ACTIVE_DEFER };
	static const enum rdp_link_layer unknown[] = { RDP_LINK_UNKNOWN };
	static const enum rdp_link_layer mixed[] = { RDP_LINK_INFINIBAND, RDP_LINK_ETHER };

	h->devices = rdp_calloc(13, sizeof(*h->devices));
	h->n_devices = 13;
	for (size_t i = 0; i < 12; i++) {
		bool is_eth = i == 1 || i == 2 || i == 7 || i == 8;

		make_device(&h->devices[i], names[i], pci[i], 1,
			    i == 4 ? down : i == 5 ? defer : active,
			    is_eth ? eth : i == 6 ? unknown : ib);
	}
	make_device(&h->devices[12], "mlx4_0", "0000:04:00.0", 2, active, mixed);
	return h;
}

static struct rdp_resource resource(const char *full_name, unsigned int env_from)
{
	return (struct rdp_resource){ .name = (char *)"x", .prefix = (char *)"rdma",
				      .full_name = (char *)full_name, .env_from = env_from };
}

static void test_resource_var(void)
{
	char buf[RDP_ENV_RESOURCE_VAR_MAX], longname[RDP_RESOURCE_PREFIX_MAX + 80];

	EXPECT_EQ(rdp_env_resource_var("rdma/hca_shared_devices_a", buf, sizeof(buf)), 37);
	EXPECT_STREQ(buf, "RDMA_DEVICE_RDMA_HCA_SHARED_DEVICES_A");
	EXPECT_TRUE(rdp_env_resource_var("example.com/x", buf, sizeof(buf)) > 0);
	EXPECT_STREQ(buf, "RDMA_DEVICE_EXAMPLE_COM_X");
	EXPECT_TRUE(rdp_env_resource_var("nvidia.com-rdma.v2/Gpu0_Nic1", buf, sizeof(buf)) > 0);
	EXPECT_STREQ(buf, "RDMA_DEVICE_NVIDIA_COM_RDMA_V2_GPU0_NIC1");
	EXPECT_EQ(rdp_env_resource_var("", buf, sizeof(buf)), -EINVAL);
	/* exactly fits, one byte short */
	EXPECT_EQ(rdp_env_resource_var("rdma/a", buf, 19), 18);
	EXPECT_STREQ(buf, "RDMA_DEVICE_RDMA_A");
	EXPECT_EQ(rdp_env_resource_var("rdma/a", buf, 18), -ENOBUFS);
	/* the longest valid full name fits in RDP_ENV_RESOURCE_VAR_MAX */
	memset(longname, 'p', RDP_RESOURCE_PREFIX_MAX);
	longname[RDP_RESOURCE_PREFIX_MAX] = '/';
	memset(longname + RDP_RESOURCE_PREFIX_MAX + 1, 'n', RDP_RESOURCE_NAME_MAX);
	longname[RDP_RESOURCE_PREFIX_MAX + 1 + RDP_RESOURCE_NAME_MAX] = '\0';
	EXPECT_EQ(rdp_env_resource_var(longname, buf, sizeof(buf)),
		  RDP_ENV_RESOURCE_VAR_MAX - 1);
	strcat(longname, "n");
	EXPECT_EQ(rdp_env_resource_var(longname, buf, sizeof(buf)), -ENOBUFS);
}

static void test_build(const struct rdp_host *h)
{
	struct rdp_env_var consts[] = { { (char *)"NCCL_IB_TC", (char *)"106", 1, 1 },
					{ (char *)"NCCL_IB_TIMEOUT", (char *)"22", 1, 1 } };
	struct rdp_resource res = resource("rdma/compute_ib", RDP_ENV_FROM_ALL);
	size_t compute[] = { 0, 3, 4, 5, 6, 9, 10, 11 };
	struct rdp_env e = {};

	res.env = consts;
	res.n_env = 2;
	EXPECT_EQ(rdp_env_build(&res, h, compute, 8, RDP_ENV_GROUP_ALL, &e), 0);
	EXPECT_EQ(e.n, 5);
	if (e.n == 5) {
		EXPECT_STREQ(e.kv[0], "RDMA_DEVICE_RDMA_COMPUTE_IB=mlx5_0:1,mlx5_3:1,mlx5_4:1,"
				      "mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1");
		/* mlx5_4 DOWN and mlx5_6 (unknown link layer) left out; ACTIVE_DEFER counts */
		EXPECT_STREQ(e.kv[1], "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1,mlx5_5:1,mlx5_9:1,"
				      "mlx5_10:1,mlx5_11:1");
		EXPECT_STREQ(e.kv[2], "UCX_NET_DEVICES=mlx5_0:1,mlx5_3:1,mlx5_5:1,mlx5_9:1,"
				      "mlx5_10:1,mlx5_11:1");
		EXPECT_STREQ(e.kv[3], "NCCL_IB_TC=106");
		EXPECT_STREQ(e.kv[4], "NCCL_IB_TIMEOUT=22");
	}
	EXPECT_EQ(e.omitted, 0);
	EXPECT_EQ(e.n_traffic_devices, 6);
	EXPECT_STREQ(rdp_env_get(&e, "NCCL_IB_HCA"), "=mlx5_0:1,mlx5_3:1,mlx5_5:1,mlx5_9:1,"
						     "mlx5_10:1,mlx5_11:1");
	EXPECT_STREQ(rdp_env_get(&e, "NCCL_IB_TC"), "106");
	EXPECT_TRUE(rdp_env_get(&e, "NCCL_IB") == NULL);

	/* the order given is kept (an exclusive container's units, by unit ID) */
	{
		size_t two[] = { 10, 1 };

		EXPECT_EQ(rdp_env_build(&res, h, two, 2, RDP_ENV_GROUP_COMPUTED, &e), 0);
		EXPECT_EQ(e.n, 2);
		EXPECT_STREQ(e.kv[0], "NCCL_IB_HCA==mlx5_10:1,mlx5_1:1");
		EXPECT_STREQ(e.kv[1], "UCX_NET_DEVICES=mlx5_10:1,mlx5_1:1");
	}
	/* groups: the per-allocation part only, the constants only */
	EXPECT_EQ(rdp_env_build(&res, h, compute, 1, RDP_ENV_GROUP_PER_ALLOCATION, &e), 0);
	EXPECT_EQ(e.n, 3);
	EXPECT_STREQ(e.kv[0], "RDMA_DEVICE_RDMA_COMPUTE_IB=mlx5_0:1");
	EXPECT_STREQ(e.kv[2], "UCX_NET_DEVICES=mlx5_0:1");
	EXPECT_EQ(rdp_env_build(&res, h, compute, 1, RDP_ENV_GROUP_CONSTANTS, &e), 0);
	EXPECT_EQ(e.n, 2);
	EXPECT_STREQ(e.kv[0], "NCCL_IB_TC=106");
	EXPECT_EQ(rdp_env_build(&res, h, NULL, 0, RDP_ENV_GROUP_CONSTANTS, &e), 0);
	EXPECT_EQ(e.n, 2);
	EXPECT_EQ(rdp_env_build(&res, h, NULL, 0, 0, &e), 0);
	EXPECT_EQ(e.n, 0);

	/* no envFromDevices: RDMA_DEVICE_* only */
	res = resource("example.com/storage", 0);
	{
		size_t storage[] = { 1, 2, 7, 8 };

		EXPECT_EQ(rdp_env_build(&res, h, storage, 4, RDP_ENV_GROUP_ALL, &e), 0);
		EXPECT_EQ(e.n, 1);
		EXPECT_STREQ(e.kv[0], "RDMA_DEVICE_EXAMPLE_COM_STORAGE=mlx5_1:1,mlx5_2:1,mlx5_7:1,"
				      "mlx5_8:1");
	}
	/* only NCCL_IB_HCA asked for */
	res = resource("rdma/a", RDP_ENV_NCCL_IB_HCA);
	EXPECT_EQ(rdp_env_build(&res, h, compute, 2, RDP_ENV_GROUP_ALL, &e), 0);
	EXPECT_EQ(e.n, 2);
	EXPECT_STREQ(e.kv[1], "NCCL_IB_HCA==mlx5_0:1,mlx5_3:1");
	rdp_env_done(&e);
	rdp_env_done(&e); /* done twice is fine */
}

static void test_no_traffic(const struct rdp_host *h)
{
	struct rdp_resource res = resource("rdma/a", RDP_ENV_FROM_ALL);
	size_t bad[] = { 4, 6 }; /* DOWN; ACTIVE with an unknown link layer */
	struct rdp_env e = {};

	EXPECT_EQ(rdp_env_build(&res, h, bad, 2, RDP_ENV_GROUP_ALL, &e), 0);
	EXPECT_EQ(e.n, 1);
	EXPECT_STREQ(e.kv[0], "RDMA_DEVICE_RDMA_A=mlx5_4:1,mlx5_6:1");
	EXPECT_EQ(e.omitted, RDP_ENV_NCCL_IB_HCA | RDP_ENV_UCX_NET_DEVICES);
	EXPECT_EQ(e.n_traffic_devices, 0);
	/* the constants group alone never says "omitted" */
	EXPECT_EQ(rdp_env_build(&res, h, bad, 2, RDP_ENV_GROUP_CONSTANTS, &e), 0);
	EXPECT_EQ(e.omitted, 0);
	/* an index out of range, a resource without a name */
	{
		size_t out[] = { 13 };

		EXPECT_EQ(rdp_env_build(&res, h, out, 1, RDP_ENV_GROUP_ALL, &e), -EINVAL);
		res.full_name = NULL;
		EXPECT_EQ(rdp_env_build(&res, h, bad, 1, RDP_ENV_GROUP_ALL, &e), -EINVAL);
	}
	rdp_env_done(&e);
}

static void test_mlx4(const struct rdp_host *h)
{
	struct rdp_resource res = resource("rdma/vpi", RDP_ENV_FROM_ALL);
	size_t one[] = { 12 };
	struct rdp_env e = {};

	EXPECT_EQ(rdp_env_build(&res, h, one, 1, RDP_ENV_GROUP_ALL, &e), 0);
	EXPECT_EQ(e.n, 3);
	EXPECT_STREQ(e.kv[0], "RDMA_DEVICE_RDMA_VPI=mlx4_0:1,mlx4_0:2");
	EXPECT_STREQ(e.kv[1], "NCCL_IB_HCA==mlx4_0:1,mlx4_0:2");
	EXPECT_STREQ(e.kv[2], "UCX_NET_DEVICES=mlx4_0:1,mlx4_0:2");
	EXPECT_EQ(e.n_traffic_devices, 1);
	rdp_env_done(&e);
}

/* 40 devices: all listed (check-config warns that NCCL takes the first 32). */
static void test_many(void)
{
	struct rdp_host h = {};
	struct rdp_resource res = resource("rdma/many", RDP_ENV_NCCL_IB_HCA);
	size_t idx[40];
	struct rdp_env e = {};
	char want[1024] = "=";

	h.devices = rdp_calloc(40, sizeof(*h.devices));
	h.n_devices = 40;
	for (size_t i = 0; i < 40; i++) {
		char name[16];

		snprintf(name, sizeof(name), "mlx5_%zu", i);
		make_device(&h.devices[i], name, "", 1, active, ib);
		idx[i] = i;
		snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s:1", i ? "," : "",
			 name);
	}
	EXPECT_EQ(rdp_env_build(&res, &h, idx, 40, RDP_ENV_GROUP_ALL, &e), 0);
	EXPECT_STREQ(rdp_env_get(&e, "NCCL_IB_HCA"), want);
	EXPECT_EQ(e.n_traffic_devices, 40);
	rdp_env_done(&e);
	for (size_t i = 0; i < 40; i++)
		rdp_device_done(&h.devices[i]);
	rdp_free(h.devices);
}

/* A device without ports (an incomplete read) is listed by name in RDMA_DEVICE_* alone. */
static void test_no_ports(void)
{
	struct rdp_host h = {};
	struct rdp_resource res = resource("rdma/a", RDP_ENV_FROM_ALL);
	size_t idx[] = { 0, 1 };
	struct rdp_env e = {};

	h.devices = rdp_calloc(2, sizeof(*h.devices));
	h.n_devices = 2;
	make_device(&h.devices[0], "rxe0", "", 0, NULL, NULL);
	make_device(&h.devices[1], "mlx5_0", "", 1, active, eth);
	EXPECT_EQ(rdp_env_build(&res, &h, idx, 2, RDP_ENV_GROUP_ALL, &e), 0);
	EXPECT_EQ(e.n, 3);
	EXPECT_STREQ(e.kv[0], "RDMA_DEVICE_RDMA_A=rxe0,mlx5_0:1");
	EXPECT_STREQ(e.kv[1], "NCCL_IB_HCA==mlx5_0:1");
	rdp_env_done(&e);
	for (size_t i = 0; i < 2; i++)
		rdp_device_done(&h.devices[i]);
	rdp_free(h.devices);
}

static void test_pool_devices_and_checks(struct rdp_host *h)
{
	struct rdp_resource rs = resource("rdma/s", RDP_ENV_FROM_ALL);
	struct rdp_resource rx = resource("rdma/x", RDP_ENV_NCCL_IB_HCA);
	struct rdp_resource rn = resource("rdma/n", RDP_ENV_NCCL_IB_HCA);
	size_t ps[] = { 0, 3, 4 }, px[] = { 9, 3, 10 }, pn[] = { 4, 6 };
	struct rdp_pool pools_v[3] = {
		{ .res = &rs, .devices = ps, .n_devices = 3, .numa_node = -1 },
		{ .res = &rx, .devices = px, .n_devices = 3, .numa_node = -1 },
		{ .res = &rn, .devices = pn, .n_devices = 2, .numa_node = -1 },
	};
	struct rdp_pools pools = { .v = pools_v, .n = 3 };
	struct rdp_config c = { .path = (char *)"c.json" };
	struct rdp_diags d = {};
	size_t *v = NULL, n = 0;

	rx.mode = RDP_MODE_EXCLUSIVE;
	rs.line = 2;
	rn.line = 9;
	/* shared: the usable devices in pool order (mlx5_3 made unusable) */
	h->devices[3].usability = RDP_UNUSABLE_NO_UVERBS;
	EXPECT_EQ(rdp_env_pool_devices(h, &pools_v[0], &v, &n), 0);
	EXPECT_EQ(n, 2);
	if (n == 2) {
		EXPECT_EQ(v[0], 0);
		EXPECT_EQ(v[1], 4);
	}
	rdp_free(v);
	/* exclusive: the usable device with the lowest unit ID (mlx5_9, 0000:c0:00.0) */
	EXPECT_EQ(rdp_env_pool_devices(h, &pools_v[1], &v, &n), 0);
	EXPECT_EQ(n, 1);
	if (n == 1)
		EXPECT_EQ(v[0], 9);
	rdp_free(v);
	h->devices[3].usability = RDP_USABLE;

	EXPECT_EQ(rdp_env_check_pools(&c, h, &pools, &d), 0);
	EXPECT_EQ(d.n, 1);
	if (d.n == 1)
		EXPECT_STREQ(d.v[0].text, "c.json:9: warning: rdma/n: no port of its devices can "
					  "carry traffic on this node (none is ACTIVE with link layer "
					  "InfiniBand or Ethernet): NCCL_IB_HCA would be empty and is "
					  "left out");
	rdp_diags_done(&d);
	rn.env_from = RDP_ENV_FROM_ALL;
	EXPECT_EQ(rdp_env_check_pools(&c, h, &pools, &d), 0);
	EXPECT_CONTAINS(d.n ? d.v[0].text : "", "NCCL_IB_HCA and UCX_NET_DEVICES would be empty "
						 "and are left out");
	rdp_diags_done(&d);
}

static void test_over_32(void)
{
	struct rdp_host h = {};
	struct rdp_resource rs = resource("rdma/s", RDP_ENV_NCCL_IB_HCA);
	struct rdp_resource rx = resource("rdma/x", RDP_ENV_NCCL_IB_HCA);
	struct rdp_resource ru = resource("rdma/u", RDP_ENV_UCX_NET_DEVICES);
	size_t idx[33];
	struct rdp_pool pools_v[3] = {
		{ .res = &rs, .devices = idx, .n_devices = 33, .numa_node = -1 },
		{ .res = &rx, .devices = idx, .n_devices = 33, .numa_node = -1 },
		{ .res = &ru, .devices = idx, .n_devices = 33, .numa_node = -1 },
	};
	struct rdp_pools pools = { .v = pools_v, .n = 3 };
	struct rdp_config c = { .path = (char *)"c.json" };
	struct rdp_diags d = {};

	rx.mode = RDP_MODE_EXCLUSIVE;
	rs.line = 3;
	rx.line = 7;
	h.devices = rdp_calloc(33, sizeof(*h.devices));
	h.n_devices = 33;
	for (size_t i = 0; i < 33; i++) {
		char name[16];

		snprintf(name, sizeof(name), "mlx5_%zu", i);
		make_device(&h.devices[i], name, "", 1, active, ib);
		idx[i] = i;
	}
	EXPECT_EQ(rdp_env_check_pools(&c, &h, &pools, &d), 0);
	EXPECT_EQ(d.n, 2);
	if (d.n == 2) {
		EXPECT_STREQ(d.v[0].text, "c.json:3: warning: rdma/s: NCCL_IB_HCA names 33 devices "
					  "on this node: NCCL uses only the first 32");
		EXPECT_STREQ(d.v[1].text, "c.json:7: warning: rdma/x: 33 of its units can carry "
					  "traffic: a container given more than 32 gets an NCCL_IB_HCA "
					  "of which NCCL uses only the first 32");
	}
	rdp_diags_done(&d);
	/* 32: no warning */
	pools_v[0].n_devices = pools_v[1].n_devices = 32;
	EXPECT_EQ(rdp_env_check_pools(&c, &h, &pools, &d), 0);
	EXPECT_EQ(d.n, 0);
	rdp_diags_done(&d);
	for (size_t i = 0; i < 33; i++)
		rdp_device_done(&h.devices[i]);
	rdp_free(h.devices);
}

static void test_failmalloc(const struct rdp_host *h)
{
	struct rdp_env_var consts[] = { { (char *)"A", (char *)"1", 1, 1 } };
	struct rdp_resource res = resource("rdma/a", RDP_ENV_FROM_ALL);
	size_t idx[] = { 0, 3, 12 };
	struct rdp_env e = {};
	unsigned long total;

	res.env = consts;
	res.n_env = 1;
	rdp_alloc_fail_at(0);
	EXPECT_EQ(rdp_env_build(&res, h, idx, 3, RDP_ENV_GROUP_ALL, &e), 0);
	total = rdp_alloc_count();
	EXPECT_EQ(e.n, 4);
	EXPECT_TRUE(total >= 5);
	rdp_env_done(&e);
	for (unsigned long i = 1; i <= total; i++) {
		int r;

		rdp_alloc_fail_at(i);
		r = rdp_env_build(&res, h, idx, 3, RDP_ENV_GROUP_ALL, &e);
		rdp_alloc_fail_at(0);
		EXPECT_EQ(r, -ENOMEM);
		EXPECT_EQ(e.n, 0);
		EXPECT_TRUE(e.kv == NULL);
	}
	rdp_env_done(&e);
}

/* The env of several devices = the merge of the envs of each alone, for every sequence. */
static void test_merge(const struct rdp_host *h)
{
	struct rdp_resource r = resource("rdma/x", RDP_ENV_FROM_ALL);
	struct rdp_resource r0 = resource("rdma/x", 0);
	/* Sequences of devices (indexes), -1 ends one: mixed, no traffic first, mlx4, all down. */
	static const int seqs[][6] = { { 0, -1 },	   { 4, 0, -1 },	 { 0, 3, 9, 10, -1 },
				       { 6, 4, -1 },	   { 12, 1, 4, 5, -1 }, { 11, 2, 12, 6, 0, -1 },
				       { 4, 6, 4, -1 } };

	for (size_t q = 0; q < ARRAY_SIZE(seqs); q++)
		for (int with_from = 0; with_from < 2; with_from++) {
			const struct rdp_resource *res = with_from ? &r : &r0;
			struct rdp_env parts[6] = {}, merged = {}, whole = {};
			size_t devs[6], n = 0;

			for (; seqs[q][n] >= 0; n++) {
				devs[n] = (size_t)seqs[q][n];
				EXPECT_EQ(rdp_env_build(res, h, &devs[n], 1,
							RDP_ENV_GROUP_PER_ALLOCATION, &parts[n]),
					  0);
			}
			EXPECT_EQ(rdp_env_build(res, h, devs, n, RDP_ENV_GROUP_PER_ALLOCATION, &whole),
				  0);
			EXPECT_EQ(rdp_env_merge(parts, n, &merged), 0);
			EXPECT_EQ(merged.n, whole.n);
			for (size_t i = 0; i < merged.n && i < whole.n; i++)
				EXPECT_STREQ(merged.kv[i], whole.kv[i]);
			EXPECT_EQ(merged.omitted, whole.omitted);
			EXPECT_EQ(merged.n_traffic_devices, whole.n_traffic_devices);
			for (size_t i = 0; i < n; i++)
				rdp_env_done(&parts[i]);
			rdp_env_done(&merged);
			rdp_env_done(&whole);
		}
	/* Allocation failures: -ENOMEM, nothing left. */
	{
		struct rdp_env parts[2] = {}, m = {};
		size_t d0 = 0, d1 = 3;

		EXPECT_EQ(rdp_env_build(&r, h, &d0, 1, RDP_ENV_GROUP_PER_ALLOCATION, &parts[0]), 0);
		EXPECT_EQ(rdp_env_build(&r, h, &d1, 1, RDP_ENV_GROUP_PER_ALLOCATION, &parts[1]), 0);
		for (unsigned long k = 1; k < 20; k++) {
			int rr;

			rdp_alloc_fail_at(k);
			rr = rdp_env_merge(parts, 2, &m);
			rdp_alloc_fail_at(0);
			EXPECT_TRUE(rr == 0 || (rr == -ENOMEM && m.n == 0));
			rdp_env_done(&m);
		}
		EXPECT_STREQ(rdp_env_get(&parts[1], "NCCL_IB_HCA"), "=mlx5_3:1");
		rdp_env_done(&parts[0]);
		rdp_env_done(&parts[1]);
	}
}

int main(void)
{
	struct rdp_host *h = dgx();

	test_merge(h);

	test_resource_var();
	test_build(h);
	test_no_traffic(h);
	test_mlx4(h);
	test_many();
	test_no_ports();
	test_pool_devices_and_checks(h);
	test_over_32();
	test_failmalloc(h);
	rdp_host_free(h);
	return test_summary("test-workload-env");
}
