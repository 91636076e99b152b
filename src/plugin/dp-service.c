/* SPDX-License-Identifier: MIT */
#include "dp-service.h"

#include <errno.h>
#include <protobuf-c/protobuf-c.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdi.h"
#include "deviceplugin.pb-c.h"
#include "devnode.h"
#include "macro.h"
#include "memlock.h"
#include "methods.h"
#include "pb.h"
#include "prefer.h"
#include "quote.h"
#include "sysfs.h"


static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		rdp_free(v[i]);
	rdp_free(v);
}

void rdp_dp_state_done(struct rdp_dp_state *s)
{
	if (!s)
		return;
	strv_free(s->specs, s->n_specs);
	strv_free(s->spec_owners, s->n_specs);
	rdp_free(s->spec_devnums);
	for (size_t i = 0; s->unusable && i < s->n_unusable; i++) {
		rdp_free(s->unusable[i].device);
		rdp_free(s->unusable[i].reason);
	}
	rdp_free(s->unusable);
	rdp_free(s->devices);
	for (size_t i = 0; s->unit_v && i < s->n_unit_v; i++) {
		rdp_free(s->unit_v[i].specs);
		rdp_topo_dev_done(&s->unit_v[i].place);
		rdp_env_done(&s->unit_v[i].env);
	}
	rdp_free(s->unit_v);
	rdp_env_done(&s->env_const);
	rdp_env_done(&s->env_alloc);
	memset(s, 0, sizeof(*s));
	s->numa_node = -1;
	s->rdma_cm_spec = SIZE_MAX;
}

/* A char device on its way into a state: pointers into the host model until copied. */
struct spec_src {
	const char *path;
	dev_t devnum;
	const char *owner;
	size_t order; /* position of discovery, so that the first owner of a path wins */
};

static int spec_src_cmp(const void *a, const void *b)
{
	const struct spec_src *x = a, *y = b;
	int c = strcmp(x->path, y->path);

	return c ? c : (x->order > y->order) - (x->order < y->order);
}

static int cmp_unit(const void *a, const void *b)
{
	return strcmp(((const struct rdp_dp_unit *)a)->id, ((const struct rdp_dp_unit *)b)->id);
}

static int cmp_str_sort(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_str_ptr(const void *key, const void *e)
{
	return strcmp(key, *(char *const *)e);
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return (x > y) - (x < y);
}

/*
 * One unit per usable device of the pool, its char devices found in s->specs. Shared
 * resources use them for CDI names; exclusive ones also get each unit's place in the PCIe
 * tree and its variables alone.
 */
static int build_units(const struct rdp_host *h, const struct rdp_pool *p, struct rdp_dp_state *s)
{
	bool exclusive = s->mode == RDP_MODE_EXCLUSIVE;

	s->unit_v = rdp_calloc(s->n_usable + 1, sizeof(*s->unit_v));
	if (!s->unit_v)
		return -ENOMEM;
	for (size_t i = 0; i < p->n_devices; i++) {
		const struct rdp_device *d = &h->devices[p->devices[i]];
		struct rdp_dp_unit *u = &s->unit_v[s->n_unit_v];

		if (!rdp_device_is_usable(d))
			continue;
		rdp_device_unit_id(d, u->id, sizeof(u->id));
		snprintf(u->device, sizeof(u->device), "%s", d->name);
		u->healthy = rdp_device_is_active(d);
		u->numa_node = d->numa_node >= 0 ? d->numa_node : -1;
		s->n_unit_v++;
		if (exclusive && rdp_topo_dev_of_device(d, &u->place) < 0)
			return -ENOMEM;
		if (exclusive && p->res &&
		    rdp_env_build(p->res, h, &p->devices[i], 1, RDP_ENV_GROUP_PER_ALLOCATION,
				  &u->env) < 0)
			return -ENOMEM;
		u->specs = rdp_calloc(d->n_char_devices + 1, sizeof(*u->specs));
		if (!u->specs)
			return -ENOMEM;
		for (size_t j = 0; j < d->n_char_devices; j++) {
			char **f = bsearch(d->char_devices[j], s->specs, s->n_specs,
					   sizeof(*s->specs), cmp_str_ptr);

			if (f)
				u->specs[u->n_specs++] = (size_t)(f - s->specs);
		}
		qsort(u->specs, u->n_specs, sizeof(*u->specs), cmp_size);
	}
	qsort(s->unit_v, s->n_unit_v, sizeof(*s->unit_v), cmp_unit);
	/*
	 * Two devices of one PCI function without an SF number (rare: a driver with several
	 * ibdevs per function) would share an ID: each gets its ibdev name appended.
	 */
	bool renamed = false;

	for (size_t i = 0, j; i < s->n_unit_v; i = j) {
		for (j = i + 1; j < s->n_unit_v && strcmp(s->unit_v[i].id, s->unit_v[j].id) == 0;)
			j++;
		for (size_t k = i; j - i > 1 && k < j; k++) {
			char id[RDP_UNIT_ID_MAX];

			snprintf(id, sizeof(id), "%.*s-%.*s", RDP_PCI_ADDR_MAX - 1, s->unit_v[k].id,
				 RDP_IBDEV_NAME_MAX - 1, s->unit_v[k].device);
			memcpy(s->unit_v[k].id, id, sizeof(id));
			renamed = true;
		}
	}
	if (renamed)
		qsort(s->unit_v, s->n_unit_v, sizeof(*s->unit_v), cmp_unit);
	return 0;
}

/*
 * The workload environment: the constants; a shared pool's per-allocation variables over
 * its usable devices in pool order (exclusive units have theirs: build_units()).
 */
static int build_env(const struct rdp_host *h, const struct rdp_pool *p, struct rdp_dp_state *s)
{
	_cleanup_free_ size_t *idx = NULL;
	size_t n = 0;
	int r;

	if (!p->res || !p->res->full_name)
		return 0;
	r = rdp_env_build(p->res, h, NULL, 0, RDP_ENV_GROUP_CONSTANTS, &s->env_const);
	if (r < 0)
		return r;
	if (s->mode == RDP_MODE_EXCLUSIVE) {
		s->env_omitted = s->n_unit_v ? ~0u : 0;
		for (size_t i = 0; i < s->n_unit_v; i++)
			s->env_omitted &= s->unit_v[i].env.omitted;
		return 0;
	}
	if (s->n_usable == 0)
		return 0;
	r = rdp_env_pool_devices(h, p, &idx, &n);
	if (r < 0)
		return r;
	r = rdp_env_build(p->res, h, idx, n, RDP_ENV_GROUP_PER_ALLOCATION, &s->env_alloc);
	s->env_omitted = s->env_alloc.omitted;
	return r;
}

int rdp_dp_state_build(const struct rdp_host *h, const struct rdp_pool *p, struct rdp_dp_state *ret)
{
	struct rdp_dp_state s = {.numa_node = -1, .rdma_cm_spec = SIZE_MAX};
	_cleanup_free_ struct spec_src *src = NULL;
	size_t cap = 1, names_len = 1, n_src = 0;
	int numa = -2; /* -2: no device seen yet */

	for (size_t i = 0; i < p->n_devices; i++) {
		const struct rdp_device *d = &h->devices[p->devices[i]];

		cap += d->n_char_devices;
		names_len += strlen(d->name) + 1;
	}
	src = rdp_calloc(cap, sizeof(*src));
	s.specs = rdp_calloc(cap, sizeof(char *));
	s.spec_owners = rdp_calloc(cap, sizeof(char *));
	s.spec_devnums = rdp_calloc(cap, sizeof(dev_t));
	s.unusable = rdp_calloc(p->n_devices + 1, sizeof(*s.unusable));
	s.devices = rdp_malloc(names_len);
	if (!src || !s.specs || !s.spec_owners || !s.spec_devnums || !s.unusable || !s.devices)
		goto oom;
	s.devices[0] = '\0';
	for (size_t i = 0; i < p->n_devices; i++) {
		const struct rdp_device *d = &h->devices[p->devices[i]];

		if (i)
			strcat(s.devices, ",");
		strcat(s.devices, d->name);
		s.n_devices++;
		if (numa == -2)
			numa = d->numa_node;
		else if (numa != d->numa_node)
			numa = -1;
		if (!rdp_device_is_usable(d)) {
			struct rdp_dp_unusable *u = &s.unusable[s.n_unusable];

			u->device = rdp_strdup(d->name);
			u->reason = rdp_strdup(d->unusable_reason[0] ? d->unusable_reason
								     : rdp_usability_name(d->usability));
			s.n_unusable++;
			if (!u->device || !u->reason)
				goto oom;
			continue;
		}
		s.n_usable++;
		if (rdp_device_is_active(d))
			s.n_active++;
		for (size_t j = 0; j < d->n_char_devices; j++, n_src++)
			src[n_src] = (struct spec_src){.path = d->char_devices[j],
						       .devnum = rdp_device_char_devnum(d, j),
						       .owner = d->name,
						       .order = n_src};
	}
	/* rdma_cm once per container, and only for a pool that has something to hand out. */
	if (s.n_usable > 0 && h->rdma_cm[0]) {
		src[n_src] = (struct spec_src){
			.path = h->rdma_cm, .devnum = h->rdma_cm_devnum, .owner = "rdma_cm",
			.order = n_src};
		n_src++;
	}
	if (n_src > 1)
		qsort(src, n_src, sizeof(*src), spec_src_cmp);
	for (size_t i = 0; i < n_src; i++) {
		if (i > 0 && strcmp(src[i].path, src[i - 1].path) == 0)
			continue;
		s.specs[s.n_specs] = rdp_strdup(src[i].path);
		s.spec_owners[s.n_specs] = rdp_strdup(src[i].owner);
		s.spec_devnums[s.n_specs] = src[i].devnum;
		s.n_specs++;
		if (!s.specs[s.n_specs - 1] || !s.spec_owners[s.n_specs - 1])
			goto oom;
		if (src[i].path == h->rdma_cm)
			s.rdma_cm_spec = s.n_specs - 1;
	}
	s.mode = p->res ? p->res->mode : RDP_MODE_SHARED;
	s.memlock = p->res ? p->res->memlock : RDP_MEMLOCK_UNLIMITED;
	s.healthy = s.n_active > 0;
	if (build_units(h, p, &s) < 0 || build_env(h, p, &s) < 0)
		goto oom;
	if (s.mode == RDP_MODE_EXCLUSIVE) {
		s.units = (unsigned int)s.n_unit_v;
	} else {
		s.units = s.n_devices > 0 ? p->res->rdma_hca_max : 0;
		/* Like k8s-rdma-shared-dev-plugin: no TopologyInfo unless asked (config.h). */
		s.numa_node = s.n_devices > 0 && numa >= 0 && p->res && p->res->report_topology
				      ? numa
				      : -1;
	}
	rdp_dp_state_done(ret);
	*ret = s;
	return 0;
oom:
	rdp_dp_state_done(&s);
	return -ENOMEM;
}

size_t rdp_dp_state_healthy_units(const struct rdp_dp_state *s)
{
	size_t n = 0;

	if (s->mode == RDP_MODE_SHARED)
		return s->healthy ? s->units : 0;
	for (size_t i = 0; i < s->n_unit_v; i++)
		n += s->unit_v[i].healthy;
	return n;
}

int rdp_dp_state_cdi_render(const struct rdp_dp_state *s, const char *class,
			    const char *hook_path, char **ret_json)
{
	_cleanup_free_ struct rdp_cdi_device *devs = rdp_calloc(s->n_unit_v + 1, sizeof(*devs));
	_cleanup_free_ struct rdp_cdi_node *nodes = NULL;
	_cleanup_free_ const char **env = NULL;
	struct rdp_cdi_node cm = {0};
	struct rdp_cdi_spec spec = {.class = class, .devices = devs, .hook_path = hook_path,
				    .memlock = s->memlock};
	size_t n_nodes = 0, used = 0, n_env = s->env_const.n;

	if (!devs)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_unit_v; i++)
		n_nodes += s->unit_v[i].n_specs;
	nodes = rdp_calloc(n_nodes + 1, sizeof(*nodes));
	if (s->mode == RDP_MODE_SHARED)
		n_env += s->env_alloc.n;
	env = rdp_calloc(n_env + 1, sizeof(*env));
	if (!nodes || !env)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_unit_v; i++) {
		const struct rdp_dp_unit *u = &s->unit_v[i];
		struct rdp_cdi_device *d = &devs[spec.n_devices];

		if (!u->n_specs)
			continue; /* nothing to hand out: no device (CDI rejects empty edits) */
		d->name = u->id;
		d->nodes = nodes + used;
		for (size_t j = 0; j < u->n_specs; j++, used++)
			nodes[used] = (struct rdp_cdi_node){.path = s->specs[u->specs[j]],
							    .host_path = s->specs[u->specs[j]]};
		d->n_nodes = u->n_specs;
		spec.n_devices++;
	}
	if (s->rdma_cm_spec != SIZE_MAX) {
		cm = (struct rdp_cdi_node){.path = s->specs[s->rdma_cm_spec],
					   .host_path = s->specs[s->rdma_cm_spec]};
		spec.nodes = &cm;
		spec.n_nodes = 1;
	}
	if (s->mode == RDP_MODE_SHARED)
		for (size_t i = 0; i < s->env_alloc.n; i++)
			env[spec.n_env++] = s->env_alloc.kv[i];
	for (size_t i = 0; i < s->env_const.n; i++)
		env[spec.n_env++] = s->env_const.kv[i];
	spec.env = env;
	return rdp_cdi_render(&spec, ret_json);
}

