/* SPDX-License-Identifier: MIT */
/*
 * confwatch.h with the real event loop on temporary directories. Each way a config file changes
 * must give exactly one callback, after the quiet period:
 *   - kubelet's AtomicWriter (pkg/volume/util/atomic_writer.go), step by step: a new
 *     `..<UTC timestamp>.<random>` directory with the payload, a `..data_tmp` symlink to it
 *     renamed over `..data`, the user-visible `config.json -> ..data/config.json` created on
 *     the first projection, then the old timestamped directory removed; first projection and two
 *     updates;
 *   - in place (also written in two halves 100 ms apart: one callback, after the second), a
 *     rename over the file, delete + create, chmod;
 *   - the file's directory removed and created again, a directory missing at start (polled),
 *     a symlinked directory re-pointed, a relative path.
 * Unrelated names in the directory give none.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "confwatch.h"
#include "event.h"
#include "test.h"

#define LATENCY_MAX_USEC 700000ULL

struct seen {
	unsigned int calls;
	char reason[RDP_CONFWATCH_REASON_MAX];
	uint64_t at;
};

static void on_change(const char *reason, unsigned int n, void *userdata)
{
	struct seen *s = userdata;

	s->calls++;
	snprintf(s->reason, sizeof(s->reason), "%s", reason);
	s->at = rdp_now_usec();
}

static char base[256];
static struct rdp_event *ev;
static uint64_t worst;

static void run_for(struct seen *s, unsigned int until_calls, uint64_t timeout_usec)
{
	uint64_t end = rdp_now_usec() + timeout_usec;

	while (s->calls < until_calls && rdp_now_usec() < end)
		rdp_event_run_once(ev, 10);
}

/* Exactly one callback for what was done last (ending at t0), then silence. */
static void expect_one(struct seen *s, uint64_t t0, const char *what)
{
	unsigned int before = s->calls;

	run_for(s, before + 1, 3 * LATENCY_MAX_USEC);
	EXPECT_EQ(s->calls, before + 1);
	if (s->calls == before + 1) {
		uint64_t lat = s->at - t0;

		if (lat > worst)
			worst = lat;
		EXPECT_TRUE(lat < LATENCY_MAX_USEC);
		printf("  %-40s %4llu ms  reason=\"%s\"\n", what, (unsigned long long)lat / 1000,
		       s->reason);
	} else {
		fprintf(stderr, "  %s: %u callbacks\n", what, s->calls - before);
	}
	run_for(s, before + 2, 400000);
	EXPECT_EQ(s->calls, before + 1);
}

static void expect_none(struct seen *s, const char *what)
{
	unsigned int before = s->calls;

	run_for(s, before + 1, 500000);
	if (s->calls != before)
		fprintf(stderr, "  %s: unexpected callback \"%s\"\n", what, s->reason);
	EXPECT_EQ(s->calls, before);
}

static void write_file(const char *path, const char *content)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);

	EXPECT_TRUE(fd >= 0);
	if (fd < 0)
		return;
	EXPECT_EQ(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
}

static char *path_of(char *buf, size_t size, const char *dir, const char *name)
{
	snprintf(buf, size, "%s/%s", dir, name);
	return buf;
}

/* One AtomicWriter.Write(): returns the new timestamped directory's name in ts. */
static void atomic_write(const char *dir, const char *content, const char *old_ts, char *ts,
			 size_t tsz)
{
	char p[512], q[512];
	struct timespec now;
	struct tm tm;
	char stamp[64];

	/* (5) ioutil.TempDir(dir, time.Now().UTC().Format("..2006_01_02_15_04_05.")) */
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "..%Y_%m_%d_%H_%M_%S.", &tm);
	snprintf(ts, tsz, "%s%09ld", stamp, now.tv_nsec);
	EXPECT_EQ(mkdir(path_of(p, sizeof(p), dir, ts), 0755), 0);
	/* (6) the payload into it */
	snprintf(q, sizeof(q), "%s/%s/config.json", dir, ts);
	write_file(q, content);
	EXPECT_EQ(chmod(q, 0644), 0);
	/* (7) ..data_tmp -> the new directory (relative) */
	EXPECT_EQ(symlink(ts, path_of(p, sizeof(p), dir, "..data_tmp")), 0);
	/* (8) renamed over ..data: the atomic swap */
	snprintf(q, sizeof(q), "%s/..data", dir);
	EXPECT_EQ(rename(p, q), 0);
	/* (9) user-visible files: config.json -> ..data/config.json, when missing */
	path_of(p, sizeof(p), dir, "config.json");
	if (access(p, F_OK) < 0 && errno == ENOENT)
		EXPECT_EQ(symlink("..data/config.json", p), 0);
	/* (10) nothing to prune; (11) os.RemoveAll(old timestamped directory) */
	if (old_ts) {
		snprintf(p, sizeof(p), "%s/%s/config.json", dir, old_ts);
		EXPECT_EQ(unlink(p), 0);
		EXPECT_EQ(rmdir(path_of(p, sizeof(p), dir, old_ts)), 0);
	}
}

