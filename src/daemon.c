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
#include <sys/un.h>
#include <unistd.h>

#include "config.h"
#include "device.h"
#include "diag.h"
#include "discovery.h"
#include "rescan.h"
#include "dp-service.h"
#include "event.h"
#include "grpc.h"
#include "log.h"
#include "macro.h"
#include "pool.h"
#include "registration.h"
#include "status.h"

#define KUBELET_SOCK "kubelet.sock"
#define SERVER_RETRY_MIN_USEC (100 * 1000ULL)
#define SERVER_RETRY_MAX_USEC (5 * 1000 * 1000ULL)
#define REWATCH_USEC (1000 * 1000ULL)

struct daemon;

/* One configured resource: its service, its socket and its registration. */
struct resource {
	struct daemon *d;
	char *name; /* resourceName */
	char *prefix; /* resourcePrefix */
	char *full_name; /* prefix/name */
	char *endpoint; /* "<name>.sock", relative to the socket directory */
	char *sock_path; /* absolute */
	struct rdp_dp_service *dp;
	struct rdp_grpc_server *server;
	struct rdp_registration *reg; /* kubelet.sock mode only */
	struct rdp_watcher_info winfo; /* plugin-watcher mode only */
	struct rdp_event_source *retry; /* re-creating the socket after a failure */
	uint64_t retry_usec;
	unsigned int kubelet_gen; /* d->kubelet_gen when the last Register attempt started */
	/*
	 * The last registration handshake: a Register sent (kubelet.sock) or a GetInfo answered
	 * (plugin watcher). Until kubelet has answered it (Register's reply, or
	 * NotifyRegistrationStatus), kubelet may still dial sock_path for full_name.
	 */
	uint64_t handshake_usec;
	bool handshake_open;
	/*
	 * Removed from the config with a handshake open: it keeps its socket (so kubelet's dial
	 * for full_name reaches this resource and no successor on the same path) until the
	 * handshake resolves or times out, then it is freed (d->reap_src).
	 */
	bool retiring;
	bool released; /* retiring and resolved: free at the next reap */
	const char *release_why;
	struct rdp_event_source *retire_timer;
	struct resource *retiring_next;
	bool waiting; /* not started: its socket path is still held by a retiring resource */
	bool need_restart;
	bool started;
	bool has_state; /* a state was set at least once (for the first "pool" log line) */
	unsigned int reg_failures; /* Register failures in a row */
	unsigned int listen_failures; /* socket creation failures in a row */
};

struct daemon {
	const struct rdp_daemon_options *o;
	enum rdp_registration_mode mode; /* resolved: never AUTO */
	struct rdp_event *event;
	struct rdp_config *config;
	char *plugin_dir; /* <root>/device-plugins */
	char *registry_dir; /* <root>/plugins_registry */
	char *sock_dir; /* where our sockets go: one of the two */
	char *kubelet_sock; /* <plugin_dir>/kubelet.sock */
	struct resource **res; /* res[i] serves config->resources[i] */
	size_t n_res;
	struct resource *retiring; /* removed resources holding their socket (resource.retiring) */
	const struct rdp_grpc_method *methods;
	size_t n_methods;
	int inotify_fd;
	int watch_wd;
	unsigned int kubelet_gen; /* bumped when kubelet.sock appears (a kubelet (re)started) */
	struct rdp_event_source *inotify_src, *apply_src, *rescan_src, *rewatch_src, *reap_src;
	struct rdp_event_source *sig_src[3];
	char *pool_warnings; /* the last pool warnings logged, to log only changes */
	int netns_logged; /* -1: not yet; else the rdp_netns_mode last logged */
	struct rdp_scanner *scanner; /* roots kept open; the host model between rescans */
	bool pools_stale; /* new config or failed update: rebuild on an unchanged host too */
	/* status.h: what we serve, for `rdma-dp health` (written from publish_src) */
	char *state_dir; /* <sock_dir>/.rdma-dp */
	struct rdp_event_source *publish_src;
	uint64_t status_gen;
	int status_error; /* the last write error logged, 0 when the last write worked */
};

const char *rdp_registration_mode_name(enum rdp_registration_mode m)
{
	switch (m) {
	case RDP_REGISTRATION_KUBELET_SOCK:
		return "kubelet-sock";
	case RDP_REGISTRATION_PLUGINS_REGISTRY:
		return "plugins-registry";
	case RDP_REGISTRATION_AUTO:
		break;
	}
	return "auto";
}

int rdp_registration_mode_from_string(const char *s, enum rdp_registration_mode *ret)
{
	static const enum rdp_registration_mode all[] = {
		RDP_REGISTRATION_AUTO,
		RDP_REGISTRATION_KUBELET_SOCK,
		RDP_REGISTRATION_PLUGINS_REGISTRY,
	};

	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		if (strcmp(s, rdp_registration_mode_name(all[i])) == 0) {
			*ret = all[i];
			return 0;
		}
	}
	return -EINVAL;
}

static const char *errstr(int r)
{
	return rdp_log_q(strerror(r < 0 ? -r : r));
}

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

/* Calls and registration outcomes. */

