/* SPDX-License-Identifier: MIT */
/*
 * doctor-ports.c and doctor-congestion.c: the RoCE MTU rule (iboe_get_mtu), port.state /
 * port.rate / port.link_layer on hand-made hosts (a down port, an IB port without SM, a port
 * trained down beside its peers, a VPI device whose Ethernet port sits in an InfiniBand pool,
 * a device left out of every pool by linkTypes alone, two pools that split the link layers),
 * what a host without sysfs behind it gives (skips, never ok), and the generated fixtures
 * (RDP_FIXTURES) through discovery: dgx-h100 all ok, port-down's two ports fail, rxe's
 * counters skip, interval 0 skips.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "diag.h"
#include "discovery.h"
#include "doctor-ports.h"
#include "doctor.h"
#include "pool.h"
#include "sysfs.h"
#include "test.h"

static const struct rdp_check *find(const struct rdp_doctor_report *r, const char *id,
				    const char *subject)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->v[i].id, id) == 0 && strcmp(r->v[i].subject, subject) == 0)
			return &r->v[i];
	return NULL;
}

static enum rdp_check_status status_of(const struct rdp_doctor_report *r, const char *id,
				       const char *subject)
{
	const struct rdp_check *c = find(r, id, subject);

	return c ? c->status : _RDP_CHECK_STATUS_MAX;
}

static void test_roce_mtu(void)
{
	EXPECT_EQ(rdp_doctor_roce_mtu(9000), 4096);
	EXPECT_EQ(rdp_doctor_roce_mtu(4192), 4096);
	EXPECT_EQ(rdp_doctor_roce_mtu(4191), 2048);
	EXPECT_EQ(rdp_doctor_roce_mtu(4092), 2048); /* IPoIB's default: 4096 needs 4192 */
	EXPECT_EQ(rdp_doctor_roce_mtu(2144), 2048);
	EXPECT_EQ(rdp_doctor_roce_mtu(2143), 1024);
	EXPECT_EQ(rdp_doctor_roce_mtu(1500), 1024);
	EXPECT_EQ(rdp_doctor_roce_mtu(352), 256);
	EXPECT_EQ(rdp_doctor_roce_mtu(351), 0);
	EXPECT_EQ(rdp_doctor_roce_mtu(0), 0);
	EXPECT_EQ(rdp_doctor_roce_mtu(-5), 0);
	EXPECT_EQ(rdp_doctor_roce_mtu(65536), 4096);
}

static struct rdp_port port(unsigned int num, enum rdp_link_layer ll, int state, int phys,
			    const char *rate)
{
	struct rdp_port p = {.num = num, .state = state, .phys_state = phys, .link_layer = ll,
			     .roce_v2_ipv4_gid_index = -1};

	snprintf(p.state_name, sizeof(p.state_name), "%s",
		 state == 4 ? "ACTIVE" : state == 2 ? "INIT" : state == 1 ? "DOWN" : "");
	snprintf(p.phys_state_name, sizeof(p.phys_state_name), "%s",
		 phys == 5 ? "LinkUp" : phys == 3 ? "Disabled" : "");
	snprintf(p.rate, sizeof(p.rate), "%s", rate);
	return p;
}

static struct rdp_device device(const char *name, const char *pci, const char *id,
				struct rdp_port *ports, size_t n)
{
	struct rdp_device d = {.ports = ports, .n_ports = n, .numa_node = 0};

	snprintf(d.name, sizeof(d.name), "%s", name);
	snprintf(d.pci_address, sizeof(d.pci_address), "%s", pci);
	snprintf(d.vendor, sizeof(d.vendor), "15b3");
	snprintf(d.device_id, sizeof(d.device_id), "%s", id);
	snprintf(d.driver, sizeof(d.driver), "mlx5_core");
	return d;
}

