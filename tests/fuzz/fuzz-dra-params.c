/* SPDX-License-Identifier: MIT */
/*
 * The DRA opaque parameters (dra-params.h) on arbitrary bytes: byte 0 even, the rest is one
 * parameters object (rdp_dra_params_parse_text()); odd, the rest is a claim object whose
 * status.allocation.devices.config[] is applied to a fixed claim of two results
 * (rdp_dra_params_apply()). Every 4th value of byte 0 / 2 makes the (byte/8)-th allocation
 * fail.
 *
 * Beyond "no crash, no leak": 0, -EBADMSG, -E2BIG or -ENOMEM only; an error text exactly when
 * an error other than -ENOMEM is returned, naming the claim for apply; on success no text.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "dra-params.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char nic[] = "nic", st[] = "st", pool[] = "node-a", d0[] = "d0", d1[] = "d1", ns[] = "ns",
	     name[] = "c";
	struct rdp_dra_result res[2] = {{.request = nic, .pool = pool, .device = d0},
					{.request = st, .pool = pool, .device = d1}};
	struct rdp_dra_claim c = {.namespace = ns, .name = name, .results = res, .n_results = 2};
	struct rdp_dra_params p = {0};
	char *err = NULL;
	int r;

	if (size < 1)
		return 0;
	if ((data[0] / 2) % 4 == 3)
		rdp_alloc_fail_at(data[0] / 8 + 1);
	if (data[0] % 2 == 0)
		r = rdp_dra_params_parse_text((const char *)data + 1, size - 1, &p, &err);
	else
		r = rdp_dra_params_apply((const char *)data + 1, size - 1, RDP_DRA_DEFAULT_DRIVER, &c,
					 &err);
	rdp_alloc_fail_at(0);
	CHECK(r == 0 || r == -EBADMSG || r == -E2BIG || r == -ENOMEM);
	if (r == 0 || r == -ENOMEM)
		CHECK(!err);
	else
		CHECK(err && err[0]);
	if (r < 0 && r != -ENOMEM && data[0] % 2 == 1)
		CHECK(strncmp(err, "claim ns/c: ", 12) == 0);
	if (r == 0 && data[0] % 2 == 0)
		CHECK(p.has_memlock || p.memlock == 0);
	rdp_free(err);
	return 0;
}
