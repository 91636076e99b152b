/* SPDX-License-Identifier: MIT */
/*
 * The device model: what discovery reads from sysfs and what selectors, pools, the CLI and the
 * daemon all work on. Plain data, no I/O. Strings are NUL-terminated and bounded; an empty
 * string means "unknown / not applicable" unless a field says otherwise.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define RDP_IBDEV_NAME_MAX 64 /* IB_DEVICE_NAME_MAX */
#define RDP_IFNAME_MAX 16     /* IFNAMSIZ */
#define RDP_PCI_ADDR_MAX 32   /* "0000:18:00.0"; room for long domains */
#define RDP_DEVPATH_MAX 64    /* "/dev/infiniband/uverbs123" */
#define RDP_MAX_PORTS 128     /* CX-8 multi-plane has 12 per ibdev; bounded all the same */
#define RDP_MAX_NETDEVS 64
#define RDP_MAX_DEVICES 8192  /* bound on /sys/class/infiniband entries read */
#define RDP_REASON_MAX 192    /* bytes of rdp_device.unusable_reason */

enum rdp_link_layer {
	RDP_LINK_UNKNOWN = 0,
	RDP_LINK_INFINIBAND,
	RDP_LINK_ETHER,
};

/* "infiniband", "ether" or "unknown": the canonical names used in JSON and messages. */
const char *rdp_link_layer_name(enum rdp_link_layer l);

enum rdp_netns_mode {
	RDP_NETNS_SHARED = 0, /* kernel default */
	RDP_NETNS_EXCLUSIVE,
};

const char *rdp_netns_mode_name(enum rdp_netns_mode m);

/* Port states, as the number before ": " in ports/N/state. */
enum {
	RDP_PORT_STATE_UNKNOWN = -1,
	RDP_PORT_DOWN = 1,
	RDP_PORT_INIT = 2,
	RDP_PORT_ARMED = 3,
	RDP_PORT_ACTIVE = 4,
	RDP_PORT_ACTIVE_DEFER = 5,
};

/*
 * Whether a pod given the device could use it: its uverbs node exists under the dev root with
 * the device number sysfs names for it, and the host's rdma_cm does too. The first reason
 * found; unusable_reason says all of them.
 */
enum rdp_usability {
	RDP_USABLE = 0,
	RDP_UNUSABLE_INCOMPLETE, /* discovery did not get to its char devices (see problems) */
	RDP_UNUSABLE_NO_UVERBS, /* sysfs names no uverbs device for it */
	RDP_UNUSABLE_UVERBS_NODE, /* its uverbs node is missing or is not what sysfs names */
	RDP_UNUSABLE_NO_RDMA_CM, /* the host's rdma_cm node is missing or not what sysfs names */
};

/* "usable", "incomplete", "no-uverbs", "uverbs-node", "no-rdma-cm". */
const char *rdp_usability_name(enum rdp_usability u);

struct rdp_port {
	unsigned int num;                  /* 1-based */
	int state;                         /* RDP_PORT_*, -1 unknown */
	char state_name[16];               /* "ACTIVE"; "" unknown */
	int phys_state;                    /* 5 = LinkUp, -1 unknown */
	char phys_state_name[32];          /* "LinkUp" */
	enum rdp_link_layer link_layer;
	char rate[64];                     /* "400 Gb/sec (4X NDR)" as sysfs says */
	int roce_v2_ipv4_gid_index;        /* -1: none */
};

