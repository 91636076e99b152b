/* SPDX-License-Identifier: MIT */
/*
 * gRPC server and client on top of h2.c. All gRPC semantics live here: request validation as
 * grpc-go's server does it (operateHeaders), message reassembly, status trailers, deadlines.
 *
 * A server call is the user data of its nghttp2 stream. It is freed when nghttp2 closes the
 * stream (or the connection goes away); the handler learns about an end it did not cause
 * through the close callback, called before the free.
 */
#define _GNU_SOURCE
#include "grpc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <protobuf-c/protobuf-c.h>

#include "event.h"
#include "grpc-frame.h"
#include "h2.h"
#include "pb.h"
#include "macro.h"

#define MAX_ACCEPT_PER_EVENT 16
/* What an open call costs besides its headers and request bytes: ours and nghttp2's stream. */
#define CALL_COST (sizeof(struct rdp_grpc_call) + 512)

struct conn;

struct out_msg {
	uint8_t *buf; /* prefix + message */
	size_t len, off;
};

struct rdp_grpc_call {
	struct conn *conn;
	struct rdp_grpc_call *prev, *next;
	int32_t stream_id;
	uint64_t id;
	const struct rdp_grpc_method *method;
	bool streaming;

	/* request headers */
	char *path;
	char *http_method;
	char *content_type;
	size_t header_bytes;
	bool saw_regular, has_scheme, has_authority, timeout_set, timeout_bad;
	uint64_t timeout_usec;

	bool rejected;        /* stream reset or early-aborted: ignore the rest */
	bool remote_closed;   /* client's END_STREAM seen */
	bool dispatched;      /* headers accepted, method known */
	bool handler_called;
	bool done;            /* the handler may no longer act on it */
	bool status_submitted;
	bool headers_sent;    /* response HEADERS (with a data provider) submitted */
	bool trailers_pending;
	bool in_close_cb;

	struct rdp_grpc_reader reader;
	uint8_t *req;
	size_t req_len;
	unsigned n_req;

	struct out_msg cur, pend;
	bool have_cur, have_pend;
	enum rdp_grpc_code status;
	char *status_msg; /* percent-encoded */

	struct rdp_event_source *timer;
	size_t charged; /* bytes counted in the server's buffered total */
	void (*close_cb)(struct rdp_grpc_call *c, void *userdata);
	void *close_userdata;
};

/* A connection waits for the client's preface and SETTINGS, then serves until it closes. */
enum conn_state {
	CONN_HANDSHAKE,
	CONN_READY,
};

struct conn {
	struct rdp_grpc_server *server;
	struct conn *prev, *next;
	struct rdp_h2 *h2;
	struct rdp_grpc_call *calls;
	enum conn_state state;
	struct rdp_event_source *timer; /* handshake, then idle timeout */
	bool memory;
	bool closed;
};

struct rdp_grpc_server {
	struct rdp_event *e;
	char *path;
	int listen_fd;
	struct rdp_event_source *listen_src;
	dev_t dev;
	ino_t ino;
	const struct rdp_grpc_method *methods;
	size_t n_methods;
	struct rdp_grpc_limits limits;
	void *userdata;
	struct conn *conns;
	size_t n_conns;
	size_t buffered; /* sum of the calls' charged bytes */
};

static uint64_t next_call_id = 1;

void rdp_grpc_limits_default(struct rdp_grpc_limits *l)
{
	*l = (struct rdp_grpc_limits){
		.max_message = 256u << 10,
		.max_send_message = 4u << 20,
		.max_connections = 32,
		.max_streams = 100,
		.max_header_list = 16384,
		.max_output = 16384,
		.max_buffered = 512u << 10,
		.handshake_timeout_usec = 10ULL * 1000000,
		.idle_timeout_usec = 300ULL * 1000000,
	};
}

const char *rdp_grpc_code_name(enum rdp_grpc_code code)
{
	static const char *const names[] = {
		[0] = "OK",
		[1] = "CANCELLED",
		[2] = "UNKNOWN",
		[3] = "INVALID_ARGUMENT",
		[4] = "DEADLINE_EXCEEDED",
		[5] = "NOT_FOUND",
		[6] = "ALREADY_EXISTS",
		[7] = "PERMISSION_DENIED",
		[8] = "RESOURCE_EXHAUSTED",
		[9] = "FAILED_PRECONDITION",
		[10] = "ABORTED",
		[11] = "OUT_OF_RANGE",
		[12] = "UNIMPLEMENTED",
		[13] = "INTERNAL",
		[14] = "UNAVAILABLE",
		[15] = "DATA_LOSS",
		[16] = "UNAUTHENTICATED",
	};

	if ((unsigned)code < ARRAY_SIZE(names))
		return names[code];
	return "UNKNOWN";
}

#define NV(n, v)                                                                                   \
	{                                                                                          \
		(uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v), NGHTTP2_NV_FLAG_NONE     \
	}

/* ------------------------------------------------------------------------------------------ */
/* Server calls */

static void out_msg_clear(struct out_msg *m)
{
	rdp_free(m->buf);
	*m = (struct out_msg){};
}

/*
 * Recounts what c holds (fixed cost, header strings, request bytes received and not yet
 * handled, answer bytes not yet handed to nghttp2) into the server's total. True when the server is now over its budget.
 */
static bool call_charge(struct rdp_grpc_call *c)
{
	struct rdp_grpc_server *s = c->conn->server;
	size_t now = CALL_COST + c->header_bytes + c->reader.hdr_len + c->reader.len +
		     (c->req ? c->req_len : 0) + (c->cur.len - c->cur.off) + c->pend.len;

	s->buffered = s->buffered - c->charged + now;
	c->charged = now;
	return s->buffered > s->limits.max_buffered;
}

static void call_free(struct rdp_grpc_call *c)
{
	struct conn *conn = c->conn;

	if (conn) {
		conn->server->buffered -= c->charged;
		c->charged = 0;
	}

	if (c->prev)
		c->prev->next = c->next;
	else if (conn)
		conn->calls = c->next;
	if (c->next)
		c->next->prev = c->prev;
	if (conn && conn->h2 && c->stream_id > 0)
		(void)nghttp2_session_set_stream_user_data(rdp_h2_session(conn->h2), c->stream_id,
							   NULL);
	rdp_event_source_free(c->timer);
	rdp_grpc_reader_done(&c->reader);
	rdp_free(c->req);
	rdp_free(c->path);
	rdp_free(c->http_method);
	rdp_free(c->content_type);
	out_msg_clear(&c->cur);
	out_msg_clear(&c->pend);
	rdp_free(c->status_msg);
	rdp_free(c);
}

/* Tells the handler the call ended without it: once, and only if it still held the call. */
static void call_notify_close(struct rdp_grpc_call *c)
{
	if (c->done)
		return;
	c->done = true;
	if (c->handler_called && c->close_cb) {
		c->in_close_cb = true;
		c->close_cb(c, c->close_userdata);
		c->in_close_cb = false;
	}
}

