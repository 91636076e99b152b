/* SPDX-License-Identifier: MIT */
/*
 * doctor, group gpudirect: what GPUDirect RDMA needs besides placement.
 *
 * `gpudirect.peermem` (node): NCCL (transport/net_ib/gdr.cc) takes GPUDirect RDMA through
 * peer memory as available when one of these exists: kernel/mm/memory_peers/nv_mem/version,
 * kernel/mm/memory_peers/nv_mem_nc/version (the legacy nv_peer_mem module) or
 * module/nvidia_peermem/version. One does: ok. None: warn, with the DMA-BUF alternative
 * (NCCL_DMABUF_ENABLE=1, the default; kernel >= 5.12; the open NVIDIA kernel module, whose
 * /proc/driver/nvidia/version says "Open Kernel Module"; CUDA >= 11.7): what the proc root
 * shows of it (sys/kernel/osrelease, driver/nvidia/version) is in the finding. No GPU (or no
 * topology model): skip.
 *
 * `gpudirect.iommu` (node): kernel/iommu_groups/<n>/type of the groups of the GPUs and NICs
 * (bus/pci/devices/<bdf>/iommu_group; of every group when none of them has one). "DMA" or
 * "DMA-FQ" (translated): warn, every DMA goes through the IOMMU's page tables (IOTLB misses
 * at 200-400 Gb/s, unless the NIC uses ATS). "identity" (iommu=pt), "unmanaged" (given to
 * VFIO), "blocked": ok. No kernel/iommu_groups or none in it: ok, no IOMMU.
 *
 * `gpudirect.acs` (per GPU and NIC below one PCIe switch: their chains share the function
 * below the root port, a switch upstream port): reading ACS Control needs config space
 * beyond 64 bytes, i.e. CAP_SYS_ADMIN; the unprivileged proxy is the IOMMU grouping, which
 * puts functions below a switch in separate groups only when the switch ports have ACS
 * (drivers/iommu/iommu.c, REQ_ACS_FLAGS). Same group: ok. Different groups: fail, ACS
 * redirects their peer-to-peer traffic to the root complex (NCCL: completion status 4,
 * IBV_WC_LOC_PROT_ERR). A VF is judged by its PF's group. No IOMMU: skip (groups say
 * nothing then). No pair below one switch: ok, nothing for ACS to break.
 * Caveat (not verified on hardware): kernels before the 2025 rework of pci_device_group()
 * may give sibling downstream ports of a switch without ACS separate groups.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-pci.h"
#include "doctor.h"
#include "macro.h"
#include "sysfs.h"

#define GROUPS_DIR "kernel/iommu_groups"
#define GROUPS_MAX 65536
#define GROUP_NAME_MAX 16

static const char *const peer_files[] = {
	"module/nvidia_peermem/version",
	"kernel/mm/memory_peers/nv_mem/version",
	"kernel/mm/memory_peers/nv_mem_nc/version",
};

/* "5.15.0-1042-nvidia" -> 5, 15. */
static int parse_release(const char *s, long *major, long *minor)
{
	char *end;

	errno = 0;
	*major = strtol(s, &end, 10);
	if (end == s || *end != '.' || errno)
		return -EINVAL;
	s = end + 1;
	*minor = strtol(s, &end, 10);
	if (end == s || errno)
		return -EINVAL;
	return 0;
}

