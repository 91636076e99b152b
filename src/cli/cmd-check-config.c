/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp check-config: validates a config.json, then explains on this node (or a fixture
 * tree) device by device and key by key what every resource selects, and the pools that
 * result. The same config, selector and pool code as the daemon.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "cdi.h"
#include "cli-common.h"
#include "cli.h"
#include "config.h"
#include "diag.h"
#include "discovery.h"
#include "dp-service.h"
#include "macro.h"
#include "pool.h"
#include "selector.h"
#include "workload-env.h"

static const char *const cmd = "check-config";

static const struct cli_cmd check_config_cmd = {
	.name = "check-config",
	.about = "Validate a config.json of k8s-rdma-shared-dev-plugin and explain, device by "
		 "device and key by key, what each resource selects on this node.\n",
	.epilog = "Selector keys match what `rdma-dp discover -o json` shows: `drivers` matches "
		  "the PCI function's driver (`driver`: mlx5_core, as in /sys/bus/pci/drivers) or a "
		  "soft device's RDMA driver (`rdma_driver`: rdma_rxe for soft-RoCE, known by rxe's "
		  "own `parent` attribute and no `device` link; siw for soft-iWARP, by node type "
		  "RNIC and its fixed node_desc), never by the device's name, which `rdma dev set` "
		  "can change.\n\n"
		  "Exit status: 0 when the config is valid (warnings included), 1 when it is not "
		  "or the node cannot be read, 2 on a usage error.\n",
};

static void print_diags(FILE *f, const struct rdp_diags *d)
{
	for (size_t i = 0; i < d->n; i++)
		fprintf(f, "%s\n", d->v[i].text);
	if (d->n_errors + d->n_warnings > d->n)
		fprintf(f, "(more diagnostics were dropped)\n");
}

static void active_ports(const struct rdp_device *d, size_t *ret_active, size_t *ret_total)
{
	size_t a = 0;

	for (size_t i = 0; i < d->n_ports; i++)
		if (rdp_port_state_is_active(d->ports[i].state))
			a++;
	*ret_active = a;
	*ret_total = d->n_ports;
}

static void text_selectors(const struct rdp_selectors *s)
{
	char tmp[RDP_SEL_TEXT_MAX];
	const struct {
		const char *name;
		const struct rdp_strlist *l;
	} lists[] = {
		{ "vendors", &s->vendors },       { "deviceIDs", &s->device_ids },
		{ "drivers", &s->drivers },       { "ifNames", &s->if_names },
		{ "linkTypes", &s->link_types },  { "rootDevices", &s->root_devices },
	};

	for (size_t i = 0; i < ARRAY_SIZE(lists); i++) {
		if (!lists[i].l->n)
			continue;
		printf("    %s: [", lists[i].name);
		for (size_t j = 0; j < lists[i].l->n; j++)
			printf("%s%s", j ? ", " : "", lists[i].l->v[j]);
		printf("]\n");
	}
	if (s->n_pf_names) {
		printf("    pfNames: [");
		for (size_t j = 0; j < s->n_pf_names; j++)
			printf("%s%s", j ? ", " : "",
			       rdp_pf_selector_format(&s->pf_names[j], tmp, sizeof(tmp)));
		printf("]\n");
	}
	if (s->n_numa_nodes) {
		printf("    numaNodes: [");
		for (size_t j = 0; j < s->n_numa_nodes; j++)
			printf("%s%d", j ? ", " : "", s->numa_nodes[j]);
		printf("]\n");
	}
}

/*
 * An exclusive resource's units as serve advertises them (by the daemon's code): ID (what
 * pods' allocations and kubelet's checkpoint name), device, NUMA node (the Topology
 * Manager's hint), PCIe root (DRA's pcieRoot), health.
 */
