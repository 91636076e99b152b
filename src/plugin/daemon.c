/* SPDX-License-Identifier: MIT */
#include "daemon.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "cdi.h"
#include "oci-hook.h"
#include "config.h"
#include "device.h"
#include "diag.h"
#include "discovery.h"
#include "event.h"
#include "log.h"
#include "macro.h"
#include "pool.h"
#include "registration.h"
#include "rescan.h"
#include "run.h"
#include "resource.h"
#include "scan-worker.h"
#include "status.h"
#include "lock.h"
#include "hostwatch.h"
#include "portpoll.h"
#include "confwatch.h"
#include "fabric-metrics.h"
#include "metrics-server.h"
#include "plugin-metrics.h"
#include <fcntl.h>
#include <malloc.h>

#define KUBELET_SOCK "kubelet.sock"
#define REWATCH_USEC (1000 * 1000ULL)
#define LOCK_RETRY_USEC (1000 * 1000ULL)

/* A directory of kubelet's that the daemon watches with inotify. */
struct dirwatch {
	char *path;
	int wd; /* -1: not watched (absent, or gone) */
};

struct daemon {
	const struct rdp_daemon_options *o;
	bool auto_mode; /* --registration auto: follow kubelet */
	enum rdp_registration_mode mode; /* resolved: never AUTO */
	struct rdp_event *event;
	struct rdp_config *config;
	struct dirwatch plugin_dir; /* <root>/device-plugins: kubelet.sock, kubelet-sock sockets */
	struct dirwatch registry_dir; /* <root>/plugins_registry: plugin-watcher sockets */
	char *kubelet_sock; /* <plugin_dir>/kubelet.sock */
	struct rdp_resources *res;
	int inotify_fd;
	struct rdp_event_source *inotify_src, *apply_src, *rescan_src, *rewatch_src;
	char *pool_warnings; /* the last pool warnings logged, to log only changes */
	int netns_logged; /* -1: not yet; else the rdp_netns_mode last logged */
	struct rdp_scan_worker *worker; /* owns the scanner: scans run off the loop */
	bool pools_stale; /* new config or failed update: rebuild on an unchanged host too */
	unsigned int scan_flags; /* the scanner's discovery flags (discovery.h) */
	bool scan_flags_pending; /* scan_flags changed while a scan ran: set them after it */
	/* Scans to wait for before answering Allocate calls parked for a rescan (0: none). */
	unsigned int refresh_scans;
	/* Scans to wait for until the model has seen the last host change reported (0: none). */
	unsigned int dirty_scans;
	/* status.h: what we serve, for `rdma-dp health` (written from publish_src) */
	char *state_dir; /* <sock_dir>/.rdma-dp */
	struct rdp_event_source *publish_src;
	uint64_t status_gen;
	int status_error; /* the last write error logged, 0 when the last write worked */
	/* Event-driven: host changes (hostwatch.h) and config file changes (confwatch.h). */
	struct rdp_hostwatch *hostwatch;
	/* The served ports' state files, read every RDP_PORTPOLL_INTERVAL_USEC (portpoll.h). */
	struct rdp_portpoll *portpoll;
	struct rdp_confwatch *confwatch;
	uint64_t config_digest; /* of the bytes last loaded (or rejected); 0: none */
	/* lock.h: one daemon per node; sockets only once it is held */
	struct rdp_lock *lock;
	struct rdp_event_source *lock_src;
	pid_t lock_holder_logged; /* -1: nothing logged yet */
	/* The metrics endpoint (--metrics-address), its counters, the ports it reads. */
	struct rdp_metrics_server *metrics;
	struct rdp_metrics_server *probes; /* --probe-address */
	struct rdp_daemon_counters counters;
	struct rdp_fabric_targets *fabric; /* of the last model; a scrape takes a reference */
	uint64_t scrape_errors_logged; /* digest of the read errors last logged */
};

static void log_diags(const struct rdp_diags *diags, const char *event)
{
	for (size_t i = 0; i < diags->n; i++) {
		const struct rdp_diag *g = &diags->v[i];
		enum rdp_log_level l = g->level == RDP_DIAG_ERROR     ? RDP_LOG_ERROR
				       : g->level == RDP_DIAG_WARNING ? RDP_LOG_WARNING
								      : RDP_LOG_INFO;

		rdp_log(l, event, "msg=%s", rdp_log_q(g->text));
	}
}

static const char *sock_dir(const struct daemon *d)
{
	return d->mode == RDP_REGISTRATION_KUBELET_SOCK ? d->plugin_dir.path
							: d->registry_dir.path;
}

/* Scans. */

/*
 * What the daemon's scans read: only what it serves (RDP_DISCOVER_SERVE: no GID index,
 * fw_ver, phys_state or rate), and no GID table at all while no selector matches netdev
 * names (the GID table only adds netdevs: a RoCE LAG's bond, a VLAN).
 */
static unsigned int scan_flags(const struct rdp_config *c)
{
	for (size_t i = 0; i < c->n_resources; i++)
		if (c->resources[i].sel.if_names.n > 0)
			return RDP_DISCOVER_SERVE;
	return RDP_DISCOVER_SERVE | RDP_DISCOVER_NO_GID_TABLE;
}

/* Only while no scan runs, or from the done callback (the worker waits then). */
static void apply_scan_flags(struct daemon *d)
{
	d->scan_flags_pending = false;
	rdp_scanner_set_flags(rdp_scan_worker_scanner(d->worker), d->scan_flags);
}

static void log_host(struct daemon *d, const struct rdp_host *h)
{
	if ((int)h->netns_mode == d->netns_logged)
		return;
	if (h->netns_mode == RDP_NETNS_EXCLUSIVE)
		rdp_log(RDP_LOG_WARNING, "netns-exclusive", "msg=%s",
			rdp_log_q("the RDMA subsystem is in exclusive network namespace mode "
				  "(rdma system netns exclusive): RDMA devices are only visible "
				  "in the namespace that owns them, so the shared char devices "
				  "handed to pods will not reach them; set 'rdma system set netns "
				  "shared' or use an exclusive-mode plugin (rdma-cni). Serving "
				  "anyway."));
	else if (d->netns_logged >= 0)
		rdp_log(RDP_LOG_INFO, "netns-shared", "msg=%s",
			rdp_log_q("the RDMA subsystem is back in shared netns mode"));
	d->netns_logged = (int)h->netns_mode;
}

