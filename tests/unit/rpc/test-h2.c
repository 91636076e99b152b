/* SPDX-License-Identifier: MIT */
/*
 * A whole gRPC server session driven from byte buffers: a client-side nghttp2 session in the
 * test produces the request bytes, the server connection (rdp_grpc_server_add_memory_conn)
 * consumes them, and its output goes back into the client session, which records what a
 * grpc-go client would see.
 */
#include <errno.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "event.h"
#include "grpc-frame.h"
#include "grpc.h"
#include "h2.h"
#include "macro.h"
#include "test.h"

struct resp {
	int32_t id;
	char status[8], ct[64], grpc_message[256];
	int grpc_status;
	unsigned header_blocks;
	bool trailers_end_stream, data_end_stream, closed, pseudo_in_trailers, upper_case;
	uint32_t rst;
	uint8_t data[4096];
	size_t data_len;
};

struct body {
	const uint8_t *p;
	size_t len, off, chunk;
	bool end;
};

struct client {
	nghttp2_session *s;
	struct rdp_h2 *srv;
	struct resp r[32];
	struct body b[32];
	size_t n;
	bool goaway;
	uint32_t goaway_code;
};

static struct resp *find(struct client *cl, int32_t id)
{
	size_t i;

	for (i = 0; i < cl->n; i++)
		if (cl->r[i].id == id)
			return &cl->r[i];
	return NULL;
}

static int c_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
		    const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
	struct resp *r = find(ud, f->hd.stream_id);
	size_t i;

	if (!r)
		return 0;
	for (i = 0; i < nl; i++)
		if (name[i] >= 'A' && name[i] <= 'Z')
			r->upper_case = true;
	if (r->header_blocks > 0 && name[0] == ':')
		r->pseudo_in_trailers = true;
#define COPY(field) snprintf(r->field, sizeof(r->field), "%.*s", (int)vl, (const char *)value)
	if (nl == 7 && !memcmp(name, ":status", 7))
		COPY(status);
	else if (nl == 12 && !memcmp(name, "content-type", 12))
		COPY(ct);
	else if (nl == 12 && !memcmp(name, "grpc-message", 12))
		COPY(grpc_message);
	else if (nl == 11 && !memcmp(name, "grpc-status", 11))
		r->grpc_status = atoi((const char *)value);
	return 0;
}

static int c_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct client *cl = ud;
	struct resp *r = find(cl, f->hd.stream_id);

	if (f->hd.type == NGHTTP2_GOAWAY) {
		cl->goaway = true;
		cl->goaway_code = f->goaway.error_code;
	}
	if (!r)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS) {
		r->header_blocks++;
		if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
			r->trailers_end_stream = true;
	}
	if (f->hd.type == NGHTTP2_DATA && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		r->data_end_stream = true;
	if (f->hd.type == NGHTTP2_RST_STREAM)
		r->rst = f->rst_stream.error_code;
	return 0;
}

static int c_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
		  void *ud)
{
	struct resp *r = find(ud, id);

	if (r && r->data_len + len <= sizeof(r->data)) {
		memcpy(r->data + r->data_len, data, len);
		r->data_len += len;
	}
	return 0;
}

static int c_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
	struct resp *r = find(ud, id);

	if (r)
		r->closed = true;
	return 0;
}

static ssize_t c_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
		      uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct body *b = src->ptr;
	size_t n = b->len - b->off;

	if (n > b->chunk)
		n = b->chunk;
	if (n > length)
		n = length;
	if (n)
		memcpy(buf, b->p + b->off, n);
	b->off += n;
	if (b->off == b->len) {
		if (!b->end)
			return n ? (ssize_t)n : NGHTTP2_ERR_DEFERRED;
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	}
	return (ssize_t)n;
}

static void client_init(struct client *cl, struct rdp_h2 *srv)
{
	nghttp2_session_callbacks *cbs;
	nghttp2_option *opt;

	memset(cl, 0, sizeof(*cl));
	cl->srv = srv;
	nghttp2_session_callbacks_new(&cbs);
	nghttp2_session_callbacks_set_on_header_callback(cbs, c_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, c_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, c_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, c_close);
	nghttp2_option_new(&opt);
	/* we want to see exactly what the server sends, also what nghttp2 would refuse */
	nghttp2_option_set_no_http_messaging(opt, 1);
	nghttp2_session_client_new2(&cl->s, cbs, cl, opt);
	nghttp2_submit_settings(cl->s, NGHTTP2_FLAG_NONE, NULL, 0);
	nghttp2_session_callbacks_del(cbs);
	nghttp2_option_del(opt);
}

