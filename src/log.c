/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static enum rdp_log_level max_level = RDP_LOG_INFO;

void rdp_log_set_max_level(enum rdp_log_level l)
{
	max_level = l;
}

bool rdp_log_enabled(enum rdp_log_level l)
{
	return l <= max_level;
}

static const char *level_name(enum rdp_log_level l)
{
	switch (l) {
	case RDP_LOG_ERROR:
		return "error";
	case RDP_LOG_WARNING:
		return "warning";
	case RDP_LOG_INFO:
		return "info";
	case RDP_LOG_DEBUG:
		break;
	}
	return "debug";
}

void rdp_log(enum rdp_log_level l, const char *event, const char *fmt, ...)
{
	char line[RDP_LOG_LINE_MAX];
	struct timeval tv;
	struct tm tm;
	size_t n;
	int r;

	if (!rdp_log_enabled(l))
		return;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	n = strftime(line, sizeof(line), "time=%Y-%m-%dT%H:%M:%S", &tm);
	r = snprintf(line + n, sizeof(line) - n, ".%03ldZ level=%s event=%s",
		     (long)tv.tv_usec / 1000, level_name(l), event);
	if (r > 0)
		n += (size_t)r;
	if (n >= sizeof(line) - 2)
		n = sizeof(line) - 2;
	if (fmt && *fmt) {
		va_list ap;

		line[n++] = ' ';
		va_start(ap, fmt);
		r = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		va_end(ap);
		if (r > 0)
			n += (size_t)r;
		if (n >= sizeof(line) - 1)
			n = sizeof(line) - 2; /* truncated: keep room for the newline */
	}
	line[n++] = '\n';
	/* One write per line: lines from several processes sharing stderr do not interleave. */
	for (size_t off = 0; off < n;) {
		ssize_t w = write(STDERR_FILENO, line + off, n - off);

		if (w <= 0)
			break;
		off += (size_t)w;
	}
}

const char *rdp_log_q(const char *s)
{
	static char bufs[8][1024];
	static unsigned int next;
	char *b = bufs[next++ % ARRAY_SIZE(bufs)];
	bool needs = !*s;
	size_t n = 0;

	for (const char *p = s; *p; p++)
		if ((unsigned char)*p <= ' ' || *p == '"' || *p == '\\' || *p == '=' ||
		    (unsigned char)*p == 0x7f)
			needs = true;
	if (!needs)
		return s;
	b[n++] = '"';
	for (const unsigned char *p = (const unsigned char *)s; *p && n < sizeof(bufs[0]) - 8;
	     p++) {
		if (*p == '"' || *p == '\\') {
			b[n++] = '\\';
			b[n++] = (char)*p;
		} else if (*p == '\n') {
			b[n++] = '\\';
			b[n++] = 'n';
		} else if (*p < ' ' || *p == 0x7f) {
			n += (size_t)snprintf(b + n, 5, "\\x%02x", *p);
		} else {
			b[n++] = (char)*p;
		}
	}
	b[n++] = '"';
	b[n] = '\0';
	return b;
}
