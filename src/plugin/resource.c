/* SPDX-License-Identifier: MIT */
#include "resource.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "cdi.h"
#include "event.h"
#include "grpc.h"
#include "log.h"
#include "macro.h"
#include "methods.h"
#include "registration.h"

#define SERVER_RETRY_MIN_USEC (100 * 1000ULL)
#define SERVER_RETRY_MAX_USEC (5 * 1000 * 1000ULL)

/* Where a resource's CDI spec stands (transitions: cdi_sync(), set_classes()). */
enum res_cdi {
	RES_CDI_OFF, /* no --use-cdi */
	RES_CDI_NO_CLASS, /* its name gives no valid, unique CDI class: device specs */
	RES_CDI_NONE, /* no spec on disk: none written yet, or no device to name */
	RES_CDI_WRITTEN, /* the spec on disk names what the service serves */
	RES_CDI_FAILED, /* the last write failed: device specs until one succeeds */
};

/* One configured resource. */
struct res {
	struct rdp_resources *set;
	enum rdp_res_state state;
	char *name; /* resourceName */
	char *prefix; /* resourcePrefix */
	char *full_name; /* prefix/name */
	char *endpoint; /* "<name>.sock", relative to the socket directory */
	char *sock_path; /* absolute */
	enum rdp_resource_mode res_mode; /* shared or exclusive, as registered */
	struct rdp_dp_service *dp;
	struct rdp_grpc_server *server;
	struct rdp_registration *reg; /* kubelet.sock mode only */
	struct rdp_watcher_info winfo; /* plugin-watcher mode only */
	/* One timer for whatever the state waits on: listen retry, re-announce, streamless. */
	struct rdp_event_source *timer;
	uint64_t backoff_usec;
	uint64_t handshake_usec; /* when the last handshake began */
	const char *release_why;
	unsigned int kubelet_gen; /* set->kubelet_gen when the last registration began */
	unsigned int reg_failures; /* Register failures in a row */
	unsigned int listen_failures; /* socket creation failures in a row */
	bool restart_pending; /* re-create the socket at the next apply */
	bool pool_logged; /* the first "pool" line was logged */
	enum res_cdi cdi;
	char cdi_class[RDP_CDI_CLASS_MAX];
	unsigned int env_omitted_logged; /* computed variables whose omission was logged */
	struct rdp_resource_counters counters;
	struct res *retiring_next;
};

struct rdp_resources {
	struct rdp_event *event;
	char *dev_root; /* Allocate checks the char devices it hands out under it */
	char *sysfs_root; /* ... and whose they are (dp-service.h) */
	enum rdp_registration_mode mode;
	struct rdp_grpc_method methods[RDP_METHOD_N]; /* the sockets' table, for mode */
	size_t n_methods;
	char *sock_dir;
	char *kubelet_sock;
	struct rdp_resources_hooks hooks;
	struct res **res; /* res[i] serves the config's resource i */
	size_t n_res;
	struct res *retiring; /* removed resources holding their socket */
	struct rdp_event_source *reap_src;
	unsigned int kubelet_gen; /* bumped when kubelet (re)starts */
	bool enabled; /* sockets may be created (the daemon holds the node's lock) */
	int cdi_fd; /* the CDI spec dir; -1: device specs only */
	char *cdi_dir;
	char *hook_path; /* the memlock hook in the specs (oci-hook.h); NULL: none */
};

static void on_call(struct rdp_grpc_call *call, const uint8_t *req, size_t len, void *userdata);

/*
 * The server table of a socket, from methods.h: the device plugin's methods, plus the plugin
 * watcher's on a plugins_registry socket. Returns how many were filled.
 */
static size_t server_methods(enum rdp_registration_mode mode, struct rdp_grpc_method *v)
{
	size_t n = 0;

	for (int m = 0; m < RDP_METHOD_N; m++) {
		const struct rdp_method_info *i = &rdp_methods[m];

		if (i->service == RDP_SERVICE_DEVICE_PLUGIN ||
		    (i->service == RDP_SERVICE_WATCHER &&
		     mode == RDP_REGISTRATION_PLUGINS_REGISTRY))
			v[n++] = (struct rdp_grpc_method){
				.path = i->path,
				.handler = on_call,
				.server_streaming = i->server_streaming,
			};
	}
	return n;
}

static void changed(struct rdp_resources *s)
{
	if (s->hooks.changed)
		s->hooks.changed(s->hooks.userdata);
}

/*
 * The one place a resource changes state. Events that cannot happen in the current state are
 * ignored (and say so at debug level), so a late callback never resurrects a removed resource.
 */
static bool transition(struct res *r, enum rdp_res_event ev)
{
	enum rdp_res_state to;

	if (rdp_res_next(r->state, ev, &to) < 0) {
		rdp_log(RDP_LOG_DEBUG, "state-ignored", "resource=%s state=%s on=%s",
			r->full_name, rdp_res_state_name(r->state), rdp_res_event_name(ev));
		return false;
	}
	if (to != r->state)
		rdp_log(RDP_LOG_DEBUG, "state", "resource=%s from=%s to=%s on=%s", r->full_name,
			rdp_res_state_name(r->state), rdp_res_state_name(to),
			rdp_res_event_name(ev));
	r->state = to;
	if (to == RDP_RES_RELEASED && r->set->reap_src)
		rdp_event_source_defer(r->set->reap_src);
	changed(r->set);
	return true;
}

