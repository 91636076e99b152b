/* SPDX-License-Identifier: MIT */
#include "scan-worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "event.h"
#include "macro.h"

enum job_state {
	JOB_IDLE, /* nothing asked */
	JOB_QUEUED, /* asked, the thread has not taken it */
	JOB_RUNNING, /* the thread scans */
	JOB_DONE, /* the thread finished; the loop has not run the callback yet */
};

struct rdp_scan_worker {
	struct rdp_event *event;
	struct rdp_scanner *scanner;
	rdp_scan_done_cb cb;
	void *userdata;
	int efd;
	struct rdp_event_source *src;
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* Under lock. */
	enum job_state state;
	bool quit;
	struct rdp_scan_result cur; /* the queued/running/done job */
	bool pending; /* another request came while cur was running or done */
	struct rdp_scan_result next; /* its mode and reason */
};

static void *thread_main(void *arg)
{
	struct rdp_scan_worker *w = arg;

	/*
	 * The lowest priority for this thread only (Linux: a nice value is per thread): inside the
	 * pod's CPU limit the loop answering kubelet runs first, the scan takes what is left.
	 * Lowering one's own priority needs no privilege; a failure changes nothing else.
	 */
	(void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), RDP_SCAN_WORKER_NICE);
	pthread_mutex_lock(&w->lock);
	for (;;) {
		enum rdp_scan_mode mode;
		uint64_t t0;
		int r;

		while (!w->quit && w->state != JOB_QUEUED)
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->quit)
			break;
		w->state = JOB_RUNNING;
		mode = w->cur.mode;
		pthread_mutex_unlock(&w->lock);

		t0 = rdp_now_usec();
		r = rdp_scanner_scan(w->scanner, mode);

		pthread_mutex_lock(&w->lock);
		w->cur.result = r;
		w->cur.full = rdp_scanner_stats(w->scanner)->last_full || r < 0;
		w->cur.usec = rdp_now_usec() - t0;
		w->state = JOB_DONE;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
		{
			uint64_t one = 1;
			ssize_t n = write(w->efd, &one, sizeof(one));

			(void)n; /* a full counter still wakes the loop */
		}
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static void set_job(struct rdp_scan_result *j, enum rdp_scan_mode mode, const char *why)
{
	memset(j, 0, sizeof(*j));
	j->mode = mode;
	snprintf(j->why, sizeof(j->why), "%s", why ? why : "");
}

/* Loop side: the thread finished a scan. */
static int on_done(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct rdp_scan_worker *w = userdata;
	struct rdp_scan_result res;
	uint64_t v;

	if (read(w->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	pthread_mutex_lock(&w->lock);
	if (w->state != JOB_DONE) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	res = w->cur;
	pthread_mutex_unlock(&w->lock);

	/* The thread waits for JOB_QUEUED: the scanner is ours during the callback. */
	w->cb(&res, w->userdata);

	pthread_mutex_lock(&w->lock);
	if (w->pending) {
		w->cur = w->next;
		w->pending = false;
		w->state = JOB_QUEUED;
		pthread_cond_broadcast(&w->cond);
	} else {
		w->state = JOB_IDLE;
	}
	pthread_mutex_unlock(&w->lock);
	return 0;
}

int rdp_scan_worker_new(struct rdp_event *e, struct rdp_scanner *scanner, rdp_scan_done_cb cb,
			void *userdata, struct rdp_scan_worker **ret)
{
	struct rdp_scan_worker *w = rdp_calloc(1, sizeof(*w));
	int k;

	if (!w) {
		rdp_scanner_free(scanner);
		return -ENOMEM;
	}
	w->efd = -1;
	w->event = e;
	w->scanner = scanner;
	w->cb = cb;
	w->userdata = userdata;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0) {
		k = -errno;
		goto fail;
	}
	k = rdp_event_add_io(e, w->efd, EPOLLIN, on_done, w, &w->src);
	if (k < 0)
		goto fail;
	k = -pthread_create(&w->thread, NULL, thread_main, w);
	if (k < 0)
		goto fail;
	w->thread_started = true;
	*ret = w;
	return 0;
fail:
	rdp_scan_worker_free(w);
	return k;
}

struct rdp_scan_worker *rdp_scan_worker_free(struct rdp_scan_worker *w)
{
	if (!w)
		return NULL;
	if (w->thread_started) {
		pthread_mutex_lock(&w->lock);
		w->quit = true;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
		/* A running scan ends by itself (sysfs reads do not block for long). */
		pthread_join(w->thread, NULL);
	}
	rdp_event_source_free(w->src);
	if (w->efd >= 0)
		close(w->efd);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	rdp_scanner_free(w->scanner);
	rdp_free(w);
	return NULL;
}

int rdp_scan_worker_request(struct rdp_scan_worker *w, enum rdp_scan_mode mode, const char *why)
{
	int n = 1;

	pthread_mutex_lock(&w->lock);
	switch (w->state) {
	case JOB_IDLE:
		set_job(&w->cur, mode, why);
		w->state = JOB_QUEUED;
		pthread_cond_broadcast(&w->cond);
		break;
	case JOB_QUEUED:
		/* Not started yet: fold into it. */
		if (mode == RDP_SCAN_FULL)
			w->cur.mode = RDP_SCAN_FULL;
		w->cur.coalesced++;
		break;
	case JOB_RUNNING:
	case JOB_DONE:
		/* The running scan may have read the host before this change: one more. */
		n = 2;
		if (!w->pending) {
			set_job(&w->next, mode, why);
			w->pending = true;
		} else {
			if (mode == RDP_SCAN_FULL)
				w->next.mode = RDP_SCAN_FULL;
			w->next.coalesced++;
		}
		break;
	}
	pthread_mutex_unlock(&w->lock);
	return n;
}

bool rdp_scan_worker_busy(const struct rdp_scan_worker *w)
{
	bool busy;

	pthread_mutex_lock((pthread_mutex_t *)&w->lock);
	busy = w->state != JOB_IDLE;
	pthread_mutex_unlock((pthread_mutex_t *)&w->lock);
	return busy;
}

struct rdp_scanner *rdp_scan_worker_scanner(struct rdp_scan_worker *w)
{
	return w->scanner;
}

int rdp_scan_worker_scan_now(struct rdp_scan_worker *w, enum rdp_scan_mode mode)
{
	if (rdp_scan_worker_busy(w))
		return -EBUSY;
	return rdp_scanner_scan(w->scanner, mode);
}
