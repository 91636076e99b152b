/* SPDX-License-Identifier: MIT */
#include "selector.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "macro.h"

static const char *const key_names[RDP_SEL_KEY_MAX] = {
	[RDP_SEL_VENDORS] = "vendors",         [RDP_SEL_DEVICE_IDS] = "deviceIDs",
	[RDP_SEL_DRIVERS] = "drivers",         [RDP_SEL_IF_NAMES] = "ifNames",
	[RDP_SEL_LINK_TYPES] = "linkTypes",    [RDP_SEL_PF_NAMES] = "pfNames",
	[RDP_SEL_ROOT_DEVICES] = "rootDevices", [RDP_SEL_NUMA_NODES] = "numaNodes",
};

const char *rdp_sel_key_name(enum rdp_sel_key k)
{
	return (unsigned int)k < RDP_SEL_KEY_MAX ? key_names[k] : NULL;
}

const char *rdp_sel_result_name(enum rdp_sel_result r)
{
	switch (r) {
	case RDP_SEL_MATCH:
		return "match";
	case RDP_SEL_NO_MATCH:
		return "no-match";
	case RDP_SEL_UNUSED:
		break;
	}
	return "unused";
}

enum rdp_link_layer rdp_link_type_parse(const char *s)
{
	if (strcasecmp(s, "infiniband") == 0 || strcasecmp(s, "ib") == 0)
		return RDP_LINK_INFINIBAND;
	if (strcasecmp(s, "ether") == 0 || strcasecmp(s, "ethernet") == 0 ||
	    strcasecmp(s, "eth") == 0)
		return RDP_LINK_ETHER;
	return RDP_LINK_UNKNOWN;
}

char *rdp_pf_selector_format(const struct rdp_pf_selector *p, char *buf, size_t size)
{
	size_t n;

	if (!size)
		return buf;
	snprintf(buf, size, "%s", p->name);
	for (size_t i = 0; i < p->n_ranges; i++) {
		n = strlen(buf);
		if (p->ranges[i].lo == p->ranges[i].hi)
			snprintf(buf + n, size - n, "%c%u", i ? ',' : '#', p->ranges[i].lo);
		else
			snprintf(buf + n, size - n, "%c%u-%u", i ? ',' : '#', p->ranges[i].lo,
				 p->ranges[i].hi);
	}
	return buf;
}

/* A bounded string builder: appends what fits, then ends in "..." when something was cut. */
struct sbuf {
	char *s;
	size_t size, n;
	bool cut;
};

static _printf_(2, 3) void sb_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (b->cut || !b->size)
		return;
	va_start(ap, fmt);
	r = vsnprintf(b->s + b->n, b->size - b->n, fmt, ap);
	va_end(ap);
	if (r < 0)
		return;
	if ((size_t)r >= b->size - b->n) {
		b->cut = true;
		b->n = b->size - 1;
		if (b->size >= 4)
			memcpy(b->s + b->size - 4, "...", 4);
		return;
	}
	b->n += (size_t)r;
}

static void sb_list(struct sbuf *b, const struct rdp_strlist *l)
{
	sb_add(b, "[");
	for (size_t i = 0; i < l->n; i++)
		sb_add(b, "%s%s", i ? ", " : "", l->v[i]);
	sb_add(b, "]");
}

/* "no netdev" or "ib0,ib1", then " not in ": the start of a selector's miss on netdevs. */
static void sb_netdevs_not_in(struct sbuf *b, const struct rdp_device *d)
{
	if (!d->n_netdevs)
		sb_add(b, "no netdev");
	for (size_t i = 0; i < d->n_netdevs; i++)
		sb_add(b, "%s%s", i ? "," : "", d->netdevs[i]);
	sb_add(b, " not in ");
}

static bool strlist_has(const struct rdp_strlist *l, const char *s)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i], s) == 0)
			return true;
	return false;
}

struct eval {
	struct rdp_sel_explain *ex;
	struct sbuf b;
};

static void ev_begin(struct eval *ev, enum rdp_sel_key k)
{
	ev->b = (struct sbuf){ .s = ev->ex ? ev->ex->text[k] : NULL,
			       .size = ev->ex ? RDP_SEL_TEXT_MAX : 0 };
	if (ev->ex)
		ev->ex->text[k][0] = '\0';
	sb_add(&ev->b, "%s: ", key_names[k]);
}

static bool ev_end(struct eval *ev, enum rdp_sel_key k, bool match)
{
	if (ev->ex)
		ev->ex->result[k] = match ? RDP_SEL_MATCH : RDP_SEL_NO_MATCH;
	return match;
}

