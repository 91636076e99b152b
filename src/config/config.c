/* SPDX-License-Identifier: MIT */
/*
 * config.json, validated strictly. jansson builds the values (and rejects what is not JSON);
 * config-pos.c says where each value is, so that every message carries file:line:column.
 * Validation goes on after an error, so one run lists every mistake in the file.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "config-pos.h"
#include "macro.h"
#include "memlock.h"
#include "quote.h"
#include "selector.h"

#define PATH_LEN 512
#define MAX_STRING 256 /* bytes in one name or ID: anything longer is a mistake */

struct ctx {
	const char *file;
	const struct rdp_json_index *idx;
	struct rdp_diags *d;
	int r; /* -ENOMEM once an allocation failed */
};

static const char *const top_keys[] = { "periodicUpdateInterval", "configList", NULL };
static const char *const resource_keys[] = { "resourceName", "resourcePrefix", "rdmaHcaMax",
					     "mode",         "selectors",      "devices",
					     "env",          "envFromDevices", "memlock",
					     "reportTopology", NULL };
static const char *const mode_names[] = { "shared", "exclusive", NULL };

/*
 * Keys other plugins or a first guess use for what "mode" says (the SR-IOV plugin has no
 * such key: it is always exclusive). Checked before the did-you-mean of unknown keys.
 */
static const struct {
	const char *key, *hint;
} key_aliases[] = {
	{ "exclusive", "write \"mode\": \"exclusive\" to give each pod its own devices" },
	{ "isExclusive", "write \"mode\": \"exclusive\" to give each pod its own devices" },
	{ "exclusiveMode", "write \"mode\": \"exclusive\" to give each pod its own devices" },
	{ "shared", "write \"mode\": \"shared\" (the default) or \"mode\": \"exclusive\"" },
	{ "sharing", "write \"mode\": \"shared\" (the default) or \"mode\": \"exclusive\"" },
	{ "sharingMode", "write \"mode\": \"shared\" (the default) or \"mode\": \"exclusive\"" },
	{ "allocationMode", "write \"mode\": \"shared\" (the default) or \"mode\": \"exclusive\"" },
	{ "resourceMode", "write \"mode\": \"shared\" (the default) or \"mode\": \"exclusive\"" },
	{ "envs", "constant variables go in \"env\": {\"NAME\": \"value\"}" },
	{ "environment", "constant variables go in \"env\": {\"NAME\": \"value\"}" },
	{ "extraEnv", "constant variables go in \"env\": {\"NAME\": \"value\"}" },
	{ "envVars", "constant variables go in \"env\": {\"NAME\": \"value\"}" },
	{ "variables", "constant variables go in \"env\": {\"NAME\": \"value\"}" },
	{ "ncclEnv", "variables computed from the devices go in \"envFromDevices\": "
		     "[\"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"]" },
	{ "setNcclEnv", "variables computed from the devices go in \"envFromDevices\": "
			"[\"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"]" },
	{ "setNcclIbHca", "variables computed from the devices go in \"envFromDevices\": "
			  "[\"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"]" },
	{ "envFromDevice", "variables computed from the devices go in \"envFromDevices\": "
			   "[\"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"]" },
	{ "computedEnv", "variables computed from the devices go in \"envFromDevices\": "
			 "[\"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"]" },
	{ "ulimit", "the locked-memory limit of the containers goes in \"memlock\": "
		    "\"unlimited\", a size such as \"1Gi\", or 0 to leave it alone" },
	{ "memlockLimit", "the locked-memory limit of the containers goes in \"memlock\": "
			  "\"unlimited\", a size such as \"1Gi\", or 0 to leave it alone" },
	{ "rlimitMemlock", "the locked-memory limit of the containers goes in \"memlock\": "
			   "\"unlimited\", a size such as \"1Gi\", or 0 to leave it alone" },
	{ "topology", "write \"reportTopology\": true for a shared pool to report its NUMA node "
		      "to kubelet" },
	{ "numaAware", "write \"reportTopology\": true for a shared pool to report its NUMA node "
		       "to kubelet" },
};

const char *rdp_resource_mode_name(enum rdp_resource_mode m)
{
	return m == RDP_MODE_EXCLUSIVE ? "exclusive" : "shared";
}
static const char *const selector_keys[] = { "vendors",   "deviceIDs", "devices",
					     "drivers",   "ifNames",   "linkTypes",
					     "pfNames",   "rootDevices", "numaNodes",
					     NULL };

static _printf_(5, 0) void vdiag(struct ctx *c, enum rdp_diag_level level, const char *path,
				  bool at_key, const char *fmt, va_list ap)
{
	struct rdp_json_pos k, v;
	char msg[1024];
	int r;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (rdp_json_index_find(c->idx, path, &k, &v))
		r = rdp_diags_add(c->d, level, "%s:%u:%u: %s: %s%s%s", c->file,
				  at_key ? k.line : v.line, at_key ? k.col : v.col,
				  rdp_diag_level_name(level), path, *path ? ": " : "", msg);
	else
		r = rdp_diags_add(c->d, level, "%s: %s: %s%s%s", c->file,
				  rdp_diag_level_name(level), path, *path ? ": " : "", msg);
	if (r == -ENOMEM)
		c->r = -ENOMEM;
}

/* Messages about a value point at the value; about a key (unknown, alias) at the key. */
static _printf_(3, 4) void error_v(struct ctx *c, const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdiag(c, RDP_DIAG_ERROR, path, false, fmt, ap);
	va_end(ap);
}

static _printf_(3, 4) void error_k(struct ctx *c, const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdiag(c, RDP_DIAG_ERROR, path, true, fmt, ap);
	va_end(ap);
}

static _printf_(3, 4) void warn_v(struct ctx *c, const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdiag(c, RDP_DIAG_WARNING, path, false, fmt, ap);
	va_end(ap);
}

static _printf_(3, 4) void warn_k(struct ctx *c, const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdiag(c, RDP_DIAG_WARNING, path, true, fmt, ap);
	va_end(ap);
}

static _printf_(3, 4) void note_v(struct ctx *c, const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdiag(c, RDP_DIAG_NOTE, path, false, fmt, ap);
	va_end(ap);
}

static _printf_(3, 4) void note_k(struct ctx *c, const char *path, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdiag(c, RDP_DIAG_NOTE, path, true, fmt, ap);
	va_end(ap);
}

/* s as a quoted, printable, bounded string for messages. */
static const char *q(const char *s, char buf[static 96])
{
	buf[0] = '"';
	rdp_printable(s, 80, buf + 1, 90);
	strcat(buf, "\"");
	return buf;
}

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "a list";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number with a fraction";
	case JSON_TRUE:
		return "true";
	case JSON_FALSE:
		return "false";
	case JSON_NULL:
		return "null";
	}
	return "?";
}

/* Optimal string alignment distance (edits and transpositions), capped at 3. */
static unsigned int distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned int d[3][65];

	if (la > 64 || lb > 64)
		return 3;
	if ((la > lb ? la - lb : lb - la) > 2)
		return 3;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned int)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned int *cur = d[i % 3], *prev = d[(i - 1) % 3], *prev2 = d[(i + 1) % 3];

		cur[0] = (unsigned int)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned int cost = a[i - 1] != b[j - 1];
			unsigned int m = prev[j] + 1;

			if (cur[j - 1] + 1 < m)
				m = cur[j - 1] + 1;
			if (prev[j - 1] + cost < m)
				m = prev[j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    prev2[j - 2] + 1 < m)
				m = prev2[j - 2] + 1;
			cur[j] = m;
		}
	}
	return d[la % 3][lb] > 3 ? 3 : d[la % 3][lb];
}

/* The candidate closest to s (case-insensitive equal, or at most 2 edits), or NULL. */
static const char *did_you_mean(const char *s, const char *const *cands)
{
	const char *best = NULL;
	unsigned int best_d = 3;

	for (size_t i = 0; cands[i]; i++) {
		unsigned int dd = strcasecmp(s, cands[i]) == 0 ? 0 : distance(s, cands[i]);

		/* One-letter keys are too short to guess from. */
		if (dd < best_d && (dd == 0 || strlen(s) > dd + 1)) {
			best = cands[i];
			best_d = dd;
		}
	}
	return best;
}

