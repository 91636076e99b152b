/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "dra-checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "alloc.h"
#include "dra-share.h"
#include "fileio.h"
#include "macro.h"

static const char *const state_names[_RDP_DRA_CLAIM_STATE_MAX] = {
	[RDP_DRA_PREPARE_STARTED] = "prepare-started",
	[RDP_DRA_PREPARED] = "prepared",
};

const char *rdp_dra_claim_state_name(enum rdp_dra_claim_state s)
{
	return (unsigned)s < _RDP_DRA_CLAIM_STATE_MAX ? state_names[s] : "unknown";
}

int rdp_dra_claim_state_from_name(const char *name, enum rdp_dra_claim_state *ret)
{
	for (int s = 0; s < _RDP_DRA_CLAIM_STATE_MAX; s++)
		if (name && strcmp(name, state_names[s]) == 0) {
			*ret = (enum rdp_dra_claim_state)s;
			return 0;
		}
	return -EINVAL;
}

bool rdp_dra_claim_state_next(bool present, enum rdp_dra_claim_state from,
			      enum rdp_dra_claim_state to)
{
	if ((unsigned)to >= _RDP_DRA_CLAIM_STATE_MAX)
		return false;
	if (!present)
		return to == RDP_DRA_PREPARE_STARTED;
	switch (from) {
	case RDP_DRA_PREPARE_STARTED:
		return true; /* retried, or done */
	case RDP_DRA_PREPARED:
		return to == RDP_DRA_PREPARED; /* a repeated Prepare */
	default:
		return false;
	}
}

/* ---- memory ---- */

static void device_done(struct rdp_dra_ckpt_device *d)
{
	rdp_free(d->request);
	rdp_free(d->pool);
	rdp_free(d->device);
	rdp_free(d->share_id);
	for (size_t i = 0; i < d->n_cdi_ids; i++)
		rdp_free(d->cdi_ids[i]);
	rdp_free(d->cdi_ids);
	*d = (struct rdp_dra_ckpt_device){0};
}

void rdp_dra_ckpt_claim_done(struct rdp_dra_ckpt_claim *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_devices; i++)
		device_done(&c->devices[i]);
	rdp_free(c->devices);
	rdp_free(c->uid);
	rdp_free(c->namespace);
	rdp_free(c->name);
	rdp_free(c->cdi_spec);
	*c = (struct rdp_dra_ckpt_claim){0};
}

void rdp_dra_checkpoint_done(struct rdp_dra_checkpoint *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_claims; i++)
		rdp_dra_ckpt_claim_done(&c->claims[i]);
	rdp_free(c->claims);
	*c = (struct rdp_dra_checkpoint){0};
}

static bool bounded(const char *s)
{
	return s && strnlen(s, RDP_DRA_CKPT_STRING_MAX + 1) <= RDP_DRA_CKPT_STRING_MAX;
}

