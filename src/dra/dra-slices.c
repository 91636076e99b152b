/* SPDX-License-Identifier: MIT */
#include "dra-slices.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "dra-health.h"
#include "macro.h"
#include "topology.h"

/* ---- names ---- */

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool rdp_dra_dns_label(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 63 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_lower_alnum(s[i]) && s[i] != '-')
			return false;
	return true;
}

/* A DNS subdomain of n bytes at s (not NUL-terminated). */
static bool subdomain_n(const char *s, size_t n, size_t max)
{
	size_t label = 0;

	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.') {
			if (label == 0 || !is_lower_alnum(s[i - 1]))
				return false;
			label = 0;
			continue;
		}
		if (!is_lower_alnum(c) && c != '-')
			return false;
		if (label == 0 && !is_lower_alnum(c))
			return false;
		if (++label > 63)
			return false;
	}
	return is_lower_alnum(s[n - 1]);
}

bool rdp_dra_dns_subdomain(const char *s, size_t max)
{
	return s && subdomain_n(s, strlen(s), max);
}

static uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 16777619u;
	}
	return h;
}

int rdp_dra_device_name(const struct rdp_device *d, char *buf, size_t len)
{
	char unit[RDP_UNIT_ID_MAX], raw[RDP_UNIT_ID_MAX + 8];
	size_t n = 0;

	if (len < RDP_DRA_NAME_MAX)
		return -ENOBUFS;
	rdp_device_unit_id(d, unit, sizeof(unit));
	n = (size_t)snprintf(raw, sizeof(raw), "%s", d->pci_address[0] ? "pci-" : "ib-");
	for (const char *p = unit; *p && n < sizeof(raw) - 1; p++) {
		char c = *p;

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		raw[n++] = is_lower_alnum(c) ? c : '-';
	}
	raw[n] = 0;
	if (n <= 63 && is_lower_alnum(raw[n - 1])) {
		memcpy(buf, raw, n + 1);
		return (int)n;
	}
	/* Cut, end with a letter or digit, then the hash: "-" + 8 hex digits. */
	n = n > 54 ? 54 : n;
	while (n > 0 && raw[n - 1] == '-')
		n--;
	raw[n] = 0;
	return snprintf(buf, len, "%s-%08x", raw, fnv1a(unit));
}

/* ---- inventory ---- */

static int cmp_dev(const void *a, const void *b)
{
	const struct rdp_dra_dev *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->host_index < y->host_index ? -1 : x->host_index > y->host_index;
}

void rdp_dra_inventory_done(struct rdp_dra_inventory *inv)
{
	if (!inv)
		return;
	for (size_t i = 0; i < inv->n_dropped; i++)
		rdp_free(inv->dropped[i]);
	rdp_free(inv->dropped);
	rdp_free(inv->devs);
	*inv = (struct rdp_dra_inventory){0};
}

int rdp_dra_inventory_build(const struct rdp_host *h, struct rdp_dra_inventory *inv)
{
	struct rdp_dra_inventory v = {.host = h};
	size_t n = 0;

	rdp_dra_inventory_done(inv);
	if (h->n_devices) {
		v.devs = rdp_calloc(h->n_devices, sizeof(*v.devs));
		v.dropped = rdp_calloc(h->n_devices, sizeof(*v.dropped));
		if (!v.devs || !v.dropped)
			goto nomem;
	}
	for (size_t i = 0; i < h->n_devices; i++) {
		if (!rdp_device_is_usable(&h->devices[i]))
			continue;
		rdp_dra_device_name(&h->devices[i], v.devs[n].name, sizeof(v.devs[n].name));
		v.devs[n].host_index = i;
		n++;
	}
	/* host order is ibdev name order: among equal names the first ibdev stays */
	if (n > 1)
		qsort(v.devs, n, sizeof(*v.devs), cmp_dev);
	for (size_t i = 0; i < n; i++) {
		if (v.n_devs && strcmp(v.devs[v.n_devs - 1].name, v.devs[i].name) == 0) {
			v.dropped[v.n_dropped] = rdp_strdup(h->devices[v.devs[i].host_index].name);
			if (!v.dropped[v.n_dropped])
				goto nomem;
			v.n_dropped++;
			continue;
		}
		v.devs[v.n_devs++] = v.devs[i];
	}
	*inv = v;
	return 0;
nomem:
	rdp_dra_inventory_done(&v);
	return -ENOMEM;
}

const struct rdp_dra_dev *rdp_dra_inventory_find(const struct rdp_dra_inventory *inv,
						 const char *name)
{
	size_t lo = 0, hi = inv->n_devs;

	if (!name)
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, inv->devs[mid].name);

		if (c == 0)
			return &inv->devs[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}

/* ---- device JSON ---- */

static int put(json_t *attrs, const char *name, const char *type, json_t *v)
{
	json_t *o;

	if (!v)
		return -ENOMEM;
	o = json_object();
	if (!o || json_object_set_new(o, type, v) < 0) {
		json_decref(o);
		return -ENOMEM;
	}
	return json_object_set_new(attrs, name, o) < 0 ? -ENOMEM : 0;
}

static int put_str(json_t *attrs, const char *name, const char *s)
{
	if (!s || !s[0] || strlen(s) > RDP_DRA_ATTR_STRING_MAX)
		return 0;
	return put(attrs, name, "string", json_string(s));
}

