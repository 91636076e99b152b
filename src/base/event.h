/* SPDX-License-Identifier: MIT */
/*
 * A small epoll event loop: io sources, monotonic timers (timerfd), signals (signalfd) and
 * deferred callbacks. Single-threaded. Every fd it opens is O_CLOEXEC|O_NONBLOCK.
 * A callback may free its own source or any other; freeing is deferred to the end of the
 * current iteration, so pointers stay valid until then.
 * Callbacks return 0, or a negative errno, which is recorded (rdp_event_last_error) and
 * otherwise ignored: the loop keeps running until rdp_event_exit().
 */
#pragma once
#include <stdint.h>
#include <sys/signalfd.h>

struct rdp_event;
struct rdp_event_source;

typedef int (*rdp_io_cb)(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata);
typedef int (*rdp_timer_cb)(struct rdp_event_source *s, void *userdata);
typedef int (*rdp_signal_cb)(struct rdp_event_source *s, const struct signalfd_siginfo *si,
			     void *userdata);
typedef int (*rdp_defer_cb)(struct rdp_event_source *s, void *userdata);

int rdp_event_new(struct rdp_event **ret);
/* Frees all remaining sources (without calling them) and the loop. Accepts NULL. */
struct rdp_event *rdp_event_free(struct rdp_event *e);

/* Watches fd for EPOLLIN/EPOLLOUT/... The fd stays owned by the caller. */
int rdp_event_add_io(struct rdp_event *e, int fd, uint32_t events, rdp_io_cb cb, void *userdata,
		     struct rdp_event_source **ret);
int rdp_event_source_set_io_events(struct rdp_event_source *s, uint32_t events);

/*
 * One-shot timer firing usec microseconds from now (CLOCK_MONOTONIC). Re-arm with
 * rdp_event_source_set_timer() (also from inside its callback); 0 disarms.
 */
int rdp_event_add_timer(struct rdp_event *e, uint64_t usec, rdp_timer_cb cb, void *userdata,
			struct rdp_event_source **ret);
int rdp_event_source_set_timer(struct rdp_event_source *s, uint64_t usec);

/* Blocks sig for the process and delivers it through a signalfd. */
int rdp_event_add_signal(struct rdp_event *e, int sig, rdp_signal_cb cb, void *userdata,
			 struct rdp_event_source **ret);

/*
 * A callback run once at the end of the current (or next) loop iteration, e.g. to flush
 * output after many events. Enable it again with rdp_event_source_defer().
 */
int rdp_event_add_defer(struct rdp_event *e, rdp_defer_cb cb, void *userdata,
			struct rdp_event_source **ret);
int rdp_event_source_defer(struct rdp_event_source *s);

/* Removes a source; safe from any callback. Accepts NULL, returns NULL. */
struct rdp_event_source *rdp_event_source_free(struct rdp_event_source *s);

/* Runs until rdp_event_exit(); returns the exit code given there (or a negative errno). */
int rdp_event_run(struct rdp_event *e);
/* Runs one iteration, waiting at most timeout_ms (-1: forever). For tests. */
int rdp_event_run_once(struct rdp_event *e, int timeout_ms);
void rdp_event_exit(struct rdp_event *e, int code);
int rdp_event_last_error(const struct rdp_event *e);

/*
 * A word for an inotify event mask, for logs and reasons ("create", "moved-to",
 * "close-write", "dir-removed"...): the first of the bits that matter.
 */
const char *rdp_inotify_verb(uint32_t mask);

struct inotify_event;
/*
 * Reads the events queued on the non-blocking inotify fd, at most max_reads reads of 4 KiB
 * (the loop is level-triggered: the rest is read at the next wakeup), and calls cb for each
 * whole event. Returns how many events were passed.
 */
unsigned int rdp_inotify_drain(int fd, unsigned int max_reads,
			       void (*cb)(const struct inotify_event *ev, void *userdata),
			       void *userdata);

/*
 * Accepts at most max connections waiting on the non-blocking listening socket fd (the loop is
 * level-triggered: the rest at the next wakeup), each O_NONBLOCK|O_CLOEXEC, and hands each to
 * cb, which owns it from then on. Returns 0, or the negative errno of an accept failure that is
 * not transient (EMFILE and friends: the caller's callback returns it, the loop records it and
 * goes on).
 */
int rdp_accept_each(int fd, unsigned int max, void (*cb)(int cfd, void *userdata), void *userdata);

/*
 * Exponential backoff: returns the delay to wait now (*cur, or min when *cur is 0) and doubles
 * *cur for the next time, up to max. Reset by setting *cur to 0.
 */
uint64_t rdp_backoff_next(uint64_t *cur, uint64_t min, uint64_t max);

/* CLOCK_MONOTONIC in microseconds. */
uint64_t rdp_now_usec(void);