int rdp_dra_ckpt_claim_copy(const struct rdp_dra_ckpt_claim *src, struct rdp_dra_ckpt_claim *dst)
{
	struct rdp_dra_ckpt_claim c = {.state = src->state};

	if (!bounded(src->uid) || !src->uid[0] || src->n_devices > RDP_DRA_CKPT_MAX_DEVICES ||
	    (src->namespace && !bounded(src->namespace)) || (src->name && !bounded(src->name)) ||
	    (src->cdi_spec && !bounded(src->cdi_spec)) ||
	    (unsigned)src->state >= _RDP_DRA_CLAIM_STATE_MAX)
		return -EINVAL;
	for (size_t i = 0; i < src->n_devices; i++) {
		const struct rdp_dra_ckpt_device *d = &src->devices[i];

		if (!bounded(d->request) || !bounded(d->pool) || !bounded(d->device) ||
		    (d->share_id && !rdp_dra_share_id_valid(d->share_id)) ||
		    d->n_cdi_ids > RDP_DRA_CKPT_MAX_CDI_IDS)
			return -EINVAL;
		for (size_t k = 0; k < d->n_cdi_ids; k++)
			if (!bounded(d->cdi_ids[k]))
				return -EINVAL;
	}
	c.uid = rdp_strdup(src->uid);
	c.namespace = rdp_strdup(strempty(src->namespace));
	c.name = rdp_strdup(strempty(src->name));
	c.cdi_spec = rdp_strdup(strempty(src->cdi_spec));
	if (!c.uid || !c.namespace || !c.name || !c.cdi_spec)
		goto nomem;
	if (src->n_devices) {
		c.devices = rdp_calloc(src->n_devices, sizeof(*c.devices));
		if (!c.devices)
			goto nomem;
	}
	for (size_t i = 0; i < src->n_devices; i++, c.n_devices++) {
		const struct rdp_dra_ckpt_device *s = &src->devices[i];
		struct rdp_dra_ckpt_device *d = &c.devices[i];

		d->request = rdp_strdup(s->request);
		d->pool = rdp_strdup(s->pool);
		d->device = rdp_strdup(s->device);
		d->admin_access = s->admin_access;
		d->share_id = s->share_id ? rdp_strdup(s->share_id) : NULL;
		if (!d->request || !d->pool || !d->device || (s->share_id && !d->share_id)) {
			c.n_devices++;
			goto nomem;
		}
		if (s->n_cdi_ids) {
			d->cdi_ids = rdp_calloc(s->n_cdi_ids, sizeof(char *));
			if (!d->cdi_ids) {
				c.n_devices++;
				goto nomem;
			}
		}
		for (size_t k = 0; k < s->n_cdi_ids; k++) {
			d->cdi_ids[k] = rdp_strdup(s->cdi_ids[k]);
			if (!d->cdi_ids[k]) {
				c.n_devices++;
				goto nomem;
			}
			d->n_cdi_ids++;
		}
	}
	*dst = c;
	return 0;
nomem:
	rdp_dra_ckpt_claim_done(&c);
	return -ENOMEM;
}

