/* SPDX-License-Identifier: MIT */
/*
 * A whole gRPC server session (HTTP/2 over a memory connection) fed arbitrary client bytes:
 * h2.c, grpc.c, grpc-frame.c and nghttp2 together, as nghttp2's own fuzz target does.
 *
 * The input is what a client sends, raw (corpus files start with the client preface). It is
 * fed in chunks of pseudo-random sizes (seeded by the input length); after each chunk the
 * event loop runs once and the output is drained, sometimes only in part, so backpressure is
 * exercised too. Small limits make the limit paths reachable.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "grpc.h"
#include "h2.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned int n_open;

static void on_close(struct rdp_grpc_call *c, void *ud)
{
	if (n_open == 0)
		abort(); /* a close callback for a call we do not hold */
	n_open--;
}

static void echo(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	if (len >= 4 && !memcmp(req, "fail", 4)) {
		(void)rdp_grpc_call_fail(c, RDP_GRPC_INVALID_ARGUMENT, "no\n100% \xff");
		return;
	}
	(void)rdp_grpc_call_reply(c, req, len);
}

/* Server streaming: two messages at once (the second may coalesce), then held open. */
static void watch(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	if (rdp_grpc_call_send(c, req, len) < 0 ||
	    rdp_grpc_call_send(c, (const uint8_t *)"x", 1) < 0) {
		(void)rdp_grpc_call_fail(c, RDP_GRPC_INTERNAL, "send");
		return;
	}
	n_open++;
	rdp_grpc_call_set_close_cb(c, on_close, NULL);
}

/* Unary, never answered: ends with the connection, a reset or the server. */
static void hold(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	n_open++;
	rdp_grpc_call_set_close_cb(c, on_close, NULL);
}

static void none(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	(void)rdp_grpc_call_fail(c, RDP_GRPC_OK, "");
}

static const struct rdp_grpc_method methods[] = {
	{ .path = "/t.T/Echo", .handler = echo },
	{ .path = "/t.T/Watch", .handler = watch, .server_streaming = true },
	{ .path = "/t.T/Hold", .handler = hold },
	{ .path = "/t.T/None", .handler = none },
};

/* Reads every output byte, so ASan sees a stale or short buffer. */
static void touch(const uint8_t *p, size_t n)
{
	uint8_t x = 0;

	for (size_t i = 0; i < n; i++)
		x ^= p[i];
	__asm__ volatile("" : : "r"(x));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdp_grpc_limits l;
	struct rdp_event *e = NULL;
	struct rdp_grpc_server *s = NULL;
	struct rdp_h2 *h;
	unsigned int x = (unsigned int)size * 2654435761u + 1;
	size_t off = 0;

	if (size > 1 << 16)
		return 0;
	rdp_grpc_limits_default(&l);
	l.max_message = 1024;
	l.max_streams = 8;
	l.max_header_list = 2048;
	l.max_output = 4096;
	n_open = 0;
	if (rdp_event_new(&e) < 0)
		abort();
	if (rdp_grpc_server_new(e, NULL, methods, sizeof(methods) / sizeof(methods[0]), &l, NULL,
				&s) < 0)
		abort();
	if (rdp_grpc_server_add_memory_conn(s, &h) < 0)
		abort();

	while (off < size) {
		const uint8_t *p;
		size_t chunk, out;
		int r;

		x = x * 1103515245u + 12345u;
		chunk = (x >> 16) & 1 ? size - off : 1 + (x >> 17) % 256;
		if (chunk > size - off)
			chunk = size - off;
		r = rdp_h2_feed(h, data + off, chunk);
		off += chunk;
		(void)rdp_event_run_once(e, 0);
		out = rdp_h2_output(h, &p);
		touch(p, out);
		if (out > 0)
			rdp_h2_consume(h, (x >> 20) & 1 ? out : out / 2 + 1);
		if (r < 0 && !rdp_h2_is_closed(h))
			abort(); /* an error ends the session */
		if (rdp_h2_is_closed(h))
			break;
	}
	/* the peer reads everything that is left */
	for (int i = 0; i < 64; i++) {
		const uint8_t *p;
		size_t out = rdp_h2_output(h, &p);

		if (!out)
			break;
		touch(p, out);
		rdp_h2_consume(h, out);
	}
	s = rdp_grpc_server_free(s);
	if (n_open != 0)
		abort(); /* every held call heard of its end */
	e = rdp_event_free(e);
	return 0;
}
