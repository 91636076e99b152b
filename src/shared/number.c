/* SPDX-License-Identifier: MIT */
#include "number.h"

#include <errno.h>

int rdp_decimal_prefix(const char *s, uint64_t *ret)
{
	uint64_t v = 0;
	int n = 0;

	for (; s[n] >= '0' && s[n] <= '9'; n++) {
		unsigned int d = (unsigned int)(s[n] - '0');

		if (n >= 20)
			return -EINVAL;
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (n == 0)
		return -EINVAL;
	*ret = v;
	return n;
}
