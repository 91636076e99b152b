/* SPDX-License-Identifier: MIT */
/*
 * Device health for kubelet (KEP-4680, DRAResourceHealth): what each offered device's ports
 * say, and the NodeWatchResources streams that carry it (v1 for kubelet 1.37, v1alpha1 for
 * 1.34+ with ResourceHealthStatus, on by default since 1.36; one message set,
 * src/rpc/proto/drahealth.proto).
 *
 * A device's health, from the state of its ports in the host model (device.h):
 *   - HEALTHY when at least one port is ACTIVE or ACTIVE_DEFER (a pod can use the device),
 *     the message listing every port: "port 1 ACTIVE" ("port 1 ACTIVE; port 2 DOWN");
 *   - UNHEALTHY when no port is active and at least one port's state is known, the message
 *     naming each port and its state: "port 1 DOWN" ("port 1 INIT; port 2 DOWN");
 *   - UNKNOWN when the device has no port or no port's state could be read ("no port state
 *     known").
 * (The device plugin's rule, rdp_device_any_port_active(), gives the same verdict.) A message
 * is at most RDP_DRA_HEALTH_MESSAGE_MAX - 1 (1024, kubelet's bound) characters, cut with
 * "..." beyond.
 *
 * Streams: every NodeWatchResources call is kept open and gets the complete list at once,
 * again within the loop iteration in which the list changes (rdp_dra_health_set_inventory()
 * after a rescan), and every RDP_DRA_HEALTH_RESEND_SEC (rdp_dra_health_resend(), the daemon's
 * timer) so that kubelet, which takes a device not reported within its
 * health_check_timeout_seconds (RDP_DRA_HEALTH_TIMEOUT_SEC, sent with each device) as
 * Unknown, never does so while the driver runs. last_updated_time is the Unix time of the
 * send (the model is current: rescans follow port and netdev events). A stream ends only when
 * kubelet cancels it or the server goes.
 *
 * Library code: negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dra-slices.h"

#define RDP_DRA_HEALTH_MESSAGE_MAX 1025 /* kubelet keeps 1024 characters */
#define RDP_DRA_HEALTH_RESEND_SEC 10
#define RDP_DRA_HEALTH_TIMEOUT_SEC 30
#define RDP_DRA_HEALTH_MAX_STREAMS 16 /* open streams kept; more are refused */

/* The proto's HealthStatus values. */
enum rdp_dra_health_status {
	RDP_DRA_HEALTH_UNKNOWN = 0,
	RDP_DRA_HEALTH_HEALTHY = 1,
	RDP_DRA_HEALTH_UNHEALTHY = 2,
};

/* "Unknown", "Healthy", "Unhealthy" (kubelet's words in the pod status). */
const char *rdp_dra_health_status_name(enum rdp_dra_health_status s);

struct rdp_dra_health {
	char device[RDP_DRA_NAME_MAX];
	enum rdp_dra_health_status status;
	char message[RDP_DRA_HEALTH_MESSAGE_MAX];
};

/* The health of one device (see the top); name is left alone. Pure. */
void rdp_dra_health_of(const struct rdp_device *d, struct rdp_dra_health *ret);
/*
 * The health of every offered device of inv, in the inventory's order, into *ret (rdp_free()
 * it; NULL and 0 for none). Returns 0 or -ENOMEM.
 */
int rdp_dra_health_build(const struct rdp_dra_inventory *inv, struct rdp_dra_health **ret,
			 size_t *n);

struct rdp_grpc_call;
struct rdp_dra_health_server;

/* pool: the node name (every device's DeviceIdentifier.pool_name). 0 or -ENOMEM. */
int rdp_dra_health_server_new(const char *pool, struct rdp_dra_health_server **ret);
/* Ends every stream (UNAVAILABLE). Accepts NULL, returns NULL. */
struct rdp_dra_health_server *rdp_dra_health_server_free(struct rdp_dra_health_server *s);
/*
 * The devices and their health now (inv borrowed only during the call). When the list
 * differs from the last one (a device, a status or a message), every stream gets it at once.
 * Returns 1 when it differed, 0 when not, -ENOMEM (the old list kept).
 */
int rdp_dra_health_set_inventory(struct rdp_dra_health_server *s,
				 const struct rdp_dra_inventory *inv);
/* Sends the list to every stream again (the timer). */
void rdp_dra_health_resend(struct rdp_dra_health_server *s);
/* Handles a NodeWatchResources call (either version): kept open, sent the list at once. */
void rdp_dra_health_dispatch(struct rdp_dra_health_server *s, struct rdp_grpc_call *call,
			     const uint8_t *req, size_t len);
/* Streams open now. */
size_t rdp_dra_health_streams(const struct rdp_dra_health_server *s);
/* The last list (borrowed until the next set_inventory) and its length. */
const struct rdp_dra_health *rdp_dra_health_list(const struct rdp_dra_health_server *s,
						 size_t *n);
