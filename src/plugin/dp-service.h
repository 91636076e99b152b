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
 * Shared units (config "mode": "shared", the default): a resource advertises rdmaHcaMax
 * interchangeable units "0".."N-1"; whichever units a container gets, it gets the char
 * devices of every device of the pool. GetPreferredAllocation is not advertised.
 *
 * Exclusive units ("mode": "exclusive"): one unit per usable device of the pool, its ID the
 * device's unit ID (rdp_device_unit_id(): the PCI address, "0000:18:00.2"), its health its
 * own ports' and its TopologyInfo its own NUMA node. A container gets exactly the char
 * devices of its units, plus rdma_cm. GetPreferredAllocation is advertised and answered
 * from the PCIe tree (prefer.h).
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "device.h"
#include "grpc.h"
#include "pool.h"
#include "topology.h"
#include "workload-env.h"

/* Bounds on what a peer may ask for in one request (kubelet sends one container request). */
#define RDP_DP_MAX_CONTAINER_REQUESTS 64
#define RDP_DP_MAX_ID_LEN 63 /* Device.ID limit of the API */
#define RDP_DP_MAX_IDS_PER_REQUEST 65536
#define RDP_DP_ERROR_IDS_SHOWN 8 /* IDs named in an error message, then "..." */

#define RDP_DP_HEALTHY "Healthy"
#define RDP_DP_UNHEALTHY "Unhealthy"

/* A device of the pool a pod could not use, and why (rdp_device.unusable_reason). */
struct rdp_dp_unusable {
	char *device; /* "mlx5_5" */
	char *reason; /* "/dev/infiniband/uverbs5 missing" */
};

/* One unit of an exclusive resource: one usable device of the pool. */
struct rdp_dp_unit {
	char id[RDP_UNIT_ID_MAX]; /* rdp_device_unit_id(): "0000:18:00.2" */
	char device[RDP_IBDEV_NAME_MAX]; /* "mlx5_3" */
	bool healthy; /* an active port (ACTIVE or ACTIVE_DEFER) */
	int numa_node; /* -1: no TopologyInfo */
	size_t *specs; /* its char devices: indexes into the state's specs, ascending */
	size_t n_specs;
	struct rdp_topo_dev place; /* where it sits in the PCIe tree (topology.h) */
	/* Exclusive: its per-allocation variables alone (workload-env.h), merged at Allocate. */
	struct rdp_env env;
};

/* What one resource serves; self-contained (no pointer into the host model or config). */
struct rdp_dp_state {
	enum rdp_resource_mode mode;
	unsigned int units; /* shared: rdmaHcaMax, or 0 when the pool has no device;
			       exclusive: n_unit_v */
	bool healthy; /* at least one usable device of the pool has an active port */
	int numa_node; /* NUMA node every unit carries as topology; -1: none */
	size_t n_devices; /* devices in the pool */
	size_t n_active; /* of which usable, with an active port (ACTIVE or ACTIVE_DEFER) */
	size_t n_usable; /* of which usable (rdp_device_is_usable()) */
	char *devices; /* "mlx5_0,mlx5_3" (for logs); "" when none */
	/*
	 * Char devices handed to containers: those of the usable devices, plus rdma_cm when there
	 * is one; sorted, unique. spec_devnums[i] is the number sysfs names for specs[i] (0: none)
	 * and spec_owners[i] the device it belongs to ("rdma_cm" for rdma_cm), both for checking
	 * the nodes before an Allocate answer.
	 */
	char **specs;
	dev_t *spec_devnums;
	char **spec_owners;
	size_t n_specs;
	struct rdp_dp_unusable *unusable; /* the pool's unusable devices, in pool order */
	size_t n_unusable;
	/* Exclusive: the units, sorted by ID (strcmp: PCI address order). */
	struct rdp_dp_unit *unit_v;
	size_t n_unit_v;
	size_t rdma_cm_spec; /* index of rdma_cm in specs; SIZE_MAX: none */
	/*
	 * The workload environment (workload-env.h): env_const, the resource's "env" constants;
	 * env_alloc, shared only: the per-allocation variables over the pool's usable devices
	 * (every container gets them all). Exclusive resources merge their units' env.
	 */
	struct rdp_env env_const;
	struct rdp_env env_alloc;
	unsigned int env_omitted; /* computed variables left out (shared: for the whole pool) */
	uint64_t memlock; /* the resource's "memlock" (config.h): the CDI spec's hook */
};

