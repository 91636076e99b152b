/* SPDX-License-Identifier: MIT */
/*
 * The workload's environment (see workload-env.h): RDMA_DEVICE_<RESOURCE>, the variables of
 * "envFromDevices" and the constants of "env", as "K=V" strings.
 */
#include "workload-env.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "macro.h"

bool rdp_env_port_carries_traffic(const struct rdp_port *p)
{
	return rdp_port_state_is_active(p->state) &&
	       (p->link_layer == RDP_LINK_INFINIBAND || p->link_layer == RDP_LINK_ETHER);
}

void rdp_env_done(struct rdp_env *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++)
		rdp_free(e->kv[i]);
	rdp_free(e->kv);
	*e = (struct rdp_env){};
}

const char *rdp_env_get(const struct rdp_env *e, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->kv[i], name, n) == 0 && e->kv[i][n] == '=')
			return e->kv[i] + n + 1;
	return NULL;
}

/* The length of the name of "NAME=value". */
static size_t name_len(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq ? (size_t)(eq - kv) : strlen(kv);
}

int rdp_env_merge(const struct rdp_env *parts, size_t n, struct rdp_env *ret)
{
	struct rdp_env e = {.omitted = n ? ~0u : 0};
	size_t max = 0;

	for (size_t i = 0; i < n; i++) {
		max += parts[i].n;
		e.omitted &= parts[i].omitted;
		e.n_traffic_devices += parts[i].n_traffic_devices;
	}
	e.kv = rdp_calloc(max + 1, sizeof(char *));
	if (!e.kv)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < parts[i].n; j++) {
			const char *kv = parts[i].kv[j];
			size_t nl = name_len(kv), k;
			const char *value = kv[nl] ? kv + nl + 1 : "";
			char *joined;

			for (k = 0; k < e.n; k++)
				if (name_len(e.kv[k]) == nl && strncmp(e.kv[k], kv, nl) == 0)
					break;
			if (k == e.n) {
				e.kv[e.n] = rdp_strdup(kv);
				if (!e.kv[e.n])
					goto nomem;
				e.n++;
				continue;
			}
			/* NCCL's exact-match '=' leads the whole list once. */
			if (value[0] == '=' && e.kv[k][nl + 1] == '=')
				value++;
			joined = rdp_asprintf("%s%s%s", e.kv[k], e.kv[k][nl + 1] ? "," : "", value);
			if (!joined)
				goto nomem;
			rdp_free(e.kv[k]);
			e.kv[k] = joined;
		}
	rdp_env_done(ret);
	*ret = e;
	return 0;
nomem:
	rdp_env_done(&e);
	return -ENOMEM;
}

/* True when device d has a port that carries traffic. */
static bool has_traffic_port(const struct rdp_device *d)
{
	for (size_t i = 0; i < d->n_ports; i++)
		if (rdp_env_port_carries_traffic(&d->ports[i]))
			return true;
	return false;
}

/*
 * "<name>=<lead>dev:port,dev:port" over devices[0..n): every port (traffic false), or only
 * those that carry traffic. A device without ports is listed by name alone (every port:
 * only). NULL on -ENOMEM; *ret_ports counts the entries.
 */
static char *join_ports(const char *name, const char *lead, const struct rdp_host *h,
			const size_t *devices, size_t n, bool traffic, size_t *ret_ports)
{
	size_t len = strlen(name) + 1 + strlen(lead) + 1, pos, entries = 0;
	char *s;

	for (size_t i = 0; i < n; i++) {
		const struct rdp_device *d = &h->devices[devices[i]];

		/* "name:4294967295," at most per port. */
		len += (d->n_ports ? d->n_ports : 1) * (strlen(d->name) + 12);
	}
	s = rdp_malloc(len);
	if (!s)
		return NULL;
	pos = (size_t)snprintf(s, len, "%s=%s", name, lead);
	for (size_t i = 0; i < n; i++) {
		const struct rdp_device *d = &h->devices[devices[i]];

		if (!d->n_ports && !traffic) {
			pos += (size_t)snprintf(s + pos, len - pos, "%s%s", entries ? "," : "",
						d->name);
			entries++;
		}
		for (size_t j = 0; j < d->n_ports; j++) {
			if (traffic && !rdp_env_port_carries_traffic(&d->ports[j]))
				continue;
			pos += (size_t)snprintf(s + pos, len - pos, "%s%s:%u", entries ? "," : "",
						d->name, d->ports[j].num);
			entries++;
		}
	}
	*ret_ports = entries;
	return s;
}

