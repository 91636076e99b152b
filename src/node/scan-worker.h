/* SPDX-License-Identifier: MIT */
/*
 * Scans off the event loop. A full discovery of a large node takes seconds of wall time under
 * a DaemonSet's CPU limit; kubelet's calls (GetInfo has a 1 s deadline) must not wait for it.
 *
 * The worker owns a scanner (rescan.h) and one thread. rdp_scan_worker_request() asks for a
 * scan; requests made while one runs are coalesced into one more scan (the strongest mode
 * asked for, the first reason kept). When a scan ends, the thread wakes the loop through an
 * eventfd and the done callback runs on the loop, where rdp_scanner_host() of the scanner may
 * be read: the thread does not touch the scanner again until the callback has returned.
 * Between scans the scanner is the loop's (rdp_scan_worker_scan_now() for start-up). The
 * thread runs at nice RDP_SCAN_WORKER_NICE.
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "rescan.h"

struct rdp_event;
struct rdp_scan_worker;

#define RDP_SCAN_WHY_MAX 96
/* The worker thread's nice value: kubelet's calls on the loop thread come first. */
#define RDP_SCAN_WORKER_NICE 19

struct rdp_scan_result {
	int result; /* rdp_scanner_scan(): 1 changed, 0 unchanged, < 0 errno */
	bool full; /* the scan was a full discovery */
	enum rdp_scan_mode mode; /* asked for */
	char why[RDP_SCAN_WHY_MAX]; /* reason given with the (first coalesced) request */
	unsigned int coalesced; /* further requests folded into this scan */
	uint64_t usec; /* wall time of the scan */
};

typedef void (*rdp_scan_done_cb)(const struct rdp_scan_result *res, void *userdata);

/*
 * Takes the scanner (freed with the worker) and starts the thread. Returns 0, -ENOMEM, or the
 * errno of eventfd/pthread_create.
 */
int rdp_scan_worker_new(struct rdp_event *e, struct rdp_scanner *scanner, rdp_scan_done_cb cb,
			void *userdata, struct rdp_scan_worker **ret);
/* Waits for a running scan to end (its callback is not called), joins, frees. Accepts NULL. */
struct rdp_scan_worker *rdp_scan_worker_free(struct rdp_scan_worker *w);

/*
 * Asks for a scan (why is copied, truncated). Returns how many done callbacks will come
 * before the one of a scan that began after this request: 1, or 2 while a scan runs (0 once
 * the worker stops).
 */
int rdp_scan_worker_request(struct rdp_scan_worker *w, enum rdp_scan_mode mode, const char *why);
/* True from a request until the callback of the last scan it led to has returned. */
bool rdp_scan_worker_busy(const struct rdp_scan_worker *w);
/* The scanner; read its host only while !busy or inside the done callback. */
struct rdp_scanner *rdp_scan_worker_scanner(struct rdp_scan_worker *w);
/* A scan on the caller's thread (start-up, before sockets exist); only while !busy. */
int rdp_scan_worker_scan_now(struct rdp_scan_worker *w, enum rdp_scan_mode mode);
