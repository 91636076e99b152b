/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp topo: what `nvidia-smi topo -m` shows, without the NVIDIA driver and for RDMA
 * devices: a square matrix of the node's GPUs then RDMA devices with the PCIe level of each
 * pair (X on the diagonal; levels and their mapping in topology.h), the NUMA node, PCI
 * address, pcieRoot, netdevs and link layer of each row, and the legend. Read from
 * --sysfs-root/--dev-root only; -o json gives the same content.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "cli-common.h"
#include "cli.h"
#include "discovery.h"
#include "macro.h"
#include "topology.h"

#define MAX(a, b) ((a) > (b) ? (a) : (b))


/* The legend in nvidia-smi's order. */
static const enum rdp_topo_level legend_order[] = {
	RDP_TOPO_X, RDP_TOPO_SYS, RDP_TOPO_NODE, RDP_TOPO_PHB, RDP_TOPO_PXB, RDP_TOPO_PIX,
};

static const struct cli_cmd topo_cmd = {
	.name = "topo",
	.about = "Show the PCIe topology of the GPUs (NVIDIA 10de, AMD 1002; PCI class 0300/0302) "
		 "and RDMA devices of this node as `nvidia-smi topo -m` does: a matrix of the "
		 "level between each pair (X, PIX, PXB, PHB, NODE, SYS; see the legend), and per "
		 "row the NUMA node, PCI address, PCIe root (resource.kubernetes.io/pcieRoot), "
		 "netdevs and link layer.\n",
};

static const char *dash(const char *s)
{
	return s && *s ? s : "-";
}

/* The distinct link layers of d's ports, in port order, joined by ','; "-" for none. */
static void link_layers(const struct rdp_device *d, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < d->n_ports; i++) {
		const char *n;

		if (d->ports[i].link_layer == RDP_LINK_UNKNOWN)
			continue;
		n = rdp_link_layer_name(d->ports[i].link_layer);
		if (strstr(buf, n))
			continue;
		len += (size_t)snprintf(buf + len, size > len ? size - len : 0, "%s%s",
					len ? "," : "", n);
		if (len >= size)
			break;
	}
	if (!buf[0])
		snprintf(buf, size, "-");
}

static void netdevs(const struct rdp_device *d, char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < d->n_netdevs && len < size; i++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "," : "", d->netdevs[i]);
	if (!buf[0])
		snprintf(buf, size, "-");
}

static int print_table(const struct rdp_topo *t, const struct rdp_host *h, const char *root)
{
	size_t name_w = 0, col_w = 4, pci_w = strlen("PCI"), root_w = strlen("PCIE-ROOT"),
	       net_w = strlen("NETDEV");
	bool used[_RDP_TOPO_LEVEL_MAX] = {};
	char nd[256], ll[64];

	if (t->n_devs == 0) {
		printf("No GPUs and no RDMA devices in %s.\n", root);
		return 0;
	}
	for (size_t i = 0; i < t->n_devs; i++) {
		const struct rdp_topo_dev *d = &t->devs[i];

		name_w = MAX(name_w, strlen(d->name));
		col_w = MAX(col_w, strlen(d->name));
		pci_w = MAX(pci_w, strlen(dash(d->pci_address)));
		root_w = MAX(root_w, strlen(dash(d->pcie_root)));
		if (d->kind == RDP_TOPO_NIC) {
			netdevs(&h->devices[d->host_index], nd, sizeof(nd));
			net_w = MAX(net_w, strlen(nd));
		}
	}

	printf("%-*s", (int)name_w, "");
	for (size_t j = 0; j < t->n_devs; j++)
		printf("  %-*s", (int)col_w, t->devs[j].name);
	printf("  %-4s  %-*s  %-*s  %-*s  %s\n", "NUMA", (int)pci_w, "PCI", (int)root_w,
	       "PCIE-ROOT", (int)net_w, "NETDEV", "LINK");
	for (size_t i = 0; i < t->n_devs; i++) {
		const struct rdp_topo_dev *d = &t->devs[i];
		char numa[16];

		printf("%-*s", (int)name_w, d->name);
		for (size_t j = 0; j < t->n_devs; j++) {
			enum rdp_topo_level l = rdp_topo_level(d, &t->devs[j]);

			used[l] = true;
			printf("  %-*s", (int)col_w, rdp_topo_level_name(l));
		}
		if (d->numa_node >= 0)
			snprintf(numa, sizeof(numa), "%d", d->numa_node);
		else
			snprintf(numa, sizeof(numa), "-");
		if (d->kind == RDP_TOPO_NIC) {
			netdevs(&h->devices[d->host_index], nd, sizeof(nd));
			link_layers(&h->devices[d->host_index], ll, sizeof(ll));
		} else {
			snprintf(nd, sizeof(nd), "-");
			snprintf(ll, sizeof(ll), "-");
		}
		printf("  %-4s  %-*s  %-*s  %-*s  %s\n", numa, (int)pci_w, dash(d->pci_address),
		       (int)root_w, dash(d->pcie_root), (int)net_w, nd, ll);
	}

	printf("\nLegend:\n\n");
	for (size_t k = 0; k < sizeof(legend_order) / sizeof(legend_order[0]); k++)
		printf("  %-4s = %s\n", rdp_topo_level_name(legend_order[k]),
		       rdp_topo_level_meaning(legend_order[k]));
	if (used[RDP_TOPO_NONE])
		printf("  %-4s = %s\n", rdp_topo_level_name(RDP_TOPO_NONE),
		       rdp_topo_level_meaning(RDP_TOPO_NONE));
	printf("\nGPUs: %zu   RDMA devices: %zu\n", t->n_gpus, t->n_devs - t->n_gpus);
	return 0;
}