/* Logs the pool warnings (empty pool, device in two pools) when they differ from the last. */
static void log_pool_diags(struct daemon *d, const struct rdp_diags *diags)
{
	size_t len = 1;
	char *all;

	for (size_t i = 0; i < diags->n; i++)
		len += strlen(diags->v[i].text) + 1;
	all = rdp_malloc(len);
	if (!all)
		return;
	all[0] = '\0';
	for (size_t i = 0; i < diags->n; i++) {
		strcat(all, diags->v[i].text);
		strcat(all, "\n");
	}
	if (!d->pool_warnings || strcmp(all, d->pool_warnings) != 0) {
		log_diags(diags, "pool-warning");
		rdp_free(d->pool_warnings);
		d->pool_warnings = all;
	} else {
		rdp_free(all);
	}
}

/*
 * The devices of the pools are the ones whose port state is polled and whose netdevs' link
 * messages count even where their kind (veth, dummy...) is otherwise ignored.
 */
static void on_port_change(const char *reason, unsigned int n_changes, void *userdata);

static void watch_served(struct daemon *d, const struct rdp_host *h,
			 const struct rdp_pools *pools)
{
	_cleanup_free_ bool *watch = rdp_calloc(h->n_devices + 1, sizeof(*watch));
	_cleanup_free_ const char **names = NULL;
	size_t n_names = 0, cap = 0;

	if (!watch)
		return; /* -ENOMEM: the old lists stay until the next scan */
	for (size_t i = 0; i < pools->n; i++)
		for (size_t j = 0; j < pools->v[i].n_devices; j++)
			watch[pools->v[i].devices[j]] = true;
	/* Made with the first model (the sysfs root exists then); without it, the periodic
	 * rescan alone sees port changes. */
	if (!d->portpoll &&
	    rdp_portpoll_new(d->event, d->o->sysfs_root, 0, on_port_change, d, &d->portpoll) < 0)
		d->portpoll = NULL;
	(void)rdp_portpoll_set(d->portpoll, h, watch);
	for (size_t i = 0; i < h->n_devices; i++)
		if (watch[i])
			cap += h->devices[i].n_netdevs;
	names = rdp_calloc(cap + 1, sizeof(*names));
	if (!names)
		return;
	for (size_t i = 0; i < h->n_devices; i++)
		for (size_t j = 0; watch[i] && j < h->devices[i].n_netdevs; j++)
			names[n_names++] = h->devices[i].netdevs[j];
	(void)rdp_hostwatch_set_netdevs(d->hostwatch, names, n_names);
}

/*
 * Rebuilds the pools from the scanner's current host model and updates every resource, then
 * starts those that never started. Only while no scan runs (or from the done callback).
 */
static int update_pools(struct daemon *d, const char *why)
{
	const struct rdp_host *h = rdp_scanner_host(rdp_scan_worker_scanner(d->worker));
	struct rdp_pools *pools = NULL;
	struct rdp_diags diags = {0};
	int k;

	if (!h)
		return -ENODATA;
	d->pools_stale = false;
	log_host(d, h);
	k = rdp_pools_build(d->config, h, &pools, &diags);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "rescan-failed", "error=%s why=%s", rdp_log_errno(k),
			rdp_log_q(why));
		d->pools_stale = true;
		goto out;
	}
	log_pool_diags(d, &diags);
	watch_served(d, h, pools);
	k = rdp_resources_update(d->res, h, pools);
	if (k < 0)
		d->pools_stale = true;
	rdp_resources_start(d->res);
out:
	rdp_diags_done(&diags);
	rdp_pools_free(pools);
	return k;
}

/*
 * The metrics endpoint (metrics-server.h). The ports a scrape reads come from the model of the
 * last scan that changed it; a scrape holds its own reference, so a rescan meanwhile is safe.
 */

static void refresh_fabric(struct daemon *d)
{
	const struct rdp_host *h = rdp_scanner_host(rdp_scan_worker_scanner(d->worker));
	struct rdp_fabric_targets *t = NULL;

	if (!d->o->metrics_address || !h)
		return;
	if (rdp_fabric_targets_from_host(h, d->o->sysfs_root, &t) < 0)
		return; /* -ENOMEM: the old list serves until the next change */
	rdp_fabric_targets_unref(d->fabric);
	d->fabric = t;
}

/*
 * What the configured resources serve now (resource.h), allocated (rdp_free()); *n gets how
 * many. NULL on allocation failure. Read by the status file, the metrics and the probes.
 */
static struct rdp_resource_status *resources_snapshot(const struct daemon *d, size_t *n)
{
	size_t count = d->res ? rdp_resources_count(d->res) : 0;
	struct rdp_resource_status *rs = rdp_calloc(count + 1, sizeof(*rs));

	*n = rs && d->res ? rdp_resources_status(d->res, rs, count) : 0;
	return rs;
}

#define FNV64_OFFSET 0xcbf29ce484222325ULL

/* FNV-1a over len bytes, continuing from h (FNV64_OFFSET to start). */
static uint64_t fnv1a64(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 0x100000001b3ULL;
	return h;
}

/* Counted at every scrape, logged when what fails changes (not at every scrape). */
static void log_scrape_errors(struct daemon *d, const struct rdp_fabric_stats *fs)
{
	const char *first = fs->n_errors ? fs->errors[0] : "";
	uint64_t h = fnv1a64(FNV64_OFFSET, first, strlen(first)) ^ fs->read_errors;

	d->counters.scrape_errors += fs->read_errors;
	if (h == d->scrape_errors_logged)
		return;
	d->scrape_errors_logged = h;
	if (fs->read_errors)
		rdp_log(RDP_LOG_WARNING, "metrics-read-errors", "files=%lu first=%s msg=%s",
			fs->read_errors, rdp_log_q(first),
			rdp_log_q("these counters are left out of the scrape"));
	else
		rdp_log(RDP_LOG_INFO, "metrics-read-errors", "files=0");
}

