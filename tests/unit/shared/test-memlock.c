/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>

#include "memlock.h"
#include "test.h"

static void test_parse(void)
{
	uint64_t v = 1;

	EXPECT_EQ(rdp_memlock_parse("unlimited", &v), 0);
	EXPECT_TRUE(v == RDP_MEMLOCK_UNLIMITED);
	EXPECT_EQ(rdp_memlock_parse("0", &v), 0);
	EXPECT_TRUE(v == 0);
	EXPECT_EQ(rdp_memlock_parse("65536", &v), 0);
	EXPECT_TRUE(v == 65536);
	EXPECT_EQ(rdp_memlock_parse("64Ki", &v), 0);
	EXPECT_TRUE(v == 65536);
	EXPECT_EQ(rdp_memlock_parse("64K", &v), 0);
	EXPECT_TRUE(v == 65536);
	EXPECT_EQ(rdp_memlock_parse("512Mi", &v), 0);
	EXPECT_TRUE(v == 512ULL << 20);
	EXPECT_EQ(rdp_memlock_parse("1Gi", &v), 0);
	EXPECT_TRUE(v == 1ULL << 30);
	EXPECT_EQ(rdp_memlock_parse("2T", &v), 0);
	EXPECT_TRUE(v == 2ULL << 40);
	EXPECT_EQ(rdp_memlock_parse("18446744073709551614", &v), 0);
	EXPECT_TRUE(v == UINT64_MAX - 1);
	/* strict */
	EXPECT_EQ(rdp_memlock_parse("", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("Unlimited", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("infinity", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("-1", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("+1", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse(" 1", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("1 ", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("1.5Gi", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("1GB", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("1gi", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("1Pi", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("Gi", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("0x10", &v), -EINVAL);
	EXPECT_EQ(rdp_memlock_parse("000000000000000000001", &v), -EINVAL); /* 21 digits */
	/* overflow, and a number that would read as unlimited */
	EXPECT_EQ(rdp_memlock_parse("18446744073709551616", &v), -ERANGE);
	EXPECT_EQ(rdp_memlock_parse("18446744073709551615", &v), -ERANGE);
	EXPECT_EQ(rdp_memlock_parse("16777216Ti", &v), -ERANGE);
	EXPECT_EQ(rdp_memlock_parse("99999999999999999999", &v), -ERANGE);
	EXPECT_EQ(rdp_memlock_parse(NULL, &v), -EINVAL);
}

static void test_format(void)
{
	char b[RDP_MEMLOCK_STR_MAX], small[4];
	uint64_t v;

	EXPECT_EQ(rdp_memlock_format(RDP_MEMLOCK_UNLIMITED, b, sizeof(b)), 0);
	EXPECT_STREQ(b, "unlimited");
	EXPECT_EQ(rdp_memlock_format(1ULL << 30, b, sizeof(b)), 0);
	EXPECT_STREQ(b, "1073741824");
	EXPECT_EQ(rdp_memlock_format(UINT64_MAX - 1, b, sizeof(b)), 0);
	EXPECT_EQ(rdp_memlock_parse(b, &v), 0); /* reads back */
	EXPECT_TRUE(v == UINT64_MAX - 1);
	EXPECT_EQ(rdp_memlock_format(1ULL << 30, small, sizeof(small)), -ENOBUFS);
}

int main(void)
{
	test_parse();
	test_format();
	return test_summary("test-memlock");
}
