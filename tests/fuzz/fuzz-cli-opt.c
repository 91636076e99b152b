/* SPDX-License-Identifier: MIT */
/*
 * The option-table parser (src/cli/cli-opt.h) on arbitrary command lines, and the help
 * renderer on arbitrary texts. The input is cut at NUL bytes into words: the first 15 are an
 * argv parsed against a table with every kind of row (short and long, stored and returned,
 * required, optional and no argument, hidden, a heading) and an operand; the whole input, with
 * its NULs made spaces, is the text of a help row at a column taken from its first byte.
 *
 * Beyond "no crash": the parser returns only the table's keys, an argument where one is
 * required and none where none is allowed, stored values that are argv words, an exit code
 * of 0 or 2; every rendered line fits the help width unless it is one word alone.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli-opt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

enum { KEY_MODE = CLI_KEY_LONG, KEY_OPT, KEY_HIDDEN };

/* What the parser prints: the checks are on what it returns. */
static FILE *devnull;

static bool is_word(char *const *argv, int argc, const char *s)
{
	for (int i = 0; i < argc; i++)
		if (s >= argv[i] && s <= argv[i] + strlen(argv[i]))
			return true;
	return false;
}

static void parse(char **argv, int argc, bool operand)
{
	static const struct cli_cmd with = {.name = "f", .operand = "PATH", .about = "about\n"};
	static const struct cli_cmd without = {.name = "f", .epilog = "epilog\n"};
	const char *config = NULL, *name = NULL;
	bool verbose = false;
	const struct cli_opt opts[] = {
		{"config", 'c', required_argument, "FILE", .str = &config, .help = "the config"},
		{"name", 0, required_argument, "NAME", .str = &name, .help = "a name"},
		{"verbose", 'v', no_argument, NULL, .flag = &verbose, .help = "say more"},
		{.help = "a heading"},
		{"mode", KEY_MODE, required_argument, "MODE", .help = "a mode"},
		{"opt", KEY_OPT, optional_argument, "BOOL", .help = "optional"},
		{"output", 'o', required_argument, "FMT", .help = "a format"},
		{"hidden", KEY_HIDDEN, no_argument, NULL, .help = NULL},
		{},
	};
	struct cli_parser p;
	int c;

	cli_parser_init(&p, operand ? &with : &without, opts, argc, argv);
	p.out = p.err = devnull;
	while ((c = cli_next(&p)) > 0) {
		switch (c) {
		case KEY_MODE:
		case 'o':
			CHECK(p.arg && is_word(argv, argc, p.arg));
			break;
		case KEY_OPT:
			CHECK(!p.arg || is_word(argv, argc, p.arg));
			break;
		case KEY_HIDDEN:
			CHECK(!p.arg);
			break;
		default:
			abort();
		}
	}
	CHECK(c == 0 || (c < 0 && (p.exit == 0 || p.exit == 2)));
	CHECK(c < 0 || !operand || (p.operand && is_word(argv, argc, p.operand)));
	CHECK(!config || is_word(argv, argc, config));
	CHECK(!name || is_word(argv, argc, name));
}

static void render(const char *text, int col)
{
	char *out = NULL, *line, *save;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		return;
	cli_print_row(f, "--left", col, text);
	fclose(f);
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *w = line + strspn(line, " ");

		/* at most the width, or one word (a long left side, a long word) */
		CHECK(strlen(line) <= 79 || strcspn(w, " ") == strlen(w) ||
		      strncmp(line, "  --left", 8) == 0);
		CHECK(line[strlen(line) - 1] != ' ');
	}
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char prog[] = "f";
	char *buf = malloc(size + 2), *argv[16];
	int argc = 0;

	if (!buf)
		return 0;
	if (!devnull && !(devnull = fopen("/dev/null", "w"))) {
		free(buf);
		return 0;
	}
	memcpy(buf, data, size);
	buf[size] = buf[size + 1] = '\0';
	argv[argc++] = prog;
	for (size_t i = 0; i < size && argc < 15; i += strlen(buf + i) + 1)
		argv[argc++] = buf + i;
	argv[argc] = NULL;
	parse(argv, argc, size && (data[0] & 1));

	for (size_t i = 0; i < size; i++)
		if (!buf[i] || buf[i] == '\n')
			buf[i] = ' ';
	render(buf, size ? data[0] % 48 : 0);
	free(buf);
	return 0;
}