static void test_configmap(void)
{
	char dir[300], file[320], ts1[96], ts2[96], ts3[96], p[512];
	struct rdp_confwatch *w;
	struct seen s = {0};
	uint64_t t0;

	snprintf(dir, sizeof(dir), "%s/configmap", base);
	snprintf(file, sizeof(file), "%s/config.json", dir);
	EXPECT_EQ(mkdir(dir, 0755), 0);
	EXPECT_EQ(rdp_confwatch_new(ev, file, NULL, on_change, &s, &w), 0);
	/* the file is missing: watched for in its directory */
	EXPECT_EQ(rdp_confwatch_state(w, NULL), RDP_CONFWATCH_WATCHING);
	EXPECT_EQ(rdp_confwatch_n_watches(w), 1);

	t0 = rdp_now_usec();
	atomic_write(dir, "{\"v\":1}", NULL, ts1, sizeof(ts1));
	expect_one(&s, t0, "ConfigMap first projection");
	/* config.json (link), ..data (link), <ts>/config.json */
	EXPECT_EQ(rdp_confwatch_n_watches(w), 3);

	t0 = rdp_now_usec();
	atomic_write(dir, "{\"v\":2}", ts1, ts2, sizeof(ts2));
	expect_one(&s, t0, "ConfigMap update (..data swap)");
	EXPECT_CONTAINS(s.reason, "..data");
	EXPECT_EQ(rdp_confwatch_state(w, NULL), RDP_CONFWATCH_WATCHING);

	t0 = rdp_now_usec();
	atomic_write(dir, "{\"v\":3}", ts2, ts3, sizeof(ts3));
	expect_one(&s, t0, "ConfigMap second update");
	EXPECT_EQ(rdp_confwatch_n_watches(w), 3);

	/* kubelet's own files beside it, and an unrelated one, say nothing */
	write_file(path_of(p, sizeof(p), dir, "other.json"), "{}");
	EXPECT_EQ(unlink(p), 0);
	expect_none(&s, "unrelated file");

	/* an edit inside the current timestamped directory (not kubelet, but seen) */
	snprintf(p, sizeof(p), "%s/%s/config.json", dir, ts3);
	t0 = rdp_now_usec();
	write_file(p, "{\"v\":4}");
	expect_one(&s, t0, "in place, inside ..data");

	rdp_confwatch_free(w);
}

static void test_plain_file(void)
{
	char dir[300], file[320], p[512];
	struct rdp_confwatch *w;
	struct seen s = {0};
	uint64_t t0;
	int fd;

	snprintf(dir, sizeof(dir), "%s/plain", base);
	snprintf(file, sizeof(file), "%s/config.json", dir);
	EXPECT_EQ(mkdir(dir, 0755), 0);
	write_file(file, "{}");
	EXPECT_EQ(rdp_confwatch_new(ev, file, NULL, on_change, &s, &w), 0);
	expect_none(&s, "no change");

	t0 = rdp_now_usec();
	write_file(file, "{\"a\":1}");
	expect_one(&s, t0, "in-place write");
	EXPECT_CONTAINS(s.reason, "config.json");

	/* a slow writer: one callback, and only once it has been quiet for the settle time */
	fd = open(file, O_WRONLY | O_TRUNC | O_CLOEXEC);
	EXPECT_TRUE(fd >= 0);
	EXPECT_EQ(write(fd, "{\"a\":", 5), 5);
	{
		uint64_t mid = rdp_now_usec() + 100000;
		unsigned int before = s.calls;

		while (rdp_now_usec() < mid)
			rdp_event_run_once(ev, 10);
		EXPECT_EQ(s.calls, before);
		EXPECT_EQ(write(fd, "2}", 2), 2);
		close(fd);
		t0 = rdp_now_usec();
		expect_one(&s, t0, "slow in-place write (two halves)");
		EXPECT_TRUE(s.at - t0 >= RDP_CONFWATCH_SETTLE_USEC - 20000);
	}

	t0 = rdp_now_usec();
	write_file(path_of(p, sizeof(p), dir, "config.json.new"), "{\"b\":1}");
	EXPECT_EQ(rename(p, file), 0);
	expect_one(&s, t0, "rename over (mv new config.json)");

	t0 = rdp_now_usec();
	EXPECT_EQ(unlink(file), 0);
	write_file(file, "{\"c\":1}");
	expect_one(&s, t0, "delete + create");

	t0 = rdp_now_usec();
	EXPECT_EQ(unlink(file), 0);
	expect_one(&s, t0, "delete");
	t0 = rdp_now_usec();
	write_file(file, "{\"c\":2}");
	expect_one(&s, t0, "create");

	t0 = rdp_now_usec();
	EXPECT_EQ(chmod(file, 0600), 0);
	expect_one(&s, t0, "chmod");

	/* the directory goes and comes back */
	t0 = rdp_now_usec();
	EXPECT_EQ(unlink(file), 0);
	EXPECT_EQ(rmdir(dir), 0);
	expect_one(&s, t0, "file and directory removed");
	t0 = rdp_now_usec();
	EXPECT_EQ(mkdir(dir, 0755), 0);
	write_file(file, "{\"d\":1}");
	expect_one(&s, t0, "directory and file re-created");
	t0 = rdp_now_usec();
	write_file(file, "{\"d\":2}");
	expect_one(&s, t0, "in place in the new directory");
	EXPECT_EQ(rdp_confwatch_state(w, NULL), RDP_CONFWATCH_WATCHING);

	rdp_confwatch_free(w);
	unlink(file);
	rmdir(dir);
}

