/* SPDX-License-Identifier: MIT */
/*
 * topology.c: path parsing and levels on hand-made chains, then the model and the
 * nvidia-smi levels on the generated fixture nodes (RDP_FIXTURES): dgx-h100 (GPUs behind
 * switches, each compute NIC closest to exactly one GPU), seed000 (flat, no GPU), rxe (no
 * PCI parent: a virtual row). Allocation failures are injected into a whole read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "discovery.h"
#include "macro.h"
#include "sysfs.h"
#include "test.h"
#include "topology.h"

static struct rdp_topo_dev mk(const char *path, int numa)
{
	struct rdp_topo_dev d = {.numa_node = numa};
	int r = rdp_topo_parse_path(path, d.pcie_root, &d.chain, &d.n_chain);

	EXPECT_EQ(r, 0);
	if (r == 0)
		snprintf(d.pci_address, sizeof(d.pci_address), "%s", d.chain[d.n_chain - 1]);
	return d;
}

static void done(struct rdp_topo_dev *d)
{
	for (size_t i = 0; i < d->n_chain; i++)
		rdp_free(d->chain[i]);
	rdp_free(d->chain);
}

static void test_parse_path(void)
{
	char root[RDP_TOPO_ROOT_MAX];
	char **chain = NULL;
	size_t n = 0;
	char deep[4096];
	int len;

	EXPECT_EQ(rdp_topo_parse_path("devices/pci0000:15/0000:15:01.0/0000:16:00.0/"
				      "0000:17:00.0/0000:18:00.0",
				      root, &chain, &n),
		  0);
	EXPECT_STREQ(root, "pci0000:15");
	EXPECT_EQ(n, 4);
	if (n == 4) {
		EXPECT_STREQ(chain[0], "0000:15:01.0");
		EXPECT_STREQ(chain[3], "0000:18:00.0");
	}
	for (size_t i = 0; i < n; i++)
		rdp_free(chain[i]);
	rdp_free(chain);

	/* VMD: a glue "pci10000:e0" dir inside the path is not a hop; the root stays first. */
	EXPECT_EQ(rdp_topo_parse_path("devices/pci0000:00/0000:00:0e.0/pci10000:e0/"
				      "10000:e0:06.0/10000:e1:00.0",
				      root, &chain, &n),
		  0);
	EXPECT_STREQ(root, "pci0000:00");
	EXPECT_EQ(n, 3);
	for (size_t i = 0; i < n; i++)
		rdp_free(chain[i]);
	rdp_free(chain);

	EXPECT_EQ(rdp_topo_parse_path("devices/virtual/infiniband/rxe0", root, &chain, &n),
		  -EINVAL);
	EXPECT_EQ(rdp_topo_parse_path("devices/pci0000:00", root, &chain, &n), -EINVAL);
	EXPECT_EQ(rdp_topo_parse_path("devices/pci0000:00/", root, &chain, &n), -EINVAL);
	EXPECT_EQ(rdp_topo_parse_path("devices/pcixyz:00/0000:00:01.0", root, &chain, &n), -EINVAL);
	EXPECT_EQ(rdp_topo_parse_path("class/net/eth0", root, &chain, &n), -EINVAL);
	EXPECT_EQ(rdp_topo_parse_path(NULL, root, &chain, &n), -EINVAL);

	len = snprintf(deep, sizeof(deep), "devices/pci0000:00");
	for (int i = 0; i < RDP_TOPO_MAX_DEPTH + 1; i++)
		len += snprintf(deep + len, sizeof(deep) - (size_t)len, "/0000:%02x:00.0", i + 1);
	EXPECT_EQ(rdp_topo_parse_path(deep, root, &chain, &n), -E2BIG);
}