static int metrics_targets(void *userdata, struct rdp_fabric_targets **ret)
{
	struct daemon *d = userdata;

	*ret = d->fabric ? rdp_fabric_targets_ref(d->fabric) : NULL;
	return 0;
}

static int metrics_plugin(void *userdata, struct rdp_mtext *m, const struct rdp_fabric_stats *fs,
			  const struct rdp_http_stats *hs, double scrape_seconds)
{
	struct daemon *d = userdata;
	size_t n;
	struct rdp_resource_status *rs = resources_snapshot(d, &n);
	struct rdp_plugin_metrics p = {
		.version = RDP_VERSION,
		.revision = RDP_REVISION,
		.res = rs,
		.n_res = n,
		.counters = &d->counters,
		.http = hs,
		.lock_held = d->lock && rdp_lock_state(d->lock) == RDP_LOCK_HELD,
		.scrape_seconds = scrape_seconds,
	};
	int k;

	if (!rs)
		return -ENOMEM;
	if (fs)
		log_scrape_errors(d, fs);
	k = rdp_plugin_metrics_write(m, &p);
	rdp_free(rs);
	return k;
}

static int metrics_health(void *userdata, bool ready, char *buf, size_t len)
{
	struct daemon *d = userdata;
	size_t n;
	struct rdp_resource_status *rs = resources_snapshot(d, &n);
	bool held = d->lock && rdp_lock_state(d->lock) == RDP_LOCK_HELD;
	size_t registered = 0;
	int code = 200;

	if (!rs) {
		snprintf(buf, len, "out of memory");
		return 503;
	}
	if (!held) {
		/* Alive (the loop answers); the daemon holding the lock serves the node. */
		snprintf(buf, len, "waiting for the node's lock: another rdma-dp serves this node");
		code = ready ? 503 : 200;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		/* As `rdma-dp health`: every socket the daemon says it serves must be there. */
		if (rs[i].serving && (stat(rs[i].sock_path, &st) < 0 || !S_ISSOCK(st.st_mode))) {
			snprintf(buf, len, "%s: the socket the daemon serves is gone: %s",
				 rs[i].full_name, rs[i].sock_path);
			code = 503;
			goto out;
		}
		if (ready && rs[i].state != RDP_RES_REGISTERED) {
			snprintf(buf, len, "%s: not registered with kubelet (state %s)",
				 rs[i].full_name, rdp_res_state_name(rs[i].state));
			code = 503;
			goto out;
		}
		registered += rs[i].state == RDP_RES_REGISTERED;
	}
	snprintf(buf, len, "ok: %zu resources, %zu registered", n, registered);
out:
	rdp_free(rs);
	return code;
}

static void metrics_state_changed(void *userdata, enum rdp_metrics_state state,
				  const char *address, int error)
{
	(void)userdata;
	if (state == RDP_METRICS_LISTENING)
		rdp_log(RDP_LOG_INFO, "metrics-serving", "address=%s paths=%s", address,
			rdp_log_q("/metrics /healthz /readyz"));
	else
		rdp_log(RDP_LOG_WARNING, "metrics-bind-failed", "address=%s error=%s msg=%s",
			address, rdp_log_errno(error),
			rdp_log_q("retrying; kubelet's calls are served meanwhile"));
}

static void probes_state_changed(void *userdata, enum rdp_metrics_state state,
				 const char *address, int error)
{
	(void)userdata;
	if (state == RDP_METRICS_LISTENING)
		rdp_log(RDP_LOG_INFO, "probes-serving", "address=%s paths=%s", address,
			rdp_log_q("/healthz /readyz"));
	else
		rdp_log(RDP_LOG_WARNING, "probes-bind-failed", "address=%s error=%s msg=%s",
			address, rdp_log_errno(error),
			rdp_log_q("retrying; kubelet's calls are served meanwhile"));
}

/* --probe-address: the probes' own listener (its own connection slots). */
static int probes_start(struct daemon *d)
{
	struct rdp_metrics_server_ops o = {
		.health = metrics_health,
		.state_changed = probes_state_changed,
		.userdata = d,
	};
	char err[256] = "";
	int k;

	if (!d->o->probe_address)
		return 0;
	k = rdp_metrics_server_new_probes(d->event, d->o->probe_address, &o, &d->probes, err,
					  sizeof(err));
	if (k < 0)
		rdp_log(RDP_LOG_ERROR, "probes-failed", "address=%s error=%s msg=%s",
			rdp_log_q(d->o->probe_address), rdp_log_errno(k),
			rdp_log_q(err[0] ? err : "cannot serve the probe endpoint"));
	return k;
}

static int metrics_start(struct daemon *d)
{
	static const struct rdp_metrics_server_ops ops = {
		.targets = metrics_targets,
		.plugin = metrics_plugin,
		.health = metrics_health,
		.state_changed = metrics_state_changed,
	};
	struct rdp_metrics_server_ops o = ops;
	char err[256] = "";
	int k;

	if (!d->o->metrics_address)
		return 0;
	o.userdata = d;
	k = rdp_metrics_server_new(d->event, d->o->metrics_address, &o, &d->metrics, err,
				   sizeof(err));
	if (k < 0)
		rdp_log(RDP_LOG_ERROR, "metrics-failed", "address=%s error=%s msg=%s",
			rdp_log_q(d->o->metrics_address), rdp_log_errno(k),
			rdp_log_q(err[0] ? err : "cannot serve the metrics endpoint"));
	return k;
}

