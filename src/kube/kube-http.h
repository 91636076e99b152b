/* SPDX-License-Identifier: MIT */
/*
 * The HTTP/1.1 side of the API-server client, without the transport: a request rendered to
 * bytes, and a response parsed from bytes by http-parser (HTTP_RESPONSE mode; chunked bodies,
 * Content-Length and read-until-close bodies). kube-client.c moves the bytes over TLS; the
 * fuzz target feeds arbitrary bytes here directly.
 *
 * Bounds: the response's headers (RDP_KUBE_HTTP_HEADERS_MAX bytes of names and values), its
 * body (the caller's max, RDP_KUBE_BODY_MAX in the client: -E2BIG beyond, also as soon as a
 * Content-Length says so), the request's path and token (no CR, LF or other control
 * character: -EINVAL, so nothing can smuggle a header).
 *
 * Library code: negative errno, no logging.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define RDP_KUBE_HTTP_HEADERS_MAX (64 * 1024)
#define RDP_KUBE_HTTP_PATH_MAX 8192
#define RDP_KUBE_RETRY_AFTER_MAX 3600 /* seconds; a larger Retry-After is taken as this */

enum rdp_kube_method {
	RDP_KUBE_GET,
	RDP_KUBE_POST,
	RDP_KUBE_PUT,
	RDP_KUBE_PATCH, /* sent as application/merge-patch+json */
	RDP_KUBE_DELETE,
	/* PATCH sent as application/apply-patch+yaml (server-side apply; JSON is YAML): the
	 * path names ?fieldManager= (and force=true to take fields from other managers) */
	RDP_KUBE_APPLY,
};

const char *rdp_kube_method_name(enum rdp_kube_method m);

/* One response. */
struct rdp_kube_response {
	int status; /* 200, 404... */
	char *body; /* NUL-terminated (a body may hold NULs: use body_len); never NULL */
	size_t body_len;
	int retry_after; /* seconds of a delta-seconds Retry-After, else -1 */
};

/* Frees what resp holds and zeroes it (retry_after -1). */
void rdp_kube_response_done(struct rdp_kube_response *resp);

/*
 * The bytes of one request: "METHOD path HTTP/1.1", Host, User-Agent rdma-dp/<version>,
 * Authorization: Bearer <token> (none when token is NULL), Accept: application/json, and with
 * a body (may be NULL) Content-Type and Content-Length. -EINVAL for a path that does not
 * start with '/' or holds a control character or space, or a token with one.
 */
int rdp_kube_http_render(enum rdp_kube_method m, const char *host, const char *path,
			 const char *token, const char *body, char **ret, size_t *ret_len);

struct rdp_kube_http_parser;

int rdp_kube_http_parser_new(size_t max_body, struct rdp_kube_http_parser **ret);
void rdp_kube_http_parser_free(struct rdp_kube_http_parser *p);

/*
 * Feeds len bytes (len 0 means the peer closed). Returns 1 when the response is complete
 * (bytes after it are not taken: see rdp_kube_http_parser_reusable()), 0 when more is
 * needed, -E2BIG over a bound, -EPROTO for bytes that are not an HTTP/1.x response or a
 * close before the end, -ENOMEM. After a non-zero result, further feeds return it again.
 */
int rdp_kube_http_parser_feed(struct rdp_kube_http_parser *p, const char *buf, size_t len);

/*
 * Stream mode (a watch): the body of a 2xx response is handed to cb(userdata, bytes, len) as
 * it comes instead of being kept (the body bound then does not apply: the caller bounds what
 * it keeps); any other status is kept as usual. cb returns 0 for more, 1 to end the response
 * there (feed returns 1, the connection is not reusable), or a negative errno, which feed
 * returns. Set before the first feed.
 */
typedef int (*rdp_kube_http_stream_cb)(void *userdata, const char *buf, size_t len);
void rdp_kube_http_parser_set_stream(struct rdp_kube_http_parser *p, rdp_kube_http_stream_cb cb,
				     void *userdata);

/* Whether any byte was fed (a failure before any byte on a reused connection is retried). */
bool rdp_kube_http_parser_started(const struct rdp_kube_http_parser *p);

/*
 * After a complete response: true when the connection may carry the next request
 * (HTTP/1.1 without "Connection: close", a body delimited by length or chunks, no extra byte).
 */
bool rdp_kube_http_parser_reusable(const struct rdp_kube_http_parser *p);

/* Moves the complete response to *ret (rdp_kube_response_done() frees it). 0 or -ENOMEM. */
int rdp_kube_http_parser_take(struct rdp_kube_http_parser *p, struct rdp_kube_response *ret);
