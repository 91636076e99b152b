/* SPDX-License-Identifier: MIT */
/*
 * The event loop. Every source is an fd in one epoll set (io fds are the caller's; timers and
 * signals own a timerfd/signalfd); deferred callbacks live on a list run after the fd events.
 * Sources freed while the loop dispatches are only unlinked and closed: their memory is
 * released at the end of the iteration, because the epoll batch may still point at them.
 */
#define _GNU_SOURCE /* accept4 */
#include "event.h"

#include <errno.h>
#include <sys/inotify.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"

enum source_type { SOURCE_IO, SOURCE_TIMER, SOURCE_SIGNAL, SOURCE_DEFER };

struct rdp_event_source {
	struct rdp_event *e;
	enum source_type type;
	int fd;          /* io: the caller's; timer/signal: ours */
	int sig;
	bool dead;
	bool pending;    /* defer: run at the end of this iteration */
	union {
		rdp_io_cb io;
		rdp_timer_cb timer;
		rdp_signal_cb signal;
		rdp_defer_cb defer;
	} cb;
	void *userdata;
	struct rdp_event_source *prev, *next; /* all live sources */
	struct rdp_event_source *next_dead;
	struct rdp_event_source *next_batch;
};

struct rdp_event {
	int epfd;
	struct rdp_event_source *sources;
	struct rdp_event_source *dead;
	unsigned n_pending_defer;
	int dispatching;
	bool exit_requested;
	int exit_code;
	int last_error;
};

uint64_t rdp_now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

int rdp_event_new(struct rdp_event **ret)
{
	struct rdp_event *e;

	e = rdp_calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (e->epfd < 0) {
		int r = -errno;

		rdp_free(e);
		return r;
	}
	*ret = e;
	return 0;
}

static void source_link(struct rdp_event *e, struct rdp_event_source *s)
{
	s->next = e->sources;
	if (e->sources)
		e->sources->prev = s;
	e->sources = s;
}

/* Detaches s from the loop and closes what it owns; memory stays until source_release(). */
static void source_disconnect(struct rdp_event_source *s)
{
	struct rdp_event *e = s->e;

	if (s->dead)
		return;
	s->dead = true;
	if (s->prev)
		s->prev->next = s->next;
	else
		e->sources = s->next;
	if (s->next)
		s->next->prev = s->prev;
	s->prev = s->next = NULL;
	if (s->type == SOURCE_DEFER) {
		if (s->pending)
			e->n_pending_defer--;
		s->pending = false;
		return;
	}
	if (s->fd >= 0)
		(void)epoll_ctl(e->epfd, EPOLL_CTL_DEL, s->fd, NULL);
	if (s->type == SOURCE_TIMER || s->type == SOURCE_SIGNAL) {
		close(s->fd);
		s->fd = -1;
	}
	if (s->type == SOURCE_SIGNAL) {
		struct rdp_event_source *o;
		bool other = false;

		for (o = e->sources; o; o = o->next)
			if (o->type == SOURCE_SIGNAL && o->sig == s->sig)
				other = true;
		if (!other) {
			sigset_t ss;

			sigemptyset(&ss);
			sigaddset(&ss, s->sig);
			sigprocmask(SIG_UNBLOCK, &ss, NULL);
		}
	}
}

static void release_dead(struct rdp_event *e)
{
	while (e->dead) {
		struct rdp_event_source *s = e->dead;

		e->dead = s->next_dead;
		rdp_free(s);
	}
}

struct rdp_event *rdp_event_free(struct rdp_event *e)
{
	if (!e)
		return NULL;
	while (e->sources) {
		struct rdp_event_source *s = e->sources;

		source_disconnect(s);
		rdp_free(s);
	}
	release_dead(e);
	close(e->epfd);
	rdp_free(e);
	return NULL;
}

static int source_new(struct rdp_event *e, enum source_type type, int fd, uint32_t events,
		      void *userdata, struct rdp_event_source **ret)
{
	struct rdp_event_source *s;

	s = rdp_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->e = e;
	s->type = type;
	s->fd = fd;
	s->userdata = userdata;
	if (fd >= 0) {
		struct epoll_event ev = { .events = events, .data.ptr = s };

		if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			/* Never 0: callers rely on *ret being set on success. */
			int r = errno > 0 ? -errno : -EIO;

			rdp_free(s);
			return r;
		}
	}
	source_link(e, s);
	*ret = s;
	return 0;
}

