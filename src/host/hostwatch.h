/* SPDX-License-Identifier: MIT */
/*
 * Tells the daemon "the host may have changed", from three event sources, instead of waiting
 * for the periodic rescan:
 *
 *   - dev:    inotify on <dev_root>/infiniband (uverbs/umad/issm/rdma_cm nodes created,
 *             removed, renamed, chmod'ed) and on <dev_root> itself for `infiniband` being
 *             removed and re-created (devtmpfs removes the directory with its last node, e.g.
 *             on a driver reload, and creates it again later): the subdirectory's watch is
 *             re-added as soon as it is back, without polling. When <dev_root> itself cannot
 *             be watched (missing), it is retried every RDP_HOSTWATCH_RETRY_USEC.
 *   - uevent: kernel uevents (NETLINK_KOBJECT_UEVENT, group 1) of the infiniband,
 *             infiniband_verbs, infiniband_mad, pci and (non-virtual) net subsystems. Only
 *             messages whose sender is the kernel (nl_pid 0) count: libudev's re-broadcasts
 *             and other user-space senders are ignored. (SCM_CREDENTIALS is not checked: in a
 *             user namespace the kernel's uid 0 arrives as the overflow uid, and nl_pid 0
 *             cannot be forged by user space.) Note that a socket opened outside the host's
 *             network namespace opens fine but receives no device uevents: the daemon runs
 *             with hostNetwork, where it does.
 *   - rtnl:   rtnetlink link notifications (RTMGRP_LINK): a netdev that may carry RDMA
 *             (Ethernet or IPoIB, not veth/bridge/...: netlink.h; those kinds come and go
 *             with every pod, so they count only when rdp_hostwatch_set_netdevs() names
 *             them: soft-RoCE on a veth, a dummy or a bridge) appearing, disappearing,
 *             being renamed, or changing IFF_UP/IFF_RUNNING/IFF_LOWER_UP, IFLA_OPERSTATE or
 *             IFLA_CARRIER (port state follows carrier for IPoIB and RoCE netdevs).
 *
 * Events are coalesced: the first one arms a timer of coalesce_usec (50 ms by default), and
 * everything until it fires gives one callback, carrying the first event's reason and the
 * number of events. Callbacks are at least min_interval_usec (200 ms) apart, so a flood costs
 * at most one rescan per interval; any event is reported within coalesce + min_interval.
 * A lost-events condition (ENOBUFS on a netlink socket, IN_Q_OVERFLOW) is reported as a change
 * ("uevent-overflow", "rtnl-overflow", "inotify-overflow", flag RDP_HOSTWATCH_LOST_EVENTS): the
 * daemon rescans fully then.
 *
 * Sockets are non-blocking and close-on-exec, with bounded receive buffers; each wakeup reads
 * a bounded number of messages (the loop is level-triggered: the rest is read next time), so a
 * flood cannot wedge the loop. Memory is bounded (a table of at most RDP_HOSTWATCH_MAX_LINKS
 * netdevs' last known state). A source that cannot be opened is left out; its state and error
 * say why (rdp_hostwatch_source_state()). Nothing is logged here.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event.h"

#define RDP_HOSTWATCH_COALESCE_USEC 50000ULL
#define RDP_HOSTWATCH_MIN_INTERVAL_USEC 200000ULL
#define RDP_HOSTWATCH_RETRY_USEC 1000000ULL
#define RDP_HOSTWATCH_MAX_LINKS 1024
#define RDP_HOSTWATCH_REASON_MAX 96

struct rdp_hostwatch;

enum rdp_hostwatch_source {
	RDP_HOSTWATCH_DEV,
	RDP_HOSTWATCH_UEVENT,
	RDP_HOSTWATCH_RTNL,
	RDP_HOSTWATCH_SOURCE_MAX,
};

enum rdp_hostwatch_state {
	RDP_HOSTWATCH_OFF, /* not asked for (options) */
	RDP_HOSTWATCH_ACTIVE,
	RDP_HOSTWATCH_UNAVAILABLE, /* could not be opened (or the dev root is missing): see error */
};

struct rdp_hostwatch_options {
	const char *dev_root; /* required: "/dev", or a fixture's dev directory */
	uint64_t coalesce_usec; /* 0: RDP_HOSTWATCH_COALESCE_USEC */
	uint64_t min_interval_usec; /* 0: RDP_HOSTWATCH_MIN_INTERVAL_USEC */
	bool no_uevent; /* leave the uevent socket out (tests) */
	bool no_rtnl; /* leave the rtnetlink socket out (tests) */
};

/* flags of a callback: some events were lost (ENOBUFS, IN_Q_OVERFLOW, a truncated message). */
#define RDP_HOSTWATCH_LOST_EVENTS 0x1u

/*
 * reason: the first coalesced event, e.g. "dev-infiniband-created", "dev:create uverbs3",
 * "uevent:infiniband add mlx5_3", "link:ib0 down", "uevent-overflow" (at most
 * RDP_HOSTWATCH_REASON_MAX bytes). n_events: how many events this callback stands for.
 * flags: RDP_HOSTWATCH_LOST_EVENTS when some were lost: rescan fully then.
 * The callback may free the watcher.
 */
typedef void (*rdp_hostwatch_cb)(const char *reason, unsigned int n_events, unsigned int flags,
				 void *userdata);

/*
 * Opens the sources and adds them to e. Fails only on bad arguments or -ENOMEM (and inotify
 * itself failing): an unavailable source is recorded, not an error.
 */
int rdp_hostwatch_new(struct rdp_event *e, const struct rdp_hostwatch_options *o,
		      rdp_hostwatch_cb cb, void *userdata, struct rdp_hostwatch **ret);
/* Accepts NULL; returns NULL. */
struct rdp_hostwatch *rdp_hostwatch_free(struct rdp_hostwatch *w);

/* The state of a source; *error (when not NULL) gets the negative errno of UNAVAILABLE, else 0. */
enum rdp_hostwatch_state rdp_hostwatch_source_state(const struct rdp_hostwatch *w,
						    enum rdp_hostwatch_source s, int *error);
const char *rdp_hostwatch_source_name(enum rdp_hostwatch_source s);
/*
 * True when the dev source watches <dev_root>/infiniband and everything it saw was reported:
 * no inotify event queued (one poll()), no coalesced change waiting for its callback. Then the
 * nodes under infiniband/ are as they were at the last callback (devtmpfs reports every node
 * created, removed or renamed), which lets Allocate skip re-checking them.
 */
bool rdp_hostwatch_dev_settled(const struct rdp_hostwatch *w);

/*
 * The netdevs under served RDMA devices (names; copied): their link messages count whatever
 * their kind (rdp_rtnl_link_relevant() refuses veth, dummy, bridge... which pods create by
 * the hundred). Replaces the previous list. Returns 0, -ENOMEM (the old list stays) or
 * -EINVAL. Accepts w NULL (returns 0).
 */
int rdp_hostwatch_set_netdevs(struct rdp_hostwatch *w, const char *const *names, size_t n);

/* Messages or inotify events received by a source so far (all, relevant or not). */
uint64_t rdp_hostwatch_source_received(const struct rdp_hostwatch *w,
				       enum rdp_hostwatch_source s);