static void on_scan_done(const struct rdp_scan_result *res, void *userdata)
{
	struct daemon *d = userdata;
	const struct rdp_host *h = rdp_scanner_host(rdp_scan_worker_scanner(d->worker));
	/* A scan that began before the refresh was asked for does not count. */
	bool refresh = d->refresh_scans > 0 && --d->refresh_scans == 0;

	if (d->dirty_scans > 0)
		d->dirty_scans--;
	rdp_daemon_count_rescan(&d->counters, res->why, res->usec);

	/* The next scan (queued by the reload that changed them) reads with the new flags. */
	if (d->scan_flags_pending)
		apply_scan_flags(d);

	if (res->result < 0) {
		rdp_log(RDP_LOG_ERROR, "discovery-failed", "sysfs=%s dev=%s error=%s why=%s",
			rdp_log_q(d->o->sysfs_root), rdp_log_q(d->o->dev_root),
			rdp_log_errno(res->result), rdp_log_q(res->why));
		if (refresh)
			rdp_resources_refreshed(d->res);
		return;
	}
	rdp_log(RDP_LOG_DEBUG, "rescanned", "why=%s devices=%zu changed=%d full=%d ms=%llu",
		rdp_log_q(res->why), h ? h->n_devices : 0, res->result, res->full,
		(unsigned long long)(res->usec / 1000));
	if (res->result > 0 || d->pools_stale)
		update_pools(d, res->why);
	if (res->result > 0)
		refresh_fabric(d);
	/*
	 * A full discovery of a large node allocates a few MiB and frees most of it again (the
	 * previous model, the records): give that back to the kernel rather than keep it
	 * resident until the next one.
	 */
	if (res->full)
		malloc_trim(0);
	/* Parked Allocate calls whose rescan found nothing new get their final answer. */
	if (refresh)
		rdp_resources_refreshed(d->res);
}

static int request_scan(struct daemon *d, enum rdp_scan_mode mode, const char *why)
{
	return rdp_scan_worker_request(d->worker, mode, why);
}

static void arm_rescan(struct daemon *d)
{
	uint64_t usec = (uint64_t)d->config->periodic_update_interval * 1000000ULL;

	if (d->rescan_src)
		rdp_event_source_set_timer(d->rescan_src, usec);
}

static int on_rescan_timer(struct rdp_event_source *s, void *userdata)
{
	struct daemon *d = userdata;

	request_scan(d, RDP_SCAN_AUTO, "periodic");
	arm_rescan(d);
	return 0;
}

/* Hooks of the resource set. */

static void drain_inotify(struct daemon *d);

static void hook_before_register(void *userdata)
{
	drain_inotify(userdata);
}

static void hook_refresh(void *userdata)
{
	struct daemon *d = userdata;

	/* A running scan may have read the host before the change: the one after it counts. */
	d->refresh_scans = (unsigned int)request_scan(d, RDP_SCAN_AUTO, "allocate-check");
}

/*
 * The dev watch saw nothing unreported, and every change it reported was seen by a scan since:
 * the state's nodes are the host's. (A scan for another reason, SIGHUP or the periodic one,
 * changes nothing to that.)
 */
static bool hook_settled(void *userdata)
{
	struct daemon *d = userdata;

	return d->hostwatch && d->worker && rdp_hostwatch_dev_settled(d->hostwatch) &&
	       d->dirty_scans == 0 && d->refresh_scans == 0;
}

static void hook_changed(void *userdata)
{
	struct daemon *d = userdata;

	if (d->publish_src)
		rdp_event_source_defer(d->publish_src);
}

/* The status file the liveness probe reads (status.h). */

static void publish_status(struct daemon *d)
{
	size_t n;
	struct rdp_resource_status *rs = resources_snapshot(d, &n);
	struct rdp_status_resource *v = rdp_calloc(n + 1, sizeof(*v));
	struct rdp_status st = {
		.pid = getpid(),
		.generation = ++d->status_gen,
		.mode = (char *)rdp_registration_mode_name(d->mode),
		.resources = v,
		.n_resources = n,
	};
	int k = v && rs ? 0 : -ENOMEM;

	if (k == 0) {
		for (size_t i = 0; i < n; i++) {
			v[i].name = (char *)rs[i].full_name;
			v[i].socket = (char *)rs[i].sock_path;
			v[i].serving = rs[i].serving;
			v[i].units = rs[i].units;
			v[i].healthy = (long long)rs[i].healthy_units;
		}
		k = rdp_status_write(d->state_dir, &st);
	}
	rdp_free(v);
	rdp_free(rs);
	if (k < 0 && k != d->status_error)
		rdp_log(RDP_LOG_WARNING, "status-write-failed", "dir=%s error=%s msg=%s",
			rdp_log_q(d->state_dir), rdp_log_errno(k),
			rdp_log_q("rdma-dp health (the liveness probe) cannot see this daemon"));
	else if (k == 0 && d->status_error)
		rdp_log(RDP_LOG_INFO, "status-written", "dir=%s", rdp_log_q(d->state_dir));
	d->status_error = k;
}

static int on_publish(struct rdp_event_source *s, void *userdata)
{
	struct daemon *d = userdata;

	/* Nothing to say before the lock is ours: the holder's status is the node's. */
	if (rdp_lock_state(d->lock) == RDP_LOCK_HELD)
		publish_status(d);
	return 0;
}

static void unpublish_status(struct daemon *d)
{
	if (d->state_dir && d->status_gen > 0)
		(void)rdp_status_remove(d->state_dir);
}

/* inotify on kubelet's directories: kubelet restarts, our sockets deleted. */

