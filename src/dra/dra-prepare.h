/* SPDX-License-Identifier: MIT */
/*
 * The DRAPlugin service of `rdma-dp dra` (v1 and v1beta1 paths, one message set):
 *
 * NodePrepareResources, per claim (an error is that claim's, never the whole call's):
 *  - a claim the checkpoint has as prepared: its CDI spec is written again (/var/run is tmpfs:
 *    a reboot empties /var/run/cdi) and the answer is the checkpoint's;
 *  - otherwise the claim is read from the API server (GET .../resourceclaims/<name>, on the
 *    claims worker, bounded by a budget inside kubelet's 45 s), checked (dra-claims.h: UID,
 *    allocation, our results, devices this node offers), refused when one of its devices is
 *    prepared for another claim, recorded as prepare-started, given its CDI spec
 *    (dra-cdi.h), recorded as prepared, and answered with the CDI device IDs per device and
 *    its base request names.
 * The call is answered once every claim is done; the API reads of its claims run one after
 * the other on the worker.
 *
 * NodeUnprepareResources, per claim: the spec is removed, then the checkpoint entry; a claim
 * the driver does not know is done already (success). A prepare of the same claim still
 * reading the API server is cancelled (it writes nothing).
 *
 * The checkpoint is written after every change (dra-checkpoint.h: atomic), so a driver
 * restarted at any point answers kubelet's repeated calls without losing or duplicating a
 * claim. Every step that reads or writes it (never an API read) runs under the flock of
 * serialize.lock and re-reads it first: a second instance during a rolling update shares it
 * (dra-instance.h).
 *
 * Wiring of the daemon: it logs, one line per claim event.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rdp_grpc_call;
struct rdp_kube_worker;
struct rdp_dra_inventory;
struct rdp_dra_prepare;

struct rdp_dra_prepare_options {
	const char *driver;
	const char *pool;            /* the node name */
	const char *cdi_spec_dir;
	const char *memlock_hook;    /* the memlock hook's host path (oci-hook.h); NULL: none */
	uint64_t memlock;            /* what it sets (memlock.h); 0: no hook */
	const char *checkpoint_path; /* <plugin dir>/checkpoint.json */
	const char *dev_root;        /* where the char devices are looked up (the model's) */
	struct rdp_kube_worker *worker;
	unsigned budget_ms;          /* one claim's API read, retries included */
	bool verbose;
};

/*
 * Loads the checkpoint (a corrupt one is logged, set aside as checkpoint.json.corrupt, and
 * the driver starts empty) and keeps inv (borrowed; the daemon keeps it current). The strings
 * of o are copied. Returns 0, -ENOMEM, or the errno of opening the plugin directory.
 */
int rdp_dra_prepare_new(const struct rdp_dra_prepare_options *o,
			const struct rdp_dra_inventory *inv, struct rdp_dra_prepare **ret);
/* Calls still waiting for the API server are failed (UNAVAILABLE). Accepts NULL. */
struct rdp_dra_prepare *rdp_dra_prepare_free(struct rdp_dra_prepare *p);
void rdp_dra_prepare_set_inventory(struct rdp_dra_prepare *p, const struct rdp_dra_inventory *inv);
/* Handles one call of dra.sock (any of the four DRAPlugin paths). */
void rdp_dra_prepare_dispatch(struct rdp_dra_prepare *p, struct rdp_grpc_call *call,
			      const uint8_t *req, size_t len);
/* Claims in the checkpoint (prepared or being prepared). */
size_t rdp_dra_prepare_claims(const struct rdp_dra_prepare *p);
