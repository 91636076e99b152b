/* SPDX-License-Identifier: MIT */
/*
 * hostwatch.h end to end on the inotify path, with the real event loop and a temporary dev
 * root: nodes created and removed in infiniband/, the directory removed and re-created (as
 * devtmpfs does on a driver reload) several times, renamed away and back, a dev root missing at
 * start; each must give one coalesced callback within 500 ms. The netlink sources are opened
 * too (they may be unavailable in a sandbox: then the state says why).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "event.h"
#include "hostwatch.h"
#include "test.h"

#define LATENCY_MAX_USEC 500000ULL

struct seen {
	unsigned int calls;
	unsigned int events;
	unsigned int flags;
	char reason[RDP_HOSTWATCH_REASON_MAX];
	uint64_t at;
};

static void on_change(const char *reason, unsigned int n, unsigned int flags, void *userdata)
{
	struct seen *s = userdata;

	s->calls++;
	s->events += n;
	s->flags |= flags;
	snprintf(s->reason, sizeof(s->reason), "%s", reason);
	s->at = rdp_now_usec();
}

static char root[256], ib[300];
static uint64_t worst;

/* Runs the loop until a callback comes or timeout_usec passes. */
static void run_for(struct rdp_event *e, struct seen *s, unsigned int until_calls,
		    uint64_t timeout_usec)
{
	uint64_t end = rdp_now_usec() + timeout_usec;

	while (s->calls < until_calls && rdp_now_usec() < end)
		rdp_event_run_once(e, 10);
}

/* Expects exactly one callback for what was just done at t0, within the latency budget. */
static void expect_one(struct rdp_event *e, struct seen *s, uint64_t t0, const char *want,
		       const char *what)
{
	unsigned int before = s->calls;

	run_for(e, s, before + 1, 2 * LATENCY_MAX_USEC);
	EXPECT_EQ(s->calls, before + 1);
	if (s->calls == before + 1) {
		uint64_t lat = s->at - t0;

		if (lat > worst)
			worst = lat;
		EXPECT_TRUE(lat < LATENCY_MAX_USEC);
		if (want)
			EXPECT_CONTAINS(s->reason, want);
		printf("  %-34s %4llu ms  reason=\"%s\"\n", what, (unsigned long long)lat / 1000,
		       s->reason);
	}
	/* Coalesced: nothing more comes for this burst. */
	run_for(e, s, before + 2, 300000);
	EXPECT_EQ(s->calls, before + 1);
}

static void touch(const char *dir, const char *name)
{
	char p[512];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	EXPECT_TRUE(fd >= 0);
	if (fd >= 0)
		close(fd);
}

static void rm(const char *dir, const char *name)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	EXPECT_EQ(unlink(p), 0);
}

static const char *const nodes[] = {"uverbs0", "uverbs1", "umad0", "issm0", "rdma_cm"};
#define N_NODES (sizeof(nodes) / sizeof(nodes[0]))