static void test_levels(void)
{
	/* One DGX H100 socket: NIC on the CX-7 switch, GPU behind the baseboard switch. */
	struct rdp_topo_dev nic = mk("devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/"
				     "0000:18:00.0",
				     0);
	struct rdp_topo_dev gpu = mk("devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/"
				     "0000:19:00.0/0000:1a:00.0/0000:1b:00.0",
				     0);
	/* A GPU on the other port of the same switch, directly. */
	struct rdp_topo_dev near = mk("devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/"
				      "0000:30:00.0",
				      0);
	/* Two PFs of one card on a root port; a device on another root port of that root. */
	struct rdp_topo_dev pf0 = mk("devices/pci0000:28/0000:28:01.0/0000:29:00.0", 0);
	struct rdp_topo_dev pf1 = mk("devices/pci0000:28/0000:28:01.0/0000:29:00.1", 0);
	struct rdp_topo_dev other_rp = mk("devices/pci0000:28/0000:28:03.0/0000:2a:00.0", 0);
	struct rdp_topo_dev far = mk("devices/pci0000:97/0000:97:01.0/0000:98:00.0", 1);
	struct rdp_topo_dev virt = {.is_virtual = true, .numa_node = -1};

	EXPECT_EQ(rdp_topo_level(&nic, &nic), RDP_TOPO_X);
	EXPECT_EQ(rdp_topo_level(&nic, &gpu), RDP_TOPO_PXB);
	EXPECT_EQ(rdp_topo_level(&gpu, &nic), RDP_TOPO_PXB);
	EXPECT_EQ(rdp_topo_level(&nic, &near), RDP_TOPO_PIX);
	EXPECT_EQ(rdp_topo_level(&gpu, &near), RDP_TOPO_PXB);
	EXPECT_EQ(rdp_topo_level(&pf0, &pf1), RDP_TOPO_PIX);
	EXPECT_EQ(rdp_topo_level(&pf0, &other_rp), RDP_TOPO_PHB);
	EXPECT_EQ(rdp_topo_level(&pf0, &nic), RDP_TOPO_NODE);
	EXPECT_EQ(rdp_topo_level(&far, &nic), RDP_TOPO_SYS);
	EXPECT_EQ(rdp_topo_level(&far, &virt), RDP_TOPO_NONE);
	EXPECT_EQ(rdp_topo_level(&virt, &nic), RDP_TOPO_NONE);
	/* An unknown NUMA node on both sides (a VM) is one node. */
	far.numa_node = -1;
	nic.numa_node = -1;
	EXPECT_EQ(rdp_topo_level(&far, &nic), RDP_TOPO_NODE);

	EXPECT_STREQ(rdp_topo_level_name(RDP_TOPO_PXB), "PXB");
	EXPECT_STREQ(rdp_topo_level_name(RDP_TOPO_NONE), "-");
	EXPECT_CONTAINS(rdp_topo_level_meaning(RDP_TOPO_PIX), "at most a single PCIe bridge");

	done(&nic), done(&gpu), done(&near), done(&pf0), done(&pf1), done(&other_rp), done(&far);
}

static int read_node(const char *fixtures, const char *node, struct rdp_host **h,
		     struct rdp_topo **t)
{
	char sys[PATH_MAX], dev[PATH_MAX];
	_cleanup_close_ int sfd = -1, dfd = -1;
	int r;

	snprintf(sys, sizeof(sys), "%s/%s/sys", fixtures, node);
	snprintf(dev, sizeof(dev), "%s/%s/dev", fixtures, node);
	r = rdp_sysfs_open_roots(sys, dev, &sfd, &dfd);
	if (r < 0)
		return r;
	r = rdp_discover_at(sfd, dfd, h);
	if (r < 0)
		return r;
	r = rdp_topo_read_at(sfd, *h, t);
	if (r < 0)
		*h = rdp_host_free(*h);
	return r;
}

static const struct rdp_topo_dev *find(const struct rdp_topo *t, const char *name)
{
	for (size_t i = 0; i < t->n_devs; i++)
		if (strcmp(t->devs[i].name, name) == 0)
			return &t->devs[i];
	return NULL;
}

