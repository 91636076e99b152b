/* SPDX-License-Identifier: MIT */
/* Watches of the API server; see kube-watch.h. */
#define _GNU_SOURCE
#include "kube-watch.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "macro.h"
#include "kube-worker.h"
#include "worker.h"

/* ---- the event parser ---- */

struct rdp_kube_watch_parser {
	size_t max_event;
	char *line; /* the line being read, up to max_event */
	size_t len, cap;
	int error; /* or the 1 of a stop: returned again */
};

static const char *const type_names[] = {
	[RDP_KUBE_WATCH_ADDED] = "ADDED",       [RDP_KUBE_WATCH_MODIFIED] = "MODIFIED",
	[RDP_KUBE_WATCH_DELETED] = "DELETED",   [RDP_KUBE_WATCH_BOOKMARK] = "BOOKMARK",
	[RDP_KUBE_WATCH_ERROR] = "ERROR",
};

const char *rdp_kube_watch_type_name(enum rdp_kube_watch_type t)
{
	return (size_t)t < ARRAY_SIZE(type_names) ? type_names[t] : NULL;
}

bool rdp_kube_rv_valid(const char *rv)
{
	size_t n = 0;

	if (!rv || !*rv)
		return false;
	for (; *rv; rv++, n++) {
		char c = *rv;

		if (n >= RDP_KUBE_RV_MAX - 1)
			return false;
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

const char *rdp_kube_object_rv(const json_t *obj)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"),
						 "resourceVersion"));
}

int rdp_kube_watch_parser_new(size_t max_event, struct rdp_kube_watch_parser **ret)
{
	struct rdp_kube_watch_parser *p = rdp_calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->max_event = max_event ? max_event : RDP_KUBE_WATCH_EVENT_MAX;
	*ret = p;
	return 0;
}

void rdp_kube_watch_parser_free(struct rdp_kube_watch_parser *p)
{
	if (!p)
		return;
	rdp_free(p->line);
	rdp_free(p);
}

static int append(struct rdp_kube_watch_parser *p, const char *buf, size_t len)
{
	if (len == 0)
		return 0; /* an empty line first: no buffer yet */
	if (len > p->max_event - p->len)
		return -E2BIG;
	if (p->len + len > p->cap) {
		size_t cap = p->cap ? p->cap : 4096;
		char *l;

		while (cap < p->len + len)
			cap *= 2;
		if (cap > p->max_event)
			cap = p->max_event;
		l = rdp_realloc(p->line, cap);
		if (!l)
			return -ENOMEM;
		p->line = l;
		p->cap = cap;
	}
	memcpy(p->line + p->len, buf, len);
	p->len += len;
	return 0;
}

/* One whole line: an event, or blank. */
static int line_done(struct rdp_kube_watch_parser *p, rdp_kube_watch_event_cb cb, void *userdata)
{
	json_t *ev, *obj;
	const char *type;
	size_t i, n = p->len;
	int r = -EBADMSG;

	p->len = 0;
	for (i = 0; i < n; i++)
		if (!strchr(" \t\r", p->line[i]))
			break;
	if (i == n)
		return 0;
	ev = json_loadb(p->line, n, JSON_REJECT_DUPLICATES, NULL);
	type = json_string_value(json_object_get(ev, "type"));
	obj = json_object_get(ev, "object");
	if (json_is_object(ev) && type && json_is_object(obj)) {
		for (size_t t = 0; t < ARRAY_SIZE(type_names); t++)
			if (strcmp(type, type_names[t]) == 0) {
				r = cb((enum rdp_kube_watch_type)t, obj, userdata);
				break;
			}
	}
	json_decref(ev);
	return r;
}

int rdp_kube_watch_parser_feed(struct rdp_kube_watch_parser *p, const char *buf, size_t len,
			       rdp_kube_watch_event_cb cb, void *userdata)
{
	while (!p->error && len) {
		const char *nl = memchr(buf, '\n', len);
		size_t n = nl ? (size_t)(nl - buf) : len;
		int r = append(p, buf, n);

		if (r == 0 && nl)
			r = line_done(p, cb, userdata);
		if (r != 0)
			p->error = r;
		n += nl ? 1 : 0;
		buf += n;
		len -= n;
	}
	return p->error;
}

