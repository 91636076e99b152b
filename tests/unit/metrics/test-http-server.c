/* SPDX-License-Identifier: MIT */
/*
 * The HTTP server: listen-address parsing; every answer on memory connections (the bytes a
 * socket would carry); then real sockets on 127.0.0.1:0 driven by the loop with clients in
 * this process: keep-alive, pipelining, the connection cap, slowloris and idle timeouts, a
 * client that never reads, a response after the client left; and allocation failures.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "event.h"
#include "http-server-internal.h"
#include "http-server.h"
#include "macro.h"
#include "test.h"

/* ---- addresses ---- */

static void test_addresses(void)
{
	static const struct {
		const char *in;
		int family;
		const char *ip;
		unsigned port;
		const char *err; /* part of the message when refused */
	} cases[] = {
		{ "0.0.0.0:9470", AF_INET, "0.0.0.0", 9470, NULL },
		{ "127.0.0.1:0", AF_INET, "127.0.0.1", 0, NULL },
		{ "[::1]:9470", AF_INET6, "::1", 9470, NULL },
		{ "[::]:9470", AF_INET6, "::", 9470, NULL },
		{ ":9470", AF_INET6, "::", 9470, NULL },
		{ "10.1.2.3:65535", AF_INET, "10.1.2.3", 65535, NULL },
		{ "127.0.0.1:65536", 0, NULL, 0, "port out of range" },
		{ "127.0.0.1:99999999999999999999", 0, NULL, 0, "port out of range" },
		{ "127.0.0.1", 0, NULL, 0, "missing port" },
		{ "127.0.0.1:", 0, NULL, 0, "missing port" },
		{ "[::1]", 0, NULL, 0, "missing port" },
		{ "[::1]:", 0, NULL, 0, "missing port" },
		{ "[::1", 0, NULL, 0, "missing ']'" },
		{ "[::1]9470", 0, NULL, 0, "expected ':PORT'" },
		{ "[]:9470", 0, NULL, 0, "empty IPv6" },
		{ "[fe80::1%eth0]:9470", 0, NULL, 0, "zone" },
		{ "[1.2.3.4]:80", 0, NULL, 0, "not an IPv6 address" },
		{ "localhost:9470", 0, NULL, 0, "hostname not allowed: use an IP address" },
		{ "metrics.example.com:80", 0, NULL, 0, "hostname not allowed" },
		{ "localhost", 0, NULL, 0, "hostname not allowed" },
		{ "256.1.1.1:80", 0, NULL, 0, "not an IPv4 address" },
		{ "1.2.3:80", 0, NULL, 0, "not an IPv4 address" },
		{ "::1:9470", 0, NULL, 0, "brackets" },
		{ "9470", 0, NULL, 0, "':9470'" },
		{ "127.0.0.1:http", 0, NULL, 0, "not a number" },
		{ "127.0.0.1:-1", 0, NULL, 0, "not a number" },
		{ "127.0.0.1: 80", 0, NULL, 0, "not a number" },
		{ "", 0, NULL, 0, "empty address" },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		struct sockaddr_storage ss;
		socklen_t len = 0;
		char err[160] = "x", ip[64] = "";
		int r = rdp_http_parse_address(cases[i].in, &ss, &len, err, sizeof(err));

		if (cases[i].err) {
			EXPECT_EQ(r, -EINVAL);
			EXPECT_CONTAINS(err, cases[i].err);
			continue;
		}
		EXPECT_EQ(r, 0);
		EXPECT_STREQ(err, "");
		EXPECT_EQ(ss.ss_family, cases[i].family);
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *a = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
			EXPECT_EQ(ntohs(a->sin_port), cases[i].port);
			EXPECT_EQ(len, sizeof(*a));
		} else {
			struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
			EXPECT_EQ(ntohs(a->sin6_port), cases[i].port);
			EXPECT_EQ(len, sizeof(*a));
		}
		EXPECT_STREQ(ip, cases[i].ip);
	}
	EXPECT_EQ(rdp_http_parse_address(NULL, NULL, NULL, NULL, 0), -EINVAL);
}

/* ---- a handler: answers at once, or keeps the request for later ---- */

struct ctx {
	bool defer;
	struct rdp_http_request *pending[32];
	size_t n_pending;
	size_t calls;
	char last_path[64];
	bool last_head;
	size_t big; /* answer with this many bytes */
};

static void handler(struct rdp_http_request *r, void *userdata)
{
	struct ctx *t = userdata;

	t->calls++;
	snprintf(t->last_path, sizeof(t->last_path), "%s", rdp_http_request_path(r));
	t->last_head = rdp_http_request_is_head(r);
	if (t->defer && t->n_pending < ARRAY_SIZE(t->pending)) {
		t->pending[t->n_pending++] = r;
		return;
	}
	if (t->big) {
		char *b = rdp_malloc(t->big);

		memset(b, 'x', t->big);
		EXPECT_EQ(rdp_http_respond(r, 200, "text/plain; version=0.0.4", b, t->big), 0);
		return;
	}
	{
		char *b = rdp_asprintf("ok %s\n", rdp_http_request_path(r));

		if (!b) /* allocation failures: answer without a body */
			(void)rdp_http_respond(r, 503, NULL, NULL, 0);
		else
			EXPECT_EQ(rdp_http_respond(r, 200, "text/plain; version=0.0.4", b,
						   strlen(b)),
				  0);
	}
}

