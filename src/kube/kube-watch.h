/* SPDX-License-Identifier: MIT */
/*
 * Watches of the API server (GET <list path>&watch=1&resourceVersion=RV&allowWatchBookmarks=
 * true&timeoutSeconds=N), as the API server speaks them: a 200 whose chunked body is a
 * stream of JSON objects, one per line, {"type": "ADDED|MODIFIED|DELETED|BOOKMARK|ERROR",
 * "object": {...}}. A BOOKMARK's object carries only metadata.resourceVersion (where to
 * resume); an ERROR's object is a Status (code 410 "Expired"/"Gone": the resourceVersion is
 * older than the server's history, list again). A resourceVersion already too old at the
 * start is answered 410 instead of the stream. The server ends the stream after
 * timeoutSeconds.
 *
 * Two parts:
 *   - the event parser: bytes of the stream in any chunking -> events; bounded
 *     (RDP_KUBE_WATCH_EVENT_MAX per event, -E2BIG beyond) and fuzzed (tests/fuzz);
 *   - the watcher: one watch at a time on a thread of its own with its own client (a watch
 *     holds its connection for minutes; the loop never waits for it). It ends at the first
 *     ADDED, MODIFIED or DELETED event (the owner acts, then starts the next one from that
 *     event's resourceVersion), at a 410, at the end of the stream, or at a failure, and
 *     calls back on the loop with what happened. Bookmarks only move the resourceVersion on.
 *
 * Library code: negative errno, no logging.
 */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "kube-client.h"

#define RDP_KUBE_WATCH_EVENT_MAX (4 * 1024 * 1024) /* one event line */
#define RDP_KUBE_RV_MAX 128 /* a resourceVersion we keep (etcd's are ~20 digits) */
#define RDP_KUBE_WATCH_SLACK_MS 30000 /* past timeoutSeconds before we give up on a stream */

enum rdp_kube_watch_type {
	RDP_KUBE_WATCH_ADDED,
	RDP_KUBE_WATCH_MODIFIED,
	RDP_KUBE_WATCH_DELETED,
	RDP_KUBE_WATCH_BOOKMARK,
	RDP_KUBE_WATCH_ERROR,
};

/* "ADDED"... */
const char *rdp_kube_watch_type_name(enum rdp_kube_watch_type t);

/*
 * A resourceVersion we can put in a query: 1..RDP_KUBE_RV_MAX-1 characters of [0-9A-Za-z._-]
 * (the API server's are decimal; anything else is refused rather than escaped).
 */
bool rdp_kube_rv_valid(const char *rv);

/* metadata.resourceVersion of an object, or NULL. */
const char *rdp_kube_object_rv(const json_t *obj);

struct rdp_kube_watch_parser;

int rdp_kube_watch_parser_new(size_t max_event, struct rdp_kube_watch_parser **ret);
void rdp_kube_watch_parser_free(struct rdp_kube_watch_parser *p);

/*
 * Called for each event: its type and object (borrowed: json_incref() to keep it). Returns 0
 * for the next one, 1 to stop (feed returns 1 and takes no more), or a negative errno (feed
 * returns it).
 */
typedef int (*rdp_kube_watch_event_cb)(enum rdp_kube_watch_type type, json_t *object,
				       void *userdata);

/*
 * Feeds len bytes of the stream. Each line (ended by '\n'; blank ones skipped) must be one
 * event: a JSON object with "type" one of the five and "object" an object. Returns 0 (more
 * welcome), 1 (cb stopped), -E2BIG (a line over max_event), -EBADMSG (a line that is not
 * such an event), -ENOMEM. After a non-zero result, further feeds return it again.
 */
int rdp_kube_watch_parser_feed(struct rdp_kube_watch_parser *p, const char *buf, size_t len,
			       rdp_kube_watch_event_cb cb, void *userdata);

/* How a watch ended. */
enum rdp_kube_watch_end {
	RDP_KUBE_WATCH_END_CLOSED, /* the server ended the stream (timeoutSeconds): start again */
	RDP_KUBE_WATCH_END_EVENT, /* an ADDED, MODIFIED or DELETED event: type, object */
	RDP_KUBE_WATCH_END_GONE, /* 410 (answered, or an ERROR event): list again */
	RDP_KUBE_WATCH_END_FAILED, /* the request failed, another status, another ERROR, bad bytes */
};

const char *rdp_kube_watch_end_name(enum rdp_kube_watch_end e); /* "closed"... */

struct rdp_kube_watch_result {
	enum rdp_kube_watch_end end;
	int result; /* the request's 0 or negative errno; -ECANCELED when the watcher stops */
	int status; /* the HTTP status, 0 without one */
	enum rdp_kube_watch_type type; /* END_EVENT */
	json_t *object; /* END_EVENT: the event's object; else a Status when there was one */
	char rv[RDP_KUBE_RV_MAX]; /* the newest resourceVersion seen (event, bookmark); "" none */
	unsigned long bookmarks; /* in this watch */
	char error[256]; /* FAILED, GONE: in words */
};

struct rdp_event;
struct rdp_kube_watch;

typedef void (*rdp_kube_watch_cb)(const struct rdp_kube_watch_result *res, void *userdata);

/* A watcher with a client of cfg (copied); ret_error as rdp_kube_client_new() has it. */
int rdp_kube_watch_new(struct rdp_event *e, const struct rdp_kube_config *cfg,
		       struct rdp_kube_watch **ret, char **ret_error);
/* Ends a running watch (its cb gets -ECANCELED), joins the thread, frees. Accepts NULL. */
struct rdp_kube_watch *rdp_kube_watch_free(struct rdp_kube_watch *w);

/*
 * Starts a watch of list_path (a list path, with or without a query: "...?fieldSelector=...")
 * from rv, for timeout_s seconds (the server's timeoutSeconds; given up timeout_s +
 * RDP_KUBE_WATCH_SLACK_MS later). cb runs on the loop when it ends (never from inside this
 * call); res->object is freed after it returns. Returns 0, -EBUSY while one runs, -EINVAL (an
 * rv rdp_kube_rv_valid() refuses, a path too long), -ESHUTDOWN.
 */
int rdp_kube_watch_start(struct rdp_kube_watch *w, const char *list_path, const char *rv,
			 unsigned timeout_s, rdp_kube_watch_cb cb, void *userdata);
bool rdp_kube_watch_running(const struct rdp_kube_watch *w);

/* Watches started (each one request, two after a 401). */
unsigned long rdp_kube_watch_started(const struct rdp_kube_watch *w);
