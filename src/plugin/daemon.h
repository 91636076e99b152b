/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp serve: the device plugin daemon. Wires config, the scan worker (scans off the loop),
 * pools, the configured resources (resource.h: one gRPC server and registration each, their
 * life in lifecycle.h), inotify on kubelet's socket directories, the host and config watchers
 * (hostwatch.h, confwatch.h), the status the liveness probe reads (status.h), the node's lock
 * (lock.h), signals and the periodic rescan into one event loop. This is where the daemon
 * logs (log.h), with resource.c.
 *
 * Sockets: one per resource, named "<resourceName>.sock", in <kubelet-root>/device-plugins
 * (kubelet-sock mode) or <kubelet-root>/plugins_registry (plugin-watcher mode); none before
 * the node's lock is taken. kubelet restarts (kubelet.sock re-created, our socket deleted)
 * re-create the socket and register again at once. `auto` follows kubelet: the plugin watcher
 * while only plugins_registry exists, kubelet.sock once it appears.
 *
 * Host changes (uevents, rtnetlink, /dev/infiniband) and config file changes are applied
 * within a second; the periodic rescan is a backstop. Signals: SIGHUP reloads the config
 * (applied as a diff when valid, else the old one keeps serving) and rescans at once;
 * SIGTERM/SIGINT close the streams, remove the daemon's own sockets, status and lock, and make
 * rdp_daemon_run() return 0.
 */
#pragma once
#include <stdbool.h>

#include "registration.h"

struct rdp_daemon_options {
	const char *config_file; /* RDP_DEFAULT_CONFIG_FILE when NULL */
	const char *sysfs_root; /* "/sys" when NULL */
	const char *dev_root; /* "/dev" when NULL */
	const char *kubelet_root; /* RDP_DEFAULT_KUBELET_ROOT when NULL */
	enum rdp_registration_mode registration;
	bool verbose; /* per-call detail in the log */
	/*
	 * CDI (--use-cdi): a spec per resource in cdi_spec_dir (RDP_DEFAULT_CDI_SPEC_DIR when
	 * NULL), and Allocate names its devices (cdi_devices) instead of handing out device specs.
	 */
	bool use_cdi;
	const char *cdi_spec_dir;
	/*
	 * --memlock-hook: the host path of the rdma-dp binary the specs name as their memlock
	 * hook (oci-hook.h; RDP_OCI_HOOK_DEFAULT_PATH when NULL); no_memlock_hook: none at all.
	 */
	const char *memlock_hook;
	bool no_memlock_hook;
	/* --metrics-address: GET /metrics, /healthz, /readyz there (metrics-server.h); NULL: off */
	const char *metrics_address;
	/*
	 * --probe-address: GET /healthz and /readyz only, with connection slots of their own
	 * (metrics-server.h rdp_metrics_server_new_probes()); NULL: off. The DaemonSet's probes
	 * use 127.0.0.1:RDP_DEFAULT_PROBE_PORT.
	 */
	const char *probe_address;
};

#define RDP_DEFAULT_PROBE_PORT 9471

/* The port the DaemonSet serves the metrics endpoint on (hostNetwork: one per node). */
#define RDP_DEFAULT_METRICS_PORT 9470

/* Runs until SIGTERM/SIGINT. Returns the process exit code: 0, or 1 when it cannot start. */
int rdp_daemon_run(const struct rdp_daemon_options *o);
