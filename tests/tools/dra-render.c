/* SPDX-License-Identifier: MIT */
/*
 * dra-render: the DRA building blocks on a (fixture) host, for the integration tests.
 *
 *   dra-render spec [--host-prefix P] SYSFS_ROOT DEV_ROOT OUTDIR CLAIM_UID REQUEST=DEVICE...
 *     writes OUTDIR/rdma-dp.io-claim_<uid>.json with src/dra/dra-cdi.c for the results given
 *     (DEVICE: a DRA device name, "pci-0000-18-00-0"; REQUEST may be "main/sub"), prints
 *     "written FILE" or "unchanged FILE" then one CDI device ID per line (the devices', then
 *     the requests' "<uid>-req-<request>" in first-appearance order); exit status 1 with
 *     the reason on stderr (an unknown device, a bad UID).
 *   dra-render slices SYSFS_ROOT DEV_ROOT NODE NODE_UID [DRIVER]
 *     prints the node's ResourceSlices (a JSON array, src/dra/dra-slices.c, generation 1) after
 *     checking each with rdp_dra_slice_check() (exit status 1 and the rule on stderr).
 *   dra-render names SYSFS_ROOT DEV_ROOT
 *     prints "<ibdev> <DRA name>" for every offered device, then "dropped <ibdev>" lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "alloc.h"
#include "discovery.h"
#include "dra-cdi.h"
#include "dra-claims.h"
#include "dra-slices.h"

static int usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s spec [--host-prefix P] SYSFS DEV OUTDIR UID REQUEST=DEVICE...\n"
		"       %s slices SYSFS DEV NODE NODE_UID [DRIVER]\n"
		"       %s names SYSFS DEV\n", argv0, argv0, argv0);
	return 2;
}

static int cmd_spec(int argc, char **argv, struct rdp_dra_inventory *inv, const char *prefix)
{
	const char *outdir = argv[0], *uid = argv[1];
	size_t n = (size_t)argc - 2;
	struct rdp_dra_result *res = calloc(n ? n : 1, sizeof(*res));
	char file[RDP_CDI_FILE_NAME_MAX], id[RDP_CDI_QUALIFIED_MAX];
	char *json = NULL;
	int r, dfd, ret = 1;

	if (!res)
		return 1;
	for (size_t i = 0; i < n; i++) {
		char *a = argv[2 + i], *eq = strchr(a, '=');
		char base[RDP_DRA_REQUEST_MAX];

		if (!eq) {
			fprintf(stderr, "%s: not REQUEST=DEVICE\n", a);
			goto out;
		}
		*eq = 0;
		if (rdp_dra_base_request(a, base, sizeof(base)) < 0) {
			fprintf(stderr, "%s: not a request name\n", a);
			goto out;
		}
		res[i].request = strdup(base);
		res[i].pool = (char *)"node";
		res[i].device = eq + 1;
		if (!rdp_dra_inventory_find(inv, res[i].device)) {
			fprintf(stderr, "no offered device %s\n", res[i].device);
			goto out;
		}
	}
	r = rdp_cdi_claim_spec_render(inv, uid, res, n, prefix, NULL, 0, &json, NULL);
	if (r < 0) {
		fprintf(stderr, "render: %s\n", strerror(-r));
		goto out;
	}
	dfd = rdp_cdi_open_dir(outdir, true);
	if (dfd < 0) {
		fprintf(stderr, "%s: %s\n", outdir, strerror(-dfd));
		goto out;
	}
	r = rdp_cdi_claim_spec_write_at(dfd, uid, json);
	close(dfd);
	if (r < 0) {
		fprintf(stderr, "write: %s\n", strerror(-r));
		goto out;
	}
	rdp_cdi_claim_file_name(uid, file, sizeof(file));
	printf("%s %s/%s\n", !json ? "removed" : r == 0 ? "written" : "unchanged", outdir, file);
	for (size_t i = 0; i < n; i++) {
		bool earlier = false;

		for (size_t j = 0; j < i; j++)
			earlier = earlier || strcmp(res[j].device, res[i].device) == 0;
		if (!earlier && rdp_cdi_claim_device_id(uid, res[i].device, id, sizeof(id)) == 0)
			printf("%s\n", id);
	}
	for (size_t i = 0; i < n; i++)
		if (rdp_cdi_claim_first_of_request(res, i) &&
		    rdp_cdi_claim_request_id(uid, res[i].request, id, sizeof(id)) == 0)
			printf("%s\n", id);
	ret = 0;
out:
	rdp_free(json);
	for (size_t i = 0; i < n; i++)
		free(res[i].request);
	free(res);
	return ret;
}

int main(int argc, char **argv)
{
	const char *prefix = NULL, *cmd;
	struct rdp_dra_inventory inv = {0};
	struct rdp_host *h = NULL;
	int i = 2, r, ret = 1;

	if (argc < 4)
		return usage(argv[0]);
	cmd = argv[1];
	if (strcmp(cmd, "spec") == 0 && strcmp(argv[2], "--host-prefix") == 0 && argc > 3) {
		prefix = argv[3];
		i = 4;
	}
	if (argc - i < 2)
		return usage(argv[0]);
	r = rdp_discover(argv[i], argv[i + 1], &h);
	if (r < 0) {
		fprintf(stderr, "discovery: %s\n", strerror(-r));
		return 1;
	}
	if (rdp_dra_inventory_build(h, &inv) < 0)
		goto out;
	i += 2;
	if (strcmp(cmd, "spec") == 0) {
		if (argc - i < 2)
			ret = usage(argv[0]);
		else
			ret = cmd_spec(argc - i, argv + i, &inv, prefix);
	} else if (strcmp(cmd, "slices") == 0) {
		struct rdp_dra_node node = {.driver = RDP_DRA_DEFAULT_DRIVER};
		json_t *slices = NULL, *s;
		size_t k;
		char err[256];

		if (argc - i < 2) {
			ret = usage(argv[0]);
			goto out;
		}
		node.node_name = argv[i];
		node.node_uid = argv[i + 1];
		if (argc - i > 2)
			node.driver = argv[i + 2];
		r = rdp_dra_slices_build(&node, &inv, 1, &slices);
		if (r < 0) {
			fprintf(stderr, "slices: %s\n", strerror(-r));
			goto out;
		}
		ret = 0;
		json_array_foreach(slices, k, s)
			if (rdp_dra_slice_check(s, err, sizeof(err)) < 0) {
				fprintf(stderr, "slice %zu: %s\n", k, err);
				ret = 1;
			}
		if (ret == 0)
			json_dumpf(slices, stdout, JSON_INDENT(2));
		printf("\n");
		json_decref(slices);
	} else if (strcmp(cmd, "names") == 0) {
		for (size_t k = 0; k < inv.n_devs; k++)
			printf("%s %s\n", rdp_dra_dev_device(&inv, &inv.devs[k])->name,
			       inv.devs[k].name);
		for (size_t k = 0; k < inv.n_dropped; k++)
			printf("dropped %s\n", inv.dropped[k]);
		ret = 0;
	} else {
		ret = usage(argv[0]);
	}
out:
	rdp_dra_inventory_done(&inv);
	rdp_host_free(h);
	return ret;
}