static int put_bool(json_t *attrs, const char *name, bool b)
{
	return put(attrs, name, "bool", json_boolean(b));
}

static int put_int(json_t *attrs, const char *name, long long i)
{
	return put(attrs, name, "int", json_integer(i));
}

/* "400 Gb/sec (4X NDR)" -> 400; -1 when it does not start with a number. */
static long long rate_gbps(const char *rate)
{
	char *end;
	long long v;

	if (rate[0] < '0' || rate[0] > '9')
		return -1;
	errno = 0;
	v = strtoll(rate, &end, 10);
	if (errno || end == rate)
		return -1;
	return v;
}

static const struct rdp_port *main_port(const struct rdp_device *d)
{
	for (size_t i = 0; i < d->n_ports; i++)
		if (rdp_port_state_is_active(d->ports[i].state))
			return &d->ports[i];
	return d->n_ports ? &d->ports[0] : NULL;
}

json_t *rdp_dra_device_json(const struct rdp_dra_inventory *inv, const struct rdp_dra_dev *dd,
			    const char *driver)
{
	const struct rdp_device *d = rdp_dra_dev_device(inv, dd);
	const struct rdp_port *p = main_port(d);
	struct rdp_topo_dev place = {0};
	json_t *dev = json_object(), *a = json_object();
	int r = 0;

	(void)driver;
	if (!dev || !a || json_object_set_new(dev, "name", json_string(dd->name)) < 0)
		goto fail;
	r |= put_bool(a, "rdma", true);
	r |= put_str(a, "ibdev", d->name);
	r |= put_str(a, "pciAddress", d->pci_address);
	if (d->numa_node >= 0)
		r |= put_int(a, "numaNode", d->numa_node);
	if (p && p->link_layer == RDP_LINK_INFINIBAND)
		r |= put_str(a, "linkLayer", "InfiniBand");
	else if (p && p->link_layer == RDP_LINK_ETHER)
		r |= put_str(a, "linkLayer", "Ethernet");
	if (p && rate_gbps(p->rate) >= 0)
		r |= put_int(a, "rateGbps", rate_gbps(p->rate));
	r |= put_str(a, "vendor", d->vendor);
	r |= put_str(a, "deviceId", d->device_id);
	if (d->n_netdevs)
		r |= put_str(a, "netdev", d->netdevs[0]);
	r |= put_bool(a, "isVf", d->is_vf);
	if (d->is_vf)
		r |= put_str(a, "pfPciAddress", d->pf_pci_address);
	r |= put_bool(a, "isSf", d->is_sf);
	r |= put_str(a, "nodeGuid", d->node_guid);
	r |= put_str(a, "fwVersion", d->fw_ver);
	if (r)
		goto fail;
	if (d->pci_address[0]) {
		if (rdp_topo_dev_of_device(d, &place) < 0)
			goto fail;
		r |= put_str(a, "resource.kubernetes.io/pcieRoot", place.pcie_root);
		rdp_topo_dev_done(&place);
		/* the device's own PCI address: an SF has none (pci_address is its PF's) */
		if (!d->is_sf)
			r |= put_str(a, "resource.kubernetes.io/pciBusID", d->pci_address);
	}
	if (r || json_object_set_new(dev, "attributes", a) < 0) {
		a = NULL;
		goto fail;
	}
	return dev;
fail:
	json_decref(a);
	json_decref(dev);
	return NULL;
}

/* ---- taints ---- */

static const char *const effect_names[] = {
	[RDP_DRA_TAINT_NO_SCHEDULE] = "NoSchedule",
	[RDP_DRA_TAINT_NO_EXECUTE] = "NoExecute",
	[RDP_DRA_TAINT_NONE] = "None",
	[RDP_DRA_TAINT_OFF] = "off",
};

const char *rdp_dra_taint_effect_name(enum rdp_dra_taint_effect e)
{
	return (size_t)e < ARRAY_SIZE(effect_names) ? effect_names[e] : "unknown";
}

int rdp_dra_taint_effect_parse(const char *s, enum rdp_dra_taint_effect *ret)
{
	for (size_t i = 0; s && i < ARRAY_SIZE(effect_names); i++)
		if (strcmp(s, effect_names[i]) == 0) {
			*ret = (enum rdp_dra_taint_effect)i;
			return 0;
		}
	return -EINVAL;
}

int rdp_dra_device_set_taints(json_t *dev, const struct rdp_device *d, const char *driver,
			      enum rdp_dra_taint_effect effect)
{
	struct rdp_dra_health h;
	char key[RDP_DRA_DRIVER_MAX + sizeof("/" RDP_DRA_PORT_DOWN_TAINT)];
	json_t *taints;

	json_object_del(dev, "taints");
	if (effect == RDP_DRA_TAINT_OFF || (size_t)effect >= ARRAY_SIZE(effect_names))
		return 0;
	/* the ports' verdict is the health stream's: one rule for kubelet and the scheduler */
	rdp_dra_health_of(d, &h);
	if (h.status != RDP_DRA_HEALTH_UNHEALTHY)
		return 0;
	snprintf(key, sizeof(key), "%s/%s", driver, RDP_DRA_PORT_DOWN_TAINT);
	taints = json_pack("[{s:s, s:s}]", "key", key, "effect", effect_names[effect]);
	if (!taints || json_object_set_new(dev, "taints", taints) < 0)
		return -ENOMEM;
	return 1;
}