struct rdp_device {
	char name[RDP_IBDEV_NAME_MAX];     /* mlx5_0 */
	char pci_address[RDP_PCI_ADDR_MAX];/* PCI function, "" for virtual (rxe, siw) */
	/*
	 * The canonical sysfs path of the PCI function, relative to the sysfs root
	 * ("devices/pci0000:15/0000:15:01.0/.../0000:18:00.0"): its place in the PCIe tree
	 * (topology.h). NULL for virtual devices.
	 */
	char *pci_path;
	char vendor[8];                    /* "15b3": 4 lower-case hex digits, no 0x */
	char device_id[8];                 /* "1021" */
	char pci_class[8];                 /* "020700": 6 lower-case hex digits, no 0x */
	char driver[64];                   /* driver of the PCI function: mlx5_core */
	/*
	 * The RDMA driver of a soft device, where sysfs tells it: "rdma_rxe" (an ibdev with
	 * rxe's own `parent` attribute and no `device` link: soft-RoCE) or "siw" (node type
	 * RNIC with siw's fixed node_desc "Software iWARP stack", or an RNIC with no PCI
	 * function). "" otherwise (hardware: the PCI function's driver says it). Not the ibdev
	 * name's prefix: `rdma dev set NAME name NEW` renames any device.
	 */
	char rdma_driver[16];
	char **netdevs;                    /* sorted, n_netdevs entries */
	size_t n_netdevs;
	int numa_node;                     /* -1 unknown */
	bool is_vf;
	int vf_index;                      /* index N of the PF's virtfnN link; -1 if not a VF */
	char pf_pci_address[RDP_PCI_ADDR_MAX]; /* VF: its PF; "" otherwise */
	char pf_netdev[RDP_IFNAME_MAX];    /* VF: first netdev of its PF; "" otherwise */
	/* An SF, with the sfnum of its auxiliary device (mlx5_core.sf.N/sfnum, devlink's) */
	bool is_sf;
	unsigned int sf_num;
	char node_guid[24];                /* "58a2:e103:001b:2576" */
	char fw_ver[64];
	char hca_type[64];                 /* "MT4129" */
	struct rdp_port *ports;            /* sorted by num */
	size_t n_ports;
	/*
	 * Absolute host paths ("/dev/infiniband/uverbs3"), sorted: uverbsN, then umadN and
	 * issmN of every port. Only nodes that exist under the dev root are listed.
	 */
	char **char_devices;
	size_t n_char_devices;
	/*
	 * Parallel to char_devices (NULL means all 0): the device number sysfs names for each
	 * (class/infiniband_{verbs,mad}/<name>/dev); 0 when sysfs names none.
	 */
	dev_t *char_devnums;
	enum rdp_usability usability;
	char unusable_reason[RDP_REASON_MAX]; /* "" when usable */
	/* Why this device is incomplete (missing files, unreadable values...), one per entry. */
	char **problems;
	size_t n_problems;
};

struct rdp_host {
	struct rdp_device *devices;        /* sorted by name */
	size_t n_devices;
	char rdma_cm[RDP_DEVPATH_MAX];     /* "/dev/infiniband/rdma_cm", "" when absent */
	dev_t rdma_cm_devnum;              /* class/misc/rdma_cm/dev; 0 when sysfs names none */
	enum rdp_netns_mode netns_mode;
	/* Host-level problems (e.g. "/dev/infiniband/rdma_cm missing"). */
	char **problems;
	size_t n_problems;
};

/* True for a port state that carries traffic: ACTIVE, and ACTIVE_DEFER (5). */
bool rdp_port_state_is_active(int state);
/* True when at least one port of the device is active (rdp_port_state_is_active()). */
bool rdp_device_is_active(const struct rdp_device *d);
/* True when a pod could use the device (usability RDP_USABLE). */
bool rdp_device_is_usable(const struct rdp_device *d);
/* The expected number of char device i of d (0: none named). */
dev_t rdp_device_char_devnum(const struct rdp_device *d, size_t i);

/*
 * The unit ID of d in an exclusive pool: what names it across reboots and re-enumeration.
 * Its PCI address ("0000:18:00.2"); for an SF, the PF's address and its sfnum
 * ("0000:03:00.0-sf2"); for a device without a PCI function (rxe, siw), its ibdev name.
 * Never the uverbs number, never the ibdev name where udev may rename it. Returns buf.
 */
#define RDP_UNIT_ID_MAX (RDP_PCI_ADDR_MAX + RDP_IBDEV_NAME_MAX + 8)
const char *rdp_device_unit_id(const struct rdp_device *d, char *buf, size_t size);

/* Looks a device up by ibdev name; NULL when absent. */
const struct rdp_device *rdp_host_find(const struct rdp_host *h, const char *name);

/* Free the contents of a device / a whole host model. Both accept NULL and return NULL. */
void rdp_device_done(struct rdp_device *d);
struct rdp_host *rdp_host_free(struct rdp_host *h);