bool rdp_dp_state_same_snapshot(const struct rdp_dp_state *a, const struct rdp_dp_state *b)
{
	if (a->mode != b->mode || a->units != b->units)
		return false;
	if (a->mode == RDP_MODE_SHARED)
		return a->healthy == b->healthy && a->numa_node == b->numa_node;
	for (size_t i = 0; i < a->n_unit_v; i++)
		if (strcmp(a->unit_v[i].id, b->unit_v[i].id) != 0 ||
		    a->unit_v[i].healthy != b->unit_v[i].healthy ||
		    a->unit_v[i].numa_node != b->unit_v[i].numa_node)
			return false;
	return true;
}

static dev_t spec_devnum(const struct rdp_dp_state *s, size_t i)
{
	return s->spec_devnums ? s->spec_devnums[i] : 0;
}

bool rdp_dp_state_same_specs(const struct rdp_dp_state *a, const struct rdp_dp_state *b)
{
	if (a->n_specs != b->n_specs)
		return false;
	for (size_t i = 0; i < a->n_specs; i++)
		if (strcmp(a->specs[i], b->specs[i]) != 0 || spec_devnum(a, i) != spec_devnum(b, i))
			return false;
	/* Exclusive: which unit owns which node matters too (numbers move between devices). */
	if (a->mode != b->mode || a->n_unit_v != b->n_unit_v)
		return false;
	for (size_t i = 0; i < a->n_unit_v; i++) {
		const struct rdp_dp_unit *x = &a->unit_v[i], *y = &b->unit_v[i];

		if (strcmp(x->id, y->id) != 0 || x->n_specs != y->n_specs ||
		    (x->n_specs && memcmp(x->specs, y->specs, x->n_specs * sizeof(*x->specs))))
			return false;
	}
	return true;
}

static bool same_kv(const struct rdp_env *a, const struct rdp_env *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++)
		if (strcmp(a->kv[i], b->kv[i]) != 0)
			return false;
	return true;
}

bool rdp_dp_state_same_env(const struct rdp_dp_state *a, const struct rdp_dp_state *b)
{
	if (!same_kv(&a->env_const, &b->env_const) || !same_kv(&a->env_alloc, &b->env_alloc) ||
	    a->n_unit_v != b->n_unit_v || a->memlock != b->memlock)
		return false;
	for (size_t i = 0; i < a->n_unit_v; i++)
		if (!same_kv(&a->unit_v[i].env, &b->unit_v[i].env))
			return false;
	return true;
}

static const struct rdp_dp_unusable *find_unusable(const struct rdp_dp_state *s,
						   const char *device)
{
	for (size_t i = 0; i < s->n_unusable; i++)
		if (strcmp(s->unusable[i].device, device) == 0)
			return &s->unusable[i];
	return NULL;
}

bool rdp_dp_state_same_unusable(const struct rdp_dp_state *a, const struct rdp_dp_state *b)
{
	if (a->n_unusable != b->n_unusable)
		return false;
	for (size_t i = 0; i < a->n_unusable; i++)
		if (strcmp(a->unusable[i].device, b->unusable[i].device) != 0 ||
		    strcmp(a->unusable[i].reason, b->unusable[i].reason) != 0)
			return false;
	return true;
}

void rdp_dp_unusable_diff(const struct rdp_dp_state *old, const struct rdp_dp_state *new,
			  rdp_dp_unusable_cb cb, void *userdata)
{
	for (size_t i = 0; i < old->n_unusable; i++)
		if (!find_unusable(new, old->unusable[i].device))
			cb(RDP_DP_UNUSABLE_CLEARED, old->unusable[i].device,
			   old->unusable[i].reason, userdata);
	for (size_t i = 0; i < new->n_unusable; i++) {
		const struct rdp_dp_unusable *o = find_unusable(old, new->unusable[i].device);

		if (!o)
			cb(RDP_DP_UNUSABLE_APPEARED, new->unusable[i].device,
			   new->unusable[i].reason, userdata);
		else if (strcmp(o->reason, new->unusable[i].reason) != 0)
			cb(RDP_DP_UNUSABLE_CHANGED, new->unusable[i].device,
			   new->unusable[i].reason, userdata);
	}
}

/* Exclusive: a Device per unit, with its own health and NUMA node. */
static int snapshot_pack_units(const struct rdp_dp_state *s, uint8_t **ret, size_t *ret_len)
{
	V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
	size_t n = s->n_unit_v;
	_cleanup_free_ V1beta1__Device *devs = rdp_calloc(n + 1, sizeof(*devs));
	_cleanup_free_ V1beta1__Device **ptrs = rdp_calloc(n + 1, sizeof(*ptrs));
	_cleanup_free_ V1beta1__TopologyInfo *topos = rdp_calloc(n + 1, sizeof(*topos));
	_cleanup_free_ V1beta1__NUMANode *nodes = rdp_calloc(n + 1, sizeof(*nodes));
	_cleanup_free_ V1beta1__NUMANode **nptrs = rdp_calloc(n + 1, sizeof(*nptrs));

	if (!devs || !ptrs || !topos || !nodes || !nptrs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct rdp_dp_unit *u = &s->unit_v[i];

		v1beta1__device__init(&devs[i]);
		devs[i].id = (char *)u->id;
		devs[i].health = (char *)(u->healthy ? RDP_DP_HEALTHY : RDP_DP_UNHEALTHY);
		if (u->numa_node >= 0) {
			v1beta1__numanode__init(&nodes[i]);
			nodes[i].id = u->numa_node;
			nptrs[i] = &nodes[i];
			v1beta1__topology_info__init(&topos[i]);
			topos[i].n_nodes = 1;
			topos[i].nodes = &nptrs[i];
			devs[i].topology = &topos[i];
		}
		ptrs[i] = &devs[i];
	}
	resp.n_devices = n;
	resp.devices = ptrs;
	return rdp_pb_pack(&resp.base, ret, ret_len);
}