/* ---- slices ---- */

int rdp_dra_slice_generate_name(const char *node_name, const char *driver, size_t index,
				char *buf, size_t len)
{
	char prefix[RDP_DRA_NODE_NAME_MAX + RDP_DRA_DRIVER_MAX + 2];
	size_t n;
	int k;

	if (index > 999)
		return -EINVAL;
	k = snprintf(prefix, sizeof(prefix), "%s-%s", node_name, driver);
	if (k < 0 || (size_t)k >= sizeof(prefix))
		return -EINVAL;
	/* "-NNN-" must survive the server's cut at RDP_DRA_GENERATE_NAME_MAX */
	n = strlen(prefix);
	if (n > RDP_DRA_GENERATE_NAME_MAX - 5)
		n = RDP_DRA_GENERATE_NAME_MAX - 5;
	while (n && (prefix[n - 1] == '-' || prefix[n - 1] == '.'))
		n--;
	prefix[n] = '\0';
	k = snprintf(buf, len, "%s-%03zu-", prefix, index);
	if (k < 0 || (size_t)k >= len)
		return -ENOBUFS;
	return k;
}

static json_t *slice_new(const struct rdp_dra_node *n, long long generation, size_t count,
			 size_t index)
{
	char gen_name[RDP_DRA_GENERATE_NAME_MAX + 1];
	json_t *s;

	if (rdp_dra_slice_generate_name(n->node_name, n->driver, index, gen_name,
					sizeof(gen_name)) < 0)
		return NULL;
	s = json_pack("{s:s, s:s, s:{s:s, s:[{s:s, s:s, s:s, s:s, s:b}]},"
			      " s:{s:s, s:s, s:{s:s, s:I, s:I}, s:[]}}",
			      "apiVersion", RDP_DRA_API_VERSION, "kind", "ResourceSlice",
			      "metadata", "generateName", gen_name,
			      "ownerReferences", "apiVersion", "v1", "kind", "Node", "name",
			      n->node_name, "uid", n->node_uid, "controller", 1,
			      "spec", "driver", n->driver, "nodeName", n->node_name, "pool", "name",
			      n->node_name, "generation", (json_int_t)generation,
			      "resourceSliceCount", (json_int_t)count, "devices");
	return s;
}

int rdp_dra_slices_build(const struct rdp_dra_node *n, const struct rdp_dra_inventory *inv,
			 long long generation, json_t **ret)
{
	size_t count, off = 0, max = RDP_DRA_SLICE_MAX_DEVICES;
	json_t *arr = NULL, *all;
	bool tainted = false;

	if (!n->driver || !rdp_dra_dns_subdomain(n->driver, RDP_DRA_DRIVER_MAX) ||
	    !n->node_name || !rdp_dra_dns_subdomain(n->node_name, RDP_DRA_NODE_NAME_MAX) ||
	    !n->node_uid || !n->node_uid[0] || generation < 0)
		return -EINVAL;
	/* the devices first: a taint lowers the slice size */
	all = json_array();
	if (!all)
		return -ENOMEM;
	for (size_t i = 0; i < inv->n_devs; i++) {
		json_t *d = rdp_dra_device_json(inv, &inv->devs[i], n->driver);
		int k;

		if (!d || json_array_append_new(all, d) < 0)
			goto nomem;
		k = rdp_dra_device_set_taints(d, rdp_dra_dev_device(inv, &inv->devs[i]), n->driver,
					      n->port_down_taint);
		if (k < 0)
			goto nomem;
		tainted = tainted || k > 0;
	}
	if (tainted)
		max = RDP_DRA_SLICE_MAX_DEVICES_TAINTED;
	count = (inv->n_devs + max - 1) / max;
	if (count == 0)
		count = 1;
	arr = json_array();
	if (!arr)
		goto nomem;
	for (size_t i = 0; i < count; i++) {
		size_t k = inv->n_devs / count + (i < inv->n_devs % count);
		json_t *s = slice_new(n, generation, count, i), *devs;

		if (!s || json_array_append_new(arr, s) < 0)
			goto nomem;
		devs = json_object_get(json_object_get(s, "spec"), "devices");
		for (size_t j = 0; j < k; j++, off++)
			if (json_array_append(devs, json_array_get(all, off)) < 0)
				goto nomem;
	}
	json_decref(all);
	*ret = arr;
	return 0;
nomem:
	json_decref(all);
	json_decref(arr);
	return -ENOMEM;
}

int rdp_dra_slices_set_generation(json_t *slices, long long generation)
{
	size_t i;
	json_t *s;

	if (!json_is_array(slices) || generation < 0)
		return -EINVAL;
	json_array_foreach(slices, i, s) {
		json_t *pool = json_object_get(json_object_get(s, "spec"), "pool");

		if (!json_is_object(pool) ||
		    json_object_set_new(pool, "generation", json_integer(generation)) < 0)
			return -EINVAL;
	}
	return 0;
}

/* ---- validation ---- */