static void client_done(struct client *cl)
{
	nghttp2_session_del(cl->s);
}

/* Moves bytes both ways until neither side has anything more to say. */
static void pump(struct client *cl, struct rdp_event *e)
{
	int i;

	for (i = 0; i < 1000; i++) {
		const uint8_t *p;
		bool progress = false;
		ssize_t n;
		size_t out;

		while ((n = nghttp2_session_mem_send(cl->s, &p)) > 0) {
			(void)rdp_h2_feed(cl->srv, p, (size_t)n);
			progress = true;
		}
		(void)rdp_event_run_once(e, 0);
		out = rdp_h2_output(cl->srv, &p);
		if (out) {
			(void)nghttp2_session_mem_recv(cl->s, p, out);
			rdp_h2_consume(cl->srv, out);
			progress = true;
		}
		if (!progress)
			break;
	}
}

#define H(n, v) { (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE }

static struct resp *request(struct client *cl, const char *path, const char *authority,
			    const nghttp2_nv *extra, size_t n_extra, const uint8_t *body,
			    size_t len, size_t chunk, bool end)
{
	nghttp2_nv nva[16] = {
		H(":method", "POST"), H(":scheme", "http"), H(":path", path),
		H(":authority", authority), H("content-type", "application/grpc"),
		H("te", "trailers"),
	};
	size_t n = 6, i;
	struct body *b = &cl->b[cl->n];
	nghttp2_data_provider dp = { .source.ptr = b, .read_callback = c_read };
	int32_t id;

	for (i = 0; i < n_extra; i++)
		nva[n++] = extra[i];
	*b = (struct body){ .p = body, .len = len, .chunk = chunk ? chunk : 16384, .end = end };
	id = nghttp2_submit_request(cl->s, NULL, nva, n, (len || end) ? &dp : NULL, NULL);
	cl->r[cl->n] = (struct resp){ .id = id, .grpc_status = -1, .rst = 0xffffffff };
	return &cl->r[cl->n++];
}

static size_t msg(uint8_t *out, const char *s)
{
	rdp_grpc_prefix(out, strlen(s));
	memcpy(out + RDP_GRPC_PREFIX_LEN, s, strlen(s));
	return RDP_GRPC_PREFIX_LEN + strlen(s);
}

/* ---- the methods ---- */

static struct rdp_grpc_call *held;
static int n_closed, n_handled;
static size_t last_req_len;

static void on_close(struct rdp_grpc_call *c, void *ud)
{
	n_closed++;
	if (c == held)
		held = NULL;
}

static void echo(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	n_handled++;
	last_req_len = len;
	if (len >= 5 && !memcmp(req, "fail:", 5)) {
		rdp_grpc_call_fail(c, RDP_GRPC_INVALID_ARGUMENT, "bad\nthing 100%");
		return;
	}
	rdp_grpc_call_reply(c, req, len);
}

static void hold(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	n_handled++;
	held = c;
	rdp_grpc_call_set_close_cb(c, on_close, NULL);
}

static const struct rdp_grpc_method methods[] = {
	{ .path = "/t.T/Echo", .handler = echo },
	{ .path = "/t.T/Hold", .handler = hold },
	{ .path = "/t.T/Watch", .handler = hold, .server_streaming = true },
};

struct env {
	struct rdp_event *e;
	struct rdp_grpc_server *s;
	struct rdp_h2 *h;
	struct client cl;
};

static void env_init(struct env *v, const struct rdp_grpc_limits *l)
{
	EXPECT_EQ(rdp_event_new(&v->e), 0);
	EXPECT_EQ(rdp_grpc_server_new(v->e, NULL, methods, ARRAY_SIZE(methods), l, NULL, &v->s), 0);
	EXPECT_EQ(rdp_grpc_server_add_memory_conn(v->s, &v->h), 0);
	client_init(&v->cl, v->h);
	held = NULL;
	n_closed = n_handled = 0;
}

static void env_done(struct env *v)
{
	client_done(&v->cl);
	v->s = rdp_grpc_server_free(v->s);
	v->e = rdp_event_free(v->e);
}

/* ---- the tests ---- */

