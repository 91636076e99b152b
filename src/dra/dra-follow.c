/* SPDX-License-Identifier: MIT */
/* Following our ResourceSlices with a watch; see dra-follow.h. */
#include "dra-follow.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "event.h"
#include "kube-watch.h"
#include "log.h"
#include "macro.h"

struct rdp_dra_follow {
	struct rdp_event *event;
	struct rdp_kube_watch *watch;
	const struct rdp_dra_follow_ops *ops;
	void *userdata;
	char *list_path;
	json_t *items; /* of the last LIST, with the events since applied */
	char rv[RDP_KUBE_RV_MAX]; /* where the next watch starts; "" none yet */
	bool sync_idle; /* the driver's sync is idle: a watch may run */
	bool stale; /* the running watch started before a write of ours */
	bool healthy;
	struct rdp_event_source *timer; /* the next watch after a failure */
	bool backing_off;
	uint64_t backoff_usec;
	char last_error[256];
	struct rdp_dra_follow_stats stats;
};

static void maybe_start(struct rdp_dra_follow *f);

static void set_healthy(struct rdp_dra_follow *f, bool h)
{
	if (f->healthy == h)
		return;
	f->healthy = h;
	if (f->ops->health)
		f->ops->health(h, f->userdata);
}

static const char *object_name(const json_t *obj)
{
	return json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
}

/* An event on the items of the last LIST, by metadata.name. */
static int apply(struct rdp_dra_follow *f, enum rdp_kube_watch_type type, json_t *obj)
{
	const char *name = object_name(obj);
	size_t i;
	json_t *x;

	if (!name)
		return -EBADMSG;
	if (!f->items) {
		f->items = json_array();
		if (!f->items)
			return -ENOMEM;
	}
	json_array_foreach(f->items, i, x) {
		const char *n = object_name(x);

		if (n && strcmp(n, name) == 0) {
			if (type == RDP_KUBE_WATCH_DELETED)
				return json_array_remove(f->items, i) == 0 ? 0 : -ENOMEM;
			return json_array_set(f->items, i, obj) == 0 ? 0 : -ENOMEM;
		}
	}
	if (type == RDP_KUBE_WATCH_DELETED)
		return 0;
	return json_array_append(f->items, obj) == 0 ? 0 : -ENOMEM;
}

static void on_event(struct rdp_dra_follow *f, const struct rdp_kube_watch_result *res)
{
	char why[32];
	json_t *list;
	int k;

	if (f->stale) {
		/* one of our own writes, seen by a watch from before them: the LIST that
		 * ended the sync is newer; start again from there */
		f->stats.stale++;
		f->stale = false;
		rdp_log(RDP_LOG_DEBUG, "slices-watch-stale", "type=%s rv=%s",
			rdp_kube_watch_type_name(res->type), rdp_log_q(res->rv));
		return;
	}
	f->stats.events++;
	snprintf(why, sizeof(why), "watch-%s",
		 res->type == RDP_KUBE_WATCH_ADDED	? "added"
		 : res->type == RDP_KUBE_WATCH_MODIFIED ? "modified"
							: "deleted");
	k = apply(f, res->type, res->object);
	if (k < 0) {
		rdp_log(RDP_LOG_WARNING, "slices-watch-event", "type=%s error=%s",
			rdp_kube_watch_type_name(res->type), rdp_log_errno(k));
		f->ops->relist(why, f->userdata);
		return;
	}
	snprintf(f->rv, sizeof(f->rv), "%s", res->rv);
	list = json_pack("{s:{s:s},s:O}", "metadata", "resourceVersion", f->rv, "items",
			 f->items);
	rdp_log(RDP_LOG_INFO, "slices-watch-event", "type=%s slice=%s rv=%s",
		rdp_kube_watch_type_name(res->type), rdp_log_q(strempty(object_name(res->object))),
		rdp_log_q(f->rv));
	if (!list) {
		f->ops->relist(why, f->userdata);
		return;
	}
	f->ops->changed(list, why, f->userdata);
	json_decref(list);
}

static void watch_ended(const struct rdp_kube_watch_result *res, void *userdata)
{
	struct rdp_dra_follow *f = userdata;
	uint64_t delay;

	if (res->result == -ECANCELED)
		return; /* stopping */
	switch (res->end) {
	case RDP_KUBE_WATCH_END_EVENT:
		f->backoff_usec = 0;
		f->last_error[0] = '\0';
		set_healthy(f, true);
		on_event(f, res);
		break;
	case RDP_KUBE_WATCH_END_CLOSED:
		f->backoff_usec = 0;
		f->last_error[0] = '\0';
		rdp_log(RDP_LOG_DEBUG, "slices-watch-closed", "rv=%s bookmarks=%lu",
			rdp_log_q(res->rv), res->bookmarks);
		if (!f->stale && res->rv[0])
			snprintf(f->rv, sizeof(f->rv), "%s", res->rv);
		f->stale = false;
		set_healthy(f, true);
		break;
	case RDP_KUBE_WATCH_END_GONE:
		f->stats.gone++;
		f->stale = false;
		rdp_log(RDP_LOG_INFO, "slices-watch-expired", "rv=%s msg=%s", rdp_log_q(res->rv),
			rdp_log_q(res->error));
		f->rv[0] = '\0'; /* the LIST gives the next one */
		f->ops->relist("watch-expired", f->userdata);
		break;
	case RDP_KUBE_WATCH_END_FAILED:
		f->stats.failures++;
		f->stale = false;
		delay = rdp_backoff_next(&f->backoff_usec, RDP_DRA_WATCH_BACKOFF_MIN_USEC,
					 RDP_DRA_WATCH_BACKOFF_MAX_USEC);
		if (strcmp(f->last_error, res->error) != 0 ||
		    (f->stats.failures & (f->stats.failures - 1)) == 0)
			rdp_log(RDP_LOG_WARNING, "slices-watch-failed",
				"error=%s retry_ms=%llu failures=%lu", rdp_log_q(res->error),
				(unsigned long long)(delay / 1000), f->stats.failures);
		snprintf(f->last_error, sizeof(f->last_error), "%s", res->error);
		f->backing_off = true;
		rdp_event_source_set_timer(f->timer, delay);
		set_healthy(f, false);
		break;
	}
	maybe_start(f);
}