static bool in_list(const char *s, const char *const *l)
{
	for (size_t i = 0; l[i]; i++)
		if (strcmp(s, l[i]) == 0)
			return true;
	return false;
}

static void list_keys(char *buf, size_t size, const char *const *l)
{
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; l[i] && n < size; i++) {
		snprintf(buf + n, size - n, "%s%s", i ? ", " : "", l[i]);
		n = strlen(buf);
	}
}

/* An error at the key at key_path, naming the object it is in (parent). */
static _printf_(4, 5) void error_in(struct ctx *c, const char *parent, const char *key_path,
				    const char *fmt, ...)
{
	struct rdp_json_pos kp;
	char msg[1024];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (rdp_json_index_find(c->idx, key_path, &kp, NULL))
		r = rdp_diags_add(c->d, RDP_DIAG_ERROR, "%s:%u:%u: error: %s%s%s", c->file, kp.line,
				  kp.col, parent, *parent ? ": " : "", msg);
	else
		r = rdp_diags_add(c->d, RDP_DIAG_ERROR, "%s: error: %s%s%s", c->file, parent,
				  *parent ? ": " : "", msg);
	if (r == -ENOMEM)
		c->r = -ENOMEM;
}

/*
 * Every key of obj must be in allowed. A key from misplaced (it belongs one level down or
 * up) gets misplaced_hint; any other gets a did-you-mean, or the list of known keys.
 */
static void check_keys(struct ctx *c, json_t *obj, const char *path, const char *const *allowed,
		       const char *const *misplaced, const char *misplaced_hint)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v) {
		char p[PATH_LEN], b1[96], b2[96], all[256];
		const char *dym;

		if (in_list(key, allowed))
			continue;
		rdp_json_path_key(p, sizeof(p), path, key);
		if (misplaced && in_list(key, misplaced)) {
			error_in(c, path, p, "unknown key %s here: %s", q(key, b1), misplaced_hint);
			continue;
		}
		dym = NULL;
		for (size_t i = 0; allowed == resource_keys && i < ARRAY_SIZE(key_aliases); i++)
			if (strcasecmp(key, key_aliases[i].key) == 0)
				dym = key_aliases[i].hint;
		if (dym) {
			error_in(c, path, p, "unknown key %s: %s", q(key, b1), dym);
			continue;
		}
		dym = did_you_mean(key, allowed);
		if (dym) {
			error_in(c, path, p, "unknown key %s (did you mean %s?)", q(key, b1),
				 q(dym, b2));
			continue;
		}
		list_keys(all, sizeof(all), allowed);
		error_in(c, path, p, "unknown key %s (known keys: %s)", q(key, b1), all);
	}
}

/* An integer in [lo, hi]; hi_why explains the upper bound. Returns false after an error. */
static bool get_int(struct ctx *c, json_t *v, const char *path, long long lo, long long hi,
		    const char *hi_why, long long *ret)
{
	long long x;

	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		char *end = NULL;

		errno = 0;
		(void)strtoll(s, &end, 10);
		if (*s && end && !*end && !errno)
			error_v(c, path, "must be a number, not a string: write %s without quotes",
				s);
		else
			error_v(c, path, "must be an integer, not a string");
		return false;
	}
	if (json_is_real(v)) {
		error_v(c, path, "must be an integer, not %g", json_real_value(v));
		return false;
	}
	if (!json_is_integer(v)) {
		error_v(c, path, "must be an integer, not %s", type_name(v));
		return false;
	}
	x = json_integer_value(v);
	if (x < lo) {
		error_v(c, path, "must be at least %lld, not %lld", lo, x);
		return false;
	}
	if (x > hi) {
		error_v(c, path, "must be at most %lld, not %lld%s%s", hi, x, hi_why ? ": " : "",
			strempty(hi_why));
		return false;
	}
	*ret = x;
	return true;
}

/* A list of 1..RDP_CONFIG_MAX_LIST elements. */
static bool get_list(struct ctx *c, json_t *v, const char *path, const char *what)
{
	if (json_is_string(v)) {
		char b[96];

		error_v(c, path, "must be a list of %s: write [%s]", what,
			q(json_string_value(v), b));
		return false;
	}
	if (!json_is_array(v)) {
		error_v(c, path, "must be a list of %s, not %s", what, type_name(v));
		return false;
	}
	if (json_array_size(v) == 0) {
		error_v(c, path, "empty list: it would select nothing; remove the key or add %s",
			what);
		return false;
	}
	if (json_array_size(v) > RDP_CONFIG_MAX_LIST) {
		error_v(c, path, "too many entries (%zu, at most %d)", json_array_size(v),
			RDP_CONFIG_MAX_LIST);
		return false;
	}
	return true;
}

/* Element of a list of strings: must be a non-empty, bounded string. */
static const char *get_elem_string(struct ctx *c, json_t *e, const char *p)
{
	const char *s;

	if (json_is_integer(e)) {
		error_v(c, p, "must be a string: write \"%lld\"", json_integer_value(e));
		return NULL;
	}
	if (!json_is_string(e)) {
		error_v(c, p, "must be a string, not %s", type_name(e));
		return NULL;
	}
	s = json_string_value(e);
	if (!*s) {
		error_v(c, p, "empty string");
		return NULL;
	}
	if (strlen(s) > MAX_STRING) {
		error_v(c, p, "too long (%zu bytes, at most %d)", strlen(s), MAX_STRING);
		return NULL;
	}
	return s;
}

static bool is_hex(char ch)
{
	return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* vendors, deviceIDs: 4 hex digits; "0x15B3" is accepted as "15b3" with a warning. */
static char *norm_pci_id(struct ctx *c, const char *p, const char *s, const char *key)
{
	static const struct {
		const char *name, *id;
	} vendors[] = {
		{ "mellanox", "15b3" }, { "nvidia", "15b3" },   { "intel", "8086" },
		{ "broadcom", "14e4" }, { "chelsio", "1425" },  { "marvell", "1077" },
		{ "qlogic", "1077" },   { "amazon", "1d0f" },   { "huawei", "19e5" },
	};
	const char *h = s;
	char out[5], b[96];

	if (h[0] == '0' && (h[1] == 'x' || h[1] == 'X'))
		h += 2;
	if (strlen(h) != 4 || !is_hex(h[0]) || !is_hex(h[1]) || !is_hex(h[2]) || !is_hex(h[3])) {
		if (strcmp(key, "vendors") == 0)
			for (size_t i = 0; i < ARRAY_SIZE(vendors); i++)
				if (strcasecmp(s, vendors[i].name) == 0) {
					error_v(c, p, "%s is not a PCI vendor ID: %s devices have "
						"\"%s\" (see lspci -nn)", q(s, b), s, vendors[i].id);
					return NULL;
				}
		error_v(c, p, "%s is not a PCI ID: expected 4 hex digits such as \"%s\" (the "
			"[vvvv:dddd] of lspci -nn)", q(s, b),
			strcmp(key, "vendors") == 0 ? "15b3" : "101d");
		return NULL;
	}
	for (int i = 0; i < 4; i++)
		out[i] = (char)tolower((unsigned char)h[i]);
	out[4] = '\0';
	if (strcmp(out, s) != 0)
		warn_v(c, p, "%s read as \"%s\": write 4 lower-case hex digits without 0x "
		       "(k8s-rdma-shared-dev-plugin compares text exactly and would match nothing)",
		       q(s, b), out);
	return rdp_strdup(out);
}

/* A netdev name as the kernel accepts it (dev_valid_name). */
static bool valid_ifname(const char *s, const char **why)
{
	if (strlen(s) >= RDP_IFNAME_MAX) {
		*why = "is longer than 15 characters, the kernel's limit for interface names";
		return false;
	}
	if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
		*why = "is not an interface name";
		return false;
	}
	for (const char *t = s; *t; t++)
		if (*t == '/' || *t == ':' || isspace((unsigned char)*t) ||
		    (unsigned char)*t < 0x20) {
			*why = "is not an interface name: it cannot contain '/', ':' or spaces";
			return false;
		}
	return true;
}