/*
 * CDI mode: the resource's kind ("rdma-dp.io/compute") and the unit IDs its spec on disk
 * names now (sorted). Allocate then names devices ("<kind>=<id>") instead of handing out
 * device specs, when every device of the answer is in the spec.
 */
struct rdp_dp_cdi {
	const char *kind;
	char *const *ids;
	size_t n_ids;
};

/*
 * Computes what pool p (built on host h) serves. Returns 0, or -ENOMEM (ret left empty).
 * ret must be zero-initialised or done.
 */
int rdp_dp_state_build(const struct rdp_host *h, const struct rdp_pool *p,
		       struct rdp_dp_state *ret);
/* Frees the contents; s can be reused. */
void rdp_dp_state_done(struct rdp_dp_state *s);

/*
 * The CDI spec of what s serves (cdi.h), in class: a device per unit (its unit ID, its char
 * devices), rdma_cm at the top level, and the variables that are the same for every
 * container: a shared resource's all (every container gets every device), an exclusive
 * one's constants (the rest goes in Allocate's envs). Returns 0 with *ret_json, or with
 * NULL when there is no device (no file); -EINVAL (a rule of cdi.h broken), -ENOMEM.
 */
/* hook_path: the memlock hook's host path (oci-hook.h), NULL: no hook in the spec. */
int rdp_dp_state_cdi_render(const struct rdp_dp_state *s, const char *class,
			    const char *hook_path, char **ret_json);
/* The units advertised Healthy. */
size_t rdp_dp_state_healthy_units(const struct rdp_dp_state *s);
/* True when both produce the same ListAndWatch snapshot (units, health, topology). */
bool rdp_dp_state_same_snapshot(const struct rdp_dp_state *a, const struct rdp_dp_state *b);
/* True when both hand out the same char devices (paths and expected numbers). */
bool rdp_dp_state_same_specs(const struct rdp_dp_state *a, const struct rdp_dp_state *b);
/* True when containers get the same variables from both. */
bool rdp_dp_state_same_env(const struct rdp_dp_state *a, const struct rdp_dp_state *b);
/* True when both have the same unusable devices for the same reasons. */
bool rdp_dp_state_same_unusable(const struct rdp_dp_state *a, const struct rdp_dp_state *b);

enum rdp_dp_unusable_event {
	RDP_DP_UNUSABLE_APPEARED, /* unusable in the new state, not in the old one */
	RDP_DP_UNUSABLE_CHANGED, /* unusable in both, for another reason now */
	RDP_DP_UNUSABLE_CLEARED, /* unusable in the old state, not in the new one (reason: old) */
};
typedef void (*rdp_dp_unusable_cb)(enum rdp_dp_unusable_event ev, const char *device,
				   const char *reason, void *userdata);
/*
 * Calls cb once per device whose usability differs between old and new (see the events),
 * cleared ones first. For the daemon's "device-unusable" / "device-usable" log lines: call it
 * with rdp_dp_service_state() and the new state before rdp_dp_service_set_state().
 * Allocates nothing.
 */
void rdp_dp_unusable_diff(const struct rdp_dp_state *old, const struct rdp_dp_state *new,
			  rdp_dp_unusable_cb cb, void *userdata);

/*
 * The packed ListAndWatchResponse for s. Shared: units "0".."N-1", each with the state's
 * health and, when numa_node >= 0, TopologyInfo{nodes:[{ID: numa_node}]}. Exclusive: one
 * Device per unit with its own ID, health and NUMA node. Returns 0 or -ENOMEM; *ret is
 * rdp_malloc'd (rdp_pb_pack()).
 */
int rdp_dp_snapshot_pack(const struct rdp_dp_state *s, uint8_t **ret, size_t *ret_len);