static void test_inotify(void)
{
	struct rdp_hostwatch_options o = {.dev_root = root, .no_uevent = true, .no_rtnl = true};
	struct rdp_event *e;
	struct rdp_hostwatch *w;
	struct seen s = {0};
	uint64_t t0;
	int err;

	EXPECT_EQ(mkdir(ib, 0755), 0);
	EXPECT_EQ(rdp_event_new(&e), 0);
	EXPECT_EQ(rdp_hostwatch_new(e, &o, on_change, &s, &w), 0);
	EXPECT_EQ(rdp_hostwatch_source_state(w, RDP_HOSTWATCH_DEV, &err), RDP_HOSTWATCH_ACTIVE);
	EXPECT_EQ(err, 0);
	EXPECT_EQ(rdp_hostwatch_source_state(w, RDP_HOSTWATCH_UEVENT, NULL), RDP_HOSTWATCH_OFF);
	EXPECT_EQ(rdp_hostwatch_source_state(w, RDP_HOSTWATCH_RTNL, NULL), RDP_HOSTWATCH_OFF);

	/* nothing happens: no callback */
	run_for(e, &s, 1, 200000);
	EXPECT_EQ(s.calls, 0);

	t0 = rdp_now_usec();
	touch(ib, "uverbs0");
	expect_one(e, &s, t0, "dev:create uverbs0", "one node created");

	t0 = rdp_now_usec();
	for (size_t i = 1; i < N_NODES; i++)
		touch(ib, nodes[i]);
	expect_one(e, &s, t0, "dev:create", "four nodes created (coalesced)");

	t0 = rdp_now_usec();
	{
		char p[512];

		snprintf(p, sizeof(p), "%s/uverbs0", ib);
		EXPECT_EQ(chmod(p, 0666), 0);
	}
	expect_one(e, &s, t0, "dev:attrib uverbs0", "node chmod (udev)");

	for (int round = 0; round < 3; round++) {
		unsigned int ev_before = s.events;

		/* the driver goes: every node, then the directory (devtmpfs) */
		t0 = rdp_now_usec();
		for (size_t i = 0; i < N_NODES; i++)
			rm(ib, nodes[i]);
		EXPECT_EQ(rmdir(ib), 0);
		expect_one(e, &s, t0, "dev:delete", "nodes and infiniband/ removed");
		EXPECT_TRUE(s.events - ev_before >= N_NODES + 1);
		EXPECT_EQ(rdp_hostwatch_source_state(w, RDP_HOSTWATCH_DEV, NULL),
			  RDP_HOSTWATCH_ACTIVE);

		/* ... and comes back: the directory first, the nodes a little later */
		t0 = rdp_now_usec();
		EXPECT_EQ(mkdir(ib, 0755), 0);
		expect_one(e, &s, t0, "dev-infiniband-created", "infiniband/ re-created");
		t0 = rdp_now_usec();
		for (size_t i = 0; i < N_NODES; i++)
			touch(ib, nodes[i]);
		expect_one(e, &s, t0, "dev:create uverbs0", "nodes in the new infiniband/");
	}

	/* the directory and its nodes appearing in one burst: one callback */
	for (size_t i = 0; i < N_NODES; i++)
		rm(ib, nodes[i]);
	EXPECT_EQ(rmdir(ib), 0);
	expect_one(e, &s, rdp_now_usec(), NULL, "infiniband/ removed");
	t0 = rdp_now_usec();
	EXPECT_EQ(mkdir(ib, 0755), 0);
	touch(ib, "uverbs7");
	expect_one(e, &s, t0, "dev-infiniband-created", "infiniband/ + node in one burst");
	t0 = rdp_now_usec();
	rm(ib, "uverbs7");
	expect_one(e, &s, t0, "dev:delete uverbs7", "node removed (watch re-added)");

	/* renamed away and back */
	{
		char away[320];

		snprintf(away, sizeof(away), "%s/infiniband.old", root);
		t0 = rdp_now_usec();
		EXPECT_EQ(rename(ib, away), 0);
		expect_one(e, &s, t0, "dev-infiniband-removed", "infiniband/ renamed away");
		t0 = rdp_now_usec();
		EXPECT_EQ(rename(away, ib), 0);
		expect_one(e, &s, t0, "dev-infiniband-created", "infiniband/ renamed back");
		t0 = rdp_now_usec();
		touch(ib, "uverbs2");
		expect_one(e, &s, t0, "dev:create uverbs2", "node in the renamed-back dir");
		rm(ib, "uverbs2");
		expect_one(e, &s, rdp_now_usec(), NULL, "node removed");
	}

	/* unrelated names in the dev root say nothing */
	touch(root, "null");
	run_for(e, &s, s.calls + 1, 200000);
	EXPECT_EQ(rdp_hostwatch_source_state(w, RDP_HOSTWATCH_DEV, NULL), RDP_HOSTWATCH_ACTIVE);
	{
		unsigned int before = s.calls;

		rm(root, "null");
		run_for(e, &s, before + 1, 200000);
		EXPECT_EQ(s.calls, before);
	}
	EXPECT_TRUE(rdp_hostwatch_source_received(w, RDP_HOSTWATCH_DEV) > 0);
	EXPECT_EQ(s.flags, 0); /* nothing lost */
	EXPECT_EQ(rmdir(ib), 0);
	rdp_hostwatch_free(w);
	rdp_event_free(e);
}

