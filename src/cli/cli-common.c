/* SPDX-License-Identifier: MIT */
#include "cli-common.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "discovery.h"
#include "sysfs.h"

int cli_print_json(json_t *doc)
{
	int r;

	if (!doc)
		return -ENOMEM;
	r = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(doc);
	if (r < 0)
		return -EIO;
	fputc('\n', stdout);
	return 0;
}

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

int cli_parse_node_args(const struct cli_cmd *cmd, int argc, char **argv,
			struct cli_node_args *ret)
{
	struct cli_node_args a = {
		.sysfs_root = RDP_DEFAULT_SYSFS_ROOT,
		.dev_root = RDP_DEFAULT_DEV_ROOT,
		.output = CLI_OUTPUT_TABLE,
	};
	const struct cli_opt opts[] = {
		CLI_OPT_SYSFS_ROOT(&a.sysfs_root),
		CLI_OPT_DEV_ROOT(&a.dev_root),
		{"output", 'o', required_argument, "FMT", .help = "table (default) or json"},
		{},
	};
	struct cli_parser p;
	int c;

	cli_parser_init(&p, cmd, opts, argc, argv);
	while ((c = cli_next(&p)) > 0)
		if (c == 'o' && cli_parse_output(cmd->name, p.arg, &a.output) < 0)
			return 2;
	if (c < 0)
		return p.exit;
	*ret = a;
	return -1;
}

int cli_output_done(const char *cmd, int r)
{
	if (r < 0) {
		fprintf(stderr, "rdma-dp %s: %s\n", cmd, strerror(-r));
		return 1;
	}
	if (fflush(stdout) != 0) {
		fprintf(stderr, "rdma-dp %s: writing output: %s\n", cmd, strerror(errno));
		return 1;
	}
	return 0;
}
