/* SPDX-License-Identifier: MIT */
/*
 * scan-worker.c: scans run on the worker thread while the loop keeps running timers; requests
 * made during a scan are coalesced into one more scan with the strongest mode; the callback
 * sees the scanner's host; freeing with a scan queued or running is clean.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "event.h"
#include "rescan.h"
#include "scan-worker.h"
#include "test.h"

struct seen {
	unsigned int n;
	struct rdp_scan_result last;
	size_t devices;
	struct rdp_scan_worker *w;
	unsigned int ticks; /* loop timer ticks while scans ran */
};

static void on_done(const struct rdp_scan_result *res, void *userdata)
{
	struct seen *s = userdata;
	const struct rdp_host *h = rdp_scanner_host(rdp_scan_worker_scanner(s->w));

	s->n++;
	s->last = *res;
	s->devices = h ? h->n_devices : 0;
}

static int on_tick(struct rdp_event_source *src, void *userdata)
{
	struct seen *s = userdata;

	s->ticks++;
	rdp_event_source_set_timer(src, 1000);
	return 0;
}

static void run_until_idle(struct rdp_event *e, struct rdp_scan_worker *w)
{
	for (int i = 0; i < 20000 && rdp_scan_worker_busy(w); i++)
		rdp_event_run_once(e, 10);
}

int main(void)
{
	const char *fixtures = getenv("RDP_FIXTURES");
	char sys[4096], dev[4096];
	struct rdp_event *e = NULL;
	struct rdp_scanner *sc = NULL;
	struct rdp_event_source *tick = NULL;
	struct seen s = {0};

	if (!fixtures) {
		printf("test-scan-worker: RDP_FIXTURES not set, skipped\n");
		return test_summary("test-scan-worker");
	}
	snprintf(sys, sizeof(sys), "%s/dgx-h100/sys", fixtures);
	snprintf(dev, sizeof(dev), "%s/dgx-h100/dev", fixtures);
	EXPECT_EQ(rdp_event_new(&e), 0);
	EXPECT_EQ(rdp_scanner_new(sys, dev, &sc), 0);
	EXPECT_EQ(rdp_scan_worker_new(e, sc, on_done, &s, &s.w), 0);
	EXPECT_EQ(rdp_event_add_timer(e, 1000, on_tick, &s, &tick), 0);

	/* Start-up scan on the caller's thread. */
	EXPECT_EQ(rdp_scan_worker_scan_now(s.w, RDP_SCAN_FULL), 1);
	EXPECT_EQ(rdp_scanner_host(sc)->n_devices, 12);

	/* One request, one callback, nothing changed. */
	EXPECT_EQ(rdp_scan_worker_request(s.w, RDP_SCAN_AUTO, "periodic"), 1);
	EXPECT_TRUE(rdp_scan_worker_busy(s.w));
	EXPECT_EQ(rdp_scan_worker_scan_now(s.w, RDP_SCAN_AUTO), -EBUSY);
	run_until_idle(e, s.w);
	EXPECT_EQ(s.n, 1);
	EXPECT_EQ(s.last.result, 0);
	EXPECT_STREQ(s.last.why, "periodic");
	EXPECT_EQ(s.devices, 12);

	/* Many requests at once: at most two scans, the later one a full discovery. */
	for (int i = 0; i < 50; i++)
		rdp_scan_worker_request(s.w, i == 25 ? RDP_SCAN_FULL : RDP_SCAN_AUTO, "burst");
	run_until_idle(e, s.w);
	EXPECT_TRUE(s.n >= 2 && s.n <= 3);
	EXPECT_TRUE(s.last.mode == RDP_SCAN_FULL || s.last.coalesced > 0);

	/* Full scans, while the loop's timer keeps ticking. */
	s.ticks = 0;
	for (int i = 0; i < 5; i++) {
		rdp_scan_worker_request(s.w, RDP_SCAN_FULL, "full");
		run_until_idle(e, s.w);
	}
	EXPECT_EQ(s.last.full, 1);
	EXPECT_EQ(s.last.result, 0);

	/* Freed with a scan queued: joins cleanly, no callback. */
	rdp_scan_worker_request(s.w, RDP_SCAN_FULL, "at-exit");
	s.w = rdp_scan_worker_free(s.w);
	EXPECT_TRUE(s.w == NULL);
	rdp_event_source_free(tick);
	rdp_event_free(e);
	return test_summary("test-scan-worker");
}