static int check_peermem(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	char ver[64], rel[128], drv[RDP_SYSFS_ATTR_MAX], kern[192], mod[192];
	bool kernel_ok = false, open_ok = false;
	long maj, min;

	if (!c->topo)
		return rdp_doctor_add(r, RDP_GROUP_GPUDIRECT, "gpudirect.peermem", RDP_CHECK_SKIP,
				      "", NULL, NULL,
				      "no PCIe topology model was read: GPUs unknown");
	if (c->topo->n_gpus == 0)
		return rdp_doctor_add(r, RDP_GROUP_GPUDIRECT, "gpudirect.peermem", RDP_CHECK_SKIP,
				      "", NULL, NULL,
				      "no GPU on this node: GPUDirect RDMA does not apply");
	for (size_t i = 0; i < ARRAY_SIZE(peer_files); i++) {
		if (!rdp_sysfs_exists(c->sys_fd, peer_files[i]))
			continue;
		if (rdp_sysfs_read_attr(c->sys_fd, peer_files[i], ver, sizeof(ver)) < 0)
			snprintf(ver, sizeof(ver), "?");
		return rdp_doctor_add(r, RDP_GROUP_GPUDIRECT, "gpudirect.peermem", RDP_CHECK_OK, "",
				      NULL, NULL, "%s %s loaded (%s): NCCL uses GPUDirect RDMA",
				      i == 0 ? "nvidia_peermem" : "nv_peer_mem (legacy)", ver,
				      peer_files[i]);
	}
	if (c->proc_fd < 0) {
		snprintf(kern, sizeof(kern), "kernel release unknown (no proc root)");
		snprintf(mod, sizeof(mod), "NVIDIA kernel module unknown (no proc root)");
	} else {
		if (rdp_sysfs_read_attr(c->proc_fd, "sys/kernel/osrelease", rel, sizeof(rel)) < 0 ||
		    parse_release(rel, &maj, &min) < 0) {
			snprintf(kern, sizeof(kern),
				 "kernel release unknown (sys/kernel/osrelease unreadable)");
		} else {
			kernel_ok = maj > 5 || (maj == 5 && min >= 12);
			snprintf(kern, sizeof(kern), "kernel %s (%s 5.12)", rel,
				 kernel_ok ? ">=" : "<");
		}
		if (rdp_sysfs_read_attr(c->proc_fd, "driver/nvidia/version", drv, sizeof(drv)) <
		    0) {
			snprintf(mod, sizeof(mod),
				 "NVIDIA kernel module unknown (driver/nvidia/version unreadable)");
		} else {
			open_ok = strstr(drv, "Open Kernel Module") != NULL;
			snprintf(mod, sizeof(mod), "%s NVIDIA kernel module",
				 open_ok ? "the open" : "the proprietary (not open)");
		}
	}
	return rdp_doctor_add(
		r, RDP_GROUP_GPUDIRECT, "gpudirect.peermem", RDP_CHECK_WARN, "",
		"Without peer memory NCCL gets GPUDirect RDMA only through DMA-BUF "
		"(NCCL_DMABUF_ENABLE=1, the default, CUDA >= 11.7, driver and kernel support); "
		"without that either it logs \"NET/IB : GPU Direct RDMA Disabled for HCA <n> "
		"'<nic>'\" and stages every transfer through host memory.",
		kernel_ok && open_ok
			? "If NCCL_DEBUG=INFO shows \"/GDRDMA\" on its channels, DMA-BUF works and "
			  "nothing is needed; otherwise load nvidia-peermem (modprobe "
			  "nvidia-peermem; GPU Operator: driver.rdma.enabled=true)."
			: "Load nvidia-peermem (modprobe nvidia-peermem; GPU Operator: "
			  "driver.rdma.enabled=true; it needs MOFED's peer-memory API), or use "
			  "DMA-BUF: the open NVIDIA kernel module on a kernel >= 5.12 with "
			  "NCCL_DMABUF_ENABLE=1.",
		"no nvidia_peermem (module/nvidia_peermem/version) nor legacy nv_peer_mem "
		"(kernel/mm/memory_peers/nv_mem{,_nc}/version); DMA-BUF: %s, %s%s",
		kern, mod, kernel_ok && open_ok ? ": DMA-BUF possible" : "");
}

/* The PCI functions the gpudirect checks look at: GPUs, then the NICs' functions. */
struct pci_fn {
	const char *bdf;
	const char *name;
	const struct rdp_topo_dev *td;
	bool gpu;
};

static size_t list_functions(const struct rdp_doctor_ctx *c, struct pci_fn *v, size_t max)
{
	size_t n = 0;

	for (size_t k = 0; c->topo && k < c->topo->n_devs && n < max; k++) {
		const struct rdp_topo_dev *td = &c->topo->devs[k];
		const char *bdf = td->pci_address;
		bool dup = false;

		if (td->is_virtual || !bdf[0])
			continue;
		if (td->kind == RDP_TOPO_NIC && c->host && td->host_index < c->host->n_devices)
			bdf = rdp_pci_function_of(&c->host->devices[td->host_index]);
		if (!bdf)
			continue;
		for (size_t i = 0; i < n && !dup; i++)
			dup = strcmp(v[i].bdf, bdf) == 0;
		if (dup)
			continue;
		v[n++] = (struct pci_fn){
			.bdf = bdf, .name = td->name, .td = td, .gpu = td->kind == RDP_TOPO_GPU};
	}
	return n;
}

/* Whether the node has IOMMU groups: 1 yes, 0 no, negative errno when it cannot tell. */
static int have_groups(int sys_fd, size_t *ret_n)
{
	char **names = NULL;
	size_t n = 0;
	int e;

	e = rdp_sysfs_list_dir(sys_fd, GROUPS_DIR, GROUPS_MAX, &names, &n);
	if (e == -ENOENT) {
		*ret_n = 0;
		return 0;
	}
	if (e < 0)
		return e;
	rdp_sysfs_names_free(names, n);
	*ret_n = n;
	return n > 0;
}