/* Once when computed variables are left out (no port carries traffic), once when back. */
static void log_env_omitted(struct res *r)
{
	unsigned int now = rdp_dp_service_state(r->dp)->env_omitted;
	char names[64] = "";

	if (now == r->env_omitted_logged)
		return;
	for (unsigned int bit = 1; bit && bit <= RDP_ENV_FROM_ALL; bit <<= 1)
		if ((now ? now : r->env_omitted_logged) & bit)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 names[0] ? "," : "", rdp_env_from_name(bit));
	if (now)
		rdp_log(RDP_LOG_WARNING, "env-omitted", "resource=%s vars=%s msg=%s", r->full_name,
			names, rdp_log_q("no port of its devices can carry traffic (ACTIVE, "
					 "InfiniBand or Ethernet): containers get no such variable"));
	else
		rdp_log(RDP_LOG_INFO, "env-restored", "resource=%s vars=%s", r->full_name, names);
	r->env_omitted_logged = now;
}

static void log_state(struct res *r, const char *event, enum rdp_log_level l)
{
	const struct rdp_dp_state *st = rdp_dp_service_state(r->dp);
	char numa[16] = "none";

	if (st->mode == RDP_MODE_EXCLUSIVE)
		snprintf(numa, sizeof(numa), "per-unit");
	else if (st->numa_node >= 0)
		snprintf(numa, sizeof(numa), "%d", st->numa_node);
	rdp_log(l, event,
		"resource=%s sharing=%s units=%u healthy=%zu numa=%s devices=%s usable=%zu active=%zu "
		"specs=%zu",
		r->full_name, rdp_resource_mode_name(st->mode), st->units,
		rdp_dp_state_healthy_units(st), numa, rdp_log_q(st->devices ? st->devices : ""),
		st->n_usable, st->n_active, st->n_specs);
}

/* (Re)arms the resource's one timer; 0 disarms. */
static void arm(struct res *r, uint64_t usec)
{
	if (r->timer)
		rdp_event_source_set_timer(r->timer, usec);
}

/* kubelet-sock mode, registered: no stream for a while means kubelet dropped us. */
static void watch_streams(struct res *r)
{
	if (r->set->mode != RDP_REGISTRATION_KUBELET_SOCK || r->state != RDP_RES_REGISTERED)
		return;
	arm(r, rdp_dp_service_streams(r->dp) == 0 ? RDP_RES_STREAMLESS_USEC : 0);
}

/* Calls and registration outcomes. */

static void on_dp_call(const struct rdp_dp_call_info *info, void *userdata)
{
	struct res *r = userdata;

	if (info->stream_opened || info->stream_closed) {
		rdp_log(RDP_LOG_INFO, info->stream_opened ? "stream-opened" : "stream-closed",
			"resource=%s call=%llu streams=%zu", r->full_name,
			(unsigned long long)info->call_id, info->n_streams);
		watch_streams(r);
		return;
	}
	if (strcmp(info->method, "Allocate") == 0) {
		r->counters.allocate_calls++;
		if (info->code != RDP_GRPC_OK)
			r->counters.allocate_errors++;
	} else if (strcmp(info->method, "GetPreferredAllocation") == 0) {
		r->counters.preferred_calls++;
	}
	if (info->code != RDP_GRPC_OK) {
		rdp_log(RDP_LOG_WARNING, "call-failed",
			"resource=%s method=%s call=%llu code=%s msg=%s", r->full_name,
			info->method, (unsigned long long)info->call_id,
			rdp_grpc_code_name(info->code), rdp_log_q(strempty(info->message)));
		return;
	}
	if (strcmp(info->method, "Allocate") == 0) {
		if (info->cdi_fallback)
			rdp_log(RDP_LOG_WARNING, "cdi-fallback",
				"resource=%s call=%llu containers=%zu msg=%s", r->full_name,
				(unsigned long long)info->call_id, info->cdi_fallback,
				rdp_log_q("a device of the answer is not in the CDI spec on disk: "
					  "device specs and every variable instead"));
		if (info->units)
			rdp_log(RDP_LOG_INFO, "allocated",
				"resource=%s call=%llu containers=%zu units=%zu devices=%zu cdi=%d "
				"ids=%s",
				r->full_name, (unsigned long long)info->call_id, info->n_containers,
				info->n_ids, info->n_specs, info->cdi, rdp_log_q(info->units));
		else
			rdp_log(RDP_LOG_INFO, "allocated",
				"resource=%s call=%llu containers=%zu units=%zu devices=%zu cdi=%d",
				r->full_name, (unsigned long long)info->call_id,
				info->n_containers, info->n_ids, info->n_specs, info->cdi);
		return;
	}
	if (info->units) {
		rdp_log(RDP_LOG_INFO, "preferred", "resource=%s call=%llu ids=%s", r->full_name,
			(unsigned long long)info->call_id, rdp_log_q(info->units));
		return;
	}
	rdp_log(RDP_LOG_DEBUG, "call", "resource=%s method=%s call=%llu", r->full_name,
		info->method, (unsigned long long)info->call_id);
}

static void count_registration(struct res *r)
{
	if (r->counters.registrations++ > 0)
		r->counters.reregistrations++;
}

static void on_register_attempt(void *userdata, unsigned int attempt)
{
	struct res *r = userdata;
	struct rdp_resources *s = r->set;

	/*
	 * Take in what happened in the directory up to now: a kubelet.sock created before this
	 * attempt is the kubelet this attempt reaches, so it must not trigger another restart.
	 */
	if (s->hooks.before_register)
		s->hooks.before_register(s->hooks.userdata);
	r->kubelet_gen = s->kubelet_gen;
	r->handshake_usec = rdp_now_usec();
	transition(r, RDP_RES_EV_HANDSHAKE);
	rdp_log(RDP_LOG_DEBUG, "register-attempt", "resource=%s attempt=%u kubelet=%s",
		r->full_name, attempt, rdp_log_q(s->kubelet_sock));
}

