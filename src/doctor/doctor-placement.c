/* SPDX-License-Identifier: MIT */
/*
 * doctor, group placement: `placement.gpu_nic`, one result per GPU: the closest RDMA NIC in
 * the PCIe tree (topology.h levels) and what that means for GPUDirect RDMA.
 *
 * NCCL uses GPUDirect RDMA between a GPU and a NIC only when their path is no farther than
 * NCCL_NET_GDR_LEVEL, PXB by default (graph/paths.cc ncclTopoCheckGdr); beyond, it stages
 * the traffic through host memory. So: X/PIX/PXB ok; PHB warn (GDR off by default, may be
 * turned on and is sometimes good); NODE, SYS and no NIC at all (every NIC virtual or none):
 * fail.
 *
 * The closest NIC is taken among those with an ACTIVE port (NCCL uses no other); a NIC
 * closer than that without one is named in the finding (the ports group says why). When no
 * NIC has an ACTIVE port, the closest of all is judged and the finding says none is active.
 * No topology model or no GPU: one skip for the node.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "doctor.h"
#include "macro.h"

#define ID "placement.gpu_nic"
#define NAMES_MAX 512
#define NAMES_SHOWN 4 /* NICs named at the best level; beyond, "and N more" */

static enum rdp_topo_level min_level(enum rdp_topo_level a, enum rdp_topo_level b)
{
	return a < b ? a : b;
}

static bool nic_active(const struct rdp_host *h, const struct rdp_topo_dev *n)
{
	return h && n->host_index < h->n_devices &&
	       rdp_device_is_active(&h->devices[n->host_index]);
}

static bool counts(const struct rdp_host *h, const struct rdp_topo_dev *n, bool active_only)
{
	return n->kind == RDP_TOPO_NIC && (!active_only || nic_active(h, n));
}

/* The best level from g over the NICs (only the active ones when active_only), and the
 * names of the first NAMES_SHOWN at it ("mlx5_0 (0000:18:00.0), ... and 3 more") into
 * names. */
static enum rdp_topo_level best(const struct rdp_topo *t, const struct rdp_host *h,
				const struct rdp_topo_dev *g, bool active_only, char *names,
				size_t size)
{
	enum rdp_topo_level lv = RDP_TOPO_NONE;
	size_t len = 0, at = 0;

	for (size_t k = 0; k < t->n_devs; k++)
		if (counts(h, &t->devs[k], active_only))
			lv = min_level(lv, rdp_topo_level(g, &t->devs[k]));
	names[0] = '\0';
	if (lv == RDP_TOPO_NONE)
		return lv;
	for (size_t k = 0; k < t->n_devs; k++) {
		const struct rdp_topo_dev *n = &t->devs[k];
		int w;

		if (!counts(h, n, active_only) || rdp_topo_level(g, n) != lv || at++ >= NAMES_SHOWN)
			continue;
		w = snprintf(names + len, size - len, "%s%s (%s)", len ? ", " : "", n->name,
			     n->pci_address);
		if (w > 0)
			len = len + (size_t)w < size - 1 ? len + (size_t)w : size - 1;
	}
	if (at > NAMES_SHOWN && len < size - 1)
		snprintf(names + len, size - len, " and %zu more", at - NAMES_SHOWN);
	return lv;
}

/*
 * The earlier failure that explains a GPU placed at level lv (see rdp_doctor_find): a closer
 * NIC whose port.state fails, or an RDMA driver not loaded (stack.driver: NICs missing from
 * the model). NULL: the placement itself is the cause.
 */
static const char *placement_cause(const struct rdp_doctor_report *r, const struct rdp_topo *t,
				   const struct rdp_topo_dev *g, enum rdp_topo_level lv)
{
	char prefix[RDP_IBDEV_NAME_MAX + 8];

	for (size_t k = 0; k < t->n_devs; k++) {
		const struct rdp_topo_dev *n = &t->devs[k];

		if (n->kind != RDP_TOPO_NIC || rdp_topo_level(g, n) >= lv)
			continue;
		snprintf(prefix, sizeof(prefix), "%s port ", n->name);
		if (rdp_doctor_find(r, "port.state", RDP_CHECK_FAIL, prefix))
			return "port.state";
	}
	if (rdp_doctor_find(r, "stack.driver", RDP_CHECK_FAIL, NULL))
		return "stack.driver";
	return NULL;
}

static const char *const gdr_symptom =
	"NCCL uses GPUDirect RDMA only up to NCCL_NET_GDR_LEVEL (PXB by default): here it logs "
	"\"NET/IB : GPU Direct RDMA Disabled for HCA <n> '<nic>'\", its channels show \"via "
	"NET/IB/<n>\" without \"/GDRDMA\", and traffic is staged through host memory: bus "
	"bandwidth well below line rate.";

