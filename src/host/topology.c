/* SPDX-License-Identifier: MIT */
/* The PCIe topology model and nvidia-smi's topology levels; see topology.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "macro.h"
#include "sysfs.h"
#include "topology.h"

static const char *const level_names[_RDP_TOPO_LEVEL_MAX] = {
	[RDP_TOPO_X] = "X",	[RDP_TOPO_PIX] = "PIX",	  [RDP_TOPO_PXB] = "PXB",
	[RDP_TOPO_PHB] = "PHB", [RDP_TOPO_NODE] = "NODE", [RDP_TOPO_SYS] = "SYS",
	[RDP_TOPO_NONE] = "-",
};

static const char *const level_meanings[_RDP_TOPO_LEVEL_MAX] = {
	[RDP_TOPO_X] = "Self",
	[RDP_TOPO_PIX] = "Connection traversing at most a single PCIe bridge",
	[RDP_TOPO_PXB] = "Connection traversing multiple PCIe bridges (without traversing the "
			 "PCIe Host Bridge)",
	[RDP_TOPO_PHB] = "Connection traversing PCIe as well as a PCIe Host Bridge (typically "
			 "the CPU)",
	[RDP_TOPO_NODE] = "Connection traversing PCIe as well as the interconnect between PCIe "
			  "Host Bridges within a NUMA node",
	[RDP_TOPO_SYS] = "Connection traversing PCIe as well as the SMP interconnect between "
			 "NUMA nodes (e.g., QPI/UPI)",
	[RDP_TOPO_NONE] = "No PCIe path: a device without a PCI function (rxe, siw)",
};

const char *rdp_topo_level_name(enum rdp_topo_level l)
{
	return (unsigned)l < _RDP_TOPO_LEVEL_MAX ? level_names[l] : "?";
}

const char *rdp_topo_level_meaning(enum rdp_topo_level l)
{
	return (unsigned)l < _RDP_TOPO_LEVEL_MAX ? level_meanings[l] : NULL;
}

static bool hex_run(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') ||
		      (s[i] >= 'A' && s[i] <= 'F')))
			return false;
	return true;
}

/* "pci0000:00": "pci", 4..8 hex digits, ':', 2 hex digits. */
static bool is_root_name(const char *s, size_t len)
{
	size_t dom;

	if (len < 3 || memcmp(s, "pci", 3) != 0)
		return false;
	s += 3;
	len -= 3;
	for (dom = 0; dom < len && s[dom] != ':'; dom++)
		;
	return dom >= 4 && dom <= 8 && hex_run(s, dom) && len == dom + 3 && hex_run(s + dom + 1, 2);
}

static void chain_free(char **chain, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rdp_free(chain[i]);
	rdp_free(chain);
}

int rdp_topo_parse_path(const char *path, char root[static RDP_TOPO_ROOT_MAX], char ***ret_chain,
			size_t *ret_n)
{
	char **chain = NULL;
	size_t n = 0;
	const char *p, *slash;
	char comp[RDP_PCI_ADDR_MAX];

	if (!path || strncmp(path, "devices/", 8) != 0)
		return -EINVAL;
	p = path + 8;
	slash = strchr(p, '/');
	if (!slash || !is_root_name(p, (size_t)(slash - p)) ||
	    (size_t)(slash - p) >= RDP_TOPO_ROOT_MAX)
		return -EINVAL;

	chain = rdp_calloc(RDP_TOPO_MAX_DEPTH, sizeof(*chain));
	if (!chain)
		return -ENOMEM;
	for (p = slash + 1; *p; p = *slash ? slash + 1 : slash) {
		size_t len;

		slash = strchrnul(p, '/');
		len = (size_t)(slash - p);
		if (len == 0 || len >= sizeof(comp))
			continue; /* not a PCI address (e.g. a VMD "pci10000:e0" glue dir is) */
		memcpy(comp, p, len);
		comp[len] = '\0';
		if (!rdp_is_pci_address(comp))
			continue;
		if (n == RDP_TOPO_MAX_DEPTH) {
			chain_free(chain, n);
			return -E2BIG;
		}
		chain[n] = rdp_strdup(comp);
		if (!chain[n]) {
			chain_free(chain, n);
			return -ENOMEM;
		}
		n++;
	}
	if (n == 0) {
		chain_free(chain, n);
		return -EINVAL;
	}
	/* The root as written, lower-cased as the DRA helper accepts it. */
	size_t rl = (size_t)(strchr(path + 8, '/') - (path + 8));
	for (size_t i = 0; i < rl; i++) {
		char c = path[8 + i];
		root[i] = (c >= 'A' && c <= 'F') ? (char)(c - 'A' + 'a') : c;
	}
	root[rl] = '\0';
	*ret_chain = chain;
	*ret_n = n;
	return 0;
}

