/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "cdi.h"
#include "test.h"

static void test_class(void)
{
	char buf[RDP_CDI_CLASS_MAX], small[4];

	EXPECT_EQ(rdp_cdi_class("rdma", "hca_shared_devices_a", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "hca_shared_devices_a");
	EXPECT_EQ(rdp_cdi_class("example.com", "x", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "example_com__x");
	EXPECT_EQ(rdp_cdi_class("nvidia.com", "hca-a", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "nvidia_com__hca-a");
	EXPECT_EQ(rdp_cdi_class("a.b.c", "d_e-f", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "a_b_c__d_e-f");
	/* a digit first: the default prefix keeps the name; another prefix puts itself first */
	EXPECT_EQ(rdp_cdi_class("rdma", "1hca", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_cdi_class("example.com", "1hca", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "example_com__1hca");
	EXPECT_EQ(rdp_cdi_class("1example.com", "hca", buf, sizeof(buf)), -EINVAL);
	/* the last character must be a letter or digit */
	EXPECT_EQ(rdp_cdi_class("rdma", "hca_", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_cdi_class("rdma", "hca-", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_cdi_class("example.com", "x_", buf, sizeof(buf)), -EINVAL);
	/* a dot in the name stays a dot, which v0.5 classes cannot hold */
	EXPECT_EQ(rdp_cdi_class("rdma", "hca.a", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_cdi_class("example.com", "hca.a", buf, sizeof(buf)), -EINVAL);
	/* one character: v0.5.2 panics on it */
	EXPECT_EQ(rdp_cdi_class("rdma", "a", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_cdi_class("rdma", "ab", buf, sizeof(buf)), 0);
	EXPECT_EQ(rdp_cdi_class("rdma", "", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_cdi_class("rdma", "a/b", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_cdi_class("rdma", "hca", small, sizeof(small)), 0);
	EXPECT_EQ(rdp_cdi_class("rdma", "hcas", small, sizeof(small)), -ENOBUFS);
	EXPECT_EQ(rdp_cdi_class(NULL, "hca", buf, sizeof(buf)), -EINVAL);
	{
		char long_name[400];

		memset(long_name, 'a', sizeof(long_name) - 1);
		long_name[sizeof(long_name) - 1] = '\0';
		EXPECT_EQ(rdp_cdi_class("rdma", long_name, buf, sizeof(buf)), -EINVAL);
		long_name[RDP_CDI_CLASS_MAX - 1] = '\0';
		EXPECT_EQ(rdp_cdi_class("rdma", long_name, buf, sizeof(buf)), 0);
	}
}

static void test_names(void)
{
	char buf[RDP_CDI_QUALIFIED_MAX];

	EXPECT_TRUE(rdp_cdi_valid_vendor(RDP_CDI_VENDOR));
	EXPECT_TRUE(rdp_cdi_valid_vendor("nvidia.com"));
	EXPECT_TRUE(!rdp_cdi_valid_vendor("1vendor.io"));
	EXPECT_TRUE(!rdp_cdi_valid_vendor("vendor.io."));
	EXPECT_TRUE(!rdp_cdi_valid_vendor("ven/dor"));
	EXPECT_TRUE(!rdp_cdi_valid_vendor("v"));
	EXPECT_TRUE(!rdp_cdi_valid_vendor(""));
	EXPECT_TRUE(!rdp_cdi_valid_vendor(NULL));

	EXPECT_TRUE(rdp_cdi_valid_class("hca_shared_devices_a"));
	EXPECT_TRUE(rdp_cdi_valid_class("net-rdma"));
	EXPECT_TRUE(rdp_cdi_valid_class("A9"));
	EXPECT_TRUE(!rdp_cdi_valid_class("net.rdma"));
	EXPECT_TRUE(!rdp_cdi_valid_class("_net"));
	EXPECT_TRUE(!rdp_cdi_valid_class("9net"));
	EXPECT_TRUE(!rdp_cdi_valid_class("net_"));
	EXPECT_TRUE(!rdp_cdi_valid_class("net rdma"));
	EXPECT_TRUE(!rdp_cdi_valid_class("n"));
	EXPECT_TRUE(!rdp_cdi_valid_class("ü_x"));

	EXPECT_TRUE(rdp_cdi_valid_device_name("0000:18:00.0"));
	EXPECT_TRUE(rdp_cdi_valid_device_name("0000:03:00.0-sf2"));
	EXPECT_TRUE(rdp_cdi_valid_device_name("rxe0"));
	EXPECT_TRUE(rdp_cdi_valid_device_name("mlx5_0"));
	EXPECT_TRUE(rdp_cdi_valid_device_name("0"));
	EXPECT_TRUE(!rdp_cdi_valid_device_name(""));
	EXPECT_TRUE(!rdp_cdi_valid_device_name(":0"));
	EXPECT_TRUE(!rdp_cdi_valid_device_name("a:"));
	EXPECT_TRUE(!rdp_cdi_valid_device_name("a/b"));
	EXPECT_TRUE(!rdp_cdi_valid_device_name("a=b"));
	EXPECT_TRUE(!rdp_cdi_valid_device_name("a b"));

	EXPECT_EQ(rdp_cdi_file_name("hca", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "rdma-dp.io-hca.json");
	EXPECT_EQ(rdp_cdi_file_name("../x", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_cdi_qualified_name("hca", "0000:18:00.0", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "rdma-dp.io/hca=0000:18:00.0");
	EXPECT_EQ(rdp_cdi_qualified_name("hca", "a=b", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_cdi_qualified_name("hca", "rxe0", buf, 10), -ENOBUFS);
}

static const struct rdp_cdi_node dev0_nodes[] = {
	{"/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0"},
	{"/dev/infiniband/umad0", "/dev/infiniband/umad0"},
};
static const struct rdp_cdi_node dev1_nodes[] = {
	{"/dev/infiniband/uverbs1", NULL},
};
static const struct rdp_cdi_device small_devices[] = {
	{.name = "0000:18:00.0", .nodes = dev0_nodes, .n_nodes = 2},
	{.name = "0000:03:00.0-sf2", .nodes = dev1_nodes, .n_nodes = 1},
};
static const struct rdp_cdi_node cm_node[] = {
	{"/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm"},
};
static const char *const small_env[] = {"NCCL_IB_TC=106", "X=a=b \"ü\"\\/"};
static const struct rdp_cdi_spec small_spec = {
	.class = "hca_shared_devices_a",
	.devices = small_devices,
	.n_devices = 2,
	.nodes = cm_node,
	.n_nodes = 1,
	.env = small_env,
	.n_env = 2,
};

static const char small_golden[] =
	"{\n"
	"  \"cdiVersion\": \"0.5.0\",\n"
	"  \"kind\": \"rdma-dp.io/hca_shared_devices_a\",\n"
	"  \"devices\": [\n"
	"    {\n"
	"      \"name\": \"0000:18:00.0\",\n"
	"      \"containerEdits\": {\n"
	"        \"deviceNodes\": [\n"
	"          {\n"
	"            \"path\": \"/dev/infiniband/uverbs0\",\n"
	"            \"hostPath\": \"/dev/infiniband/uverbs0\",\n"
	"            \"permissions\": \"rw\"\n"
	"          },\n"
	"          {\n"
	"            \"path\": \"/dev/infiniband/umad0\",\n"
	"            \"hostPath\": \"/dev/infiniband/umad0\",\n"
	"            \"permissions\": \"rw\"\n"
	"          }\n"
	"        ]\n"
	"      }\n"
	"    },\n"
	"    {\n"
	"      \"name\": \"0000:03:00.0-sf2\",\n"
	"      \"containerEdits\": {\n"
	"        \"deviceNodes\": [\n"
	"          {\n"
	"            \"path\": \"/dev/infiniband/uverbs1\",\n"
	"            \"permissions\": \"rw\"\n"
	"          }\n"
	"        ]\n"
	"      }\n"
	"    }\n"
	"  ],\n"
	"  \"containerEdits\": {\n"
	"    \"env\": [\n"
	"      \"NCCL_IB_TC=106\",\n"
	"      \"X=a=b \\\"ü\\\"\\\\/\"\n"
	"    ],\n"
	"    \"deviceNodes\": [\n"
	"      {\n"
	"        \"path\": \"/dev/infiniband/rdma_cm\",\n"
	"        \"hostPath\": \"/dev/infiniband/rdma_cm\",\n"
	"        \"permissions\": \"rw\"\n"
	"      }\n"
	"    ]\n"
	"  }\n"
	"}\n";

static void test_render(void)
{
	struct rdp_cdi_spec s = small_spec;
	char *json = NULL, *again = NULL;

	EXPECT_EQ(rdp_cdi_render(&s, &json), 0);
	EXPECT_STREQ(json, small_golden);
	EXPECT_EQ(rdp_cdi_render(&s, &again), 0);
	EXPECT_STREQ(again, json);
	rdp_free(json);
	rdp_free(again);

	/* no top-level edits at all: the key is left out */
	s.n_nodes = 0;
	s.n_env = 0;
	s.n_devices = 1;
	EXPECT_EQ(rdp_cdi_render(&s, &json), 0);
	EXPECT_TRUE(json && !strstr(json, "\n  \"containerEdits\""));
	EXPECT_TRUE(json && !strstr(json, "\"env\""));
	EXPECT_TRUE(json && json[strlen(json) - 1] == '\n' && json[strlen(json) - 2] == '}');
	rdp_free(json);
	/* only env */
	s.n_env = 1;
	EXPECT_EQ(rdp_cdi_render(&s, &json), 0);
	EXPECT_TRUE(json && strstr(json, "\"env\"") && !strstr(json, "rdma_cm"));
	rdp_free(json);

	/* no device: no file */
	s = small_spec;
	s.n_devices = 0;
	json = (char *)"sentinel";
	EXPECT_EQ(rdp_cdi_render(&s, &json), 0);
	EXPECT_TRUE(json == NULL);
}

static void expect_einval(const struct rdp_cdi_spec *s, int line)
{
	char *json = (char *)"sentinel";
	int r = rdp_cdi_render(s, &json);

	if (r != -EINVAL || json != NULL)
		fprintf(stderr, "line %d: r=%d\n", line, r);
	EXPECT_EQ(r, -EINVAL);
	EXPECT_TRUE(json == NULL);
}

static void test_render_invalid(void)
{
	struct rdp_cdi_spec s;
	struct rdp_cdi_device devs[2];
	struct rdp_cdi_node nodes[1];
	const char *env[1];

	s = small_spec;
	s.class = "hca.a";
	expect_einval(&s, __LINE__);
	s.class = NULL;
	expect_einval(&s, __LINE__);

	/* two devices of one name */
	s = small_spec;
	devs[0] = small_devices[0];
	devs[1] = small_devices[0];
	s.devices = devs;
	expect_einval(&s, __LINE__);
	/* a device without nodes (empty edits) */
	devs[1] = small_devices[1];
	devs[1].n_nodes = 0;
	expect_einval(&s, __LINE__);
	devs[1].nodes = NULL;
	devs[1].n_nodes = 1;
	expect_einval(&s, __LINE__);
	devs[1] = small_devices[1];
	devs[1].name = "bad/name";
	expect_einval(&s, __LINE__);
	/* relative paths, invalid UTF-8 */
	devs[1] = small_devices[1];
	nodes[0].path = "dev/infiniband/uverbs1";
	nodes[0].host_path = NULL;
	devs[1].nodes = nodes;
	expect_einval(&s, __LINE__);
	nodes[0].path = "/dev/infiniband/uverbs1";
	nodes[0].host_path = "";
	expect_einval(&s, __LINE__);
	nodes[0].host_path = "/dev/\xff";
	expect_einval(&s, __LINE__);
	nodes[0].host_path = "/dev/\xc0\xaf"; /* overlong '/' */
	expect_einval(&s, __LINE__);
	nodes[0].host_path = "/dev/\xed\xa0\x80"; /* a surrogate */
	expect_einval(&s, __LINE__);
	nodes[0].host_path = "/dev/\xe2\x82"; /* truncated */
	expect_einval(&s, __LINE__);
	nodes[0].host_path = "/dev/\xf0\x9f\x98\x80"; /* fine: U+1F600 */
	{
		char *json = NULL;

		EXPECT_EQ(rdp_cdi_render(&s, &json), 0);
		rdp_free(json);
	}
	/* top-level nodes are checked even when there is no device */
	s = small_spec;
	nodes[0].path = "rdma_cm";
	s.nodes = nodes;
	s.n_devices = 0;
	expect_einval(&s, __LINE__);
	/* env */
	s = small_spec;
	s.env = env;
	s.n_env = 1;
	env[0] = "=x";
	expect_einval(&s, __LINE__);
	env[0] = "NOEQUALS";
	expect_einval(&s, __LINE__);
	env[0] = "1A=x";
	expect_einval(&s, __LINE__);
	env[0] = "A-B=x";
	expect_einval(&s, __LINE__);
	env[0] = "A=\xff";
	expect_einval(&s, __LINE__);
	env[0] = NULL;
	expect_einval(&s, __LINE__);
	s.n_env = RDP_CDI_MAX_ENV + 1;
	expect_einval(&s, __LINE__);
	/* too many devices */
	s = small_spec;
	s.n_devices = RDP_CDI_MAX_DEVICES + 1;
	expect_einval(&s, __LINE__);
	{
		char *path = malloc(RDP_CDI_PATH_MAX + 1);

		memset(path, 'a', RDP_CDI_PATH_MAX);
		path[0] = '/';
		path[RDP_CDI_PATH_MAX] = '\0';
		s = small_spec;
		nodes[0].path = path;
		nodes[0].host_path = NULL;
		s.nodes = nodes;
		expect_einval(&s, __LINE__);
		path[RDP_CDI_PATH_MAX - 1] = '\0';
		{
			char *json = NULL;

			EXPECT_EQ(rdp_cdi_render(&s, &json), 0);
			rdp_free(json);
		}
		free(path);
	}
}

/* 8192 devices renders; their names must all be distinct. */
/* A device of env only (the DRA driver's per-request devices), and one with both. */
static void test_render_device_env(void)
{
	static const char *const env1[] = {"RDMA_DEVICE_NIC=mlx5_0:1", "NCCL_IB_HCA==mlx5_0:1"};
	static const char *const bad[] = {"=x"};
	struct rdp_cdi_device devs[2] = {
		{.name = "0000:18:00.0", .nodes = dev1_nodes, .n_nodes = 1, .env = env1, .n_env = 1},
		{.name = "req-nic", .env = env1, .n_env = 2},
	};
	struct rdp_cdi_spec s = {.class = "claim", .devices = devs, .n_devices = 2};
	char *json = NULL;
	const char *want =
		"{\n"
		"  \"cdiVersion\": \"0.5.0\",\n"
		"  \"kind\": \"rdma-dp.io/claim\",\n"
		"  \"devices\": [\n"
		"    {\n"
		"      \"name\": \"0000:18:00.0\",\n"
		"      \"containerEdits\": {\n"
		"        \"env\": [\n"
		"          \"RDMA_DEVICE_NIC=mlx5_0:1\"\n"
		"        ],\n"
		"        \"deviceNodes\": [\n"
		"          {\n"
		"            \"path\": \"/dev/infiniband/uverbs1\",\n"
		"            \"permissions\": \"rw\"\n"
		"          }\n"
		"        ]\n"
		"      }\n"
		"    },\n"
		"    {\n"
		"      \"name\": \"req-nic\",\n"
		"      \"containerEdits\": {\n"
		"        \"env\": [\n"
		"          \"RDMA_DEVICE_NIC=mlx5_0:1\",\n"
		"          \"NCCL_IB_HCA==mlx5_0:1\"\n"
		"        ]\n"
		"      }\n"
		"    }\n"
		"  ]\n"
		"}\n";

	EXPECT_EQ(rdp_cdi_render(&s, &json), 0);
	EXPECT_STREQ(json, want);
	rdp_free(json);
	/* neither nodes nor env: empty edits */
	devs[1].n_env = 0;
	json = NULL;
	EXPECT_EQ(rdp_cdi_render(&s, &json), -EINVAL);
	EXPECT_TRUE(json == NULL);
	/* an invalid variable, env without its array */
	devs[1].env = bad;
	devs[1].n_env = 1;
	EXPECT_EQ(rdp_cdi_render(&s, &json), -EINVAL);
	devs[1].env = NULL;
	EXPECT_EQ(rdp_cdi_render(&s, &json), -EINVAL);
}

static void test_render_max(void)
{
	struct rdp_cdi_device *devs = calloc(RDP_CDI_MAX_DEVICES, sizeof(*devs));
	char (*names)[16] = calloc(RDP_CDI_MAX_DEVICES, sizeof(*names));
	struct rdp_cdi_spec s = small_spec;
	char *json = NULL;

	for (size_t i = 0; i < RDP_CDI_MAX_DEVICES; i++) {
		snprintf(names[i], sizeof(names[i]), "rxe%zu", i);
		devs[i].name = names[i];
		devs[i].nodes = dev1_nodes;
		devs[i].n_nodes = 1;
	}
	s.devices = devs;
	s.n_devices = RDP_CDI_MAX_DEVICES;
	EXPECT_EQ(rdp_cdi_render(&s, &json), 0);
	EXPECT_TRUE(json && strstr(json, "\"rxe8191\""));
	rdp_free(json);
	devs[8000].name = "rxe17";
	expect_einval(&s, __LINE__);
	free(devs);
	free(names);
}

static char tmpdir[64];

static int count_entries(int dirfd, const char *prefix)
{
	int n = 0, fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY);
	DIR *d = fdopendir(fd);
	struct dirent *de;

	while ((de = readdir(d)))
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(d);
	return n;
}

static char *slurp(int dirfd, const char *name)
{
	static char buf[8192];
	int fd = openat(dirfd, name, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return buf;
}

static void test_write(int dfd)
{
	const char *f = "rdma-dp.io-hca.json";
	struct stat st1, st2;
	struct timespec old[2] = {{1000000, 0}, {1000000, 0}};
	void (*prev)(int);
	struct rlimit rl, small;
	char *json = NULL;

	EXPECT_EQ(rdp_cdi_render(&small_spec, &json), 0);
	EXPECT_EQ(rdp_cdi_write_at(dfd, "hca", json), 0);
	EXPECT_STREQ(slurp(dfd, f), json);
	EXPECT_EQ(fstatat(dfd, f, &st1, 0), 0);
	EXPECT_EQ(st1.st_mode & 07777, 0644);
	EXPECT_EQ(count_entries(dfd, "."), 2); /* ".", ".." and no temp file */

	/* the same bytes: nothing is written (same inode, the old mtime stays) */
	EXPECT_EQ(utimensat(dfd, f, old, 0), 0);
	EXPECT_EQ(rdp_cdi_write_at(dfd, "hca", json), 1);
	EXPECT_EQ(fstatat(dfd, f, &st2, 0), 0);
	EXPECT_EQ(st2.st_ino, st1.st_ino);
	EXPECT_EQ(st2.st_mtim.tv_sec, 1000000);

	/* other mode: rewritten to 0644 */
	EXPECT_EQ(fchmodat(dfd, f, 0600, 0), 0);
	EXPECT_EQ(rdp_cdi_write_at(dfd, "hca", json), 0);
	EXPECT_EQ(fstatat(dfd, f, &st2, 0), 0);
	EXPECT_EQ(st2.st_mode & 07777, 0644);
	EXPECT_TRUE(st2.st_ino != st1.st_ino);

	/* new bytes: a new file replaces the old one whole */
	EXPECT_EQ(rdp_cdi_write_at(dfd, "hca", "{}\n"), 0);
	EXPECT_STREQ(slurp(dfd, f), "{}\n");
	EXPECT_EQ(count_entries(dfd, "."), 2);

	/* a failing write (EFBIG past RLIMIT_FSIZE) leaves the old file and no temp file */
	getrlimit(RLIMIT_FSIZE, &rl);
	prev = signal(SIGXFSZ, SIG_IGN);
	small.rlim_cur = 16; /* the soft limit only: the hard one could not be raised again */
	small.rlim_max = rl.rlim_max;
	EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
	EXPECT_EQ(rdp_cdi_write_at(dfd, "hca", json), -EFBIG);
	EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &rl), 0);
	signal(SIGXFSZ, prev);
	EXPECT_STREQ(slurp(dfd, f), "{}\n");
	EXPECT_EQ(count_entries(dfd, "."), 2);

	/* a failing rename (a directory in the way) likewise */
	EXPECT_EQ(mkdirat(dfd, "rdma-dp.io-indir.json", 0755), 0);
	EXPECT_TRUE(rdp_cdi_write_at(dfd, "indir", json) < 0);
	EXPECT_EQ(count_entries(dfd, "."), 2);
	EXPECT_EQ(unlinkat(dfd, "rdma-dp.io-indir.json", AT_REMOVEDIR), 0);

	/* invalid classes never name a file */
	EXPECT_EQ(rdp_cdi_write_at(dfd, "../hca", json), -EINVAL);
	EXPECT_EQ(rdp_cdi_write_at(dfd, "a.b", json), -EINVAL);
	EXPECT_EQ(rdp_cdi_remove_at(dfd, "../hca"), -EINVAL);

	/* NULL (a spec without devices) removes the file */
	EXPECT_EQ(rdp_cdi_write_at(dfd, "hca", NULL), 0);
	EXPECT_TRUE(faccessat(dfd, f, F_OK, 0) < 0 && errno == ENOENT);
	EXPECT_EQ(rdp_cdi_write_at(dfd, "hca", NULL), 1);
	EXPECT_EQ(rdp_cdi_remove_at(dfd, "hca"), 1);
	EXPECT_EQ(rdp_cdi_write_at(dfd, "hca", json), 0);
	EXPECT_EQ(rdp_cdi_remove_at(dfd, "hca"), 0);
	EXPECT_EQ(count_entries(dfd, "."), 2);
	rdp_free(json);
}

struct removed_log {
	char names[8][64];
	int n;
};

static void on_removed(const char *name, void *ud)
{
	struct removed_log *l = ud;

	if (l->n < 8)
		snprintf(l->names[l->n++], sizeof(l->names[0]), "%s", name);
}

static bool logged(const struct removed_log *l, const char *name)
{
	for (int i = 0; i < l->n; i++)
		if (strcmp(l->names[i], name) == 0)
			return true;
	return false;
}

static void touch(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	EXPECT_TRUE(fd >= 0);
	if (fd >= 0)
		close(fd);
}

static bool exists(int dfd, const char *name)
{
	return faccessat(dfd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

static void test_cleanup(int dfd)
{
	static const char *const foreign[] = {
		"nvidia.com-net-rdma.yaml", "other.json", "rdma-dp.io-.json",
		"rdma-dp.io-hca.yaml", "rdma-dp.io-hca.json.bak", "x-rdma-dp.io-hca.json",
		".rdma-dp.io-.tmp", ".rdma-dp.io-hca.json", "spec.123.tmp",
	};
	const char *keep[] = {"hca", "example_com__x"};
	struct removed_log log = {0};

	for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++)
		touch(dfd, foreign[i]);
	EXPECT_EQ(rdp_cdi_write_at(dfd, "hca", "{}\n"), 0);
	EXPECT_EQ(rdp_cdi_write_at(dfd, "example_com__x", "{}\n"), 0);
	EXPECT_EQ(rdp_cdi_write_at(dfd, "stale", "{}\n"), 0);
	touch(dfd, "rdma-dp.io-a.b.json"); /* ours by name, though no class of ours has a dot */
	touch(dfd, ".rdma-dp.io-hca.Ab12Cd.tmp"); /* a temp file left by a crash */
	EXPECT_EQ(mkdirat(dfd, "rdma-dp.io-dir.json", 0755), 0); /* a directory: not touched */

	EXPECT_EQ(rdp_cdi_cleanup_at(dfd, keep, 2, on_removed, &log), 3);
	EXPECT_EQ(log.n, 3);
	EXPECT_TRUE(logged(&log, "rdma-dp.io-stale.json"));
	EXPECT_TRUE(logged(&log, "rdma-dp.io-a.b.json"));
	EXPECT_TRUE(logged(&log, ".rdma-dp.io-hca.Ab12Cd.tmp"));
	EXPECT_TRUE(!exists(dfd, "rdma-dp.io-stale.json"));
	EXPECT_TRUE(exists(dfd, "rdma-dp.io-hca.json"));
	EXPECT_TRUE(exists(dfd, "rdma-dp.io-example_com__x.json"));
	EXPECT_TRUE(exists(dfd, "rdma-dp.io-dir.json"));
	for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++)
		EXPECT_TRUE(exists(dfd, foreign[i]));

	/* nothing stale: 0; no keep list: all of ours go */
	EXPECT_EQ(rdp_cdi_cleanup_at(dfd, keep, 2, NULL, NULL), 0);
	EXPECT_EQ(rdp_cdi_cleanup_at(dfd, NULL, 0, NULL, NULL), 2);
	EXPECT_TRUE(!exists(dfd, "rdma-dp.io-hca.json"));
	EXPECT_TRUE(exists(dfd, "rdma-dp.io-dir.json"));
	EXPECT_EQ(rdp_cdi_cleanup_at(dfd, NULL, 1, NULL, NULL), -EINVAL);

	for (size_t i = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++)
		EXPECT_EQ(unlinkat(dfd, foreign[i], 0), 0);
	EXPECT_EQ(unlinkat(dfd, "rdma-dp.io-dir.json", AT_REMOVEDIR), 0);
	EXPECT_EQ(count_entries(dfd, "."), 2);
}

/* Every allocation of render and write failing in turn: -ENOMEM, no leak, no temp file. */
static void test_failmalloc(int dfd)
{
	unsigned long n;
	int r = -ENOMEM;

	for (n = 1; n < 1000; n++) {
		char *json = NULL;

		rdp_alloc_fail_at(n);
		r = rdp_cdi_render(&small_spec, &json);
		if (r == 0) {
			/* write the same bytes twice: the second compares (allocates) */
			r = rdp_cdi_write_at(dfd, "hca", json);
			if (r >= 0)
				r = rdp_cdi_write_at(dfd, "hca", json);
		}
		rdp_alloc_fail_at(0);
		rdp_free(json);
		EXPECT_TRUE(r == -ENOMEM || r == 1);
		EXPECT_EQ(count_entries(dfd, ".rdma-dp.io-"), 0);
		if (r == 1)
			break;
	}
	EXPECT_EQ(r, 1);
	EXPECT_TRUE(n > 2);
	EXPECT_EQ(rdp_cdi_remove_at(dfd, "hca"), 0);
}

int main(void)
{
	int dfd;

	test_class();
	test_names();
	test_render();
	test_render_invalid();
	test_render_device_env();
	test_render_max();

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-cdi.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	EXPECT_EQ(rdp_cdi_open_dir("/nonexistent/x/y", true), -ENOENT);
	EXPECT_EQ(rdp_cdi_open_dir("", false), -EINVAL);
	{
		char sub[96];
		int fd;

		snprintf(sub, sizeof(sub), "%s/cdi", tmpdir);
		EXPECT_EQ(rdp_cdi_open_dir(sub, false), -ENOENT);
		fd = rdp_cdi_open_dir(sub, true);
		EXPECT_TRUE(fd >= 0);
		dfd = fd;
	}
	test_write(dfd);
	test_cleanup(dfd);
	test_failmalloc(dfd);
	close(dfd);
	{
		char sub[96];

		snprintf(sub, sizeof(sub), "%s/cdi", tmpdir);
		EXPECT_EQ(rmdir(sub), 0);
		EXPECT_EQ(rmdir(tmpdir), 0);
	}
	return test_summary("test-cdi");
}
