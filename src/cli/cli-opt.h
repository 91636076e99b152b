/* SPDX-License-Identifier: MIT */
/*
 * One option table per command: getopt_long()'s struct option[] and optstring are built from
 * it, -h/--help is rendered from it and --version answered, the usage errors are said in one
 * voice (exit code 2). An option that only records its argument (or that it was given) says
 * where, and the parser does it; the others come back to the command's switch, which keeps
 * its own value checks:
 *
 *	const struct cli_opt opts[] = {
 *		{"config-file", 'c', required_argument, "FILE", "config.json", .str = &config},
 *		{"registration", OPT_REG, required_argument, "MODE", "auto or kubelet-sock"},
 *		{"verbose", 'v', no_argument, NULL, "log every call", .flag = &verbose},
 *		{},
 *	};
 *	struct cli_parser p;
 *	int c;
 *
 *	cli_parser_init(&p, &serve_cmd, opts, argc, argv);
 *	while ((c = cli_next(&p)) > 0)
 *		switch (c) {
 *		case OPT_REG:
 *			if (parse_mode(p.arg, &mode) < 0)
 *				return 2;
 *			break;
 *		}
 *	if (c < 0)
 *		return p.exit;
 */
#pragma once
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

/* Keys of long-only options start here; a key below it is also the short option (-c). */
#define CLI_KEY_LONG 0x100

/* A number's macro as a string literal, for a default in a help text: STR(9470) -> "9470". */
#define CLI_STR_(x) #x
#define CLI_STR(x) CLI_STR_(x)

struct cli_opt {
	const char *name; /* the long name, without "--"; NULL: a heading (help) between options */
	int key;          /* a letter: also -<letter>; >= CLI_KEY_LONG: returned; 0: stored only */
	int has_arg;      /* no_argument, required_argument, optional_argument */
	const char *arg;  /* the argument's name in --help: FILE (shown [=FILE] when optional) */
	const char *help; /* one paragraph, wrapped by the renderer ('\n' breaks); NULL: hidden */
	const char **str; /* when set: the argument goes here, cli_next() goes on */
	bool *flag;       /* when set (no_argument): true goes here, cli_next() goes on */
};

struct cli_cmd {
	const char *name;    /* "serve": "rdma-dp serve" in usage, help and messages */
	const char *operand; /* NULL: no operand; else exactly one, named so ("PATH") */
	const char *about;   /* after the usage line; wrapped, '\n' ends a paragraph */
	const char *epilog;  /* after the options, wrapped as about; may be NULL */
};

/* A table holds at most this many options (more: cli_next() says so and exits 70). */
#define CLI_OPTS_MAX 32

struct cli_parser {
	const struct cli_cmd *cmd;
	const struct cli_opt *opts; /* ends with {} (no name, no help); -h and --version follow */
	int argc;
	char **argv;
	const char *arg;     /* the last option's argument; NULL when it has none */
	const char *operand; /* after cli_next() returned 0: the operand of a command taking one */
	int exit;            /* after cli_next() returned < 0: what the command returns */
	FILE *out, *err;     /* stdout and stderr, unless changed after init */
	bool too_many;       /* from init: the table does not fit */
	struct option longopts[CLI_OPTS_MAX + 3];
	const struct cli_opt *opt_of[CLI_OPTS_MAX + 2]; /* the row of each longopts[] */
	char shortopts[3 * CLI_OPTS_MAX + 8];
};

/*
 * Builds the getopt tables of opts for argv[0..argc) (argv[0] is the command's name). Resets
 * getopt's state (optind 0, opterr 0). cmd and opts must outlive p.
 */
void cli_parser_init(struct cli_parser *p, const struct cli_cmd *cmd, const struct cli_opt *opts,
		     int argc, char **argv);

/*
 * The next option: its key (> 0), its argument in p->arg. 0 when the options are over and the
 * operands are what the command takes (p->operand set). < 0 when the command is done and
 * returns p->exit: 0 after -h/--help (the help on stdout) or --version, 2 after a usage error
 * said on stderr ("rdma-dp CMD: unknown option '--foo' (see 'rdma-dp CMD --help')", "option
 * '-o' needs an argument", "unexpected argument 'x'", "expected one PATH").
 */
int cli_next(struct cli_parser *p);

/* The help of cmd, rendered from its table, on f. */
void cli_print_help(FILE *f, const struct cli_cmd *cmd, const struct cli_opt *opts);

/*
 * One row of a two-column list: "  left", padded to column col, then text wrapped to the help
 * width with continuation lines under the text (a left wider than col puts text on the next
 * line). For the options, and for main.c's commands.
 */
void cli_print_row(FILE *f, const char *left, int col, const char *text);

/* Prints "rdma-dp <version>" to stdout; every command's --version and main.c's. */
void cli_print_version(void);