static ssize_t call_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
			 uint32_t *data_flags, nghttp2_data_source *source, void *user_data);

static int call_submit_headers(struct rdp_grpc_call *c)
{
	nghttp2_nv nva[] = { NV(":status", "200"), NV("content-type", "application/grpc") };
	nghttp2_data_provider dp = { .source.ptr = c, .read_callback = call_read };
	int r;

	if (c->headers_sent)
		return 0;
	r = nghttp2_submit_response(rdp_h2_session(c->conn->h2), c->stream_id, nva,
				    ARRAY_SIZE(nva), &dp);
	if (r != 0)
		return r == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPIPE;
	c->headers_sent = true;
	return 0;
}

/*
 * Ends the stream with a gRPC status: trailers after the data if response headers went out,
 * else one trailers-only HEADERS (with http_status, 200 unless an early abort).
 */
static int call_submit_status(struct rdp_grpc_call *c, int http_status, enum rdp_grpc_code code,
			      const char *message)
{
	nghttp2_session *session = rdp_h2_session(c->conn->h2);
	char *enc;

	if (c->status_submitted)
		return -EALREADY;
	c->status_submitted = true;
	c->timer = rdp_event_source_free(c->timer);
	enc = rdp_grpc_percent_encode(strempty(message));
	c->status = code;
	c->status_msg = enc; /* NULL on ENOMEM: sent as an empty grpc-message */
	if (!c->headers_sent) {
		char st[12], gs[12];
		int r;

		snprintf(st, sizeof(st), "%d", http_status);
		snprintf(gs, sizeof(gs), "%d", (int)code);
		nghttp2_nv nva[] = { NV(":status", st), NV("content-type", "application/grpc"),
				     NV("grpc-status", gs), NV("grpc-message", strempty(enc)) };

		out_msg_clear(&c->cur);
		out_msg_clear(&c->pend);
		c->have_cur = c->have_pend = false;
		(void)call_charge(c);
		c->headers_sent = true;
		r = nghttp2_submit_response(session, c->stream_id, nva, ARRAY_SIZE(nva), NULL);
		if (r != 0) {
			(void)nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, c->stream_id,
							NGHTTP2_INTERNAL_ERROR);
		}
	} else {
		c->trailers_pending = true;
		(void)nghttp2_session_resume_data(session, c->stream_id);
	}
	rdp_h2_schedule_flush(c->conn->h2);
	return 0;
}

static int submit_trailer(struct rdp_grpc_call *c, nghttp2_session *session)
{
	char gs[12];

	snprintf(gs, sizeof(gs), "%d", (int)c->status);
	nghttp2_nv nva[] = { NV("grpc-status", gs), NV("grpc-message", strempty(c->status_msg)) };

	c->trailers_pending = false;
	return nghttp2_submit_trailer(session, c->stream_id, nva, ARRAY_SIZE(nva));
}

static ssize_t call_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
			 uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
	struct rdp_grpc_call *c = source->ptr;
	size_t n = 0;

	if (!c)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	if (!c->have_cur && c->have_pend) {
		c->cur = c->pend;
		c->pend = (struct out_msg){};
		c->have_cur = true;
		c->have_pend = false;
	}
	if (c->have_cur) {
		n = c->cur.len - c->cur.off;
		if (n > length)
			n = length;
		memcpy(buf, c->cur.buf + c->cur.off, n);
		c->cur.off += n;
		if (c->cur.off == c->cur.len) {
			out_msg_clear(&c->cur);
			c->have_cur = false;
			if (c->have_pend) {
				c->cur = c->pend;
				c->pend = (struct out_msg){};
				c->have_cur = true;
				c->have_pend = false;
			}
		}
	}
	(void)call_charge(c);
	if (c->have_cur)
		return (ssize_t)n;
	if (c->trailers_pending) {
		/* Never END_STREAM on DATA: grpc-go wants the status in trailers. */
		*data_flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
		if (submit_trailer(c, session) != 0)
			return NGHTTP2_ERR_CALLBACK_FAILURE;
		return (ssize_t)n;
	}
	if (n > 0)
		return (ssize_t)n;
	return NGHTTP2_ERR_DEFERRED;
}

/* Ends a call for a reason of ours (bad data, deadline): the handler hears of it first. */
static void call_abort(struct rdp_grpc_call *c, enum rdp_grpc_code code, const char *message)
{
	call_notify_close(c);
	(void)call_submit_status(c, 200, code, message);
}

static void call_reject(struct rdp_grpc_call *c, uint32_t h2_error)
{
	if (c->rejected)
		return;
	c->rejected = true;
	c->done = true;
	(void)nghttp2_submit_rst_stream(rdp_h2_session(c->conn->h2), NGHTTP2_FLAG_NONE,
					c->stream_id, h2_error);
	rdp_h2_schedule_flush(c->conn->h2);
}

static void call_early_abort(struct rdp_grpc_call *c, int http_status, enum rdp_grpc_code code,
			     const char *message)
{
	c->rejected = true;
	c->done = true;
	(void)call_submit_status(c, http_status, code, message);
}

int rdp_grpc_call_send(struct rdp_grpc_call *c, const uint8_t *msg, size_t len)
{
	struct out_msg m;
	int r;

	if (!c || (len && !msg))
		return -EINVAL;
	if (c->done || c->status_submitted)
		return -EPIPE;
	if (len > c->conn->server->limits.max_send_message || len > UINT32_MAX)
		return -EMSGSIZE;
	{
		/* what the queue will hold: a message not started yet is replaced (coalesced) */
		struct rdp_grpc_server *s = c->conn->server;
		size_t queued = (c->cur.len - c->cur.off) + c->pend.len;
		size_t replaced = !c->have_cur || c->have_pend || c->cur.off == 0
					  ? (c->have_pend ? c->pend.len : c->cur.len)
					  : 0;
		size_t after = queued - replaced + RDP_GRPC_PREFIX_LEN + len;

		if (after > queued && s->buffered + (after - queued) > s->limits.max_buffered)
			return -ENOBUFS;
	}
	m.buf = rdp_malloc(RDP_GRPC_PREFIX_LEN + len);
	if (!m.buf)
		return -ENOMEM;
	rdp_grpc_prefix(m.buf, len);
	if (len)
		memcpy(m.buf + RDP_GRPC_PREFIX_LEN, msg, len);
	m.len = RDP_GRPC_PREFIX_LEN + len;
	m.off = 0;
	r = call_submit_headers(c);
	if (r < 0) {
		rdp_free(m.buf);
		return r;
	}
	/* Coalesce: only the newest message not yet started waits in the queue. */
	if (!c->have_cur) {
		c->cur = m;
		c->have_cur = true;
	} else if (c->cur.off == 0 && !c->have_pend) {
		out_msg_clear(&c->cur);
		c->cur = m;
	} else {
		out_msg_clear(&c->pend);
		c->pend = m;
		c->have_pend = true;
	}
	(void)call_charge(c);
	(void)nghttp2_session_resume_data(rdp_h2_session(c->conn->h2), c->stream_id);
	rdp_h2_schedule_flush(c->conn->h2);
	return 0;
}

