/* SPDX-License-Identifier: MIT */
/*
 * The HTTP server's request side on arbitrary client bytes: a memory connection of the real
 * server (http-parser, limits, answers) fed in chunks of pseudo-random sizes, the output
 * drained after each, sometimes only in part; the handler answers at once, later, or the
 * client goes away meanwhile.
 *
 * Input: byte 0 picks the limits (small or default), byte 1 seeds the chunking and the
 * handler's choices; the rest is what the client sends.
 *
 * Checks beyond "no crash, no leak": every response starts with an HTTP/1.1 status line with
 * one of the documented codes and ends its headers; the handler only sees GET or HEAD of a
 * served path without a query string; a closed connection takes no more input.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "http-server-internal.h"
#include "http-server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct ctx {
	unsigned int x;
	struct rdp_http_request *pending;
	size_t handled;
};

static unsigned int next_rand(struct ctx *t)
{
	t->x = t->x * 1103515245u + 12345u;
	return t->x >> 16;
}

static void answer(struct rdp_http_request *r, struct ctx *t)
{
	static const int codes[] = { 200, 200, 503, 204 };
	size_t len = next_rand(t) % 64;
	char *body = len ? rdp_malloc(len) : NULL;

	if (body)
		memset(body, 'm', len);
	(void)rdp_http_respond(r, codes[next_rand(t) % 4], NULL, body, body ? len : 0);
}

static void handler(struct rdp_http_request *r, void *userdata)
{
	struct ctx *t = userdata;
	const char *path = rdp_http_request_path(r);

	if (strcmp(path, "/metrics") && strcmp(path, "/healthz"))
		__builtin_trap();
	t->handled++;
	if (t->pending || next_rand(t) % 2)
		answer(r, t);
	else
		t->pending = r; /* answered later, as the daemon answers /metrics */
}

static bool code_allowed(const char *p)
{
	static const char *const ok[] = { "200", "204", "400", "404", "405", "408", "413",
					  "414", "417", "429", "431", "500", "503", "505" };
	size_t i;

	for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!memcmp(p, ok[i], 3))
			return true;
	return false;
}

/* Response heads in out[0..len) (bodies are letters or text): each starts a status line. */
static void check_output(const char *out, size_t len)
{
	const char *p = out, *end = out + len;

	while (p < end) {
		const char *h = memmem(p, (size_t)(end - p), "HTTP/1.1 ", 9);
		const char *e;

		if (!h)
			break;
		if ((size_t)(end - h) < 12 || !code_allowed(h + 9))
			__builtin_trap();
		e = memmem(h, (size_t)(end - h), "\r\n\r\n", 4);
		if (!e)
			break; /* the rest was not read */
		p = e + 4;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdp_http_limits small = {
		.max_connections = 1,
		.max_header_bytes = 200,
		.max_url = 40,
		.max_requests_per_conn = 3,
		.rate_per_sec = 1,
		.rate_burst = 5,
	};
	struct rdp_http_server *s = NULL;
	struct rdp_http_conn *c = NULL;
	struct ctx t = { 0 };
	static char out[1 << 16];
	size_t off = 0, olen = 0;
	int rounds = 0;

	if (size < 2 || size > 1 << 16)
		return 0;
	t.x = data[1] | 1u;
	if (rdp_http_server_new_memory(data[0] & 1 ? &small : NULL, handler, &t, &s) < 0)
		return 0;
	if (rdp_http_server_add_path(s, "/metrics") < 0 || rdp_http_server_add_path(s, "/healthz") < 0 ||
	    rdp_http_conn_new_memory(s, &c) < 0)
		goto out;
	data += 2;
	size -= 2;
	while (rounds++ < 100000) {
		size_t chunk = 1 + next_rand(&t) % 300, took = 0, n;

		if (off < size) {
			if (chunk > size - off)
				chunk = size - off;
			took = rdp_http_conn_feed(c, data + off, chunk);
			off += took;
		}
		if (rdp_http_conn_is_closed(c) && took)
			__builtin_trap();
		/* drain: all of it, or only a part now and then */
		do {
			size_t want = next_rand(&t) % 4 ? sizeof(out) - olen : 1 + next_rand(&t) % 16;

			if (olen == sizeof(out)) {
				check_output(out, olen);
				olen = 0;
			}
			if (want > sizeof(out) - olen)
				want = sizeof(out) - olen;
			n = rdp_http_conn_read_output(c, out + olen, want);
			olen += n;
		} while (n && next_rand(&t) % 8);
		if (t.pending) {
			switch (next_rand(&t) % 4) {
			case 0:
				rdp_http_conn_peer_close(c);
				break;
			case 1:
				break; /* still thinking */
			default: {
				struct rdp_http_request *r = t.pending;

				t.pending = NULL;
				answer(r, &t);
			}
			}
		}
		if (rdp_http_conn_is_closed(c) && !t.pending)
			break;
		if (off >= size && !took && !n && !t.pending)
			break;
	}
	check_output(out, olen);
out:
	/* a request still held: the server goes first, then the answer (it only frees) */
	c = rdp_http_conn_free(c);
	s = rdp_http_server_free(s);
	if (t.pending)
		answer(t.pending, &t);
	return 0;
}
