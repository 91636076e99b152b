/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp metrics: the fabric metrics of this node (fabric-metrics.h) once, in the Prometheus
 * text format, on stdout or into node_exporter's textfile directory (the way without HTTP).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "cli-common.h"
#include "cli.h"
#include "discovery.h"
#include "fabric-metrics.h"
#include "fileio.h"
#include "macro.h"
#include "metrics-text.h"

#define TEXTFILE_NAME "rdma_dp.prom"
#define METRICS_MAX_DEVICE_ARGS 64

enum { ARG_DEVICE = CLI_KEY_LONG };

static const struct cli_cmd metrics_cmd = {
	.name = "metrics",
	.about = "Read every RDMA port's state, rate, counters and hw_counters now and print them "
		 "in the Prometheus text format (the fabric families `serve --metrics-address` "
		 "serves), or write them for node_exporter's textfile collector.\n",
};

/* Writes text to dir/rdma_dp.prom atomically: a temp file in dir (not *.prom: node_exporter
 * reads only those), fsync, rename. */
static int write_textfile(const char *dir, const char *text, size_t len)
{
	_cleanup_close_ int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dirfd < 0)
		return -errno;
	return rdp_replace_file_at(dirfd, TEXTFILE_NAME, "." TEXTFILE_NAME ".", "", text, len,
				   0644);
}

int cmd_metrics(int argc, char **argv)
{
	const char *sysfs_root = RDP_DEFAULT_SYSFS_ROOT, *dev_root = RDP_DEFAULT_DEV_ROOT;
	const char *textfile = NULL;
	const char *devices[METRICS_MAX_DEVICE_ARGS];
	size_t n_devices = 0;
	_cleanup_close_ int sys = -1, dev = -1;
	struct rdp_fabric_targets *t = NULL;
	struct rdp_fabric_stats st;
	struct rdp_host *h = NULL;
	struct rdp_mtext m;
	char *text = NULL;
	size_t len = 0;
	const struct cli_opt opts[] = {
		CLI_OPT_SYSFS_ROOT(&sysfs_root),
		CLI_OPT_DEV_ROOT(&dev_root),
		{"device", ARG_DEVICE, required_argument, "NAME",
		 .help = "only this RDMA device (ibdev name, as `discover` lists); repeat for "
			 "several"},
		{"textfile", 0, required_argument, "DIR", .str = &textfile,
		 .help = "write DIR/" TEXTFILE_NAME " atomically instead of stdout (DIR: "
			 "node_exporter's --collector.textfile.directory)"},
		{},
	};
	struct cli_parser p;
	int c, r;

	cli_parser_init(&p, &metrics_cmd, opts, argc, argv);
	while ((c = cli_next(&p)) > 0) {
		switch (c) {
		case ARG_DEVICE:
			if (n_devices == METRICS_MAX_DEVICE_ARGS) {
				fprintf(stderr, "rdma-dp metrics: at most %d --device options\n",
					METRICS_MAX_DEVICE_ARGS);
				return 2;
			}
			devices[n_devices++] = p.arg;
			break;
		}
	}
	if (c < 0)
		return p.exit;
	if (cli_open_roots("metrics", sysfs_root, dev_root, &sys, &dev) < 0)
		return 1;
	r = rdp_discover_at(sys, dev, &h);
	if (r < 0) {
		fprintf(stderr, "rdma-dp metrics: %s\n", strerror(-r));
		return 1;
	}
	r = rdp_fabric_targets_from_host(h, sysfs_root, &t);
	rdp_host_free(h);
	if (r < 0) {
		fprintf(stderr, "rdma-dp metrics: %s\n", strerror(-r));
		return 1;
	}
	if (n_devices) {
		const char *missing = NULL;

		r = rdp_fabric_targets_keep(t, devices, n_devices, &missing);
		if (r < 0) {
			if (r == -ENOENT)
				fprintf(stderr, "rdma-dp metrics: --device %s: no such RDMA device "
					"on this node ('rdma-dp discover' lists them)\n", missing);
			else
				fprintf(stderr, "rdma-dp metrics: %s\n", strerror(-r));
			rdp_fabric_targets_free(t);
			return r == -ENOENT ? 2 : 1;
		}
	}
	rdp_mtext_init(&m, 0);
	r = rdp_fabric_collect(t, &m, &st);
	rdp_fabric_targets_free(t);
	if (r == 0 && !(text = rdp_mtext_steal(&m, &len)))
		r = -ENOMEM;
	rdp_mtext_done(&m);
	if (r < 0) {
		fprintf(stderr, "rdma-dp metrics: %s\n", strerror(-r));
		return 1;
	}
	if (st.read_errors) {
		fprintf(stderr, "rdma-dp metrics: %lu file%s could not be read:", st.read_errors,
			st.read_errors == 1 ? "" : "s");
		for (size_t i = 0; i < st.n_errors; i++)
			fprintf(stderr, "%s %s", i ? ";" : "", st.errors[i]);
		fprintf(stderr, "%s\n", st.read_errors > st.n_errors ? "; ..." : "");
	}
	if (st.files_ignored)
		fprintf(stderr,
			"rdma-dp metrics: %lu files ignored (more than %d in a directory)\n",
			st.files_ignored, RDP_FABRIC_MAX_FILES);
	if (textfile) {
		r = write_textfile(textfile, text, len);
		if (r < 0)
			fprintf(stderr, "rdma-dp metrics: writing %s/%s: %s\n", textfile,
				TEXTFILE_NAME, strerror(-r));
	} else {
		r = rdp_write_all(STDOUT_FILENO, text, len);
		if (r < 0)
			fprintf(stderr, "rdma-dp metrics: writing output: %s\n", strerror(-r));
	}
	rdp_free(text);
	return r < 0 ? 1 : 0;
}