enum { T_DMA, T_DMA_FQ, T_IDENTITY, T_UNMANAGED, T_BLOCKED, T_OTHER, T_UNREADABLE, T_MAX };
static const char *const type_names[T_MAX] = {"DMA",	 "DMA-FQ", "identity",	"unmanaged",
					      "blocked", "other",  "unreadable"};

static void count_type(int sys_fd, const char *group, size_t counts[T_MAX])
{
	char path[128], t[64];
	size_t i;

	snprintf(path, sizeof(path), GROUPS_DIR "/%s/type", group);
	if (rdp_sysfs_read_attr(sys_fd, path, t, sizeof(t)) < 0) {
		counts[T_UNREADABLE]++;
		return;
	}
	for (i = 0; i < T_OTHER && strcmp(t, type_names[i]) != 0; i++)
		;
	counts[i]++;
}

static int check_iommu(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r,
		       const struct pci_fn *fns, size_t n_fns)
{
	size_t counts[T_MAX] = {0}, n_groups = 0, n_counted = 0, len = 0;
	char group[GROUP_NAME_MAX], summary[256] = "";
	int e = have_groups(c->sys_fd, &n_groups);

	if (e < 0)
		return rdp_doctor_add(r, RDP_GROUP_GPUDIRECT, "gpudirect.iommu", RDP_CHECK_SKIP, "",
				      NULL, NULL, "cannot list " GROUPS_DIR ": %s", strerror(-e));
	if (e == 0)
		return rdp_doctor_add(r, RDP_GROUP_GPUDIRECT, "gpudirect.iommu", RDP_CHECK_OK, "",
				      NULL, NULL, "no IOMMU (no groups in " GROUPS_DIR ")");
	for (size_t i = 0; i < n_fns; i++)
		if (rdp_pci_iommu_group(c->sys_fd, fns[i].bdf, group, sizeof(group)) == 0) {
			count_type(c->sys_fd, group, counts);
			n_counted++;
		}
	if (n_counted == 0) {
		char **names = NULL;
		size_t n = 0;

		if (rdp_sysfs_list_dir(c->sys_fd, GROUPS_DIR, GROUPS_MAX, &names, &n) == 0) {
			for (size_t i = 0; i < n; i++)
				count_type(c->sys_fd, names[i], counts);
			rdp_sysfs_names_free(names, n);
		}
	}
	for (size_t i = 0; i < T_MAX; i++)
		if (counts[i] && len < sizeof(summary))
			len += (size_t)snprintf(summary + len, sizeof(summary) - len, "%s%zu %s",
						len ? ", " : "", counts[i], type_names[i]);
	if (counts[T_DMA] || counts[T_DMA_FQ])
		return rdp_doctor_add(
			r, RDP_GROUP_GPUDIRECT, "gpudirect.iommu", RDP_CHECK_WARN, "",
			"Every DMA of the NICs and GPUs, GPUDirect RDMA included, is translated by "
			"the IOMMU: IOTLB misses cost bandwidth and latency at 200-400 Gb/s unless "
			"the NIC uses ATS.",
			"Boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt) so "
			"host-owned devices use identity mapping; keep translation only where its "
			"isolation is wanted.",
			"IOMMU in translated mode: %s (%s; %zu groups on the node)", summary,
			n_counted ? "the groups of the GPU and NIC functions" : "all groups",
			n_groups);
	return rdp_doctor_add(
		r, RDP_GROUP_GPUDIRECT, "gpudirect.iommu", RDP_CHECK_OK, "", NULL, NULL,
		"IOMMU without translation for DMA: %s (%s; %zu groups on the "
		"node)",
		summary, n_counted ? "the groups of the GPU and NIC functions" : "all groups",
		n_groups);
}

/* Entries two chains share from the root port down (0 for different roots). */
static size_t common_prefix(const struct rdp_topo_dev *a, const struct rdp_topo_dev *b)
{
	size_t n = 0;

	if (strcmp(a->pcie_root, b->pcie_root) != 0)
		return 0;
	while (n < a->n_chain && n < b->n_chain && strcmp(a->chain[n], b->chain[n]) == 0)
		n++;
	return n;
}

