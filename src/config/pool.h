/* SPDX-License-Identifier: MIT */
/*
 * Pools: the devices each configured resource selects on a host. Pure functions over a config
 * and a host model; the CLI (check-config) and the daemon (serve) build pools the same way.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "device.h"
#include "diag.h"

struct rdp_pool {
	const struct rdp_resource *res; /* points into the config */
	size_t *devices;                /* indexes into host->devices, ascending */
	size_t n_devices;
	int numa_node;                  /* the NUMA node all devices share, -1 when mixed/unknown */
};

struct rdp_pools {
	struct rdp_pool *v;             /* one per config resource, in config order */
	size_t n;
};

/*
 * Builds the pools of c on h. Adds warnings to diags (may be NULL) for a pool that is empty
 * and for a device that is in more than one pool. Returns 0 or -ENOMEM.
 */
int rdp_pools_build(const struct rdp_config *c, const struct rdp_host *h, struct rdp_pools **ret,
		    struct rdp_diags *diags);
struct rdp_pools *rdp_pools_free(struct rdp_pools *p);
