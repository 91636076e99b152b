/* SPDX-License-Identifier: MIT */
/* The option-table parser and the --help it renders (src/cli/cli-opt.h). */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli-opt.h"
#include "test.h"

enum { KEY_MODE = CLI_KEY_LONG, KEY_OPT, KEY_HIDDEN };

#define LONG_HELP                                                                                  \
	"a help text long enough to be wrapped more than once: every word of it must come "       \
	"back in order, no line may pass the width of the help, and each continuation line "      \
	"starts under the first word (default " CLI_STR(1234) ")"

static const struct cli_cmd cmd_plain = {
	.name = "t",
	.about = "What t does, in a paragraph long enough to be wrapped by the renderer at the "
		 "help width.\n\nA second paragraph.\n",
	.epilog = "Exit status: 0, 1 or 2.\n",
};

static const struct cli_cmd cmd_operand = {
	.name = "get",
	.operand = "PATH",
	.about = "Gets PATH.\n",
};

struct result {
	const char *config, *name, *mode, *opt, *operand;
	bool verbose, opt_seen, hidden;
	int last;      /* what cli_next() returned last */
	int exit;      /* p.exit when last < 0 */
	char out[4096]; /* stdout */
	char err[1024]; /* stderr */
};

/* Runs fn with fd (1 or 2) going into buf. */
static void capture_begin(int fd, FILE **tmp, int *saved)
{
	fflush(fd == 1 ? stdout : stderr);
	*tmp = tmpfile();
	*saved = dup(fd);
	dup2(fileno(*tmp), fd);
}

static void capture_end(int fd, FILE *tmp, int saved, char *buf, size_t size)
{
	size_t n;

	fflush(fd == 1 ? stdout : stderr);
	dup2(saved, fd);
	close(saved);
	rewind(tmp);
	n = fread(buf, 1, size - 1, tmp);
	buf[n] = '\0';
	fclose(tmp);
}

/* args: NULL-terminated, args[0] the command's name. */
static void parse(const struct cli_cmd *cmd, const char *const *args, struct result *r)
{
	char *argv[16];
	const struct cli_opt opts[] = {
		{"config", 'c', required_argument, "FILE", .str = &r->config,
		 .help = "the config (default /etc/t.json)"},
		{"name", 0, required_argument, "NAME", .str = &r->name, .help = "a name"},
		{"verbose", 'v', no_argument, NULL, .flag = &r->verbose, .help = "say more"},
		{.help = "A heading between the options, long enough to be wrapped at the help "
			 "width like the other texts."},
		{"mode", KEY_MODE, required_argument, "MODE", .help = LONG_HELP},
		{"opt", KEY_OPT, optional_argument, "BOOL", .help = "an optional argument"},
		{"hidden", KEY_HIDDEN, no_argument, NULL, .help = NULL}, /* not in --help */
		{},
	};
	struct cli_parser p;
	FILE *tout, *terr;
	int argc = 0, sout, serr, c;

	while (args[argc] && argc < 15) {
		argv[argc] = (char *)args[argc]; /* getopt reorders argv, never the strings */
		argc++;
	}
	argv[argc] = NULL;
	memset(r, 0, sizeof(*r));
	capture_begin(1, &tout, &sout);
	capture_begin(2, &terr, &serr);
	cli_parser_init(&p, cmd, opts, argc, argv);
	while ((c = cli_next(&p)) > 0) {
		switch (c) {
		case KEY_MODE:
			r->mode = p.arg;
			break;
		case KEY_OPT:
			r->opt_seen = true;
			r->opt = p.arg;
			break;
		case KEY_HIDDEN:
			r->hidden = true;
			break;
		default:
			r->mode = "unexpected key";
		}
	}
	r->last = c;
	r->exit = c < 0 ? p.exit : -1;
	r->operand = p.operand;
	capture_end(2, terr, serr, r->err, sizeof(r->err));
	capture_end(1, tout, sout, r->out, sizeof(r->out));
}

#define SEE "(see 'rdma-dp t --help')\n"
#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define STARTS_WITH(s, prefix) (strncmp((s), (prefix), strlen(prefix)) == 0)

