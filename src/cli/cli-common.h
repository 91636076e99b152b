/* SPDX-License-Identifier: MIT */
/* Helpers the sub-commands share: roots, output formats, messages in one style. */
#pragma once
#include <jansson.h>
#include <stdio.h>

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

/*
 * For getopt_long()'s ':' (missing argument; the optstring must start with ':') and '?'
 * (unknown option) results: prints "rdma-dp CMD: option '-o' needs an argument" or
 * "rdma-dp CMD: unknown option '--foo' (see 'rdma-dp CMD --help')" and returns 2, the usage
 * exit code.
 */
int cli_option_error(const char *cmd, char **argv, int c);

/* 0 when getopt_long() left no operand, else "rdma-dp CMD: unexpected argument 'x'" and 2. */
int cli_no_operands(const char *cmd, int argc, char **argv);

/* What a command that reads one node's trees is told on its command line. */
struct cli_node_args {
	const char *sysfs_root; /* RDP_DEFAULT_SYSFS_ROOT unless --sysfs-root */
	const char *dev_root;   /* RDP_DEFAULT_DEV_ROOT unless --dev-root */
	enum cli_output output; /* -o table|json */
};

/*
 * The command line of `discover` and `topo`: --sysfs-root, --dev-root, -o/--output, -h/--help
 * (calls help), --version, no operand. Returns -1 when the command goes on with *ret filled,
 * else the exit code to return (0 after --help/--version, 2 on a usage error, said on stderr).
 */
int cli_parse_node_args(const char *cmd, int argc, char **argv, void (*help)(void),
			struct cli_node_args *ret);
