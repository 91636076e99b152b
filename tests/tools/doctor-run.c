/* SPDX-License-Identifier: MIT */
/*
 * doctor-run --sysfs-root D --dev-root D [--config F] [--interval MS] GROUP: runs ONE doctor
 * group (ports, congestion) on a (fixture) host through the library, as `rdma-dp doctor`
 * would (discovery with every GID slot, the topology, the config and its pools), and prints
 * each result as one JSON line {"id","status","subject","finding","symptom","fix"}, in the
 * report's order (rdp_doctor_order). Exit 0, or 1 on a setup error (message on stderr).
 * For tests/integration/test_doctor_ports.py.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "diag.h"
#include "discovery.h"
#include "doctor.h"
#include "pool.h"
#include "sysfs.h"
#include "topology.h"

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"sysfs-root", required_argument, NULL, 's'},
		{"dev-root", required_argument, NULL, 'd'},
		{"config", required_argument, NULL, 'c'},
		{"interval", required_argument, NULL, 'i'},
		{},
	};
	const char *sysfs = "/sys", *dev = "/dev", *config = NULL, *group;
	struct rdp_doctor_ctx ctx = {.proc_fd = -1, .interval_ms = 1000};
	struct rdp_doctor_report rep = {};
	struct rdp_diags diags = {};
	struct rdp_config *cfg = NULL;
	struct rdp_pools *pools = NULL;
	struct rdp_host *h = NULL;
	struct rdp_topo *t = NULL;
	int sys, devfd, r, o;

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 's': sysfs = optarg; break;
		case 'd': dev = optarg; break;
		case 'c': config = optarg; break;
		case 'i': ctx.interval_ms = (unsigned int)strtoul(optarg, NULL, 10); break;
		default: return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: doctor-run [--sysfs-root D] [--dev-root D] [--config F] "
				"[--interval MS] ports|congestion\n");
		return 2;
	}
	group = argv[optind];
	r = rdp_sysfs_open_roots(sysfs, dev, &sys, &devfd);
	if (r < 0) {
		fprintf(stderr, "roots: %s\n", strerror(-r));
		return 1;
	}
	r = rdp_discover_at(sys, devfd, &h);
	if (r < 0) {
		fprintf(stderr, "discover: %s\n", strerror(-r));
		return 1;
	}
	r = rdp_topo_read_at(sys, h, &t);
	if (r < 0) {
		fprintf(stderr, "topology: %s\n", strerror(-r));
		return 1;
	}
	if (config) {
		r = rdp_config_load_file(config, &cfg, &diags);
		if (r >= 0)
			r = rdp_pools_build(cfg, h, &pools, &diags);
		if (r < 0) {
			fprintf(stderr, "config %s: %s\n", config, strerror(-r));
			for (size_t i = 0; i < diags.n; i++)
				fprintf(stderr, "%s\n", diags.v[i].text);
			return 1;
		}
	}
	ctx.sys_fd = sys;
	ctx.dev_fd = devfd;
	ctx.sysfs_root = sysfs;
	ctx.dev_root = dev;
	ctx.host = h;
	ctx.topo = t;
	ctx.config = cfg;
	ctx.config_path = config;
	ctx.config_diags = &diags;
	ctx.pools = pools;
	if (strcmp(group, "ports") == 0)
		r = rdp_doctor_ports(&ctx, &rep);
	else if (strcmp(group, "congestion") == 0)
		r = rdp_doctor_congestion(&ctx, &rep);
	else {
		fprintf(stderr, "unknown group %s\n", group);
		return 2;
	}
	if (r < 0) {
		fprintf(stderr, "%s: %s\n", group, strerror(-r));
		return 1;
	}
	rdp_doctor_order(&rep);
	for (size_t i = 0; i < rep.n; i++) {
		const struct rdp_check *c = &rep.v[i];
		json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "id", c->id, "status",
				      rdp_check_status_name(c->status), "subject", c->subject,
				      "finding", c->finding, "symptom", c->symptom, "fix", c->fix);
		char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

		if (!s)
			return 1;
		printf("%s\n", s);
		free(s);
		json_decref(j);
	}
	rdp_doctor_report_done(&rep);
	rdp_pools_free(pools);
	rdp_config_free(cfg);
	rdp_diags_done(&diags);
	rdp_topo_free(t);
	rdp_host_free(h);
	close(sys);
	close(devfd);
	return 0;
}
