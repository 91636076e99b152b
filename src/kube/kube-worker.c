/* SPDX-License-Identifier: MIT */
#include "kube-worker.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "alloc.h"
#include "event.h"
#include "kube-tls.h"
#include "macro.h"

struct rdp_kube_worker {
	struct rdp_kube_thread t;
	bool stopping;
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

/* On the worker's thread. */
static void run_job(struct rdp_worker_job *base)
{
	struct rdp_kube_job *job = container_of(base, struct rdp_kube_job, base);
	struct rdp_kube_client *client = job->owner->t.client;
	struct rdp_kube_retry policy = job->policy;

	if (job->deadline_ms && (!policy.deadline_ms || job->deadline_ms < policy.deadline_ms))
		policy.deadline_ms = job->deadline_ms;
	job->result = rdp_kube_request_retry(client, job->method, job->path, job->body, &policy,
					     &job->resp);
	/* Any status: kube-apiserver answers errors with a Status object. */
	if (job->result == 0 && job->parse_json && job->resp.body_len)
		job->json = json_loadb(job->resp.body, job->resp.body_len, 0, NULL);
	if (job->result < 0)
		snprintf(job->error, sizeof(job->error), "%s", rdp_kube_client_last_error(client));
}

/* On the loop, in submission order. */
static void job_finished(struct rdp_worker_job *base, bool cancelled)
{
	struct rdp_kube_job *job = container_of(base, struct rdp_kube_job, base);

	if (cancelled) {
		job->result = -ECANCELED;
		snprintf(job->error, sizeof(job->error), "the driver is stopping");
	}
	job->cb(job, job->userdata); /* may free job, or submit again */
}

int rdp_kube_thread_init(struct rdp_kube_thread *t, struct rdp_event *e, int nice,
			 const struct rdp_kube_config *cfg, char **ret_error)
{
	int k;

	*t = (struct rdp_kube_thread){.stop_fd = -1};
	k = rdp_kube_client_new(cfg, &t->client, ret_error);
	if (k < 0)
		goto fail;
	t->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (t->stop_fd < 0) {
		k = -errno;
		goto fail;
	}
	rdp_kube_client_set_stop_fd(t->client, t->stop_fd);
	k = rdp_worker_new(e, nice, &t->worker);
	if (k < 0)
		goto fail;
	return 0;
fail:
	rdp_kube_thread_done(t);
	return k;
}

void rdp_kube_thread_done(struct rdp_kube_thread *t)
{
	uint64_t one = 1;

	if (t->worker) {
		/* No further job starts; the running request ends at the stop fd. What finished
		 * first keeps its result; the queue is cancelled. */
		rdp_worker_stop(t->worker);
		(void)!write(t->stop_fd, &one, sizeof(one));
		t->worker = rdp_worker_free(t->worker);
	}
	if (t->stop_fd >= 0)
		close(t->stop_fd);
	t->stop_fd = -1;
	rdp_kube_client_free(t->client);
	t->client = NULL;
}

int rdp_kube_worker_new(struct rdp_event *e, const struct rdp_kube_config *cfg,
			struct rdp_kube_worker **ret, char **ret_error)
{
	struct rdp_kube_worker *w = rdp_calloc(1, sizeof(*w));
	int k;

	if (!w)
		return -ENOMEM;
	k = rdp_kube_thread_init(&w->t, e, 0, cfg, ret_error);
	if (k < 0) {
		rdp_free(w);
		return k;
	}
	*ret = w;
	return 0;
}

struct rdp_kube_worker *rdp_kube_worker_free(struct rdp_kube_worker *w)
{
	if (!w)
		return NULL;
	w->stopping = true;
	rdp_kube_thread_done(&w->t);
	rdp_free(w);
	return NULL;
}

int rdp_kube_worker_submit(struct rdp_kube_worker *w, struct rdp_kube_job *job,
			   unsigned budget_ms, rdp_kube_job_cb cb, void *userdata)
{
	if (w->stopping)
		return -ESHUTDOWN;
	if (job->base.state != RDP_WORKER_JOB_IDLE)
		return -EBUSY; /* queued or running: its callback has not run yet */
	job->cb = cb;
	job->userdata = userdata;
	job->owner = w;
	job->base.run = run_job;
	job->base.done = job_finished;
	job->result = 0;
	job->error[0] = '\0';
	job->json = NULL;
	memset(&job->resp, 0, sizeof(job->resp));
	job->resp.retry_after = -1;
	job->deadline_ms = budget_ms ? rdp_tls_now_ms() + budget_ms : 0;
	return rdp_worker_submit(w->t.worker, &job->base);
}

size_t rdp_kube_worker_pending(const struct rdp_kube_worker *w)
{
	return rdp_worker_pending(w->t.worker);
}
