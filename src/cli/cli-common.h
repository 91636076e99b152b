/* SPDX-License-Identifier: MIT */
/* Helpers the sub-commands share: roots, output formats, messages in one style. */
#pragma once
#include <stdio.h>

enum cli_output {
	CLI_OUTPUT_TABLE,
	CLI_OUTPUT_JSON,
};

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
 * The argument of a command-line option that getopt_long() refused: the text to name in
 * "unknown option" / "missing argument" messages.
 */
const char *cli_bad_option(char **argv, int optind_after, int optopt_char, char *buf, size_t size);
