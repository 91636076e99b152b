/* SPDX-License-Identifier: MIT */
/*
 * The configured resources of the daemon: for each, its v1beta1.DevicePlugin service, its
 * socket and its registration with kubelet, driven through the life in lifecycle.h. This is
 * serve's wiring (it logs, like daemon.c); daemon.c owns the loop, the config, the scans and
 * the watches, and tells the set what happened.
 *
 * Sockets: one per resource, "<resourceName>.sock" (resource names are unique in a config),
 * in <kubelet-root>/device-plugins (kubelet-sock mode; Register's endpoint is that name) or
 * in <kubelet-root>/plugins_registry (plugin-watcher mode; the one socket serves both
 * pluginregistration.Registration and v1beta1.DevicePlugin; GetInfo's endpoint is empty,
 * which kubelet reads as "the socket you found", so it works when kubelet's path to the
 * directory differs from ours).
 *
 * Kubelet contract kept here:
 *  - kubelet.sock mode: Register backs off 10 ms doubling to 5 s while kubelet is away; a
 *    registered resource with no ListAndWatch stream for RDP_RES_STREAMLESS_USEC registers
 *    again (kubelet dropped it without restarting, e.g. after another plugin registered the
 *    same name and went away);
 *  - plugin watcher: NotifyRegistrationStatus(registered=false) re-creates the socket after a
 *    backoff (1 s doubling to 30 s), which kubelet's watcher sees as a new plugin;
 *  - a removed resource whose handshake is open keeps its socket until kubelet answered (see
 *    lifecycle.h, RETIRING), so a successor on the same path is never fed kubelet's dial for
 *    the old name.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "daemon.h"
#include "device.h"
#include "dp-service.h"
#include "lifecycle.h"
#include "pool.h"

struct rdp_event;
struct rdp_resources;

#define RDP_RES_STREAMLESS_USEC (10 * 1000 * 1000ULL)
#define RDP_RES_REJECT_BACKOFF_MIN_USEC (1000 * 1000ULL)
#define RDP_RES_REJECT_BACKOFF_MAX_USEC (30 * 1000 * 1000ULL)

struct rdp_resources_hooks {
	/* Right before a Register attempt: take in pending inotify events (may be NULL). */
	void (*before_register)(void *userdata);
	/* An Allocate found the char devices changed under it: rescan soon (may be NULL). */
	void (*refresh)(void *userdata);
	/* True when the char devices are as the last scan saw them (dp-service.h; may be NULL). */
	bool (*settled)(void *userdata);
	/* What the daemon serves changed (sockets, registration): republish it (may be NULL). */
	void (*changed)(void *userdata);
	void *userdata;
};

/*
 * An empty set serving in mode (never AUTO) with sockets in sock_dir. kubelet_sock is used in
 * kubelet-sock mode; Allocate checks the char devices it hands out under dev_root, and whose
 * they are under sysfs_root (NULL: no check). The strings are copied. Returns 0 or -ENOMEM.
 */
int rdp_resources_new(struct rdp_event *e, enum rdp_registration_mode mode, const char *sock_dir,
		      const char *kubelet_sock, const char *sysfs_root, const char *dev_root,
		      const struct rdp_resources_hooks *hooks, struct rdp_resources **ret);
/* Stops everything: closes every socket (only ours) and frees. Accepts NULL, returns NULL. */
struct rdp_resources *rdp_resources_free(struct rdp_resources *s);

/*
 * CDI mode (--use-cdi): each resource keeps its spec in dir (cdi.h; created when missing),
 * written before its devices are named in an Allocate answer, rewritten when what it serves
 * changes, removed when it leaves the config; at every config apply the dir's stale
 * rdma-dp.io-*.json are removed. Specs stay when the daemon stops (containers that restart
 * meanwhile still resolve their devices). Call before rdp_resources_apply_config(). Returns
 * 0, or the errno of opening the dir (logged; the resources then hand out device specs).
 * hook_path: the host path of the memlock hook the specs name (oci-hook.h), NULL for none.
 */
