/* SPDX-License-Identifier: MIT */
/* selector.c: table-driven, on devices built here (no filesystem). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "selector.h"
#include "test.h"

/* -Wwrite-strings: the model has char **, the tests never write through them. */
#define SV(...) ((char **)(const char *[]){ __VA_ARGS__ })
#define ib0 SV("ib0")
#define ens3f0 SV("ens3f0")
#define ens3f0v2 SV("ens3f0v2")
#define two SV("eth2", "eth3")
static struct rdp_port port_ib[] = { { .num = 1, .state = RDP_PORT_ACTIVE,
				       .link_layer = RDP_LINK_INFINIBAND } };
static struct rdp_port port_eth[] = { { .num = 1, .state = RDP_PORT_ACTIVE,
					.link_layer = RDP_LINK_ETHER } };
static struct rdp_port ports_mixed[] = {
	{ .num = 1, .link_layer = RDP_LINK_ETHER },
	{ .num = 2, .link_layer = RDP_LINK_INFINIBAND },
};

/* A ConnectX-6 in IB mode, as on the seed 000 node. */
static const struct rdp_device cx6 = {
	.name = "mlx5_0", .pci_address = "0000:81:00.0", .vendor = "15b3", .device_id = "101d",
	.driver = "mlx5_core", .netdevs = ib0, .n_netdevs = 1, .numa_node = 0, .vf_index = -1,
	.ports = port_ib, .n_ports = 1,
};
/* A PF in RoCE mode with VFs. */
static const struct rdp_device pf = {
	.name = "mlx5_0", .pci_address = "0000:3b:00.0", .vendor = "15b3", .device_id = "101b",
	.driver = "mlx5_core", .netdevs = ens3f0, .n_netdevs = 1, .numa_node = 1, .vf_index = -1,
	.ports = port_eth, .n_ports = 1,
};
/* Its VF 2. */
static const struct rdp_device vf2 = {
	.name = "mlx5_3", .pci_address = "0000:3b:00.4", .vendor = "15b3", .device_id = "101c",
	.driver = "mlx5_core", .netdevs = ens3f0v2, .n_netdevs = 1, .numa_node = 1,
	.is_vf = true, .vf_index = 2, .pf_pci_address = "0000:3b:00.0", .pf_netdev = "ens3f0",
	.ports = port_eth, .n_ports = 1,
};
/* A VF passed through to a VM (Azure): no PF visible. */
static const struct rdp_device vm_vf = {
	.name = "mlx5_0", .pci_address = "0101:00:00.0", .vendor = "15b3", .device_id = "101e",
	.driver = "mlx5_core", .numa_node = 0, .is_vf = true, .vf_index = -1,
	.ports = port_eth, .n_ports = 1,
};
/* Soft-RoCE: no PCI function, NUMA unknown. */
static const struct rdp_device rxe = {
	.name = "rxe0", .netdevs = two, .n_netdevs = 2, .numa_node = -1, .vf_index = -1,
	.ports = port_eth, .n_ports = 1,
};
/* The same soft-RoCE device as the kernel shows it: its RDMA driver known (device.h). */
static const struct rdp_device rxe_real = {
	.name = "rxe0", .rdma_driver = "rdma_rxe", .netdevs = two, .n_netdevs = 2,
	.numa_node = -1, .vf_index = -1, .ports = port_eth, .n_ports = 1,
};
/* siw on a NIC: the PCI function's driver and the RDMA driver. */
static const struct rdp_device siw = {
	.name = "siw0", .pci_address = "0000:06:00.0", .vendor = "8086", .device_id = "10fb",
	.driver = "ixgbe", .rdma_driver = "siw", .netdevs = two, .n_netdevs = 2, .numa_node = 0,
	.vf_index = -1, .ports = port_eth, .n_ports = 1,
};
/* mlx4 with one Ethernet and one IB port, no netdev. */
static const struct rdp_device mlx4 = {
	.name = "mlx4_0", .pci_address = "0000:05:00.0", .vendor = "15b3", .device_id = "1003",
	.driver = "mlx4_core", .numa_node = 0, .vf_index = -1, .ports = ports_mixed, .n_ports = 2,
};

#define L(...)                                                                                     \
	{ .v = SV(__VA_ARGS__), .n = sizeof((const char *[]){ __VA_ARGS__ }) / sizeof(char *) }

static struct rdp_pf_selector pf_plain = { .name = "ens3f0" };
static struct rdp_pf_selector pf_01 = { .name = "ens3f0",
					.ranges = (void *)(unsigned int[]){ 0, 1 },
					.n_ranges = 1 };
