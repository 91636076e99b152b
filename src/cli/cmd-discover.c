/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp discover: what ibdev2netdev, ibstat and lspci -nn would say, in one table (or the
 * JSON model), read from --sysfs-root/--dev-root only.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "cli-common.h"
#include "cli.h"
#include "device-json.h"
#include "discovery.h"
#include "macro.h"
#include "topology.h"

static const struct cli_cmd discover_cmd = {
	.name = "discover",
	.about = "Show the RDMA devices of this node as selectors see them: one line per device "
		 "and port (state, link layer, rate, netdevs, PCI IDs, driver, NUMA node, PF of a "
		 "VF, RoCE v2 IPv4 GID index), their char devices, and what could not be read.\n",
};

/* ---- the table ---- */

enum col {
	COL_DEVICE,
	COL_PORT,
	COL_STATE,
	COL_PHYS,
	COL_LINK,
	COL_RATE,
	COL_NETDEV,
	COL_PCI,
	COL_IDS,
	COL_CLASS,
	COL_DRIVER,
	COL_NUMA,
	COL_VF_OF,
	COL_GID,
	N_COLS,
};

/* clang-format off */
static const char *const col_names[N_COLS] = {
	"DEVICE", "PORT", "STATE", "PHYS", "LINK", "RATE", "NETDEV",
	"PCI", "VENDOR:DEVICE", "CLASS", "DRIVER", "NUMA", "VF-OF", "GID-V2",
};
/* clang-format on */

struct table {
	char **cells; /* rows * N_COLS */
	size_t rows;
	size_t width[N_COLS];
};

static void table_free(struct table *t)
{
	for (size_t i = 0; i < t->rows * N_COLS; i++)
		rdp_free(t->cells[i]);
	rdp_free(t->cells);
}

static const char *dash(const char *s)
{
	return s && *s ? s : "-";
}

static char *join(char *const *v, size_t n)
{
	size_t len = 1;
	char *s, *p;

	if (n == 0)
		return rdp_strdup("-");
	for (size_t i = 0; i < n; i++)
		len += strlen(v[i]) + 1;
	s = rdp_malloc(len);
	if (!s)
		return NULL;
	p = s;
	for (size_t i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? "," : "", v[i]);
	return s;
}

