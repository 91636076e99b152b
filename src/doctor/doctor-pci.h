/* SPDX-License-Identifier: MIT */
/*
 * What the doctor's pcie, placement and gpudirect groups (doctor-pcie.c, doctor-placement.c,
 * doctor-gpudirect.c) share: the PCIe link of a PCI function as sysfs shows it, and which
 * PCI function stands for an RDMA device.
 *
 * Link attributes (drivers/pci/pci-sysfs.c, pcie_dev_attrs, present on PCIe functions only):
 * bus/pci/devices/<bdf>/{current,max}_link_speed ("16.0 GT/s PCIe"; kernels before 4.20
 * "8 GT/s"; "Unknown" when the register gives no speed) and {current,max}_link_width (an
 * integer, 0 when unknown). current_* is the Link Status register, max_* the Link
 * Capabilities. Both ends of a link report it: a switch downstream port and the device below
 * it show the same current values.
 *
 * SR-IOV VFs: a VF's Link Status is reserved (reads 0), so its current_link_speed is
 * "Unknown" and current_link_width 0, while max_* mirror the PF's capability (lspci on mlx5
 * VFs: "LnkSta: Speed unknown (downgraded), Width x0 (downgraded)"). A VF shares its PF's
 * link, so the doctor judges the PF's; a VF whose PF is not visible (a VM) has nothing to
 * judge: skip.
 *
 * Library code: returns negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "device.h"

/* One function's link: speeds in tenths of GT/s (160 = 16.0 GT/s), 0 = unknown. */
struct rdp_pcie_link {
	unsigned int cur_speed, max_speed;
	unsigned int cur_width, max_width; /* lanes; 0 = unknown */
};

/*
 * A link speed as sysfs prints it: "<n>[.<d>] GT/s" optionally followed by " PCIe" ->
 * tenths of GT/s; "Unknown" -> 0. -EINVAL for anything else (PCI-X "133 MHz PCI-X" too).
 * Pure.
 */
int rdp_pcie_parse_speed(const char *s, unsigned int *ret);

/*
 * Reads the four link attributes of bus/pci/devices/<bdf> below sys_fd. Returns 0, or the
 * error of the first attribute that cannot be read (-ENOENT: not a PCIe function) or
 * parsed (-EINVAL).
 */
int rdp_pcie_link_read(int sys_fd, const char *bdf, struct rdp_pcie_link *ret);

/* current below max in speed or width, where both are known. Pure. */
bool rdp_pcie_link_degraded(const struct rdp_pcie_link *l);

/* Usable bandwidth of speed (tenths of GT/s) x width in Gb/s after line encoding (8b/10b up
 * to 5 GT/s, 128b/130b from 8 GT/s, FLIT ~242/256 at 64 GT/s). Pure. */
unsigned int rdp_pcie_gbps(unsigned int speed, unsigned int width);

/* "16.0 GT/s x16" (unknown parts "?") into buf. Returns buf. */
const char *rdp_pcie_link_str(unsigned int speed, unsigned int width, char *buf, size_t size);

/*
 * The PCI function that carries d's PCIe traffic: its PF for a VF (pf_pci_address), else
 * its own (an SF's is its PF's already). NULL for a device without one (rxe, siw).
 */
const char *rdp_pci_function_of(const struct rdp_device *d);

/* The IOMMU group of a PCI function: the name its bus/pci/devices/<bdf>/iommu_group link
 * points at ("12") into buf. -ENOENT when it has none, -EINVAL for a bad link. */
int rdp_pci_iommu_group(int sys_fd, const char *bdf, char *buf, size_t size);
