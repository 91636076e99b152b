/* SPDX-License-Identifier: MIT */
/* sysfs.[ch]: rooted reads and path resolution on a temp tree, and the value parsers. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"
#include "sysfs.h"
#include "test.h"

static char tmpdir[1024];

static void mkfile(const char *rel, const char *content, size_t len)
{
	char path[PATH_MAX];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fwrite(content, 1, len, f);
	fclose(f);
}

#define MKFILE(rel, s) mkfile(rel, s, sizeof(s) - 1)

static void mkdir_rel(const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		perror(path);
		exit(2);
	}
}

static void mklink(const char *target, const char *rel)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", tmpdir, rel);
	if (symlink(target, path) < 0) {
		perror(path);
		exit(2);
	}
}

static void rm_rf(const char *dir)
{
	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

/*
 * tmpdir/secret          outside the root
 * tmpdir/root/a/b/c      "x\n"
 *             link_rel -> a/b        link_abs -> /a/b       link_up -> ../../../a
 *             loop1 -> loop2 -> loop1  dangling -> nowhere   esc -> ../secret
 *             esc_abs -> <tmpdir>/secret (absolute, taken relative to the root)
 */
static void build_tree(void)
{
	char big[RDP_SYSFS_ATTR_MAX + 1], target[PATH_MAX];

	mkdir_rel("root");
	mkdir_rel("root/a");
	mkdir_rel("root/a/b");
	MKFILE("root/a/b/c", "x\n");
	MKFILE("secret", "top secret\n");
	mklink("a/b", "root/link_rel");
	mklink("/a/b", "root/link_abs");
	mklink("../../../a", "root/link_up");
	mklink("loop2", "root/loop1");
	mklink("loop1", "root/loop2");
	mklink("nowhere", "root/dangling");
	mklink("../secret", "root/esc");
	snprintf(target, sizeof(target), "%s/secret", tmpdir);
	mklink(target, "root/esc_abs");
	mklink("link_rel/c", "root/chain");
	mklink("a/b/c/d", "root/through_file");

	mkdir_rel("root/attrs");
	MKFILE("root/attrs/empty", "");
	MKFILE("root/attrs/nonl", "abc");
	MKFILE("root/attrs/nl", "abc\n");
	MKFILE("root/attrs/two_nl", "abc\n\n");
	MKFILE("root/attrs/nul", "ab\0c\n");
	memset(big, 'a', sizeof(big));
	mkfile("root/attrs/page", big, RDP_SYSFS_ATTR_MAX); /* exactly a page: fine */
	mkfile("root/attrs/over", big, RDP_SYSFS_ATTR_MAX + 1); /* one more: refused */

	mkdir_rel("root/list");
	MKFILE("root/list/b", "");
	MKFILE("root/list/a", "");
	MKFILE("root/list/c10", "");
	MKFILE("root/list/c2", "");
	mkdir_rel("root/list/d");
}

static void test_resolve(int root)
{
	static const struct {
		const char *path;
		int ret; /* length, or -errno */
		const char *want; /* when ret >= 0 */
	} cases[] = {
		{"a/b/c", 5, "a/b/c"},
		{"link_rel/c", 5, "a/b/c"},
		{"link_abs/c", 5, "a/b/c"}, /* absolute target: relative to the root */
		{"link_up/b", 3, "a/b"}, /* climbs above the root: clamped */
		{"../../a", 1, "a"},
		{"/a/./b/../b//c", 5, "a/b/c"},
		{"", 0, ""},
		{"/", 0, ""},
		{"..", 0, ""},
		{"chain", 5, "a/b/c"},
		{"loop1", -ELOOP, NULL},
		{"dangling", -ENOENT, NULL},
		{"missing/x", -ENOENT, NULL},
		{"esc", -ENOENT, NULL}, /* ../secret stays in the root: no secret there */
		{"esc_abs", -ENOENT, NULL},
		{"through_file", -ENOTDIR, NULL},
	};
	char buf[256];

	/* pass 0: the kernel resolves (openat2 + /proc); pass 1: the userspace walk. */
	for (int pass = 0; pass < 2; pass++) {
		rdp_sysfs_use_openat2(pass == 0);
		for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
			int r;

			strcpy(buf, "untouched");
			r = rdp_sysfs_resolve(root, cases[i].path, buf, sizeof(buf));
			if (r != cases[i].ret)
				fprintf(stderr, "resolve pass %d case \"%s\"\n", pass,
					cases[i].path);
			EXPECT_EQ(r, cases[i].ret);
			if (cases[i].ret >= 0)
				EXPECT_STREQ(buf, cases[i].want);
		}
		/* A result that does not fit. */
		EXPECT_EQ(rdp_sysfs_resolve(root, "a/b/c", buf, 5), -ENAMETOOLONG);
	}
	rdp_sysfs_use_openat2(true);
}