static int fail(char *err, size_t len, const char *fmt, ...) _printf_(3, 4);
static int fail(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (err && len) {
		va_start(ap, fmt);
		vsnprintf(err, len, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static bool c_identifier(const char *s, size_t n)
{
	if (n == 0 || n > 32)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';

		if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}

/* An attribute or capacity name; *id gets the part after the prefix. */
static bool qualified_name(const char *s, const char **id)
{
	const char *slash = strchr(s, '/');

	if (!slash) {
		*id = s;
		return c_identifier(s, strlen(s));
	}
	*id = slash + 1;
	return subdomain_n(s, (size_t)(slash - s), 63) && c_identifier(slash + 1, strlen(slash + 1));
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Dot-separated identifiers of [0-9A-Za-z-]; numeric ones without leading zeros if num. */
static bool semver_ids(const char *s, size_t n, bool numeric_rule)
{
	size_t start = 0;

	if (n == 0)
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.') {
			char c = s[i];

			if (!is_digit(c) && !(c >= 'a' && c <= 'z') && !(c >= 'A' && c <= 'Z') &&
			    c != '-')
				return false;
			continue;
		}
		if (i == start)
			return false;
		if (numeric_rule) {
			bool all = true;

			for (size_t k = start; k < i; k++)
				all = all && is_digit(s[k]);
			if (all && i - start > 1 && s[start] == '0')
				return false;
		}
		start = i + 1;
	}
	return true;
}

static bool semver(const char *s)
{
	const char *p = s;

	for (int part = 0; part < 3; part++) {
		const char *b = p;

		while (is_digit(*p))
			p++;
		if (p == b || (p - b > 1 && *b == '0'))
			return false;
		if (part < 2 && *p++ != '.')
			return false;
	}
	if (*p == '-') {
		const char *b = ++p;

		while (*p && *p != '+')
			p++;
		if (!semver_ids(b, (size_t)(p - b), true))
			return false;
	}
	if (*p == '+') {
		p++;
		return semver_ids(p, strlen(p), false);
	}
	return *p == 0;
}

/* A resource.Quantity in canonical-ish form: [+-]digits[.digits][suffix]. */
static bool quantity(const char *s)
{
	static const char *const suffixes[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u",
					       "m", "k", "M", "G", "T", "P", "E"};
	const char *p = s;
	bool digits = false;

	if (strlen(s) > 64)
		return false;
	if (*p == '+' || *p == '-')
		p++;
	while (is_digit(*p))
		p++, digits = true;
	if (*p == '.') {
		p++;
		while (is_digit(*p))
			p++, digits = true;
	}
	if (!digits)
		return false;
	if (*p == 'e' || *p == 'E') {
		const char *q = p + 1;

		if (*q == '+' || *q == '-')
			q++;
		if (is_digit(*q)) {
			while (is_digit(*q))
				q++;
			if (*q == 0)
				return true;
		}
	}
	for (size_t i = 0; i < ARRAY_SIZE(suffixes); i++)
		if (strcmp(p, suffixes[i]) == 0)
			return true;
	return false;
}

/* The name qualified with the driver: "rdma" -> "<driver>/rdma". */
static void qualify(const char *name, const char *driver, char *buf, size_t len)
{
	if (strchr(name, '/'))
		snprintf(buf, len, "%s", name);
	else
		snprintf(buf, len, "%s/%s", driver, name);
}

/* A label value: at most 63 of [A-Za-z0-9_.-], alphanumeric first and last (empty: true). */
static bool label_value(const char *s, size_t n)
{
	if (n == 0)
		return true;
	if (n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');

		if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
			return false;
	}
	return true;
}

/* A label key (a taint's): [DNS subdomain <= 253 "/"] name, the name a non-empty label value. */
static bool label_key(const char *s)
{
	const char *slash = strchr(s, '/');

	if (!slash)
		return s[0] && label_value(s, strlen(s));
	return subdomain_n(s, (size_t)(slash - s), 253) && slash[1] &&
	       label_value(slash + 1, strlen(slash + 1));
}

static int check_taints(json_t *taints, size_t i, char *err, size_t len)
{
	json_t *t;
	size_t k;

	if (!json_is_array(taints))
		return fail(err, len, "spec.devices[%zu].taints: not an array", i);
	if (json_array_size(taints) > RDP_DRA_MAX_TAINTS)
		return fail(err, len, "spec.devices[%zu].taints: %zu taints, at most %d", i,
			    json_array_size(taints), RDP_DRA_MAX_TAINTS);
	json_array_foreach(taints, k, t) {
		const char *key = json_string_value(json_object_get(t, "key"));
		const char *effect = json_string_value(json_object_get(t, "effect"));
		json_t *value = json_object_get(t, "value"), *added = json_object_get(t, "timeAdded");

		if (!key || !label_key(key))
			return fail(err, len, "spec.devices[%zu].taints[%zu].key: not a label key",
				    i, k);
		if (value && (!json_is_string(value) ||
			      !label_value(json_string_value(value),
					   strlen(json_string_value(value)))))
			return fail(err, len, "spec.devices[%zu].taints[%zu].value: not a label value",
				    i, k);
		if (!effect || (strcmp(effect, "NoSchedule") && strcmp(effect, "NoExecute") &&
				strcmp(effect, "None")))
			return fail(err, len, "spec.devices[%zu].taints[%zu].effect: not NoSchedule, "
				    "NoExecute or None", i, k);
		if (added && !json_is_string(added) && !json_is_null(added))
			return fail(err, len, "spec.devices[%zu].taints[%zu].timeAdded: not a time",
				    i, k);
	}
	return 0;
}

static int check_device(json_t *d, size_t i, const char *driver, char *err, size_t len)
{
	json_t *name = json_object_get(d, "name"), *attrs, *cap, *v;
	const char *key, *id;
	size_t n = 0;

	if (!json_is_object(d))
		return fail(err, len, "spec.devices[%zu]: not an object", i);
	if (!json_is_string(name) || !rdp_dra_dns_label(json_string_value(name)))
		return fail(err, len, "spec.devices[%zu].name: %s%s%s is not a DNS label", i,
			    json_is_string(name) ? "\"" : "",
			    json_is_string(name) ? json_string_value(name) : "(missing)",
			    json_is_string(name) ? "\"" : "");
	attrs = json_object_get(d, "attributes");
	cap = json_object_get(d, "capacity");
	if (attrs && !json_is_object(attrs))
		return fail(err, len, "spec.devices[%zu].attributes: not an object", i);
	if (cap && !json_is_object(cap))
		return fail(err, len, "spec.devices[%zu].capacity: not an object", i);
	if (json_object_get(d, "taints")) {
		int r = check_taints(json_object_get(d, "taints"), i, err, len);

		if (r < 0)
			return r;
	}
	n = json_object_size(attrs) + json_object_size(cap);
	if (n > RDP_DRA_MAX_ATTRIBUTES)
		return fail(err, len, "spec.devices[%zu]: %zu attributes and capacities, at most %d",
			    i, n, RDP_DRA_MAX_ATTRIBUTES);
	json_object_foreach(attrs, key, v) {
		static const char *const types[] = {"int", "bool", "string", "version"};
		const char *type = NULL;
		json_t *val = NULL;
		char q1[512], q2[512];
		const char *k2;
		json_t *v2;

		if (!qualified_name(key, &id))
			return fail(err, len, "spec.devices[%zu].attributes: \"%.80s\" is not a "
				    "C identifier <= 32 with an optional DNS subdomain prefix", i, key);
		if (!json_is_object(v) || json_object_size(v) != 1)
			return fail(err, len, "spec.devices[%zu].attributes[%s]: exactly one of int, "
				    "bool, string, version", i, key);
		for (size_t t = 0; t < ARRAY_SIZE(types); t++)
			if ((val = json_object_get(v, types[t]))) {
				type = types[t];
				break;
			}
		if (!type)
			return fail(err, len, "spec.devices[%zu].attributes[%s]: exactly one of int, "
				    "bool, string, version", i, key);
		if ((strcmp(type, "int") == 0 && !json_is_integer(val)) ||
		    (strcmp(type, "bool") == 0 && !json_is_boolean(val)) ||
		    (type[0] == 's' && !json_is_string(val)) ||
		    (type[0] == 'v' && !json_is_string(val)))
			return fail(err, len, "spec.devices[%zu].attributes[%s].%s: wrong JSON type",
				    i, key, type);
		if (json_is_string(val) && strlen(json_string_value(val)) > RDP_DRA_ATTR_STRING_MAX)
			return fail(err, len, "spec.devices[%zu].attributes[%s].%s: longer than %d",
				    i, key, type, RDP_DRA_ATTR_STRING_MAX);
		if (type[0] == 'v' && !semver(json_string_value(val)))
			return fail(err, len, "spec.devices[%zu].attributes[%s].version: not semver",
				    i, key);
		/* unique once qualified: "rdma" and "<driver>/rdma" are one name */
		qualify(key, driver, q1, sizeof(q1));
		json_object_foreach(attrs, k2, v2) {
			if (k2 == key)
				break;
			qualify(k2, driver, q2, sizeof(q2));
			if (strcmp(q1, q2) == 0)
				return fail(err, len, "spec.devices[%zu].attributes: \"%s\" and \"%s\" "
					    "are the same name", i, k2, key);
		}
	}
	json_object_foreach(cap, key, v) {
		json_t *val = json_object_get(v, "value");

		if (!qualified_name(key, &id))
			return fail(err, len, "spec.devices[%zu].capacity: \"%.80s\" is not a "
				    "C identifier <= 32 with an optional DNS subdomain prefix", i, key);
		if (!json_is_object(v) || !json_is_string(val) || !quantity(json_string_value(val)))
			return fail(err, len, "spec.devices[%zu].capacity[%s]: no valid value "
				    "quantity", i, key);
		if (json_object_get(attrs, key))
			return fail(err, len, "spec.devices[%zu]: \"%s\" is both an attribute and a "
				    "capacity", i, key);
	}
	return 0;
}

static bool pool_name(const char *s)
{
	size_t n = strlen(s), start = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i <= n; i++)
		if (i == n || s[i] == '/') {
			if (!subdomain_n(s + start, i - start, 253))
				return false;
			start = i + 1;
		}
	return true;
}

int rdp_dra_slice_check(json_t *slice, char *err, size_t len)
{
	json_t *meta, *spec, *pool, *devs, *v;
	const char *driver, *pname;
	int selectors = 0;
	size_t i;

	if (!json_is_object(slice))
		return fail(err, len, "not an object");
	if (!json_is_string(json_object_get(slice, "apiVersion")) ||
	    strcmp(json_string_value(json_object_get(slice, "apiVersion")), RDP_DRA_API_VERSION))
		return fail(err, len, "apiVersion: not \"%s\"", RDP_DRA_API_VERSION);
	if (!json_is_string(json_object_get(slice, "kind")) ||
	    strcmp(json_string_value(json_object_get(slice, "kind")), "ResourceSlice"))
		return fail(err, len, "kind: not \"ResourceSlice\"");
	meta = json_object_get(slice, "metadata");
	if (!json_is_object(meta))
		return fail(err, len, "metadata: missing");
	v = json_object_get(meta, "name");
	if (v ? !rdp_dra_dns_subdomain(json_string_value(v), 253)
	      : !json_is_string(json_object_get(meta, "generateName")))
		return fail(err, len, "metadata: no valid name or generateName");
	spec = json_object_get(slice, "spec");
	if (!json_is_object(spec))
		return fail(err, len, "spec: missing");
	driver = json_string_value(json_object_get(spec, "driver"));
	if (!driver || !rdp_dra_dns_subdomain(driver, RDP_DRA_DRIVER_MAX))
		return fail(err, len, "spec.driver: not a lower-case DNS subdomain <= %d",
			    RDP_DRA_DRIVER_MAX);
	v = json_object_get(spec, "nodeName");
	if (v) {
		if (!json_is_string(v) || !rdp_dra_dns_subdomain(json_string_value(v), 253))
			return fail(err, len, "spec.nodeName: not a node name");
		selectors++;
	}
	if (json_object_get(spec, "nodeSelector"))
		selectors++;
	if (json_is_true(json_object_get(spec, "allNodes")))
		selectors++;
	if (json_is_true(json_object_get(spec, "perDeviceNodeSelection")))
		selectors++;
	if (selectors != 1)
		return fail(err, len, "spec: exactly one of nodeName, nodeSelector, allNodes, "
			    "perDeviceNodeSelection (%d given)", selectors);
	pool = json_object_get(spec, "pool");
	if (!json_is_object(pool))
		return fail(err, len, "spec.pool: missing");
	pname = json_string_value(json_object_get(pool, "name"));
	if (!pname || !pool_name(pname))
		return fail(err, len, "spec.pool.name: not DNS subdomains joined by '/' <= 253");
	v = json_object_get(pool, "generation");
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return fail(err, len, "spec.pool.generation: not an integer >= 0");
	v = json_object_get(pool, "resourceSliceCount");
	if (!json_is_integer(v) || json_integer_value(v) <= 0)
		return fail(err, len, "spec.pool.resourceSliceCount: not an integer > 0");
	devs = json_object_get(spec, "devices");
	if (devs && !json_is_array(devs))
		return fail(err, len, "spec.devices: not an array");
	if (json_array_size(devs) > RDP_DRA_SLICE_MAX_DEVICES)
		return fail(err, len, "spec.devices: %zu devices, at most %d",
			    json_array_size(devs), RDP_DRA_SLICE_MAX_DEVICES);
	json_array_foreach(devs, i, v)
		if (json_array_size(json_object_get(v, "taints")) &&
		    json_array_size(devs) > RDP_DRA_SLICE_MAX_DEVICES_TAINTED)
			return fail(err, len, "spec.devices: %zu devices, at most %d with taints",
				    json_array_size(devs), RDP_DRA_SLICE_MAX_DEVICES_TAINTED);
	json_array_foreach(devs, i, v) {
		int r = check_device(v, i, driver, err, len);

		if (r < 0)
			return r;
		for (size_t k = 0; k < i; k++)
			if (json_equal(json_object_get(json_array_get(devs, k), "name"),
				       json_object_get(v, "name")))
				return fail(err, len, "spec.devices[%zu].name: \"%s\" twice", i,
					    json_string_value(json_object_get(v, "name")));
	}
	return 0;
}

/* ---- comparison ---- */

const char *rdp_dra_sync_action_name(enum rdp_dra_sync_action a)
{
	switch (a) {
	case RDP_DRA_SYNC_UNCHANGED:
		return "unchanged";
	case RDP_DRA_SYNC_UPDATE:
		return "update";
	case RDP_DRA_SYNC_RECREATE:
		return "recreate";
	}
	return "unknown";
}

static json_t *spec_get(json_t *s, const char *a, const char *b)
{
	json_t *v = json_object_get(json_object_get(s, "spec"), a);

	return b ? json_object_get(v, b) : v;
}

/* The found slice matches the desired one but for the generation and its devices. */
static bool same_frame(json_t *found, json_t *want)
{
	return json_equal(spec_get(found, "driver", NULL), spec_get(want, "driver", NULL)) &&
	       json_equal(spec_get(found, "nodeName", NULL), spec_get(want, "nodeName", NULL)) &&
	       json_equal(spec_get(found, "pool", "name"), spec_get(want, "pool", "name")) &&
	       json_equal(spec_get(found, "pool", "resourceSliceCount"),
			  spec_get(want, "pool", "resourceSliceCount")) &&
	       json_equal(json_object_get(json_object_get(found, "metadata"), "ownerReferences"),
			  json_object_get(json_object_get(want, "metadata"), "ownerReferences"));
}

/* Quantities: exact amounts in nano units (the API keeps nano precision). */
__extension__ typedef __int128 i128;

static bool quantity_nano(const char *s, i128 *ret)
{
	static const struct {
		const char *suffix;
		int e10, e2;
	} sfx[] = {{"", 0, 0},   {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},
		   {"M", 6, 0},  {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
		   {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50},
		   {"Ei", 0, 60}};
	const i128 lim = (i128)1 << 120;
	const char *p = s;
	bool digits = false, dot = false, known = false;
	int frac = 0, e10, e2 = 0, sign = 1;
	i128 v = 0;

	if (*p == '+' || *p == '-')
		sign = *p++ == '-' ? -1 : 1;
	for (; is_digit(*p) || (*p == '.' && !dot); p++) {
		if (*p == '.') {
			dot = true;
			continue;
		}
		if (v > lim / 10)
			return false;
		v = v * 10 + (*p - '0');
		digits = true;
		frac += dot;
	}
	if (!digits)
		return false;
	e10 = 9 - frac;
	if ((*p == 'e' || *p == 'E') && (is_digit(p[1]) || p[1] == '+' || p[1] == '-')) {
		char *end;
		long x;

		errno = 0;
		x = strtol(p + 1, &end, 10);
		if (errno || *end || end == p + 1 || x < -40 || x > 40)
			return false;
		e10 += (int)x;
		known = true;
	} else {
		for (size_t i = 0; i < ARRAY_SIZE(sfx) && !known; i++)
			if (strcmp(p, sfx[i].suffix) == 0) {
				e10 += sfx[i].e10;
				e2 = sfx[i].e2;
				known = true;
			}
	}
	if (!known)
		return false;
	for (; e10 > 0; e10--) {
		if (v > lim / 10)
			return false;
		v *= 10;
	}
	for (; e10 < 0; e10++) {
		if (v % 10)
			return false; /* finer than nano */
		v /= 10;
	}
	if (v > (lim >> e2))
		return false;
	*ret = sign * (v << e2);
	return true;
}

bool rdp_dra_quantity_equal(const char *a, const char *b)
{
	i128 x, y;

	if (!a || !b)
		return a == b;
	if (strcmp(a, b) == 0)
		return true;
	return quantity_nano(a, &x) && quantity_nano(b, &y) && x == y;
}

static bool is_empty(json_t *v)
{
	return !v || json_is_null(v) || json_is_false(v) ||
	       (json_is_array(v) && json_array_size(v) == 0) ||
	       (json_is_object(v) && json_object_size(v) == 0) ||
	       (json_is_string(v) && !json_string_value(v)[0]) ||
	       (json_is_integer(v) && json_integer_value(v) == 0);
}

/* found holds what want says (found-only keys ignored); quantities compared as amounts. */
static bool owned_value(json_t *found, json_t *want, bool quantities, int depth)
{
	const char *key;
	json_t *w;
	size_t i;

	if (depth > 16)
		return json_equal(found, want);
	if (json_is_object(want)) {
		if (!json_is_object(found))
			return false;
		json_object_foreach(want, key, w) {
			json_t *f = json_object_get(found, key);

			if (!f ? !is_empty(w) : !owned_value(f, w, quantities, depth + 1))
				return false;
		}
		return true;
	}
	if (json_is_array(want)) {
		if (!json_is_array(found) || json_array_size(found) != json_array_size(want))
			return false;
		json_array_foreach(want, i, w)
			if (!owned_value(json_array_get(found, i), w, quantities, depth + 1))
				return false;
		return true;
	}
	if (quantities && json_is_string(want) && json_is_string(found))
		return rdp_dra_quantity_equal(json_string_value(found), json_string_value(want));
	return json_equal(found, want);
}

/* A map of names (attributes, capacity): the same names, each value owned_value(). */
static bool owned_map(json_t *found, json_t *want, bool quantities)
{
	const char *key;
	json_t *v;

	if (is_empty(found) && is_empty(want))
		return true;
	if (!json_is_object(found) || !json_is_object(want) ||
	    json_object_size(found) != json_object_size(want))
		return false;
	json_object_foreach(want, key, v)
		if (!json_object_get(found, key) ||
		    !owned_value(json_object_get(found, key), v, quantities, 0))
			return false;
	return true;
}

static bool owned_device(json_t *found, json_t *want)
{
	static const char *const owned[] = {"attributes", "capacity", "taints",
					    "allowMultipleAllocations"};
	const char *key;
	json_t *w;

	if (!json_is_object(found) || !json_is_object(want))
		return false;
	if (!owned_map(json_object_get(found, "attributes"), json_object_get(want, "attributes"),
		       false) ||
	    !owned_map(json_object_get(found, "capacity"), json_object_get(want, "capacity"),
		       true))
		return false;
	for (size_t i = 2; i < ARRAY_SIZE(owned); i++) {
		json_t *f = json_object_get(found, owned[i]);

		w = json_object_get(want, owned[i]);
		if (is_empty(f) && is_empty(w))
			continue;
		if (!f || !w || !owned_value(f, w, false, 0))
			return false;
	}
	json_object_foreach(want, key, w) {
		json_t *f = json_object_get(found, key);
		bool is_owned = false;

		for (size_t i = 0; i < ARRAY_SIZE(owned); i++)
			is_owned = is_owned || strcmp(key, owned[i]) == 0;
		if (is_owned)
			continue;
		if (!f ? !is_empty(w) : !owned_value(f, w, false, 0))
			return false;
	}
	return true;
}

bool rdp_dra_devices_owned_equal(json_t *found, json_t *desired)
{
	size_t i;
	json_t *w;

	if (json_array_size(found) != json_array_size(desired))
		return false;
	json_array_foreach(desired, i, w)
		if (!owned_device(json_array_get(found, i), w))
			return false;
	return true;
}

static bool same_devices(json_t *a, json_t *b)
{
	return rdp_dra_devices_owned_equal(spec_get(a, "devices", NULL),
					   spec_get(b, "devices", NULL));
}

/* found's name starts with desired's generateName (a split pool's slices sort by index). */
static bool named_as(json_t *found, json_t *desired)
{
	const char *name = json_string_value(json_object_get(json_object_get(found, "metadata"),
							     "name"));
	const char *gen = json_string_value(json_object_get(json_object_get(desired, "metadata"),
							    "generateName"));

	return name && gen && strncmp(name, gen, strlen(gen)) == 0;
}

int rdp_dra_slices_compare(json_t *found, json_t *desired, struct rdp_dra_sync *ret)
{
	size_t nf = json_array_size(found), nd = json_array_size(desired), i;
	long long gen = -1;
	bool mixed = false, malformed = false, all_match;
	bool used[RDP_DRA_MAX_SLICES] = {0};
	json_t *s;

	if (!json_is_array(desired) || nd == 0 || nd > RDP_DRA_MAX_SLICES)
		return -EINVAL;
	json_array_foreach(desired, i, s)
		if (!json_is_object(spec_get(s, "pool", NULL)))
			return -EINVAL;
	if (found && !json_is_array(found))
		return -EINVAL;
	if (nf > RDP_DRA_MAX_SLICES)
		return -E2BIG;
	if (nf == 0) {
		*ret = (struct rdp_dra_sync){.action = RDP_DRA_SYNC_RECREATE, .generation = 1};
		return 0;
	}
	json_array_foreach(found, i, s) {
		json_t *g = spec_get(s, "pool", "generation");

		if (!json_is_integer(g) || json_integer_value(g) < 0 ||
		    !json_is_string(json_object_get(json_object_get(s, "metadata"), "name"))) {
			malformed = true;
			continue;
		}
		if (gen >= 0 && json_integer_value(g) != gen)
			mixed = true;
		if (json_integer_value(g) > gen)
			gen = json_integer_value(g);
	}
	if (gen < 0)
		gen = 0;
	if (gen >= (long long)INT64_MAX - 1)
		gen = 0; /* a hostile generation: start over rather than overflow */
	all_match = !malformed && !mixed && nf == nd;
	json_array_foreach(desired, i, s) {
		bool hit = false;

		if (!all_match)
			break;
		for (size_t k = 0; k < nf && !hit; k++) {
			json_t *f = json_array_get(found, k);

			if (!used[k] && same_frame(f, s) && same_devices(f, s) &&
			    (nd == 1 || named_as(f, s)))
				used[k] = hit = true;
		}
		all_match = hit;
	}
	if (all_match)
		*ret = (struct rdp_dra_sync){.action = RDP_DRA_SYNC_UNCHANGED, .generation = gen};
	else if (nf == 1 && nd == 1 && !malformed)
		*ret = (struct rdp_dra_sync){.action = RDP_DRA_SYNC_UPDATE, .generation = gen};
	else
		*ret = (struct rdp_dra_sync){.action = RDP_DRA_SYNC_RECREATE,
					     .generation = gen + 1};
	return 0;
}

static bool same_taint(json_t *a, json_t *b)
{
	json_t *va = json_object_get(a, "value"), *vb = json_object_get(b, "value");

	return json_equal(json_object_get(a, "key"), json_object_get(b, "key")) &&
	       json_equal(json_object_get(a, "effect"), json_object_get(b, "effect")) &&
	       (is_empty(va) ? is_empty(vb) : json_equal(va, vb));
}

/* Each desired taint without timeAdded gets the found one's (same device, same taint). */
static int keep_time_added(json_t *devs, json_t *found_devs)
{
	size_t i, j, k;
	json_t *d, *f, *t;

	json_array_foreach(devs, i, d) {
		json_t *taints = json_object_get(d, "taints"), *ft = NULL;

		if (!json_array_size(taints))
			continue;
		json_array_foreach(found_devs, j, f)
			if (json_equal(json_object_get(f, "name"), json_object_get(d, "name"))) {
				ft = json_object_get(f, "taints");
				break;
			}
		json_array_foreach(taints, k, t) {
			size_t m;
			json_t *x;

			if (json_object_get(t, "timeAdded"))
				continue;
			json_array_foreach(ft, m, x) {
				json_t *added = json_object_get(x, "timeAdded");

				if (json_is_string(added) && same_taint(t, x)) {
					if (json_object_set(t, "timeAdded", added) < 0)
						return -ENOMEM;
					break;
				}
			}
		}
	}
	return 0;
}

json_t *rdp_dra_slice_for_update(json_t *desired, json_t *found)
{
	json_t *fm = json_object_get(found, "metadata"), *out, *meta;
	json_t *name = json_object_get(fm, "name"), *rv = json_object_get(fm, "resourceVersion");

	if (!json_is_string(name))
		return NULL;
	out = json_deep_copy(desired);
	meta = json_object_get(out, "metadata");
	if (!out || !json_is_object(meta))
		goto fail;
	json_object_del(meta, "generateName");
	if (json_object_set(meta, "name", name) < 0)
		goto fail;
	if (json_is_string(rv) && json_object_set(meta, "resourceVersion", rv) < 0)
		goto fail;
	if (keep_time_added(spec_get(out, "devices", NULL), spec_get(found, "devices", NULL)) < 0)
		goto fail;
	return out;
fail:
	json_decref(out);
	return NULL;
}
