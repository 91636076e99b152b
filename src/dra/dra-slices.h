/* SPDX-License-Identifier: MIT */
/*
 * The DRA driver's view of the node's devices (`rdma-dp dra`): the inventory (which devices
 * are offered, under which DNS-label names), the ResourceSlice objects that publish them
 * (resource.k8s.io/v1, jansson), a validator with the API server's rules for a slice, and the
 * comparison of the desired slices with those the API server holds.
 *
 * Names (rdp_dra_device_name()), stable across reboots and re-enumeration, never the uverbs
 * number: from the unit ID (device.h) "0000:18:00.0" -> "pci-0000-18-00-0", an SF
 * "0000:03:00.0-sf2" -> "pci-0000-03-00-0-sf2", no PCI function (rxe, siw): "ib-" + the ibdev
 * name lower-cased with every character not [a-z0-9] turned into '-' ("rxe0" -> "ib-rxe0").
 * A name longer than 63 or ending in '-' is cut and ends in "-" + 8 hex digits of a hash
 * (FNV-1a 32) of the unit ID.
 *
 * Only usable devices (rdp_device_is_usable()) are offered. Two usable devices with one name
 * (two ibdevs of one PCI function, "ib-a_b" and "ib-a.b") cannot both be: the first by ibdev
 * name is, the others are in the inventory's `dropped` list for the daemon to log.
 *
 * Attributes of a device (unprefixed: the driver's domain; each left out when unknown or when
 * a string is longer than 64):
 *   rdma bool true; ibdev string; pciAddress string; numaNode int (not when -1);
 *   linkLayer string "InfiniBand"|"Ethernet" and rateGbps int (the first active port, else
 *   the first port; rate "400 Gb/sec (4X NDR)" -> 400, fractions cut: "2.5 Gb/sec" -> 2);
 *   vendor string "15b3"; deviceId string "1021"; netdev string (the first);
 *   isVf bool; pfPciAddress string (VFs only); isSf bool; nodeGuid string; fwVersion string;
 *   resource.kubernetes.io/pcieRoot string "pci0000:15" (topology.h);
 *   resource.kubernetes.io/pciBusID string "0000:18:00.0": the device's own PCI function
 *   (KEP-4381: the device's address), so not for an SF, which has none of its own (its
 *   pciAddress and pcieRoot are its PF's).
 * No capacity here: dra-share.h adds it for --sharing=capacity.
 *
 * Taints (DRADeviceTaints: alpha 1.33-1.35, beta and on 1.36, GA 1.37): a device whose
 * health (dra-health.h, from its ports) is UNHEALTHY -- no port ACTIVE and at least one
 * port's state known (DOWN, INIT, ARMED...) -- carries {"key": "<driver>/port-down",
 * "effect": rdp_dra_node.port_down_taint} (NoSchedule by default). A device whose port state
 * cannot be read (UNKNOWN) is not down: it is not tainted. No timeAdded: the API server
 * defaults it (SetDefaults_DeviceTaint, on create and on update); an update keeps the time
 * the API server holds (rdp_dra_slice_for_update()). A slice with a tainted device holds at
 * most RDP_DRA_SLICE_MAX_DEVICES_TAINTED devices (the API's limit), so a pool of more than 64
 * devices is split at 64 while one of them is tainted, at 128 otherwise.
 *
 * Library code: negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "device.h"

#define RDP_DRA_DEFAULT_DRIVER "rdma.rdma-dp.io"
#define RDP_DRA_NAME_MAX 64 /* a DNS label (63) + NUL */
#define RDP_DRA_DRIVER_MAX 63 /* spec.driver: a DNS subdomain of at most 63 */
#define RDP_DRA_NODE_NAME_MAX 253 /* a node name, and pool.name */
#define RDP_DRA_SLICE_MAX_DEVICES 128 /* devices of one slice (API) */
#define RDP_DRA_SLICE_MAX_DEVICES_TAINTED 64 /* ... when one of them has a taint (API) */
#define RDP_DRA_MAX_TAINTS 16 /* taints of one device (API) */
#define RDP_DRA_PORT_DOWN_TAINT "port-down" /* the taint key: "<driver>/port-down" */
#define RDP_DRA_MAX_ATTRIBUTES 32 /* attributes + capacity of one device (API) */
#define RDP_DRA_ATTR_STRING_MAX 64 /* string and version attribute values (API) */
#define RDP_DRA_MAX_SLICES 128 /* slices of our pool we look at (RDP_MAX_DEVICES / 64) */
#define RDP_DRA_API_VERSION "resource.k8s.io/v1"
#define RDP_DRA_GENERATE_NAME_MAX 58 /* the API server keeps this much of a generateName */

/* True for a DNS label: [a-z0-9-], at most 63, a letter or digit first and last. */
bool rdp_dra_dns_label(const char *s);
/* True for a DNS subdomain of at most max characters (labels joined by '.'). */
bool rdp_dra_dns_subdomain(const char *s, size_t max);