static void on_register_done(void *userdata, int error, enum rdp_grpc_code code,
			     const char *message, uint64_t retry_usec)
{
	struct res *r = userdata;
	const struct rdp_dp_state *st = rdp_dp_service_state(r->dp);
	bool ok = error == 0 && code == RDP_GRPC_OK;
	unsigned int failures;

	if (r->state == RDP_RES_RETIRING) {
		const char *err = "none";

		if (error)
			err = rdp_log_errno(error);
		else if (!ok)
			err = rdp_log_q(message && *message ? message : rdp_grpc_code_name(code));
		/* No retry for a removed resource: its socket goes now. */
		rdp_registration_stop(r->reg);
		rdp_log(RDP_LOG_INFO, "register-resolved",
			"resource=%s endpoint=%s mode=kubelet-sock registered=%d error=%s",
			r->full_name, rdp_log_q(r->sock_path), ok, err);
		r->release_why = ok ? "registered" : "register-failed";
		transition(r, ok ? RDP_RES_EV_ACCEPTED : RDP_RES_EV_REJECTED);
		return;
	}
	if (ok) {
		r->reg_failures = 0;
		count_registration(r);
		transition(r, RDP_RES_EV_ACCEPTED);
		rdp_log(RDP_LOG_INFO, "registered",
			"resource=%s endpoint=%s mode=kubelet-sock units=%u healthy=%u",
			r->full_name, rdp_log_q(r->sock_path), st->units,
			st->healthy ? st->units : 0);
		watch_streams(r);
		return;
	}
	transition(r, RDP_RES_EV_REJECTED);
	r->counters.register_failures++;
	failures = ++r->reg_failures;
	/* Log the 1st, 2nd, 4th, 8th... failure in a row: kubelet may be away for long. */
	rdp_log((failures & (failures - 1)) == 0 ? RDP_LOG_WARNING : RDP_LOG_DEBUG,
		"register-failed", "resource=%s kubelet=%s error=%s retry_ms=%llu failures=%u",
		r->full_name, rdp_log_q(r->set->kubelet_sock),
		error ? rdp_log_errno(error)
		      : rdp_log_q(message && *message ? message : rdp_grpc_code_name(code)),
		(unsigned long long)(retry_usec / 1000), failures);
}

/* An Allocate found a char device that is not what the model says: ask for a rescan. */
static void on_refresh(const char *reason, void *userdata)
{
	struct res *r = userdata;
	struct rdp_resources *s = r->set;

	rdp_log(RDP_LOG_WARNING, "allocate-check", "resource=%s msg=%s", r->full_name,
		rdp_log_q(strempty(reason)));
	if (s->hooks.refresh)
		s->hooks.refresh(s->hooks.userdata);
	else
		rdp_dp_service_refreshed(r->dp);
}

static bool on_settled(void *userdata)
{
	struct res *r = userdata;

	return r->set->hooks.settled && r->set->hooks.settled(r->set->hooks.userdata);
}

static void on_unusable(enum rdp_dp_unusable_event ev, const char *device, const char *reason,
			void *userdata)
{
	struct res *r = userdata;

	if (ev == RDP_DP_UNUSABLE_CLEARED)
		rdp_log(RDP_LOG_INFO, "device-usable", "resource=%s device=%s was=%s",
			r->full_name, device, rdp_log_q(reason));
	else
		rdp_log(RDP_LOG_WARNING, "device-unusable", "resource=%s device=%s reason=%s%s",
			r->full_name, device, rdp_log_q(reason),
			ev == RDP_DP_UNUSABLE_CHANGED ? " changed=1" : "");
}

static const struct rdp_registration_ops register_ops = {
	.attempt = on_register_attempt,
	.done = on_register_done,
};

static void on_watcher_status(void *userdata, bool registered, const char *error)
{
	struct res *r = userdata;
	const struct rdp_dp_state *st = rdp_dp_service_state(r->dp);
	uint64_t retry;

	if (r->state == RDP_RES_RETIRING) {
		/* Called from a handler of r's server: the release only defers the free. */
		r->release_why = registered ? "notified" : "notify-failed";
		transition(r, registered ? RDP_RES_EV_ACCEPTED : RDP_RES_EV_REJECTED);
		return;
	}
	if (registered) {
		r->reg_failures = 0;
		count_registration(r);
		r->backoff_usec = 0;
		arm(r, 0);
		transition(r, RDP_RES_EV_ACCEPTED);
		rdp_log(RDP_LOG_INFO, "registered",
			"resource=%s endpoint=%s mode=plugins-registry units=%u healthy=%u",
			r->full_name, rdp_log_q(r->sock_path), st->units,
			st->healthy ? st->units : 0);
		return;
	}
	/*
	 * kubelet refused: announce the socket again after a backoff (a new socket file is a
	 * new plugin to kubelet's watcher), whether or not kubelet retries by itself.
	 */
	transition(r, RDP_RES_EV_REJECTED);
	r->reg_failures++;
	r->counters.register_failures++;
	retry = rdp_backoff_next(&r->backoff_usec, RDP_RES_REJECT_BACKOFF_MIN_USEC,
				 RDP_RES_REJECT_BACKOFF_MAX_USEC);
	r->restart_pending = true;
	arm(r, retry);
	rdp_log(RDP_LOG_WARNING, "register-failed",
		"resource=%s endpoint=%s mode=plugins-registry error=%s retry_ms=%llu failures=%u",
		r->full_name, rdp_log_q(r->sock_path), rdp_log_q(strempty(error)),
		(unsigned long long)(retry / 1000), r->reg_failures);
}

