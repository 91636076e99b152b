/* SPDX-License-Identifier: MIT */
/*
 * The PCIe topology of the RDMA devices and GPUs of a node, read from a sysfs root, and the
 * distance of two of them in the levels `nvidia-smi topo -m` prints.
 *
 * Model: for every RDMA device of a host model (struct rdp_host, discovery.h) and every GPU
 * (a PCI function of bus/pci/devices with class 0x0300xx (VGA) or 0x0302xx (3D controller)
 * and vendor 10de (NVIDIA) or 1002 (AMD)), the chain of PCI functions from its root complex
 * down to the function itself, its NUMA node and its root complex in the format DRA uses for
 * `resource.kubernetes.io/pcieRoot`: `pci<domain>:<bus>` (e.g. "pci0000:00"), the first
 * component under /sys/devices of the resolved bus/pci/devices/<BDF> link (docs/dra.md §6,
 * KEP-4381 pci_linux.go). The chain is every component of that resolved path that is a PCI
 * address ("devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0" gives
 * root "pci0000:15" and the chain 15:01.0 (root port), 16:00.0 (switch upstream port),
 * 17:00.0 (downstream port), 18:00.0 (the device)). A device without a PCI function (rxe,
 * siw) or whose function cannot be resolved is in the model as `virtual`: no root, no chain,
 * level RDP_TOPO_NONE to everything.
 *
 * Levels: the meanings of the `nvidia-smi topo -m` legend (NVML nvmlGpuTopologyLevel_t),
 * quoted:
 *   X    = Self
 *   SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes
 *          (e.g., QPI/UPI)
 *   NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges
 *          within a NUMA node
 *   PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
 *   PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host
 *          Bridge)
 *   PIX  = Connection traversing at most a single PCIe bridge
 * and how they map onto the sysfs paths (common-ancestor analysis, rdp_topo_level()):
 *   - same PCI function: X when it is the same model entry, else PIX (two ibdevs of one
 *     function, an SF and its PF);
 *   - different roots `pciDDDD:BB` (different host bridges): NODE when both functions report
 *     the same NUMA node (also both -1: one node, as in a VM), SYS otherwise;
 *   - same root, no PCI function in common (e.g. behind two root ports of one host bridge):
 *     the path goes through the host bridge: PHB;
 *   - same root, deepest common function C (a root port or a switch port): the bridges
 *     traversed are C plus the functions strictly between C and each endpoint. When each
 *     side has at most one (the downstream port of C's switch, or none) the path stays
 *     inside one switch (or one root port): PIX. Otherwise it crosses more than one
 *     bridge/switch without going up to the host bridge: PXB.
 * On the DGX H100 layout (docs/hardware-topologies.md) this gives GPU i ↔ its compute NIC
 * = PXB (the NIC sits on the CX-7 switch, the GPU behind a second switch on the GPU
 * baseboard, as the real `nvidia-smi topo -m` shows), the two PFs of a storage NIC = PIX,
 * other devices of the same socket = NODE, the other socket = SYS.
 *
 * Library code: returns negative errno, never logs. Reads are bounded (RDP_TOPO_MAX_PCI
 * functions listed, RDP_TOPO_MAX_DEPTH hops per chain).
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "device.h"

#define RDP_TOPO_MAX_PCI 8192 /* entries of bus/pci/devices we look at */
#define RDP_TOPO_MAX_DEPTH 32 /* PCI functions from a root down to one device */
#define RDP_TOPO_ROOT_MAX 24 /* "pci0000:00", domain up to 8 hex digits */

enum rdp_topo_level {
	RDP_TOPO_X, /* the device itself */
	RDP_TOPO_PIX,
	RDP_TOPO_PXB,
	RDP_TOPO_PHB,
	RDP_TOPO_NODE,
	RDP_TOPO_SYS,
	RDP_TOPO_NONE, /* one of the two has no PCI function (rxe, siw): no PCIe path */
	_RDP_TOPO_LEVEL_MAX,
};

enum rdp_topo_kind {
	RDP_TOPO_GPU,
	RDP_TOPO_NIC, /* an RDMA device of the host model */
};

struct rdp_topo_dev {
	enum rdp_topo_kind kind;
	char name[RDP_IBDEV_NAME_MAX]; /* "GPU0" (in PCI address order), or the ibdev name */
	size_t host_index; /* NIC: index into the rdp_host's devices; GPU: unused */
	bool is_virtual; /* no PCI function: no root, no chain */
	char pci_address[RDP_PCI_ADDR_MAX]; /* "" when virtual */
	char vendor[8], device_id[8]; /* "10de", "2330"; "" when unknown */
	char pcie_root[RDP_TOPO_ROOT_MAX]; /* "pci0000:15"; "" when virtual */
	char **chain; /* PCI addresses from the root port down to pci_address itself */
	size_t n_chain;
	int numa_node; /* -1 unknown */
};

