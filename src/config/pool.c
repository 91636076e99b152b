/* SPDX-License-Identifier: MIT */
#include "pool.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "selector.h"

struct rdp_pools *rdp_pools_free(struct rdp_pools *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n; i++)
		rdp_free(p->v[i].devices);
	rdp_free(p->v);
	rdp_free(p);
	return NULL;
}

/* One warning per pair of pools that share devices, naming them (sorted indexes: a merge). */
static int warn_shared(struct rdp_diags *diags, const struct rdp_config *c,
		       const struct rdp_pool *a, const struct rdp_pool *b, const struct rdp_host *h)
{
	char names[512];
	size_t i = 0, j = 0, n = 0, len = 0;

	names[0] = '\0';
	while (i < a->n_devices && j < b->n_devices) {
		if (a->devices[i] < b->devices[j]) {
			i++;
		} else if (a->devices[i] > b->devices[j]) {
			j++;
		} else {
			if (len < sizeof(names) - 1) {
				snprintf(names + len, sizeof(names) - len, "%s%s", n ? ", " : "",
					 h->devices[a->devices[i]].name);
				len = strlen(names);
			}
			n++;
			i++;
			j++;
		}
	}
	if (!n)
		return 0;
	return rdp_diags_add(diags, RDP_DIAG_WARNING,
			     "%s:%u: warning: %s %s in both %s and %s: pods of both resources share "
			     "%s", c->path ? c->path : "config", b->res->line, names,
			     n == 1 ? "is" : "are", a->res->full_name, b->res->full_name,
			     n == 1 ? "it" : "them");
}

int rdp_pools_build(const struct rdp_config *c, const struct rdp_host *h, struct rdp_pools **ret,
		    struct rdp_diags *diags)
{
	struct rdp_pools *p;
	int r;

	p = rdp_calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	if (c->n_resources) {
		p->v = rdp_calloc(c->n_resources, sizeof(*p->v));
		if (!p->v)
			goto nomem;
	}
	p->n = c->n_resources;
	for (size_t i = 0; i < c->n_resources; i++) {
		struct rdp_pool *pool = &p->v[i];
		const struct rdp_resource *res = &c->resources[i];

		pool->res = res;
		pool->numa_node = -1;
		for (size_t j = 0; j < h->n_devices; j++) {
			const struct rdp_device *d = &h->devices[j];

			if (!rdp_selectors_match(&res->sel, d, NULL))
				continue;
			if (!pool->devices) {
				pool->devices = rdp_calloc(h->n_devices, sizeof(size_t));
				if (!pool->devices)
					goto nomem;
				pool->numa_node = d->numa_node;
			} else if (pool->numa_node != d->numa_node) {
				pool->numa_node = -1;
			}
			pool->devices[pool->n_devices++] = j;
		}
		for (size_t k = 0; k < i && diags; k++) {
			r = warn_shared(diags, c, &p->v[k], pool, h);
			if (r < 0)
				goto fail;
		}
		if (pool->n_devices == 0 && diags) {
			r = rdp_diags_add(diags, RDP_DIAG_WARNING,
					  "%s:%u: warning: %s selects no device on this node: it is "
					  "advertised with 0 units", c->path ? c->path : "config",
					  res->line, res->full_name);
			if (r < 0)
				goto fail;
		}
	}
	*ret = p;
	return 0;
nomem:
	r = -ENOMEM;
fail:
	rdp_pools_free(p);
	return r;
}
