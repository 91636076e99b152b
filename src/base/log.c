/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
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

/*
 * UTC calendar time from seconds since the epoch (days-to-civil, proleptic Gregorian), so
 * that logging does not pull gmtime_r()/strftime() and with them glibc's time-zone and
 * locale machinery into the static binary.
 */
struct utc {
	long long year;
	unsigned int month, day, hour, min, sec;
};

static void utc_from_epoch(long long t, struct utc *u)
{
	long long days = t / 86400, rem = t % 86400, era, doe, yoe, doy, mp;

	if (rem < 0) {
		rem += 86400;
		days--;
	}
	u->hour = (unsigned int)(rem / 3600);
	u->min = (unsigned int)(rem % 3600 / 60);
	u->sec = (unsigned int)(rem % 60);
	days += 719468; /* from 1970-01-01 to 0000-03-01 */
	era = (days >= 0 ? days : days - 146096) / 146097;
	doe = days - era * 146097;
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	u->day = (unsigned int)(doy - (153 * mp + 2) / 5 + 1);
	u->month = (unsigned int)(mp < 10 ? mp + 3 : mp - 9);
	u->year = yoe + era * 400 + (u->month <= 2);
}

int rdp_log_format_time(long long t, unsigned int msec, char *buf, size_t size)
{
	struct utc u;

	utc_from_epoch(t, &u);
	return snprintf(buf, size, "%04lld-%02u-%02uT%02u:%02u:%02u.%03uZ", u.year, u.month, u.day,
			u.hour, u.min, u.sec, msec % 1000);
}

void rdp_log(enum rdp_log_level l, const char *event, const char *fmt, ...)
{
	char line[RDP_LOG_LINE_MAX];
	struct timespec ts;
	char stamp[32];
	size_t n = 0;
	int r;

	if (!rdp_log_enabled(l))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	rdp_log_format_time(ts.tv_sec, (unsigned int)(ts.tv_nsec / 1000000), stamp, sizeof(stamp));
	r = snprintf(line, sizeof(line), "time=%s level=%s event=%s", stamp, level_name(l), event);
	if (r > 0)
		n = (size_t)r;
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

const char *rdp_log_errno(int r)
{
	return rdp_log_q(strerror(r < 0 ? -r : r));
}