static bool exists(const char *path, mode_t type)
{
	struct stat st;

	return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

static void schedule_apply(struct daemon *d)
{
	if (d->apply_src)
		rdp_event_source_defer(d->apply_src);
}

/* True when the daemon needs a watch on w in the current mode. */
static bool watch_needed(const struct daemon *d, const struct dirwatch *w)
{
	if (w == &d->plugin_dir)
		return d->mode == RDP_REGISTRATION_KUBELET_SOCK || d->auto_mode;
	return d->mode == RDP_REGISTRATION_PLUGINS_REGISTRY;
}

static int watch_dir(struct daemon *d, struct dirwatch *w)
{
	int wd = inotify_add_watch(d->inotify_fd, w->path,
				   IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
					   IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);

	if (wd < 0)
		return -errno;
	w->wd = wd;
	return 0;
}

static void kubelet_appeared(struct daemon *d, const char *why)
{
	d->counters.kubelet_restarts++;
	rdp_resources_kubelet_restarted(d->res);
	rdp_log(RDP_LOG_INFO, "kubelet-restarted", "kubelet=%s why=%s", rdp_log_q(d->kubelet_sock),
		why);
	schedule_apply(d);
}

/*
 * auto mode: the plugin watcher while plugins_registry exists, kubelet.sock otherwise; the
 * mode follows kubelet when a restart brings plugins_registry or takes it away.
 */
static void switch_mode(struct daemon *d, enum rdp_registration_mode mode, const char *why)
{
	enum rdp_registration_mode old = d->mode;
	int k;

	if (mode == old)
		return;
	d->mode = mode;
	rdp_log(RDP_LOG_INFO, "registration-mode", "from=%s to=%s why=%s",
		rdp_registration_mode_name(old), rdp_registration_mode_name(mode), why);
	k = rdp_resources_set_mode(d->res, mode, sock_dir(d));
	if (k < 0)
		rdp_log(RDP_LOG_ERROR, "registration-mode-failed", "error=%s", rdp_log_errno(k));
	/* The status follows the sockets (the lock stays where it was taken). */
	{
		char *dir = NULL;

		if (rdp_state_dir(sock_dir(d), &dir) >= 0) {
			unpublish_status(d);
			(void)rmdir(d->state_dir); /* fails while the lock file is in it */
			rdp_free(d->state_dir);
			d->state_dir = dir;
			hook_changed(d);
		}
	}
	if (d->registry_dir.wd >= 0 && !watch_needed(d, &d->registry_dir)) {
		inotify_rm_watch(d->inotify_fd, d->registry_dir.wd);
		d->registry_dir.wd = -1;
	}
	if (d->registry_dir.wd < 0 && watch_needed(d, &d->registry_dir) && d->rewatch_src)
		rdp_event_source_set_timer(d->rewatch_src, 1);
}

static void dir_gone(struct daemon *d, struct dirwatch *w)
{
	w->wd = -1;
	/* auto: plugins_registry gone while kubelet.sock serves: kubelet.sock it is. */
	if (d->auto_mode && w == &d->registry_dir &&
	    d->mode == RDP_REGISTRATION_PLUGINS_REGISTRY && !exists(w->path, S_IFDIR) &&
	    exists(d->kubelet_sock, S_IFSOCK)) {
		switch_mode(d, RDP_REGISTRATION_KUBELET_SOCK, "plugins_registry-gone");
		return;
	}
	if (strcmp(w->path, sock_dir(d)) == 0)
		rdp_log(RDP_LOG_WARNING, "socket-dir-gone", "dir=%s", rdp_log_q(w->path));
	if (d->rewatch_src)
		rdp_event_source_set_timer(d->rewatch_src, REWATCH_USEC);
}

static void on_dir_event(struct daemon *d, struct dirwatch *w, const struct inotify_event *ev)
{
	const char *name = ev->len ? ev->name : "";
	bool ours = strcmp(w->path, sock_dir(d)) == 0;

	if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
		dir_gone(d, w);
		return;
	}
	if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && w == &d->plugin_dir &&
	    strcmp(name, KUBELET_SOCK) == 0) {
		/* auto: a restarted kubelet may have brought plugins_registry along */
		if (d->mode == RDP_REGISTRATION_KUBELET_SOCK && d->auto_mode &&
		    exists(d->registry_dir.path, S_IFDIR))
			switch_mode(d, RDP_REGISTRATION_PLUGINS_REGISTRY, "plugins_registry-exists");
		else if (d->mode == RDP_REGISTRATION_KUBELET_SOCK)
			kubelet_appeared(d, "kubelet.sock-created");
		return;
	}
	if (ours && (ev->mask & (IN_DELETE | IN_MOVED_FROM)) &&
	    rdp_resources_socket_removed(d->res, name))
		schedule_apply(d);
}

static void on_dir_inotify(const struct inotify_event *ev, void *userdata)
{
	struct daemon *d = userdata;

	if (ev->mask & IN_Q_OVERFLOW) {
		/* Lost events: assume the worst, as if kubelet restarted. */
		if (d->mode == RDP_REGISTRATION_KUBELET_SOCK)
			kubelet_appeared(d, "inotify-overflow");
		rdp_resources_check_sockets(d->res);
		schedule_apply(d);
		return;
	}
	if (ev->wd >= 0 && ev->wd == d->plugin_dir.wd)
		on_dir_event(d, &d->plugin_dir, ev);
	else if (ev->wd >= 0 && ev->wd == d->registry_dir.wd)
		on_dir_event(d, &d->registry_dir, ev);
}

/* Reads every queued event; only notes what to do (apply_src acts on it). */
static void drain_inotify(struct daemon *d)
{
	if (d->inotify_fd >= 0)
		rdp_inotify_drain(d->inotify_fd, UINT_MAX, on_dir_inotify, d);
}

static int on_inotify(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata)
{
	drain_inotify(userdata);
	return 0;
}

/* Acts on what drain_inotify() noted: re-creates sockets and re-registers. */
static int on_apply(struct rdp_event_source *s, void *userdata)
{
	struct daemon *d = userdata;

	rdp_resources_apply_pending(d->res);
	return 0;
}

/* Adds the watches that are missing; re-arms itself while one still is. */
static int on_rewatch(struct rdp_event_source *s, void *userdata)
{
	struct daemon *d = userdata;
	struct dirwatch *all[] = {&d->plugin_dir, &d->registry_dir};
	bool missing = false;

	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		struct dirwatch *w = all[i];
		bool ours;

		if (w->wd >= 0 || !watch_needed(d, w))
			continue;
		if (watch_dir(d, w) < 0) {
			missing = true;
			continue;
		}
		ours = strcmp(w->path, sock_dir(d)) == 0;
		if (ours) {
			rdp_log(RDP_LOG_INFO, "socket-dir-back", "dir=%s", rdp_log_q(w->path));
			rdp_resources_restart_all(d->res);
			schedule_apply(d);
		}
		/* kubelet.sock may have been created before the watch (auto, no registry). */
		if (w == &d->plugin_dir && d->mode != RDP_REGISTRATION_KUBELET_SOCK &&
		    !exists(d->registry_dir.path, S_IFDIR) && exists(d->kubelet_sock, S_IFSOCK))
			switch_mode(d, RDP_REGISTRATION_KUBELET_SOCK, "kubelet.sock-found");
	}
	if (missing)
		rdp_event_source_set_timer(s, REWATCH_USEC);
	return 0;
}

