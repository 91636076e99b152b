/* SPDX-License-Identifier: MIT */
/*
 * For tests and fuzzers only: http-server connections without a socket, so that the request
 * parser and every decision of the server (status, keep-alive, limits) run on byte buffers.
 * The output is the exact bytes a socket would have carried.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "http-server.h"

struct rdp_http_conn;

/* A server without a loop nor listener: memory connections only, no timeouts. */
int rdp_http_server_new_memory(const struct rdp_http_limits *limits, rdp_http_handler_cb cb,
			       void *userdata, struct rdp_http_server **ret);
/* Counts against max_connections like an accepted socket (-EBUSY beyond it). */
int rdp_http_conn_new_memory(struct rdp_http_server *s, struct rdp_http_conn **ret);
/*
 * Pushes client bytes; returns how many were taken: fewer than len (maybe 0) while a
 * request waits for its response or the response waits to be read, 0 once closed.
 */
size_t rdp_http_conn_feed(struct rdp_http_conn *c, const void *data, size_t len);
/*
 * Takes up to size bytes of the response being written. Once all of it is taken the
 * connection goes on (parses what was fed meanwhile) or closes.
 */
size_t rdp_http_conn_read_output(struct rdp_http_conn *c, void *buf, size_t size);
/* The client goes away (as a FIN or reset on a socket). */
void rdp_http_conn_peer_close(struct rdp_http_conn *c);
bool rdp_http_conn_is_closed(const struct rdp_http_conn *c);
/*
 * Frees a memory connection; one whose request is in the handler's hands is freed by
 * rdp_http_respond() instead. Accepts NULL, returns NULL.
 */
struct rdp_http_conn *rdp_http_conn_free(struct rdp_http_conn *c);