static void on_dp_call(const struct rdp_dp_call_info *info, void *userdata)
{
	struct resource *r = userdata;

	if (info->stream_opened || info->stream_closed) {
		rdp_log(RDP_LOG_INFO, info->stream_opened ? "stream-opened" : "stream-closed",
			"resource=%s call=%llu streams=%zu", r->full_name,
			(unsigned long long)info->call_id, info->n_streams);
		return;
	}
	if (info->code != RDP_GRPC_OK) {
		rdp_log(RDP_LOG_WARNING, "call-failed",
			"resource=%s method=%s call=%llu code=%s msg=%s", r->full_name,
			info->method, (unsigned long long)info->call_id,
			rdp_grpc_code_name(info->code), rdp_log_q(strempty(info->message)));
		return;
	}
	if (strcmp(info->method, "Allocate") == 0) {
		rdp_log(RDP_LOG_INFO, "allocated",
			"resource=%s call=%llu containers=%zu units=%zu devices=%zu", r->full_name,
			(unsigned long long)info->call_id, info->n_containers, info->n_ids,
			info->n_specs);
		return;
	}
	rdp_log(RDP_LOG_DEBUG, "call", "resource=%s method=%s call=%llu", r->full_name,
		info->method, (unsigned long long)info->call_id);
}

static void log_state(struct resource *r, const char *event, enum rdp_log_level l)
{
	const struct rdp_dp_state *st = rdp_dp_service_state(r->dp);
	char numa[16] = "none";

	if (st->numa_node >= 0)
		snprintf(numa, sizeof(numa), "%d", st->numa_node);
	rdp_log(l, event, "resource=%s units=%u healthy=%u numa=%s devices=%s active=%zu specs=%zu",
		r->full_name, st->units, st->healthy ? st->units : 0, numa,
		rdp_log_q(st->devices ? st->devices : ""), st->n_active, st->n_specs);
}

static void drain_inotify(struct daemon *d);
static void resource_release(struct resource *r, const char *why);

/* A handshake began: until kubelet answers it, kubelet may dial our socket for full_name. */
static void handshake_begin(struct resource *r)
{
	r->handshake_usec = rdp_now_usec();
	r->handshake_open = true;
}

/* kubelet answered: its dial for full_name, if any, is done. */
static void handshake_end(struct resource *r, const char *why)
{
	r->handshake_open = false;
	if (r->retiring)
		resource_release(r, why);
}

static void on_register_attempt(void *userdata, unsigned int attempt)
{
	struct resource *r = userdata;

	/*
	 * Take in what happened in the directory up to now: a kubelet.sock created before this
	 * attempt is the kubelet this attempt reaches, so it must not trigger another restart.
	 */
	drain_inotify(r->d);
	r->kubelet_gen = r->d->kubelet_gen;
	handshake_begin(r);
	rdp_log(RDP_LOG_DEBUG, "register-attempt", "resource=%s attempt=%u kubelet=%s",
		r->full_name, attempt, rdp_log_q(r->d->kubelet_sock));
}

static void on_register_done(void *userdata, int error, enum rdp_grpc_code code,
			     const char *message, uint64_t retry_usec)
{
	struct resource *r = userdata;
	const struct rdp_dp_state *st = rdp_dp_service_state(r->dp);
	unsigned int failures;

	if (r->retiring) {
		bool ok = error == 0 && code == RDP_GRPC_OK;
		const char *err = "none";

		if (error)
			err = errstr(error);
		else if (!ok)
			err = rdp_log_q(message && *message ? message : rdp_grpc_code_name(code));
		/* No retry for a removed resource: its socket goes now. */
		rdp_registration_stop(r->reg);
		rdp_log(RDP_LOG_INFO, "register-resolved",
			"resource=%s endpoint=%s mode=kubelet-sock registered=%d error=%s",
			r->full_name, rdp_log_q(r->sock_path), ok, err);
		handshake_end(r, ok ? "registered" : "register-failed");
		return;
	}
	handshake_end(r, NULL);
	if (error == 0 && code == RDP_GRPC_OK) {
		r->reg_failures = 0;
		rdp_log(RDP_LOG_INFO, "registered",
			"resource=%s endpoint=%s mode=kubelet-sock units=%u healthy=%u",
			r->full_name, rdp_log_q(r->sock_path), st->units,
			st->healthy ? st->units : 0);
		return;
	}
	failures = ++r->reg_failures;
	/* Log the 1st, 2nd, 4th, 8th... failure in a row: kubelet may be away for long. */
	rdp_log((failures & (failures - 1)) == 0 ? RDP_LOG_WARNING : RDP_LOG_DEBUG,
		"register-failed", "resource=%s kubelet=%s error=%s retry_ms=%llu failures=%u",
		r->full_name, rdp_log_q(r->d->kubelet_sock),
		error ? errstr(error)
		      : rdp_log_q(message && *message ? message : rdp_grpc_code_name(code)),
		(unsigned long long)(retry_usec / 1000), failures);
}

static void on_watcher_status(void *userdata, bool registered, const char *error)
{
	struct resource *r = userdata;
	const struct rdp_dp_state *st = rdp_dp_service_state(r->dp);

	/* Called from a handler of r's server: handshake_end() only defers the release. */
	handshake_end(r, registered ? "notified" : "notify-failed");
	if (registered)
		rdp_log(RDP_LOG_INFO, "registered",
			"resource=%s endpoint=%s mode=plugins-registry units=%u healthy=%u",
			r->full_name, rdp_log_q(r->sock_path), st->units,
			st->healthy ? st->units : 0);
	else
		rdp_log(RDP_LOG_WARNING, "register-failed",
			"resource=%s endpoint=%s mode=plugins-registry error=%s", r->full_name,
			rdp_log_q(r->sock_path), rdp_log_q(strempty(error)));
}