/* Packs msg and hands it to send (a message on the stream, or the reply that ends the call). */
static int call_pb(struct rdp_grpc_call *c, const struct ProtobufCMessage *msg, bool reply)
{
	_cleanup_free_ uint8_t *buf = NULL;
	size_t len;
	int r;

	if (!c || !msg)
		return -EINVAL;
	r = rdp_pb_pack(msg, &buf, &len);
	if (r < 0) {
		if (reply)
			(void)rdp_grpc_call_fail(c, RDP_GRPC_INTERNAL, "out of memory");
		return r;
	}
	return reply ? rdp_grpc_call_reply(c, buf, len) : rdp_grpc_call_send(c, buf, len);
}

int rdp_grpc_call_send_pb(struct rdp_grpc_call *c, const struct ProtobufCMessage *msg)
{
	return call_pb(c, msg, false);
}

int rdp_grpc_call_fail(struct rdp_grpc_call *c, enum rdp_grpc_code code, const char *message)
{
	if (!c)
		return -EINVAL;
	if (c->done || c->in_close_cb)
		return -EPIPE;
	c->done = true;
	return call_submit_status(c, 200, code, message);
}

int rdp_grpc_call_reply(struct rdp_grpc_call *c, const uint8_t *msg, size_t len)
{
	size_t max;
	int r;

	if (!c || (len && !msg))
		return -EINVAL;
	if (c->done || c->in_close_cb)
		return -EPIPE;
	max = c->conn->server->limits.max_send_message;
	if (len > max) {
		char m[96];

		snprintf(m, sizeof(m), "grpc: trying to send message larger than max (%zu vs. %zu)",
			 len, max);
		(void)rdp_grpc_call_fail(c, RDP_GRPC_RESOURCE_EXHAUSTED, m);
		return -EMSGSIZE;
	}
	r = rdp_grpc_call_send(c, msg, len);
	if (r == -ENOBUFS) {
		char m[128];

		snprintf(m, sizeof(m),
			 "grpc: the server holds too many unsent bytes (limit %zu), try again",
			 c->conn->server->limits.max_buffered);
		(void)rdp_grpc_call_fail(c, RDP_GRPC_RESOURCE_EXHAUSTED, m);
		return r;
	}
	if (r < 0) {
		(void)rdp_grpc_call_fail(c, RDP_GRPC_INTERNAL, "out of memory");
		return r;
	}
	return rdp_grpc_call_fail(c, RDP_GRPC_OK, "");
}

int rdp_grpc_call_reply_pb(struct rdp_grpc_call *c, const struct ProtobufCMessage *msg)
{
	return call_pb(c, msg, true);
}

void rdp_grpc_call_set_close_cb(struct rdp_grpc_call *c,
				void (*cb)(struct rdp_grpc_call *c, void *userdata), void *userdata)
{
	if (!c)
		return;
	c->close_cb = cb;
	c->close_userdata = userdata;
}

const char *rdp_grpc_call_path(const struct rdp_grpc_call *c)
{
	return c && c->path ? c->path : "";
}