static void test_missing_dir(void)
{
	char a[300], b[320], file[340];
	struct rdp_confwatch_options o = {.poll_usec = 200000};
	struct rdp_confwatch *w;
	struct seen s = {0};
	uint64_t t0;
	int err;

	snprintf(a, sizeof(a), "%s/late", base);
	snprintf(b, sizeof(b), "%s/etc", a);
	snprintf(file, sizeof(file), "%s/config.json", b);
	EXPECT_EQ(rdp_confwatch_new(ev, file, &o, on_change, &s, &w), 0);
	EXPECT_EQ(rdp_confwatch_state(w, &err), RDP_CONFWATCH_MISSING);
	EXPECT_EQ(err, -ENOENT);
	t0 = rdp_now_usec();
	EXPECT_EQ(mkdir(a, 0755), 0);
	EXPECT_EQ(mkdir(b, 0755), 0);
	write_file(file, "{}");
	expect_one(&s, t0, "directory missing at start, created");
	EXPECT_EQ(rdp_confwatch_state(w, NULL), RDP_CONFWATCH_WATCHING);
	t0 = rdp_now_usec();
	write_file(file, "{\"x\":1}");
	expect_one(&s, t0, "then written in place");
	rdp_confwatch_free(w);
	unlink(file);
	rmdir(b);
	rmdir(a);
}

static void test_symlinked_dir(void)
{
	char r1[300], r2[300], link[300], tmp[300], file[320], p[512];
	struct rdp_confwatch *w;
	struct seen s = {0};
	uint64_t t0;

	snprintf(r1, sizeof(r1), "%s/real1", base);
	snprintf(r2, sizeof(r2), "%s/real2", base);
	snprintf(link, sizeof(link), "%s/etc-rdma", base);
	snprintf(tmp, sizeof(tmp), "%s/etc-rdma.tmp", base);
	snprintf(file, sizeof(file), "%s/config.json", link);
	EXPECT_EQ(mkdir(r1, 0755), 0);
	EXPECT_EQ(mkdir(r2, 0755), 0);
	write_file(path_of(p, sizeof(p), r1, "config.json"), "{\"r\":1}");
	write_file(path_of(p, sizeof(p), r2, "config.json"), "{\"r\":2}");
	EXPECT_EQ(symlink("real1", link), 0);
	EXPECT_EQ(rdp_confwatch_new(ev, file, NULL, on_change, &s, &w), 0);
	EXPECT_EQ(rdp_confwatch_n_watches(w), 2);
	t0 = rdp_now_usec();
	EXPECT_EQ(symlink("real2", tmp), 0);
	EXPECT_EQ(rename(tmp, link), 0);
	expect_one(&s, t0, "symlinked directory re-pointed");
	t0 = rdp_now_usec();
	write_file(path_of(p, sizeof(p), r2, "config.json"), "{\"r\":3}");
	expect_one(&s, t0, "in place in the new target");
	write_file(path_of(p, sizeof(p), r1, "config.json"), "{\"r\":4}");
	expect_none(&s, "the old target");
	rdp_confwatch_free(w);
	unlink(link);
	unlink(path_of(p, sizeof(p), r1, "config.json"));
	unlink(path_of(p, sizeof(p), r2, "config.json"));
	rmdir(r1);
	rmdir(r2);
}