static const struct rdp_registration_ops register_ops = {
	.attempt = on_register_attempt,
	.done = on_register_done,
};

/* Every call of a resource's socket lands here. */
static void on_call(struct rdp_grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct resource *r = userdata;
	const char *path = rdp_grpc_call_path(call);

	if (rdp_dp_service_handles(path)) {
		rdp_dp_service_dispatch(r->dp, call, req, len);
		return;
	}
	rdp_log(RDP_LOG_DEBUG, "call", "resource=%s method=%s call=%llu", r->full_name,
		strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
		(unsigned long long)rdp_grpc_call_id(call));
	if (strcmp(path, rdp_watcher_method_paths[0]) == 0) {
		/* No new handshake for a removed resource. */
		if (r->retiring) {
			rdp_grpc_call_fail(call, RDP_GRPC_UNAVAILABLE,
					   "resource removed from the configuration");
			return;
		}
		handshake_begin(r);
	}
	rdp_watcher_dispatch(&r->winfo, call, req, len);
}

/*
 * The device plugin's methods first, then the plugin watcher's: a kubelet.sock socket serves
 * the first N_DEVICE_PLUGIN_METHODS, a plugins_registry socket all of them.
 */
static const struct rdp_grpc_method all_methods[] = {
	{.path = "/v1beta1.DevicePlugin/GetDevicePluginOptions", .handler = on_call},
	{.path = "/v1beta1.DevicePlugin/ListAndWatch",
	 .handler = on_call,
	 .server_streaming = true},
	{.path = "/v1beta1.DevicePlugin/GetPreferredAllocation", .handler = on_call},
	{.path = "/v1beta1.DevicePlugin/Allocate", .handler = on_call},
	{.path = "/v1beta1.DevicePlugin/PreStartContainer", .handler = on_call},
	{.path = "/pluginregistration.Registration/GetInfo", .handler = on_call},
	{.path = "/pluginregistration.Registration/NotifyRegistrationStatus", .handler = on_call},
};
#define N_DEVICE_PLUGIN_METHODS 5

/* The status file the liveness probe reads (status.h). */

static void publish_status(struct daemon *d)
{
	struct rdp_status_resource *v = rdp_calloc(d->n_res + 1, sizeof(*v));
	struct rdp_status st = {.pid = getpid(), .generation = ++d->status_gen,
				.mode = (char *)rdp_registration_mode_name(d->mode),
				.resources = v, .n_resources = d->n_res};
	int k = v ? 0 : -ENOMEM;

	for (size_t i = 0; v && i < d->n_res; i++) {
		v[i].name = d->res[i]->full_name;
		v[i].socket = d->res[i]->sock_path;
		v[i].serving = d->res[i]->server != NULL;
	}
	if (k == 0)
		k = rdp_status_write(d->state_dir, &st);
	rdp_free(v);
	if (k < 0 && k != d->status_error)
		rdp_log(RDP_LOG_WARNING, "status-write-failed", "dir=%s error=%s msg=%s",
			rdp_log_q(d->state_dir), errstr(k),
			rdp_log_q("rdma-dp health (the liveness probe) cannot see this daemon"));
	else if (k == 0 && d->status_error)
		rdp_log(RDP_LOG_INFO, "status-written", "dir=%s", rdp_log_q(d->state_dir));
	d->status_error = k;
}

static int on_publish(struct rdp_event_source *s, void *userdata)
{
	publish_status(userdata);
	return 0;
}

static void schedule_publish(struct daemon *d)
{
	if (d->publish_src)
		rdp_event_source_defer(d->publish_src);
}

/* Resources. */

static int resource_start(struct resource *r);

static int on_retry(struct rdp_event_source *s, void *userdata)
{
	struct resource *r = userdata;

	resource_start(r);
	return 0;
}

/*
 * (Re)creates the resource's socket and registers. Old connections end first (GOAWAY), so
 * kubelet never sees an old ListAndWatch end after the new registration.
 */
static int resource_start(struct resource *r)
{
	struct daemon *d = r->d;
	int k;

	r->need_restart = false;
	r->started = true;
	r->kubelet_gen = d->kubelet_gen;
	rdp_registration_stop(r->reg);
	r->server = rdp_grpc_server_free(r->server);
	k = rdp_grpc_server_new(d->event, r->sock_path, d->methods, d->n_methods, NULL, r,
				&r->server);
	if (k < 0) {
		uint64_t delay = r->retry_usec ? r->retry_usec : SERVER_RETRY_MIN_USEC;
		unsigned int n = ++r->listen_failures;

		r->retry_usec =
			delay * 2 > SERVER_RETRY_MAX_USEC ? SERVER_RETRY_MAX_USEC : delay * 2;

		/* The 1st, 2nd, 4th, 8th... failure in a row: the directory may be away long. */
		rdp_log((n & (n - 1)) == 0 ? RDP_LOG_WARNING : RDP_LOG_DEBUG, "listen-failed",
			"resource=%s socket=%s error=%s retry_ms=%llu", r->full_name,
			rdp_log_q(r->sock_path), errstr(k), (unsigned long long)(delay / 1000));
		if (!r->retry) {
			int q = rdp_event_add_timer(d->event, delay, on_retry, r, &r->retry);

			if (q < 0)
				rdp_log(RDP_LOG_ERROR, "timer-failed", "resource=%s error=%s",
					r->full_name, errstr(q));
		} else {
			rdp_event_source_set_timer(r->retry, delay);
		}
		schedule_publish(d);
		return k;
	}
	r->retry_usec = 0;
	r->listen_failures = 0;
	if (r->retry)
		rdp_event_source_set_timer(r->retry, 0);
	rdp_log(RDP_LOG_INFO, "listening", "resource=%s socket=%s", r->full_name,
		rdp_log_q(r->sock_path));
	schedule_publish(d);
	if (r->reg) {
		k = rdp_registration_start(r->reg);
		if (k < 0)
			rdp_log(RDP_LOG_ERROR, "register-failed", "resource=%s error=%s",
				r->full_name, errstr(k));
	}
	return 0;
}

