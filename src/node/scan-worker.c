/* SPDX-License-Identifier: MIT */
#include "scan-worker.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "event.h"
#include "macro.h"
#include "worker.h"

struct scan_job {
	struct rdp_worker_job base;
	struct rdp_scan_worker *owner;
	struct rdp_scan_result res; /* the loop's while queued (amend), the thread's while running */
};

struct rdp_scan_worker {
	struct rdp_worker *worker;
	struct rdp_scanner *scanner;
	rdp_scan_done_cb cb;
	void *userdata;
	struct scan_job job;
	bool active; /* from a request until the callback of the last scan it led to returned */
	bool pending; /* another request came while the job ran or its callback had not returned */
	struct rdp_scan_result next; /* its mode and reason */
	bool stopping;
};

static void set_job(struct rdp_scan_result *j, enum rdp_scan_mode mode, const char *why)
{
	memset(j, 0, sizeof(*j));
	j->mode = mode;
	snprintf(j->why, sizeof(j->why), "%s", why ? why : "");
}

static void fold(struct rdp_scan_result *j, enum rdp_scan_mode mode)
{
	if (mode == RDP_SCAN_FULL)
		j->mode = RDP_SCAN_FULL;
	j->coalesced++;
}

/* On the thread. */
static void run_scan(struct rdp_worker_job *base)
{
	struct scan_job *job = container_of(base, struct scan_job, base);
	struct rdp_scanner *scanner = job->owner->scanner;
	uint64_t t0 = rdp_now_usec();
	int r = rdp_scanner_scan(scanner, job->res.mode);

	job->res.result = r;
	job->res.full = rdp_scanner_stats(scanner)->last_full || r < 0;
	job->res.usec = rdp_now_usec() - t0;
}

/* On the loop: the scan ended. The thread takes no job of ours until this returns. */
static void scan_done(struct rdp_worker_job *base, bool cancelled)
{
	struct scan_job *job = container_of(base, struct scan_job, base);
	struct rdp_scan_worker *w = job->owner;
	struct rdp_scan_result res = job->res;

	if (w->stopping || cancelled) {
		w->active = false;
		return;
	}
	w->cb(&res, w->userdata);
	if (w->pending) {
		job->res = w->next;
		w->pending = false;
		if (rdp_worker_submit(w->worker, &job->base) == 0)
			return;
	}
	w->active = false;
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
	w->scanner = scanner;
	w->cb = cb;
	w->userdata = userdata;
	w->job.owner = w;
	w->job.base.run = run_scan;
	w->job.base.done = scan_done;
	k = rdp_worker_new(e, RDP_SCAN_WORKER_NICE, &w->worker);
	if (k < 0) {
		rdp_scan_worker_free(w);
		return k;
	}
	*ret = w;
	return 0;
}

struct rdp_scan_worker *rdp_scan_worker_free(struct rdp_scan_worker *w)
{
	if (!w)
		return NULL;
	/* A running scan ends by itself (sysfs reads do not block for long); no callback. */
	w->stopping = true;
	w->worker = rdp_worker_free(w->worker);
	rdp_scanner_free(w->scanner);
	rdp_free(w);
	return NULL;
}

static void amend_fold(struct rdp_worker_job *base, void *arg)
{
	fold(&container_of(base, struct scan_job, base)->res, *(enum rdp_scan_mode *)arg);
}

int rdp_scan_worker_request(struct rdp_scan_worker *w, enum rdp_scan_mode mode, const char *why)
{
	if (!w->active) {
		set_job(&w->job.res, mode, why);
		if (rdp_worker_submit(w->worker, &w->job.base) < 0)
			return 0;
		w->active = true;
		return 1;
	}
	/* Not started yet: fold into it. */
	if (rdp_worker_amend(w->worker, &w->job.base, amend_fold, &mode))
		return 1;
	/* The running scan may have read the host before this change: one more. */
	if (!w->pending) {
		set_job(&w->next, mode, why);
		w->pending = true;
	} else {
		fold(&w->next, mode);
	}
	return 2;
}

bool rdp_scan_worker_busy(const struct rdp_scan_worker *w)
{
	return w->active;
}

struct rdp_scanner *rdp_scan_worker_scanner(struct rdp_scan_worker *w)
{
	return w->scanner;
}

int rdp_scan_worker_scan_now(struct rdp_scan_worker *w, enum rdp_scan_mode mode)
{
	if (w->active)
		return -EBUSY;
	return rdp_scanner_scan(w->scanner, mode);
}