/* The index of uid, or where it would go (*found false). */
static size_t search(const struct rdp_dra_checkpoint *c, const char *uid, bool *found)
{
	size_t lo = 0, hi = c->n_claims;

	*found = false;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = strcmp(uid, c->claims[mid].uid);

		if (r == 0) {
			*found = true;
			return mid;
		}
		if (r < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

const struct rdp_dra_ckpt_claim *rdp_dra_checkpoint_find(const struct rdp_dra_checkpoint *c,
							 const char *uid)
{
	bool found;
	size_t i;

	if (!uid)
		return NULL;
	i = search(c, uid, &found);
	return found ? &c->claims[i] : NULL;
}

int rdp_dra_checkpoint_put(struct rdp_dra_checkpoint *c, const struct rdp_dra_ckpt_claim *claim)
{
	struct rdp_dra_ckpt_claim copy;
	bool found;
	size_t i;
	int r;

	if (!claim->uid)
		return -EINVAL;
	i = search(c, claim->uid, &found);
	if (!rdp_dra_claim_state_next(found, found ? c->claims[i].state : RDP_DRA_PREPARE_STARTED,
				      claim->state))
		return -EINVAL;
	if (!found && c->n_claims >= RDP_DRA_CKPT_MAX_CLAIMS)
		return -E2BIG;
	r = rdp_dra_ckpt_claim_copy(claim, &copy);
	if (r < 0)
		return r;
	if (found) {
		rdp_dra_ckpt_claim_done(&c->claims[i]);
		c->claims[i] = copy;
		return 0;
	}
	struct rdp_dra_ckpt_claim *v = rdp_reallocarray(c->claims, c->n_claims + 1, sizeof(*v));
	if (!v) {
		rdp_dra_ckpt_claim_done(&copy);
		return -ENOMEM;
	}
	c->claims = v;
	memmove(&v[i + 1], &v[i], (c->n_claims - i) * sizeof(*v));
	v[i] = copy;
	c->n_claims++;
	return 0;
}

int rdp_dra_checkpoint_remove(struct rdp_dra_checkpoint *c, const char *uid)
{
	bool found;
	size_t i;

	if (!uid)
		return 1;
	i = search(c, uid, &found);
	if (!found)
		return 1;
	rdp_dra_ckpt_claim_done(&c->claims[i]);
	memmove(&c->claims[i], &c->claims[i + 1], (c->n_claims - i - 1) * sizeof(*c->claims));
	c->n_claims--;
	if (c->n_claims == 0) {
		rdp_free(c->claims);
		c->claims = NULL;
	}
	return 0;
}

/* ---- JSON ---- */

int rdp_dra_checkpoint_render(const struct rdp_dra_checkpoint *c, char **ret)
{
	json_t *root = json_pack("{s:i, s:{}}", "version", RDP_DRA_CKPT_VERSION, "claims");
	json_t *claims = json_object_get(root, "claims");
	char *s = NULL;
	size_t len;

	if (!root)
		return -ENOMEM;
	for (size_t i = 0; i < c->n_claims; i++) {
		const struct rdp_dra_ckpt_claim *cl = &c->claims[i];
		json_t *o = json_pack("{s:s, s:s, s:s, s:[], s:s}", "namespace", cl->namespace,
				      "name", cl->name, "state", rdp_dra_claim_state_name(cl->state),
				      "devices", "cdi_spec", cl->cdi_spec);
		json_t *devs = json_object_get(o, "devices");

		if (!o || json_object_set_new(claims, cl->uid, o) < 0)
			goto nomem;
		for (size_t k = 0; k < cl->n_devices; k++) {
			const struct rdp_dra_ckpt_device *d = &cl->devices[k];
			json_t *dj = json_pack("{s:s, s:s, s:s, s:[]}", "request", d->request, "pool",
					       d->pool, "device", d->device, "cdi_ids");
			json_t *ids = json_object_get(dj, "cdi_ids");

			if (!dj || json_array_append_new(devs, dj) < 0)
				goto nomem;
			if (d->admin_access &&
			    json_object_set_new(dj, "admin_access", json_true()) < 0)
				goto nomem;
			if (d->share_id &&
			    json_object_set_new(dj, "share_id", json_string(d->share_id)) < 0)
				goto nomem;
			for (size_t j = 0; j < d->n_cdi_ids; j++)
				if (json_array_append_new(ids, json_string(d->cdi_ids[j])) < 0)
					goto nomem;
		}
	}
	s = json_dumps(root, JSON_SORT_KEYS | JSON_INDENT(1));
	json_decref(root);
	if (!s)
		return -ENOMEM;
	len = strlen(s);
	if (len + 1 > RDP_DRA_CKPT_MAX_BYTES) {
		free(s);
		return -E2BIG;
	}
	*ret = rdp_malloc(len + 2);
	if (!*ret) {
		free(s);
		return -ENOMEM;
	}
	memcpy(*ret, s, len);
	(*ret)[len] = '\n';
	(*ret)[len + 1] = 0;
	free(s);
	return 0;
nomem:
	json_decref(root);
	return -ENOMEM;
}

static int bad(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int bad(char **ret_error, int r, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!ret_error)
		return r;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	rdp_free(*ret_error);
	*ret_error = rdp_strdup(buf);
	return *ret_error ? r : -ENOMEM;
}

/* Only the keys of allowed[] (NULL-terminated), each required when req. */
/* Every key of o is in allowed or optional (NULL-terminated; optional may be NULL), and
 * every key of allowed is there. */
static bool keys_ok_opt(json_t *o, const char *const *allowed, const char *const *optional,
			const char **which)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v) {
		bool ok = false;

		for (size_t i = 0; allowed[i] && !ok; i++)
			ok = strcmp(k, allowed[i]) == 0;
		for (size_t i = 0; optional && optional[i] && !ok; i++)
			ok = strcmp(k, optional[i]) == 0;
		if (!ok) {
			*which = k;
			return false;
		}
	}
	for (size_t i = 0; allowed[i]; i++)
		if (!json_object_get(o, allowed[i])) {
			*which = allowed[i];
			return false;
		}
	return true;
}

static bool keys_ok(json_t *o, const char *const *allowed, const char **which)
{
	return keys_ok_opt(o, allowed, NULL, which);
}

static const char *str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	if (!json_is_string(v) || json_string_length(v) > RDP_DRA_CKPT_STRING_MAX ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return NULL;
	return json_string_value(v);
}