int rdp_resources_set_cdi(struct rdp_resources *s, const char *dir, const char *hook_path);

/*
 * Makes the set serve config c (kept by pointer until the next call): resources kept (same
 * name and prefix) keep their socket, registration and streams; new ones are created (not
 * started: call rdp_resources_start() once their state is set); removed ones close their
 * socket, or retire while a handshake is open. Logs resource-removed lines and fills the
 * counts. On failure (-ENOMEM, -ENAMETOOLONG) nothing running has changed.
 */
int rdp_resources_apply_config(struct rdp_resources *s, const struct rdp_config *c,
			       size_t *added, size_t *removed, size_t *kept);
size_t rdp_resources_count(const struct rdp_resources *s);

/*
 * Sets each resource's state from pools (pools->v[i] serves the config's resource i) built on
 * host h; logs "pool" the first time, "updated" on a change, "device-unusable" /
 * "device-usable" as devices change. Returns 0, or the first negative errno (those resources
 * keep their old state; call again).
 */
int rdp_resources_update(struct rdp_resources *s, const struct rdp_host *h,
			 const struct rdp_pools *pools);
/* A rescan the set asked for (refresh hook) found nothing new: answer the parked calls. */
void rdp_resources_refreshed(struct rdp_resources *s);

/* Starts the resources that never started and whose socket path is free (once enabled). */
void rdp_resources_start(struct rdp_resources *s);
/* Allows sockets from now on (the daemon took the node's lock) and starts. */
void rdp_resources_enable(struct rdp_resources *s);
/* kubelet (re)started: every started resource re-creates its socket and registers again. */
void rdp_resources_kubelet_restarted(struct rdp_resources *s);
/* The directory entry name ("x.sock") was removed: the resource owning it, if its socket
 * is really gone, is restarted at the next rdp_resources_apply_pending(). */
bool rdp_resources_socket_removed(struct rdp_resources *s, const char *name);
/* Every started resource re-creates its socket at the next apply (directory came back). */
void rdp_resources_restart_all(struct rdp_resources *s);
/* inotify lost events: restart those whose socket is gone. */
void rdp_resources_check_sockets(struct rdp_resources *s);
/* Acts on what the calls above noted. */
void rdp_resources_apply_pending(struct rdp_resources *s);

/*
 * Switches every resource to another registration mode and socket directory (auto mode
 * following kubelet): sockets are closed and re-created there, registrations redone.
 */
int rdp_resources_set_mode(struct rdp_resources *s, enum rdp_registration_mode mode,
			   const char *sock_dir);

/*
 * What happened to a resource since it was configured (the metrics endpoint's counters; they
 * start at 0 when a resource is added and survive reloads that keep it).
 */
struct rdp_resource_counters {
	uint64_t allocate_calls; /* Allocate calls answered, OK or not */
	uint64_t allocate_errors; /* of which answered with an error */
	uint64_t preferred_calls; /* GetPreferredAllocation calls answered */
	uint64_t registrations; /* registrations kubelet accepted */
	uint64_t reregistrations; /* of which after the first (kubelet restart, socket lost...) */
	uint64_t register_failures; /* Register failed, or NotifyRegistrationStatus(false) */
};

/* What the daemon serves, for the status the liveness probe reads, and the metrics. */
struct rdp_resource_status {
	const char *full_name;
	const char *sock_path;
	enum rdp_res_state state;
	unsigned int units;
	bool healthy;
	size_t healthy_units; /* the units advertised Healthy */
	size_t streams;
	bool serving; /* its socket exists and is ours */
	size_t n_devices, n_usable; /* devices in the pool; of which usable */
	struct rdp_resource_counters counters;
};
/* Fills v[0..n) (n >= count) with the configured resources, in config order. */
size_t rdp_resources_status(const struct rdp_resources *s, struct rdp_resource_status *v,
			    size_t n);