/* One daemon per node (lock.h). */

static int on_lock_timer(struct rdp_event_source *s, void *userdata)
{
	struct daemon *d = userdata;
	pid_t holder = 0;
	int k;

	if (rdp_lock_state(d->lock) == RDP_LOCK_HELD) {
		/* Someone removed or replaced the file: it protects nothing any more. */
		if (rdp_lock_check(d->lock) == 0) {
			rdp_log(RDP_LOG_WARNING, "lock-lost", "lock=%s msg=%s",
				rdp_log_q(rdp_lock_path(d->lock)),
				rdp_log_q("the lock file was removed or replaced; taking it again"));
			rdp_lock_release(d->lock, false);
		} else {
			rdp_event_source_set_timer(s, LOCK_RETRY_USEC);
			return 0;
		}
	}
	k = rdp_lock_try(d->lock, &holder);
	if (k == 0) {
		rdp_log(RDP_LOG_INFO, "lock-taken", "lock=%s", rdp_log_q(rdp_lock_path(d->lock)));
		d->lock_holder_logged = -1;
		rdp_resources_enable(d->res);
		publish_status(d);
	} else if (k == -EWOULDBLOCK || k == -EAGAIN) {
		if (holder != d->lock_holder_logged)
			rdp_log(RDP_LOG_WARNING, "waiting-for-lock", "lock=%s holder_pid=%d msg=%s",
				rdp_log_q(rdp_lock_path(d->lock)), (int)holder,
				rdp_log_q("another rdma-dp serves this node (a DaemonSet update with "
					  "maxSurge, or a manual run); taking over when it exits"));
		d->lock_holder_logged = holder;
	} else if (k != -ENOENT) {
		/* The socket directory may be missing yet (-ENOENT): kubelet creates it. */
		rdp_log(RDP_LOG_WARNING, "lock-failed", "lock=%s error=%s",
			rdp_log_q(rdp_lock_path(d->lock)), rdp_log_errno(k));
	}
	rdp_event_source_set_timer(s, LOCK_RETRY_USEC);
	return 0;
}

/* Config reload. */

/*
 * FNV-1a of the config file's bytes (bounded as the parser bounds it), so that a change event
 * that changed nothing (a chmod, kubelet re-projecting the same ConfigMap) is not a reload.
 * 0 when the file cannot be read: then a reload says why.
 */
static uint64_t config_digest(const char *path)
{
	uint64_t h = FNV64_OFFSET;
	size_t total = 0;
	char buf[4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		h = fnv1a64(h, buf, (size_t)n);
		total += (size_t)n;
		if (total > RDP_CONFIG_MAX_BYTES)
			break;
	}
	close(fd);
	return h ? h : 1;
}

static void reload(struct daemon *d, const char *why);

static void on_config_change(const char *reason, unsigned int n_events, void *userdata)
{
	struct daemon *d = userdata;
	uint64_t digest = config_digest(d->o->config_file);

	rdp_log(RDP_LOG_DEBUG, "config-changed", "config=%s why=%s events=%u",
		rdp_log_q(d->o->config_file), rdp_log_q(reason), n_events);
	if (digest != 0 && digest == d->config_digest) {
		rdp_log(RDP_LOG_DEBUG, "config-unchanged", "config=%s",
			rdp_log_q(d->o->config_file));
		d->counters.reloads[RDP_RELOAD_UNCHANGED]++;
		return;
	}
	rdp_log(RDP_LOG_INFO, "reload", "trigger=file config=%s", rdp_log_q(d->o->config_file));
	reload(d, "config-file");
}

static void on_host_change(const char *reason, unsigned int n_events, unsigned int flags,
			   void *userdata)
{
	struct daemon *d = userdata;
	bool lost = flags & RDP_HOSTWATCH_LOST_EVENTS;
	unsigned int n;

	rdp_log(RDP_LOG_DEBUG, "host-changed", "why=%s events=%u lost=%d", rdp_log_q(reason),
		n_events, lost);
	n = (unsigned int)request_scan(d, lost ? RDP_SCAN_FULL : RDP_SCAN_AUTO, reason);
	if (n > d->dirty_scans)
		d->dirty_scans = n;
}

/* A served port's state file changed: the kernel sent no event for it (portpoll.h). */
static void on_port_change(const char *reason, unsigned int n_changes, void *userdata)
{
	struct daemon *d = userdata;

	rdp_log(RDP_LOG_DEBUG, "port-changed", "why=%s ports=%u", rdp_log_q(reason), n_changes);
	request_scan(d, RDP_SCAN_AUTO, reason);
}

/*
 * SIGHUP or a change of the file: a valid config is applied as a diff (resource.h); an
 * invalid one changes nothing. The states of new resources are set before their sockets are
 * created, so that kubelet's first snapshot is already the full one.
 */
static void reload(struct daemon *d, const char *why)
{
	struct rdp_config *c = NULL;
	struct rdp_diags diags = {0};
	size_t added = 0, removed = 0, kept = 0;
	unsigned int old_interval = d->config->periodic_update_interval;
	int k;

	d->config_digest = config_digest(d->o->config_file);
	k = rdp_config_load_file(d->o->config_file, &c, &diags);
	if (k < 0) {
		log_diags(&diags, "config-invalid");
		rdp_log(RDP_LOG_ERROR, "config-rejected", "config=%s errors=%zu error=%s msg=%s",
			rdp_log_q(d->o->config_file), diags.n_errors, rdp_log_errno(k),
			rdp_log_q("keeping the running configuration"));
		rdp_diags_done(&diags);
		d->counters.reloads[RDP_RELOAD_REJECTED]++;
		request_scan(d, RDP_SCAN_FULL, why);
		return;
	}
	log_diags(&diags, "config-warning");
	rdp_diags_done(&diags);
	k = rdp_resources_apply_config(d->res, c, &added, &removed, &kept);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "config-rejected", "config=%s error=%s",
			rdp_log_q(d->o->config_file), rdp_log_errno(k));
		d->counters.reloads[RDP_RELOAD_REJECTED]++;
		rdp_config_free(c);
		return;
	}
	rdp_config_free(d->config);
	d->config = c;
	d->counters.reloads[RDP_RELOAD_APPLIED]++;
	/* A resource whose mode changed registers anew (rdp_resources_apply_config). */
	schedule_apply(d);
	rdp_log(RDP_LOG_INFO, "config-reloaded",
		"config=%s resources=%zu added=%zu removed=%zu kept=%zu why=%s",
		rdp_log_q(d->o->config_file), rdp_resources_count(d->res), added, removed, kept,
		why);
	d->pools_stale = true;
	if (scan_flags(c) != d->scan_flags) {
		/* The model must be read anew (a GID table now matters, or no longer): the
		 * pools wait for that scan. */
		d->scan_flags = scan_flags(c);
		if (rdp_scan_worker_busy(d->worker))
			d->scan_flags_pending = true;
		else
			apply_scan_flags(d);
	} else if (!rdp_scan_worker_busy(d->worker)) {
		/* The host model of the last scan gives the new pools at once. */
		update_pools(d, why);
	}
	request_scan(d, RDP_SCAN_FULL, why);
	if (old_interval != c->periodic_update_interval)
		arm_rescan(d);
}