static int parse_claim(const char *uid, json_t *o, struct rdp_dra_ckpt_claim *ret,
		       char **ret_error)
{
	static const char *const claim_keys[] = {"namespace", "name", "state", "devices",
						 "cdi_spec", NULL};
	static const char *const dev_keys[] = {"request", "pool", "device", "cdi_ids", NULL};
	static const char *const dev_optional[] = {"admin_access", "share_id", NULL};
	struct rdp_dra_ckpt_claim c = {0};
	struct rdp_dra_ckpt_device *devs = NULL;
	const char *which = "";
	json_t *dv, *d;
	size_t i, n;
	int r;

	if (strlen(uid) == 0 || strlen(uid) > RDP_DRA_CKPT_STRING_MAX)
		return bad(ret_error, -EBADMSG, "claim UID empty or too long");
	if (!json_is_object(o) || !keys_ok(o, claim_keys, &which))
		return bad(ret_error, -EBADMSG, "claim %s: key \"%.64s\" unknown or missing", uid,
			   which);
	c.uid = (char *)uid;
	c.namespace = (char *)str(o, "namespace");
	c.name = (char *)str(o, "name");
	c.cdi_spec = (char *)str(o, "cdi_spec");
	if (!c.namespace || !c.name || !c.cdi_spec ||
	    rdp_dra_claim_state_from_name(str(o, "state"), &c.state) < 0)
		return bad(ret_error, -EBADMSG, "claim %s: namespace, name, state or cdi_spec "
			   "not valid", uid);
	dv = json_object_get(o, "devices");
	if (!json_is_array(dv))
		return bad(ret_error, -EBADMSG, "claim %s: devices is not a list", uid);
	n = json_array_size(dv);
	if (n > RDP_DRA_CKPT_MAX_DEVICES)
		return bad(ret_error, -E2BIG, "claim %s: %zu devices, at most %d", uid, n,
			   RDP_DRA_CKPT_MAX_DEVICES);
	/* borrowed strings from the JSON: rdp_dra_ckpt_claim_copy() below copies them */
	devs = n ? rdp_calloc(n, sizeof(*devs)) : NULL;
	if (n && !devs)
		return -ENOMEM;
	r = 0;
	json_array_foreach(dv, i, d) {
		json_t *ids = json_object_get(d, "cdi_ids"), *id, *admin;
		size_t k;

		if (!json_is_object(d) || !keys_ok_opt(d, dev_keys, dev_optional, &which) ||
		    !json_is_array(ids)) {
			r = bad(ret_error, -EBADMSG, "claim %s: device %zu: key \"%.64s\" unknown "
				"or missing", uid, i, which);
			goto out;
		}
		devs[i].request = (char *)str(d, "request");
		devs[i].pool = (char *)str(d, "pool");
		devs[i].device = (char *)str(d, "device");
		admin = json_object_get(d, "admin_access");
		if (admin && !json_is_boolean(admin)) {
			r = bad(ret_error, -EBADMSG, "claim %s: device %zu: admin_access is not a "
				"boolean", uid, i);
			goto out;
		}
		devs[i].admin_access = json_is_true(admin);
		if (json_object_get(d, "share_id")) {
			devs[i].share_id = (char *)str(d, "share_id");
			if (!rdp_dra_share_id_valid(devs[i].share_id)) {
				r = bad(ret_error, -EBADMSG, "claim %s: device %zu: share_id is not a "
					"UID", uid, i);
				goto out;
			}
		}
		if (!devs[i].request || !devs[i].pool || !devs[i].device) {
			r = bad(ret_error, -EBADMSG, "claim %s: device %zu: request, pool or device "
				"not a string", uid, i);
			goto out;
		}
		if (json_array_size(ids) > RDP_DRA_CKPT_MAX_CDI_IDS) {
			r = bad(ret_error, -E2BIG, "claim %s: device %zu: more than %d CDI IDs", uid,
				i, RDP_DRA_CKPT_MAX_CDI_IDS);
			goto out;
		}
		devs[i].cdi_ids = json_array_size(ids)
					  ? rdp_calloc(json_array_size(ids), sizeof(char *))
					  : NULL;
		if (json_array_size(ids) && !devs[i].cdi_ids) {
			r = -ENOMEM;
			goto out;
		}
		json_array_foreach(ids, k, id) {
			if (!json_is_string(id) || json_string_length(id) > RDP_DRA_CKPT_STRING_MAX ||
			    strlen(json_string_value(id)) != json_string_length(id)) {
				r = bad(ret_error, -EBADMSG, "claim %s: device %zu: a CDI ID is not a "
					"string", uid, i);
				goto out;
			}
			devs[i].cdi_ids[k] = (char *)json_string_value(id);
			devs[i].n_cdi_ids++;
		}
	}
	c.devices = devs;
	c.n_devices = n;
	r = rdp_dra_ckpt_claim_copy(&c, ret);
out:
	for (i = 0; i < n; i++)
		rdp_free(devs[i].cdi_ids);
	rdp_free(devs);
	return r;
}