static void test_dgx(const char *fixtures)
{
	static const char *const compute[8] = {"mlx5_0", "mlx5_3", "mlx5_4",  "mlx5_5",
					       "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"};
	static const char *const gpu_bdf[8] = {"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0",
					       "0000:61:00.0", "0000:9d:00.0", "0000:c3:00.0",
					       "0000:d1:00.0", "0000:df:00.0"};
	struct rdp_host *h = NULL;
	struct rdp_topo *t = NULL;

	EXPECT_EQ(read_node(fixtures, "dgx-h100", &h, &t), 0);
	if (!t)
		return;
	EXPECT_EQ(t->n_gpus, 8);
	EXPECT_EQ(t->n_devs, 8 + 12);
	for (size_t g = 0; g < t->n_gpus && g < 8; g++) {
		char name[8];

		snprintf(name, sizeof(name), "GPU%zu", g);
		EXPECT_STREQ(t->devs[g].name, name);
		EXPECT_STREQ(t->devs[g].pci_address, gpu_bdf[g]);
		EXPECT_STREQ(t->devs[g].vendor, "10de");
		EXPECT_STREQ(t->devs[g].device_id, "2330");
		EXPECT_EQ(t->devs[g].numa_node, g < 4 ? 0 : 1);
		EXPECT_EQ(t->devs[g].kind, RDP_TOPO_GPU);
	}
	const struct rdp_topo_dev *g0 = &t->devs[0];
	EXPECT_STREQ(g0->pcie_root, "pci0000:15");
	EXPECT_EQ(g0->n_chain, 6);

	for (int i = 0; i < 8; i++) {
		const struct rdp_topo_dev *n = find(t, compute[i]);
		enum rdp_topo_level best;
		bool gpus[8] = {};
		size_t count = 0;

		EXPECT_TRUE(n != NULL);
		if (!n)
			continue;
		EXPECT_EQ(n->kind, RDP_TOPO_NIC);
		EXPECT_STREQ(n->pcie_root, t->devs[i].pcie_root);
		rdp_topo_closest_gpus(t, (size_t)(n - t->devs), &best, gpus);
		EXPECT_EQ(best, RDP_TOPO_PXB);
		for (int g = 0; g < 8; g++)
			count += gpus[g];
		EXPECT_EQ(count, 1);
		EXPECT_TRUE(gpus[i]);
		for (int g = 0; g < 8; g++) {
			enum rdp_topo_level want = g == i		? RDP_TOPO_PXB
						   : (g < 4) == (i < 4) ? RDP_TOPO_NODE
									: RDP_TOPO_SYS;
			EXPECT_EQ(rdp_topo_level(n, &t->devs[g]), want);
		}
	}
	/* Storage: the two PFs of a card are PIX; NODE to their socket's GPUs, SYS to the other. */
	const struct rdp_topo_dev *s1 = find(t, "mlx5_1"), *s2 = find(t, "mlx5_2");
	const struct rdp_topo_dev *s7 = find(t, "mlx5_7"), *s8 = find(t, "mlx5_8");
	EXPECT_TRUE(s1 && s2 && s7 && s8);
	if (s1 && s2 && s7 && s8) {
		EXPECT_STREQ(s1->pcie_root, "pci0000:28");
		EXPECT_EQ(rdp_topo_level(s1, s2), RDP_TOPO_PIX);
		EXPECT_EQ(rdp_topo_level(s7, s8), RDP_TOPO_PIX);
		EXPECT_EQ(rdp_topo_level(s1, s7), RDP_TOPO_SYS);
		for (int g = 0; g < 8; g++) {
			EXPECT_EQ(rdp_topo_level(s1, &t->devs[g]),
				  g < 4 ? RDP_TOPO_NODE : RDP_TOPO_SYS);
			EXPECT_EQ(rdp_topo_level(s8, &t->devs[g]),
				  g < 4 ? RDP_TOPO_SYS : RDP_TOPO_NODE);
		}
	}
	/* Symmetry over the whole matrix. */
	for (size_t a = 0; a < t->n_devs; a++)
		for (size_t b = 0; b < t->n_devs; b++)
			if (rdp_topo_level(&t->devs[a], &t->devs[b]) !=
			    rdp_topo_level(&t->devs[b], &t->devs[a]))
				EXPECT_TRUE(!"asymmetric level");

	/* Every allocation failure gives -ENOMEM and leaks nothing. */
	char sys[PATH_MAX];
	_cleanup_close_ int sfd = -1;
	snprintf(sys, sizeof(sys), "%s/dgx-h100/sys", fixtures);
	EXPECT_EQ(rdp_sysfs_open_root(sys, &sfd), 0);
	for (unsigned long n = 1;; n++) {
		struct rdp_topo *t2 = NULL;
		int r;

		rdp_alloc_fail_at(n);
		r = rdp_topo_read_at(sfd, h, &t2);
		rdp_alloc_fail_at(0);
		if (r == 0) {
			rdp_topo_free(t2);
			EXPECT_TRUE(n > 10);
			break;
		}
		EXPECT_EQ(r, -ENOMEM);
		if (n > 100000) {
			EXPECT_TRUE(!"no end to allocations");
			break;
		}
	}
	rdp_topo_free(t);
	rdp_host_free(h);
}

