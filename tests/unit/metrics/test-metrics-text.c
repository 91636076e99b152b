/* SPDX-License-Identifier: MIT */
/* metrics-text.[ch]: the Prometheus text format 0.0.4 writer. */
#include <errno.h>
#include <math.h>
#include <stdint.h>

#include "alloc.h"
#include "metrics-text.h"
#include "test.h"

static void test_basic(void)
{
	struct rdp_mtext m;
	const char *l1[] = {"device", "mlx5_0", "port", "1", NULL};
	char *s;
	size_t len = 0;

	rdp_mtext_init(&m, 0);
	EXPECT_EQ(rdp_mtext_family(&m, "rdma_dp_x_total", "counter", "Things seen."), 0);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, l1, 42), 0);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, NULL, UINT64_MAX), 0);
	EXPECT_EQ(rdp_mtext_family(&m, "rdma_dp_y", "gauge", NULL), 0);
	EXPECT_EQ(rdp_mtext_sample_double(&m, NULL, NULL, 0.1), 0);
	EXPECT_EQ(rdp_mtext_sample_double(&m, NULL, NULL, 5e10), 0);
	EXPECT_EQ(rdp_mtext_sample_double(&m, NULL, NULL, NAN), 0);
	EXPECT_EQ(rdp_mtext_sample_double(&m, NULL, NULL, INFINITY), 0);
	EXPECT_EQ(rdp_mtext_sample_double(&m, NULL, NULL, -INFINITY), 0);
	EXPECT_EQ(rdp_mtext_sample_double(&m, NULL, NULL, 0.01), 0);
	/* a family without samples writes nothing */
	EXPECT_EQ(rdp_mtext_family(&m, "rdma_dp_empty", "gauge", "Never written."), 0);
	EXPECT_EQ(rdp_mtext_family(&m, "rdma_dp_h_seconds", "histogram", "H."), 0);
	{
		const char *b[] = {"le", "+Inf", NULL};

		EXPECT_EQ(rdp_mtext_sample_u64(&m, "_bucket", b, 3), 0);
		EXPECT_EQ(rdp_mtext_sample_double(&m, "_sum", NULL, 0.25), 0);
		EXPECT_EQ(rdp_mtext_sample_u64(&m, "_count", NULL, 3), 0);
	}
	s = rdp_mtext_steal(&m, &len);
	EXPECT_STREQ(s, "# HELP rdma_dp_x_total Things seen.\n"
			"# TYPE rdma_dp_x_total counter\n"
			"rdma_dp_x_total{device=\"mlx5_0\",port=\"1\"} 42\n"
			"rdma_dp_x_total 18446744073709551615\n"
			"# TYPE rdma_dp_y gauge\n"
			"rdma_dp_y 0.1\n"
			"rdma_dp_y 50000000000\n"
			"rdma_dp_y NaN\n"
			"rdma_dp_y +Inf\n"
			"rdma_dp_y -Inf\n"
			"rdma_dp_y 0.01\n"
			"# HELP rdma_dp_h_seconds H.\n"
			"# TYPE rdma_dp_h_seconds histogram\n"
			"rdma_dp_h_seconds_bucket{le=\"+Inf\"} 3\n"
			"rdma_dp_h_seconds_sum 0.25\n"
			"rdma_dp_h_seconds_count 3\n");
	EXPECT_EQ(len, s ? strlen(s) : 0);
	rdp_free(s);
	/* after steal: empty, usable again, families forgotten */
	EXPECT_EQ(m.len, 0);
	EXPECT_EQ(rdp_mtext_family(&m, "rdma_dp_y", "gauge", NULL), 0);
	s = rdp_mtext_steal(&m, NULL);
	EXPECT_STREQ(s, "");
	rdp_free(s);
	rdp_mtext_done(&m);
}

static void test_escaping(void)
{
	struct rdp_mtext m;
	const char *l[] = {"a", "back\\slash \"quoted\"\nnext", "b", "Grüße ✓", "c", NULL, NULL};

	rdp_mtext_init(&m, 0);
	EXPECT_EQ(rdp_mtext_family(&m, "m", "gauge", "A \\ and a\nnewline, \"quotes\" stay."), 0);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, l, 1), 0);
	EXPECT_STREQ(m.buf,
		     "# HELP m A \\\\ and a\\nnewline, \"quotes\" stay.\n"
		     "# TYPE m gauge\n"
		     "m{a=\"back\\\\slash \\\"quoted\\\"\\nnext\",b=\"Grüße ✓\",c=\"\"} 1\n");
	rdp_mtext_done(&m);
}

