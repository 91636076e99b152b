/* SPDX-License-Identifier: MIT */
/*
 * The doctor's pcie, placement and gpudirect groups: the link-speed parser and bandwidth
 * arithmetic; placement.gpu_nic on hand-made PCIe trees (PIX, PXB, PHB, NODE, SYS, no NIC,
 * an inactive closer NIC, no GPU, no model); allocation failures; and the generated fixture
 * nodes (RDP_FIXTURES) read through discovery and rdp_topo_read_at as `doctor` does:
 * dgx-h100 has no fail in these groups (8 PXB pairs, 8 GPU/NIC pairs in one IOMMU group,
 * peermem loaded, identity IOMMU), hgx-pix places every GPU at PIX, vm-passthrough skips
 * the links of its VFs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "discovery.h"
#include "doctor-pci.h"
#include "doctor.h"
#include "macro.h"
#include "sysfs.h"
#include "test.h"
#include "topology.h"

static void test_parse_speed(void)
{
	static const struct {
		const char *s;
		int ret;
		unsigned int v;
	} cases[] = {
		{"16.0 GT/s PCIe", 0, 160},
		{"32.0 GT/s PCIe", 0, 320},
		{"2.5 GT/s PCIe", 0, 25},
		{"8 GT/s", 0, 80},
		{"5 GT/s", 0, 50},
		{"2.5 GT/s", 0, 25},
		{"64.0 GT/s PCIe", 0, 640},
		{"Unknown", 0, 0},
		{"", -EINVAL, 0},
		{"GT/s", -EINVAL, 0},
		{"16.0 GT/s PCIe ", -EINVAL, 0},
		{"133 MHz PCI-X", -EINVAL, 0},
		{"16. GT/s", -EINVAL, 0},
		{"0 GT/s", -EINVAL, 0},
		{"99999 GT/s", -EINVAL, 0},
		{"-8 GT/s", -EINVAL, 0},
		{"16.0GT/s", -EINVAL, 0},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		unsigned int v = 12345;

		EXPECT_EQ(rdp_pcie_parse_speed(cases[i].s, &v), cases[i].ret);
		EXPECT_EQ(v, cases[i].ret == 0 ? cases[i].v : 12345u);
	}
}

static void test_link_math(void)
{
	struct rdp_pcie_link ok = {320, 320, 16, 16}, slow = {80, 320, 16, 16},
			     narrow = {320, 320, 8, 16}, vf = {0, 320, 0, 16},
			     unknown_max = {80, 0, 16, 0};
	char buf[48];

	EXPECT_TRUE(!rdp_pcie_link_degraded(&ok));
	EXPECT_TRUE(rdp_pcie_link_degraded(&slow));
	EXPECT_TRUE(rdp_pcie_link_degraded(&narrow));
	EXPECT_TRUE(!rdp_pcie_link_degraded(&vf));
	EXPECT_TRUE(!rdp_pcie_link_degraded(&unknown_max));
	EXPECT_EQ(rdp_pcie_gbps(320, 16), 504u); /* Gen5 x16: 63 GB/s */
	EXPECT_EQ(rdp_pcie_gbps(80, 8), 63u);
	EXPECT_EQ(rdp_pcie_gbps(25, 16), 32u); /* Gen1 x16, 8b/10b */
	EXPECT_EQ(rdp_pcie_gbps(160, 16), 252u);
	EXPECT_STREQ(rdp_pcie_link_str(25, 16, buf, sizeof(buf)), "2.5 GT/s x16");
	EXPECT_STREQ(rdp_pcie_link_str(0, 0, buf, sizeof(buf)), "? GT/s x?");
}

