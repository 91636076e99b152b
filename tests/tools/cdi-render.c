/* SPDX-License-Identifier: MIT */
/*
 * cdi-render [--host-prefix P] SYSFS_ROOT DEV_ROOT OUTDIR CLASS|PREFIX/NAME [UNIT|K=V]...:
 * discovers the (fixture) host and writes OUTDIR/rdma-dp.io-<class>.json with src/cdi/cdi.c, one
 * CDI device per UNIT (rdp_device_unit_id(): "0000:18:00.0", "0000:03:00.0-sf2", "rxe0") with
 * its char devices as nodes, the host's rdma_cm as the top-level node, and every K=V argument
 * (an argument with '=' is an env entry: unit IDs never hold one) in the top-level env.
 * A PREFIX/NAME argument is a resource name, mapped by rdp_cdi_class(). No UNIT at all: the
 * spec has no device and the file is removed. hostPath is P + the node's path (default: no
 * prefix, the host's own /dev), so that a test can point the runtime side at fixture nodes.
 * Prints "written FILE", "unchanged FILE" or "removed FILE"; exit status 1 with the reason on
 * stderr when a unit is unknown or a rule of cdi.h is broken (-EINVAL).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "cdi.h"
#include "device.h"
#include "discovery.h"

static char *host_path(const char *prefix, const char *path)
{
	char *s;

	if (!prefix)
		return NULL;
	if (asprintf(&s, "%s%s", prefix, path) < 0)
		exit(1);
	return s;
}

int main(int argc, char **argv)
{
	const char *prefix = NULL, *sysfs, *dev, *outdir, *cls;
	char class[RDP_CDI_CLASS_MAX], file[RDP_CDI_FILE_NAME_MAX];
	struct rdp_cdi_device *devs = NULL;
	struct rdp_cdi_node cm = {0};
	struct rdp_cdi_spec spec = {0};
	struct rdp_host *h = NULL;
	const char **env = NULL;
	char *json = NULL;
	int i = 1, r, dfd = -1, ret = 1;

	if (argc > 2 && strcmp(argv[1], "--host-prefix") == 0) {
		prefix = argv[2];
		i = 3;
	}
	if (argc - i < 4) {
		fprintf(stderr, "usage: %s [--host-prefix P] SYSFS_ROOT DEV_ROOT OUTDIR "
				"CLASS|PREFIX/NAME [UNIT|K=V]...\n", argv[0]);
		return 2;
	}
	sysfs = argv[i];
	dev = argv[i + 1];
	outdir = argv[i + 2];
	cls = argv[i + 3];
	i += 4;

	if (strchr(cls, '/')) {
		char pfx[256];
		const char *slash = strchr(cls, '/');

		snprintf(pfx, sizeof(pfx), "%.*s", (int)(slash - cls), cls);
		r = rdp_cdi_class(pfx, slash + 1, class, sizeof(class));
		if (r < 0) {
			fprintf(stderr, "no CDI class for resource %s: %s\n", cls, strerror(-r));
			return 1;
		}
	} else {
		snprintf(class, sizeof(class), "%s", cls);
	}

	r = rdp_discover(sysfs, dev, &h);
	if (r < 0) {
		fprintf(stderr, "discovery: %s\n", strerror(-r));
		return 1;
	}
	devs = calloc((size_t)argc, sizeof(*devs));
	env = calloc((size_t)argc, sizeof(*env));
	if (!devs || !env)
		goto out;
	spec.class = class;
	spec.devices = devs;
	spec.env = env;
	for (; i < argc; i++) {
		const struct rdp_device *d = NULL;
		struct rdp_cdi_node *nodes;

		if (strchr(argv[i], '=')) {
			env[spec.n_env++] = argv[i];
			continue;
		}
		for (size_t k = 0; k < h->n_devices && !d; k++) {
			char unit[RDP_UNIT_ID_MAX];

			if (strcmp(rdp_device_unit_id(&h->devices[k], unit, sizeof(unit)), argv[i]) == 0)
				d = &h->devices[k];
		}
		if (!d) {
			fprintf(stderr, "no device with unit ID %s\n", argv[i]);
			goto out;
		}
		nodes = calloc(d->n_char_devices + 1, sizeof(*nodes));
		if (!nodes)
			goto out;
		for (size_t k = 0; k < d->n_char_devices; k++) {
			nodes[k].path = d->char_devices[k];
			nodes[k].host_path = host_path(prefix, d->char_devices[k]);
		}
		devs[spec.n_devices].name = argv[i];
		devs[spec.n_devices].nodes = nodes;
		devs[spec.n_devices].n_nodes = d->n_char_devices;
		spec.n_devices++;
	}
	if (h->rdma_cm[0]) {
		cm.path = h->rdma_cm;
		cm.host_path = host_path(prefix, h->rdma_cm);
		spec.nodes = &cm;
		spec.n_nodes = 1;
	}

	r = rdp_cdi_render(&spec, &json);
	if (r < 0) {
		fprintf(stderr, "render: %s\n", strerror(-r));
		goto out;
	}
	dfd = rdp_cdi_open_dir(outdir, true);
	if (dfd < 0) {
		fprintf(stderr, "%s: %s\n", outdir, strerror(-dfd));
		goto out;
	}
	r = rdp_cdi_write_at(dfd, class, json);
	if (r < 0) {
		fprintf(stderr, "write: %s\n", strerror(-r));
		goto out;
	}
	rdp_cdi_file_name(class, file, sizeof(file));
	printf("%s %s/%s\n", !json ? (r == 0 ? "removed" : "absent") : r == 0 ? "written" : "unchanged",
	       outdir, file);
	ret = 0;
out:
	rdp_free(json);
	for (size_t k = 0; devs && k < spec.n_devices; k++) {
		for (size_t j = 0; j < devs[k].n_nodes; j++)
			free((char *)devs[k].nodes[j].host_path);
		free((void *)devs[k].nodes);
	}
	free((char *)cm.host_path);
	free(devs);
	free(env);
	rdp_host_free(h);
	if (dfd >= 0)
		close(dfd);
	return ret;
}
