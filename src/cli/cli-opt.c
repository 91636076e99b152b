/* SPDX-License-Identifier: MIT */
#include "cli-opt.h"

#include <stdbool.h>
#include <string.h>

#define KEY_VERSION 0x7fff0000 /* above any command's keys; never returned */
#define KEY_AUTO 0x7ffe0000    /* + the row: the getopt value of a stored-only option */
#define HELP_COLS 79           /* the widest line of a help text */
#define HELP_COL_MAX 32        /* the options' text column at most */
#define HELP_TEXT_MIN 24       /* the narrowest column of text */

/* What every command takes besides its table, after it (in parsing and in --help). */
static const struct cli_opt builtin_opts[] = {
	{"help", 'h', no_argument, NULL, .help = "show this help"},
	{"version", KEY_VERSION, no_argument, NULL, .help = "show the version"},
	{},
};

static bool opt_end(const struct cli_opt *o)
{
	return !o->name && !o->help;
}

void cli_print_version(void)
{
	printf("rdma-dp %s\n", RDP_VERSION);
}

void cli_parser_init(struct cli_parser *p, const struct cli_cmd *cmd, const struct cli_opt *opts,
		     int argc, char **argv)
{
	const struct cli_opt *tables[] = {opts, builtin_opts};
	size_t n = 0, s = 0;

	*p = (struct cli_parser){.cmd = cmd, .opts = opts, .argc = argc, .argv = argv,
				 .out = stdout, .err = stderr};
	p->shortopts[s++] = ':'; /* a missing argument returns ':'; getopt prints nothing */
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (const struct cli_opt *o = tables[t]; o && !opt_end(o); o++) {
			if (!o->name)
				continue;
			if (n == CLI_OPTS_MAX + 2) {
				p->too_many = true;
				return;
			}
			p->opt_of[n] = o;
			p->longopts[n] = (struct option){o->name, o->has_arg, NULL,
							 o->key ? o->key : KEY_AUTO + (int)n};
			n++;
			if (!o->key || o->key >= CLI_KEY_LONG)
				continue;
			p->shortopts[s++] = (char)o->key;
			if (o->has_arg != no_argument)
				p->shortopts[s++] = ':';
			if (o->has_arg == optional_argument)
				p->shortopts[s++] = ':';
		}
	/* Both zeroed by the initializer: the ends of the tables. */
	opterr = 0;
	optind = 0; /* also resets getopt's own state, for a second parse */
}

/* For getopt_long()'s ':' (missing argument) and '?' (unknown option): says which, returns 2. */
static int option_error(const struct cli_parser *p, int c)
{
	const char *word = optind > 0 && optind <= p->argc ? p->argv[optind - 1] : "?";
	const char *cmd = p->cmd->name;
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
		fprintf(p->err, "rdma-dp %s: option '%s' needs an argument\n", cmd, buf);
	else
		fprintf(p->err, "rdma-dp %s: unknown option '%s' (see 'rdma-dp %s --help')\n", cmd,
			buf, cmd);
	return 2;
}

/* After the options: 0 when the operands are what the command takes, else -1 (said). */
static int check_operands(struct cli_parser *p)
{
	const char *cmd = p->cmd->name;
	int left = p->argc - optind;

	if (p->cmd->operand && left == 1) {
		p->operand = p->argv[optind];
		return 0;
	}
	if (!p->cmd->operand && left <= 0)
		return 0;
	if (p->cmd->operand)
		fprintf(p->err, "rdma-dp %s: expected one %s (see 'rdma-dp %s --help')\n", cmd,
			p->cmd->operand, cmd);
	else
		fprintf(p->err, "rdma-dp %s: unexpected argument '%s' (see 'rdma-dp %s --help')\n",
			cmd, p->argv[optind], cmd);
	p->exit = 2;
	return -1;
}

/* The row getopt_long() returned c for; NULL for its own ':' and '?'. */
static const struct cli_opt *row_of(const struct cli_parser *p, int c)
{
	for (size_t i = 0; p->longopts[i].name; i++)
		if (p->longopts[i].val == c)
			return p->opt_of[i];
	return NULL;
}

