/* SPDX-License-Identifier: MIT */
#include "h2.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "event.h"
#include "macro.h"

#define READ_CHUNK 16384
#define READS_PER_EVENT 4

struct rdp_h2 {
	struct rdp_event *e;
	int fd;
	struct rdp_event_source *io, *defer;
	uint32_t io_events;
	nghttp2_session *session;
	const struct rdp_h2_ops *ops;
	void *userdata;
	size_t max_output;
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	uint64_t last_activity; /* CLOCK_MONOTONIC usec of the last byte read or written */
	unsigned busy;        /* inside a call into nghttp2 or the owner */
	bool free_pending;    /* rdp_h2_free() was called while busy */
	bool closed;          /* ops->closed delivered (or due) */
	bool close_due;
	int close_error;
};

#define H2(ud) ((struct rdp_h2 *)(ud))

static int cb_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct rdp_h2 *h = H2(ud);

	if (h->free_pending)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	return h->ops->begin_headers ? h->ops->begin_headers(h, f, h->userdata) : 0;
}

static int cb_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name,
		     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
	struct rdp_h2 *h = H2(ud);

	if (h->free_pending)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	return h->ops->header ? h->ops->header(h, f, name, namelen, value, valuelen, h->userdata)
			      : 0;
}

static int cb_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct rdp_h2 *h = H2(ud);

	if (h->free_pending)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	return h->ops->frame_recv ? h->ops->frame_recv(h, f, h->userdata) : 0;
}

static int cb_data_chunk(nghttp2_session *s, uint8_t flags, int32_t stream_id,
			 const uint8_t *data, size_t len, void *ud)
{
	struct rdp_h2 *h = H2(ud);

	if (h->free_pending)
		return NGHTTP2_ERR_CALLBACK_FAILURE;
	return h->ops->data_chunk ? h->ops->data_chunk(h, stream_id, data, len, h->userdata) : 0;
}

static int cb_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct rdp_h2 *h = H2(ud);

	if (h->free_pending)
		return 0;
	return h->ops->frame_send ? h->ops->frame_send(h, f, h->userdata) : 0;
}

static int cb_stream_close(nghttp2_session *s, int32_t stream_id, uint32_t error_code, void *ud)
{
	struct rdp_h2 *h = H2(ud);

	if (h->free_pending)
		return 0;
	return h->ops->stream_close ? h->ops->stream_close(h, stream_id, error_code, h->userdata)
				    : 0;
}

static void h2_really_free(struct rdp_h2 *h)
{
	nghttp2_session_del(h->session);
	rdp_event_source_free(h->io);
	rdp_event_source_free(h->defer);
	if (h->fd >= 0)
		close(h->fd);
	rdp_free(h->out);
	rdp_free(h);
}

struct rdp_h2 *rdp_h2_free(struct rdp_h2 *h)
{
	if (!h)
		return NULL;
	if (h->busy) {
		h->free_pending = true;
		h->closed = true;
		return NULL;
	}
	h2_really_free(h);
	return NULL;
}

/* Leaves a busy section; true if h was freed meanwhile (do not touch it any more). */
static bool h2_leave(struct rdp_h2 *h)
{
	if (--h->busy)
		return false;
	if (h->close_due && !h->closed && !h->free_pending) {
		h->closed = true;
		h->busy++;
		if (h->ops->closed)
			h->ops->closed(h, h->close_error, h->userdata);
		h->busy--;
	}
	if (h->free_pending) {
		h2_really_free(h);
		return true;
	}
	return false;
}

static void h2_set_closed(struct rdp_h2 *h, int error)
{
	if (h->close_due)
		return;
	h->close_due = true;
	h->close_error = error;
	if (h->io) {
		(void)rdp_event_source_set_io_events(h->io, 0);
		h->io_events = 0;
	}
}

size_t rdp_h2_pending_output(const struct rdp_h2 *h)
{
	return h->out_len - h->out_off;
}

