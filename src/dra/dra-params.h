/* SPDX-License-Identifier: MIT */
/*
 * The driver's opaque configuration parameters (a claim's spec.devices.config[].opaque, or a
 * DeviceClass's spec.config[].opaque, with driver: <our driver>), as the scheduler copies them
 * into status.allocation.devices.config[] (the class's first, then the claim's):
 *
 *   {"source": "FromClaim", "requests": ["nic"],        (empty or absent: every request)
 *    "opaque": {"driver": "rdma.rdma-dp.io",
 *               "parameters": {"apiVersion": "rdma.rdma-dp.io/v1alpha1",
 *                              "kind": "RdmaConfig",
 *                              "memlock": "unlimited" | "<bytes>" | "64Mi" | <bytes> | 0}}}
 *
 * memlock: the RLIMIT_MEMLOCK the claim's CDI spec hook sets for the containers given the
 * request's devices (memlock.h spelling; 0 or "0": leave the container's limit alone).
 * Strict: apiVersion and kind exactly these, no other field (an unknown field, a wrong type or
 * a bad value is an error naming the claim, the config entry and the field). Entries for other
 * drivers are not ours and are skipped; a later entry overrides an earlier one for the
 * requests it names. A request named "main/sub" (prioritized list) counts for its base "main".
 *
 * Library code: negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "dra-claims.h"

#define RDP_DRA_PARAMS_API_VERSION "rdma.rdma-dp.io/v1alpha1"
#define RDP_DRA_PARAMS_KIND "RdmaConfig"
#define RDP_DRA_PARAMS_MAX_CONFIGS 64 /* API: DeviceConfigMaxSize 32; bounded loosely */
#define RDP_DRA_PARAMS_MAX_BYTES (10 * 1024) /* API: OpaqueParametersMaxLength 10 Ki */

struct rdp_dra_params {
	bool has_memlock;
	uint64_t memlock; /* memlock.h; RDP_MEMLOCK_LEAVE (0): no hook */
};

/*
 * One parameters object (JSON value p). 0 with *ret; -EBADMSG with *ret_error (rdp_free() it;
 * may be NULL) saying which field is wrong, prefixed by where ("config[1].opaque.parameters");
 * -ENOMEM.
 */
int rdp_dra_params_parse(const json_t *p, const char *where, struct rdp_dra_params *ret,
			 char **ret_error);
/* The same from text (the fuzz target's entry): -EBADMSG for text that is not JSON. */
int rdp_dra_params_parse_text(const char *s, size_t len, struct rdp_dra_params *ret,
			      char **ret_error);

/*
 * Sets results[i].has_memlock and .memlock of claim c (our results, rdp_dra_claim_parse())
 * from the claim object body[0..len): the last config of ours that names the result's request
 * and sets memlock; left unset (the driver's --memlock) where none does. -EBADMSG with *ret_error ("claim ns/name: config[2].opaque.
 * parameters: unknown field \"foo\"") for a malformed config of ours, -E2BIG for more than
 * RDP_DRA_PARAMS_MAX_CONFIGS entries, -ENOMEM.
 */
int rdp_dra_params_apply(const char *body, size_t len, const char *driver,
			 struct rdp_dra_claim *c, char **ret_error);
