/* SPDX-License-Identifier: MIT */
/*
 * A small HTTP/1.1 server for the daemon's GET endpoints (/metrics, /healthz, /readyz), on the
 * daemon's own event loop. Requests are parsed by Node's http-parser (libhttp_parser.a, linked
 * statically); this module adds the socket I/O, the limits and the answers.
 *
 * Only GET and HEAD of the paths registered with rdp_http_server_add_path() reach the handler;
 * everything else is answered here:
 *   404 unknown path (the connection stays open)
 *   405 another method (with "Allow: GET, HEAD")
 *   400 malformed request, Transfer-Encoding on a request, a target without a path
 *   408 the request's headers did not arrive within request_timeout
 *   413 a request body (Content-Length > 0)
 *   414 the URL is longer than max_url
 *   417 any Expect header (100-continue included: there is no body to continue with)
 *   429 over the request rate, the server's or the path's own (with "Retry-After: N")
 *   431 request line + headers longer than max_header_bytes
 *   505 an HTTP version other than 1.x
 *   503 (on accept) max_connections already open
 * Every one but 404 closes the connection after its small text/plain body. Responses carry
 * Content-Type, Content-Length and "Cache-Control: no-store"; HEAD gets the same headers and
 * no body.
 *
 * One request at a time per connection: after a request is complete nothing more is read (nor
 * parsed) until its response is written, so pipelined requests queue in the socket, not here,
 * and a connection never holds more than one response. HTTP/1.1 keep-alive and HTTP/1.0
 * close semantics; "Connection: close" honoured; after max_requests_per_conn responses the
 * last one says "Connection: close".
 *
 * While a request is in the handler's hands the connection does not read; if the peer closes
 * (FIN or reset) meanwhile, the socket is closed at once and the response will be dropped
 * (as nginx treats a client abort). The connection still counts against max_connections until
 * rdp_http_respond() is called, so the handler's pending work is bounded by that cap.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct rdp_event;
struct rdp_http_server;
struct rdp_http_request;

/*
 * Every field 0 takes its default (rdp_http_limits_default()); none can be disabled.
 *
 * request_timeout runs from a connection's accept, or from the first byte of a later request,
 * to the end of that request's headers: a client trickling a header byte a second is answered
 * 408 and closed when it expires, a silent new connection closed without a word. idle_timeout
 * is the keep-alive wait for the next request after a response (Prometheus reuses its
 * connections; its scrape interval is 15 s to 1 min). write_timeout bounds writing one
 * response: a client that does not read it is closed.
 *
 * The rate is a token bucket shared by all connections: rate_per_sec requests a second,
 * rate_burst at once; a request over it is answered 429 and closed. A path may have a bucket
 * of its own (rdp_http_server_add_path_rate()).
 */
struct rdp_http_limits {
	size_t max_connections;          /* default 16 */
	size_t max_per_client;           /* of one client address (IP); default 8 */
	size_t max_header_bytes;         /* request line + headers; default 8 KiB, at most 64 KiB */
	size_t max_url;                  /* default 2 KiB (at most max_header_bytes) */
	uint32_t max_requests_per_conn;  /* default 1000 */
	uint32_t rate_per_sec;           /* default 20 */
	uint32_t rate_burst;             /* default 40 */
	uint64_t request_timeout_usec;   /* default 5 s */
	uint64_t idle_timeout_usec;      /* default 60 s */
	uint64_t write_timeout_usec;     /* default 10 s */
};

void rdp_http_limits_default(struct rdp_http_limits *l);

/* What the server did, for the daemon's own metrics (counters since creation). */
struct rdp_http_stats {
	uint64_t accepted;          /* connections taken (not counting rejected_full) */
	uint64_t rejected_full;     /* connections answered 503 and closed: max_connections */
	uint64_t evicted;           /* closed for a newer one: waited longest without a request */
	uint64_t timeout_request;   /* request_timeout expired (408 or a silent close) */
	uint64_t timeout_idle;      /* keep-alive connections closed by idle_timeout */
	uint64_t timeout_write;     /* a response not read within write_timeout */
	uint64_t bad_requests;      /* answered 400, 405, 413, 414, 417 or 431 */
	uint64_t rate_limited;      /* answered 429 */
	uint64_t requests;          /* handed to the handler */
	uint64_t dropped;           /* responses dropped: the client had gone */
	uint64_t responses[6];      /* responses written by class: [2] = 2xx ... [5] = 5xx */
};