static struct resource *resource_free(struct resource *r)
{
	if (!r)
		return NULL;
	/* Server first: its close callbacks take the streams off the service. */
	r->server = rdp_grpc_server_free(r->server);
	r->reg = rdp_registration_free(r->reg);
	r->dp = rdp_dp_service_free(r->dp);
	rdp_event_source_free(r->retry);
	rdp_event_source_free(r->retire_timer);
	rdp_free(r->name);
	rdp_free(r->prefix);
	rdp_free(r->full_name);
	rdp_free(r->endpoint);
	rdp_free(r->sock_path);
	rdp_free(r);
	return NULL;
}

static int resource_new(struct daemon *d, const struct rdp_resource *c, struct resource **ret)
{
	struct resource *r = rdp_calloc(1, sizeof(*r));
	int k;

	if (!r)
		return -ENOMEM;
	r->d = d;
	r->name = rdp_strdup(c->name);
	r->prefix = rdp_strdup(c->prefix);
	r->full_name = rdp_strdup(c->full_name);
	r->endpoint = rdp_asprintf("%s.sock", c->name);
	r->sock_path = rdp_asprintf("%s/%s.sock", d->sock_dir, c->name);
	if (!r->name || !r->prefix || !r->full_name || !r->endpoint || !r->sock_path) {
		resource_free(r);
		return -ENOMEM;
	}
	if (strlen(r->sock_path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
		/* Would fail at every bind: say so once, at start or reload, instead. */
		rdp_log(RDP_LOG_ERROR, "socket-path-too-long", "resource=%s socket=%s max=%zu",
			r->full_name, rdp_log_q(r->sock_path),
			sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1);
		resource_free(r);
		return -ENAMETOOLONG;
	}
	k = rdp_dp_service_new(on_dp_call, r, &r->dp);
	if (k < 0) {
		resource_free(r);
		return k;
	}
	if (d->mode == RDP_REGISTRATION_KUBELET_SOCK) {
		k = rdp_registration_new(d->event, d->kubelet_sock, r->endpoint, r->full_name,
					 &register_ops, r, &r->reg);
		if (k < 0) {
			resource_free(r);
			return k;
		}
	}
	/*
	 * Plugin watcher: the endpoint is this very socket, named in full as the Go plugins do:
	 * kubelet's watcher reads an empty endpoint as "the socket I dialled", but not every
	 * kubelet implementation is kubelet.
	 */
	r->winfo = (struct rdp_watcher_info){
		.name = r->full_name,
		.endpoint = r->sock_path,
		.status = on_watcher_status,
		.userdata = r,
	};
	*ret = r;
	return 0;
}

/*
 * Removed resources and their socket paths.
 *
 * Sockets are named <resourceName>.sock, so a removed resource and a new one can share a path
 * (a resourcePrefix change). While a removed resource's registration handshake is open,
 * kubelet may still dial that path for the old name; if the new resource answered, kubelet
 * would keep an endpoint for the old name fed by the new resource. So a removed resource with
 * an open handshake retires instead of going at once: it keeps its socket and serves (refusing
 * new handshakes) until kubelet answers or the handshake times out; then its connections are
 * closed, ending any stream kubelet opened for the old name, and only then may a resource on
 * the same path listen and register.
 */

static struct resource *path_holder(struct daemon *d, const char *sock_path)
{
	for (struct resource *h = d->retiring; h; h = h->retiring_next)
		if (strcmp(h->sock_path, sock_path) == 0)
			return h;
	return NULL;
}

/* Marks a retiring resource resolved; d->reap_src frees it (never inside its own server). */
static void resource_release(struct resource *r, const char *why)
{
	if (!r->retiring || r->released)
		return;
	r->released = true;
	r->release_why = why;
	if (r->d->reap_src)
		rdp_event_source_defer(r->d->reap_src);
}

static int on_retire_timeout(struct rdp_event_source *s, void *userdata)
{
	resource_release(userdata, "timeout");
	return 0;
}

/*
 * r is gone from the config. Returns true when it retires (d->retiring owns it now), false
 * when the caller frees it at once: no handshake open, or it timed out already.
 */
static bool resource_retire(struct daemon *d, struct resource *r)
{
	uint64_t now = rdp_now_usec(), left;
	int k;

	if (!r->handshake_open || now - r->handshake_usec >= RDP_REGISTRATION_TIMEOUT_USEC)
		return false;
	left = r->handshake_usec + RDP_REGISTRATION_TIMEOUT_USEC - now;
	k = rdp_event_add_timer(d->event, left, on_retire_timeout, r, &r->retire_timer);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "timer-failed", "resource=%s error=%s", r->full_name,
			errstr(k));
		return false;
	}
	r->retiring = true;
	/* Nothing new for the old name: no socket re-creation, no further Register attempt. */
	if (r->retry)
		rdp_event_source_set_timer(r->retry, 0);
	if (!rdp_registration_in_flight(r->reg))
		rdp_registration_stop(r->reg);
	r->retiring_next = d->retiring;
	d->retiring = r;
	return true;
}