int rdp_dp_snapshot_pack(const struct rdp_dp_state *s, uint8_t **ret, size_t *ret_len)
{
	V1beta1__ListAndWatchResponse resp = V1BETA1__LIST_AND_WATCH_RESPONSE__INIT;
	V1beta1__TopologyInfo topo = V1BETA1__TOPOLOGY_INFO__INIT;
	V1beta1__NUMANode node = V1BETA1__NUMANODE__INIT;
	V1beta1__NUMANode *nodes[1] = {&node};
	_cleanup_free_ V1beta1__Device *devs = NULL;
	_cleanup_free_ V1beta1__Device **ptrs = NULL;
	_cleanup_free_ char *ids = NULL;
	const size_t id_size = 11; /* "4294967295" + NUL */

	if (s->units > 0) {
		devs = rdp_calloc(s->units, sizeof(*devs));
		ptrs = rdp_calloc(s->units, sizeof(*ptrs));
		ids = rdp_calloc(s->units, id_size);
		if (!devs || !ptrs || !ids)
			return -ENOMEM;
	}
	node.id = s->numa_node;
	topo.n_nodes = 1;
	topo.nodes = nodes;
	if (s->mode == RDP_MODE_EXCLUSIVE)
		return snapshot_pack_units(s, ret, ret_len);
	for (unsigned int i = 0; i < s->units; i++) {
		char *id = ids + (size_t)i * id_size;

		v1beta1__device__init(&devs[i]);
		snprintf(id, id_size, "%u", i);
		devs[i].id = id;
		devs[i].health = (char *)(s->healthy ? RDP_DP_HEALTHY : RDP_DP_UNHEALTHY);
		devs[i].topology = s->numa_node >= 0 ? &topo : NULL;
		ptrs[i] = &devs[i];
	}
	resp.n_devices = s->units;
	resp.devices = ptrs;
	return rdp_pb_pack(&resp.base, ret, ret_len);
}

int rdp_dp_options_pack(enum rdp_resource_mode mode, uint8_t **ret, size_t *ret_len)
{
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

	o.pre_start_required = false;
	o.get_preferred_allocation_available = mode == RDP_MODE_EXCLUSIVE;
	return rdp_pb_pack(&o.base, ret, ret_len);
}

/* A bounded message buffer for error texts. */
struct msgbuf {
	char s[1024];
	size_t n;
};

static void _printf_(2, 3) mb_add(struct msgbuf *b, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (b->n >= sizeof(b->s) - 1)
		return;
	va_start(ap, fmt);
	r = vsnprintf(b->s + b->n, sizeof(b->s) - b->n, fmt, ap);
	va_end(ap);
	if (r > 0)
		b->n += (size_t)r;
	if (b->n >= sizeof(b->s))
		b->n = sizeof(b->s) - 1;
}

/* Quotes a peer-supplied ID for a message: printable ASCII only, at most 64 bytes shown. */
static void mb_add_id(struct msgbuf *b, const char *id)
{
	char q[72];

	mb_add(b, "\"%s\"", rdp_printable(id, 64, q, sizeof(q)));
}

static int mb_error(struct msgbuf *b, char **ret_error, int r)
{
	*ret_error = rdp_strdup(b->s);
	return *ret_error ? r : -ENOMEM;
}

/* The unit index of a canonical decimal ID ("0".."units-1"), or -1. */
static long unit_index(const char *id, unsigned int units)
{
	unsigned long v = 0;
	size_t n = strlen(id);

	if (n == 0 || n > 10 || (n > 1 && id[0] == '0'))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (id[i] < '0' || id[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(id[i] - '0');
	}
	return v < units ? (long)v : -1;
}

/* Checks the unit IDs of container request i; 0, -EINVAL/-E2BIG with *ret_error, -ENOMEM. */
static int check_ids(const struct rdp_dp_state *s, size_t ci, char **ids, size_t n,
		     long *max_unit, char **ret_error)
{
	_cleanup_free_ unsigned char *seen = NULL;
	struct msgbuf unknown = {.n = 0}, dup = {.n = 0}, b = {.n = 0};
	size_t n_unknown = 0, n_dup = 0;

	if (n == 0) {
		mb_add(&b, "container request %zu names no device IDs", ci);
		return mb_error(&b, ret_error, -EINVAL);
	}
	if (n > s->units) {
		mb_add(&b, "container request %zu asks for %zu units, the resource has %u", ci, n,
		       s->units);
		return mb_error(&b, ret_error, n > RDP_DP_MAX_IDS_PER_REQUEST ? -E2BIG : -EINVAL);
	}
	seen = rdp_calloc(s->units / 8 + 1, 1);
	if (!seen)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		long u = unit_index(ids[i], s->units);

		if (u < 0) {
			if (n_unknown < RDP_DP_ERROR_IDS_SHOWN) {
				mb_add_id(&unknown, ids[i]);
				mb_add(&unknown, ", ");
			}
			n_unknown++;
		} else if (seen[u / 8] & (1u << (u % 8))) {
			if (n_dup < RDP_DP_ERROR_IDS_SHOWN) {
				mb_add_id(&dup, ids[i]);
				mb_add(&dup, ", ");
			}
			n_dup++;
		} else {
			seen[u / 8] |= (unsigned char)(1u << (u % 8));
			if (u > *max_unit)
				*max_unit = u;
		}
	}
	if (!n_unknown && !n_dup)
		return 0;
	mb_add(&b, "container request %zu:", ci);
	if (n_unknown) {
		unknown.s[unknown.n >= 2 ? unknown.n - 2 : 0] = '\0';
		mb_add(&b, " unknown device IDs %s%s", unknown.s,
		       n_unknown > RDP_DP_ERROR_IDS_SHOWN ? ", ..." : "");
		if (s->units)
			mb_add(&b, " (the resource has units \"0\"..\"%u\")", s->units - 1);
		else
			mb_add(&b, " (the resource has no units)");
		if (n_dup)
			mb_add(&b, ";");
	}
	if (n_dup) {
		dup.s[dup.n >= 2 ? dup.n - 2 : 0] = '\0';
		mb_add(&b, " duplicate device IDs %s%s", dup.s,
		       n_dup > RDP_DP_ERROR_IDS_SHOWN ? ", ..." : "");
	}
	return mb_error(&b, ret_error, -EINVAL);
}

/*
 * The bytes protobuf-c may allocate to unpack one Allocate or GetPreferredAllocation request
 * (the IDs, their pointer arrays, the per-container messages). kubelet's requests name a few
 * hundred IDs at most, a few KiB unpacked; 512 KiB holds about 10000 short IDs (with
 * protobuf-c's scan slabs, about 48 bytes per ID during the unpack). A request that
 * needs more is refused before it is unpacked further (RESOURCE_EXHAUSTED, as grpc-go refuses
 * an oversized message): it is well-formed, only beyond what this server holds for one call.
 */
#define RDP_DP_UNPACK_BUDGET (512u << 10)

/* -E2BIG with *ret_error when a request holds more containers than this server accepts. */
static int too_many_requests(size_t n, char **ret_error)
{
	struct msgbuf b = {.n = 0};

	if (n <= RDP_DP_MAX_CONTAINER_REQUESTS)
		return 0;
	mb_add(&b, "%zu container requests, at most %d are accepted", n,
	       RDP_DP_MAX_CONTAINER_REQUESTS);
	return mb_error(&b, ret_error, -E2BIG);
}

/* Why an unpack failed: budget (-ENOBUFS with *ret_error), memory, or a malformed request. */
static int unpack_error(const struct rdp_pb_arena *a, char **ret_error)
{
	int r = rdp_pb_arena_error(a);

	if (r == -ENOBUFS) {
		*ret_error = rdp_asprintf("the request unpacks to more than %u bytes, the limit of "
					  "this server (too many IDs)",
					  RDP_DP_UNPACK_BUDGET);
		return *ret_error ? -ENOBUFS : -ENOMEM;
	}
	return r < 0 ? r : -EBADMSG;
}

/* What an Allocate answer depends on, once its request was checked. */
struct alloc_req {
	size_t n_containers;
	size_t n_ids; /* in all container requests */
	long max_unit; /* shared: highest unit index asked for */
	/*
	 * Exclusive: the unit IDs, container after container (per[i] of container i), copied:
	 * an answer that waits for a rescan is checked again against the new units.
	 */
	char **ids;
	size_t *per;
};

static void alloc_req_done(struct alloc_req *a)
{
	strv_free(a->ids, a->ids ? a->n_ids : 0);
	rdp_free(a->per);
	a->ids = NULL;
	a->per = NULL;
}

static int cmp_unit_key(const void *key, const void *e)
{
	return strcmp(key, ((const struct rdp_dp_unit *)e)->id);
}

static const struct rdp_dp_unit *find_unit(const struct rdp_dp_state *s, const char *id)
{
	return s->n_unit_v ? bsearch(id, s->unit_v, s->n_unit_v, sizeof(*s->unit_v), cmp_unit_key)
			   : NULL;
}

/* Names up to RDP_DP_ERROR_IDS_SHOWN unit IDs of s, for "unknown ID" messages. */
static void mb_add_units(struct msgbuf *b, const struct rdp_dp_state *s)
{
	if (!s->n_unit_v) {
		mb_add(b, " (the resource has no units");
	} else {
		mb_add(b, " (the resource's units are ");
		for (size_t i = 0; i < s->n_unit_v && i < RDP_DP_ERROR_IDS_SHOWN; i++)
			mb_add(b, "%s\"%s\"", i ? ", " : "", s->unit_v[i].id);
		if (s->n_unit_v > RDP_DP_ERROR_IDS_SHOWN)
			mb_add(b, ", ... (%zu in all)", s->n_unit_v);
	}
	for (size_t i = 0; i < s->n_unusable; i++)
		mb_add(b, "%s %s is unusable: %s", i ? ";" : ";", s->unusable[i].device,
		       s->unusable[i].reason);
	mb_add(b, ")");
}

/* One list of offending IDs in an error message. */
struct idlist {
	struct msgbuf b;
	size_t n;
};

static void idlist_add(struct idlist *l, const char *id, const char *why)
{
	if (l->n < RDP_DP_ERROR_IDS_SHOWN) {
		mb_add(&l->b, "%s", l->n ? ", " : "");
		mb_add_id(&l->b, id);
		if (why)
			mb_add(&l->b, " (%s)", why);
	}
	l->n++;
}

/* " <what> <list>[, ...]" when l has entries; sep before it when something came before. */
static void idlist_put(struct msgbuf *b, const struct idlist *l, const char *what, bool *first)
{
	if (!l->n)
		return;
	mb_add(b, "%s %s %s%s", *first ? "" : ";", what, l->b.s,
	       l->n > RDP_DP_ERROR_IDS_SHOWN ? ", ..." : "");
	*first = false;
}

/*
 * Exclusive: checks the unit IDs of container request ci: known, once each, healthy.
 * seen has room for s->n_unit_v flags (cleared here). 0, -EINVAL with *ret_error, -ENOMEM.
 */