/*
 * The DRA device name of d (see the top of this file) into buf. Returns its length, or
 * -ENOBUFS when buf is smaller than RDP_DRA_NAME_MAX (always enough).
 */
int rdp_dra_device_name(const struct rdp_device *d, char *buf, size_t len);

/* One offered device. */
struct rdp_dra_dev {
	char name[RDP_DRA_NAME_MAX]; /* rdp_dra_device_name() */
	size_t host_index; /* index into the host's devices */
};

/* The devices the driver offers on a host model; borrows the host (rebuild with it). */
struct rdp_dra_inventory {
	const struct rdp_host *host;
	struct rdp_dra_dev *devs; /* sorted by name */
	size_t n_devs;
	char **dropped; /* ibdev names not offered: another device has the same DRA name */
	size_t n_dropped;
};

/* Builds inv from h. Returns 0 or -ENOMEM (inv left empty). inv: zeroed or done. */
int rdp_dra_inventory_build(const struct rdp_host *h, struct rdp_dra_inventory *inv);
void rdp_dra_inventory_done(struct rdp_dra_inventory *inv);
/* The offered device of that name, NULL when there is none. */
const struct rdp_dra_dev *rdp_dra_inventory_find(const struct rdp_dra_inventory *inv,
						 const char *name);
/* Its host model entry. */
static inline const struct rdp_device *rdp_dra_dev_device(const struct rdp_dra_inventory *inv,
							   const struct rdp_dra_dev *d)
{
	return &inv->host->devices[d->host_index];
}

/*
 * The device object of a slice for one offered device: {"name", "attributes"} as above.
 * NULL on allocation failure.
 */
json_t *rdp_dra_device_json(const struct rdp_dra_inventory *inv, const struct rdp_dra_dev *d,
			    const char *driver);

/* The effect of the port-down taint (--port-down-taint-effect). */
enum rdp_dra_taint_effect {
	RDP_DRA_TAINT_NO_SCHEDULE = 0, /* the default: no new allocation of the device */
	RDP_DRA_TAINT_NO_EXECUTE, /* ... and pods using it evicted */
	RDP_DRA_TAINT_NONE, /* the API's "None": informational (an API server of 1.36+) */
	RDP_DRA_TAINT_OFF, /* no taint */
};

/* "NoSchedule", "NoExecute", "None", "off". */
const char *rdp_dra_taint_effect_name(enum rdp_dra_taint_effect e);
/* The reverse, exact words. 0, or -EINVAL. */
int rdp_dra_taint_effect_parse(const char *s, enum rdp_dra_taint_effect *ret);

/*
 * The taints of one device (see the top) into the device object dev: "taints" set, or left
 * out when there are none. Returns 1 when tainted, 0 when not, -ENOMEM.
 */
int rdp_dra_device_set_taints(json_t *dev, const struct rdp_device *d, const char *driver,
			      enum rdp_dra_taint_effect effect);

/* Who publishes: the driver and the node (the Node object's name and metadata.uid). */
struct rdp_dra_node {
	const char *driver; /* RDP_DRA_DEFAULT_DRIVER unless --driver-name */
	const char *node_name; /* also the pool name */
	const char *node_uid; /* the Node's metadata.uid, for ownerReferences */
	enum rdp_dra_taint_effect port_down_taint; /* zero: NoSchedule */
};

/*
 * The node's ResourceSlices for inv, as a JSON array of slice objects ready to POST:
 * generateName rdp_dra_slice_generate_name() (by the slice's index), ownerReferences [{apiVersion v1, kind Node, name, uid,
 * controller true}], spec {driver, nodeName, pool {name: node, generation, resourceSliceCount},
 * devices}, each device with its taints (n->port_down_taint). ceil(n / 128) slices (64 while
 * a device is tainted), the devices (in name order) split evenly, the first ones one longer;
 * one slice with "devices": [] when there are none.
 * Returns 0, -EINVAL (a driver or node name the API would refuse, no node UID, generation
 * < 0), -ENOMEM.
 */
int rdp_dra_slices_build(const struct rdp_dra_node *n, const struct rdp_dra_inventory *inv,
			 long long generation, json_t **ret);
/*
 * The generateName of the index-th slice of the pool: "<node>-<driver>-NNN-" (NNN the index,
 * three digits), "<node>-<driver>" cut (and any '-' or '.' it then ends in dropped) so that
 * the whole fits in RDP_DRA_GENERATE_NAME_MAX, which the API server keeps before adding 5
 * random characters. The 1.36+ allocator sorts a pool's slices by name and takes the first
 * device that fits: the index keeps that order the order of the devices (by name), which is
 * the driver's preference. Returns the length, -EINVAL (an index over 999, names too long),
 * -ENOBUFS.
 */
int rdp_dra_slice_generate_name(const char *node_name, const char *driver, size_t index,
				char *buf, size_t len);
