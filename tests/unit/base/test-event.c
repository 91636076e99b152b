/* SPDX-License-Identifier: MIT */
/* The event loop: io, timers, signals, defers, freeing sources from callbacks, exit codes. */
#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "event.h"
#include "macro.h"
#include "test.h"

struct ctx {
	struct rdp_event *e;
	struct rdp_event_source *a, *b, *self;
	int fired_a, fired_b, fired_timer, fired_defer, fired_signal;
	int rearm;
};

static int io_read(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct ctx *c = userdata;
	char buf[16];

	c->fired_a++;
	(void)!read(fd, buf, sizeof(buf));
	return 0;
}

/* Frees both io sources, its own and the other one whose event is in the same batch. */
static int io_free_both(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct ctx *c = userdata;

	if (s == c->a)
		c->fired_a++;
	else
		c->fired_b++;
	c->a = rdp_event_source_free(c->a);
	c->b = rdp_event_source_free(c->b);
	return -EBADMSG;
}

static void test_io(void)
{
	struct ctx c = {};
	int p1[2], p2[2];

	EXPECT_EQ(rdp_event_new(&c.e), 0);
	EXPECT_EQ(pipe(p1), 0);
	EXPECT_EQ(pipe(p2), 0);
	EXPECT_EQ(rdp_event_add_io(c.e, p1[0], EPOLLIN, io_read, &c, &c.a), 0);
	EXPECT_EQ(rdp_event_run_once(c.e, 0), 0);
	EXPECT_EQ(c.fired_a, 0);
	EXPECT_EQ(write(p1[1], "x", 1), 1);
	EXPECT_EQ(rdp_event_run_once(c.e, 1000), 1);
	EXPECT_EQ(c.fired_a, 1);
	/* no interest: no callback */
	EXPECT_EQ(rdp_event_source_set_io_events(c.a, 0), 0);
	EXPECT_EQ(write(p1[1], "x", 1), 1);
	EXPECT_EQ(rdp_event_run_once(c.e, 0), 0);
	EXPECT_EQ(c.fired_a, 1);
	c.a = rdp_event_source_free(c.a);

	/* two ready sources, the first callback frees both: the second must not run */
	EXPECT_EQ(rdp_event_add_io(c.e, p1[0], EPOLLIN, io_free_both, &c, &c.a), 0);
	EXPECT_EQ(rdp_event_add_io(c.e, p2[0], EPOLLIN, io_free_both, &c, &c.b), 0);
	EXPECT_EQ(write(p2[1], "y", 1), 1);
	(void)rdp_event_run_once(c.e, 1000);
	EXPECT_EQ(c.fired_a + c.fired_b, 2);
	EXPECT_TRUE(c.a == NULL && c.b == NULL);
	EXPECT_EQ(rdp_event_last_error(c.e), -EBADMSG);
	/* the fds stay the caller's */
	EXPECT_EQ(write(p1[1], "x", 1), 1);
	EXPECT_EQ(rdp_event_run_once(c.e, 0), 0);

	EXPECT_EQ(rdp_event_add_io(c.e, -1, EPOLLIN, io_read, &c, &c.a), -EINVAL);
	c.e = rdp_event_free(c.e);
	close(p1[0]);
	close(p1[1]);
	close(p2[0]);
	close(p2[1]);
}

static int on_timer(struct rdp_event_source *s, void *userdata)
{
	struct ctx *c = userdata;

	c->fired_timer++;
	if (c->rearm-- > 0)
		return rdp_event_source_set_timer(s, 1000);
	rdp_event_exit(c->e, 42);
	return 0;
}

static int never(struct rdp_event_source *s, void *userdata)
{
	struct ctx *c = userdata;

	c->fired_b++;
	return 0;
}

static void test_timer(void)
{
	struct ctx c = { .rearm = 3 };
	struct rdp_event_source *t, *off;
	uint64_t start = rdp_now_usec();

	EXPECT_EQ(rdp_event_new(&c.e), 0);
	EXPECT_EQ(rdp_event_add_timer(c.e, 1000, on_timer, &c, &t), 0);
	EXPECT_EQ(rdp_event_add_timer(c.e, 0, never, &c, &off), 0); /* 0: disarmed */
	EXPECT_EQ(rdp_event_run(c.e), 42);
	EXPECT_EQ(c.fired_timer, 4);
	EXPECT_EQ(c.fired_b, 0);
	EXPECT_TRUE(rdp_now_usec() - start >= 4000); /* monotonic clock went forward */
	/* disarming */
	EXPECT_EQ(rdp_event_source_set_timer(t, 1000), 0);
	EXPECT_EQ(rdp_event_source_set_timer(t, 0), 0);
	EXPECT_EQ(rdp_event_run_once(c.e, 20), 0);
	EXPECT_EQ(c.fired_timer, 4);
	/* freed sources are also freed with the loop (ASan checks) */
	c.e = rdp_event_free(c.e);
}

