/* SPDX-License-Identifier: MIT */
/*
 * Shared NICs by consumable capacity (DRAConsumableCapacity, KEP-5075): the devices of the
 * pool published so that the scheduler may allocate one device to several claims, each
 * allocation with its own share ID; and the share IDs of the allocation results as the
 * rest of the driver carries them (prepare, CDI names, checkpoint).
 *
 * `--sharing=capacity` adds to every published device:
 *
 *   "allowMultipleAllocations": true,
 *   "capacity": {
 *     "slots": {"value": "<N>",                  N: --share-slots, the seeds' rdmaHcaMax
 *               "requestPolicy": {"default": "1", "validRange": {"min": "1"}}},
 *     "bandwidth": {"value": "<rateGbps>G",      only with --share-bandwidth and a known rate:
 *                   "requestPolicy": {"default": "0", "validRange": {"min": "0"}}}}
 *
 * so that a request that names no capacity takes one slot (and no bandwidth): at most N
 * claims share a NIC, as at most rdmaHcaMax pods share the device plugin's pool. A request
 * may ask for more: `capacity: {requests: {slots: "4", bandwidth: "100G"}}`. The names are
 * unprefixed, so in the driver's domain (`device.capacity["rdma.rdma-dp.io"].slots` in CEL):
 * a count of pods is this driver's notion, not a Kubernetes one. Quantities are written in
 * the API server's canonical form ("200", "400G"), so that the server stores them as sent
 * and the slice comparison sees no change.
 *
 * `--sharing=claim` (the default) publishes neither: a 1.34/1.35 API server (the gate is alpha
 * and off) drops allowMultipleAllocations and the request policies from what it stores
 * (rdp_dra_share_dropped() notices, and the driver falls back to claim).
 *
 * Share IDs (results[].shareID, a UID the scheduler generates): each prepared share gets its
 * own CDI device, "<claimUID>-<device>-<shareID>" (rdp_dra_share_cdi_name()), so that two
 * shares of one NIC never share a name, in one claim or in two.
 *
 * Library code: negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define RDP_DRA_CAP_SLOTS "slots"
#define RDP_DRA_CAP_BANDWIDTH "bandwidth"
#define RDP_DRA_SHARE_SLOTS_DEFAULT 200 /* the seeds' rdmaHcaMax */
#define RDP_DRA_SHARE_SLOTS_MAX 1000000
#define RDP_DRA_SHARE_ID_MAX 64 /* a UID (a UUID: 36) */

enum rdp_dra_sharing {
	RDP_DRA_SHARING_CLAIM, /* a device in one claim at a time; share by claim */
	RDP_DRA_SHARING_CAPACITY, /* allowMultipleAllocations and the capacity above */
};

struct rdp_dra_share_options {
	enum rdp_dra_sharing sharing;
	unsigned int slots; /* RDP_DRA_SHARING_CAPACITY: 1..RDP_DRA_SHARE_SLOTS_MAX; 0: default */
	bool bandwidth; /* publish "bandwidth" too */
};

/* "claim" or "capacity" into *ret: 0, -EINVAL. */
int rdp_dra_sharing_parse(const char *s, enum rdp_dra_sharing *ret);
const char *rdp_dra_sharing_name(enum rdp_dra_sharing s);

/*
 * Adds allowMultipleAllocations and capacity to one device object of a slice, as above; the
 * bandwidth from its "rateGbps" attribute (none without one). Nothing for
 * RDP_DRA_SHARING_CLAIM. 0, -EINVAL (not a device object, slots out of range), -ENOMEM.
 */
int rdp_dra_share_device(json_t *dev, const struct rdp_dra_share_options *o);
/* The same for every device of every slice of rdp_dra_slices_build()'s array. */
int rdp_dra_share_slices(json_t *slices, const struct rdp_dra_share_options *o);

/*
 * True when slice, as the API server stored it after a write of devices with
 * allowMultipleAllocations, has devices without it: the server dropped the field (1.34/1.35,
 * DRAConsumableCapacity off). The driver then publishes as RDP_DRA_SHARING_CLAIM, otherwise
 * every check would find a difference and write again.
 */
bool rdp_dra_share_dropped(json_t *slice);

/* True for a share ID usable in CDI names: [A-Za-z0-9-], alnum first and last, <= 64. */
bool rdp_dra_share_id_valid(const char *s);
/*
 * The CDI name part of a result after the claim UID: "<device>" without a share,
 * "<device>-<shareID>" with one. Returns the length, -EINVAL (an invalid share ID), -ENOBUFS.
 */
int rdp_dra_share_cdi_name(const char *device, const char *share_id, char *buf, size_t len);
/* Two results name the same share: one device and equal share IDs (both NULL included). */
bool rdp_dra_share_same(const char *dev_a, const char *share_a, const char *dev_b,
			const char *share_b);
