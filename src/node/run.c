/* SPDX-License-Identifier: MIT */
#include "run.h"

#include <signal.h>

#include "event.h"
#include "log.h"
#include "macro.h"

struct run {
	const struct rdp_node_daemon *n;
	struct rdp_event *event;
	struct rdp_event_source *sig_src[3];
};

static int on_signal(struct rdp_event_source *s, const struct signalfd_siginfo *si, void *userdata)
{
	struct run *r = userdata;

	(void)s;
	if (si->ssi_signo == SIGHUP) {
		if (r->n->reload)
			r->n->reload(r->n->userdata);
		return 0;
	}
	rdp_log(RDP_LOG_INFO, "stopping", "signal=%s",
		si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
	rdp_event_exit(r->event, 0);
	return 0;
}

static int setup(struct run *r)
{
	static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
	int k = rdp_event_new(&r->event);

	if (k < 0)
		return k;
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
		k = rdp_event_add_signal(r->event, sigs[i], on_signal, r, &r->sig_src[i]);
		if (k < 0)
			return k;
	}
	return r->n->setup(r->event, r->n->userdata);
}

int rdp_node_run(const struct rdp_node_daemon *n)
{
	struct run r = {.n = n};
	bool started;
	int k;

	rdp_log_set_max_level(n->verbose ? RDP_LOG_DEBUG : RDP_LOG_INFO);
	k = setup(&r);
	started = k >= 0;
	if (!started) {
		if (k != -EINVAL)
			rdp_log(RDP_LOG_ERROR, "start-failed", "error=%s", rdp_log_errno(k));
	} else {
		k = rdp_event_run(r.event);
		if (k < 0)
			rdp_log(RDP_LOG_ERROR, "loop-failed", "error=%s", rdp_log_errno(k));
	}
	/* Servers close their streams and remove their own sockets, nothing else. */
	n->done(n->userdata);
	for (size_t i = 0; i < ARRAY_SIZE(r.sig_src); i++)
		rdp_event_source_free(r.sig_src[i]);
	rdp_event_free(r.event);
	if (started)
		rdp_log(RDP_LOG_INFO, "stopped", "code=%d", k < 0 ? 1 : 0);
	return k < 0 ? 1 : 0;
}

int rdp_node_watch_host(struct rdp_event *e, const char *dev_root, rdp_hostwatch_cb cb,
			void *userdata, struct rdp_hostwatch **ret)
{
	struct rdp_hostwatch_options hw = {.dev_root = dev_root};
	int k = rdp_hostwatch_new(e, &hw, cb, userdata, ret);

	if (k < 0)
		return k;
	for (int i = 0; i < RDP_HOSTWATCH_SOURCE_MAX; i++) {
		int err = 0;

		if (rdp_hostwatch_source_state(*ret, i, &err) == RDP_HOSTWATCH_UNAVAILABLE)
			rdp_log(RDP_LOG_WARNING, "hostwatch-unavailable", "source=%s error=%s msg=%s",
				rdp_hostwatch_source_name(i), rdp_log_errno(err),
				rdp_log_q("changes it would report are seen at the periodic rescan"));
	}
	return 0;
}