static void on_sighup(void *userdata)
{
	struct daemon *d = userdata;

	rdp_log(RDP_LOG_INFO, "reload", "signal=SIGHUP config=%s", rdp_log_q(d->o->config_file));
	reload(d, "sighup");
}

/* Start and stop. */

static void daemon_done(void *userdata)
{
	struct daemon *d = userdata;

	d->metrics = rdp_metrics_server_free(d->metrics);
	d->probes = rdp_metrics_server_free(d->probes);
	d->fabric = rdp_fabric_targets_unref(d->fabric);
	/* Sockets first (only ours), while the loop still exists; then the status, the lock. */
	d->res = rdp_resources_free(d->res);
	rdp_event_source_free(d->publish_src);
	rdp_event_source_free(d->lock_src);
	unpublish_status(d);
	if (d->lock && rdp_lock_state(d->lock) == RDP_LOCK_HELD)
		rdp_lock_release(d->lock, true);
	d->lock = rdp_lock_free(d->lock);
	if (d->state_dir)
		(void)rmdir(d->state_dir); /* only when nothing else is in it */
	rdp_free(d->state_dir);
	d->worker = rdp_scan_worker_free(d->worker);
	d->hostwatch = rdp_hostwatch_free(d->hostwatch);
	d->portpoll = rdp_portpoll_free(d->portpoll);
	d->confwatch = rdp_confwatch_free(d->confwatch);
	rdp_event_source_free(d->inotify_src);
	rdp_event_source_free(d->apply_src);
	rdp_event_source_free(d->rescan_src);
	rdp_event_source_free(d->rewatch_src);
	if (d->inotify_fd >= 0)
		close(d->inotify_fd);
	rdp_config_free(d->config);
	rdp_free(d->plugin_dir.path);
	rdp_free(d->registry_dir.path);
	rdp_free(d->kubelet_sock);
	rdp_free(d->pool_warnings);
}