/* Root and chain from a canonical path; virtual when it does not name d's function. */
static int fill_from_path(struct rdp_topo_dev *d, const char *canon)
{
	int r = rdp_topo_parse_path(canon, d->pcie_root, &d->chain, &d->n_chain);

	if (r == -ENOMEM)
		return r;
	if (r < 0 || strcmp(d->chain[d->n_chain - 1], d->pci_address) != 0) {
		if (r == 0) {
			chain_free(d->chain, d->n_chain);
			d->chain = NULL;
			d->n_chain = 0;
		}
		d->is_virtual = true;
		d->pcie_root[0] = '\0';
	}
	return 0;
}

/* Fills d's root and chain from bus/pci/devices/<d->pci_address>; virtual when that fails. */
static int fill_pci(int sys, struct rdp_topo_dev *d)
{
	char path[RDP_SYSFS_PATH_MAX], canon[RDP_SYSFS_PATH_MAX];
	int r;

	if (!d->pci_address[0] || !rdp_is_pci_address(d->pci_address))
		goto virt;
	snprintf(path, sizeof(path), "bus/pci/devices/%s", d->pci_address);
	r = rdp_sysfs_resolve(sys, path, canon, sizeof(canon));
	if (r < 0)
		goto virt;
	return fill_from_path(d, canon);
virt:
	d->is_virtual = true;
	d->pcie_root[0] = '\0';
	return 0;
}

static void nic_init(struct rdp_topo_dev *d, const struct rdp_device *hd)
{
	d->kind = RDP_TOPO_NIC;
	snprintf(d->name, sizeof(d->name), "%s", hd->name);
	snprintf(d->pci_address, sizeof(d->pci_address), "%s", hd->pci_address);
	snprintf(d->vendor, sizeof(d->vendor), "%s", hd->vendor);
	snprintf(d->device_id, sizeof(d->device_id), "%s", hd->device_id);
	d->numa_node = hd->numa_node;
}

int rdp_topo_dev_of_device(const struct rdp_device *hd, struct rdp_topo_dev *ret)
{
	struct rdp_topo_dev d = {0};
	int r = 0;

	nic_init(&d, hd);
	if (hd->pci_path && hd->pci_address[0])
		r = fill_from_path(&d, hd->pci_path);
	else
		d.is_virtual = true;
	if (r < 0)
		return r;
	if (d.is_virtual)
		d.pci_address[0] = '\0';
	*ret = d;
	return 0;
}

int rdp_topo_dev_copy(const struct rdp_topo_dev *src, struct rdp_topo_dev *ret)
{
	struct rdp_topo_dev d = *src;

	d.chain = NULL;
	d.n_chain = 0;
	if (src->n_chain) {
		d.chain = rdp_calloc(src->n_chain, sizeof(*d.chain));
		if (!d.chain)
			return -ENOMEM;
		for (; d.n_chain < src->n_chain; d.n_chain++) {
			d.chain[d.n_chain] = rdp_strdup(src->chain[d.n_chain]);
			if (!d.chain[d.n_chain]) {
				rdp_topo_dev_done(&d);
				return -ENOMEM;
			}
		}
	}
	*ret = d;
	return 0;
}

void rdp_topo_dev_done(struct rdp_topo_dev *d)
{
	if (!d)
		return;
	chain_free(d->chain, d->n_chain);
	d->chain = NULL;
	d->n_chain = 0;
}

static bool is_gpu(int sys, const char *bdf, char vendor[static 8], char device_id[static 8])
{
	char path[RDP_SYSFS_PATH_MAX], buf[64], cls[7];

	snprintf(path, sizeof(path), "bus/pci/devices/%s/class", bdf);
	if (rdp_sysfs_read_attr(sys, path, buf, sizeof(buf)) < 0 ||
	    rdp_parse_pci_class(buf, cls) < 0)
		return false;
	if (strncmp(cls, "0300", 4) != 0 && strncmp(cls, "0302", 4) != 0)
		return false;
	snprintf(path, sizeof(path), "bus/pci/devices/%s/vendor", bdf);
	if (rdp_sysfs_read_attr(sys, path, buf, sizeof(buf)) < 0 ||
	    rdp_parse_hex_id(buf, vendor) < 0)
		return false;
	if (strcmp(vendor, "10de") != 0 && strcmp(vendor, "1002") != 0)
		return false;
	snprintf(path, sizeof(path), "bus/pci/devices/%s/device", bdf);
	if (rdp_sysfs_read_attr(sys, path, buf, sizeof(buf)) < 0 ||
	    rdp_parse_hex_id(buf, device_id) < 0)
		device_id[0] = '\0';
	return true;
}

static int read_numa(int sys, const char *bdf)
{
	char path[RDP_SYSFS_PATH_MAX], buf[32];
	int n;

	snprintf(path, sizeof(path), "bus/pci/devices/%s/numa_node", bdf);
	if (rdp_sysfs_read_attr(sys, path, buf, sizeof(buf)) < 0 ||
	    rdp_parse_numa_node(buf, &n) < 0)
		return -1;
	return n;
}