/* A place from its root, NUMA node and chain ("0000:15:01.0/0000:16:00.0"); NULL: virtual. */
static struct rdp_topo_dev mk(enum rdp_topo_kind kind, const char *name, size_t host_index,
			      const char *root, int numa, const char *chain)
{
	struct rdp_topo_dev d = {.kind = kind, .numa_node = numa, .host_index = host_index};
	char *copy, *save = NULL;

	snprintf(d.name, sizeof(d.name), "%s", name);
	if (!chain) {
		d.is_virtual = true;
		return d;
	}
	snprintf(d.pcie_root, sizeof(d.pcie_root), "%s", root);
	d.chain = calloc(RDP_TOPO_MAX_DEPTH, sizeof(*d.chain));
	copy = strdup(chain);
	for (char *t = strtok_r(copy, "/", &save); t && d.n_chain < RDP_TOPO_MAX_DEPTH;
	     t = strtok_r(NULL, "/", &save))
		d.chain[d.n_chain++] = strdup(t);
	free(copy);
	snprintf(d.pci_address, sizeof(d.pci_address), "%s", d.chain[d.n_chain - 1]);
	return d;
}

static void topo_done(struct rdp_topo *t)
{
	for (size_t i = 0; i < t->n_devs; i++) {
		for (size_t k = 0; k < t->devs[i].n_chain; k++)
			free(t->devs[i].chain[k]);
		free(t->devs[i].chain);
	}
}

/* One GPU (GPU0, root pci0000:15, NUMA 0, behind switch 16 -> DSP 17:02.0) and one NIC at
 * chain nic_chain/root/numa; active: its port. Returns the placement result's status and
 * its finding in finding. */
static struct rdp_port port_active = {.num = 1, .state = RDP_PORT_ACTIVE};
static struct rdp_port port_down = {.num = 1, .state = RDP_PORT_DOWN};

static enum rdp_check_status place(const char *nic_root, int nic_numa, const char *nic_chain,
				   bool active, char *finding, size_t size)
{
	struct rdp_device dev = {
		.name = "mlx5_0", .n_ports = 1, .ports = active ? &port_active : &port_down};
	struct rdp_host h = {.devices = &dev, .n_devices = 1};
	struct rdp_topo_dev devs[2] = {
		mk(RDP_TOPO_GPU, "GPU0", 0, "pci0000:15", 0,
		   "0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:19:00.0"),
		mk(RDP_TOPO_NIC, "mlx5_0", 0, nic_root, nic_numa, nic_chain),
	};
	struct rdp_topo t = {.devs = devs, .n_devs = 2, .n_gpus = 1};
	struct rdp_doctor_ctx c = {
		.sys_fd = -1, .dev_fd = -1, .proc_fd = -1, .host = &h, .topo = &t};
	struct rdp_doctor_report r = {0};
	enum rdp_check_status s = _RDP_CHECK_STATUS_MAX;

	EXPECT_EQ(rdp_doctor_placement(&c, &r), 0);
	EXPECT_EQ(r.n, 1);
	if (r.n == 1) {
		s = r.v[0].status;
		EXPECT_STREQ(r.v[0].id, "placement.gpu_nic");
		EXPECT_STREQ(r.v[0].subject, "GPU0 (0000:19:00.0)");
		snprintf(finding, size, "%s", r.v[0].finding);
		if (s != RDP_CHECK_OK) {
			EXPECT_TRUE(r.v[0].symptom[0] != '\0');
			EXPECT_TRUE(r.v[0].fix[0] != '\0');
		}
	}
	rdp_doctor_report_done(&r);
	topo_done(&t);
	return s;
}

