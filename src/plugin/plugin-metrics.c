/* SPDX-License-Identifier: MIT */
#include "plugin-metrics.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lifecycle.h"
#include "macro.h"
#include "http-server.h"
#include "metrics-text.h"

const double rdp_rescan_bucket_le[RDP_RESCAN_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025,
							  0.05,  0.1,    0.25,  1,    5};

static const char *const cause_names[RDP_RESCAN_N_CAUSES] = {
	[RDP_RESCAN_START] = "start",
	[RDP_RESCAN_PERIODIC] = "periodic",
	[RDP_RESCAN_HOST] = "host-change",
	[RDP_RESCAN_CONFIG] = "config",
	[RDP_RESCAN_ALLOCATE_CHECK] = "allocate-check",
	[RDP_RESCAN_OTHER] = "other",
};

const char *rdp_rescan_cause_name(enum rdp_rescan_cause c)
{
	return c < RDP_RESCAN_N_CAUSES ? cause_names[c] : "other";
}

static bool starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

enum rdp_rescan_cause rdp_rescan_cause(const char *why)
{
	/* The host watcher's reasons (hostwatch.h): "dev...", "uevent...", "link:...",
	 * "inotify-overflow", "rtnl-..."; the port-state poll's (portpoll.h): "port:..." */
	static const char *const host[] = {"dev", "uevent", "link:", "inotify-", "rtnl-", "port:"};

	if (!why)
		return RDP_RESCAN_OTHER;
	if (strcmp(why, "start") == 0)
		return RDP_RESCAN_START;
	if (strcmp(why, "periodic") == 0)
		return RDP_RESCAN_PERIODIC;
	if (strcmp(why, "config-file") == 0 || strcmp(why, "sighup") == 0)
		return RDP_RESCAN_CONFIG;
	if (strcmp(why, "allocate-check") == 0)
		return RDP_RESCAN_ALLOCATE_CHECK;
	for (size_t i = 0; i < ARRAY_SIZE(host); i++)
		if (starts(why, host[i]))
			return RDP_RESCAN_HOST;
	return RDP_RESCAN_OTHER;
}

static const char *const reload_names[RDP_RELOAD_N_RESULTS] = {
	[RDP_RELOAD_APPLIED] = "applied",
	[RDP_RELOAD_REJECTED] = "rejected",
	[RDP_RELOAD_UNCHANGED] = "unchanged",
};

const char *rdp_reload_result_name(enum rdp_reload_result r)
{
	return r < RDP_RELOAD_N_RESULTS ? reload_names[r] : "unknown";
}

void rdp_daemon_count_rescan(struct rdp_daemon_counters *c, const char *why, uint64_t usec)
{
	double secs = (double)usec / 1e6;
	size_t b;

	c->rescans[rdp_rescan_cause(why)]++;
	c->rescan_count++;
	c->rescan_seconds += secs;
	for (b = 0; b < RDP_RESCAN_BUCKETS; b++)
		if (secs <= rdp_rescan_bucket_le[b]) {
			c->rescan_bucket[b]++;
			break;
		}
}

/* One family: its header, then one sample per resource of the value get() gives. */
static int per_resource(struct rdp_mtext *m, const struct rdp_plugin_metrics *p, const char *name,
			const char *type, const char *help,
			uint64_t (*get)(const struct rdp_resource_status *r))
{
	int k = rdp_mtext_family(m, name, type, help);

	for (size_t i = 0; k >= 0 && i < p->n_res; i++) {
		const char *labels[] = {"resource", p->res[i].full_name, NULL};

		k = rdp_mtext_sample_u64(m, NULL, labels, get(&p->res[i]));
	}
	return k;
}

