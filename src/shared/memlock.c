/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "memlock.h"

int rdp_memlock_parse(const char *s, uint64_t *ret)
{
	static const struct {
		const char *suffix;
		unsigned int shift;
	} units[] = {
		{ "", 0 },   { "K", 10 }, { "Ki", 10 }, { "M", 20 }, { "Mi", 20 },
		{ "G", 30 }, { "Gi", 30 }, { "T", 40 }, { "Ti", 40 },
	};
	uint64_t v = 0;
	size_t n = 0;

	if (!s || !ret)
		return -EINVAL;
	if (strcmp(s, "unlimited") == 0) {
		*ret = RDP_MEMLOCK_UNLIMITED;
		return 0;
	}
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
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(s + n, units[i].suffix) != 0)
			continue;
		if (units[i].shift && v > (UINT64_MAX >> units[i].shift))
			return -ERANGE;
		v <<= units[i].shift;
		if (v == RDP_MEMLOCK_UNLIMITED)
			return -ERANGE; /* a number is never "unlimited" by accident */
		*ret = v;
		return 0;
	}
	return -EINVAL;
}

int rdp_memlock_format(uint64_t v, char *buf, size_t size)
{
	int n;

	if (v == RDP_MEMLOCK_UNLIMITED)
		n = snprintf(buf, size, "unlimited");
	else
		n = snprintf(buf, size, "%llu", (unsigned long long)v);
	return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}