static char *norm_ifname(struct ctx *c, const char *p, const char *s)
{
	const char *why;
	char b[96];

	if (!valid_ifname(s, &why)) {
		error_v(c, p, "%s %s", q(s, b), why);
		return NULL;
	}
	if (strpbrk(s, "*?["))
		warn_v(c, p, "%s is matched as an exact name: wildcards are not supported",
		       q(s, b));
	return rdp_strdup(s);
}

static char *norm_driver(struct ctx *c, const char *p, const char *s)
{
	char b[96];

	if (strlen(s) >= 64 || strpbrk(s, "/ \t\n")) {
		error_v(c, p,
			"%s is not a driver name (as in /sys/bus/pci/drivers, or rdma_rxe, siw)",
			q(s, b));
		return NULL;
	}
	return rdp_strdup(s);
}

static char *norm_link_type(struct ctx *c, const char *p, const char *s)
{
	static const char *const names[] = { "infiniband", "ib", "ether", "ethernet", "eth",
					     NULL };
	const char *dym;
	char b[96];

	if (rdp_link_type_parse(s) != RDP_LINK_UNKNOWN)
		return rdp_strdup(s);
	if (strcasecmp(s, "roce") == 0 || strcasecmp(s, "rocev2") == 0 ||
	    strcasecmp(s, "iwarp") == 0) {
		error_v(c, p, "%s is not a link type: RoCE and iWARP devices have link type "
			"\"ether\"", q(s, b));
		return NULL;
	}
	dym = did_you_mean(s, names);
	error_v(c, p, "%s is not a link type: expected \"infiniband\" (or \"ib\") or \"ether\" "
		"(or \"ethernet\", \"eth\")%s%s%s", q(s, b), dym ? "; did you mean \"" : "",
		dym ? dym : "", dym ? "\"?" : "");
	return NULL;
}

static bool parse_hex_field(const char *s, size_t n, unsigned long max, unsigned long *ret)
{
	unsigned long v = 0;

	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!is_hex(s[i]))
			return false;
		v = v * 16 + (unsigned long)(isdigit((unsigned char)s[i]) ? s[i] - '0' :
					     tolower((unsigned char)s[i]) - 'a' + 10);
		if (v > max)
			return false;
	}
	*ret = v;
	return true;
}

/* rootDevices: "dddd:bb:dd.f"; "bb:dd.f" means domain 0000. Returns the canonical form. */
static char *norm_pci_address(struct ctx *c, const char *p, const char *s)
{
	unsigned long dom = 0, bus, dev, fn;
	const char *colon1, *colon2, *dot;
	char out[RDP_PCI_ADDR_MAX], b[96];
	bool has_domain;

	colon1 = strchr(s, ':');
	colon2 = colon1 ? strchr(colon1 + 1, ':') : NULL;
	dot = strrchr(s, '.');
	has_domain = colon2 != NULL;
	if (!colon1 || !dot || dot < (has_domain ? colon2 : colon1) ||
	    (colon2 && strchr(colon2 + 1, ':')))
		goto bad;
	if (has_domain) {
		if (colon1 - s < 4 || colon1 - s > 8 ||
		    !parse_hex_field(s, (size_t)(colon1 - s), 0xffffffffUL, &dom))
			goto bad;
		s = colon1 + 1;
		colon1 = colon2;
	}
	if (colon1 - s != 2 || !parse_hex_field(s, 2, 0xff, &bus) || dot - colon1 - 1 != 2 ||
	    !parse_hex_field(colon1 + 1, 2, 0x1f, &dev) || strlen(dot + 1) != 1 ||
	    !parse_hex_field(dot + 1, 1, 7, &fn))
		goto bad;
	snprintf(out, sizeof(out), "%04lx:%02lx:%02lx.%lx", dom, bus, dev, fn);
	return rdp_strdup(out);
bad:
	error_v(c, p, "%s is not a PCI address: expected domain:bus:device.function such as "
		"\"0000:81:00.0\"", q(s, b));
	return NULL;
}

enum list_kind {
	LIST_PCI_ID,
	LIST_DRIVER,
	LIST_IFNAME,
	LIST_LINK_TYPE,
	LIST_PCI_ADDRESS,
};

static int parse_strlist(struct ctx *c, json_t *v, const char *path, const char *key,
			 enum list_kind kind, struct rdp_strlist *out)
{
	static const char *const what[] = {
		[LIST_PCI_ID] = "hex IDs such as \"15b3\"",
		[LIST_DRIVER] = "driver names",
		[LIST_IFNAME] = "interface names",
		[LIST_LINK_TYPE] = "link types (\"infiniband\", \"ether\")",
		[LIST_PCI_ADDRESS] = "PCI addresses such as \"0000:81:00.0\"",
	};
	size_t n, i;
	json_t *e;

	if (!get_list(c, v, path, what[kind]))
		return 0;
	n = json_array_size(v);
	out->v = rdp_calloc(n, sizeof(char *));
	if (!out->v)
		return c->r = -ENOMEM;
	json_array_foreach(v, i, e) {
		char p[PATH_LEN], *norm = NULL;
		const char *s;
		size_t before = c->d->n_errors;

		rdp_json_path_index(p, sizeof(p), path, i);
		s = get_elem_string(c, e, p);
		if (!s)
			continue;
		switch (kind) {
		case LIST_PCI_ID:
			norm = norm_pci_id(c, p, s, key);
			break;
		case LIST_DRIVER:
			norm = norm_driver(c, p, s);
			break;
		case LIST_IFNAME:
			norm = norm_ifname(c, p, s);
			break;
		case LIST_LINK_TYPE:
			norm = norm_link_type(c, p, s);
			break;
		case LIST_PCI_ADDRESS:
			if (!strchr(s, ':') || strchr(s, ':') == strrchr(s, ':')) {
				norm = norm_pci_address(c, p, s);
				if (norm) {
					char b[96];

					note_v(c, p, "%s read as \"%s\" (PCI domain 0000)", q(s, b),
					       norm);
				}
			} else {
				norm = norm_pci_address(c, p, s);
				if (norm && strcmp(norm, s) != 0) {
					char b[96];

					note_v(c, p, "%s read as \"%s\"", q(s, b), norm);
				}
			}
			break;
		}
		if (!norm) {
			if (c->d->n_errors == before)
				return c->r = -ENOMEM;
			continue;
		}
		out->v[out->n++] = norm;
	}
	return 0;
}

/* pfNames entry: "ens3f0" or "ens3f0#0-3,5". */
static int parse_pf_name(struct ctx *c, const char *p, const char *s, struct rdp_pf_selector *out)
{
	const char *hash = strchr(s, '#'), *why, *t;
	char name[RDP_IFNAME_MAX], b[96];
	size_t nlen = hash ? (size_t)(hash - s) : strlen(s);

	if (nlen == 0) {
		error_v(c, p, "%s has no interface name before '#'", q(s, b));
		return 0;
	}
	if (nlen > RDP_IFNAME_MAX - 1) {
		error_v(c, p, "%s: the interface name is longer than 15 characters", q(s, b));
		return 0;
	}
	memcpy(name, s, nlen);
	name[nlen] = '\0';
	if (!valid_ifname(name, &why)) {
		error_v(c, p, "%s: \"%s\" %s", q(s, b), name, why);
		return 0;
	}
	memcpy(out->name, name, nlen + 1);
	if (!hash)
		return 1;
	t = hash + 1;
	if (!*t) {
		error_v(c, p, "%s: expected VF indexes after '#', such as \"%s#0-3,5\"", q(s, b),
			name);
		return 0;
	}
	out->ranges = rdp_calloc(RDP_CONFIG_MAX_VF_RANGES, sizeof(*out->ranges));
	if (!out->ranges)
		return c->r = -ENOMEM;
	while (*t) {
		unsigned long lo, hi;
		char *end;

		if (out->n_ranges >= RDP_CONFIG_MAX_VF_RANGES) {
			error_v(c, p, "%s: too many VF ranges (at most %d)", q(s, b),
				RDP_CONFIG_MAX_VF_RANGES);
			return 0;
		}
		if (!isdigit((unsigned char)*t))
			goto bad;
		errno = 0;
		lo = strtoul(t, &end, 10);
		if (errno || lo > RDP_CONFIG_MAX_VF_INDEX)
			goto range;
		hi = lo;
		t = end;
		if (*t == '-') {
			t++;
			if (!isdigit((unsigned char)*t))
				goto bad;
			errno = 0;
			hi = strtoul(t, &end, 10);
			if (errno || hi > RDP_CONFIG_MAX_VF_INDEX)
				goto range;
			t = end;
			if (hi < lo) {
				error_v(c, p, "%s: the VF range %lu-%lu is reversed", q(s, b), lo, hi);
				return 0;
			}
		}
		out->ranges[out->n_ranges].lo = (unsigned int)lo;
		out->ranges[out->n_ranges].hi = (unsigned int)hi;
		out->n_ranges++;
		if (*t == ',') {
			t++;
			if (!*t)
				goto bad;
		} else if (*t) {
			goto bad;
		}
	}
	return 1;
range:
	error_v(c, p, "%s: VF index out of range (at most %d)", q(s, b), RDP_CONFIG_MAX_VF_INDEX);
	return 0;
bad:
	error_v(c, p, "%s: expected VF indexes and ranges after '#', such as \"%s#0-3,5\"", q(s, b),
		name);
	return 0;
}

