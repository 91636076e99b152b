/* SPDX-License-Identifier: MIT */
#include "worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "alloc.h"
#include "event.h"

struct job_list {
	struct rdp_worker_job *head, *tail;
};

struct rdp_worker {
	int nice;
	int efd; /* the thread -> the loop */
	struct rdp_event_source *src;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* Under lock. */
	bool stopping;
	struct job_list queue; /* QUEUED */
	struct rdp_worker_job *running;
	struct job_list done; /* DONE, done() not called yet */
	/* The loop's. */
	size_t pending;
};

static void list_push(struct job_list *l, struct rdp_worker_job *job)
{
	job->next = NULL;
	if (l->tail)
		l->tail->next = job;
	else
		l->head = job;
	l->tail = job;
}

static struct rdp_worker_job *list_take_all(struct job_list *l)
{
	struct rdp_worker_job *all = l->head;

	l->head = l->tail = NULL;
	return all;
}

static void *thread_main(void *arg)
{
	struct rdp_worker *w = arg;
	uint64_t one = 1;

	if (w->nice > 0)
		(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), w->nice);
	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct rdp_worker_job *job;

		while (!w->stopping && !w->queue.head)
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stopping)
			break;
		job = w->queue.head;
		w->queue.head = job->next;
		if (!w->queue.head)
			w->queue.tail = NULL;
		job->next = NULL;
		job->state = RDP_WORKER_JOB_RUNNING;
		w->running = job;
		pthread_mutex_unlock(&w->lock);

		job->run(job);

		pthread_mutex_lock(&w->lock);
		w->running = NULL;
		job->state = RDP_WORKER_JOB_DONE;
		list_push(&w->done, job);
		/* A full eventfd counter still wakes the loop. */
		(void)!write(w->efd, &one, sizeof(one));
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void call_done(struct rdp_worker *w, struct rdp_worker_job *list, bool cancelled)
{
	while (list) {
		struct rdp_worker_job *job = list;

		list = job->next;
		job->next = NULL;
		job->state = RDP_WORKER_JOB_IDLE;
		w->pending--;
		job->done(job, cancelled); /* may free job, or submit it again */
	}
}

/* Loop side: the done()s of the finished jobs, in order; then, when stopping, the queued ones. */
static void run_done(struct rdp_worker *w, bool cancel_queued)
{
	struct rdp_worker_job *list;

	pthread_mutex_lock(&w->lock);
	list = list_take_all(&w->done);
	pthread_mutex_unlock(&w->lock);
	call_done(w, list, false);
	if (!cancel_queued)
		return;
	pthread_mutex_lock(&w->lock);
	list = list_take_all(&w->queue);
	pthread_mutex_unlock(&w->lock);
	call_done(w, list, true);
}

static int on_wake(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata)
{
	uint64_t n;

	(void)s;
	(void)revents;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return -errno;
	run_done(userdata, false);
	return 0;
}

int rdp_worker_new(struct rdp_event *e, int nice, struct rdp_worker **ret)
{
	struct rdp_worker *w = rdp_calloc(1, sizeof(*w));
	int k;

	if (!w)
		return -ENOMEM;
	w->nice = nice;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0) {
		k = -errno;
		goto fail;
	}
	k = rdp_event_add_io(e, w->efd, EPOLLIN, on_wake, w, &w->src);
	if (k < 0)
		goto fail;
	k = -pthread_create(&w->thread, NULL, thread_main, w);
	if (k < 0)
		goto fail;
	w->thread_started = true;
	*ret = w;
	return 0;
fail:
	rdp_worker_free(w);
	return k;
}

void rdp_worker_stop(struct rdp_worker *w)
{
	pthread_mutex_lock(&w->lock);
	w->stopping = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

struct rdp_worker *rdp_worker_free(struct rdp_worker *w)
{
	if (!w)
		return NULL;
	rdp_worker_stop(w);
	if (w->thread_started)
		pthread_join(w->thread, NULL);
	w->thread_started = false;
	run_done(w, true);
	rdp_event_source_free(w->src);
	if (w->efd >= 0)
		close(w->efd);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	rdp_free(w);
	return NULL;
}

int rdp_worker_submit(struct rdp_worker *w, struct rdp_worker_job *job)
{
	int k = 0;

	pthread_mutex_lock(&w->lock);
	if (w->stopping)
		k = -ESHUTDOWN;
	else if (job->state != RDP_WORKER_JOB_IDLE)
		k = -EBUSY;
	if (k == 0) {
		job->state = RDP_WORKER_JOB_QUEUED;
		list_push(&w->queue, job);
		w->pending++;
		pthread_cond_signal(&w->cond);
	}
	pthread_mutex_unlock(&w->lock);
	return k;
}

bool rdp_worker_amend(struct rdp_worker *w, struct rdp_worker_job *job,
		      void (*fn)(struct rdp_worker_job *job, void *arg), void *arg)
{
	bool queued;

	pthread_mutex_lock(&w->lock);
	queued = job->state == RDP_WORKER_JOB_QUEUED;
	if (queued)
		fn(job, arg);
	pthread_mutex_unlock(&w->lock);
	return queued;
}

enum rdp_worker_job_state rdp_worker_job_state(struct rdp_worker *w,
					       const struct rdp_worker_job *job)
{
	enum rdp_worker_job_state st;

	pthread_mutex_lock(&w->lock);
	st = job->state;
	pthread_mutex_unlock(&w->lock);
	return st;
}

size_t rdp_worker_pending(const struct rdp_worker *w)
{
	return w->pending;
}