static void expect_ok_response(struct resp *r, const uint8_t *body, size_t len)
{
	EXPECT_STREQ(r->status, "200");
	EXPECT_STREQ(r->ct, "application/grpc");
	EXPECT_EQ(r->grpc_status, 0);
	EXPECT_EQ(r->header_blocks, 2); /* response headers + trailers */
	EXPECT_TRUE(r->trailers_end_stream);
	EXPECT_TRUE(!r->data_end_stream); /* never END_STREAM on DATA */
	EXPECT_TRUE(!r->pseudo_in_trailers);
	EXPECT_TRUE(!r->upper_case);
	EXPECT_TRUE(r->closed);
	EXPECT_EQ(r->data_len, len);
	EXPECT_TRUE(r->data_len == len && memcmp(r->data, body, len) == 0);
}

static void test_settings_first(void)
{
	struct env v;
	const uint8_t *p;
	size_t n;

	env_init(&v, NULL);
	n = rdp_h2_output(v.h, &p);
	/* before the client said anything: our SETTINGS frame is already there */
	EXPECT_TRUE(n >= 9);
	EXPECT_EQ(p[3], NGHTTP2_SETTINGS);
	EXPECT_EQ(p[4] & NGHTTP2_FLAG_ACK, 0);
	env_done(&v);
}

static void test_unary(void)
{
	struct env v;
	uint8_t body[64];
	size_t len = msg(body, "hello");
	struct resp *r;

	env_init(&v, NULL);
	r = request(&v.cl, "/t.T/Echo", "localhost", NULL, 0, body, len, 0, true);
	pump(&v.cl, v.e);
	expect_ok_response(r, body, len);
	/* split into 1-byte DATA frames */
	r = request(&v.cl, "/t.T/Echo", "localhost", NULL, 0, body, len, 1, true);
	pump(&v.cl, v.e);
	expect_ok_response(r, body, len);
	/* an empty message is still 5 bytes each way */
	len = msg(body, "");
	r = request(&v.cl, "/t.T/Echo", "localhost", NULL, 0, body, len, 2, true);
	pump(&v.cl, v.e);
	expect_ok_response(r, body, len);
	EXPECT_EQ(last_req_len, 0);
	EXPECT_EQ(n_handled, 3);
	env_done(&v);
}

static void test_authority(void)
{
	static const char *const auths[] = { "localhost", "/var/lib/kubelet/device-plugins/x.sock",
					     "%2Fvar%2Flib%2Fkubelet%2Fx.sock" };
	struct env v;
	uint8_t body[64];
	size_t len = msg(body, "a"), i;

	env_init(&v, NULL);
	for (i = 0; i < ARRAY_SIZE(auths); i++) {
		struct resp *r = request(&v.cl, "/t.T/Echo", auths[i], NULL, 0, body, len, 0, true);

		pump(&v.cl, v.e);
		expect_ok_response(r, body, len);
	}
	env_done(&v);
}