/* PCI address order (lower-case hex, fixed width in a domain); strverscmp would put 9d
 * before 43. */
static int cmp_pci(const void *a, const void *b)
{
	const struct rdp_topo_dev *x = a, *y = b;
	size_t lx = strlen(x->pci_address), ly = strlen(y->pci_address);

	if (lx != ly) /* longer domain */
		return lx < ly ? -1 : 1;
	return strcasecmp(x->pci_address, y->pci_address);
}

struct rdp_topo *rdp_topo_free(struct rdp_topo *t)
{
	if (!t)
		return NULL;
	for (size_t i = 0; i < t->n_devs; i++)
		chain_free(t->devs[i].chain, t->devs[i].n_chain);
	rdp_free(t->devs);
	rdp_free(t);
	return NULL;
}

int rdp_topo_read_at(int sys, const struct rdp_host *h, struct rdp_topo **ret)
{
	struct rdp_topo *t;
	char **names = NULL;
	size_t n_names = 0, cap;
	int r;

	r = rdp_sysfs_list_dir(sys, "bus/pci/devices", RDP_TOPO_MAX_PCI, &names, &n_names);
	if (r == -E2BIG || r == -ENOMEM)
		return r;
	if (r < 0) {
		names = NULL;
		n_names = 0;
	}
	t = rdp_calloc(1, sizeof(*t));
	cap = n_names + (h ? h->n_devices : 0);
	if (!t || (cap && !(t->devs = rdp_calloc(cap, sizeof(*t->devs))))) {
		rdp_free(t);
		rdp_sysfs_names_free(names, n_names);
		return -ENOMEM;
	}

	for (size_t i = 0; i < n_names; i++) {
		struct rdp_topo_dev *d = &t->devs[t->n_devs];

		if (!rdp_is_pci_address(names[i]) || strlen(names[i]) >= sizeof(d->pci_address))
			continue;
		if (!is_gpu(sys, names[i], d->vendor, d->device_id))
			continue;
		d->kind = RDP_TOPO_GPU;
		snprintf(d->pci_address, sizeof(d->pci_address), "%s", names[i]);
		d->numa_node = read_numa(sys, names[i]);
		r = fill_pci(sys, d);
		if (r < 0)
			goto fail;
		if (d->is_virtual) { /* a GPU we cannot place: leave it out */
			memset(d, 0, sizeof(*d));
			continue;
		}
		t->n_devs++;
		t->n_gpus++;
	}
	if (t->n_gpus > 1)
		qsort(t->devs, t->n_gpus, sizeof(*t->devs), cmp_pci);
	for (size_t g = 0; g < t->n_gpus; g++)
		snprintf(t->devs[g].name, sizeof(t->devs[g].name), "GPU%zu", g);
	for (size_t i = 0; h && i < h->n_devices; i++) {
		const struct rdp_device *hd = &h->devices[i];
		struct rdp_topo_dev *d = &t->devs[t->n_devs++];

		nic_init(d, hd);
		d->host_index = i;
		/* The path discovery resolved, as exclusive pools place their units. */
		r = hd->pci_path ? fill_from_path(d, hd->pci_path) : fill_pci(sys, d);
		if (r < 0)
			goto fail;
		if (d->is_virtual)
			d->pci_address[0] = '\0';
	}
	rdp_sysfs_names_free(names, n_names);
	*ret = t;
	return 0;
fail:
	rdp_sysfs_names_free(names, n_names);
	rdp_topo_free(t);
	return r;
}

enum rdp_topo_level rdp_topo_level(const struct rdp_topo_dev *a, const struct rdp_topo_dev *b)
{
	bool no_path = a->is_virtual || b->is_virtual || a->n_chain == 0 || b->n_chain == 0;
	bool same_root = !no_path && strcmp(a->pcie_root, b->pcie_root) == 0;
	size_t k = 0;

	while (same_root && a != b && k < a->n_chain && k < b->n_chain &&
	       strcmp(a->chain[k], b->chain[k]) == 0)
		k++;
	return rdp_topo_level_rule(a == b, no_path, same_root, a->numa_node == b->numa_node, k,
				   a->n_chain, b->n_chain);
}

void rdp_topo_closest_gpus(const struct rdp_topo *t, size_t i, enum rdp_topo_level *ret_level,
			   bool *ret_gpus)
{
	enum rdp_topo_level best = RDP_TOPO_NONE;

	for (size_t g = 0; g < t->n_gpus; g++) {
		enum rdp_topo_level l = rdp_topo_level(&t->devs[i], &t->devs[g]);

		if (l < best)
			best = l;
	}
	for (size_t g = 0; g < t->n_gpus; g++)
		ret_gpus[g] =
			best != RDP_TOPO_NONE && rdp_topo_level(&t->devs[i], &t->devs[g]) == best;
	*ret_level = best;
}