static int parse_pf_names(struct ctx *c, json_t *v, const char *path, struct rdp_selectors *sel)
{
	size_t i;
	json_t *e;

	if (!get_list(c, v, path, "interface names (\"ens3f0\" or \"ens3f0#0-3\")"))
		return 0;
	sel->pf_names = rdp_calloc(json_array_size(v), sizeof(*sel->pf_names));
	if (!sel->pf_names)
		return c->r = -ENOMEM;
	json_array_foreach(v, i, e) {
		struct rdp_pf_selector *pf = &sel->pf_names[sel->n_pf_names];
		char p[PATH_LEN];
		const char *s;
		int r;

		rdp_json_path_index(p, sizeof(p), path, i);
		s = get_elem_string(c, e, p);
		if (!s)
			continue;
		r = parse_pf_name(c, p, s, pf);
		if (r < 0)
			return r;
		if (r == 0) {
			rdp_free(pf->ranges);
			memset(pf, 0, sizeof(*pf));
			continue;
		}
		sel->n_pf_names++;
	}
	return 0;
}

static int parse_numa_nodes(struct ctx *c, json_t *v, const char *path, struct rdp_selectors *sel)
{
	size_t i;
	json_t *e;

	if (!get_list(c, v, path, "NUMA node numbers"))
		return 0;
	sel->numa_nodes = rdp_calloc(json_array_size(v), sizeof(int));
	if (!sel->numa_nodes)
		return c->r = -ENOMEM;
	json_array_foreach(v, i, e) {
		char p[PATH_LEN];
		long long x;

		rdp_json_path_index(p, sizeof(p), path, i);
		if (get_int(c, e, p, 0, RDP_CONFIG_MAX_NUMA_NODE, "the kernel has at most 1024 nodes",
			    &x))
			sel->numa_nodes[sel->n_numa_nodes++] = (int)x;
	}
	return 0;
}

static int parse_selectors(struct ctx *c, json_t *obj, const char *path, struct rdp_selectors *sel)
{
	json_t *dev_ids = json_object_get(obj, "deviceIDs");
	json_t *alias = json_object_get(obj, "devices");
	const char *key;
	json_t *v;
	char b[96];

	if (!json_is_object(obj)) {
		error_v(c, path, "must be an object such as {\"ifNames\": [\"ib0\"]}, not %s",
			type_name(obj));
		return 0;
	}
	check_keys(c, obj, path, selector_keys, NULL, NULL);
	if (json_object_size(obj) == 0) {
		char all[256];

		list_keys(all, sizeof(all), selector_keys);
		error_v(c, path, "no selector: add at least one of %s", all);
		return 0;
	}
	if (dev_ids && alias) {
		char p[PATH_LEN];

		error_k(c, rdp_json_path_key(p, sizeof(p), path, "devices"),
			"both \"deviceIDs\" and its alias \"devices\": keep only \"deviceIDs\"");
	} else if (alias) {
		char p[PATH_LEN];

		warn_k(c, rdp_json_path_key(p, sizeof(p), path, "devices"),
		       "\"devices\" is read as \"deviceIDs\": write \"deviceIDs\" "
		       "(k8s-rdma-shared-dev-plugin ignores \"devices\" here and selects any device "
		       "ID)");
	}
	json_object_foreach(obj, key, v) {
		char p[PATH_LEN];
		int r = 0;

		rdp_json_path_key(p, sizeof(p), path, key);
		if (strcmp(key, "vendors") == 0)
			r = parse_strlist(c, v, p, key, LIST_PCI_ID, &sel->vendors);
		else if (strcmp(key, "deviceIDs") == 0 || (strcmp(key, "devices") == 0 && !dev_ids))
			r = parse_strlist(c, v, p, key, LIST_PCI_ID, &sel->device_ids);
		else if (strcmp(key, "drivers") == 0)
			r = parse_strlist(c, v, p, key, LIST_DRIVER, &sel->drivers);
		else if (strcmp(key, "ifNames") == 0)
			r = parse_strlist(c, v, p, key, LIST_IFNAME, &sel->if_names);
		else if (strcmp(key, "linkTypes") == 0)
			r = parse_strlist(c, v, p, key, LIST_LINK_TYPE, &sel->link_types);
		else if (strcmp(key, "rootDevices") == 0)
			r = parse_strlist(c, v, p, key, LIST_PCI_ADDRESS, &sel->root_devices);
		else if (strcmp(key, "pfNames") == 0)
			r = parse_pf_names(c, v, p, sel);
		else if (strcmp(key, "numaNodes") == 0)
			r = parse_numa_nodes(c, v, p, sel);
		if (r < 0)
			return r;
		if (strcmp(key, "pfNames") == 0 || strcmp(key, "rootDevices") == 0 ||
		    strcmp(key, "numaNodes") == 0)
			note_k(c, p, "k8s-rdma-shared-dev-plugin does not know %s and ignores it: "
			       "there the same config selects more devices", q(key, b));
	}
	return 0;
}

static bool valid_resource_name(struct ctx *c, const char *p, const char *s)
{
	size_t n = strlen(s);
	char b[96];

	if (!n) {
		error_v(c, p, "empty resource name");
		return false;
	}
	for (const char *t = s; *t; t++)
		if (!isalnum((unsigned char)*t) && *t != '_') {
			error_v(c, p, "%s: a resource name may contain only letters, digits and '_' "
				"(found '%c')", q(s, b), isprint((unsigned char)*t) ? *t : '?');
			return false;
		}
	if (n > RDP_RESOURCE_NAME_MAX) {
		error_v(c, p, "%s is longer than %d characters, Kubernetes' limit", q(s, b),
			RDP_RESOURCE_NAME_MAX);
		return false;
	}
	if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1])) {
		error_v(c, p, "%s must start and end with a letter or digit (Kubernetes rejects it "
			"otherwise)", q(s, b));
		return false;
	}
	return true;
}

/* A DNS subdomain (RFC 1123), as Kubernetes requires of resource prefixes. */
static bool valid_prefix(struct ctx *c, const char *p, const char *s)
{
	size_t n = strlen(s), label = 0;
	char b[96];

	if (n > RDP_RESOURCE_PREFIX_MAX)
		goto bad;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];

		if (ch == '.') {
			if (!label || s[i - 1] == '-')
				goto bad;
			label = 0;
			continue;
		}
		if (!(islower((unsigned char)ch) || isdigit((unsigned char)ch) || ch == '-'))
			goto bad;
		if (ch == '-' && !label)
			goto bad;
		if (++label > 63)
			goto bad;
	}
	if (!label || s[n - 1] == '-')
		goto bad;
	if (strcmp(s, "kubernetes.io") == 0 || (n > 14 && strcmp(s + n - 14, ".kubernetes.io") == 0)) {
		error_v(c, p, "%s: the kubernetes.io domain is reserved for Kubernetes' own resources",
			q(s, b));
		return false;
	}
	return true;
bad:
	error_v(c, p, "%s is not a valid resource prefix: expected a lower-case DNS name such as "
		"\"rdma\" or \"example.com\"", q(s, b));
	return false;
}

