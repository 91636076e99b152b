/* SPDX-License-Identifier: MIT */
#include "lifecycle.h"

#include <errno.h>

#include "macro.h"

static const char *const state_names[RDP_RES_N_STATES] = {
	[RDP_RES_IDLE] = "idle",
	[RDP_RES_WAITING] = "waiting",
	[RDP_RES_LISTEN_RETRY] = "listen-retry",
	[RDP_RES_ANNOUNCED] = "announced",
	[RDP_RES_HANDSHAKE] = "handshake",
	[RDP_RES_REGISTERED] = "registered",
	[RDP_RES_RETIRING] = "retiring",
	[RDP_RES_RELEASED] = "released",
};

static const char *const event_names[RDP_RES_N_EVENTS] = {
	[RDP_RES_EV_PATH_BUSY] = "path-busy",
	[RDP_RES_EV_LISTEN_FAILED] = "listen-failed",
	[RDP_RES_EV_LISTENING] = "listening",
	[RDP_RES_EV_HANDSHAKE] = "handshake",
	[RDP_RES_EV_ACCEPTED] = "accepted",
	[RDP_RES_EV_REJECTED] = "rejected",
	[RDP_RES_EV_EXPIRED] = "expired",
	[RDP_RES_EV_REMOVED] = "removed",
	[RDP_RES_EV_STOP] = "stop",
};

const char *rdp_res_state_name(enum rdp_res_state s)
{
	return (unsigned)s < RDP_RES_N_STATES ? state_names[s] : "invalid";
}

const char *rdp_res_event_name(enum rdp_res_event e)
{
	return (unsigned)e < RDP_RES_N_EVENTS ? event_names[e] : "invalid";
}

#define X RDP_RES_N_STATES /* not allowed */

/* next[from][event]: the whole life of a resource in one table. */
static const enum rdp_res_state next[RDP_RES_N_STATES][RDP_RES_N_EVENTS] = {
	/*                 PATH_BUSY        LISTEN_FAILED          LISTENING           HANDSHAKE
	 *                 ACCEPTED            REJECTED           EXPIRED            REMOVED
	 *                 STOP */
	[RDP_RES_IDLE] = {RDP_RES_WAITING, RDP_RES_LISTEN_RETRY, RDP_RES_ANNOUNCED, X, X, X, X,
			  RDP_RES_RELEASED, RDP_RES_IDLE},
	[RDP_RES_WAITING] = {RDP_RES_WAITING, RDP_RES_LISTEN_RETRY, RDP_RES_ANNOUNCED, X, X, X, X,
			     RDP_RES_RELEASED, RDP_RES_IDLE},
	[RDP_RES_LISTEN_RETRY] = {X, RDP_RES_LISTEN_RETRY, RDP_RES_ANNOUNCED, X, X, X, X,
				  RDP_RES_RELEASED, RDP_RES_IDLE},
	/* A restart re-creates the socket of a serving resource: listen events from all three. */
	[RDP_RES_ANNOUNCED] = {X, RDP_RES_LISTEN_RETRY, RDP_RES_ANNOUNCED, RDP_RES_HANDSHAKE,
			       RDP_RES_REGISTERED, RDP_RES_ANNOUNCED, RDP_RES_ANNOUNCED,
			       RDP_RES_RELEASED, RDP_RES_IDLE},
	[RDP_RES_HANDSHAKE] = {X, RDP_RES_LISTEN_RETRY, RDP_RES_ANNOUNCED, RDP_RES_HANDSHAKE,
			       RDP_RES_REGISTERED, RDP_RES_ANNOUNCED, RDP_RES_ANNOUNCED,
			       RDP_RES_RETIRING, RDP_RES_IDLE},
	/* kubelet's plugin watcher may call GetInfo again (a kubelet restart). */
	[RDP_RES_REGISTERED] = {X, RDP_RES_LISTEN_RETRY, RDP_RES_ANNOUNCED, RDP_RES_HANDSHAKE,
				RDP_RES_REGISTERED, RDP_RES_ANNOUNCED, RDP_RES_REGISTERED,
				RDP_RES_RELEASED, RDP_RES_IDLE},
	/* Whatever kubelet answers, or silence, resolves it. */
	[RDP_RES_RETIRING] = {X, X, X, X, RDP_RES_RELEASED, RDP_RES_RELEASED, RDP_RES_RELEASED,
			      RDP_RES_RETIRING, RDP_RES_IDLE},
	[RDP_RES_RELEASED] = {X, X, X, X, X, X, X, RDP_RES_RELEASED, RDP_RES_IDLE},
};

int rdp_res_next(enum rdp_res_state from, enum rdp_res_event ev, enum rdp_res_state *to)
{
	enum rdp_res_state n;

	if ((unsigned)from >= RDP_RES_N_STATES || (unsigned)ev >= RDP_RES_N_EVENTS)
		return -EINVAL;
	n = next[from][ev];
	if (n == X)
		return -EINVAL;
	*to = n;
	return 0;
}

bool rdp_res_state_serving(enum rdp_res_state s)
{
	return s == RDP_RES_ANNOUNCED || s == RDP_RES_HANDSHAKE || s == RDP_RES_REGISTERED ||
	       s == RDP_RES_RETIRING;
}

bool rdp_res_state_leaving(enum rdp_res_state s)
{
	return s == RDP_RES_RETIRING || s == RDP_RES_RELEASED;
}