/* Callbacks are spaced by min_interval: a second burst right after the first waits. */
static void test_min_interval(void)
{
	struct rdp_hostwatch_options o = {.dev_root = root, .no_uevent = true, .no_rtnl = true,
					  .coalesce_usec = 20000, .min_interval_usec = 300000};
	struct rdp_event *e;
	struct rdp_hostwatch *w;
	struct seen s = {0};
	uint64_t first;

	EXPECT_EQ(mkdir(ib, 0755), 0);
	EXPECT_EQ(rdp_event_new(&e), 0);
	EXPECT_EQ(rdp_hostwatch_new(e, &o, on_change, &s, &w), 0);
	touch(ib, "uverbs0");
	run_for(e, &s, 1, 1000000);
	EXPECT_EQ(s.calls, 1);
	first = s.at;
	rm(ib, "uverbs0");
	run_for(e, &s, 2, 1000000);
	EXPECT_EQ(s.calls, 2);
	EXPECT_TRUE(s.at - first >= 300000);
	EXPECT_TRUE(s.at - first < 300000 + LATENCY_MAX_USEC);
	EXPECT_EQ(rmdir(ib), 0);
	rdp_hostwatch_free(w);
	rdp_event_free(e);
}

/* The dev root missing at start: retried, and its coming back is a change. */
static void test_root_missing(void)
{
	char missing[300], mib[320];
	struct rdp_hostwatch_options o = {.dev_root = missing, .no_uevent = true, .no_rtnl = true};
	struct rdp_event *e;
	struct rdp_hostwatch *w;
	struct seen s = {0};
	uint64_t t0;
	int err;

	snprintf(missing, sizeof(missing), "%s/later", root);
	snprintf(mib, sizeof(mib), "%s/infiniband", missing);
	EXPECT_EQ(rdp_event_new(&e), 0);
	EXPECT_EQ(rdp_hostwatch_new(e, &o, on_change, &s, &w), 0);
	EXPECT_EQ(rdp_hostwatch_source_state(w, RDP_HOSTWATCH_DEV, &err),
		  RDP_HOSTWATCH_UNAVAILABLE);
	EXPECT_EQ(err, -ENOENT);
	EXPECT_EQ(mkdir(missing, 0755), 0);
	run_for(e, &s, 1, RDP_HOSTWATCH_RETRY_USEC + 1000000);
	EXPECT_EQ(s.calls, 1);
	EXPECT_STREQ(s.reason, "dev-root-back");
	EXPECT_EQ(rdp_hostwatch_source_state(w, RDP_HOSTWATCH_DEV, NULL), RDP_HOSTWATCH_ACTIVE);
	t0 = rdp_now_usec();
	EXPECT_EQ(mkdir(mib, 0755), 0);
	expect_one(e, &s, t0, "dev-infiniband-created", "infiniband/ in a late dev root");
	/* the dev root itself removed: reported, and retried again */
	t0 = rdp_now_usec();
	EXPECT_EQ(rmdir(mib), 0);
	EXPECT_EQ(rmdir(missing), 0);
	expect_one(e, &s, t0, NULL, "dev root removed");
	EXPECT_EQ(rdp_hostwatch_source_state(w, RDP_HOSTWATCH_DEV, NULL),
		  RDP_HOSTWATCH_UNAVAILABLE);
	rdp_hostwatch_free(w);
	rdp_event_free(e);
}

/* The netlink sockets: opened, or unavailable with a reason; never a failure to start. */
static void test_netlink_sources(void)
{
	struct rdp_hostwatch_options o = {.dev_root = root};
	struct rdp_event *e;
	struct rdp_hostwatch *w;
	struct seen s = {0};

	EXPECT_EQ(rdp_event_new(&e), 0);
	EXPECT_EQ(rdp_hostwatch_new(e, &o, on_change, &s, &w), 0);
	for (int i = RDP_HOSTWATCH_UEVENT; i <= RDP_HOSTWATCH_RTNL; i++) {
		int err;
		enum rdp_hostwatch_state st = rdp_hostwatch_source_state(w, i, &err);

		EXPECT_TRUE(st == RDP_HOSTWATCH_ACTIVE || st == RDP_HOSTWATCH_UNAVAILABLE);
		EXPECT_TRUE(st == RDP_HOSTWATCH_ACTIVE ? err == 0 : err < 0);
		printf("  source %s: %s%s%s\n", rdp_hostwatch_source_name(i),
		       st == RDP_HOSTWATCH_ACTIVE ? "active" : "unavailable",
		       err ? " " : "", err ? strerror(-err) : "");
	}
	/* whatever the host does meanwhile, the loop keeps running */
	run_for(e, &s, 1000, 100000);
	rdp_hostwatch_free(w);
	rdp_event_free(e);
	EXPECT_EQ(rdp_hostwatch_new(NULL, &o, on_change, &s, &w), -EINVAL);
	o.dev_root = NULL;
	EXPECT_EQ(rdp_hostwatch_new(e, &o, on_change, &s, &w), -EINVAL);
	EXPECT_TRUE(rdp_hostwatch_free(NULL) == NULL);
}