struct rdp_topo {
	struct rdp_topo_dev *devs; /* the GPUs (by PCI address), then the NICs (host order) */
	size_t n_devs;
	size_t n_gpus;
};

/*
 * Reads the model of h's RDMA devices and the node's GPUs below the sysfs root sysfs_fd
 * (rdp_sysfs_open_root()). A missing bus/pci/devices means no GPUs; a function that cannot
 * be resolved or read is left out (GPU) or made virtual (NIC). Returns 0, -ENOMEM, -E2BIG
 * (more than RDP_TOPO_MAX_PCI functions).
 */
int rdp_topo_read_at(int sysfs_fd, const struct rdp_host *h, struct rdp_topo **ret);
struct rdp_topo *rdp_topo_free(struct rdp_topo *t);

/*
 * Splits the canonical sysfs path of a PCI function ("devices/pci0000:15/0000:15:01.0/...")
 * into its root ("pci0000:15") and chain of PCI addresses. Returns -EINVAL when the path is
 * not below devices/pci<domain>:<bus>/ or has no PCI address, -E2BIG beyond
 * RDP_TOPO_MAX_DEPTH hops, -ENOMEM. Pure.
 */
int rdp_topo_parse_path(const char *path, char root[static RDP_TOPO_ROOT_MAX], char ***ret_chain,
			size_t *ret_n);

/*
 * The place of one RDMA device of a host model in the tree, from its pci_path (device.h):
 * what rdp_topo_read_at() gives it, without reading sysfs. Virtual when it has none or the
 * path does not parse. Returns 0 or -ENOMEM; ret is filled in full (done with
 * rdp_topo_dev_done()).
 */
int rdp_topo_dev_of_device(const struct rdp_device *d, struct rdp_topo_dev *ret);
/* A deep copy of src into ret. Returns 0 or -ENOMEM (ret left empty). */
int rdp_topo_dev_copy(const struct rdp_topo_dev *src, struct rdp_topo_dev *ret);
/* Frees the chain of d and empties it. Accepts NULL. */
void rdp_topo_dev_done(struct rdp_topo_dev *d);

/* The level between a and b (see the top of this file). Pure, symmetric. */
enum rdp_topo_level rdp_topo_level(const struct rdp_topo_dev *a, const struct rdp_topo_dev *b);

/*
 * The rule of rdp_topo_level() from what it compares, for callers that compare chains their
 * own way (prefer.c, on interned chains): same_entry, the same model entry; no_path, either
 * has no PCIe path (virtual, empty chain); same_root and same_numa of the two; common, the
 * length of the chains' common prefix (only read with same_root), len_a and len_b theirs.
 */
static inline enum rdp_topo_level rdp_topo_level_rule(bool same_entry, bool no_path,
						      bool same_root, bool same_numa,
						      size_t common, size_t len_a, size_t len_b)
{
	if (same_entry)
		return RDP_TOPO_X;
	if (no_path)
		return RDP_TOPO_NONE;
	if (!same_root)
		return same_numa ? RDP_TOPO_NODE : RDP_TOPO_SYS;
	if (common == 0)
		return RDP_TOPO_PHB;
	if (common == len_a || common == len_b)
		return RDP_TOPO_PIX; /* the same function, or one below the other */
	/* Below the deepest common function: at most one bridge on each side stays in one
	 * switch (its downstream port); more crosses bridges without the host bridge. */
	return len_a - common - 1 <= 1 && len_b - common - 1 <= 1 ? RDP_TOPO_PIX : RDP_TOPO_PXB;
}

/* "X", "PIX", "PXB", "PHB", "NODE", "SYS", "-" (RDP_TOPO_NONE). */
const char *rdp_topo_level_name(enum rdp_topo_level l);
/* The legend line for a level (nvidia-smi's wording), NULL for none. */
const char *rdp_topo_level_meaning(enum rdp_topo_level l);

/*
 * The GPUs closest to t->devs[i] (a NIC): the best level over all GPUs (RDP_TOPO_NONE when
 * there are no GPUs or the NIC is virtual) into *ret_level, and a bit per GPU index (0 ..
 * n_gpus-1) at that level into ret_gpus (n_gpus bools). Pure.
 */
void rdp_topo_closest_gpus(const struct rdp_topo *t, size_t i, enum rdp_topo_level *ret_level,
			   bool *ret_gpus);