/* Starts the resources not started yet whose socket path is free. */
static void start_ready(struct daemon *d)
{
	for (size_t i = 0; i < d->n_res; i++) {
		struct resource *r = d->res[i];
		struct resource *h;

		if (r->started)
			continue;
		h = path_holder(d, r->sock_path);
		if (h) {
			uint64_t end = h->handshake_usec + RDP_REGISTRATION_TIMEOUT_USEC;
			uint64_t now = rdp_now_usec();

			/* Once per wait: a reload keeping r while it waits says nothing new. */
			if (!r->waiting)
				rdp_log(RDP_LOG_INFO, "socket-busy",
					"resource=%s socket=%s holder=%s max_wait_ms=%llu",
					r->full_name, rdp_log_q(r->sock_path), h->full_name,
					(unsigned long long)(end > now ? (end - now) / 1000 : 0));
			r->waiting = true;
			continue;
		}
		r->waiting = false;
		resource_start(r);
	}
}

/* Frees the released retiring resources (closing their connections), then starts waiters. */
static int on_reap(struct rdp_event_source *s, void *userdata)
{
	struct daemon *d = userdata;

	for (struct resource **p = &d->retiring; *p;) {
		struct resource *r = *p;

		if (!r->released) {
			p = &r->retiring_next;
			continue;
		}
		*p = r->retiring_next;
		rdp_log(RDP_LOG_INFO, "socket-released", "resource=%s socket=%s why=%s",
			r->full_name, rdp_log_q(r->sock_path), r->release_why);
		resource_free(r);
	}
	start_ready(d);
	return 0;
}

/* Rescans. */

static void log_host(struct daemon *d, const struct rdp_host *h)
{
	if ((int)h->netns_mode != d->netns_logged) {
		if (h->netns_mode == RDP_NETNS_EXCLUSIVE)
			rdp_log(RDP_LOG_WARNING, "netns-exclusive", "msg=%s",
				rdp_log_q(
					"the RDMA subsystem is in exclusive network namespace mode "
					"(rdma system netns exclusive): RDMA devices are only "
					"visible "
					"in the namespace that owns them, so the shared char "
					"devices "
					"handed to pods will not reach them; set 'rdma system set "
					"netns "
					"shared' or use an exclusive-mode plugin (rdma-cni). "
					"Serving "
					"anyway."));
		else if (d->netns_logged >= 0)
			rdp_log(RDP_LOG_INFO, "netns-shared", "msg=%s",
				rdp_log_q("the RDMA subsystem is back in shared netns mode"));
		d->netns_logged = (int)h->netns_mode;
	}
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
 * Rescans the host (cheaply when mode allows, rescan.h) and, when it changed or the pools are
 * stale, rebuilds the pools and updates every resource. Returns 0 or errno.
 */
static int rescan(struct daemon *d, const char *why, enum rdp_scan_mode mode)
{
	const struct rdp_host *h;
	struct rdp_pools *pools = NULL;
	struct rdp_diags diags = {0};
	int k;

	k = rdp_scanner_scan(d->scanner, mode);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "discovery-failed", "sysfs=%s dev=%s error=%s why=%s",
			rdp_log_q(d->o->sysfs_root), rdp_log_q(d->o->dev_root), errstr(k), why);
		return k;
	}
	h = rdp_scanner_host(d->scanner);
	if (k == 0 && !d->pools_stale) {
		rdp_log(RDP_LOG_DEBUG, "rescanned", "why=%s devices=%zu changed=0 full=%d", why,
			h->n_devices, rdp_scanner_stats(d->scanner)->last_full);
		return 0;
	}
	d->pools_stale = false;
	log_host(d, h);
	k = rdp_pools_build(d->config, h, &pools, &diags);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "rescan-failed", "error=%s why=%s", errstr(k), why);
		d->pools_stale = true;
		goto out;
	}
	log_pool_diags(d, &diags);
	for (size_t i = 0; i < d->n_res && i < pools->n; i++) {
		struct resource *r = d->res[i];
		struct rdp_dp_state st = {.numa_node = -1};
		int changed;

		k = rdp_dp_state_build(h, &pools->v[i], &st);
		if (k >= 0)
			k = changed = rdp_dp_service_set_state(r->dp, &st);
		rdp_dp_state_done(&st);
		if (k < 0) {
			rdp_log(RDP_LOG_ERROR, "rescan-failed", "resource=%s error=%s why=%s",
				r->full_name, errstr(k), why);
			d->pools_stale = true;
			continue;
		}
		if (!r->has_state) {
			r->has_state = true;
			log_state(r, "pool", RDP_LOG_INFO);
			if (rdp_dp_service_state(r->dp)->units == 0)
				rdp_log(RDP_LOG_WARNING, "pool-empty", "resource=%s msg=%s",
					r->full_name,
					rdp_log_q("no device matches the selectors: registered "
						  "with 0 units"));
		} else if (changed) {
			/* Losing every device (unplugged, driver gone) deserves a warning. */
			log_state(r, "updated",
				  rdp_dp_service_state(r->dp)->units == 0 ? RDP_LOG_WARNING
									  : RDP_LOG_INFO);
		}
	}
	k = 0;
	rdp_log(RDP_LOG_DEBUG, "rescanned", "why=%s devices=%zu changed=1 full=%d", why,
		h->n_devices, rdp_scanner_stats(d->scanner)->last_full);
