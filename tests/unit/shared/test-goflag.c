/* SPDX-License-Identifier: MIT */
/*
 * Go's `flag` syntax (goflag.h) against what Go 1.25's flag.FlagSet.Parse does with the Go
 * plugin's four flags: each case lists the arguments and Go's outcome (values, where it
 * stopped, or its exact message).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "goflag.h"
#include "test.h"

static bool version, use_cdi;
static const char *config;

static const struct rdp_goflag flags[] = {
	{"config-file", RDP_GOFLAG_STRING, &config},
	{"use-cdi", RDP_GOFLAG_BOOL, &use_cdi},
	{"v", RDP_GOFLAG_BOOL, &version},
	{"version", RDP_GOFLAG_BOOL, &version},
};

#define MAXARGS 8

/* Parses "k8s-rdma-shared-dp" followed by args (NULL-terminated); returns rdp_goflag_parse(). */
static int parse(char *err, size_t errlen, const char *const *args)
{
	char *argv[MAXARGS + 1] = {(char *)"k8s-rdma-shared-dp"};
	int argc = 1;

	version = use_cdi = false;
	config = "default";
	err[0] = '\0';
	for (; args[argc - 1]; argc++)
		argv[argc] = (char *)args[argc - 1];
	return rdp_goflag_parse(flags, sizeof(flags) / sizeof(flags[0]), argc, argv, err, errlen);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_accepted(void)
{
	char err[256];

	EXPECT_EQ(parse(err, sizeof(err), ((const char *const[]){NULL})), 1);
	EXPECT_TRUE(!use_cdi && !version);
	EXPECT_STREQ(config, "default");

	/* network-operator's args with useCdi */
	EXPECT_EQ(parse(err, sizeof(err), ARGS("--use-cdi")), 2);
	EXPECT_TRUE(use_cdi);
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-use-cdi")), 2);
	EXPECT_TRUE(use_cdi);
	static const char *const yes[] = {"1", "t", "T", "TRUE", "true", "True"};
	static const char *const no[] = {"0", "f", "F", "FALSE", "false", "False"};
	for (size_t i = 0; i < 6; i++) {
		char a[32];

		snprintf(a, sizeof(a), "--use-cdi=%s", yes[i]);
		EXPECT_EQ(parse(err, sizeof(err), ARGS(a)), 2);
		EXPECT_TRUE(use_cdi);
		snprintf(a, sizeof(a), "-use-cdi=%s", no[i]);
		EXPECT_EQ(parse(err, sizeof(err), ARGS("--use-cdi", a)), 3);
		EXPECT_TRUE(!use_cdi);
	}
	/* a bool never takes the next argument: "false" is the first operand, CDI is on */
	EXPECT_EQ(parse(err, sizeof(err), ARGS("--use-cdi", "false")), 2);
	EXPECT_TRUE(use_cdi);

	EXPECT_EQ(parse(err, sizeof(err), ARGS("-v")), 2);
	EXPECT_TRUE(version);
	EXPECT_EQ(parse(err, sizeof(err), ARGS("--version")), 2);
	EXPECT_TRUE(version);
	/* -v and -version are one bool: the last one counts */
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-v", "--version=false")), 3);
	EXPECT_TRUE(!version);

	/* a string flag takes "=VALUE" or the next argument, whatever it looks like */
	EXPECT_EQ(parse(err, sizeof(err), ARGS("--config-file", "/c.json")), 3);
	EXPECT_STREQ(config, "/c.json");
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-config-file=/a=b.json", "-use-cdi")), 3);
	EXPECT_STREQ(config, "/a=b.json");
	EXPECT_TRUE(use_cdi);
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-config-file", "--use-cdi")), 3);
	EXPECT_STREQ(config, "--use-cdi");
	EXPECT_TRUE(!use_cdi);
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-config-file=")), 2);
	EXPECT_STREQ(config, "");

	/* parsing stops at the first non-flag ("-" is one) and after "--" */
	EXPECT_EQ(parse(err, sizeof(err), ARGS("serve", "--nope")), 1);
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-use-cdi", "-", "--nope")), 2);
	EXPECT_TRUE(use_cdi);
	EXPECT_EQ(parse(err, sizeof(err), ARGS("--", "--nope")), 2);
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-v", "--")), 3);
	EXPECT_STREQ(err, "");
}

static void test_help(void)
{
	char err[256];

	EXPECT_EQ(parse(err, sizeof(err), ARGS("-h")), 0);
	EXPECT_EQ(parse(err, sizeof(err), ARGS("--help")), 0);
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-help=whatever")), 0);
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-use-cdi", "-h", "--nope")), 0);
	/* -hh and --helpme are not help */
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-hh")), -EINVAL);
	EXPECT_STREQ(err, "flag provided but not defined: -hh");
}

static void test_errors(void)
{
	char err[256];

	EXPECT_EQ(parse(err, sizeof(err), ARGS("--nope")), -EINVAL);
	EXPECT_STREQ(err, "flag provided but not defined: -nope");
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-use-cdi", "--kubelet-root-dir=/x")), -EINVAL);
	EXPECT_STREQ(err, "flag provided but not defined: -kubelet-root-dir");
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-V")), -EINVAL);
	EXPECT_STREQ(err, "flag provided but not defined: -V");
	EXPECT_EQ(parse(err, sizeof(err), ARGS("--use-cdi=yes")), -EINVAL);
	EXPECT_STREQ(err, "invalid boolean value \"yes\" for -use-cdi: parse error");
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-v=")), -EINVAL);
	EXPECT_STREQ(err, "invalid boolean value \"\" for -v: parse error");
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-use-cdi=\"\\\t\n\x01\xc3\xa9")), -EINVAL);
	EXPECT_STREQ(err, "invalid boolean value \"\\\"\\\\\\t\\n\\x01\\xc3\\xa9\" for -use-cdi: "
			  "parse error");
	EXPECT_EQ(parse(err, sizeof(err), ARGS("--config-file")), -EINVAL);
	EXPECT_STREQ(err, "flag needs an argument: -config-file");
	EXPECT_EQ(parse(err, sizeof(err), ARGS("---use-cdi")), -EINVAL);
	EXPECT_STREQ(err, "bad flag syntax: ---use-cdi");
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-=x")), -EINVAL);
	EXPECT_STREQ(err, "bad flag syntax: -=x");
	EXPECT_EQ(parse(err, sizeof(err), ARGS("--=")), -EINVAL);
	EXPECT_STREQ(err, "bad flag syntax: --=");
	/* the name ends at the first '=' after its first byte */
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-u=se-cdi")), -EINVAL);
	EXPECT_STREQ(err, "flag provided but not defined: -u");
	/* flags before the bad one are set, as in Go */
	EXPECT_EQ(parse(err, sizeof(err), ARGS("-use-cdi", "-x")), -EINVAL);
	EXPECT_TRUE(use_cdi);
	/* a short buffer: cut, terminated */
	char small[8];
	EXPECT_EQ(parse(small, sizeof(small), ARGS("--nope")), -EINVAL);
	EXPECT_STREQ(small, "flag pr");
	EXPECT_EQ(rdp_goflag_parse(flags, 4, 2, (char *[]){(char *)"x", (char *)"-nope", NULL}, NULL,
				   0),
		  -EINVAL);
}

static void test_parse_bool(void)
{
	bool b = false;

	EXPECT_EQ(rdp_goflag_parse_bool("True", &b), 0);
	EXPECT_TRUE(b);
	EXPECT_EQ(rdp_goflag_parse_bool("F", &b), 0);
	EXPECT_TRUE(!b);
	EXPECT_EQ(rdp_goflag_parse_bool("tRUE", &b), -EINVAL);
	EXPECT_EQ(rdp_goflag_parse_bool("yes", &b), -EINVAL);
	EXPECT_EQ(rdp_goflag_parse_bool("", &b), -EINVAL);
	EXPECT_EQ(rdp_goflag_parse_bool("1 ", &b), -EINVAL);
}

int main(void)
{
	test_accepted();
	test_help();
	test_errors();
	test_parse_bool();
	return test_summary("test-goflag");
}
