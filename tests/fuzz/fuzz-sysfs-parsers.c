/* SPDX-License-Identifier: MIT */
/*
 * Every pure value parser of sysfs.h on arbitrary strings: rates, GIDs, port states, hex IDs,
 * PCI classes, GUIDs, major:minor, NUMA nodes, integers, counter values, link layers, Y/N,
 * PCI addresses, numbered char device names, and path basenames. The input is cut at its first NUL, as a
 * sysfs attribute read by rdp_sysfs_read_attr() is (it refuses values with a NUL inside).
 *
 * Beyond "no crash": results are checked against each contract (ranges, formats, output
 * untouched on failure).
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "sysfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static bool is_lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[n] == '\0';
}

static void parse_all(const char *s)
{
	/* canaries: failures leave ret_* untouched */
	long l = 0x5a5a;
	int num = 0x5a5a, numa = 0x5a5a, ll = 0x5a5a;
	char name[16], hex[5], cls[7], guid[20];
	uint8_t gid[16];
	unsigned int maj = 0x5a5a, min = 0x5a5a, n = 0x5a5a;
	struct rdp_rate rate, rate0;
	bool b = false;
	int r;

	{
		uint64_t c = 0x5a5a;
		char back[24];

		r = rdp_parse_counter(s, &c);
		if (r == 0) {
			/* digits only, at most 20, and the value prints back as s without zeros */
			const char *z = s;

			CHECK(strlen(s) >= 1 && strlen(s) <= 20 && strspn(s, "0123456789") == strlen(s));
			while (z[0] == '0' && z[1])
				z++;
			snprintf(back, sizeof(back), "%llu", (unsigned long long)c);
			CHECK(strcmp(back, z) == 0);
		} else {
			CHECK(c == 0x5a5a && (r == -EINVAL || r == -ERANGE));
		}
	}
	r = rdp_parse_long(s, -1000, 1000, &l);
	CHECK(r == 0 ? l >= -1000 && l <= 1000 : l == 0x5a5a);
	r = rdp_parse_long(s, 0, 0, &l);
	CHECK(r < 0 || l == 0);
	l = 0x5a5a;
	(void)rdp_parse_long(s, LONG_MIN, LONG_MAX, &l);

	memset(name, 'Z', sizeof(name));
	r = rdp_parse_state(s, &num, name, sizeof(name));
	if (r == 0) {
		CHECK(num >= 0 && num <= 255);
		CHECK(memchr(name, '\0', sizeof(name)) && name[0]);
	} else {
		CHECK(num == 0x5a5a && name[0] == 'Z');
	}
	/* a tiny name buffer must not overflow */
	{
		char tiny[2] = { 'Z', 'Z' };

		if (rdp_parse_state(s, &num, tiny, sizeof(tiny)) == 0)
			CHECK(tiny[1] == '\0');
	}

	memset(hex, 'Z', sizeof(hex));
	if (rdp_parse_hex_id(s, hex) == 0)
		CHECK(is_lower_hex(hex, 4));
	else
		CHECK(hex[0] == 'Z');

	memset(cls, 'Z', sizeof(cls));
	if (rdp_parse_pci_class(s, cls) == 0)
		CHECK(is_lower_hex(cls, 6));
	else
		CHECK(cls[0] == 'Z');

	memset(guid, 'Z', sizeof(guid));
	if (rdp_parse_guid(s, guid) == 0)
		CHECK(strlen(guid) == 19 && guid[4] == ':' && guid[9] == ':' && guid[14] == ':');
	else
		CHECK(guid[0] == 'Z');

	memset(gid, 0xa5, sizeof(gid));
	if (rdp_parse_gid(s, gid) == 0)
		(void)rdp_gid_is_ipv4_mapped(gid);
	else
		CHECK(gid[0] == 0xa5 && gid[15] == 0xa5);

	if (rdp_parse_devnum(s, &maj, &min) == 0)
		CHECK(maj <= 4095 && min < (1u << 20));
	else
		CHECK(maj == 0x5a5a && min == 0x5a5a);

	if (rdp_parse_numa_node(s, &numa) == 0)
		CHECK(numa >= -1 && numa <= 65535);
	else
		CHECK(numa == 0x5a5a);

	memset(&rate, 0x5a, sizeof(rate));
	rate0 = rate;
	if (rdp_parse_rate(s, &rate) == 0)
		CHECK(memchr(rate.speed, '\0', sizeof(rate.speed)) != NULL);
	else
		CHECK(!memcmp(&rate, &rate0, sizeof(rate)));

	if (rdp_parse_link_layer(s, &ll) == 0)
		CHECK(ll == RDP_LINK_INFINIBAND || ll == RDP_LINK_ETHER);
	else
		CHECK(ll == 0x5a5a);

	if (rdp_parse_bool(s, &b) < 0)
		CHECK(!b);

	if (rdp_is_pci_address(s))
		CHECK(strlen(s) >= 12 && strlen(s) < RDP_PCI_ADDR_MAX);

	if (rdp_is_numbered_name(s, "uverbs", &n))
		CHECK(!strncmp(s, "uverbs", 6));
	(void)rdp_is_numbered_name(s, "", &n);

	{
		const char *base = rdp_path_basename(s);

		CHECK(base >= s && base <= s + strlen(s) && !strchr(base, '/'));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s;

	if (size > 8192)
		return 0;
	/* an exact-size copy, so ASan sees any read past the terminator */
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	parse_all(s);
	free(s);
	return 0;
}