static struct rdp_pf_selector pf_1_3_5 = { .name = "ens3f0",
					   .ranges = (void *)(unsigned int[]){ 1, 3, 5, 5 },
					   .n_ranges = 2 };
static int numa0[] = { 0 };
static int numa01[] = { 1, 0 };

static const struct {
	const char *what;
	struct rdp_selectors sel;
	const struct rdp_device *dev;
	bool match;
	enum rdp_sel_key key; /* the key whose text is checked */
	enum rdp_sel_result result;
	const char *text;
} cases[] = {
	{ "vendor in", { .vendors = L("15b3") }, &cx6, true, RDP_SEL_VENDORS, RDP_SEL_MATCH,
	  "vendors: 15b3 in [15b3]" },
	{ "vendor OR", { .vendors = L("8086", "15b3") }, &cx6, true, RDP_SEL_VENDORS,
	  RDP_SEL_MATCH, "vendors: 15b3 in [8086, 15b3]" },
	{ "vendor out", { .vendors = L("8086") }, &cx6, false, RDP_SEL_VENDORS, RDP_SEL_NO_MATCH,
	  "vendors: 15b3 not in [8086]" },
	{ "device id out", { .device_ids = L("101d") }, &pf, false, RDP_SEL_DEVICE_IDS,
	  RDP_SEL_NO_MATCH, "deviceIDs: 101b not in [101d]" },
	{ "AND across keys", { .vendors = L("15b3"), .device_ids = L("1021") }, &cx6, false,
	  RDP_SEL_VENDORS, RDP_SEL_MATCH, "vendors: 15b3 in [15b3]" },
	{ "AND across keys 2", { .vendors = L("15b3"), .device_ids = L("1021") }, &cx6, false,
	  RDP_SEL_DEVICE_IDS, RDP_SEL_NO_MATCH, "deviceIDs: 101d not in [1021]" },
	{ "unused key", { .vendors = L("15b3") }, &cx6, true, RDP_SEL_DRIVERS, RDP_SEL_UNUSED, "" },
	{ "driver", { .drivers = L("mlx5_core") }, &cx6, true, RDP_SEL_DRIVERS, RDP_SEL_MATCH,
	  "drivers: mlx5_core in [mlx5_core]" },
	{ "rxe has no vendor", { .vendors = L("15b3") }, &rxe, false, RDP_SEL_VENDORS,
	  RDP_SEL_NO_MATCH, "vendors: none (no PCI function) not in [15b3]" },
	{ "rxe has no driver", { .drivers = L("mlx5_core") }, &rxe, false, RDP_SEL_DRIVERS,
	  RDP_SEL_NO_MATCH, "drivers: no driver not in [mlx5_core]" },
	{ "rxe by its RDMA driver", { .drivers = L("rdma_rxe") }, &rxe_real, true, RDP_SEL_DRIVERS,
	  RDP_SEL_MATCH, "drivers: rdma_rxe in [rdma_rxe]" },
	{ "rxe not a PCI driver", { .drivers = L("mlx5_core") }, &rxe_real, false,
	  RDP_SEL_DRIVERS, RDP_SEL_NO_MATCH, "drivers: rdma_rxe not in [mlx5_core]" },
	{ "siw by its RDMA driver", { .drivers = L("siw") }, &siw, true, RDP_SEL_DRIVERS,
	  RDP_SEL_MATCH, "drivers: siw in [siw]" },
	{ "siw by its NIC's driver", { .drivers = L("mlx5_core", "ixgbe") }, &siw, true,
	  RDP_SEL_DRIVERS, RDP_SEL_MATCH, "drivers: ixgbe in [mlx5_core, ixgbe]" },
	{ "siw neither", { .drivers = L("rdma_rxe") }, &siw, false, RDP_SEL_DRIVERS,
	  RDP_SEL_NO_MATCH, "drivers: ixgbe,siw not in [rdma_rxe]" },
	{ "ifName", { .if_names = L("ib0") }, &cx6, true, RDP_SEL_IF_NAMES, RDP_SEL_MATCH,
	  "ifNames: ib0 in [ib0]" },
	{ "ifName any netdev", { .if_names = L("eth3") }, &rxe, true, RDP_SEL_IF_NAMES,
	  RDP_SEL_MATCH, "ifNames: eth3 in [eth3]" },
	{ "ifName out", { .if_names = L("ib1") }, &rxe, false, RDP_SEL_IF_NAMES, RDP_SEL_NO_MATCH,
	  "ifNames: eth2,eth3 not in [ib1]" },
	{ "ifName no netdev", { .if_names = L("ib0") }, &mlx4, false, RDP_SEL_IF_NAMES,
	  RDP_SEL_NO_MATCH, "ifNames: no netdev not in [ib0]" },
	{ "linkType ib", { .link_types = L("infiniband") }, &cx6, true, RDP_SEL_LINK_TYPES,
	  RDP_SEL_MATCH, "linkTypes: infiniband (port 1) in [infiniband]" },
	{ "linkType IB alias", { .link_types = L("IB") }, &cx6, true, RDP_SEL_LINK_TYPES,
	  RDP_SEL_MATCH, "linkTypes: infiniband (port 1) in [IB]" },
	{ "linkType ETH", { .link_types = L("ETH") }, &pf, true, RDP_SEL_LINK_TYPES, RDP_SEL_MATCH,
	  "linkTypes: ether (port 1) in [ETH]" },
	{ "linkType ethernet", { .link_types = L("Ethernet") }, &pf, true, RDP_SEL_LINK_TYPES,
	  RDP_SEL_MATCH, "ether (port 1)" },
	{ "linkType out", { .link_types = L("infiniband") }, &pf, false, RDP_SEL_LINK_TYPES,
	  RDP_SEL_NO_MATCH, "linkTypes: ether (port 1) not in [infiniband]" },
	{ "linkType any port", { .link_types = L("infiniband") }, &mlx4, true, RDP_SEL_LINK_TYPES,
	  RDP_SEL_MATCH, "linkTypes: infiniband (port 2) in [infiniband]" },
	{ "pfName PF own name", { .pf_names = &pf_plain, .n_pf_names = 1 }, &pf, true,
	  RDP_SEL_PF_NAMES, RDP_SEL_MATCH, "pfNames: ens3f0 in [ens3f0]" },
	{ "pfName VF by PF name", { .pf_names = &pf_plain, .n_pf_names = 1 }, &vf2, true,
	  RDP_SEL_PF_NAMES, RDP_SEL_MATCH, "pfNames: VF 2 of ens3f0 in ens3f0" },
	{ "pfName VF out of range", { .pf_names = &pf_01, .n_pf_names = 1 }, &vf2, false,
	  RDP_SEL_PF_NAMES, RDP_SEL_NO_MATCH, "pfNames: VF 2 of ens3f0 not in [ens3f0#0-1]" },
	{ "pfName VF in range", { .pf_names = &pf_1_3_5, .n_pf_names = 1 }, &vf2, true,
	  RDP_SEL_PF_NAMES, RDP_SEL_MATCH, "pfNames: VF 2 of ens3f0 in ens3f0#1-3,5" },
	{ "pfName range skips PF", { .pf_names = &pf_01, .n_pf_names = 1 }, &pf, false,
	  RDP_SEL_PF_NAMES, RDP_SEL_NO_MATCH, "ens3f0 is the PF, ens3f0#0-1 selects only its VFs" },
	{ "pfName other", { .pf_names = &pf_plain, .n_pf_names = 1 }, &cx6, false,
	  RDP_SEL_PF_NAMES, RDP_SEL_NO_MATCH, "pfNames: ib0 not in [ens3f0]" },
	{ "rootDevice PF", { .root_devices = L("0000:81:00.0") }, &cx6, true,
	  RDP_SEL_ROOT_DEVICES, RDP_SEL_MATCH, "rootDevices: 0000:81:00.0 in [0000:81:00.0]" },
	{ "rootDevice VF by PF", { .root_devices = L("0000:3b:00.0") }, &vf2, true,
	  RDP_SEL_ROOT_DEVICES, RDP_SEL_MATCH, "rootDevices: 0000:3b:00.0 (PF of this VF) in" },
	{ "rootDevice VF own address", { .root_devices = L("0000:3b:00.4") }, &vf2, false,
	  RDP_SEL_ROOT_DEVICES, RDP_SEL_NO_MATCH, "not in [0000:3b:00.4]" },
	{ "rootDevice VF without PF", { .root_devices = L("0101:00:00.0") }, &vm_vf, true,
	  RDP_SEL_ROOT_DEVICES, RDP_SEL_MATCH,
	  "rootDevices: 0101:00:00.0 (VF, its PF not visible) in [0101:00:00.0]" },
	{ "rootDevice rxe", { .root_devices = L("0000:81:00.0") }, &rxe, false,
	  RDP_SEL_ROOT_DEVICES, RDP_SEL_NO_MATCH, "rootDevices: none (no PCI function) not in" },
	{ "numa", { .numa_nodes = numa0, .n_numa_nodes = 1 }, &cx6, true, RDP_SEL_NUMA_NODES,
	  RDP_SEL_MATCH, "numaNodes: 0 in [0]" },
	{ "numa OR", { .numa_nodes = numa01, .n_numa_nodes = 2 }, &pf, true, RDP_SEL_NUMA_NODES,
	  RDP_SEL_MATCH, "numaNodes: 1 in [1, 0]" },
	{ "numa unknown", { .numa_nodes = numa0, .n_numa_nodes = 1 }, &rxe, false,
	  RDP_SEL_NUMA_NODES, RDP_SEL_NO_MATCH, "numaNodes: -1 (unknown) not in [0]" },
	{ "empty selectors", {}, &cx6, false, RDP_SEL_VENDORS, RDP_SEL_UNUSED, "" },
	{ "seed000", { .vendors = L("15b3"), .device_ids = L("101d"), .if_names = L("ib0"),
		       .link_types = L("infiniband") }, &cx6, true, RDP_SEL_LINK_TYPES,
	  RDP_SEL_MATCH, "infiniband (port 1)" },
};

