/* SPDX-License-Identifier: MIT */
#include "dra-driver.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "cdi.h"
#include "discovery.h"
#include "dra-claims.h"
#include "dra-health.h"
#include "dra-instance.h"
#include "dra-prepare.h"
#include "dra-slices.h"
#include "event.h"
#include "grpc.h"
#include "hostwatch.h"
#include "portpoll.h"
#include "kube-worker.h"
#include "log.h"
#include "macro.h"
#include "methods.h"
#include "registration.h"
#include "rescan.h"
#include "run.h"

/* What the slice sync is doing: one step at a time, each step a job of the slice worker. */
enum slice_state {
	SLICES_IDLE,       /* in sync as far as we know; the resync timer runs */
	SLICES_NODE,       /* GET the Node (its uid, for ownerReferences) */
	SLICES_LIST,       /* GET our slices */
	SLICES_WRITE,      /* the writes the comparison called for, one after the other */
	SLICES_BACKOFF,    /* a step failed: the timer starts again from LIST (or NODE) */
};

static const char *const slice_state_names[] = {
	[SLICES_IDLE] = "idle",
	[SLICES_NODE] = "node",
	[SLICES_LIST] = "list",
	[SLICES_WRITE] = "write",
	[SLICES_BACKOFF] = "backoff",
};

/* One write of a sync: POST a new slice, PUT over one, DELETE an old one. */
struct slice_write {
	enum rdp_kube_method method;
	char path[256];
	char *body;
};

struct driver {
	const struct rdp_dra_options *o;
	struct rdp_event *event;
	/* The host model: rescans on the loop (cheap: full discovery only when it moved). */
	struct rdp_scanner *scanner;
	struct rdp_hostwatch *hostwatch;
	/* Every offered port's state (and phys_state) files, as in the device plugin. */
	struct rdp_portpoll *portpoll;
	struct rdp_event_source *rescan_src;
	struct rdp_dra_inventory inv;
	/* Sockets: registration (plugins_registry) and the DRA service (plugins/<driver>). */
	char *reg_path, *dra_dir, *dra_path, *checkpoint_path;
	struct rdp_grpc_server *reg_server, *dra_server;
	struct rdp_watcher_info winfo;
	unsigned int registrations;
	/* The API server: one worker for slices, one for claims. */
	struct rdp_kube_config kcfg;
	struct rdp_kube_worker *slice_worker, *claim_worker;
	/* Slices. */
	enum slice_state sstate;
	bool dirty;            /* something changed during a sync: sync again after it */
	char *node_uid;
	struct rdp_kube_job sjob;
	json_t *desired;       /* the slices the last sync computed */
	struct slice_write *writes;
	size_t n_writes, next_write;
	long long generation;  /* of the desired slices */
	char *sync_why;        /* the first reason of the coming sync */
	struct rdp_event_source *slice_timer;
	uint64_t backoff_usec;
	unsigned int failures;
	char last_error[256];  /* logged once per change */
	/* Claims. */
	struct rdp_dra_prepare *prep;
	/* Device health for kubelet's NodeWatchResources streams, and their resend timer. */
	struct rdp_dra_health_server *health;
	struct rdp_event_source *health_timer;
	/* Taints: the list after writes verifies them; the API server dropped them. */
	bool verify;
	bool taints_dropped;
	unsigned int rewrites; /* write rounds in a row that the read-back did not confirm */
	/* --sharing=capacity, but the API server dropped allowMultipleAllocations: as claim */
	bool share_dropped;
};

static void slices_set_state(struct driver *d, enum slice_state s)
{
	if (d->sstate != s)
		rdp_log(RDP_LOG_DEBUG, "slices-state", "from=%s to=%s",
			slice_state_names[d->sstate], slice_state_names[s]);
	d->sstate = s;
}

static void slices_start(struct driver *d, const char *why);

static void writes_clear(struct driver *d)
{
	for (size_t i = 0; i < d->n_writes; i++)
		rdp_free(d->writes[i].body);
	rdp_free(d->writes);
	d->writes = NULL;
	d->n_writes = d->next_write = 0;
}

/* A step failed: log (once per distinct error), back off, start again from scratch. */
static void slices_fail(struct driver *d, const char *step, const char *error)
{
	uint64_t delay = rdp_backoff_next(&d->backoff_usec, RDP_DRA_BACKOFF_MIN_USEC,
					  RDP_DRA_BACKOFF_MAX_USEC);

	d->failures++;
	if (strcmp(d->last_error, error) != 0 || (d->failures & (d->failures - 1)) == 0)
		rdp_log(RDP_LOG_WARNING, "slices-failed",
			"step=%s error=%s retry_ms=%llu failures=%u", step, rdp_log_q(error),
			(unsigned long long)(delay / 1000), d->failures);
	snprintf(d->last_error, sizeof(d->last_error), "%s", error);
	writes_clear(d);
	slices_set_state(d, SLICES_BACKOFF);
	rdp_event_source_set_timer(d->slice_timer, delay);
}

