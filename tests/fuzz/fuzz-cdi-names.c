/* SPDX-License-Identifier: MIT */
/*
 * CDI names and specs from arbitrary bytes (cdi.h). The input is split at '\n' into fields:
 * a resource prefix, a resource name, then device names and "K=V" env entries (a field with
 * '='). Checks: rdp_cdi_class() gives only valid classes (never a '.'); a valid class is a
 * valid vendor and device name too (its characters are a subset); file and qualified names
 * of valid names are what cdi.h says; rdp_cdi_render() answers 0, -EINVAL or -ENOMEM, and
 * what it renders parses back with the same kind, device names (the i-th device's node is
 * "/<name>") and env, and ends in "}\n".
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "alloc.h"
#include "cdi.h"

#define MAX_FIELDS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_names(const char *f)
{
	char buf[RDP_CDI_QUALIFIED_MAX + 8];
	bool cls = rdp_cdi_valid_class(f), vendor = rdp_cdi_valid_vendor(f),
	     dev = rdp_cdi_valid_device_name(f);
	int r;

	if (cls && (!vendor || !dev || strchr(f, '.')))
		__builtin_trap();
	r = rdp_cdi_file_name(f, buf, sizeof(buf));
	if ((r == 0) != cls)
		__builtin_trap();
	if (r == 0 && (strncmp(buf, "rdma-dp.io-", 11) != 0 || strcmp(buf + 11 + strlen(f), ".json")))
		__builtin_trap();
	r = rdp_cdi_qualified_name(cls ? f : "hca", f, buf, sizeof(buf));
	if ((r == 0) != dev)
		__builtin_trap();
	if (r == 0 && !strchr(buf, '='))
		__builtin_trap();
}

static void check_render(const struct rdp_cdi_spec *s)
{
	char *json = NULL;
	json_t *doc, *devs, *env;
	char kind[RDP_CDI_CLASS_MAX + 16];
	int r = rdp_cdi_render(s, &json);

	if (r == -EINVAL || r == -ENOMEM) {
		if (json)
			__builtin_trap();
		return;
	}
	if (r != 0)
		__builtin_trap();
	if (s->n_devices == 0) {
		if (json)
			__builtin_trap();
		return;
	}
	if (!json || strlen(json) < 2 || strcmp(json + strlen(json) - 2, "}\n") != 0)
		__builtin_trap();
	doc = json_loads(json, JSON_REJECT_DUPLICATES, NULL);
	if (!doc)
		__builtin_trap();
	snprintf(kind, sizeof(kind), "rdma-dp.io/%s", s->class);
	if (strcmp(json_string_value(json_object_get(doc, "cdiVersion")), "0.5.0") != 0 ||
	    strcmp(json_string_value(json_object_get(doc, "kind")), kind) != 0)
		__builtin_trap();
	devs = json_object_get(doc, "devices");
	if (json_array_size(devs) != s->n_devices)
		__builtin_trap();
	for (size_t i = 0; i < s->n_devices; i++) {
		json_t *d = json_array_get(devs, i);
		json_t *nodes = json_object_get(json_object_get(d, "containerEdits"), "deviceNodes");

		if (strcmp(json_string_value(json_object_get(d, "name")), s->devices[i].name) ||
		    json_array_size(nodes) != 1 ||
		    strcmp(json_string_value(json_object_get(json_array_get(nodes, 0), "path")),
			   s->devices[i].nodes[0].path))
			__builtin_trap();
	}
	env = json_object_get(json_object_get(doc, "containerEdits"), "env");
	if (json_array_size(env) != s->n_env)
		__builtin_trap();
	for (size_t i = 0; i < s->n_env; i++)
		if (strcmp(json_string_value(json_array_get(env, i)), s->env[i]))
			__builtin_trap();
	json_decref(doc);
	rdp_free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *copy, *fields[MAX_FIELDS], *p, cls[RDP_CDI_CLASS_MAX];
	char paths[MAX_FIELDS][64];
	struct rdp_cdi_device devs[MAX_FIELDS] = {0};
	struct rdp_cdi_node nodes[MAX_FIELDS];
	const char *env[MAX_FIELDS];
	struct rdp_cdi_spec s = {.devices = devs, .env = env};
	size_t n = 0;
	int r;

	if (size > 16 * 1024)
		return 0;
	copy = malloc(size + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	copy[size] = '\0';
	for (p = copy; n < MAX_FIELDS; p++) {
		fields[n++] = p;
		p = strchr(p, '\n');
		if (!p)
			break;
		*p = '\0';
	}
	for (size_t i = 0; i < n; i++)
		check_names(fields[i]);

	r = rdp_cdi_class(n > 1 ? fields[0] : "rdma", n > 1 ? fields[1] : fields[0], cls,
			  sizeof(cls));
	if (r == 0 && (!rdp_cdi_valid_class(cls) || strchr(cls, '.')))
		__builtin_trap();
	if (r != 0 && r != -EINVAL)
		__builtin_trap();
	s.class = r == 0 ? cls : fields[n > 1 ? 1 : 0];
	for (size_t i = 2; i < n; i++) {
		if (strchr(fields[i], '=')) {
			env[s.n_env++] = fields[i];
			continue;
		}
		snprintf(paths[s.n_devices], sizeof(paths[0]), "/%s", fields[i]);
		nodes[s.n_devices].path = paths[s.n_devices];
		nodes[s.n_devices].host_path = i % 2 ? paths[s.n_devices] : NULL;
		devs[s.n_devices].name = fields[i];
		devs[s.n_devices].nodes = &nodes[s.n_devices];
		devs[s.n_devices].n_nodes = 1;
		s.n_devices++;
	}
	check_render(&s);
	/* a failing allocation at a spot chosen by the input */
	if (size)
		rdp_alloc_fail_at(1 + data[0] % 4);
	check_render(&s);
	rdp_alloc_fail_at(0);
	free(copy);
	return 0;
}
