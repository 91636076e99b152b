/* SPDX-License-Identifier: MIT */
/* pool.c: pools of a parsed config on a host model built here. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "config.h"
#include "pool.h"
#include "test.h"

#define SV(...) ((char **)(const char *[]){ __VA_ARGS__ })
#define n0 SV("ib0")
#define n1 SV("ib1")
#define n2 SV("ens1f0np0")
#define n3 SV("ib3")
static struct rdp_port ib[] = { { .num = 1, .state = RDP_PORT_ACTIVE,
				  .link_layer = RDP_LINK_INFINIBAND } };
static struct rdp_port ib_down[] = { { .num = 1, .state = RDP_PORT_DOWN,
				       .link_layer = RDP_LINK_INFINIBAND } };
static struct rdp_port eth[] = { { .num = 1, .state = RDP_PORT_ACTIVE,
				   .link_layer = RDP_LINK_ETHER } };

#define DEV(nm, id, nd, numa, p)                                                                   \
	{ .name = nm, .pci_address = "0000:00:00.0", .vendor = "15b3", .device_id = id,           \
	  .driver = "mlx5_core", .netdevs = nd, .n_netdevs = 1, .numa_node = numa,                \
	  .vf_index = -1, .ports = p, .n_ports = 1 }

static struct rdp_device devs[] = {
	DEV("mlx5_0", "101d", n0, 0, ib),
	DEV("mlx5_1", "101d", n1, 0, ib_down),
	DEV("mlx5_2", "101d", n2, 1, eth),
	DEV("mlx5_3", "1021", n3, 1, ib),
};
static const struct rdp_host host = { .devices = devs, .n_devices = 4 };

static const char *cfg_text =
	"{\"configList\": [\n"
	" {\"resourceName\": \"ib\", \"rdmaHcaMax\": 10, \"selectors\": {\"linkTypes\": [\"ib\"]}},\n"
	" {\"resourceName\": \"ib_cx6\", \"rdmaHcaMax\": 5, \"selectors\": {\"deviceIDs\": [\"101d\"],"
	" \"linkTypes\": [\"ib\"]}},\n"
	" {\"resourceName\": \"roce\", \"rdmaHcaMax\": 5, \"selectors\": {\"linkTypes\": [\"eth\"]}},\n"
	" {\"resourceName\": \"none\", \"rdmaHcaMax\": 5, \"selectors\": {\"ifNames\": [\"ib9\"]}}\n"
	"]}";

static char *joined(const struct rdp_diags *d)
{
	static char buf[8192];
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < d->n && n < sizeof(buf) - 1; i++) {
		snprintf(buf + n, sizeof(buf) - n, "%s\n", d->v[i].text);
		n = strlen(buf);
	}
	return buf;
}

static void test_build(void)
{
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;
	struct rdp_pools *p = NULL;

	EXPECT_EQ(rdp_config_parse(cfg_text, strlen(cfg_text), "p.json", &c, &d), 0);
	if (!c)
		return;
	EXPECT_EQ(rdp_pools_build(c, &host, &p, &d), 0);
	if (!p) {
		rdp_config_free(c);
		return;
	}
	EXPECT_EQ(p->n, 4);
	/* ib: mlx5_0, mlx5_1, mlx5_3; NUMA 0 and 1 -> mixed */
	EXPECT_TRUE(p->v[0].res == &c->resources[0]);
	EXPECT_EQ(p->v[0].n_devices, 3);
	EXPECT_EQ(p->v[0].devices[0], 0);
	EXPECT_EQ(p->v[0].devices[1], 1);
	EXPECT_EQ(p->v[0].devices[2], 3);
	EXPECT_EQ(p->v[0].numa_node, -1);
	/* ib_cx6: mlx5_0, mlx5_1 on NUMA 0 */
	EXPECT_EQ(p->v[1].n_devices, 2);
	EXPECT_EQ(p->v[1].numa_node, 0);
	/* roce: mlx5_2 on NUMA 1 */
	EXPECT_EQ(p->v[2].n_devices, 1);
	EXPECT_EQ(p->v[2].devices[0], 2);
	EXPECT_EQ(p->v[2].numa_node, 1);
	/* none */
	EXPECT_EQ(p->v[3].n_devices, 0);
	EXPECT_EQ(p->v[3].numa_node, -1);
	EXPECT_EQ(d.n_warnings, 2);
	EXPECT_CONTAINS(joined(&d), "p.json:3: warning: mlx5_0, mlx5_1 are in both rdma/ib and "
				    "rdma/ib_cx6: pods of both resources share them");
	EXPECT_CONTAINS(joined(&d), "p.json:5: warning: rdma/none selects no device on this node: "
				    "it is advertised with 0 units");
	rdp_pools_free(p);

	/* No diags wanted: still builds. */
	p = NULL;
	EXPECT_EQ(rdp_pools_build(c, &host, &p, NULL), 0);
	EXPECT_TRUE(p != NULL);
	rdp_pools_free(p);

	/* An empty host: every pool empty. */
	{
		const struct rdp_host empty = { 0 };

		p = NULL;
		rdp_diags_done(&d);
		EXPECT_EQ(rdp_pools_build(c, &empty, &p, &d), 0);
		EXPECT_EQ(p ? p->v[0].n_devices : 99, 0);
		EXPECT_EQ(d.n_warnings, 4);
		rdp_pools_free(p);
	}
	rdp_config_free(c);
	rdp_diags_done(&d);
	EXPECT_TRUE(rdp_pools_free(NULL) == NULL);
}

static void test_failmalloc(void)
{
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;
	unsigned long total;

	if (rdp_config_parse(cfg_text, strlen(cfg_text), "p.json", &c, &d) < 0)
		return;
	rdp_diags_done(&d);
	{
		struct rdp_pools *p = NULL;

		rdp_alloc_fail_at(0);
		EXPECT_EQ(rdp_pools_build(c, &host, &p, &d), 0);
		total = rdp_alloc_count();
		rdp_pools_free(p);
		rdp_diags_done(&d);
	}
	for (unsigned long i = 1; i <= total; i++) {
		struct rdp_pools *p = (struct rdp_pools *)0x1;
		int r;

		rdp_alloc_fail_at(i);
		r = rdp_pools_build(c, &host, &p, &d);
		rdp_alloc_fail_at(0);
		EXPECT_EQ(r, -ENOMEM);
		EXPECT_TRUE(p == (struct rdp_pools *)0x1);
		rdp_diags_done(&d);
	}
	rdp_config_free(c);
}

int main(void)
{
	test_build();
	test_failmalloc();
	return test_summary("test-pool");
}