int rdp_event_add_io(struct rdp_event *e, int fd, uint32_t events, rdp_io_cb cb, void *userdata,
		     struct rdp_event_source **ret)
{
	struct rdp_event_source *s;
	int r;

	if (!e || fd < 0 || !cb || !ret)
		return -EINVAL;
	r = source_new(e, SOURCE_IO, fd, events, userdata, &s);
	if (r < 0)
		return r;
	s->cb.io = cb;
	*ret = s;
	return 0;
}

int rdp_event_source_set_io_events(struct rdp_event_source *s, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = s };

	if (!s || s->type != SOURCE_IO || s->dead)
		return -EINVAL;
	if (epoll_ctl(s->e->epfd, EPOLL_CTL_MOD, s->fd, &ev) < 0)
		return -errno;
	return 0;
}

int rdp_event_source_set_timer(struct rdp_event_source *s, uint64_t usec)
{
	struct itimerspec its = {
		.it_value.tv_sec = (time_t)(usec / 1000000),
		.it_value.tv_nsec = (long)(usec % 1000000) * 1000,
	};

	if (!s || s->type != SOURCE_TIMER || s->dead)
		return -EINVAL;
	if (timerfd_settime(s->fd, 0, &its, NULL) < 0)
		return -errno;
	return 0;
}

int rdp_event_add_timer(struct rdp_event *e, uint64_t usec, rdp_timer_cb cb, void *userdata,
			struct rdp_event_source **ret)
{
	struct rdp_event_source *s;
	_cleanup_close_ int fd = -1;
	int r;

