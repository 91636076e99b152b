/* SPDX-License-Identifier: MIT */
#include "dra-cdi.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "config.h"
#include "dra-share.h"
#include "macro.h"
#include "memlock.h"
#include "workload-env.h"

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool rdp_cdi_claim_uid_valid(const char *uid)
{
	size_t n = uid ? strlen(uid) : 0;

	if (n == 0 || n > RDP_DRA_CDI_UID_MAX || !is_alnum(uid[0]) || !is_alnum(uid[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(uid[i]) && uid[i] != '-')
			return false;
	return true;
}

/* "claim_<uid>": the class cdi.h's file functions take. */
static int file_class(const char *uid, char *buf, size_t size)
{
	int n;

	if (!rdp_cdi_claim_uid_valid(uid))
		return -EINVAL;
	n = snprintf(buf, size, RDP_CDI_CLAIM_CLASS_PREFIX "%s", uid);
	return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

int rdp_cdi_claim_file_name(const char *uid, char *buf, size_t size)
{
	char class[RDP_CDI_CLASS_MAX];
	int r = file_class(uid, class, sizeof(class));

	return r < 0 ? r : rdp_cdi_file_name(class, buf, size);
}

int rdp_cdi_claim_device_id(const char *uid, const char *device, char *buf, size_t size)
{
	char name[RDP_CDI_DEVICE_NAME_MAX];
	int n;

	if (!rdp_cdi_claim_uid_valid(uid) || !device)
		return -EINVAL;
	n = snprintf(name, sizeof(name), "%s-%s", uid, device);
	if (n < 0 || (size_t)n >= sizeof(name))
		return -EINVAL;
	return rdp_cdi_qualified_name(RDP_DRA_CDI_CLASS, name, buf, size);
}

int rdp_cdi_claim_spec_write_at(int dirfd, const char *uid, const char *json)
{
	char class[RDP_CDI_CLASS_MAX];
	int r = file_class(uid, class, sizeof(class));

	return r < 0 ? r : rdp_cdi_write_at(dirfd, class, json);
}

int rdp_cdi_claim_spec_remove_at(int dirfd, const char *uid)
{
	char class[RDP_CDI_CLASS_MAX];
	int r = file_class(uid, class, sizeof(class));

	return r < 0 ? r : rdp_cdi_remove_at(dirfd, class);
}

/* Everything render allocates, freed in one place. */
struct render {
	size_t *dev_idx; /* host indexes of the distinct devices, in result order */
	uint64_t *dev_mem; /* their memlock (the results' parameter, or the driver's) */
	const struct rdp_dra_dev **devs;
	const char **shares; /* per device: the share ID, NULL for the device whole */
	size_t n_devs;
	struct rdp_cdi_device *cdevs; /* the devices', then the requests' */
	struct rdp_cdi_node **nodes; /* per device */
	char **names; /* per device: "<uid>-<device>", then per request: "<uid>-req-<request>" */
	size_t n_names;
	char **host_paths; /* every hostPath made with the prefix */
	size_t n_host_paths;
	struct rdp_cdi_node cm;
	char **env;
	size_t n_env;
};

static void render_done(struct render *r)
{
	for (size_t i = 0; i < r->n_devs && r->nodes; i++)
		rdp_free(r->nodes[i]);
	for (size_t i = 0; i < r->n_names; i++)
		rdp_free(r->names[i]);
	for (size_t i = 0; i < r->n_host_paths; i++)
		rdp_free(r->host_paths[i]);
	for (size_t i = 0; i < r->n_env; i++)
		rdp_free(r->env[i]);
	rdp_free(r->env);
	rdp_free(r->host_paths);
	rdp_free(r->nodes);
	rdp_free(r->names);
	rdp_free(r->cdevs);
	rdp_free(r->devs);
	rdp_free(r->shares);
	rdp_free(r->dev_idx);
	rdp_free(r->dev_mem);
}

static const char *host_path(struct render *r, const char *prefix, const char *path)
{
	char *s;

	if (!prefix)
		return NULL;
	s = rdp_asprintf("%s%s", prefix, path);
	if (s)
		r->host_paths[r->n_host_paths++] = s;
	return s;
}

/* Adds the variables of e (all of them) to r->env. */
static void take_env(struct render *r, struct rdp_env *e)
{
	for (size_t i = 0; i < e->n; i++)
		r->env[r->n_env++] = TAKE_PTR(e->kv[i]);
	rdp_env_done(e);
}

bool rdp_cdi_claim_first_of_request(const struct rdp_dra_result *results, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if (strcmp(results[j].request, results[i].request) == 0)
			return false;
	return true;
}

int rdp_cdi_claim_request_id(const char *uid, const char *request, char *buf, size_t size)
{
	char name[RDP_CDI_DEVICE_NAME_MAX];
	int n;

	if (!rdp_cdi_claim_uid_valid(uid) || !request || !*request)
		return -EINVAL;
	n = snprintf(name, sizeof(name), "%s" RDP_DRA_CDI_REQUEST_INFIX "%s", uid, request);
	if (n < 0 || (size_t)n >= sizeof(name))
		return -EINVAL;
	return rdp_cdi_qualified_name(RDP_DRA_CDI_CLASS, name, buf, size);
}

/*
 * The variables of the results of request results[i].request (a first appearance) into r->env:
 * RDMA_DEVICE_<REQUEST> over its devices, and, with computed, NCCL_IB_HCA / UCX_NET_DEVICES
 * over them too. idx: scratch for n host indexes. ORs what was left out into *omitted.
 */
static int request_env(struct render *r, const struct rdp_dra_inventory *inv,
		       const struct rdp_dra_result *results, size_t n, size_t i, bool computed,
		       size_t *idx, unsigned int *omitted)
{
	struct rdp_resource res;
	struct rdp_env e = {0};
	char req[RDP_DRA_REQUEST_MAX];
	size_t m = 0;
	int k;

	for (size_t j = i; j < n; j++) {
		size_t h;
		bool dup = false;

		if (strcmp(results[j].request, results[i].request) != 0)
			continue;
		h = rdp_dra_inventory_find(inv, results[j].device)->host_index;
		for (size_t q = 0; q < m && !dup; q++)
			dup = idx[q] == h;
		if (!dup)
			idx[m++] = h;
	}
	if (snprintf(req, sizeof(req), "%s", results[i].request) >= (int)sizeof(req))
		return -EINVAL;
	res = (struct rdp_resource){.full_name = req};
	k = rdp_env_build(&res, inv->host, idx, m, RDP_ENV_GROUP_DEVICES, &e);
	if (k < 0)
		return k;
	take_env(r, &e);
	if (!computed)
		return 0;
	res = (struct rdp_resource){.full_name = req, .env_from = RDP_ENV_FROM_ALL};
	k = rdp_env_build(&res, inv->host, idx, m, RDP_ENV_GROUP_COMPUTED, &e);
	if (k < 0)
		return k;
	*omitted |= e.omitted;
	take_env(r, &e);
	return 0;
}

/* A result's memlock: its parameter's, or the driver's. */
static uint64_t mem_of(const struct rdp_dra_result *res, uint64_t dflt)
{
	return res->has_memlock ? res->memlock : dflt;
}

int rdp_cdi_claim_spec_render_env(const struct rdp_dra_inventory *inv, const char *uid,
				  const struct rdp_dra_result *results, size_t n,
				  const char *host_prefix, const char *hook_path, uint64_t memlock,
				  bool claim_env, char **ret_json, unsigned int *ret_omitted)
{
	struct render r = {0};
	struct rdp_cdi_spec spec = {.class = RDP_DRA_CDI_CLASS, .hook_path = hook_path,
				    .memlock = memlock};
	struct rdp_resource res = {0};
	struct rdp_env e = {0};
	size_t n_nodes = 0, n_reqs = 0, *req_idx = NULL;
	unsigned int omitted = 0;
	int k = -ENOMEM;

	if (ret_omitted)
		*ret_omitted = 0;
	*ret_json = NULL;
	if (!rdp_cdi_claim_uid_valid(uid) || n > RDP_DRA_CLAIM_MAX_RESULTS)
		return -EINVAL;
	if (n == 0)
		return 0;
	r.dev_idx = rdp_calloc(n, sizeof(*r.dev_idx));
	r.devs = rdp_calloc(n, sizeof(*r.devs));
	r.dev_mem = rdp_calloc(n, sizeof(*r.dev_mem));
	r.shares = rdp_calloc(n, sizeof(*r.shares));
	req_idx = rdp_calloc(n, sizeof(*req_idx));
	if (!r.dev_idx || !r.devs || !r.dev_mem || !r.shares || !req_idx)
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct rdp_dra_dev *d = rdp_dra_inventory_find(inv, results[i].device);
		bool seen = false;

		if (!d || !results[i].request || !*results[i].request) {
			k = -EINVAL;
			goto out;
		}
		if (rdp_cdi_claim_first_of_request(results, i))
			n_reqs++;
		for (size_t j = 0; j < r.n_devs && !seen; j++)
			if (r.devs[j] == d &&
			    rdp_dra_share_same(d->name, r.shares[j], d->name, results[i].share_id)) {
				seen = true;
				/* a device of two requests: the larger limit of the two */
				if (mem_of(&results[i], memlock) > r.dev_mem[j])
					r.dev_mem[j] = mem_of(&results[i], memlock);
			}
		if (seen)
			continue;
		if (rdp_dra_dev_device(inv, d)->n_char_devices == 0) {
			k = -EINVAL;
			goto out;
		}
		r.devs[r.n_devs] = d;
		r.dev_mem[r.n_devs] = mem_of(&results[i], memlock);
		r.shares[r.n_devs] = results[i].share_id;
		r.dev_idx[r.n_devs++] = d->host_index;
		n_nodes += rdp_dra_dev_device(inv, d)->n_char_devices;
	}
	r.cdevs = rdp_calloc(r.n_devs + n_reqs, sizeof(*r.cdevs));
	r.nodes = rdp_calloc(r.n_devs, sizeof(*r.nodes));
	r.names = rdp_calloc(r.n_devs + n_reqs, sizeof(*r.names));
	r.host_paths = rdp_calloc(n_nodes + 1, sizeof(*r.host_paths));
	r.env = rdp_calloc(3 * n + 2, sizeof(*r.env));
	if (!r.cdevs || !r.nodes || !r.names || !r.host_paths || !r.env)
		goto out;
	for (size_t i = 0; i < r.n_devs; i++) {
		const struct rdp_device *d = rdp_dra_dev_device(inv, r.devs[i]);
		char part[RDP_CDI_DEVICE_NAME_MAX];

		if (rdp_dra_share_cdi_name(r.devs[i]->name, r.shares[i], part, sizeof(part)) < 0) {
			k = -EINVAL;
			goto out;
		}
		r.names[r.n_names++] = rdp_asprintf("%s-%s", uid, part);
		r.nodes[i] = rdp_calloc(d->n_char_devices, sizeof(**r.nodes));
		if (!r.names[i] || !r.nodes[i])
			goto out;
		for (size_t j = 0; j < d->n_char_devices; j++) {
			r.nodes[i][j].path = d->char_devices[j];
			r.nodes[i][j].host_path = host_path(&r, host_prefix, d->char_devices[j]);
			if (host_prefix && !r.nodes[i][j].host_path)
				goto out;
		}
		r.cdevs[i] = (struct rdp_cdi_device){.name = r.names[i], .nodes = r.nodes[i],
						     .n_nodes = d->n_char_devices};
	}
	/* One limit for the claim: the top-level hook, as before. Limits that differ by request
	 * (dra-params.h): each device carries its own hook, none at the top. */
	for (size_t i = 1; i < r.n_devs; i++)
		if (r.dev_mem[i] != r.dev_mem[0]) {
			spec.memlock = RDP_MEMLOCK_LEAVE;
			for (size_t j = 0; j < r.n_devs; j++) {
				r.cdevs[j].own_memlock = true;
				r.cdevs[j].memlock = r.dev_mem[j];
			}
			break;
		}
	if (r.n_devs && !r.cdevs[0].own_memlock)
		spec.memlock = r.dev_mem[0];
	if (inv->host->rdma_cm[0]) {
		r.cm.path = inv->host->rdma_cm;
		r.cm.host_path = host_path(&r, host_prefix, inv->host->rdma_cm);
		if (host_prefix && !r.cm.host_path)
			goto out;
		spec.nodes = &r.cm;
		spec.n_nodes = 1;
	}

	spec.devices = r.cdevs;
	spec.n_devices = r.n_devs;
	/* RDMA_DEVICE_<REQUEST>, per base request in first-appearance order */
	for (size_t i = 0; i < n; i++) {
		size_t first = r.n_env;
		char *name;

		if (!rdp_cdi_claim_first_of_request(results, i))
			continue;
		k = request_env(&r, inv, results, n, i, !claim_env, req_idx, &omitted);
		if (k < 0)
			goto out;
		k = -ENOMEM;
		if (claim_env)
			continue;
		/* per request: a device of its own with only its variables */
		name = rdp_asprintf("%s" RDP_DRA_CDI_REQUEST_INFIX "%s", uid, results[i].request);
		if (!name)
			goto out;
		r.names[r.n_names++] = name;
		r.cdevs[spec.n_devices++] = (struct rdp_cdi_device){
			.name = name, .env = (const char *const *)&r.env[first],
			.n_env = r.n_env - first};
	}
	if (claim_env) {
		/* NCCL_IB_HCA, UCX_NET_DEVICES over the claim's devices, top-level with the rest */
		char all[] = "claim";
		size_t n_hosts = 0;

		/* two shares of one device are one HCA to NCCL and UCX */
		for (size_t i = 0; i < r.n_devs; i++) {
			bool dup = false;

			for (size_t q = 0; q < n_hosts && !dup; q++)
				dup = req_idx[q] == r.dev_idx[i];
			if (!dup)
				req_idx[n_hosts++] = r.dev_idx[i];
		}
		res = (struct rdp_resource){.full_name = all, .env_from = RDP_ENV_FROM_ALL};
		k = rdp_env_build(&res, inv->host, req_idx, n_hosts, RDP_ENV_GROUP_COMPUTED, &e);
		if (k < 0)
			goto out;
		omitted = e.omitted;
		take_env(&r, &e);
		spec.env = (const char *const *)r.env;
		spec.n_env = r.n_env;
	}
	if (ret_omitted)
		*ret_omitted = omitted;
	k = rdp_cdi_render(&spec, ret_json);
out:
	rdp_env_done(&e);
	rdp_free(req_idx);
	render_done(&r);
	return k;
}

int rdp_cdi_claim_spec_render(const struct rdp_dra_inventory *inv, const char *uid,
			      const struct rdp_dra_result *results, size_t n,
			      const char *host_prefix, const char *hook_path, uint64_t memlock,
			      char **ret_json, unsigned int *ret_omitted)
{
	return rdp_cdi_claim_spec_render_env(inv, uid, results, n, host_prefix, hook_path, memlock,
					     false, ret_json, ret_omitted);
}