static void text_units(const struct rdp_host *h, const struct rdp_pool *p)
{
	struct rdp_dp_state st = {.numa_node = -1};

	if (rdp_dp_state_build(h, p, &st) < 0) {
		printf("  units: (out of memory)\n");
		return;
	}
	printf("  units: %zu (one per usable device; ID: its PCI address, an SF's with -sf<sfnum>, "
	       "the ibdev name without PCI)\n", st.n_unit_v);
	if (st.n_unit_v)
		printf("    %-22s %-12s %-5s %-11s %s\n", "ID", "DEVICE", "NUMA", "PCIE ROOT",
		       "HEALTH");
	for (size_t i = 0; i < st.n_unit_v; i++) {
		const struct rdp_dp_unit *u = &st.unit_v[i];
		char numa[16];

		snprintf(numa, sizeof(numa), u->numa_node >= 0 ? "%d" : "-", u->numa_node);
		printf("    %-22s %-12s %-5s %-11s %s\n", u->id, u->device, numa,
		       u->place.pcie_root[0] ? u->place.pcie_root : "-",
		       u->healthy ? RDP_DP_HEALTHY : RDP_DP_UNHEALTHY " (no active port)");
	}
	for (size_t i = 0; i < st.n_unusable; i++)
		printf("    (%s: no unit, unusable: %s)\n", st.unusable[i].device,
		       st.unusable[i].reason);
	rdp_dp_state_done(&st);
}

/* "NCCL_IB_HCA and UCX_NET_DEVICES" for the bits of mask. */
static void env_from_names(unsigned int mask, char *buf, size_t size)
{
	buf[0] = '\0';
	for (unsigned int bit = 1; bit & RDP_ENV_FROM_ALL; bit <<= 1)
		if (mask & bit)
			snprintf(buf + strlen(buf), size - strlen(buf), "%s%s",
				 buf[0] ? " and " : "", rdp_env_from_name(bit));
}

/*
 * The variables a container of the pool's resource gets, by the daemon's code: shared, all of
 * them (every container gets every usable device); exclusive, the constants, the names
 * computed per allocation and an example for the first unit. ex_unit: that unit's ID.
 */
static int pool_env(const struct rdp_host *h, const struct rdp_pool *p, struct rdp_env *ret,
		    char *ex_unit, size_t size)
{
	_cleanup_free_ size_t *devs = NULL;
	size_t n = 0;
	int r;

	ex_unit[0] = '\0';
	r = rdp_env_pool_devices(h, p, &devs, &n);
	if (r < 0)
		return r;
	if (p->res->mode == RDP_MODE_EXCLUSIVE && n)
		rdp_device_unit_id(&h->devices[devs[0]], ex_unit, size);
	return rdp_env_build(p->res, h, devs, n, RDP_ENV_GROUP_ALL, ret);
}

static void text_env(const struct rdp_host *h, const struct rdp_pool *p)
{
	const struct rdp_resource *res = p->res;
	char unit[RDP_UNIT_ID_MAX], var[RDP_ENV_RESOURCE_VAR_MAX], names[64];
	struct rdp_env e = {};

	if (pool_env(h, p, &e, unit, sizeof(unit)) < 0) {
		printf("  environment: (out of memory)\n");
		return;
	}
	if (rdp_env_resource_var(res->full_name, var, sizeof(var)) < 0)
		var[0] = '\0';
	env_from_names(res->env_from, names, sizeof(names));
	if (res->mode == RDP_MODE_SHARED) {
		printf("  environment of a container given a unit (every usable device of the "
		       "pool):\n");
		for (size_t i = 0; i < e.n; i++)
			printf("    %s\n", e.kv[i]);
	} else {
		printf("  environment of a container:\n");
		printf("    per allocation, from the devices of its units: %s%s%s\n", var,
		       names[0] ? ", " : "", names);
		printf("    constant:%s\n", res->n_env ? "" : " (none)");
		for (size_t i = 0; i < res->n_env; i++)
			printf("      %s=%s\n", res->env[i].name, res->env[i].value);
		if (unit[0]) {
			printf("    e.g. given unit %s alone:\n", unit);
			for (size_t i = 0; i < e.n - res->n_env; i++)
				printf("      %s\n", e.kv[i]);
		}
	}
	if (e.omitted) {
		env_from_names(e.omitted, names, sizeof(names));
		printf("    ! %s left out: no port of %s can carry traffic\n", names,
		       res->mode == RDP_MODE_SHARED ? "the pool's usable devices" : "the unit");
	}
	rdp_env_done(&e);
}

