/* SPDX-License-Identifier: MIT */
#include "dra-claims.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "alloc.h"
#include "dra-share.h"
#include "macro.h"

int rdp_dra_base_request(const char *request, char *buf, size_t len)
{
	size_t n = strcspn(request, "/");

	if (n == 0)
		return -EINVAL;
	if (n >= len)
		return -ENOBUFS;
	memcpy(buf, request, n);
	buf[n] = 0;
	return (int)n;
}

void rdp_dra_claim_done(struct rdp_dra_claim *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n_results; i++) {
		rdp_free(c->results[i].request);
		rdp_free(c->results[i].pool);
		rdp_free(c->results[i].device);
		rdp_free(c->results[i].share_id);
	}
	rdp_free(c->results);
	rdp_free(c->uid);
	rdp_free(c->namespace);
	rdp_free(c->name);
	*c = (struct rdp_dra_claim){0};
}

static int error(char **ret_error, int r, const char *fmt, ...) _printf_(3, 4);
static int error(char **ret_error, int r, const char *fmt, ...)
{
	va_list ap;
	char buf[1024];

	if (!ret_error)
		return r;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	*ret_error = rdp_strdup(buf);
	return *ret_error ? r : -ENOMEM;
}

/* A string member no longer than max; NULL when absent or not a string. */
static const char *str_member(json_t *o, const char *key, size_t max, bool *bad)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return NULL;
	if (!json_is_string(v) || json_string_length(v) > max ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		*bad = true;
		return NULL;
	}
	return json_string_value(v);
}

int rdp_dra_claim_parse(const char *body, size_t len, const struct rdp_dra_claim_ctx *ctx,
			struct rdp_dra_claim *ret, char **ret_error)
{
	struct rdp_dra_claim c = {0};
	json_t *root = NULL, *meta, *status, *alloc, *devices, *results, *v;
	const char *uid, *ns, *name;
	bool bad = false;
	size_t i;
	int r;

	if (ret_error)
		*ret_error = NULL;
	if (len > RDP_DRA_CLAIM_MAX_BYTES) {
		r = error(ret_error, -E2BIG, "claim object larger than %u bytes",
			  RDP_DRA_CLAIM_MAX_BYTES);
		goto out;
	}
	root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	meta = json_object_get(root, "metadata");
	if (!json_is_object(root) || !json_is_object(meta)) {
		r = error(ret_error, -EBADMSG, "claim: not a ResourceClaim object");
		goto out;
	}
	v = json_object_get(root, "kind");
	if (v && (!json_is_string(v) || strcmp(json_string_value(v), "ResourceClaim") != 0)) {
		r = error(ret_error, -EBADMSG, "claim: kind is not ResourceClaim");
		goto out;
	}
	uid = str_member(meta, "uid", RDP_DRA_UID_MAX, &bad);
	ns = str_member(meta, "namespace", 253, &bad);
	name = str_member(meta, "name", 253, &bad);
	if (bad || !uid) {
		r = error(ret_error, -EBADMSG, "claim: metadata.uid, namespace or name missing or "
			  "not a bounded string");
		goto out;
	}
	if (strcmp(uid, ctx->uid) != 0) {
		r = error(ret_error, -ESTALE, "claim got replaced: its UID is %s, kubelet asked "
			  "for %s", uid, ctx->uid);
		goto out;
	}
	status = json_object_get(root, "status");
	alloc = json_object_get(status, "allocation");
	if ((status && !json_is_object(status)) || (alloc && !json_is_object(alloc) &&
						    !json_is_null(alloc))) {
		r = error(ret_error, -EBADMSG, "claim: status.allocation is not an object");
		goto out;
	}
	if (!json_is_object(alloc)) {
		r = error(ret_error, -ENOMSG, "claim %s/%s is not allocated", ns ? ns : "",
			  name ? name : uid);
		goto out;
	}
	devices = json_object_get(alloc, "devices");
	results = json_object_get(devices, "results");
	if ((devices && !json_is_object(devices)) || (results && !json_is_array(results))) {
		r = error(ret_error, -EBADMSG, "claim: status.allocation.devices.results is not "
			  "a list");
		goto out;
	}
	if (json_array_size(results) > RDP_DRA_CLAIM_MAX_RESULTS) {
		r = error(ret_error, -E2BIG, "claim: %zu allocation results, at most %d",
			  json_array_size(results), RDP_DRA_CLAIM_MAX_RESULTS);
		goto out;
	}
	c.uid = rdp_strdup(uid);
	c.namespace = rdp_strdup(ns ? ns : "");
	c.name = rdp_strdup(name ? name : "");
	if (!c.uid || !c.namespace || !c.name)
		goto nomem;
	if (json_array_size(results)) {
		c.results = rdp_calloc(json_array_size(results), sizeof(*c.results));
		if (!c.results)
			goto nomem;
	}
	json_array_foreach(results, i, v) {
		const char *driver, *req, *pool, *dev, *share;
		json_t *admin;
		char base[RDP_DRA_REQUEST_MAX];
		struct rdp_dra_result *res;

		if (!json_is_object(v)) {
			r = error(ret_error, -EBADMSG, "claim: allocation result %zu is not an "
				  "object", i);
			goto out;
		}
		driver = str_member(v, "driver", 253, &bad);
		req = str_member(v, "request", RDP_DRA_REQUEST_MAX - 1, &bad);
		pool = str_member(v, "pool", 253, &bad);
		dev = str_member(v, "device", 253, &bad);
		if (bad || !driver) {
			r = error(ret_error, -EBADMSG, "claim: allocation result %zu: driver, "
				  "request, pool or device not a bounded string", i);
			goto out;
		}
		if (strcmp(driver, ctx->driver) != 0)
			continue;
		admin = json_object_get(v, "adminAccess");
		if (admin && !json_is_boolean(admin) && !json_is_null(admin)) {
			r = error(ret_error, -EBADMSG, "claim: allocation result %zu: adminAccess is "
				  "not a boolean", i);
			goto out;
		}
		share = str_member(v, "shareID", RDP_DRA_SHARE_ID_MAX, &bad);
		if (bad || (share && !rdp_dra_share_id_valid(share))) {
			r = error(ret_error, -EBADMSG, "claim: allocation result %zu: shareID is not "
				  "a UID", i);
			goto out;
		}
		if (!req || !pool || !dev || rdp_dra_base_request(req, base, sizeof(base)) < 0) {
			r = error(ret_error, -EBADMSG, "claim: allocation result %zu: request, pool "
				  "or device missing", i);
			goto out;
		}
		if (strcmp(pool, ctx->pool) != 0) {
			r = error(ret_error, -ENODEV, "claim: device %s of pool %s is not on this "
				  "node (pool %s)", dev, pool, ctx->pool);
			goto out;
		}
		if (!rdp_dra_inventory_find(ctx->inv, dev)) {
			r = error(ret_error, -ENODEV, "claim: device %s is not offered on this node "
				  "(unknown or not usable now)", dev);
			goto out;
		}
		res = &c.results[c.n_results++];
		res->request = rdp_strdup(base);
		res->pool = rdp_strdup(pool);
		res->device = rdp_strdup(dev);
		res->admin_access = json_is_true(admin);
		res->share_id = share ? rdp_strdup(share) : NULL;
		if (!res->request || !res->pool || !res->device || (share && !res->share_id))
			goto nomem;
	}
	rdp_dra_claim_done(ret);
	*ret = c;
	c = (struct rdp_dra_claim){0};
	r = 0;
	goto out;
nomem:
	r = -ENOMEM;
out:
	rdp_dra_claim_done(&c);
	json_decref(root);
	return r;
}
