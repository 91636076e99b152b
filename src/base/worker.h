/* SPDX-License-Identifier: MIT */
/*
 * Slow work off the event loop: one thread running the jobs submitted to it one after the
 * other, in order. A job's run() runs on the thread; when it returns, the thread wakes the loop
 * through an eventfd and the job's done() runs on the loop, in submission order. The loop never
 * waits for a job. The device plugin's scans, the metrics collection and the API-server requests
 * all run on one of these.
 *
 * A job's life (one state, changed only here):
 *   IDLE --submit--> QUEUED --thread takes it--> RUNNING --run() returns--> DONE
 *   DONE --done(job, false) on the loop--> IDLE;  QUEUED --worker stops--> done(job, true) -> IDLE
 * A job is the caller's memory (embed struct rdp_worker_job, find the owner with container_of from macro.h); the worker
 * only links it. Between submit and its done() the caller must not free or resubmit it; it may
 * resubmit or free it from inside done().
 *
 * Stopping: rdp_worker_stop() makes the thread take no further job and submit fail; a running
 * job ends by itself (its owner may make it end sooner, e.g. a stop fd of its own) and
 * rdp_worker_free() joins the thread, then calls done() of the jobs that finished (cancelled
 * false) and of those never started (cancelled true), so owners free them.
 *
 * Library code: returns negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

struct rdp_event;
struct rdp_worker;
struct rdp_worker_job;

enum rdp_worker_job_state {
	RDP_WORKER_JOB_IDLE,
	RDP_WORKER_JOB_QUEUED,
	RDP_WORKER_JOB_RUNNING,
	RDP_WORKER_JOB_DONE,
};

struct rdp_worker_job {
	void (*run)(struct rdp_worker_job *job);                 /* on the thread */
	void (*done)(struct rdp_worker_job *job, bool cancelled); /* on the loop */
	/* The worker's. */
	enum rdp_worker_job_state state;
	struct rdp_worker_job *next;
};

/*
 * Starts the thread; nice > 0 lowers the thread's priority (Linux: per thread, no privilege
 * needed) so the loop answering kubelet comes first within the pod's CPU limit. Returns 0,
 * -ENOMEM, or the errno of eventfd/pthread_create.
 */
int rdp_worker_new(struct rdp_event *e, int nice, struct rdp_worker **ret);
/* Stops (see above), joins, calls the remaining done()s, frees. Accepts NULL. */
struct rdp_worker *rdp_worker_free(struct rdp_worker *w);
/* No job is taken or accepted after this; the running one ends by itself. Idempotent. */
void rdp_worker_stop(struct rdp_worker *w);

/* Queues job (run and done set, state IDLE). Returns 0, -EBUSY or -ESHUTDOWN after stop. */
int rdp_worker_submit(struct rdp_worker *w, struct rdp_worker_job *job);
/*
 * Calls fn(job, arg) under the worker's lock if job is still QUEUED (not taken by the thread),
 * so a request can be folded into a job not started yet. Returns true when fn ran.
 */
bool rdp_worker_amend(struct rdp_worker *w, struct rdp_worker_job *job,
		      void (*fn)(struct rdp_worker_job *job, void *arg), void *arg);
/* job's state as the worker last set it (QUEUED may become RUNNING right after). */
enum rdp_worker_job_state rdp_worker_job_state(struct rdp_worker *w,
					       const struct rdp_worker_job *job);
/* Jobs submitted whose done() has not run yet. */
size_t rdp_worker_pending(const struct rdp_worker *w);