static void maybe_start(struct rdp_dra_follow *f)
{
	unsigned timeout;
	int k;

	if (!f->sync_idle || f->backing_off || !f->rv[0] || rdp_kube_watch_running(f->watch))
		return;
	/* client-go's reflector: a random timeout between the minimum and twice it, so that
	 * the nodes' watches do not all end at once */
	timeout = RDP_DRA_WATCH_TIMEOUT_MIN_S +
		  (unsigned)(rdp_now_usec() / 1000 % RDP_DRA_WATCH_TIMEOUT_MIN_S);
	k = rdp_kube_watch_start(f->watch, f->list_path, f->rv, timeout, watch_ended, f);
	if (k < 0) {
		rdp_log(RDP_LOG_WARNING, "slices-watch-failed", "rv=%s error=%s", rdp_log_q(f->rv),
			rdp_log_errno(k));
		return;
	}
	f->stats.watches++;
	/* a watch still open a while later got its stream: watching works again */
	if (!f->healthy)
		rdp_event_source_set_timer(f->timer, RDP_DRA_WATCH_HEALTHY_USEC);
	rdp_log(RDP_LOG_DEBUG, "slices-watch", "rv=%s timeout_s=%u", rdp_log_q(f->rv), timeout);
}

static int on_timer(struct rdp_event_source *s, void *userdata)
{
	struct rdp_dra_follow *f = userdata;

	(void)s;
	if (rdp_kube_watch_running(f->watch)) {
		set_healthy(f, true);
		return 0;
	}
	f->backing_off = false;
	maybe_start(f);
	return 0;
}

int rdp_dra_follow_new(struct rdp_event *e, const struct rdp_kube_config *cfg,
		       const char *list_path, const struct rdp_dra_follow_ops *ops, void *userdata,
		       struct rdp_dra_follow **ret, char **ret_error)
{
	struct rdp_dra_follow *f = rdp_calloc(1, sizeof(*f));
	int k;

	if (!f)
		return -ENOMEM;
	f->event = e;
	f->ops = ops;
	f->userdata = userdata;
	f->healthy = true;
	f->list_path = rdp_strdup(list_path);
	k = f->list_path ? 0 : -ENOMEM;
	if (k == 0)
		k = rdp_kube_watch_new(e, cfg, &f->watch, ret_error);
	if (k == 0)
		k = rdp_event_add_timer(e, 0, on_timer, f, &f->timer);
	if (k < 0) {
		rdp_dra_follow_free(f);
		return k;
	}
	*ret = f;
	return 0;
}

struct rdp_dra_follow *rdp_dra_follow_free(struct rdp_dra_follow *f)
{
	if (!f)
		return NULL;
	f->watch = rdp_kube_watch_free(f->watch);
	rdp_event_source_free(f->timer);
	json_decref(f->items);
	rdp_free(f->list_path);
	rdp_free(f);
	return NULL;
}

void rdp_dra_follow_listed(struct rdp_dra_follow *f, json_t *list)
{
	json_t *items = json_object_get(list, "items");
	const char *rv = rdp_kube_object_rv(list);

	if (!f)
		return;
	f->sync_idle = false;
	json_decref(f->items);
	f->items = json_is_array(items) ? json_deep_copy(items) : json_array();
	if (rdp_kube_rv_valid(rv))
		snprintf(f->rv, sizeof(f->rv), "%s", rv);
	else
		f->rv[0] = '\0';
}

void rdp_dra_follow_wrote(struct rdp_dra_follow *f)
{
	if (!f)
		return;
	f->sync_idle = false;
	if (rdp_kube_watch_running(f->watch))
		f->stale = true;
}

void rdp_dra_follow_idle(struct rdp_dra_follow *f)
{
	if (!f)
		return;
	f->sync_idle = true;
	maybe_start(f);
}

bool rdp_dra_follow_healthy(const struct rdp_dra_follow *f)
{
	return !f || f->healthy;
}

void rdp_dra_follow_stats(const struct rdp_dra_follow *f, struct rdp_dra_follow_stats *ret)
{
	*ret = f->stats;
}