/* "mode": "shared" or "exclusive". Returns false after an error. */
static bool parse_mode(struct ctx *c, json_t *v, const char *p, enum rdp_resource_mode *ret)
{
	const char *s, *dym;
	char b[96];

	if (!json_is_string(v)) {
		error_v(c, p, "must be a string, \"shared\" or \"exclusive\", not %s",
			type_name(v));
		return false;
	}
	s = json_string_value(v);
	if (strcmp(s, "shared") == 0 || strcmp(s, "exclusive") == 0) {
		*ret = strcmp(s, "shared") == 0 ? RDP_MODE_SHARED : RDP_MODE_EXCLUSIVE;
		return true;
	}
	dym = did_you_mean(s, mode_names);
	if (!dym && (strcasecmp(s, "dedicated") == 0 || strcasecmp(s, "sriov") == 0 ||
		     strcasecmp(s, "single") == 0 || strcasecmp(s, "owned") == 0))
		dym = "exclusive";
	error_v(c, p, "%s is not a mode: expected \"shared\" (every pod gets every device of "
		"the pool, the default) or \"exclusive\" (each pod gets devices of its own)%s%s%s",
		q(s, b), dym ? "; did you mean \"" : "", dym ? dym : "", dym ? "\"?" : "");
	return false;
}

static const char *const env_from_names[] = { "NCCL_IB_HCA", "UCX_NET_DEVICES", NULL };