/* Exclusive: the NUMA nodes its units carry ("0,1"), or "-" when none carries one. */
static void unit_numa(const struct rdp_dp_state *st, char *buf, size_t size)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < st->n_unit_v; i++) {
		int node = st->unit_v[i].numa_node;
		bool seen = node < 0;

		for (size_t j = 0; j < i && !seen; j++)
			seen = st->unit_v[j].numa_node == node;
		if (!seen && n < size)
			n += (size_t)snprintf(buf + n, size - n, "%s%d", n ? "," : "", node);
	}
	if (!buf[0])
		snprintf(buf, size, "-");
}

/* What serve --use-cdi names each resource's spec (cdi.h), by the daemon's rule. */
struct cdi_names {
	char (*classes)[RDP_CDI_CLASS_MAX];
	const char **why;
};

static void cdi_names_done(struct cdi_names *n)
{
	rdp_free(n->classes);
	rdp_free(n->why);
}

static int cdi_names(const struct rdp_config *c, struct cdi_names *ret)
{
	_cleanup_free_ const char **prefixes = rdp_calloc(c->n_resources + 1, sizeof(char *));
	_cleanup_free_ const char **names = rdp_calloc(c->n_resources + 1, sizeof(char *));

	ret->classes = rdp_calloc(c->n_resources + 1, sizeof(*ret->classes));
	ret->why = rdp_calloc(c->n_resources + 1, sizeof(*ret->why));
	if (!prefixes || !names || !ret->classes || !ret->why) {
		cdi_names_done(ret);
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->n_resources; i++) {
		prefixes[i] = c->resources[i].prefix;
		names[i] = c->resources[i].name;
	}
	rdp_cdi_classes(prefixes, names, c->n_resources, ret->classes, ret->why);
	return 0;
}

/*
 * "reportTopology": what the shared pool's TopologyInfo does under each of kubelet's Topology
 * Manager policies (the Go plugin reports none: without the key, nothing changes).
 */
static void text_topology(const struct rdp_pool *p)
{
	if (p->numa_node < 0) {
		printf("  topology (reportTopology): none reported: the pool's devices are on %s\n",
		       p->n_devices ? "several NUMA nodes, or the kernel names none" : "no node");
		return;
	}
	printf("  topology (reportTopology): every unit reports NUMA node %d to kubelet; under the "
	       "Topology Manager policy\n"
	       "    none: ignored;\n"
	       "    best-effort: the pod is admitted, its CPUs and other devices preferably on "
	       "node %d;\n"
	       "    restricted: a pod whose CPUs or other devices cannot share node %d with "
	       "this resource is refused (TopologyAffinityError), where the Go plugin admitted "
	       "it;\n"
	       "    single-numa-node: a pod is admitted only when all of its aligned resources "
	       "fit on node %d\n",
	       p->numa_node, p->numa_node, p->numa_node, p->numa_node);
}

