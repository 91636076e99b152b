/* SPDX-License-Identifier: MIT */
/*
 * The DRA driver's transient CDI spec of one prepared claim, rendered and written through
 * cdi.h (same JSON, same atomic write, cdiVersion 0.5.0 and the CDI v0.5 name rules).
 *
 *   kind    "rdma-dp.io/claim"
 *   file    <cdi dir>/rdma-dp.io-claim_<claimUID>.json   (class "claim_<uid>" for cdi.h's
 *           file functions; rdp_cdi_cleanup_at() of `serve --use-cdi` leaves these alone)
 *   devices "<claimUID>-<deviceName>", one per distinct device of the claim's results for
 *           this driver, each with its char devices (uverbsN, umadN/issmN of its ports:
 *           rdp_device.char_devices, what an exclusive unit gets in dp-service);
 *           a share of a device (results[].shareID, dra-share.h) is one CDI device of its
 *           own, "<claimUID>-<deviceName>-<shareID>", with the same char devices;
 *           IDs "rdma-dp.io/claim=<claimUID>-<deviceName>" (the UID in the name defeats
 *           runtimes' spec caches, as NVIDIA's driver does);
 *           then "<claimUID>-req-<request>", one per base request in first-appearance order,
 *           with only env (a DRA device name never starts "req-": "pci-", "ib-"):
 *             RDMA_DEVICE_<REQUEST>  the request's devices with all their ports,
 *                                    "mlx5_0:1,mlx5_3:1" (workload-env.h
 *                                    rdp_env_resource_var(): "nic" -> RDMA_DEVICE_NIC);
 *             NCCL_IB_HCA "=mlx5_0:1,...", UCX_NET_DEVICES over the request's devices, ports
 *                                    that carry traffic only, left out when none does
 *                                    (*ret_omitted says so, for any request).
 *   top-level containerEdits: deviceNodes rdma_cm (when the host has it); the memlock hook.
 * NodePrepareResources answers each result with its device's ID and, on the first result of
 * each request, the request's ID (dra-prepare.c): kubelet hands a container the IDs of the
 * devices of the requests it names (the whole claim when it names none; for the scheduler's
 * extended-resource claim, the requests pod.status.extendedResourceClaimStatus maps to it), so
 * a container is told about the HCAs it got and no others. A container given two requests
 * sees both RDMA_DEVICE_<REQUEST>; NCCL_IB_HCA / UCX_NET_DEVICES are then one request's (the
 * runtime applies the request devices in turn, the last one wins): name one request per
 * container, or take the devices with one request.
 * A spec of a claim prepared before per-request devices (the checkpoint's answer has only
 * device IDs) is rendered as it was then, with every variable top-level, over the claim
 * (rdp_cdi_claim_spec_render_env(claim_env)): kubelet keeps the IDs it was given.
 *
 * Library code: negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cdi.h"
#include "dra-claims.h"
#include "dra-slices.h"

#define RDP_DRA_CDI_CLASS "claim"
#define RDP_DRA_CDI_KIND RDP_CDI_VENDOR "/" RDP_DRA_CDI_CLASS
#define RDP_DRA_CDI_UID_MAX 64 /* a claim UID is a UUID (36) */
#define RDP_DRA_CDI_REQUEST_INFIX "-req-"

/* True for a UID usable in the names: [A-Za-z0-9-], a letter or digit first and last, <= 64. */
bool rdp_cdi_claim_uid_valid(const char *uid);
/* "rdma-dp.io-claim_<uid>.json". -EINVAL (UID), -ENOBUFS. */
int rdp_cdi_claim_file_name(const char *uid, char *buf, size_t size);
/* "rdma-dp.io/claim=<uid>-<device>". -EINVAL (UID or device name), -ENOBUFS. */
int rdp_cdi_claim_device_id(const char *uid, const char *device, char *buf, size_t size);
/* "rdma-dp.io/claim=<uid>-req-<request>". -EINVAL (UID or request name), -ENOBUFS. */
int rdp_cdi_claim_request_id(const char *uid, const char *request, char *buf, size_t size);
/* True when results[i] is the first result of its request. */
bool rdp_cdi_claim_first_of_request(const struct rdp_dra_result *results, size_t i);

/*
 * The spec of claim uid for results[0..n) (rdp_dra_claim_parse(): our driver's, devices
 * offered by inv). host_prefix: NULL, or a directory put before every hostPath (tests that
 * point the runtime at fixture nodes). Returns 0 with *ret_json (rdp_free() it), or 0 with
 * NULL when no result names a device (nothing to write: remove any old file); *ret_omitted
 * (may be NULL) gets the RDP_ENV_NCCL_IB_HCA / RDP_ENV_UCX_NET_DEVICES bits left out.
 * hook_path (NULL: none) and memlock (0: none): the memlock hook of the spec (oci-hook.h).
 * -EINVAL for an invalid UID, a device the inventory does not offer or a device without char
 * devices, an empty request name, more than RDP_DRA_CLAIM_MAX_RESULTS results; -ENOMEM.
 */
int rdp_cdi_claim_spec_render(const struct rdp_dra_inventory *inv, const char *uid,
			      const struct rdp_dra_result *results, size_t n,
			      const char *host_prefix, const char *hook_path, uint64_t memlock,
			      char **ret_json, unsigned int *ret_omitted);
/* The same; claim_env: the layout of claims prepared before per-request devices (above). */
int rdp_cdi_claim_spec_render_env(const struct rdp_dra_inventory *inv, const char *uid,
				  const struct rdp_dra_result *results, size_t n,
				  const char *host_prefix, const char *hook_path, uint64_t memlock,
				  bool claim_env, char **ret_json, unsigned int *ret_omitted);
/*
 * Writes the claim's spec atomically into the CDI directory dirfd (rdp_cdi_open_dir()), as
 * rdp_cdi_write_at(): 0 written, 1 unchanged; json NULL removes the file. -errno.
 */
int rdp_cdi_claim_spec_write_at(int dirfd, const char *uid, const char *json);
/* Removes the claim's spec: 0, 1 when it was absent, -errno. */
int rdp_cdi_claim_spec_remove_at(int dirfd, const char *uid);