static int add_row(struct table *t, const struct rdp_device *d, const struct rdp_port *p)
{
	char **row, **nv;
	int r = 0;

	nv = rdp_reallocarray(t->cells, (t->rows + 1) * N_COLS, sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	t->cells = nv;
	row = &t->cells[t->rows * N_COLS];
	memset(row, 0, N_COLS * sizeof(*row));
	t->rows++;

	row[COL_DEVICE] = rdp_strdup(d->name);
	if (p) {
		row[COL_PORT] = rdp_asprintf("%u", p->num);
		row[COL_STATE] = rdp_strdup(dash(p->state_name));
		row[COL_PHYS] = rdp_strdup(dash(p->phys_state_name));
		row[COL_LINK] = rdp_strdup(p->link_layer == RDP_LINK_UNKNOWN
						   ? "-"
						   : rdp_link_layer_name(p->link_layer));
		row[COL_RATE] = rdp_strdup(dash(p->rate));
		row[COL_GID] = p->roce_v2_ipv4_gid_index >= 0
				       ? rdp_asprintf("%d", p->roce_v2_ipv4_gid_index)
				       : rdp_strdup("-");
	} else {
		for (int c = COL_PORT; c <= COL_RATE; c++)
			row[c] = rdp_strdup("-");
		row[COL_GID] = rdp_strdup("-");
	}
	row[COL_NETDEV] = join(d->netdevs, d->n_netdevs);
	row[COL_PCI] = rdp_strdup(dash(d->pci_address));
	row[COL_IDS] = d->vendor[0] || d->device_id[0]
			       ? rdp_asprintf("%s:%s", dash(d->vendor), dash(d->device_id))
			       : rdp_strdup("-");
	row[COL_CLASS] = rdp_strdup(dash(d->pci_class));
	row[COL_DRIVER] = rdp_strdup(dash(d->driver));
	row[COL_NUMA] = d->numa_node >= 0 ? rdp_asprintf("%d", d->numa_node) : rdp_strdup("-");
	if (!d->is_vf)
		row[COL_VF_OF] = rdp_strdup("-");
	else if (d->vf_index >= 0)
		row[COL_VF_OF] = rdp_asprintf("%s#%d/%s", dash(d->pf_netdev), d->vf_index,
					      dash(d->pf_pci_address));
	else
		row[COL_VF_OF] = rdp_asprintf("%s/%s", dash(d->pf_netdev), dash(d->pf_pci_address));

	for (int c = 0; c < N_COLS; c++) {
		if (!row[c]) {
			r = -ENOMEM;
			continue;
		}
		if (strlen(row[c]) > t->width[c])
			t->width[c] = strlen(row[c]);
	}
	return r;
}

static void print_row(const struct table *t, const char *const *cells)
{
	for (int c = 0; c < N_COLS; c++) {
		if (c == N_COLS - 1)
			printf("%s\n", cells[c]);
		else
			printf("%-*s  ", (int)t->width[c], cells[c]);
	}
}

static int print_table(const struct rdp_host *h, const char *sysfs_root)
{
	struct table t = {};
	size_t name_width = 0;
	int r = 0;

	for (int c = 0; c < N_COLS; c++)
		t.width[c] = strlen(col_names[c]);
	for (size_t i = 0; i < h->n_devices && r >= 0; i++) {
		const struct rdp_device *d = &h->devices[i];

		if (strlen(d->name) > name_width)
			name_width = strlen(d->name);
		if (d->n_ports == 0)
			r = add_row(&t, d, NULL);
		for (size_t j = 0; j < d->n_ports && r >= 0; j++)
			r = add_row(&t, d, &d->ports[j]);
	}
	if (r < 0) {
		table_free(&t);
		return r;
	}

	if (h->n_devices == 0) {
		printf("No RDMA devices in %s/class/infiniband.\n", sysfs_root);
	} else {
		print_row(&t, col_names);
		for (size_t i = 0; i < t.rows; i++)
			print_row(&t, (const char *const *)&t.cells[i * N_COLS]);

		printf("\nCHAR DEVICES\n");
		for (size_t i = 0; i < h->n_devices; i++) {
			const struct rdp_device *d = &h->devices[i];

			printf("%-*s ", (int)name_width, d->name);
			if (d->n_char_devices == 0)
				printf(" -");
			for (size_t j = 0; j < d->n_char_devices; j++)
				printf(" %s", d->char_devices[j]);
			printf("\n");
		}
	}
	table_free(&t);

	bool any = false;

	for (size_t i = 0; i < h->n_devices; i++)
		any |= !rdp_device_is_usable(&h->devices[i]);
	if (any) {
		printf("\nUNUSABLE (a pod given these could not use them)\n");
		for (size_t i = 0; i < h->n_devices; i++)
			if (!rdp_device_is_usable(&h->devices[i]))
				printf("%s: %s\n", h->devices[i].name,
				       h->devices[i].unusable_reason);
	}

	any = h->n_problems > 0;
	for (size_t i = 0; i < h->n_devices; i++)
		any |= h->devices[i].n_problems > 0;
	if (any) {
		printf("\nPROBLEMS\n");
		for (size_t i = 0; i < h->n_devices; i++)
			for (size_t j = 0; j < h->devices[i].n_problems; j++)
				printf("%s: %s\n", h->devices[i].name, h->devices[i].problems[j]);
		for (size_t j = 0; j < h->n_problems; j++)
			printf("host: %s\n", h->problems[j]);
	}

	printf("\nrdma_cm: %s   netns: %s%s   devices: %zu\n",
	       h->rdma_cm[0] ? h->rdma_cm : "missing", rdp_netns_mode_name(h->netns_mode),
	       h->netns_mode == RDP_NETNS_EXCLUSIVE ? " (ibdevs are visible in their netns only)"
						    : "",
	       h->n_devices);
	return 0;
}

/*
 * Adds to each device object of doc (in h's order) its "pcie_root" (null without a PCI
 * function) and "closest_gpus": the GPUs at the best nvidia-smi topo level from it (topology.h),
 * [{"name": "GPU0", "pci_address": "0000:1b:00.0", "level": "PXB"}], [] without GPUs.
 */
static int add_topology(json_t *doc, const struct rdp_host *h, int sys)
{
	json_t *devs = json_object_get(doc, "devices");
	struct rdp_topo *t = NULL;
	bool *near = NULL;
	int r;

	r = rdp_topo_read_at(sys, h, &t);
	if (r < 0)
		return r;
	if (t->n_gpus && !(near = rdp_calloc(t->n_gpus, sizeof(*near)))) {
		rdp_topo_free(t);
		return -ENOMEM;
	}
	r = 0;
	for (size_t i = t->n_gpus; i < t->n_devs && r == 0; i++) {
		const struct rdp_topo_dev *d = &t->devs[i];
		json_t *o = json_array_get(devs, d->host_index), *gpus = json_array();
		enum rdp_topo_level best;

		if (!o || !gpus) {
			json_decref(gpus);
			r = -ENOMEM;
			break;
		}
		rdp_topo_closest_gpus(t, i, &best, near);
		for (size_t g = 0; g < t->n_gpus && r == 0; g++) {
			if (!near[g])
				continue;
			json_t *e = json_pack("{s:s, s:s, s:s}", "name", t->devs[g].name,
					      "pci_address", t->devs[g].pci_address, "level",
					      rdp_topo_level_name(best));
			if (!e || json_array_append_new(gpus, e) < 0)
				r = -ENOMEM;
		}
		if (json_object_set_new(o, "pcie_root",
					d->pcie_root[0] ? json_string(d->pcie_root) : json_null()) <
			    0 ||
		    json_object_set_new(o, "closest_gpus", gpus) < 0)
			r = -ENOMEM;
	}
	rdp_free(near);
	rdp_topo_free(t);
	return r;
}

static int print_json(const struct rdp_host *h, int sys)
{
	json_t *doc = rdp_host_to_json(h);
	int r;

	if (!doc)
		return -ENOMEM;
	r = add_topology(doc, h, sys);
	if (r < 0) {
		json_decref(doc);
		return r;
	}
	return cli_print_json(doc);
}

int cmd_discover(int argc, char **argv)
{
	struct cli_node_args a;
	_cleanup_close_ int sys = -1, dev = -1;
	struct rdp_host *h = NULL;
	int r;

	r = cli_parse_node_args(&discover_cmd, argc, argv, &a);
	if (r >= 0)
		return r;
	if (cli_open_roots("discover", a.sysfs_root, a.dev_root, &sys, &dev) < 0)
		return 1;
	r = rdp_discover_at(sys, dev, &h);
	if (r < 0) {
		fprintf(stderr, "rdma-dp discover: %s\n", strerror(-r));
		return 1;
	}
	r = a.output == CLI_OUTPUT_JSON ? print_json(h, sys) : print_table(h, a.sysfs_root);
	rdp_host_free(h);
	return cli_output_done("discover", r);
}
