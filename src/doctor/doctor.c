/* SPDX-License-Identifier: MIT */
#include "doctor.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

static const char *const status_names[] = {
	[RDP_CHECK_OK] = "ok",
	[RDP_CHECK_SKIP] = "skip",
	[RDP_CHECK_WARN] = "warn",
	[RDP_CHECK_FAIL] = "fail",
};

static const char *const group_names[] = {
	[RDP_GROUP_STACK] = "stack",	     [RDP_GROUP_PLUGIN] = "plugin",
	[RDP_GROUP_PORTS] = "ports",	     [RDP_GROUP_PCIE] = "pcie",
	[RDP_GROUP_PLACEMENT] = "placement", [RDP_GROUP_GPUDIRECT] = "gpudirect",
	[RDP_GROUP_CONGESTION] = "congestion", [RDP_GROUP_POD] = "pod",
};

const char *rdp_check_status_name(enum rdp_check_status s)
{
	return s < _RDP_CHECK_STATUS_MAX ? status_names[s] : "?";
}

const char *rdp_check_group_name(enum rdp_check_group g)
{
	return g < _RDP_GROUP_MAX ? group_names[g] : "?";
}

/* A bounded, printable copy: control characters become '?', beyond the bound "...". */
static char *text_dup(const char *s)
{
	size_t n = s ? strlen(s) : 0, max = RDP_DOCTOR_TEXT_MAX - 1;
	bool cut = n > max;
	char *d = rdp_malloc((cut ? max : n) + 1);

	if (!d)
		return NULL;
	for (size_t i = 0; i < (cut ? max : n); i++)
		d[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
	d[cut ? max : n] = '\0';
	if (cut)
		memcpy(d + max - 3, "...", 3);
	return d;
}

static void check_done(struct rdp_check *c)
{
	rdp_free(c->id);
	rdp_free(c->subject);
	rdp_free(c->finding);
	rdp_free(c->symptom);
	rdp_free(c->fix);
}

int rdp_doctor_add(struct rdp_doctor_report *r, enum rdp_check_group g, const char *id,
		   enum rdp_check_status s, const char *subject, const char *symptom,
		   const char *fix, const char *finding_fmt, ...)
{
	char finding[RDP_DOCTOR_TEXT_MAX];
	struct rdp_check c = {.group = g, .status = s};
	va_list ap;

	if (r->n >= RDP_DOCTOR_MAX_CHECKS)
		return -E2BIG;
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 32;
		struct rdp_check *v = rdp_reallocarray(r->v, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	va_start(ap, finding_fmt);
	vsnprintf(finding, sizeof(finding), finding_fmt, ap);
	va_end(ap);
	c.id = text_dup(id);
	c.subject = text_dup(subject);
	c.finding = text_dup(finding);
	c.symptom = text_dup(symptom);
	c.fix = text_dup(fix);
	if (!c.id || !c.subject || !c.finding || !c.symptom || !c.fix) {
		check_done(&c);
		return -ENOMEM;
	}
	c.seq = r->n;
	r->v[r->n++] = c;
	return 0;
}

void rdp_doctor_report_done(struct rdp_doctor_report *r)
{
	for (size_t i = 0; r && i < r->n; i++)
		check_done(&r->v[i]);
	if (r) {
		rdp_free(r->v);
		memset(r, 0, sizeof(*r));
	}
}

/* fail, warn, skip, ok. */
static int severity_rank(enum rdp_check_status s)
{
	switch (s) {
	case RDP_CHECK_FAIL:
		return 0;
	case RDP_CHECK_WARN:
		return 1;
	case RDP_CHECK_SKIP:
		return 2;
	default:
		return 3;
	}
}

static int cmp_check(const void *a, const void *b)
{
	const struct rdp_check *x = a, *y = b;

	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	if (severity_rank(x->status) != severity_rank(y->status))
		return severity_rank(x->status) - severity_rank(y->status);
	return (x->seq > y->seq) - (x->seq < y->seq);
}

void rdp_doctor_order(struct rdp_doctor_report *r)
{
	if (r->n > 1)
		qsort(r->v, r->n, sizeof(*r->v), cmp_check);
}

size_t rdp_doctor_count(const struct rdp_doctor_report *r, enum rdp_check_status s)
{
	size_t n = 0;

	for (size_t i = 0; i < r->n; i++)
		n += r->v[i].status == s;
	return n;
}

int rdp_doctor_render_text(const struct rdp_doctor_report *r, FILE *f)
{
	size_t id_w = 0;
	int group = -1;

	for (size_t i = 0; i < r->n; i++)
		if (strlen(r->v[i].id) > id_w)
			id_w = strlen(r->v[i].id);
	for (size_t i = 0; i < r->n; i++) {
		const struct rdp_check *c = &r->v[i];

		if ((int)c->group != group) {
			fprintf(f, "%s%s:\n", group < 0 ? "" : "\n", rdp_check_group_name(c->group));
			group = (int)c->group;
		}
		fprintf(f, "  %-4s %-*s %s%s%s", rdp_check_status_name(c->status), (int)id_w, c->id,
			c->subject, c->subject[0] ? ": " : "", c->finding);
		if (c->status == RDP_CHECK_WARN || c->status == RDP_CHECK_FAIL) {
			if (c->symptom[0])
				fprintf(f, " | symptom: %s", c->symptom);
			if (c->fix[0])
				fprintf(f, " | fix: %s", c->fix);
		}
		fputc('\n', f);
	}
	fprintf(f, "%sdoctor: %zu check%s: %zu fail, %zu warn, %zu skip, %zu ok\n",
		r->n ? "\n" : "", r->n, r->n == 1 ? "" : "s", rdp_doctor_count(r, RDP_CHECK_FAIL),
		rdp_doctor_count(r, RDP_CHECK_WARN), rdp_doctor_count(r, RDP_CHECK_SKIP),
		rdp_doctor_count(r, RDP_CHECK_OK));
	return ferror(f) ? -EIO : 0;
}

/* Takes v; -ENOMEM when o or v is NULL or the set fails. */
static int set(json_t *o, const char *k, json_t *v)
{
	if (!o || !v) {
		json_decref(v);
		return -ENOMEM;
	}
	return json_object_set_new(o, k, v) < 0 ? -ENOMEM : 0;
}

static json_t *check_json(const struct rdp_check *c)
{
	json_t *o = json_object();
	int k = 0;

	k |= set(o, "id", json_string(c->id));
	k |= set(o, "group", json_string(rdp_check_group_name(c->group)));
	k |= set(o, "status", json_string(rdp_check_status_name(c->status)));
	k |= set(o, "subject", json_string(c->subject));
	k |= set(o, "finding", json_string(c->finding));
	k |= set(o, "symptom", json_string(c->symptom));
	k |= set(o, "fix", json_string(c->fix));
	if (k) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *rdp_doctor_to_json(const struct rdp_doctor_report *r)
{
	json_t *doc = json_object(), *checks = json_array(), *sum = json_object();
	int k = 0;

	k |= set(doc, "checks", checks);
	for (size_t i = 0; i < r->n && !k; i++) {
		json_t *c = check_json(&r->v[i]);

		if (!c || !checks || json_array_append_new(checks, c) < 0)
			k = -ENOMEM;
	}
	k |= set(sum, "checks", json_integer((json_int_t)r->n));
	for (int s = RDP_CHECK_FAIL; s >= RDP_CHECK_OK; s--)
		k |= set(sum, rdp_check_status_name(s),
			 json_integer((json_int_t)rdp_doctor_count(r, s)));
	k |= set(doc, "summary", sum);
	if (k) {
		json_decref(doc);
		return NULL;
	}
	return doc;
}

int rdp_doctor_render_json(const struct rdp_doctor_report *r, FILE *f)
{
	json_t *doc = rdp_doctor_to_json(r);
	char *s;

	if (!doc)
		return -ENOMEM;
	s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(doc);
	if (!s)
		return -ENOMEM;
	fprintf(f, "%s\n", s);
	free(s); /* jansson's allocator: malloc */
	return ferror(f) ? -EIO : 0;
}

int rdp_doctor_exit_status(const struct rdp_doctor_report *r)
{
	return rdp_doctor_count(r, RDP_CHECK_FAIL) ? 1 : 0;
}

const struct rdp_check *rdp_doctor_find(const struct rdp_doctor_report *r, const char *id,
					enum rdp_check_status s, const char *subject_prefix)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].status == s && strcmp(r->v[i].id, id) == 0 &&
		    (!subject_prefix ||
		     strncmp(r->v[i].subject, subject_prefix, strlen(subject_prefix)) == 0))
			return &r->v[i];
	return NULL;
}