int rdp_dra_checkpoint_parse(const char *text, size_t len, struct rdp_dra_checkpoint *ret,
			     char **ret_error)
{
	struct rdp_dra_checkpoint c = {0};
	json_t *root = NULL, *claims, *v;
	json_error_t jerr;
	const char *uid;
	int r = 0;

	if (ret_error)
		*ret_error = NULL;
	if (len > RDP_DRA_CKPT_MAX_BYTES)
		return bad(ret_error, -E2BIG, "larger than %u bytes", RDP_DRA_CKPT_MAX_BYTES);
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return bad(ret_error, -EBADMSG, "not JSON: line %d: %s", jerr.line, jerr.text);
	v = json_object_get(root, "version");
	claims = json_object_get(root, "claims");
	if (!json_is_object(root) || json_object_size(root) != 2 || !json_is_integer(v) ||
	    !json_is_object(claims)) {
		r = bad(ret_error, -EBADMSG, "not a checkpoint: {\"version\", \"claims\"} expected");
		goto out;
	}
	if (json_integer_value(v) != RDP_DRA_CKPT_VERSION) {
		r = bad(ret_error, -EBADMSG, "version %lld, this driver reads %d",
			(long long)json_integer_value(v), RDP_DRA_CKPT_VERSION);
		goto out;
	}
	if (json_object_size(claims) > RDP_DRA_CKPT_MAX_CLAIMS) {
		r = bad(ret_error, -E2BIG, "%zu claims, at most %d", json_object_size(claims),
			RDP_DRA_CKPT_MAX_CLAIMS);
		goto out;
	}
	if (json_object_size(claims)) {
		c.claims = rdp_calloc(json_object_size(claims), sizeof(*c.claims));
		if (!c.claims) {
			r = -ENOMEM;
			goto out;
		}
	}
	json_object_foreach(claims, uid, v) {
		struct rdp_dra_ckpt_claim cl = {0};
		bool found;
		size_t i;

		r = parse_claim(uid, v, &cl, ret_error);
		if (r < 0)
			goto out;
		i = search(&c, cl.uid, &found); /* never found: the keys are unique */
		memmove(&c.claims[i + 1], &c.claims[i], (c.n_claims - i) * sizeof(*c.claims));
		c.claims[i] = cl;
		c.n_claims++;
	}
	rdp_dra_checkpoint_done(ret);
	*ret = c;
	c = (struct rdp_dra_checkpoint){0};
out:
	if (r == -ENOMEM && ret_error) {
		rdp_free(*ret_error);
		*ret_error = NULL;
	}
	rdp_dra_checkpoint_done(&c);
	json_decref(root);
	return r;
}

/* ---- files ---- */

int rdp_dra_checkpoint_load_at(int dirfd, struct rdp_dra_checkpoint *ret, char **ret_error)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t got = 0;
	int r;

	if (ret_error)
		*ret_error = NULL;
	fd = openat(dirfd, RDP_DRA_CKPT_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT) {
			rdp_dra_checkpoint_done(ret);
			return 0;
		}
		if (errno == ELOOP)
			return bad(ret_error, -EBADMSG, "a symbolic link");
		return -errno;
	}
	r = rdp_read_file_fd(fd, RDP_DRA_CKPT_MAX_BYTES, &buf, &got);
	if (r == -EINVAL)
		return bad(ret_error, -EBADMSG, "not a regular file");
	if (r == -EFBIG)
		return bad(ret_error, -E2BIG, "larger than %u bytes", RDP_DRA_CKPT_MAX_BYTES);
	if (r < 0)
		return r;
	return rdp_dra_checkpoint_parse(buf, got, ret, ret_error);
}

int rdp_dra_checkpoint_set_aside_at(int dirfd)
{
	if (renameat(dirfd, RDP_DRA_CKPT_FILE, dirfd, RDP_DRA_CKPT_CORRUPT) < 0)
		return -errno;
	return fsync(dirfd) < 0 ? -errno : 0;
}

int rdp_dra_checkpoint_save_at(int dirfd, const struct rdp_dra_checkpoint *c)
{
	_cleanup_free_ char *text = NULL;
	int r;

	r = rdp_dra_checkpoint_render(c, &text);
	if (r < 0)
		return r;
	return rdp_replace_file_at(dirfd, RDP_DRA_CKPT_FILE, "." RDP_DRA_CKPT_FILE ".", ".tmp",
				   text, strlen(text), 0600);
}
