/* SPDX-License-Identifier: MIT */
/*
 * portpoll.h on a temporary sysfs tree with the real event loop: a port state written in place
 * (as the kernel's value changes under a kept-open sysfs file) gives one callback within the
 * interval, with the port and the new value in its reason, once per change; a new model sets
 * the expectation again; phys_state is read only where the model holds one; a file that
 * cannot be read at rdp_portpoll_set() (a FIFO, a directory) is left out rather than
 * rescanned at every tick; a file caught empty while rewritten stays watched; nothing is polled before rdp_portpoll_set() or for unwatched
 * devices.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "device.h"
#include "event.h"
#include "portpoll.h"
#include "test.h"

static char root[256];

struct seen {
	unsigned int calls, changes;
	char reason[RDP_PORTPOLL_REASON_MAX];
	uint64_t at;
};

static void on_change(const char *reason, unsigned int n, void *userdata)
{
	struct seen *s = userdata;

	s->calls++;
	s->changes += n;
	snprintf(s->reason, sizeof(s->reason), "%s", reason);
	s->at = rdp_now_usec();
}

static void put(const char *rel, const char *value)
{
	char path[512], dir[600];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	snprintf(dir, sizeof(dir), "mkdir -p \"$(dirname '%s')\"", path);
	if (system(dir) != 0)
		abort();
	f = fopen(path, "w"); /* in place: the kept fd sees it, as sysfs's does */
	if (!f)
		abort();
	fprintf(f, "%s\n", value);
	fclose(f);
}

static struct rdp_port ports0[2] = {
	{.num = 1, .state = 4, .phys_state = 5},
	{.num = 2, .state = 1, .phys_state = -1},
};
static struct rdp_port ports1[1] = {{.num = 1, .state = 4, .phys_state = -1}};

static void model(struct rdp_host *h, struct rdp_device *d)
{
	memset(d, 0, 2 * sizeof(*d));
	snprintf(d[0].name, sizeof(d[0].name), "rxe0");
	d[0].ports = ports0;
	d[0].n_ports = 2;
	snprintf(d[1].name, sizeof(d[1].name), "mlx5_1");
	d[1].ports = ports1;
	d[1].n_ports = 1;
	*h = (struct rdp_host){.devices = d, .n_devices = 2};
}

static void run_until(struct rdp_event *e, struct seen *s, unsigned int calls, uint64_t usec)
{
	uint64_t end = rdp_now_usec() + usec;

	while (s->calls < calls && rdp_now_usec() < end)
		rdp_event_run_once(e, 10);
}