/* Every call of a resource's socket lands here. */
static void on_call(struct rdp_grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct res *r = userdata;
	/* The server routes only the paths of its table (server_methods()): all known. */
	enum rdp_method m = rdp_method_lookup(rdp_grpc_call_path(call));

	if (m != RDP_METHOD_UNKNOWN && rdp_methods[m].service == RDP_SERVICE_DEVICE_PLUGIN) {
		rdp_dp_service_dispatch(r->dp, call, req, len);
		return;
	}
	rdp_log(RDP_LOG_DEBUG, "call", "resource=%s method=%s call=%llu", r->full_name,
		rdp_method_name(m), (unsigned long long)rdp_grpc_call_id(call));
	if (m == RDP_METHOD_WATCHER_GET_INFO) {
		/* No new handshake for a removed resource. */
		if (rdp_res_state_leaving(r->state)) {
			rdp_grpc_call_fail(call, RDP_GRPC_UNAVAILABLE,
					   "resource removed from the configuration");
			return;
		}
		r->handshake_usec = rdp_now_usec();
		transition(r, RDP_RES_EV_HANDSHAKE);
	}
	rdp_watcher_dispatch(&r->winfo, call, req, len);
}

/* Starting and stopping one resource. */

static struct res *path_holder(struct rdp_resources *s, const char *sock_path)
{
	for (struct res *h = s->retiring; h; h = h->retiring_next)
		if (strcmp(h->sock_path, sock_path) == 0)
			return h;
	return NULL;
}

/*
 * (Re)creates the resource's socket and registers. Old connections end first (GOAWAY), so
 * kubelet never sees an old ListAndWatch end after the new registration.
 */
static void res_listen(struct res *r)
{
	struct rdp_resources *s = r->set;
	int k;

	r->restart_pending = false;
	r->kubelet_gen = s->kubelet_gen;
	rdp_registration_stop(r->reg);
	arm(r, 0);
	r->server = rdp_grpc_server_free(r->server);
	k = rdp_grpc_server_new(s->event, r->sock_path, s->methods, s->n_methods, NULL, r,
				&r->server);
	if (k < 0) {
		uint64_t delay = rdp_backoff_next(&r->backoff_usec, SERVER_RETRY_MIN_USEC,
						  SERVER_RETRY_MAX_USEC);
		unsigned int n = ++r->listen_failures;

		transition(r, RDP_RES_EV_LISTEN_FAILED);
		/* The 1st, 2nd, 4th, 8th... failure in a row: the directory may be away long. */
		rdp_log((n & (n - 1)) == 0 ? RDP_LOG_WARNING : RDP_LOG_DEBUG, "listen-failed",
			"resource=%s socket=%s error=%s retry_ms=%llu", r->full_name,
			rdp_log_q(r->sock_path), rdp_log_errno(k), (unsigned long long)(delay / 1000));
		arm(r, delay);
		return;
	}
	r->backoff_usec = 0;
	r->listen_failures = 0;
	transition(r, RDP_RES_EV_LISTENING);
	rdp_log(RDP_LOG_INFO, "listening", "resource=%s socket=%s", r->full_name,
		rdp_log_q(r->sock_path));
	if (r->reg) {
		k = rdp_registration_start(r->reg);
		if (k < 0)
			rdp_log(RDP_LOG_ERROR, "register-failed", "resource=%s error=%s",
				r->full_name, rdp_log_errno(k));
	}
}

/* A start: waits while a retiring resource holds the path, else listens. */
static void res_start(struct res *r)
{
	struct res *h = path_holder(r->set, r->sock_path);

	if (h) {
		uint64_t end = h->handshake_usec + RDP_REGISTRATION_TIMEOUT_USEC;
		uint64_t now = rdp_now_usec();

		/* Once per wait: a reload keeping r while it waits says nothing new. */
		if (r->state != RDP_RES_WAITING)
			rdp_log(RDP_LOG_INFO, "socket-busy",
				"resource=%s socket=%s holder=%s max_wait_ms=%llu", r->full_name,
				rdp_log_q(r->sock_path), h->full_name,
				(unsigned long long)(end > now ? (end - now) / 1000 : 0));
		transition(r, RDP_RES_EV_PATH_BUSY);
		return;
	}
	res_listen(r);
}

/* The resource's timer: whatever its state waits on. */
static int on_timer(struct rdp_event_source *src, void *userdata)
{
	struct res *r = userdata;

	switch (r->state) {
	case RDP_RES_LISTEN_RETRY:
		res_listen(r);
		break;
	case RDP_RES_ANNOUNCED:
		/* Rejected by kubelet's plugin watcher: announce a new socket. */
		if (r->restart_pending)
			res_listen(r);
		break;
	case RDP_RES_REGISTERED:
		if (r->set->mode == RDP_REGISTRATION_KUBELET_SOCK &&
		    rdp_dp_service_streams(r->dp) == 0) {
			rdp_log(RDP_LOG_WARNING, "no-stream",
				"resource=%s waited_ms=%llu msg=%s", r->full_name,
				(unsigned long long)(RDP_RES_STREAMLESS_USEC / 1000),
				rdp_log_q("kubelet has no ListAndWatch stream open: registering "
					  "again"));
			if (r->reg)
				rdp_registration_start(r->reg);
		}
		break;
	case RDP_RES_RETIRING:
		r->release_why = "timeout";
		transition(r, RDP_RES_EV_EXPIRED);
		break;
	default:
		break;
	}
	return 0;
}

static struct res *res_free(struct res *r)
{
	if (!r)
		return NULL;
	/* Server first: its close callbacks take the streams off the service. */
	r->server = rdp_grpc_server_free(r->server);
	r->reg = rdp_registration_free(r->reg);
	r->dp = rdp_dp_service_free(r->dp);
	rdp_event_source_free(r->timer);
	rdp_free(r->name);
	rdp_free(r->prefix);
	rdp_free(r->full_name);
	rdp_free(r->endpoint);
	rdp_free(r->sock_path);
	rdp_free(r);
	return NULL;
}

