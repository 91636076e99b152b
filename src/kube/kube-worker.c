/* SPDX-License-Identifier: MIT */
#include "kube-worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "alloc.h"
#include "event.h"
#include "kube-tls.h"
#include "macro.h"

struct rdp_kube_worker {
	struct rdp_event *event;
	struct rdp_kube_client *client;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stopping;
	struct rdp_kube_job *queue, *queue_tail; /* submitted, not started */
	struct rdp_kube_job *running;
	struct rdp_kube_job *done, *done_tail; /* finished, callbacks not run yet */
	size_t pending;
	int done_fd;  /* eventfd: the thread -> the loop */
	int stop_fd;  /* eventfd: the loop -> the client's waits */
	struct rdp_event_source *done_src;
};

void rdp_kube_job_done(struct rdp_kube_job *job)
{
	if (!job)
		return;
	rdp_kube_response_done(&job->resp);
	if (job->json)
		json_decref(job->json);
	job->json = NULL;
}

static void run_job(struct rdp_kube_worker *w, struct rdp_kube_job *job)
{
	struct rdp_kube_retry policy = job->policy;

	if (job->deadline_ms && (!policy.deadline_ms || job->deadline_ms < policy.deadline_ms))
		policy.deadline_ms = job->deadline_ms;
	job->result = rdp_kube_request_retry(w->client, job->method, job->path, job->body, &policy,
					     &job->resp);
	/* Any status: kube-apiserver answers errors with a Status object. */
	if (job->result == 0 && job->parse_json && job->resp.body_len)
		job->json = json_loadb(job->resp.body, job->resp.body_len, 0, NULL);
	if (job->result < 0)
		snprintf(job->error, sizeof(job->error), "%s",
			 rdp_kube_client_last_error(w->client));
}

static void *worker_main(void *arg)
{
	struct rdp_kube_worker *w = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct rdp_kube_job *job;

		while (!w->queue && !w->stopping)
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stopping)
			break;
		job = w->queue;
		w->queue = job->next;
		if (!w->queue)
			w->queue_tail = NULL;
		job->next = NULL;
		w->running = job;
		pthread_mutex_unlock(&w->lock);
		run_job(w, job);
		pthread_mutex_lock(&w->lock);
		w->running = NULL;
		if (w->done_tail)
			w->done_tail->next = job;
		else
			w->done = job;
		w->done_tail = job;
		(void)!write(w->done_fd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Takes the finished jobs and runs their callbacks, in order. */
static void run_callbacks(struct rdp_kube_worker *w)
{
	struct rdp_kube_job *list;

	pthread_mutex_lock(&w->lock);
	list = w->done;
	w->done = w->done_tail = NULL;
	pthread_mutex_unlock(&w->lock);
	while (list) {
		struct rdp_kube_job *job = list;

		list = job->next;
		job->next = NULL;
		w->pending--;
		job->cb(job, job->userdata); /* may free job, or submit again */
	}
}

static int on_done(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata)
{
	uint64_t n;

	(void)s;
	(void)revents;
	(void)!read(fd, &n, sizeof(n));
	run_callbacks(userdata);
	return 0;
}

int rdp_kube_worker_new(struct rdp_event *e, const struct rdp_kube_config *cfg,
			struct rdp_kube_worker **ret, char **ret_error)
{
	struct rdp_kube_worker *w = rdp_calloc(1, sizeof(*w));
	int k;

	if (!w)
		return -ENOMEM;
	w->event = e;
	w->done_fd = w->stop_fd = -1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	k = rdp_kube_client_new(cfg, &w->client, ret_error);
	if (k < 0)
		goto fail;
	w->done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	w->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->done_fd < 0 || w->stop_fd < 0) {
		k = -errno;
		goto fail;
	}
	rdp_kube_client_set_stop_fd(w->client, w->stop_fd);
	k = rdp_event_add_io(e, w->done_fd, EPOLLIN, on_done, w, &w->done_src);
	if (k < 0)
		goto fail;
	k = -pthread_create(&w->thread, NULL, worker_main, w);
	if (k < 0)
		goto fail;
	w->thread_started = true;
	*ret = w;
	return 0;
fail:
	rdp_kube_worker_free(w);
	return k;
}

struct rdp_kube_worker *rdp_kube_worker_free(struct rdp_kube_worker *w)
{
	struct rdp_kube_job *list;
	uint64_t one = 1;

	if (!w)
		return NULL;
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (w->stop_fd >= 0)
		(void)!write(w->stop_fd, &one, sizeof(one)); /* the running request ends */
	if (w->thread_started)
		pthread_join(w->thread, NULL);
	/* What finished first keeps its result; the queue is cancelled. */
	run_callbacks(w);
	list = w->queue;
	w->queue = w->queue_tail = NULL;
	while (list) {
		struct rdp_kube_job *job = list;

		list = job->next;
		job->next = NULL;
		job->result = -ECANCELED;
		snprintf(job->error, sizeof(job->error), "the driver is stopping");
		w->pending--;
		job->cb(job, job->userdata);
	}
	rdp_event_source_free(w->done_src);
	if (w->done_fd >= 0)
		close(w->done_fd);
	if (w->stop_fd >= 0)
		close(w->stop_fd);
	rdp_kube_client_free(w->client);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	rdp_free(w);
	return NULL;
}

int rdp_kube_worker_submit(struct rdp_kube_worker *w, struct rdp_kube_job *job,
			   unsigned budget_ms, rdp_kube_job_cb cb, void *userdata)
{
	if (w->stopping)
		return -ESHUTDOWN;
	job->cb = cb;
	job->userdata = userdata;
	job->next = NULL;
	job->result = 0;
	job->error[0] = '\0';
	job->json = NULL;
	memset(&job->resp, 0, sizeof(job->resp));
	job->resp.retry_after = -1;
	job->deadline_ms = budget_ms ? rdp_tls_now_ms() + budget_ms : 0;
	pthread_mutex_lock(&w->lock);
	if (w->queue_tail)
		w->queue_tail->next = job;
	else
		w->queue = job;
	w->queue_tail = job;
	w->pending++;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return 0;
}

size_t rdp_kube_worker_pending(const struct rdp_kube_worker *w)
{
	return w->pending;
}