static int daemon_setup(struct rdp_event *e, void *userdata)
{
	struct daemon *d = userdata;
	const struct rdp_daemon_options *o = d->o;
	struct rdp_diags diags = {0};
	struct rdp_resources_hooks hooks = {
		.before_register = hook_before_register,
		.refresh = hook_refresh,
		.settled = hook_settled,
		.changed = hook_changed,
		.userdata = d,
	};
	struct rdp_scanner *scanner = NULL;
	int k;

	d->config_digest = config_digest(o->config_file);
	k = rdp_config_load_file(o->config_file, &d->config, &diags);
	log_diags(&diags, k < 0 ? "config-invalid" : "config-warning");
	rdp_diags_done(&diags);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "config-rejected", "config=%s error=%s",
			rdp_log_q(o->config_file), rdp_log_errno(k));
		return k;
	}
	d->plugin_dir.path = rdp_asprintf("%s/device-plugins", o->kubelet_root);
	d->registry_dir.path = rdp_asprintf("%s/plugins_registry", o->kubelet_root);
	if (!d->plugin_dir.path || !d->registry_dir.path)
		return -ENOMEM;
	d->kubelet_sock = rdp_asprintf("%s/%s", d->plugin_dir.path, KUBELET_SOCK);
	if (!d->kubelet_sock)
		return -ENOMEM;
	d->mode = o->registration;
	d->auto_mode = d->mode == RDP_REGISTRATION_AUTO;
	if (d->auto_mode) {
		/*
		 * As k8s-rdma-shared-dev-plugin (detectPluginWatchMode(): os.Stat of
		 * plugins_registry): the plugin watcher when kubelet's plugins_registry exists,
		 * kubelet.sock otherwise. kubelet marks kubelet.sock deprecated (it writes
		 * device-plugins/DEPRECATION), and a node where both exist registers as the Go
		 * plugin did, so a drop-in replacement changes nothing on the node.
		 */
		d->mode = exists(d->registry_dir.path, S_IFDIR) ? RDP_REGISTRATION_PLUGINS_REGISTRY
								 : RDP_REGISTRATION_KUBELET_SOCK;
	}
	rdp_log(RDP_LOG_INFO, "starting",
		"version=%s config=%s sysfs=%s dev=%s kubelet_root=%s registration=%s auto=%d "
		"resources=%zu rescan_s=%u cdi=%s",
		RDP_VERSION, rdp_log_q(o->config_file), rdp_log_q(o->sysfs_root),
		rdp_log_q(o->dev_root), rdp_log_q(o->kubelet_root),
		rdp_registration_mode_name(d->mode), d->auto_mode,
		d->config->n_resources, d->config->periodic_update_interval,
		o->use_cdi ? rdp_log_q(o->cdi_spec_dir ? o->cdi_spec_dir : RDP_DEFAULT_CDI_SPEC_DIR)
			   : "off");

	/*
	 * One malloc arena for both threads: the scan worker's allocations (the host model it
	 * hands over) are freed by the loop, and a second arena would only hold on to them.
	 */
	(void)mallopt(M_ARENA_MAX, 1);
	/*
	 * A fixed mmap threshold: a scrape of a large node builds a text of a few MiB that is
	 * freed once written. With glibc's dynamic threshold, the first such free raises it and
	 * later texts come from the heap, which keeps them resident after the scrape (measured:
	 * 5.2 -> 8.9 MiB after 40 scrapes of 1000 devices). Mapped, they go back when freed.
	 */
	(void)mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	k = rdp_state_dir(sock_dir(d), &d->state_dir);
	if (k >= 0)
		k = rdp_lock_new(d->state_dir, &d->lock);
	if (k < 0)
		return k;
	d->event = e;
	/* Before the lock: the probes answer while this daemon waits for it. */
	k = metrics_start(d);
	if (k >= 0)
		k = probes_start(d);
	if (k < 0)
		return k;
	/*
	 * The watchers before the first scan: a change during it is seen (as one more scan);
	 * their callbacks run only once the loop runs.
	 */
	{
		int err = 0;

		k = rdp_node_watch_host(d->event, o->dev_root, on_host_change, d, &d->hostwatch);
		if (k < 0)
			return k;
		k = rdp_confwatch_new(d->event, o->config_file, NULL, on_config_change, d,
				      &d->confwatch);
		if (k < 0)
			return k;
		if (rdp_confwatch_state(d->confwatch, &err) == RDP_CONFWATCH_MISSING)
			rdp_log(RDP_LOG_WARNING, "config-watch-waiting", "config=%s error=%s",
				rdp_log_q(o->config_file), rdp_log_errno(err));
	}
	k = rdp_resources_new(d->event, d->mode, sock_dir(d), d->kubelet_sock, o->sysfs_root,
			      o->dev_root, &hooks,
			      &d->res);
	if (k < 0)
		return k;
	/* Without the dir (logged) the resources hand out device specs: serving goes on. */
	if (o->use_cdi)
		(void)rdp_resources_set_cdi(
			d->res, o->cdi_spec_dir ? o->cdi_spec_dir : RDP_DEFAULT_CDI_SPEC_DIR,
			o->no_memlock_hook ? NULL
			: o->memlock_hook  ? o->memlock_hook
					   : RDP_OCI_HOOK_DEFAULT_PATH);
	k = rdp_resources_apply_config(d->res, d->config, NULL, NULL, NULL);
	if (k < 0)
		return k;
	/* The states before any socket: kubelet's first ListAndWatch gets the real snapshot. */
	d->scan_flags = scan_flags(d->config);
	k = rdp_scanner_new_flags(o->sysfs_root, o->dev_root, d->scan_flags, &scanner);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "discovery-failed", "sysfs=%s dev=%s error=%s why=start",
			rdp_log_q(o->sysfs_root), rdp_log_q(o->dev_root), rdp_log_errno(k));
		return k;
	}
	k = rdp_scan_worker_new(d->event, scanner, on_scan_done, d, &d->worker);
	if (k < 0)
		return k;
	{
		uint64_t t0 = rdp_now_usec();

		k = rdp_scan_worker_scan_now(d->worker, RDP_SCAN_FULL);
		rdp_daemon_count_rescan(&d->counters, "start", rdp_now_usec() - t0);
	}
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "discovery-failed", "sysfs=%s dev=%s error=%s why=start",
			rdp_log_q(o->sysfs_root), rdp_log_q(o->dev_root), rdp_log_errno(k));
		return k;
	}
	refresh_fabric(d);

	k = rdp_event_add_defer(d->event, on_apply, d, &d->apply_src);
	if (k < 0)
		return k;
	k = rdp_event_add_timer(d->event, 0, on_rewatch, d, &d->rewatch_src);
	if (k < 0)
		return k;
	d->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (d->inotify_fd < 0)
		return -errno;
	k = rdp_event_add_io(d->event, d->inotify_fd, EPOLLIN, on_inotify, d, &d->inotify_src);
	if (k < 0)
		return k;
	{
		struct dirwatch *all[] = {&d->plugin_dir, &d->registry_dir};

		for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
			if (!watch_needed(d, all[i]))
				continue;
			k = watch_dir(d, all[i]);
			if (k < 0 && strcmp(all[i]->path, sock_dir(d)) == 0)
				rdp_log(RDP_LOG_WARNING, "socket-dir-missing", "dir=%s error=%s msg=%s",
					rdp_log_q(all[i]->path), rdp_log_errno(k),
					rdp_log_q("waiting for kubelet to create it"));
			if (k < 0)
				rdp_event_source_set_timer(d->rewatch_src, REWATCH_USEC);
		}
	}
	k = rdp_event_add_defer(d->event, on_publish, d, &d->publish_src);
	if (k < 0)
		return k;
	/* Sets every state; sockets and registration once the node's lock is ours. */
	k = update_pools(d, "start");
	if (k < 0)
		return k;
	k = rdp_event_add_timer(d->event, 0, on_lock_timer, d, &d->lock_src);
	if (k < 0)
		return k;
	on_lock_timer(d->lock_src, d);
	k = rdp_event_add_timer(d->event, 0, on_rescan_timer, d, &d->rescan_src);
	if (k < 0)
		return k;
	arm_rescan(d);
	return 0;
}

int rdp_daemon_run(const struct rdp_daemon_options *opts)
{
	struct rdp_daemon_options o = *opts;
	struct daemon d = {
		.o = &o,
		.inotify_fd = -1,
		.plugin_dir.wd = -1,
		.registry_dir.wd = -1,
		.netns_logged = -1,
		.lock_holder_logged = -1,
		.scrape_errors_logged = FNV64_OFFSET, /* no errors (log_scrape_errors) */
	};
	struct rdp_node_daemon n = {
		.userdata = &d,
		.setup = daemon_setup,
		.reload = on_sighup,
		.done = daemon_done,
	};

	if (!o.config_file)
		o.config_file = RDP_DEFAULT_CONFIG_FILE;
	if (!o.sysfs_root)
		o.sysfs_root = RDP_DEFAULT_SYSFS_ROOT;
	if (!o.dev_root)
		o.dev_root = RDP_DEFAULT_DEV_ROOT;
	if (!o.kubelet_root)
		o.kubelet_root = RDP_DEFAULT_KUBELET_ROOT;
	n.verbose = o.verbose;
	return rdp_node_run(&n);
}