/* The job's failure in words: the transport's error, or the status and the server's message. */
static void job_error(const struct rdp_kube_job *job, char *buf, size_t len)
{
	const char *msg = job->json ? rdp_kube_status_message(job->json) : NULL;

	if (job->result < 0)
		snprintf(buf, len, "%s", job->error[0] ? job->error : strerror(-job->result));
	else
		snprintf(buf, len, "HTTP %d%s%s", job->resp.status, msg ? ": " : "",
			 msg ? msg : "");
}

static void slices_job_done(struct rdp_kube_job *job, void *userdata);

static int slices_submit(struct driver *d, enum rdp_kube_method m, const char *path,
			 char *body)
{
	rdp_kube_job_done(&d->sjob);
	d->sjob.method = m;
	snprintf(d->sjob.path, sizeof(d->sjob.path), "%s", path);
	d->sjob.body = body;
	d->sjob.parse_json = true;
	d->sjob.policy = (struct rdp_kube_retry){.max_attempts = 3};
	return rdp_kube_worker_submit(d->slice_worker, &d->sjob, RDP_DRA_SLICE_BUDGET_MS,
				      slices_job_done, d);
}

static void slices_list(struct driver *d)
{
	char path[512];

	/* fieldSelector=spec.nodeName=<node>,spec.driver=<driver>, URL-encoded */
	snprintf(path, sizeof(path),
		 "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%%3D%s"
		 "%%2Cspec.driver%%3D%s",
		 d->o->node_name, d->o->driver);
	slices_set_state(d, SLICES_LIST);
	if (slices_submit(d, RDP_KUBE_GET, path, NULL) < 0)
		slices_set_state(d, SLICES_IDLE);
}

static void slices_next_write(struct driver *d)
{
	struct slice_write *w;

	if (d->next_write == d->n_writes) {
		writes_clear(d);
		/* Read back what the API server holds now: it must be what we wanted. */
		d->verify = true;
		slices_list(d);
		return;
	}
	w = &d->writes[d->next_write];
	slices_set_state(d, SLICES_WRITE);
	if (slices_submit(d, w->method, w->path, w->body) < 0)
		slices_set_state(d, SLICES_IDLE);
}

