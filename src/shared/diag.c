/* SPDX-License-Identifier: MIT */
#include "diag.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

#define RDP_DIAGS_MAX 1000

int rdp_diags_add(struct rdp_diags *d, enum rdp_diag_level level, const char *fmt, ...)
{
	struct rdp_diag *v;
	va_list ap;
	char *text;
	int len;

	if (d->n >= RDP_DIAGS_MAX) {
		/* Still count it, so that "n errors" stays true. */
		if (level == RDP_DIAG_ERROR)
			d->n_errors++;
		return 0;
	}
	va_start(ap, fmt);
	len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (len < 0)
		return -EINVAL;
	text = rdp_malloc((size_t)len + 1);
	if (!text)
		return -ENOMEM;
	va_start(ap, fmt);
	vsnprintf(text, (size_t)len + 1, fmt, ap);
	va_end(ap);
	/* One line each, whatever a quoted key or value holds ("a\nb" in a config key). */
	for (char *p = text; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	v = rdp_reallocarray(d->v, d->n + 1, sizeof(*v));
	if (!v) {
		rdp_free(text);
		return -ENOMEM;
	}
	d->v = v;
	d->v[d->n++] = (struct rdp_diag){ .level = level, .text = text };
	if (level == RDP_DIAG_ERROR)
		d->n_errors++;
	else if (level == RDP_DIAG_WARNING)
		d->n_warnings++;
	return 0;
}

void rdp_diags_done(struct rdp_diags *d)
{
	for (size_t i = 0; i < d->n; i++)
		rdp_free(d->v[i].text);
	rdp_free(d->v);
	memset(d, 0, sizeof(*d));
}

const char *rdp_diag_level_name(enum rdp_diag_level level)
{
	switch (level) {
	case RDP_DIAG_ERROR:
		return "error";
	case RDP_DIAG_WARNING:
		return "warning";
	case RDP_DIAG_NOTE:
		return "note";
	}
	return "?";
}
