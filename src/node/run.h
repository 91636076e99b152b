/* SPDX-License-Identifier: MIT */
/*
 * What the device plugin (`serve`) and the DRA driver (`dra`) do alike from start to stop:
 * the log level, the loop, SIGPIPE ignored, SIGTERM/SIGINT ending the loop and SIGHUP handed to
 * the daemon, the set-up and tear-down around the loop with their log lines ("start-failed",
 * "loop-failed", "stopping", "stopped"), and the host watch with a warning for each of its
 * sources that cannot work here. This is daemon wiring: it logs.
 */
#pragma once
#include <stdbool.h>

#include "hostwatch.h"

struct rdp_event;

struct rdp_node_daemon {
	bool verbose;
	void *userdata;
	/*
	 * Builds the daemon on e (the loop is created and freed here). A negative errno fails
	 * the start, logged as start-failed unless -EINVAL (the daemon explained it already).
	 */
	int (*setup)(struct rdp_event *e, void *userdata);
	/* SIGHUP: reload or resync (the daemon logs what it does). */
	void (*reload)(void *userdata);
	/* Frees what setup built, also after a failed setup; the loop still exists. */
	void (*done)(void *userdata);
};

/* Runs the daemon until SIGTERM/SIGINT; returns the process's exit code (0 or 1). */
int rdp_node_run(const struct rdp_node_daemon *n);

/*
 * rdp_hostwatch_new() on dev_root, with a warning logged for each source that is unavailable
 * (its changes are then seen at the periodic rescan only).
 */
int rdp_node_watch_host(struct rdp_event *e, const char *dev_root, rdp_hostwatch_cb cb,
			void *userdata, struct rdp_hostwatch **ret);