static void test_cases(void)
{
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rdp_sel_explain ex;
		bool m = rdp_selectors_match(&cases[i].sel, cases[i].dev, &ex);

		if (m != cases[i].match)
			fprintf(stderr, "case \"%s\"\n", cases[i].what);
		EXPECT_EQ(m, cases[i].match);
		/* The quick path (no explanation) agrees. */
		EXPECT_EQ(rdp_selectors_match(&cases[i].sel, cases[i].dev, NULL), cases[i].match);
		EXPECT_EQ(ex.result[cases[i].key], cases[i].result);
		if (*cases[i].text)
			EXPECT_CONTAINS(ex.text[cases[i].key], cases[i].text);
		else
			EXPECT_STREQ(ex.text[cases[i].key], "");
	}
}

static void test_names(void)
{
	EXPECT_STREQ(rdp_sel_key_name(RDP_SEL_DEVICE_IDS), "deviceIDs");
	EXPECT_STREQ(rdp_sel_key_name(RDP_SEL_NUMA_NODES), "numaNodes");
	EXPECT_TRUE(rdp_sel_key_name(RDP_SEL_KEY_MAX) == NULL);
	EXPECT_STREQ(rdp_sel_result_name(RDP_SEL_NO_MATCH), "no-match");
	EXPECT_STREQ(rdp_sel_result_name(RDP_SEL_MATCH), "match");
	EXPECT_STREQ(rdp_sel_result_name(RDP_SEL_UNUSED), "unused");
	EXPECT_EQ(rdp_link_type_parse("InfiniBand"), RDP_LINK_INFINIBAND);
	EXPECT_EQ(rdp_link_type_parse("ib"), RDP_LINK_INFINIBAND);
	EXPECT_EQ(rdp_link_type_parse("ETH"), RDP_LINK_ETHER);
	EXPECT_EQ(rdp_link_type_parse("ether"), RDP_LINK_ETHER);
	EXPECT_EQ(rdp_link_type_parse("ethernet"), RDP_LINK_ETHER);
	EXPECT_EQ(rdp_link_type_parse("roce"), RDP_LINK_UNKNOWN);
	EXPECT_EQ(rdp_link_type_parse(""), RDP_LINK_UNKNOWN);
}

/* Long lists are cut with "...", never overflow. */
static void test_long_list(void)
{
	static char names[200][16];
	static char *v[200];
	struct rdp_selectors s = { 0 };
	struct rdp_sel_explain ex;
	size_t n;

	for (int i = 0; i < 200; i++) {
		snprintf(names[i], sizeof(names[i]), "eth%d", i + 100);
		v[i] = names[i];
	}
	s.if_names.v = v;
	s.if_names.n = 200;
	EXPECT_TRUE(!rdp_selectors_match(&s, &cx6, &ex));
	n = strlen(ex.text[RDP_SEL_IF_NAMES]);
	EXPECT_TRUE(n < RDP_SEL_TEXT_MAX);
	EXPECT_TRUE(n > 3 && strcmp(ex.text[RDP_SEL_IF_NAMES] + n - 3, "...") == 0);
}

int main(void)
{
	test_cases();
	test_names();
	test_long_list();
	return test_summary("test-selector");
}