static int add_write(struct driver *d, enum rdp_kube_method m, const char *path, json_t *obj)
{
	struct slice_write *v = rdp_realloc(d->writes, (d->n_writes + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	d->writes = v;
	v[d->n_writes] = (struct slice_write){.method = m};
	snprintf(v[d->n_writes].path, sizeof(v[d->n_writes].path), "%s", path);
	if (obj) {
		v[d->n_writes].body = json_dumps(obj, JSON_COMPACT);
		if (!v[d->n_writes].body)
			return -ENOMEM;
	}
	d->n_writes++;
	return 0;
}

/*
 * The read-back after writes differs from what was written. Without taints it would not:
 * the API server drops them (DRADeviceTaints off): go on without (*desired, *sync replaced).
 * Otherwise count the round; the third in a row is a failure (-EPROTO).
 */
static int slices_unconfirmed(struct driver *d, json_t *items, struct rdp_dra_node *node,
			      json_t **desired, struct rdp_dra_sync *sync)
{
	struct rdp_dra_sync plain;
	json_t *without = NULL;
	int k;

	if (node->port_down_taint != RDP_DRA_TAINT_OFF) {
		node->port_down_taint = RDP_DRA_TAINT_OFF;
		k = rdp_dra_slices_build(node, &d->inv, 1, &without);
		if (k >= 0)
			k = rdp_dra_slices_compare(items, without, &plain);
		if (k >= 0 && plain.action == RDP_DRA_SYNC_UNCHANGED &&
		    !json_equal(without, *desired)) {
			rdp_log(RDP_LOG_WARNING, "taints-dropped", "driver=%s msg=%s", d->o->driver,
				rdp_log_q("the API server dropped the device taints written "
					  "(DRADeviceTaints off): publishing without them until "
					  "restarted"));
			d->taints_dropped = true;
			json_decref(*desired);
			*desired = without;
			*sync = plain;
			return 0;
		}
		json_decref(without);
		if (k < 0)
			return k;
	}
	/* not reset by the failure: after the backoff, one round per retry */
	return ++d->rewrites >= 3 ? -EPROTO : 0;
}

/* The list came back: compare, and plan the writes. */
static void slices_listed(struct driver *d, json_t *list)
{
	json_t *items = json_is_object(list) ? json_object_get(list, "items") : NULL;
	struct rdp_dra_node node = {.driver = d->o->driver, .node_name = d->o->node_name,
				    .node_uid = d->node_uid,
				    .port_down_taint = d->taints_dropped ? RDP_DRA_TAINT_OFF
									 : d->o->port_down_taint};
	struct rdp_dra_sync sync;
	json_t *desired = NULL, *x;
	bool verify = d->verify;
	size_t i;
	int k;

	d->verify = false;
	if (items && !json_is_array(items) && !json_is_null(items)) {
		slices_fail(d, "list", "the list of ResourceSlices has no items array");
		return;
	}
	k = rdp_dra_slices_build(&node, &d->inv, 1, &desired);
	if (k >= 0 && !d->share_dropped)
		k = rdp_dra_share_slices(desired, &d->o->share);
	if (k >= 0)
		k = rdp_dra_slices_compare(json_is_array(items) ? items : NULL, desired, &sync);
	if (k >= 0 && verify && sync.action != RDP_DRA_SYNC_UNCHANGED)
		k = slices_unconfirmed(d, json_is_array(items) ? items : NULL, &node, &desired,
				       &sync);
	if (k >= 0)
		k = rdp_dra_slices_set_generation(desired, sync.generation);
	if (k < 0) {
		json_decref(desired);
		slices_fail(d, k == -EPROTO ? "verify" : "compare",
			    k == -EPROTO ? "the API server does not keep the slices as written"
					 : strerror(-k));
		return;
	}
	json_decref(d->desired);
	d->desired = desired;
	d->generation = sync.generation;
	writes_clear(d);
	switch (sync.action) {
	case RDP_DRA_SYNC_UNCHANGED:
		d->rewrites = 0;
		d->backoff_usec = 0;
		if (d->failures || d->last_error[0])
			rdp_log(RDP_LOG_INFO, "slices-recovered", "after=%u", d->failures);
		d->failures = 0;
		d->last_error[0] = '\0';
		slices_set_state(d, SLICES_IDLE);
		if (d->sync_why) {
			size_t tainted = 0, j;
			json_t *dev;

			json_array_foreach(desired, i, x)
				json_array_foreach(json_object_get(json_object_get(x, "spec"), "devices"),
						   j, dev)
					tainted += json_array_size(json_object_get(dev, "taints")) > 0;
			rdp_log(RDP_LOG_INFO, "slices-published",
				"driver=%s pool=%s generation=%lld slices=%zu devices=%zu tainted=%zu "
				"why=%s", d->o->driver, d->o->node_name, d->generation,
				json_array_size(desired), d->inv.n_devs, tainted,
				rdp_log_q(d->sync_why));
			rdp_free(d->sync_why);
			d->sync_why = NULL;
		}
		if (d->dirty) {
			d->dirty = false;
			slices_start(d, "changed-during-sync");
			return;
		}
		rdp_event_source_set_timer(d->slice_timer, RDP_DRA_RESYNC_USEC);
		return;
	case RDP_DRA_SYNC_UPDATE: {
		json_t *found = json_array_get(items, sync.update_index);
		json_t *body = rdp_dra_slice_for_update(json_array_get(desired, 0), found);
		char path[256];

		if (!body) {
			slices_fail(d, "update", "cannot build the update");
			return;
		}
		snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/resourceslices/%s",
			 json_string_value(json_object_get(json_object_get(found, "metadata"),
							   "name")));
		k = add_write(d, RDP_KUBE_PUT, path, body);
		json_decref(body);
		break;
	}
	case RDP_DRA_SYNC_RECREATE:
		/* New ones first, with the higher generation (the scheduler uses the highest);
		 * then the old ones go. */
		k = 0;
		json_array_foreach(desired, i, x)
			if (k >= 0)
				k = add_write(d, RDP_KUBE_POST, "/apis/resource.k8s.io/v1/resourceslices",
					      x);
		json_array_foreach(json_is_array(items) ? items : NULL, i, x) {
			const char *name = json_string_value(
				json_object_get(json_object_get(x, "metadata"), "name"));
			char path[256];

			if (!name || k < 0)
				continue;
			snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/resourceslices/%s",
				 name);
			k = add_write(d, RDP_KUBE_DELETE, path, NULL);
		}
		break;
	}
	if (k < 0) {
		slices_fail(d, "plan", strerror(-k));
		return;
	}
	if (!d->sync_why)
		d->sync_why = rdp_strdup("resync-found-a-difference");
	rdp_log(RDP_LOG_INFO, "slices-sync", "action=%s generation=%lld writes=%zu",
		rdp_dra_sync_action_name(sync.action), sync.generation, d->n_writes);
	slices_next_write(d);
}

