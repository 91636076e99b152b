/* SPDX-License-Identifier: MIT */
#include "metrics-server.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "event.h"
#include "fabric-metrics.h"
#include "http-server.h"
#include "macro.h"
#include "metrics-text.h"
#include "worker.h"

/* At most this many /metrics requests wait for one collection (the HTTP server's cap). */
#define PENDING_MAX 64
/* A scrape's text stops growing here (-E2BIG: 503): 1000 devices take ~1.5 MiB. */
#define SCRAPE_MAX_BYTES (64 * 1024 * 1024)

struct rdp_metrics_server {
	struct rdp_event *event;
	char *address;
	struct rdp_metrics_server_ops ops;
	enum rdp_metrics_state state;
	struct rdp_http_server *http;
	struct rdp_event_source *retry_src;
	uint64_t backoff_usec;
	int last_bind_error; /* reported once per change */

	/* The collection: one job on the worker; targets, text and stats are the thread's while
	 * it runs, the loop's from its done(). */
	struct rdp_worker *worker;
	struct rdp_worker_job job;
	bool collecting; /* from start_collection() until finish_collection() */
	bool stopping;
	bool probes_only; /* rdp_metrics_server_new_probes(): no /metrics, no worker */
	struct rdp_fabric_targets *targets;
	struct rdp_mtext text;
	struct rdp_fabric_stats stats;
	int collect_result;
	uint64_t started_usec;

	/* Requests waiting for the running collection. */
	struct rdp_http_request *pending[PENDING_MAX];
	size_t n_pending;
};

/* On the worker's thread. */
static void run_collection(struct rdp_worker_job *job)
{
	struct rdp_metrics_server *s = container_of(job, struct rdp_metrics_server, job);

	s->collect_result = rdp_fabric_collect(s->targets, &s->text, &s->stats);
}

static void respond_text(struct rdp_metrics_server *s, struct rdp_http_request *r, int status,
			 const char *text)
{
	char *body = rdp_asprintf("%s\n", text);

	(void)rdp_http_respond(r, status, "text/plain; charset=utf-8", body,
			       body ? strlen(body) : 0);
}

/* Answers every waiting request with the collection's text (or 503 with why). */
static void finish_collection(struct rdp_metrics_server *s)
{
	struct rdp_mtext *m = &s->text;
	double secs = (double)(rdp_now_usec() - s->started_usec) / 1e6;
	int k = s->collect_result;
	char *body = NULL;
	size_t len = 0;

	s->targets = rdp_fabric_targets_unref(s->targets);
	if (k >= 0)
		k = s->ops.plugin(s->ops.userdata, m, &s->stats,
				  s->http ? rdp_http_server_stats(s->http) : NULL, secs);
	if (k >= 0)
		body = rdp_mtext_steal(m, &len);
	rdp_mtext_done(m);
	if (k >= 0 && !body)
		k = -ENOMEM;
	for (size_t i = 0; i < s->n_pending; i++) {
		struct rdp_http_request *r = s->pending[i];

		if (k < 0) {
			char why[96];

			snprintf(why, sizeof(why), "collecting the metrics failed: %s",
				 strerror(-k));
			respond_text(s, r, 503, why);
			continue;
		}
		if (i + 1 < s->n_pending) {
			char *copy = rdp_malloc(len + 1);

			if (!copy) {
				respond_text(s, r, 503, "out of memory");
				continue;
			}
			memcpy(copy, body, len + 1);
			(void)rdp_http_respond(r, 200, RDP_METRICS_CONTENT_TYPE, copy, len);
		} else {
			(void)rdp_http_respond(r, 200, RDP_METRICS_CONTENT_TYPE, body, len);
			body = NULL;
		}
	}
	rdp_free(body);
	s->n_pending = 0;
	s->collecting = false;
}

/* On the loop: the collection ended (or the server is being freed). */
static void collection_done(struct rdp_worker_job *job, bool cancelled)
{
	struct rdp_metrics_server *s = container_of(job, struct rdp_metrics_server, job);

	if (cancelled)
		s->collect_result = -ECANCELED;
	if (!s->stopping) {
		finish_collection(s);
		return;
	}
	/* Freeing: the text and targets are ours again; the requests end with the server. */
	s->targets = rdp_fabric_targets_unref(s->targets);
	rdp_mtext_done(&s->text);
	s->collecting = false;
}

/* Starts a collection for the requests waiting (on the loop). */
static int start_collection(struct rdp_metrics_server *s)
{
	int k;

	s->started_usec = rdp_now_usec();
	memset(&s->stats, 0, sizeof(s->stats));
	rdp_mtext_init(&s->text, SCRAPE_MAX_BYTES);
	s->targets = NULL;
	k = s->ops.targets(s->ops.userdata, &s->targets);
	if (k < 0) {
		rdp_mtext_done(&s->text);
		return k;
	}
	s->collecting = true;
	if (!s->targets) {
		/* No model yet: nothing to read; the plugin's families only. */
		s->collect_result = 0;
		finish_collection(s);
		return 0;
	}
	k = rdp_worker_submit(s->worker, &s->job);
	if (k < 0) {
		s->targets = rdp_fabric_targets_unref(s->targets);
		s->collecting = false;
		rdp_mtext_done(&s->text);
	}
	return k;
}