/* Builds what depends on the mode: socket path and registration. */
static int res_set_mode(struct res *r)
{
	struct rdp_resources *s = r->set;
	char *path = rdp_asprintf("%s/%s", s->sock_dir, r->endpoint);
	int k;

	if (!path)
		return -ENOMEM;
	if (strlen(path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path)) {
		/* Would fail at every bind: say so once, at start or reload, instead. */
		rdp_log(RDP_LOG_ERROR, "socket-path-too-long", "resource=%s socket=%s max=%zu",
			r->full_name, rdp_log_q(path),
			sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1);
		rdp_free(path);
		return -ENAMETOOLONG;
	}
	rdp_free(r->sock_path);
	r->sock_path = path;
	r->reg = rdp_registration_free(r->reg);
	if (s->mode == RDP_REGISTRATION_KUBELET_SOCK) {
		k = rdp_registration_new(s->event, s->kubelet_sock, r->endpoint, r->full_name,
					 r->res_mode == RDP_MODE_EXCLUSIVE, &register_ops, r, &r->reg);
		if (k < 0)
			return k;
	}
	/* Plugin watcher: an empty endpoint is "the socket you dialled" to kubelet. */
	r->winfo = (struct rdp_watcher_info){
		.name = r->full_name,
		.endpoint = "",
		.status = on_watcher_status,
		.userdata = r,
	};
	return 0;
}

static int res_new(struct rdp_resources *s, const struct rdp_resource *c, struct res **ret)
{
	struct res *r = rdp_calloc(1, sizeof(*r));
	int k;

	if (!r)
		return -ENOMEM;
	r->set = s;
	r->state = RDP_RES_IDLE;
	r->name = rdp_strdup(c->name);
	r->prefix = rdp_strdup(c->prefix);
	r->full_name = rdp_strdup(c->full_name);
	r->endpoint = rdp_asprintf("%s.sock", c->name);
	r->res_mode = c->mode;
	if (!r->name || !r->prefix || !r->full_name || !r->endpoint) {
		res_free(r);
		return -ENOMEM;
	}
	k = rdp_event_add_timer(s->event, 0, on_timer, r, &r->timer);
	if (k >= 0)
		k = res_set_mode(r);
	if (k >= 0)
		k = rdp_dp_service_new(on_dp_call, r, &r->dp);
	if (k >= 0)
		rdp_dp_service_set_mode(r->dp, r->res_mode);
	/* Allocate checks its char devices under the dev root; without it, no check. */
	if (k >= 0)
		k = rdp_dp_service_set_dev_root(r->dp, s->dev_root);
	if (k >= 0)
		k = rdp_dp_service_set_sysfs_root(r->dp, s->sysfs_root);
	if (k < 0) {
		res_free(r);
		return k;
	}
	rdp_dp_service_set_refresh(r->dp, on_refresh, r);
	rdp_dp_service_set_settled(r->dp, on_settled, r);
	*ret = r;
	return 0;
}

/*
 * r is gone from the config. Returns true when it retires (s->retiring owns it now), false
 * when the caller frees it at once: no handshake open, or it timed out already.
 */
static bool res_remove(struct rdp_resources *s, struct res *r)
{
	uint64_t now = rdp_now_usec();

	if (r->state == RDP_RES_HANDSHAKE &&
	    now - r->handshake_usec >= RDP_REGISTRATION_TIMEOUT_USEC)
		transition(r, RDP_RES_EV_EXPIRED);
	transition(r, RDP_RES_EV_REMOVED);
	if (r->state != RDP_RES_RETIRING)
		return false;
	/* Nothing new for the old name: no socket re-creation, no further Register attempt. */
	arm(r, r->handshake_usec + RDP_REGISTRATION_TIMEOUT_USEC - now);
	if (!rdp_registration_in_flight(r->reg))
		rdp_registration_stop(r->reg);
	r->retiring_next = s->retiring;
	s->retiring = r;
	return true;
}

/* The set. */

static int on_reap(struct rdp_event_source *src, void *userdata)
{
	struct rdp_resources *s = userdata;

	for (struct res **p = &s->retiring; *p;) {
		struct res *r = *p;

		if (r->state != RDP_RES_RELEASED) {
			p = &r->retiring_next;
			continue;
		}
		*p = r->retiring_next;
		rdp_log(RDP_LOG_INFO, "socket-released", "resource=%s socket=%s why=%s",
			r->full_name, rdp_log_q(r->sock_path), strempty(r->release_why));
		res_free(r);
	}
	rdp_resources_start(s);
	return 0;
}

int rdp_resources_new(struct rdp_event *e, enum rdp_registration_mode mode, const char *sock_dir,
		      const char *kubelet_sock, const char *sysfs_root, const char *dev_root,
		      const struct rdp_resources_hooks *hooks, struct rdp_resources **ret)
{
	struct rdp_resources *s = rdp_calloc(1, sizeof(*s));
	int k;

	if (!s)
		return -ENOMEM;
	if ((dev_root && !(s->dev_root = rdp_strdup(dev_root))) ||
	    (sysfs_root && !(s->sysfs_root = rdp_strdup(sysfs_root)))) {
		rdp_free(s->dev_root);
		rdp_free(s);
		return -ENOMEM;
	}
	s->event = e;
	s->mode = mode;
	s->cdi_fd = -1;
	s->n_methods = server_methods(mode, s->methods);
	if (hooks)
		s->hooks = *hooks;
	s->sock_dir = rdp_strdup(sock_dir);
	s->kubelet_sock = rdp_strdup(kubelet_sock);
	if (!s->sock_dir || !s->kubelet_sock) {
		rdp_resources_free(s);
		return -ENOMEM;
	}
	k = rdp_event_add_defer(e, on_reap, s, &s->reap_src);
	if (k < 0) {
		rdp_resources_free(s);
		return k;
	}
	*ret = s;
	return 0;
}

