/* SPDX-License-Identifier: MIT */
/* dra-health: a device's health from its ports, the list of the offered devices, and when the
 * server finds the list changed. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "discovery.h"
#include "dra-health.h"
#include "macro.h"
#include "test.h"

static void port(struct rdp_port *p, unsigned num, int state, const char *name)
{
	*p = (struct rdp_port){.num = num, .state = state, .phys_state = -1,
			       .roce_v2_ipv4_gid_index = -1};
	snprintf(p->state_name, sizeof(p->state_name), "%s", name);
}

static void test_of(void)
{
	struct rdp_port ports[3];
	struct rdp_device d = {.name = "mlx5_0", .ports = ports};
	struct rdp_dra_health h;

	/* no port */
	rdp_dra_health_of(&d, &h);
	EXPECT_EQ(h.status, RDP_DRA_HEALTH_UNKNOWN);
	EXPECT_STREQ(h.message, "no port state known");
	/* one active port */
	port(&ports[0], 1, RDP_PORT_ACTIVE, "ACTIVE");
	d.n_ports = 1;
	rdp_dra_health_of(&d, &h);
	EXPECT_EQ(h.status, RDP_DRA_HEALTH_HEALTHY);
	EXPECT_STREQ(h.message, "port 1 ACTIVE");
	/* ACTIVE_DEFER carries traffic too */
	port(&ports[0], 1, RDP_PORT_ACTIVE_DEFER, "ACTIVE_DEFER");
	rdp_dra_health_of(&d, &h);
	EXPECT_EQ(h.status, RDP_DRA_HEALTH_HEALTHY);
	/* down, init, armed: unhealthy, naming the port and state */
	port(&ports[0], 1, RDP_PORT_DOWN, "DOWN");
	rdp_dra_health_of(&d, &h);
	EXPECT_EQ(h.status, RDP_DRA_HEALTH_UNHEALTHY);
	EXPECT_STREQ(h.message, "port 1 DOWN");
	port(&ports[0], 1, RDP_PORT_INIT, "INIT");
	port(&ports[1], 2, RDP_PORT_ARMED, "");
	d.n_ports = 2;
	rdp_dra_health_of(&d, &h);
	EXPECT_EQ(h.status, RDP_DRA_HEALTH_UNHEALTHY);
	EXPECT_STREQ(h.message, "port 1 INIT; port 2 state 3");
	/* one of two active: healthy, the other named */
	port(&ports[1], 2, RDP_PORT_ACTIVE, "ACTIVE");
	rdp_dra_health_of(&d, &h);
	EXPECT_EQ(h.status, RDP_DRA_HEALTH_HEALTHY);
	EXPECT_STREQ(h.message, "port 1 INIT; port 2 ACTIVE");
	/* unknown states only: unknown */
	port(&ports[0], 1, RDP_PORT_STATE_UNKNOWN, "");
	port(&ports[1], 2, RDP_PORT_STATE_UNKNOWN, "");
	rdp_dra_health_of(&d, &h);
	EXPECT_EQ(h.status, RDP_DRA_HEALTH_UNKNOWN);
	EXPECT_STREQ(h.message, "port 1 state unknown; port 2 state unknown");
	/* an unknown and a down one: unhealthy */
	port(&ports[1], 2, RDP_PORT_DOWN, "DOWN");
	rdp_dra_health_of(&d, &h);
	EXPECT_EQ(h.status, RDP_DRA_HEALTH_UNHEALTHY);
	EXPECT_STREQ(rdp_dra_health_status_name(h.status), "Unhealthy");
	EXPECT_STREQ(rdp_dra_health_status_name(RDP_DRA_HEALTH_UNKNOWN), "Unknown");
	EXPECT_STREQ(rdp_dra_health_status_name(RDP_DRA_HEALTH_HEALTHY), "Healthy");
}