/*
 * In a network namespace of its own (root only; skipped otherwise): a veth's link messages
 * are ignored (pods create them by the hundred) until rdp_hostwatch_set_netdevs() names it as
 * the netdev of a served device (soft-RoCE on a veth); then its up and down are reported.
 * Runs in a child: the namespace is not the rest of the test's.
 */
static int served_netdev_child(void)
{
	struct rdp_hostwatch_options o = {.dev_root = root, .no_uevent = true};
	const char *names[] = {"rdptwa"};
	struct rdp_event *e;
	struct rdp_hostwatch *w;
	struct seen s = {0};

	if (geteuid() != 0 || unshare(CLONE_NEWNET) < 0)
		return 77;
	if (rdp_event_new(&e) < 0 || rdp_hostwatch_new(e, &o, on_change, &s, &w) < 0)
		return 1;
	if (rdp_hostwatch_source_state(w, RDP_HOSTWATCH_RTNL, NULL) != RDP_HOSTWATCH_ACTIVE)
		return 77;
	if (system("ip link add rdptwa type veth peer name rdptwb && ip link set rdptwb up") != 0)
		return 77; /* no veth in this kernel */
	run_for(e, &s, 1, 400000);
	EXPECT_EQ(s.calls, 0);
	EXPECT_EQ(rdp_hostwatch_set_netdevs(w, names, 1), 0);
	EXPECT_EQ(rdp_hostwatch_set_netdevs(w, NULL, 1), -EINVAL);
	EXPECT_EQ(system("ip link set rdptwa up"), 0);
	expect_one(e, &s, rdp_now_usec(), "link:rdptwa", "served veth up");
	EXPECT_EQ(system("ip link set rdptwa down"), 0);
	expect_one(e, &s, rdp_now_usec(), "link:rdptwa", "served veth down");
	/* No longer served: ignored again. */
	EXPECT_EQ(rdp_hostwatch_set_netdevs(w, NULL, 0), 0);
	EXPECT_EQ(system("ip link set rdptwa up"), 0);
	run_for(e, &s, s.calls + 1, 400000);
	EXPECT_EQ(s.calls, 2);
	rdp_hostwatch_free(w);
	rdp_event_free(e);
	printf("  served netdev (child): %d passed, %d failed\n", test_passed, test_failed);
	fflush(stdout);
	return test_failed ? 1 : 0;
}

static void test_served_netdev(void)
{
	pid_t pid;
	int status = 0;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0)
		_exit(served_netdev_child());
	EXPECT_TRUE(pid > 0);
	EXPECT_EQ(waitpid(pid, &status, 0), pid);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		printf("  served netdev: skipped (not root, or no netns/veth)\n");
		return;
	}
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Every allocation of rdp_hostwatch_new() failing in turn: -ENOMEM, nothing leaked (ASan). */
static void test_failmalloc(void)
{
	struct rdp_hostwatch_options o = {.dev_root = root};
	struct rdp_event *e;
	struct seen s = {0};
	unsigned long n;
	int r;

	EXPECT_EQ(rdp_event_new(&e), 0);
	for (n = 1;; n++) {
		struct rdp_hostwatch *w = NULL;

		rdp_alloc_fail_at(n);
		r = rdp_hostwatch_new(e, &o, on_change, &s, &w);
		rdp_alloc_fail_at(0);
		if (r == 0) {
			rdp_hostwatch_free(w);
			break;
		}
		EXPECT_EQ(r, -ENOMEM);
	}
	EXPECT_TRUE(n > 3);
	rdp_event_free(e);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/test-hostwatch-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	snprintf(ib, sizeof(ib), "%s/infiniband", root);
	test_inotify();
	test_min_interval();
	test_root_missing();
	test_netlink_sources();
	test_served_netdev();
	test_failmalloc();
	printf("  worst latency event -> callback: %llu ms (budget %llu ms)\n",
	       (unsigned long long)worst / 1000, LATENCY_MAX_USEC / 1000);
	rmdir(ib);
	rmdir(root);
	return test_summary("test-hostwatch");
}