struct rdp_resources *rdp_resources_free(struct rdp_resources *s)
{
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->n_res; i++)
		res_free(s->res[i]);
	rdp_free(s->res);
	while (s->retiring) {
		struct res *r = s->retiring;

		s->retiring = r->retiring_next;
		res_free(r);
	}
	rdp_event_source_free(s->reap_src);
	if (s->cdi_fd >= 0)
		close(s->cdi_fd);
	rdp_free(s->cdi_dir);
	rdp_free(s->hook_path);
	rdp_free(s->sock_dir);
	rdp_free(s->kubelet_sock);
	rdp_free(s->dev_root);
	rdp_free(s->sysfs_root);
	rdp_free(s);
	return NULL;
}

int rdp_resources_set_cdi(struct rdp_resources *s, const char *dir, const char *hook_path)
{
	int fd = rdp_cdi_open_dir(dir, true);

	if (fd < 0) {
		rdp_log(RDP_LOG_ERROR, "cdi-unavailable", "dir=%s error=%s msg=%s", rdp_log_q(dir),
			rdp_log_errno(fd),
			rdp_log_q("cannot open the CDI spec dir: Allocate hands out device specs"));
		return fd;
	}
	rdp_free(s->cdi_dir);
	rdp_free(s->hook_path);
	s->cdi_dir = rdp_strdup(dir);
	s->hook_path = hook_path ? rdp_strdup(hook_path) : NULL;
	if (!s->cdi_dir || (hook_path && !s->hook_path)) {
		close(fd);
		return -ENOMEM;
	}
	if (s->cdi_fd >= 0)
		close(s->cdi_fd);
	s->cdi_fd = fd;
	return 0;
}

static void on_cdi_removed(const char *name, void *userdata)
{
	struct rdp_resources *s = userdata;

	rdp_log(RDP_LOG_INFO, "cdi-spec-removed", "dir=%s file=%s why=%s", rdp_log_q(s->cdi_dir),
		rdp_log_q(name), "no resource of the config owns it");
}

/*
 * CDI classes of the resources of the config (in order), unique; then the dir's specs of
 * no such class (stale: a resource gone, or a previous run's) are removed.
 */
static void set_classes(struct rdp_resources *s)
{
	_cleanup_free_ const char **prefixes = NULL, **names = NULL, **why = NULL, **keep = NULL;
	_cleanup_free_ char(*classes)[RDP_CDI_CLASS_MAX] = NULL;
	size_t n_keep = 0;
	int k;

	if (s->cdi_fd < 0)
		return;
	prefixes = rdp_calloc(s->n_res + 1, sizeof(*prefixes));
	names = rdp_calloc(s->n_res + 1, sizeof(*names));
	why = rdp_calloc(s->n_res + 1, sizeof(*why));
	keep = rdp_calloc(s->n_res + 1, sizeof(*keep));
	classes = rdp_calloc(s->n_res + 1, sizeof(*classes));
	if (!prefixes || !names || !why || !keep || !classes)
		return; /* out of memory: the classes as they were, no cleanup this time */
	for (size_t i = 0; i < s->n_res; i++) {
		prefixes[i] = s->res[i]->prefix;
		names[i] = s->res[i]->name;
	}
	rdp_cdi_classes(prefixes, names, s->n_res, classes, why);
	for (size_t i = 0; i < s->n_res; i++) {
		struct res *r = s->res[i];

		if (why[i]) {
			if (r->cdi != RES_CDI_NO_CLASS) {
				rdp_log(RDP_LOG_ERROR, "cdi-no-class", "resource=%s msg=%s",
					r->full_name, rdp_log_q(why[i]));
				rdp_log(RDP_LOG_WARNING, "cdi-unavailable", "resource=%s msg=%s",
					r->full_name, rdp_log_q("Allocate hands out device specs"));
			}
			r->cdi = RES_CDI_NO_CLASS;
			r->cdi_class[0] = '\0';
			(void)rdp_dp_service_set_cdi(r->dp, NULL);
			continue;
		}
		if (r->cdi == RES_CDI_OFF || r->cdi == RES_CDI_NO_CLASS ||
		    strcmp(r->cdi_class, classes[i]) != 0) {
			r->cdi = RES_CDI_NONE;
			snprintf(r->cdi_class, sizeof(r->cdi_class), "%s", classes[i]);
		}
		keep[n_keep++] = r->cdi_class;
	}
	k = rdp_cdi_cleanup_at(s->cdi_fd, keep, n_keep, on_cdi_removed, s);
	if (k < 0)
		rdp_log(RDP_LOG_WARNING, "cdi-cleanup-failed", "dir=%s error=%s",
			rdp_log_q(s->cdi_dir), rdp_log_errno(k));
}

/*
 * Brings r's spec on disk in line with what its service serves, and tells the service which
 * devices the spec names (Allocate names only those). A write only when the bytes change.
 */