/*
 * Answers a packed AllocateRequest: one ContainerAllocateResponse per container request, each
 * listing the char devices of the state (host path = container path, permissions "rwm"):
 * shared, every one; exclusive, those of the container's units plus rdma_cm.
 * Returns 0 with the packed AllocateResponse; -EBADMSG when req does not parse; -EINVAL when a
 * request names unknown, duplicate or too many unit IDs, or none, or (exclusive) unhealthy
 * ones (*ret_error says which);
 * -E2BIG when a bound above is exceeded (*ret_error says which); -ENODEV when the pool has
 * devices but none is usable (*ret_error names them and why); -ENOMEM.
 * *ret and *ret_error are rdp_malloc'd; *ret_error is set only on -EINVAL / -E2BIG / -ENODEV.
 * The nodes themselves are not checked here (the service does, see set_dev_root).
 */
int rdp_dp_allocate(const struct rdp_dp_state *s, const uint8_t *req, size_t len, uint8_t **ret,
		    size_t *ret_len, char **ret_error);
/*
 * The same in CDI mode (cdi NULL: device specs, as rdp_dp_allocate()). Per container: the
 * CDI names of its devices (shared: every usable device of the pool; exclusive: its units),
 * no device specs; envs: nothing for a shared resource (its spec carries them), the
 * per-allocation variables for an exclusive one (its spec carries the constants). A
 * container with a device the spec does not name gets device specs and every variable.
 * *ret_fallback (may be NULL) counts such containers.
 */
int rdp_dp_allocate_cdi(const struct rdp_dp_state *s, const struct rdp_dp_cdi *cdi,
			const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len,
			char **ret_error, size_t *ret_fallback);

/*
 * Answers a packed PreferredAllocationRequest, per container request (kubelet's semantics:
 * available_deviceIDs includes the must-include ones, allocation_size counts them):
 *  - shared: the must-include IDs (deduplicated, in order) topped up with available IDs not
 *    already chosen, in order, up to allocation_size;
 *  - exclusive: allocation_size units, all must-include ones among them, closest to one
 *    another in the PCIe tree (rdp_prefer()), ascending by ID. -EINVAL names what makes a
 *    request impossible: unknown IDs, a must-include ID not among the available ones, a size
 *    larger than the available units or smaller than the must-include ones.
 * Errors as rdp_dp_allocate (-EINVAL for a negative allocation_size).
 */
int rdp_dp_preferred_allocation(const struct rdp_dp_state *s, const uint8_t *req, size_t len,
				uint8_t **ret, size_t *ret_len, char **ret_error);

/*
 * The packed DevicePluginOptions: no pre-start; GetPreferredAllocation for an exclusive
 * resource only (the same in the RegisterRequest: registration.h).
 */
int rdp_dp_options_pack(enum rdp_resource_mode mode, uint8_t **ret, size_t *ret_len);

/* Service object. */


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
	bool waited; /* Allocate: the answer waited for a rescan (see set_refresh) */
	bool cdi; /* Allocate: answered with CDI names */
	size_t cdi_fallback; /* Allocate, CDI mode: containers given device specs instead */
	/*
	 * Exclusive: Allocate's units ("0000:18:00.0=mlx5_0 ..."; containers apart by "; "),
	 * GetPreferredAllocation's answer (the same form); bounded, "..." when cut. NULL else.
	 */
	const char *units;
};
typedef void (*rdp_dp_call_cb)(const struct rdp_dp_call_info *info, void *userdata);

/* Creates an empty service (0 units until a state is set). cb may be NULL. Returns 0/-ENOMEM. */
int rdp_dp_service_new(rdp_dp_call_cb cb, void *userdata, struct rdp_dp_service **ret);
/*
 * CDI mode: the kind and the unit IDs the spec on disk names now (copied), after each write;
 * cdi NULL: device specs (no spec, or it could not be written).
 * Returns 0 or -ENOMEM (then device specs).
 */
int rdp_dp_service_set_cdi(struct rdp_dp_service *s, const struct rdp_dp_cdi *cdi);

/*
 * The mode the resource is registered with: what GetDevicePluginOptions answers (the state's
 * mode follows with the next rdp_dp_service_set_state()). Shared until set.
 */
void rdp_dp_service_set_mode(struct rdp_dp_service *s, enum rdp_resource_mode mode);
/*
 * Ends the streams still open (UNAVAILABLE) and frees. Free the gRPC servers first where
 * possible: their close callbacks take the streams off the service. Accepts NULL, returns NULL.
 */
struct rdp_dp_service *rdp_dp_service_free(struct rdp_dp_service *s);

