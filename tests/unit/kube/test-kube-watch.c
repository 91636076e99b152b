/* SPDX-License-Identifier: MIT */
/*
 * kube-watch: the event parser (lines in any chunking, the five types, bounds, bad lines,
 * sticky results, stop), resourceVersion checks, and kube-http's stream mode (a chunked
 * watch response handed on as it comes; an error status kept as a body).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "kube-http.h"
#include "kube-watch.h"
#include "test.h"

struct seen {
	int n;
	enum rdp_kube_watch_type types[16];
	char rv[16][32];
	int stop_at; /* stop at this event (1-based), 0 never */
};

static int on_event(enum rdp_kube_watch_type t, json_t *obj, void *userdata)
{
	struct seen *s = userdata;
	const char *rv = rdp_kube_object_rv(obj);

	if (s->n < 16) {
		s->types[s->n] = t;
		snprintf(s->rv[s->n], sizeof(s->rv[0]), "%s", rv ? rv : "");
	}
	s->n++;
	return s->stop_at && s->n == s->stop_at ? 1 : 0;
}

static const char stream[] =
	"{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"5\"}}}\n"
	"\r\n"
	"{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"ResourceSlice\",\"metadata\":"
	"{\"resourceVersion\":\"9\"}}}\n"
	"{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"10\"}}}\n"
	"{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"resourceVersion\":\"11\"}}}\n"
	"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n";

static void test_parser_chunkings(void)
{
	for (size_t step = 1; step <= sizeof(stream); step += 7) {
		struct rdp_kube_watch_parser *p;
		struct seen s = {0};
		int r = 0;

		EXPECT_EQ(rdp_kube_watch_parser_new(0, &p), 0);
		for (size_t off = 0; off < sizeof(stream) - 1 && r == 0; off += step) {
			size_t n = sizeof(stream) - 1 - off < step ? sizeof(stream) - 1 - off : step;

			r = rdp_kube_watch_parser_feed(p, stream + off, n, on_event, &s);
		}
		EXPECT_EQ(r, 0);
		EXPECT_EQ(s.n, 5);
		EXPECT_EQ(s.types[0], RDP_KUBE_WATCH_ADDED);
		EXPECT_EQ(s.types[1], RDP_KUBE_WATCH_BOOKMARK);
		EXPECT_STREQ(s.rv[1], "9");
		EXPECT_EQ(s.types[2], RDP_KUBE_WATCH_MODIFIED);
		EXPECT_EQ(s.types[3], RDP_KUBE_WATCH_DELETED);
		EXPECT_STREQ(s.rv[3], "11");
		EXPECT_EQ(s.types[4], RDP_KUBE_WATCH_ERROR);
		rdp_kube_watch_parser_free(p);
	}
}

static void test_parser_stop_and_errors(void)
{
	struct rdp_kube_watch_parser *p;
	struct seen s = {.stop_at = 2};
	char big[300];

	EXPECT_EQ(rdp_kube_watch_parser_new(0, &p), 0);
	EXPECT_EQ(rdp_kube_watch_parser_feed(p, stream, strlen(stream), on_event, &s), 1);
	EXPECT_EQ(s.n, 2);
	/* sticky: nothing more is taken */
	EXPECT_EQ(rdp_kube_watch_parser_feed(p, stream, strlen(stream), on_event, &s), 1);
	EXPECT_EQ(s.n, 2);
	rdp_kube_watch_parser_free(p);

	static const char *const bad[] = {
		"not json\n",
		"[1,2]\n",
		"{\"type\":\"ADDED\"}\n",
		"{\"type\":\"ADDED\",\"object\":[]}\n",
		"{\"type\":\"SOMETHING\",\"object\":{}}\n",
		"{\"type\":7,\"object\":{}}\n",
		"{\"type\":\"ADDED\",\"type\":\"DELETED\",\"object\":{}}\n",
		"{\"type\":\"ADDED\",\"object\":{}} trailing\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct seen z = {0};

		EXPECT_EQ(rdp_kube_watch_parser_new(0, &p), 0);
		EXPECT_EQ(rdp_kube_watch_parser_feed(p, bad[i], strlen(bad[i]), on_event, &z),
			  -EBADMSG);
		EXPECT_EQ(z.n, 0);
		EXPECT_EQ(rdp_kube_watch_parser_feed(p, "\n", 1, on_event, &z), -EBADMSG);
		rdp_kube_watch_parser_free(p);
	}
	/* an empty line before any other (no buffer yet: found by the fuzzer) */
	EXPECT_EQ(rdp_kube_watch_parser_new(0, &p), 0);
	EXPECT_EQ(rdp_kube_watch_parser_feed(p, "\n\n", 2, on_event, &s), 0);
	rdp_kube_watch_parser_free(p);
	/* a line over the bound, even before its end comes */
	memset(big, ' ', sizeof(big));
	EXPECT_EQ(rdp_kube_watch_parser_new(256, &p), 0);
	EXPECT_EQ(rdp_kube_watch_parser_feed(p, big, 200, on_event, &s), 0);
	EXPECT_EQ(rdp_kube_watch_parser_feed(p, big, 100, on_event, &s), -E2BIG);
	rdp_kube_watch_parser_free(p);
	/* a line of exactly the bound is fine */
	EXPECT_EQ(rdp_kube_watch_parser_new(256, &p), 0);
	EXPECT_EQ(rdp_kube_watch_parser_feed(p, big, 256, on_event, &s), 0);
	EXPECT_EQ(rdp_kube_watch_parser_feed(p, "\n", 1, on_event, &s), 0);
	rdp_kube_watch_parser_free(p);
}