/* ---- the watcher ---- */

static const char *const end_names[] = {
	[RDP_KUBE_WATCH_END_CLOSED] = "closed",
	[RDP_KUBE_WATCH_END_EVENT] = "event",
	[RDP_KUBE_WATCH_END_GONE] = "gone",
	[RDP_KUBE_WATCH_END_FAILED] = "failed",
};

const char *rdp_kube_watch_end_name(enum rdp_kube_watch_end e)
{
	return (size_t)e < ARRAY_SIZE(end_names) ? end_names[e] : "?";
}

struct rdp_kube_watch {
	struct rdp_kube_thread t;
	bool stopping, running;
	unsigned long started;
	/* the one job: what to watch (set on the loop before submit) and what came of it */
	struct rdp_worker_job job;
	char path[RDP_KUBE_HTTP_PATH_MAX];
	unsigned timeout_ms;
	rdp_kube_watch_cb cb;
	void *userdata;
	struct rdp_kube_watch_result res;
	struct rdp_kube_watch_parser *parser;
};

static void set_rv(struct rdp_kube_watch_result *res, const json_t *obj)
{
	const char *rv = rdp_kube_object_rv(obj);

	if (rdp_kube_rv_valid(rv))
		snprintf(res->rv, sizeof(res->rv), "%s", rv);
}

/* On the thread: one event of the stream. */
static int on_event(enum rdp_kube_watch_type type, json_t *object, void *userdata)
{
	struct rdp_kube_watch_result *res = userdata;
	const char *msg;

	switch (type) {
	case RDP_KUBE_WATCH_BOOKMARK:
		set_rv(res, object);
		res->bookmarks++;
		return 0;
	case RDP_KUBE_WATCH_ERROR:
		msg = json_string_value(json_object_get(object, "message"));
		res->end = json_integer_value(json_object_get(object, "code")) == 410
				   ? RDP_KUBE_WATCH_END_GONE
				   : RDP_KUBE_WATCH_END_FAILED;
		snprintf(res->error, sizeof(res->error), "an ERROR event: %.200s",
			 msg ? msg : "(no message)");
		res->object = json_incref(object);
		return 1;
	case RDP_KUBE_WATCH_ADDED:
	case RDP_KUBE_WATCH_MODIFIED:
	case RDP_KUBE_WATCH_DELETED:
		set_rv(res, object);
		res->end = RDP_KUBE_WATCH_END_EVENT;
		res->type = type;
		res->object = json_incref(object);
		return 1;
	}
	return -EBADMSG;
}

/* On the thread: bytes of the stream. */
static int on_bytes(void *userdata, const char *buf, size_t len)
{
	struct rdp_kube_watch *w = userdata;

	return rdp_kube_watch_parser_feed(w->parser, buf, len, on_event, &w->res);
}

static void run_watch(struct rdp_worker_job *job)
{
	struct rdp_kube_watch *w = container_of(job, struct rdp_kube_watch, job);
	struct rdp_kube_watch_result *res = &w->res;
	struct rdp_kube_response resp = {.retry_after = -1};
	int r;

	r = rdp_kube_watch_parser_new(RDP_KUBE_WATCH_EVENT_MAX, &w->parser);
	if (r == 0)
		r = rdp_kube_request_stream(w->t.client, w->path, w->timeout_ms, on_bytes, w, &resp);
	rdp_kube_watch_parser_free(w->parser);
	w->parser = NULL;
	res->result = r;
	res->status = r == 0 ? resp.status : 0;
	if (r < 0) {
		json_decref(res->object); /* an event taken before a later failure */
		res->object = NULL;
		res->end = RDP_KUBE_WATCH_END_FAILED;
		if (r == -EBADMSG || r == -E2BIG)
			snprintf(res->error, sizeof(res->error),
				 "the watch stream is not one of events%s",
				 r == -E2BIG ? " (an event over the limit)" : "");
		else
			snprintf(res->error, sizeof(res->error), "%s",
				 rdp_kube_client_last_error(w->t.client));
	} else if (resp.status != 200) {
		json_t *st = json_loadb(resp.body, resp.body_len, 0, NULL);
		const char *msg = rdp_kube_status_message(st);

		res->end = resp.status == 410 ? RDP_KUBE_WATCH_END_GONE : RDP_KUBE_WATCH_END_FAILED;
		snprintf(res->error, sizeof(res->error), "HTTP %d%s%.200s", resp.status,
			 msg ? ": " : "", msg ? msg : "");
		res->object = st;
	}
	/* else: the stream ended (CLOSED, set at start) or on_event() set the end */
	rdp_kube_response_done(&resp);
}