static json_t *str_or_null(const char *s)
{
	return s && *s ? json_string(s) : json_null();
}

static int set(json_t *o, const char *k, json_t *v)
{
	return v ? json_object_set_new(o, k, v) : -1;
}

static json_t *dev_json(const struct rdp_topo *t, const struct rdp_host *h, size_t i)
{
	const struct rdp_topo_dev *d = &t->devs[i];
	json_t *o = json_object(), *lv = json_object();
	int r = 0;

	if (!o || !lv) {
		json_decref(o);
		json_decref(lv);
		return NULL;
	}
	r |= set(o, "name", json_string(d->name));
	r |= set(o, "kind", json_string(d->kind == RDP_TOPO_GPU ? "gpu" : "nic"));
	r |= set(o, "pci_address", str_or_null(d->pci_address));
	r |= set(o, "vendor", str_or_null(d->vendor));
	r |= set(o, "device_id", str_or_null(d->device_id));
	r |= set(o, "pcie_root", str_or_null(d->pcie_root));
	r |= set(o, "numa_node", json_integer(d->numa_node));
	if (d->kind == RDP_TOPO_NIC) {
		const struct rdp_device *hd = &h->devices[d->host_index];
		json_t *nds = json_array(), *lls = json_array();

		for (size_t k = 0; nds && k < hd->n_netdevs; k++)
			r |= json_array_append_new(nds, json_string(hd->netdevs[k]));
		for (size_t k = 0; lls && k < hd->n_ports; k++) {
			json_t *s;
			bool dup = false;

			if (hd->ports[k].link_layer == RDP_LINK_UNKNOWN)
				continue;
			s = json_string(rdp_link_layer_name(hd->ports[k].link_layer));
			for (size_t m = 0; s && m < json_array_size(lls); m++)
				dup |= json_equal(json_array_get(lls, m), s);
			if (dup)
				json_decref(s);
			else
				r |= json_array_append_new(lls, s);
		}
		r |= set(o, "netdevs", nds);
		r |= set(o, "link_layers", lls);
	} else {
		r |= set(o, "netdevs", json_array());
		r |= set(o, "link_layers", json_array());
	}
	for (size_t j = 0; j < t->n_devs; j++)
		r |= set(lv, t->devs[j].name,
			 json_string(rdp_topo_level_name(rdp_topo_level(d, &t->devs[j]))));
	r |= set(o, "levels", lv);
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int print_json(const struct rdp_topo *t, const struct rdp_host *h)
{
	json_t *doc = json_object(), *devs = json_array(), *legend = json_object();
	int r = 0;

	if (!doc || !devs || !legend) {
		json_decref(doc);
		json_decref(devs);
		json_decref(legend);
		return -ENOMEM;
	}
	r |= set(doc, "devices", devs);
	for (size_t i = 0; i < t->n_devs; i++)
		r |= json_array_append_new(devs, dev_json(t, h, i));
	for (size_t k = 0; k < sizeof(legend_order) / sizeof(legend_order[0]); k++)
		r |= set(legend, rdp_topo_level_name(legend_order[k]),
			 json_string(rdp_topo_level_meaning(legend_order[k])));
	r |= set(legend, rdp_topo_level_name(RDP_TOPO_NONE),
		 json_string(rdp_topo_level_meaning(RDP_TOPO_NONE)));
	r |= set(doc, "legend", legend);
	if (r) {
		json_decref(doc);
		return -ENOMEM;
	}
	return cli_print_json(doc);
}

int cmd_topo(int argc, char **argv)
{
	struct cli_node_args a;
	_cleanup_close_ int sys = -1, dev = -1;
	struct rdp_host *h = NULL;
	struct rdp_topo *t = NULL;
	int r;

	r = cli_parse_node_args(&topo_cmd, argc, argv, &a);
	if (r >= 0)
		return r;
	if (cli_open_roots("topo", a.sysfs_root, a.dev_root, &sys, &dev) < 0)
		return 1;
	r = rdp_discover_flags_at(sys, dev, RDP_DISCOVER_NO_GID_INDEX | RDP_DISCOVER_NO_FW_VER, &h,
				  NULL);
	if (r < 0) {
		fprintf(stderr, "rdma-dp topo: %s\n", strerror(-r));
		return 1;
	}
	r = rdp_topo_read_at(sys, h, &t);
	if (r < 0) {
		fprintf(stderr, "rdma-dp topo: reading the PCI topology: %s\n", strerror(-r));
		rdp_host_free(h);
		return 1;
	}
	r = a.output == CLI_OUTPUT_JSON ? print_json(t, h) : print_table(t, h, a.sysfs_root);
	rdp_topo_free(t);
	rdp_host_free(h);
	return cli_output_done("topo", r);
}