out:
	rdp_diags_done(&diags);
	rdp_pools_free(pools);
	return k;
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

	rescan(d, "periodic", RDP_SCAN_AUTO);
	arm_rescan(d);
	return 0;
}

/* inotify on the socket directory: kubelet restarts. */

static int watch_dir(struct daemon *d)
{
	int wd = inotify_add_watch(d->inotify_fd, d->sock_dir,
				   IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
					   IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);

	if (wd < 0)
		return -errno;
	d->watch_wd = wd;
	return 0;
}

static struct resource *resource_by_sock(struct daemon *d, const char *name)
{
	for (size_t i = 0; i < d->n_res; i++)
		if (strcmp(d->res[i]->endpoint, name) == 0)
			return d->res[i];
	return NULL;
}

static void schedule_apply(struct daemon *d)
{
	if (d->apply_src)
		rdp_event_source_defer(d->apply_src);
}

static void kubelet_appeared(struct daemon *d, const char *why)
{
	d->kubelet_gen++;
	rdp_log(RDP_LOG_INFO, "kubelet-restarted", "kubelet=%s why=%s", rdp_log_q(d->kubelet_sock),
		why);
	schedule_apply(d);
}

static void dir_gone(struct daemon *d)
{
	d->watch_wd = -1;
	rdp_log(RDP_LOG_WARNING, "socket-dir-gone", "dir=%s", rdp_log_q(d->sock_dir));
	if (d->rewatch_src)
		rdp_event_source_set_timer(d->rewatch_src, REWATCH_USEC);
}

/* Reads every queued event; only notes what to do (apply_src acts on it). */
static void drain_inotify(struct daemon *d)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

	if (d->inotify_fd < 0)
		return;
	for (;;) {
		ssize_t n = read(d->inotify_fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			const char *name = ev->len ? ev->name : "";

			p += sizeof(*ev) + ev->len;
			if (ev->mask & IN_Q_OVERFLOW) {
				/* Lost events: assume the worst, as if kubelet restarted. */
				if (d->mode == RDP_REGISTRATION_KUBELET_SOCK)
					kubelet_appeared(d, "inotify-overflow");
				for (size_t i = 0; i < d->n_res; i++)
					d->res[i]->need_restart |=
						d->res[i]->server &&
						!rdp_grpc_server_socket_present(d->res[i]->server);
				schedule_apply(d);
				continue;
			}
			if (ev->wd != d->watch_wd)
				continue;
			if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
				dir_gone(d);
				continue;
			}
			if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) &&
			    d->mode == RDP_REGISTRATION_KUBELET_SOCK &&
			    strcmp(name, KUBELET_SOCK) == 0) {
				kubelet_appeared(d, "kubelet.sock-created");
				continue;
			}
			if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
				struct resource *r = resource_by_sock(d, name);

				/* Ours, and not replaced by a new one of ours since? */
				if (r && r->server && !rdp_grpc_server_socket_present(r->server)) {
					rdp_log(RDP_LOG_INFO, "socket-removed",
						"resource=%s socket=%s", r->full_name,
						rdp_log_q(r->sock_path));
					r->need_restart = true;
					schedule_apply(d);
				}
			}
		}
	}
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

	for (size_t i = 0; i < d->n_res; i++) {
		struct resource *r = d->res[i];

		if (!r->started)
			continue;
		if (r->need_restart ||
		    (d->mode == RDP_REGISTRATION_KUBELET_SOCK && r->kubelet_gen != d->kubelet_gen))
			resource_start(r);
	}
	return 0;
}

static int on_rewatch(struct rdp_event_source *s, void *userdata)
{
	struct daemon *d = userdata;
	int k = watch_dir(d);

	if (k < 0) {
		rdp_event_source_set_timer(s, REWATCH_USEC);
		return 0;
	}
	rdp_log(RDP_LOG_INFO, "socket-dir-back", "dir=%s", rdp_log_q(d->sock_dir));
	for (size_t i = 0; i < d->n_res; i++)
		d->res[i]->need_restart = true;
	if (d->mode == RDP_REGISTRATION_KUBELET_SOCK)
		d->kubelet_gen++;
	schedule_apply(d);
	return 0;
}

/* Config reload. */

/* Index of the running resource serving c (same name and prefix), or -1. */
static ssize_t find_resource(struct resource **v, size_t n, const struct rdp_resource *c)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] && strcmp(v[i]->name, c->name) == 0 &&
		    strcmp(v[i]->prefix, c->prefix) == 0)
			return (ssize_t)i;
	return -1;
}

/*
 * SIGHUP: a valid config is applied as a diff. Resources kept (same name and prefix) keep
 * their socket, registration and streams, and only see their state change; new ones get a
 * socket and register; removed ones close their socket. An invalid config changes nothing.
 */