/* On the loop. cb gets a copy, so that it may start the next watch at once. */
static void watch_done(struct rdp_worker_job *job, bool cancelled)
{
	struct rdp_kube_watch *w = container_of(job, struct rdp_kube_watch, job);
	struct rdp_kube_watch_result res = w->res;

	w->res.object = NULL;
	w->running = false;
	if (cancelled || w->stopping) {
		json_decref(res.object);
		res.object = NULL;
		res.result = -ECANCELED;
		res.end = RDP_KUBE_WATCH_END_FAILED;
		snprintf(res.error, sizeof(res.error), "stopping");
	}
	w->cb(&res, w->userdata);
	json_decref(res.object);
}

int rdp_kube_watch_new(struct rdp_event *e, const struct rdp_kube_config *cfg,
		       struct rdp_kube_watch **ret, char **ret_error)
{
	struct rdp_kube_watch *w = rdp_calloc(1, sizeof(*w));
	int k;

	if (!w)
		return -ENOMEM;
	/* lowest priority: it only reads, and rarely */
	k = rdp_kube_thread_init(&w->t, e, 5, cfg, ret_error);
	if (k < 0) {
		rdp_free(w);
		return k;
	}
	*ret = w;
	return 0;
}

struct rdp_kube_watch *rdp_kube_watch_free(struct rdp_kube_watch *w)
{
	if (!w)
		return NULL;
	w->stopping = true;
	rdp_kube_thread_done(&w->t);
	json_decref(w->res.object);
	rdp_free(w);
	return NULL;
}

int rdp_kube_watch_start(struct rdp_kube_watch *w, const char *list_path, const char *rv,
			 unsigned timeout_s, rdp_kube_watch_cb cb, void *userdata)
{
	int n;

	if (w->stopping)
		return -ESHUTDOWN;
	if (w->running)
		return -EBUSY;
	if (!list_path || list_path[0] != '/' || !rdp_kube_rv_valid(rv) || !timeout_s)
		return -EINVAL;
	n = snprintf(w->path, sizeof(w->path),
		     "%s%cwatch=1&allowWatchBookmarks=true&resourceVersion=%s&timeoutSeconds=%u",
		     list_path, strchr(list_path, '?') ? '&' : '?', rv, timeout_s);
	if (n < 0 || (size_t)n >= sizeof(w->path))
		return -EINVAL;
	w->timeout_ms = timeout_s * 1000u + RDP_KUBE_WATCH_SLACK_MS;
	w->cb = cb;
	w->userdata = userdata;
	json_decref(w->res.object);
	w->res = (struct rdp_kube_watch_result){.end = RDP_KUBE_WATCH_END_CLOSED};
	snprintf(w->res.rv, sizeof(w->res.rv), "%s", rv);
	w->job = (struct rdp_worker_job){.run = run_watch, .done = watch_done};
	n = rdp_worker_submit(w->t.worker, &w->job);
	if (n < 0)
		return n;
	w->running = true;
	w->started++;
	return 0;
}

bool rdp_kube_watch_running(const struct rdp_kube_watch *w)
{
	return w->running;
}

unsigned long rdp_kube_watch_started(const struct rdp_kube_watch *w)
{
	return w->started;
}
