/* SPDX-License-Identifier: MIT */
/* Helpers the sub-commands share: roots, output formats, messages in one style. */
#pragma once
#include <jansson.h>
#include <stdio.h>

#include "cli-opt.h"
#include "discovery.h"
#include "registration.h"

enum cli_output {
	CLI_OUTPUT_TABLE,
	CLI_OUTPUT_JSON,
};

/*
 * Prints doc (taken over, freed) on stdout as the `-o json` of every command: indented, keys
 * in order, a final newline. 0, -ENOMEM for a NULL doc, -EIO.
 */
int cli_print_json(json_t *doc);

/* "table" / "json" -> *ret; otherwise prints "rdma-dp CMD: invalid output format ..." */
int cli_parse_output(const char *cmd, const char *arg, enum cli_output *ret);

/*
 * Opens the sysfs and dev roots (rdp_sysfs_open_root()). On failure prints
 * "rdma-dp CMD: cannot open sysfs root 'DIR': No such file or directory" and returns the
 * negative errno; *ret_* are untouched then.
 */
int cli_open_roots(const char *cmd, const char *sysfs_root, const char *dev_root, int *ret_sys,
		   int *ret_dev);

/* Rows of the option tables that mean the same in every command that takes them. */
#define CLI_OPT_SYSFS_ROOT(ret)                                                                    \
	{"sysfs-root", 0, required_argument, "DIR", .str = (ret),                                  \
	 .help = "read sysfs below DIR (default " RDP_DEFAULT_SYSFS_ROOT ")"}
#define CLI_OPT_DEV_ROOT(ret)                                                                      \
	{"dev-root", 0, required_argument, "DIR", .str = (ret),                                    \
	 .help = "look for device nodes below DIR (default " RDP_DEFAULT_DEV_ROOT ")"}
#define CLI_OPT_KUBELET_ROOT(ret)                                                                  \
	{"kubelet-root-dir", 0, required_argument, "DIR", .str = (ret),                            \
	 .help = "kubelet's root directory (default " RDP_DEFAULT_KUBELET_ROOT ")"}

/* What a command that reads one node's trees is told on its command line. */
struct cli_node_args {
	const char *sysfs_root; /* RDP_DEFAULT_SYSFS_ROOT unless --sysfs-root */
	const char *dev_root;   /* RDP_DEFAULT_DEV_ROOT unless --dev-root */
	enum cli_output output; /* -o table|json */
};

/*
 * The command line of `discover` and `topo` (cmd names the command and says what it does):
 * --sysfs-root, --dev-root, -o/--output, no operand. Returns -1 when the command goes on with
 * *ret filled, else the exit code to return (0 after --help/--version, 2 on a usage error,
 * said on stderr).
 */
int cli_parse_node_args(const struct cli_cmd *cmd, int argc, char **argv,
			struct cli_node_args *ret);

/*
 * The end of a command that printed a report on stdout (r: what printing returned): says a
 * failure or a failed flush ("rdma-dp CMD: writing output: ...") and returns the exit code,
 * 0 or 1.
 */
int cli_output_done(const char *cmd, int r);