static uint64_t get_units(const struct rdp_resource_status *r)
{
	return r->units;
}
static uint64_t get_healthy_units(const struct rdp_resource_status *r)
{
	return r->healthy_units;
}
static uint64_t get_devices(const struct rdp_resource_status *r)
{
	return r->n_devices;
}
static uint64_t get_usable(const struct rdp_resource_status *r)
{
	return r->n_usable;
}
static uint64_t get_serving(const struct rdp_resource_status *r)
{
	return r->serving;
}
static uint64_t get_registered(const struct rdp_resource_status *r)
{
	return r->state == RDP_RES_REGISTERED;
}
static uint64_t get_alloc(const struct rdp_resource_status *r)
{
	return r->counters.allocate_calls;
}
static uint64_t get_alloc_err(const struct rdp_resource_status *r)
{
	return r->counters.allocate_errors;
}
static uint64_t get_preferred(const struct rdp_resource_status *r)
{
	return r->counters.preferred_calls;
}
static uint64_t get_reg(const struct rdp_resource_status *r)
{
	return r->counters.registrations;
}
static uint64_t get_rereg(const struct rdp_resource_status *r)
{
	return r->counters.reregistrations;
}
static uint64_t get_regfail(const struct rdp_resource_status *r)
{
	return r->counters.register_failures;
}

static const struct {
	const char *name, *type, *help;
	uint64_t (*get)(const struct rdp_resource_status *r);
} resource_families[] = {
	{"rdma_dp_resource_units", "gauge",
	 "Units the resource advertises to kubelet (shared: rdmaHcaMax; exclusive: one per "
	 "device).",
	 get_units},
	{"rdma_dp_resource_healthy_units", "gauge", "Units advertised as Healthy.",
	 get_healthy_units},
	{"rdma_dp_resource_devices", "gauge", "RDMA devices the resource's selectors match.",
	 get_devices},
	{"rdma_dp_resource_usable_devices", "gauge",
	 "Matched devices a pod can use (char devices present, not unusable).", get_usable},
	{"rdma_dp_resource_serving", "gauge",
	 "1 when the resource's socket exists and the daemon serves it.", get_serving},
	{"rdma_dp_resource_registered", "gauge",
	 "1 when kubelet accepted the resource's registration.", get_registered},
	{"rdma_dp_allocate_requests_total", "counter", "Allocate calls answered, OK or not.",
	 get_alloc},
	{"rdma_dp_allocate_errors_total", "counter", "Allocate calls answered with an error.",
	 get_alloc_err},
	{"rdma_dp_preferred_allocation_requests_total", "counter",
	 "GetPreferredAllocation calls answered.", get_preferred},
	{"rdma_dp_registrations_total", "counter", "Registrations kubelet accepted.", get_reg},
	{"rdma_dp_reregistrations_total", "counter",
	 "Registrations after the first one (kubelet restarted, the socket was lost, the mode "
	 "changed).",
	 get_rereg},
	{"rdma_dp_registration_failures_total", "counter",
	 "Registrations kubelet refused or did not answer.", get_regfail},
};

static int one(struct rdp_mtext *m, const char *name, const char *type, const char *help,
	       const char *const *labels, uint64_t v)
{
	int k = rdp_mtext_family(m, name, type, help);

	return k < 0 ? k : rdp_mtext_sample_u64(m, NULL, labels, v);
}

static int rescan_histogram(struct rdp_mtext *m, const struct rdp_daemon_counters *c)
{
	uint64_t cum = 0;
	int k = rdp_mtext_family(m, "rdma_dp_rescan_duration_seconds", "histogram",
				 "Wall time of the daemon's rescans of sysfs and /dev.");

	for (size_t b = 0; k >= 0 && b < RDP_RESCAN_BUCKETS; b++) {
		char le[32];
		const char *labels[] = {"le", le, NULL};

		cum += c->rescan_bucket[b];
		snprintf(le, sizeof(le), "%g", rdp_rescan_bucket_le[b]);
		k = rdp_mtext_sample_u64(m, "_bucket", labels, cum);
	}
	if (k >= 0) {
		const char *labels[] = {"le", "+Inf", NULL};

		k = rdp_mtext_sample_u64(m, "_bucket", labels, c->rescan_count);
	}
	if (k >= 0)
		k = rdp_mtext_sample_double(m, "_sum", NULL, c->rescan_seconds);
	if (k >= 0)
		k = rdp_mtext_sample_u64(m, "_count", NULL, c->rescan_count);
	return k;
}