static int check_unit_ids(const struct rdp_dp_state *s, size_t ci, char *const *ids, size_t n,
			  unsigned char *seen, char **ret_error)
{
	struct idlist unknown = {.n = 0}, dup = {.n = 0}, sick = {.n = 0};
	struct msgbuf b = {.n = 0};
	bool first = true;

	if (n == 0) {
		mb_add(&b, "container request %zu names no device IDs", ci);
		return mb_error(&b, ret_error, -EINVAL);
	}
	memset(seen, 0, s->n_unit_v + 1);
	for (size_t i = 0; i < n; i++) {
		const struct rdp_dp_unit *u = find_unit(s, ids[i]);

		if (!u) {
			idlist_add(&unknown, ids[i], NULL);
		} else if (seen[u - s->unit_v]) {
			idlist_add(&dup, ids[i], NULL);
		} else {
			seen[u - s->unit_v] = 1;
			if (!u->healthy) {
				char why[RDP_IBDEV_NAME_MAX + 24];

				snprintf(why, sizeof(why), "%s: no active port", u->device);
				idlist_add(&sick, ids[i], why);
			}
		}
	}
	if (!unknown.n && !dup.n && !sick.n)
		return 0;
	mb_add(&b, "container request %zu:", ci);
	idlist_put(&b, &unknown, "unknown device IDs", &first);
	if (unknown.n)
		mb_add_units(&b, s);
	idlist_put(&b, &dup, "duplicate device IDs", &first);
	idlist_put(&b, &sick, "unhealthy device IDs", &first);
	return mb_error(&b, ret_error, -EINVAL);
}

/* "id=device" for each of ids, containers apart by "; " (per NULL: one container). */
static void describe_units(const struct rdp_dp_state *s, char *const *ids, size_t n,
			   const size_t *per, size_t n_per, struct msgbuf *b)
{
	size_t off = 0;

	for (size_t c = 0; c < (per ? n_per : 1); c++) {
		size_t k = per ? per[c] : n;

		if (c)
			mb_add(b, "; ");
		for (size_t j = 0; j < k && off < n; j++, off++) {
			const struct rdp_dp_unit *u = find_unit(s, ids[off]);

			mb_add(b, "%s%s=%s", j ? " " : "", ids[off], u ? u->device : "?");
		}
	}
	if (b->n >= sizeof(b->s) - 1) /* cut: say so */
		memcpy(b->s + sizeof(b->s) - 5, " ...", 5);
}

/* Exclusive: checks every container of a and keeps its IDs. Errors as check_unit_ids(). */
static int check_alloc_units(const struct rdp_dp_state *s, const struct alloc_req *a,
			     char **ret_error)
{
	_cleanup_free_ unsigned char *seen = rdp_calloc(s->n_unit_v + 1, 1);
	size_t off = 0;
	int k;

	if (!seen)
		return -ENOMEM;
	for (size_t i = 0; i < a->n_containers; i++) {
		k = check_unit_ids(s, i, a->ids + off, a->per[i], seen, ret_error);
		if (k < 0)
			return k;
		off += a->per[i];
	}
	return 0;
}

/* Unpacks and checks an AllocateRequest against s. Errors as rdp_dp_allocate(). */
static int allocate_parse(const struct rdp_dp_state *s, const uint8_t *req, size_t len,
			  struct alloc_req *ret, char **ret_error)
{
	_cleanup_(rdp_pb_arena_done) struct rdp_pb_arena arena =
		RDP_PB_ARENA_INIT(RDP_DP_UNPACK_BUDGET);
	V1beta1__AllocateRequest *r;
	struct msgbuf b = {.n = 0};
	struct alloc_req a = {.max_unit = -1};
	int k = 0;

	*ret_error = NULL;
	r = v1beta1__allocate_request__unpack(rdp_pb_arena_allocator(&arena), len, req);
	if (!r)
		return unpack_error(&arena, ret_error);
	k = too_many_requests(r->n_container_requests, ret_error);
	if (k < 0)
		goto out;
	for (size_t i = 0; i < r->n_container_requests; i++) {
		size_t n = r->container_requests[i]->n_devices_ids;

		if (s->mode == RDP_MODE_EXCLUSIVE && n > RDP_DP_MAX_IDS_PER_REQUEST) {
			mb_add(&b, "container request %zu: %zu device IDs, at most %d are accepted",
			       i, n, RDP_DP_MAX_IDS_PER_REQUEST);
			k = mb_error(&b, ret_error, -E2BIG);
			goto out;
		}
		if (s->mode == RDP_MODE_SHARED)
			k = check_ids(s, i, r->container_requests[i]->devices_ids, n, &a.max_unit,
				      ret_error);
		if (k < 0)
			goto out;
		a.n_ids += n;
	}
	a.n_containers = r->n_container_requests;
	if (s->mode == RDP_MODE_EXCLUSIVE) {
		a.ids = rdp_calloc(a.n_ids + 1, sizeof(*a.ids));
		a.per = rdp_calloc(a.n_containers + 1, sizeof(*a.per));
		k = a.ids && a.per ? 0 : -ENOMEM;
		for (size_t i = 0, off = 0; k >= 0 && i < a.n_containers; i++) {
			const V1beta1__ContainerAllocateRequest *c = r->container_requests[i];

			a.per[i] = c->n_devices_ids;
			for (size_t j = 0; k >= 0 && j < c->n_devices_ids; j++, off++)
				if (!(a.ids[off] = rdp_strdup(c->devices_ids[j])))
					k = -ENOMEM;
		}
		if (k >= 0)
			k = check_alloc_units(s, &a, ret_error);
		if (k < 0) {
			alloc_req_done(&a);
			goto out;
		}
	}
	*ret = a;
out:
	v1beta1__allocate_request__free_unpacked(r, rdp_pb_arena_allocator(&arena));
	return k;
}

/* -ENODEV with *ret_error naming the unusable devices when s has devices but none usable. */
static int check_usable(const struct rdp_dp_state *s, char **ret_error)
{
	struct msgbuf b = {.n = 0};

	if (s->n_devices == 0 || s->n_usable > 0)
		return 0;
	mb_add(&b, "no device of the pool is usable:");
	for (size_t i = 0; i < s->n_unusable; i++)
		mb_add(&b, "%s %s: %s", i ? ";" : "", s->unusable[i].device, s->unusable[i].reason);
	return mb_error(&b, ret_error, -ENODEV);
}

/*
 * The char devices of container ci of an exclusive request: its units' plus rdma_cm, as
 * indexes into s->specs, ascending and unique, into out (room for the units' specs + 1).
 */
static size_t container_specs(const struct rdp_dp_state *s, char *const *ids, size_t n,
			      size_t *out)
{
	size_t k = 0, m = 0;

	for (size_t i = 0; i < n; i++) {
		const struct rdp_dp_unit *u = find_unit(s, ids[i]);

		for (size_t j = 0; u && j < u->n_specs; j++)
			out[k++] = u->specs[j];
	}
	if (s->rdma_cm_spec != SIZE_MAX)
		out[k++] = s->rdma_cm_spec;
	if (k > 1)
		qsort(out, k, sizeof(*out), cmp_size);
	for (size_t i = 0; i < k; i++)
		if (i == 0 || out[i] != out[i - 1])
			out[m++] = out[i];
	return m;
}

static size_t specs_room(const struct rdp_dp_state *s, char *const *ids, size_t n);

/* One container's answer, before packing. */
struct cont {
	size_t *idx; /* device specs: indexes into s->specs; NULL with n_idx: all of them */
	size_t n_idx;
	bool all_specs;
	struct rdp_env env; /* "K=V" copies, split at '=' when packed */
	char **cdi; /* qualified CDI names */
	size_t n_cdi;
};

static void cont_done(struct cont *c)
{
	rdp_free(c->idx);
	rdp_env_done(&c->env);
	for (size_t i = 0; i < c->n_cdi; i++)
		rdp_free(c->cdi[i]);
	rdp_free(c->cdi);
	memset(c, 0, sizeof(*c));
}

static int cmp_unit_ptr(const void *a, const void *b)
{
	const struct rdp_dp_unit *x = *(const struct rdp_dp_unit *const *)a;
	const struct rdp_dp_unit *y = *(const struct rdp_dp_unit *const *)b;

	return (x > y) - (x < y); /* unit_v is in ID order */
}