static void test_placement_levels(void)
{
	char f[RDP_DOCTOR_TEXT_MAX];

	/* sibling downstream port of the same switch: PIX */
	EXPECT_EQ(place("pci0000:15", 0, "0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0",
			true, f, sizeof(f)),
		  RDP_CHECK_OK);
	EXPECT_CONTAINS(f, "closest NIC mlx5_0 (0000:18:00.0) at PIX");
	/* NIC behind a second switch of the GPU's switch: PXB */
	EXPECT_EQ(place("pci0000:15", 0,
			"0000:15:01.0/0000:16:00.0/0000:17:03.0/0000:1c:00.0/"
			"0000:1d:00.0/0000:1e:00.0",
			true, f, sizeof(f)),
		  RDP_CHECK_OK);
	EXPECT_CONTAINS(f, "at PXB");
	/* another root port of the host bridge: PHB */
	EXPECT_EQ(place("pci0000:15", 0, "0000:15:03.0/0000:20:00.0", true, f, sizeof(f)),
		  RDP_CHECK_WARN);
	EXPECT_CONTAINS(f, "at PHB");
	/* another host bridge, same NUMA node: NODE */
	EXPECT_EQ(place("pci0000:28", 0, "0000:28:01.0/0000:29:00.0", true, f, sizeof(f)),
		  RDP_CHECK_FAIL);
	EXPECT_CONTAINS(f, "at NODE");
	/* the other socket: SYS */
	EXPECT_EQ(place("pci0000:97", 1, "0000:97:01.0/0000:98:00.0", true, f, sizeof(f)),
		  RDP_CHECK_FAIL);
	EXPECT_CONTAINS(f, "at SYS");
	/* a virtual NIC (rxe): no PCIe path */
	EXPECT_EQ(place(NULL, -1, NULL, true, f, sizeof(f)), RDP_CHECK_FAIL);
	EXPECT_CONTAINS(f, "no NIC with a PCI function");
	/* the only NIC is down: judged all the same, and said */
	EXPECT_EQ(place("pci0000:15", 0, "0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0",
			false, f, sizeof(f)),
		  RDP_CHECK_OK);
	EXPECT_CONTAINS(f, "no NIC of the node has an ACTIVE port");
}

/* A closer NIC without an ACTIVE port: the active one farther away is judged. */
static void test_placement_prefers_active(void)
{
	struct rdp_device devs_h[2] = {
		{.name = "mlx5_0", .n_ports = 1, .ports = &port_down},
		{.name = "mlx5_1", .n_ports = 1, .ports = &port_active},
	};
	struct rdp_host h = {.devices = devs_h, .n_devices = 2};
	struct rdp_topo_dev devs[3] = {
		mk(RDP_TOPO_GPU, "GPU0", 0, "pci0000:15", 0,
		   "0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:19:00.0"),
		mk(RDP_TOPO_NIC, "mlx5_0", 0, "pci0000:15", 0,
		   "0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0"),
		mk(RDP_TOPO_NIC, "mlx5_1", 1, "pci0000:97", 1, "0000:97:01.0/0000:98:00.0"),
	};
	struct rdp_topo t = {.devs = devs, .n_devs = 3, .n_gpus = 1};
	struct rdp_doctor_ctx c = {
		.sys_fd = -1, .dev_fd = -1, .proc_fd = -1, .host = &h, .topo = &t};
	struct rdp_doctor_report r = {0};

	EXPECT_EQ(rdp_doctor_placement(&c, &r), 0);
	EXPECT_EQ(r.n, 1);
	if (r.n == 1) {
		EXPECT_EQ(r.v[0].status, RDP_CHECK_FAIL);
		EXPECT_CONTAINS(r.v[0].finding, "closest NIC mlx5_1 (0000:98:00.0) at SYS");
		EXPECT_CONTAINS(r.v[0].finding,
				"closer at PIX but with no ACTIVE port: mlx5_0 (0000:18:00.0)");
	}
	rdp_doctor_report_done(&r);
	topo_done(&t);
}

static void test_no_gpu_no_model(void)
{
	struct rdp_topo t = {0};
	struct rdp_doctor_ctx c = {.sys_fd = -1, .dev_fd = -1, .proc_fd = -1, .topo = &t};
	struct rdp_doctor_report r = {0};

	EXPECT_EQ(rdp_doctor_placement(&c, &r), 0);
	c.topo = NULL;
	EXPECT_EQ(rdp_doctor_placement(&c, &r), 0);
	EXPECT_EQ(r.n, 2);
	if (r.n == 2) {
		EXPECT_EQ(r.v[0].status, RDP_CHECK_SKIP);
		EXPECT_CONTAINS(r.v[0].finding, "no GPU on this node");
		EXPECT_EQ(r.v[1].status, RDP_CHECK_SKIP);
		EXPECT_CONTAINS(r.v[1].finding, "no PCIe topology model");
	}
	rdp_doctor_report_done(&r);
}

