/* SPDX-License-Identifier: MIT */
/*
 * The config parser on arbitrary bytes: rdp_config_parse() (JSON syntax scan with positions,
 * jansson, validation, did-you-mean) must answer 0 or a negative errno, never crash, and leave
 * nothing behind once the config and the diagnostics are freed.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "config-pos.h"
#include "config.h"
#include "diag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdp_diags diags = {};
	struct rdp_config *c = NULL;
	struct rdp_json_index *idx = NULL;
	size_t i;
	int r;

	if (size > 64 * 1024)
		return 0;
	r = rdp_config_parse((const char *)data, size, "fuzz.json", &c, &diags);
	if (r == 0) {
		/* every resource of a valid config has its names */
		for (i = 0; i < c->n_resources; i++)
			if (!c->resources[i].name || !c->resources[i].full_name)
				__builtin_trap();
	} else if (c) {
		__builtin_trap(); /* ret is only set on success */
	}
	for (i = 0; i < diags.n; i++)
		if (!diags.v[i].text || strchr(diags.v[i].text, '\n'))
			__builtin_trap(); /* one line each */
	c = rdp_config_free(c);
	rdp_diags_done(&diags);

	/* The position index alone, and a lookup or two in it. */
	if (rdp_json_index_build((const char *)data, size, &idx, NULL) == 0) {
		struct rdp_json_pos k, v;

		(void)rdp_json_index_find(idx, "configList[0].resourceName", &k, &v);
		(void)rdp_json_index_find(idx, "", &k, &v);
		idx = rdp_json_index_free(idx);
	}
	return 0;
}
