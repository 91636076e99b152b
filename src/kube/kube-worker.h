/* SPDX-License-Identifier: MIT */
/*
 * API-server requests off the event loop: one thread with its own client (kube-client.h),
 * running the jobs submitted to it one after the other; each job's callback runs on the loop
 * when its request is done (woken through an eventfd). The loop never waits for the API
 * server: a slow or absent one delays only the jobs behind it, and each job is bounded by its
 * retry policy's deadline.
 *
 * The DRA driver uses two workers: one for the claims kubelet waits for (NodePrepareResources
 * has a 45 s deadline), one for the ResourceSlices, so a slice sync backing off behind an
 * outage never delays a prepare.
 *
 * Freeing the worker cancels the running request (the client's stop fd), joins the thread and
 * calls every unfinished job's callback with -ECANCELED, so owners free them.
 *
 * Library code: returns negative errno, never logs.
 */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kube-client.h"
#include "worker.h"

struct rdp_event;
struct rdp_kube_worker;
struct rdp_kube_job;

typedef void (*rdp_kube_job_cb)(struct rdp_kube_job *job, void *userdata);

struct rdp_kube_job {
	/* What to send (the submitter fills these; the worker never frees them). */
	enum rdp_kube_method method;
	char path[RDP_KUBE_HTTP_PATH_MAX];
	char *body;               /* JSON text or NULL; owned by the submitter */
	struct rdp_kube_retry policy;
	uint64_t deadline_ms;     /* 0: none; else rdp_tls_now_ms() + budget, set on submit */
	bool parse_json;          /* also parse the response body (any status) into json */
	/* What came back (the worker fills these before the callback). */
	int result;               /* 0, or a negative errno (-ECANCELED when the worker stops) */
	struct rdp_kube_response resp;
	json_t *json;             /* parse_json: the body as JSON, NULL when it is none */
	char error[256];          /* the client's last error, for logs */
	/* The worker's. */
	rdp_kube_job_cb cb;
	void *userdata;
	struct rdp_kube_worker *owner;
	struct rdp_worker_job base;
};

/* Frees what the job holds (response, json), not the job or its body. */
void rdp_kube_job_done(struct rdp_kube_job *job);

/*
 * A thread of its own with an API client whose waits end when the thread is stopped: what the
 * request worker below and kube-watch.h each run on. rdp_kube_thread_init() makes the client,
 * its stop eventfd and the worker thread at `nice` (worker.h); on failure everything made is
 * undone. rdp_kube_thread_done() stops the thread (no further job starts; the running request
 * ends at the stop fd) and frees all three; safe on a zeroed or failed one with stop_fd -1.
 */
struct rdp_kube_thread {
	struct rdp_kube_client *client; /* the thread's */
	struct rdp_worker *worker;
	int stop_fd; /* eventfd: the loop -> the client's waits */
};

int rdp_kube_thread_init(struct rdp_kube_thread *t, struct rdp_event *e, int nice,
			 const struct rdp_kube_config *cfg, char **ret_error);
void rdp_kube_thread_done(struct rdp_kube_thread *t);


/*
 * A worker with a client of cfg (copied). *ret_error (may be NULL) gets an allocated sentence
 * when the client cannot start (a missing CA or token file).
 */
int rdp_kube_worker_new(struct rdp_event *e, const struct rdp_kube_config *cfg,
			struct rdp_kube_worker **ret, char **ret_error);
struct rdp_kube_worker *rdp_kube_worker_free(struct rdp_kube_worker *w);

/*
 * Queues job; cb(job, userdata) runs on the loop when it is done (never from inside this
 * call). budget_ms > 0 bounds the job from now (its retries included). Returns 0, or
 * -ESHUTDOWN after rdp_kube_worker_free() began, or -EBUSY while job is queued or running. The job
 * must be zeroed before its first submit.
 */
int rdp_kube_worker_submit(struct rdp_kube_worker *w, struct rdp_kube_job *job,
			   unsigned budget_ms, rdp_kube_job_cb cb, void *userdata);

/* Jobs queued or running. */
size_t rdp_kube_worker_pending(const struct rdp_kube_worker *w);
