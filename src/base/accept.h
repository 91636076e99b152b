/* SPDX-License-Identifier: MIT */
/*
 * One accept loop for the daemons' listeners (issue 18): the HTTP server (metrics, probes) and
 * the gRPC server (kubelet's sockets) differ only in what a connection they cannot take gets,
 * which is the caller's take() to decide.
 *
 * Library code: negative errno, never logs.
 */
#pragma once
#include <sys/socket.h>

/* Connections taken per readiness event, so that one busy listener cannot starve the loop. */
#define RDP_ACCEPT_MAX_PER_EVENT 16

/*
 * take() owns fd (non-blocking, close-on-exec): it keeps the connection or closes it. peer is
 * the client's address (peer_len 0 when the kernel gave none, as for unix sockets).
 */
typedef void (*rdp_accept_cb)(int fd, const struct sockaddr *peer, socklen_t peer_len, void *ud);

/*
 * Accepts up to max connections waiting on listen_fd (non-blocking), each handed to take().
 * Returns 0 once the queue is empty (or max were taken), -errno for an error that is not
 * EAGAIN, EINTR or ECONNABORTED (EMFILE and friends: the caller records it, the loop goes on).
 */
int rdp_accept_some(int listen_fd, unsigned int max, rdp_accept_cb take, void *ud);
