/* SPDX-License-Identifier: MIT */
/*
 * Watches the config file, so that a change is seen whatever way it was made:
 *
 *   - a ConfigMap update: kubelet's AtomicWriter writes a new `..<timestamp>` directory, points
 *     a new `..data_tmp` symlink at it, renames `..data_tmp` over `..data` (config.json itself
 *     is a symlink to `..data/config.json` and never changes), then removes the old directory;
 *   - an in-place write (IN_MODIFY, IN_CLOSE_WRITE), a rename over the file (editors,
 *     `mv new config.json`), a delete and create, a chmod.
 *
 * How: the path is resolved by hand, component by component, and the directory holding each
 * symlink met on the way, and the one holding the final file, are watched (inotify) for that
 * name. For a ConfigMap mount that is the mount directory (names `config.json` and `..data`)
 * and the current timestamped directory (name `config.json`). After every change the chain is
 * resolved and watched again before the callback runs, so a change made after the daemon read
 * the file is never missed. A component that does not exist is watched for in the directory
 * that should hold it (so a removed and re-created directory is seen by its parent's watch);
 * while the file's directory is missing, or a watch cannot be added, the chain is also retried
 * every poll_usec (1 s), which covers a directory coming back by a mount.
 *
 * Events are coalesced: the callback runs once the file has been quiet for settle_usec (200 ms,
 * so that a half-written file is not read mid-write), at most RDP_CONFWATCH_MAX_DELAY_USEC
 * after the first event of a burst. It only says "the config may have changed": the daemon
 * re-reads and compares; a spurious callback is harmless. Nothing is logged here.
 */
#pragma once
#include <stdint.h>

#include "event.h"

#define RDP_CONFWATCH_SETTLE_USEC 200000ULL
#define RDP_CONFWATCH_POLL_USEC 1000000ULL
#define RDP_CONFWATCH_MAX_DELAY_USEC 2000000ULL
/* Watched (directory, name) pairs at most: symlink hops on the way to the file. */
#define RDP_CONFWATCH_MAX_WATCHES 16
#define RDP_CONFWATCH_REASON_MAX 96

struct rdp_confwatch;

/* The watcher's life (transitions: changed(), rebuild() and on_timer() in confwatch.c). */
enum rdp_confwatch_state {
	RDP_CONFWATCH_WATCHING, /* the whole chain is watched; nothing pending */
	RDP_CONFWATCH_SETTLING, /* a change was seen; the callback runs when it is quiet */
	RDP_CONFWATCH_MISSING, /* the file's directory is missing or a watch failed: polling */
};

struct rdp_confwatch_options {
	uint64_t settle_usec; /* 0: RDP_CONFWATCH_SETTLE_USEC */
	uint64_t poll_usec; /* 0: RDP_CONFWATCH_POLL_USEC */
};

/*
 * reason: the first event of the burst, e.g. "..data moved-to", "config.json modify",
 * "dir-back", "inotify-overflow". The callback may free the watcher.
 */
typedef void (*rdp_confwatch_cb)(const char *reason, unsigned int n_events, void *userdata);

/*
 * Watches path (relative paths are made absolute with the current directory now). o may be
 * NULL. A missing file or directory is not an error (it is watched for, and polled).
 * Returns 0, -EINVAL, -ENOMEM, or inotify_init1()'s error.
 */
int rdp_confwatch_new(struct rdp_event *e, const char *path, const struct rdp_confwatch_options *o,
		      rdp_confwatch_cb cb, void *userdata, struct rdp_confwatch **ret);
/* Accepts NULL; returns NULL. */
struct rdp_confwatch *rdp_confwatch_free(struct rdp_confwatch *w);

/* The state; *error (when not NULL) gets why it is MISSING (negative errno), else 0. */
enum rdp_confwatch_state rdp_confwatch_state(const struct rdp_confwatch *w, int *error);
const char *rdp_confwatch_state_name(enum rdp_confwatch_state s);
/* How many (directory, name) pairs are watched now; for tests and debug logs. */
unsigned int rdp_confwatch_n_watches(const struct rdp_confwatch *w);
