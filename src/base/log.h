/* SPDX-License-Identifier: MIT */
/*
 * The daemon's log: one line per event on stderr, logfmt style:
 *   time=2025-01-31T12:00:00.123Z level=info event=registered resource=rdma/a units=200
 * Only the daemon's wiring (daemon.c, cmd-serve.c) logs; library modules report through return
 * values, diags and callbacks. Lines are written with one write(2) each, so they never
 * interleave, and are capped at RDP_LOG_LINE_MAX bytes.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

#define RDP_LOG_LINE_MAX 4096

enum rdp_log_level {
	RDP_LOG_ERROR,
	RDP_LOG_WARNING,
	RDP_LOG_INFO,
	RDP_LOG_DEBUG, /* per-call detail, shown with -v */
};

/* Lines above this level are dropped; RDP_LOG_INFO by default. */
void rdp_log_set_max_level(enum rdp_log_level l);
bool rdp_log_enabled(enum rdp_log_level l);

/*
 * Writes "time=... level=... event=<event> " followed by the formatted key=value pairs.
 * Values that may contain spaces or quotes must go through rdp_log_q().
 */
void rdp_log(enum rdp_log_level l, const char *event, const char *fmt, ...) _printf_(3, 4);

/*
 * Returns s quoted for a logfmt value when it needs it ("a b" -> "\"a b\""), escaping '"', '\'
 * and control characters; s itself otherwise. The result lives in one of 8 rotating static
 * buffers (so up to 8 may be used in one rdp_log() call) and is truncated to 1 KiB.
 */
const char *rdp_log_q(const char *s);
/* strerror() of a (negative or positive) errno, quoted for a logfmt value. */
const char *rdp_log_errno(int r);

/*
 * Formats t (seconds since the epoch) and msec as "2025-01-31T12:00:00.123Z" into buf (at
 * least 32 bytes). Returns the length.
 */
int rdp_log_format_time(long long t, unsigned int msec, char *buf, size_t size);
