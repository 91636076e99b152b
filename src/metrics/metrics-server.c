/* SPDX-License-Identifier: MIT */
#include "metrics-server.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "alloc.h"
#include "event.h"
#include "fabric-metrics.h"
#include "http-server.h"
#include "macro.h"
#include "metrics-text.h"

/* At most this many /metrics requests wait for one collection (the HTTP server's cap). */
#define PENDING_MAX 64
/* A scrape's text stops growing here (-E2BIG: 503): 1000 devices take ~1.5 MiB. */
#define SCRAPE_MAX_BYTES (64 * 1024 * 1024)

enum collect_state {
	COLLECT_IDLE,    /* no collection; the thread waits */
	COLLECT_RUNNING, /* the thread reads the targets */
	COLLECT_DONE,    /* the thread finished; the loop has not taken the result yet */
	COLLECT_STOP,    /* the thread must exit */
};

struct rdp_metrics_server {
	struct rdp_event *event;
	char *address;
	struct rdp_metrics_server_ops ops;
	enum rdp_metrics_state state;
	struct rdp_http_server *http;
	struct rdp_event_source *retry_src;
	uint64_t backoff_usec;
	int last_bind_error; /* reported once per change */

	/* The collection: the loop sets job and RUNNING; the thread sets DONE. */
	pthread_t thread;
	bool thread_started;
	bool probes_only; /* rdp_metrics_server_new_probes(): no /metrics, no thread */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum collect_state collect;
	int efd;
	struct rdp_event_source *efd_src;
	struct rdp_fabric_targets *targets;
	struct rdp_mtext text;
	struct rdp_fabric_stats stats;
	int collect_result;
	uint64_t started_usec;

	/* Requests waiting for the running collection. */
	struct rdp_http_request *pending[PENDING_MAX];
	size_t n_pending;
};

static void *collector_main(void *arg)
{
	struct rdp_metrics_server *s = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (s->collect != COLLECT_RUNNING && s->collect != COLLECT_STOP)
			pthread_cond_wait(&s->cond, &s->lock);
		if (s->collect == COLLECT_STOP)
			break;
		pthread_mutex_unlock(&s->lock);
		s->collect_result = rdp_fabric_collect(s->targets, &s->text, &s->stats);
		pthread_mutex_lock(&s->lock);
		if (s->collect == COLLECT_STOP)
			break;
		s->collect = COLLECT_DONE;
		/* A full eventfd counter cannot happen: one write per collection. */
		(void)!write(s->efd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
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
	s->collect = COLLECT_IDLE;
}

static int on_collected(struct rdp_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct rdp_metrics_server *s = userdata;
	uint64_t n;
	bool done;

	(void)src;
	(void)revents;
	(void)!read(fd, &n, sizeof(n));
	pthread_mutex_lock(&s->lock);
	done = s->collect == COLLECT_DONE;
	pthread_mutex_unlock(&s->lock);
	if (done)
		finish_collection(s);
	return 0;
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
	if (!s->targets) {
		/* No model yet: nothing to read; the plugin's families only. */
		s->collect_result = 0;
		s->collect = COLLECT_DONE;
		finish_collection(s);
		return 0;
	}
	pthread_mutex_lock(&s->lock);
	s->collect = COLLECT_RUNNING;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
	return 0;
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
	if (s->collect != COLLECT_IDLE)
		return; /* answered with the running collection */
	k = start_collection(s);
	if (k < 0) {
		s->collect_result = k;
		s->collect = COLLECT_DONE;
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
	s->efd = -1;
	s->state = RDP_METRICS_BIND_RETRY;
	s->last_bind_error = 1; /* none reported yet */
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->address = rdp_strdup(address);
	if (!s->address) {
		k = -ENOMEM;
		goto fail;
	}
	s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->efd < 0) {
		k = -errno;
		goto fail;
	}
	k = rdp_event_add_io(e, s->efd, EPOLLIN, on_collected, s, &s->efd_src);
	if (k < 0)
		goto fail;
	k = rdp_event_add_timer(e, 0, on_retry, s, &s->retry_src);
	if (k < 0)
		goto fail;
	if (!probes_only) {
		k = -pthread_create(&s->thread, NULL, collector_main, s);
		if (k < 0)
			goto fail;
		s->thread_started = true;
	}
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
	if (s->thread_started) {
		pthread_mutex_lock(&s->lock);
		s->collect = COLLECT_STOP;
		pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
		if (s->targets) {
			/* A collection was running: its text and targets are ours again. */
			s->targets = rdp_fabric_targets_unref(s->targets);
			rdp_mtext_done(&s->text);
		}
	}
	/* Waiting requests end with the server: their responses are only freed. */
	s->http = rdp_http_server_free(s->http);
	for (size_t i = 0; i < s->n_pending; i++)
		(void)rdp_http_respond(s->pending[i], 503, NULL, NULL, 0);
	s->n_pending = 0;
	rdp_event_source_free(s->retry_src);
	rdp_event_source_free(s->efd_src);
	if (s->efd >= 0)
		close(s->efd);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	rdp_free(s->address);
	rdp_free(s);
	return NULL;
}

enum rdp_metrics_state rdp_metrics_server_state(const struct rdp_metrics_server *s)
{
	return s->state;
}