static int out_append(struct rdp_h2 *h, const uint8_t *p, size_t n)
{
	if (h->out_off > 0 && h->out_off == h->out_len)
		h->out_off = h->out_len = 0;
	if (h->out_len + n > h->out_cap) {
		size_t cap = h->out_cap ? h->out_cap : 1024, used = h->out_len - h->out_off;
		uint8_t *q;

		/* compact first; grow only if that is not enough */
		if (h->out_off > 0) {
			memmove(h->out, h->out + h->out_off, used);
			h->out_off = 0;
			h->out_len = used;
		}
		while (cap < h->out_len + n)
			cap *= 2;
		if (cap > h->out_cap) {
			q = rdp_realloc(h->out, cap);
			if (!q)
				return -ENOMEM;
			h->out = q;
			h->out_cap = cap;
		}
	}
	memcpy(h->out + h->out_len, p, n);
	h->out_len += n;
	return 0;
}

/* An empty buffer that grew past 16 KiB (a large answer went out) is given back. */
static void out_shrink(struct rdp_h2 *h)
{
	if (h->out_len == h->out_off && h->out_cap > 16384) {
		rdp_free(h->out);
		h->out = NULL;
		h->out_cap = h->out_off = h->out_len = 0;
	}
}

static void h2_update_events(struct rdp_h2 *h)
{
	uint32_t ev = 0;

	if (!h->io || h->close_due)
		return;
	if (nghttp2_session_want_read(h->session) && rdp_h2_pending_output(h) < h->max_output)
		ev |= EPOLLIN;
	if (rdp_h2_pending_output(h) > 0)
		ev |= EPOLLOUT;
	if (ev != h->io_events && rdp_event_source_set_io_events(h->io, ev) == 0)
		h->io_events = ev;
}

/* Must be called busy. */
static int h2_flush(struct rdp_h2 *h)
{
	if (h->close_due || h->free_pending)
		return 0;
	for (;;) {
		while (rdp_h2_pending_output(h) < h->max_output) {
			const uint8_t *p;
			ssize_t n = nghttp2_session_mem_send(h->session, &p);

			if (n < 0) {
				h2_set_closed(h, -EPROTO);
				return -EPROTO;
			}
			if (n == 0 || h->free_pending)
				break;
			if (out_append(h, p, (size_t)n) < 0) {
				h2_set_closed(h, -ENOMEM);
				return -ENOMEM;
			}
		}
		if (h->fd < 0 || rdp_h2_pending_output(h) == 0)
			break;
		{
			ssize_t w = send(h->fd, h->out + h->out_off, rdp_h2_pending_output(h),
					 MSG_NOSIGNAL | MSG_DONTWAIT);

			if (w < 0) {
				if (errno == EAGAIN || errno == EINTR)
					break;
				h2_set_closed(h, -errno);
				return -errno;
			}
			h->out_off += (size_t)w;
			if (w > 0)
				h->last_activity = rdp_now_usec();
			if (rdp_h2_pending_output(h) > 0)
				break; /* the socket is full */
			h->out_off = h->out_len = 0;
			out_shrink(h);
			if (!nghttp2_session_want_write(h->session))
				break;
		}
	}
	if (!nghttp2_session_want_read(h->session) && !nghttp2_session_want_write(h->session) &&
	    rdp_h2_pending_output(h) == 0)
		h2_set_closed(h, 0);
	h2_update_events(h);
	return 0;
}

/* Must be called busy. A fatal receive error: say GOAWAY if we can, then close. */
static void h2_recv_failed(struct rdp_h2 *h, int error)
{
	(void)nghttp2_session_terminate_session(h->session, NGHTTP2_PROTOCOL_ERROR);
	(void)h2_flush(h);
	h2_set_closed(h, error);
}

