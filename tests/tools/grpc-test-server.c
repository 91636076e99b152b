/* SPDX-License-Identifier: MIT */
/*
 * A tiny gRPC server on the project's event loop and gRPC layer, for the wire tests
 * (tests/integration/test_grpc_wire.py). Messages are raw bytes, no protobuf:
 *
 *   /test.Test/Echo    unary: answers the request; "fail:<code>:<text>" fails with that
 *                      status and text; "big:<n>" answers n bytes
 *   /test.Test/Stream  server-streaming: request "<n>", sends "msg-0".."msg-<n-1>", one per
 *                      loop turn, then OK
 *   /test.Test/Watch   server-streaming: sends "hello" and keeps the stream open
 *   /test.Test/Slow    unary: request "<ms>", answers "done" after that many milliseconds
 *   /test.Test/Stats   unary: "calls=<n> closes=<n> open=<n> conns=<n>"
 *
 * Usage: grpc-test-server SOCKET [MAX_MESSAGE [HANDSHAKE_MS [IDLE_MS]]] (request limit,
 * default 4 MiB; connection timeouts, 0 = none, defaults those of src/rpc/grpc.h). Exits 0 on
 * SIGTERM/SIGINT.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event.h"
#include "grpc.h"
#include "macro.h"

struct pending {
	struct rdp_grpc_call *call;
	struct rdp_event_source *timer;
	unsigned sent, total;
	bool streaming;
};

static struct rdp_event *loop;
static struct rdp_grpc_server *server;
static unsigned n_calls, n_closes, n_open;

static void pending_free(struct pending *p)
{
	rdp_event_source_free(p->timer);
	if (p->streaming)
		n_open--;
	rdp_free(p);
}

static void on_close(struct rdp_grpc_call *c, void *userdata)
{
	n_closes++;
	pending_free(userdata);
}

static void echo(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *userdata)
{
	char buf[256];

	n_calls++;
	snprintf(buf, sizeof(buf), "%.*s", (int)(len < 255 ? len : 255), (const char *)req);
	if (strncmp(buf, "fail:", 5) == 0) {
		char *end;
		long code = strtol(buf + 5, &end, 10);

		rdp_grpc_call_fail(c, (enum rdp_grpc_code)code, *end == ':' ? end + 1 : "");
		return;
	}
	if (strncmp(buf, "big:", 4) == 0) {
		size_t n = strtoul(buf + 4, NULL, 10);
		uint8_t *big = rdp_calloc(1, n ? n : 1);

		if (!big) {
			rdp_grpc_call_fail(c, RDP_GRPC_RESOURCE_EXHAUSTED, "no memory");
			return;
		}
		memset(big, 'x', n);
		rdp_grpc_call_reply(c, big, n);
		rdp_free(big);
		return;
	}
	rdp_grpc_call_reply(c, req, len);
}

static int stream_tick(struct rdp_event_source *s, void *userdata)
{
	struct pending *p = userdata;
	char msg[32];

	if (p->sent == p->total) {
		struct rdp_grpc_call *c = p->call;

		pending_free(p);
		rdp_grpc_call_fail(c, RDP_GRPC_OK, "");
		return 0;
	}
	snprintf(msg, sizeof(msg), "msg-%u", p->sent++);
	rdp_grpc_call_send(p->call, (const uint8_t *)msg, strlen(msg));
	return rdp_event_source_set_timer(s, 1000);
}

static struct pending *pending_new(struct rdp_grpc_call *c, bool streaming)
{
	struct pending *p = rdp_calloc(1, sizeof(*p));

	if (!p) {
		rdp_grpc_call_fail(c, RDP_GRPC_RESOURCE_EXHAUSTED, "no memory");
		return NULL;
	}
	p->call = c;
	p->streaming = streaming;
	if (streaming)
		n_open++;
	rdp_grpc_call_set_close_cb(c, on_close, p);
	return p;
}

static void stream(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *userdata)
{
	char buf[32];
	struct pending *p;

	n_calls++;
	snprintf(buf, sizeof(buf), "%.*s", (int)(len < 31 ? len : 31), (const char *)req);
	p = pending_new(c, true);
	if (!p)
		return;
	p->total = (unsigned)strtoul(buf, NULL, 10);
	if (rdp_event_add_timer(loop, 1, stream_tick, p, &p->timer) < 0) {
		pending_free(p);
		rdp_grpc_call_fail(c, RDP_GRPC_RESOURCE_EXHAUSTED, "no timer");
	}
}

static void watch(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *userdata)
{
	n_calls++;
	if (!pending_new(c, true))
		return;
	rdp_grpc_call_send(c, (const uint8_t *)"hello", 5);
}

static int slow_done(struct rdp_event_source *s, void *userdata)
{
	struct pending *p = userdata;
	struct rdp_grpc_call *c = p->call;

	pending_free(p);
	rdp_grpc_call_reply(c, (const uint8_t *)"done", 4);
	return 0;
}

static void slow(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *userdata)
{
	char buf[32];
	struct pending *p;

	n_calls++;
	snprintf(buf, sizeof(buf), "%.*s", (int)(len < 31 ? len : 31), (const char *)req);
	p = pending_new(c, false);
	if (!p)
		return;
	if (rdp_event_add_timer(loop, strtoull(buf, NULL, 10) * 1000 + 1, slow_done, p,
				&p->timer) < 0) {
		pending_free(p);
		rdp_grpc_call_fail(c, RDP_GRPC_RESOURCE_EXHAUSTED, "no timer");
	}
}

static void stats(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *userdata)
{
	char buf[128];

	snprintf(buf, sizeof(buf), "calls=%u closes=%u open=%u conns=%zu", n_calls, n_closes,
		 n_open, rdp_grpc_server_connections(server));
	rdp_grpc_call_reply(c, (const uint8_t *)buf, strlen(buf));
}

static int on_signal(struct rdp_event_source *s, const struct signalfd_siginfo *si, void *ud)
{
	rdp_event_exit(loop, 0);
	return 0;
}

static const struct rdp_grpc_method methods[] = {
	{ .path = "/test.Test/Echo", .handler = echo },
	{ .path = "/test.Test/Stream", .handler = stream, .server_streaming = true },
	{ .path = "/test.Test/Watch", .handler = watch, .server_streaming = true },
	{ .path = "/test.Test/Slow", .handler = slow },
	{ .path = "/test.Test/Stats", .handler = stats },
};

int main(int argc, char **argv)
{
	struct rdp_event_source *sigterm = NULL, *sigint = NULL;
	struct rdp_grpc_limits limits;
	int r;

	if (argc < 2) {
		fprintf(stderr, "usage: %s SOCKET [MAX_MESSAGE [HANDSHAKE_MS [IDLE_MS]]]\n",
			argv[0]);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	rdp_grpc_limits_default(&limits);
	/* a server that chooses grpc-go's 4 MiB, both ways; the daemon keeps 256 KiB requests */
	limits.max_message = 4u << 20;
	if (argc > 2)
		limits.max_message = strtoul(argv[2], NULL, 10);
	if (argc > 3)
		limits.handshake_timeout_usec = strtoull(argv[3], NULL, 10) * 1000;
	if (argc > 4)
		limits.idle_timeout_usec = strtoull(argv[4], NULL, 10) * 1000;
	r = rdp_event_new(&loop);
	if (r < 0)
		goto fail;
	r = rdp_event_add_signal(loop, SIGTERM, on_signal, NULL, &sigterm);
	if (r < 0)
		goto fail;
	r = rdp_event_add_signal(loop, SIGINT, on_signal, NULL, &sigint);
	if (r < 0)
		goto fail;
	r = rdp_grpc_server_new(loop, argv[1], methods, ARRAY_SIZE(methods), &limits, NULL,
				&server);
	if (r < 0)
		goto fail;
	printf("ready\n");
	fflush(stdout);
	r = rdp_event_run(loop);
	server = rdp_grpc_server_free(server);
	loop = rdp_event_free(loop);
	return r < 0 ? 1 : r;
fail:
	fprintf(stderr, "grpc-test-server: %s\n", strerror(-r));
	rdp_grpc_server_free(server);
	rdp_event_free(loop);
	return 1;
}