static void slices_job_done(struct rdp_kube_job *job, void *userdata)
{
	struct driver *d = userdata;
	int status = job->resp.status;
	char err[320];

	if (job->result == -ECANCELED)
		return; /* stopping */
	switch (d->sstate) {
	case SLICES_NODE: {
		const char *uid = json_string_value(
			json_object_get(json_object_get(job->json, "metadata"), "uid"));

		if (job->result < 0 || status != 200 || !uid || !*uid) {
			job_error(job, err, sizeof(err));
			slices_fail(d, "get-node", err);
			return;
		}
		rdp_free(d->node_uid);
		d->node_uid = rdp_strdup(uid);
		if (!d->node_uid) {
			slices_fail(d, "get-node", "out of memory");
			return;
		}
		rdp_log(RDP_LOG_INFO, "node-found", "node=%s uid=%s", d->o->node_name, uid);
		slices_list(d);
		return;
	}
	case SLICES_LIST:
		if (job->result < 0 || status != 200) {
			job_error(job, err, sizeof(err));
			slices_fail(d, "list", err);
			return;
		}
		slices_listed(d, job->json);
		return;
	case SLICES_WRITE: {
		const struct slice_write *w = &d->writes[d->next_write];

		/* A DELETE of what is gone already is done; anything else must be 2xx. */
		if (job->result < 0 || !((status >= 200 && status < 300) ||
					 (w->method == RDP_KUBE_DELETE && status == 404))) {
			job_error(job, err, sizeof(err));
			/* 409: someone else wrote first (a stale resourceVersion): re-list now. */
			if (job->result == 0 && status == 409) {
				rdp_log(RDP_LOG_INFO, "slices-conflict", "path=%s msg=%s",
					rdp_log_q(w->path), rdp_log_q(err));
				writes_clear(d);
				slices_list(d);
				return;
			}
			slices_fail(d, rdp_kube_method_name(w->method), err);
			return;
		}
		if (w->method != RDP_KUBE_DELETE && !d->share_dropped &&
		    d->o->share.sharing == RDP_DRA_SHARING_CAPACITY &&
		    rdp_dra_share_dropped(job->json)) {
			rdp_log(RDP_LOG_WARNING, "sharing-unsupported",
				"msg=%s", rdp_log_q("the API server dropped allowMultipleAllocations "
						    "(DRAConsumableCapacity off: Kubernetes < 1.36?); "
						    "publishing devices for one claim each"));
			d->share_dropped = true;
		}
		d->next_write++;
		slices_next_write(d);
		return;
	}
	case SLICES_IDLE:
	case SLICES_BACKOFF:
		return;
	}
}

/*
 * A sync is wanted (why: for the log; NULL for a resync that should log nothing unless it
 * finds a difference). One runs at a time; a request meanwhile follows it.
 */
static void slices_start(struct driver *d, const char *why)
{
	if (why && !d->sync_why)
		d->sync_why = rdp_strdup(why);
	if (d->sstate == SLICES_NODE || d->sstate == SLICES_LIST || d->sstate == SLICES_WRITE) {
		d->dirty = true;
		return;
	}
	rdp_event_source_set_timer(d->slice_timer, 0);
	if (!d->node_uid) {
		char path[320];

		snprintf(path, sizeof(path), "/api/v1/nodes/%s", d->o->node_name);
		slices_set_state(d, SLICES_NODE);
		if (slices_submit(d, RDP_KUBE_GET, path, NULL) < 0)
			slices_set_state(d, SLICES_IDLE);
		return;
	}
	slices_list(d);
}

static int on_slice_timer(struct rdp_event_source *s, void *userdata)
{
	struct driver *d = userdata;

	(void)s;
	/* A retry keeps the reason of the sync it retries; a resync logs only a difference. */
	slices_start(d, NULL);
	return 0;
}

/* Host model. */

/* The health of the offered devices, sent to kubelet's streams when it changed. */
static void health_update(struct driver *d)
{
	const struct rdp_dra_health *h;
	size_t n, counts[3] = {0};
	int k = rdp_dra_health_set_inventory(d->health, &d->inv);

	if (k <= 0) {
		if (k < 0)
			rdp_log(RDP_LOG_ERROR, "health-failed", "error=%s", rdp_log_errno(k));
		return;
	}
	h = rdp_dra_health_list(d->health, &n);
	for (size_t i = 0; i < n; i++)
		counts[h[i].status <= RDP_DRA_HEALTH_UNHEALTHY ? h[i].status : 0]++;
	rdp_log(RDP_LOG_INFO, "health-changed", "devices=%zu healthy=%zu unhealthy=%zu unknown=%zu "
		"streams=%zu", n, counts[RDP_DRA_HEALTH_HEALTHY], counts[RDP_DRA_HEALTH_UNHEALTHY],
		counts[RDP_DRA_HEALTH_UNKNOWN], rdp_dra_health_streams(d->health));
	for (size_t i = 0; i < n; i++)
		if (h[i].status != RDP_DRA_HEALTH_HEALTHY)
			rdp_log(RDP_LOG_DEBUG, "device-health", "device=%s health=%s msg=%s",
				h[i].device, rdp_dra_health_status_name(h[i].status),
				rdp_log_q(h[i].message));
}