/* Appends copies of src's variables to dst (room made). Returns 0 or -ENOMEM. */
static int env_append(struct rdp_env *dst, const struct rdp_env *src)
{
	char **v;

	if (!src->n)
		return 0;
	v = rdp_reallocarray(dst->kv, dst->n + src->n + 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	dst->kv = v;
	for (size_t i = 0; i < src->n; i++) {
		dst->kv[dst->n] = rdp_strdup(src->kv[i]);
		if (!dst->kv[dst->n])
			return -ENOMEM;
		dst->n++;
	}
	return 0;
}

/*
 * Container ci's answer: its units (shared: all), CDI names when cdi names all of them, else
 * device specs; the variables that go with either. *fallback set when cdi could not name
 * them. Returns 0 or -ENOMEM.
 */
static int build_cont(const struct rdp_dp_state *s, const struct rdp_dp_cdi *cdi,
		      char *const *ids, size_t n_ids, struct cont *c, bool *fallback)
{
	bool exclusive = s->mode == RDP_MODE_EXCLUSIVE;
	size_t n = exclusive ? n_ids : s->n_unit_v;
	_cleanup_free_ const struct rdp_dp_unit **us = rdp_calloc(n + 1, sizeof(*us));
	_cleanup_free_ struct rdp_env *parts = NULL;
	bool by_cdi = cdi != NULL;
	int r = 0;

	*fallback = false;
	if (!us)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		us[i] = exclusive ? find_unit(s, ids[i]) : &s->unit_v[i];
	/* The variables follow unit ID order, whatever order kubelet's set gave. */
	if (exclusive && n > 1)
		qsort(us, n, sizeof(*us), cmp_unit_ptr);
	for (size_t i = 0; by_cdi && i < n; i++)
		if (!us[i] || !bsearch(us[i]->id, cdi->ids, cdi->n_ids, sizeof(*cdi->ids),
				       cmp_str_ptr)) {
			by_cdi = false;
			*fallback = true;
		}
	if (by_cdi) {
		c->cdi = rdp_calloc(n + 1, sizeof(*c->cdi));
		if (!c->cdi)
			return -ENOMEM;
		for (; c->n_cdi < n; c->n_cdi++)
			if (!(c->cdi[c->n_cdi] = rdp_asprintf("%s=%s", cdi->kind, us[c->n_cdi]->id)))
				return -ENOMEM;
	} else if (exclusive) {
		c->idx = rdp_calloc(specs_room(s, ids, n_ids) + 1, sizeof(*c->idx));
		if (!c->idx)
			return -ENOMEM;
		c->n_idx = container_specs(s, ids, n_ids, c->idx);
	} else {
		c->all_specs = true;
	}
	if (exclusive) {
		/* Per allocation: merged from the units' own; constants unless the spec has them. */
		parts = rdp_calloc(n + 1, sizeof(*parts));
		if (!parts)
			return -ENOMEM;
		for (size_t i = 0; i < n; i++)
			if (us[i])
				parts[i] = us[i]->env; /* borrowed: not freed here */
		r = rdp_env_merge(parts, n, &c->env);
		if (r >= 0 && !by_cdi)
			r = env_append(&c->env, &s->env_const);
	} else if (!by_cdi) {
		r = env_append(&c->env, &s->env_alloc);
		if (r >= 0)
			r = env_append(&c->env, &s->env_const);
	}
	return r;
}

/* Room for the spec indexes of the units of one exclusive container request. */
static size_t specs_room(const struct rdp_dp_state *s, char *const *ids, size_t n)
{
	size_t room = 1;

	for (size_t i = 0; i < n; i++) {
		const struct rdp_dp_unit *u = find_unit(s, ids[i]);

		room += u ? u->n_specs : 0;
	}
	return room;
}

/*
 * The packed AllocateResponse: per container, every char device of the state (shared), or
 * those of its units and rdma_cm (exclusive), or CDI names (cdi), and its variables.
 * *ret_max_specs: the most device specs (or CDI names) one container got; *ret_fallback: the
 * containers cdi could not name.
 */
static int allocate_pack(const struct rdp_dp_state *s, const struct rdp_dp_cdi *cdi,
			 const struct alloc_req *a, uint8_t **ret, size_t *ret_len,
			 size_t *ret_max_specs, size_t *ret_fallback)
{
	V1beta1__AllocateResponse resp = V1BETA1__ALLOCATE_RESPONSE__INIT;
	size_t n_containers = a->n_containers, max_specs = 0, fallbacks = 0, n_env = 0, n_cdi = 0;
	size_t n_sptr = 0, used_env = 0, used_cdi = 0, used_sptr = 0;
	_cleanup_free_ V1beta1__ContainerAllocateResponse *cs = NULL;
	_cleanup_free_ V1beta1__ContainerAllocateResponse **cptrs = NULL;
	_cleanup_free_ V1beta1__DeviceSpec *specs = NULL;
	_cleanup_free_ V1beta1__DeviceSpec **sptrs = NULL;
	_cleanup_free_ V1beta1__ContainerAllocateResponse__EnvsEntry *envs = NULL, **eptrs = NULL;
	_cleanup_free_ V1beta1__CDIDevice *cdis = NULL, **dptrs = NULL;
	struct cont *cv = rdp_calloc(n_containers + 1, sizeof(*cv));
	int r = -ENOMEM;

	if (!cv)
		return -ENOMEM;
	for (size_t i = 0, off = 0; i < n_containers; i++) {
		bool fb;

		r = build_cont(s, cdi, a->ids ? a->ids + off : NULL, a->per ? a->per[i] : 0, &cv[i],
			       &fb);
		if (r < 0)
			goto out;
		fallbacks += fb;
		off += a->per ? a->per[i] : 0;
		n_env += cv[i].env.n;
		n_cdi += cv[i].n_cdi;
		n_sptr += cv[i].all_specs ? 0 : cv[i].n_idx;
	}
	r = -ENOMEM;
	cs = rdp_calloc(n_containers + 1, sizeof(*cs));
	cptrs = rdp_calloc(n_containers + 1, sizeof(*cptrs));
	specs = rdp_calloc(s->n_specs + 1, sizeof(*specs));
	sptrs = rdp_calloc(s->n_specs + n_sptr + 1, sizeof(*sptrs));
	envs = rdp_calloc(n_env + 1, sizeof(*envs));
	eptrs = rdp_calloc(n_env + 1, sizeof(*eptrs));
	cdis = rdp_calloc(n_cdi + 1, sizeof(*cdis));
	dptrs = rdp_calloc(n_cdi + 1, sizeof(*dptrs));
	if (!cs || !cptrs || !specs || !sptrs || !envs || !eptrs || !cdis || !dptrs)
		goto out;
	/* The messages share the DeviceSpec objects; the first n_specs pointers are all. */
	for (size_t i = 0; i < s->n_specs; i++) {
		v1beta1__device_spec__init(&specs[i]);
		specs[i].container_path = s->specs[i];
		specs[i].host_path = s->specs[i];
		specs[i].permissions = (char *)"rwm";
		sptrs[i] = &specs[i];
	}
	used_sptr = s->n_specs;
	for (size_t i = 0; i < n_containers; i++) {
		struct cont *c = &cv[i];

		v1beta1__container_allocate_response__init(&cs[i]);
		if (c->all_specs) {
			cs[i].n_devices = s->n_specs;
			cs[i].devices = sptrs;
		} else if (c->n_idx) {
			for (size_t j = 0; j < c->n_idx; j++)
				sptrs[used_sptr + j] = &specs[c->idx[j]];
			cs[i].n_devices = c->n_idx;
			cs[i].devices = sptrs + used_sptr;
			used_sptr += c->n_idx;
		}
		for (size_t j = 0; j < c->env.n; j++) {
			char *eq = strchr(c->env.kv[j], '=');

			v1beta1__container_allocate_response__envs_entry__init(&envs[used_env + j]);
			if (eq)
				*eq = '\0';
			envs[used_env + j].key = c->env.kv[j];
			envs[used_env + j].value = eq ? eq + 1 : (char *)"";
			eptrs[used_env + j] = &envs[used_env + j];
		}
		cs[i].n_envs = c->env.n;
		cs[i].envs = c->env.n ? eptrs + used_env : NULL;
		used_env += c->env.n;
		for (size_t j = 0; j < c->n_cdi; j++) {
			v1beta1__cdidevice__init(&cdis[used_cdi + j]);
			cdis[used_cdi + j].name = c->cdi[j];
			dptrs[used_cdi + j] = &cdis[used_cdi + j];
		}
		cs[i].n_cdi_devices = c->n_cdi;
		cs[i].cdi_devices = c->n_cdi ? dptrs + used_cdi : NULL;
		used_cdi += c->n_cdi;
		if (cs[i].n_devices + c->n_cdi > max_specs)
			max_specs = cs[i].n_devices + c->n_cdi;
		cptrs[i] = &cs[i];
	}
	resp.n_container_responses = n_containers;
	resp.container_responses = cptrs;
	*ret_max_specs = max_specs;
	if (ret_fallback)
		*ret_fallback = fallbacks;
	r = rdp_pb_pack(&resp.base, ret, ret_len);
out:
	for (size_t i = 0; i < n_containers; i++)
		cont_done(&cv[i]);
	rdp_free(cv);
	return r;
}

int rdp_dp_allocate_cdi(const struct rdp_dp_state *s, const struct rdp_dp_cdi *cdi,
			const uint8_t *req, size_t len, uint8_t **ret, size_t *ret_len,
			char **ret_error, size_t *ret_fallback)
{
	struct alloc_req a = {.n_containers = 0};
	size_t n_specs;
	int r;

	r = allocate_parse(s, req, len, &a, ret_error);
	if (r >= 0)
		r = check_usable(s, ret_error);
	if (r >= 0)
		r = allocate_pack(s, cdi, &a, ret, ret_len, &n_specs, ret_fallback);
	alloc_req_done(&a);
	return r;
}

int rdp_dp_allocate(const struct rdp_dp_state *s, const uint8_t *req, size_t len, uint8_t **ret,
		    size_t *ret_len, char **ret_error)
{
	return rdp_dp_allocate_cdi(s, NULL, req, len, ret, ret_len, ret_error, NULL);
}

struct pref_entry {
	const char *id;
	size_t pos; /* position in must ++ available */
};

static int pref_cmp(const void *a, const void *b)
{
	const struct pref_entry *x = a, *y = b;
	int c = strcmp(x->id, y->id);

	return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}

/* One container's preferred IDs: pointers into req, stored in out (room for n_must+n_avail). */
static int preferred_one(const V1beta1__ContainerPreferredAllocationRequest *c, size_t ci,
			 char **out, size_t *n_out, char **ret_error)
{
	size_t n = c->n_must_include_deviceids + c->n_available_deviceids, k = 0;
	_cleanup_free_ struct pref_entry *e = NULL;
	_cleanup_free_ size_t *group_of = NULL;
	_cleanup_free_ bool *taken = NULL;
	struct msgbuf b = {.n = 0};
	size_t want;

	if (c->allocation_size < 0) {
		mb_add(&b, "container request %zu: negative allocation_size %d", ci,
		       c->allocation_size);
		return mb_error(&b, ret_error, -EINVAL);
	}
	if (n > RDP_DP_MAX_IDS_PER_REQUEST) {
		mb_add(&b, "container request %zu: %zu device IDs, at most %d are accepted", ci, n,
		       RDP_DP_MAX_IDS_PER_REQUEST);
		return mb_error(&b, ret_error, -E2BIG);
	}
	e = rdp_calloc(n + 1, sizeof(*e));
	group_of = rdp_calloc(n + 1, sizeof(*group_of));
	taken = rdp_calloc(n + 1, sizeof(*taken));
	if (!e || !group_of || !taken)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const char *id = i < c->n_must_include_deviceids
					 ? c->must_include_deviceids[i]
					 : c->available_deviceids[i - c->n_must_include_deviceids];

		if (strlen(id) > RDP_DP_MAX_ID_LEN) {
			mb_add(&b, "container request %zu: device ID ", ci);
			mb_add_id(&b, id);
			mb_add(&b, " is longer than %d bytes", RDP_DP_MAX_ID_LEN);
			return mb_error(&b, ret_error, -EINVAL);
		}
		e[i] = (struct pref_entry){.id = id, .pos = i};
	}
	/* Sort once to give equal IDs one group, then pick in request order: O(n log n). */
	qsort(e, n, sizeof(*e), pref_cmp);
	for (size_t i = 0, g = 0; i < n; i++) {
		if (i > 0 && strcmp(e[i].id, e[i - 1].id) != 0)
			g++;
		group_of[e[i].pos] = g;
	}
	want = (size_t)c->allocation_size;
	for (size_t pos = 0; pos < n; pos++) {
		size_t g = group_of[pos];
		bool must = pos < c->n_must_include_deviceids;
		char *id = must ? c->must_include_deviceids[pos]
				: c->available_deviceids[pos - c->n_must_include_deviceids];

		if (taken[g] || (!must && k >= want))
			continue;
		taken[g] = true;
		out[k++] = id;
	}
	*n_out = k;
	return 0;
}