static void test_values(void)
{
	struct result r;

	parse(&cmd_plain,
	      ARGV("t", "-c", "a.json", "--name=n", "-v", "--mode", "m", "--opt", "--hidden"), &r);
	EXPECT_EQ(r.last, 0);
	EXPECT_STREQ(r.config, "a.json");
	EXPECT_STREQ(r.name, "n");
	EXPECT_TRUE(r.verbose);
	EXPECT_STREQ(r.mode, "m");
	EXPECT_TRUE(r.opt_seen && !r.opt);
	EXPECT_TRUE(r.hidden);
	EXPECT_STREQ(r.err, "");
	EXPECT_STREQ(r.out, "");

	/* short options in a cluster, an attached argument, an optional one given */
	parse(&cmd_plain, ARGV("t", "-vcb.json", "--opt=false", "--config", "c.json"), &r);
	EXPECT_EQ(r.last, 0);
	EXPECT_TRUE(r.verbose);
	EXPECT_STREQ(r.config, "c.json"); /* the last one counts */
	EXPECT_STREQ(r.opt, "false");
	EXPECT_TRUE(!r.name && !r.mode);

	/* a second parse starts afresh (getopt's state is reset) */
	parse(&cmd_plain, ARGV("t", "--name", "again"), &r);
	EXPECT_EQ(r.last, 0);
	EXPECT_STREQ(r.name, "again");
	EXPECT_TRUE(!r.verbose);
}

static void test_usage_errors(void)
{
	const struct {
		const char *const *argv;
		const char *err;
	} cases[] = {
		{ARGV("t", "--bogus"), "rdma-dp t: unknown option '--bogus' " SEE},
		{ARGV("t", "--bogus=1"), "rdma-dp t: unknown option '--bogus' " SEE},
		{ARGV("t", "-x"), "rdma-dp t: unknown option '-x' (see 'rdma-dp t --help')\n"},
		{ARGV("t", "-vx"), "rdma-dp t: unknown option '-x' (see 'rdma-dp t --help')\n"},
		{ARGV("t", "-c"), "rdma-dp t: option '-c' needs an argument\n"},
		{ARGV("t", "--name"), "rdma-dp t: option '--name' needs an argument\n"},
		{ARGV("t", "--mode"), "rdma-dp t: option '--mode' needs an argument\n"},
		{ARGV("t", "extra"), "rdma-dp t: unexpected argument 'extra' " SEE},
		{ARGV("t", "-v", "extra", "--name", "n"),
		 "rdma-dp t: unexpected argument 'extra' (see 'rdma-dp t --help')\n"},
	};
	struct result r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		parse(&cmd_plain, cases[i].argv, &r);
		EXPECT_TRUE(r.last < 0);
		EXPECT_EQ(r.exit, 2);
		EXPECT_STREQ(r.err, cases[i].err);
		EXPECT_STREQ(r.out, "");
	}
}

static void test_operand(void)
{
	struct result r;

	parse(&cmd_operand, ARGV("get", "/api", "-v"), &r); /* options after the operand too */
	EXPECT_EQ(r.last, 0);
	EXPECT_STREQ(r.operand, "/api");
	EXPECT_TRUE(r.verbose);
	parse(&cmd_operand, ARGV("get", "-v"), &r);
	EXPECT_EQ(r.exit, 2);
	EXPECT_STREQ(r.err, "rdma-dp get: expected one PATH (see 'rdma-dp get --help')\n");
	parse(&cmd_operand, ARGV("get", "a", "b"), &r);
	EXPECT_EQ(r.exit, 2);
	EXPECT_STREQ(r.err, "rdma-dp get: expected one PATH (see 'rdma-dp get --help')\n");
	parse(&cmd_operand, ARGV("get", "--", "-a"), &r);
	EXPECT_EQ(r.last, 0);
	EXPECT_STREQ(r.operand, "-a");
}

static void test_version(void)
{
	struct result r;

	parse(&cmd_plain, ARGV("t", "--version"), &r);
	EXPECT_EQ(r.exit, 0);
	EXPECT_STREQ(r.out, "rdma-dp " RDP_VERSION "\n");
	EXPECT_STREQ(r.err, "");
	/* --version and --help answer before a later usage error */
	parse(&cmd_plain, ARGV("t", "--version", "--bogus"), &r);
	EXPECT_EQ(r.exit, 0);
}

/* The words of s, one space between them. */
static void words(const char *s, char *buf, size_t size)
{
	size_t n = 0;

	for (; *s && n + 1 < size; s++) {
		if (*s == ' ' || *s == '\n') {
			if (n && buf[n - 1] != ' ')
				buf[n++] = ' ';
		} else {
			buf[n++] = *s;
		}
	}
	if (n && buf[n - 1] == ' ')
		n--;
	buf[n] = '\0';
}