static int rebuild_inventory(struct driver *d)
{
	const struct rdp_host *h = rdp_scanner_host(d->scanner);
	struct rdp_dra_inventory inv = {0};
	int k;

	if (!h)
		return -ENODATA;
	k = rdp_dra_inventory_build(h, &inv);
	if (k < 0)
		return k;
	rdp_dra_inventory_done(&d->inv);
	d->inv = inv;
	for (size_t i = 0; i < inv.n_dropped; i++)
		rdp_log(RDP_LOG_WARNING, "device-not-offered", "device=%s msg=%s", inv.dropped[i],
			rdp_log_q("another device has the same DRA name"));
	if (d->prep)
		rdp_dra_prepare_set_inventory(d->prep, &d->inv);
	if (d->health)
		health_update(d);
	return 0;
}

/*
 * The ports of every device of the model are polled (the kernel sends no event for a port
 * state change, portpoll.h), and their netdevs' link messages count whatever their kind.
 */
static void watch_host(struct driver *d)
{
	const struct rdp_host *h = rdp_scanner_host(d->scanner);
	_cleanup_free_ const char **names = NULL;
	size_t n = 0, cap = 0;

	if (!h)
		return;
	(void)rdp_portpoll_set(d->portpoll, h, NULL);
	for (size_t i = 0; i < h->n_devices; i++)
		cap += h->devices[i].n_netdevs;
	names = rdp_calloc(cap + 1, sizeof(*names));
	if (!names)
		return;
	for (size_t i = 0; i < h->n_devices; i++)
		for (size_t j = 0; j < h->devices[i].n_netdevs; j++)
			names[n++] = h->devices[i].netdevs[j];
	(void)rdp_hostwatch_set_netdevs(d->hostwatch, names, n);
}

static void rescan(struct driver *d, enum rdp_scan_mode mode, const char *why)
{
	int k = rdp_scanner_scan(d->scanner, mode);
	bool changed;

	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "discovery-failed", "error=%s why=%s", rdp_log_errno(k),
			rdp_log_q(why));
		return;
	}
	changed = k > 0;
	/* Even an unchanged scan may hand over a new model (a full one): the inventory
	 * borrows it, so it is rebuilt after every scan. */
	k = rebuild_inventory(d);
	if (k < 0) {
		rdp_dra_inventory_done(&d->inv);
		rdp_log(RDP_LOG_ERROR, "inventory-failed", "error=%s", rdp_log_errno(k));
		return;
	}
	if (!changed)
		return;
	watch_host(d);
	rdp_log(RDP_LOG_INFO, "devices-changed", "offered=%zu why=%s", d->inv.n_devs,
		rdp_log_q(why));
	slices_start(d, why);
}

static void on_host_change(const char *reason, unsigned int n_events, unsigned int flags,
			   void *userdata)
{
	(void)n_events;
	rescan(userdata, flags & RDP_HOSTWATCH_LOST_EVENTS ? RDP_SCAN_FULL : RDP_SCAN_AUTO,
	       reason);
}

static void on_port_change(const char *reason, unsigned int n_changes, void *userdata)
{
	(void)n_changes;
	rescan(userdata, RDP_SCAN_AUTO, reason);
}

static int on_rescan_timer(struct rdp_event_source *s, void *userdata)
{
	rescan(userdata, RDP_SCAN_AUTO, "periodic");
	rdp_event_source_set_timer(s, RDP_DRA_RESCAN_USEC);
	return 0;
}

/* Registration: kubelet's plugin watcher finds <driver>-reg.sock. */

static void on_watcher_status(void *userdata, bool registered, const char *error)
{
	struct driver *d = userdata;

	if (!registered) {
		rdp_log(RDP_LOG_WARNING, "register-failed", "driver=%s error=%s", d->o->driver,
			rdp_log_q(error ? error : ""));
		return;
	}
	d->registrations++;
	rdp_log(RDP_LOG_INFO, "registered", "driver=%s endpoint=%s registrations=%u",
		d->o->driver, rdp_log_q(d->dra_path), d->registrations);
	/* kubelet wipes the node's slices when it starts: publish them again. */
	slices_start(d, d->registrations == 1 ? "registered" : "re-registered");
}

static void on_reg_call(struct rdp_grpc_call *call, const uint8_t *req, size_t len,
			void *userdata)
{
	struct driver *d = userdata;

	rdp_watcher_dispatch(&d->winfo, call, req, len);
}

/*
 * The services of dra.sock, as kubelet reads supported_versions: it takes the first DRAPlugin
 * it supports in this order (1.34+: v1), and, independently, the DRAResourceHealth it prefers
 * among those listed (1.37: v1, then v1alpha1; 1.36: v1alpha1; 1.34/1.35 ignore both and,
 * with ResourceHealthStatus on, open v1alpha1 anyway). Listed in kubelet's order of
 * preference.
 */
static const char *const dra_versions[] = {"v1.DRAPlugin", "v1beta1.DRAPlugin",
					   "v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"};
