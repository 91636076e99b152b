/* SPDX-License-Identifier: MIT */
/*
 * gRPC over HTTP/2 (h2c with prior knowledge on AF_UNIX sockets), as kubelet's grpc-go
 * speaks it, on top of h2.[ch] (nghttp2 sessions driven from memory buffers) and event.[ch].
 *
 * Server: one listening unix socket, a table of methods; unary and server-streaming calls.
 * Client: asynchronous unary calls (kubelet's Registration.Register), so the loop keeps
 * serving while the call is in flight.
 *
 * Every limit a peer controls is bounded (see struct rdp_grpc_limits); exceeding one ends the
 * stream or the connection cleanly, never the daemon.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rdp_event;
struct ProtobufCMessage;

enum rdp_grpc_code {
	RDP_GRPC_OK = 0,
	RDP_GRPC_CANCELLED = 1,
	RDP_GRPC_UNKNOWN = 2,
	RDP_GRPC_INVALID_ARGUMENT = 3,
	RDP_GRPC_DEADLINE_EXCEEDED = 4,
	RDP_GRPC_NOT_FOUND = 5,
	RDP_GRPC_RESOURCE_EXHAUSTED = 8,
	RDP_GRPC_FAILED_PRECONDITION = 9,
	RDP_GRPC_UNIMPLEMENTED = 12,
	RDP_GRPC_INTERNAL = 13,
	RDP_GRPC_UNAVAILABLE = 14,
};

/*
 * The defaults fit the device plugin API: kubelet's requests are a few KiB (a few hundred
 * unit IDs at most), so 256 KiB leaves room and bounds what a hostile local peer makes us
 * hold. A request above max_message is answered RESOURCE_EXHAUSTED ("grpc: received message
 * larger than max (N vs. M)", as grpc-go) as soon as its length prefix announces it; nothing
 * beyond the prefix is buffered.
 *
 * max_buffered bounds what all connections of one server hold for requests at once: every
 * open call is charged a fixed cost plus its header strings plus the request bytes received
 * and not yet handled. A new stream over the budget is refused (RST_STREAM REFUSED_STREAM,
 * which grpc-go clients retry); a request whose DATA would exceed it is answered
 * RESOURCE_EXHAUSTED.
 *
 * Timeouts (CLOCK_MONOTONIC; 0 disables): the client preface and SETTINGS must arrive within
 * handshake_timeout of accept; a connection that moves no byte in either direction for
 * idle_timeout is closed, unless all it has open are server-streaming calls with nothing
 * left to write (kubelet's ListAndWatch stays open for days, silent between updates). With
 * no stream open (kubelet keeps its connection between Allocate calls) the idle timeout
 * applies; kubelet redials on the next call. grpc-go servers default to no idle timeout;
 * 5 minutes is generous for a local peer. Closing is immediate: a GOAWAY is attempted
 * without waiting for the peer to read it.
 */
struct rdp_grpc_limits {
	size_t max_message;          /* request message bytes; default 256 KiB */
	size_t max_send_message;     /* response message bytes; default 4 MiB */
	size_t max_connections;      /* per server; default 32 (kubelet uses one) */
	uint32_t max_streams;        /* concurrent streams per connection; default 100 */
	size_t max_header_list;      /* bytes of one header list; default 16 KiB */
	size_t max_output;           /* buffered output per connection before backpressure;
					default 16 KiB */
	size_t max_buffered;         /* request state held by all connections; default 512 KiB */
	uint64_t handshake_timeout_usec; /* default 10 s */
	uint64_t idle_timeout_usec;      /* default 5 min */
};

/* Fills l with the defaults above. */
void rdp_grpc_limits_default(struct rdp_grpc_limits *l);

struct rdp_grpc_server;
struct rdp_grpc_call;

struct rdp_grpc_method {
	const char *path; /* "/v1beta1.DevicePlugin/Allocate" */
	/*
	 * Called once the complete request message has arrived (the client's END_STREAM seen
	 * for unary methods; the first message for server-streaming ones). req is only valid
	 * during the call. The handler must end a unary call with rdp_grpc_call_reply() or
	 * rdp_grpc_call_fail(), now or later; a streaming handler keeps the call and sends
	 * with rdp_grpc_call_send() until it ends it or the peer goes away.
	 */
	void (*handler)(struct rdp_grpc_call *call, const uint8_t *req, size_t len,
			void *userdata);
	/* True for server-streaming methods (ListAndWatch); false (the default) for unary. */
	bool server_streaming;
};