uint64_t rdp_grpc_call_id(const struct rdp_grpc_call *c)
{
	return c ? c->id : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Server: request side */

static struct rdp_grpc_call *stream_call(struct rdp_h2 *h, int32_t stream_id)
{
	return nghttp2_session_get_stream_user_data(rdp_h2_session(h), stream_id);
}

static int srv_begin_headers(struct rdp_h2 *h, const nghttp2_frame *f, void *userdata)
{
	struct conn *conn = userdata;
	struct rdp_grpc_call *c;

	if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0;
	if (conn->server->buffered + CALL_COST > conn->server->limits.max_buffered) {
		/* no call object: the rest of this stream is ignored until the reset closes it */
		(void)nghttp2_submit_rst_stream(rdp_h2_session(h), NGHTTP2_FLAG_NONE,
						f->hd.stream_id, NGHTTP2_REFUSED_STREAM);
		rdp_h2_schedule_flush(h);
		return 0;
	}
	c = rdp_calloc(1, sizeof(*c));
	if (!c)
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	c->conn = conn;
	c->stream_id = f->hd.stream_id;
	c->id = next_call_id++;
	rdp_grpc_reader_init(&c->reader, conn->server->limits.max_message);
	if (nghttp2_session_set_stream_user_data(rdp_h2_session(h), c->stream_id, c) != 0) {
		rdp_free(c);
		return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
	}
	c->next = conn->calls;
	if (conn->calls)
		conn->calls->prev = c;
	conn->calls = c;
	(void)call_charge(c);
	return 0;
}

static bool valid_name(const uint8_t *n, size_t len)
{
	size_t i = 0;

	if (len == 0)
		return false;
	if (n[0] == ':')
		i = 1;
	if (i == len)
		return false;
	for (; i < len; i++) {
		uint8_t ch = n[i];

		if ((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))
			continue;
		if (strchr("!#$%&'*+-.^_`|~", ch) && ch)
			continue;
		return false;
	}
	return true;
}

static bool valid_value(const uint8_t *v, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (v[i] == '\0' || v[i] == '\r' || v[i] == '\n')
			return false;
	return true;
}

static bool name_is(const uint8_t *n, size_t len, const char *s)
{
	return len == strlen(s) && memcmp(n, s, len) == 0;
}

static bool grpc_content_type(const char *v)
{
	static const char base[] = "application/grpc";
	size_t n = sizeof(base) - 1;

	if (strncasecmp(v, base, n) != 0)
		return false;
	return v[n] == '\0' || v[n] == '+' || v[n] == ';';
}

static int set_once(char **dst, const uint8_t *v, size_t len)
{
	if (*dst)
		return -EEXIST;
	*dst = rdp_strndup((const char *)v, len);
	return *dst ? 0 : -ENOMEM;
}

static int srv_header(struct rdp_h2 *h, const nghttp2_frame *f, const uint8_t *name,
		      size_t namelen, const uint8_t *value, size_t valuelen, void *userdata)
{
	struct conn *conn = userdata;
	struct rdp_grpc_call *c = stream_call(h, f->hd.stream_id);
	int r = 0;

	if (!c || c->rejected || f->headers.cat != NGHTTP2_HCAT_REQUEST)
		return 0; /* request trailers carry nothing we use */
	c->header_bytes += namelen + valuelen + 32;
	if (c->header_bytes > conn->server->limits.max_header_list) {
		call_reject(c, NGHTTP2_FRAME_SIZE_ERROR);
		return 0;
	}
	if (call_charge(c)) {
		call_reject(c, NGHTTP2_REFUSED_STREAM);
		return 0;
	}
	if (!valid_name(name, namelen) || !valid_value(value, valuelen)) {
		call_reject(c, NGHTTP2_PROTOCOL_ERROR);
		return 0;
	}
	if (name[0] == ':') {
		if (c->saw_regular) {
			r = -EINVAL;
		} else if (name_is(name, namelen, ":method")) {
			r = set_once(&c->http_method, value, valuelen);
		} else if (name_is(name, namelen, ":path")) {
			r = set_once(&c->path, value, valuelen);
		} else if (name_is(name, namelen, ":scheme")) {
			r = c->has_scheme ? -EEXIST : 0;
			c->has_scheme = true;
		} else if (name_is(name, namelen, ":authority")) {
			/* any value: old kubelets send the socket path, raw or %2F-encoded */
			r = c->has_authority ? -EEXIST : 0;
			c->has_authority = true;
		} else {
			r = -EINVAL;
		}
	} else {
		c->saw_regular = true;
		if (name_is(name, namelen, "connection") || name_is(name, namelen, "keep-alive") ||
		    name_is(name, namelen, "proxy-connection") ||
		    name_is(name, namelen, "transfer-encoding") || name_is(name, namelen, "upgrade"))
			r = -EINVAL;
		else if (name_is(name, namelen, "te"))
			r = name_is(value, valuelen, "trailers") ? 0 : -EINVAL;
		else if (name_is(name, namelen, "content-type"))
			r = set_once(&c->content_type, value, valuelen);
		else if (name_is(name, namelen, "grpc-timeout")) {
			c->timeout_set = true;
			if (rdp_grpc_timeout_parse((const char *)value, valuelen, &c->timeout_usec) < 0)
				c->timeout_bad = true;
		}
	}
	if (r == -ENOMEM)
		call_reject(c, NGHTTP2_INTERNAL_ERROR);
	else if (r < 0)
		call_reject(c, NGHTTP2_PROTOCOL_ERROR);
	return 0;
}

static int call_timer(struct rdp_event_source *s, void *userdata)
{
	struct rdp_grpc_call *c = userdata;

	c->timer = rdp_event_source_free(c->timer);
	if (!c->status_submitted)
		call_abort(c, RDP_GRPC_DEADLINE_EXCEEDED, "context deadline exceeded");
	return 0;
}

static const struct rdp_grpc_method *find_method(const struct rdp_grpc_server *s,
						 const char *path)
{
	size_t i;

	for (i = 0; i < s->n_methods; i++)
		if (strcmp(s->methods[i].path, path) == 0)
			return &s->methods[i];
	return NULL;
}

static void unknown_method_status(const char *path, char *buf, size_t size)
{
	const char *p = path[0] == '/' ? path + 1 : path;
	const char *slash = strrchr(p, '/');

	if (path[0] != '/' || !slash)
		snprintf(buf, size, "malformed method name: \"%.200s\"", path);
	else
		snprintf(buf, size, "unknown method %.200s for service %.*s", slash + 1,
			 (int)(slash - p > 200 ? 200 : slash - p), p);
}

static void call_dispatch_end(struct rdp_grpc_call *c);

static void call_headers_done(struct rdp_grpc_call *c, bool end_stream)
{
	struct rdp_grpc_server *s = c->conn->server;
	char msg[512];

	if (end_stream)
		c->remote_closed = true;
	if (c->rejected)
		return;
	if (!c->http_method || !c->path || !c->path[0]) {
		call_reject(c, NGHTTP2_PROTOCOL_ERROR);
		return;
	}
	if (strcmp(c->http_method, "POST") != 0) {
		snprintf(msg, sizeof(msg), "Received a HTTP request with method \"%.100s\"",
			 c->http_method);
		call_early_abort(c, 405, RDP_GRPC_INTERNAL, msg);
		return;
	}
	if (!c->content_type || !grpc_content_type(c->content_type)) {
		snprintf(msg, sizeof(msg), "invalid gRPC request content-type \"%.200s\"",
			 strempty(c->content_type));
		call_early_abort(c, 415, RDP_GRPC_INVALID_ARGUMENT, msg);
		return;
	}
	if (c->timeout_bad) {
		call_early_abort(c, 400, RDP_GRPC_INTERNAL, "malformed grpc-timeout");
		return;
	}
	c->method = find_method(s, c->path);
	if (!c->method) {
		unknown_method_status(c->path, msg, sizeof(msg));
		c->rejected = true;
		c->done = true;
		(void)call_submit_status(c, 200, RDP_GRPC_UNIMPLEMENTED, msg);
		return;
	}
	c->dispatched = true;
	if (c->timeout_set && s->e) {
		int r = rdp_event_add_timer(s->e, c->timeout_usec ? c->timeout_usec : 1,
					    call_timer, c, &c->timer);
		if (r < 0) {
			call_early_abort(c, 200, RDP_GRPC_RESOURCE_EXHAUSTED, "out of memory");
			return;
		}
	}
	if (c->remote_closed)
		call_dispatch_end(c);
}

/* The client half-closed: unary calls run now; streaming ones should have run already. */
static void call_dispatch_end(struct rdp_grpc_call *c)
{
	if (!c->dispatched || c->rejected || c->done || c->handler_called)
		return;
	if (rdp_grpc_reader_partial(&c->reader)) {
		call_abort(c, RDP_GRPC_INTERNAL, "unexpected EOF");
		return;
	}
	if (c->n_req != 1) {
		call_abort(c, RDP_GRPC_INTERNAL,
			   "grpc: cardinality violation: received no request message from "
			   "non-client-streaming RPC");
		return;
	}
	c->handler_called = true;
	{
		uint8_t *req = TAKE_PTR(c->req);
		size_t len = c->req_len;

		/* the request is the handler's now: the budget has room for its answer */
		(void)call_charge(c);
		c->method->handler(c, req, len, c->conn->server->userdata);
		rdp_free(req);
		(void)call_charge(c);
	}
}

static int call_on_message(uint8_t *msg, size_t len, void *userdata)
{
	struct rdp_grpc_call *c = userdata;

	if (c->handler_called || c->done) {
		rdp_free(msg); /* streaming: later client messages are not used */
		return 0;
	}
	c->n_req++;
	if (c->n_req > 1) {
		rdp_free(msg);
		call_abort(c, RDP_GRPC_INTERNAL,
			   "grpc: cardinality violation: received multiple request messages for "
			   "non-client-streaming RPC");
		return -ECANCELED;
	}
	c->req = msg;
	c->req_len = len;
	if (c->method->server_streaming) {
		/* kubelet sends the (empty) request and half-closes; run at the first message */
		c->handler_called = true;
		c->req = NULL;
		c->method->handler(c, msg, len, c->conn->server->userdata);
		rdp_free(msg);
	}
	return 0;
}

static int srv_data_chunk(struct rdp_h2 *h, int32_t stream_id, const uint8_t *data, size_t len,
			  void *userdata)
{
	struct rdp_grpc_call *c = stream_call(h, stream_id);
	char msg[128];
	int r;

	if (!c || c->rejected || c->status_submitted || !c->dispatched)
		return 0;
	if (!c->handler_called &&
	    c->conn->server->buffered + len > c->conn->server->limits.max_buffered) {
		snprintf(msg, sizeof(msg),
			 "grpc: the server holds too many request bytes (limit %zu), try again",
			 c->conn->server->limits.max_buffered);
		call_abort(c, RDP_GRPC_RESOURCE_EXHAUSTED, msg);
		rdp_grpc_reader_done(&c->reader);
		(void)call_charge(c);
		return 0;
	}
	r = rdp_grpc_reader_feed(&c->reader, data, len, call_on_message, c);
	(void)call_charge(c);
	if (r == 0 || r == -ECANCELED || r == -EIO)
		return 0;
	/* the call may have been ended from the handler meanwhile: then it stays as it is */
	if (c->status_submitted)
		return 0;
	if (r == -EMSGSIZE) {
		snprintf(msg, sizeof(msg), "grpc: received message larger than max (%llu vs. %zu)",
			 (unsigned long long)c->reader.too_big, c->reader.max);
		call_abort(c, RDP_GRPC_RESOURCE_EXHAUSTED, msg);
	} else if (r == -EBADMSG) {
		if (c->reader.bad_flag == 1)
			snprintf(msg, sizeof(msg),
				 "grpc: compressed flag set with identity or empty encoding");
		else
			snprintf(msg, sizeof(msg), "grpc: received unexpected payload format %u",
				 c->reader.bad_flag);
		call_abort(c, RDP_GRPC_INTERNAL, msg);
	} else {
		call_abort(c, RDP_GRPC_RESOURCE_EXHAUSTED, "out of memory");
	}
	rdp_grpc_reader_done(&c->reader);
	(void)call_charge(c);
	return 0;
}

static void conn_arm_idle(struct conn *conn);

static int srv_frame_recv(struct rdp_h2 *h, const nghttp2_frame *f, void *userdata)
{
	struct conn *conn = userdata;
	struct rdp_grpc_call *c;
	bool end = f->hd.flags & NGHTTP2_FLAG_END_STREAM;

	/* nghttp2 checked the preface; the client's first SETTINGS completes the handshake */
	if (f->hd.type == NGHTTP2_SETTINGS && !(f->hd.flags & NGHTTP2_FLAG_ACK) &&
	    conn->state == CONN_HANDSHAKE) {
		conn->state = CONN_READY;
		conn_arm_idle(conn);
	}
	if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
		return 0;
	c = stream_call(h, f->hd.stream_id);
	if (!c)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST) {
		call_headers_done(c, end);
		return 0;
	}
	if (end) {
		c->remote_closed = true;
		call_dispatch_end(c);
	}
	return 0;
}