#define DRA_VERSIONS_LOG "v1.DRAPlugin,v1beta1.DRAPlugin,v1.DRAResourceHealth,v1alpha1.DRAResourceHealth"

/* The DRA service. */

static void on_dra_call(struct rdp_grpc_call *call, const uint8_t *req, size_t len,
			void *userdata)
{
	struct driver *d = userdata;

	rdp_dra_prepare_dispatch(d->prep, call, req, len);
}

static void on_health_call(struct rdp_grpc_call *call, const uint8_t *req, size_t len,
			   void *userdata)
{
	struct driver *d = userdata;

	rdp_dra_health_dispatch(d->health, call, req, len);
	rdp_log(RDP_LOG_INFO, "health-stream", "method=%s call=%llu streams=%zu",
		rdp_log_q(rdp_grpc_call_path(call)), (unsigned long long)rdp_grpc_call_id(call),
		rdp_dra_health_streams(d->health));
}

static int on_health_timer(struct rdp_event_source *s, void *userdata)
{
	struct driver *d = userdata;

	rdp_dra_health_resend(d->health);
	rdp_event_source_set_timer(s, RDP_DRA_HEALTH_RESEND_SEC * 1000000ULL);
	return 0;
}

static struct rdp_grpc_method reg_methods[2];
static struct rdp_grpc_method dra_methods[6];

static void on_sighup(void *userdata)
{
	struct driver *d = userdata;

	rdp_log(RDP_LOG_INFO, "resync", "signal=SIGHUP");
	rescan(d, RDP_SCAN_FULL, "sighup");
	slices_start(d, "sighup");
}

static int mkdir_p(const char *dir)
{
	char buf[PATH_MAX];
	size_t n = strlen(dir);

	if (n >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, dir, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0750) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, 0750) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/*
 * This instance's sockets (dra-instance.h): <driver>[-<uid>]-reg.sock and dra[-<uid>].sock.
 * With a UID, the sockets of instances that are gone (killed before they could remove them)
 * are removed: kubelet would try them forever.
 */
static int instance_paths(struct driver *d)
{
	const struct rdp_dra_options *o = d->o;
	char reg[320], dra[128];
	int k = rdp_dra_reg_socket_name(o->driver, o->rolling_update_uid, reg, sizeof(reg));

	if (k >= 0)
		k = rdp_dra_service_socket_name(o->rolling_update_uid, dra, sizeof(dra));
	if (k < 0)
		return k;
	d->reg_path = rdp_asprintf("%s/plugins_registry/%s", o->kubelet_root, reg);
	d->dra_dir = rdp_asprintf("%s/plugins/%s", o->kubelet_root, o->driver);
	d->dra_path = rdp_asprintf("%s/plugins/%s/%s", o->kubelet_root, o->driver, dra);
	if (!d->reg_path || !d->dra_dir || !d->dra_path)
		return -ENOMEM;
	if (o->rolling_update_uid && *o->rolling_update_uid) {
		_cleanup_free_ char *regdir = rdp_asprintf("%s/plugins_registry", o->kubelet_root);
		_cleanup_free_ char *prefix = rdp_asprintf("%s-", o->driver);
		int a, b;

		if (!regdir || !prefix)
			return -ENOMEM;
		a = rdp_dra_remove_stale_sockets(regdir, prefix, "-reg.sock", reg);
		b = rdp_dra_remove_stale_sockets(d->dra_dir, "dra", ".sock", dra);
		rdp_log(RDP_LOG_INFO, "rolling-update", "uid=%s registration=%s endpoint=%s "
			"stale_removed=%d", o->rolling_update_uid, reg, dra,
			(a > 0 ? a : 0) + (b > 0 ? b : 0));
	}
	return 0;
}