static void test_read_attr(int root)
{
	static const struct {
		const char *path;
		int ret;
		const char *want;
	} cases[] = {
		{"attrs/empty", 0, ""},
		{"attrs/nonl", 3, "abc"},
		{"attrs/nl", 3, "abc"},
		{"attrs/two_nl", 4, "abc\n"}, /* one trailing newline stripped, not more */
		{"attrs/nul", -EBADMSG, NULL},
		{"attrs/over", -EFBIG, NULL},
		{"attrs/missing", -ENOENT, NULL},
		{"attrs", -EISDIR, NULL},
		{"link_abs/c", 1, "x"},
		{"link_up/b/c", 1, "x"},
		{"esc", -ENOENT, NULL}, /* never reads tmpdir/secret */
		{"esc_abs", -ENOENT, NULL},
		{"dangling", -ENOENT, NULL},
		{"loop1", -ELOOP, NULL},
	};
	static char buf[RDP_SYSFS_ATTR_MAX + 1];

	for (int pass = 0; pass < 2; pass++) {
		/* pass 0: openat2(RESOLVE_IN_ROOT); pass 1: the userspace walk. */
		rdp_sysfs_use_openat2(pass == 0);
		for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
			int r = rdp_sysfs_read_attr(root, cases[i].path, buf, sizeof(buf));

			if (r != cases[i].ret)
				fprintf(stderr, "read_attr pass %d case \"%s\"\n", pass,
					cases[i].path);
			EXPECT_EQ(r, cases[i].ret);
			if (cases[i].ret >= 0)
				EXPECT_STREQ(buf, cases[i].want);
		}
		EXPECT_EQ(rdp_sysfs_read_attr(root, "attrs/page", buf, sizeof(buf)),
			  RDP_SYSFS_ATTR_MAX);
		EXPECT_TRUE(rdp_sysfs_exists(root, "link_rel/c"));
		EXPECT_TRUE(!rdp_sysfs_exists(root, "esc"));
		EXPECT_TRUE(rdp_sysfs_exists(root, ""));
	}
	rdp_sysfs_use_openat2(true);

	/* Too small a buffer: refused, not truncated, buffer untouched. */
	char small[4] = "zzz";

	EXPECT_EQ(rdp_sysfs_read_attr(root, "attrs/nl", small, 3), -ERANGE);
	EXPECT_STREQ(small, "zzz");
	EXPECT_EQ(rdp_sysfs_read_attr(root, "attrs/nl", small, 4), 3);
	EXPECT_STREQ(small, "abc");

	if (geteuid() != 0) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/root/attrs/nl", tmpdir);
		chmod(path, 0);
		EXPECT_EQ(rdp_sysfs_read_attr(root, "attrs/nl", buf, sizeof(buf)), -EACCES);
		chmod(path, 0644);
	}
}

static void test_links(int root)
{
	char buf[64];

	for (int pass = 0; pass < 2; pass++) {
		rdp_sysfs_use_openat2(pass == 0);
		EXPECT_EQ(rdp_sysfs_read_link(root, "link_rel", buf, sizeof(buf)), 3);
		EXPECT_STREQ(buf, "a/b");
		EXPECT_EQ(rdp_sysfs_read_link(root, "link_abs/c", buf, sizeof(buf)), -EINVAL);
		EXPECT_EQ(rdp_sysfs_read_link(root, "link_abs/../../link_rel", buf, sizeof(buf)),
			  3);
		EXPECT_EQ(rdp_sysfs_read_link(root, "link_up/nothing", buf, sizeof(buf)), -ENOENT);
		EXPECT_EQ(rdp_sysfs_read_link(root, "dangling/x", buf, sizeof(buf)), -ENOENT);
	}
	rdp_sysfs_use_openat2(true);
}