/*
 * Called on the loop for each GET or HEAD of a registered path. The handler must call
 * rdp_http_respond() exactly once for r, now or later (from the loop's thread).
 */
typedef void (*rdp_http_handler_cb)(struct rdp_http_request *r, void *userdata);

/*
 * Parses a listen address, numeric only (there is no DNS: the image has no resolver files):
 *   "0.0.0.0:9470", "127.0.0.1:0"       IPv4
 *   "[::1]:9470", "[::]:9470"           IPv6 (in brackets)
 *   ":9470"                             every address: [::] dual-stack (IPv4 0.0.0.0 where
 *                                       the host has no IPv6)
 * Port 0 asks the kernel for one. Returns 0, or -EINVAL with a one-line reason in err
 * ("missing port", "port out of range (0-65535)", "hostname not allowed: use an IP
 * address" ...). err may be NULL.
 */
int rdp_http_parse_address(const char *s, struct sockaddr_storage *ss, socklen_t *len,
			   char *err, size_t errlen);

/*
 * Listens on address (see rdp_http_parse_address(); a bad one is -EINVAL) with SO_REUSEADDR,
 * and serves on e. limits may be NULL for the defaults. Errors: -EINVAL, -EADDRINUSE,
 * -EACCES, -ENOMEM...
 */
int rdp_http_server_new(struct rdp_event *e, const char *address,
			const struct rdp_http_limits *limits, rdp_http_handler_cb cb,
			void *userdata, struct rdp_http_server **ret);
/* The same on a bound, listening TCP socket (owned from now on, also on failure). */
int rdp_http_server_new_fd(struct rdp_event *e, int listen_fd,
			   const struct rdp_http_limits *limits, rdp_http_handler_cb cb,
			   void *userdata, struct rdp_http_server **ret);
/*
 * Closes the listener and every connection. A request still in the handler's hands stays
 * valid: rdp_http_respond() must still be called for it (it then only frees).
 * Do not call from inside the handler. Accepts NULL, returns NULL.
 */
struct rdp_http_server *rdp_http_server_free(struct rdp_http_server *s);

/* Serves path (exact match, e.g. "/metrics"); at most 16 paths. -EINVAL, -E2BIG, -ENOMEM. */
int rdp_http_server_add_path(struct rdp_http_server *s, const char *path);
/*
 * The same, with a token bucket of the path's own instead of the server's: its requests
 * neither draw on nor are refused by the server's bucket (e.g. kubelet's probes, which a
 * flood of scrapes must not fail, while scrapes keep the server's tighter rate).
 */
int rdp_http_server_add_path_rate(struct rdp_http_server *s, const char *path,
				  uint32_t rate_per_sec, uint32_t rate_burst);
/* The bound address, "127.0.0.1:34567" or "[::]:9470". -ENOBUFS if buf is too small. */
int rdp_http_server_local_address(const struct rdp_http_server *s, char *buf, size_t size);
/* Connections open (including those whose request waits for its response). */
size_t rdp_http_server_connections(const struct rdp_http_server *s);
const struct rdp_http_stats *rdp_http_server_stats(const struct rdp_http_server *s);

/* The request's path without its query string ("/metrics" for "/metrics?x=1"). */
const char *rdp_http_request_path(const struct rdp_http_request *r);
bool rdp_http_request_is_head(const struct rdp_http_request *r);

/*
 * Answers r and ends it (r is invalid afterwards). Takes body (freed with rdp_free, may be
 * NULL with len 0) whatever happens. content_type NULL means "text/plain; charset=utf-8".
 * Returns 0 when the response is queued, -ENOTCONN when the client had gone (the response is
 * dropped, nothing else to do), -EINVAL for a status outside 100-599 or a content type with
 * control characters (the client then gets a 500).
 */
int rdp_http_respond(struct rdp_http_request *r, int status, const char *content_type,
		     char *body, size_t len);