static int setup(struct rdp_event *e, void *userdata)
{
	struct driver *d = userdata;
	const struct rdp_dra_options *o = d->o;
	char *err = NULL;
	int k;

	k = instance_paths(d);
	if (k < 0)
		return k;
	d->checkpoint_path = rdp_asprintf("%s/plugins/%s/checkpoint.json", o->kubelet_root,
					  o->driver);
	if (!d->reg_path || !d->dra_dir || !d->dra_path || !d->checkpoint_path)
		return -ENOMEM;
	rdp_log(RDP_LOG_INFO, "starting",
		"version=%s driver=%s node=%s kubelet_root=%s sysfs=%s dev=%s cdi=%s api=%s",
		RDP_VERSION, o->driver, o->node_name, rdp_log_q(o->kubelet_root),
		rdp_log_q(o->sysfs_root), rdp_log_q(o->dev_root), rdp_log_q(o->cdi_spec_dir),
		rdp_log_q(o->api_server ? o->api_server : "in-cluster"));
	if (o->share.sharing == RDP_DRA_SHARING_CAPACITY)
		rdp_log(RDP_LOG_INFO, "sharing", "mode=capacity slots=%u bandwidth=%s",
			o->share.slots ? o->share.slots : RDP_DRA_SHARE_SLOTS_DEFAULT,
			o->share.bandwidth ? "yes" : "no");
	if (o->api_server)
		k = rdp_kube_config_explicit(o->api_server, o->token_file, o->ca_file,
					     o->api_server_name, &d->kcfg, &err);
	else
		k = rdp_kube_config_in_cluster(o->sa_root, &d->kcfg, &err);
	if (k >= 0 && !o->api_server && o->api_server_name) {
		rdp_free(d->kcfg.server_name);
		d->kcfg.server_name = rdp_strdup(o->api_server_name);
	}
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "api-server-config", "error=%s msg=%s", rdp_log_errno(k),
			rdp_log_q(err ? err
				      : "give --api-server, --token-file and --ca-file outside a pod"));
		rdp_free(err);
		return -EINVAL;
	}
	d->event = e;
	k = rdp_kube_worker_new(d->event, &d->kcfg, &d->slice_worker, &err);
	if (k >= 0)
		k = rdp_kube_worker_new(d->event, &d->kcfg, &d->claim_worker, &err);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "api-server-client", "error=%s msg=%s", rdp_log_errno(k),
			rdp_log_q(err ? err : ""));
		rdp_free(err);
		return -EINVAL;
	}
	/* The model. */
	k = rdp_node_watch_host(d->event, o->dev_root, on_host_change, d, &d->hostwatch);
	if (k < 0)
		return k;
	k = rdp_scanner_new(o->sysfs_root, o->dev_root, &d->scanner);
	if (k >= 0)
		k = rdp_scanner_scan(d->scanner, RDP_SCAN_FULL);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "discovery-failed", "sysfs=%s dev=%s error=%s why=start",
			rdp_log_q(o->sysfs_root), rdp_log_q(o->dev_root), rdp_log_errno(k));
		return k;
	}
	k = rebuild_inventory(d);
	if (k < 0)
		return k;
	k = rdp_portpoll_new(d->event, o->sysfs_root, 0, on_port_change, d, &d->portpoll);
	if (k < 0)
		return k;
	watch_host(d);
	for (size_t i = 0; i < d->inv.n_devs; i++) {
		const struct rdp_device *dev = rdp_dra_dev_device(&d->inv, &d->inv.devs[i]);

		rdp_log(RDP_LOG_INFO, "device", "name=%s ibdev=%s pci=%s numa=%d",
			d->inv.devs[i].name, dev->name, dev->pci_address[0] ? dev->pci_address : "-",
			dev->numa_node);
	}
	k = rdp_event_add_timer(d->event, RDP_DRA_RESCAN_USEC, on_rescan_timer, d,
				&d->rescan_src);
	if (k < 0)
		return k;
	/* Claims: the checkpoint first, so that kubelet's first call sees what was prepared. */
	{
		struct rdp_dra_prepare_options po = {
			.driver = o->driver,
			.pool = o->node_name,
			.cdi_spec_dir = o->cdi_spec_dir,
			.memlock_hook = o->memlock_hook,
			.memlock = o->memlock,
			.checkpoint_path = d->checkpoint_path,
			.dev_root = o->dev_root,
			.worker = d->claim_worker,
			.budget_ms = RDP_DRA_CLAIM_BUDGET_MS,
			.verbose = o->verbose,
		};

		k = mkdir_p(d->dra_dir);
		if (k < 0) {
			rdp_log(RDP_LOG_ERROR, "plugin-dir", "dir=%s error=%s", rdp_log_q(d->dra_dir),
				rdp_log_errno(k));
			return k;
		}
		k = rdp_dra_prepare_new(&po, &d->inv, &d->prep);
		if (k < 0)
			return k;
	}
	/* Health: the first list now, then after every rescan and on the resend timer. */
	k = rdp_dra_health_server_new(o->node_name, &d->health);
	if (k < 0)
		return k;
	health_update(d);
	k = rdp_event_add_timer(d->event, RDP_DRA_HEALTH_RESEND_SEC * 1000000ULL, on_health_timer,
				d, &d->health_timer);
	if (k < 0)
		return k;
	/* Slices. */
	k = rdp_event_add_timer(d->event, 0, on_slice_timer, d, &d->slice_timer);
	if (k < 0)
		return k;
	slices_start(d, "start");
	/* The DRA socket, then the registration socket (kubelet dials the former once it
	 * finds the latter). Long idle timeout: kubelet keeps its connection and counts a
	 * dropped one as the driver gone (it wipes the slices 30 s later). */
	{
		struct rdp_grpc_limits lim;

		rdp_grpc_limits_default(&lim);
		lim.idle_timeout_usec = 24ULL * 3600 * 1000 * 1000;
		dra_methods[0] = (struct rdp_grpc_method){rdp_method_path(RDP_METHOD_DRA_PREPARE),
							  on_dra_call, false};
		dra_methods[1] = (struct rdp_grpc_method){
			rdp_method_path(RDP_METHOD_DRA_UNPREPARE), on_dra_call, false};
		dra_methods[2] = (struct rdp_grpc_method){
			rdp_method_path(RDP_METHOD_DRA_V1BETA1_PREPARE), on_dra_call, false};
		dra_methods[3] = (struct rdp_grpc_method){
			rdp_method_path(RDP_METHOD_DRA_V1BETA1_UNPREPARE), on_dra_call, false};
		dra_methods[4] = (struct rdp_grpc_method){
			rdp_method_path(RDP_METHOD_DRA_HEALTH_V1_WATCH), on_health_call, true};
		dra_methods[5] = (struct rdp_grpc_method){
			rdp_method_path(RDP_METHOD_DRA_HEALTH_V1ALPHA1_WATCH), on_health_call, true};
		k = rdp_grpc_server_new(d->event, d->dra_path, dra_methods, ARRAY_SIZE(dra_methods),
					&lim, d, &d->dra_server);
		if (k < 0) {
			rdp_log(RDP_LOG_ERROR, "listen-failed", "socket=%s error=%s",
				rdp_log_q(d->dra_path), rdp_log_errno(k));
			return k;
		}
	}
	d->winfo = (struct rdp_watcher_info){
		.name = o->driver,
		.endpoint = d->dra_path,
		.type = "DRAPlugin",
		.versions = dra_versions,
		.n_versions = ARRAY_SIZE(dra_versions),
		.status = on_watcher_status,
		.userdata = d,
	};
	reg_methods[0] = (struct rdp_grpc_method){rdp_method_path(RDP_METHOD_WATCHER_GET_INFO),
						  on_reg_call, false};
	reg_methods[1] = (struct rdp_grpc_method){rdp_method_path(RDP_METHOD_WATCHER_NOTIFY),
						  on_reg_call, false};
	k = rdp_grpc_server_new(d->event, d->reg_path, reg_methods, ARRAY_SIZE(reg_methods), NULL,
				d, &d->reg_server);
	if (k < 0) {
		rdp_log(RDP_LOG_ERROR, "listen-failed", "socket=%s error=%s", rdp_log_q(d->reg_path),
			rdp_log_errno(k));
		return k;
	}
	rdp_log(RDP_LOG_INFO, "serving", "registration=%s endpoint=%s versions=%s",
		rdp_log_q(d->reg_path), rdp_log_q(d->dra_path),
		rdp_log_q(DRA_VERSIONS_LOG));
	return 0;
}

