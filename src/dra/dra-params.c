/* SPDX-License-Identifier: MIT */
#include "dra-params.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "macro.h"
#include "memlock.h"

static int fail(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int fail(char **ret_error, const char *fmt, ...)
{
	va_list ap;
	char buf[1024];

	if (!ret_error)
		return -EBADMSG;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	*ret_error = rdp_strdup(buf);
	return *ret_error ? -EBADMSG : -ENOMEM;
}

/* A JSON string as the API server keeps it: no NUL inside, bounded. */
static const char *plain_string(const json_t *v, size_t max)
{
	if (!json_is_string(v) || json_string_length(v) > max ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return NULL;
	return json_string_value(v);
}

int rdp_dra_params_parse(const json_t *p, const char *where, struct rdp_dra_params *ret,
			 char **ret_error)
{
	struct rdp_dra_params out = {0};
	const char *key, *s;
	json_t *v;

	if (ret_error)
		*ret_error = NULL;
	if (!json_is_object(p))
		return fail(ret_error, "%s: not an object", where);
	s = plain_string(json_object_get(p, "apiVersion"), 253);
	if (!s || strcmp(s, RDP_DRA_PARAMS_API_VERSION) != 0)
		return fail(ret_error, "%s: apiVersion must be \"%s\"", where,
			    RDP_DRA_PARAMS_API_VERSION);
	s = plain_string(json_object_get(p, "kind"), 253);
	if (!s || strcmp(s, RDP_DRA_PARAMS_KIND) != 0)
		return fail(ret_error, "%s: kind must be \"%s\"", where, RDP_DRA_PARAMS_KIND);
	json_object_foreach((json_t *)p, key, v) {
		if (strcmp(key, "apiVersion") == 0 || strcmp(key, "kind") == 0)
			continue;
		if (strcmp(key, "memlock") == 0) {
			if (json_is_integer(v)) {
				if (json_integer_value(v) < 0)
					return fail(ret_error, "%s: memlock: a negative number",
						    where);
				out.memlock = (uint64_t)json_integer_value(v);
			} else if ((s = plain_string(v, 64))) {
				if (rdp_memlock_parse(s, &out.memlock) < 0)
					return fail(ret_error, "%s: memlock: \"%.64s\" is not "
						    "\"unlimited\", a number of bytes or a number "
						    "with Ki, Mi, Gi or Ti", where, s);
			} else {
				return fail(ret_error, "%s: memlock: not a string or an integer",
					    where);
			}
			out.has_memlock = true;
			continue;
		}
		return fail(ret_error, "%s: unknown field \"%.64s\"", where, key);
	}
	*ret = out;
	return 0;
}

int rdp_dra_params_parse_text(const char *s, size_t len, struct rdp_dra_params *ret,
			      char **ret_error)
{
	json_t *p;
	int r;

	if (ret_error)
		*ret_error = NULL;
	if (len > RDP_DRA_PARAMS_MAX_BYTES)
		return fail(ret_error, "parameters: larger than %d bytes",
			    RDP_DRA_PARAMS_MAX_BYTES);
	p = json_loadb(s, len, JSON_REJECT_DUPLICATES, NULL);
	if (!p)
		return fail(ret_error, "parameters: not JSON");
	r = rdp_dra_params_parse(p, "parameters", ret, ret_error);
	json_decref(p);
	return r;
}

/* True when the config's requests (absent or empty: all) name base request req. */
static bool names(const json_t *requests, const char *req)
{
	size_t i;
	json_t *v;

	if (json_array_size(requests) == 0)
		return true;
	json_array_foreach(requests, i, v) {
		char base[RDP_DRA_REQUEST_MAX];
		const char *s = plain_string(v, RDP_DRA_REQUEST_MAX - 1);

		if (s && rdp_dra_base_request(s, base, sizeof(base)) > 0 && strcmp(base, req) == 0)
			return true;
	}
	return false;
}

int rdp_dra_params_apply(const char *body, size_t len, const char *driver,
			 struct rdp_dra_claim *c, char **ret_error)
{
	json_t *root = NULL, *configs, *v;
	size_t i;
	int r = 0;

	if (ret_error)
		*ret_error = NULL;
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	configs = json_object_get(
		json_object_get(json_object_get(json_object_get(root, "status"), "allocation"),
				"devices"),
		"config");
	if (!configs)
		goto out;
	if (!json_is_array(configs)) {
		r = fail(ret_error, "claim %s/%s: status.allocation.devices.config is not a list",
			 c->namespace, c->name);
		goto out;
	}
	if (json_array_size(configs) > RDP_DRA_PARAMS_MAX_CONFIGS) {
		r = fail(ret_error, "claim %s/%s: %zu config entries, at most %d", c->namespace,
			 c->name, json_array_size(configs), RDP_DRA_PARAMS_MAX_CONFIGS);
		r = r == -EBADMSG ? -E2BIG : r;
		goto out;
	}
	json_array_foreach(configs, i, v) {
		json_t *opaque = json_object_get(v, "opaque"), *requests;
		const char *drv = plain_string(json_object_get(opaque, "driver"), 253);
		struct rdp_dra_params p;
		char where[64], *err = NULL;

		if (!drv || strcmp(drv, driver) != 0)
			continue; /* not ours (or not opaque): another driver's business */
		requests = json_object_get(v, "requests");
		if (requests && !json_is_array(requests)) {
			r = fail(ret_error, "claim %s/%s: config[%zu].requests is not a list",
				 c->namespace, c->name, i);
			goto out;
		}
		snprintf(where, sizeof(where), "config[%zu].opaque.parameters", i);
		r = rdp_dra_params_parse(json_object_get(opaque, "parameters"), where, &p,
					 ret_error ? &err : NULL);
		if (r < 0) {
			if (r == -EBADMSG && ret_error) {
				*ret_error = rdp_asprintf("claim %s/%s: %s", c->namespace, c->name,
							  err);
				if (!*ret_error)
					r = -ENOMEM;
			}
			rdp_free(err);
			goto out;
		}
		if (!p.has_memlock)
			continue;
		for (size_t j = 0; j < c->n_results; j++)
			if (names(requests, c->results[j].request)) {
				c->results[j].has_memlock = true;
				c->results[j].memlock = p.memlock;
			}
	}
out:
	json_decref(root);
	return r;
}