/* ---- fixture nodes ---- */

struct node {
	int sfd, dfd, pfd;
	struct rdp_host *h;
	struct rdp_topo *t;
	struct rdp_doctor_ctx c;
};

static bool node_open(struct node *n, const char *fixtures, const char *name)
{
	char sys[PATH_MAX], dev[PATH_MAX], proc[PATH_MAX];

	memset(n, 0, sizeof(*n));
	n->pfd = -1;
	snprintf(sys, sizeof(sys), "%s/%s/sys", fixtures, name);
	snprintf(dev, sizeof(dev), "%s/%s/dev", fixtures, name);
	snprintf(proc, sizeof(proc), "%s/%s/proc", fixtures, name);
	EXPECT_EQ(rdp_sysfs_open_roots(sys, dev, &n->sfd, &n->dfd), 0);
	if (access(proc, F_OK) == 0)
		EXPECT_EQ(rdp_sysfs_open_root(proc, &n->pfd), 0);
	EXPECT_EQ(rdp_discover_at(n->sfd, n->dfd, &n->h), 0);
	if (!n->h)
		return false;
	EXPECT_EQ(rdp_topo_read_at(n->sfd, n->h, &n->t), 0);
	if (!n->t)
		return false;
	n->c = (struct rdp_doctor_ctx){
		.sys_fd = n->sfd, .dev_fd = n->dfd, .proc_fd = n->pfd, .host = n->h, .topo = n->t};
	return true;
}

static void node_close(struct node *n)
{
	rdp_topo_free(n->t);
	rdp_host_free(n->h);
	close(n->sfd);
	close(n->dfd);
	if (n->pfd >= 0)
		close(n->pfd);
}

static int run_all(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	int e;

	if ((e = rdp_doctor_pcie(c, r)) < 0 || (e = rdp_doctor_placement(c, r)) < 0 ||
	    (e = rdp_doctor_gpudirect(c, r)) < 0)
		return e;
	return 0;
}

static size_t count(const struct rdp_doctor_report *r, const char *id, enum rdp_check_status s)
{
	size_t n = 0;

	for (size_t i = 0; i < r->n; i++)
		n += strcmp(r->v[i].id, id) == 0 && r->v[i].status == s;
	return n;
}

static void test_dgx(const char *fixtures)
{
	struct rdp_doctor_report r = {0};
	struct node n;

	if (!node_open(&n, fixtures, "dgx-h100"))
		goto out;
	EXPECT_EQ(run_all(&n.c, &r), 0);
	EXPECT_EQ(rdp_doctor_count(&r, RDP_CHECK_FAIL), 0);
	EXPECT_EQ(rdp_doctor_count(&r, RDP_CHECK_WARN), 0);
	EXPECT_EQ(count(&r, "pcie.link", RDP_CHECK_OK), 12 + 8); /* 12 NIC functions, 8 GPUs */
	EXPECT_EQ(count(&r, "placement.gpu_nic", RDP_CHECK_OK), 8);
	EXPECT_EQ(count(&r, "gpudirect.peermem", RDP_CHECK_OK), 1);
	EXPECT_EQ(count(&r, "gpudirect.iommu", RDP_CHECK_OK), 1);
	EXPECT_EQ(count(&r, "gpudirect.acs", RDP_CHECK_OK), 8);
	for (size_t i = 0; i < r.n; i++) {
		if (strcmp(r.v[i].subject, "GPU0 (0000:1b:00.0)") == 0 &&
		    strcmp(r.v[i].id, "placement.gpu_nic") == 0)
			EXPECT_CONTAINS(r.v[i].finding, "closest NIC mlx5_0 (0000:18:00.0) at PXB");
		if (strcmp(r.v[i].subject, "mlx5_0 (0000:18:00.0)") == 0)
			EXPECT_CONTAINS(r.v[i].finding, "PCIe link 32.0 GT/s x16, its maximum");
		if (strcmp(r.v[i].id, "gpudirect.peermem") == 0)
			EXPECT_CONTAINS(r.v[i].finding, "nvidia_peermem 535.154.05 loaded");
		if (strcmp(r.v[i].id, "gpudirect.iommu") == 0)
			EXPECT_CONTAINS(r.v[i].finding, "20 identity");
	}
	/* every allocation failure: -ENOMEM, nothing leaked (ASan) */
	for (unsigned long k = 1;; k++) {
		struct rdp_doctor_report f = {0};
		int e;

		rdp_alloc_fail_at(k);
		e = run_all(&n.c, &f);
		rdp_alloc_fail_at(0);
		rdp_doctor_report_done(&f);
		if (e == 0)
			break;
		EXPECT_EQ(e, -ENOMEM);
		if (k > 1000) {
			EXPECT_TRUE(false);
			break;
		}
	}
out:
	rdp_doctor_report_done(&r);
	node_close(&n);
}

