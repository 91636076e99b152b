/* SPDX-License-Identifier: MIT */
/* The daemon's status file: format and parse round trip, hostile content, atomic write. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "status.h"
#include "test.h"

/* -Wwrite-strings: the struct's strings are owned (char *), so the test's live in arrays */
static char n_a[] = "rdma/hca_a", s_a[] = "/var/lib/kubelet/device-plugins/hca_a.sock";
static char n_b[] = "rdma/b \"quoted\"", s_b[] = "/tmp/x y/b.sock";
static char kubelet_sock[] = "kubelet-sock", plugins_registry[] = "plugins-registry";
static char empty[] = "", rel_sock[] = "a.sock", ctl_name[] = "rdma/a\n", abs_sock[] = "/a.sock";
static char plain_name[] = "rdma/a";

static struct rdp_status_resource two[] = {
	{.name = n_a, .socket = s_a, .serving = true, .units = 8, .healthy = 7},
	{.name = n_b, .socket = s_b, .serving = false, .units = 0, .healthy = 0},
};

static void test_round_trip(void)
{
	struct rdp_status s = {.pid = 4242, .generation = 7, .mode = kubelet_sock,
			       .resources = two, .n_resources = 2};
	struct rdp_status *p = NULL;
	char *text = NULL, err[256];

	EXPECT_EQ(rdp_status_format(&s, &text), 0);
	EXPECT_TRUE(text && text[strlen(text) - 1] == '\n');
	EXPECT_EQ(rdp_status_parse(text, strlen(text), &p, err, sizeof(err)), 0);
	if (p) {
		EXPECT_EQ(p->pid, 4242);
		EXPECT_EQ(p->generation, 7);
		EXPECT_STREQ(p->mode, "kubelet-sock");
		EXPECT_EQ(p->n_resources, 2);
		EXPECT_STREQ(p->resources[0].name, "rdma/hca_a");
		EXPECT_STREQ(p->resources[0].socket, "/var/lib/kubelet/device-plugins/hca_a.sock");
		EXPECT_TRUE(p->resources[0].serving);
		EXPECT_EQ(p->resources[0].units, 8);
		EXPECT_EQ(p->resources[0].healthy, 7);
		EXPECT_STREQ(p->resources[1].name, "rdma/b \"quoted\"");
		EXPECT_STREQ(p->resources[1].socket, "/tmp/x y/b.sock");
		EXPECT_TRUE(!p->resources[1].serving);
	}
	rdp_status_free(p);
	rdp_free(text);

	/* A daemon from before units were written: unknown (-1), not an error. */
	{
		static const char old[] = "{\"format\":1,\"pid\":1,\"generation\":1,\"mode\":"
					  "\"kubelet-sock\",\"resources\":[{\"name\":\"rdma/a\","
					  "\"socket\":\"/s.sock\",\"serving\":true}]}";

		p = NULL;
		EXPECT_EQ(rdp_status_parse(old, strlen(old), &p, err, sizeof(err)), 0);
		EXPECT_TRUE(p && p->n_resources == 1 && p->resources[0].units == -1 &&
			    p->resources[0].healthy == -1);
		rdp_status_free(p);
	}

	/* zero resources is a valid status (a daemon with nothing started yet) */
	s.n_resources = 0;
	EXPECT_EQ(rdp_status_format(&s, &text), 0);
	p = NULL;
	EXPECT_EQ(rdp_status_parse(text, strlen(text), &p, err, sizeof(err)), 0);
	EXPECT_TRUE(p && p->n_resources == 0);
	rdp_status_free(p);
	rdp_free(text);
}