/*
 * Exclusive: one container's preferred units, closest to one another (prefer.h). out gets
 * pointers to the state's unit IDs (room for allocation_size).
 */
static int preferred_units(const struct rdp_dp_state *s,
			   const V1beta1__ContainerPreferredAllocationRequest *c, size_t ci,
			   char **out, size_t *n_out, char **ret_error)
{
	size_t n_units = s->n_unit_v, n_cand = 0, n_must = 0, want;
	_cleanup_free_ size_t *cand_of = NULL; /* unit index -> candidate index + 1 */
	_cleanup_free_ size_t *cand = NULL, *must = NULL, *chosen = NULL;
	_cleanup_free_ struct rdp_prefer_unit *pu = NULL;
	struct idlist unknown = {.n = 0}, absent = {.n = 0};
	struct msgbuf b = {.n = 0};
	bool first = true;
	int r;

	if (c->allocation_size < 0) {
		mb_add(&b, "container request %zu: negative allocation_size %d", ci,
		       c->allocation_size);
		return mb_error(&b, ret_error, -EINVAL);
	}
	if (c->n_available_deviceids > RDP_DP_MAX_IDS_PER_REQUEST ||
	    c->n_must_include_deviceids > RDP_DP_MAX_IDS_PER_REQUEST) {
		mb_add(&b, "container request %zu: more than %d device IDs", ci,
		       RDP_DP_MAX_IDS_PER_REQUEST);
		return mb_error(&b, ret_error, -E2BIG);
	}
	want = (size_t)c->allocation_size;
	cand_of = rdp_calloc(n_units + 1, sizeof(*cand_of));
	cand = rdp_calloc(n_units + 1, sizeof(*cand));
	must = rdp_calloc(n_units + 1, sizeof(*must));
	if (!cand_of || !cand || !must)
		return -ENOMEM;
	/* The available units (duplicates once), in ID order: the tie-break is the address. */
	for (size_t i = 0; i < c->n_available_deviceids; i++) {
		const struct rdp_dp_unit *u = find_unit(s, c->available_deviceids[i]);

		if (!u)
			idlist_add(&unknown, c->available_deviceids[i], NULL);
		else
			cand_of[u - s->unit_v] = 1;
	}
	for (size_t i = 0; i < c->n_must_include_deviceids; i++) {
		const struct rdp_dp_unit *u = find_unit(s, c->must_include_deviceids[i]);

		if (!u)
			idlist_add(&unknown, c->must_include_deviceids[i], NULL);
		else if (!cand_of[u - s->unit_v])
			idlist_add(&absent, c->must_include_deviceids[i], NULL);
	}
	if (unknown.n || absent.n) {
		mb_add(&b, "container request %zu:", ci);
		idlist_put(&b, &unknown, "unknown device IDs", &first);
		if (unknown.n)
			mb_add_units(&b, s);
		idlist_put(&b, &absent, "must-include device IDs not among the available ones",
			   &first);
		return mb_error(&b, ret_error, -EINVAL);
	}
	for (size_t i = 0; i < n_units; i++)
		if (cand_of[i]) {
			cand[n_cand] = i;
			cand_of[i] = ++n_cand;
		}
	for (size_t i = 0; i < c->n_must_include_deviceids; i++) {
		size_t k = cand_of[find_unit(s, c->must_include_deviceids[i]) - s->unit_v] - 1;
		bool dup = false;

		for (size_t j = 0; j < n_must && !dup; j++)
			dup = must[j] == k;
		if (!dup)
			must[n_must++] = k;
	}
	if (want > n_cand || want < n_must) {
		mb_add(&b, "container request %zu: allocation_size %zu, but %zu %s", ci, want,
		       want > n_cand ? n_cand : n_must,
		       want > n_cand ? "distinct device IDs are available"
				     : "distinct device IDs must be included");
		return mb_error(&b, ret_error, -EINVAL);
	}
	pu = rdp_calloc(n_cand + 1, sizeof(*pu));
	chosen = rdp_calloc(want + 1, sizeof(*chosen));
	if (!pu || !chosen)
		return -ENOMEM;
	for (size_t i = 0; i < n_cand; i++)
		pu[i] = (struct rdp_prefer_unit){.place = &s->unit_v[cand[i]].place,
						 .unhealthy = !s->unit_v[cand[i]].healthy};
	r = rdp_prefer(pu, n_cand, must, n_must, want, chosen);
	if (r < 0)
		return r;
	for (size_t i = 0; i < want; i++)
		out[i] = (char *)s->unit_v[cand[chosen[i]]].id;
	*n_out = want;
	return 0;
}

int rdp_dp_preferred_allocation(const struct rdp_dp_state *s, const uint8_t *req, size_t len,
				uint8_t **ret, size_t *ret_len, char **ret_error)
{
	_cleanup_(rdp_pb_arena_done) struct rdp_pb_arena arena =
		RDP_PB_ARENA_INIT(RDP_DP_UNPACK_BUDGET);
	V1beta1__PreferredAllocationRequest *r;
	V1beta1__PreferredAllocationResponse resp = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
	V1beta1__ContainerPreferredAllocationResponse *cs = NULL, **cptrs = NULL;
	size_t n_done = 0;
	int k = 0;

	*ret_error = NULL;
	r = v1beta1__preferred_allocation_request__unpack(rdp_pb_arena_allocator(&arena), len,
							  req);
	if (!r)
		return unpack_error(&arena, ret_error);
	k = too_many_requests(r->n_container_requests, ret_error);
	if (k < 0)
		goto out;
	cs = rdp_calloc(r->n_container_requests + 1, sizeof(*cs));
	cptrs = rdp_calloc(r->n_container_requests + 1, sizeof(*cptrs));
	if (!cs || !cptrs) {
		k = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < r->n_container_requests; i++, n_done++) {
		const V1beta1__ContainerPreferredAllocationRequest *c = r->container_requests[i];

		v1beta1__container_preferred_allocation_response__init(&cs[i]);
		cptrs[i] = &cs[i];
		cs[i].deviceids = rdp_calloc(
			c->n_must_include_deviceids + c->n_available_deviceids + 1, sizeof(char *));
		if (!cs[i].deviceids) {
			k = -ENOMEM;
			goto out;
		}
		if (s->mode == RDP_MODE_EXCLUSIVE)
			k = preferred_units(s, c, i, cs[i].deviceids, &cs[i].n_deviceids,
					    ret_error);
		else
			k = preferred_one(c, i, cs[i].deviceids, &cs[i].n_deviceids, ret_error);
		if (k < 0) {
			n_done++;
			goto out;
		}
	}
	resp.n_container_responses = r->n_container_requests;
	resp.container_responses = cptrs;
	k = rdp_pb_pack(&resp.base, ret, ret_len);
out:
	for (size_t i = 0; cs && i < n_done; i++)
		rdp_free(cs[i].deviceids);
	rdp_free(cs);
	rdp_free(cptrs);
	v1beta1__preferred_allocation_request__free_unpacked(r, rdp_pb_arena_allocator(&arena));
	return k;
}

/* The service object. */

/* An Allocate call waiting for a rescan (its request checked, what the answer needs kept). */
struct parked {
	struct rdp_grpc_call *call;
	struct alloc_req req;
};

struct rdp_dp_service {
	enum rdp_resource_mode mode; /* as registered: what GetDevicePluginOptions says */
	char *cdi_kind; /* CDI mode with a spec on disk: its kind; NULL: device specs */
	char **cdi_ids; /* the unit IDs that spec names, sorted */
	size_t n_cdi_ids;
	struct rdp_dp_state state;
	uint8_t *snap; /* packed snapshot of state, sent to every stream */
	size_t snap_len;
	struct rdp_grpc_call **streams;
	size_t n_streams, cap_streams;
	rdp_dp_call_cb cb;
	void *userdata;
	int dev_fd; /* dev root for checking Allocate answers; -1: no check */
	int sys_fd; /* sysfs root: which ibdev owns a node now; -1: no check */
	bool (*settled)(void *userdata); /* nodes known unchanged: no check needed */
	void *settled_userdata;
	rdp_dp_refresh_cb refresh_cb;
	void *refresh_userdata;
	bool refresh_pending; /* refresh_cb was called, set_state/refreshed not yet */
	struct parked parked[RDP_DP_MAX_PARKED];
	size_t n_parked;
};

/* A 0-byte message still needs a non-NULL pointer for some callers. */
static const uint8_t empty_msg[1];

int rdp_dp_service_new(rdp_dp_call_cb cb, void *userdata, struct rdp_dp_service **ret)
{
	struct rdp_dp_service *s = rdp_calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->state.numa_node = -1;
	s->state.rdma_cm_spec = SIZE_MAX;
	s->cb = cb;
	s->userdata = userdata;
	s->dev_fd = -1;
	s->sys_fd = -1;
	*ret = s;
	return 0;
}

static void remove_stream(struct rdp_dp_service *s, struct rdp_grpc_call *call)
{
	for (size_t i = 0; i < s->n_streams; i++) {
		if (s->streams[i] == call) {
			memmove(&s->streams[i], &s->streams[i + 1],
				(s->n_streams - i - 1) * sizeof(*s->streams));
			s->n_streams--;
			return;
		}
	}
}