/* A context on a hand-made host over an empty sysfs root (nothing readable behind it). */
static int empty_root(char *dir)
{
	int fd;

	snprintf(dir, PATH_MAX, "/tmp/test-doctor-ports.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	return rdp_sysfs_open_root(dir, &fd) < 0 ? -1 : fd;
}

static void test_hand_made(void)
{
	struct rdp_port p0[] = {port(1, RDP_LINK_INFINIBAND, 4, 5, "400 Gb/sec (4X NDR)")};
	struct rdp_port p1[] = {port(1, RDP_LINK_INFINIBAND, 4, 5, "200 Gb/sec (2X NDR)")};
	struct rdp_port p2[] = {port(1, RDP_LINK_INFINIBAND, 1, 3, "10 Gb/sec (4X SDR)")};
	struct rdp_port p3[] = {port(1, RDP_LINK_INFINIBAND, 2, 5, "400 Gb/sec (4X NDR)")};
	/* another device ID: its 100 is not compared to the CX-7s' 400 */
	struct rdp_port p4[] = {port(1, RDP_LINK_INFINIBAND, 4, 5, "100 Gb/sec (4X EDR)")};
	struct rdp_port p5[] = {port(1, RDP_LINK_ETHER, 4, 5, "200 Gb/sec (2X NDR)")};
	struct rdp_port p6[] = {port(1, RDP_LINK_INFINIBAND, -1, -1, "")};
	struct rdp_device devs[] = {
		device("mlx5_0", "0000:18:00.0", "1021", p0, 1),
		device("mlx5_1", "0000:28:00.0", "1021", p1, 1),
		device("mlx5_2", "0000:38:00.0", "1021", p2, 1),
		device("mlx5_3", "0000:48:00.0", "1021", p3, 1),
		device("mlx5_4", "0000:58:00.0", "101b", p4, 1),
		device("mlx5_5", "0000:68:00.0", "1021", p5, 1),
		device("mlx5_6", "0000:78:00.0", "1021", p6, 1),
	};
	struct rdp_host h = {.devices = devs, .n_devices = 7};
	struct rdp_doctor_report r = {};
	char dir[PATH_MAX];
	struct rdp_doctor_ctx c = {.sys_fd = empty_root(dir), .proc_fd = -1, .sysfs_root = dir,
				   .host = &h, .interval_ms = 1};
	const struct rdp_check *k;

	EXPECT_TRUE(c.sys_fd >= 0);
	EXPECT_EQ(rdp_doctor_ports(&c, &r), 0);
	EXPECT_EQ(status_of(&r, "port.state", "mlx5_0 port 1"), RDP_CHECK_OK);
	EXPECT_EQ(status_of(&r, "port.state", "mlx5_2 port 1"), RDP_CHECK_FAIL);
	k = find(&r, "port.state", "mlx5_2 port 1");
	EXPECT_STREQ(k ? k->finding : NULL, "state DOWN, physical state Disabled");
	k = find(&r, "port.state", "mlx5_3 port 1");
	EXPECT_TRUE(k && k->status == RDP_CHECK_FAIL);
	EXPECT_CONTAINS(k ? k->finding : NULL, "no subnet manager");
	EXPECT_EQ(status_of(&r, "port.state", "mlx5_6 port 1"), RDP_CHECK_SKIP);

	EXPECT_EQ(status_of(&r, "port.rate", "mlx5_0 port 1"), RDP_CHECK_OK);
	k = find(&r, "port.rate", "mlx5_1 port 1");
	EXPECT_TRUE(k && k->status == RDP_CHECK_WARN);
	EXPECT_STREQ(k ? k->finding : NULL, "200 Gb/sec (2X NDR), below 400 Gb/sec (4X NDR) of "
					    "mlx5_0 port 1 (same device ID 15b3:1021)");
	EXPECT_EQ(status_of(&r, "port.rate", "mlx5_2 port 1"), RDP_CHECK_SKIP); /* down */
	EXPECT_EQ(status_of(&r, "port.rate", "mlx5_3 port 1"), RDP_CHECK_SKIP); /* INIT */
	EXPECT_EQ(status_of(&r, "port.rate", "mlx5_4 port 1"), RDP_CHECK_OK);
	EXPECT_EQ(status_of(&r, "port.rate", "mlx5_5 port 1"), RDP_CHECK_OK); /* Ethernet: own */
	EXPECT_EQ(status_of(&r, "port.rate", "mlx5_6 port 1"), RDP_CHECK_SKIP);

	/* no config: one skip for the node */
	k = find(&r, "port.link_layer", "");
	EXPECT_TRUE(k && k->status == RDP_CHECK_SKIP);
	/* RoCE without readable sysfs: skips, never ok */
	EXPECT_EQ(status_of(&r, "port.roce_gid", "mlx5_5 port 1"), RDP_CHECK_SKIP);
	EXPECT_EQ(status_of(&r, "port.mtu", "mlx5_5 port 1"), RDP_CHECK_SKIP);
	EXPECT_TRUE(find(&r, "port.mtu", "mlx5_0 port 1") == NULL); /* IB: no MTU check */
	rdp_doctor_report_done(&r);

	/* counters: nothing readable: a skip per port */
	EXPECT_EQ(rdp_doctor_congestion(&c, &r), 0);
	EXPECT_EQ(r.n, 7);
	EXPECT_EQ(rdp_doctor_count(&r, RDP_CHECK_SKIP), 7);
	rdp_doctor_report_done(&r);
	c.interval_ms = 0;
	EXPECT_EQ(rdp_doctor_congestion(&c, &r), 0);
	EXPECT_EQ(r.n, 1);
	EXPECT_STREQ(r.n ? r.v[0].subject : NULL, "");
	rdp_doctor_report_done(&r);
	close(c.sys_fd);
	rmdir(dir);
}

static void run_link_layer(const char *json, struct rdp_host *h, struct rdp_doctor_report *r)
{
	struct rdp_diags diags = {};
	struct rdp_config *cfg = NULL;
	struct rdp_pools *pools = NULL;
	char dir[PATH_MAX];
	struct rdp_doctor_ctx c = {.sys_fd = empty_root(dir), .proc_fd = -1, .sysfs_root = dir,
				   .host = h, .interval_ms = 1};

	EXPECT_EQ(rdp_config_parse(json, strlen(json), "test.json", &cfg, &diags), 0);
	EXPECT_EQ(rdp_pools_build(cfg, h, &pools, &diags), 0);
	c.config = cfg;
	c.pools = pools;
	EXPECT_EQ(rdp_doctor_ports(&c, r), 0);
	rdp_pools_free(pools);
	rdp_config_free(cfg);
	rdp_diags_done(&diags);
	close(c.sys_fd);
	rmdir(dir);
}

static void test_link_layer(void)
{
	/* a VPI card: port 1 InfiniBand, port 2 Ethernet; an IB card; an Ethernet card */
	struct rdp_port vpi[] = {port(1, RDP_LINK_INFINIBAND, 4, 5, "100 Gb/sec (4X EDR)"),
				 port(2, RDP_LINK_ETHER, 4, 5, "100 Gb/sec (4X EDR)")};
	struct rdp_port ib[] = {port(1, RDP_LINK_INFINIBAND, 4, 5, "400 Gb/sec (4X NDR)")};
	struct rdp_port eth[] = {port(1, RDP_LINK_ETHER, 4, 5, "200 Gb/sec (2X NDR)")};
	struct rdp_device devs[] = {
		device("mlx5_0", "0000:18:00.0", "101b", vpi, 2),
		device("mlx5_1", "0000:28:00.0", "1021", ib, 1),
		device("mlx5_2", "0000:38:00.0", "1021", eth, 1),
	};
	struct rdp_host h = {.devices = devs, .n_devices = 3};
	struct rdp_doctor_report r = {};
	const struct rdp_check *k;

	/* an IB pool selects the VPI card: its Ethernet port is the mismatch */
	run_link_layer("{\"configList\":[{\"resourceName\":\"ib\",\"rdmaHcaMax\":1,"
		       "\"selectors\":{\"linkTypes\":[\"infiniband\"]}}]}",
		       &h, &r);
	EXPECT_EQ(status_of(&r, "port.link_layer", "mlx5_0 port 1"), RDP_CHECK_OK);
	k = find(&r, "port.link_layer", "mlx5_0 port 2");
	EXPECT_TRUE(k && k->status == RDP_CHECK_FAIL);
	EXPECT_STREQ(k ? k->finding : NULL,
		     "Ethernet port of mlx5_0, which resource ib selects (linkTypes [infiniband])");
	EXPECT_CONTAINS(k ? k->fix : NULL, "LINK_TYPE_P2=1");
	EXPECT_EQ(status_of(&r, "port.link_layer", "mlx5_1 port 1"), RDP_CHECK_OK);
	/* mlx5_2 is left out of "ib" by linkTypes alone, which is what "ib" means: ok */
	k = find(&r, "port.link_layer", "mlx5_2 port 1");
	EXPECT_TRUE(k && k->status == RDP_CHECK_OK);
	rdp_doctor_report_done(&r);

	/* a pool that names mlx5_1 (ifNames... rootDevices) but wants Ethernet: a fail */
	run_link_layer("{\"configList\":[{\"resourceName\":\"roce\",\"rdmaHcaMax\":1,"
		       "\"selectors\":{\"rootDevices\":[\"0000:28:00.0\",\"0000:38:00.0\"],"
		       "\"linkTypes\":[\"ether\"]}}]}",
		       &h, &r);
	k = find(&r, "port.link_layer", "mlx5_1 port 1");
	EXPECT_TRUE(k && k->status == RDP_CHECK_FAIL);
	EXPECT_CONTAINS(k ? k->finding : NULL, "resource roce (linkTypes [ether]) names mlx5_1");
	EXPECT_EQ(rdp_doctor_count(&r, RDP_CHECK_FAIL), 1);
	rdp_doctor_report_done(&r);

	/* two pools that split the CX-7s by link layer: both sides ok */
	run_link_layer("{\"configList\":["
		       "{\"resourceName\":\"ib\",\"rdmaHcaMax\":1,\"selectors\":{"
		       "\"deviceIDs\":[\"1021\"],\"linkTypes\":[\"ib\"]}},"
		       "{\"resourceName\":\"roce\",\"rdmaHcaMax\":1,\"selectors\":{"
		       "\"deviceIDs\":[\"1021\"],\"linkTypes\":[\"ether\"]}}]}",
		       &h, &r);
	EXPECT_EQ(rdp_doctor_count(&r, RDP_CHECK_FAIL), 0);
	k = find(&r, "port.link_layer", "mlx5_2 port 1");
	EXPECT_STREQ(k ? k->finding : NULL, "Ethernet, as the linkTypes of roce expect");
	k = find(&r, "port.link_layer", "mlx5_0 port 1");
	EXPECT_STREQ(k ? k->finding : NULL,
		     "InfiniBand (no resource with linkTypes selects mlx5_0)");
	rdp_doctor_report_done(&r);

	/* an Ethernet-only pool of CX-7s takes the Ethernet one: the IB CX-7 is meant out */
	run_link_layer("{\"configList\":[{\"resourceName\":\"roce\",\"rdmaHcaMax\":1,"
		       "\"selectors\":{\"deviceIDs\":[\"1021\"],\"linkTypes\":[\"ETH\"]}}]}",
		       &h, &r);
	EXPECT_EQ(status_of(&r, "port.link_layer", "mlx5_1 port 1"), RDP_CHECK_OK);
	EXPECT_EQ(status_of(&r, "port.link_layer", "mlx5_2 port 1"), RDP_CHECK_OK);
	EXPECT_EQ(rdp_doctor_count(&r, RDP_CHECK_FAIL), 0);
	rdp_doctor_report_done(&r);

	/* the same pool with no Ethernet CX-7 on the node: empty, the IB one is the cause */
	run_link_layer("{\"configList\":[{\"resourceName\":\"roce\",\"rdmaHcaMax\":1,"
		       "\"selectors\":{\"deviceIDs\":[\"1021\"],\"linkTypes\":[\"ETH\"]}}]}",
		       &(struct rdp_host){.devices = devs, .n_devices = 2}, &r);
	k = find(&r, "port.link_layer", "mlx5_1 port 1");
	EXPECT_TRUE(k && k->status == RDP_CHECK_FAIL);
	EXPECT_CONTAINS(k ? k->finding : NULL, "has no device and matches mlx5_1");
	/* mlx5_0 (101b) does not match deviceIDs: not this pool's business */
	EXPECT_EQ(status_of(&r, "port.link_layer", "mlx5_0 port 1"), RDP_CHECK_OK);
	EXPECT_EQ(rdp_doctor_count(&r, RDP_CHECK_FAIL), 1);
	rdp_doctor_report_done(&r);
}

static void run_fixture(const char *fixtures, const char *node, unsigned int interval,
			struct rdp_doctor_report *ports, struct rdp_doctor_report *cong)
{
	char sys[PATH_MAX], dev[PATH_MAX];
	struct rdp_host *h = NULL;
	int sfd, dfd;

	snprintf(sys, sizeof(sys), "%s/%s/sys", fixtures, node);
	snprintf(dev, sizeof(dev), "%s/%s/dev", fixtures, node);
	EXPECT_EQ(rdp_sysfs_open_roots(sys, dev, &sfd, &dfd), 0);
	EXPECT_EQ(rdp_discover_at(sfd, dfd, &h), 0);
	if (h) {
		struct rdp_doctor_ctx c = {.sys_fd = sfd, .dev_fd = dfd, .proc_fd = -1,
					   .sysfs_root = sys, .dev_root = dev, .host = h,
					   .interval_ms = interval};

		EXPECT_EQ(rdp_doctor_ports(&c, ports), 0);
		EXPECT_EQ(rdp_doctor_congestion(&c, cong), 0);
	}
	rdp_host_free(h);
	close(sfd);
	close(dfd);
}

static void test_fixtures(const char *fixtures)
{
	struct rdp_doctor_report p = {}, c = {};
	const struct rdp_check *k;

	run_fixture(fixtures, "dgx-h100", 5, &p, &c);
	EXPECT_EQ(rdp_doctor_count(&p, RDP_CHECK_FAIL) + rdp_doctor_count(&p, RDP_CHECK_WARN), 0);
	/* 12 ports x (state, rate), 4 RoCE x (roce_gid, mtu), one link_layer skip (no config) */
	EXPECT_EQ(p.n, 12 * 2 + 4 * 2 + 1);
	EXPECT_EQ(rdp_doctor_count(&p, RDP_CHECK_SKIP), 1);
	k = find(&p, "port.roce_gid", "mlx5_7 port 1");
	EXPECT_STREQ(k ? k->finding : NULL,
		     "RoCE v2 IPv4 GID at index 3 (::ffff:10.10.3.11 on enp169s0f0np0)");
	EXPECT_EQ(c.n, 12);
	EXPECT_EQ(rdp_doctor_count(&c, RDP_CHECK_OK), 12);
	rdp_doctor_report_done(&p);
	rdp_doctor_report_done(&c);

	run_fixture(fixtures, "port-down", 5, &p, &c);
	EXPECT_EQ(status_of(&p, "port.state", "mlx5_0 port 1"), RDP_CHECK_FAIL);
	EXPECT_EQ(status_of(&p, "port.state", "mlx5_1 port 1"), RDP_CHECK_FAIL);
	EXPECT_EQ(rdp_doctor_count(&p, RDP_CHECK_FAIL), 2);
	rdp_doctor_report_done(&p);
	rdp_doctor_report_done(&c);

	/* mlx4's Ethernet port: RoCE v1 only, the IPv4 has no v2 GID */
	run_fixture(fixtures, "mlx4", 0, &p, &c);
	k = find(&p, "port.roce_gid", "mlx4_0 port 2");
	EXPECT_TRUE(k && k->status == RDP_CHECK_FAIL);
	EXPECT_CONTAINS(k ? k->fix : NULL, "roce_mode=2");
	EXPECT_EQ(c.n, 1); /* interval 0 */
	rdp_doctor_report_done(&p);
	rdp_doctor_report_done(&c);

	run_fixture(fixtures, "rxe", 5, &p, &c);
	k = find(&p, "port.roce_gid", "rxe0 port 1");
	EXPECT_TRUE(k && k->status == RDP_CHECK_OK);
	/* The fixture's rxe has the real kernel's hw_counters now (it had none): read, none
	 * rose. */
	EXPECT_EQ(status_of(&c, "counters.loss", "rxe0 port 1"), RDP_CHECK_OK);
	k = find(&c, "counters.loss", "rxe0 port 1");
	EXPECT_CONTAINS(k ? k->finding : NULL, "9 loss and retry counters");
	/* Not one model with rxe1 (veth, 10 Gb/s): rxe0's 2.5 Gb/s is not compared. */
	EXPECT_EQ(status_of(&p, "port.rate", "rxe0 port 1"), RDP_CHECK_SKIP);
	k = find(&p, "port.rate", "rxe0 port 1");
	EXPECT_CONTAINS(k ? k->finding : NULL, "follows its netdev eth0");
	rdp_doctor_report_done(&p);
	rdp_doctor_report_done(&c);
}

int main(void)
{
	const char *fixtures;

	test_roce_mtu();
	test_hand_made();
	test_link_layer();
	fixtures = test_fixtures_dir("test-doctor-ports");
	if (fixtures) {
		test_fixtures(fixtures);
	}
	return test_summary("test-doctor-ports");
}