static int answer_pending(struct ctx *t, int status)
{
	int r = 0;

	while (t->n_pending) {
		struct rdp_http_request *q = t->pending[--t->n_pending];
		char *b = rdp_strdup("later\n");

		r = rdp_http_respond(q, status, NULL, b, 6);
	}
	return r;
}

/* ---- memory connections ---- */

struct mem {
	struct rdp_http_server *s;
	struct rdp_http_conn *c;
	struct ctx t;
	char out[1 << 16];
	size_t olen;
};

static void mem_open(struct mem *m, const struct rdp_http_limits *l)
{
	memset(m, 0, sizeof(*m));
	EXPECT_EQ(rdp_http_server_new_memory(l, handler, &m->t, &m->s), 0);
	EXPECT_EQ(rdp_http_server_add_path(m->s, "/metrics"), 0);
	EXPECT_EQ(rdp_http_server_add_path(m->s, "/healthz"), 0);
	EXPECT_EQ(rdp_http_server_add_path(m->s, "/healthz"), 0); /* twice is once */
	EXPECT_EQ(rdp_http_server_add_path(m->s, "metrics"), -EINVAL);
	EXPECT_EQ(rdp_http_conn_new_memory(m->s, &m->c), 0);
}

static void mem_close(struct mem *m)
{
	rdp_http_conn_free(m->c);
	rdp_http_server_free(m->s);
}

/* Feeds all of req (as far as taken), draining output; returns what was taken. */
static size_t mem_send(struct mem *m, const char *req)
{
	size_t len = strlen(req), off = 0, n;

	do {
		n = rdp_http_conn_feed(m->c, req + off, len - off);
		off += n;
		m->olen += rdp_http_conn_read_output(m->c, m->out + m->olen,
						     sizeof(m->out) - 1 - m->olen);
		m->out[m->olen] = '\0';
	} while (n && off < len);
	m->olen += rdp_http_conn_read_output(m->c, m->out + m->olen, sizeof(m->out) - 1 - m->olen);
	m->out[m->olen] = '\0';
	return off;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	while ((hay = strstr(hay, needle))) {
		n++;
		hay += strlen(needle);
	}
	return n;
}

/* One request on a fresh connection: the whole output, and whether it ended closed. */
static void mem_one(const struct rdp_http_limits *l, const char *req, const char *status,
		    bool closed, const char *more)
{
	struct mem m;

	mem_open(&m, l);
	mem_send(&m, req);
	if (strncmp(m.out, status, strlen(status)))
		fprintf(stderr, "for %.40s...: got %.60s\n", req, m.out);
	EXPECT_TRUE(!strncmp(m.out, status, strlen(status)));
	EXPECT_EQ(rdp_http_conn_is_closed(m.c), closed);
	EXPECT_EQ(count(m.out, "Connection: close\r\n"), closed ? 1 : 0);
	EXPECT_CONTAINS(m.out, "Cache-Control: no-store\r\n");
	if (more)
		EXPECT_CONTAINS(m.out, more);
	EXPECT_EQ(m.t.calls, 0);
	mem_close(&m);
}