static void test_errors(void)
{
	struct env v;
	uint8_t body[256];
	size_t len;
	struct resp *r;

	env_init(&v, NULL);
	/* handler error: trailers-only, percent-encoded message */
	len = msg(body, "fail:");
	r = request(&v.cl, "/t.T/Echo", "localhost", NULL, 0, body, len, 0, true);
	pump(&v.cl, v.e);
	EXPECT_EQ(r->header_blocks, 1);
	EXPECT_TRUE(r->trailers_end_stream);
	EXPECT_STREQ(r->status, "200");
	EXPECT_STREQ(r->ct, "application/grpc");
	EXPECT_EQ(r->grpc_status, RDP_GRPC_INVALID_ARGUMENT);
	EXPECT_STREQ(r->grpc_message, "bad%0Athing 100%25");
	EXPECT_EQ(r->data_len, 0);

	/* two messages in one DATA frame on a unary method */
	len = msg(body, "one");
	len += msg(body + len, "two");
	r = request(&v.cl, "/t.T/Echo", "localhost", NULL, 0, body, len, 0, true);
	pump(&v.cl, v.e);
	EXPECT_EQ(r->grpc_status, RDP_GRPC_INTERNAL);
	EXPECT_CONTAINS(r->grpc_message, "cardinality violation");

	/* no message at all */
	r = request(&v.cl, "/t.T/Echo", "localhost", NULL, 0, NULL, 0, 0, true);
	pump(&v.cl, v.e);
	EXPECT_EQ(r->grpc_status, RDP_GRPC_INTERNAL);

	/* half a message, then END_STREAM */
	len = msg(body, "truncated");
	r = request(&v.cl, "/t.T/Echo", "localhost", NULL, 0, body, len - 3, 0, true);
	pump(&v.cl, v.e);
	EXPECT_EQ(r->grpc_status, RDP_GRPC_INTERNAL);

	/* compressed flag */
	len = msg(body, "zip");
	body[0] = 1;
	r = request(&v.cl, "/t.T/Echo", "localhost", NULL, 0, body, len, 0, true);
	pump(&v.cl, v.e);
	EXPECT_EQ(r->grpc_status, RDP_GRPC_INTERNAL);

	/* unknown method, client still sending: trailers-only then RST_STREAM(NO_ERROR) */
	len = msg(body, "x");
	r = request(&v.cl, "/t.T/Nope", "localhost", NULL, 0, body, len, 0, false);
	pump(&v.cl, v.e);
	EXPECT_EQ(r->grpc_status, RDP_GRPC_UNIMPLEMENTED);
	EXPECT_EQ(r->header_blocks, 1);
	EXPECT_STREQ(r->grpc_message, "unknown method Nope for service t.T");
	EXPECT_EQ(r->rst, NGHTTP2_NO_ERROR);
	r = request(&v.cl, "nonsense", "localhost", NULL, 0, body, len, 0, true);
	pump(&v.cl, v.e);
	EXPECT_EQ(r->grpc_status, RDP_GRPC_UNIMPLEMENTED);
	EXPECT_CONTAINS(r->grpc_message, "malformed method name");

	/* not POST, not gRPC, bad timeout: early aborts with the HTTP status grpc-go uses */
	{
		nghttp2_nv get[] = { H(":method", "GET"), H(":scheme", "http"),
				     H(":path", "/t.T/Echo"), H(":authority", "x"),
				     H("content-type", "application/grpc") };
		nghttp2_nv json[] = { H(":method", "POST"), H(":scheme", "http"),
				      H(":path", "/t.T/Echo"), H(":authority", "x"),
				      H("content-type", "application/json") };
		nghttp2_nv conn[] = { H(":method", "POST"), H(":scheme", "http"),
				      H(":path", "/t.T/Echo"), H("connection", "close"),
				      H("content-type", "application/grpc") };
		nghttp2_nv tmo[] = { H("grpc-timeout", "soon") };
		int32_t id;

		id = nghttp2_submit_request(v.cl.s, NULL, get, ARRAY_SIZE(get), NULL, NULL);
		v.cl.r[v.cl.n] = (struct resp){ .id = id, .grpc_status = -1, .rst = 0xffffffff };
		r = &v.cl.r[v.cl.n++];
		pump(&v.cl, v.e);
		EXPECT_STREQ(r->status, "405");
		EXPECT_EQ(r->grpc_status, RDP_GRPC_INTERNAL);

		id = nghttp2_submit_request(v.cl.s, NULL, json, ARRAY_SIZE(json), NULL, NULL);
		v.cl.r[v.cl.n] = (struct resp){ .id = id, .grpc_status = -1, .rst = 0xffffffff };
		r = &v.cl.r[v.cl.n++];
		pump(&v.cl, v.e);
		EXPECT_STREQ(r->status, "415");
		EXPECT_EQ(r->grpc_status, RDP_GRPC_INVALID_ARGUMENT);

		id = nghttp2_submit_request(v.cl.s, NULL, conn, ARRAY_SIZE(conn), NULL, NULL);
		v.cl.r[v.cl.n] = (struct resp){ .id = id, .grpc_status = -1, .rst = 0xffffffff };
		r = &v.cl.r[v.cl.n++];
		pump(&v.cl, v.e);
		EXPECT_EQ(r->rst, NGHTTP2_PROTOCOL_ERROR);
		EXPECT_EQ(r->header_blocks, 0);

		r = request(&v.cl, "/t.T/Echo", "localhost", tmo, 1, body, len, 0, true);
		pump(&v.cl, v.e);
		EXPECT_STREQ(r->status, "400");
		EXPECT_EQ(r->grpc_status, RDP_GRPC_INTERNAL);
	}
	EXPECT_EQ(n_handled, 1); /* only "fail:" reached a handler */
	/* the connection survived all of it */
	len = msg(body, "fine");
	r = request(&v.cl, "/t.T/Echo", "localhost", NULL, 0, body, len, 0, true);
	pump(&v.cl, v.e);
	expect_ok_response(r, body, len);
	EXPECT_TRUE(!v.cl.goaway);
	env_done(&v);
}

