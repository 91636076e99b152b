/* SPDX-License-Identifier: MIT */
/*
 * The claims this node prepared, kept on disk so that a restart of the DRA driver neither
 * loses nor duplicates them: <plugin dir>/checkpoint.json
 * (/var/lib/kubelet/plugins/rdma.rdma-dp.io/checkpoint.json).
 *
 *   {"version": 1,
 *    "claims": {"<claim UID>": {"namespace": "ns", "name": "c1", "state": "prepared",
 *                               "devices": [{"request": "nic", "pool": "node-a",
 *                                            "device": "pci-0000-18-00-0",
 *                                            "cdi_ids": ["rdma-dp.io/claim=<uid>-pci-..."],
 *                                            "admin_access": true (only when true),
 *                                            "share_id": "<UID>" (only for a share)}],
 *                               "cdi_spec": "/var/run/cdi/rdma-dp.io-claim_<uid>.json"}}}
 *
 * A claim's lifecycle (rdp_dra_claim_state_next() says which steps are allowed):
 *   (absent) -> prepare-started   saved before the CDI spec is written (a crash then leaves a
 *                                 record of a spec that may exist: Unprepare removes it)
 *   prepare-started -> prepared   saved once the spec is written, before answering kubelet
 *   prepared -> prepared          a repeated Prepare (the spec is re-written: /var/run is
 *                                 tmpfs and a reboot empties it)
 *   prepare-started -> prepare-started  a retried Prepare after a failure
 *   any -> (absent)               Unprepare, after the spec is removed
 *
 * Loading is strict and bounded (RDP_DRA_CKPT_MAX_BYTES, RDP_DRA_CKPT_MAX_CLAIMS, every
 * field typed, no unknown key, version 1): a file that breaks a rule is -EBADMSG and the
 * daemon reports it, sets the file aside as checkpoint.json.corrupt
 * (rdp_dra_checkpoint_set_aside_at()) and starts empty. Saving is atomic: a temporary file in
 * the same directory, fsync, rename over checkpoint.json, fsync of the directory.
 *
 * Library code: negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define RDP_DRA_CKPT_FILE "checkpoint.json"
#define RDP_DRA_CKPT_CORRUPT "checkpoint.json.corrupt"
#define RDP_DRA_CKPT_VERSION 1
#define RDP_DRA_CKPT_MAX_BYTES (4u << 20)
#define RDP_DRA_CKPT_MAX_CLAIMS 4096
#define RDP_DRA_CKPT_MAX_DEVICES 256 /* per claim (RDP_DRA_CLAIM_MAX_RESULTS) */
#define RDP_DRA_CKPT_MAX_CDI_IDS 16 /* per device */
#define RDP_DRA_CKPT_STRING_MAX 4096 /* bytes of any string (a path at most) */

enum rdp_dra_claim_state {
	RDP_DRA_PREPARE_STARTED,
	RDP_DRA_PREPARED,
	_RDP_DRA_CLAIM_STATE_MAX,
};

/* "prepare-started", "prepared". */
const char *rdp_dra_claim_state_name(enum rdp_dra_claim_state s);
/* The state of that name; -EINVAL for another. */
int rdp_dra_claim_state_from_name(const char *name, enum rdp_dra_claim_state *ret);
/*
 * True when a claim may go from `from` (absent: false) to `to` (see the lifecycle above).
 * The one place the transitions are decided; rdp_dra_checkpoint_put() enforces it.
 */
bool rdp_dra_claim_state_next(bool present, enum rdp_dra_claim_state from,
			      enum rdp_dra_claim_state to);

struct rdp_dra_ckpt_device {
	char *request; /* base request name */
	char *pool;
	char *device;
	char **cdi_ids;
	size_t n_cdi_ids;
	bool admin_access; /* an admin-access result: "admin_access": true, absent when false */
	char *share_id; /* the result's shareID (dra-share.h); NULL: the device whole */
};

struct rdp_dra_ckpt_claim {
	char *uid;
	char *namespace;
	char *name;
	enum rdp_dra_claim_state state;
	struct rdp_dra_ckpt_device *devices;
	size_t n_devices;
	char *cdi_spec; /* the spec file's path; "" when none was written */
};

struct rdp_dra_checkpoint {
	struct rdp_dra_ckpt_claim *claims; /* sorted by UID */
	size_t n_claims;
};

void rdp_dra_checkpoint_done(struct rdp_dra_checkpoint *c);
void rdp_dra_ckpt_claim_done(struct rdp_dra_ckpt_claim *c);
/*
 * A deep copy of src into dst (overwritten, not freed first), checked against the bounds
 * below as rdp_dra_checkpoint_put() checks them. 0, -EINVAL, -ENOMEM (dst untouched).
 */
int rdp_dra_ckpt_claim_copy(const struct rdp_dra_ckpt_claim *src, struct rdp_dra_ckpt_claim *dst);

/* The claim of that UID, NULL when absent. */
const struct rdp_dra_ckpt_claim *rdp_dra_checkpoint_find(const struct rdp_dra_checkpoint *c,
							 const char *uid);
/*
 * Adds a deep copy of claim, or replaces the claim of its UID. Returns 0; -EINVAL for a
 * transition rdp_dra_claim_state_next() refuses, a claim without UID or beyond the bounds
 * above (a string, devices, CDI IDs); -E2BIG when a new claim would exceed
 * RDP_DRA_CKPT_MAX_CLAIMS; -ENOMEM (c unchanged on every error).
 */
int rdp_dra_checkpoint_put(struct rdp_dra_checkpoint *c, const struct rdp_dra_ckpt_claim *claim);
/* Removes the claim of that UID: 0, or 1 when it was absent. */
int rdp_dra_checkpoint_remove(struct rdp_dra_checkpoint *c, const char *uid);

/*
 * The file's bytes for c (keys sorted, one claim per UID, a trailing newline). Returns 0
 * with *ret (rdp_free() it); -E2BIG beyond RDP_DRA_CKPT_MAX_BYTES (so that a saved file always
 * loads), -ENOMEM.
 */
int rdp_dra_checkpoint_render(const struct rdp_dra_checkpoint *c, char **ret);
/*
 * Parses the file's bytes strictly (see the top). Returns 0 with ret replaced, or -EBADMSG
 * with *ret_error saying what is wrong (rdp_free() it; ret_error may be NULL), -E2BIG
 * (bounds, with *ret_error), -ENOMEM. ret is unchanged on error.
 */
int rdp_dra_checkpoint_parse(const char *text, size_t len, struct rdp_dra_checkpoint *ret,
			     char **ret_error);

/*
 * Loads <dirfd>/checkpoint.json into ret: 0 (a missing file: empty), -EBADMSG / -E2BIG as
 * above (also for a file that is not a regular file or larger than the bound), -errno for a
 * file that cannot be read, -ENOMEM.
 */
int rdp_dra_checkpoint_load_at(int dirfd, struct rdp_dra_checkpoint *ret, char **ret_error);
/* Renames checkpoint.json to checkpoint.json.corrupt (replacing an older one), fsyncs. */
int rdp_dra_checkpoint_set_aside_at(int dirfd);
/* Saves c atomically (see the top) as <dirfd>/checkpoint.json, mode 0600. 0 or -errno. */
int rdp_dra_checkpoint_save_at(int dirfd, const struct rdp_dra_checkpoint *c);