int rdp_env_resource_var(const char *full_name, char *buf, size_t size)
{
	static const char prefix[] = "RDMA_DEVICE_";
	size_t n = strlen(full_name), k = sizeof(prefix) - 1;

	if (!n)
		return -EINVAL;
	if (k + n + 1 > size || k + n > RDP_ENV_RESOURCE_VAR_MAX - 1)
		return -ENOBUFS;
	memcpy(buf, prefix, k);
	for (size_t i = 0; i < n; i++) {
		char ch = full_name[i];

		if (ch >= 'a' && ch <= 'z')
			ch = (char)(ch - 'a' + 'A');
		else if (!((ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')))
			ch = '_';
		buf[k + i] = ch;
	}
	buf[k + n] = '\0';
	return (int)(k + n);
}

const char *rdp_env_from_name(unsigned int bit)
{
	switch (bit) {
	case RDP_ENV_NCCL_IB_HCA:
		return "NCCL_IB_HCA";
	case RDP_ENV_UCX_NET_DEVICES:
		return "UCX_NET_DEVICES";
	}
	return NULL;
}

/*
 * Variables of NCCL and UCX that operators set per resource: a name one or two edits away
 * from one of these is likely a typo (a warning: any other name is still accepted).
 */
static const char *const known_vars[] = {
	"NCCL_IB_HCA",		"NCCL_IB_TC",		  "NCCL_IB_SL",
	"NCCL_IB_TIMEOUT",	"NCCL_IB_RETRY_CNT",	  "NCCL_IB_GID_INDEX",
	"NCCL_IB_ADDR_RANGE",	"NCCL_IB_ADDR_FAMILY",	  "NCCL_IB_ROCE_VERSION_NUM",
	"NCCL_IB_FIFO_TC",	"NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_SPLIT_DATA_ON_QPS",
	"NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_ADAPTIVE_ROUTING", "NCCL_IB_MERGE_NICS",
	"NCCL_IB_DISABLE",	"NCCL_NET_GDR_LEVEL",	  "NCCL_NET_GDR_READ",
	"NCCL_SOCKET_IFNAME",	"NCCL_SOCKET_FAMILY",	  "NCCL_TOPO_FILE",
	"NCCL_DEBUG",		"NCCL_DEBUG_SUBSYS",	  "NCCL_NET",
	"NCCL_NET_PLUGIN",	"NCCL_CROSS_NIC",	  "NCCL_ALGO",
	"NCCL_PROTO",		"NCCL_SHM_DISABLE",	  "NCCL_P2P_DISABLE",
	"UCX_NET_DEVICES",	"UCX_TLS",		  "UCX_IB_GID_INDEX",
	"UCX_IB_SL",		"UCX_IB_TRAFFIC_CLASS",	  "UCX_IB_ROCE_LOCAL_SUBNET",
	"UCX_IB_PCI_RELAXED_ORDERING", "UCX_LOG_LEVEL",	  "UCX_RNDV_THRESH",
	NULL
};

static bool valid_env_name(const char *s)
{
	if (!(isalpha((unsigned char)*s) || *s == '_'))
		return false;
	for (; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return false;
	return true;
}

/* "envFromDevices": ["NCCL_IB_HCA", "UCX_NET_DEVICES"]. */
static void parse_env_from(struct ctx *c, json_t *v, const char *path, unsigned int *ret)
{
	static const char all[] = "\"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"";
	size_t i;
	json_t *e;

	if (json_is_string(v)) {
		char b[96];

		error_v(c, path, "must be a list of variable names: write [%s]",
			q(json_string_value(v), b));
		return;
	}
	if (!json_is_array(v)) {
		error_v(c, path, "must be a list of variable names (%s), not %s", all, type_name(v));
		return;
	}
	if (json_array_size(v) == 0) {
		error_v(c, path, "empty list: it computes nothing; remove the key or add %s", all);
		return;
	}
	json_array_foreach(v, i, e) {
		char p[PATH_LEN], b[96];
		const char *s, *dym;
		unsigned int bit = 0;

		rdp_json_path_index(p, sizeof(p), path, i);
		if (!json_is_string(e)) {
			error_v(c, p, "must be a string (%s), not %s", all, type_name(e));
			continue;
		}
		s = json_string_value(e);
		for (unsigned int k = 0; env_from_names[k]; k++)
			if (strcmp(s, env_from_names[k]) == 0)
				bit = 1u << k;
		if (bit && (*ret & bit)) {
			error_v(c, p, "%s is listed twice", q(s, b));
			continue;
		}
		if (bit) {
			*ret |= bit;
			continue;
		}
		if (strcmp(s, "NCCL_IB_GID_INDEX") == 0) {
			error_v(c, p, "\"NCCL_IB_GID_INDEX\" cannot be computed: Allocate runs before "
				"the pod has an address, and NCCL >= 2.21 picks the GID itself; set "
				"NCCL_IB_ADDR_RANGE, NCCL_IB_ADDR_FAMILY or NCCL_IB_ROCE_VERSION_NUM "
				"in \"env\" if it needs help");
			continue;
		}
		if (strncmp(s, "RDMA_DEVICE_", 12) == 0) {
			error_v(c, p, "%s: RDMA_DEVICE_<RESOURCE> is always set, without asking",
				q(s, b));
			continue;
		}
		dym = did_you_mean(s, env_from_names);
		error_v(c, p, "%s is not a variable rdma-dp computes: expected one of %s%s%s%s%s", q(s, b),
			all, dym ? " (did you mean \"" : "", dym ? dym : "", dym ? "\"?)" : "",
			dym ? "" : "; constant variables go in \"env\"");
	}
}

/* "env": {"NCCL_IB_TC": "106"}. env_from: the resource's "envFromDevices", parsed first. */
static int parse_env(struct ctx *c, json_t *v, const char *path, unsigned int env_from,
		     struct rdp_resource *res)
{
	const char *key;
	json_t *val;

	if (json_is_array(v)) {
		error_v(c, path, "must be an object of names and values such as "
			"{\"NCCL_IB_TC\": \"106\"}, not a list (variables computed from the devices "
			"go in \"envFromDevices\")");
		return 0;
	}
	if (!json_is_object(v)) {
		error_v(c, path, "must be an object of names and values such as "
			"{\"NCCL_IB_TC\": \"106\"}, not %s", type_name(v));
		return 0;
	}
	if (json_object_size(v) == 0) {
		warn_v(c, path, "empty: it sets nothing; remove the key");
		return 0;
	}
	if (json_object_size(v) > RDP_ENV_MAX_VARS) {
		error_v(c, path, "too many variables (%zu, at most %d)", json_object_size(v),
			RDP_ENV_MAX_VARS);
		return 0;
	}
	res->env = rdp_calloc(json_object_size(v), sizeof(*res->env));
	if (!res->env)
		return c->r = -ENOMEM;
	json_object_foreach(v, key, val) {
		struct rdp_env_var *ev = &res->env[res->n_env];
		struct rdp_json_pos kp = {};
		char p[PATH_LEN], b[96], b2[96];
		const char *s, *dym;
		size_t len;

		rdp_json_path_key(p, sizeof(p), path, key);
		if (!*key) {
			error_k(c, p, "empty variable name");
			continue;
		}
		if (strlen(key) > RDP_ENV_NAME_MAX) {
			error_k(c, p, "variable name too long (%zu bytes, at most %d)", strlen(key),
				RDP_ENV_NAME_MAX);
			continue;
		}
		if (!valid_env_name(key)) {
			error_k(c, p, "%s is not a variable name: it must start with a letter or '_' "
				"and contain only letters, digits and '_'", q(key, b));
			continue;
		}
		if (strncmp(key, "RDMA_DEVICE_", 12) == 0) {
			error_k(c, p, "%s: names starting with RDMA_DEVICE_ are rdma-dp's own "
				"(RDMA_DEVICE_<RESOURCE> lists the devices a container got)", q(key, b));
			continue;
		}
		for (unsigned int k = 0; env_from_names[k]; k++)
			if ((env_from & (1u << k)) && strcmp(key, env_from_names[k]) == 0) {
				error_k(c, p, "%s is also in \"envFromDevices\", which computes it from "
					"the devices a container gets: remove one of them", q(key, b));
				key = NULL;
				break;
			}
		if (!key)
			continue;
		if (json_is_integer(val)) {
			error_v(c, p, "must be a string: write \"%lld\"", json_integer_value(val));
			continue;
		}
		if (json_is_real(val)) {
			error_v(c, p, "must be a string: write \"%g\"", json_real_value(val));
			continue;
		}
		if (json_is_boolean(val)) {
			error_v(c, p, "must be a string: write \"%s\"",
				json_is_true(val) ? "true" : "false");
			continue;
		}
		if (!json_is_string(val)) {
			error_v(c, p, "must be a string, not %s", type_name(val));
			continue;
		}
		s = json_string_value(val);
		len = json_string_length(val);
		if (len != strlen(s)) {
			error_v(c, p, "contains a NUL character (\\u0000)");
			continue;
		}
		if (len > RDP_ENV_VALUE_MAX) {
			error_v(c, p, "value too long (%zu bytes, at most %d)", len, RDP_ENV_VALUE_MAX);
			continue;
		}
		if (strpbrk(s, "\n\r")) {
			error_v(c, p, "contains a line break: a value must be one line");
			continue;
		}
		if (strcmp(key, "NCCL_IB_GID_INDEX") == 0)
			warn_k(c, p, "one GID index for every HCA and every pod, fixed before the pod "
			       "has an address: NCCL >= 2.21 picks the GID itself; to steer it, set "
			       "NCCL_IB_ADDR_RANGE, NCCL_IB_ADDR_FAMILY or NCCL_IB_ROCE_VERSION_NUM "
			       "instead");
		if (strcmp(key, "NCCL_IB_HCA") == 0 && s[s[0] == '^'] != '=') {
			char fixed[96];

			snprintf(fixed, sizeof(fixed), "%s=%s", s[0] == '^' ? "^" : "",
				 s + (s[0] == '^'));
			warn_v(c, p, "%s without a leading '=' matches prefixes (mlx5_1 also selects "
			       "mlx5_10..mlx5_19): write %s, or let \"envFromDevices\": "
			       "[\"NCCL_IB_HCA\"] compute it from the devices a container gets",
			       q(s, b), q(fixed, b2));
		}
		else if ((strncmp(key, "NCCL_", 5) == 0 || strncmp(key, "UCX_", 4) == 0) &&
			 !in_list(key, known_vars) && (dym = did_you_mean(key, known_vars)) &&
			 strcmp(dym, key) != 0)
			warn_k(c, p, "%s is not a variable NCCL or UCX is known to read (did you "
			       "mean %s?)", q(key, b), q(dym, b2));
		ev->name = rdp_strdup(key);
		ev->value = rdp_strdup(s);
		if (!ev->name || !ev->value) {
			rdp_free(ev->name);
			rdp_free(ev->value);
			ev->name = ev->value = NULL;
			return c->r = -ENOMEM;
		}
		if (rdp_json_index_find(c->idx, p, &kp, NULL)) {
			ev->line = kp.line;
			ev->col = kp.col;
		}
		res->n_env++;
	}
	return 0;
}

/* "memlock": "unlimited", a size ("1Gi", bytes), or 0. Returns false after an error. */
static bool parse_memlock(struct ctx *c, json_t *v, const char *p, uint64_t *ret)
{
	static const char what[] = "expected \"unlimited\" (the default), a size in bytes or "
				   "with Ki, Mi, Gi or Ti (\"64Gi\"), or 0 to leave the "
				   "container's limit alone";
	char b[96];
	int r;

	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0) {
			error_v(c, p, "must not be negative: %s", what);
			return false;
		}
		*ret = (uint64_t)json_integer_value(v);
		return true;
	}
	if (!json_is_string(v)) {
		error_v(c, p, "must be a string or an integer, not %s: %s", type_name(v), what);
		return false;
	}
	r = rdp_memlock_parse(json_string_value(v), ret);
	if (r == -ERANGE) {
		error_v(c, p, "%s is too large: %s", q(json_string_value(v), b), what);
		return false;
	}
	if (r < 0) {
		const char *s = json_string_value(v);
		const char *hint = strcasecmp(s, "unlimited") == 0 || strcasecmp(s, "infinity") == 0 ||
						   strcmp(s, "-1") == 0
					   ? "; did you mean \"unlimited\"?"
				   : strpbrk(s, "bB") || strpbrk(s, "kmgt") || strchr(s, '.')
					   ? " (binary units only, no fraction: \"512Mi\", "
					     "\"1Gi\")"
					   : "";

		error_v(c, p, "%s is not a memlock limit: %s%s", q(s, b), what, hint);
		return false;
	}
	return true;
}

static int parse_resource(struct ctx *c, json_t *obj, const char *path, struct rdp_resource *res,
			  const struct rdp_resource *prev, size_t n_prev)
{
	json_t *name = json_object_get(obj, "resourceName");
	json_t *prefix = json_object_get(obj, "resourcePrefix");
	json_t *hca = json_object_get(obj, "rdmaHcaMax");
	json_t *mode = json_object_get(obj, "mode");
	json_t *sel = json_object_get(obj, "selectors");
	bool mode_bad;
	json_t *legacy = json_object_get(obj, "devices");
	json_t *env = json_object_get(obj, "env");
	json_t *env_from = json_object_get(obj, "envFromDevices");
	json_t *memlock = json_object_get(obj, "memlock");
	json_t *topo = json_object_get(obj, "reportTopology");
	struct rdp_json_pos pos;
	char p[PATH_LEN], b[96];
	long long x;
	int r;

	if (rdp_json_index_find(c->idx, path, NULL, &pos))
		res->line = pos.line;
	if (!json_is_object(obj)) {
		error_v(c, path, "must be an object with \"resourceName\", \"rdmaHcaMax\" and "
			"\"selectors\", not %s", type_name(obj));
		return 0;
	}
	check_keys(c, obj, path, resource_keys, selector_keys,
		   "selector keys go inside \"selectors\": {...}");

	rdp_json_path_key(p, sizeof(p), path, "resourceName");
	if (!name) {
		error_v(c, path, "missing \"resourceName\" (the NAME in rdma/NAME that pods request)");
	} else if (!json_is_string(name)) {
		error_v(c, p, "must be a string, not %s", type_name(name));
	} else if (valid_resource_name(c, p, json_string_value(name))) {
		res->name = rdp_strdup(json_string_value(name));
		if (!res->name)
			return c->r = -ENOMEM;
		for (size_t i = 0; i < n_prev; i++)
			if (prev[i].name && strcmp(prev[i].name, res->name) == 0) {
				error_v(c, p, "%s is already the name of the resource at line %u "
					"(names must be unique: each gets its own kubelet socket)",
					q(res->name, b), prev[i].line);
				break;
			}
	}

	rdp_json_path_key(p, sizeof(p), path, "resourcePrefix");
	if (prefix && !json_is_string(prefix)) {
		error_v(c, p, "must be a string, not %s", type_name(prefix));
	} else if (prefix && !*json_string_value(prefix)) {
		warn_v(c, p, "empty: the default \"%s\" is used; remove the key",
		       RDP_DEFAULT_RESOURCE_PREFIX);
	} else if (prefix && valid_prefix(c, p, json_string_value(prefix))) {
		res->prefix = rdp_strdup(json_string_value(prefix));
		if (!res->prefix)
			return c->r = -ENOMEM;
	}
	if (!res->prefix) {
		res->prefix = rdp_strdup(RDP_DEFAULT_RESOURCE_PREFIX);
		if (!res->prefix)
			return c->r = -ENOMEM;
	}
	if (res->name) {
		res->full_name = rdp_asprintf("%s/%s", res->prefix, res->name);
		if (!res->full_name)
			return c->r = -ENOMEM;
	}

	rdp_json_path_key(p, sizeof(p), path, "mode");
	/* After a bad mode, which one was meant is unknown: rdmaHcaMax is not judged. */
	mode_bad = mode && !parse_mode(c, mode, p, &res->mode);
	if (mode && !mode_bad && res->mode == RDP_MODE_EXCLUSIVE)
		note_k(c, p, "k8s-rdma-shared-dev-plugin does not know \"mode\" and ignores it: "
		       "there this resource, without rdmaHcaMax, advertises nothing");

	rdp_json_path_key(p, sizeof(p), path, "rdmaHcaMax");
	if (res->mode == RDP_MODE_EXCLUSIVE) {
		if (hca)
			error_k(c, p, "has no meaning for an exclusive resource: its units are its "
				"devices, each given to one pod at a time, so there is no count to "
				"set; remove \"rdmaHcaMax\" (or, for pods to share the devices, "
				"write \"mode\": \"shared\")");
	} else if (mode_bad) {
		;
	} else if (!hca) {
		error_v(c, path, "missing \"rdmaHcaMax\", the number of pods that can share the "
			"devices (k8s-rdma-shared-dev-plugin takes 0 and advertises nothing)");
	} else if (get_int(c, hca, p, 0, RDP_CONFIG_MAX_RDMA_HCA_MAX,
			   "kubelet's 4 MiB message limit bounds how many units a plugin can "
			   "advertise", &x)) {
		res->rdma_hca_max = (unsigned int)x;
		if (x == 0)
			warn_v(c, p, "0: the resource is advertised with no units and no pod can "
			       "get it");
	}

	if (sel && legacy) {
		rdp_json_path_key(p, sizeof(p), path, "devices");
		error_k(c, p, "\"devices\" and \"selectors\" together: move the interface names to "
			"\"selectors\": {\"ifNames\": [...]}");
	} else if (sel) {
		rdp_json_path_key(p, sizeof(p), path, "selectors");
		r = parse_selectors(c, sel, p, &res->sel);
		if (r < 0)
			return r;
	} else if (legacy) {
		rdp_json_path_key(p, sizeof(p), path, "devices");
		warn_k(c, p, "\"devices\" is deprecated: write \"selectors\": {\"ifNames\": [...]}");
		res->legacy_devices = true;
		r = parse_strlist(c, legacy, p, "devices", LIST_IFNAME, &res->sel.if_names);
		if (r < 0)
			return r;
	} else {
		error_v(c, path, "no \"selectors\": a resource must say which devices it takes, "
			"e.g. \"selectors\": {\"ifNames\": [\"ib0\"]}");
	}

	res->memlock = RDP_MEMLOCK_UNLIMITED;
	if (memlock) {
		rdp_json_path_key(p, sizeof(p), path, "memlock");
		(void)parse_memlock(c, memlock, p, &res->memlock);
		note_k(c, p, "k8s-rdma-shared-dev-plugin does not know \"memlock\" and ignores it: "
		       "there containers keep the runtime's limit");
	}
	if (topo) {
		rdp_json_path_key(p, sizeof(p), path, "reportTopology");
		if (!json_is_boolean(topo))
			error_v(c, p, "must be true or false, not %s", type_name(topo));
		else if (res->mode == RDP_MODE_EXCLUSIVE && !mode_bad)
			error_k(c, p, "has no meaning for an exclusive resource: each of its units "
				"always reports its device's NUMA node; remove \"reportTopology\"");
		else
			res->report_topology = json_is_true(topo);
	}

	if (env_from) {
		rdp_json_path_key(p, sizeof(p), path, "envFromDevices");
		parse_env_from(c, env_from, p, &res->env_from);
		note_k(c, p, "k8s-rdma-shared-dev-plugin does not know \"envFromDevices\" and "
		       "ignores it: there containers get no such variables");
	}
	if (env) {
		rdp_json_path_key(p, sizeof(p), path, "env");
		r = parse_env(c, env, p, res->env_from, res);
		if (r < 0)
			return r;
		note_k(c, p, "k8s-rdma-shared-dev-plugin does not know \"env\" and ignores it: "
		       "there containers get no such variables");
	}
	return 0;
}

static const char *env_value(const struct rdp_resource *r, const char *name)
{
	for (size_t i = 0; i < r->n_env; i++)
		if (strcmp(r->env[i].name, name) == 0)
			return r->env[i].value;
	return NULL;
}

/*
 * Two resources that give the same variable to a container that gets both: kubelet merges
 * the answers of several device plugins first-wins, in map order, so which value the
 * container sees is not predictable. Warned at the later resource.
 */
static void check_env_clashes(struct ctx *c, const struct rdp_config *cfg)
{
	static const char why[] = "a container that gets both sees one of them (kubelet keeps "
				  "the first it meets); put the NICs a job uses in one resource";

	for (size_t j = 0; j < cfg->n_resources; j++) {
		const struct rdp_resource *b = &cfg->resources[j];
		char path[PATH_LEN], p[PATH_LEN], vb[RDP_ENV_RESOURCE_VAR_MAX];

		if (!b->full_name)
			continue;
		rdp_json_path_index(path, sizeof(path), "configList", j);
		for (size_t i = 0; i < j; i++) {
			const struct rdp_resource *a = &cfg->resources[i];
			char va[RDP_ENV_RESOURCE_VAR_MAX], q1[96], q2[96];

			if (!a->full_name)
				continue;
			if (rdp_env_resource_var(a->full_name, va, sizeof(va)) > 0 &&
			    rdp_env_resource_var(b->full_name, vb, sizeof(vb)) > 0 &&
			    strcmp(va, vb) == 0)
				warn_v(c, rdp_json_path_key(p, sizeof(p), path, "resourceName"),
				       "%s and %s (line %u) both list their devices in %s: %s",
				       b->full_name, a->full_name, a->line, va, why);
			for (unsigned int bit = 1; bit & RDP_ENV_FROM_ALL; bit <<= 1) {
				const char *name = rdp_env_from_name(bit), *av = env_value(a, name);

				if (!(b->env_from & bit))
					continue;
				rdp_json_path_key(p, sizeof(p), path, "envFromDevices");
				if (a->env_from & bit)
					warn_k(c, p, "%s is also computed by %s (line %u): %s",
					       q(name, q1), a->full_name, a->line, why);
				else if (av)
					warn_k(c, p, "%s is also set by %s (line %u), to %s: %s",
					       q(name, q1), a->full_name, a->line, q(av, q2), why);
			}
			for (size_t k = 0; k < b->n_env; k++) {
				const char *name = b->env[k].name, *av = env_value(a, name);
				char pe[PATH_LEN];

				rdp_json_path_key(p, sizeof(p), path, "env");
				rdp_json_path_key(pe, sizeof(pe), p, name);
				for (unsigned int bit = 1; bit & RDP_ENV_FROM_ALL; bit <<= 1)
					if ((a->env_from & bit) &&
					    strcmp(name, rdp_env_from_name(bit)) == 0)
						warn_k(c, pe, "%s is also computed by %s (line %u): %s",
						       q(name, q1), a->full_name, a->line, why);
				if (av && strcmp(av, b->env[k].value) != 0)
					warn_k(c, pe, "%s is also set by %s (line %u), to %s: %s",
					       q(name, q1), a->full_name, a->line, q(av, q2), why);
			}
		}
	}
}

static int validate(struct ctx *c, json_t *root, struct rdp_config *cfg)
{
	json_t *pui, *list, *e;
	long long x;
	size_t i;

	if (!json_is_object(root)) {
		error_v(c, "", "the top level must be an object with \"configList\", not %s",
			type_name(root));
		return 0;
	}
	check_keys(c, root, "", top_keys, resource_keys,
		   "resource keys go inside an entry of \"configList\": [{...}]");
	cfg->periodic_update_interval = RDP_DEFAULT_PERIODIC_UPDATE_INTERVAL;
	pui = json_object_get(root, "periodicUpdateInterval");
	if (pui && get_int(c, pui, "periodicUpdateInterval", 0,
			   RDP_CONFIG_MAX_PERIODIC_UPDATE_INTERVAL,
			   "it is in seconds, and a week is the longest accepted", &x)) {
		cfg->periodic_update_interval = (unsigned int)x;
		if (x == 0)
			note_v(c, "periodicUpdateInterval",
			       "0 turns periodic rescans off: devices that appear later are not seen");
	}
	list = json_object_get(root, "configList");
	if (!list) {
		error_v(c, "", "missing \"configList\", the list of resources");
		return 0;
	}
	if (!json_is_array(list)) {
		error_v(c, "configList", "must be a list of resources, not %s", type_name(list));
		return 0;
	}
	if (json_array_size(list) == 0) {
		error_v(c, "configList", "empty: at least one resource is needed");
		return 0;
	}
	if (json_array_size(list) > RDP_CONFIG_MAX_RESOURCES) {
		error_v(c, "configList", "too many resources (%zu, at most %d)", json_array_size(list),
			RDP_CONFIG_MAX_RESOURCES);
		return 0;
	}
	cfg->resources = rdp_calloc(json_array_size(list), sizeof(*cfg->resources));
	if (!cfg->resources)
		return c->r = -ENOMEM;
	json_array_foreach(list, i, e) {
		char p[PATH_LEN];
		int r;

		rdp_json_path_index(p, sizeof(p), "configList", i);
		cfg->n_resources = i + 1;
		r = parse_resource(c, e, p, &cfg->resources[i], cfg->resources, i);
		if (r < 0)
			return r;
	}
	check_env_clashes(c, cfg);
	return 0;
}

static void strlist_done(struct rdp_strlist *l)
{
	for (size_t i = 0; i < l->n; i++)
		rdp_free(l->v[i]);
	rdp_free(l->v);
}

static void selectors_done(struct rdp_selectors *s)
{
	strlist_done(&s->vendors);
	strlist_done(&s->device_ids);
	strlist_done(&s->drivers);
	strlist_done(&s->if_names);
	strlist_done(&s->link_types);
	strlist_done(&s->root_devices);
	for (size_t i = 0; i < s->n_pf_names; i++)
		rdp_free(s->pf_names[i].ranges);
	rdp_free(s->pf_names);
	rdp_free(s->numa_nodes);
}

struct rdp_config *rdp_config_free(struct rdp_config *c)
{
	if (!c)
		return NULL;
	for (size_t i = 0; i < c->n_resources; i++) {
		struct rdp_resource *r = &c->resources[i];

		rdp_free(r->name);
		rdp_free(r->prefix);
		rdp_free(r->full_name);
		selectors_done(&r->sel);
		for (size_t j = 0; j < r->n_env; j++) {
			rdp_free(r->env[j].name);
			rdp_free(r->env[j].value);
		}
		rdp_free(r->env);
	}
	rdp_free(c->resources);
	rdp_free(c->path);
	rdp_free(c);
	return NULL;
}

int rdp_config_parse(const char *text, size_t len, const char *filename, struct rdp_config **ret,
		     struct rdp_diags *diags)
{
	struct rdp_json_index *idx = NULL;
	struct rdp_config *cfg = NULL;
	struct rdp_json_syntax syn;
	struct ctx c = { .file = filename, .d = diags };
	size_t errors_before = diags->n_errors;
	json_error_t jerr;
	json_t *root;
	int r;

	/*
	 * jansson keeps its default allocator on purpose: made to fail, its lexer goes on with
	 * corrupted keys ("periodicUpdatenterval") instead of reporting out of memory, so it is
	 * kept out of failure injection; a real out-of-memory from it is still -ENOMEM below.
	 */
	if (len > RDP_CONFIG_MAX_BYTES) {
		r = rdp_diags_add(diags, RDP_DIAG_ERROR, "%s: error: larger than %d bytes", filename,
				  RDP_CONFIG_MAX_BYTES);
		return r < 0 ? r : -EFBIG;
	}
	r = rdp_json_index_build(text, len, &idx, &syn);
	if (r == -EINVAL) {
		r = rdp_diags_add(diags, RDP_DIAG_ERROR, "%s:%u:%u: error: %s", filename, syn.pos.line,
				  syn.pos.col, syn.msg);
		if (r == 0 && syn.first.line)
			r = rdp_diags_add(diags, RDP_DIAG_NOTE, "%s:%u:%u: note: first defined here",
					  filename, syn.first.line, syn.first.col);
		if (r == 0 && syn.n_unquoted > 1)
			r = rdp_diags_add(diags, RDP_DIAG_NOTE,
					  "%s: note: %u keys and strings have no quotes: the text "
					  "looks copied from a page that dropped them; in JSON every "
					  "key and string is in double quotes",
					  filename, syn.n_unquoted);
		return r < 0 ? r : -EINVAL;
	}
	if (r < 0)
		return r;
	c.idx = idx;
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		text += 3;
		len -= 3;
	}
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		rdp_json_index_free(idx);
		if (json_error_code(&jerr) == json_error_out_of_memory)
			return -ENOMEM;
		/* jansson's column is that of the last character it read. */
		r = rdp_diags_add(diags, RDP_DIAG_ERROR, "%s:%d:%d: error: %s", filename, jerr.line,
				  jerr.column, jerr.text);
		return r < 0 ? r : -EINVAL;
	}
	cfg = rdp_calloc(1, sizeof(*cfg));
	if (!cfg) {
		r = -ENOMEM;
		goto out;
	}
	cfg->path = rdp_strdup(filename);
	if (!cfg->path) {
		r = -ENOMEM;
		goto out;
	}
	r = validate(&c, root, cfg);
	if (r == 0 && c.r)
		r = c.r;
	if (r == 0 && diags->n_errors > errors_before)
		r = -EINVAL;
out:
	json_decref(root);
	rdp_json_index_free(idx);
	if (r < 0) {
		rdp_config_free(cfg);
		return r;
	}
	*ret = cfg;
	return 0;
}