static void reload(struct daemon *d)
{
	struct rdp_config *c = NULL;
	struct rdp_diags diags = {0};
	struct resource **old = d->res, **res;
	_cleanup_free_ ssize_t *from = NULL;
	size_t n_old = d->n_res, added = 0, removed = 0, kept = 0;
	unsigned int old_interval = d->config->periodic_update_interval;
	int k;

	k = rdp_config_load_file(d->o->config_file, &c, &diags);
	if (k < 0) {
		log_diags(&diags, "config-invalid");
		rdp_log(RDP_LOG_ERROR, "config-rejected", "config=%s errors=%zu error=%s msg=%s",
			rdp_log_q(d->o->config_file), diags.n_errors, errstr(k),
			rdp_log_q("keeping the running configuration"));
		rdp_diags_done(&diags);
		rescan(d, "sighup", RDP_SCAN_FULL);
		return;
	}
	log_diags(&diags, "config-warning");
	rdp_diags_done(&diags);
	res = rdp_calloc(c->n_resources + 1, sizeof(*res));
	from = rdp_calloc(c->n_resources + 1, sizeof(*from));
	if (!res || !from) {
		rdp_log(RDP_LOG_ERROR, "config-rejected", "error=%s", errstr(-ENOMEM));
		rdp_free(res);
		rdp_config_free(c);
		return;
	}
	/* New resources first: on failure nothing running has been touched. */
	for (size_t i = 0; i < c->n_resources; i++) {
		from[i] = find_resource(old, n_old, &c->resources[i]);
		if (from[i] >= 0)
			continue;
		k = resource_new(d, &c->resources[i], &res[i]);
		if (k < 0) {
			rdp_log(RDP_LOG_ERROR, "config-rejected", "resource=%s error=%s",
				c->resources[i].full_name, errstr(k));
			for (size_t j = 0; j < i; j++)
				resource_free(res[j]);
			rdp_free(res);
			rdp_config_free(c);
			return;
		}
		added++;
	}
	for (size_t i = 0; i < c->n_resources; i++) {
		if (from[i] >= 0) {
			res[i] = TAKE_PTR(old[from[i]]);
			kept++;
		}
	}
	/*
	 * What is left in old is gone from the config: close its socket (only ours), or, while
	 * kubelet may still dial it for this name, keep it until that is resolved.
	 */
	for (size_t i = 0; i < n_old; i++) {
		bool retiring;

		if (!old[i])
			continue;
		retiring = resource_retire(d, old[i]);
		rdp_log(RDP_LOG_INFO, "resource-removed", "resource=%s socket=%s release=%s",
			old[i]->full_name, rdp_log_q(old[i]->sock_path),
			retiring ? "after-handshake" : "now");
		if (!retiring)
			resource_free(old[i]);
		removed++;
	}
	rdp_free(old);
	rdp_config_free(d->config);
	d->config = c;
	d->res = res;
	d->n_res = c->n_resources;
	rdp_log(RDP_LOG_INFO, "config-reloaded",
		"config=%s resources=%zu added=%zu removed=%zu kept=%zu",
		rdp_log_q(d->o->config_file), d->n_res, added, removed, kept);
	/* States first, so that a new socket's first snapshot is already the full one. */
	d->pools_stale = true;
	rescan(d, "sighup", RDP_SCAN_FULL);
	start_ready(d);
	if (old_interval != c->periodic_update_interval)
		arm_rescan(d);
	schedule_publish(d);
}