	if (!e || !cb || !ret)
		return -EINVAL;
	fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	r = source_new(e, SOURCE_TIMER, fd, EPOLLIN, userdata, &s);
	if (r < 0)
		return r;
	TAKE_FD(fd);
	s->cb.timer = cb;
	r = rdp_event_source_set_timer(s, usec);
	if (r < 0) {
		rdp_event_source_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

int rdp_event_add_signal(struct rdp_event *e, int sig, rdp_signal_cb cb, void *userdata,
			 struct rdp_event_source **ret)
{
	struct rdp_event_source *s;
	_cleanup_close_ int fd = -1;
	sigset_t ss;
	int r;

	if (!e || !cb || !ret || sig <= 0 || sig >= NSIG)
		return -EINVAL;
	sigemptyset(&ss);
	if (sigaddset(&ss, sig) < 0)
		return -EINVAL;
	fd = signalfd(-1, &ss, SFD_CLOEXEC | SFD_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0)
		return -errno;
	r = source_new(e, SOURCE_SIGNAL, fd, EPOLLIN, userdata, &s);
	if (r < 0)
		return r;
	TAKE_FD(fd);
	s->sig = sig;
	s->cb.signal = cb;
	*ret = s;
	return 0;
}

int rdp_event_source_defer(struct rdp_event_source *s)
{
	if (!s || s->type != SOURCE_DEFER || s->dead)
		return -EINVAL;
	if (!s->pending) {
		s->pending = true;
		s->e->n_pending_defer++;
	}
	return 0;
}

int rdp_event_add_defer(struct rdp_event *e, rdp_defer_cb cb, void *userdata,
			struct rdp_event_source **ret)
{
	struct rdp_event_source *s;
	int r;

	if (!e || !cb || !ret)
		return -EINVAL;
	r = source_new(e, SOURCE_DEFER, -1, 0, userdata, &s);
	if (r < 0)
		return r;
	s->cb.defer = cb;
	rdp_event_source_defer(s);
	*ret = s;
	return 0;
}

struct rdp_event_source *rdp_event_source_free(struct rdp_event_source *s)
{
	struct rdp_event *e;

	if (!s || s->dead)
		return NULL;
	e = s->e;
	source_disconnect(s);
	if (e->dispatching) {
		s->next_dead = e->dead;
		e->dead = s;
	} else {
		rdp_free(s);
	}
	return NULL;
}

static void record(struct rdp_event *e, int r)
{
	if (r < 0)
		e->last_error = r;
}

static void dispatch(struct rdp_event_source *s, uint32_t revents)
{
	struct rdp_event *e = s->e;

	switch (s->type) {
	case SOURCE_IO:
		record(e, s->cb.io(s, s->fd, revents, s->userdata));
		break;
	case SOURCE_TIMER: {
		uint64_t n;

		if (read(s->fd, &n, sizeof(n)) != sizeof(n))
			break; /* re-armed or spurious */
		record(e, s->cb.timer(s, s->userdata));
		break;
	}
	case SOURCE_SIGNAL: {
		struct signalfd_siginfo si;

		while (!s->dead && read(s->fd, &si, sizeof(si)) == sizeof(si))
			record(e, s->cb.signal(s, &si, s->userdata));
		break;
	}
	case SOURCE_DEFER:
		break;
	}
}

/* Runs the defer sources pending now; ones re-enabled meanwhile wait for the next round. */
static void run_defers(struct rdp_event *e)
{
	struct rdp_event_source *s, *batch = NULL;

	if (!e->n_pending_defer)
		return;
	/* Collect first: callbacks may add or free sources (freed ones only become dead). */
	for (s = e->sources; s; s = s->next) {
		if (s->type == SOURCE_DEFER && s->pending) {
			s->pending = false;
			e->n_pending_defer--;
			s->next_batch = batch;
			batch = s;
		}
	}
	while (batch) {
		s = batch;
		batch = s->next_batch;
		s->next_batch = NULL;
		if (s->dead)
			continue; /* freed by an earlier callback of this batch */
		record(e, s->cb.defer(s, s->userdata));
	}
}

int rdp_event_run_once(struct rdp_event *e, int timeout_ms)
{
	struct epoll_event evs[64];
	int n, i;

	if (!e)
		return -EINVAL;
	if (e->n_pending_defer || e->exit_requested)
		timeout_ms = 0;
	n = epoll_wait(e->epfd, evs, ARRAY_SIZE(evs), timeout_ms);
	if (n < 0) {
		if (errno != EINTR)
			return -errno;
		n = 0;
	}
	e->dispatching++;
	for (i = 0; i < n; i++) {
		struct rdp_event_source *s = evs[i].data.ptr;

		if (!s->dead)
			dispatch(s, evs[i].events);
	}
	run_defers(e);
	e->dispatching--;
	if (!e->dispatching)
		release_dead(e);
	return n;
}

int rdp_event_run(struct rdp_event *e)
{
	if (!e)
		return -EINVAL;
	while (!e->exit_requested) {
		int r = rdp_event_run_once(e, -1);

		if (r < 0)
			return r;
	}
	e->exit_requested = false;
	return e->exit_code;
}

void rdp_event_exit(struct rdp_event *e, int code)
{
	if (!e)
		return;
	e->exit_requested = true;
	e->exit_code = code;
}

int rdp_event_last_error(const struct rdp_event *e)
{
	return e ? e->last_error : -EINVAL;
}

const char *rdp_inotify_verb(uint32_t mask)
{
	static const struct {
		uint32_t bit;
		const char *word;
	} words[] = {
		{IN_MOVED_TO, "moved-to"},     {IN_MOVED_FROM, "moved-from"},
		{IN_CREATE, "create"},         {IN_DELETE, "delete"},
		{IN_CLOSE_WRITE, "close-write"}, {IN_MODIFY, "modify"},
		{IN_ATTRIB, "attrib"},         {IN_UNMOUNT, "unmount"},
		{IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED, "dir-removed"},
	};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (mask & words[i].bit)
			return words[i].word;
	return "event";
}

unsigned int rdp_inotify_drain(int fd, unsigned int max_reads,
			       void (*cb)(const struct inotify_event *ev, void *userdata),
			       void *userdata)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	unsigned int n_events = 0;

	for (unsigned int i = 0; i < max_reads; i++) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		for (char *p = buf; p + sizeof(struct inotify_event) <= buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;

			if (p + sizeof(*ev) + ev->len > buf + n)
				break; /* the kernel never splits events; be safe anyway */
			p += sizeof(*ev) + ev->len;
			n_events++;
			cb(ev, userdata);
		}
	}
	return n_events;
}

int rdp_accept_each(int fd, unsigned int max, void (*cb)(int cfd, void *userdata), void *userdata)
{
	for (unsigned int i = 0; i < max; i++) {
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED)
				return 0;
			return -errno;
		}
		cb(cfd, userdata);
	}
	return 0;
}

uint64_t rdp_backoff_next(uint64_t *cur, uint64_t min, uint64_t max)
{
	uint64_t d = *cur ? *cur : min;

	*cur = d * 2 > max ? max : d * 2;
	return d;
}
