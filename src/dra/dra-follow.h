/* SPDX-License-Identifier: MIT */
/*
 * The driver follows its ResourceSlices with a watch (kube-watch.h) instead of listing them
 * every 10 s, as the reference resourceslice controller does with its informer:
 *
 *   - every LIST of the sync (dra-driver.c) gives the items and the resourceVersion to start
 *     from (rdp_dra_follow_listed()); when the sync is idle (rdp_dra_follow_idle()) a watch
 *     runs from the newest one, with the same field selector (spec.nodeName, spec.driver),
 *     bookmarks, and timeoutSeconds RDP_DRA_WATCH_TIMEOUT_MIN_S.. 2x (jittered per watch, as
 *     client-go's reflector does);
 *   - an ADDED, MODIFIED or DELETED event (someone else's write: ours happen before the LIST
 *     that ends a sync) is applied to the items of the last LIST and handed to
 *     ops->changed() as a list, so that the sync compares and repairs at once, without a LIST;
 *   - a 410 (answered, or an ERROR event) calls ops->relist(): one LIST, then a new watch;
 *   - the end of a stream (timeoutSeconds) starts the next watch from the last event or
 *     bookmark at once; a failure starts it again after 1 s doubling to 30 s.
 *   - a watch running across a sync that wrote (a rescan, a registration) is stale: its next
 *     event is one of our writes; it is dropped and the watch starts again from the sync's LIST.
 * The periodic LIST stays as a backstop: RDP_DRA_RESYNC_USEC while the watch works, the old
 * RDP_DRA_RESYNC_FALLBACK_USEC while it does not (rdp_dra_follow_healthy(): an API server or
 * a ClusterRole without watch).
 *
 * Wiring: logs (log.h), one key=value line per event.
 */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "kube-client.h"

#define RDP_DRA_WATCH_TIMEOUT_MIN_S 300
#define RDP_DRA_WATCH_BACKOFF_MIN_USEC (1000 * 1000ULL)
#define RDP_DRA_WATCH_BACKOFF_MAX_USEC (30 * 1000 * 1000ULL)
/* a watch open this long after a failure is taken as working (healthy again) */
#define RDP_DRA_WATCH_HEALTHY_USEC (3 * 1000 * 1000ULL)

struct rdp_event;
struct rdp_dra_follow;

struct rdp_dra_follow_ops {
	/*
	 * Someone else changed our slices (why: "watch-deleted"...). list is what a LIST would
	 * answer now: {"metadata": {"resourceVersion"}, "items": [...]} (borrowed).
	 */
	void (*changed)(json_t *list, const char *why, void *userdata);
	/* The watch cannot resume from what we hold (410): LIST again. */
	void (*relist)(const char *why, void *userdata);
	/* rdp_dra_follow_healthy() changed: the backstop's period may change with it. */
	void (*health)(bool healthy, void *userdata);
};

/* list_path: the LIST of our slices, with its fieldSelector. */
int rdp_dra_follow_new(struct rdp_event *e, const struct rdp_kube_config *cfg,
		       const char *list_path, const struct rdp_dra_follow_ops *ops, void *userdata,
		       struct rdp_dra_follow **ret, char **ret_error);
struct rdp_dra_follow *rdp_dra_follow_free(struct rdp_dra_follow *f);

/*
 * The four below accept NULL (nothing done; healthy): a slice job that finished while the
 * driver stops reaches the sync after the watch is gone.
 */
/* A LIST of our slices came back (the whole response object). */
void rdp_dra_follow_listed(struct rdp_dra_follow *f, json_t *list);
/* The sync wrote a slice: a watch running now will see it. */
void rdp_dra_follow_wrote(struct rdp_dra_follow *f);
/* The sync is idle: a watch runs from the newest resourceVersion (started when none does). */
void rdp_dra_follow_idle(struct rdp_dra_follow *f);
/*
 * Whether watching works: true at the start, after a watch that ended well, and once a watch
 * has stayed open RDP_DRA_WATCH_HEALTHY_USEC; false after one that failed (the backstop
 * should then be quick).
 */
bool rdp_dra_follow_healthy(const struct rdp_dra_follow *f);

struct rdp_dra_follow_stats {
	unsigned long watches; /* started */
	unsigned long events; /* ADDED/MODIFIED/DELETED acted on */
	unsigned long stale; /* events of a stale watch, dropped */
	unsigned long gone; /* 410s */
	unsigned long failures;
};
void rdp_dra_follow_stats(const struct rdp_dra_follow *f, struct rdp_dra_follow_stats *ret);
