/* SPDX-License-Identifier: MIT */
/*
 * The workload's environment: the variables a container given RDMA devices gets, in "K=V"
 * form for Allocate's envs and for a CDI spec's containerEdits.env. Pure: no I/O, no logs.
 *
 * Three groups, in this order:
 *  - RDMA_DEVICE_<RESOURCE> (always): the devices the container got with all their ports,
 *    "mlx5_0:1,mlx5_3:1", whatever the ports' state; <RESOURCE> is the full resource name
 *    upper-cased, every character not [A-Z0-9] turned into '_' (rdp_env_resource_var());
 *  - the "envFromDevices" of the resource, computed from the same devices in the same order,
 *    over the ports that carry traffic (state ACTIVE or ACTIVE_DEFER, link layer InfiniBand
 *    or Ethernet): NCCL_IB_HCA in NCCL's exact-match form "=mlx5_0:1,mlx5_3:1" (without '='
 *    NCCL matches prefixes), then UCX_NET_DEVICES "mlx5_0:1,mlx5_3:1". When no port can carry
 *    traffic, both are left out (NCCL refuses an empty list; UCX would select nothing) and
 *    rdp_env.omitted says so, for the caller to log once;
 *  - the constants of the resource's "env", in file order.
 *
 * Which devices: shared resource, the usable devices of the pool (those whose char devices
 * the container gets), in pool order; exclusive, the container's units, in unit ID order.
 *
 * Which groups where (flags): device-spec mode, everything in Allocate's envs. CDI mode,
 * shared resource: everything in the spec (every container gets every device, so all is
 * constant). CDI mode, exclusive: the constants in the spec, the per-allocation groups in
 * Allocate's envs (a spec is static per device).
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "device.h"
#include "diag.h"
#include "pool.h"

/* NCCL's MAX_IB_DEVS: it uses at most this many HCAs. */
#define RDP_ENV_NCCL_MAX_HCAS 32

/* Groups of rdp_env_build(). */
enum {
	RDP_ENV_GROUP_DEVICES = 1u << 0,   /* RDMA_DEVICE_<RESOURCE> */
	RDP_ENV_GROUP_COMPUTED = 1u << 1,  /* "envFromDevices" */
	RDP_ENV_GROUP_CONSTANTS = 1u << 2, /* "env" */
};
#define RDP_ENV_GROUP_PER_ALLOCATION (RDP_ENV_GROUP_DEVICES | RDP_ENV_GROUP_COMPUTED)
#define RDP_ENV_GROUP_ALL (RDP_ENV_GROUP_PER_ALLOCATION | RDP_ENV_GROUP_CONSTANTS)

struct rdp_env {
	char **kv; /* "NAME=value", rdp_malloc'd */
	size_t n;
	/*
	 * RDP_ENV_NCCL_IB_HCA / RDP_ENV_UCX_NET_DEVICES bits: computed variables the resource
	 * asks for that were left out because no port of the devices can carry traffic.
	 */
	unsigned int omitted;
	size_t n_traffic_devices; /* devices with a port that carries traffic (NCCL's HCAs) */
};


/* True when port p carries traffic as NCCL counts it (ACTIVE/ACTIVE_DEFER, IB or Ethernet). */
bool rdp_env_port_carries_traffic(const struct rdp_port *p);

/*
 * The variables of a container given devices[0..n) (indexes into h->devices, in that order;
 * n may be 0) of resource res, the groups of flags only. ret must be zero-initialised or
 * done; it is replaced. Returns 0; -EINVAL for an index out of range or a resource without
 * full_name; -ENOMEM (ret left empty).
 */
int rdp_env_build(const struct rdp_resource *res, const struct rdp_host *h, const size_t *devices,
		  size_t n, unsigned int flags, struct rdp_env *ret);
/* Frees the contents; e can be reused. */
void rdp_env_done(struct rdp_env *e);
/*
 * The per-allocation variables of a container given several devices, from those of each
 * device alone (parts[i]: rdp_env_build() of one device, groups RDP_ENV_GROUP_PER_ALLOCATION
 * only): each variable's values joined with ',' in the order of parts, in the order the
 * variables first appear, NCCL_IB_HCA's leading '=' once; omitted: what every part omitted;
 * n_traffic_devices: the sum. Equal to rdp_env_build() over the devices at once (the unit
 * test checks it), for callers that keep per-device variables but not the host model (an
 * exclusive resource's Allocate). Constants do not merge: keep them out of parts. ret must
 * be zero-initialised or done; it is replaced. Returns 0 or -ENOMEM.
 */
int rdp_env_merge(const struct rdp_env *parts, size_t n, struct rdp_env *ret);

/* The value of name in e ("=mlx5_0:1"), NULL when absent. */
const char *rdp_env_get(const struct rdp_env *e, const char *name);

/*
 * The devices of pool p a container of its resource gets, for rdp_env_build(): shared, the
 * usable devices in pool order; exclusive, the first unit's (the usable device with the
 * lowest unit ID) as an example. *ret is rdp_malloc'd (NULL when *ret_n is 0).
 * Returns 0 or -ENOMEM.
 */
int rdp_env_pool_devices(const struct rdp_host *h, const struct rdp_pool *p, size_t **ret,
			 size_t *ret_n);

/*
 * Warnings about the workload environment that depend on the node, for check-config and the
 * daemon: a computed NCCL_IB_HCA that names more than 32 devices (NCCL uses the first 32), and
 * computed variables that would be left out because no port of the pool carries traffic.
 * In the style of the pool warnings ("config.json:4: warning: rdma/a: ..."). Returns 0 or
 * -ENOMEM.
 */
int rdp_env_check_pools(const struct rdp_config *c, const struct rdp_host *h,
			const struct rdp_pools *pools, struct rdp_diags *diags);