static void test_rv(void)
{
	char longrv[200];

	EXPECT_TRUE(rdp_kube_rv_valid("123456"));
	EXPECT_TRUE(rdp_kube_rv_valid("a.b_c-9"));
	EXPECT_TRUE(!rdp_kube_rv_valid(""));
	EXPECT_TRUE(!rdp_kube_rv_valid(NULL));
	EXPECT_TRUE(!rdp_kube_rv_valid("1&watch=0"));
	EXPECT_TRUE(!rdp_kube_rv_valid("1 2"));
	memset(longrv, '1', sizeof(longrv) - 1);
	longrv[sizeof(longrv) - 1] = '\0';
	EXPECT_TRUE(!rdp_kube_rv_valid(longrv));
	longrv[RDP_KUBE_RV_MAX] = '\0'; /* one too many */
	EXPECT_TRUE(!rdp_kube_rv_valid(longrv));
	longrv[RDP_KUBE_RV_MAX - 1] = '\0'; /* fits snprintf into rv[RDP_KUBE_RV_MAX] */
	EXPECT_TRUE(rdp_kube_rv_valid(longrv));
	EXPECT_STREQ(rdp_kube_watch_type_name(RDP_KUBE_WATCH_BOOKMARK), "BOOKMARK");
	EXPECT_STREQ(rdp_kube_watch_end_name(RDP_KUBE_WATCH_END_GONE), "gone");
}

struct sink {
	char buf[512];
	size_t len;
	int stop_after; /* bytes; 0 never */
};

static int on_bytes(void *userdata, const char *b, size_t n)
{
	struct sink *s = userdata;

	if (n > sizeof(s->buf) - 1 - s->len)
		return -E2BIG;
	memcpy(s->buf + s->len, b, n);
	s->len += n;
	s->buf[s->len] = '\0';
	return s->stop_after && s->len >= (size_t)s->stop_after ? 1 : 0;
}

static void test_http_stream_mode(void)
{
	static const char resp[] = "HTTP/1.1 200 OK\r\n"
				   "Content-Type: application/json\r\n"
				   "Transfer-Encoding: chunked\r\n\r\n"
				   "6\r\n{\"a\":1\r\n"
				   "2\r\n}\n\r\n"
				   "0\r\n\r\n";
	static const char gone[] = "HTTP/1.1 410 Gone\r\nContent-Length: 15\r\n\r\n"
				   "{\"code\":410}\n  ";
	struct rdp_kube_http_parser *p;
	struct rdp_kube_response r;
	struct sink s = {0};

	/* a tiny body bound does not apply to a stream */
	EXPECT_EQ(rdp_kube_http_parser_new(4, &p), 0);
	rdp_kube_http_parser_set_stream(p, on_bytes, &s);
	for (size_t i = 0; i < sizeof(resp) - 1; i++) {
		int k = rdp_kube_http_parser_feed(p, resp + i, 1);

		EXPECT_EQ(k, i == sizeof(resp) - 2 ? 1 : 0);
	}
	EXPECT_STREQ(s.buf, "{\"a\":1}\n");
	EXPECT_TRUE(rdp_kube_http_parser_reusable(p));
	EXPECT_EQ(rdp_kube_http_parser_take(p, &r), 0);
	EXPECT_EQ(r.status, 200);
	EXPECT_EQ(r.body_len, 0);
	rdp_kube_response_done(&r);
	rdp_kube_http_parser_free(p);

	/* the reader stops: complete, the connection not reusable */
	s = (struct sink){.stop_after = 3};
	EXPECT_EQ(rdp_kube_http_parser_new(4, &p), 0);
	rdp_kube_http_parser_set_stream(p, on_bytes, &s);
	EXPECT_EQ(rdp_kube_http_parser_feed(p, resp, sizeof(resp) - 1), 1);
	EXPECT_TRUE(!rdp_kube_http_parser_reusable(p));
	EXPECT_STREQ(s.buf, "{\"a\":1");
	rdp_kube_http_parser_free(p);

	/* the reader's error is the feed's */
	s = (struct sink){0};
	EXPECT_EQ(rdp_kube_http_parser_new(4, &p), 0);
	rdp_kube_http_parser_set_stream(p, on_bytes, &s);
	s.len = sizeof(s.buf) - 2;
	EXPECT_EQ(rdp_kube_http_parser_feed(p, resp, sizeof(resp) - 1), -E2BIG);
	rdp_kube_http_parser_free(p);

	/* another status: kept as a body, under the bound */
	s = (struct sink){0};
	EXPECT_EQ(rdp_kube_http_parser_new(64, &p), 0);
	rdp_kube_http_parser_set_stream(p, on_bytes, &s);
	EXPECT_EQ(rdp_kube_http_parser_feed(p, gone, sizeof(gone) - 1), 1);
	EXPECT_EQ(s.len, 0);
	EXPECT_EQ(rdp_kube_http_parser_take(p, &r), 0);
	EXPECT_EQ(r.status, 410);
	EXPECT_STREQ(r.body, "{\"code\":410}\n  ");
	rdp_kube_response_done(&r);
	rdp_kube_http_parser_free(p);
}

int main(void)
{
	test_parser_chunkings();
	test_parser_stop_and_errors();
	test_rv();
	test_http_stream_mode();
	return test_summary("test-kube-watch");
}