/* vendors, deviceIDs, drivers: one value of the device against a list. */
static bool eval_simple(struct eval *ev, enum rdp_sel_key k, const struct rdp_strlist *l,
			const char *value, const char *none)
{
	bool m = *value && strlist_has(l, value);

	ev_begin(ev, k);
	sb_add(&ev->b, "%s %s ", *value ? value : none, m ? "in" : "not in");
	sb_list(&ev->b, l);
	return ev_end(ev, k, m);
}

static bool eval_if_names(struct eval *ev, const struct rdp_selectors *s,
			  const struct rdp_device *d)
{
	enum rdp_sel_key k = RDP_SEL_IF_NAMES;

	ev_begin(ev, k);
	for (size_t i = 0; i < d->n_netdevs; i++)
		if (strlist_has(&s->if_names, d->netdevs[i])) {
			sb_add(&ev->b, "%s in ", d->netdevs[i]);
			sb_list(&ev->b, &s->if_names);
			return ev_end(ev, k, true);
		}
	sb_netdevs_not_in(&ev->b, d);
	sb_list(&ev->b, &s->if_names);
	return ev_end(ev, k, false);
}

static bool eval_link_types(struct eval *ev, const struct rdp_selectors *s,
			    const struct rdp_device *d)
{
	enum rdp_sel_key k = RDP_SEL_LINK_TYPES;

	ev_begin(ev, k);
	for (size_t i = 0; i < d->n_ports; i++) {
		enum rdp_link_layer ll = d->ports[i].link_layer;

		if (ll == RDP_LINK_UNKNOWN)
			continue;
		for (size_t j = 0; j < s->link_types.n; j++)
			if (rdp_link_type_parse(s->link_types.v[j]) == ll) {
				sb_add(&ev->b, "%s (port %u) in ", rdp_link_layer_name(ll),
				       d->ports[i].num);
				sb_list(&ev->b, &s->link_types);
				return ev_end(ev, k, true);
			}
	}
	if (!d->n_ports)
		sb_add(&ev->b, "no port");
	for (size_t i = 0; i < d->n_ports; i++)
		sb_add(&ev->b, "%s%s (port %u)", i ? ", " : "",
		       rdp_link_layer_name(d->ports[i].link_layer), d->ports[i].num);
	sb_add(&ev->b, " not in ");
	sb_list(&ev->b, &s->link_types);
	return ev_end(ev, k, false);
}

static void sb_pf_list(struct sbuf *b, const struct rdp_selectors *s)
{
	char tmp[RDP_SEL_TEXT_MAX];

	sb_add(b, "[");
	for (size_t i = 0; i < s->n_pf_names; i++)
		sb_add(b, "%s%s", i ? ", " : "",
		       rdp_pf_selector_format(&s->pf_names[i], tmp, sizeof(tmp)));
	sb_add(b, "]");
}

static bool vf_in_ranges(const struct rdp_pf_selector *p, int vf)
{
	if (vf < 0)
		return false;
	for (size_t i = 0; i < p->n_ranges; i++)
		if ((unsigned int)vf >= p->ranges[i].lo && (unsigned int)vf <= p->ranges[i].hi)
			return true;
	return false;
}

static bool eval_pf_names(struct eval *ev, const struct rdp_selectors *s,
			  const struct rdp_device *d)
{
	enum rdp_sel_key k = RDP_SEL_PF_NAMES;
	char tmp[RDP_SEL_TEXT_MAX];

	ev_begin(ev, k);
	if (d->is_vf) {
		for (size_t i = 0; i < s->n_pf_names; i++) {
			const struct rdp_pf_selector *p = &s->pf_names[i];

			if (!*d->pf_netdev || strcmp(p->name, d->pf_netdev) != 0)
				continue;
			if (p->n_ranges && !vf_in_ranges(p, d->vf_index))
				continue;
			sb_add(&ev->b, "VF %d of %s in %s", d->vf_index, d->pf_netdev,
			       rdp_pf_selector_format(p, tmp, sizeof(tmp)));
			return ev_end(ev, k, true);
		}
		if (d->vf_index >= 0)
			sb_add(&ev->b, "VF %d of %s not in ", d->vf_index,
			       *d->pf_netdev ? d->pf_netdev : "a PF without netdev");
		else
			sb_add(&ev->b, "VF (index unknown) of %s not in ",
			       *d->pf_netdev ? d->pf_netdev : "a PF without netdev");
		sb_pf_list(&ev->b, s);
		return ev_end(ev, k, false);
	}
	for (size_t i = 0; i < s->n_pf_names; i++) {
		const struct rdp_pf_selector *p = &s->pf_names[i];

		for (size_t j = 0; j < d->n_netdevs; j++) {
			if (strcmp(p->name, d->netdevs[j]) != 0)
				continue;
			if (p->n_ranges) {
				/* "ens3f0#0-1" selects VFs of ens3f0, not ens3f0 itself. */
				sb_add(&ev->b, "%s is the PF, %s selects only its VFs; not in ",
				       d->netdevs[j], rdp_pf_selector_format(p, tmp, sizeof(tmp)));
				sb_pf_list(&ev->b, s);
				return ev_end(ev, k, false);
			}
			sb_add(&ev->b, "%s in ", d->netdevs[j]);
			sb_pf_list(&ev->b, s);
			return ev_end(ev, k, true);
		}
	}
	sb_netdevs_not_in(&ev->b, d);
	sb_pf_list(&ev->b, s);
	return ev_end(ev, k, false);
}

