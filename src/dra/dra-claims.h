/* SPDX-License-Identifier: MIT */
/*
 * The ResourceClaim a NodePrepareResources call names, as the API server returns it
 * (GET /apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}): parsed bounded and
 * checked, reduced to what this driver prepares.
 *
 * Checks, in this order (the first failing one is the claim's error, *ret_error says it in
 * words fit for kubelet's per-claim error):
 *  - the body is a JSON object of at most RDP_DRA_CLAIM_MAX_BYTES with metadata {uid};
 *    a wrong type anywhere below is -EBADMSG;
 *  - metadata.uid is the UID kubelet gave, else -ESTALE ("claim got replaced");
 *  - status.allocation exists, else -ENOMSG ("not allocated");
 *  - status.allocation.devices.results has at most RDP_DRA_CLAIM_MAX_RESULTS entries (-E2BIG);
 *    those whose driver is ours are taken: {request, pool, device, adminAccess, shareID (a
 *    share ID dra-share.h accepts, else -EBADMSG)}, a subrequest
 *    "<main>/<sub>" reduced to "<main>" (what kubelet matches against containers'
 *    resources.claims[].request); results of other drivers are skipped (a claim may mix a
 *    GPU and a NIC);
 *  - each taken result's pool is our node's pool and its device one this node offers
 *    (rdp_dra_inventory_find(): known and usable), else -ENODEV naming the device.
 * No result for our driver is not an error here (n_results 0): the caller decides.
 *
 * Library code: negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "dra-slices.h"

#define RDP_DRA_CLAIM_MAX_BYTES (8u << 20) /* the API client's body bound */
#define RDP_DRA_CLAIM_MAX_RESULTS 256 /* API: 32 (AllocationResultsMaxSize); bounded loosely */
#define RDP_DRA_REQUEST_MAX 128 /* "<main>/<sub>": two DNS labels and '/' + NUL */
#define RDP_DRA_UID_MAX 128 /* metadata.uid (a UUID: 36) */

/* One device allocated to this driver by the claim. */
struct rdp_dra_result {
	char *request; /* base request name: "nic" (from "nic" or "nic/sub") */
	char *pool; /* our node's pool */
	char *device; /* an offered device name: "pci-0000-18-00-0" */
	/* results[].adminAccess (DRAAdminAccess, GA in 1.36): the device is shared with the
	 * claims that use it; an admin claim neither blocks nor is blocked by them */
	bool admin_access;
	/* results[].shareID (DRAConsumableCapacity): this allocation's share of a device
	 * published with allowMultipleAllocations; NULL for a device allocated whole */
	char *share_id;
};

struct rdp_dra_claim {
	char *uid;
	char *namespace; /* "" when the object had none */
	char *name;
	struct rdp_dra_result *results; /* in the order of the allocation */
	size_t n_results;
};

/* What the claim is checked against. */
struct rdp_dra_claim_ctx {
	const char *driver; /* our driver name */
	const char *uid; /* the UID kubelet sent (Claim.uid) */
	const char *pool; /* our pool name (the node name) */
	const struct rdp_dra_inventory *inv; /* what this node offers now */
};

/*
 * Parses body[0..len) (not NUL-terminated) as above into ret (zeroed or done; replaced on
 * success, left empty on error). Returns 0; -EBADMSG, -ESTALE, -ENOMSG, -E2BIG, -ENODEV with
 * *ret_error (rdp_free() it; may be NULL when the caller wants no text); -ENOMEM (no text).
 */
int rdp_dra_claim_parse(const char *body, size_t len, const struct rdp_dra_claim_ctx *ctx,
			struct rdp_dra_claim *ret, char **ret_error);
void rdp_dra_claim_done(struct rdp_dra_claim *c);

/* "nic/rdma" -> "nic" into buf. Returns the length, -EINVAL for "" or "/x", -ENOBUFS. */
int rdp_dra_base_request(const char *request, char *buf, size_t len);