static int on_signal(struct rdp_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct daemon *d = userdata;

	if (si->ssi_signo == SIGHUP) {
		rdp_log(RDP_LOG_INFO, "reload", "signal=SIGHUP config=%s",
			rdp_log_q(d->o->config_file));
		reload(d);
		return 0;
	}
	rdp_log(RDP_LOG_INFO, "stopping", "signal=%s",
		si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
	rdp_event_exit(d->event, 0);
	return 0;
}

/* Start and stop. */

static bool exists(const char *path, mode_t type)
{
	struct stat st;

	return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

static void daemon_done(struct daemon *d)
{
	for (size_t i = 0; i < d->n_res; i++)
		resource_free(d->res[i]);
	rdp_free(d->res);
	while (d->retiring) {
		struct resource *r = d->retiring;

		d->retiring = r->retiring_next;
		resource_free(r);
	}
	rdp_event_source_free(d->reap_src);
	rdp_event_source_free(d->publish_src);
	if (d->state_dir && d->status_gen > 0) {
		/* stopped: nothing served any more; the directory too when nothing else is in it */
		(void)rdp_status_remove(d->state_dir);
		(void)rmdir(d->state_dir);
	}
	rdp_free(d->state_dir);
	for (size_t i = 0; i < ARRAY_SIZE(d->sig_src); i++)
		rdp_event_source_free(d->sig_src[i]);
	rdp_event_source_free(d->inotify_src);
	rdp_event_source_free(d->apply_src);
	rdp_event_source_free(d->rescan_src);
	d->scanner = rdp_scanner_free(d->scanner);
	rdp_event_source_free(d->rewatch_src);
	if (d->inotify_fd >= 0)
		close(d->inotify_fd);
	rdp_event_free(d->event);
	rdp_config_free(d->config);
	rdp_free(d->plugin_dir);
	rdp_free(d->registry_dir);
	rdp_free(d->kubelet_sock);
	rdp_free(d->pool_warnings);
}

static int daemon_setup(struct daemon *d)
{
	const struct rdp_daemon_options *o = d->o;
	struct rdp_diags diags = {0};
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
	int k;

	k = rdp_config_load_file(o->config_file, &d->config, &diags);
	log_diags(&diags, k < 0 ? "config-invalid" : "config-warning");
	rdp_diags_done(&diags);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "config-rejected", "config=%s error=%s",
			rdp_log_q(o->config_file), errstr(k));
		return k;
	}
	d->plugin_dir = rdp_asprintf("%s/device-plugins", o->kubelet_root);
	d->registry_dir = rdp_asprintf("%s/plugins_registry", o->kubelet_root);
	if (!d->plugin_dir || !d->registry_dir)
		return -ENOMEM;
	d->kubelet_sock = rdp_asprintf("%s/%s", d->plugin_dir, KUBELET_SOCK);
	if (!d->kubelet_sock)
		return -ENOMEM;
	d->mode = o->registration;
	if (d->mode == RDP_REGISTRATION_AUTO) {
		/*
		 * kubelet.sock present: the documented way. Else the plugin watcher, if its
		 * directory exists; else wait for kubelet.sock (kubelet may be starting).
		 */
		if (exists(d->kubelet_sock, S_IFSOCK) || !exists(d->registry_dir, S_IFDIR))
			d->mode = RDP_REGISTRATION_KUBELET_SOCK;
		else
			d->mode = RDP_REGISTRATION_PLUGINS_REGISTRY;
	}
	if (d->mode == RDP_REGISTRATION_KUBELET_SOCK) {
		d->sock_dir = d->plugin_dir;
		d->methods = all_methods;
		d->n_methods = N_DEVICE_PLUGIN_METHODS;
	} else {
		d->sock_dir = d->registry_dir;
		d->methods = all_methods;
		d->n_methods = ARRAY_SIZE(all_methods);
	}
	k = rdp_state_dir(d->sock_dir, &d->state_dir);
	if (k < 0)
		return k;
	rdp_log(RDP_LOG_INFO, "starting",
		"version=%s config=%s sysfs=%s dev=%s kubelet_root=%s registration=%s "
		"resources=%zu "
		"rescan_s=%u",
		RDP_VERSION, rdp_log_q(o->config_file), rdp_log_q(o->sysfs_root),
		rdp_log_q(o->dev_root), rdp_log_q(o->kubelet_root),
		rdp_registration_mode_name(d->mode), d->config->n_resources,
		d->config->periodic_update_interval);

	k = rdp_event_new(&d->event);
	if (k < 0)
		return k;
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
		k = rdp_event_add_signal(d->event, sigs[i], on_signal, d, &d->sig_src[i]);
		if (k < 0)
			return k;
	}
	d->res = rdp_calloc(d->config->n_resources + 1, sizeof(*d->res));
	if (!d->res)
		return -ENOMEM;
	for (size_t i = 0; i < d->config->n_resources; i++) {
		k = resource_new(d, &d->config->resources[i], &d->res[i]);
		if (k < 0)
			return k;
		d->n_res++;
	}
	/* The states before any socket: kubelet's first ListAndWatch gets the real snapshot. */
	k = rdp_scanner_new(o->sysfs_root, o->dev_root, &d->scanner);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "discovery-failed", "sysfs=%s dev=%s error=%s why=start",
			rdp_log_q(o->sysfs_root), rdp_log_q(o->dev_root), errstr(k));
		return k;
	}
	k = rescan(d, "start", RDP_SCAN_FULL);
	if (k < 0)
		return k;

	k = rdp_event_add_defer(d->event, on_apply, d, &d->apply_src);
	if (k < 0)
		return k;
	k = rdp_event_add_defer(d->event, on_reap, d, &d->reap_src);
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
	k = watch_dir(d);
	if (k < 0) {
		rdp_log(RDP_LOG_WARNING, "socket-dir-missing", "dir=%s error=%s msg=%s",
			rdp_log_q(d->sock_dir), errstr(k),
			rdp_log_q("waiting for kubelet to create it"));
		rdp_event_source_set_timer(d->rewatch_src, REWATCH_USEC);
	}
	for (size_t i = 0; i < d->n_res; i++)
		resource_start(d->res[i]);
	publish_status(d);
	k = rdp_event_add_defer(d->event, on_publish, d, &d->publish_src);
	if (k < 0)
		return k;
	k = rdp_event_add_timer(d->event, 0, on_rescan_timer, d, &d->rescan_src);
	if (k < 0)
		return k;
	arm_rescan(d);
	return 0;
}

int rdp_daemon_run(const struct rdp_daemon_options *opts)
{
	struct rdp_daemon_options o = *opts;
	struct daemon d = {.o = &o, .inotify_fd = -1, .watch_wd = -1, .netns_logged = -1};
	int k;

	if (!o.config_file)
		o.config_file = RDP_DEFAULT_CONFIG_FILE;
	if (!o.sysfs_root)
		o.sysfs_root = RDP_DEFAULT_SYSFS_ROOT;
	if (!o.dev_root)
		o.dev_root = RDP_DEFAULT_DEV_ROOT;
	if (!o.kubelet_root)
		o.kubelet_root = RDP_DEFAULT_KUBELET_ROOT;
	rdp_log_set_max_level(o.verbose ? RDP_LOG_DEBUG : RDP_LOG_INFO);

	k = daemon_setup(&d);
	if (k < 0) {
		if (k != -EINVAL)
			rdp_log(RDP_LOG_ERROR, "start-failed", "error=%s", errstr(k));
		daemon_done(&d);
		return 1;
	}
	k = rdp_event_run(d.event);
	if (k < 0)
		rdp_log(RDP_LOG_ERROR, "loop-failed", "error=%s", errstr(k));
	/* Servers close their streams and remove their own sockets, nothing else. */
	daemon_done(&d);
	rdp_log(RDP_LOG_INFO, "stopped", "code=%d", k < 0 ? 1 : 0);
	return k < 0 ? 1 : 0;
}