static void cdi_sync(struct res *r)
{
	struct rdp_resources *s = r->set;
	const struct rdp_dp_state *st = rdp_dp_service_state(r->dp);
	_cleanup_free_ char *json = NULL, *kind = NULL;
	_cleanup_free_ char **ids = NULL;
	size_t n_ids = 0;
	enum res_cdi was = r->cdi;
	int k, written;

	if (s->cdi_fd < 0 || r->cdi == RES_CDI_OFF || r->cdi == RES_CDI_NO_CLASS)
		return;
	k = rdp_dp_state_cdi_render(st, r->cdi_class, s->hook_path, &json);
	if (k >= 0)
		k = rdp_cdi_write_at(s->cdi_fd, r->cdi_class, json);
	written = k;
	if (k < 0) {
		r->cdi = RES_CDI_FAILED;
		(void)rdp_dp_service_set_cdi(r->dp, NULL);
		if (was != RES_CDI_FAILED)
			rdp_log(RDP_LOG_ERROR, "cdi-spec-failed", "resource=%s dir=%s error=%s msg=%s",
				r->full_name, rdp_log_q(s->cdi_dir), rdp_log_errno(k),
				rdp_log_q("Allocate hands out device specs until a write succeeds"));
		return;
	}
	if (!json) {
		r->cdi = RES_CDI_NONE;
		(void)rdp_dp_service_set_cdi(r->dp, NULL);
		if (was == RES_CDI_WRITTEN)
			rdp_log(RDP_LOG_INFO, "cdi-spec-removed", "resource=%s dir=%s why=%s",
				r->full_name, rdp_log_q(s->cdi_dir), "no device to name");
		return;
	}
	ids = rdp_calloc(st->n_unit_v + 1, sizeof(*ids));
	kind = rdp_asprintf("%s/%s", RDP_CDI_VENDOR, r->cdi_class);
	if (!ids || !kind) {
		k = -ENOMEM;
	} else {
		for (size_t i = 0; i < st->n_unit_v; i++)
			if (st->unit_v[i].n_specs)
				ids[n_ids++] = (char *)st->unit_v[i].id;
		k = rdp_dp_service_set_cdi(r->dp, &(struct rdp_dp_cdi){
			.kind = kind, .ids = ids, .n_ids = n_ids});
	}
	if (k < 0) {
		r->cdi = RES_CDI_FAILED;
		rdp_log(RDP_LOG_ERROR, "cdi-spec-failed", "resource=%s error=%s", r->full_name,
			rdp_log_errno(k));
		return;
	}
	r->cdi = RES_CDI_WRITTEN;
	if (was != RES_CDI_WRITTEN || written == 0)
		rdp_log(RDP_LOG_INFO, "cdi-spec-written", "resource=%s kind=%s file=%s/%s%s.json "
			"devices=%zu", r->full_name, kind, s->cdi_dir, RDP_CDI_VENDOR "-",
			r->cdi_class, n_ids);
}

size_t rdp_resources_count(const struct rdp_resources *s)
{
	return s->n_res;
}

/* Index of the running resource serving c (same name and prefix), or -1. */
static ssize_t find_res(struct res **v, size_t n, const struct rdp_resource *c)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] && strcmp(v[i]->name, c->name) == 0 &&
		    strcmp(v[i]->prefix, c->prefix) == 0)
			return (ssize_t)i;
	return -1;
}

/*
 * A kept resource turned shared or exclusive: kubelet learns the options (preferred
 * allocation) only at registration, so the socket is made anew and registered again.
 */
static void res_change_mode(struct res *r, enum rdp_resource_mode mode)
{
	int k;

	rdp_log(RDP_LOG_INFO, "resource-mode-changed", "resource=%s from=%s to=%s",
		r->full_name, rdp_resource_mode_name(r->res_mode), rdp_resource_mode_name(mode));
	r->res_mode = mode;
	rdp_dp_service_set_mode(r->dp, mode);
	if (r->reg) {
		/* A new RegisterRequest: the old one carries the old options. */
		k = res_set_mode(r);
		if (k < 0)
			rdp_log(RDP_LOG_ERROR, "register-failed", "resource=%s error=%s",
				r->full_name, rdp_log_errno(k));
	}
	r->restart_pending = true;
}