int cli_next(struct cli_parser *p)
{
	const struct cli_opt *o;
	int c;

	if (p->too_many) {
		fprintf(p->err, "rdma-dp %s: more than %d options in the table\n", p->cmd->name,
			CLI_OPTS_MAX);
		p->exit = 70; /* EX_SOFTWARE */
		return -1;
	}
	for (;;) {
		c = getopt_long(p->argc, p->argv, p->shortopts, p->longopts, NULL);
		p->arg = optarg;
		if (c == -1)
			return check_operands(p);
		o = row_of(p, c);
		if (!o) { /* ':' or '?' */
			p->exit = option_error(p, c);
			return -1;
		}
		if (o == &builtin_opts[0]) {
			cli_print_help(p->out, p->cmd, p->opts);
			p->exit = 0;
			return -1;
		}
		if (o == &builtin_opts[1]) {
			fprintf(p->out, "rdma-dp %s\n", RDP_VERSION);
			p->exit = 0;
			return -1;
		}
		if (o->str)
			*o->str = optarg;
		else if (o->flag)
			*o->flag = true;
		else
			return c;
	}
}

/*
 * Prints text wrapped: words up to HELP_COLS on a line, a new line at each '\n' (a final one
 * adds none; "\n\n" leaves an empty line), spaces at the start of a line dropped. The first
 * line goes pad columns on from where the cursor is, the others start at column col. A word
 * wider than the room has a line alone. No line ends in a space.
 */
static void print_wrapped(FILE *f, const char *text, int pad, int col)
{
	int room = HELP_COLS - col < HELP_TEXT_MIN ? HELP_TEXT_MIN : HELP_COLS - col;
	const char *s = text;

	for (;;) {
		const char *end = s + strcspn(s, "\n");

		do {
			const char *e, *w;

			while (s < end && *s == ' ')
				s++;
			for (e = w = s; w < end;) {
				const char *we = w;

				while (we < end && *we != ' ')
					we++;
				if (e > s && we - s > room)
					break;
				e = we;
				while (we < end && *we == ' ')
					we++;
				w = we;
			}
			if (e > s)
				fprintf(f, "%*s%.*s", pad, "", (int)(e - s), s);
			fputc('\n', f);
			pad = col;
			s = e;
			while (s < end && *s == ' ')
				s++;
		} while (s < end);
		if (!*end || !end[1])
			break;
		s = end + 1;
	}
}

void cli_print_row(FILE *f, const char *left, int col, const char *text)
{
	int len = fprintf(f, "  %s", left);

	if (len + 1 > col) {
		fputc('\n', f);
		len = 0;
	}
	print_wrapped(f, text, col - len, col);
}

/* "-c, --config-file FILE", "    --use-cdi[=BOOL]" into buf. */
static void opt_left(const struct cli_opt *o, char *buf, size_t size)
{
	bool optional = o->arg && o->has_arg == optional_argument;
	char shrt[8] = "    ";

	if (o->key && o->key < CLI_KEY_LONG)
		snprintf(shrt, sizeof(shrt), "-%c, ", o->key);
	snprintf(buf, size, "%s--%s%s%s%s", shrt, o->name, !o->arg ? "" : optional ? "[=" : " ",
		 o->arg ? o->arg : "", optional ? "]" : "");
}

static bool opt_shown(const struct cli_opt *o)
{
	return o->name && o->help;
}

void cli_print_help(FILE *f, const struct cli_cmd *cmd, const struct cli_opt *opts)
{
	const struct cli_opt *tables[] = {opts, builtin_opts};
	char left[96];
	int col = 0;

	fprintf(f, "Usage: rdma-dp %s [OPTIONS]%s%s\n", cmd->name, cmd->operand ? " " : "",
		cmd->operand ? cmd->operand : "");
	if (cmd->about) {
		fputc('\n', f);
		print_wrapped(f, cmd->about, 0, 0);
	}
	fprintf(f, "\nOptions:\n");
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (const struct cli_opt *o = tables[t]; o && !opt_end(o); o++) {
			int w;

			if (!opt_shown(o))
				continue;
			opt_left(o, left, sizeof(left));
			w = 2 + (int)strlen(left) + 2;
			if (w > col)
				col = w > HELP_COL_MAX ? HELP_COL_MAX : w;
		}
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
		for (const struct cli_opt *o = tables[t]; o && !opt_end(o); o++) {
			if (!o->name) { /* a heading */
				print_wrapped(f, o->help, 2, 2);
			} else if (o->help) {
				opt_left(o, left, sizeof(left));
				cli_print_row(f, left, col, o->help);
			}
		}
	if (cmd->epilog) {
		fputc('\n', f);
		print_wrapped(f, cmd->epilog, 0, 0);
	}
}
