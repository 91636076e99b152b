/* SPDX-License-Identifier: MIT */
/*
 * A cheap periodic read of served ports' state: the kernel sends no uevent when an RDMA port
 * changes state (ib_core raises an in-kernel event only), and a port may have no netdev whose
 * rtnetlink messages would tell (an InfiniBand port without IPoIB), or one on a virtual netdev
 * (rxe on a veth). So every interval (RDP_PORTPOLL_INTERVAL_USEC) each watched port's
 * ports/<n>/state is read again, with one pread() at offset 0 on a file descriptor kept open
 * since rdp_portpoll_set() (sysfs regenerates the value on every read at offset 0), and, where
 * the model holds one (phys_state >= 0), ports/<n>/phys_state the same way. A value other than
 * the model's gives one callback per tick (the first change's reason, the number of changes):
 * the caller rescans then, as for a uevent, and hands the new model over with
 * rdp_portpoll_set(), which sets the values expected.
 *
 * A read that fails (the device went away: sysfs answers ENODEV on an open attribute of a
 * removed device) is reported once as a change, and that file is not read again until the
 * next rdp_portpoll_set(). An empty read is no change and is read again at the next tick: a
 * sysfs attribute never reads empty, a regular file being rewritten in place (truncated, then
 * written: a fixture tree) does for a moment, and closing it then would leave the port
 * unwatched until a rescan that changes the model. Nothing is logged; nothing is allocated
 * while polling.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "event.h"

#define RDP_PORTPOLL_INTERVAL_USEC 250000ULL
#define RDP_PORTPOLL_REASON_MAX 96

struct rdp_portpoll;

/* reason: e.g. "port:rxe0/1 state 1: DOWN", "port:mlx5_0/1 phys_state 3: Disabled",
 * "port:rxe0/1 unreadable"; n_changes: how many files differed in that tick. */
typedef void (*rdp_portpoll_cb)(const char *reason, unsigned int n_changes, void *userdata);

/*
 * Keeps sysfs_root (a path; opened here) and a timer on e; nothing is polled before
 * rdp_portpoll_set(). interval_usec 0: RDP_PORTPOLL_INTERVAL_USEC.
 * Returns 0, -EINVAL, -ENOMEM, or the errno of opening the root.
 */
int rdp_portpoll_new(struct rdp_event *e, const char *sysfs_root, uint64_t interval_usec,
		     rdp_portpoll_cb cb, void *userdata, struct rdp_portpoll **ret);
/* Accepts NULL; returns NULL. Closes every kept file. */
struct rdp_portpoll *rdp_portpoll_free(struct rdp_portpoll *p);

/*
 * Watches the ports of h's devices for which watch[i] is true (watch NULL: every device),
 * expecting the model's values; replaces what was watched before (files are opened anew).
 * A port whose file cannot be opened is left out (the next rescan sees why). h is not kept.
 * Returns 0 or -ENOMEM (then nothing is watched; the caller retries at its next scan).
 */
int rdp_portpoll_set(struct rdp_portpoll *p, const struct rdp_host *h, const bool *watch);

/* Files read at each tick (state and phys_state files of the watched ports). */
size_t rdp_portpoll_files(const struct rdp_portpoll *p);
/* Ticks since rdp_portpoll_new(), and reads done (for the cost figures and tests). */
uint64_t rdp_portpoll_ticks(const struct rdp_portpoll *p);
uint64_t rdp_portpoll_reads(const struct rdp_portpoll *p);
/* One tick now, outside the timer (tests and measurements); returns the changes found. */
unsigned int rdp_portpoll_tick(struct rdp_portpoll *p);
