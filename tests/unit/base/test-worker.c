/* SPDX-License-Identifier: MIT */
/*
 * worker.c: jobs run on the thread one after the other and their done() runs on the loop in
 * submission order; the loop keeps running while a job runs; a queued job can be amended, a
 * running one cannot; a job is refused while queued and after stop; done() may resubmit; freeing
 * runs done() of the finished jobs and cancels the queued ones.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "event.h"
#include "macro.h"
#include "test.h"
#include "worker.h"

struct job {
	struct rdp_worker_job base;
	int id;
	int value; /* amended while queued */
	int ran; /* set on the thread */
	int cancelled;
	int done;
	int resubmit; /* done() submits it again this many times */
	struct rdp_worker *w;
};

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static int order[64];
static int n_order;

static void run(struct rdp_worker_job *base)
{
	struct job *j = container_of(base, struct job, base);

	/* The test holds the gate to keep a job running. */
	pthread_mutex_lock(&gate_lock);
	j->ran++;
	pthread_mutex_unlock(&gate_lock);
}

static void done(struct rdp_worker_job *base, bool cancelled)
{
	struct job *j = container_of(base, struct job, base);

	j->done++;
	j->cancelled += cancelled;
	if (n_order < (int)ARRAY_SIZE(order))
		order[n_order++] = j->id;
	if (!cancelled && j->resubmit > 0) {
		j->resubmit--;
		EXPECT_EQ(rdp_worker_submit(j->w, base), 0);
	}
}

static void add(struct rdp_worker_job *base, void *arg)
{
	container_of(base, struct job, base)->value += *(int *)arg;
}

static void run_until(struct rdp_event *e, struct rdp_worker *w, size_t pending)
{
	for (int i = 0; i < 5000 && rdp_worker_pending(w) > pending; i++)
		rdp_event_run_once(e, 10);
}

int main(void)
{
	struct rdp_event *e = NULL;
	struct rdp_worker *w = NULL;
	struct job j[6] = {0};
	int one = 1;

	EXPECT_EQ(rdp_event_new(&e), 0);
	EXPECT_EQ(rdp_worker_new(e, 5, &w), 0);
	for (int i = 0; i < 6; i++) {
		j[i].id = i;
		j[i].w = w;
		j[i].base.run = run;
		j[i].base.done = done;
	}

	/* In order, done() on the loop. */
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(rdp_worker_submit(w, &j[i].base), 0);
	EXPECT_EQ(rdp_worker_submit(w, &j[1].base), -EBUSY);
	EXPECT_EQ(rdp_worker_pending(w), 3);
	run_until(e, w, 0);
	EXPECT_EQ(n_order, 3);
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(order[i], i);
		EXPECT_EQ(j[i].ran, 1);
		EXPECT_EQ(j[i].done, 1);
		EXPECT_EQ(rdp_worker_job_state(w, &j[i].base), RDP_WORKER_JOB_IDLE);
	}

	/* A job held running: the next one waits QUEUED and can be amended; the running one not. */
	pthread_mutex_lock(&gate_lock);
	EXPECT_EQ(rdp_worker_submit(w, &j[3].base), 0);
	EXPECT_EQ(rdp_worker_submit(w, &j[4].base), 0);
	for (int i = 0; i < 500 && rdp_worker_job_state(w, &j[3].base) != RDP_WORKER_JOB_RUNNING; i++)
		usleep(2000);
	EXPECT_EQ(rdp_worker_job_state(w, &j[3].base), RDP_WORKER_JOB_RUNNING);
	EXPECT_TRUE(!rdp_worker_amend(w, &j[3].base, add, &one));
	EXPECT_TRUE(rdp_worker_amend(w, &j[4].base, add, &one));
	EXPECT_EQ(j[4].value, 1);
	/* The loop is not held up by the running job. */
	EXPECT_TRUE(rdp_event_run_once(e, 0) >= 0);
	EXPECT_EQ(j[3].done, 0);
	pthread_mutex_unlock(&gate_lock);
	run_until(e, w, 0);
	EXPECT_EQ(j[3].done, 1);
	EXPECT_EQ(j[4].done, 1);

	/* done() may submit the job again. */
	j[5].resubmit = 2;
	EXPECT_EQ(rdp_worker_submit(w, &j[5].base), 0);
	run_until(e, w, 0);
	EXPECT_EQ(j[5].ran, 3);
	EXPECT_EQ(j[5].done, 3);

	/* Freed with one running and two queued: the running one finishes, the rest cancelled. */
	pthread_mutex_lock(&gate_lock);
	for (int i = 0; i < 3; i++)
		j[i].done = j[i].ran = j[i].cancelled = 0;
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(rdp_worker_submit(w, &j[i].base), 0);
	for (int i = 0; i < 500 && rdp_worker_job_state(w, &j[0].base) != RDP_WORKER_JOB_RUNNING; i++)
		usleep(2000);
	rdp_worker_stop(w);
	EXPECT_EQ(rdp_worker_submit(w, &j[5].base), -ESHUTDOWN);
	pthread_mutex_unlock(&gate_lock);
	w = rdp_worker_free(w);
	EXPECT_TRUE(w == NULL);
	EXPECT_EQ(j[0].ran, 1);
	EXPECT_EQ(j[0].done, 1);
	EXPECT_EQ(j[0].cancelled, 0);
	for (int i = 1; i < 3; i++) {
		EXPECT_EQ(j[i].ran, 0);
		EXPECT_EQ(j[i].done, 1);
		EXPECT_EQ(j[i].cancelled, 1);
	}
	rdp_event_free(e);
	return test_summary("test-worker");
}
