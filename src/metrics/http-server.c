/* SPDX-License-Identifier: MIT */
/*
 * HTTP/1.1 GET server on the event loop; see http-server.h. http-parser does the parsing;
 * this file owns the sockets, the per-connection state machine, the limits and the answers.
 *
 * Connection lifecycle (conn_set_state() is the one place states change):
 *   READING  -> HANDLER (a complete request of a served path went to the handler)
 *   READING  -> WRITING (answered here: 404, an error, 408 at the request deadline)
 *   HANDLER  -> WRITING (rdp_http_respond)
 *   HANDLER  -> GONE    (peer closed or server freed: socket closed, respond will free)
 *   WRITING  -> READING (keep-alive: back to the next request, maybe already buffered)
 *   any      -> closed  (socket conns are freed; memory conns wait in CLOSED for their owner)
 */
#define _GNU_SOURCE
#include "http-server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <unistd.h>

#include <http_parser.h>

#include "errmsg.h"
#include "event.h"
#include "http-server-internal.h"
#include "macro.h"

#define IN_BUF_SIZE 4096
#define MAX_PATHS 16
#define LISTEN_BACKLOG 32
#define MICRO 1000000ULL
#define MAX_ACCEPT_PER_EVENT 16

enum conn_state {
	CONN_READING,
	CONN_HANDLER,
	CONN_WRITING,
	CONN_GONE,   /* socket closed while the handler holds the request */
	CONN_CLOSED, /* memory conns only: closed, the owner frees */
};

enum timer_kind {
	TIMER_NONE,
	TIMER_REQUEST, /* accept or first byte -> end of headers */
	TIMER_IDLE,    /* keep-alive wait for the next request */
	TIMER_WRITE,   /* one response */
};

struct conn;

struct rdp_http_request {
	struct conn *conn;
	const char *path;
	bool head;
};

/* A token bucket. */
struct rate {
	uint64_t tokens; /* micro-tokens */
	uint64_t ts;
	uint32_t per_sec, burst;
};

struct conn {
	struct rdp_http_server *server; /* NULL once detached (server freed, owner let go) */
	struct conn *prev, *next;
	enum conn_state state;
	enum timer_kind timer_kind;
	int fd; /* -1 for memory conns and once closed */
	bool memory;
	bool owner_gone; /* memory conn its owner freed while the handler holds it */
	struct rdp_event_source *io, *timer;
	const struct rate *refused_by; /* the bucket the last request drew on */

	struct sockaddr_storage peer; /* the client (peer_len 0: unknown, memory conns) */
	socklen_t peer_len;
	uint64_t waiting_since; /* accepted, or its last response written: a request is due */

	http_parser parser;
	/* the request being parsed */
	bool started;      /* a byte of it arrived */
	bool headers_done; /* its headers are complete */
	bool in_field;
	bool field_long;
	bool expect;
	bool keep_alive;
	int reject; /* status decided inside a parser callback */
	size_t hdr_bytes;
	char field[16];
	size_t field_len;
	char *url; /* max_url + 1 */
	size_t url_len;
	uint32_t n_requests;
	struct rdp_http_request req;

	char in[IN_BUF_SIZE];
	size_t in_off, in_len;

	/* the one response being written: hdr, then body */
	char hdr[512];
	size_t hdr_len;
	char *body;
	bool body_owned;
	size_t body_len; /* bytes of body to write (0 for HEAD) */
	size_t out_off;
	bool close_after;
};

struct rdp_http_server {
	struct rdp_event *e;
	int listen_fd;
	struct rdp_event_source *listen_src;
	struct rdp_http_limits limits;
	rdp_http_handler_cb cb;
	void *userdata;
	char *paths[MAX_PATHS];
	struct rate *path_rate[MAX_PATHS]; /* a path's own bucket; NULL: the server's */
	size_t n_paths;
	struct conn *conns;
	size_t n_conns;
	struct rate rate; /* the server's bucket: limits.rate_per_sec, rate_burst */
	struct rdp_http_stats stats;
};

void rdp_http_limits_default(struct rdp_http_limits *l)
{
	*l = (struct rdp_http_limits){
		.max_connections = 16,
		.max_per_client = 8,
		.max_header_bytes = 8192,
		.max_url = 2048,
		.max_requests_per_conn = 1000,
		.rate_per_sec = 20,
		.rate_burst = 40,
		.request_timeout_usec = 5 * MICRO,
		.idle_timeout_usec = 60 * MICRO,
		.write_timeout_usec = 10 * MICRO,
	};
}

static void limits_normalize(struct rdp_http_limits *l, const struct rdp_http_limits *in)
{
	struct rdp_http_limits d;

	rdp_http_limits_default(&d);
	if (!in) {
		*l = d;
		return;
	}
	*l = *in;
#define DEF(f)                                                                                     \
	do {                                                                                       \
		if (!l->f)                                                                         \
			l->f = d.f;                                                                \
	} while (0)
	DEF(max_connections);
	DEF(max_per_client);
	DEF(max_header_bytes);
	DEF(max_url);
	DEF(max_requests_per_conn);
	DEF(rate_per_sec);
	DEF(rate_burst);
	DEF(request_timeout_usec);
	DEF(idle_timeout_usec);
	DEF(write_timeout_usec);
#undef DEF
	if (l->max_header_bytes > 65536)
		l->max_header_bytes = 65536;
	if (l->max_header_bytes < 64)
		l->max_header_bytes = 64;
	if (l->max_url > l->max_header_bytes)
		l->max_url = l->max_header_bytes;
	if (l->rate_burst > 1000000)
		l->rate_burst = 1000000;
	if (l->rate_per_sec > 1000000)
		l->rate_per_sec = 1000000;
}