/* Takes parked call i off the list, in order; returns what it held. */
static struct parked unpark(struct rdp_dp_service *s, size_t i)
{
	struct parked p = s->parked[i];

	memmove(&s->parked[i], &s->parked[i + 1], (s->n_parked - i - 1) * sizeof(*s->parked));
	s->n_parked--;
	rdp_grpc_call_set_close_cb(p.call, NULL, NULL);
	return p;
}

static void cdi_clear(struct rdp_dp_service *s)
{
	strv_free(s->cdi_ids, s->n_cdi_ids);
	rdp_free(s->cdi_kind);
	s->cdi_kind = NULL;
	s->cdi_ids = NULL;
	s->n_cdi_ids = 0;
}

struct rdp_dp_service *rdp_dp_service_free(struct rdp_dp_service *s)
{
	if (!s)
		return NULL;
	while (s->n_streams > 0) {
		struct rdp_grpc_call *c = s->streams[--s->n_streams];

		rdp_grpc_call_set_close_cb(c, NULL, NULL);
		rdp_grpc_call_fail(c, RDP_GRPC_UNAVAILABLE, "device plugin is shutting down");
	}
	while (s->n_parked > 0) {
		struct parked p = unpark(s, s->n_parked - 1);

		alloc_req_done(&p.req);
		rdp_grpc_call_fail(p.call, RDP_GRPC_UNAVAILABLE, "device plugin is shutting down");
	}
	if (s->dev_fd >= 0)
		close(s->dev_fd);
	if (s->sys_fd >= 0)
		close(s->sys_fd);
	cdi_clear(s);
	rdp_free(s->streams);
	rdp_free(s->snap);
	rdp_dp_state_done(&s->state);
	rdp_free(s);
	return NULL;
}

int rdp_dp_service_set_cdi(struct rdp_dp_service *s, const struct rdp_dp_cdi *cdi)
{
	cdi_clear(s);
	if (!cdi || !cdi->kind)
		return 0;
	s->cdi_kind = rdp_strdup(cdi->kind);
	s->cdi_ids = rdp_calloc(cdi->n_ids + 1, sizeof(*s->cdi_ids));
	if (!s->cdi_kind || !s->cdi_ids)
		goto oom;
	for (; s->n_cdi_ids < cdi->n_ids; s->n_cdi_ids++)
		if (!(s->cdi_ids[s->n_cdi_ids] = rdp_strdup(cdi->ids[s->n_cdi_ids])))
			goto oom;
	if (s->n_cdi_ids > 1)
		qsort(s->cdi_ids, s->n_cdi_ids, sizeof(*s->cdi_ids), cmp_str_sort);
	return 0;
oom:
	cdi_clear(s);
	return -ENOMEM;
}

void rdp_dp_service_set_mode(struct rdp_dp_service *s, enum rdp_resource_mode mode)
{
	s->mode = mode;
}

const struct rdp_dp_state *rdp_dp_service_state(const struct rdp_dp_service *s)
{
	return &s->state;
}

size_t rdp_dp_service_streams(const struct rdp_dp_service *s)
{
	return s->n_streams;
}

size_t rdp_dp_service_parked(const struct rdp_dp_service *s)
{
	return s->n_parked;
}

/* Opens root (NULL: none) in place of the fd in *fdp; the old one stays on failure. */
static int replace_root(int *fdp, const char *root)
{
	int fd = -1, r;

	if (root) {
		r = rdp_sysfs_open_root(root, &fd);
		if (r < 0)
			return r;
	}
	if (*fdp >= 0)
		close(*fdp);
	*fdp = fd;
	return 0;
}

int rdp_dp_service_set_dev_root(struct rdp_dp_service *s, const char *dev_root)
{
	return replace_root(&s->dev_fd, dev_root);
}

void rdp_dp_service_set_settled(struct rdp_dp_service *s, bool (*settled)(void *userdata),
				void *userdata)
{
	s->settled = settled;
	s->settled_userdata = userdata;
}

int rdp_dp_service_set_sysfs_root(struct rdp_dp_service *s, const char *sysfs_root)
{
	return replace_root(&s->sys_fd, sysfs_root);
}

/*
 * The kernel gives a freed uverbs/umad/issm number to the next device registered: after an
 * unplug and a plug, /dev/infiniband/uverbs0 may be another HCA's with the very number sysfs
 * names for uverbs0. Its class entry says whose it is now. 0 when node is owner's (or cannot
 * be told: no sysfs root, not an RDMA char device), -ESTALE with why.
 */
static int check_owner(const struct rdp_dp_service *s, const char *name, const char *owner,
		       char *why, size_t size)
{
	char path[96], now[RDP_IBDEV_NAME_MAX];
	const char *class;
	int r;

	if (s->sys_fd < 0 || !owner || !*owner)
		return 0;
	if (strncmp(name, "uverbs", 6) == 0)
		class = "infiniband_verbs";
	else if (strncmp(name, "umad", 4) == 0 || strncmp(name, "issm", 4) == 0)
		class = "infiniband_mad";
	else
		return 0;
	snprintf(path, sizeof(path), "class/%s/%s/ibdev", class, name);
	r = rdp_sysfs_read_attr(s->sys_fd, path, now, sizeof(now));
	if (r >= 0 && strcmp(now, owner) == 0)
		return 0;
	if (r >= 0)
		snprintf(why, size, "/dev/infiniband/%s now belongs to %s (sysfs %s)", name,
			 rdp_printable(now, 32, (char[40]){0}, 40), name);
	else
		snprintf(why, size, "sysfs %s: %s", name,
			 r == -ENOENT ? "gone" : strerror(-r));
	return -ESTALE;
}

void rdp_dp_service_set_refresh(struct rdp_dp_service *s, rdp_dp_refresh_cb cb, void *userdata)
{
	s->refresh_cb = cb;
	s->refresh_userdata = userdata;
}

static const uint8_t *snap_bytes(const struct rdp_dp_service *s)
{
	return s->snap ? s->snap : empty_msg;
}

static void answer_parked(struct rdp_dp_service *s);

int rdp_dp_service_set_state(struct rdp_dp_service *s, struct rdp_dp_state *st)
{
	int changed = 0;

	if (!rdp_dp_state_same_specs(&s->state, st))
		changed |= RDP_DP_CHANGED_SPECS;
	if (!rdp_dp_state_same_unusable(&s->state, st))
		changed |= RDP_DP_CHANGED_UNUSABLE;
	if (!rdp_dp_state_same_env(&s->state, st))
		changed |= RDP_DP_CHANGED_ENV;
	if (!rdp_dp_state_same_snapshot(&s->state, st) || (!s->snap && st->units > 0)) {
		uint8_t *snap;
		size_t len;
		int r = rdp_dp_snapshot_pack(st, &snap, &len);

		if (r < 0)
			return r;
		rdp_free(s->snap);
		s->snap = snap;
		s->snap_len = len;
		changed |= RDP_DP_CHANGED_SNAPSHOT;
	}
	rdp_dp_state_done(&s->state);
	s->state = *st;
	memset(st, 0, sizeof(*st));
	st->numa_node = -1;
	if (changed & RDP_DP_CHANGED_SNAPSHOT) {
		/*
		 * Backwards, so that a stream removed by its close callback during a send does
		 * not make us skip another; at worst one gets the same snapshot twice.
		 */
		for (size_t i = s->n_streams; i > 0; i--) {
			if (i > s->n_streams)
				continue;
			(void)rdp_grpc_call_send(s->streams[i - 1], snap_bytes(s), s->snap_len);
		}
	}
	answer_parked(s);
	return changed;
}

void rdp_dp_service_refreshed(struct rdp_dp_service *s)
{
	answer_parked(s);
}

bool rdp_dp_service_handles(const char *path)
{
	enum rdp_method m = rdp_method_lookup(path);

	return m != RDP_METHOD_UNKNOWN && rdp_methods[m].service == RDP_SERVICE_DEVICE_PLUGIN;
}

static void on_stream_close(struct rdp_grpc_call *call, void *userdata)
{
	struct rdp_dp_service *s = userdata;
	struct rdp_dp_call_info info = {
		.method = "ListAndWatch",
		.call_id = rdp_grpc_call_id(call),
		.code = RDP_GRPC_CANCELLED,
		.stream_closed = true,
	};

	remove_stream(s, call);
	info.n_streams = s->n_streams;
	if (s->cb)
		s->cb(&info, s->userdata);
}

static int list_and_watch(struct rdp_dp_service *s, struct rdp_grpc_call *call,
			  struct rdp_dp_call_info *info)
{
	int r;