static void test_flat(const char *fixtures)
{
	struct rdp_host *h = NULL;
	struct rdp_topo *t = NULL;

	EXPECT_EQ(read_node(fixtures, "seed000", &h, &t), 0);
	if (t) {
		EXPECT_EQ(t->n_gpus, 0);
		EXPECT_EQ(t->n_devs, 1);
		EXPECT_STREQ(t->devs[0].name, "mlx5_0");
		EXPECT_STREQ(t->devs[0].pci_address, "0000:81:00.0");
		EXPECT_TRUE(!t->devs[0].is_virtual);
		EXPECT_TRUE(t->devs[0].pcie_root[0] != '\0');
		EXPECT_EQ(t->devs[0].numa_node, 1);
		EXPECT_EQ(rdp_topo_level(&t->devs[0], &t->devs[0]), RDP_TOPO_X);
	}
	rdp_topo_free(t);
	rdp_host_free(h);
	h = NULL;
	t = NULL;

	EXPECT_EQ(read_node(fixtures, "rxe", &h, &t), 0);
	if (t) {
		EXPECT_EQ(t->n_gpus, 0);
		/* rxe0 on virtio-net and, since the fixture follows the real kernel's run, rxe1 on
		 * a veth: both virtual. */
		EXPECT_EQ(t->n_devs, 2);
		for (size_t i = 0; i < t->n_devs && i < 2; i++) {
			EXPECT_STREQ(t->devs[i].name, i ? "rxe1" : "rxe0");
			EXPECT_TRUE(t->devs[i].is_virtual);
			EXPECT_STREQ(t->devs[i].pcie_root, "");
			EXPECT_STREQ(t->devs[i].pci_address, "");
			EXPECT_EQ(t->devs[i].n_chain, 0);
		}
	}
	rdp_topo_free(t);
	rdp_host_free(h);
	h = NULL;
	t = NULL;

	/* sriov: PF and its VFs are siblings under one root port: PIX among themselves. */
	EXPECT_EQ(read_node(fixtures, "sriov", &h, &t), 0);
	if (t) {
		EXPECT_EQ(t->n_gpus, 0);
		for (size_t a = 0; a < t->n_devs; a++)
			for (size_t b = 0; b < t->n_devs; b++)
				EXPECT_EQ(rdp_topo_level(&t->devs[a], &t->devs[b]),
					  a == b ? RDP_TOPO_X : RDP_TOPO_PIX);
	}
	rdp_topo_free(t);
	rdp_host_free(h);
}

/* A root without bus/pci/devices and without RDMA devices: an empty model, no error. */
static void test_empty(void)
{
	char dir[PATH_MAX];
	struct rdp_host empty = {};
	struct rdp_topo *t = NULL;
	_cleanup_close_ int fd = -1;

	snprintf(dir, sizeof(dir), "%s/rdp-test-topology-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		EXPECT_TRUE(!"mkdtemp");
		return;
	}
	EXPECT_EQ(rdp_sysfs_open_root(dir, &fd), 0);
	EXPECT_EQ(rdp_topo_read_at(fd, &empty, &t), 0);
	if (t) {
		EXPECT_EQ(t->n_devs, 0);
		EXPECT_EQ(t->n_gpus, 0);
	}
	rdp_topo_free(t);
	t = NULL;
	EXPECT_EQ(rdp_topo_read_at(fd, NULL, &t), 0);
	rdp_topo_free(t);
	rmdir(dir);
}

int main(void)
{
	const char *fixtures;

	test_parse_path();
	test_levels();
	test_empty();
	fixtures = test_fixtures_dir("test-topology");
	if (fixtures) {
		test_dgx(fixtures);
		test_flat(fixtures);
	}
	return test_summary("test-topology");
}
