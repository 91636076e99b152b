/* SPDX-License-Identifier: MIT */
/*
 * The device model as JSON: the document `rdma-dp discover -o json` prints, for every command
 * (and the daemon's logs) that shows devices. Field names and types are a contract:
 *
 *   {"devices": [{"name", "pci_address", "vendor", "device_id", "class", "driver",
 *                 "netdevs": [..], "numa_node", "is_vf", "pf_pci_address", "pf_netdev",
 *                 "node_guid", "fw_ver", "hca_type",
 *                 "ports": [{"port", "state", "phys_state", "link_layer", "rate",
 *                            "roce_v2_ipv4_gid_index"}],
 *                 "char_devices": [..], "problems": [..],
 *                 "usable": true, "unusable_reason": null}],
 *    "rdma_cm": "/dev/infiniband/rdma_cm", "netns_mode": "shared"}
 *
 * Unknown strings are null (pci_address of a virtual device; pf_* unless a VF), unknown
 * numbers keep the model's value (numa_node -1), roce_v2_ipv4_gid_index is null when none.
 * usable: whether a pod given the device could use it (device.h); unusable_reason says why
 * not ("/dev/infiniband/uverbs5 missing; /dev/infiniband/rdma_cm missing"), null when usable.
 */
#pragma once
#include <jansson.h>

#include "device.h"

/* New references, or NULL when memory runs out. */
json_t *rdp_device_to_json(const struct rdp_device *d);
json_t *rdp_host_to_json(const struct rdp_host *h);