static void test_names(void)
{
	struct rdp_mtext m;
	const char *bad_label[] = {"0abc", "v", NULL};
	const char *colon_label[] = {"a:b", "v", NULL};
	const char *ok_label[] = {"_x9", "v", NULL};

	EXPECT_TRUE(rdp_mtext_valid_metric_name("a:b_c9"));
	EXPECT_TRUE(rdp_mtext_valid_metric_name(":x"));
	EXPECT_TRUE(!rdp_mtext_valid_metric_name("9x"));
	EXPECT_TRUE(!rdp_mtext_valid_metric_name(""));
	EXPECT_TRUE(!rdp_mtext_valid_metric_name("a-b"));
	EXPECT_TRUE(!rdp_mtext_valid_metric_name("a b"));
	EXPECT_TRUE(!rdp_mtext_valid_metric_name("größe"));
	EXPECT_TRUE(rdp_mtext_valid_label_name("_x9"));
	EXPECT_TRUE(!rdp_mtext_valid_label_name("a:b"));
	EXPECT_TRUE(!rdp_mtext_valid_label_name(NULL));

	rdp_mtext_init(&m, 0);
	EXPECT_EQ(rdp_mtext_family(&m, "a-b", "gauge", NULL), -EINVAL);
	/* sticky */
	EXPECT_EQ(rdp_mtext_family(&m, "ok", "gauge", NULL), -EINVAL);
	EXPECT_TRUE(rdp_mtext_steal(&m, NULL) == NULL);
	rdp_mtext_done(&m);

	rdp_mtext_init(&m, 0);
	EXPECT_EQ(rdp_mtext_family(&m, "ok", "gauges", NULL), -EINVAL);
	rdp_mtext_done(&m);

	rdp_mtext_init(&m, 0);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, NULL, 1), -EINVAL); /* no family open */
	rdp_mtext_done(&m);

	rdp_mtext_init(&m, 0);
	EXPECT_EQ(rdp_mtext_family(&m, "ok", "gauge", NULL), 0);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, ok_label, 1), 0);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, bad_label, 1), -EINVAL);
	EXPECT_STREQ(m.buf, "# TYPE ok gauge\nok{_x9=\"v\"} 1\n");
	rdp_mtext_done(&m);

	rdp_mtext_init(&m, 0);
	EXPECT_EQ(rdp_mtext_family(&m, "ok", "gauge", NULL), 0);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, colon_label, 1), -EINVAL);
	EXPECT_EQ(m.len, 0);
	rdp_mtext_done(&m);

	rdp_mtext_init(&m, 0);
	EXPECT_EQ(rdp_mtext_family(&m, "ok", "gauge", NULL), 0);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, "-x", NULL, 1), -EINVAL);
	rdp_mtext_done(&m);
}

/* A family name opens once: TYPE once, the family's lines together. */
static void test_family_once(void)
{
	struct rdp_mtext m;

	rdp_mtext_init(&m, 0);
	EXPECT_EQ(rdp_mtext_family(&m, "a", "gauge", NULL), 0);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, NULL, 1), 0);
	EXPECT_EQ(rdp_mtext_family(&m, "b", "gauge", NULL), 0);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, NULL, 2), 0);
	EXPECT_EQ(rdp_mtext_family(&m, "a", "gauge", NULL), -EEXIST);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, NULL, 3), -EEXIST);
	EXPECT_STREQ(m.buf, "# TYPE a gauge\na 1\n# TYPE b gauge\nb 2\n");
	rdp_mtext_reset(&m);
	EXPECT_EQ(rdp_mtext_error(&m), 0);
	EXPECT_EQ(rdp_mtext_family(&m, "a", "gauge", NULL), 0);
	rdp_mtext_done(&m);
}

/* Past max_bytes: -E2BIG, and the text ends with the last complete line. */
static void test_bound(void)
{
	struct rdp_mtext m;
	int r = 0, n = 0;

	rdp_mtext_init(&m, 100);
	EXPECT_EQ(rdp_mtext_family(&m, "rdma_dp_bound", "gauge", NULL), 0);
	while (r == 0 && n < 100) {
		r = rdp_mtext_sample_u64(&m, NULL, NULL, 123456);
		n++;
	}
	EXPECT_EQ(r, -E2BIG);
	EXPECT_TRUE(m.len <= 100);
	EXPECT_TRUE(m.len > 0 && m.buf[m.len - 1] == '\n');
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, NULL, 1), -E2BIG);
	rdp_mtext_done(&m);

	/* the header alone does not fit: nothing written */
	rdp_mtext_init(&m, 10);
	EXPECT_EQ(rdp_mtext_family(&m, "rdma_dp_bound", "gauge", "x"), 0);
	EXPECT_EQ(rdp_mtext_sample_u64(&m, NULL, NULL, 1), -E2BIG);
	EXPECT_EQ(m.len, 0);
	rdp_mtext_done(&m);
}

static int write_some(void)
{
	struct rdp_mtext m;
	const char *l[] = {"k", "v", NULL};
	char *s;
	int r = 0;

	rdp_mtext_init(&m, 0);
	for (int f = 0; f < 40 && r == 0; f++) {
		char name[32];

		snprintf(name, sizeof(name), "fam_%d", f);
		r = rdp_mtext_family(&m, name, "counter", "help text that is long enough");
		for (int i = 0; i < 20 && r == 0; i++)
			r = rdp_mtext_sample_u64(&m, NULL, l, (uint64_t)i);
	}
	s = rdp_mtext_steal(&m, NULL);
	if (!s && r == 0)
		r = -ENOMEM;
	rdp_free(s);
	rdp_mtext_done(&m);
	return r;
}

static void test_failmalloc(void)
{
	unsigned long total;

	rdp_alloc_fail_at(0);
	EXPECT_EQ(write_some(), 0);
	total = rdp_alloc_count();
	EXPECT_TRUE(total > 1);
	for (unsigned long i = 1; i <= total; i++) {
		rdp_alloc_fail_at(i);
		EXPECT_EQ(write_some(), -ENOMEM);
		rdp_alloc_fail_at(0);
	}
}

int main(void)
{
	test_basic();
	test_escaping();
	test_names();
	test_family_once();
	test_bound();
	test_failmalloc();
	return test_summary("test-metrics-text");
}