static void text_report(const struct rdp_config *c, const struct rdp_host *h,
			const struct rdp_pools *pools, const struct rdp_diags *d)
{
	_cleanup_(cdi_names_done) struct cdi_names cdi = {0};

	(void)cdi_names(c, &cdi); /* out of memory: nothing said about CDI */
	printf("config %s: valid, %zu resource%s, periodicUpdateInterval %us%s\n", c->path,
	       c->n_resources, c->n_resources == 1 ? "" : "s", c->periodic_update_interval,
	       c->periodic_update_interval ? "" : " (rescans off)");
	printf("node: %zu RDMA device%s\n", h->n_devices, h->n_devices == 1 ? "" : "s");
	for (size_t i = 0; i < c->n_resources; i++) {
		const struct rdp_resource *res = &c->resources[i];

		char how[64];

		if (res->mode == RDP_MODE_EXCLUSIVE)
			snprintf(how, sizeof(how), "exclusive: one unit per device");
		else
			snprintf(how, sizeof(how), "shared, rdmaHcaMax %u", res->rdma_hca_max);
		printf("\nresource %s (%s)%s: %zu of %zu devices selected\n", res->full_name, how,
		       res->legacy_devices ? " [legacy \"devices\"]" : "", pools->v[i].n_devices,
		       h->n_devices);
		printf("  selectors:\n");
		text_selectors(&res->sel);
		for (size_t j = 0; j < h->n_devices; j++) {
			const struct rdp_device *dev = &h->devices[j];
			struct rdp_sel_explain ex;
			bool m = rdp_selectors_match(&res->sel, dev, &ex);
			bool first = true;

			printf("  %s: %s", dev->name, m ? "selected" : "not selected");
			for (int k = 0; k < RDP_SEL_KEY_MAX; k++)
				if (ex.result[k] == RDP_SEL_NO_MATCH) {
					printf("%s%s", first ? " (" : ", ", rdp_sel_key_name(k));
					first = false;
				}
			printf("%s\n", first ? "" : ")");
			if (m && !rdp_device_is_usable(dev))
				printf("    ! %s is unusable: %s\n", dev->name, dev->unusable_reason);
			for (int k = 0; k < RDP_SEL_KEY_MAX; k++)
				if (ex.result[k] != RDP_SEL_UNUSED)
					printf("    %s %s: %s\n",
					       ex.result[k] == RDP_SEL_MATCH ? "+" : "-", dev->name,
					       ex.text[k]);
		}
		if (res->mode == RDP_MODE_EXCLUSIVE)
			text_units(h, &pools->v[i]);
		/* Said only when serve --use-cdi could not write its spec. */
		if (cdi.why && cdi.why[i])
			printf("  ! with --use-cdi: no CDI spec, %s: Allocate hands out device "
			       "specs for it\n", cdi.why[i]);
		/* Without "env" or "envFromDevices": RDMA_DEVICE_* alone, in the JSON output. */
		if (res->env_from || res->n_env)
			text_env(h, &pools->v[i]);
		if (res->report_topology)
			text_topology(&pools->v[i]);
	}
	printf("\npools:\n");
	printf("  %-32s %6s  %-5s %-8s %s\n", "RESOURCE", "UNITS", "NUMA", "HEALTH", "DEVICES");
	for (size_t i = 0; i < pools->n; i++) {
		const struct rdp_pool *p = &pools->v[i];
		struct rdp_dp_state st = {.numa_node = -1};
		char numa[16], health[32];

		/* What the daemon would serve, by the daemon's code. */
		if (rdp_dp_state_build(h, p, &st) < 0) {
			printf("  %-32s (out of memory)\n", p->res->full_name);
			continue;
		}
		if (st.mode == RDP_MODE_EXCLUSIVE)
			unit_numa(&st, numa, sizeof(numa));
		else if (p->numa_node >= 0)
			snprintf(numa, sizeof(numa), "%d", p->numa_node);
		else
			snprintf(numa, sizeof(numa), "%s", p->n_devices ? "mixed" : "-");
		snprintf(health, sizeof(health), "%zu/%zu", st.n_active, p->n_devices);
		if (st.mode == RDP_MODE_EXCLUSIVE)
			snprintf(health, sizeof(health), "%zu/%zu",
				 rdp_dp_state_healthy_units(&st), p->n_devices);
		printf("  %-32s %6u  %-5s %-8s ", p->res->full_name, st.units, numa, health);
		if (!p->n_devices)
			printf("(none)");
		for (size_t j = 0; j < p->n_devices; j++)
			printf("%s%s", j ? "," : "", h->devices[p->devices[j]].name);
		printf("\n");
		for (size_t j = 0; j < st.n_unusable; j++)
			printf("    ! %s is unusable: %s\n", st.unusable[j].device,
			       st.unusable[j].reason);
		if (st.n_devices && !st.n_usable && st.mode == RDP_MODE_SHARED)
			printf("    ! no device is usable: all %u units are Unhealthy and "
			       "Allocate fails\n", st.units);
		else if (st.n_devices && !st.n_usable)
			printf("    ! no device is usable: the resource has no units\n");
		rdp_dp_state_done(&st);
	}
	printf("  (UNITS: what kubelet is told; HEALTH: usable devices with an active port / "
	       "devices)\n");
	printf("  (shared: every pod given a unit gets every device of the pool; exclusive: a "
	       "unit is one usable device, a pod gets only its own)\n");
	if (d->n) {
		printf("\ndiagnostics:\n");
		for (size_t i = 0; i < d->n; i++)
			printf("  %s\n", d->v[i].text);
	}
}

