/* SPDX-License-Identifier: MIT */
/*
 * Diagnostics collected by library code instead of logging: each is a complete one-line
 * message such as "config.json:4:7: error: configList[0].selectors: unknown key \"devics\"
 * (did you mean \"devices\"?)". The caller decides where they go.
 */
#pragma once
#include <stddef.h>

enum rdp_diag_level {
	RDP_DIAG_ERROR,
	RDP_DIAG_WARNING,
	RDP_DIAG_NOTE,
};

struct rdp_diag {
	enum rdp_diag_level level;
	char *text; /* full line without trailing newline */
};

struct rdp_diags {
	struct rdp_diag *v;
	size_t n;
	size_t n_errors;
	size_t n_warnings;
};

/* Appends a formatted diagnostic. Returns 0 or -ENOMEM. Bounded: at most 1000 are kept. */
int rdp_diags_add(struct rdp_diags *d, enum rdp_diag_level level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Frees the contents; d can be reused. */
void rdp_diags_done(struct rdp_diags *d);
const char *rdp_diag_level_name(enum rdp_diag_level level);
