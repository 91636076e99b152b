/* SPDX-License-Identifier: MIT */
/*
 * Rescans: keeps a host model up to date at a fraction of the cost of a full discovery.
 *
 * A scanner holds the two roots open, the last host model and a record of where discovery
 * found each device (discovery.h). A scan first checks what only changes when a device is
 * (re-)registered or a char-device module comes or goes: the entries of class/infiniband
 * (names, inode numbers and link targets) and of class/infiniband_{verbs,mad} (names, inode
 * numbers). When those are as recorded, it re-reads only the attributes the kernel may change
 * while a device stays registered, and compares each with the model:
 *   - per port: state, phys_state, rate; for an Ethernet port its GID table (the slots
 *     recorded), which yields netdevs and the RoCE v2 IPv4 GID index;
 *   - per device: fw_ver (mlx5 live firmware activation), numa_node of the PCI function, the
 *     netdevs of its net/ directory (renames, moves to another netns) and rxe's `parent`;
 *   - per PF of a VF: its first netdev;
 *   - the char devices and rdma_cm, by one listing of <dev root>/infiniband and, for each
 *     char device, a stat comparing its number with the one sysfs named (devnode.h);
 *   - ib_core's netns_mode.
 * What is not re-read is fixed for the life of a registration: PCI IDs, class and driver of
 * the function, SR-IOV links, node GUID, HCA type, the ports, their link layer, the size of
 * a GID table, which attribute files exist.
 *
 * Anything that differs, any read that fails, or a previous model with problems, makes the
 * scan a full discovery; its result is compared with the previous model field by field. So
 * a scan's model is always what rdp_discover_at() would return at that moment, and a scan
 * that finds nothing changed allocates nothing.
 */
#pragma once
#include <stdbool.h>

#include "device.h"

struct rdp_scanner;

/*
 * Opens both roots (kept open until rdp_scanner_free()). No scan yet. Returns 0, -ENOMEM, or
 * the errno of the root that failed (see rdp_sysfs_open_root()).
 */
int rdp_scanner_new(const char *sysfs_root, const char *dev_root, struct rdp_scanner **ret);
/* Accepts NULL, returns NULL. */
struct rdp_scanner *rdp_scanner_free(struct rdp_scanner *s);

enum rdp_scan_mode {
	RDP_SCAN_AUTO, /* cheap checks first, a full discovery only when something differs */
	RDP_SCAN_FULL, /* a full discovery in any case (e.g. on SIGHUP) */
};

/*
 * Scans. Returns 1 when the model changed (always on the first scan), 0 when it is exactly as
 * before, or a negative errno (-ENOMEM) with the previous model kept.
 */
int rdp_scanner_scan(struct rdp_scanner *s, enum rdp_scan_mode mode);

/* The current model, NULL before the first scan succeeded. Valid until the next scan. */
const struct rdp_host *rdp_scanner_host(const struct rdp_scanner *s);

struct rdp_scanner_stats {
	unsigned long scans; /* successful scans */
	unsigned long full; /* of which full discoveries */
	unsigned long changed; /* of which returned 1 */
	bool last_full; /* the last successful scan was a full discovery */
};
const struct rdp_scanner_stats *rdp_scanner_stats(const struct rdp_scanner *s);

/* True when both models are equal in every field (devices, ports, strings, problems). */
bool rdp_host_equal(const struct rdp_host *a, const struct rdp_host *b);
