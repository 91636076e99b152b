/* SPDX-License-Identifier: MIT */
/* PLACEHOLDER until the event loop lands: keeps the tree linking. */
#include "event.h"

#include <errno.h>
#include <stddef.h>

int rdp_event_new(struct rdp_event **ret) { (void)ret; return -ENOSYS; }
struct rdp_event *rdp_event_free(struct rdp_event *e) { (void)e; return NULL; }
int rdp_event_add_io(struct rdp_event *e, int fd, uint32_t events, rdp_io_cb cb, void *userdata,
		     struct rdp_event_source **ret) { return -ENOSYS; }
int rdp_event_source_set_io_events(struct rdp_event_source *s, uint32_t events) { return -ENOSYS; }
int rdp_event_add_timer(struct rdp_event *e, uint64_t usec, rdp_timer_cb cb, void *userdata,
			struct rdp_event_source **ret) { return -ENOSYS; }
int rdp_event_source_set_timer(struct rdp_event_source *s, uint64_t usec) { return -ENOSYS; }
int rdp_event_add_signal(struct rdp_event *e, int sig, rdp_signal_cb cb, void *userdata,
			 struct rdp_event_source **ret) { return -ENOSYS; }
int rdp_event_add_defer(struct rdp_event *e, rdp_defer_cb cb, void *userdata,
			struct rdp_event_source **ret) { return -ENOSYS; }
int rdp_event_source_defer(struct rdp_event_source *s) { return -ENOSYS; }
struct rdp_event_source *rdp_event_source_free(struct rdp_event_source *s) { return NULL; }
int rdp_event_run(struct rdp_event *e) { return -ENOSYS; }
int rdp_event_run_once(struct rdp_event *e, int timeout_ms) { return -ENOSYS; }
void rdp_event_exit(struct rdp_event *e, int code) { }
int rdp_event_last_error(const struct rdp_event *e) { return -ENOSYS; }
uint64_t rdp_now_usec(void) { return 0; }
