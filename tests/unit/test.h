/* SPDX-License-Identifier: MIT */
/*
 * A tiny test harness: EXPECT_* record a failure and go on, the closing line is the plain
 * "N passed, N failed" that CI reads.
 */
#pragma once
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int test_passed, test_failed;

#define EXPECT_TRUE(cond)                                                                          \
	do {                                                                                       \
		if (cond) {                                                                        \
			test_passed++;                                                             \
		} else {                                                                           \
			test_failed++;                                                             \
			fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);        \
		}                                                                                  \
	} while (0)

#define EXPECT_EQ(a, b)                                                                            \
	do {                                                                                       \
		long long _a = (long long)(a), _b = (long long)(b);                                \
		if (_a == _b) {                                                                    \
			test_passed++;                                                             \
		} else {                                                                           \
			test_failed++;                                                             \
			fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__,      \
				__LINE__, #a, _a, #b, _b);                                         \
		}                                                                                  \
	} while (0)

#define EXPECT_STREQ(a, b)                                                                         \
	do {                                                                                       \
		const char *_a = (a), *_b = (b);                                                   \
		if (_a && _b && strcmp(_a, _b) == 0) {                                             \
			test_passed++;                                                             \
		} else {                                                                           \
			test_failed++;                                                             \
			fprintf(stderr, "%s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__,        \
				__LINE__, #a, _a ? _a : "(null)", _b ? _b : "(null)");             \
		}                                                                                  \
	} while (0)

/* True when haystack contains needle; for checking error messages. */
#define EXPECT_CONTAINS(hay, needle)                                                               \
	do {                                                                                       \
		const char *_h = (hay), *_n = (needle);                                            \
		if (_h && _n && strstr(_h, _n)) {                                                  \
			test_passed++;                                                             \
		} else {                                                                           \
			test_failed++;                                                             \
			fprintf(stderr, "%s:%d: \"%s\" does not contain \"%s\"\n", __FILE__,       \
				__LINE__, _h ? _h : "(null)", _n ? _n : "(null)");                 \
		}                                                                                  \
	} while (0)

static inline int test_summary(const char *name)
{
	printf("%s: %d passed, %d failed\n", name, test_passed, test_failed);
	return test_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * The generated fixture nodes ($RDP_FIXTURES, set by ctest), or NULL after saying why the
 * fixture tests of test `name` are skipped (not set, or no dgx-h100 node in it).
 */
static inline const char *test_fixtures_dir(const char *name)
{
	const char *dir = getenv("RDP_FIXTURES");
	char probe[PATH_MAX];

	if (!dir) {
		printf("%s: RDP_FIXTURES not set, skipped the fixture-node tests\n", name);
		return NULL;
	}
	snprintf(probe, sizeof(probe), "%s/dgx-h100/sys", dir);
	if (access(probe, F_OK) != 0) {
		printf("%s: no fixtures in %s, skipped the fixture-node tests\n", name, dir);
		return NULL;
	}
	return dir;
}
