/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp metrics: the fabric metrics of this node (fabric-metrics.h) once, in the Prometheus
 * text format, on stdout or into node_exporter's textfile directory (the way without HTTP).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

static void help(void)
{
	printf("Usage: rdma-dp metrics [OPTIONS]\n"
	       "\n"
	       "Read every RDMA port's state, rate, counters and hw_counters now and print them\n"
	       "in the Prometheus text format (the fabric families `serve --metrics-address`\n"
	       "serves), or write them for node_exporter's textfile collector.\n"
	       "\n"
	       "Options:\n"
	       "  --sysfs-root DIR   read sysfs below DIR (default %s)\n"
	       "  --dev-root DIR     look for device nodes below DIR (default %s)\n"
	       "  --device NAME      only this RDMA device (ibdev name, as `discover` lists);\n"
	       "                     repeat for several\n"
	       "  --textfile DIR     write DIR/" TEXTFILE_NAME " atomically instead of stdout\n"
	       "                     (DIR: node_exporter's --collector.textfile.directory)\n"
	       "  -h, --help         show this help\n"
	       "      --version      show the version\n",
	       RDP_DEFAULT_SYSFS_ROOT, RDP_DEFAULT_DEV_ROOT);
}

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
	enum { ARG_SYSFS_ROOT = 0x100, ARG_DEV_ROOT, ARG_TEXTFILE, ARG_VERSION, ARG_DEVICE };
	static const struct option options[] = {
		{"sysfs-root", required_argument, NULL, ARG_SYSFS_ROOT},
		{"dev-root", required_argument, NULL, ARG_DEV_ROOT},
		{"textfile", required_argument, NULL, ARG_TEXTFILE},
		{"device", required_argument, NULL, ARG_DEVICE},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, ARG_VERSION},
		{},
	};
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
	int c, r;

	opterr = 0;
	optind = 0;
	while ((c = getopt_long(argc, argv, "+:h", options, NULL)) >= 0) {
		switch (c) {
		case ARG_SYSFS_ROOT:
			sysfs_root = optarg;
			break;
		case ARG_DEV_ROOT:
			dev_root = optarg;
			break;
		case ARG_TEXTFILE:
			textfile = optarg;
			break;
		case ARG_DEVICE:
			if (n_devices == METRICS_MAX_DEVICE_ARGS) {
				fprintf(stderr, "rdma-dp metrics: at most %d --device options\n",
					METRICS_MAX_DEVICE_ARGS);
				return 2;
			}
			devices[n_devices++] = optarg;
			break;
		case 'h':
			help();
			return 0;
		case ARG_VERSION:
			cli_print_version();
			return 0;
		default:
			return cli_option_error("metrics", argv, c);
		}
	}
	if (cli_no_operands("metrics", argc, argv))
		return 2;
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
