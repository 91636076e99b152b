/* SPDX-License-Identifier: MIT */
/*
 * Go's `flag` syntax (goflag.h) on an argv cut from the input at its NUL bytes (at most 32
 * arguments after argv[0]), against the Go plugin's four flags (cli/cmd-shared-dp.c).
 *
 * Beyond "no crash": the answer is 0, -EINVAL with a message, or an index in 1..argc; a string
 * value points into argv (at an argument or just past its '='); after a success, every
 * argument before the index is a flag, a flag's value, or the "--" that ended them.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "goflag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

#define MAXARGS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1), *argv[MAXARGS + 2] = {(char *)"k8s-rdma-shared-dp"};
	bool version = false, use_cdi = false;
	const char *config = NULL;
	const struct rdp_goflag flags[] = {
		{"config-file", RDP_GOFLAG_STRING, &config},
		{"use-cdi", RDP_GOFLAG_BOOL, &use_cdi},
		{"v", RDP_GOFLAG_BOOL, &version},
		{"version", RDP_GOFLAG_BOOL, &version},
	};
	char err[128];
	int argc = 1, k;

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	for (size_t i = 0; i <= size && argc <= MAXARGS;) {
		argv[argc++] = buf + i;
		i += strlen(buf + i) + 1;
	}
	argv[argc] = NULL;
	err[0] = '\0';
	k = rdp_goflag_parse(flags, 4, argc, argv, err, sizeof(err));
	CHECK(k == 0 || k == -EINVAL || (k >= 1 && k <= argc));
	if (k == -EINVAL)
		CHECK(err[0] != '\0');
	else
		CHECK(err[0] == '\0');
	if (config) {
		bool inside = false;

		for (int i = 1; i < argc; i++) {
			const char *eq = strchr(argv[i], '=');

			if (config == argv[i] || (eq && config == eq + 1))
				inside = true;
		}
		CHECK(inside);
	}
	for (int i = 1; i < k; i++) {
		const char *a = argv[i];

		CHECK(a[0] == '-' && a[1] != '\0');
		a += a[1] == '-' ? 2 : 1;
		if (strcmp(a, "config-file") == 0)
			i++; /* its value, whatever it looks like */
	}
	free(buf);
	return 0;
}