static int srv_frame_send(struct rdp_h2 *h, const nghttp2_frame *f, void *userdata)
{
	struct rdp_grpc_call *c;

	if (f->hd.type != NGHTTP2_HEADERS || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		return 0;
	c = stream_call(h, f->hd.stream_id);
	/* Status sent before the client finished: tell it to stop sending ("early closure"). */
	if (c && !c->remote_closed)
		(void)nghttp2_submit_rst_stream(rdp_h2_session(h), NGHTTP2_FLAG_NONE, c->stream_id,
						NGHTTP2_NO_ERROR);
	return 0;
}

static int srv_stream_close(struct rdp_h2 *h, int32_t stream_id, uint32_t error_code,
			    void *userdata)
{
	struct rdp_grpc_call *c = stream_call(h, stream_id);

	if (!c)
		return 0;
	call_notify_close(c);
	call_free(c);
	return 0;
}

static void conn_free(struct conn *conn);

static void conn_teardown_calls(struct conn *conn)
{
	while (conn->calls) {
		struct rdp_grpc_call *c = conn->calls;

		call_notify_close(c);
		if (conn->calls == c) /* the close callback cannot free calls, but be safe */
			call_free(c);
	}
}

static void srv_closed(struct rdp_h2 *h, int error, void *userdata)
{
	struct conn *conn = userdata;

	conn->closed = true;
	conn_teardown_calls(conn);
	if (!conn->memory)
		conn_free(conn);
}

static const struct rdp_h2_ops server_ops = {
	.begin_headers = srv_begin_headers,
	.header = srv_header,
	.frame_recv = srv_frame_recv,
	.data_chunk = srv_data_chunk,
	.frame_send = srv_frame_send,
	.stream_close = srv_stream_close,
	.closed = srv_closed,
};

static void conn_free(struct conn *conn)
{
	struct rdp_grpc_server *s = conn->server;

	conn_teardown_calls(conn);
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		s->conns = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	s->n_conns--;
	conn->timer = rdp_event_source_free(conn->timer);
	conn->h2 = rdp_h2_free(conn->h2);
	rdp_free(conn);
}

/*
 * True while the connection may stay silent for ever: it has calls open, all of them
 * server-streaming calls in the handler's hands with nothing queued or buffered to write.
 */
static bool conn_only_watching(struct conn *conn)
{
	struct rdp_grpc_call *c;

	if (!conn->calls || rdp_h2_pending_output(conn->h2) > 0)
		return false;
	for (c = conn->calls; c; c = c->next)
		if (!c->method || !c->method->server_streaming || !c->handler_called || c->done ||
		    c->have_cur || c->have_pend)
			return false;
	return true;
}

static int conn_timer(struct rdp_event_source *src, void *userdata)
{
	struct conn *conn = userdata;
	const struct rdp_grpc_limits *l = &conn->server->limits;
	uint64_t now = rdp_now_usec(), last;

	if (conn->closed || rdp_h2_is_closed(conn->h2))
		return 0;
	if (conn->state == CONN_HANDSHAKE) {
		rdp_h2_close(conn->h2, NGHTTP2_SETTINGS_TIMEOUT, -ETIMEDOUT);
		return 0;
	}
	last = rdp_h2_last_activity(conn->h2);
	if (conn_only_watching(conn) || now - last < l->idle_timeout_usec) {
		uint64_t left = conn_only_watching(conn) || now - last >= l->idle_timeout_usec
					? l->idle_timeout_usec
					: l->idle_timeout_usec - (now - last);

		(void)rdp_event_source_set_timer(src, left ? left : 1);
		return 0;
	}
	rdp_h2_close(conn->h2, NGHTTP2_NO_ERROR, -ETIMEDOUT);
	return 0;
}

static void conn_arm_idle(struct conn *conn)
{
	if (conn->timer)
		(void)rdp_event_source_set_timer(conn->timer,
						 conn->server->limits.idle_timeout_usec);
}

static int conn_new(struct rdp_grpc_server *s, int fd, struct conn **ret)
{
	struct rdp_h2_config cfg = {
		.server = true,
		.max_streams = s->limits.max_streams,
		.max_header_list = s->limits.max_header_list,
		.max_output = s->limits.max_output,
	};
	struct conn *conn;
	int r;

	conn = rdp_calloc(1, sizeof(*conn));
	if (!conn) {
		if (fd >= 0)
			close(fd);
		return -ENOMEM;
	}
	conn->server = s;
	conn->memory = fd < 0;
	r = rdp_h2_new(s->e, fd, &cfg, &server_ops, conn, &conn->h2);
	if (r < 0) {
		rdp_free(conn);
		return r;
	}
	conn->state = CONN_HANDSHAKE;
	if (s->e && (s->limits.handshake_timeout_usec || s->limits.idle_timeout_usec)) {
		/* without a handshake timeout the first check is the idle one */
		r = rdp_event_add_timer(s->e,
					s->limits.handshake_timeout_usec
						? s->limits.handshake_timeout_usec
						: s->limits.idle_timeout_usec,
					conn_timer, conn, &conn->timer);
		if (r < 0) {
			rdp_h2_free(conn->h2);
			rdp_free(conn);
			return r;
		}
	}
	conn->next = s->conns;
	if (s->conns)
		s->conns->prev = conn;
	s->conns = conn;
	s->n_conns++;
	*ret = conn;
	return 0;
}

int rdp_grpc_server_add_memory_conn(struct rdp_grpc_server *s, struct rdp_h2 **ret)
{
	struct conn *conn;
	int r;

	if (!s || !ret)
		return -EINVAL;
	r = conn_new(s, -1, &conn);
	if (r < 0)
		return r;
	*ret = conn->h2;
	return 0;
}

static void on_conn(int cfd, void *userdata)
{
	struct rdp_grpc_server *s = userdata;
	struct conn *conn;

	if (s->n_conns >= s->limits.max_connections) {
		close(cfd); /* over the limit: the peer sees EOF at once */
		return;
	}
	(void)conn_new(s, cfd, &conn);
}

static int on_accept(struct rdp_event_source *src, int fd, uint32_t revents, void *userdata)
{
	return rdp_accept_each(fd, MAX_ACCEPT_PER_EVENT, on_conn, userdata);
}

int rdp_grpc_server_new(struct rdp_event *e, const char *path, const struct rdp_grpc_method *methods,
			size_t n_methods, const struct rdp_grpc_limits *limits, void *userdata,
			struct rdp_grpc_server **ret)
{
	struct rdp_grpc_server *s;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int r;

	if (!e || !ret || (n_methods && !methods))
		return -EINVAL;
	if (path && strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	s = rdp_calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->e = e;
	s->listen_fd = -1;
	s->methods = methods;
	s->n_methods = n_methods;
	s->userdata = userdata;
	if (limits)
		s->limits = *limits;
	else
		rdp_grpc_limits_default(&s->limits);
	{
		struct rdp_grpc_limits d;

		/* 0 means the default for sizes; for timeouts it means none */
		rdp_grpc_limits_default(&d);
		if (!s->limits.max_message)
			s->limits.max_message = d.max_message;
		if (!s->limits.max_send_message)
			s->limits.max_send_message = d.max_send_message;
		if (s->limits.max_streams < 2)
			s->limits.max_streams = d.max_streams;
		if (!s->limits.max_header_list)
			s->limits.max_header_list = d.max_header_list;
		if (!s->limits.max_output)
			s->limits.max_output = d.max_output;
		if (!s->limits.max_connections)
			s->limits.max_connections = d.max_connections;
		if (!s->limits.max_buffered)
			s->limits.max_buffered = d.max_buffered;
		/* room for at least one request of the maximum size */
		if (s->limits.max_buffered < s->limits.max_message + s->limits.max_header_list +
						      4 * CALL_COST)
			s->limits.max_buffered = s->limits.max_message +
						 s->limits.max_header_list + 4 * CALL_COST;
	}
	if (!path) {
		*ret = s;
		return 0;
	}
	s->path = rdp_strdup(path);
	if (!s->path) {
		r = -ENOMEM;
		goto fail;
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			r = -EEXIST;
			goto fail;
		}
		if (unlink(path) < 0 && errno != ENOENT) {
			r = -errno;
			goto fail;
		}
	}
	s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0) {
		r = -errno;
		goto fail;
	}
	memcpy(sa.sun_path, path, strlen(path));
	if (bind(s->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		goto fail;
	}
	if (stat(path, &st) < 0) {
		r = -errno;
		goto fail;
	}
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	if (listen(s->listen_fd, 128) < 0) {
		r = -errno;
		goto fail_unlink;
	}
	r = rdp_event_add_io(e, s->listen_fd, EPOLLIN, on_accept, s, &s->listen_src);
	if (r < 0)
		goto fail_unlink;
	*ret = s;
	return 0;
fail_unlink:
	unlink(path);
fail:
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	rdp_free(s->path);
	rdp_free(s);
	return r;
}

bool rdp_grpc_server_socket_present(const struct rdp_grpc_server *s)
{
	struct stat st;

	if (!s || !s->path)
		return false;
	if (lstat(s->path, &st) < 0)
		return false;
	return S_ISSOCK(st.st_mode) && st.st_dev == s->dev && st.st_ino == s->ino;
}

const char *rdp_grpc_server_path(const struct rdp_grpc_server *s)
{
	return s && s->path ? s->path : "";
}

size_t rdp_grpc_server_connections(const struct rdp_grpc_server *s)
{
	return s ? s->n_conns : 0;
}

struct rdp_grpc_server *rdp_grpc_server_free(struct rdp_grpc_server *s)
{
	if (!s)
		return NULL;
	s->listen_src = rdp_event_source_free(s->listen_src);
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (rdp_grpc_server_socket_present(s))
		unlink(s->path);
	while (s->conns) {
		struct conn *conn = s->conns;

		if (!conn->closed) {
			/* GOAWAY first, written now if the socket takes it */
			(void)nghttp2_session_terminate_session(rdp_h2_session(conn->h2),
								NGHTTP2_NO_ERROR);
			(void)rdp_h2_flush(conn->h2);
		}
		if (s->conns == conn) /* not already gone through srv_closed */
			conn_free(conn);
	}
	rdp_free(s->path);
	rdp_free(s);
	return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Client */

struct rdp_grpc_client_call {
	struct rdp_event *e;
	struct rdp_h2 *h2;
	int32_t stream_id;
	uint8_t *req;
	size_t req_len, req_off;
	struct rdp_event_source *timer;
	rdp_grpc_client_cb cb;
	void *userdata;

	size_t header_bytes;
	int http_status;
	bool got_headers, ct_grpc, have_status, bad_status, trailers, data_end_stream;
	int grpc_status;
	char *grpc_message;

	struct rdp_grpc_reader reader;
	uint8_t *resp;
	size_t resp_len;
	unsigned n_msgs;

	bool local_error;
	enum rdp_grpc_code local_code;
	char local_msg[128];

	bool delivered, in_cb, cancelling;
};

static void client_free(struct rdp_grpc_client_call *c)
{
	c->h2 = rdp_h2_free(c->h2);
	rdp_event_source_free(c->timer);
	rdp_free(c->req);
	rdp_free(c->grpc_message);
	rdp_grpc_reader_done(&c->reader);
	rdp_free(c->resp);
	rdp_free(c);
}

static void client_deliver(struct rdp_grpc_client_call *c, enum rdp_grpc_code code,
			   const char *message)
{
	if (c->delivered)
		return;
	c->delivered = true;
	c->timer = rdp_event_source_free(c->timer);
	c->in_cb = true;
	c->cb(code, strempty(message), code == RDP_GRPC_OK ? c->resp : NULL,
	      code == RDP_GRPC_OK ? c->resp_len : 0, c->userdata);
	c->in_cb = false;
	rdp_h2_shutdown(c->h2, NGHTTP2_NO_ERROR);
}

static void client_local_error(struct rdp_grpc_client_call *c, enum rdp_grpc_code code,
			       const char *message)
{
	if (c->local_error)
		return;
	c->local_error = true;
	c->local_code = code;
	snprintf(c->local_msg, sizeof(c->local_msg), "%s", message);
	(void)nghttp2_submit_rst_stream(rdp_h2_session(c->h2), NGHTTP2_FLAG_NONE, c->stream_id,
					NGHTTP2_CANCEL);
	rdp_h2_schedule_flush(c->h2);
}

static enum rdp_grpc_code http_status_code(int status)
{
	switch (status) {
	case 400:
		return RDP_GRPC_INTERNAL;
	case 401:
		return 16; /* UNAUTHENTICATED */
	case 403:
		return 7; /* PERMISSION_DENIED */
	case 404:
		return RDP_GRPC_UNIMPLEMENTED;
	case 429:
	case 502:
	case 503:
	case 504:
		return RDP_GRPC_UNAVAILABLE;
	default:
		return RDP_GRPC_UNKNOWN;
	}
}

static enum rdp_grpc_code rst_code(uint32_t error_code)
{
	switch (error_code) {
	case NGHTTP2_CANCEL:
		return RDP_GRPC_CANCELLED;
	case NGHTTP2_REFUSED_STREAM:
		return RDP_GRPC_UNAVAILABLE;
	case NGHTTP2_ENHANCE_YOUR_CALM:
		return RDP_GRPC_RESOURCE_EXHAUSTED;
	default:
		return RDP_GRPC_INTERNAL;
	}
}

/* The stream is over: work out the status the way grpc-go's client does. */
static void client_finish(struct rdp_grpc_client_call *c, uint32_t error_code)
{
	char msg[160];

	if (c->local_error) {
		client_deliver(c, c->local_code, c->local_msg);
		return;
	}
	if (!c->have_status && error_code != NGHTTP2_NO_ERROR) {
		snprintf(msg, sizeof(msg), "stream terminated by RST_STREAM with error code: %u",
			 error_code);
		client_deliver(c, rst_code(error_code), msg);
		return;
	}
	if (!c->got_headers) {
		client_deliver(c, RDP_GRPC_INTERNAL, "server closed the stream without a response");
		return;
	}
	if (!c->ct_grpc) {
		if (c->http_status != 200) {
			snprintf(msg, sizeof(msg),
				 "unexpected HTTP status code received from server: %d",
				 c->http_status);
			client_deliver(c, http_status_code(c->http_status), msg);
		} else {
			client_deliver(c, RDP_GRPC_UNKNOWN, "malformed header: missing HTTP content-type");
		}
		return;
	}
	if (c->data_end_stream && !c->trailers) {
		client_deliver(c, RDP_GRPC_INTERNAL, "server closed the stream without sending trailers");
		return;
	}
	if (c->bad_status) {
		client_deliver(c, RDP_GRPC_INTERNAL, "transport: malformed grpc-status");
		return;
	}
	if (!c->have_status) {
		client_deliver(c, RDP_GRPC_UNKNOWN, "malformed header: missing grpc-status");
		return;
	}
	if (c->grpc_status != RDP_GRPC_OK) {
		_cleanup_free_ char *m = NULL;

		if (c->grpc_message)
			m = rdp_grpc_percent_decode(c->grpc_message, strlen(c->grpc_message));
		client_deliver(c, (enum rdp_grpc_code)c->grpc_status, m ? m : c->grpc_message);
		return;
	}
	if (c->n_msgs == 0) {
		client_deliver(c, RDP_GRPC_INTERNAL,
			       "cardinality violation: received no response message from "
			       "non-server-streaming RPC");
		return;
	}
	if (c->n_msgs > 1) {
		client_deliver(c, RDP_GRPC_INTERNAL,
			       "cardinality violation: expected <EOF> for non server-streaming "
			       "RPCs, but received another message");
		return;
	}
	client_deliver(c, RDP_GRPC_OK, NULL);
}

static int cli_header(struct rdp_h2 *h, const nghttp2_frame *f, const uint8_t *name,
		      size_t namelen, const uint8_t *value, size_t valuelen, void *userdata)
{
	struct rdp_grpc_client_call *c = userdata;

	if (f->hd.stream_id != c->stream_id || c->local_error)
		return 0;
	c->header_bytes += namelen + valuelen + 32;
	if (c->header_bytes > 16384) {
		client_local_error(c, RDP_GRPC_INTERNAL, "response header list too large");
		return 0;
	}
	if (f->headers.cat == NGHTTP2_HCAT_HEADERS)
		c->trailers = true;
	if (name_is(name, namelen, ":status")) {
		int st = 0;
		size_t i;

		for (i = 0; i < valuelen && i < 3; i++)
			st = st * 10 + (value[i] >= '0' && value[i] <= '9' ? value[i] - '0' : 0);
		c->http_status = st;
	} else if (name_is(name, namelen, "content-type")) {
		char ct[64];

		snprintf(ct, sizeof(ct), "%.*s", (int)(valuelen < 63 ? valuelen : 63),
			 (const char *)value);
		c->ct_grpc = grpc_content_type(ct);
	} else if (name_is(name, namelen, "grpc-status")) {
		int st = 0;
		size_t i;

		c->have_status = true;
		c->bad_status = valuelen == 0 || valuelen > 9;
		for (i = 0; i < valuelen && !c->bad_status; i++) {
			if (value[i] < '0' || value[i] > '9')
				c->bad_status = true;
			else
				st = st * 10 + (value[i] - '0');
		}
		c->grpc_status = st;
	} else if (name_is(name, namelen, "grpc-message")) {
		rdp_free(c->grpc_message);
		c->grpc_message = rdp_strndup((const char *)value, valuelen);
	}
	return 0;
}

static int cli_frame_recv(struct rdp_h2 *h, const nghttp2_frame *f, void *userdata)
{
	struct rdp_grpc_client_call *c = userdata;

	if (f->hd.stream_id != c->stream_id)
		return 0;
	if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_RESPONSE &&
	    c->http_status >= 200)
		c->got_headers = true;
	if (f->hd.type == NGHTTP2_DATA && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
		c->data_end_stream = true;
	return 0;
}

static int cli_on_message(uint8_t *msg, size_t len, void *userdata)
{
	struct rdp_grpc_client_call *c = userdata;

	c->n_msgs++;
	if (c->n_msgs == 1) {
		c->resp = msg;
		c->resp_len = len;
	} else {
		rdp_free(msg);
	}
	return 0;
}

static int cli_data_chunk(struct rdp_h2 *h, int32_t stream_id, const uint8_t *data, size_t len,
			  void *userdata)
{
	struct rdp_grpc_client_call *c = userdata;
	char msg[128];
	int r;

	if (stream_id != c->stream_id || c->local_error)
		return 0;
	r = rdp_grpc_reader_feed(&c->reader, data, len, cli_on_message, c);
	if (r == -EMSGSIZE) {
		snprintf(msg, sizeof(msg), "grpc: received message larger than max (%llu vs. %zu)",
			 (unsigned long long)c->reader.too_big, c->reader.max);
		client_local_error(c, RDP_GRPC_RESOURCE_EXHAUSTED, msg);
	} else if (r == -EBADMSG) {
		client_local_error(c, RDP_GRPC_INTERNAL,
				   "grpc: compressed flag set with identity or empty encoding");
	} else if (r < 0) {
		client_local_error(c, RDP_GRPC_RESOURCE_EXHAUSTED, "out of memory");
	}
	return 0;
}

static int cli_stream_close(struct rdp_h2 *h, int32_t stream_id, uint32_t error_code,
			    void *userdata)
{
	struct rdp_grpc_client_call *c = userdata;

	if (stream_id == c->stream_id && !c->delivered && !c->cancelling)
		client_finish(c, error_code);
	return 0;
}

static void cli_closed(struct rdp_h2 *h, int error, void *userdata)
{
	struct rdp_grpc_client_call *c = userdata;

	if (c->cancelling)
		return;
	if (!c->delivered) {
		if (c->local_error)
			client_deliver(c, c->local_code, c->local_msg);
		else
			client_deliver(c, RDP_GRPC_UNAVAILABLE,
				       "connection closed before the response arrived");
	}
	client_free(c);
}

static const struct rdp_h2_ops client_ops = {
	.header = cli_header,
	.frame_recv = cli_frame_recv,
	.data_chunk = cli_data_chunk,
	.stream_close = cli_stream_close,
	.closed = cli_closed,
};

static ssize_t cli_read(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
			uint32_t *data_flags, nghttp2_data_source *source, void *user_data)
{
	struct rdp_grpc_client_call *c = source->ptr;
	size_t n = c->req_len - c->req_off;

	if (n > length)
		n = length;
	memcpy(buf, c->req + c->req_off, n);
	c->req_off += n;
	if (c->req_off == c->req_len)
		*data_flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

static int cli_timer(struct rdp_event_source *s, void *userdata)
{
	struct rdp_grpc_client_call *c = userdata;

	c->timer = rdp_event_source_free(c->timer);
	if (c->delivered)
		return 0;
	(void)nghttp2_submit_rst_stream(rdp_h2_session(c->h2), NGHTTP2_FLAG_NONE, c->stream_id,
					NGHTTP2_CANCEL);
	client_deliver(c, RDP_GRPC_DEADLINE_EXCEEDED, "context deadline exceeded");
	return 0;
}

int rdp_grpc_unary_call(struct rdp_event *e, const char *path, const char *method,
			const uint8_t *req, size_t len, uint64_t timeout_usec, rdp_grpc_client_cb cb,
			void *userdata, struct rdp_grpc_client_call **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	/* the request is ours; answers come from kubelet (Register) or our own daemon (health) */
	struct rdp_h2_config cfg = { .server = false, .max_streams = 100,
				     .max_header_list = 16384, .max_output = 65536 };
	struct rdp_grpc_client_call *c;
	_cleanup_close_ int fd = -1;
	char tmo[16] = "";
	nghttp2_data_provider dp;
	int r;

	if (!e || !path || !method || !cb || (len && !req) || len > UINT32_MAX)
		return -EINVAL;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
		return -errno;

	c = rdp_calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->e = e;
	c->cb = cb;
	c->userdata = userdata;
	rdp_grpc_reader_init(&c->reader, 4u << 20);
	c->req_len = RDP_GRPC_PREFIX_LEN + len;
	c->req = rdp_malloc(c->req_len);
	if (!c->req) {
		r = -ENOMEM;
		goto fail;
	}
	rdp_grpc_prefix(c->req, len);
	if (len)
		memcpy(c->req + RDP_GRPC_PREFIX_LEN, req, len);
	r = rdp_h2_new(e, TAKE_FD(fd), &cfg, &client_ops, c, &c->h2);
	if (r < 0)
		goto fail;
	if (timeout_usec) {
		rdp_grpc_timeout_format(timeout_usec, tmo);
		r = rdp_event_add_timer(e, timeout_usec, cli_timer, c, &c->timer);
		if (r < 0)
			goto fail;
	}
	{
		nghttp2_nv nva[] = {
			NV(":method", "POST"),
			NV(":scheme", "http"),
			NV(":path", method),
			NV(":authority", "localhost"),
			NV("content-type", "application/grpc"),
			NV("user-agent", "rdma-dp/" RDP_VERSION),
			NV("te", "trailers"),
			NV("grpc-timeout", tmo),
		};
		int32_t id;

		dp.source.ptr = c;
		dp.read_callback = cli_read;
		id = nghttp2_submit_request(rdp_h2_session(c->h2), NULL, nva,
					    ARRAY_SIZE(nva) - (timeout_usec ? 0 : 1), &dp, c);
		if (id < 0) {
			r = id == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EIO;
			goto fail;
		}
		c->stream_id = id;
	}
	rdp_h2_schedule_flush(c->h2);
	if (ret)
		*ret = c;
	return 0;
fail:
	client_free(c);
	return r;
}

struct rdp_grpc_client_call *rdp_grpc_client_call_cancel(struct rdp_grpc_client_call *c)
{
	if (!c || c->in_cb || c->cancelling)
		return NULL;
	c->cancelling = true;
	if (!c->delivered && c->stream_id > 0)
		(void)nghttp2_submit_rst_stream(rdp_h2_session(c->h2), NGHTTP2_FLAG_NONE,
						c->stream_id, NGHTTP2_CANCEL);
	(void)nghttp2_session_terminate_session(rdp_h2_session(c->h2), NGHTTP2_NO_ERROR);
	(void)rdp_h2_flush(c->h2);
	client_free(c);
	return NULL;
}
