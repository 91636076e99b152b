/* SPDX-License-Identifier: MIT */
/* CDI spec files: names, rendering, atomic writes and cleanup (cdi.h). */
#define _GNU_SOURCE
#include "cdi.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "alloc.h"
#include "fileio.h"
#include "macro.h"
#include "memlock.h"
#include "oci-hook.h"

#define FILE_PREFIX RDP_CDI_VENDOR "-"
#define FILE_SUFFIX ".json"
#define TMP_PREFIX "." RDP_CDI_VENDOR "-"
#define TMP_SUFFIX ".tmp"

static bool is_letter(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

static bool is_alnum(char c)
{
	return is_letter(c) || (c >= '0' && c <= '9');
}

/* first(s[0]), mid(s[1..n-2]), last: alnum; n bytes at most max - 1, at least min. */
static bool valid_name(const char *s, bool letter_first, const char *mid, size_t min, size_t max)
{
	size_t n;

	if (!s)
		return false;
	n = strnlen(s, max);
	if (n < min || n >= max)
		return false;
	if (letter_first ? !is_letter(s[0]) : !is_alnum(s[0]))
		return false;
	if (!is_alnum(s[n - 1]))
		return false;
	for (size_t i = 1; i + 1 < n; i++)
		if (!is_alnum(s[i]) && !strchr(mid, s[i]))
			return false;
	return true;
}

bool rdp_cdi_valid_vendor(const char *s)
{
	return valid_name(s, true, "_.-", 2, RDP_CDI_CLASS_MAX);
}

bool rdp_cdi_valid_class(const char *s)
{
	return valid_name(s, true, "_-", 2, RDP_CDI_CLASS_MAX);
}

bool rdp_cdi_valid_device_name(const char *s)
{
	return valid_name(s, false, "_.:-", 1, RDP_CDI_DEVICE_NAME_MAX);
}

int rdp_cdi_class(const char *prefix, const char *name, char *buf, size_t size)
{
	char c[RDP_CDI_CLASS_MAX];
	int n;

	if (!prefix || !name || !buf)
		return -EINVAL;
	if (strcmp(prefix, RDP_CDI_DEFAULT_PREFIX) == 0)
		n = snprintf(c, sizeof(c), "%s", name);
	else
		n = snprintf(c, sizeof(c), "%s__%s", prefix, name);
	if (n < 0 || (size_t)n >= sizeof(c))
		return -EINVAL;
	if (strcmp(prefix, RDP_CDI_DEFAULT_PREFIX) != 0)
		for (size_t i = 0; i < strlen(prefix); i++)
			if (c[i] == '.')
				c[i] = '_';
	if (!rdp_cdi_valid_class(c))
		return -EINVAL;
	if ((size_t)n >= size)
		return -ENOBUFS;
	memcpy(buf, c, (size_t)n + 1);
	return 0;
}

size_t rdp_cdi_classes(const char *const *prefixes, const char *const *names, size_t n,
		       char (*ret)[RDP_CDI_CLASS_MAX], const char **why)
{
	size_t ok = 0;

	for (size_t i = 0; i < n; i++) {
		why[i] = NULL;
		if (rdp_cdi_class(prefixes[i], names[i], ret[i], RDP_CDI_CLASS_MAX) < 0)
			why[i] = RDP_CDI_NO_VALID_CLASS;
		for (size_t j = 0; !why[i] && j < i; j++)
			if (!why[j] && strcmp(ret[j], ret[i]) == 0)
				why[i] = RDP_CDI_CLASS_TAKEN;
		if (why[i])
			ret[i][0] = '\0';
		else
			ok++;
	}
	return ok;
}

int rdp_cdi_file_name(const char *class, char *buf, size_t size)
{
	int n;

	if (!rdp_cdi_valid_class(class) || !buf)
		return -EINVAL;
	n = snprintf(buf, size, FILE_PREFIX "%s" FILE_SUFFIX, class);
	return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

int rdp_cdi_qualified_name(const char *class, const char *device, char *buf, size_t size)
{
	int n;

	if (!rdp_cdi_valid_class(class) || !rdp_cdi_valid_device_name(device) || !buf)
		return -EINVAL;
	n = snprintf(buf, size, RDP_CDI_VENDOR "/%s=%s", class, device);
	return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

/* ---- rendering ---- */

#define _cleanup_json_ _cleanup_(json_decrefp) /* jansson's own */

/* Well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), as jansson
 * wants it: checked first, so that a NULL from json_string() can only mean no memory. */
static bool valid_utf8(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		unsigned int c = *p, cp, n;

		if (c < 0x80) {
			p++;
			continue;
		} else if (c >= 0xc2 && c <= 0xdf) {
			n = 1, cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2, cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3, cp = c & 0x07;
		} else {
			return false;
		}
		for (unsigned int i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10ffff ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		p += n + 1;
	}
	return true;
}

static bool valid_path(const char *p)
{
	return p && p[0] == '/' && strnlen(p, RDP_CDI_PATH_MAX) < RDP_CDI_PATH_MAX &&
	       valid_utf8(p);
}

static bool valid_env(const char *e)
{
	size_t n;

	if (!e)
		return false;
	n = strnlen(e, RDP_CDI_ENV_MAX + 1);
	if (n > RDP_CDI_ENV_MAX)
		return false;
	if (!(is_letter(e[0]) || e[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++) {
		if (e[i] == '=')
			return valid_utf8(e + i);
		if (!is_alnum(e[i]) && e[i] != '_')
			return false;
	}
	return false;
}

/* json_object_set_new() that fails for a NULL value (an allocation or UTF-8 failure). */
static int set(json_t *o, const char *key, json_t *v)
{
	if (!v)
		return -1;
	return json_object_set_new(o, key, v);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static json_t *nodes_to_json(const struct rdp_cdi_node *nodes, size_t n, int *err)
{
	_cleanup_json_ json_t *a = json_array();

	if (!a) {
		*err = -ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct rdp_cdi_node *nd = &nodes[i];
		json_t *o;

		if (!valid_path(nd->path) || (nd->host_path && !valid_path(nd->host_path))) {
			*err = -EINVAL;
			return NULL;
		}
		o = json_object();
		if (!o || json_array_append_new(a, o) < 0) {
			*err = -ENOMEM;
			return NULL;
		}
		if (set(o, "path", json_string(nd->path)) < 0) {
			*err = -ENOMEM;
			return NULL;
		}
		if (nd->host_path && set(o, "hostPath", json_string(nd->host_path)) < 0) {
			*err = -ENOMEM;
			return NULL;
		}
		if (set(o, "permissions", json_string("rw")) < 0) {
			*err = -ENOMEM;
			return NULL;
		}
	}
	return TAKE_PTR(a);
}

static bool with_hook(const struct rdp_cdi_spec *s)
{
	return s->hook_path && s->memlock != RDP_MEMLOCK_LEAVE;
}

/* edits.hooks = [{hookName: createRuntime, path, args}] (oci-hook.h). */
static int hooks_to_json(json_t *edits, const char *hook_path, uint64_t memlock)
{
	const char *argv[RDP_OCI_HOOK_ARGS_MAX];
	char value[RDP_MEMLOCK_STR_MAX];
	json_t *hooks = json_array(), *h, *args;
	int n = rdp_oci_hook_args(memlock, argv, value, sizeof(value));

	if (n < 0) {
		json_decref(hooks);
		return n;
	}
	if (set(edits, "hooks", hooks) < 0)
		return -ENOMEM;
	h = json_object();
	if (!h || json_array_append_new(hooks, h) < 0)
		return -ENOMEM;
	args = json_array();
	if (set(h, "hookName", json_string(RDP_OCI_HOOK_STAGE)) < 0 ||
	    set(h, "path", json_string(hook_path)) < 0 || set(h, "args", args) < 0)
		return -ENOMEM;
	for (int i = 0; i < n; i++)
		if (json_array_append_new(args, json_string(argv[i])) < 0)
			return -ENOMEM;
	return 0;
}

static int check_devices(const struct rdp_cdi_spec *s)
{
	if (s->n_devices > RDP_CDI_MAX_DEVICES || (s->n_devices && !s->devices))
		return -EINVAL;
	for (size_t i = 0; i < s->n_devices; i++) {
		const struct rdp_cdi_device *d = &s->devices[i];

		if (!rdp_cdi_valid_device_name(d->name) || d->n_nodes + d->n_env == 0 ||
		    d->n_nodes > RDP_CDI_MAX_NODES || (d->n_nodes && !d->nodes) ||
		    d->n_env > RDP_CDI_MAX_ENV || (d->n_env && !d->env))
			return -EINVAL;
		for (size_t k = 0; k < d->n_env; k++)
			if (!valid_env(d->env[k]))
				return -EINVAL;
	}
	/* Unique names: the CDI library rejects a spec with "multiple device". */
	if (s->n_devices > 1) {
		_cleanup_free_ const char **v = rdp_reallocarray(NULL, s->n_devices, sizeof(*v));

		if (!v)
			return -ENOMEM;
		for (size_t i = 0; i < s->n_devices; i++)
			v[i] = s->devices[i].name;
		qsort(v, s->n_devices, sizeof(*v), cmp_str);
		for (size_t i = 1; i < s->n_devices; i++)
			if (strcmp(v[i - 1], v[i]) == 0)
				return -EINVAL;
	}
	return 0;
}

int rdp_cdi_render(const struct rdp_cdi_spec *s, char **ret_json)
{
	_cleanup_json_ json_t *doc = NULL, *devs = NULL;
	char kind[sizeof(RDP_CDI_VENDOR) + RDP_CDI_CLASS_MAX];
	char *text;
	size_t len;
	int r = -ENOMEM;

	if (!s || !ret_json)
		return -EINVAL;
	*ret_json = NULL;
	if (!rdp_cdi_valid_class(s->class))
		return -EINVAL;
	if (s->n_nodes > RDP_CDI_MAX_NODES || (s->n_nodes && !s->nodes) ||
	    s->n_env > RDP_CDI_MAX_ENV || (s->n_env && !s->env))
		return -EINVAL;
	for (size_t i = 0; i < s->n_env; i++)
		if (!valid_env(s->env[i]))
			return -EINVAL;
	for (size_t i = 0; i < s->n_nodes; i++)
		if (!valid_path(s->nodes[i].path) ||
		    (s->nodes[i].host_path && !valid_path(s->nodes[i].host_path)))
			return -EINVAL;
	if (s->hook_path && !valid_path(s->hook_path))
		return -EINVAL;
	r = check_devices(s);
	if (r < 0)
		return r;
	snprintf(kind, sizeof(kind), RDP_CDI_VENDOR "/%s", s->class);

	doc = json_object();
	devs = json_array();
	if (!doc || !devs)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_devices; i++) {
		const struct rdp_cdi_device *d = &s->devices[i];
		json_t *o = json_object(), *edits, *nodes;

		if (!o || json_array_append_new(devs, o) < 0)
			return -ENOMEM;
		if (set(o, "name", json_string(d->name)) < 0)
			return -ENOMEM;
		edits = json_object();
		if (set(o, "containerEdits", edits) < 0)
			return -ENOMEM;
		if (d->n_env) {
			json_t *env = json_array();

			if (set(edits, "env", env) < 0)
				return -ENOMEM;
			for (size_t k = 0; k < d->n_env; k++)
				if (json_array_append_new(env, json_string(d->env[k])) < 0)
					return -ENOMEM;
		}
		if (!d->n_nodes)
			continue;
		r = -ENOMEM;
		nodes = nodes_to_json(d->nodes, d->n_nodes, &r);
		if (set(edits, "deviceNodes", nodes) < 0)
			return r;
		if (d->own_memlock && s->hook_path && d->memlock != RDP_MEMLOCK_LEAVE) {
			r = hooks_to_json(edits, s->hook_path, d->memlock);
			if (r < 0)
				return r;
		}
	}
	if (s->n_devices == 0)
		return 0; /* no file: cdi.h */

	if (set(doc, "cdiVersion", json_string(RDP_CDI_VERSION)) < 0 ||
	    set(doc, "kind", json_string(kind)) < 0 ||
	    set(doc, "devices", TAKE_PTR(devs)) < 0)
		return -ENOMEM;
	if (s->n_env || s->n_nodes || with_hook(s)) {
		json_t *edits = json_object();

		if (set(doc, "containerEdits", edits) < 0)
			return -ENOMEM;
		if (s->n_env) {
			json_t *env = json_array();

			if (set(edits, "env", env) < 0)
				return -ENOMEM;
			for (size_t i = 0; i < s->n_env; i++)
				if (json_array_append_new(env, json_string(s->env[i])) < 0)
					return -ENOMEM;
		}
		if (s->n_nodes) {
			json_t *nodes;

			r = -ENOMEM;
			nodes = nodes_to_json(s->nodes, s->n_nodes, &r);
			if (set(edits, "deviceNodes", nodes) < 0)
				return r;
		}
		if (with_hook(s)) {
			r = hooks_to_json(edits, s->hook_path, s->memlock);
			if (r < 0)
				return r;
		}
	}

	text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	if (!text)
		return -ENOMEM;
	len = strlen(text);
	*ret_json = rdp_malloc(len + 2);
	if (*ret_json) {
		memcpy(*ret_json, text, len);
		memcpy(*ret_json + len, "\n", 2);
	}
	free(text);
	return *ret_json ? 0 : -ENOMEM;
}

/* ---- files ---- */

int rdp_cdi_open_dir(const char *path, bool create)
{
	int fd;

	if (!path || !*path)
		return -EINVAL;
	if (create && mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* 1 when name (in dirfd) is a regular file of mode 0644 holding exactly json, else 0. */
static int same_content(int dirfd, const char *name, const char *json, size_t len)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	struct stat st;
	size_t got = 0;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return 0; /* absent or unreadable: (re)write it */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 07777) != 0644 ||
	    (uintmax_t)st.st_size != (uintmax_t)len)
		return 0;
	buf = rdp_malloc(len + 1);
	if (!buf)
		return -ENOMEM;
	while (got <= len) {
		ssize_t n = read(fd, buf + got, len + 1 - got);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return 0;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return got == len && memcmp(buf, json, len) == 0;
}

int rdp_cdi_remove_at(int dirfd, const char *class)
{
	char name[RDP_CDI_FILE_NAME_MAX];
	int r;

	r = rdp_cdi_file_name(class, name, sizeof(name));
	if (r < 0)
		return r;
	if (unlinkat(dirfd, name, 0) < 0)
		return errno == ENOENT ? 1 : -errno;
	return fsync(dirfd) < 0 ? -errno : 0;
}

int rdp_cdi_write_at(int dirfd, const char *class, const char *json)
{
	char name[RDP_CDI_FILE_NAME_MAX], tmp[RDP_CDI_FILE_NAME_MAX + 16];
	size_t len;
	int r;

	r = rdp_cdi_file_name(class, name, sizeof(name));
	if (r < 0)
		return r;
	if (!json)
		return rdp_cdi_remove_at(dirfd, class);
	len = strlen(json);
	r = same_content(dirfd, name, json, len);
	if (r != 0)
		return r;

	r = snprintf(tmp, sizeof(tmp), TMP_PREFIX "%s.", class);
	if (r < 0 || (size_t)r >= sizeof(tmp))
		return -ENAMETOOLONG;
	/* ".rdma-dp.io-<class>.XXXXXX.tmp": never read by CDI, which reads *.json and *.yaml */
	return rdp_replace_file_at(dirfd, name, tmp, TMP_SUFFIX, json, len, 0644);
}

static bool has_suffix(const char *s, const char *sfx)
{
	size_t n = strlen(s), m = strlen(sfx);

	return n >= m && strcmp(s + n - m, sfx) == 0;
}

static bool starts_with(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

int rdp_cdi_cleanup_at(int dirfd, const char *const *keep, size_t n_keep,
		       void (*removed)(const char *name, void *ud), void *ud)
{
	DIR *d;
	int fd, count = 0, first_err = 0;
	struct dirent *de;

	if (n_keep && !keep)
		return -EINVAL;
	fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		int e = -errno;

		close(fd);
		return e;
	}
	while ((errno = 0, de = readdir(d))) {
		const char *n = de->d_name;
		bool ours = false;
		struct stat st;

		/* The DRA driver's per-claim specs ("rdma-dp.io-claim_<uid>.json", dra-cdi.h)
		 * and their temporary files belong to `rdma-dp dra`, which may run beside. */
		if (starts_with(n, FILE_PREFIX RDP_CDI_CLAIM_CLASS_PREFIX) ||
		    starts_with(n, TMP_PREFIX RDP_CDI_CLAIM_CLASS_PREFIX))
			continue;
		if (starts_with(n, FILE_PREFIX) && has_suffix(n, FILE_SUFFIX) &&
		    strlen(n) > strlen(FILE_PREFIX FILE_SUFFIX)) {
			size_t cl = strlen(n) - strlen(FILE_PREFIX FILE_SUFFIX);

			ours = true;
			for (size_t i = 0; i < n_keep && ours; i++)
				if (keep[i] && strlen(keep[i]) == cl &&
				    strncmp(n + strlen(FILE_PREFIX), keep[i], cl) == 0)
					ours = false;
		} else if (starts_with(n, TMP_PREFIX) && has_suffix(n, TMP_SUFFIX) &&
			   strlen(n) > strlen(TMP_PREFIX TMP_SUFFIX)) {
			ours = true;
		}
		if (!ours)
			continue;
		if (fstatat(dirfd, n, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
			continue;
		if (unlinkat(dirfd, n, 0) < 0) {
			if (errno != ENOENT && !first_err)
				first_err = -errno;
			continue;
		}
		count++;
		if (removed)
			removed(n, ud);
	}
	if (errno && !first_err)
		first_err = -errno;
	closedir(d);
	if (count && fsync(dirfd) < 0 && !first_err)
		first_err = -errno;
	return first_err ? first_err : count;
}
