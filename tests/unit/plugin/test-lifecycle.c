/* SPDX-License-Identifier: MIT */
/*
 * lifecycle.c: the transition table of a resource's life. Walks the paths the daemon takes
 * (start, register, kubelet restart, refusal, removal during a handshake) and checks that
 * events which cannot happen are refused without changing anything.
 */
#include <errno.h>

#include "lifecycle.h"
#include "test.h"

static enum rdp_res_state walk(enum rdp_res_state s, const enum rdp_res_event *evs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		enum rdp_res_state to = RDP_RES_N_STATES;

		if (rdp_res_next(s, evs[i], &to) < 0)
			return RDP_RES_N_STATES;
		s = to;
	}
	return s;
}

#define WALK(from, ...)                                                                            \
	walk(from, (const enum rdp_res_event[]){__VA_ARGS__},                                      \
	     sizeof((const enum rdp_res_event[]){__VA_ARGS__}) / sizeof(enum rdp_res_event))

int main(void)
{
	enum rdp_res_state to;

	/* kubelet.sock: listen, Register, accepted; a kubelet restart re-creates the socket. */
	EXPECT_EQ(WALK(RDP_RES_IDLE, RDP_RES_EV_LISTENING, RDP_RES_EV_HANDSHAKE,
		       RDP_RES_EV_ACCEPTED),
		  RDP_RES_REGISTERED);
	EXPECT_EQ(WALK(RDP_RES_REGISTERED, RDP_RES_EV_LISTENING, RDP_RES_EV_HANDSHAKE,
		       RDP_RES_EV_ACCEPTED),
		  RDP_RES_REGISTERED);
	/* A refusal goes back to announced (a backoff tries again), from either handshake. */
	EXPECT_EQ(WALK(RDP_RES_IDLE, RDP_RES_EV_LISTENING, RDP_RES_EV_HANDSHAKE,
		       RDP_RES_EV_REJECTED),
		  RDP_RES_ANNOUNCED);
	EXPECT_EQ(WALK(RDP_RES_REGISTERED, RDP_RES_EV_REJECTED), RDP_RES_ANNOUNCED);
	/* The plugin watcher may ask again (GetInfo) after a kubelet restart. */
	EXPECT_EQ(WALK(RDP_RES_REGISTERED, RDP_RES_EV_HANDSHAKE), RDP_RES_HANDSHAKE);
	/* Socket creation failing, then succeeding. */
	EXPECT_EQ(WALK(RDP_RES_IDLE, RDP_RES_EV_LISTEN_FAILED, RDP_RES_EV_LISTEN_FAILED,
		       RDP_RES_EV_LISTENING),
		  RDP_RES_ANNOUNCED);
	/* Waiting for a retiring holder of the path, then starting. */
	EXPECT_EQ(WALK(RDP_RES_IDLE, RDP_RES_EV_PATH_BUSY, RDP_RES_EV_PATH_BUSY,
		       RDP_RES_EV_LISTENING),
		  RDP_RES_ANNOUNCED);

	/* Removal: retires only during a handshake; any answer, or silence, releases it. */
	EXPECT_EQ(WALK(RDP_RES_HANDSHAKE, RDP_RES_EV_REMOVED), RDP_RES_RETIRING);
	EXPECT_EQ(WALK(RDP_RES_HANDSHAKE, RDP_RES_EV_REMOVED, RDP_RES_EV_ACCEPTED),
		  RDP_RES_RELEASED);
	EXPECT_EQ(WALK(RDP_RES_HANDSHAKE, RDP_RES_EV_REMOVED, RDP_RES_EV_REJECTED),
		  RDP_RES_RELEASED);
	EXPECT_EQ(WALK(RDP_RES_HANDSHAKE, RDP_RES_EV_REMOVED, RDP_RES_EV_EXPIRED),
		  RDP_RES_RELEASED);
	EXPECT_EQ(WALK(RDP_RES_HANDSHAKE, RDP_RES_EV_EXPIRED, RDP_RES_EV_REMOVED),
		  RDP_RES_RELEASED);
	EXPECT_EQ(WALK(RDP_RES_REGISTERED, RDP_RES_EV_REMOVED), RDP_RES_RELEASED);
	EXPECT_EQ(WALK(RDP_RES_ANNOUNCED, RDP_RES_EV_REMOVED), RDP_RES_RELEASED);
	EXPECT_EQ(WALK(RDP_RES_WAITING, RDP_RES_EV_REMOVED), RDP_RES_RELEASED);
	EXPECT_EQ(WALK(RDP_RES_LISTEN_RETRY, RDP_RES_EV_REMOVED), RDP_RES_RELEASED);

	/* What a leaving resource must never do again: listen, handshake, wait for a path. */
	for (enum rdp_res_state s = RDP_RES_RETIRING; s <= RDP_RES_RELEASED; s++) {
		EXPECT_TRUE(rdp_res_state_leaving(s));
		EXPECT_EQ(rdp_res_next(s, RDP_RES_EV_LISTENING, &to), -EINVAL);
		EXPECT_EQ(rdp_res_next(s, RDP_RES_EV_LISTEN_FAILED, &to), -EINVAL);
		EXPECT_EQ(rdp_res_next(s, RDP_RES_EV_HANDSHAKE, &to), -EINVAL);
		EXPECT_EQ(rdp_res_next(s, RDP_RES_EV_PATH_BUSY, &to), -EINVAL);
	}
	/* A released resource stays released whatever kubelet says late. */
	for (enum rdp_res_event e = RDP_RES_EV_ACCEPTED; e <= RDP_RES_EV_EXPIRED; e++)
		EXPECT_EQ(rdp_res_next(RDP_RES_RELEASED, e, &to), -EINVAL);
	/* No answer without a socket. */
	EXPECT_EQ(rdp_res_next(RDP_RES_IDLE, RDP_RES_EV_ACCEPTED, &to), -EINVAL);
	EXPECT_EQ(rdp_res_next(RDP_RES_WAITING, RDP_RES_EV_HANDSHAKE, &to), -EINVAL);
	/* A refused event leaves *to alone. */
	to = RDP_RES_WAITING;
	EXPECT_EQ(rdp_res_next(RDP_RES_IDLE, RDP_RES_EV_EXPIRED, &to), -EINVAL);
	EXPECT_EQ(to, RDP_RES_WAITING);
	/* Stop from anywhere; out-of-range input refused. */
	for (enum rdp_res_state s = 0; s < RDP_RES_N_STATES; s++) {
		EXPECT_EQ(rdp_res_next(s, RDP_RES_EV_STOP, &to), 0);
		EXPECT_EQ(to, RDP_RES_IDLE);
		EXPECT_TRUE(rdp_res_state_name(s)[0] != '\0');
		EXPECT_EQ(rdp_res_state_serving(s), s == RDP_RES_ANNOUNCED ||
							    s == RDP_RES_HANDSHAKE ||
							    s == RDP_RES_REGISTERED ||
							    s == RDP_RES_RETIRING);
	}
	EXPECT_EQ(rdp_res_next(RDP_RES_N_STATES, RDP_RES_EV_STOP, &to), -EINVAL);
	EXPECT_EQ(rdp_res_next(RDP_RES_IDLE, RDP_RES_N_EVENTS, &to), -EINVAL);
	EXPECT_STREQ(rdp_res_state_name(RDP_RES_N_STATES), "invalid");
	EXPECT_STREQ(rdp_res_event_name(RDP_RES_EV_REMOVED), "removed");
	return test_summary("test-lifecycle");
}