int rdp_env_build(const struct rdp_resource *res, const struct rdp_host *h, const size_t *devices,
		  size_t n, unsigned int flags, struct rdp_env *ret)
{
	struct rdp_env e = {};
	size_t max;
	int r;

	if (!res->full_name)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (devices[i] >= h->n_devices)
			return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (has_traffic_port(&h->devices[devices[i]]))
			e.n_traffic_devices++;
	max = 1 + 2 + res->n_env;
	e.kv = rdp_calloc(max, sizeof(char *));
	if (!e.kv)
		return -ENOMEM;

	if (flags & RDP_ENV_GROUP_DEVICES) {
		char var[RDP_ENV_RESOURCE_VAR_MAX];
		size_t ports;

		r = rdp_env_resource_var(res->full_name, var, sizeof(var));
		if (r < 0)
			goto fail;
		e.kv[e.n] = join_ports(var, "", h, devices, n, false, &ports);
		if (!e.kv[e.n])
			goto nomem;
		e.n++;
	}
	if (flags & RDP_ENV_GROUP_COMPUTED) {
		static const struct {
			unsigned int bit;
			const char *lead;
		} computed[] = {
			{ RDP_ENV_NCCL_IB_HCA, "=" },
			{ RDP_ENV_UCX_NET_DEVICES, "" },
		};

		for (size_t i = 0; i < ARRAY_SIZE(computed); i++) {
			size_t ports;
			char *s;

			if (!(res->env_from & computed[i].bit))
				continue;
			s = join_ports(rdp_env_from_name(computed[i].bit), computed[i].lead, h,
				       devices, n, true, &ports);
			if (!s)
				goto nomem;
			if (!ports) {
				rdp_free(s);
				e.omitted |= computed[i].bit;
				continue;
			}
			e.kv[e.n++] = s;
		}
	}
	if (flags & RDP_ENV_GROUP_CONSTANTS)
		for (size_t i = 0; i < res->n_env; i++) {
			e.kv[e.n] = rdp_asprintf("%s=%s", res->env[i].name, res->env[i].value);
			if (!e.kv[e.n])
				goto nomem;
			e.n++;
		}
	rdp_env_done(ret);
	*ret = e;
	return 0;
nomem:
	r = -ENOMEM;
fail:
	rdp_env_done(&e);
	return r;
}

int rdp_env_pool_devices(const struct rdp_host *h, const struct rdp_pool *p, size_t **ret,
			 size_t *ret_n)
{
	char best[RDP_UNIT_ID_MAX] = "", id[RDP_UNIT_ID_MAX];
	size_t *v = NULL, n = 0, first = SIZE_MAX;

	for (size_t i = 0; i < p->n_devices; i++) {
		const struct rdp_device *d = &h->devices[p->devices[i]];

		if (!rdp_device_is_usable(d))
			continue;
		if (p->res->mode == RDP_MODE_EXCLUSIVE) {
			rdp_device_unit_id(d, id, sizeof(id));
			if (first == SIZE_MAX || strcmp(id, best) < 0) {
				first = p->devices[i];
				snprintf(best, sizeof(best), "%s", id);
			}
			continue;
		}
		if (!v) {
			v = rdp_calloc(p->n_devices, sizeof(size_t));
			if (!v)
				return -ENOMEM;
		}
		v[n++] = p->devices[i];
	}
	if (first != SIZE_MAX) {
		v = rdp_calloc(1, sizeof(size_t));
		if (!v)
			return -ENOMEM;
		v[n++] = first;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

int rdp_env_check_pools(const struct rdp_config *c, const struct rdp_host *h,
			const struct rdp_pools *pools, struct rdp_diags *diags)
{
	const char *file = c->path ? c->path : "config";

	for (size_t i = 0; i < pools->n; i++) {
		const struct rdp_pool *p = &pools->v[i];
		const struct rdp_resource *res = p->res;
		bool excl = res->mode == RDP_MODE_EXCLUSIVE;
		size_t usable = 0, traffic = 0;
		int r = 0;

		if (!res->env_from || !p->n_devices)
			continue;
		for (size_t j = 0; j < p->n_devices; j++) {
			const struct rdp_device *d = &h->devices[p->devices[j]];

			if (!rdp_device_is_usable(d))
				continue;
			usable++;
			if (has_traffic_port(d))
				traffic++;
		}
		if (!usable)
			continue; /* the pool section says no device is usable */
		if (!traffic) {
			char names[64] = "";

			for (unsigned int bit = 1; bit & RDP_ENV_FROM_ALL; bit <<= 1)
				if (res->env_from & bit)
					snprintf(names + strlen(names), sizeof(names) - strlen(names),
						 "%s%s", names[0] ? " and " : "",
						 rdp_env_from_name(bit));
			r = rdp_diags_add(diags, RDP_DIAG_WARNING,
					  "%s:%u: warning: %s: no port of its devices can carry "
					  "traffic on this node (none is ACTIVE with link layer "
					  "InfiniBand or Ethernet): %s would be empty and %s left out",
					  file, res->line, res->full_name, names,
					  strchr(names, ' ') ? "are" : "is");
		} else if ((res->env_from & RDP_ENV_NCCL_IB_HCA) &&
			   traffic > RDP_ENV_NCCL_MAX_HCAS) {
			if (excl)
				r = rdp_diags_add(diags, RDP_DIAG_WARNING,
						  "%s:%u: warning: %s: %zu of its units can carry "
						  "traffic: a container given more than %d gets an "
						  "NCCL_IB_HCA of which NCCL uses only the first %d",
						  file, res->line, res->full_name, traffic,
						  RDP_ENV_NCCL_MAX_HCAS, RDP_ENV_NCCL_MAX_HCAS);
			else
				r = rdp_diags_add(diags, RDP_DIAG_WARNING,
						  "%s:%u: warning: %s: NCCL_IB_HCA names %zu devices "
						  "on this node: NCCL uses only the first %d",
						  file, res->line, res->full_name, traffic,
						  RDP_ENV_NCCL_MAX_HCAS);
		}
		if (r < 0)
			return r;
	}
	return 0;
}