static int http_families(struct rdp_mtext *m, const struct rdp_http_stats *h)
{
	static const char *const classes[] = {"1xx", "2xx", "3xx", "4xx", "5xx"};
	int k = rdp_mtext_family(m, "rdma_dp_http_responses_total", "counter",
				 "Responses of the metrics endpoint, by status class.");

	for (size_t i = 0; k >= 0 && i < ARRAY_SIZE(classes); i++) {
		const char *labels[] = {"code", classes[i], NULL};

		k = rdp_mtext_sample_u64(m, NULL, labels, h->responses[i + 1]);
	}
	if (k >= 0)
		k = rdp_mtext_family(m, "rdma_dp_http_connections_rejected_total", "counter",
				     "Connections and requests of the metrics endpoint refused by its "
				     "bounds.");
	if (k >= 0) {
		const char *full[] = {"reason", "max-connections", NULL};
		const char *rate[] = {"reason", "rate-limit", NULL};
		const char *bad[] = {"reason", "bad-request", NULL};

		k = rdp_mtext_sample_u64(m, NULL, full, h->rejected_full);
		if (k >= 0)
			k = rdp_mtext_sample_u64(m, NULL, rate, h->rate_limited);
		if (k >= 0)
			k = rdp_mtext_sample_u64(m, NULL, bad, h->bad_requests);
	}
	if (k >= 0)
		k = rdp_mtext_family(m, "rdma_dp_http_timeouts_total", "counter",
				     "Connections of the metrics endpoint closed by a timeout.");
	if (k >= 0) {
		const char *req[] = {"kind", "request", NULL};
		const char *idle[] = {"kind", "idle", NULL};
		const char *wr[] = {"kind", "write", NULL};

		k = rdp_mtext_sample_u64(m, NULL, req, h->timeout_request);
		if (k >= 0)
			k = rdp_mtext_sample_u64(m, NULL, idle, h->timeout_idle);
		if (k >= 0)
			k = rdp_mtext_sample_u64(m, NULL, wr, h->timeout_write);
	}
	return k;
}

int rdp_plugin_metrics_write(struct rdp_mtext *m, const struct rdp_plugin_metrics *p)
{
	const struct rdp_daemon_counters *c = p->counters;
	const char *build[] = {"version", p->version ? p->version : "",
			       "revision", p->revision ? p->revision : "", NULL};
	int k;

	k = one(m, "rdma_dp_build_info", "gauge",
		"Version and revision of rdma-dp; the value is always 1.", build, 1);
	for (size_t i = 0; k >= 0 && i < ARRAY_SIZE(resource_families); i++)
		k = per_resource(m, p, resource_families[i].name, resource_families[i].type,
				 resource_families[i].help, resource_families[i].get);
	if (k >= 0)
		k = one(m, "rdma_dp_node_lock_held", "gauge",
			"1 when this daemon holds the node's lock and serves; 0 while another "
			"daemon does.",
			NULL, (uint64_t)(p->lock_held > 0));
	if (k >= 0)
		k = one(m, "rdma_dp_kubelet_restarts_total", "counter",
			"kubelet restarts seen (kubelet.sock created anew).", NULL,
			c->kubelet_restarts);
	if (k >= 0)
		k = rdp_mtext_family(m, "rdma_dp_rescans_total", "counter",
				     "Rescans of sysfs and /dev, by what caused them.");
	for (size_t i = 0; k >= 0 && i < RDP_RESCAN_N_CAUSES; i++) {
		const char *labels[] = {"cause", cause_names[i], NULL};

		k = rdp_mtext_sample_u64(m, NULL, labels, c->rescans[i]);
	}
	if (k >= 0)
		k = rescan_histogram(m, c);
	if (k >= 0)
		k = rdp_mtext_family(m, "rdma_dp_config_reloads_total", "counter",
				     "Configuration reloads (SIGHUP or a change of the file), by "
				     "result.");
	for (size_t i = 0; k >= 0 && i < RDP_RELOAD_N_RESULTS; i++) {
		const char *labels[] = {"result", reload_names[i], NULL};

		k = rdp_mtext_sample_u64(m, NULL, labels, c->reloads[i]);
	}
	if (k >= 0 && p->http)
		k = http_families(m, p->http);
	if (k >= 0)
		k = one(m, "rdma_dp_scrape_errors_total", "counter",
			"Counter files that could not be read or parsed at a scrape.", NULL,
			c->scrape_errors);
	if (k >= 0) {
		k = rdp_mtext_family(m, "rdma_dp_scrape_duration_seconds", "gauge",
				     "Wall time of this scrape, up to these lines.");
		if (k >= 0)
			k = rdp_mtext_sample_double(m, NULL, NULL, p->scrape_seconds);
	}
	return k;
}
