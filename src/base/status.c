/* SPDX-License-Identifier: MIT */
/* The daemon's published state for the liveness probe: see status.h. */
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "errmsg.h"
#include "fileio.h"
#include "macro.h"

int rdp_state_dir(const char *sock_dir, char **ret)
{
	char *p = rdp_asprintf("%s/%s", sock_dir, RDP_STATE_DIR_NAME);

	if (!p)
		return -ENOMEM;
	*ret = p;
	return 0;
}

struct rdp_status *rdp_status_free(struct rdp_status *s)
{
	if (!s)
		return NULL;
	for (size_t i = 0; i < s->n_resources; i++) {
		rdp_free(s->resources[i].name);
		rdp_free(s->resources[i].socket);
	}
	rdp_free(s->resources);
	rdp_free(s->mode);
	rdp_free(s);
	return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(struct rdp_status *, rdp_status_free)

static bool valid_string(const char *s, size_t max)
{
	size_t n;

	if (!s)
		return false;
	n = strnlen(s, max + 1);
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
	return true;
}

int rdp_status_format(const struct rdp_status *s, char **ret)
{
	json_auto_t *o = NULL;
	json_t *res;
	char *text, *copy;

	if (!s || !valid_string(s->mode, RDP_STATUS_MAX_MODE) || s->pid < 0 ||
	    s->n_resources > RDP_STATUS_MAX_RESOURCES)
		return -EINVAL;
	o = json_object();
	res = json_array();
	if (!o || !res) {
		json_decref(res);
		return -ENOMEM;
	}
	if (json_object_set_new(o, "format", json_integer(RDP_STATUS_FORMAT)) < 0 ||
	    json_object_set_new(o, "pid", json_integer(s->pid)) < 0 ||
	    json_object_set_new(o, "generation", json_integer((json_int_t)s->generation)) < 0 ||
	    json_object_set_new(o, "mode", json_string(s->mode)) < 0 ||
	    json_object_set_new(o, "resources", res) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < s->n_resources; i++) {
		const struct rdp_status_resource *r = &s->resources[i];
		json_t *e;

		if (!valid_string(r->name, RDP_STATUS_MAX_NAME) ||
		    !valid_string(r->socket, RDP_STATUS_MAX_SOCKET) || r->socket[0] != '/')
			return -EINVAL;
		e = json_pack("{s:s, s:s, s:b, s:I, s:I}", "name", r->name, "socket", r->socket,
			      "serving", r->serving, "units", (json_int_t)r->units, "healthy",
			      (json_int_t)r->healthy);
		if (!e || json_array_append_new(res, e) < 0)
			return -ENOMEM;
	}
	text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	if (!text)
		return -ENOMEM;
	copy = rdp_asprintf("%s\n", text);
	free(text);
	if (!copy)
		return -ENOMEM;
	*ret = copy;
	return 0;
}

/* A non-negative integer of the status file, or -1 when absent or anything else. */
static long long opt_count(json_t *v)
{
	return json_is_integer(v) && json_integer_value(v) >= 0 &&
			       json_integer_value(v) <= 100000000
		       ? (long long)json_integer_value(v)
		       : -1;
}

static int get_string(json_t *o, const char *key, size_t max, bool absolute, char **ret,
		      const char *where, char *err, size_t errlen)
{
	json_t *v = json_object_get(o, key);
	const char *s;

	if (!v)
		return rdp_errmsg(err, errlen, -EINVAL, "%s: no \"%s\"", where, key);
	if (!json_is_string(v))
		return rdp_errmsg(err, errlen, -EINVAL, "%s: \"%s\" is not a string", where, key);
	s = json_string_value(v);
	if (strlen(s) != json_string_length(v) || !valid_string(s, max))
		return rdp_errmsg(err, errlen, -EINVAL,
				  "%s: \"%s\" is empty, longer than %zu bytes or has "
				  "control characters",
				  where, key, max);
	if (absolute && s[0] != '/')
		return rdp_errmsg(err, errlen, -EINVAL, "%s: \"%s\" is not an absolute path", where,
				  key);
	*ret = rdp_strdup(s);
	return *ret ? 0 : -ENOMEM;
}

static int get_uint(json_t *o, const char *key, long long max, long long *ret, char *err,
		    size_t errlen)
{
	json_t *v = json_object_get(o, key);

	if (!v)
		return rdp_errmsg(err, errlen, -EINVAL, "no \"%s\"", key);
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
		return rdp_errmsg(err, errlen, -EINVAL, "\"%s\" is not an integer from 0 to %lld",
				  key, max);
	*ret = json_integer_value(v);
	return 0;
}

int rdp_status_parse(const char *buf, size_t len, struct rdp_status **ret, char *err, size_t errlen)
{
	json_auto_t *o = NULL;
	_cleanup_(rdp_status_freep) struct rdp_status *s = NULL;
	json_error_t jerr;
	json_t *res;
	long long v;
	int k;

	if (err && errlen)
		err[0] = '\0';
	if (len > RDP_STATUS_MAX_BYTES) {
		rdp_errmsg(err, errlen, -EINVAL, "larger than %d bytes", RDP_STATUS_MAX_BYTES);
		return -E2BIG;
	}
	if (len == 0)
		return rdp_errmsg(err, errlen, -EINVAL, "empty");
	o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!o)
		return rdp_errmsg(err, errlen, -EINVAL, "not JSON: line %d column %d: %s",
				  jerr.line, jerr.column, jerr.text);
	if (!json_is_object(o))
		return rdp_errmsg(err, errlen, -EINVAL, "not a JSON object");
	k = get_uint(o, "format", 1000, &v, err, errlen);
	if (k < 0)
		return k;
	if (v != RDP_STATUS_FORMAT)
		return rdp_errmsg(err, errlen, -EINVAL, "format %lld, this rdma-dp reads format %d",
				  v, RDP_STATUS_FORMAT);
	s = rdp_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	k = get_uint(o, "pid", 0x7fffffff, &s->pid, err, errlen);
	if (k < 0)
		return k;
	k = get_uint(o, "generation", (long long)(~0ULL >> 1), &v, err, errlen);
	if (k < 0)
		return k;
	s->generation = (uint64_t)v;
	k = get_string(o, "mode", RDP_STATUS_MAX_MODE, false, &s->mode, "status", err, errlen);
	if (k < 0)
		return k;
	res = json_object_get(o, "resources");
	if (!json_is_array(res))
		return rdp_errmsg(err, errlen, -EINVAL, "\"resources\" is missing or not an array");
	if (json_array_size(res) > RDP_STATUS_MAX_RESOURCES)
		return rdp_errmsg(err, errlen, -EINVAL, "more than %d resources",
				  RDP_STATUS_MAX_RESOURCES);
	s->resources = rdp_calloc(json_array_size(res) + 1, sizeof(*s->resources));
	if (!s->resources)
		return -ENOMEM;
	for (size_t i = 0; i < json_array_size(res); i++) {
		json_t *e = json_array_get(res, i), *serving;
		struct rdp_status_resource *r = &s->resources[i];
		char where[48];

		snprintf(where, sizeof(where), "resources[%zu]", i);
		if (!json_is_object(e))
			return rdp_errmsg(err, errlen, -EINVAL, "%s is not an object", where);
		s->n_resources++;
		k = get_string(e, "name", RDP_STATUS_MAX_NAME, false, &r->name, where, err, errlen);
		if (k < 0)
			return k;
		k = get_string(e, "socket", RDP_STATUS_MAX_SOCKET, true, &r->socket, where, err,
			       errlen);
		if (k < 0)
			return k;
		serving = json_object_get(e, "serving");
		if (!json_is_boolean(serving))
			return rdp_errmsg(err, errlen, -EINVAL,
					  "%s: \"serving\" is missing or not a boolean", where);
		r->serving = json_is_true(serving);
		/* Optional (a daemon from before they were written): -1, unknown. */
		r->units = opt_count(json_object_get(e, "units"));
		r->healthy = opt_count(json_object_get(e, "healthy"));
	}
	*ret = TAKE_PTR(s);
	return 0;
}

