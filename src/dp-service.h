/* SPDX-License-Identifier: MIT */
/*
 * The v1beta1.DevicePlugin service of one resource (one pool of shared RDMA devices).
 *
 * Two layers:
 *  - pure functions over the device model: what a pool serves (struct rdp_dp_state), and the
 *    ListAndWatch / Allocate / GetPreferredAllocation messages built from it, in and out as
 *    protobuf bytes, so unit tests need neither sockets nor a loop;
 *  - a service object that answers the calls of a gRPC server with the current state and keeps
 *    the open ListAndWatch streams, sending them a new snapshot when the state changes.
 *
 * Shared units: a resource advertises rdmaHcaMax interchangeable units "0".."N-1"; whichever
 * units a container gets, it gets the char devices of every device of the pool.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "grpc.h"
#include "pool.h"

/* Bounds on what a peer may ask for in one request (kubelet sends one container request). */
#define RDP_DP_MAX_CONTAINER_REQUESTS 64
#define RDP_DP_MAX_ID_LEN 63 /* Device.ID limit of the API */
#define RDP_DP_MAX_IDS_PER_REQUEST 65536
#define RDP_DP_ERROR_IDS_SHOWN 8 /* IDs named in an error message, then "..." */

#define RDP_DP_HEALTHY "Healthy"
#define RDP_DP_UNHEALTHY "Unhealthy"

/* What one resource serves; self-contained (no pointer into the host model or config). */
struct rdp_dp_state {
	unsigned int units; /* rdmaHcaMax, or 0 when the pool has no device */
	bool healthy; /* at least one device of the pool has an ACTIVE port */
	int numa_node; /* NUMA node every unit carries as topology; -1: none */
	size_t n_devices; /* devices in the pool */
	size_t n_active; /* of which with an ACTIVE port */
	char *devices; /* "mlx5_0,mlx5_3" (for logs); "" when none */
	char **specs; /* char devices handed to containers: sorted, unique, rdma_cm included */
	size_t n_specs;
};

/*
 * Computes what pool p (built on host h) serves. Returns 0, or -ENOMEM (ret left empty).
 * ret must be zero-initialised or done.
 */
int rdp_dp_state_build(const struct rdp_host *h, const struct rdp_pool *p,
		       struct rdp_dp_state *ret);
/* Frees the contents; s can be reused. */
void rdp_dp_state_done(struct rdp_dp_state *s);
/* True when both produce the same ListAndWatch snapshot (units, health, topology). */
bool rdp_dp_state_same_snapshot(const struct rdp_dp_state *a, const struct rdp_dp_state *b);
/* True when both hand out the same char devices. */
bool rdp_dp_state_same_specs(const struct rdp_dp_state *a, const struct rdp_dp_state *b);

/*
 * The packed ListAndWatchResponse for s: units "0".."N-1", each with the state's health and,
 * when numa_node >= 0, TopologyInfo{nodes:[{ID: numa_node}]}. Returns 0 or -ENOMEM;
 * *ret is rdp_malloc'd (NULL when the message is empty).
 */
int rdp_dp_snapshot_pack(const struct rdp_dp_state *s, uint8_t **ret, size_t *ret_len);

/*
 * Answers a packed AllocateRequest: one ContainerAllocateResponse per container request, each
 * listing every char device of the state (host path = container path, permissions "rwm").
 * Returns 0 with the packed AllocateResponse; -EBADMSG when req does not parse; -EINVAL when a
 * request names unknown, duplicate or too many unit IDs, or none (*ret_error says which);
 * -E2BIG when a bound above is exceeded (*ret_error says which); -ENOMEM.
 * *ret and *ret_error are rdp_malloc'd; *ret_error is set only on -EINVAL / -E2BIG.
 */
int rdp_dp_allocate(const struct rdp_dp_state *s, const uint8_t *req, size_t len, uint8_t **ret,
		    size_t *ret_len, char **ret_error);

/*
 * Answers a packed PreferredAllocationRequest: per container request, the must-include IDs
 * (deduplicated, in order) topped up with available IDs not already chosen, in order, up to
 * allocation_size. Errors as rdp_dp_allocate (-EINVAL for a negative allocation_size).
 */
int rdp_dp_preferred_allocation(const struct rdp_dp_state *s, const uint8_t *req, size_t len,
				uint8_t **ret, size_t *ret_len, char **ret_error);

/* The packed DevicePluginOptions: no pre-start, no preferred allocation. */
int rdp_dp_options_pack(uint8_t **ret, size_t *ret_len);

/* Service object. */

#define RDP_DP_N_METHODS 5
/* "/v1beta1.DevicePlugin/GetDevicePluginOptions", ..., the paths dispatch answers. */
extern const char *const rdp_dp_method_paths[RDP_DP_N_METHODS];

struct rdp_dp_service;

/* What happened on a call, for the daemon's log. */
struct rdp_dp_call_info {
	const char *method; /* "Allocate", "ListAndWatch", ... */
	uint64_t call_id;
	enum rdp_grpc_code code; /* status sent; OK for an opened stream */
	const char *message; /* error text sent, or NULL */
	size_t n_ids; /* Allocate: unit IDs requested in all container requests */
	size_t n_containers; /* Allocate: container requests */
	size_t n_specs; /* Allocate: char devices in each response */
	bool stream_opened; /* ListAndWatch: a stream was opened ... */
	bool stream_closed; /* ... or went away */
	size_t n_streams; /* open ListAndWatch streams after the call */
};
typedef void (*rdp_dp_call_cb)(const struct rdp_dp_call_info *info, void *userdata);

/* Creates an empty service (0 units until a state is set). cb may be NULL. Returns 0/-ENOMEM. */
int rdp_dp_service_new(rdp_dp_call_cb cb, void *userdata, struct rdp_dp_service **ret);
/*
 * Ends the streams still open (UNAVAILABLE) and frees. Free the gRPC servers first where
 * possible: their close callbacks take the streams off the service. Accepts NULL, returns NULL.
 */
struct rdp_dp_service *rdp_dp_service_free(struct rdp_dp_service *s);

enum {
	RDP_DP_CHANGED_SNAPSHOT = 1 << 0, /* streams were sent the new snapshot */
	RDP_DP_CHANGED_SPECS = 1 << 1, /* Allocate now hands out other char devices */
};
/*
 * Takes over the contents of st (left empty) as the new state. Returns a mask of
 * RDP_DP_CHANGED_* (0: nothing changed, nothing sent), or -ENOMEM (state kept as before).
 */
int rdp_dp_service_set_state(struct rdp_dp_service *s, struct rdp_dp_state *st);
const struct rdp_dp_state *rdp_dp_service_state(const struct rdp_dp_service *s);
size_t rdp_dp_service_streams(const struct rdp_dp_service *s);

/* True when path is one of rdp_dp_method_paths. */
bool rdp_dp_service_handles(const char *path);
/*
 * Answers a call whose path rdp_dp_service_handles() (others get UNIMPLEMENTED). Unary calls
 * are answered at once; a ListAndWatch call is kept and sent the current snapshot at once.
 */
void rdp_dp_service_dispatch(struct rdp_dp_service *s, struct rdp_grpc_call *call,
			     const uint8_t *req, size_t len);
