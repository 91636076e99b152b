/* SPDX-License-Identifier: MIT */
/* The log's own UTC formatting against glibc's gmtime_r(), and logfmt quoting. */
#include <time.h>

#include "log.h"
#include "test.h"

static void test_time_table(void)
{
	static const struct {
		long long t;
		unsigned int ms;
		const char *want;
	} cases[] = {
		{ 0, 0, "1970-01-01T00:00:00.000Z" },
		{ 86399, 999, "1970-01-01T23:59:59.999Z" },
		{ 951782400, 5, "2000-02-29T00:00:00.005Z" },  /* leap day of a 400-year */
		{ 4107542400LL, 0, "2100-03-01T00:00:00.000Z" }, /* 2100 is not a leap year */
		{ 1798502400, 120, "2026-12-29T00:00:00.120Z" },
		{ -1, 0, "1969-12-31T23:59:59.000Z" },
		{ 253402300799LL, 0, "9999-12-31T23:59:59.000Z" },
	};
	char buf[32];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		EXPECT_EQ(rdp_log_format_time(cases[i].t, cases[i].ms, buf, sizeof(buf)), 24);
		EXPECT_STREQ(buf, cases[i].want);
	}
}

static void test_time_against_gmtime(void)
{
	int bad = 0;

	/* Every 13 h 2 min from 1966 to 2128: all month ends, leap days and centuries. */
	for (long long t = -100000000LL; t < 5000000000LL; t += 46920) {
		time_t tt = (time_t)t;
		struct tm tm;
		char want[64], got[32];

		gmtime_r(&tt, &tm);
		snprintf(want, sizeof(want), "%04d-%02d-%02dT%02d:%02d:%02d.000Z", tm.tm_year + 1900,
			 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
		rdp_log_format_time(t, 0, got, sizeof(got));
		if (strcmp(want, got) != 0 && bad++ < 5)
			fprintf(stderr, "t=%lld: %s, gmtime_r says %s\n", t, got, want);
	}
	EXPECT_EQ(bad, 0);
}

static void test_quote(void)
{
	EXPECT_STREQ(rdp_log_q("mlx5_0"), "mlx5_0");
	EXPECT_STREQ(rdp_log_q("a b"), "\"a b\"");
	EXPECT_STREQ(rdp_log_q("say \"hi\""), "\"say \\\"hi\\\"\"");
}

int main(void)
{
	test_time_table();
	test_time_against_gmtime();
	test_quote();
	return test_summary("test-log");
}