static char *status_path(const char *dir)
{
	return rdp_asprintf("%s/%s", dir, RDP_STATUS_FILE);
}

int rdp_status_write(const char *dir, const struct rdp_status *s)
{
	_cleanup_free_ char *text = NULL, *path = NULL, *tmp = NULL;
	_cleanup_close_ int fd = -1;
	int k;

	k = rdp_status_format(s, &text);
	if (k < 0)
		return k;
	path = status_path(dir);
	tmp = rdp_asprintf("%s/.%s.%ld.tmp", dir, RDP_STATUS_FILE, (long)getpid());
	if (!path || !tmp)
		return -ENOMEM;
	if (mkdir(dir, 0750) < 0 && errno != EEXIST)
		return -errno;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	k = rdp_write_all(fd, text, strlen(text));
	if (k < 0) {
		unlink(tmp);
		return k;
	}
	if (close(TAKE_FD(fd)) < 0) {
		k = -errno;
		unlink(tmp);
		return k;
	}
	if (rename(tmp, path) < 0) {
		k = -errno;
		unlink(tmp);
		return k;
	}
	return 0;
}

int rdp_status_read(const char *dir, struct rdp_status **ret, uint64_t *mtime_usec, char *err,
		    size_t errlen)
{
	_cleanup_free_ char *path = status_path(dir), *buf = NULL;
	_cleanup_close_ int fd = -1;
	struct stat st;
	size_t len = 0;

	if (err && errlen)
		err[0] = '\0';
	if (!path)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return rdp_errmsg(err, errlen, -EINVAL, "not a regular file");
	/* One byte more than allowed, so that a larger file is seen as such. */
	buf = rdp_malloc(RDP_STATUS_MAX_BYTES + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + len, RDP_STATUS_MAX_BYTES + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > RDP_STATUS_MAX_BYTES)
			break;
	}
	if (mtime_usec)
		*mtime_usec = (uint64_t)st.st_mtim.tv_sec * 1000000ULL +
			      (uint64_t)st.st_mtim.tv_nsec / 1000;
	return rdp_status_parse(buf, len, ret, err, errlen);
}

int rdp_status_remove(const char *dir)
{
	_cleanup_free_ char *path = status_path(dir);

	if (!path)
		return -ENOMEM;
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return 0;
}