	if (s->n_streams == s->cap_streams) {
		size_t cap = s->cap_streams ? s->cap_streams * 2 : 4;
		struct rdp_grpc_call **v = rdp_reallocarray(s->streams, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->streams = v;
		s->cap_streams = cap;
	}
	/* The first snapshot goes out at once: kubelet shows 0 until it arrives. */
	r = rdp_grpc_call_send(call, snap_bytes(s), s->snap_len);
	if (r < 0)
		return r;
	s->streams[s->n_streams++] = call;
	rdp_grpc_call_set_close_cb(call, on_stream_close, s);
	info->stream_opened = true;
	return 0;
}

static enum rdp_grpc_code errno_code(int r)
{
	switch (r) {
	case -EBADMSG:
	case -EINVAL:
	case -E2BIG:
		return RDP_GRPC_INVALID_ARGUMENT;
	case -ENODEV:
	case -ESTALE:
		return RDP_GRPC_FAILED_PRECONDITION;
	case -EBUSY:
		return RDP_GRPC_UNAVAILABLE;
	case -ENOMEM:
	case -ENOBUFS:
		return RDP_GRPC_RESOURCE_EXHAUSTED;
	default:
		return RDP_GRPC_INTERNAL;
	}
}

/*
 * Checks the char devices of the state under the dev root. Returns 0 when all are as sysfs
 * named them (or there is no dev root), -ESTALE with the failures in *b.
 */
static int check_nodes(const struct rdp_dp_service *s, struct msgbuf *b)
{
	static const char dev_prefix[] = "/dev/";
	char why[RDP_REASON_MAX];
	size_t bad = 0;

	if (s->dev_fd < 0)
		return 0;
	for (size_t i = 0; i < s->state.n_specs; i++) {
		const char *path = s->state.specs[i], *owner;
		struct rdp_devnode_result res;
		dev_t want = spec_devnum(&s->state, i);

		/* Only paths below /dev map to the dev root. */
		if (strncmp(path, dev_prefix, strlen(dev_prefix)) != 0)
			continue;
		owner = s->state.spec_owners ? s->state.spec_owners[i] : NULL;
		if (rdp_devnode_check(s->dev_fd, path + strlen(dev_prefix), want, &res) ==
		    RDP_DEVNODE_OK) {
			if (check_owner(s, rdp_path_basename(path), owner, why, sizeof(why)) == 0)
				continue;
		} else {
			rdp_devnode_reason(&res, path, rdp_path_basename(path), want, why,
					   sizeof(why));
		}
		mb_add(b, "%s%s%s%s", bad ? "; " : "", owner ? owner : "", owner ? ": " : "", why);
		bad++;
	}
	return bad ? -ESTALE : 0;
}

static void report(struct rdp_dp_service *s, struct rdp_dp_call_info *info)
{
	info->n_streams = s->n_streams;
	if (s->cb)
		s->cb(info, s->userdata);
}

static void on_parked_close(struct rdp_grpc_call *call, void *userdata)
{
	struct rdp_dp_service *s = userdata;
	struct rdp_dp_call_info info = {
		.method = "Allocate",
		.call_id = rdp_grpc_call_id(call),
		.code = RDP_GRPC_CANCELLED,
		.message = "the client went away while the call waited for a rescan",
		.waited = true,
	};

	for (size_t i = 0; i < s->n_parked; i++) {
		if (s->parked[i].call == call) {
			struct parked p = unpark(s, i);

			info.n_containers = p.req.n_containers;
			info.n_ids = p.req.n_ids;
			alloc_req_done(&p.req);
			break;
		}
	}
	report(s, &info);
}

/*
 * Answers a checked Allocate request from the current state, or parks it (may_park, a
 * refresh callback, a failed node check). Reports what it did unless it parked the call.
 * Takes a over (its IDs go with a parked call, or are freed).
 */
static void answer_allocate(struct rdp_dp_service *s, struct rdp_grpc_call *call,
			    struct alloc_req *a, bool may_park, bool waited)
{
	struct rdp_dp_call_info info = {
		.method = "Allocate",
		.call_id = rdp_grpc_call_id(call),
		.code = RDP_GRPC_OK,
		.n_containers = a->n_containers,
		.n_ids = a->n_ids,
		.waited = waited,
	};
	struct msgbuf b = {.n = 0}, units = {.n = 0};
	const struct rdp_dp_cdi cdi = {.kind = s->cdi_kind, .ids = s->cdi_ids, .n_ids = s->n_cdi_ids};
	_cleanup_free_ uint8_t *out = NULL;
	_cleanup_free_ char *error = NULL;
	size_t out_len = 0;
	int r;

	if (s->state.mode == RDP_MODE_SHARED && a->max_unit >= (long)s->state.units) {
		/* Only after a wait: the rescan took units away. */
		mb_add(&b, "the resource has %u units now, the request names unit \"%ld\"",
		       s->state.units, a->max_unit);
		r = mb_error(&b, &error, -EINVAL);
		goto fail;
	}
	if (s->state.mode == RDP_MODE_SHARED && a->ids) {
		mb_add(&b, "the resource is shared now: ask again with the IDs it lists");
		r = mb_error(&b, &error, -EINVAL);
		goto fail;
	}
	if (s->state.mode == RDP_MODE_EXCLUSIVE && !a->ids) {
		/* Only after a wait: the resource turned exclusive while the call waited. */
		mb_add(&b, "the resource is exclusive now: ask again with the IDs it lists");
		r = mb_error(&b, &error, -EINVAL);
		goto fail;
	}
	if (waited && a->ids) {
		/* Only after a wait: the rescan may have taken units away or made them sick. */
		r = check_alloc_units(&s->state, a, &error);
		if (r < 0)
			goto fail;
	}
	r = check_usable(&s->state, &error);
	if (r < 0)
		goto fail;
	r = s->settled && s->settled(s->settled_userdata) ? 0 : check_nodes(s, &b);
	if (r < 0 && may_park && s->refresh_cb) {
		if (s->n_parked == RDP_DP_MAX_PARKED) {
			b.n = 0;
			mb_add(&b, "%d Allocate calls already wait for a rescan of the devices",
			       RDP_DP_MAX_PARKED);
			r = mb_error(&b, &error, -EBUSY);
			goto fail;
		}
		s->parked[s->n_parked++] = (struct parked){.call = call, .req = *a};
		*a = (struct alloc_req){.n_containers = 0}; /* the parked call owns its IDs */
		rdp_grpc_call_set_close_cb(call, on_parked_close, s);
		if (!s->refresh_pending) {
			s->refresh_pending = true;
			/* May answer the call at once (set_state/refreshed): do not touch it after. */
			s->refresh_cb(b.s, s->refresh_userdata);
		}
		return;
	}
	if (r < 0) {
		r = mb_error(&b, &error, r);
		goto fail;
	}
	r = allocate_pack(&s->state, s->cdi_kind ? &cdi : NULL, a, &out, &out_len, &info.n_specs,
			  &info.cdi_fallback);
	info.cdi = s->cdi_kind && info.cdi_fallback < a->n_containers;
	if (r >= 0 && a->ids) {
		describe_units(&s->state, a->ids, a->n_ids, a->per, a->n_containers, &units);
		info.units = units.s;
	}
	alloc_req_done(a);
	if (r < 0)
		goto fail;
	if (rdp_grpc_call_reply(call, out ? out : empty_msg, out_len) < 0) {
		info.code = RDP_GRPC_INTERNAL;
		info.message = "cannot send the reply";
	}
	report(s, &info);
	return;
fail:
	alloc_req_done(a);
	info.code = errno_code(r);
	info.message = error ? error : "cannot answer Allocate: out of memory";
	rdp_grpc_call_fail(call, info.code, info.message);
	report(s, &info);
}

static void answer_parked(struct rdp_dp_service *s)
{
	s->refresh_pending = false;
	while (s->n_parked > 0) {
		struct parked p = unpark(s, 0);

		answer_allocate(s, p.call, &p.req, false, true);
	}
}

/* The IDs of our own packed PreferredAllocationResponse, for the log. */
static void describe_preferred(const struct rdp_dp_state *st, const uint8_t *out, size_t len,
			       struct msgbuf *b, struct rdp_dp_call_info *info)
{
	V1beta1__PreferredAllocationResponse *m =
		v1beta1__preferred_allocation_response__unpack(rdp_protobuf_allocator(), len,
							       out ? out : empty_msg);

	if (!m)
		return;
	for (size_t i = 0; i < m->n_container_responses; i++) {
		if (i)
			mb_add(b, "; ");
		describe_units(st, m->container_responses[i]->deviceids,
			       m->container_responses[i]->n_deviceids, NULL, 0, b);
	}
	info->units = b->s;
	v1beta1__preferred_allocation_response__free_unpacked(m, rdp_protobuf_allocator());
}

void rdp_dp_service_dispatch(struct rdp_dp_service *s, struct rdp_grpc_call *call,
			     const uint8_t *req, size_t len)
{
	const char *path = rdp_grpc_call_path(call);
	const char *slash = strrchr(path, '/');
	enum rdp_method m = rdp_method_lookup(path);
	struct rdp_dp_call_info info = {
		.method = slash ? slash + 1 : path,
		.call_id = rdp_grpc_call_id(call),
		.code = RDP_GRPC_OK,
	};
	_cleanup_free_ uint8_t *out = NULL;
	_cleanup_free_ char *error = NULL;
	struct msgbuf units = {.n = 0};
	char fallback[128];
	size_t out_len = 0;
	int r = 0;

	if (m != RDP_METHOD_UNKNOWN && rdp_methods[m].service != RDP_SERVICE_DEVICE_PLUGIN)
		m = RDP_METHOD_UNKNOWN;
	if (m == RDP_METHOD_DP_OPTIONS) {
		r = rdp_dp_options_pack(s->mode, &out, &out_len);
	} else if (m == RDP_METHOD_DP_LIST_AND_WATCH) {
		r = list_and_watch(s, call, &info);
		if (r >= 0) {
			report(s, &info);
			return;
		}
	} else if (m == RDP_METHOD_DP_ALLOCATE) {
		struct alloc_req a = {.n_containers = 0};

		r = allocate_parse(&s->state, req, len, &a, &error);
		if (r >= 0) {
			answer_allocate(s, call, &a, true, false);
			return;
		}
	} else if (m == RDP_METHOD_DP_PREFERRED) {
		r = rdp_dp_preferred_allocation(&s->state, req, len, &out, &out_len, &error);
		if (r >= 0 && s->state.mode == RDP_MODE_EXCLUSIVE)
			describe_preferred(&s->state, out, out_len, &units, &info);
	} else if (m == RDP_METHOD_DP_PRE_START) {
		V1beta1__PreStartContainerRequest *p = v1beta1__pre_start_container_request__unpack(
			rdp_protobuf_allocator(), len, req);

		if (p)
			v1beta1__pre_start_container_request__free_unpacked(
				p, rdp_protobuf_allocator());
		else
			r = -EBADMSG;
	} else {
		info.code = RDP_GRPC_UNIMPLEMENTED;
		snprintf(fallback, sizeof(fallback), "unknown method");
		rdp_grpc_call_fail(call, info.code, fallback);
		info.message = fallback;
		goto done;
	}
	if (r < 0) {
		info.code = errno_code(r);
		if (!error) {
			snprintf(fallback, sizeof(fallback), "cannot answer %s: %s", info.method,
				 r == -EBADMSG ? "the request does not parse" : strerror(-r));
		}
		info.message = error ? error : fallback;
		rdp_grpc_call_fail(call, info.code, info.message);
	} else {
		r = rdp_grpc_call_reply(call, out ? out : empty_msg, out_len);
		if (r < 0) {
			info.code = RDP_GRPC_INTERNAL;
			info.message = "cannot send the reply";
		}
	}
done:
	report(s, &info);
}