/*
 * Listens on the unix socket path (a stale socket file there is unlinked first; a non-socket
 * file is -EEXIST) and serves methods[0..n-1]. methods must outlive the server. limits may
 * be NULL for defaults. Unknown paths get UNIMPLEMENTED.
 * path may be NULL: no listener, only memory connections (tests, fuzzers; see below).
 * Do not free the server from inside one of its handlers or close callbacks (use a defer
 * source of the loop).
 */
int rdp_grpc_server_new(struct rdp_event *e, const char *path, const struct rdp_grpc_method *methods,
			size_t n_methods, const struct rdp_grpc_limits *limits, void *userdata,
			struct rdp_grpc_server **ret);
/*
 * Closes every connection (GOAWAY first; streaming calls see their close callback), the
 * listener, and unlinks the socket file only if it is still the one this server created.
 * Accepts NULL, returns NULL.
 */
struct rdp_grpc_server *rdp_grpc_server_free(struct rdp_grpc_server *s);
/* True while the socket file at the server's path is still the one it created. */
bool rdp_grpc_server_socket_present(const struct rdp_grpc_server *s);
const char *rdp_grpc_server_path(const struct rdp_grpc_server *s);
size_t rdp_grpc_server_connections(const struct rdp_grpc_server *s);
/*
 * Tests and fuzzers: a server connection without a socket. Feed the client's bytes with
 * rdp_h2_feed() and read the answer with rdp_h2_output()/rdp_h2_consume() (h2.h). It lives
 * until the server is freed, also after the session ended (rdp_h2_is_closed()).
 */
struct rdp_h2;
int rdp_grpc_server_add_memory_conn(struct rdp_grpc_server *s, struct rdp_h2 **ret);

/* Unary: send msg then OK trailers; ends the call. */
int rdp_grpc_call_reply(struct rdp_grpc_call *c, const uint8_t *msg, size_t len);
/* Same, packing a protobuf-c message. */
int rdp_grpc_call_reply_pb(struct rdp_grpc_call *c, const struct ProtobufCMessage *msg);
/*
 * Streaming: queue one message, the stream stays open. When the peer does not read, queued
 * messages not yet started are replaced by the newest (snapshots coalesce), so memory stays
 * bounded.
 */
int rdp_grpc_call_send(struct rdp_grpc_call *c, const uint8_t *msg, size_t len);
int rdp_grpc_call_send_pb(struct rdp_grpc_call *c, const struct ProtobufCMessage *msg);
/*
 * Ends the call with a status (trailers, or trailers-only if nothing was sent yet); message
 * is percent-encoded on the wire. The call is freed once written; do not use it after.
 */
int rdp_grpc_call_fail(struct rdp_grpc_call *c, enum rdp_grpc_code code, const char *message);
/*
 * Called once if the call ends for any reason other than the handler ending it: peer reset
 * (CANCEL), connection closed/GOAWAY, server freed, grpc-timeout expiry. The call is freed
 * right after the callback returns.
 */
void rdp_grpc_call_set_close_cb(struct rdp_grpc_call *c,
				void (*cb)(struct rdp_grpc_call *c, void *userdata), void *userdata);
const char *rdp_grpc_call_path(const struct rdp_grpc_call *c);
/* A number unique within the process, for logs. */
uint64_t rdp_grpc_call_id(const struct rdp_grpc_call *c);

/*
 * Client: one unary call on a new connection to the unix socket at path, with :authority
 * "localhost". cb gets the gRPC status and, on OK, the response message; it is called exactly
 * once unless the call is cancelled first. The connection is closed (GOAWAY) after the
 * answer. timeout_usec 0 means none; otherwise grpc-timeout is sent and enforced locally
 * (DEADLINE_EXCEEDED). A socket that cannot be connected (ENOENT, ECONNREFUSED...) fails
 * synchronously with the negative errno and no callback.
 */
struct rdp_grpc_client_call;
typedef void (*rdp_grpc_client_cb)(enum rdp_grpc_code code, const char *message,
				   const uint8_t *resp, size_t len, void *userdata);
int rdp_grpc_unary_call(struct rdp_event *e, const char *path, const char *method,
			const uint8_t *req, size_t len, uint64_t timeout_usec, rdp_grpc_client_cb cb,
			void *userdata, struct rdp_grpc_client_call **ret);
/*
 * Cancels (RST_STREAM CANCEL) and frees; no callback follows. Accepts NULL, returns NULL.
 * Once cb has run the call is gone: do not cancel it then (from inside cb it is a no-op).
 */
struct rdp_grpc_client_call *rdp_grpc_client_call_cancel(struct rdp_grpc_client_call *c);

/* Human-readable name of a status code ("INVALID_ARGUMENT"). */
const char *rdp_grpc_code_name(enum rdp_grpc_code code);
