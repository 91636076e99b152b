/* SPDX-License-Identifier: MIT */
#include "cli-common.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "sysfs.h"

int cli_parse_output(const char *cmd, const char *arg, enum cli_output *ret)
{
	if (strcmp(arg, "table") == 0) {
		*ret = CLI_OUTPUT_TABLE;
		return 0;
	}
	if (strcmp(arg, "json") == 0) {
		*ret = CLI_OUTPUT_JSON;
		return 0;
	}
	fprintf(stderr, "rdma-dp %s: invalid output format '%s' (expected 'table' or 'json')\n",
		cmd, arg);
	return -EINVAL;
}

static int open_root(const char *cmd, const char *what, const char *path, int *ret)
{
	int r;

	if (!*path) {
		fprintf(stderr, "rdma-dp %s: the %s root must not be empty\n", cmd, what);
		return -EINVAL;
	}
	r = rdp_sysfs_open_root(path, ret);
	if (r < 0)
		fprintf(stderr, "rdma-dp %s: cannot open %s root '%s': %s\n", cmd, what, path,
			strerror(-r));
	return r;
}

int cli_open_roots(const char *cmd, const char *sysfs_root, const char *dev_root, int *ret_sys,
		   int *ret_dev)
{
	int sys, dev, r;

	r = open_root(cmd, "sysfs", sysfs_root, &sys);
	if (r < 0)
		return r;
	r = open_root(cmd, "dev", dev_root, &dev);
	if (r < 0) {
		close(sys);
		return r;
	}
	*ret_sys = sys;
	*ret_dev = dev;
	return 0;
}

const char *cli_bad_option(char **argv, int optind_after, int optopt_char, char *buf, size_t size)
{
	if (optopt_char) {
		snprintf(buf, size, "-%c", optopt_char);
		return buf;
	}
	snprintf(buf, size, "%s", optind_after > 0 ? argv[optind_after - 1] : "?");
	return buf;
}
