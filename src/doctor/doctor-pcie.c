/* SPDX-License-Identifier: MIT */
/*
 * doctor, group pcie: `pcie.link`, one result per RDMA device's PCI function and per GPU,
 * its PCIe link's current speed and width against its maximum (doctor-pci.h says what sysfs
 * shows).
 *
 *   - NIC (the PCI function of an RDMA device; devices without one, rxe/siw, are left out):
 *     a link below its maximum caps the NIC's bandwidth: fail. NCCL does not see it: its
 *     topology models max_link_speed/max_link_width. The links above it (every function of
 *     its chain, root port down) count too: a switch uplink trained down caps it the same.
 *   - GPU: warn, not fail: GPUs lower their link speed when idle to save power (an idle
 *     H100 shows 2.5 GT/s), so a reading at rest cannot tell that from a bad link; the
 *     finding says so and the fix is to re-run under load.
 *   - VFs: a VF reports no link status ("Unknown", width 0; doctor-pci.h), and shares its
 *     PF's link: a VF whose PF is an RDMA device of the node is covered by the PF's result;
 *     one whose PF is not (bound elsewhere) is judged by the PF's link under the VF's name;
 *     one whose PF is not visible (passed through to a VM) skips.
 *   - attributes missing or unreadable (not a PCIe function: a VM's conventional PCI bus):
 *     skip, saying which file.
 * One result per PCI function (two ibdevs of one function, an SF and its PF: one result).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "doctor-pci.h"
#include "doctor.h"
#include "macro.h"
#include "sysfs.h"

#define ID "pcie.link"

/* The topology entry of host device i (its chain), NULL when none. */
static const struct rdp_topo_dev *topo_of_nic(const struct rdp_topo *t, size_t i)
{
	for (size_t k = 0; t && k < t->n_devs; k++)
		if (t->devs[k].kind == RDP_TOPO_NIC && t->devs[k].host_index == i)
			return &t->devs[k];
	return NULL;
}

/*
 * The first link above the function that is below its maximum: chain entries from the one
 * above the function's parent bridge (which reports the function's own link) up to the root
 * port. Returns its index in chain or -1.
 */
static int degraded_above(int sys_fd, const struct rdp_topo_dev *td, struct rdp_pcie_link *ret)
{
	if (!td || td->n_chain < 3)
		return -1;
	for (size_t k = td->n_chain - 2; k-- > 0;) {
		struct rdp_pcie_link l;

		if (rdp_pcie_link_read(sys_fd, td->chain[k], &l) == 0 &&
		    rdp_pcie_link_degraded(&l)) {
			*ret = l;
			return (int)k;
		}
	}
	return -1;
}

static const char *const nic_symptom =
	"Bandwidth capped by the PCIe link, far below the port's line rate. NCCL does not see it "
	"(its topology uses max_link_speed/max_link_width) and logs nothing; only the bus "
	"bandwidth of all_reduce_perf shows it (the ethtool counters rx_pci_signal_integrity "
	"and outbound_pci_stalled_* may rise).";

