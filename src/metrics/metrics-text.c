/* SPDX-License-Identifier: MIT */
/* The Prometheus text exposition writer: see metrics-text.h. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "metrics-text.h"

void rdp_mtext_init(struct rdp_mtext *m, size_t max_bytes)
{
	*m = (struct rdp_mtext){.max = max_bytes};
}

void rdp_mtext_done(struct rdp_mtext *m)
{
	rdp_free(m->buf);
	rdp_free(m->names);
	*m = (struct rdp_mtext){};
}

void rdp_mtext_reset(struct rdp_mtext *m)
{
	m->len = 0;
	if (m->buf)
		m->buf[0] = '\0';
	m->names_len = 0;
	m->err = 0;
	m->family[0] = '\0';
	m->pending = 0;
	m->help = NULL;
}

int rdp_mtext_error(const struct rdp_mtext *m)
{
	return m->err;
}

static int fail(struct rdp_mtext *m, int err)
{
	if (!m->err)
		m->err = err;
	return m->err;
}

static int is_name_char(char c, int first, int colon)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')
		return 1;
	if (colon && c == ':')
		return 1;
	return !first && c >= '0' && c <= '9';
}

static int valid_name(const char *s, int colon)
{
	if (!s || !*s)
		return 0;
	for (size_t i = 0; s[i]; i++)
		if (!is_name_char(s[i], i == 0, colon))
			return 0;
	return 1;
}

int rdp_mtext_valid_metric_name(const char *s)
{
	return valid_name(s, 1);
}

int rdp_mtext_valid_label_name(const char *s)
{
	return valid_name(s, 0);
}

/* Makes room for n more bytes and the NUL. */
static int reserve(struct rdp_mtext *m, size_t n)
{
	size_t need = m->len + n + 1, cap;
	char *nb;

	if (m->max && m->len + n > m->max)
		return -E2BIG;
	if (need <= m->cap)
		return 0;
	cap = m->cap ? m->cap : 4096;
	while (cap < need)
		cap *= 2;
	nb = rdp_realloc(m->buf, cap);
	if (!nb)
		return -ENOMEM;
	m->buf = nb;
	m->cap = cap;
	return 0;
}

static int put(struct rdp_mtext *m, const char *s, size_t n)
{
	int r = reserve(m, n);

	if (r < 0)
		return r;
	memcpy(m->buf + m->len, s, n);
	m->len += n;
	m->buf[m->len] = '\0';
	return 0;
}

static int puts_(struct rdp_mtext *m, const char *s)
{
	return put(m, s, strlen(s));
}

/* s with `\` and newline escaped, and `"` too when quote. */
static int put_escaped(struct rdp_mtext *m, const char *s, int quote)
{
	const char *p = s;

	for (;;) {
		size_t n = strcspn(p, quote ? "\\\n\"" : "\\\n");
		int r = put(m, p, n);

		if (r < 0)
			return r;
		p += n;
		if (!*p)
			return 0;
		r = put(m, *p == '\n' ? "\\n" : *p == '"' ? "\\\"" : "\\\\", 2);
		if (r < 0)
			return r;
		p++;
	}
}

static int family_seen(const struct rdp_mtext *m, const char *name)
{
	for (size_t off = 0; off < m->names_len; off += strlen(m->names + off) + 1)
		if (strcmp(m->names + off, name) == 0)
			return 1;
	return 0;
}

static int remember_family(struct rdp_mtext *m, const char *name)
{
	size_t n = strlen(name) + 1;

	if (m->names_len + n > m->names_cap) {
		size_t cap = m->names_cap ? m->names_cap : 1024;
		char *nn;

		while (cap < m->names_len + n)
			cap *= 2;
		nn = rdp_realloc(m->names, cap);
		if (!nn)
			return -ENOMEM;
		m->names = nn;
		m->names_cap = cap;
	}
	memcpy(m->names + m->names_len, name, n);
	m->names_len += n;
	return 0;
}