static int check_acs(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r,
		     const struct pci_fn *fns, size_t n_fns)
{
	size_t n_groups = 0, n_pairs = 0;
	int e = have_groups(c->sys_fd, &n_groups);

	if (e <= 0)
		return rdp_doctor_add(r, RDP_GROUP_GPUDIRECT, "gpudirect.acs", RDP_CHECK_SKIP, "",
				      NULL, NULL,
				      "no IOMMU groups (%s): they say nothing about ACS then; "
				      "reading ACS Control needs CAP_SYS_ADMIN (`lspci -vvv | grep "
				      "ACSCtl` as root)",
				      e < 0 ? strerror(-e) : "no IOMMU");
	if (!c->topo || c->topo->n_gpus == 0)
		return rdp_doctor_add(r, RDP_GROUP_GPUDIRECT, "gpudirect.acs", RDP_CHECK_SKIP, "",
				      NULL, NULL,
				      "no GPU on this node: GPUDirect RDMA does not apply");
	for (size_t i = 0; i < n_fns; i++) {
		if (!fns[i].gpu)
			continue;
		for (size_t k = 0; k < n_fns; k++) {
			char subject[2 * (RDP_IBDEV_NAME_MAX + RDP_PCI_ADDR_MAX) + 16];
			char gg[GROUP_NAME_MAX], gn[GROUP_NAME_MAX], fix[512];
			const char *usp;
			size_t p;
			int eg, en;

			if (fns[k].gpu)
				continue;
			p = common_prefix(fns[i].td, fns[k].td);
			/* chain[0] is the root port; sharing chain[1] means one switch above both
			 */
			if (p < 2 || p >= fns[i].td->n_chain || p >= fns[k].td->n_chain)
				continue;
			usp = fns[i].td->chain[1];
			n_pairs++;
			snprintf(subject, sizeof(subject), "%s (%s) / %s (%s)", fns[i].name,
				 fns[i].bdf, fns[k].name, fns[k].bdf);
			eg = rdp_pci_iommu_group(c->sys_fd, fns[i].bdf, gg, sizeof(gg));
			en = rdp_pci_iommu_group(c->sys_fd, fns[k].bdf, gn, sizeof(gn));
			if (eg < 0 || en < 0) {
				e = rdp_doctor_add(r, RDP_GROUP_GPUDIRECT, "gpudirect.acs",
						   RDP_CHECK_SKIP, subject, NULL, NULL,
						   "no IOMMU group for %s (bus/pci/devices/%s/"
						   "iommu_group: %s)",
						   eg < 0 ? fns[i].bdf : fns[k].bdf,
						   eg < 0 ? fns[i].bdf : fns[k].bdf,
						   strerror(eg < 0 ? -eg : -en));
			} else if (strcmp(gg, gn) == 0) {
				e = rdp_doctor_add(
					r, RDP_GROUP_GPUDIRECT, "gpudirect.acs", RDP_CHECK_OK,
					subject, NULL, NULL,
					"both below switch port %s in IOMMU group %s: no ACS "
					"redirect between them",
					usp, gg);
			} else {
				snprintf(fix, sizeof(fix),
					 "Disable ACS on the PCIe switch ports below root port %s "
					 "(switch %s): in the BIOS (PCIe ACS off), or at every "
					 "boot for "
					 "each of those bridges: `setpci -s <bdf> "
					 "ECAP_ACS+0x6.w=0000` "
					 "(as root).",
					 fns[i].td->chain[0], usp);
				e = rdp_doctor_add(r, RDP_GROUP_GPUDIRECT, "gpudirect.acs",
						   RDP_CHECK_FAIL, subject,
						   "ACS redirects their peer-to-peer traffic to "
						   "the root complex: "
						   "GPUDirect RDMA fails or crawls, NCCL reports "
						   "\"Got completion "
						   "from peer ... with status=4\" "
						   "(IBV_WC_LOC_PROT_ERR, vendor err "
						   "81) with its hint that ACS is enabled which "
						   "would break GPU "
						   "Direct RDMA, or hangs.",
						   fix,
						   "%s in IOMMU group %s, %s in group %s, both "
						   "below switch port "
						   "%s: the switch's ports have ACS on",
						   fns[i].bdf, gg, fns[k].bdf, gn, usp);
			}
			if (e < 0)
				return e;
		}
	}
	if (n_pairs == 0)
		return rdp_doctor_add(r, RDP_GROUP_GPUDIRECT, "gpudirect.acs", RDP_CHECK_OK, "",
				      NULL, NULL,
				      "no GPU and NIC share a PCIe switch: nothing for ACS to "
				      "redirect");
	return 0;
}

int rdp_doctor_gpudirect(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	_cleanup_free_ struct pci_fn *fns = NULL;
	size_t n_fns = 0;
	int e;

	if (c->topo && c->topo->n_devs) {
		fns = rdp_calloc(c->topo->n_devs, sizeof(*fns));
		if (!fns)
			return -ENOMEM;
		n_fns = list_functions(c, fns, c->topo->n_devs);
	}
	if ((e = check_peermem(c, r)) < 0 || (e = check_iommu(c, r, fns, n_fns)) < 0 ||
	    (e = check_acs(c, r, fns, n_fns)) < 0)
		return e;
	return 0;
}
