/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp serve: the device plugin daemon. Wires config, discovery, pools, one gRPC server
 * per resource, registration with kubelet, inotify on the kubelet socket directory, signals
 * and the rescan timer into one event loop. This is where the daemon logs (log.h).
 *
 * Sockets: one per resource, named "<resourceName>.sock" (resource names are unique in a config),
 * in <kubelet-root>/device-plugins (kubelet-sock mode; Register's endpoint is that name) or in
 * <kubelet-root>/plugins_registry (plugin-watcher mode; the one socket serves both
 * pluginregistration.Registration and v1beta1.DevicePlugin, GetInfo's endpoint is empty).
 * kubelet restarts (kubelet.sock re-created, our socket deleted) re-create the socket and
 * register again at once; Register backs off 10 ms doubling to 5 s while kubelet is away.
 *
 * Signals: SIGHUP reloads the config (applied as a diff when valid, else the old one keeps
 * serving) and rescans at once; SIGTERM/SIGINT close the streams, remove the daemon's own
 * sockets and make rdp_daemon_run() return 0.
 */
#pragma once
#include <stdbool.h>

enum rdp_registration_mode {
	RDP_REGISTRATION_AUTO, /* kubelet.sock when present, else the plugin watcher */
	RDP_REGISTRATION_KUBELET_SOCK, /* Register on <root>/device-plugins/kubelet.sock */
	RDP_REGISTRATION_PLUGINS_REGISTRY, /* sockets in <root>/plugins_registry */
};

#define RDP_DEFAULT_KUBELET_ROOT "/var/lib/kubelet"

struct rdp_daemon_options {
	const char *config_file; /* RDP_DEFAULT_CONFIG_FILE when NULL */
	const char *sysfs_root; /* "/sys" when NULL */
	const char *dev_root; /* "/dev" when NULL */
	const char *kubelet_root; /* RDP_DEFAULT_KUBELET_ROOT when NULL */
	enum rdp_registration_mode registration;
	bool verbose; /* per-call detail in the log */
};

const char *rdp_registration_mode_name(enum rdp_registration_mode m);
/* Parses "auto", "kubelet-sock", "plugins-registry". Returns 0 or -EINVAL. */
int rdp_registration_mode_from_string(const char *s, enum rdp_registration_mode *ret);

/* Runs until SIGTERM/SIGINT. Returns the process exit code: 0, or 1 when it cannot start. */
int rdp_daemon_run(const struct rdp_daemon_options *o);