int rdp_resources_apply_config(struct rdp_resources *s, const struct rdp_config *c,
			       size_t *ret_added, size_t *ret_removed, size_t *ret_kept)
{
	struct res **old = s->res, **res;
	_cleanup_free_ ssize_t *from = NULL;
	size_t n_old = s->n_res, added = 0, removed = 0, kept = 0;
	int k;

	res = rdp_calloc(c->n_resources + 1, sizeof(*res));
	from = rdp_calloc(c->n_resources + 1, sizeof(*from));
	if (!res || !from) {
		rdp_free(res);
		return -ENOMEM;
	}
	/* New resources first: on failure nothing running has been touched. */
	for (size_t i = 0; i < c->n_resources; i++) {
		from[i] = find_res(old, n_old, &c->resources[i]);
		if (from[i] >= 0)
			continue;
		k = res_new(s, &c->resources[i], &res[i]);
		if (k < 0) {
			rdp_log(RDP_LOG_ERROR, "config-rejected", "resource=%s error=%s",
				c->resources[i].full_name, rdp_log_errno(k));
			for (size_t j = 0; j < i; j++)
				if (from[j] < 0)
					res_free(res[j]);
			rdp_free(res);
			return k;
		}
		added++;
	}
	for (size_t i = 0; i < c->n_resources; i++) {
		if (from[i] >= 0) {
			res[i] = TAKE_PTR(old[from[i]]);
			kept++;
			if (res[i]->res_mode != c->resources[i].mode)
				res_change_mode(res[i], c->resources[i].mode);
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
		retiring = res_remove(s, old[i]);
		rdp_log(RDP_LOG_INFO, "resource-removed", "resource=%s socket=%s release=%s",
			old[i]->full_name, rdp_log_q(old[i]->sock_path),
			retiring ? "after-handshake" : "now");
		if (!retiring)
			res_free(old[i]);
		removed++;
	}
	rdp_free(old);
	s->res = res;
	s->n_res = c->n_resources;
	set_classes(s);
	if (ret_added)
		*ret_added = added;
	if (ret_removed)
		*ret_removed = removed;
	if (ret_kept)
		*ret_kept = kept;
	changed(s);
	return 0;
}

int rdp_resources_update(struct rdp_resources *s, const struct rdp_host *h,
			 const struct rdp_pools *pools)
{
	int first_error = 0;

	for (size_t i = 0; i < s->n_res && i < pools->n; i++) {
		struct res *r = s->res[i];
		struct rdp_dp_state st = {.numa_node = -1};
		int k, mask = 0;

		k = rdp_dp_state_build(h, &pools->v[i], &st);
		if (k >= 0) {
			/* Each device problem once when it appears, once when it clears. */
			rdp_dp_unusable_diff(rdp_dp_service_state(r->dp), &st, on_unusable, r);
			if (!r->pool_logged && st.n_devices > 0 && st.n_usable == 0)
				rdp_log(RDP_LOG_WARNING, "pool-unusable", "resource=%s msg=%s",
					r->full_name,
					rdp_log_q("no device of the pool is usable: its units are "
						  "Unhealthy and Allocate fails"));
			k = mask = rdp_dp_service_set_state(r->dp, &st);
		}
		rdp_dp_state_done(&st);
		if (k < 0) {
			rdp_log(RDP_LOG_ERROR, "update-failed", "resource=%s error=%s",
				r->full_name, rdp_log_errno(k));
			if (!first_error)
				first_error = k;
			continue;
		}
		if (!r->pool_logged) {
			r->pool_logged = true;
			log_state(r, "pool", RDP_LOG_INFO);
			if (rdp_dp_service_state(r->dp)->units == 0)
				rdp_log(RDP_LOG_WARNING, "pool-empty", "resource=%s msg=%s",
					r->full_name,
					rdp_log_q("no device matches the selectors: registered "
						  "with 0 units"));
		} else if (mask) {
			/* Losing every device (unplugged, driver gone) deserves a warning. */
			log_state(r, "updated",
				  rdp_dp_service_state(r->dp)->units == 0 ? RDP_LOG_WARNING
									  : RDP_LOG_INFO);
		}
		if (mask || r->cdi == RES_CDI_NONE || r->cdi == RES_CDI_FAILED)
			cdi_sync(r);
		log_env_omitted(r);
		if (mask)
			changed(s);
	}
	return first_error;
}

void rdp_resources_refreshed(struct rdp_resources *s)
{
	for (size_t i = 0; i < s->n_res; i++)
		rdp_dp_service_refreshed(s->res[i]->dp);
}

void rdp_resources_enable(struct rdp_resources *s)
{
	s->enabled = true;
	rdp_resources_start(s);
}

void rdp_resources_start(struct rdp_resources *s)
{
	if (!s->enabled)
		return;
	for (size_t i = 0; i < s->n_res; i++) {
		struct res *r = s->res[i];

		if (r->state == RDP_RES_IDLE || r->state == RDP_RES_WAITING)
			res_start(r);
	}
}

void rdp_resources_kubelet_restarted(struct rdp_resources *s)
{
	s->kubelet_gen++;
}

bool rdp_resources_socket_removed(struct rdp_resources *s, const char *name)
{
	for (size_t i = 0; i < s->n_res; i++) {
		struct res *r = s->res[i];

		/* Ours, and not replaced by a new one of ours since? */
		if (strcmp(r->endpoint, name) == 0 && r->server &&
		    !rdp_grpc_server_socket_present(r->server)) {
			rdp_log(RDP_LOG_INFO, "socket-removed", "resource=%s socket=%s",
				r->full_name, rdp_log_q(r->sock_path));
			r->restart_pending = true;
			return true;
		}
	}
	return false;
}

void rdp_resources_restart_all(struct rdp_resources *s)
{
	for (size_t i = 0; i < s->n_res; i++)
		s->res[i]->restart_pending = true;
	if (s->mode == RDP_REGISTRATION_KUBELET_SOCK)
		s->kubelet_gen++;
}

void rdp_resources_check_sockets(struct rdp_resources *s)
{
	for (size_t i = 0; i < s->n_res; i++)
		s->res[i]->restart_pending |= s->res[i]->server &&
					      !rdp_grpc_server_socket_present(s->res[i]->server);
}

void rdp_resources_apply_pending(struct rdp_resources *s)
{
	for (size_t i = 0; i < s->n_res; i++) {
		struct res *r = s->res[i];

		if (!rdp_res_state_serving(r->state) && r->state != RDP_RES_LISTEN_RETRY)
			continue;
		if (r->restart_pending ||
		    (s->mode == RDP_REGISTRATION_KUBELET_SOCK && r->kubelet_gen != s->kubelet_gen))
			res_listen(r);
	}
}

int rdp_resources_set_mode(struct rdp_resources *s, enum rdp_registration_mode mode,
			   const char *sock_dir)
{
	char *dir = rdp_strdup(sock_dir);
	int k = 0;

	if (!dir)
		return -ENOMEM;
	/* The old sockets go first: kubelet must not find a plugin in both places. */
	for (size_t i = 0; i < s->n_res; i++) {
		struct res *r = s->res[i];

		r->server = rdp_grpc_server_free(r->server);
		rdp_registration_stop(r->reg);
		arm(r, 0);
		transition(r, RDP_RES_EV_STOP);
	}
	while (s->retiring) {
		struct res *r = s->retiring;

		s->retiring = r->retiring_next;
		res_free(r);
	}
	rdp_free(s->sock_dir);
	s->sock_dir = dir;
	s->mode = mode;
	s->n_methods = server_methods(mode, s->methods);
	s->kubelet_gen++;
	for (size_t i = 0; i < s->n_res; i++) {
		int q = res_set_mode(s->res[i]);

		if (q < 0 && k == 0)
			k = q;
	}
	rdp_resources_start(s);
	return k;
}

size_t rdp_resources_status(const struct rdp_resources *s, struct rdp_resource_status *v,
			    size_t n)
{
	size_t i;

	for (i = 0; i < s->n_res && i < n; i++) {
		const struct res *r = s->res[i];
		const struct rdp_dp_state *st = rdp_dp_service_state(r->dp);

		v[i] = (struct rdp_resource_status){
			.full_name = r->full_name,
			.sock_path = r->sock_path,
			.state = r->state,
			.units = st->units,
			.healthy = st->healthy,
			.healthy_units = rdp_dp_state_healthy_units(st),
			.streams = rdp_dp_service_streams(r->dp),
			.serving = r->server != NULL,
			.n_devices = st->n_devices,
			.n_usable = st->n_usable,
			.counters = r->counters,
		};
	}
	return i;
}