/* JSON building: any NULL along the way (out of memory) makes the whole document NULL. */
static int set(json_t *o, const char *k, json_t *v)
{
	if (!o || !v) {
		json_decref(v);
		return -ENOMEM;
	}
	return json_object_set_new(o, k, v) < 0 ? -ENOMEM : 0;
}

static int push(json_t *a, json_t *v)
{
	if (!a || !v) {
		json_decref(v);
		return -ENOMEM;
	}
	return json_array_append_new(a, v) < 0 ? -ENOMEM : 0;
}

static json_t *json_strlist(const struct rdp_strlist *l)
{
	json_t *a = json_array();

	for (size_t i = 0; i < l->n; i++)
		if (push(a, json_string(l->v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *json_selectors(const struct rdp_selectors *s)
{
	json_t *o = json_object();
	char tmp[RDP_SEL_TEXT_MAX];
	int r = 0;

	if (s->vendors.n)
		r |= set(o, "vendors", json_strlist(&s->vendors));
	if (s->device_ids.n)
		r |= set(o, "deviceIDs", json_strlist(&s->device_ids));
	if (s->drivers.n)
		r |= set(o, "drivers", json_strlist(&s->drivers));
	if (s->if_names.n)
		r |= set(o, "ifNames", json_strlist(&s->if_names));
	if (s->link_types.n)
		r |= set(o, "linkTypes", json_strlist(&s->link_types));
	if (s->n_pf_names) {
		json_t *a = json_array();

		for (size_t i = 0; i < s->n_pf_names; i++)
			r |= push(a, json_string(rdp_pf_selector_format(&s->pf_names[i], tmp,
									 sizeof(tmp))));
		r |= set(o, "pfNames", a);
	}
	if (s->root_devices.n)
		r |= set(o, "rootDevices", json_strlist(&s->root_devices));
	if (s->n_numa_nodes) {
		json_t *a = json_array();

		for (size_t i = 0; i < s->n_numa_nodes; i++)
			r |= push(a, json_integer(s->numa_nodes[i]));
		r |= set(o, "numaNodes", a);
	}
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *json_diags(const struct rdp_diags *d)
{
	json_t *a = json_array();

	for (size_t i = 0; i < d->n; i++)
		if (push(a, json_pack("{s:s, s:s}", "level", rdp_diag_level_name(d->v[i].level),
				      "text", d->v[i].text)) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}

static json_t *json_resource(const struct rdp_resource *res, const struct rdp_host *h,
			     const char *cdi_class, const char *cdi_why)
{
	json_t *o = json_object(), *devs = json_array();
	int r = 0;

	r |= set(o, "name", json_string(res->name));
	r |= set(o, "prefix", json_string(res->prefix));
	r |= set(o, "full_name", json_string(res->full_name));
	r |= set(o, "mode", json_string(rdp_resource_mode_name(res->mode)));
	/* serve --use-cdi: its spec's kind, or why it gets none. */
	r |= set(o, "cdi_kind", cdi_class && *cdi_class
					? json_sprintf("%s/%s", RDP_CDI_VENDOR, cdi_class)
					: json_null());
	r |= set(o, "cdi_problem", cdi_why ? json_string(cdi_why) : json_null());
	r |= set(o, "rdma_hca_max", res->mode == RDP_MODE_EXCLUSIVE
					    ? json_null()
					    : json_integer(res->rdma_hca_max));
	r |= set(o, "legacy_devices", json_boolean(res->legacy_devices));
	r |= set(o, "selectors", json_selectors(&res->sel));
	{
		json_t *env = json_object(), *from = json_array();

		for (size_t j = 0; j < res->n_env; j++)
			r |= set(env, res->env[j].name, json_string(res->env[j].value));
		for (unsigned int bit = 1; bit & RDP_ENV_FROM_ALL; bit <<= 1)
			if (res->env_from & bit)
				r |= push(from, json_string(rdp_env_from_name(bit)));
		r |= set(o, "env", env);
		r |= set(o, "env_from_devices", from);
	}
	for (size_t j = 0; j < h->n_devices && !r; j++) {
		const struct rdp_device *dev = &h->devices[j];
		json_t *d = json_object(), *keys = json_array();
		struct rdp_sel_explain ex;
		bool m = rdp_selectors_match(&res->sel, dev, &ex);

		r |= set(d, "name", json_string(dev->name));
		r |= set(d, "selected", json_boolean(m));
		r |= set(d, "usable", json_boolean(rdp_device_is_usable(dev)));
		r |= set(d, "unusable_reason", rdp_device_is_usable(dev)
							 ? json_null()
							 : json_string(dev->unusable_reason));
		for (int k = 0; k < RDP_SEL_KEY_MAX; k++)
			if (ex.result[k] != RDP_SEL_UNUSED)
				r |= push(keys, json_pack("{s:s, s:s, s:s}", "key",
							  rdp_sel_key_name(k), "result",
							  rdp_sel_result_name(ex.result[k]), "text",
							  ex.text[k]));
		r |= set(d, "keys", keys);
		r |= push(devs, d);
	}
	r |= set(o, "devices", devs);
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * "env" of a pool: "variables" a container gets (exclusive: given "example_unit" alone),
 * which of them are "constant" (the same for every container: in a CDI spec) and which
 * "per_allocation", and the computed ones "omitted" for want of a port carrying traffic.
 */
static json_t *json_pool_env(const struct rdp_host *h, const struct rdp_pool *p)
{
	const struct rdp_resource *res = p->res;
	json_t *o = json_object(), *vars = json_object(), *cons = json_array(),
	       *per = json_array(), *om = json_array();
	char unit[RDP_UNIT_ID_MAX];
	struct rdp_env e = {};
	int r = 0;

	if (pool_env(h, p, &e, unit, sizeof(unit)) < 0) {
		json_decref(vars);
		json_decref(cons);
		json_decref(per);
		json_decref(om);
		json_decref(o);
		return NULL;
	}
	for (size_t i = 0; i < e.n; i++) {
		char *eq = strchr(e.kv[i], '=');
		bool is_const = res->mode == RDP_MODE_SHARED || i >= e.n - res->n_env;
		json_t *name = json_stringn(e.kv[i], eq ? (size_t)(eq - e.kv[i]) : 0);

		if (!name || !eq) {
			json_decref(name);
			r = -ENOMEM;
			break;
		}
		r |= set(vars, json_string_value(name), json_string(eq + 1));
		r |= push(is_const ? cons : per, name);
	}
	for (unsigned int bit = 1; bit & RDP_ENV_FROM_ALL; bit <<= 1)
		if (e.omitted & bit)
			r |= push(om, json_string(rdp_env_from_name(bit)));
	r |= set(o, "variables", vars);
	r |= set(o, "constant", cons);
	r |= set(o, "per_allocation", per);
	r |= set(o, "example_unit", unit[0] ? json_string(unit) : json_null());
	r |= set(o, "omitted", om);
	rdp_env_done(&e);
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static json_t *json_pool(const struct rdp_pool *p, const struct rdp_host *h)
{
	json_t *o = json_object(), *devs = json_array(), *unusable = json_array();
	struct rdp_dp_state st = {.numa_node = -1};
	size_t active = 0, ports = 0, ports_active = 0;
	int r = 0;

	for (size_t j = 0; j < p->n_devices; j++) {
		const struct rdp_device *dev = &h->devices[p->devices[j]];
		size_t a, t;

		active_ports(dev, &a, &t);
		ports += t;
		ports_active += a;
		if (a)
			active++;
		r |= push(devs, json_string(dev->name));
	}
	r |= set(o, "resource", json_string(p->res->full_name));
	r |= set(o, "mode", json_string(rdp_resource_mode_name(p->res->mode)));
	r |= set(o, "devices", devs);
	r |= set(o, "numa_node", json_integer(p->numa_node));
	r |= set(o, "active_devices", json_integer((json_int_t)active));
	r |= set(o, "ports", json_integer((json_int_t)ports));
	r |= set(o, "active_ports", json_integer((json_int_t)ports_active));
	if (rdp_dp_state_build(h, p, &st) < 0) {
		json_decref(unusable);
		json_decref(o);
		return NULL;
	}
	/* What the daemon would serve: health counts usable devices only. */
	r |= set(o, "units", json_integer(st.units));
	if (st.mode == RDP_MODE_EXCLUSIVE) {
		json_t *uv = json_array();

		for (size_t j = 0; j < st.n_unit_v; j++) {
			const struct rdp_dp_unit *u = &st.unit_v[j];

			r |= push(uv, json_pack("{s:s, s:s, s:o, s:o, s:b}", "id", u->id, "device",
						u->device, "numa_node",
						u->numa_node >= 0 ? json_integer(u->numa_node)
								  : json_null(),
						"pcie_root",
						u->place.pcie_root[0] ? json_string(u->place.pcie_root)
								      : json_null(),
						"healthy", u->healthy));
		}
		r |= set(o, "unit_list", uv);
	}
	r |= set(o, "usable_devices", json_integer((json_int_t)st.n_usable));
	r |= set(o, "healthy", json_boolean(st.healthy));
	for (size_t j = 0; j < st.n_unusable && unusable; j++)
		r |= push(unusable, json_pack("{s:s, s:s}", "device", st.unusable[j].device,
					      "reason", st.unusable[j].reason));
	r |= set(o, "unusable", unusable);
	r |= set(o, "env", json_pool_env(h, p));
	rdp_dp_state_done(&st);
	if (r) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int json_report(const char *path, const struct rdp_config *c, const struct rdp_host *h,
		       const struct rdp_pools *pools, const struct rdp_diags *d)
{
	_cleanup_(cdi_names_done) struct cdi_names cdi = {0};
	json_t *o = json_object();
	int r = 0;

	if (c)
		(void)cdi_names(c, &cdi); /* out of memory: no CDI fields */
	r |= set(o, "config", json_string(path));
	r |= set(o, "valid", json_boolean(c != NULL));
	if (c) {
		json_t *res = json_array(), *pl = json_array();

		r |= set(o, "periodic_update_interval", json_integer(c->periodic_update_interval));
		for (size_t i = 0; i < c->n_resources && h; i++)
			r |= push(res, json_resource(&c->resources[i], h,
						     cdi.classes ? cdi.classes[i] : NULL,
						     cdi.why ? cdi.why[i] : NULL));
		r |= set(o, "resources", res);
		for (size_t i = 0; pools && i < pools->n; i++)
			r |= push(pl, json_pool(&pools->v[i], h));
		r |= set(o, "pools", pl);
	}
	r |= set(o, "diagnostics", json_diags(d));
	if (r) {
		json_decref(o);
		return -ENOMEM;
	}
	return cli_print_json(o);
}

int cmd_check_config(int argc, char **argv)
{
	const char *arg_config = RDP_DEFAULT_CONFIG_FILE, *arg_sysfs = RDP_DEFAULT_SYSFS_ROOT;
	const char *arg_dev = RDP_DEFAULT_DEV_ROOT;
	enum cli_output arg_output = CLI_OUTPUT_TABLE;
	struct rdp_diags diags = {};
	struct rdp_config *c = NULL;
	struct rdp_host *h = NULL;
	struct rdp_pools *pools = NULL;
	const struct cli_opt opts[] = {
		{"config-file", 'c', required_argument, "FILE", .str = &arg_config,
		 .help = "the config (default " RDP_DEFAULT_CONFIG_FILE ")"},
		CLI_OPT_SYSFS_ROOT(&arg_sysfs),
		CLI_OPT_DEV_ROOT(&arg_dev),
		{"output", 'o', required_argument, "FORMAT", .help = "text (default) or json"},
		{},
	};
	struct cli_parser p;
	int opt, r, ret = 1;

	cli_parser_init(&p, &check_config_cmd, opts, argc, argv);
	while ((opt = cli_next(&p)) > 0) {
		switch (opt) {
		case 'o':
			if (strcmp(p.arg, "text") == 0)
				arg_output = CLI_OUTPUT_TABLE;
			else if (cli_parse_output(cmd, p.arg, &arg_output) < 0)
				return 2;
			break;
		}
	}
	if (opt < 0)
		return p.exit;

	r = rdp_config_load_file(arg_config, &c, &diags);
	if (r == -ENOMEM) {
		fprintf(stderr, "rdma-dp %s: out of memory\n", cmd);
		goto out;
	}
	if (r < 0) {
		print_diags(stderr, &diags);
		fprintf(stderr, "rdma-dp %s: %s: invalid config (%zu error%s)\n", cmd, arg_config,
			diags.n_errors, diags.n_errors == 1 ? "" : "s");
		if (arg_output == CLI_OUTPUT_JSON)
			json_report(arg_config, NULL, NULL, NULL, &diags);
		goto out;
	}

	r = rdp_discover(arg_sysfs, arg_dev, &h);
	if (r < 0) {
		fprintf(stderr, "rdma-dp %s: cannot read the devices under '%s' and '%s': %s\n",
			cmd, arg_sysfs, arg_dev, strerror(-r));
		goto out;
	}
	r = rdp_pools_build(c, h, &pools, &diags);
	if (r == 0)
		r = rdp_env_check_pools(c, h, pools, &diags);
	if (r < 0) {
		fprintf(stderr, "rdma-dp %s: cannot build pools: %s\n", cmd, strerror(-r));
		goto out;
	}
	if (arg_output == CLI_OUTPUT_JSON) {
		r = json_report(arg_config, c, h, pools, &diags);
		if (r < 0) {
			fprintf(stderr, "rdma-dp %s: cannot write JSON: %s\n", cmd, strerror(-r));
			goto out;
		}
	} else {
		text_report(c, h, pools, &diags);
	}
	ret = fflush(stdout) == 0 ? 0 : 1;
out:
	rdp_pools_free(pools);
	rdp_host_free(h);
	rdp_config_free(c);
	rdp_diags_done(&diags);
	return ret;
}
