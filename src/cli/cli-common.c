/* SPDX-License-Identifier: MIT */
#include "cli-common.h"

#include <errno.h>
#include <getopt.h>
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

int cli_option_error(const char *cmd, char **argv, int c)
{
	const char *word = optind > 0 ? argv[optind - 1] : "?";
	char buf[64];

	/*
	 * Name the option as it was typed: a long one is the word getopt last read (up to any
	 * '='); a short one is optopt, which for long options holds their value instead.
	 */
	if (strncmp(word, "--", 2) == 0)
		snprintf(buf, sizeof(buf), "%.*s", (int)strcspn(word, "="), word);
	else if (optopt > ' ' && optopt < 0x7f)
		snprintf(buf, sizeof(buf), "-%c", optopt);
	else
		snprintf(buf, sizeof(buf), "%s", word);
	if (c == ':')
		fprintf(stderr, "rdma-dp %s: option '%s' needs an argument\n", cmd, buf);
	else
		fprintf(stderr, "rdma-dp %s: unknown option '%s' (see 'rdma-dp %s --help')\n", cmd,
			buf, cmd);
	return 2;
}

int cli_no_operands(const char *cmd, int argc, char **argv)
{
	if (optind >= argc)
		return 0;
	fprintf(stderr, "rdma-dp %s: unexpected argument '%s' (see 'rdma-dp %s --help')\n", cmd,
		argv[optind], cmd);
	return 2;
}

int cli_parse_node_args(const char *cmd, int argc, char **argv, void (*help)(void),
			struct cli_node_args *ret)
{
	enum { ARG_SYSFS_ROOT = 0x100, ARG_DEV_ROOT, ARG_VERSION };
	static const struct option options[] = {
		{"sysfs-root", required_argument, NULL, ARG_SYSFS_ROOT},
		{"dev-root", required_argument, NULL, ARG_DEV_ROOT},
		{"output", required_argument, NULL, 'o'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, ARG_VERSION},
		{},
	};
	int c;

	*ret = (struct cli_node_args){
		.sysfs_root = RDP_DEFAULT_SYSFS_ROOT,
		.dev_root = RDP_DEFAULT_DEV_ROOT,
		.output = CLI_OUTPUT_TABLE,
	};
	opterr = 0;
	optind = 0; /* also resets getopt's internal state */
	while ((c = getopt_long(argc, argv, "+:ho:", options, NULL)) >= 0) {
		switch (c) {
		case ARG_SYSFS_ROOT:
			ret->sysfs_root = optarg;
			break;
		case ARG_DEV_ROOT:
			ret->dev_root = optarg;
			break;
		case 'o':
			if (cli_parse_output(cmd, optarg, &ret->output) < 0)
				return 2;
			break;
		case 'h':
			help();
			return 0;
		case ARG_VERSION:
			cli_print_version();
			return 0;
		default:
			return cli_option_error(cmd, argv, c);
		}
	}
	if (cli_no_operands(cmd, argc, argv))
		return 2;
	return -1;
}