static void test_hgx(const char *fixtures)
{
	struct rdp_doctor_report r = {0};
	struct node n;

	if (!node_open(&n, fixtures, "hgx-pix"))
		goto out;
	EXPECT_EQ(run_all(&n.c, &r), 0);
	EXPECT_EQ(rdp_doctor_count(&r, RDP_CHECK_FAIL), 0);
	EXPECT_EQ(count(&r, "placement.gpu_nic", RDP_CHECK_OK), 8);
	for (size_t i = 0; i < r.n; i++)
		if (strcmp(r.v[i].id, "placement.gpu_nic") == 0)
			EXPECT_CONTAINS(r.v[i].finding, " at PIX (");
	EXPECT_EQ(count(&r, "gpudirect.acs", RDP_CHECK_SKIP), 1); /* no IOMMU */
	EXPECT_EQ(count(&r, "gpudirect.iommu", RDP_CHECK_OK), 1);
out:
	rdp_doctor_report_done(&r);
	node_close(&n);
}

/* Guest VFs without a PCIe capability: their links skip, never ok. sriov: VFs are covered
 * by their PF. */
static void test_vfs(const char *fixtures)
{
	struct rdp_doctor_report r = {0};
	struct node n;

	if (node_open(&n, fixtures, "vm-passthrough")) {
		EXPECT_EQ(rdp_doctor_pcie(&n.c, &r), 0);
		EXPECT_EQ(count(&r, "pcie.link", RDP_CHECK_SKIP), 4);
		EXPECT_EQ(r.n, 4);
	}
	rdp_doctor_report_done(&r);
	node_close(&n);
	if (node_open(&n, fixtures, "sriov")) {
		EXPECT_EQ(rdp_doctor_pcie(&n.c, &r), 0);
		EXPECT_EQ(count(&r, "pcie.link", RDP_CHECK_OK), 2); /* PF0 and PF1 */
		EXPECT_EQ(r.n, 2);
		/* a VF's own attributes: link status not reported */
		{
			struct rdp_pcie_link l;

			EXPECT_EQ(rdp_pcie_link_read(n.sfd, "0000:3b:00.2", &l), 0);
			EXPECT_EQ(l.cur_speed, 0u);
			EXPECT_EQ(l.cur_width, 0u);
			EXPECT_EQ(l.max_speed, 160u);
		}
	}
	rdp_doctor_report_done(&r);
	node_close(&n);
}

int main(void)
{
	const char *fixtures;

	test_parse_speed();
	test_link_math();
	test_placement_levels();
	test_placement_prefers_active();
	test_no_gpu_no_model();
	fixtures = test_fixtures_dir("test-doctor-pci");
	if (fixtures) {
		test_dgx(fixtures);
		test_hgx(fixtures);
		test_vfs(fixtures);
	}
	return test_summary("test-doctor-pci");
}
