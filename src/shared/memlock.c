/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "memlock.h"
#include "number.h"

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
	size_t n;
	int k;

	if (!s || !ret)
		return -EINVAL;
	if (strcmp(s, "unlimited") == 0) {
		*ret = RDP_MEMLOCK_UNLIMITED;
		return 0;
	}
	k = rdp_decimal_prefix(s, &v);
	if (k < 0)
		return k;
	n = (size_t)k;
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
