/* SPDX-License-Identifier: MIT */
/*
 * The metrics endpoint of `rdma-dp serve --metrics-address HOST:PORT`: GET /metrics (the
 * Prometheus text format), /healthz and /readyz, on the daemon's loop (http-server.h).
 *
 * /metrics: the fabric counters are read on a thread of their own (fabric-metrics.h): on real
 * HCAs every read of ports/N/counters/ is a MAD to the firmware, and a scrape of a large node
 * is many of them; kubelet's calls on the loop must not wait for that. The loop takes the port
 * list of the current model (ops.targets), the thread reads and renders, the loop appends the
 * plugin's own families (ops.plugin) and answers. Requests arriving during a collection are
 * answered with its result: one collection at a time, however many scrapers.
 *
 * Bounds: the HTTP server's (http-server.h: 16 connections, 8 KiB of headers, timeouts);
 * scrapes share its 20/s bucket, each probe path has its own (RDP_METRICS_PROBE_RATE), so a
 * flood of scrapes never makes kubelet's probes fail.
 *
 * /healthz, /readyz: answered on the loop at once (ops.health). That the loop answers at all is
 * most of the liveness proof (a wedged or stopped daemon does not), as with `rdma-dp health`.
 *
 * The address may be busy (another pod of the DaemonSet on this node still holds it during an
 * update, on hostNetwork): then binding is retried with a backoff (1 s doubling to 30 s),
 * and ops.event says so once per state change.
 *
 * Library code: returns negative errno, never logs (ops.event tells the daemon what to log).
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rdp_event;
struct rdp_mtext;
struct rdp_fabric_targets;
struct rdp_fabric_stats;
struct rdp_http_stats;
struct rdp_metrics_server;

#define RDP_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* Requests a second (and burst) of each probe path, apart from the scrapes' 20/s. */
#define RDP_METRICS_PROBE_RATE 100
#define RDP_METRICS_BIND_RETRY_MIN_USEC (1000 * 1000ULL)
#define RDP_METRICS_BIND_RETRY_MAX_USEC (30 * 1000 * 1000ULL)

enum rdp_metrics_state {
	RDP_METRICS_BIND_RETRY, /* the address could not be bound: retrying */
	RDP_METRICS_LISTENING,
};

struct rdp_metrics_server_ops {
	/*
	 * On the loop: a reference to the ports to read now, from the current model
	 * (fabric-metrics.h; the server drops it when the scrape ends). *ret may be set to NULL
	 * (no model yet): the scrape then has the plugin families only.
	 */
	int (*targets)(void *userdata, struct rdp_fabric_targets **ret);
	/* On the loop: the plugin's families, appended after the fabric ones. */
	int (*plugin)(void *userdata, struct rdp_mtext *m, const struct rdp_fabric_stats *fabric,
		      const struct rdp_http_stats *http, double scrape_seconds);
	/* On the loop: 200 or 503 for /healthz (ready false) or /readyz, reason in buf. */
	int (*health)(void *userdata, bool ready, char *buf, size_t len);
	/* The listening state changed: state, the bound address, the error of a failed bind. */
	void (*state_changed)(void *userdata, enum rdp_metrics_state state, const char *address,
			      int error);
	void *userdata;
};

/*
 * Starts serving on address ("0.0.0.0:9470", "[::1]:9470", ":9470"). An invalid address is
 * -EINVAL with the reason in err; a bind failure (busy, not yet available) is not an error:
 * the server retries (ops.state_changed). Returns 0, -EINVAL, -ENOMEM, or the errno of the
 * thread's creation.
 */
int rdp_metrics_server_new(struct rdp_event *e, const char *address,
			   const struct rdp_metrics_server_ops *ops, struct rdp_metrics_server **ret,
			   char *err, size_t errlen);
/*
 * The probe listener (`serve --probe-address 127.0.0.1:9471`): the same server answering
 * /healthz and /readyz only (404 for /metrics: no collector thread), with connection slots
 * of its own, so that clients holding the metrics port's slots cannot fail kubelet's probes.
 * ops.targets and ops.plugin are not called.
 */
int rdp_metrics_server_new_probes(struct rdp_event *e, const char *address,
				  const struct rdp_metrics_server_ops *ops,
				  struct rdp_metrics_server **ret, char *err, size_t errlen);
/* Stops the thread (a running collection is waited for), closes every connection. NULL ok. */
struct rdp_metrics_server *rdp_metrics_server_free(struct rdp_metrics_server *s);
enum rdp_metrics_state rdp_metrics_server_state(const struct rdp_metrics_server *s);
