/* SPDX-License-Identifier: MIT */
/*
 * The life of one configured resource (its socket and its registration with kubelet), as an
 * explicit state machine: every state, every event, and the one table of transitions. Pure:
 * resource.c feeds it events and acts on the state it enters.
 *
 *   IDLE ──start──> (path held by a retiring resource) WAITING ──released──> IDLE ...
 *   IDLE/any serving ──listening──> ANNOUNCED ──handshake──> HANDSHAKE ──accepted──> REGISTERED
 *                    ──listen-failed──> LISTEN_RETRY (a timer starts it again)
 *   HANDSHAKE ──rejected / expired──> ANNOUNCED (a backoff registers again)
 *   HANDSHAKE ──removed──> RETIRING ──accepted / rejected / expired──> RELEASED
 *   any other ──removed──> RELEASED;  any ──stop──> IDLE
 *
 * ANNOUNCED: the socket is up and kubelet has not been asked (kubelet-sock mode: Register is
 * about to be sent or backing off) or has not asked yet (plugin watcher: waiting for GetInfo).
 * HANDSHAKE: Register sent, or GetInfo answered; until kubelet answers (Register's reply,
 * NotifyRegistrationStatus) it may still dial our socket for this resource's name.
 * RETIRING: removed from the configuration during a handshake; it keeps its socket (so that
 * kubelet's dial for the old name reaches it and no successor on the same path) until the
 * handshake resolves or times out.
 */
#pragma once
#include <stdbool.h>

enum rdp_res_state {
	RDP_RES_IDLE,         /* no socket: created, or stopped */
	RDP_RES_WAITING,      /* wants to start; its socket path is held by a retiring one */
	RDP_RES_LISTEN_RETRY, /* creating the socket failed; a timer tries again */
	RDP_RES_ANNOUNCED,    /* socket up, no handshake open */
	RDP_RES_HANDSHAKE,    /* Register sent / GetInfo answered, kubelet has not answered */
	RDP_RES_REGISTERED,   /* kubelet accepted the registration */
	RDP_RES_RETIRING,     /* removed during a handshake; holds its socket until resolved */
	RDP_RES_RELEASED,     /* removed; to be freed */
	RDP_RES_N_STATES,
};

enum rdp_res_event {
	RDP_RES_EV_PATH_BUSY,     /* a start found the socket path held by a retiring resource */
	RDP_RES_EV_LISTEN_FAILED, /* a start could not create the socket */
	RDP_RES_EV_LISTENING,     /* a start created the socket */
	RDP_RES_EV_HANDSHAKE,     /* Register sent, or GetInfo answered */
	RDP_RES_EV_ACCEPTED,      /* Register OK, or NotifyRegistrationStatus(true) */
	RDP_RES_EV_REJECTED,      /* Register failed, or NotifyRegistrationStatus(false) */
	RDP_RES_EV_EXPIRED,       /* the handshake timed out without an answer */
	RDP_RES_EV_REMOVED,       /* gone from the configuration */
	RDP_RES_EV_STOP,          /* the daemon stops */
	RDP_RES_N_EVENTS,
};

const char *rdp_res_state_name(enum rdp_res_state s);
const char *rdp_res_event_name(enum rdp_res_event e);

/*
 * The transition table. Returns 0 with *to set, or -EINVAL when ev cannot happen in from
 * (the caller ignores the event and stays where it is).
 */
int rdp_res_next(enum rdp_res_state from, enum rdp_res_event ev, enum rdp_res_state *to);

/* A socket exists (and serves) in this state. */
bool rdp_res_state_serving(enum rdp_res_state s);
/* The resource is on its way out: new handshakes are refused, nothing is restarted. */
bool rdp_res_state_leaving(enum rdp_res_state s);