/* ---- addresses ---- */


static bool all_digits(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]))
			return false;
	return n > 0;
}

int rdp_http_parse_address(const char *s, struct sockaddr_storage *ss, socklen_t *len,
			   char *err, size_t errlen)
{
	const char *host, *port, *colon;
	char hbuf[INET6_ADDRSTRLEN + 1];
	size_t hostlen, portlen, i;
	unsigned long pnum = 0;
	bool v6 = false;

	if (err && errlen)
		err[0] = '\0';
	if (!s || !ss || !len)
		return -EINVAL;
	if (!*s)
		return rdp_errmsg(err, errlen, -EINVAL,
				  "empty address: expected IP:PORT, [IPv6]:PORT or :PORT");
	if (s[0] == '[') {
		const char *close = strchr(s, ']');

		if (!close)
			return rdp_errmsg(err, errlen, -EINVAL,
					  "missing ']' after the IPv6 address");
		host = s + 1;
		hostlen = (size_t)(close - host);
		if (!close[1])
			return rdp_errmsg(err, errlen, -EINVAL,
					  "missing port: use [IPv6]:PORT, e.g. [::1]:9470");
		if (close[1] != ':')
			return rdp_errmsg(err, errlen, -EINVAL, "expected ':PORT' after ']'");
		if (!hostlen)
			return rdp_errmsg(err, errlen, -EINVAL, "empty IPv6 address in []");
		port = close + 2;
		v6 = true;
	} else {
		colon = strrchr(s, ':');
		if (!colon) {
			struct in_addr a4;

			if (all_digits(s, strlen(s)))
				return rdp_errmsg(
					err, errlen, -EINVAL,
					"missing ':' before the port (':%s' listens on every "
					"address)",
					s);
			if (strlen(s) < sizeof(hbuf) && inet_pton(AF_INET, s, &a4) == 1)
				return rdp_errmsg(err, errlen, -EINVAL, "missing port: use %s:PORT",
						  s);
			return rdp_errmsg(
				err, errlen, -EINVAL,
				"hostname not allowed: use an IP address (e.g. 127.0.0.1:9470, "
				"[::1]:9470 or :9470)");
		}
		if (strchr(s, ':') != colon)
			return rdp_errmsg(
				err, errlen, -EINVAL,
				"an IPv6 address needs brackets: [IPv6]:PORT, e.g. [::1]:9470");
		host = s;
		hostlen = (size_t)(colon - s);
		port = colon + 1;
	}
	portlen = strlen(port);
	if (!portlen)
		return rdp_errmsg(err, errlen, -EINVAL, "missing port after ':'");
	if (!all_digits(port, portlen))
		return rdp_errmsg(err, errlen, -EINVAL, "port is not a number: '%s'", port);
	for (i = 0; i < portlen && pnum <= 65535; i++)
		pnum = pnum * 10 + (unsigned long)(port[i] - '0');
	if (pnum > 65535)
		return rdp_errmsg(err, errlen, -EINVAL, "port out of range (0-65535): %s", port);

	memset(ss, 0, sizeof(*ss));
	if (!hostlen) { /* ":PORT": every address, IPv6 dual-stack (IPv4 fallback at bind) */
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_any;
		a->sin6_port = htons((uint16_t)pnum);
		*len = sizeof(*a);
		return 0;
	}
	if (hostlen >= sizeof(hbuf)) {
		if (v6)
			return rdp_errmsg(err, errlen, -EINVAL, "not an IPv6 address (too long)");
		return rdp_errmsg(err, errlen, -EINVAL,
				  "hostname not allowed: use an IP address (e.g. 127.0.0.1:%lu)",
				  pnum);
	}
	memcpy(hbuf, host, hostlen);
	hbuf[hostlen] = '\0';
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		if (strchr(hbuf, '%'))
			return rdp_errmsg(err, errlen, -EINVAL,
					  "IPv6 zone indexes are not supported: %s", hbuf);
		if (inet_pton(AF_INET6, hbuf, &a->sin6_addr) != 1)
			return rdp_errmsg(err, errlen, -EINVAL, "not an IPv6 address: %s", hbuf);
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)pnum);
		*len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		if (inet_pton(AF_INET, hbuf, &a->sin_addr) != 1) {
			if (strspn(hbuf, "0123456789.") == hostlen)
				return rdp_errmsg(err, errlen, -EINVAL, "not an IPv4 address: %s",
						  hbuf);
			return rdp_errmsg(err, errlen, -EINVAL,
					  "hostname not allowed: use an IP address (e.g. "
					  "127.0.0.1:%lu, [::1]:%lu or :%lu)",
					  pnum, pnum, pnum);
		}
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)pnum);
		*len = sizeof(*a);
	}
	return 0;
}

/* ---- connections ---- */

static const http_parser_settings parser_settings;
static void conn_parse(struct conn *c);
static void conn_close(struct conn *c);

static uint32_t state_events(enum conn_state st)
{
	switch (st) {
	case CONN_READING:
		return EPOLLIN | EPOLLRDHUP;
	case CONN_HANDLER:
		return EPOLLRDHUP; /* only to notice the client going away */
	case CONN_WRITING:
		return EPOLLOUT;
	default:
		return 0;
	}
}