static void test_links_and_lists(int root)
{
	char buf[64];
	char **names = NULL;
	size_t n = 0;

	EXPECT_EQ(rdp_sysfs_read_link(root, "link_rel", buf, sizeof(buf)), 3);
	EXPECT_STREQ(buf, "a/b");
	EXPECT_EQ(rdp_sysfs_read_link(root, "dangling", buf, sizeof(buf)), 7);
	EXPECT_STREQ(buf, "nowhere");
	/* The directories leading to the link are resolved in the root. */
	EXPECT_EQ(rdp_sysfs_read_link(root, "link_abs/c", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_sysfs_read_link(root, "a", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_sysfs_read_link(root, "nothing", buf, sizeof(buf)), -ENOENT);
	EXPECT_EQ(rdp_sysfs_read_link(root, "link_rel", buf, 3), -ERANGE);

	EXPECT_EQ(rdp_sysfs_list_dir(root, "list", 10, &names, &n), 0);
	EXPECT_EQ(n, 5);
	if (n == 5) {
		EXPECT_STREQ(names[0], "a");
		EXPECT_STREQ(names[1], "b");
		EXPECT_STREQ(names[2], "c2");
		EXPECT_STREQ(names[3], "c10");
		EXPECT_STREQ(names[4], "d");
	}
	rdp_sysfs_names_free(names, n);
	names = NULL;
	n = 0;
	EXPECT_EQ(rdp_sysfs_list_dir(root, "list", 4, &names, &n), -E2BIG);
	EXPECT_TRUE(names == NULL);
	EXPECT_EQ(rdp_sysfs_list_dir(root, "nolist", 4, &names, &n), -ENOENT);
	EXPECT_EQ(rdp_sysfs_list_dir(root, "attrs/nl", 4, &names, &n), -ENOTDIR);
	EXPECT_EQ(rdp_sysfs_list_dir(root, "link_abs", 4, &names, &n), 0);
	EXPECT_EQ(n, 1);
	rdp_sysfs_names_free(names, n);

	EXPECT_STREQ(rdp_path_basename("a/b/c"), "c");
	EXPECT_STREQ(rdp_path_basename("c"), "c");
	EXPECT_STREQ(rdp_path_basename(""), "");
}

static void test_open_root(void)
{
	int fd = -1;

	EXPECT_EQ(rdp_sysfs_open_root("/nonexistent/rdp", &fd), -ENOENT);
	EXPECT_EQ(fd, -1);
	EXPECT_EQ(rdp_sysfs_open_root("", &fd), -EINVAL);
	{
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/secret", tmpdir);
		EXPECT_EQ(rdp_sysfs_open_root(path, &fd), -ENOTDIR);
	}
}

/* ---- parsers ---- */

static void test_parse_long(void)
{
	static const struct {
		const char *s;
		long min, max;
		int ret;
		long want;
	} cases[] = {
		{"0", 0, 10, 0, 0},
		{"10", 0, 10, 0, 10},
		{"11", 0, 10, -ERANGE, 0},
		{"-1", -1, 10, 0, -1},
		{"-2", -1, 10, -ERANGE, 0},
		{"", 0, 10, -EINVAL, 0},
		{" 1", 0, 10, -EINVAL, 0},
		{"1 ", 0, 10, -EINVAL, 0},
		{"+1", 0, 10, -EINVAL, 0},
		{"0x1", 0, 10, -EINVAL, 0},
		{"-", 0, 10, -EINVAL, 0},
		{"1a", 0, 10, -EINVAL, 0},
		{"99999999999999999999999", 0, LONG_MAX, -ERANGE, 0},
		{"007", 0, 10, 0, 7},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		long v = 12345;
		int r = rdp_parse_long(cases[i].s, cases[i].min, cases[i].max, &v);

		if (r != cases[i].ret)
			fprintf(stderr, "parse_long \"%s\"\n", cases[i].s);
		EXPECT_EQ(r, cases[i].ret);
		EXPECT_EQ(v, cases[i].ret == 0 ? cases[i].want : 12345);
	}
}

static void test_parse_state(void)
{
	static const struct {
		const char *s;
		int ret, num;
		const char *name;
	} cases[] = {
		{"4: ACTIVE", 0, 4, "ACTIVE"},
		{"1: DOWN", 0, 1, "DOWN"},
		{"5: LinkUp", 0, 5, "LinkUp"},
		{"7: Phy Test", 0, 7, "Phy Test"},
		{"4: PortConfigurationTraining", 0, 4, "PortConfigurationTraining"},
		{"weird", -EINVAL, 0, NULL},
		{"", -EINVAL, 0, NULL},
		{"4:ACTIVE", -EINVAL, 0, NULL},
		{"4: ", -EINVAL, 0, NULL},
		{": ACTIVE", -EINVAL, 0, NULL},
		{"-1: ACTIVE", -EINVAL, 0, NULL},
		{"256: X", -ERANGE, 0, NULL},
		{"4: ACTIVE ", -EINVAL, 0, NULL},
		{"4: ACT\tIVE", -EINVAL, 0, NULL},
		{"4: AVERYLONGSTATENAMETHATDOESNOTFITINTHEBUFFER", -EINVAL, 0, NULL},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char name[32] = "untouched";
		int num = -7;
		int r = rdp_parse_state(cases[i].s, &num, name, sizeof(name));

		if (r != cases[i].ret)
			fprintf(stderr, "parse_state \"%s\"\n", cases[i].s);
		EXPECT_EQ(r, cases[i].ret);
		if (cases[i].ret == 0) {
			EXPECT_EQ(num, cases[i].num);
			EXPECT_STREQ(name, cases[i].name);
		} else {
			EXPECT_EQ(num, -7);
			EXPECT_STREQ(name, "untouched");
		}
	}
}

static void test_parse_ids(void)
{
	static const struct {
		const char *s;
		int ret;
		const char *want;
	} ids[] =
		{
			{"0x15b3", 0, "15b3"},	    {"0x15B3", 0, "15b3"},
			{"101e", 0, "101e"},	    {"0x15b", -EINVAL, NULL},
			{"0x15b3a", -EINVAL, NULL}, {"", -EINVAL, NULL},
			{"0x", -EINVAL, NULL},	    {"0xzzzz", -EINVAL, NULL},
			{"0x15b3 ", -EINVAL, NULL}, {"-0x1", -EINVAL, NULL},
		},
	  classes[] =
		  {
			  {"0x020700", 0, "020700"},	 {"0x020000", 0, "020000"},
			  {"020700", 0, "020700"},	 {"0x0207", -EINVAL, NULL},
			  {"0x02070000", -EINVAL, NULL}, {"", -EINVAL, NULL},
			  {"0x02070g", -EINVAL, NULL},
		  },
	  guids[] = {
		  {"58a2:e103:001b:2576", 0, "58a2:e103:001b:2576"},
		  {"58A2:E103:001B:2576", 0, "58a2:e103:001b:2576"},
		  {"58a2:e103:001b:257", -EINVAL, NULL},
		  {"58a2e103001b2576", -EINVAL, NULL},
		  {"58a2:e103:001b:2576:", -EINVAL, NULL},
		  {"58a2:e103:001b:257g", -EINVAL, NULL},
		  {"", -EINVAL, NULL},
	  };

	for (size_t i = 0; i < ARRAY_SIZE(ids); i++) {
		char out[5] = "none";
		int r = rdp_parse_hex_id(ids[i].s, out);

		EXPECT_EQ(r, ids[i].ret);
		EXPECT_STREQ(out, r == 0 ? ids[i].want : "none");
	}
	for (size_t i = 0; i < ARRAY_SIZE(classes); i++) {
		char out[7] = "none";
		int r = rdp_parse_pci_class(classes[i].s, out);

		EXPECT_EQ(r, classes[i].ret);
		EXPECT_STREQ(out, r == 0 ? classes[i].want : "none");
	}
	for (size_t i = 0; i < ARRAY_SIZE(guids); i++) {
		char out[20] = "none";
		int r = rdp_parse_guid(guids[i].s, out);

		EXPECT_EQ(r, guids[i].ret);
		EXPECT_STREQ(out, r == 0 ? guids[i].want : "none");
	}
}

static void test_parse_gid(void)
{
	static const struct {
		const char *s;
		int ret;
		bool ipv4;
	} cases[] = {
		{"0000:0000:0000:0000:0000:ffff:0a98:000c", 0, true},
		{"fe80:0000:0000:0000:c470:bd03:00cf:4964", 0, false},
		{"0000:0000:0000:0000:0000:0000:0000:0000", 0, false},
		{"0000:0000:0000:0000:0000:FFFF:0A98:000C", 0, true},
		{"::ffff:10.152.0.12", -EINVAL, false},
		{"0000:0000:0000:0000:0000:ffff:0a98", -EINVAL, false},
		{"0000:0000:0000:0000:0000:ffff:0a98:000c:0000", -EINVAL, false},
		{"0000:0000:0000:0000:0000:ffff:0a98:00xc", -EINVAL, false},
		{"", -EINVAL, false},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		uint8_t gid[16];
		int r = rdp_parse_gid(cases[i].s, gid);

		EXPECT_EQ(r, cases[i].ret);
		if (r == 0)
			EXPECT_EQ(rdp_gid_is_ipv4_mapped(gid), cases[i].ipv4);
	}
	{
		uint8_t gid[16];

		EXPECT_EQ(rdp_parse_gid("fe80:0000:0000:0000:c470:bd03:00cf:4964", gid), 0);
		EXPECT_EQ(gid[0], 0xfe);
		EXPECT_EQ(gid[1], 0x80);
		EXPECT_EQ(gid[8], 0xc4);
		EXPECT_EQ(gid[15], 0x64);
	}
}

static void test_parse_misc(void)
{
	static const struct {
		const char *s;
		int ret;
		unsigned int ma, mi;
	} devnums[] = {
		{"231:192", 0, 231, 192},     {"10:56", 0, 10, 56},	 {"231", -EINVAL, 0, 0},
		{":1", -EINVAL, 0, 0},	      {"1:", -EINVAL, 0, 0},	 {"-1:2", -EINVAL, 0, 0},
		{"1:-2", -EINVAL, 0, 0},      {"4096:0", -ERANGE, 0, 0}, {"1:2:3", -EINVAL, 0, 0},
		{"1:1048576", -ERANGE, 0, 0},
	};
	static const struct {
		const char *s;
		int ret, want;
	} numas[] = {
		{"0", 0, 0},	       {"1", 0, 1},	 {"-1", 0, -1},	      {"-2", -ERANGE, 0},
		{"65536", -ERANGE, 0}, {"", -EINVAL, 0}, {"one", -EINVAL, 0},
	};
	static const struct {
		const char *s;
		int ret;
		unsigned long mbps;
		unsigned int width;
		const char *speed;
	} rates[] = {
		{"400 Gb/sec (4X NDR)", 0, 400000, 4, "NDR"},
		{"200 Gb/sec (2X NDR)", 0, 200000, 2, "NDR"},
		{"25 Gb/sec (1X EDR)", 0, 25000, 1, "EDR"},
		{"2.5 Gb/sec (1X)", 0, 2500, 1, ""},
		{"10 Gb/sec (1X FDR10)", 0, 10000, 1, "FDR10"},
		{"800 Gb/sec (4X XDR)", 0, 800000, 4, "XDR"},
		{"400 Gb/sec", -EINVAL, 0, 0, NULL},
		{"400 Gb/sec (4X NDR", -EINVAL, 0, 0, NULL},
		{"400Gb/sec (4X NDR)", -EINVAL, 0, 0, NULL},
		{"-400 Gb/sec (4X NDR)", -EINVAL, 0, 0, NULL},
		{"400 Gb/sec (0X NDR)", -EINVAL, 0, 0, NULL},
		{"400 Gb/sec (4X ndr)", -EINVAL, 0, 0, NULL},
		{"400 Gb/sec (4X NDR) ", -EINVAL, 0, 0, NULL},
		{"400 Gb/sec (4X VERYLONGSPEED)", -EINVAL, 0, 0, NULL},
		{"99999999999 Gb/sec (4X NDR)", -ERANGE, 0, 0, NULL},
		{"", -EINVAL, 0, 0, NULL},
	};

	for (size_t i = 0; i < ARRAY_SIZE(devnums); i++) {
		unsigned int ma = 7, mi = 7;
		int r = rdp_parse_devnum(devnums[i].s, &ma, &mi);

		if (r != devnums[i].ret)
			fprintf(stderr, "devnum \"%s\"\n", devnums[i].s);
		EXPECT_EQ(r, devnums[i].ret);
		EXPECT_EQ(ma, r == 0 ? devnums[i].ma : 7);
		EXPECT_EQ(mi, r == 0 ? devnums[i].mi : 7);
	}
	for (size_t i = 0; i < ARRAY_SIZE(numas); i++) {
		int v = 99;
		int r = rdp_parse_numa_node(numas[i].s, &v);

		EXPECT_EQ(r, numas[i].ret);
		EXPECT_EQ(v, r == 0 ? numas[i].want : 99);
	}
	for (size_t i = 0; i < ARRAY_SIZE(rates); i++) {
		struct rdp_rate rate = {.mbps = 1};
		int r = rdp_parse_rate(rates[i].s, &rate);

		if (r != rates[i].ret)
			fprintf(stderr, "rate \"%s\"\n", rates[i].s);
		EXPECT_EQ(r, rates[i].ret);
		if (r == 0) {
			EXPECT_EQ(rate.mbps, rates[i].mbps);
			EXPECT_EQ(rate.width, rates[i].width);
			EXPECT_STREQ(rate.speed, rates[i].speed);
		} else {
			EXPECT_EQ(rate.mbps, 1);
		}
	}

	int ll = 0;
	bool b = false;

	EXPECT_EQ(rdp_parse_link_layer("InfiniBand", &ll), 0);
	EXPECT_EQ(ll, 1);
	EXPECT_EQ(rdp_parse_link_layer("Ethernet", &ll), 0);
	EXPECT_EQ(ll, 2);
	EXPECT_EQ(rdp_parse_link_layer("ethernet", &ll), 0);
	EXPECT_EQ(rdp_parse_link_layer("Ether net", &ll), -EINVAL);
	EXPECT_EQ(rdp_parse_link_layer("", &ll), -EINVAL);
	EXPECT_EQ(rdp_parse_bool("Y", &b), 0);
	EXPECT_TRUE(b);
	EXPECT_EQ(rdp_parse_bool("N", &b), 0);
	EXPECT_TRUE(!b);
	EXPECT_EQ(rdp_parse_bool("1", &b), 0);
	EXPECT_TRUE(b);
	EXPECT_EQ(rdp_parse_bool("0", &b), 0);
	EXPECT_TRUE(!b);
	EXPECT_EQ(rdp_parse_bool("yes", &b), -EINVAL);
	EXPECT_EQ(rdp_parse_bool("", &b), -EINVAL);

	static const struct {
		const char *s;
		bool ok;
	} bdfs[] = {
		{"0000:18:00.0", true},
		{"0000:3b:1f.7", true},
		{"10000:00:01.0", true},
		{"0101:00:00.0", true},
		{"0000:18:00.8", false},
		{"0000:18:20.0", false},
		{"000:18:00.0", false},
		{"0000:18:00", false},
		{"0000:18:00.0x", false},
		{"mlx5_core.sf.2", false},
		{"", false},
		{"0000:g8:00.0", false},
		{"pci0000:00", false},
	};

	for (size_t i = 0; i < ARRAY_SIZE(bdfs); i++) {
		if (rdp_is_pci_address(bdfs[i].s) != bdfs[i].ok)
			fprintf(stderr, "bdf \"%s\"\n", bdfs[i].s);
		EXPECT_EQ(rdp_is_pci_address(bdfs[i].s), bdfs[i].ok);
	}

	unsigned int num = 99;

	EXPECT_TRUE(rdp_is_numbered_name("uverbs12", "uverbs", &num));
	EXPECT_EQ(num, 12);
	EXPECT_TRUE(rdp_is_numbered_name("umad0", "umad", &num));
	EXPECT_EQ(num, 0);
	EXPECT_TRUE(!rdp_is_numbered_name("uverbs", "uverbs", NULL));
	EXPECT_TRUE(!rdp_is_numbered_name("uverbs01", "uverbs", NULL));
	EXPECT_TRUE(!rdp_is_numbered_name("uverbs1/../x", "uverbs", NULL));
	EXPECT_TRUE(!rdp_is_numbered_name("uverbs-1", "uverbs", NULL));
	EXPECT_TRUE(!rdp_is_numbered_name("uverbs1234567890", "uverbs", NULL));
	EXPECT_TRUE(!rdp_is_numbered_name("abi_version", "uverbs", NULL));
}

int main(void)
{
	char rootpath[PATH_MAX];
	int root = -1;

	snprintf(tmpdir, sizeof(tmpdir), "%s/rdp-test-sysfs-XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	build_tree();
	snprintf(rootpath, sizeof(rootpath), "%s/root", tmpdir);
	EXPECT_EQ(rdp_sysfs_open_root(rootpath, &root), 0);

	test_resolve(root);
	test_read_attr(root);
	test_links(root);
	test_links_and_lists(root);
	test_open_root();
	test_parse_long();
	test_parse_state();
	test_parse_ids();
	test_parse_gid();
	test_parse_misc();

	close(root);
	rm_rf(tmpdir);
	return test_summary("test-sysfs");
}