/* Sets spec.pool.generation of every slice of the array. 0, or -EINVAL (not slices). */
int rdp_dra_slices_set_generation(json_t *slices, long long generation);

/*
 * Checks one slice object against the API server's validation (resource.k8s.io/v1,
 * 1.34/1.35) as far as this driver's slices go: apiVersion/kind; metadata.name or
 * generateName; spec.driver a DNS subdomain <= 63; exactly one of nodeName, nodeSelector,
 * allNodes, perDeviceNodeSelection; pool {name <= 253 of DNS subdomains joined by '/',
 * generation >= 0, resourceSliceCount > 0}; devices <= 128, each with a unique DNS-label name,
 * attribute and capacity names a C identifier <= 32 with an optional DNS-subdomain prefix
 * <= 63 (unique once qualified with the driver), every attribute exactly one of int, bool,
 * string (<= 64), version (semver, <= 64), capacity {"value": quantity}, attributes +
 * capacity <= 32; taints <= 16, each with a label key, an optional label value, effect
 * NoSchedule, NoExecute or None, an optional timeAdded string; <= 64 devices when one has a
 * taint. Returns 0, or -EINVAL with the first broken rule in err
 * ("spec.devices[3].name: \"mlx5_0\" is not a DNS label").
 */
int rdp_dra_slice_check(json_t *slice, char *err, size_t len);

/* What the daemon does with the slices it found (rdp_dra_slices_compare()). */
enum rdp_dra_sync_action {
	RDP_DRA_SYNC_UNCHANGED, /* they are the desired ones: nothing */
	RDP_DRA_SYNC_UPDATE, /* one found, one desired: PUT the desired one over it, same gen. */
	RDP_DRA_SYNC_RECREATE, /* delete all found, create the desired ones with generation */
};

struct rdp_dra_sync {
	enum rdp_dra_sync_action action;
	long long generation; /* the generation the desired slices get */
	size_t update_index; /* UPDATE: the index of the found slice to replace */
};

const char *rdp_dra_sync_action_name(enum rdp_dra_sync_action a); /* "unchanged", ... */

/*
 * Decides from found (the JSON array "items" of a list of the slices with our spec.driver and
 * spec.nodeName; NULL or [] for none) and desired (rdp_dra_slices_build(), any generation):
 *  - none found: RECREATE with generation 1;
 *  - as many found as desired, all of the pool's highest generation G, owned by the Node,
 *    with the desired pool name and resourceSliceCount, and each desired slice's devices equal
 *    to one found slice's (order of slices free, order of devices not) whose name, in a pool
 *    of several slices, starts with the desired slice's generateName: UNCHANGED, G;
 *    devices are compared on what rdma-dp owns (rdp_dra_devices_owned_equal()), so that what
 *    the API server adds never reads as a difference;
 *  - one found, one desired, otherwise: UPDATE, G (generation unchanged, as upstream);
 *  - otherwise (counts differ, mixed generations, a malformed slice): RECREATE, G + 1.
 * Pure. Returns 0, -EINVAL when desired is not an array of slices, -E2BIG beyond
 * RDP_DRA_MAX_SLICES found.
 */
int rdp_dra_slices_compare(json_t *found, json_t *desired, struct rdp_dra_sync *ret);

/*
 * True when the found devices (a slice's spec.devices, as the API server returns them) are
 * the desired ones as far as rdma-dp owns them. Both arrays in the same order, each device:
 *  - the fields rdma-dp owns, "attributes", "capacity", "taints", "allowMultipleAllocations":
 *    equal, a missing one counting as empty ([], {}, false, null); the maps' keys exactly
 *    the same;
 *  - any other field the desired device has: equal; a field only the found one has: ignored
 *    (the API server's defaults, fields of a newer API);
 *  - inside those, objects compare on the desired keys only (a found-only key such as a
 *    taint's defaulted "timeAdded" is ignored), arrays element by element, a capacity's
 *    "value" as a quantity ("1Gi" == "1024Mi" == "1073741824", as the server canonicalises),
 *    anything else exactly.
 * Pure.
 */
bool rdp_dra_devices_owned_equal(json_t *found, json_t *desired);
/*
 * True when two resource.Quantity strings are the same amount ("1Gi", "1024Mi",
 * "1073741824"; "500m", "0.5"). Strings that are not quantities (or overflow) compare as
 * strings.
 */
bool rdp_dra_quantity_equal(const char *a, const char *b);

/*
 * The PUT body for UPDATE: a copy of desired with generateName dropped and found's
 * metadata.name and metadata.resourceVersion set (409 on a stale one: re-list), and each
 * desired taint without a timeAdded given the one of the same taint (key, value, effect) of
 * the found device of the same name, so that an update keeps when a taint was added. NULL on
 * allocation failure or when found has no name.
 */
json_t *rdp_dra_slice_for_update(json_t *desired, json_t *found);