static void conn_set_timer(struct conn *c, enum timer_kind kind)
{
	const struct rdp_http_limits *l;
	uint64_t usec = 0;

	c->timer_kind = kind;
	if (!c->timer || !c->server)
		return;
	l = &c->server->limits;
	switch (kind) {
	case TIMER_REQUEST:
		usec = l->request_timeout_usec;
		break;
	case TIMER_IDLE:
		usec = l->idle_timeout_usec;
		break;
	case TIMER_WRITE:
		usec = l->write_timeout_usec;
		break;
	case TIMER_NONE:
		break;
	}
	(void)rdp_event_source_set_timer(c->timer, usec);
}

/* The one place a connection changes state (but closing: conn_close). */
static void conn_set_state(struct conn *c, enum conn_state st)
{
	c->state = st;
	if (c->io)
		(void)rdp_event_source_set_io_events(c->io, state_events(st));
	switch (st) {
	case CONN_READING:
		/* a new request: its bytes may already be here (pipelined) */
		c->req.head = false;
		c->hdr_bytes = 0;
		c->headers_done = false;
		c->started = c->in_len > 0;
		conn_set_timer(c, c->started || !c->n_requests ? TIMER_REQUEST : TIMER_IDLE);
		break;
	case CONN_WRITING:
		conn_set_timer(c, TIMER_WRITE);
		break;
	default:
		conn_set_timer(c, TIMER_NONE);
		break;
	}
}

static void conn_unlink(struct conn *c)
{
	struct rdp_http_server *s = c->server;

	if (!s)
		return;
	if (c->prev)
		c->prev->next = c->next;
	else
		s->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	c->prev = c->next = NULL;
	s->n_conns--;
	c->server = NULL;
}

static void conn_drop_body(struct conn *c)
{
	if (c->body_owned)
		rdp_free(c->body);
	c->body = NULL;
	c->body_owned = false;
	c->body_len = c->hdr_len = c->out_off = 0;
}

static void conn_free(struct conn *c)
{
	conn_unlink(c);
	c->io = rdp_event_source_free(c->io);
	c->timer = rdp_event_source_free(c->timer);
	if (c->fd >= 0)
		close(c->fd);
	conn_drop_body(c);
	rdp_free(c->url);
	rdp_free(c);
}

/*
 * Releases the socket. Bytes the client sent and we never read are drained first (a few
 * reads), so that closing does not turn into a reset that destroys our last response
 * before the client reads it.
 */
