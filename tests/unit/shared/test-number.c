/* SPDX-License-Identifier: MIT */
/* number.c: the decimal prefix parser's bounds (digits, 20 at most, 64-bit overflow). */
#include <errno.h>
#include <stdint.h>

#include "number.h"
#include "test.h"

int main(void)
{
	uint64_t v = 7;

	EXPECT_EQ(rdp_decimal_prefix("0", &v), 1);
	EXPECT_TRUE(v == 0);
	EXPECT_EQ(rdp_decimal_prefix("42Gi", &v), 2);
	EXPECT_TRUE(v == 42);
	EXPECT_EQ(rdp_decimal_prefix("18446744073709551615", &v), 20);
	EXPECT_TRUE(v == UINT64_MAX);
	v = 7;
	EXPECT_EQ(rdp_decimal_prefix("18446744073709551616", &v), -ERANGE);
	EXPECT_EQ(rdp_decimal_prefix("000000000000000000001", &v), -EINVAL); /* 21 digits */
	EXPECT_EQ(rdp_decimal_prefix("", &v), -EINVAL);
	EXPECT_EQ(rdp_decimal_prefix("-1", &v), -EINVAL);
	EXPECT_EQ(rdp_decimal_prefix(" 1", &v), -EINVAL);
	EXPECT_TRUE(v == 7); /* untouched on failure */
	return test_summary("test-number");
}
