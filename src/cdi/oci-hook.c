/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "errmsg.h"
#include "macro.h"
#include "memlock.h"
#include "oci-hook.h"

static const char *type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

/* A string member: required, at most max-1 bytes, no NUL inside. */
static int get_string(json_t *o, const char *key, char *dst, size_t max, char *err,
		      size_t errlen)
{
	json_t *v = json_object_get(o, key);
	size_t n;

	if (!v)
		return rdp_errmsg(err, errlen, -EINVAL, "the OCI state has no \"%s\"", key);
	if (!json_is_string(v))
		return rdp_errmsg(err, errlen, -EINVAL, "the OCI state's \"%s\" is %s, not a string",
				  key, type_name(v));
	n = json_string_length(v);
	if (n >= max || strlen(json_string_value(v)) != n)
		return rdp_errmsg(err, errlen, -EINVAL,
				  "the OCI state's \"%s\" is too long or holds a NUL", key);
	if (dst)
		memcpy(dst, json_string_value(v), n + 1);
	return 0;
}

int rdp_oci_state_parse(const char *buf, size_t len, struct rdp_oci_state *ret, char *err,
			size_t errlen)
{
	_cleanup_(json_decrefp) json_t *doc = NULL;
	json_error_t je;
	json_t *pid, *ann;
	char version[64];
	int r;

	if (!buf || !ret)
		return -EINVAL;
	memset(ret, 0, sizeof(*ret));
	if (len > RDP_OCI_STATE_MAX)
		return rdp_errmsg(err, errlen, -EFBIG, "the OCI state is over %d bytes",
				  RDP_OCI_STATE_MAX);
	doc = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!doc)
		return rdp_errmsg(err, errlen, -EINVAL, "the OCI state is not JSON: %s (line %d)",
				  je.text, je.line);
	if (!json_is_object(doc))
		return rdp_errmsg(err, errlen, -EINVAL, "the OCI state is %s, not an object",
				  type_name(doc));
	r = get_string(doc, "ociVersion", version, sizeof(version), err, errlen);
	if (r < 0)
		return r;
	r = get_string(doc, "id", ret->id, sizeof(ret->id), err, errlen);
	if (r < 0)
		return r;
	r = get_string(doc, "bundle", NULL, 4096, err, errlen);
	if (r < 0)
		return r;
	r = get_string(doc, "status", ret->status, sizeof(ret->status), err, errlen);
	if (r < 0)
		return r;
	if (strcmp(ret->status, "creating") != 0 && strcmp(ret->status, "created") != 0)
		return rdp_errmsg(err, errlen, -EINVAL,
				  "the OCI state's status is \"%s\": the hook belongs to the "
				  "%s stage (status \"creating\")",
				  ret->status, RDP_OCI_HOOK_STAGE);
	ann = json_object_get(doc, "annotations");
	if (ann && !json_is_object(ann))
		return rdp_errmsg(err, errlen, -EINVAL,
				  "the OCI state's \"annotations\" is %s, not an object",
				  type_name(ann));
	pid = json_object_get(doc, "pid");
	if (!pid)
		return rdp_errmsg(err, errlen, -EINVAL, "the OCI state has no \"pid\"");
	if (!json_is_integer(pid) || json_integer_value(pid) <= 0 ||
	    json_integer_value(pid) > (1LL << 22))
		return rdp_errmsg(err, errlen, -EINVAL,
				  "the OCI state's \"pid\" is not a process id (an integer in "
				  "1..4194304)");
	ret->pid = json_integer_value(pid);
	return 0;
}

int rdp_oci_hook_args(uint64_t memlock, const char **args, char *value_buf, size_t value_size)
{
	if (memlock == RDP_MEMLOCK_LEAVE || !args)
		return -EINVAL;
	if (rdp_memlock_format(memlock, value_buf, value_size) < 0)
		return -EINVAL;
	args[0] = "rdma-dp";
	args[1] = "hook";
	args[2] = "--abi";
	args[3] = RDP_OCI_HOOK_ABI;
	args[4] = "--memlock";
	args[5] = value_buf;
	return RDP_OCI_HOOK_ARGS_MAX;
}