static bool eval_root_devices(struct eval *ev, const struct rdp_selectors *s,
			      const struct rdp_device *d)
{
	enum rdp_sel_key k = RDP_SEL_ROOT_DEVICES;
	/* A VF whose PF is not visible (a VM's passthrough VF) is its own root. */
	bool via_pf = d->is_vf && *d->pf_pci_address;
	const char *root = via_pf ? d->pf_pci_address : d->pci_address;
	bool m = *root && strlist_has(&s->root_devices, root);

	ev_begin(ev, k);
	if (!*root)
		sb_add(&ev->b, "%s", "none (no PCI function)");
	else
		sb_add(&ev->b, "%s%s", root,
		       via_pf ? " (PF of this VF)" : d->is_vf ? " (VF, its PF not visible)" : "");
	sb_add(&ev->b, " %s ", m ? "in" : "not in");
	sb_list(&ev->b, &s->root_devices);
	return ev_end(ev, k, m);
}

static bool eval_numa(struct eval *ev, const struct rdp_selectors *s, const struct rdp_device *d)
{
	enum rdp_sel_key k = RDP_SEL_NUMA_NODES;
	bool m = false;

	for (size_t i = 0; i < s->n_numa_nodes && d->numa_node >= 0; i++)
		if (s->numa_nodes[i] == d->numa_node)
			m = true;
	ev_begin(ev, k);
	if (d->numa_node < 0)
		sb_add(&ev->b, "%d (unknown)", d->numa_node);
	else
		sb_add(&ev->b, "%d", d->numa_node);
	sb_add(&ev->b, " %s [", m ? "in" : "not in");
	for (size_t i = 0; i < s->n_numa_nodes; i++)
		sb_add(&ev->b, "%s%d", i ? ", " : "", s->numa_nodes[i]);
	sb_add(&ev->b, "]");
	return ev_end(ev, k, m);
}

bool rdp_selectors_empty(const struct rdp_selectors *s)
{
	return !s->vendors.n && !s->device_ids.n && !s->drivers.n && !s->if_names.n &&
	       !s->link_types.n && !s->root_devices.n && !s->n_pf_names && !s->n_numa_nodes;
}

bool rdp_selectors_match(const struct rdp_selectors *s, const struct rdp_device *d,
			 struct rdp_sel_explain *ret)
{
	struct eval ev = { .ex = ret };
	bool all = true;

	if (ret)
		memset(ret, 0, sizeof(*ret));
	if (rdp_selectors_empty(s))
		return false;
	/* Without an explanation to fill, stop at the first failing key. */
#define STEP(cond, call)                                                                           \
	do {                                                                                       \
		if ((cond) && (ret || all) && !(call))                                             \
			all = false;                                                               \
	} while (0)
	STEP(s->vendors.n, eval_simple(&ev, RDP_SEL_VENDORS, &s->vendors, d->vendor,
				       "none (no PCI function)"));
	STEP(s->device_ids.n, eval_simple(&ev, RDP_SEL_DEVICE_IDS, &s->device_ids, d->device_id,
					  "none (no PCI function)"));
	STEP(s->drivers.n, eval_simple(&ev, RDP_SEL_DRIVERS, &s->drivers, d->driver, "no driver"));
	STEP(s->if_names.n, eval_if_names(&ev, s, d));
	STEP(s->link_types.n, eval_link_types(&ev, s, d));
	STEP(s->n_pf_names, eval_pf_names(&ev, s, d));
	STEP(s->root_devices.n, eval_root_devices(&ev, s, d));
	STEP(s->n_numa_nodes, eval_numa(&ev, s, d));
#undef STEP
	return all;
}