static int h2_recv(struct rdp_h2 *h, const uint8_t *data, size_t len)
{
	ssize_t r = nghttp2_session_mem_recv(h->session, data, len);

	if (h->free_pending)
		return -ECANCELED;
	if (r < 0) {
		h2_recv_failed(h, r == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPROTO);
		return r == NGHTTP2_ERR_NOMEM ? -ENOMEM : -EPROTO;
	}
	return 0;
}

static int h2_io(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct rdp_h2 *h = userdata;
	int r = 0, i;

	h->busy++;
	if (revents & EPOLLOUT)
		(void)h2_flush(h);
	if ((revents & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !h->close_due) {
		for (i = 0; i < READS_PER_EVENT && !h->close_due && !h->free_pending; i++) {
			uint8_t buf[READ_CHUNK];
			ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

			if (n == 0) {
				h2_set_closed(h, 0); /* EOF */
				break;
			}
			if (n < 0) {
				if (errno == EAGAIN || errno == EINTR)
					break;
				h2_set_closed(h, -errno);
				break;
			}
			h->last_activity = rdp_now_usec();
			if (h2_recv(h, buf, (size_t)n) < 0)
				break;
			if (rdp_h2_pending_output(h) >= h->max_output)
				break;
			if ((size_t)n < sizeof(buf))
				break;
		}
		(void)h2_flush(h);
	}
	h2_leave(h);
	return r;
}

static int h2_defer(struct rdp_event_source *s, void *userdata)
{
	struct rdp_h2 *h = userdata;

	h->busy++;
	(void)h2_flush(h);
	h2_leave(h);
	return 0;
}

int rdp_h2_new(struct rdp_event *e, int fd, const struct rdp_h2_config *cfg,
	       const struct rdp_h2_ops *ops, void *userdata, struct rdp_h2 **ret)
{
	_cleanup_close_ int fd_owned = fd;
	nghttp2_session_callbacks *cbs = NULL;
	nghttp2_option *opt = NULL;
	nghttp2_settings_entry iv[3];
	struct rdp_h2 *h;
	size_t niv = 0;
	int r;

	if ((fd >= 0 && !e) || !cfg || !ops || !ret)
		return -EINVAL;
	h = rdp_calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->e = e;
	h->fd = -1;
	h->ops = ops;
	h->userdata = userdata;
	h->max_output = cfg->max_output ? cfg->max_output : 65536;
	h->last_activity = rdp_now_usec();

	if (nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_option_new(&opt) != 0) {
		r = -ENOMEM;
		goto fail;
	}
	nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, cb_begin_headers);
	nghttp2_session_callbacks_set_on_header_callback(cbs, cb_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, cb_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, cb_data_chunk);
	nghttp2_session_callbacks_set_on_frame_send_callback(cbs, cb_frame_send);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, cb_stream_close);

	/* We check pseudo-headers ourselves: old kubelets send '/' in :authority. */
	nghttp2_option_set_no_http_messaging(opt, 1);
	nghttp2_option_set_peer_max_concurrent_streams(opt, cfg->max_streams ? cfg->max_streams
									     : 100);
	nghttp2_option_set_max_send_header_block_length(opt, 65536);
	/* HPACK tables stay at 4 KiB both ways whatever the peer's SETTINGS say. */
	nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
	/* Frames nghttp2 queues by itself (SETTINGS and PING ACKs, RST_STREAM) while the peer
	 * does not read: nghttp2 ends the session with ENHANCE_YOUR_CALM past this. */
	nghttp2_option_set_max_outbound_ack(opt, 256);
	/* A stream reset is cheap for a peer and costs us a call; a flood of them ends it. */
	nghttp2_option_set_stream_reset_rate_limit(opt, 1000, 33);

	if (cfg->server)
		r = nghttp2_session_server_new3(&h->session, cbs, h, opt,
							(nghttp2_mem *)rdp_nghttp2_mem());
	else
		r = nghttp2_session_client_new3(&h->session, cbs, h, opt,
							(nghttp2_mem *)rdp_nghttp2_mem());
	if (r != 0) {
		r = -ENOMEM;
		goto fail;
	}

	iv[niv++] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
					      cfg->max_streams > 1 ? cfg->max_streams : 100 };
	iv[niv++] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE,
					      (uint32_t)(cfg->max_header_list ? cfg->max_header_list
									  : 16384) };
	if (!cfg->server)
		iv[niv++] = (nghttp2_settings_entry){ NGHTTP2_SETTINGS_ENABLE_PUSH, 0 };
	if (nghttp2_submit_settings(h->session, NGHTTP2_FLAG_NONE, iv, niv) != 0) {
		r = -ENOMEM;
		goto fail;
	}

	if (e) {
		r = rdp_event_add_defer(e, h2_defer, h, &h->defer);
		if (r < 0)
			goto fail;
	}
	if (fd >= 0) {
		r = rdp_event_add_io(e, fd, EPOLLIN, h2_io, h, &h->io);
		if (r < 0)
			goto fail;
		h->io_events = EPOLLIN;
		h->fd = TAKE_FD(fd_owned);
	}
	nghttp2_session_callbacks_del(cbs);
	nghttp2_option_del(opt);
	*ret = h;
	return 0;