static void test_message_limit(void)
{
	struct rdp_grpc_limits l;
	struct env v;
	static uint8_t body[3000];
	struct resp *r;

	rdp_grpc_limits_default(&l);
	l.max_message = 1000;
	env_init(&v, &l);
	rdp_grpc_prefix(body, 1000);
	memset(body + 5, 'a', 1000);
	r = request(&v.cl, "/t.T/Echo", "localhost", NULL, 0, body, 1005, 100, true);
	pump(&v.cl, v.e);
	expect_ok_response(r, body, 1005);
	rdp_grpc_prefix(body, 1001);
	memset(body + 5, 'b', 1001);
	r = request(&v.cl, "/t.T/Echo", "localhost", NULL, 0, body, 1006, 100, true);
	pump(&v.cl, v.e);
	EXPECT_EQ(r->grpc_status, RDP_GRPC_RESOURCE_EXHAUSTED);
	EXPECT_STREQ(r->grpc_message, "grpc: received message larger than max (1001 vs. 1000)");
	EXPECT_EQ(r->data_len, 0);
	EXPECT_EQ(n_handled, 1);
	env_done(&v);
}

static void test_streaming(void)
{
	struct env v;
	uint8_t body[64], expect[64];
	size_t len = msg(body, ""), n;
	struct resp *r;

	env_init(&v, NULL);
	/* kubelet's ListAndWatch: 00 00 00 00 00 + END_STREAM */
	r = request(&v.cl, "/t.T/Watch", "localhost", NULL, 0, body, len, 0, true);
	pump(&v.cl, v.e);
	EXPECT_TRUE(held != NULL);
	EXPECT_EQ(r->header_blocks, 0); /* nothing sent yet: no headers either */
	EXPECT_EQ(rdp_grpc_call_send(held, (const uint8_t *)"s1", 2), 0);
	pump(&v.cl, v.e);
	EXPECT_EQ(r->header_blocks, 1);
	EXPECT_STREQ(r->status, "200");
	n = msg(expect, "s1");
	EXPECT_TRUE(r->data_len == n && !memcmp(r->data, expect, n));
	EXPECT_TRUE(!r->closed);
	/* three snapshots before the peer reads: only the newest is delivered */
	EXPECT_EQ(rdp_grpc_call_send(held, (const uint8_t *)"s2", 2), 0);
	EXPECT_EQ(rdp_grpc_call_send(held, (const uint8_t *)"s3", 2), 0);
	EXPECT_EQ(rdp_grpc_call_send(held, (const uint8_t *)"s4", 2), 0);
	pump(&v.cl, v.e);
	n += msg(expect + n, "s4");
	EXPECT_TRUE(r->data_len == n && !memcmp(r->data, expect, n));
	/* ending it: trailers, DATA never carries END_STREAM */
	EXPECT_EQ(rdp_grpc_call_fail(held, RDP_GRPC_OK, ""), 0);
	held = NULL;
	pump(&v.cl, v.e);
	EXPECT_TRUE(r->closed);
	EXPECT_EQ(r->grpc_status, 0);
	EXPECT_TRUE(r->trailers_end_stream && !r->data_end_stream);
	EXPECT_EQ(n_closed, 0); /* the handler ended it: no close callback */

	/* peer cancels: close callback */
	r = request(&v.cl, "/t.T/Watch", "localhost", NULL, 0, body, len, 0, true);
	pump(&v.cl, v.e);
	EXPECT_TRUE(held != NULL);
	EXPECT_EQ(rdp_grpc_call_send(held, (const uint8_t *)"x", 1), 0);
	pump(&v.cl, v.e);
	nghttp2_submit_rst_stream(v.cl.s, NGHTTP2_FLAG_NONE, r->id, NGHTTP2_CANCEL);
	pump(&v.cl, v.e);
	EXPECT_EQ(n_closed, 1);
	EXPECT_TRUE(held == NULL);

	/* a unary call held by its handler sees the close callback when the server goes */
	r = request(&v.cl, "/t.T/Hold", "localhost", NULL, 0, body, len, 0, true);
	pump(&v.cl, v.e);
	EXPECT_TRUE(held != NULL);
	client_done(&v.cl);
	v.s = rdp_grpc_server_free(v.s);
	EXPECT_EQ(n_closed, 2);
	v.e = rdp_event_free(v.e);
}