static void done(void *userdata)
{
	struct driver *d = userdata;

	/* Sockets first (kubelet must not reach a half-stopped driver), then the workers:
	 * their unfinished jobs end with -ECANCELED. */
	d->reg_server = rdp_grpc_server_free(d->reg_server);
	d->dra_server = rdp_grpc_server_free(d->dra_server);
	d->slice_worker = rdp_kube_worker_free(d->slice_worker);
	d->claim_worker = rdp_kube_worker_free(d->claim_worker);
	d->prep = rdp_dra_prepare_free(d->prep);
	d->health = rdp_dra_health_server_free(d->health);
	rdp_event_source_free(d->health_timer);
	rdp_kube_job_done(&d->sjob);
	writes_clear(d);
	json_decref(d->desired);
	rdp_free(d->sync_why);
	rdp_free(d->node_uid);
	rdp_event_source_free(d->slice_timer);
	rdp_event_source_free(d->rescan_src);
	d->hostwatch = rdp_hostwatch_free(d->hostwatch);
	d->portpoll = rdp_portpoll_free(d->portpoll);
	rdp_dra_inventory_done(&d->inv);
	d->scanner = rdp_scanner_free(d->scanner);
	rdp_kube_config_done(&d->kcfg);
	rdp_free(d->reg_path);
	rdp_free(d->dra_dir);
	rdp_free(d->dra_path);
	rdp_free(d->checkpoint_path);
}

int rdp_dra_run(const struct rdp_dra_options *opts)
{
	struct rdp_dra_options o = *opts;
	struct driver d = {.o = &o};
	struct rdp_node_daemon n = {
		.userdata = &d,
		.setup = setup,
		.reload = on_sighup,
		.done = done,
	};

	if (!o.driver)
		o.driver = RDP_DRA_DEFAULT_DRIVER;
	if (!o.kubelet_root)
		o.kubelet_root = RDP_DEFAULT_KUBELET_ROOT;
	if (!o.sysfs_root)
		o.sysfs_root = RDP_DEFAULT_SYSFS_ROOT;
	if (!o.dev_root)
		o.dev_root = RDP_DEFAULT_DEV_ROOT;
	if (!o.cdi_spec_dir)
		o.cdi_spec_dir = RDP_DEFAULT_CDI_SPEC_DIR;
	n.verbose = o.verbose;
	return rdp_node_run(&n);
}