int rdp_mtext_family(struct rdp_mtext *m, const char *name, const char *type, const char *help)
{
	static const char *const types[] = {"counter", "gauge", "histogram", "summary", "untyped"};
	int ok = 0, r;

	if (m->err)
		return m->err;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		ok |= type && strcmp(type, types[i]) == 0;
	if (!ok || !rdp_mtext_valid_metric_name(name) || strlen(name) >= sizeof(m->family))
		return fail(m, -EINVAL);
	if (family_seen(m, name))
		return fail(m, -EEXIST);
	r = remember_family(m, name);
	if (r < 0)
		return fail(m, r);
	strcpy(m->family, name);
	strcpy(m->type, type);
	m->help = help;
	m->pending = 1;
	return 0;
}

/* The family header and "name{labels} ", without the value. */
static int sample_head(struct rdp_mtext *m, const char *suffix, const char *const *labels)
{
	int r = 0;

	if (!m->family[0])
		return -EINVAL;
	if (suffix && *suffix) {
		for (const char *p = suffix; *p; p++)
			if (!is_name_char(*p, 0, 1))
				return -EINVAL;
	}
	for (size_t i = 0; labels && labels[i]; i += 2)
		if (!rdp_mtext_valid_label_name(labels[i]))
			return -EINVAL;
	if (m->pending) {
		if (m->help) {
			r = puts_(m, "# HELP ");
			r = r ?: puts_(m, m->family);
			r = r ?: put(m, " ", 1);
			r = r ?: put_escaped(m, m->help, 0);
			r = r ?: put(m, "\n", 1);
		}
		r = r ?: puts_(m, "# TYPE ");
		r = r ?: puts_(m, m->family);
		r = r ?: put(m, " ", 1);
		r = r ?: puts_(m, m->type);
		r = r ?: put(m, "\n", 1);
		if (r < 0)
			return r;
	}
	r = puts_(m, m->family);
	if (suffix)
		r = r ?: puts_(m, suffix);
	if (labels && labels[0]) {
		for (size_t i = 0; labels[i] && r == 0; i += 2) {
			r = put(m, i ? "," : "{", 1);
			r = r ?: puts_(m, labels[i]);
			r = r ?: put(m, "=\"", 2);
			r = r ?: put_escaped(m, labels[i + 1] ? labels[i + 1] : "", 1);
			r = r ?: put(m, "\"", 1);
		}
		r = r ?: put(m, "}", 1);
	}
	return r ?: put(m, " ", 1);
}

static int sample(struct rdp_mtext *m, const char *suffix, const char *const *labels,
		  const char *value)
{
	size_t start = m->len;
	int r;

	if (m->err)
		return m->err;
	r = sample_head(m, suffix, labels);
	r = r ?: puts_(m, value);
	r = r ?: put(m, "\n", 1);
	if (r < 0) {
		/* back to the last complete line (the header too, if this wrote it) */
		m->len = start;
		if (m->buf)
			m->buf[start] = '\0';
		return fail(m, r);
	}
	m->pending = 0;
	return 0;
}

int rdp_mtext_sample_u64(struct rdp_mtext *m, const char *suffix, const char *const *labels,
			 uint64_t v)
{
	char num[24];

	snprintf(num, sizeof(num), "%" PRIu64, v);
	return sample(m, suffix, labels, num);
}

/* The shortest of %.15g..%.17g that reads back as v. */
static void format_double(double v, char *buf, size_t size)
{
	if (isnan(v)) {
		snprintf(buf, size, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, size, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			return;
	}
}

int rdp_mtext_sample_double(struct rdp_mtext *m, const char *suffix, const char *const *labels,
			    double v)
{
	char num[32];

	format_double(v, num, sizeof(num));
	return sample(m, suffix, labels, num);
}

char *rdp_mtext_steal(struct rdp_mtext *m, size_t *len)
{
	char *s;

	if (m->err)
		return NULL;
	if (!m->buf) {
		s = rdp_strdup("");
		if (!s)
			return NULL;
	} else {
		s = m->buf;
	}
	if (len)
		*len = m->len;
	m->buf = NULL;
	m->len = m->cap = 0;
	rdp_mtext_reset(m);
	return s;
}