static void test_relative_and_args(void)
{
	char dir[300], cwd[4096];
	struct rdp_confwatch *w;
	struct seen s = {0};
	uint64_t t0;

	snprintf(dir, sizeof(dir), "%s/rel", base);
	EXPECT_EQ(mkdir(dir, 0755), 0);
	{
		char sub[320];

		snprintf(sub, sizeof(sub), "%s/sub", dir);
		EXPECT_EQ(mkdir(sub, 0755), 0);
	}
	EXPECT_TRUE(getcwd(cwd, sizeof(cwd)) != NULL);
	EXPECT_EQ(chdir(dir), 0);
	EXPECT_EQ(rdp_confwatch_new(ev, "./sub/../config.json", NULL, on_change, &s, &w), 0);
	EXPECT_EQ(chdir(cwd), 0);
	t0 = rdp_now_usec();
	{
		char p[512];

		write_file(path_of(p, sizeof(p), dir, "config.json"), "{}");
		expect_one(&s, t0, "relative path, created");
		unlink(p);
		expect_one(&s, rdp_now_usec(), "relative path, deleted");
	}
	rdp_confwatch_free(w);

	EXPECT_EQ(rdp_confwatch_new(NULL, "x", NULL, on_change, &s, &w), -EINVAL);
	EXPECT_EQ(rdp_confwatch_new(ev, "", NULL, on_change, &s, &w), -EINVAL);
	EXPECT_EQ(rdp_confwatch_new(ev, "x", NULL, NULL, &s, &w), -EINVAL);
	EXPECT_TRUE(rdp_confwatch_free(NULL) == NULL);
}

/* Every allocation failing in turn, at creation and at a rebuild: -ENOMEM or a working watch. */
static void test_failmalloc(void)
{
	char dir[300], file[320];
	unsigned long n;
	int r;

	snprintf(dir, sizeof(dir), "%s/fm", base);
	snprintf(file, sizeof(file), "%s/config.json", dir);
	EXPECT_EQ(mkdir(dir, 0755), 0);
	write_file(file, "{}");
	for (n = 1;; n++) {
		struct rdp_confwatch *w = NULL;
		struct seen s = {0};

		rdp_alloc_fail_at(n);
		r = rdp_confwatch_new(ev, file, NULL, on_change, &s, &w);
		rdp_alloc_fail_at(0);
		if (r == 0) {
			rdp_confwatch_free(w);
			break;
		}
		EXPECT_EQ(r, -ENOMEM);
	}
	EXPECT_TRUE(n > 2);
	/* a rebuild without memory keeps the old watches, says MISSING, and polls */
	{
		struct rdp_confwatch_options o = {.settle_usec = 10000, .poll_usec = 50000};
		struct rdp_confwatch *w = NULL;
		struct seen s = {0};
		int err;

		EXPECT_EQ(rdp_confwatch_new(ev, file, &o, on_change, &s, &w), 0);
		write_file(file, "{\"m\":1}");
		rdp_alloc_fail_at(1);
		run_for(&s, 1, 500000);
		rdp_alloc_fail_at(0);
		EXPECT_EQ(s.calls, 1);
		EXPECT_EQ(rdp_confwatch_state(w, &err), RDP_CONFWATCH_MISSING);
		EXPECT_EQ(err, -ENOMEM);
		run_for(&s, 2, 500000); /* the poll succeeds: "dir-back" */
		EXPECT_EQ(s.calls, 2);
		EXPECT_EQ(rdp_confwatch_state(w, NULL), RDP_CONFWATCH_WATCHING);
		write_file(file, "{\"m\":2}");
		run_for(&s, 3, 500000);
		EXPECT_EQ(s.calls, 3);
		rdp_confwatch_free(w);
	}
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(base, sizeof(base), "%s/test-confwatch-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(base)) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	if (rdp_event_new(&ev) < 0)
		return EXIT_FAILURE;
	test_configmap();
	test_plain_file();
	test_missing_dir();
	test_symlinked_dir();
	test_relative_and_args();
	test_failmalloc();
	printf("  worst latency change -> callback: %llu ms (settle %llu ms)\n",
	       (unsigned long long)worst / 1000, RDP_CONFWATCH_SETTLE_USEC / 1000);
	rdp_event_free(ev);
	{
		char cmd[400];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", base);
	}
	return test_summary("test-confwatch");
}