static void test_help(void)
{
	struct result r;
	char *line, *save, *mode_help = NULL, got[1024], want[1024];
	int col = -1, n_lines = 0;
	bool in_mode = false;

	parse(&cmd_plain, ARGV("t", "--name", "x", "-h", "--bogus"), &r);
	EXPECT_EQ(r.exit, 0);
	EXPECT_STREQ(r.err, "");
	EXPECT_TRUE(STARTS_WITH(r.out, "Usage: rdma-dp t [OPTIONS]\n\nWhat t does,"));
	EXPECT_CONTAINS(r.out, "help width.\n\nA second paragraph.\n\nOptions:\n");
	EXPECT_CONTAINS(r.out, "\n  -c, --config FILE  ");
	EXPECT_CONTAINS(r.out, "\n      --name NAME    ");
	EXPECT_CONTAINS(r.out, "\n  -v, --verbose      say more\n");
	EXPECT_CONTAINS(r.out, "\n      --opt[=BOOL]   an optional argument\n");
	EXPECT_CONTAINS(r.out, "\n  A heading between the options, long enough to be wrapped at "
			       "the help width\n  like the other texts.\n");
	EXPECT_CONTAINS(r.out, "\n  -h, --help         show this help\n"
			       "      --version      show the version\n\n"
			       "Exit status: 0, 1 or 2.\n");
	EXPECT_TRUE(!strstr(r.out, "hidden"));

	/* every line fits; the long help comes back whole, its lines aligned under its start */
	for (line = strtok_r(r.out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		n_lines++;
		EXPECT_TRUE(strlen(line) <= 79);
		EXPECT_TRUE(line[strlen(line) - 1] != ' ');
		if (strncmp(line, "      --mode MODE", 17) == 0) {
			col = (int)(strstr(line, "a help") - line);
			mode_help = strdup(line + col);
			in_mode = true;
			continue;
		}
		if (in_mode && (int)strspn(line, " ") == col && mode_help) {
			size_t len = strlen(mode_help) + strlen(line + col) + 2;
			char *joined = malloc(len);

			snprintf(joined, len, "%s %s", mode_help, line + col);
			free(mode_help);
			mode_help = joined;
			continue;
		}
		in_mode = false;
	}
	EXPECT_TRUE(n_lines > 10);
	EXPECT_EQ(col, 2 + 17 + 2);
	words(LONG_HELP, want, sizeof(want));
	words(mode_help ? mode_help : "", got, sizeof(got));
	EXPECT_STREQ(got, want);
	free(mode_help);

	parse(&cmd_operand, ARGV("get", "--help"), &r);
	EXPECT_TRUE(STARTS_WITH(r.out, "Usage: rdma-dp get [OPTIONS] PATH\n\nGets PATH.\n"));
}

static void test_row(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cli_print_row(f, "short", 10, "text");
	cli_print_row(f, "a-rather-long-left-side", 10, "text");
	cli_print_row(f, "x", 10, "one\ntwo");
	cli_print_row(f, "y", 10, "");
	fclose(f);
	EXPECT_STREQ(buf, "  short   text\n"
			  "  a-rather-long-left-side\n"
			  "          text\n"
			  "  x       one\n"
			  "          two\n"
			  "  y\n");
	free(buf);
}

/* A table larger than CLI_OPTS_MAX: said, exit 70, no option parsed. */
static void test_too_many(void)
{
	static const struct cli_cmd cmd = {.name = "big"};
	struct cli_opt opts[CLI_OPTS_MAX + 2] = {};
	char names[CLI_OPTS_MAX + 1][8];
	char name[] = "big", *argv[] = {name, NULL};
	struct cli_parser p;
	FILE *terr;
	char err[256];
	int serr, c;

	for (int i = 0; i <= CLI_OPTS_MAX; i++) {
		snprintf(names[i], sizeof(names[i]), "o%d", i);
		opts[i] = (struct cli_opt){names[i], CLI_KEY_LONG + i, no_argument, NULL,
					   .help = "x"};
	}
	capture_begin(2, &terr, &serr);
	cli_parser_init(&p, &cmd, opts, 1, argv);
	c = cli_next(&p);
	capture_end(2, terr, serr, err, sizeof(err));
	EXPECT_TRUE(c < 0);
	EXPECT_EQ(p.exit, 70);
	EXPECT_CONTAINS(err, "rdma-dp big: more than 32 options in the table");
}

int main(void)
{
	test_values();
	test_usage_errors();
	test_operand();
	test_version();
	test_help();
	test_row();
	test_too_many();
	return test_summary("test-cli-opt");
}
