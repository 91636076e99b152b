/* SPDX-License-Identifier: MIT */
/*
 * One HTTP/2 connection: an nghttp2 session fed from and drained into memory buffers
 * (nghttp2_session_mem_recv/mem_send). With an fd, the connection does its own socket I/O on
 * the event loop; without one (fd < 0) the owner pushes input with rdp_h2_feed() and pulls
 * output with rdp_h2_output(), which is how tests and fuzzers drive a whole session.
 *
 * The owner sees the session through struct rdp_h2_ops; nghttp2's user_data is the rdp_h2.
 * Output is bounded: beyond max_output buffered bytes no more frames are produced and no more
 * input is read until the peer drains it (backpressure).
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <nghttp2/nghttp2.h>

struct rdp_event;
struct rdp_h2;

struct rdp_h2_config {
	bool server;
	uint32_t max_streams;   /* SETTINGS_MAX_CONCURRENT_STREAMS we advertise (never 1) */
	size_t max_header_list; /* SETTINGS_MAX_HEADER_LIST_SIZE we advertise */
	size_t max_output;      /* bytes of buffered output before backpressure; default 64 KiB */
};

/*
 * Callbacks; each returns 0 or an nghttp2 error code (NGHTTP2_ERR_CALLBACK_FAILURE ends the
 * connection). Any may be NULL.
 */
struct rdp_h2_ops {
	int (*begin_headers)(struct rdp_h2 *h, const nghttp2_frame *f, void *userdata);
	int (*header)(struct rdp_h2 *h, const nghttp2_frame *f, const uint8_t *name,
		      size_t namelen, const uint8_t *value, size_t valuelen, void *userdata);
	int (*frame_recv)(struct rdp_h2 *h, const nghttp2_frame *f, void *userdata);
	int (*data_chunk)(struct rdp_h2 *h, int32_t stream_id, const uint8_t *data, size_t len,
			  void *userdata);
	int (*frame_send)(struct rdp_h2 *h, const nghttp2_frame *f, void *userdata);
	int (*stream_close)(struct rdp_h2 *h, int32_t stream_id, uint32_t error_code,
			    void *userdata);
	/*
	 * The connection is over (peer EOF or reset, protocol error, GOAWAY exchanged and
	 * nothing left to write). Called once, from the loop (or rdp_h2_feed), never from
	 * inside nghttp2. The owner may rdp_h2_free() here.
	 */
	void (*closed)(struct rdp_h2 *h, int error, void *userdata);
};

/*
 * Creates the session and queues our SETTINGS (flushed at once: on the next loop iteration
 * with an fd, by rdp_h2_output() without). fd (owned from now on, also on failure) may be -1.
 * e may be NULL only when fd < 0.
 */
int rdp_h2_new(struct rdp_event *e, int fd, const struct rdp_h2_config *cfg,
	       const struct rdp_h2_ops *ops, void *userdata, struct rdp_h2 **ret);
/* Frees at once, or at the end of the current nghttp2 call if inside one. Accepts NULL. */
struct rdp_h2 *rdp_h2_free(struct rdp_h2 *h);

nghttp2_session *rdp_h2_session(struct rdp_h2 *h);
void *rdp_h2_userdata(struct rdp_h2 *h);
int rdp_h2_fd(const struct rdp_h2 *h);

/* Produces and writes pending frames at the end of this loop iteration. */
void rdp_h2_schedule_flush(struct rdp_h2 *h);
/* Produces (and with an fd, writes) what it can now. Returns 0 or a negative errno. */
int rdp_h2_flush(struct rdp_h2 *h);
/*
 * Sends GOAWAY(error_code) and closes once it is written; streams still open are closed
 * (stream_close) as nghttp2 tears the session down.
 */
void rdp_h2_shutdown(struct rdp_h2 *h, uint32_t error_code);
/*
 * Ends the connection now: one non-blocking attempt to write GOAWAY(error_code), then closed
 * (ops->closed with error) whether or not the peer read anything. For a peer that must not
 * hold the connection any longer (timeouts, a peer that never reads).
 */
void rdp_h2_close(struct rdp_h2 *h, uint32_t error_code, int error);
bool rdp_h2_is_closed(const struct rdp_h2 *h);
/* CLOCK_MONOTONIC usec of the last byte read from or written to the peer (or creation). */
uint64_t rdp_h2_last_activity(const struct rdp_h2 *h);
size_t rdp_h2_pending_output(const struct rdp_h2 *h);

/* Memory mode: feeds bytes the peer sent. Returns 0 or a negative errno (the session ended). */
int rdp_h2_feed(struct rdp_h2 *h, const uint8_t *data, size_t len);
/* Memory mode: flushes, then points *p at the buffered output and returns its length. */
size_t rdp_h2_output(struct rdp_h2 *h, const uint8_t **p);
/* Memory mode: drops n bytes of the buffered output (the peer "read" them). */
void rdp_h2_consume(struct rdp_h2 *h, size_t n);