static void conn_close_socket(struct conn *c)
{
	c->io = rdp_event_source_free(c->io);
	c->timer = rdp_event_source_free(c->timer);
	c->timer_kind = TIMER_NONE;
	if (c->fd >= 0) {
		char sink[1024];
		int i;

		(void)shutdown(c->fd, SHUT_WR);
		for (i = 0; i < 8; i++)
			if (recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
				break;
		close(c->fd);
		c->fd = -1;
	}
}

static void conn_close(struct conn *c)
{
	conn_close_socket(c);
	conn_drop_body(c);
	if (c->state == CONN_HANDLER || c->state == CONN_GONE) {
		c->state = CONN_GONE; /* rdp_http_respond() frees */
		return;
	}
	if (c->memory && !c->owner_gone) {
		c->state = CONN_CLOSED;
		return;
	}
	conn_free(c);
}

static bool status_valid(int status)
{
	return status >= 100 && status <= 599;
}

static bool ctype_valid(const char *t)
{
	size_t i;

	for (i = 0; t[i]; i++)
		if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
			return false;
	return i > 0 && i < 128;
}

/*
 * Queues the response (status line and headers now, the body as given) and moves to
 * WRITING; the loop writes it. extra is one more header line with its CRLF, or "".
 */
static void conn_queue(struct conn *c, int status, const char *ctype, char *body, bool owned,
		       size_t len, const char *extra)
{
	struct rdp_http_server *s = c->server;
	const char *conn_hdr = "";
	int n;

	if (c->n_requests >= s->limits.max_requests_per_conn || !c->keep_alive)
		c->close_after = true;
	if (c->close_after)
		conn_hdr = "Connection: close\r\n";
	else if (c->parser.http_major == 1 && c->parser.http_minor == 0)
		conn_hdr = "Connection: keep-alive\r\n";
	n = snprintf(c->hdr, sizeof(c->hdr),
		     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
		     "Cache-Control: no-store\r\n%s%s\r\n",
		     status, http_status_str((enum http_status)status), ctype, len, extra,
		     conn_hdr);
	/* ctype is bounded by ctype_valid(): the headers always fit */
	c->hdr_len = n > 0 && (size_t)n < sizeof(c->hdr) ? (size_t)n : 0;
	c->body = body;
	c->body_owned = owned;
	c->body_len = c->req.head ? 0 : len;
	c->out_off = 0;
	s->stats.responses[status / 100]++;
	conn_set_state(c, CONN_WRITING);
}

/* Answers from here, with a small text body; every status but 404 closes. */
static void conn_answer(struct conn *c, int status)
{
	struct rdp_http_server *s = c->server;
	const char *body, *extra = "";
	char retry[48];

	switch (status) {
	case 404:
		body = "not found\n";
		break;
	case 405:
		body = "method not allowed: only GET and HEAD\n";
		extra = "Allow: GET, HEAD\r\n";
		break;
	case 408:
		body = "request timeout\n";
		break;
	case 413:
		body = "a request body is not accepted\n";
		break;
	case 414:
		body = "URI too long\n";
		break;
	case 417:
		body = "Expect is not supported\n";
		break;
	case 429: {
		/* the wait until the bucket holds a token again, whole seconds, at least 1 */
		const struct rate *r = c->refused_by ? c->refused_by : &s->rate;
		uint64_t missing = MICRO - (r->tokens < MICRO ? r->tokens : MICRO);
		uint64_t usec = (missing + r->per_sec - 1) / r->per_sec;
		unsigned long long sec = (usec + MICRO - 1) / MICRO;

		snprintf(retry, sizeof(retry), "Retry-After: %llu\r\n", sec ? sec : 1);
		extra = retry;
		body = "too many requests\n";
		break;
	}
	case 431:
		body = "request header fields too large\n";
		break;
	case 500:
		body = "internal server error\n";
		break;
	case 505:
		body = "only HTTP/1.x is served\n";
		break;
	default:
		status = 400;
		body = "bad request\n";
		break;
	}
	if (status != 404)
		c->close_after = true;
	if (status == 429)
		s->stats.rate_limited++;
	else if (status != 404 && status != 408 && status != 500 && status != 505)
		s->stats.bad_requests++;
	conn_queue(c, status, "text/plain; charset=utf-8", (char *)body, false, strlen(body),
		   extra);
}

static int status_for_parse_error(enum http_errno err)
{
	switch (err) {
	case HPE_HEADER_OVERFLOW:
		return 431;
	default:
		return 400;
	}
}

static void rate_init(struct rate *r, uint32_t per_sec, uint32_t burst)
{
	*r = (struct rate){.per_sec = per_sec, .burst = burst,
			   .tokens = (uint64_t)burst * MICRO, .ts = rdp_now_usec()};
}

/* A token bucket: true if a request may go now. */
static bool rate_take(struct rate *r)
{
	uint64_t now = rdp_now_usec(), cap = (uint64_t)r->burst * MICRO;
	uint64_t elapsed = now - r->ts;

	if (elapsed > cap / r->per_sec + 1)
		elapsed = cap / r->per_sec + 1;
	r->tokens += elapsed * r->per_sec;
	if (r->tokens > cap)
		r->tokens = cap;
	r->ts = now;
	if (r->tokens < MICRO)
		return false;
	r->tokens -= MICRO;
	return true;
}

/* Index of a served path, or -1. */
static ssize_t path_index(const struct rdp_http_server *s, const char *path)
{
	size_t i;

	for (i = 0; i < s->n_paths; i++)
		if (!strcmp(s->paths[i], path))
			return (ssize_t)i;
	return -1;
}

/* A complete request (the parser is paused at its end). */
static void conn_dispatch(struct conn *c)
{
	struct rdp_http_server *s = c->server;
	ssize_t idx;
	struct rate *r;

	c->n_requests++;
	c->req.conn = c;
	c->req.head = c->parser.method == HTTP_HEAD;
	c->req.path = c->url;
	idx = path_index(s, c->url);
	/* A path with a bucket of its own draws on it alone; the rest on the server's. */
	r = idx >= 0 && s->path_rate[idx] ? s->path_rate[idx] : &s->rate;
	c->refused_by = r;
	if (!rate_take(r)) {
		conn_answer(c, 429);
		return;
	}
	if (idx < 0) {
		conn_answer(c, 404);
		return;
	}
	conn_set_state(c, CONN_HANDLER);
	s->stats.requests++;
	if (s->cb)
		s->cb(&c->req, s->userdata);
	else
		(void)rdp_http_respond(&c->req, 500, NULL, NULL, 0);
}

/*
 * Feeds the buffered input to the parser while the connection reads. Before the end of the
 * headers at most max_header_bytes + 1 bytes of the request are given to it, so their size
 * is checked exactly whatever the chunking.
 */
static void conn_parse(struct conn *c)
{
	const struct rdp_http_limits *l = &c->server->limits;

	while (c->state == CONN_READING && c->in_len > 0) {
		size_t n, cap = c->in_len;
		bool was_done = c->headers_done;
		enum http_errno err;

		if (!c->headers_done && cap > l->max_header_bytes + 1 - c->hdr_bytes)
			cap = l->max_header_bytes + 1 - c->hdr_bytes;
		n = http_parser_execute(&c->parser, &parser_settings, c->in + c->in_off, cap);
		if (n > cap)
			n = cap;
		c->in_off += n;
		c->in_len -= n;
		if (!was_done) {
			/* the headers ended in this chunk, or not yet: either way it counts */
			c->hdr_bytes += n;
			if (c->hdr_bytes > l->max_header_bytes) {
				conn_answer(c, 431);
				break;
			}
		}
		err = HTTP_PARSER_ERRNO(&c->parser);
		if (err == HPE_PAUSED) {
			conn_dispatch(c);
			break;
		}
		if (err != HPE_OK) {
			conn_answer(c, c->reject ? c->reject : status_for_parse_error(err));
			break;
		}
		if (n == 0) { /* cannot happen with http-parser; never spin */
			conn_answer(c, 400);
			break;
		}
	}
	if (!c->in_len)
		c->in_off = 0;
}

/* Response written: next request, or close. */
static void conn_output_done(struct conn *c)
{
	conn_drop_body(c);
	if (c->close_after) {
		conn_close(c);
		return;
	}
	http_parser_pause(&c->parser, 0);
	c->waiting_since = rdp_now_usec();
	conn_set_state(c, CONN_READING);
	conn_parse(c);
}

static void conn_write(struct conn *c)
{
	while (c->state == CONN_WRITING) {
		struct iovec iov[2];
		struct msghdr mh = { .msg_iov = iov };
		size_t total = c->hdr_len + c->body_len;
		ssize_t w;

		if (c->out_off >= total) {
			conn_output_done(c);
			return;
		}
		if (c->out_off < c->hdr_len) {
			iov[0] = (struct iovec){ c->hdr + c->out_off, c->hdr_len - c->out_off };
			iov[1] = (struct iovec){ c->body, c->body_len };
			mh.msg_iovlen = c->body_len ? 2 : 1;
		} else {
			size_t off = c->out_off - c->hdr_len;

			iov[0] = (struct iovec){ c->body + off, c->body_len - off };
			mh.msg_iovlen = 1;
		}
		w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			conn_close(c); /* EPIPE, ECONNRESET: the client went */
			return;
		}
		c->out_off += (size_t)w;
	}
}