static void on_request(struct rdp_http_request *r, void *userdata)
{
	struct rdp_metrics_server *s = userdata;
	const char *path = rdp_http_request_path(r);
	char why[256];
	int k;

	if (strcmp(path, "/healthz") == 0 || strcmp(path, "/readyz") == 0) {
		bool ready = path[1] == 'r';

		why[0] = '\0';
		k = s->ops.health(s->ops.userdata, ready, why, sizeof(why));
		respond_text(s, r, k, why[0] ? why : (k == 200 ? "ok" : "not ok"));
		return;
	}
	/* /metrics (the server serves no other path). */
	if (s->n_pending >= PENDING_MAX) {
		respond_text(s, r, 503, "too many scrapes waiting");
		return;
	}
	s->pending[s->n_pending++] = r;
	if (s->collecting)
		return; /* answered with the running collection */
	k = start_collection(s);
	if (k < 0) {
		s->collect_result = k;
		finish_collection(s);
	}
}

static void set_state(struct rdp_metrics_server *s, enum rdp_metrics_state st, int error)
{
	char addr[128] = "";

	if (st == s->state && error == s->last_bind_error)
		return;
	s->state = st;
	s->last_bind_error = error;
	if (s->http)
		rdp_http_server_local_address(s->http, addr, sizeof(addr));
	if (s->ops.state_changed)
		s->ops.state_changed(s->ops.userdata, st, addr[0] ? addr : s->address, error);
}

static int try_listen(struct rdp_metrics_server *s)
{
	int k = rdp_http_server_new(s->event, s->address, NULL, on_request, s, &s->http);

	/* /metrics on the server's bucket (20/s: each is a collection); the probes on their own
	 * (cheap), so a flood of scrapes never fails kubelet's probes. */
	if (k >= 0 && !s->probes_only)
		k = rdp_http_server_add_path(s->http, "/metrics");
	if (k >= 0)
		k = rdp_http_server_add_path_rate(s->http, "/healthz", RDP_METRICS_PROBE_RATE,
						  RDP_METRICS_PROBE_RATE);
	if (k >= 0)
		k = rdp_http_server_add_path_rate(s->http, "/readyz", RDP_METRICS_PROBE_RATE,
						  RDP_METRICS_PROBE_RATE);
	if (k < 0) {
		s->http = rdp_http_server_free(s->http);
		return k;
	}
	s->backoff_usec = 0;
	set_state(s, RDP_METRICS_LISTENING, 0);
	return 0;
}

static int on_retry(struct rdp_event_source *src, void *userdata)
{
	struct rdp_metrics_server *s = userdata;
	int k = try_listen(s);

	if (k == -ENOMEM || k == -EINVAL)
		return k;
	if (k < 0) {
		set_state(s, RDP_METRICS_BIND_RETRY, k);
		rdp_event_source_set_timer(src,
					   rdp_backoff_next(&s->backoff_usec,
							    RDP_METRICS_BIND_RETRY_MIN_USEC,
							    RDP_METRICS_BIND_RETRY_MAX_USEC));
	}
	return 0;
}

static int server_new(struct rdp_event *e, const char *address,
		      const struct rdp_metrics_server_ops *ops, bool probes_only,
		      struct rdp_metrics_server **ret, char *err, size_t errlen)
{
	struct rdp_metrics_server *s;
	struct sockaddr_storage ss;
	socklen_t sl;
	int k;

	k = rdp_http_parse_address(address, &ss, &sl, err, errlen);
	if (k < 0)
		return k;
	s = rdp_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->event = e;
	s->ops = *ops;
	s->probes_only = probes_only;
	s->job.run = run_collection;
	s->job.done = collection_done;
	s->state = RDP_METRICS_BIND_RETRY;
	s->last_bind_error = 1; /* none reported yet */
	s->address = rdp_strdup(address);
	if (!s->address) {
		k = -ENOMEM;
		goto fail;
	}
	if (!probes_only) {
		k = rdp_worker_new(e, 0, &s->worker);
		if (k < 0)
			goto fail;
	}
	k = rdp_event_add_timer(e, 0, on_retry, s, &s->retry_src);
	if (k < 0)
		goto fail;
	k = on_retry(s->retry_src, s);
	if (k < 0)
		goto fail;
	*ret = s;
	return 0;
fail:
	rdp_metrics_server_free(s);
	return k;
}

int rdp_metrics_server_new(struct rdp_event *e, const char *address,
			   const struct rdp_metrics_server_ops *ops, struct rdp_metrics_server **ret,
			   char *err, size_t errlen)
{
	return server_new(e, address, ops, false, ret, err, errlen);
}

int rdp_metrics_server_new_probes(struct rdp_event *e, const char *address,
				  const struct rdp_metrics_server_ops *ops,
				  struct rdp_metrics_server **ret, char *err, size_t errlen)
{
	return server_new(e, address, ops, true, ret, err, errlen);
}

struct rdp_metrics_server *rdp_metrics_server_free(struct rdp_metrics_server *s)
{
	if (!s)
		return NULL;
	/* A running collection ends by itself; its done() only takes its text and targets back. */
	s->stopping = true;
	s->worker = rdp_worker_free(s->worker);
	/* Waiting requests end with the server: their responses are only freed. */
	s->http = rdp_http_server_free(s->http);
	for (size_t i = 0; i < s->n_pending; i++)
		(void)rdp_http_respond(s->pending[i], 503, NULL, NULL, 0);
	s->n_pending = 0;
	rdp_event_source_free(s->retry_src);
	rdp_free(s->address);
	rdp_free(s);
	return NULL;
}

enum rdp_metrics_state rdp_metrics_server_state(const struct rdp_metrics_server *s)
{
	return s->state;
}