int rdp_doctor_placement(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	const struct rdp_topo *t = c->topo;
	size_t n_nics = 0, n_active = 0;
	int e;

	if (!t)
		return rdp_doctor_add(r, RDP_GROUP_PLACEMENT, ID, RDP_CHECK_SKIP, "", NULL, NULL,
				      "no PCIe topology model was read: GPU-NIC placement unknown");
	if (t->n_gpus == 0)
		return rdp_doctor_add(r, RDP_GROUP_PLACEMENT, ID, RDP_CHECK_SKIP, "", NULL, NULL,
				      "no GPU on this node (no NVIDIA or AMD display/3D controller "
				      "in bus/pci/devices): nothing to place");
	for (size_t k = 0; k < t->n_devs; k++) {
		if (t->devs[k].kind != RDP_TOPO_NIC)
			continue;
		n_nics++;
		n_active += nic_active(c->host, &t->devs[k]);
	}
	for (size_t i = 0; i < t->n_devs; i++) {
		const struct rdp_topo_dev *g = &t->devs[i];
		char subject[RDP_IBDEV_NAME_MAX + RDP_PCI_ADDR_MAX + 8], names[NAMES_MAX],
			closer[NAMES_MAX], note[NAMES_MAX + 160] = "";
		enum rdp_topo_level lv, any;
		enum rdp_check_status s;
		const char *fix = NULL, *cause;

		if (g->kind != RDP_TOPO_GPU)
			continue;
		snprintf(subject, sizeof(subject), "%s (%s)", g->name, g->pci_address);
		lv = best(t, c->host, g, n_active > 0, names, sizeof(names));
		if (n_active > 0) {
			any = best(t, c->host, g, false, closer, sizeof(closer));
			if (any < lv)
				snprintf(note, sizeof(note),
					 "; closer at %s but with no ACTIVE port: %s",
					 rdp_topo_level_name(any), closer);
		} else if (n_nics > 0) {
			snprintf(note, sizeof(note), "; no NIC of the node has an ACTIVE port");
		}
		cause = lv >= RDP_TOPO_NODE ? placement_cause(r, t, g, lv) : NULL;
		if (cause)
			snprintf(note + strlen(note), sizeof(note) - strlen(note),
				 " (explained by %s above: fix that first)", cause);
		if (lv == RDP_TOPO_NONE) {
			e = rdp_doctor_add(
				r, RDP_GROUP_PLACEMENT, ID, cause ? RDP_CHECK_WARN : RDP_CHECK_FAIL,
				subject,
				"No RDMA NIC has a PCIe path to this GPU: NCCL finds no IB/RoCE "
				"device "
				"for it (\"NET/IB : No device found.\") and uses sockets.",
				"Fix the stack and ports findings first (a NIC missing or down), "
				"or "
				"give the node a NIC on the GPU's PCIe switch.",
				"%s: no NIC with a PCI function (%zu RDMA device(s), none in the "
				"PCIe "
				"tree)%s",
				g->pci_address, n_nics, note);
			if (e < 0)
				return e;
			continue;
		}
		switch (lv) {
		case RDP_TOPO_X:
		case RDP_TOPO_PIX:
		case RDP_TOPO_PXB:
			s = RDP_CHECK_OK;
			break;
		case RDP_TOPO_PHB:
			s = RDP_CHECK_WARN;
			fix = "Give the pod a NIC under the GPU's PCIe switch if the node has one; "
			      "otherwise try NCCL_NET_GDR_LEVEL=PHB and measure (peer-to-peer "
			      "through "
			      "the CPU's host bridge is fast on some CPUs, slow on others).";
			break;
		default:
			s = cause ? RDP_CHECK_WARN : RDP_CHECK_FAIL;
			fix = "Allocate each GPU the NIC closest to it (a NIC under the same PCIe "
			      "switch: topology-aware allocation, one NIC per GPU) or install one "
			      "there; NCCL_NET_GDR_LEVEL=SYS would force GPUDirect RDMA across the "
			      "CPUs, usually slower.";
			break;
		}
		e = rdp_doctor_add(r, RDP_GROUP_PLACEMENT, ID, s, subject,
				   s == RDP_CHECK_OK ? NULL : gdr_symptom, fix,
				   "%s: closest NIC %s at %s (%s)%s%s", g->pci_address, names,
				   rdp_topo_level_name(lv), rdp_topo_level_meaning(lv),
				   s == RDP_CHECK_OK ? ": GPUDirect RDMA at NCCL's default "
						       "NCCL_NET_GDR_LEVEL (PXB)"
						     : "",
				   note);
		if (e < 0)
			return e;
	}
	return 0;
}
