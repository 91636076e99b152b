/* SPDX-License-Identifier: MIT */
/*
 * netlink.h's parsers on arbitrary bytes. Byte 0 picks the parser (even: uevent, odd: the
 * rtnetlink link iterator); the rest is the datagram, given at its exact size (ASan sees a read
 * past it).
 *
 * Beyond "no crash": a parsed uevent's strings lie inside the buffer and end there; the
 * iterator always moves forward and stops, names are terminated, values within their ranges.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netlink.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static void check_str(const char *s, const uint8_t *buf, size_t len, int required)
{
	if (!s) {
		CHECK(!required);
		return;
	}
	CHECK((const uint8_t *)s >= buf && (const uint8_t *)s < buf + len);
	CHECK(memchr(s, '\0', (size_t)(buf + len - (const uint8_t *)s)) != NULL);
	if (required)
		CHECK(s[0] != '\0');
}

static void fuzz_uevent(const uint8_t *buf, size_t len)
{
	struct rdp_uevent u, canary;
	int r;

	memset(&canary, 0x5a, sizeof(canary));
	u = canary;
	r = rdp_uevent_parse(buf, len, &u);
	if (r < 0) {
		CHECK(r == -EBADMSG || r == -EPROTO);
		CHECK(memcmp(&u, &canary, sizeof(u)) == 0);
		return;
	}
	CHECK(r == 0);
	check_str(u.action, buf, len, 1);
	check_str(u.devpath, buf, len, 1);
	check_str(u.subsystem, buf, len, 0);
	check_str(u.devname, buf, len, 0);
	check_str(u.interface, buf, len, 0);
	(void)rdp_uevent_relevant(&u);
}

static void fuzz_rtnl(const uint8_t *buf, size_t len)
{
	struct rdp_rtnl_link l;
	size_t off = 0, prev = 0;
	int r, n = 0;

	while ((r = rdp_rtnl_link_parse(buf, len, &off, &l)) > 0) {
		CHECK(off > prev && off <= len);
		prev = off;
		CHECK(memchr(l.ifname, '\0', sizeof(l.ifname)) != NULL);
		CHECK(memchr(l.kind, '\0', sizeof(l.kind)) != NULL);
		CHECK(l.operstate >= -1 && l.operstate <= 255);
		CHECK(l.carrier >= -1 && l.carrier <= 1);
		CHECK(l.ifindex > 0);
		(void)rdp_rtnl_link_relevant(&l);
		CHECK(++n <= (int)(len / 16) + 1);
	}
	CHECK(r == 0 || r == -EBADMSG);
	CHECK(off <= len);
	/* at the bad message: after the last link message and any skipped after it */
	if (r == -EBADMSG)
		CHECK(off >= prev && off < len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf;
	size_t len;

	if (size < 1 || size > 65536)
		return 0;
	len = size - 1;
	buf = malloc(len ? len : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, len);
	if (data[0] % 2 == 0)
		fuzz_uevent(buf, len);
	else
		fuzz_rtnl(buf, len);
	free(buf);
	return 0;
}