fail:
	nghttp2_session_callbacks_del(cbs);
	nghttp2_option_del(opt);
	h2_really_free(h);
	return r;
}

nghttp2_session *rdp_h2_session(struct rdp_h2 *h)
{
	return h->session;
}

void *rdp_h2_userdata(struct rdp_h2 *h)
{
	return h->userdata;
}

int rdp_h2_fd(const struct rdp_h2 *h)
{
	return h->fd;
}

bool rdp_h2_is_closed(const struct rdp_h2 *h)
{
	return h->close_due || h->closed;
}

void rdp_h2_schedule_flush(struct rdp_h2 *h)
{
	if (h && h->defer)
		(void)rdp_event_source_defer(h->defer);
}

int rdp_h2_flush(struct rdp_h2 *h)
{
	int r;

	h->busy++;
	r = h2_flush(h);
	if (h2_leave(h))
		return -ECANCELED;
	return r;
}

void rdp_h2_shutdown(struct rdp_h2 *h, uint32_t error_code)
{
	if (!h || h->close_due)
		return;
	/* without memory for the GOAWAY, just close */
	if (nghttp2_session_terminate_session(h->session, error_code) != 0)
		h2_set_closed(h, -ENOMEM);
	rdp_h2_schedule_flush(h);
}

uint64_t rdp_h2_last_activity(const struct rdp_h2 *h)
{
	return h->last_activity;
}

void rdp_h2_close(struct rdp_h2 *h, uint32_t error_code, int error)
{
	if (!h || h->close_due || h->free_pending)
		return;
	h->busy++;
	/* one non-blocking try to tell the peer; whatever happens, we are done with it */
	if (nghttp2_session_terminate_session(h->session, error_code) == 0)
		(void)h2_flush(h);
	h2_set_closed(h, error);
	h2_leave(h);
}

int rdp_h2_feed(struct rdp_h2 *h, const uint8_t *data, size_t len)
{
	int r;

	if (h->close_due)
		return -ESHUTDOWN;
	h->last_activity = rdp_now_usec();
	h->busy++;
	r = h2_recv(h, data, len);
	if (r == 0)
		r = h2_flush(h);
	if (h2_leave(h))
		return -ECANCELED;
	return r;
}

size_t rdp_h2_output(struct rdp_h2 *h, const uint8_t **p)
{
	h->busy++;
	(void)h2_flush(h);
	h2_leave(h);
	*p = h->out + h->out_off;
	return rdp_h2_pending_output(h);
}

void rdp_h2_consume(struct rdp_h2 *h, size_t n)
{
	if (n > rdp_h2_pending_output(h))
		n = rdp_h2_pending_output(h);
	h->out_off += n;
	if (n > 0)
		h->last_activity = rdp_now_usec();
}