static int on_defer(struct rdp_event_source *s, void *userdata)
{
	struct ctx *c = userdata;

	c->fired_defer++;
	if (c->fired_defer == 2)
		c->self = rdp_event_source_free(s); /* frees itself */
	return 0;
}

/* Frees the other defer source of the pair. */
static int defer_frees_other(struct rdp_event_source *s, void *userdata)
{
	struct ctx *c = userdata;

	if (s == c->a) {
		c->fired_a++;
		c->b = rdp_event_source_free(c->b);
	} else {
		c->fired_b++;
		c->a = rdp_event_source_free(c->a);
	}
	return 0;
}

static void test_defer(void)
{
	struct ctx c = {};

	EXPECT_EQ(rdp_event_new(&c.e), 0);
	EXPECT_EQ(rdp_event_add_defer(c.e, on_defer, &c, &c.self), 0);
	EXPECT_EQ(rdp_event_run_once(c.e, -1), 0); /* does not block: a defer is pending */
	EXPECT_EQ(c.fired_defer, 1);
	EXPECT_EQ(rdp_event_run_once(c.e, 0), 0);
	EXPECT_EQ(c.fired_defer, 1); /* once per enable */
	EXPECT_EQ(rdp_event_source_defer(c.self), 0);
	EXPECT_EQ(rdp_event_source_defer(c.self), 0);
	EXPECT_EQ(rdp_event_run_once(c.e, -1), 0);
	EXPECT_EQ(c.fired_defer, 2);
	EXPECT_TRUE(c.self == NULL);

	/* two pending defers, each frees the other: only the first to run runs */
	EXPECT_EQ(rdp_event_add_defer(c.e, defer_frees_other, &c, &c.b), 0);
	EXPECT_EQ(rdp_event_add_defer(c.e, defer_frees_other, &c, &c.a), 0);
	EXPECT_EQ(rdp_event_run_once(c.e, -1), 0);
	EXPECT_EQ(c.fired_a + c.fired_b, 1);
	EXPECT_TRUE((c.a == NULL) != (c.b == NULL));
	c.e = rdp_event_free(c.e);
}

static int on_signal(struct rdp_event_source *s, const struct signalfd_siginfo *si, void *ud)
{
	struct ctx *c = ud;

	c->fired_signal++;
	if (si->ssi_signo == SIGUSR1)
		rdp_event_exit(c->e, 7);
	return 0;
}

static void test_signal(void)
{
	struct ctx c = {};
	struct rdp_event_source *s;

	EXPECT_EQ(rdp_event_new(&c.e), 0);
	EXPECT_EQ(rdp_event_add_signal(c.e, SIGUSR1, on_signal, &c, &s), 0);
	EXPECT_EQ(raise(SIGUSR1), 0); /* blocked: goes to the signalfd */
	EXPECT_EQ(rdp_event_run(c.e), 7);
	EXPECT_EQ(c.fired_signal, 1);
	/* exit requested before run returns at once */
	rdp_event_exit(c.e, 3);
	EXPECT_EQ(rdp_event_run(c.e), 3);
	EXPECT_EQ(rdp_event_add_signal(c.e, 0, on_signal, &c, &s), -EINVAL);
	c.e = rdp_event_free(c.e);
}

/* Every allocation of every constructor can fail cleanly. */
static void test_alloc_failures(void)
{
	unsigned long n;

	for (n = 1; n < 20; n++) {
		struct rdp_event *e = NULL;
		struct rdp_event_source *s;
		struct ctx c = {};
		int r;

		rdp_alloc_fail_at(n);
		r = rdp_event_new(&e);
		if (r == 0)
			r = rdp_event_add_timer(e, 0, never, &c, &s);
		if (r == 0)
			r = rdp_event_add_defer(e, on_defer, &c, &s);
		if (r == 0)
			r = rdp_event_add_signal(e, SIGUSR2, on_signal, &c, &s);
		rdp_alloc_fail_at(0);
		EXPECT_TRUE(r == 0 || r == -ENOMEM);
		rdp_event_free(e);
	}
}

int main(void)
{
	test_io();
	test_timer();
	test_defer();
	test_signal();
	test_alloc_failures();
	return test_summary("test-event");
}
