/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition format 0.0.4, written into one growable buffer.
 *
 * A family is opened with rdp_mtext_family() and its samples follow; its `# HELP` and
 * `# TYPE` lines are written before its first sample (a family without samples writes
 * nothing). A family name may be opened once per buffer (-EEXIST after), so each family's
 * lines are contiguous and TYPE appears once. Names are checked ([a-zA-Z_:][a-zA-Z0-9_:]* for
 * metrics, [a-zA-Z_][a-zA-Z0-9_]* for labels), HELP escapes `\` and newline, label values
 * escape `\`, `"` and newline; other bytes (UTF-8) pass through. Integers are printed exactly
 * ("18446744073709551615"), doubles in their shortest round-trip form, NaN, +Inf, -Inf.
 *
 * Errors are sticky: after the first failure (-ENOMEM, -E2BIG past max_bytes, -EINVAL for a
 * bad name or a sample outside a family, -EEXIST) every call returns it and the buffer ends
 * with the last complete line written before it. Nothing here logs.
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

struct rdp_mtext {
	char *buf; /* NUL-terminated text, len bytes; NULL before the first write */
	size_t len, cap;
	size_t max; /* 0: unbounded */
	int err; /* first error, 0 */
	/* the open family: name, its header not yet written when pending */
	char family[128];
	char type[12];
	const char *help;
	int pending;
	/* names of the families opened so far, NUL-separated, for the -EEXIST check */
	char *names;
	size_t names_len, names_cap;
};

/* An empty buffer that fails with -E2BIG beyond max_bytes of text (0: no bound). */
void rdp_mtext_init(struct rdp_mtext *m, size_t max_bytes);
/* Frees the buffer; m may be initialized again. */
void rdp_mtext_done(struct rdp_mtext *m);
/* Empties the text and forgets the families, keeping the memory (for the next scrape). */
void rdp_mtext_reset(struct rdp_mtext *m);

/*
 * Opens family name of type "counter", "gauge", "histogram", "summary" or "untyped" with help
 * text help (kept by pointer until the next rdp_mtext_family() call; NULL: no HELP line).
 */
int rdp_mtext_family(struct rdp_mtext *m, const char *name, const char *type, const char *help);

/*
 * One sample of the open family: name = family + suffix (NULL, or "_bucket", "_sum",
 * "_count"...), labels = key, value, key, value, ..., NULL (NULL: none; a NULL value is "").
 */
int rdp_mtext_sample_u64(struct rdp_mtext *m, const char *suffix, const char *const *labels,
			 uint64_t v);
int rdp_mtext_sample_double(struct rdp_mtext *m, const char *suffix, const char *const *labels,
			    double v);

/* m->err: 0 when everything written so far is valid and complete. */
int rdp_mtext_error(const struct rdp_mtext *m);

/*
 * Hands the text over (NUL-terminated, *len bytes without the NUL; free with rdp_free; len
 * may be NULL) and resets m to empty. NULL when m holds an error (rdp_mtext_error() says
 * which; m is left as it is) or on -ENOMEM.
 */
char *rdp_mtext_steal(struct rdp_mtext *m, size_t *len);

/* Validity of a metric / label name as the format defines them. */
int rdp_mtext_valid_metric_name(const char *s);
int rdp_mtext_valid_label_name(const char *s);