static void test_memory(void)
{
	struct rdp_http_limits small;
	struct mem m;
	char big[20000];

	/* a good GET: the handler's answer, keep-alive */
	mem_open(&m, NULL);
	mem_send(&m, "GET /metrics?x=1&y HTTP/1.1\r\nHost: a\r\n\r\n");
	EXPECT_STREQ(m.out, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
			    "Content-Length: 12\r\nCache-Control: no-store\r\n\r\nok /metrics\n");
	EXPECT_STREQ(m.t.last_path, "/metrics");
	EXPECT_TRUE(!m.t.last_head);
	EXPECT_TRUE(!rdp_http_conn_is_closed(m.c));
	/* HEAD on the same connection: headers with the body's length, no body */
	m.olen = 0;
	mem_send(&m, "HEAD /healthz HTTP/1.1\r\nHost: a\r\n\r\n");
	EXPECT_STREQ(m.out, "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
			    "Content-Length: 12\r\nCache-Control: no-store\r\n\r\n");
	EXPECT_TRUE(m.t.last_head);
	/* absolute-form target */
	m.olen = 0;
	mem_send(&m, "GET http://h:1/healthz HTTP/1.1\r\n\r\n");
	EXPECT_CONTAINS(m.out, "ok /healthz\n");
	/* 404 keeps the connection */
	m.olen = 0;
	mem_send(&m, "GET /nope HTTP/1.1\r\n\r\n");
	EXPECT_TRUE(!strncmp(m.out, "HTTP/1.1 404 Not Found\r\n", 24));
	EXPECT_TRUE(!rdp_http_conn_is_closed(m.c));
	EXPECT_EQ(m.t.calls, 3);
	/* Connection: close honoured */
	m.olen = 0;
	mem_send(&m, "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n");
	EXPECT_CONTAINS(m.out, "Connection: close\r\n");
	EXPECT_TRUE(rdp_http_conn_is_closed(m.c));
	EXPECT_EQ(rdp_http_conn_feed(m.c, "GET", 3), 0);
	EXPECT_EQ(rdp_http_server_stats(m.s)->responses[2], 4);
	EXPECT_EQ(rdp_http_server_stats(m.s)->responses[4], 1);
	EXPECT_EQ(rdp_http_server_stats(m.s)->requests, 4);
	mem_close(&m);

	/* HTTP/1.0: close unless keep-alive asked */
	mem_open(&m, NULL);
	mem_send(&m, "GET /metrics HTTP/1.0\r\n\r\n");
	EXPECT_CONTAINS(m.out, "Connection: close\r\n");
	EXPECT_TRUE(rdp_http_conn_is_closed(m.c));
	mem_close(&m);
	mem_open(&m, NULL);
	mem_send(&m, "GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
	EXPECT_CONTAINS(m.out, "Connection: keep-alive\r\n");
	EXPECT_TRUE(!rdp_http_conn_is_closed(m.c));
	mem_close(&m);

	/* pipelined: one at a time, in order, all answered */
	mem_open(&m, NULL);
	m.t.defer = true;
	mem_send(&m, "GET /metrics HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\n\r\n"
		     "GET /x HTTP/1.1\r\n\r\nHEAD /metrics HTTP/1.1\r\n\r\n");
	EXPECT_EQ(m.t.calls, 1); /* the second waits for the first's answer */
	EXPECT_EQ(m.olen, 0);
	EXPECT_EQ(answer_pending(&m.t, 200), 0);
	m.olen += rdp_http_conn_read_output(m.c, m.out + m.olen, sizeof(m.out) - m.olen);
	EXPECT_EQ(m.t.calls, 2);
	EXPECT_STREQ(m.t.last_path, "/healthz");
	EXPECT_EQ(answer_pending(&m.t, 503), 0);
	m.olen += rdp_http_conn_read_output(m.c, m.out + m.olen, sizeof(m.out) - m.olen);
	m.olen += rdp_http_conn_read_output(m.c, m.out + m.olen, sizeof(m.out) - m.olen);
	EXPECT_EQ(m.t.calls, 3); /* after the 404 of /x: HEAD /metrics */
	EXPECT_TRUE(m.t.last_head);
	EXPECT_EQ(answer_pending(&m.t, 200), 0);
	m.olen += rdp_http_conn_read_output(m.c, m.out + m.olen, sizeof(m.out) - m.olen - 1);
	m.out[m.olen] = '\0';
	EXPECT_EQ(count(m.out, "HTTP/1.1 "), 4);
	EXPECT_CONTAINS(m.out, "503 Service Unavailable");
	EXPECT_CONTAINS(m.out, "404 Not Found");
	EXPECT_EQ(count(m.out, "later\n"), 2); /* not for HEAD */
	mem_close(&m);

	/* refusals, each closing but 404 */
	mem_one(NULL, "POST /metrics HTTP/1.1\r\nContent-Length: 2\r\n\r\nab",
		"HTTP/1.1 405 Method Not Allowed\r\n", true, "Allow: GET, HEAD\r\n");
	mem_one(NULL, "DELETE /metrics HTTP/1.1\r\n\r\n", "HTTP/1.1 405 ", true, "Allow: GET, HEAD");
	mem_one(NULL, "OPTIONS * HTTP/1.1\r\n\r\n", "HTTP/1.1 405 ", true, NULL);
	mem_one(NULL, "BREW /pot HTTP/1.1\r\n\r\n", "HTTP/1.1 400 Bad Request\r\n", true, NULL);
	mem_one(NULL, "\x16\x03\x01\x02\x00", "HTTP/1.1 400 ", true, NULL);
	mem_one(NULL, "GET /metrics HTTP/1.1\r\nBad Header\r\n\r\n", "HTTP/1.1 400 ", true, NULL);
	mem_one(NULL, "GET /metrics HTTP/9.9\r\n\r\n", "HTTP/1.1 505 ", true, NULL);
	mem_one(NULL, "GET /metrics HTTP/0.9\r\n\r\n", "HTTP/1.1 505 ", true, NULL);
	mem_one(NULL, "GET /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 413 Payload Too Large\r\n", true, "a request body is not accepted");
	mem_one(NULL, "GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"HTTP/1.1 400 ", true, NULL);
	mem_one(NULL, "GET /metrics HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
		"HTTP/1.1 417 Expectation Failed\r\n", true, NULL);
	mem_one(NULL, "GET /nope HTTP/1.1\r\n\r\n", "HTTP/1.1 404 Not Found\r\n", false,
		"not found\n");
	/* HEAD gets no body, refusals included */
	mem_open(&m, NULL);
	mem_send(&m, "HEAD /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc");
	EXPECT_TRUE(!strncmp(m.out, "HTTP/1.1 413 ", 13));
	EXPECT_TRUE(strstr(m.out, "\r\n\r\n") && !strstr(m.out, "\r\n\r\n")[4]);
	mem_close(&m);

	/* 414: a URL over max_url; 431: headers over max_header_bytes, whatever the chunking */
	memset(big, 'u', sizeof(big));
	memcpy(big, "GET /", 5);
	strcpy(big + 3000, " HTTP/1.1\r\n\r\n");
	mem_one(NULL, big, "HTTP/1.1 414 URI Too Long\r\n", true, NULL);
	strcpy(big, "GET /metrics HTTP/1.1\r\nX-A: ");
	memset(big + strlen(big), 'a', 9000);
	strcpy(big + 9030, "\r\n\r\n");
	mem_one(NULL, big, "HTTP/1.1 431 Request Header Fields Too Large\r\n", true, NULL);
	/* exactly at the limit passes, one byte more does not */
	rdp_http_limits_default(&small);
	small.max_header_bytes = 100;
	{
		char req[200];
		const char *head = "GET /metrics HTTP/1.1\r\nX: ";
		size_t fill = 100 - strlen(head) - 4;

		snprintf(req, sizeof(req), "%s%.*s\r\n\r\n", head, (int)fill,
			 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
		EXPECT_EQ(strlen(req), 100);
		mem_open(&m, &small);
		mem_send(&m, req);
		EXPECT_TRUE(!strncmp(m.out, "HTTP/1.1 200 ", 13));
		mem_close(&m);
		snprintf(req, sizeof(req), "%s%.*sa\r\n\r\n", head, (int)fill,
			 "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
		mem_one(&small, req, "HTTP/1.1 431 ", true, NULL);
	}

	/* 429 past the burst, with Retry-After; stats */
	rdp_http_limits_default(&small);
	small.rate_per_sec = 1;
	small.rate_burst = 2;
	mem_open(&m, &small);
	mem_send(&m, "GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n"
		     "GET /metrics HTTP/1.1\r\n\r\n");
	EXPECT_EQ(count(m.out, "HTTP/1.1 200 "), 2);
	EXPECT_CONTAINS(m.out, "HTTP/1.1 429 Too Many Requests\r\n");
	EXPECT_CONTAINS(m.out, "Retry-After: 1\r\n");
	EXPECT_TRUE(rdp_http_conn_is_closed(m.c));
	EXPECT_EQ(rdp_http_server_stats(m.s)->rate_limited, 1);
	mem_close(&m);

	/* a path with its own bucket: the server's being empty does not refuse it, and its own
	 * refuses past its burst */
	mem_open(&m, &small);
	EXPECT_EQ(rdp_http_server_add_path_rate(m.s, "/readyz", 1, 3), 0);
	EXPECT_EQ(rdp_http_server_add_path_rate(m.s, "/readyz", 0, 3), -EINVAL);
	EXPECT_EQ(rdp_http_server_add_path_rate(m.s, "readyz", 1, 3), -EINVAL);
	mem_send(&m, "GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n"
		     "GET /readyz HTTP/1.1\r\n\r\nGET /readyz HTTP/1.1\r\n\r\n"
		     "GET /readyz HTTP/1.1\r\n\r\nGET /readyz HTTP/1.1\r\n\r\n");
	EXPECT_EQ(count(m.out, "HTTP/1.1 200 "), 5);
	EXPECT_EQ(count(m.out, "HTTP/1.1 429 "), 1);
	mem_close(&m);
	mem_open(&m, &small);
	EXPECT_EQ(rdp_http_server_add_path_rate(m.s, "/readyz", 1, 3), 0);
	mem_send(&m, "GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n"
		     "GET /metrics HTTP/1.1\r\n\r\n");
	EXPECT_EQ(count(m.out, "HTTP/1.1 429 "), 1); /* the server's bucket is empty now */
	mem_close(&m);
	mem_open(&m, &small);
	EXPECT_EQ(rdp_http_server_add_path_rate(m.s, "/readyz", 1, 3), 0);
	mem_send(&m, "GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n"
		     "GET /readyz HTTP/1.1\r\n\r\n");
	EXPECT_EQ(count(m.out, "HTTP/1.1 200 "), 3); /* ... and /readyz still answers */
	mem_close(&m);

	/* max requests per connection: the last answer says close */
	rdp_http_limits_default(&small);
	small.max_requests_per_conn = 2;
	mem_open(&m, &small);
	mem_send(&m, "GET /metrics HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n"
		     "GET /metrics HTTP/1.1\r\n\r\n");
	EXPECT_EQ(count(m.out, "HTTP/1.1 200 "), 2);
	EXPECT_EQ(count(m.out, "Connection: close"), 1);
	EXPECT_TRUE(rdp_http_conn_is_closed(m.c));
	mem_close(&m);

	/* the connection cap on memory connections */
	rdp_http_limits_default(&small);
	small.max_connections = 1;
	mem_open(&m, &small);
	{
		struct rdp_http_conn *c2;

		EXPECT_EQ(rdp_http_conn_new_memory(m.s, &c2), -EBUSY);
		EXPECT_EQ(rdp_http_server_stats(m.s)->rejected_full, 1);
	}
	mem_close(&m);

	/* async: the client leaves before the answer; respond only frees (ASan: no leak) */
	mem_open(&m, NULL);
	m.t.defer = true;
	mem_send(&m, "GET /metrics HTTP/1.1\r\n\r\n");
	EXPECT_EQ(m.t.n_pending, 1);
	rdp_http_conn_peer_close(m.c);
	EXPECT_TRUE(rdp_http_conn_is_closed(m.c));
	EXPECT_EQ(rdp_http_server_connections(m.s), 1); /* still counted until the answer */
	EXPECT_EQ(answer_pending(&m.t, 200), -ENOTCONN);
	EXPECT_EQ(rdp_http_server_stats(m.s)->dropped, 1);
	mem_close(&m);
	/* the owner lets go while the handler holds it; then the server goes; then respond */
	mem_open(&m, NULL);
	m.t.defer = true;
	mem_send(&m, "GET /metrics HTTP/1.1\r\n\r\n");
	m.c = rdp_http_conn_free(m.c);
	m.s = rdp_http_server_free(m.s);
	EXPECT_EQ(answer_pending(&m.t, 200), -ENOTCONN);

	/* a bad answer from the handler becomes a 500 */
	mem_open(&m, NULL);
	m.t.defer = true;
	mem_send(&m, "GET /metrics HTTP/1.1\r\n\r\n");
	EXPECT_EQ(answer_pending(&m.t, 99), -EINVAL);
	m.olen += rdp_http_conn_read_output(m.c, m.out + m.olen, sizeof(m.out) - m.olen - 1);
	m.out[m.olen] = '\0';
	EXPECT_TRUE(!strncmp(m.out, "HTTP/1.1 500 ", 13));
	mem_close(&m);
}

/* ---- real sockets ---- */

static int client_connect(const char *addr)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd;

	if (rdp_http_parse_address(addr, &ss, &len, NULL, 0) < 0)
		return -1;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&ss, len) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void client_send(int fd, const char *s)
{
	EXPECT_EQ(send(fd, s, strlen(s), MSG_NOSIGNAL), (ssize_t)strlen(s));
}

/*
 * Runs the loop and reads fd until `want` responses (counted by status lines) arrived and
 * their bodies too, or EOF, or timeout_ms. Returns the bytes read into buf (NUL-terminated);
 * *eof tells whether the server closed.
 */
static size_t client_read(struct rdp_event *e, int fd, char *buf, size_t size, size_t want,
			  int timeout_ms, bool *eof)
{
	uint64_t end = rdp_now_usec() + (uint64_t)timeout_ms * 1000;
	size_t len = 0;

	*eof = false;
	buf[0] = '\0';
	while (rdp_now_usec() < end) {
		ssize_t n;

		(void)rdp_event_run_once(e, 5);
		n = recv(fd, buf + len, size - 1 - len, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			*eof = true;
			break;
		}
		if (n > 0) {
			len += (size_t)n;
			buf[len] = '\0';
		}
		if (want && count(buf, "HTTP/1.1 ") >= want) {
			/* the last response complete? */
			const char *h = buf, *p;
			size_t cl;

			while ((p = strstr(h + 1, "HTTP/1.1 ")))
				h = p;
			p = strstr(h, "\r\n\r\n");
			if (p && strstr(h, "Content-Length: ") &&
			    sscanf(strstr(h, "Content-Length: ") + 16, "%zu", &cl) == 1 &&
			    p + 4 + cl <= buf + len)
				break;
		}
	}
	return len;
}

static void run_for(struct rdp_event *e, int ms)
{
	uint64_t end = rdp_now_usec() + (uint64_t)ms * 1000;

	while (rdp_now_usec() < end)
		(void)rdp_event_run_once(e, 5);
}

static void test_sockets(void)
{
	struct rdp_event *e = NULL;
	struct rdp_http_server *s = NULL;
	struct rdp_http_limits l;
	struct ctx t = { 0 };
	char addr[64], buf[8192];
	int fd, fd2, fds[3];
	bool eof;
	size_t n, i;

	EXPECT_EQ(rdp_event_new(&e), 0);
	EXPECT_EQ(rdp_http_server_new(e, "localhost:0", NULL, handler, &t, &s), -EINVAL);
	rdp_http_limits_default(&l);
	l.max_connections = 3;
	l.request_timeout_usec = 300000;
	l.idle_timeout_usec = 600000;
	l.write_timeout_usec = 300000;
	l.rate_burst = 1000;
	l.rate_per_sec = 1000;
	EXPECT_EQ(rdp_http_server_new(e, "127.0.0.1:0", &l, handler, &t, &s), 0);
	if (!s) {
		rdp_event_free(e);
		return;
	}
	EXPECT_EQ(rdp_http_server_add_path(s, "/metrics"), 0);
	EXPECT_EQ(rdp_http_server_local_address(s, addr, sizeof(addr)), 0);
	EXPECT_TRUE(!strncmp(addr, "127.0.0.1:", 10) && strcmp(addr, "127.0.0.1:0"));
	EXPECT_EQ(rdp_http_server_local_address(s, buf, 5), -ENOBUFS);

	/* GET then HEAD then GET on one connection (keep-alive) */
	fd = client_connect(addr);
	EXPECT_TRUE(fd >= 0);
	client_send(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	n = client_read(e, fd, buf, sizeof(buf), 1, 2000, &eof);
	EXPECT_TRUE(!eof);
	EXPECT_TRUE(n > 0 && strstr(buf, "HTTP/1.1 200 OK\r\n") == buf);
	EXPECT_CONTAINS(buf, "\r\n\r\nok /metrics\n");
	client_send(fd, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
	run_for(e, 50);
	n = client_read(e, fd, buf, sizeof(buf), 0, 50, &eof);
	EXPECT_TRUE(strstr(buf, "Content-Length: 12\r\n") && !strstr(buf, "ok /"));
	/* pipelined: two requests in one write, two answers in order */
	client_send(fd, "GET /metrics?a HTTP/1.1\r\n\r\nGET /nope HTTP/1.1\r\n\r\n");
	n = client_read(e, fd, buf, sizeof(buf), 2, 2000, &eof);
	EXPECT_EQ(count(buf, "HTTP/1.1 "), 2);
	EXPECT_TRUE(strstr(buf, "200 OK") < strstr(buf, "404 Not Found"));
	EXPECT_EQ(rdp_http_server_connections(s), 1);

	/*
	 * the cap: 3 open; a 4th takes the slot of the connection that has waited longest
	 * without a complete request (fd, idle since its last answer, before the two others
	 * connected), which is closed; the new one is served (issue 22: it used to get 503, so
	 * clients that send nothing kept scrapes and probes out)
	 */
	run_for(e, 5);
	fds[0] = client_connect(addr);
	fds[1] = client_connect(addr);
	run_for(e, 30);
	EXPECT_EQ(rdp_http_server_connections(s), 3);
	fd2 = client_connect(addr);
	client_send(fd2, "GET /metrics HTTP/1.1\r\n\r\n");
	n = client_read(e, fd2, buf, sizeof(buf), 1, 1000, &eof);
	EXPECT_TRUE(strstr(buf, "HTTP/1.1 200 OK\r\n") == buf);
	EXPECT_EQ(rdp_http_server_stats(s)->rejected_full, 0);
	EXPECT_EQ(rdp_http_server_stats(s)->evicted, 1);
	n = client_read(e, fd, buf, sizeof(buf), 0, 1000, &eof);
	EXPECT_TRUE(eof && n == 0); /* fd was the one given up */
	close(fd);
	close(fd2);
	close(fds[0]);
	close(fds[1]);
	run_for(e, 30);
	EXPECT_EQ(rdp_http_server_connections(s), 0);
	/* a keep-alive connection again, for the idle test below */
	fd = client_connect(addr);
	client_send(fd, "GET /metrics HTTP/1.1\r\n\r\n");
	n = client_read(e, fd, buf, sizeof(buf), 1, 2000, &eof);
	EXPECT_TRUE(strstr(buf, "HTTP/1.1 200 OK\r\n") == buf);

	/*
	 * slowloris: one header byte every 50 ms, timeout 300 ms; a good client is served
	 * meanwhile, and the slow one gets 408 and EOF near the deadline.
	 */
	run_for(e, 30);
	{
		const char *slow = "GET /metrics HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaa";
		uint64_t t0 = rdp_now_usec(), t_eof = 0;
		size_t k = 0, len = 0;
		bool other_done = false;

		fd2 = client_connect(addr);
		fcntl(fd2, F_SETFL, O_NONBLOCK);
		buf[0] = '\0';
		while (rdp_now_usec() - t0 < 1500000 && !t_eof) {
			ssize_t r;

			if (slow[k] && rdp_now_usec() - t0 > k * 50000) {
				(void)send(fd2, slow + k, 1, MSG_NOSIGNAL);
				k++;
			}
			if (k == 3 && !other_done) { /* meanwhile: another client is served */
				char b2[1024];

				fds[2] = client_connect(addr);
				client_send(fds[2], "GET /metrics HTTP/1.1\r\n\r\n");
				client_read(e, fds[2], b2, sizeof(b2), 1, 100, &eof);
				EXPECT_TRUE(strstr(b2, "HTTP/1.1 200 OK\r\n") == b2);
				close(fds[2]);
				other_done = true;
			}
			(void)rdp_event_run_once(e, 5);
			r = recv(fd2, buf + len, sizeof(buf) - 1 - len, 0);
			if (r > 0) {
				len += (size_t)r;
				buf[len] = '\0';
			} else if (r == 0 || (r < 0 && errno != EAGAIN)) {
				t_eof = rdp_now_usec();
			}
		}
		if (!t_eof || t_eof - t0 < 280000 || t_eof - t0 >= 800000)
			fprintf(stderr, "slowloris: eof after %llu us, got '%s'\n",
				(unsigned long long)(t_eof - t0), buf);
		EXPECT_TRUE(t_eof > 0);
		EXPECT_TRUE(t_eof - t0 >= 280000 && t_eof - t0 < 800000);
		EXPECT_TRUE(strstr(buf, "HTTP/1.1 408 Request Timeout\r\n") == buf);
		EXPECT_EQ(rdp_http_server_stats(s)->timeout_request, 1);
		close(fd2);
	}

	/* a silent new connection is closed at the request deadline, without a word */
	fd2 = client_connect(addr);
	n = client_read(e, fd2, buf, sizeof(buf), 0, 1000, &eof);
	EXPECT_TRUE(eof && n == 0);
	EXPECT_EQ(rdp_http_server_stats(s)->timeout_request, 2);
	close(fd2);

	/* idle keep-alive: fd has been quiet for a while now; it is closed by 600 ms */
	n = client_read(e, fd, buf, sizeof(buf), 0, 1000, &eof);
	EXPECT_TRUE(eof && n == 0);
	EXPECT_EQ(rdp_http_server_stats(s)->timeout_idle, 1);
	close(fd);

	/* a client that never reads a big answer is closed at the write deadline */
	t.big = 64u << 20;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	{
		int small = 4096;
		struct sockaddr_storage ss;
		socklen_t len;

		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		rdp_http_parse_address(addr, &ss, &len, NULL, 0);
		EXPECT_EQ(connect(fd, (struct sockaddr *)&ss, len), 0);
	}
	client_send(fd, "GET /metrics HTTP/1.1\r\n\r\n");
	run_for(e, 700);
	EXPECT_EQ(rdp_http_server_stats(s)->timeout_write, 1);
	EXPECT_EQ(rdp_http_server_connections(s), 0);
	close(fd);
	t.big = 0;

	/* async: the client leaves while the handler holds its request */
	t.defer = true;
	fd = client_connect(addr);
	client_send(fd, "GET /metrics HTTP/1.1\r\n\r\n");
	for (i = 0; i < 100 && !t.n_pending; i++)
		(void)rdp_event_run_once(e, 5);
	EXPECT_EQ(t.n_pending, 1);
	close(fd);
	run_for(e, 30);
	EXPECT_EQ(rdp_http_server_connections(s), 1); /* counted until answered */
	EXPECT_EQ(answer_pending(&t, 200), -ENOTCONN);
	EXPECT_EQ(rdp_http_server_connections(s), 0);
	/* ... and a request still held when the server is freed */
	fd = client_connect(addr);
	client_send(fd, "GET /metrics HTTP/1.1\r\n\r\n");
	for (i = 0; i < 100 && !t.n_pending; i++)
		(void)rdp_event_run_once(e, 5);
	EXPECT_EQ(t.n_pending, 1);
	s = rdp_http_server_free(s);
	EXPECT_EQ(answer_pending(&t, 200), -ENOTCONN);
	close(fd);
	rdp_event_free(e);
}

/* A connection to addr from source address src (IPv4), or -1. */
static int client_connect_from(const char *addr, const char *src)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct sockaddr_storage ss;
	socklen_t len;
	int fd;

	if (rdp_http_parse_address(addr, &ss, &len, NULL, 0) < 0 ||
	    inet_pton(AF_INET, src, &sin.sin_addr) != 1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    connect(fd, (struct sockaddr *)&ss, len) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Issue 22: a client gets max_per_client slots; its next connection takes the place of its
 * own that waited longest without a request; other clients keep theirs.
 */
static void test_per_client(void)
{
	struct rdp_event *e = NULL;
	struct rdp_http_server *s = NULL;
	struct rdp_http_limits l;
	struct ctx t = { 0 };
	char addr[64], buf[4096];
	int a, b, c, other;
	bool eof;
	size_t n;

	EXPECT_EQ(rdp_event_new(&e), 0);
	rdp_http_limits_default(&l);
	l.max_connections = 10;
	l.max_per_client = 2;
	EXPECT_EQ(rdp_http_server_new(e, "127.0.0.1:0", &l, handler, &t, &s), 0);
	if (!s) {
		rdp_event_free(e);
		return;
	}
	EXPECT_EQ(rdp_http_server_add_path(s, "/metrics"), 0);
	EXPECT_EQ(rdp_http_server_local_address(s, addr, sizeof(addr)), 0);
	other = client_connect_from(addr, "127.0.0.2");
	run_for(e, 20);
	a = client_connect(addr);
	run_for(e, 20);
	b = client_connect(addr);
	run_for(e, 20);
	EXPECT_EQ(rdp_http_server_connections(s), 3);
	c = client_connect(addr);
	client_send(c, "GET /metrics HTTP/1.1\r\n\r\n");
	n = client_read(e, c, buf, sizeof(buf), 1, 2000, &eof);
	EXPECT_TRUE(n > 0 && strstr(buf, "HTTP/1.1 200 OK\r\n") == buf);
	EXPECT_EQ(rdp_http_server_stats(s)->evicted, 1);
	n = client_read(e, a, buf, sizeof(buf), 0, 500, &eof);
	EXPECT_TRUE(eof && n == 0); /* a, 127.0.0.1's oldest, was given up */
	n = client_read(e, other, buf, sizeof(buf), 0, 50, &eof);
	EXPECT_TRUE(!eof); /* 127.0.0.2's (older) stays */
	client_send(other, "GET /metrics HTTP/1.1\r\n\r\n");
	n = client_read(e, other, buf, sizeof(buf), 1, 2000, &eof);
	EXPECT_TRUE(n > 0 && strstr(buf, "HTTP/1.1 200 OK\r\n") == buf);
	EXPECT_EQ(rdp_http_server_stats(s)->rejected_full, 0);
	close(a);
	close(b);
	close(c);
	close(other);
	s = rdp_http_server_free(s);
	rdp_event_free(e);
}

/* A listener on the IPv6 wildcard (or IPv4's where the host has no IPv6). */
static void test_any_address(void)
{
	struct rdp_event *e = NULL;
	struct rdp_http_server *s = NULL;
	struct ctx t = { 0 };
	char addr[64], buf[1024], v4[64];
	int fd;
	bool eof;

	EXPECT_EQ(rdp_event_new(&e), 0);
	EXPECT_EQ(rdp_http_server_new(e, ":0", NULL, handler, &t, &s), 0);
	EXPECT_EQ(rdp_http_server_add_path(s, "/metrics"), 0);
	EXPECT_EQ(rdp_http_server_local_address(s, addr, sizeof(addr)), 0);
	EXPECT_TRUE(!strncmp(addr, "[::]:", 5) || !strncmp(addr, "0.0.0.0:", 8));
	/* dual-stack: reached over IPv4 */
	snprintf(v4, sizeof(v4), "127.0.0.1:%s", strrchr(addr, ':') + 1);
	fd = client_connect(v4);
	EXPECT_TRUE(fd >= 0);
	client_send(fd, "GET /metrics HTTP/1.0\r\n\r\n");
	client_read(e, fd, buf, sizeof(buf), 1, 2000, &eof);
	EXPECT_TRUE(strstr(buf, "HTTP/1.1 200 OK\r\n") == buf);
	close(fd);
	rdp_http_server_free(s);
	rdp_event_free(e);
}

/* Every allocation of a serving scenario failing in turn: clean errors, no leak, no crash. */
static void alloc_scenario(unsigned long fail_at)
{
	struct rdp_event *e = NULL;
	struct rdp_http_server *s = NULL;
	struct ctx t = { 0 };
	char addr[64], buf[1024];
	bool eof;
	int fd, k;

	if (rdp_event_new(&e) < 0)
		return;
	rdp_alloc_fail_at(fail_at);
	if (rdp_http_server_new(e, "127.0.0.1:0", NULL, handler, &t, &s) == 0 &&
	    rdp_http_server_add_path(s, "/metrics") == 0 &&
	    rdp_http_server_local_address(s, addr, sizeof(addr)) == 0) {
		fd = client_connect(addr);
		client_send(fd, "GET /metrics HTTP/1.1\r\n\r\n");
		client_read(e, fd, buf, sizeof(buf), 1, 300, &eof);
		/* the answer, or the connection closed without one */
		EXPECT_TRUE(strstr(buf, "HTTP/1.1 200 OK") == buf ||
			    strstr(buf, "HTTP/1.1 503 ") == buf || (eof && !buf[0]));
		close(fd);
	}
	for (k = 0; k < 3; k++)
		(void)rdp_event_run_once(e, 1);
	rdp_http_server_free(s);
	rdp_event_free(e);
}

static void test_alloc_failures(void)
{
	unsigned long total, i;

	alloc_scenario(0);
	total = rdp_alloc_count();
	EXPECT_TRUE(total >= 4);
	for (i = 1; i <= total; i++) {
		alloc_scenario(i);
		rdp_alloc_fail_at(0);
	}
}

int main(void)
{
	test_addresses();
	test_memory();
	test_sockets();
	test_per_client();
	test_any_address();
	test_alloc_failures();
	return test_summary("test-http-server");
}
