/* SPDX-License-Identifier: MIT */
/*
 * The device plugin's own metrics: what `rdma-dp serve` counts about itself (rescans, reloads,
 * kubelet restarts, scrapes) and what each resource serves (units, health, Allocate calls,
 * registrations), written after the fabric families (fabric-metrics.h) in one exposition.
 *
 * Families (all under rdma_dp_; resource="<prefix>/<name>" where per resource):
 *   build_info{version,revision} 1
 *   resource_units, resource_healthy_units, resource_devices, resource_usable_devices,
 *   resource_serving (0/1: its socket exists), resource_registered (0/1: kubelet accepted it)
 *   allocate_requests_total, allocate_errors_total, preferred_allocation_requests_total,
 *   registrations_total, reregistrations_total, registration_failures_total
 *   kubelet_restarts_total, rescans_total{cause}, rescan_duration_seconds (histogram),
 *   config_reloads_total{result}, node_lock_held (0/1),
 *   http_responses_total{code="2xx".."5xx"}, http_connections_rejected_total{reason},
 *   http_timeouts_total{kind}, (from the endpoint's own server, http-server.h)
 *   scrape_duration_seconds (this scrape, up to the plugin families), scrape_errors_total
 *   (counter files that could not be read, since start).
 *
 * Library code: never logs; the counters are fed by the daemon on its loop.
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "resource.h"

struct rdp_mtext;
struct rdp_http_stats;

/* Why a rescan ran, from the reason the daemon gave it (rdp_rescan_cause()). */
enum rdp_rescan_cause {
	RDP_RESCAN_START,          /* "start": the first discovery */
	RDP_RESCAN_PERIODIC,       /* "periodic": the backstop timer */
	RDP_RESCAN_HOST,           /* a host change: /dev, uevents, rtnetlink ("dev:...", ...) */
	RDP_RESCAN_CONFIG,         /* a reload: "config-file", "sighup" */
	RDP_RESCAN_ALLOCATE_CHECK, /* Allocate found a char device changed under it */
	RDP_RESCAN_OTHER,
	RDP_RESCAN_N_CAUSES,
};
enum rdp_rescan_cause rdp_rescan_cause(const char *why);
const char *rdp_rescan_cause_name(enum rdp_rescan_cause c);

enum rdp_reload_result {
	RDP_RELOAD_APPLIED,   /* a valid config, applied as a diff */
	RDP_RELOAD_REJECTED,  /* invalid (or could not be applied): the old one keeps serving */
	RDP_RELOAD_UNCHANGED, /* a change event that left the bytes as they were */
	RDP_RELOAD_N_RESULTS,
};
const char *rdp_reload_result_name(enum rdp_reload_result r);

/* Upper bounds (seconds) of the rescan duration histogram's buckets; +Inf is implied. */
#define RDP_RESCAN_BUCKETS 10
extern const double rdp_rescan_bucket_le[RDP_RESCAN_BUCKETS];

struct rdp_daemon_counters {
	uint64_t kubelet_restarts;
	uint64_t rescans[RDP_RESCAN_N_CAUSES];
	uint64_t rescan_bucket[RDP_RESCAN_BUCKETS]; /* not cumulative: one bucket per scan */
	uint64_t rescan_count;
	double rescan_seconds; /* sum */
	uint64_t reloads[RDP_RELOAD_N_RESULTS];
	uint64_t scrape_errors; /* counter files that could not be read */
};

/* Counts a rescan that ran for why and took usec. */
void rdp_daemon_count_rescan(struct rdp_daemon_counters *c, const char *why, uint64_t usec);

struct rdp_plugin_metrics {
	const char *version, *revision;
	const struct rdp_resource_status *res; /* the configured resources, in config order */
	size_t n_res;
	const struct rdp_daemon_counters *counters;
	const struct rdp_http_stats *http; /* the metrics endpoint's server; NULL: none */
	int lock_held; /* 1, 0 */
	double scrape_seconds; /* this scrape so far */
};

/* Writes the plugin's families to m. Returns 0, -ENOMEM or -E2BIG (m's bound). */
int rdp_plugin_metrics_write(struct rdp_mtext *m, const struct rdp_plugin_metrics *p);
