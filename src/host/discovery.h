/* SPDX-License-Identifier: MIT */
/*
 * Discovery: reads the RDMA devices of a host into the device model, from a sysfs root and a
 * dev root only (no netlink, nothing read outside the two roots). A device whose sysfs is
 * partial is still reported, with problems saying what is missing; it never hides others.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "device.h"

#define RDP_DEFAULT_SYSFS_ROOT "/sys"
#define RDP_DEFAULT_DEV_ROOT "/dev"

/*
 * Returns 0 and a host model (possibly with no devices, e.g. no /sys/class/infiniband), or a
 * negative errno when the roots themselves cannot be opened (-ENOENT, -ENOTDIR, -EACCES) or
 * memory runs out.
 */
int rdp_discover(const char *sysfs_root, const char *dev_root, struct rdp_host **ret);

/*
 * The same on roots the caller opened (rdp_sysfs_open_root()), e.g. to name the root that
 * failed, or to keep them open across rescans. The fds stay owned by the caller.
 */
int rdp_discover_at(int sysfs_fd, int dev_fd, struct rdp_host **ret);

/*
 * Where a discovery found each device's parts, so that a rescan (rescan.h) can go straight to
 * the attributes that change while a device stays registered. Paths are canonical, relative
 * to the sysfs root; NULL where discovery did not get that far (the device then has problems).
 * Arrays run parallel to host->devices and device->ports.
 */
struct rdp_discovery_port {
	bool gids_listed; /* gid_attrs/types (ndevs with RDP_DISCOVER_NO_GID_INDEX) was listed */
	unsigned int *gid_slots; /* its numbered entries, ascending */
	size_t n_gid_slots;
	/* RDP_DISCOVER_NO_GID_INDEX: the slots whose gid_attrs/ndevs read gave a value */
	unsigned int *valid_slots;
	size_t n_valid_slots;
};

struct rdp_discovery_device {
	char *ibdir; /* devices/.../infiniband/mlx5_0 */
	char *pci; /* the PCI function; "" for none */
	char *netdir; /* the directory whose net/ holds its netdevs; "" for none */
	long pf; /* VF: index into rdp_discovery_record.pf_dirs; -1 otherwise */
	bool has_parent; /* <ibdir>/parent exists (rxe names its netdev there) */
	struct rdp_discovery_port *ports;
	size_t n_ports;
};

struct rdp_discovery_record {
	struct rdp_discovery_device *devices;
	size_t n_devices;
	char **pf_dirs; /* canonical PF directories of the VFs found */
	size_t n_pf_dirs;
};

/*
 * rdp_discover_at() that also returns the record of where things were found. Returns as
 * rdp_discover_at(); *ret_rec is set only on success.
 */
int rdp_discover_record_at(int sysfs_fd, int dev_fd, struct rdp_host **ret,
			   struct rdp_discovery_record **ret_rec);
/*
 * What a discovery may leave out, for a caller that does not serve it (see rescan.h):
 *   RDP_DISCOVER_NO_GID_INDEX: no RoCE v2 IPv4 GID index (ports say -1); the GID tables are
 *     read for their netdevs only (gid_attrs/ndevs/<i>, one read per slot, none of types/
 *     or gids/). The netdevs are those of a discovery without the flag on a kernel, where an
 *     empty slot fails to read in types/ and ndevs/ alike.
 *   RDP_DISCOVER_NO_FW_VER, RDP_DISCOVER_NO_LINK_DETAILS: below. A value left out is never
 *     read, so it makes no problem either (an unreadable rate is one without the flag).
 */
enum rdp_discover_flags {
	RDP_DISCOVER_NO_GID_INDEX = 1u << 0,
	/* No fw_ver (left ""): not read. */
	RDP_DISCOVER_NO_FW_VER = 1u << 1,
	/* No phys_state (-1, "") and no rate ("") of the ports: not read. */
	RDP_DISCOVER_NO_LINK_DETAILS = 1u << 2,
	/*
	 * What the daemon serves: selectors (PCI IDs, driver, netdevs, link layer, PF, NUMA node),
	 * health (port state), TopologyInfo (NUMA node) and Allocate (char devices) use none of
	 * the fields the three flags leave out; only `discover` and `check-config` show them.
	 */
	RDP_DISCOVER_SERVE =
		RDP_DISCOVER_NO_GID_INDEX | RDP_DISCOVER_NO_FW_VER | RDP_DISCOVER_NO_LINK_DETAILS,
	/*
	 * No GID table read at all: no GID index (as RDP_DISCOVER_NO_GID_INDEX) and no netdevs
	 * from gid_attrs/ndevs, only those of net/ and rxe's `parent`. In the daemon the
	 * netdevs serve ifNames selectors only: for a config where no selector has ifNames.
	 */
	RDP_DISCOVER_NO_GID_TABLE = 1u << 3,
};

/* rdp_discover_record_at() with flags (enum rdp_discover_flags); ret_rec may be NULL. */
int rdp_discover_flags_at(int sysfs_fd, int dev_fd, unsigned int flags, struct rdp_host **ret,
			  struct rdp_discovery_record **ret_rec);

/* Accepts NULL, returns NULL. */
struct rdp_discovery_record *rdp_discovery_record_free(struct rdp_discovery_record *rec);
