/* SPDX-License-Identifier: MIT */
/*
 * The memlock hook's inputs from arbitrary bytes (oci-hook.h, memlock.h): the OCI state the
 * runtime writes on the hook's stdin, and the memlock values of the config, the DRA flags and
 * the hook's arguments. The input is the state as is, and its first line as a value.
 * Checks: rdp_oci_state_parse() answers 0, -EINVAL, -EFBIG or -ENOMEM; on 0 the pid is in
 * 1..4194304, the status is "creating" or "created" and the id a NUL-terminated string; on an
 * error the reason is a NUL-terminated line. A value that parses formats back to a string that
 * parses to the same value, and never to 0 from anything but zeros with an optional suffix.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "memlock.h"
#include "oci-hook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_value(const uint8_t *data, size_t size)
{
	char line[64], back[RDP_MEMLOCK_STR_MAX];
	size_t n = 0;
	uint64_t v, w;
	int r;

	while (n < size && n < sizeof(line) - 1 && data[n] != '\n')
		line[n] = (char)data[n], n++;
	line[n] = '\0';
	r = rdp_memlock_parse(line, &v);
	if (r != 0 && r != -EINVAL && r != -ERANGE)
		__builtin_trap();
	if (r != 0)
		return;
	if (rdp_memlock_format(v, back, sizeof(back)) != 0)
		__builtin_trap();
	if (rdp_memlock_parse(back, &w) != 0 || w != v)
		__builtin_trap();
	if (v == RDP_MEMLOCK_UNLIMITED && strcmp(line, "unlimited") != 0)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdp_oci_state st;
	char err[256];
	int r;

	check_value(data, size);
	memset(err, 'x', sizeof(err));
	r = rdp_oci_state_parse((const char *)data, size, &st, err, sizeof(err));
	if (r == 0) {
		if (st.pid <= 0 || st.pid > (1LL << 22))
			__builtin_trap();
		if (strcmp(st.status, "creating") != 0 && strcmp(st.status, "created") != 0)
			__builtin_trap();
		if (!memchr(st.id, '\0', sizeof(st.id)))
			__builtin_trap();
	} else if (r == -EINVAL || r == -EFBIG) {
		if (!memchr(err, '\0', sizeof(err)))
			__builtin_trap();
	} else if (r != -ENOMEM) {
		__builtin_trap();
	}
	/* once more with an allocation failing */
	rdp_alloc_fail_at(1 + (size % 7));
	r = rdp_oci_state_parse((const char *)data, size, &st, NULL, 0);
	rdp_alloc_fail_at(0);
	if (r != 0 && r != -EINVAL && r != -EFBIG && r != -ENOMEM)
		__builtin_trap();
	return 0;
}