static int check_one(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r, bool gpu,
		     const char *subject, const char *bdf, const struct rdp_topo_dev *td,
		     const char *vf_note, const char *port_rate)
{
	struct rdp_pcie_link l, up;
	char cur[48], max[48], fix[512], rate[96] = "";
	int k, e;

	e = rdp_pcie_link_read(c->sys_fd, bdf, &l);
	if (e < 0)
		return rdp_doctor_add(r, RDP_GROUP_PCIE, ID, RDP_CHECK_SKIP, subject, NULL, NULL,
				      "%s: no PCIe link attributes to read "
				      "(bus/pci/devices/%s/current_link_speed...: %s)%s",
				      bdf, bdf, strerror(-e), vf_note);
	rdp_pcie_link_str(l.cur_speed, l.cur_width, cur, sizeof(cur));
	rdp_pcie_link_str(l.max_speed, l.max_width, max, sizeof(max));
	if (!l.cur_speed && !l.cur_width)
		return rdp_doctor_add(
			r, RDP_GROUP_PCIE, ID, RDP_CHECK_SKIP, subject, NULL, NULL,
			"%s: link status not reported (current %s, max %s): an SR-IOV "
			"VF shows none, its PF's link is the one that counts and it "
			"is not visible here%s",
			bdf, cur, max, vf_note);
	if (port_rate && *port_rate)
		snprintf(rate, sizeof(rate), "; port rate %s", port_rate);
	if (rdp_pcie_link_degraded(&l)) {
		unsigned int have = rdp_pcie_gbps(l.cur_speed ? l.cur_speed : l.max_speed,
						  l.cur_width ? l.cur_width : l.max_width);
		unsigned int could = rdp_pcie_gbps(l.max_speed, l.max_width);

		if (gpu)
			return rdp_doctor_add(
				r, RDP_GROUP_PCIE, ID, RDP_CHECK_WARN, subject,
				"GPUs lower their PCIe link when idle to save power, so this may "
				"be "
				"nothing; if it stays low under load it caps GPUDirect RDMA and "
				"host<->GPU copies.",
				"Re-run rdma-dp doctor while the GPU is busy (or watch `nvidia-smi "
				"-q "
				"-d PCI`: Link Gen/Width Current against Max under load); if it "
				"stays "
				"low, reseat the GPU or its baseboard and check the BIOS PCIe "
				"speed.",
				"%s: PCIe link %s, capable of %s (about %u of %u Gb/s); an idle "
				"GPU "
				"trains down, a busy one should not",
				bdf, cur, max, have, could);
		snprintf(fix, sizeof(fix),
			 "Reseat the card or move it to a slot wired for %s, check the BIOS PCIe "
			 "link speed setting and the riser; `lspci -vv -s %s` shows LnkSta against "
			 "LnkCap.",
			 max, bdf);
		return rdp_doctor_add(r, RDP_GROUP_PCIE, ID, RDP_CHECK_FAIL, subject, nic_symptom,
				      fix,
				      "%s: PCIe link %s, capable of %s (about %u of %u Gb/s)%s%s",
				      bdf, cur, max, have, could, rate, vf_note);
	}
	k = degraded_above(c->sys_fd, td, &up);
	if (k >= 0) {
		char ucur[48], umax[48];

		rdp_pcie_link_str(up.cur_speed, up.cur_width, ucur, sizeof(ucur));
		rdp_pcie_link_str(up.max_speed, up.max_width, umax, sizeof(umax));
		snprintf(fix, sizeof(fix),
			 "Check the link at %s (`lspci -vv -s %s`: LnkSta against LnkCap): reseat "
			 "the switch/riser card or check the BIOS PCIe speed of that slot.",
			 td->chain[k], td->chain[k]);
		return rdp_doctor_add(
			r, RDP_GROUP_PCIE, ID, gpu ? RDP_CHECK_WARN : RDP_CHECK_FAIL, subject,
			gpu ? "A link above the GPU runs below its maximum: it caps GPUDirect RDMA "
			      "and "
			      "host<->GPU copies of every device below it."
			    : nic_symptom,
			fix,
			"%s: its own link %s as capable, but the link at %s above it runs %s of %s "
			"(about %u of %u Gb/s)%s%s",
			bdf, cur, td->chain[k], ucur, umax,
			rdp_pcie_gbps(up.cur_speed ? up.cur_speed : up.max_speed,
				      up.cur_width ? up.cur_width : up.max_width),
			rdp_pcie_gbps(up.max_speed, up.max_width), rate, vf_note);
	}
	return rdp_doctor_add(r, RDP_GROUP_PCIE, ID, RDP_CHECK_OK, subject, NULL, NULL,
			      "%s: PCIe link %s, its maximum%s%s", bdf, cur, rate, vf_note);
}

static bool is_nic_function(const struct rdp_host *h, const char *bdf)
{
	for (size_t i = 0; h && i < h->n_devices; i++)
		if (strcmp(h->devices[i].pci_address, bdf) == 0 && !h->devices[i].is_vf)
			return true;
	return false;
}

int rdp_doctor_pcie(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	const struct rdp_host *h = c->host;
	const struct rdp_topo *t = c->topo;
	_cleanup_free_ const char **seen = NULL;
	size_t n_seen = 0, n_results = 0;
	int e;

	if (h && h->n_devices) {
		seen = rdp_calloc(h->n_devices, sizeof(*seen));
		if (!seen)
			return -ENOMEM;
	}
	for (size_t i = 0; h && i < h->n_devices; i++) {
		const struct rdp_device *d = &h->devices[i];
		const char *fn = rdp_pci_function_of(d);
		char subject[RDP_IBDEV_NAME_MAX + 2 * RDP_PCI_ADDR_MAX + 16], note[128] = "";
		bool dup = false;

		if (!fn)
			continue; /* rxe, siw: no PCIe link */
		/* a VF whose PF is an RDMA device itself: the PF's result covers it */
		if (d->is_vf && d->pf_pci_address[0] && is_nic_function(h, d->pf_pci_address))
			continue;
		for (size_t k = 0; k < n_seen && !dup; k++)
			dup = strcmp(seen[k], fn) == 0;
		if (dup)
			continue;
		seen[n_seen++] = fn;
		if (d->is_vf && d->pf_pci_address[0]) {
			snprintf(subject, sizeof(subject), "%s (VF %s, PF %s)", d->name,
				 d->pci_address, fn);
			snprintf(note, sizeof(note),
				 " (the link of its PF: a VF has none of its own)");
		} else {
			snprintf(subject, sizeof(subject), "%s (%s)", d->name, fn);
		}
		e = check_one(c, r, false, subject, fn, topo_of_nic(t, i), note,
			      d->n_ports ? d->ports[0].rate : NULL);
		if (e < 0)
			return e;
		n_results++;
	}
	for (size_t k = 0; t && k < t->n_devs; k++) {
		const struct rdp_topo_dev *g = &t->devs[k];
		char subject[RDP_IBDEV_NAME_MAX + RDP_PCI_ADDR_MAX + 8];

		if (g->kind != RDP_TOPO_GPU || g->is_virtual)
			continue;
		snprintf(subject, sizeof(subject), "%s (%s)", g->name, g->pci_address);
		e = check_one(c, r, true, subject, g->pci_address, g, "", NULL);
		if (e < 0)
			return e;
		n_results++;
	}
	if (n_results == 0)
		return rdp_doctor_add(r, RDP_GROUP_PCIE, ID, RDP_CHECK_SKIP, "", NULL, NULL,
				      "no RDMA device with a PCI function and no GPU: no PCIe link "
				      "to check");
	return 0;
}