static void test_ticks(void)
{
	struct rdp_event *e = NULL;
	struct rdp_portpoll *p = NULL;
	struct rdp_device devs[2];
	struct rdp_host h;
	struct seen s = {0};
	bool watch[2] = {true, false};
	char path[512];

	put("class/infiniband/rxe0/ports/1/state", "4: ACTIVE");
	put("class/infiniband/rxe0/ports/1/phys_state", "5: LinkUp");
	put("class/infiniband/rxe0/ports/2/phys_state", "3: Disabled");
	put("class/infiniband/mlx5_1/ports/1/state", "4: ACTIVE");
	/* Port 2's state is a FIFO: never opened blocking, never polled. */
	snprintf(path, sizeof(path), "%s/class/infiniband/rxe0/ports/2/state", root);
	EXPECT_EQ(mkfifo(path, 0600), 0);
	model(&h, devs);

	EXPECT_EQ(rdp_event_new(&e), 0);
	EXPECT_EQ(rdp_portpoll_new(e, "/nonexistent-portpoll-root", 0, on_change, &s, &p),
		  -ENOENT);
	EXPECT_EQ(rdp_portpoll_new(e, root, 20000, on_change, &s, &p), 0);
	/* Nothing before a model. */
	EXPECT_EQ(rdp_portpoll_files(p), 0);
	EXPECT_EQ(rdp_portpoll_tick(p), 0);

	EXPECT_EQ(rdp_portpoll_set(p, &h, watch), 0);
	/* rxe0/1 state + phys_state; rxe0/2 state is a FIFO, its phys_state not in the model;
	 * mlx5_1 not watched. */
	EXPECT_EQ(rdp_portpoll_files(p), 2);
	EXPECT_EQ(rdp_portpoll_tick(p), 0);
	EXPECT_EQ(s.calls, 0);

	/* A change: one callback within the interval (run by the loop's timer). */
	put("class/infiniband/rxe0/ports/1/state", "1: DOWN");
	{
		uint64_t t0 = rdp_now_usec();

		run_until(e, &s, 1, 1000000);
		EXPECT_EQ(s.calls, 1);
		EXPECT_STREQ(s.reason, "port:rxe0/1 state 1: DOWN");
		EXPECT_TRUE(s.at - t0 < 200000);
		printf("  state change -> callback: %llu ms (interval 20 ms)\n",
		       (unsigned long long)(s.at - t0) / 1000);
	}
	/* Once: the rescan it triggers hands over the new model. */
	run_until(e, &s, 2, 100000);
	EXPECT_EQ(s.calls, 1);
	/* A model that still says ACTIVE (a rescan that ran before the change) re-arms it. */
	EXPECT_EQ(rdp_portpoll_set(p, &h, watch), 0);
	EXPECT_EQ(rdp_portpoll_tick(p), 1);
	EXPECT_EQ(s.calls, 2);
	/* The model follows: quiet. */
	ports0[0].state = 1;
	EXPECT_EQ(rdp_portpoll_set(p, &h, watch), 0);
	EXPECT_EQ(rdp_portpoll_tick(p), 0);

	/* phys_state too, where the model has it. */
	put("class/infiniband/rxe0/ports/1/phys_state", "3: Disabled");
	EXPECT_EQ(rdp_portpoll_tick(p), 1);
	EXPECT_STREQ(s.reason, "port:rxe0/1 phys_state 3: Disabled");

	/* Every device (watch NULL): mlx5_1's port too; both changes, one callback. */
	ports0[0].phys_state = 3;
	EXPECT_EQ(rdp_portpoll_set(p, &h, NULL), 0);
	EXPECT_EQ(rdp_portpoll_files(p), 3);
	put("class/infiniband/mlx5_1/ports/1/state", "2: INIT");
	put("class/infiniband/rxe0/ports/1/state", "4: ACTIVE");
	s.calls = s.changes = 0;
	EXPECT_EQ(rdp_portpoll_tick(p), 2);
	EXPECT_EQ(s.calls, 1);
	EXPECT_EQ(s.changes, 2);
	EXPECT_TRUE(rdp_portpoll_reads(p) > 0);
	EXPECT_TRUE(rdp_portpoll_ticks(p) > 0);

	/* A file caught empty while rewritten in place (truncated, not yet written): no change,
	 * still watched; the value written after it is seen at the next tick. */
	ports0[0].state = 4;
	EXPECT_EQ(rdp_portpoll_set(p, &h, NULL), 0);
	EXPECT_EQ(rdp_portpoll_tick(p), 1); /* mlx5_1 INIT, against the model's ACTIVE */
	ports1[0].state = 2;
	EXPECT_EQ(rdp_portpoll_set(p, &h, NULL), 0);
	EXPECT_EQ(rdp_portpoll_tick(p), 0);
	{
		char st[512];

		snprintf(st, sizeof(st), "%s/class/infiniband/rxe0/ports/1/state", root);
		EXPECT_EQ(truncate(st, 0), 0);
	}
	EXPECT_EQ(rdp_portpoll_tick(p), 0);
	EXPECT_EQ(rdp_portpoll_files(p), 3);
	put("class/infiniband/rxe0/ports/1/state", "1: DOWN");
	EXPECT_EQ(rdp_portpoll_tick(p), 1);
	EXPECT_STREQ(s.reason, "port:rxe0/1 state 1: DOWN");

	/* An empty model stops the timer. */
	EXPECT_EQ(rdp_portpoll_set(p, NULL, NULL), 0);
	EXPECT_EQ(rdp_portpoll_files(p), 0);

	rdp_portpoll_free(p);
	rdp_portpoll_free(NULL);
	rdp_event_free(e);
	unlink(path);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char cmd[600];

	snprintf(root, sizeof(root), "%s/test-portpoll-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return EXIT_FAILURE;
	}
	test_ticks();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", root);
	return test_summary("test-portpoll");
}