static void test_format_refuses(void)
{
	struct rdp_status_resource rel = {.name = plain_name, .socket = rel_sock};
	struct rdp_status_resource ctl = {.name = ctl_name, .socket = abs_sock};
	struct rdp_status s = {.pid = 1, .mode = kubelet_sock, .resources = &rel,
			       .n_resources = 1};
	char *text = NULL;

	EXPECT_EQ(rdp_status_format(&s, &text), -EINVAL);
	s.resources = &ctl;
	EXPECT_EQ(rdp_status_format(&s, &text), -EINVAL);
	s.n_resources = 0;
	s.mode = empty;
	EXPECT_EQ(rdp_status_format(&s, &text), -EINVAL);
	EXPECT_TRUE(text == NULL);
}

static void expect_bad(const char *text, const char *why)
{
	struct rdp_status *p = NULL;
	char err[256] = "";
	int k = rdp_status_parse(text, strlen(text), &p, err, sizeof(err));

	EXPECT_EQ(k, -EINVAL);
	EXPECT_TRUE(p == NULL);
	EXPECT_CONTAINS(err, why);
}

#define OK_HEAD "{\"format\":1,\"pid\":1,\"generation\":0,\"mode\":\"kubelet-sock\","

static void test_parse_hostile(void)
{
	struct rdp_status *p = NULL;
	char err[64];

	expect_bad("", "empty");
	expect_bad("{\"format\":1", "not JSON");
	expect_bad("[]", "not a JSON object");
	expect_bad("{\"format\":2}", "format 2");
	expect_bad("{\"format\":\"1\"}", "\"format\" is not an integer");
	expect_bad("{\"format\":1,\"format\":1}", "not JSON");
	expect_bad("{\"format\":1,\"pid\":-1}", "\"pid\"");
	expect_bad("{\"format\":1,\"pid\":1}", "no \"generation\"");
	expect_bad(OK_HEAD "\"resources\":{}}", "not an array");
	expect_bad(OK_HEAD "\"resources\":[1]}", "resources[0] is not an object");
	expect_bad(OK_HEAD "\"resources\":[{\"name\":\"rdma/a\",\"socket\":\"a.sock\","
		   "\"serving\":true}]}", "not an absolute path");
	expect_bad(OK_HEAD "\"resources\":[{\"name\":\"rdma/a\",\"socket\":\"/a.sock\","
		   "\"serving\":1}]}", "\"serving\"");
	expect_bad(OK_HEAD "\"resources\":[{\"name\":\"rdma/\\u0001a\",\"socket\":\"/a.sock\","
		   "\"serving\":true}]}", "control characters");
	expect_bad(OK_HEAD "\"resources\":[{\"name\":\"\",\"socket\":\"/a.sock\","
		   "\"serving\":true}]}", "\"name\" is empty");
	expect_bad(OK_HEAD "\"resources\":[{\"name\":\"rdma/a\",\"socket\":\"/a.sock\","
		   "\"serving\":true},{\"socket\":\"/b.sock\"}]}", "resources[1]: no \"name\"");

	/* a socket path longer than sun_path */
	{
		char buf[512];

		snprintf(buf, sizeof(buf), OK_HEAD "\"resources\":[{\"name\":\"rdma/a\",\"socket\":"
			 "\"/%0120d\",\"serving\":true}]}", 0);
		expect_bad(buf, "longer than 107");
	}
	/* too many resources: bounded before anything is allocated per resource */
	{
		size_t n = RDP_STATUS_MAX_RESOURCES + 1, cap = 64 + n * 3;
		char *buf = malloc(cap), *q = buf;

		q += sprintf(q, OK_HEAD "\"resources\":[");
		for (size_t i = 0; i < n; i++)
			q += sprintf(q, "%s1", i ? "," : "");
		sprintf(q, "]}");
		expect_bad(buf, "more than 4096 resources");
		free(buf);
	}
	/* too large: refused before parsing */
	{
		size_t n = RDP_STATUS_MAX_BYTES + 1;
		char *buf = malloc(n);

		memset(buf, ' ', n);
		EXPECT_EQ(rdp_status_parse(buf, n, &p, err, sizeof(err)), -E2BIG);
		EXPECT_TRUE(p == NULL);
		free(buf);
	}
	/* not NUL-terminated: only len bytes are read */
	{
		const char *t = OK_HEAD "\"resources\":[]}GARBAGE";

		EXPECT_EQ(rdp_status_parse(t, strlen(t) - 7, &p, err, sizeof(err)), 0);
		p = rdp_status_free(p);
	}
	/* unknown keys are ignored (a newer daemon may add some) */
	{
		const char *t = OK_HEAD "\"resources\":[],\"heartbeat\":5}";

		EXPECT_EQ(rdp_status_parse(t, strlen(t), &p, NULL, 0), 0);
		p = rdp_status_free(p);
	}
}

