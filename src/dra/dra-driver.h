/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp dra: the node part of a DRA driver for RDMA devices. Wires the host model (rescans
 * on the loop, host changes from hostwatch.h), the ResourceSlices of the node's pool
 * (dra-slices.h; published through an API-server worker, kube-worker.h), kubelet's plugin
 * watcher (a registration socket in plugins_registry answering GetInfo with type DRAPlugin
 * and the versions ["v1.DRAPlugin", "v1beta1.DRAPlugin"]), and the DRAPlugin service on
 * dra.sock (NodePrepareResources, NodeUnprepareResources on the v1 and v1beta1 paths): a claim
 * is read from the API server (a second worker: a slice sync backing off never delays it),
 * checked (dra-claims.h), given a CDI spec of its own (dra-cdi.h) and recorded in a
 * checkpoint (dra-checkpoint.h) so that a restart neither loses nor duplicates it.
 *
 * Slices: re-published after every change of the offered devices, after every registration
 * with kubelet (kubelet wipes the node's slices at its start, and 30 s after the driver is
 * unreachable), and checked every RDP_DRA_RESYNC_USEC against what the API server holds (a
 * wipe meanwhile is repaired within that time). API-server failures back off (1 s doubling to
 * 30 s) without touching kubelet's calls. A port state change is a change of the offered
 * devices (their health, hence their port-down taint). After its writes a sync reads the
 * pool back: an API server that drops the taints (DRADeviceTaints off, 1.33-1.35) makes the
 * driver publish without them until it restarts (logged once); any other difference left
 * after three write rounds in a row backs off as a failure, so a server that changes what it
 * is given never gets a write loop.
 *
 * Sockets: <driver>-reg.sock and dra.sock, or with rolling_update_uid (the pod's UID)
 * <driver>-<uid>-reg.sock and dra-<uid>.sock, so that two instances run side by side
 * (dra-instance.h); an instance never deletes the pool when it leaves (kubelet wipes it 30 s
 * after the last one is gone).
 *
 * This is wiring: it logs, one key=value line per event (log.h).
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "dra-slices.h"
#include "dra-share.h"

#define RDP_DRA_RESYNC_USEC (10 * 1000 * 1000ULL)
#define RDP_DRA_RESCAN_USEC (60 * 1000 * 1000ULL)
#define RDP_DRA_BACKOFF_MIN_USEC (1000 * 1000ULL)
#define RDP_DRA_BACKOFF_MAX_USEC (30 * 1000 * 1000ULL)
/* A claim's API read, its retries included; kubelet's call has 45 s. */
#define RDP_DRA_CLAIM_BUDGET_MS 30000
/* A slice request, retries included (the sync backs off and starts again after it). */
#define RDP_DRA_SLICE_BUDGET_MS 20000
/* Claims of one NodePrepareResources/NodeUnprepareResources call. */
#define RDP_DRA_MAX_CALL_CLAIMS 256

struct rdp_dra_options {
	const char *driver;        /* RDP_DRA_DEFAULT_DRIVER when NULL */
	const char *node_name;     /* required (--node-name or $NODE_NAME) */
	const char *kubelet_root;  /* RDP_DEFAULT_KUBELET_ROOT when NULL */
	const char *sysfs_root;    /* "/sys" when NULL */
	const char *dev_root;      /* "/dev" when NULL */
	const char *cdi_spec_dir;  /* RDP_DEFAULT_CDI_SPEC_DIR when NULL */
	/* The claims' specs' memlock hook (oci-hook.h): its host path, NULL: none; the limit. */
	const char *memlock_hook;
	uint64_t memlock;
	/* The API server: url ("https://IP:PORT") with token and CA files, or NULL: in-cluster. */
	const char *api_server;
	const char *token_file;
	const char *ca_file;
	const char *api_server_name; /* the name its certificate carries; NULL: the default */
	const char *sa_root;       /* tests: a root for the in-cluster service-account files */
	/* The pod's UID: per-instance sockets, so that two run side by side (dra-instance.h);
	 * NULL or "": the fixed names. */
	const char *rolling_update_uid;
	bool verbose;
	/* The taint of a device whose ports are all down (dra-slices.h); zero: NoSchedule. */
	enum rdp_dra_taint_effect port_down_taint;
	struct rdp_dra_share_options share; /* --sharing, --share-slots, --share-bandwidth */
};

/* Runs until SIGTERM/SIGINT. Returns the process exit code: 0, or 1 when it cannot start. */
int rdp_dra_run(const struct rdp_dra_options *o);