enum {
	RDP_DP_CHANGED_SNAPSHOT = 1 << 0, /* streams were sent the new snapshot */
	RDP_DP_CHANGED_SPECS = 1 << 1, /* Allocate now hands out other char devices */
	RDP_DP_CHANGED_UNUSABLE = 1 << 2, /* other devices are unusable, or for other reasons */
	RDP_DP_CHANGED_ENV = 1 << 3, /* containers now get other variables */
};
/*
 * Takes over the contents of st (left empty) as the new state. Returns a mask of
 * RDP_DP_CHANGED_* (0: nothing changed, nothing sent), or -ENOMEM (state kept as before).
 * Allocate calls waiting for a rescan are answered from the new state (see set_refresh).
 */
int rdp_dp_service_set_state(struct rdp_dp_service *s, struct rdp_dp_state *st);

/*
 * Checking Allocate answers against the host. With a dev root (the directory that holds
 * infiniband/, as discovery's), before answering Allocate the service checks every char
 * device of the answer under it (devnode.h: the number sysfs named at the last scan, one
 * open+fstat each). dev_root NULL turns the check off (the default). Returns 0, or the errno
 * of opening the root (the previous one is kept then).
 */
int rdp_dp_service_set_dev_root(struct rdp_dp_service *s, const char *dev_root);
/*
 * With a sysfs root as well, Allocate also checks that each uverbs/umad/issm node still
 * belongs to the device the state names (class/infiniband_{verbs,mad}/<node>/ibdev): the
 * kernel hands a freed number to the next device registered, so after an unplug and a plug
 * the same path and number can be another HCA's. A mismatch is handled as above. Returns 0 or
 * the errno of opening the root; NULL: no such check.
 */
int rdp_dp_service_set_sysfs_root(struct rdp_dp_service *s, const char *sysfs_root);
/*
 * settled(userdata) true: the host's char devices are known to be as the current state says
 * (a watch on them has seen nothing since the state was built, and no scan is under way), so
 * Allocate answers without checking its nodes one by one. NULL (the default): always check.
 */
void rdp_dp_service_set_settled(struct rdp_dp_service *s, bool (*settled)(void *userdata),
				void *userdata);

/*
 * When a check fails: without a refresh callback the call fails at once with
 * FAILED_PRECONDITION naming the device and the node ("mlx5_3: /dev/infiniband/uverbs3 is
 * 231:195, sysfs uverbs3 says 231:192"). With one, the call waits (at most
 * RDP_DP_MAX_PARKED per service; beyond that UNAVAILABLE) and cb is called once (reason: the
 * failed check) until the daemon answers it by rescanning and then calling
 * rdp_dp_service_set_state() with the new state or, when nothing changed,
 * rdp_dp_service_refreshed(). Waiting calls are then answered from the state as it is,
 * checked again; a check failing again fails the call with FAILED_PRECONDITION. A waiting
 * call whose client goes away is dropped (reported as CANCELLED). cb may call set_state() or
 * refreshed() itself. cb NULL: no waiting.
 */
#define RDP_DP_MAX_PARKED 16
typedef void (*rdp_dp_refresh_cb)(const char *reason, void *userdata);
void rdp_dp_service_set_refresh(struct rdp_dp_service *s, rdp_dp_refresh_cb cb, void *userdata);
/* The daemon rescanned and the state is unchanged: answers the waiting calls (see above). */
void rdp_dp_service_refreshed(struct rdp_dp_service *s);
/* Allocate calls waiting for a rescan. */
size_t rdp_dp_service_parked(const struct rdp_dp_service *s);
const struct rdp_dp_state *rdp_dp_service_state(const struct rdp_dp_service *s);
size_t rdp_dp_service_streams(const struct rdp_dp_service *s);

/* True when path is a v1beta1.DevicePlugin method (methods.h). */
bool rdp_dp_service_handles(const char *path);
/*
 * Answers a call whose path rdp_dp_service_handles() (others get UNIMPLEMENTED). Unary calls
 * are answered at once; a ListAndWatch call is kept and sent the current snapshot at once.
 */
void rdp_dp_service_dispatch(struct rdp_dp_service *s, struct rdp_grpc_call *call,
			     const uint8_t *req, size_t len);