static size_t count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

static void test_write_read(void)
{
	char tmpl[] = "/tmp/rdp-status-XXXXXX", *dir = mkdtemp(tmpl), *state = NULL;
	struct rdp_status s = {.pid = 99, .generation = 1, .mode = plugins_registry,
			       .resources = two, .n_resources = 2};
	struct rdp_status *p = NULL;
	uint64_t mtime = 0;
	char err[256], path[512];

	EXPECT_TRUE(dir != NULL);
	EXPECT_EQ(rdp_state_dir(dir, &state), 0);
	EXPECT_CONTAINS(state, "/.rdma-dp");
	EXPECT_EQ(rdp_status_read(state, &p, NULL, err, sizeof(err)), -ENOENT);
	/* the directory is created, not its parents */
	{
		char *deep = NULL;

		EXPECT_EQ(rdp_state_dir(state, &deep), 0);
		snprintf(path, sizeof(path), "%s/nope", deep);
		EXPECT_EQ(rdp_status_write(path, &s), -ENOENT);
		rdp_free(deep);
	}
	EXPECT_EQ(rdp_status_write(state, &s), 0);
	s.generation = 2;
	EXPECT_EQ(rdp_status_write(state, &s), 0);
	EXPECT_EQ(count_entries(state), 1); /* no temporary file left */
	EXPECT_EQ(rdp_status_read(state, &p, &mtime, err, sizeof(err)), 0);
	EXPECT_TRUE(p && p->generation == 2 && p->n_resources == 2 && p->pid == 99);
	EXPECT_TRUE(mtime > 0);
	p = rdp_status_free(p);

	/* a foreign file in its place */
	snprintf(path, sizeof(path), "%s/%s", state, RDP_STATUS_FILE);
	{
		FILE *f = fopen(path, "w");

		fputs("{\"format\":1,\"pid\":", f); /* a torn write */
		fclose(f);
	}
	EXPECT_EQ(rdp_status_read(state, &p, NULL, err, sizeof(err)), -EINVAL);
	EXPECT_CONTAINS(err, "not JSON");
	/* a directory in its place */
	unlink(path);
	mkdir(path, 0700);
	EXPECT_EQ(rdp_status_read(state, &p, NULL, err, sizeof(err)), -EINVAL);
	EXPECT_CONTAINS(err, "not a regular file");
	rmdir(path);
	/* a symlink in its place is not followed */
	EXPECT_EQ(symlink("/etc/passwd", path), 0);
	EXPECT_EQ(rdp_status_read(state, &p, NULL, err, sizeof(err)), -ELOOP);
	unlink(path);

	EXPECT_EQ(rdp_status_write(state, &s), 0);
	EXPECT_EQ(rdp_status_remove(state), 0);
	EXPECT_EQ(rdp_status_remove(state), 0);
	EXPECT_EQ(rdp_status_read(state, &p, NULL, err, sizeof(err)), -ENOENT);
	EXPECT_EQ(rmdir(state), 0);
	EXPECT_EQ(rmdir(dir), 0);
	rdp_free(state);
}

int main(void)
{
	test_round_trip();
	test_format_refuses();
	test_parse_hostile();
	test_write_read();
	return test_summary("test-status");
}