static void test_timeout(void)
{
	struct env v;
	uint8_t body[64];
	size_t len = msg(body, "x");
	nghttp2_nv tmo[] = { H("grpc-timeout", "20m") };
	struct resp *r;
	int i;

	env_init(&v, NULL);
	r = request(&v.cl, "/t.T/Hold", "localhost", tmo, 1, body, len, 0, true);
	pump(&v.cl, v.e);
	EXPECT_TRUE(held != NULL);
	for (i = 0; i < 200 && !r->closed; i++) {
		(void)rdp_event_run_once(v.e, 50);
		pump(&v.cl, v.e);
	}
	EXPECT_TRUE(r->closed);
	EXPECT_EQ(r->grpc_status, RDP_GRPC_DEADLINE_EXCEEDED);
	EXPECT_EQ(n_closed, 1);
	env_done(&v);
}

static void test_garbage(void)
{
	static const char *const inputs[] = {
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n",
		("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
		 "\x00\x00\x00\x00\x00\x00"),
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(inputs); i++) {
		struct env v;
		const uint8_t *p;
		size_t n, off;
		bool goaway = false;

		env_init(&v, NULL);
		EXPECT_TRUE(rdp_h2_feed(v.h, (const uint8_t *)inputs[i], strlen(inputs[i]) +
					(i == 2 ? 26 : 0)) < 0);
		EXPECT_TRUE(rdp_h2_is_closed(v.h));
		n = rdp_h2_output(v.h, &p);
		for (off = 0; off + 9 <= n; off += 9 + ((size_t)p[off] << 16 | p[off + 1] << 8 |
							  p[off + 2]))
			if (p[off + 3] == NGHTTP2_GOAWAY)
				goaway = true;
		EXPECT_TRUE(goaway);
		EXPECT_EQ(rdp_h2_feed(v.h, (const uint8_t *)"more", 4), -ESHUTDOWN);
		env_done(&v);
	}
}

static void test_goaway_on_free(void)
{
	struct env v;

	env_init(&v, NULL);
	pump(&v.cl, v.e);
	EXPECT_TRUE(!v.cl.goaway);
	/* the memory connection keeps its buffer until the server is freed: look before */
	(void)nghttp2_session_terminate_session(rdp_h2_session(v.h), NGHTTP2_NO_ERROR);
	pump(&v.cl, v.e);
	EXPECT_TRUE(v.cl.goaway);
	EXPECT_EQ(v.cl.goaway_code, NGHTTP2_NO_ERROR);
	EXPECT_TRUE(rdp_h2_is_closed(v.h));
	env_done(&v);
}

/* Every allocation during a whole call can fail: no crash, no leak (under ASan). */
static void test_alloc_failures(void)
{
	unsigned long n, total = 0;

	for (n = 1;; n++) {
		struct rdp_event *e = NULL;
		struct rdp_grpc_server *s = NULL;
		struct rdp_h2 *h = NULL;
		struct client cl;
		uint8_t body[64];
		size_t len = msg(body, "hello");
		unsigned long used;

		rdp_alloc_fail_at(n);
		if (rdp_event_new(&e) < 0)
			goto next;
		if (rdp_grpc_server_new(e, NULL, methods, ARRAY_SIZE(methods), NULL, NULL, &s) < 0)
			goto next;
		if (rdp_grpc_server_add_memory_conn(s, &h) < 0)
			goto next;
		client_init(&cl, h);
		(void)request(&cl, "/t.T/Echo", "localhost", NULL, 0, body, len, 2, true);
		pump(&cl, e);
		client_done(&cl);
next:
		used = rdp_alloc_count();
		rdp_alloc_fail_at(0);
		rdp_grpc_server_free(s);
		rdp_event_free(e);
		total++;
		if (used < n)
			break; /* this run had no failure left to inject */
	}
	EXPECT_TRUE(total > 10);
}

int main(void)
{
	test_settings_first();
	test_unary();
	test_authority();
	test_errors();
	test_message_limit();
	test_streaming();
	test_timeout();
	test_garbage();
	test_goaway_on_free();
	test_alloc_failures();
	return test_summary("test-h2");
}
