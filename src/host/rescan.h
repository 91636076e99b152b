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
 *   - per port: state; phys_state and rate (unless RDP_DISCOVER_NO_LINK_DETAILS); for an
 *     Ethernet port its GID table (see "GID tables" below), which yields netdevs and the
 *     RoCE v2 IPv4 GID index;
 *   - per device: fw_ver (mlx5 live firmware activation; unless RDP_DISCOVER_NO_FW_VER),
 *     numa_node of the PCI function (root may rewrite it: pci-sysfs numa_node_store), the
 *     netdevs of its net/ directory (renames, moves to another netns) and rxe's `parent`;
 *   - per PF of a VF: its first netdev;
 *   - the char devices and rdma_cm, by one listing of <dev root>/infiniband and, for each
 *     char device, a stat comparing its number with the one sysfs named (devnode.h);
 *   - ib_core's netns_mode.
 * What is not re-read is fixed for the life of a registration: PCI IDs, class and driver of
 * the function, SR-IOV links, node GUID, HCA type, the ports, their link layer, the size of
 * a GID table, which attribute files exist.
 *
 * Every read resolves its path from the sysfs root; a scanner keeps no fd but the two roots.
 * (Reading through one O_PATH fd of the PCI function per device and scan, with short paths,
 * and holding such fds across scans were both measured on the scale-1000 fixture node: no
 * gain above the noise, so neither is done. A held fd would also need a check that its path
 * still leads to it, in a tree where directories may be renamed.)
 *
 * GID tables. A RoCE port's table has gid_tbl_len slots (255 on mlx5, 1024 on rxe), nearly
 * all empty, and an empty slot can only be told from a valid one by reading it (the read
 * fails, EINVAL); reading whole tables made a no-change rescan of 1000 devices cost ~0.5 s
 * of CPU. The table feeds two things: the port's RoCE v2 IPv4 GID index (shown by `discover`,
 * served by nothing in the daemon: no selector, no Allocate answer uses it) and netdevs, from
 * gid_attrs/ndevs (a RoCE LAG's bond0, a VLAN with an address), which ifNames selectors
 * match. So a scanner made with RDP_DISCOVER_NO_GID_INDEX (the daemon's) leaves the index out
 * of its models (-1) and reads only ndevs/<i> in a full discovery. In a cheap scan, a slot
 * that filled since can name only the port's netdev or a device stacked on it (the kernel's
 * rule), so the scan checks that every upper_<dev> link of every netdev of the model names a
 * netdev of the model; then no slot can name a netdev the model lacks, and:
 *   - when the netdevs of net/ and `parent` are already all of the model's (the slots name
 *     the port's own netdev, the common case: PFs, VFs, SFs, rxe), no slot is read at all;
 *   - otherwise (bond0 of a RoCE LAG, a VLAN with an address) only the slots that named a
 *     netdev at the last full discovery are read again, to see that they still do.
 * Where another upper device exists (a VLAN without an address yet), that device's tables are
 * read whole, slot by slot, as a full discovery would.
 * With RDP_DISCOVER_NO_GID_TABLE (a config without ifNames selectors) neither the tables nor
 * the upper links are read.
 * Its models are exactly those of rdp_discover_flags_at() with the same flags. A scanner
 * without the flag reads whole tables, as `discover` does, and stays exact for the index.
 *
 * The daemon's flags are RDP_DISCOVER_SERVE (discovery.h): besides the GID index, fw_ver,
 * phys_state and rate, which nothing it serves uses, are left out of its models and never
 * read. On the scale-1000 fixture node a no-change rescan then makes 18 system calls per
 * device (35 before; 14 with RDP_DISCOVER_NO_GID_TABLE), see tests/tools/rescan-time.c:
 * port state and numa_node (open, read, close each), net/ and the netdev's own directory
 * listed (open, getdents until empty, close each), a stat of each of its 3 char devices and a
 * readlink of its class/infiniband link. On a 2-vCPU VM each costs 1-2.5 us of CPU, except
 * listing a netdev's directory (for upper_ links): 6-7 us, on ext4 and on sysfs alike.
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
/*
 * The same, with discovery flags (discovery.h, enum rdp_discover_flags) used by every
 * discovery of this scanner; its models are what rdp_discover_flags_at() returns with them.
 * The daemon passes RDP_DISCOVER_SERVE (it serves no GID index, fw_ver, phys_state or
 * rate); see above.
 */
int rdp_scanner_new_flags(const char *sysfs_root, const char *dev_root, unsigned int flags,
			  struct rdp_scanner **ret);
/* Accepts NULL, returns NULL. */
struct rdp_scanner *rdp_scanner_free(struct rdp_scanner *s);

/*
 * Changes the discovery flags (e.g. RDP_DISCOVER_NO_GID_TABLE when a config without ifNames
 * selectors is loaded, see discovery.h). The next scan is a full discovery with them; it
 * returns 1 when its model differs from the one made with the old flags.
 */
void rdp_scanner_set_flags(struct rdp_scanner *s, unsigned int flags);

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
