/* SPDX-License-Identifier: MIT */
/*
 * The command-line syntax of Go's standard `flag` package (flag.FlagSet.Parse), for the one
 * entry point that must take exactly what a Go program takes: `k8s-rdma-shared-dp`, the name
 * NVIDIA network-operator runs (cli/cmd-shared-dp.c).
 *
 * Go's rules, all of them: a flag is "-name" or "--name" (the same); a bool flag is set by
 * "-name" or "-name=VALUE" (VALUE one of 1 t T TRUE true True 0 f F FALSE false False), never
 * by a separate argument; any other flag takes "-name=VALUE" or the next argument, whatever
 * it looks like; the same flag may come again (the last one counts); parsing stops before
 * the first argument that is not a flag ("-" alone, or anything not starting with '-') and
 * after "--". "-h", "-help" and "--help", when not defined, ask for the usage.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

enum rdp_goflag_type {
	RDP_GOFLAG_BOOL,   /* value: bool * */
	RDP_GOFLAG_STRING, /* value: const char **, set to point into argv */
};

struct rdp_goflag {
	const char *name; /* without the dash */
	enum rdp_goflag_type type;
	void *value;
};

/*
 * Parses argv[1..argc) against flags (n of them), setting each value as its flag is met.
 * Returns the index in argv of the first argument left unparsed (argc when none); 0 when
 * help was asked for (Go prints the usage and exits 0); -EINVAL with Go's own message in err
 * (errlen bytes, may be 0) for anything else, e.g. "flag provided but not defined: -foo",
 * "invalid boolean value \"yes\" for -use-cdi: parse error", "flag needs an argument:
 * -config-file", "bad flag syntax: ---x". Values are quoted as Go's %q does for ASCII; a byte
 * outside ASCII is written \xNN (Go keeps printable UTF-8 as it is).
 */
int rdp_goflag_parse(const struct rdp_goflag *flags, size_t n, int argc, char *const *argv,
		     char *err, size_t errlen);

/* Go's strconv.ParseBool: 0 and *ret set, or -EINVAL. */
int rdp_goflag_parse_bool(const char *s, bool *ret);
