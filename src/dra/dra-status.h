/* SPDX-License-Identifier: MIT */
/*
 * A prepared claim's status.devices (resource.k8s.io/v1 AllocatedDeviceStatus, GA in 1.37):
 * one entry per distinct device of our results, written after a successful prepare and
 * removed on unprepare, so that a pod's operator sees which NIC and address it got.
 *
 * The write is a server-side apply of the status subresource with this driver as the field
 * manager (as DRANET does):
 *   PATCH /apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name>/status
 *         ?fieldManager=<driver>&force=true      Content-Type: application/apply-patch+yaml
 *   {"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim",
 *    "metadata":{"name","namespace","uid"},            (uid: a replaced claim is a 409)
 *    "status":{"devices":[{"driver","pool","device","shareID" (a share's, as its result),
 *        "conditions":[{"type":"Ready","status":"True","reason":"Prepared","message",
 *                       "lastTransitionTime"}],
 *        "data":{"ibdev","uverbs","pciAddress","nodeGUID",
 *                "ports":[{"port","state","linkLayer","rate","roceV2IPv4GIDIndex"}]},
 *        "networkData":{"interfaceName","ips":["10.0.0.5/24","fd00::5/64"],
 *                       "hardwareAddress"}}]}}
 * status.devices is a list map keyed by driver, pool, device (and shareID): other drivers'
 * entries are theirs, and an apply with no entries ("status":{}) removes ours (unprepare).
 * networkData: the device's first netdev, its MAC from <sysfs>/class/net/<netdev>/address,
 * its addresses (getifaddrs(3), CIDR form, at most 16 as the API allows) only where the
 * netdev is the live one (the ifindex sysfs gives is the kernel's: a fixture's sysfs names no
 * live netdev). The API server's RBAC: patch on resourceclaims/status, and (1.36+,
 * DRAResourceClaimGranularStatusAuthorization) associated-node:patch on the synthetic
 * resourceclaims/driver for this driver's name (deploy/dra/rbac.yaml).
 *
 * The queue (rdp_dra_status_set/clear): writes run on a kube worker of their own, so a slow
 * or failing API server never delays a prepare or the reads of other claims. One write at a
 * time, in order; a newer state of a claim replaces its queued one. A failure (connection,
 * 429, 5xx, 403) is retried with a backoff (1 s doubling to 60 s, RDP_DRA_STATUS_MAX_TRIES
 * in all) and logged once per claim; 404 (claim gone), 409 (replaced) and 4xx are final.
 *
 * rdp_dra_status_body() is library code; the queue is wiring: it logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "dra-claims.h"
#include "dra-slices.h"

#define RDP_DRA_STATUS_MAX_IPS 16 /* NetworkDeviceDataMaxIPs */
#define RDP_DRA_STATUS_MAX_TRIES 12
#define RDP_DRA_STATUS_BUDGET_MS 20000 /* one try, the client's own retries included */

struct ifaddrs;
struct rdp_event;
struct rdp_kube_config;
struct rdp_dra_status;

struct rdp_dra_status_ctx {
	const char *driver;
	const char *sysfs_root; /* "/sys" */
	const char *now; /* RFC 3339, UTC: "2026-12-03T13:00:00Z" */
	const struct ifaddrs *ifa; /* the addresses (getifaddrs(3)); NULL: none */
};

/*
 * The apply body for claim ns/name (uid) with our entries for results[0..n) (devices inv
 * offers), or with none (n 0: clears ours). 0 with *ret_json (rdp_free() it); -EINVAL (a
 * device inv does not offer, a missing name), -ENOMEM.
 */
int rdp_dra_status_body(const struct rdp_dra_status_ctx *ctx, const char *ns, const char *name,
			const char *uid, const struct rdp_dra_inventory *inv,
			const struct rdp_dra_result *results, size_t n, char **ret_json);
/* "/apis/resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name>/status?fieldManager=
 * <driver>&force=true". -EINVAL for names that are not DNS names, -ENOBUFS. */
int rdp_dra_status_path(const char *driver, const char *ns, const char *name, char *buf,
			size_t size);

/* The queue, with a kube worker of its own on cfg (copied). *ret_error as kube-worker.h. */
int rdp_dra_status_new(struct rdp_event *e, const struct rdp_kube_config *cfg, const char *driver,
		       const char *sysfs_root, struct rdp_dra_status **ret, char **ret_error);
/* Drops what is queued (the worker's running write is cancelled). Accepts NULL. */
struct rdp_dra_status *rdp_dra_status_free(struct rdp_dra_status *s);
/* Queues our entries for a prepared claim (rendered now, from inv). 0, -ENOMEM, -EINVAL. */
int rdp_dra_status_set(struct rdp_dra_status *s, const char *ns, const char *name,
		       const char *uid, const struct rdp_dra_inventory *inv,
		       const struct rdp_dra_result *results, size_t n);
/* Queues the removal of our entries (unprepare). 0, -ENOMEM, -EINVAL. */
int rdp_dra_status_clear(struct rdp_dra_status *s, const char *ns, const char *name,
			 const char *uid);
/* Writes queued or running. */
size_t rdp_dra_status_pending(const struct rdp_dra_status *s);