int rdp_config_load_file(const char *path, struct rdp_config **ret, struct rdp_diags *diags)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	size_t n = 0, size = RDP_CONFIG_MAX_BYTES + 1;
	struct stat st;
	int r;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		goto fail;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto fail;
	}
	if (S_ISDIR(st.st_mode)) {
		r = -EISDIR;
		goto fail;
	}
	if (S_ISREG(st.st_mode) && st.st_size > RDP_CONFIG_MAX_BYTES) {
		r = rdp_diags_add(diags, RDP_DIAG_ERROR, "%s: error: larger than %d bytes", path,
				  RDP_CONFIG_MAX_BYTES);
		return r < 0 ? r : -EFBIG;
	}
	if (S_ISREG(st.st_mode))
		size = (size_t)st.st_size + 1; /* + 1 sees a file that grew meanwhile */
	buf = rdp_malloc(size);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t k = read(fd, buf + n, size - n);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto fail;
		}
		if (k == 0)
			break;
		n += (size_t)k;
		if (n == size) {
			char *nb;

			if (size > RDP_CONFIG_MAX_BYTES) {
				r = rdp_diags_add(diags, RDP_DIAG_ERROR,
						  "%s: error: larger than %d bytes", path,
						  RDP_CONFIG_MAX_BYTES);
				return r < 0 ? r : -EFBIG;
			}
			size = size * 2 > RDP_CONFIG_MAX_BYTES + 1 ? RDP_CONFIG_MAX_BYTES + 1 :
								     size * 2;
			nb = rdp_realloc(buf, size);
			if (!nb)
				return -ENOMEM;
			buf = nb;
		}
	}
	return rdp_config_parse(buf, n, path, ret, diags);
fail:
	if (r != -ENOMEM) {
		int k = rdp_diags_add(diags, RDP_DIAG_ERROR, "%s: error: cannot read: %s", path,
				      strerror(-r));
		if (k < 0)
			return k;
	}
	return r;
}
