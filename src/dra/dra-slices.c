/* SPDX-License-Identifier: MIT */
#include "dra-slices.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
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
	size_t count, off = 0;
	json_t *arr;

	if (!n->driver || !rdp_dra_dns_subdomain(n->driver, RDP_DRA_DRIVER_MAX) ||
	    !n->node_name || !rdp_dra_dns_subdomain(n->node_name, RDP_DRA_NODE_NAME_MAX) ||
	    !n->node_uid || !n->node_uid[0] || generation < 0)
		return -EINVAL;
	count = (inv->n_devs + RDP_DRA_SLICE_MAX_DEVICES - 1) / RDP_DRA_SLICE_MAX_DEVICES;
	if (count == 0)
		count = 1;
	arr = json_array();
	if (!arr)
		return -ENOMEM;
	for (size_t i = 0; i < count; i++) {
		size_t k = inv->n_devs / count + (i < inv->n_devs % count);
		json_t *s = slice_new(n, generation, count, i), *devs;

		if (!s || json_array_append_new(arr, s) < 0)
			goto nomem;
		devs = json_object_get(json_object_get(s, "spec"), "devices");
		for (size_t j = 0; j < k; j++, off++) {
			json_t *d = rdp_dra_device_json(inv, &inv->devs[off], n->driver);

			if (!d || json_array_append_new(devs, d) < 0)
				goto nomem;
		}
	}
	*ret = arr;
	return 0;
nomem:
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

static bool same_devices(json_t *a, json_t *b)
{
	json_t *x = spec_get(a, "devices", NULL), *y = spec_get(b, "devices", NULL);

	if (json_array_size(x) == 0 && json_array_size(y) == 0)
		return true;
	return json_equal(x, y);
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
	return out;
fail:
	json_decref(out);
	return NULL;
}
