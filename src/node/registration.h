/* SPDX-License-Identifier: MIT */
/*
 * Getting a resource known to kubelet, both ways kubelet offers:
 *
 *  - kubelet.sock: the plugin calls /v1beta1.Registration/Register on
 *    <kubelet-root>/device-plugins/kubelet.sock. struct rdp_registration does that
 *    asynchronously (the loop keeps serving kubelet's call-backs while Register is in flight),
 *    retrying with exponential backoff while kubelet is absent or refuses.
 *
 *  - plugin watcher: kubelet finds the plugin's socket in <kubelet-root>/plugins_registry and
 *    calls /pluginregistration.Registration/GetInfo and NotifyRegistrationStatus on it;
 *    rdp_watcher_dispatch() answers those on the resource's own socket, which also serves
 *    v1beta1.DevicePlugin (GetInfo gives an empty endpoint: "this socket").
 *
 * No logging here: outcomes go to the callbacks.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc.h"

struct rdp_event;

enum rdp_registration_mode {
	RDP_REGISTRATION_AUTO, /* the plugin watcher when plugins_registry exists, else kubelet.sock */
	RDP_REGISTRATION_KUBELET_SOCK, /* Register on <root>/device-plugins/kubelet.sock */
	RDP_REGISTRATION_PLUGINS_REGISTRY, /* sockets in <root>/plugins_registry */
};

#define RDP_DEFAULT_KUBELET_ROOT "/var/lib/kubelet"

const char *rdp_registration_mode_name(enum rdp_registration_mode m);
/* Parses "auto", "kubelet-sock", "plugins-registry". Returns 0 or -EINVAL. */
int rdp_registration_mode_from_string(const char *s, enum rdp_registration_mode *ret);

#define RDP_API_VERSION "v1beta1"
/*
 * kubelet creates kubelet.sock a moment before it listens on it (Go's net.Listen binds, then
 * listens), so the first dial after the create event may be refused: retry soon, then back
 * off. 10 ms doubling reaches the 5 s cap after 10 failures.
 */
#define RDP_REGISTRATION_BACKOFF_MIN_USEC (10 * 1000ULL)
#define RDP_REGISTRATION_BACKOFF_MAX_USEC (5 * 1000 * 1000ULL)
/* kubelet dials back and calls GetDevicePluginOptions inside Register: leave it time. */
#define RDP_REGISTRATION_TIMEOUT_USEC (30 * 1000 * 1000ULL)

/*
 * The packed RegisterRequest: version v1beta1, no pre-start, GetPreferredAllocation as
 * preferred says (an exclusive resource's). Returns 0 or -ENOMEM.
 */
int rdp_register_request_pack(const char *endpoint, const char *resource_name, bool preferred,
			      uint8_t **ret, size_t *ret_len);

struct rdp_registration;

struct rdp_registration_ops {
	/* Right before each attempt (attempt counts from 1 since the last start). May be NULL. */
	void (*attempt)(void *userdata, unsigned int attempt);
	/*
	 * After each attempt: registered (error 0, code OK), or failed: error is a negative
	 * errno when kubelet.sock could not be reached (-ENOENT, -ECONNREFUSED...), else 0 with
	 * the gRPC code and message kubelet answered; retry_usec says when the next attempt runs.
	 * The callback may call rdp_registration_start/stop/free.
	 */
	void (*done)(void *userdata, int error, enum rdp_grpc_code code, const char *message,
		     uint64_t retry_usec);
};

/* Copies the strings. Nothing happens until rdp_registration_start(). Returns 0 or -ENOMEM. */
int rdp_registration_new(struct rdp_event *e, const char *kubelet_sock, const char *endpoint,
			 const char *resource_name, bool preferred,
			 const struct rdp_registration_ops *ops,
			 void *userdata, struct rdp_registration **ret);
/* Cancels whatever is in flight or scheduled. Accepts NULL, returns NULL. */
struct rdp_registration *rdp_registration_free(struct rdp_registration *r);
/*
 * (Re)starts registering: cancels an attempt in flight or a scheduled retry, resets the
 * backoff and attempts now (from a zero-delay timer, so never inside the caller's stack).
 * Returns 0 or a negative errno from the loop.
 */
int rdp_registration_start(struct rdp_registration *r);
/* Stops: cancels the attempt in flight and any retry. */
void rdp_registration_stop(struct rdp_registration *r);
/* True once the last attempt succeeded (and no start() since). */
bool rdp_registration_registered(const struct rdp_registration *r);
/* True while a Register call is outstanding (its done callback is still to come). */
bool rdp_registration_in_flight(const struct rdp_registration *r);

/* Plugin-watcher side. */

#define RDP_WATCHER_PLUGIN_TYPE "DevicePlugin"

/*
 * The packed PluginInfo for GetInfo: a device plugin's (type RDP_WATCHER_PLUGIN_TYPE, version
 * RDP_API_VERSION) when type is NULL, else type with versions[0..n_versions) in that order
 * (kubelet takes the first it supports). Returns 0 or -ENOMEM.
 */
int rdp_watcher_info_pack(const char *name, const char *endpoint, const char *type,
			  const char *const *versions, size_t n_versions, uint8_t **ret,
			  size_t *ret_len);

struct rdp_watcher_info {
	const char *name; /* "rdma/hca_shared_devices_a" */
	const char *endpoint; /* "" (this socket) or an absolute path */
	/* NULL: a device plugin. Else e.g. "DRAPlugin" with {"v1.DRAPlugin", ...}. */
	const char *type;
	const char *const *versions;
	size_t n_versions;
	/* NotifyRegistrationStatus arrived; may be NULL. */
	void (*status)(void *userdata, bool registered, const char *error);
	void *userdata;
};

bool rdp_watcher_handles(const char *path);
/* Answers GetInfo / NotifyRegistrationStatus; other paths get UNIMPLEMENTED. */
void rdp_watcher_dispatch(const struct rdp_watcher_info *info, struct rdp_grpc_call *call,
			  const uint8_t *req, size_t len);