static void conn_read(struct conn *c)
{
	ssize_t n;

	if (c->in_len == 0)
		c->in_off = 0;
	if (c->in_off + c->in_len >= sizeof(c->in))
		return; /* cannot happen while reading: the parser took everything */
	n = recv(c->fd, c->in + c->in_off + c->in_len, sizeof(c->in) - c->in_off - c->in_len,
		 MSG_DONTWAIT);
	if (n < 0) {
		if (errno == EAGAIN || errno == EINTR)
			return;
		conn_close(c);
		return;
	}
	if (n == 0) { /* EOF: between requests or within one, nothing to answer */
		conn_close(c);
		return;
	}
	c->in_len += (size_t)n;
	if (!c->started) {
		/* a new connection's first deadline runs from accept already */
		c->started = true;
		if (c->timer_kind != TIMER_REQUEST)
			conn_set_timer(c, TIMER_REQUEST);
	}
	conn_parse(c);
}

static int conn_io(struct rdp_event_source *src, int fd, uint32_t revents, void *userdata)
{
	struct conn *c = userdata;

	switch (c->state) {
	case CONN_READING:
		conn_read(c);
		break;
	case CONN_HANDLER:
		if (revents & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			conn_close(c); /* -> GONE: the response will be dropped */
		break;
	case CONN_WRITING:
		conn_write(c);
		break;
	default:
		break;
	}
	return 0;
}

static int conn_timer(struct rdp_event_source *src, void *userdata)
{
	struct conn *c = userdata;
	struct rdp_http_server *s = c->server;

	if (!s)
		return 0;
	switch (c->timer_kind) {
	case TIMER_REQUEST:
		s->stats.timeout_request++;
		if (c->state == CONN_READING && c->started) {
			c->close_after = true;
			conn_answer(c, 408);
		} else {
			conn_close(c);
		}
		break;
	case TIMER_IDLE:
		s->stats.timeout_idle++;
		conn_close(c);
		break;
	case TIMER_WRITE:
		s->stats.timeout_write++;
		conn_close(c);
		break;
	case TIMER_NONE:
		break;
	}
	return 0;
}

static int conn_new(struct rdp_http_server *s, int fd, struct conn **ret)
{
	struct conn *c;
	int r = -ENOMEM;

	c = rdp_calloc(1, sizeof(*c));
	if (!c)
		goto fail_fd;
	c->fd = fd;
	c->memory = fd < 0;
	c->url = rdp_malloc(s->limits.max_url + 1);
	if (!c->url)
		goto fail;
	http_parser_init(&c->parser, HTTP_REQUEST);
	c->parser.data = c;
	c->keep_alive = true;
	if (fd >= 0) {
		r = rdp_event_add_timer(s->e, 0, conn_timer, c, &c->timer);
		if (r < 0)
			goto fail;
		r = rdp_event_add_io(s->e, fd, state_events(CONN_READING), conn_io, c, &c->io);
		if (r < 0)
			goto fail;
	}
	c->waiting_since = rdp_now_usec();
	c->server = s;
	c->next = s->conns;
	if (s->conns)
		s->conns->prev = c;
	s->conns = c;
	s->n_conns++;
	conn_set_state(c, CONN_READING);
	*ret = c;
	return 0;
fail:
	conn_free(c); /* closes fd */
	return r;
fail_fd:
	if (fd >= 0)
		close(fd);
	return r;
}

/* ---- parser callbacks ---- */

static int on_message_begin(http_parser *p)
{
	struct conn *c = p->data;

	c->url_len = 0;
	c->url[0] = '\0';
	c->expect = false;
	c->in_field = false;
	c->reject = 0;
	c->headers_done = false;
	return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
	struct conn *c = p->data;

	if (len > c->server->limits.max_url - c->url_len) {
		c->reject = 414;
		return -1;
	}
	memcpy(c->url + c->url_len, at, len);
	c->url_len += len;
	c->url[c->url_len] = '\0';
	return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
	struct conn *c = p->data;

	if (!c->in_field) {
		c->in_field = true;
		c->field_len = 0;
		c->field_long = false;
	}
	if (len > sizeof(c->field) - c->field_len) {
		c->field_long = true;
		return 0;
	}
	memcpy(c->field + c->field_len, at, len);
	c->field_len += len;
	return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
	struct conn *c = p->data;

	if (c->in_field) {
		c->in_field = false;
		if (!c->field_long && c->field_len == 6 && !strncasecmp(c->field, "expect", 6))
			c->expect = true;
	}
	return 0;
}

static int on_headers_complete(http_parser *p)
{
	struct conn *c = p->data;
	struct http_parser_url u;
	size_t off, len;

	c->headers_done = true;
	c->req.head = p->method == HTTP_HEAD; /* so that HEAD gets no body, errors included */
	if (p->http_major != 1)
		c->reject = 505;
	else if (p->method != HTTP_GET && p->method != HTTP_HEAD)
		c->reject = 405;
	else if (p->uses_transfer_encoding || (p->flags & F_CHUNKED))
		c->reject = 400;
	else if ((p->flags & F_CONTENTLENGTH) && p->content_length > 0)
		c->reject = 413;
	else if (c->expect)
		c->reject = 417;
	if (c->reject)
		return -1;
	/* origin-form "/metrics?x", or absolute-form "http://host/metrics": keep the path */
	http_parser_url_init(&u);
	if (http_parser_parse_url(c->url, c->url_len, 0, &u) != 0 ||
	    !(u.field_set & (1 << UF_PATH))) {
		c->reject = 400;
		return -1;
	}
	off = u.field_data[UF_PATH].off;
	len = u.field_data[UF_PATH].len;
	memmove(c->url, c->url + off, len);
	c->url[len] = '\0';
	c->url_len = len;
	return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
	struct conn *c = p->data;

	c->reject = 413; /* not reached: a body is refused at the end of the headers */
	return -1;
}

static int on_message_complete(http_parser *p)
{
	struct conn *c = p->data;

	/* an Upgrade request is answered as a plain one, and the connection ends there */
	c->keep_alive = http_should_keep_alive(p) && !p->upgrade;
	http_parser_pause(p, 1);
	return 0;
}

static const http_parser_settings parser_settings = {
	.on_message_begin = on_message_begin,
	.on_url = on_url,
	.on_header_field = on_header_field,
	.on_header_value = on_header_value,
	.on_headers_complete = on_headers_complete,
	.on_body = on_body,
	.on_message_complete = on_message_complete,
};

/* ---- the server ---- */

static void send_full(int fd)
{
	static const char resp[] = "HTTP/1.1 503 Service Unavailable\r\n"
				   "Content-Type: text/plain; charset=utf-8\r\n"
				   "Content-Length: 22\r\nCache-Control: no-store\r\n"
				   "Retry-After: 1\r\nConnection: close\r\n\r\n"
				   "too many connections\r\n";
	char sink[1024];
	int i;

	/* what the client sent already, so that close() is a FIN and not a reset */
	for (i = 0; i < 4; i++)
		if (recv(fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
			break;
	(void)send(fd, resp, sizeof(resp) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)shutdown(fd, SHUT_WR);
	close(fd);
}

/* The same host (the port aside): IPv4, IPv6; anything else is never the same. */
static bool same_host(const struct sockaddr_storage *a, socklen_t al,
		      const struct sockaddr_storage *b, socklen_t bl)
{
	if (!al || !bl || a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET)
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	if (a->ss_family == AF_INET6)
		return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			      &((const struct sockaddr_in6 *)b)->sin6_addr,
			      sizeof(struct in6_addr)) == 0;
	return false;
}

/*
 * The connection that has waited longest without a complete request (reading a request, or
 * idle between two), of the client peer when peer_len is set; NULL when every one is busy
 * (a handler or a response under way). *n_client gets how many the client has.
 */
static struct conn *oldest_waiting(struct rdp_http_server *s, const struct sockaddr_storage *peer,
				   socklen_t peer_len, size_t *n_client)
{
	struct conn *best = NULL;

	*n_client = 0;
	for (struct conn *c = s->conns; c; c = c->next) {
		if (c->memory)
			continue;
		if (peer_len) {
			if (!same_host(&c->peer, c->peer_len, peer, peer_len))
				continue;
			(*n_client)++;
		}
		if (c->state == CONN_READING && !c->headers_done &&
		    (!best || c->waiting_since < best->waiting_since))
			best = c;
	}
	return best;
}

/*
 * A client at its share (max_per_client) gives up its own connection that waited longest;
 * a full server, the one of all that waited longest; without one to give up (all busy),
 * the new connection gets 503. Connections that hold slots without sending a request so
 * cannot keep a scrape or a probe out.
 */
/* Closes victim to make room (true), or refuses cfd with 503 when there is none (false). */
static bool give_up(struct rdp_http_server *s, struct conn *victim, int cfd)
{
	if (!victim) {
		s->stats.rejected_full++;
		send_full(cfd);
		return false;
	}
	s->stats.evicted++;
	conn_close(victim);
	return true;
}

static void on_conn(int cfd, void *userdata)
{
	struct rdp_http_server *s = userdata;
	struct sockaddr_storage ss = {0};
	socklen_t peer_len = sizeof(ss);
	struct conn *c, *victim;
	size_t n;

	if (getpeername(cfd, (struct sockaddr *)&ss, &peer_len) < 0 || peer_len > sizeof(ss))
		peer_len = 0;
	victim = oldest_waiting(s, &ss, peer_len, &n);
	if (peer_len && n >= s->limits.max_per_client && !give_up(s, victim, cfd))
		return;
	if (s->n_conns >= s->limits.max_connections &&
	    !give_up(s, oldest_waiting(s, NULL, 0, &n), cfd))
		return;
	if (conn_new(s, cfd, &c) == 0) {
		c->peer = ss;
		c->peer_len = peer_len;
		s->stats.accepted++;
	}
}

static int on_accept(struct rdp_event_source *src, int fd, uint32_t revents, void *userdata)
{
	return rdp_accept_each(fd, MAX_ACCEPT_PER_EVENT, on_conn, userdata);
}

static int server_alloc(struct rdp_event *e, const struct rdp_http_limits *limits,
			rdp_http_handler_cb cb, void *userdata, struct rdp_http_server **ret)
{
	struct rdp_http_server *s = rdp_calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->e = e;
	s->listen_fd = -1;
	s->cb = cb;
	s->userdata = userdata;
	limits_normalize(&s->limits, limits);
	rate_init(&s->rate, s->limits.rate_per_sec, s->limits.rate_burst);
	*ret = s;
	return 0;
}

int rdp_http_server_new_fd(struct rdp_event *e, int listen_fd,
			   const struct rdp_http_limits *limits, rdp_http_handler_cb cb,
			   void *userdata, struct rdp_http_server **ret)
{
	struct rdp_http_server *s;
	int r;

	if (!e || listen_fd < 0 || !ret) {
		if (listen_fd >= 0)
			close(listen_fd);
		return -EINVAL;
	}
	r = server_alloc(e, limits, cb, userdata, &s);
	if (r < 0) {
		close(listen_fd);
		return r;
	}
	s->listen_fd = listen_fd;
	r = rdp_event_add_io(e, listen_fd, EPOLLIN, on_accept, s, &s->listen_src);
	if (r < 0) {
		rdp_http_server_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

static int listen_socket(const struct sockaddr_storage *ss, socklen_t len)
{
	_cleanup_close_ int fd = -1;
	int one = 1, zero = 0;

	fd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
		return -errno;
	if (ss->ss_family == AF_INET6 &&
	    IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr))
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (bind(fd, (const struct sockaddr *)ss, len) < 0)
		return -errno;
	if (listen(fd, LISTEN_BACKLOG) < 0)
		return -errno;
	return TAKE_FD(fd);
}

int rdp_http_server_new(struct rdp_event *e, const char *address,
			const struct rdp_http_limits *limits, rdp_http_handler_cb cb,
			void *userdata, struct rdp_http_server **ret)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, r;

	if (!e || !address || !ret)
		return -EINVAL;
	r = rdp_http_parse_address(address, &ss, &len, NULL, 0);
	if (r < 0)
		return r;
	fd = listen_socket(&ss, len);
	if ((fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL) && ss.ss_family == AF_INET6 &&
	    IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr)) {
		/* every address on a host without IPv6: IPv4's */
		struct sockaddr_in a = {
			.sin_family = AF_INET,
			.sin_port = ((struct sockaddr_in6 *)&ss)->sin6_port,
			.sin_addr.s_addr = htonl(INADDR_ANY),
		};

		memset(&ss, 0, sizeof(ss));
		memcpy(&ss, &a, sizeof(a));
		fd = listen_socket(&ss, sizeof(a));
	}
	if (fd < 0)
		return fd;
	return rdp_http_server_new_fd(e, fd, limits, cb, userdata, ret);
}

int rdp_http_server_new_memory(const struct rdp_http_limits *limits, rdp_http_handler_cb cb,
			       void *userdata, struct rdp_http_server **ret)
{
	if (!ret)
		return -EINVAL;
	return server_alloc(NULL, limits, cb, userdata, ret);
}

struct rdp_http_server *rdp_http_server_free(struct rdp_http_server *s)
{
	size_t i;

	if (!s)
		return NULL;
	s->listen_src = rdp_event_source_free(s->listen_src);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	while (s->conns) {
		struct conn *c = s->conns;

		conn_close_socket(c);
		conn_unlink(c);
		if (c->state == CONN_HANDLER || c->state == CONN_GONE) {
			c->state = CONN_GONE; /* detached: rdp_http_respond() frees it */
			conn_drop_body(c);
		} else if (c->memory && !c->owner_gone) {
			conn_drop_body(c);
			c->state = CONN_CLOSED; /* its owner still frees it */
		} else {
			conn_free(c);
		}
	}
	for (i = 0; i < s->n_paths; i++) {
		rdp_free(s->paths[i]);
		rdp_free(s->path_rate[i]);
	}
	rdp_free(s);
	return NULL;
}

int rdp_http_server_add_path_rate(struct rdp_http_server *s, const char *path,
				  uint32_t rate_per_sec, uint32_t rate_burst)
{
	ssize_t i;
	int k;

	if (!s || !rate_per_sec || !rate_burst || rate_per_sec > 1000000 || rate_burst > 1000000)
		return -EINVAL;
	k = rdp_http_server_add_path(s, path);
	if (k < 0)
		return k;
	i = path_index(s, path);
	if (!s->path_rate[i]) {
		s->path_rate[i] = rdp_malloc(sizeof(*s->path_rate[i]));
		if (!s->path_rate[i])
			return -ENOMEM;
	}
	rate_init(s->path_rate[i], rate_per_sec, rate_burst);
	return 0;
}

int rdp_http_server_add_path(struct rdp_http_server *s, const char *path)
{
	if (!s || !path || path[0] != '/')
		return -EINVAL;
	if (path_index(s, path) >= 0)
		return 0;
	if (s->n_paths >= MAX_PATHS)
		return -E2BIG;
	s->paths[s->n_paths] = rdp_strdup(path);
	if (!s->paths[s->n_paths])
		return -ENOMEM;
	s->n_paths++;
	return 0;
}

int rdp_http_server_local_address(const struct rdp_http_server *s, char *buf, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char ip[INET6_ADDRSTRLEN];
	int n;

	if (!s || !buf || s->listen_fd < 0)
		return -EINVAL;
	if (getsockname(s->listen_fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;

		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		n = snprintf(buf, size, "%s:%u", ip, ntohs(a->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;

		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		n = snprintf(buf, size, "[%s]:%u", ip, ntohs(a->sin6_port));
	} else {
		return -EAFNOSUPPORT;
	}
	if (n < 0 || (size_t)n >= size)
		return -ENOBUFS;
	return 0;
}

size_t rdp_http_server_connections(const struct rdp_http_server *s)
{
	return s ? s->n_conns : 0;
}

const struct rdp_http_stats *rdp_http_server_stats(const struct rdp_http_server *s)
{
	return s ? &s->stats : NULL;
}

const char *rdp_http_request_path(const struct rdp_http_request *r)
{
	return r && r->path ? r->path : "";
}

bool rdp_http_request_is_head(const struct rdp_http_request *r)
{
	return r && r->head;
}

int rdp_http_respond(struct rdp_http_request *r, int status, const char *content_type,
		     char *body, size_t len)
{
	struct conn *c;

	if (!r || !r->conn) {
		rdp_free(body);
		return -EINVAL;
	}
	c = r->conn;
	if (c->state != CONN_HANDLER) {
		rdp_free(body);
		if (c->state != CONN_GONE)
			return -EINVAL; /* not waiting for a response: a second call */
		if (c->server)
			c->server->stats.dropped++;
		r->conn = NULL;
		if (c->memory && !c->owner_gone) {
			c->state = CONN_CLOSED;
			return -ENOTCONN;
		}
		c->state = CONN_CLOSED;
		conn_free(c);
		return -ENOTCONN;
	}
	r->conn = NULL;
	if (!content_type)
		content_type = "text/plain; charset=utf-8";
	if (!status_valid(status) || !ctype_valid(content_type) || (len && !body)) {
		rdp_free(body);
		c->close_after = true;
		conn_answer(c, 500);
		return -EINVAL;
	}
	conn_queue(c, status, content_type, body, true, len, "");
	return 0;
}

/* ---- memory connections ---- */

struct rdp_http_conn {
	struct conn c;
};

int rdp_http_conn_new_memory(struct rdp_http_server *s, struct rdp_http_conn **ret)
{
	struct conn *c;
	int r;

	if (!s || !ret)
		return -EINVAL;
	if (s->n_conns >= s->limits.max_connections) {
		s->stats.rejected_full++;
		return -EBUSY;
	}
	r = conn_new(s, -1, &c);
	if (r < 0)
		return r;
	s->stats.accepted++;
	*ret = (struct rdp_http_conn *)c;
	return 0;
}

size_t rdp_http_conn_feed(struct rdp_http_conn *mc, const void *data, size_t len)
{
	struct conn *c = &mc->c;
	size_t room, n;

	if (c->state == CONN_CLOSED || c->state == CONN_GONE || !c->server)
		return 0;
	if (c->in_len == 0)
		c->in_off = 0;
	if (c->in_off && c->in_off + c->in_len == sizeof(c->in)) {
		memmove(c->in, c->in + c->in_off, c->in_len);
		c->in_off = 0;
	}
	room = sizeof(c->in) - c->in_off - c->in_len;
	n = len < room ? len : room;
	if (n)
		memcpy(c->in + c->in_off + c->in_len, data, n);
	c->in_len += n;
	if (c->state == CONN_READING && n) {
		if (!c->started) {
			/* a new connection's first deadline runs from accept already */
			c->started = true;
			if (c->timer_kind != TIMER_REQUEST)
				conn_set_timer(c, TIMER_REQUEST);
		}
		conn_parse(c);
	}
	return n;
}

size_t rdp_http_conn_read_output(struct rdp_http_conn *mc, void *buf, size_t size)
{
	struct conn *c = &mc->c;
	size_t done = 0;

	while (c->state == CONN_WRITING && done < size) {
		size_t total = c->hdr_len + c->body_len, n;

		if (c->out_off >= total) {
			conn_output_done(c);
			continue;
		}
		if (c->out_off < c->hdr_len) {
			n = c->hdr_len - c->out_off;
			if (n > size - done)
				n = size - done;
			memcpy((char *)buf + done, c->hdr + c->out_off, n);
		} else {
			size_t off = c->out_off - c->hdr_len;

			n = c->body_len - off;
			if (n > size - done)
				n = size - done;
			memcpy((char *)buf + done, c->body + off, n);
		}
		c->out_off += n;
		done += n;
	}
	/* all taken: move on now rather than at the next call */
	if (c->state == CONN_WRITING && c->out_off >= c->hdr_len + c->body_len)
		conn_output_done(c);
	return done;
}

void rdp_http_conn_peer_close(struct rdp_http_conn *mc)
{
	struct conn *c = &mc->c;

	if (c->state == CONN_CLOSED || c->state == CONN_GONE)
		return;
	conn_close(c);
}

bool rdp_http_conn_is_closed(const struct rdp_http_conn *mc)
{
	return mc->c.state == CONN_CLOSED || mc->c.state == CONN_GONE;
}

struct rdp_http_conn *rdp_http_conn_free(struct rdp_http_conn *mc)
{
	struct conn *c;

	if (!mc)
		return NULL;
	c = &mc->c;
	c->owner_gone = true;
	if (c->state == CONN_HANDLER || c->state == CONN_GONE) {
		c->state = CONN_GONE; /* the handler's rdp_http_respond() frees it */
		conn_drop_body(c);
		return NULL;
	}
	conn_free(c);
	return NULL;
}