/* Many ports: the message stays within kubelet's 1024 characters and ends in "...". */
static void test_long_message(void)
{
	size_t n = 200;
	struct rdp_port *ports = rdp_calloc(n, sizeof(*ports));
	struct rdp_device d = {.name = "big", .ports = ports, .n_ports = n};
	struct rdp_dra_health h;

	for (size_t i = 0; i < n; i++)
		port(&ports[i], (unsigned)i + 1, RDP_PORT_DOWN, "DOWN");
	rdp_dra_health_of(&d, &h);
	EXPECT_EQ(h.status, RDP_DRA_HEALTH_UNHEALTHY);
	EXPECT_EQ(strlen(h.message), RDP_DRA_HEALTH_MESSAGE_MAX - 1);
	EXPECT_STREQ(h.message + strlen(h.message) - 3, "...");
	EXPECT_TRUE(strncmp(h.message, "port 1 DOWN; port 2 DOWN", 24) == 0);
	rdp_free(ports);
}

static void test_list_and_server(void)
{
	struct rdp_host host = {0};
	struct rdp_port ports[2];
	struct rdp_device devs[2] = {{.name = "mlx5_0", .pci_address = "0000:18:00.0"},
				     {.name = "mlx5_1", .pci_address = "0000:19:00.0"}};
	struct rdp_dra_inventory inv = {0};
	struct rdp_dra_health_server *s = NULL;
	struct rdp_dra_health *h;
	const struct rdp_dra_health *l;
	size_t n;

	for (size_t i = 0; i < 2; i++) {
		devs[i].numa_node = -1;
		devs[i].ports = &ports[i];
		devs[i].n_ports = 1;
		port(&ports[i], 1, RDP_PORT_ACTIVE, "ACTIVE");
	}
	host.devices = devs;
	host.n_devices = 2;
	EXPECT_EQ(rdp_dra_inventory_build(&host, &inv), 0);
	EXPECT_EQ(rdp_dra_health_build(&inv, &h, &n), 0);
	EXPECT_EQ(n, 2);
	EXPECT_STREQ(h[0].device, "pci-0000-18-00-0");
	EXPECT_STREQ(h[1].device, "pci-0000-19-00-0");
	EXPECT_EQ(h[1].status, RDP_DRA_HEALTH_HEALTHY);
	rdp_free(h);

	EXPECT_EQ(rdp_dra_health_server_new("node-a", &s), 0);
	EXPECT_EQ(rdp_dra_health_streams(s), 0);
	EXPECT_EQ(rdp_dra_health_set_inventory(s, &inv), 1); /* the first list */
	EXPECT_EQ(rdp_dra_health_set_inventory(s, &inv), 0); /* unchanged */
	port(&ports[1], 1, RDP_PORT_DOWN, "DOWN");
	EXPECT_EQ(rdp_dra_health_set_inventory(s, &inv), 1);
	l = rdp_dra_health_list(s, &n);
	EXPECT_EQ(n, 2);
	EXPECT_EQ(l[1].status, RDP_DRA_HEALTH_UNHEALTHY);
	EXPECT_STREQ(l[1].message, "port 1 DOWN");
	rdp_dra_health_resend(s); /* no stream: nothing */
	/* failmalloc: the old list is kept */
	port(&ports[1], 1, RDP_PORT_ACTIVE, "ACTIVE");
	rdp_alloc_fail_at(1);
	EXPECT_EQ(rdp_dra_health_set_inventory(s, &inv), -ENOMEM);
	rdp_alloc_fail_at(0);
	l = rdp_dra_health_list(s, &n);
	EXPECT_EQ(l[1].status, RDP_DRA_HEALTH_UNHEALTHY);
	EXPECT_EQ(rdp_dra_health_set_inventory(s, &inv), 1);
	/* no device at all: an empty list */
	rdp_dra_inventory_done(&inv);
	EXPECT_EQ(rdp_dra_health_set_inventory(s, &inv), 1);
	l = rdp_dra_health_list(s, &n);
	EXPECT_EQ(n, 0);
	s = rdp_dra_health_server_free(s);
	EXPECT_TRUE(s == NULL);
	EXPECT_TRUE(rdp_dra_health_server_free(NULL) == NULL);
}

int main(void)
{
	test_of();
	test_long_message();
	test_list_and_server();
	return test_summary("test-dra-health");
}
