/* SPDX-License-Identifier: MIT */
/*
 * The daemon's published state: what `rdma-dp serve` serves right now, for the liveness probe
 * (`rdma-dp health`) to check instead of the config on disk.
 *
 * Why: a valid ConfigMap edit that adds or renames a resource names a socket the daemon has not
 * created yet; a probe reading the config fails on every node at once and every node restarts,
 * ignoring the DaemonSet's maxUnavailable. The probe must check what the daemon serves.
 *
 * Where: <state dir>/status.json, the state dir being "<socket dir>/.rdma-dp"
 * (rdp_state_dir()). The socket directory is the one thing the daemon and an exec probe in the
 * same container share that is writable (the root filesystem is read-only). A directory, not a
 * file beside the sockets: kubelet's device manager unlinks every non-directory file of
 * device-plugins/ when it starts (CleanupPluginDirectory), and the plugin watcher ignores
 * names starting with '.'.
 *
 * The file is JSON, written to a temporary file and renamed over the old one (a reader sees the
 * old or the new content, never a mix):
 *   {"format": 1, "pid": 42, "generation": 7, "mode": "kubelet-sock",
 *    "resources": [{"name": "rdma/a", "socket": "/var/lib/kubelet/device-plugins/a.sock",
 *                   "serving": true}, ...]}
 * "serving" is true when the daemon listens on the socket (false: waiting for the path, or
 * retrying a failed listen). Parsing is bounded (RDP_STATUS_MAX_BYTES, ..._MAX_RESOURCES) and
 * checked: a truncated or foreign file is an error, never a crash.
 *
 * Library code: returns negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDP_STATE_DIR_NAME ".rdma-dp"
#define RDP_STATUS_FILE "status.json"
#define RDP_STATUS_FORMAT 1
#define RDP_STATUS_MAX_BYTES (1024 * 1024)
#define RDP_STATUS_MAX_RESOURCES 4096
#define RDP_STATUS_MAX_NAME 253 /* a resource name: prefix "/" name */
#define RDP_STATUS_MAX_SOCKET 107 /* sizeof(sun_path) - 1 */
#define RDP_STATUS_MAX_MODE 32

struct rdp_status_resource {
	char *name; /* "rdma/hca_shared_devices_a" */
	char *socket; /* absolute path, as the daemon sees it */
	bool serving;
	/* What kubelet was told: units, and how many Healthy; -1 when the file has none. */
	long long units, healthy;
};

struct rdp_status {
	long long pid; /* the daemon's pid, in its own pid namespace */
	uint64_t generation; /* bumped by every write of one daemon */
	char *mode; /* "kubelet-sock" or "plugins-registry" */
	struct rdp_status_resource *resources;
	size_t n_resources;
};

/* "<sock_dir>/.rdma-dp" in *ret (allocated). Returns 0 or -ENOMEM. */
int rdp_state_dir(const char *sock_dir, char **ret);

/* The JSON text of s, NUL-terminated, in *ret (allocated). Returns 0, -EINVAL or -ENOMEM. */
int rdp_status_format(const struct rdp_status *s, char **ret);

/*
 * Parses the content of a status file (len bytes, not necessarily NUL-terminated). On error,
 * returns -EINVAL (-E2BIG when too large) and, when err is not NULL, one line saying what is
 * wrong in err (errlen bytes). Returns 0 or -ENOMEM otherwise.
 */
int rdp_status_parse(const char *buf, size_t len, struct rdp_status **ret, char *err,
		     size_t errlen);

/*
 * Writes s to <dir>/status.json atomically (a temporary file in dir, then rename). Creates dir
 * (mode 0750) when missing, not its parents. Returns 0 or a negative errno.
 */
int rdp_status_write(const char *dir, const struct rdp_status *s);

/*
 * Reads and parses <dir>/status.json. -ENOENT when there is none, -EINVAL (err says why) when
 * it is not a status file, other negative errno on I/O errors. When mtime_usec is not NULL it
 * gets the file's modification time (CLOCK_REALTIME, microseconds).
 */
int rdp_status_read(const char *dir, struct rdp_status **ret, uint64_t *mtime_usec, char *err,
		    size_t errlen);

/* Removes <dir>/status.json (a daemon that stops). Returns 0 (also when absent) or -errno. */
int rdp_status_remove(const char *dir);

struct rdp_status *rdp_status_free(struct rdp_status *s);
