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
 *           runtimes' spec caches, as NVIDIA's driver does)
 *   top-level containerEdits:
 *     deviceNodes  rdma_cm (when the host has it)
 *     env          RDMA_DEVICE_<REQUEST> per base request, in first-appearance order: the
 *                  request's devices with all their ports, "mlx5_0:1,mlx5_3:1" (workload-env.h
 *                  rdp_env_resource_var() on the request name: "nic" -> RDMA_DEVICE_NIC);
 *                  then NCCL_IB_HCA "=mlx5_0:1,..." and UCX_NET_DEVICES over every device of
 *                  the claim, ports that carry traffic only, left out when none does
 *                  (*ret_omitted says so).
 * The env is top-level: CDI applies it to every container given any device of the claim
 * (kubelet hands a container the devices of its requests, or all). A container that names
 * only one of two requests of this driver in one claim still sees both requests' variables.
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

/* True for a UID usable in the names: [A-Za-z0-9-], a letter or digit first and last, <= 64. */
bool rdp_cdi_claim_uid_valid(const char *uid);
/* "rdma-dp.io-claim_<uid>.json". -EINVAL (UID), -ENOBUFS. */
int rdp_cdi_claim_file_name(const char *uid, char *buf, size_t size);
/* "rdma-dp.io/claim=<uid>-<device>". -EINVAL (UID or device name), -ENOBUFS. */
int rdp_cdi_claim_device_id(const char *uid, const char *device, char *buf, size_t size);

/*
 * The spec of claim uid for results[0..n) (rdp_dra_claim_parse(): our driver's, devices
 * offered by inv). host_prefix: NULL, or a directory put before every hostPath (tests that
 * point the runtime at fixture nodes). Returns 0 with *ret_json (rdp_free() it), or 0 with
 * NULL when no result names a device (nothing to write: remove any old file); *ret_omitted
 * (may be NULL) gets the RDP_ENV_NCCL_IB_HCA / RDP_ENV_UCX_NET_DEVICES bits left out.
 * hook_path (NULL: none) and memlock (0: none): the memlock hook of the spec (oci-hook.h).
 * -EINVAL for an invalid UID, a device the inventory does not offer or a device without char
 * devices, more than RDP_DRA_CLAIM_MAX_RESULTS results; -ENOMEM.
 */
int rdp_cdi_claim_spec_render(const struct rdp_dra_inventory *inv, const char *uid,
			      const struct rdp_dra_result *results, size_t n,
			      const char *host_prefix, const char *hook_path, uint64_t memlock,
			      char **ret_json, unsigned int *ret_omitted);
/*
 * Writes the claim's spec atomically into the CDI directory dirfd (rdp_cdi_open_dir()), as
 * rdp_cdi_write_at(): 0 written, 1 unchanged; json NULL removes the file. -errno.
 */
int rdp_cdi_claim_spec_write_at(int dirfd, const char *uid, const char *json);
/* Removes the claim's spec: 0, 1 when it was absent, -errno. */
int rdp_cdi_claim_spec_remove_at(int dirfd, const char *uid);
