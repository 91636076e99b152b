/* SPDX-License-Identifier: MIT */
/*
 * The C client against the C server over real unix sockets, both on one event loop: the
 * client's call is in flight while the same loop serves it (as with kubelet's Register).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "event.h"
#include "grpc.h"
#include "macro.h"
#include "test.h"

struct result {
	int n;
	enum rdp_grpc_code code;
	char message[256];
	uint8_t resp[64];
	size_t len;
};

static struct rdp_grpc_call *held;
static int n_closed;

static void on_reply(enum rdp_grpc_code code, const char *message, const uint8_t *resp,
		     size_t len, void *userdata)
{
	struct result *r = userdata;

	r->n++;
	r->code = code;
	snprintf(r->message, sizeof(r->message), "%s", message);
	r->len = len;
	if (len && len <= sizeof(r->resp))
		memcpy(r->resp, resp, len);
}

static void on_close(struct rdp_grpc_call *c, void *ud)
{
	n_closed++;
	held = NULL;
}

static void echo(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	rdp_grpc_call_reply(c, req, len);
}

static void fail(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	rdp_grpc_call_fail(c, RDP_GRPC_INVALID_ARGUMENT, "the ResourceName \"x\" is invalid\n100%");
}

static void hold(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	held = c;
	rdp_grpc_call_set_close_cb(c, on_close, NULL);
}

static struct rdp_event *loop;

static int two_more(struct rdp_event_source *s, void *userdata)
{
	struct rdp_grpc_call *c = userdata;

	rdp_event_source_free(s);
	rdp_grpc_call_send(c, (const uint8_t *)"b", 1);
	rdp_grpc_call_fail(c, RDP_GRPC_OK, "");
	return 0;
}

/* Two messages, the second once the first is out (queued ones would coalesce). */
static void two(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	struct rdp_event_source *t;

	rdp_grpc_call_send(c, (const uint8_t *)"a", 1);
	if (rdp_event_add_timer(loop, 20000, two_more, c, &t) < 0)
		rdp_grpc_call_fail(c, RDP_GRPC_INTERNAL, "no timer");
}

static void none(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	rdp_grpc_call_fail(c, RDP_GRPC_OK, "");
}

static void big(struct rdp_grpc_call *c, const uint8_t *req, size_t len, void *ud)
{
	size_t n = (4u << 20) + 1;
	uint8_t *b = rdp_calloc(1, n);

	if (b)
		rdp_grpc_call_reply(c, b, n);
	else
		rdp_grpc_call_fail(c, RDP_GRPC_RESOURCE_EXHAUSTED, "");
	rdp_free(b);
}

static const struct rdp_grpc_method methods[] = {
	{ .path = "/t.T/Echo", .handler = echo },
	{ .path = "/t.T/Fail", .handler = fail },
	{ .path = "/t.T/Hold", .handler = hold },
	{ .path = "/t.T/Two", .handler = two, .server_streaming = true },
	{ .path = "/t.T/None", .handler = none },
	{ .path = "/t.T/Big", .handler = big },
};

static void wait_result(struct rdp_event *e, struct result *r)
{
	int i;

	for (i = 0; i < 2000 && r->n == 0; i++)
		(void)rdp_event_run_once(e, 10);
}

static void drain(struct rdp_event *e)
{
	int i;

	for (i = 0; i < 50; i++)
		(void)rdp_event_run_once(e, 2);
}

static int do_call(struct rdp_event *e, const char *sock, const char *method, const char *req,
		   uint64_t timeout, struct result *r)
{
	struct rdp_grpc_client_call *c;
	int k;

	memset(r, 0, sizeof(*r));
	k = rdp_grpc_unary_call(e, sock, method, (const uint8_t *)req, strlen(req), timeout,
				on_reply, r, &c);
	if (k < 0)
		return k;
	wait_result(e, r);
	return 0;
}

static void test_calls(const char *dir)
{
	struct rdp_grpc_limits l;
	struct rdp_event *e;
	struct rdp_grpc_server *s;
	struct result r;
	char sock[256], missing[256];

	snprintf(sock, sizeof(sock), "%s/t.sock", dir);
	snprintf(missing, sizeof(missing), "%s/missing.sock", dir);
	rdp_grpc_limits_default(&l);
	l.max_message = 8u << 20;
	l.max_send_message = 8u << 20; /* lets Big exceed the client's 4 MiB */
	EXPECT_EQ(rdp_event_new(&e), 0);
	loop = e;
	EXPECT_EQ(rdp_grpc_server_new(e, sock, methods, ARRAY_SIZE(methods), &l, NULL, &s), 0);
	EXPECT_TRUE(rdp_grpc_server_socket_present(s));
	EXPECT_STREQ(rdp_grpc_server_path(s), sock);

	EXPECT_EQ(do_call(e, sock, "/t.T/Echo", "hello", 0, &r), 0);
	EXPECT_EQ(r.n, 1);
	EXPECT_EQ(r.code, RDP_GRPC_OK);
	EXPECT_TRUE(r.len == 5 && !memcmp(r.resp, "hello", 5));

	EXPECT_EQ(do_call(e, sock, "/t.T/Echo", "", 30000000, &r), 0);
	EXPECT_EQ(r.code, RDP_GRPC_OK);
	EXPECT_EQ(r.len, 0);

	EXPECT_EQ(do_call(e, sock, "/t.T/Fail", "x", 0, &r), 0);
	EXPECT_EQ(r.code, RDP_GRPC_INVALID_ARGUMENT);
	EXPECT_STREQ(r.message, "the ResourceName \"x\" is invalid\n100%"); /* decoded */

	EXPECT_EQ(do_call(e, sock, "/t.T/Nope", "x", 0, &r), 0);
	EXPECT_EQ(r.code, RDP_GRPC_UNIMPLEMENTED);

	EXPECT_EQ(do_call(e, sock, "/t.T/Two", "", 0, &r), 0);
	EXPECT_EQ(r.code, RDP_GRPC_INTERNAL);
	EXPECT_CONTAINS(r.message, "cardinality violation");

	EXPECT_EQ(do_call(e, sock, "/t.T/None", "", 0, &r), 0);
	EXPECT_EQ(r.code, RDP_GRPC_INTERNAL);
	EXPECT_CONTAINS(r.message, "received no response message");

	EXPECT_EQ(do_call(e, sock, "/t.T/Big", "", 0, &r), 0);
	EXPECT_EQ(r.code, RDP_GRPC_RESOURCE_EXHAUSTED);

	/* deadline: the server's handler never answers; both sides give up */
	EXPECT_EQ(do_call(e, sock, "/t.T/Hold", "x", 50000, &r), 0);
	EXPECT_EQ(r.n, 1);
	EXPECT_EQ(r.code, RDP_GRPC_DEADLINE_EXCEEDED);
	drain(e);
	EXPECT_EQ(n_closed, 1);
	EXPECT_TRUE(held == NULL);

	/* cancel while in flight: no callback, the server sees the close */
	{
		struct rdp_grpc_client_call *c = NULL;

		memset(&r, 0, sizeof(r));
		EXPECT_EQ(rdp_grpc_unary_call(e, sock, "/t.T/Hold", (const uint8_t *)"x", 1, 0,
					      on_reply, &r, &c), 0);
		while (!held)
			(void)rdp_event_run_once(e, 10);
		c = rdp_grpc_client_call_cancel(c);
		drain(e);
		EXPECT_EQ(r.n, 0);
		EXPECT_EQ(n_closed, 2);
	}

	/* several calls in flight at once on one loop */
	{
		struct result rs[10];
		int i, done;

		memset(rs, 0, sizeof(rs));
		for (i = 0; i < 10; i++)
			EXPECT_EQ(rdp_grpc_unary_call(e, sock, "/t.T/Echo", (const uint8_t *)"m", 1,
						      0, on_reply, &rs[i], NULL), 0);
		for (i = 0, done = 0; i < 2000 && done < 10; i++) {
			int j;

			(void)rdp_event_run_once(e, 10);
			for (j = 0, done = 0; j < 10; j++)
				done += rs[j].n;
		}
		for (i = 0; i < 10; i++) {
			EXPECT_EQ(rs[i].n, 1);
			EXPECT_EQ(rs[i].code, RDP_GRPC_OK);
		}
	}
	drain(e);
	EXPECT_EQ(rdp_grpc_server_connections(s), 0);

	/* the server goes away while a call is held: close callback, client UNAVAILABLE-ish */
	{
		memset(&r, 0, sizeof(r));
		EXPECT_EQ(rdp_grpc_unary_call(e, sock, "/t.T/Hold", (const uint8_t *)"x", 1, 0,
					      on_reply, &r, NULL), 0);
		while (!held)
			(void)rdp_event_run_once(e, 10);
		s = rdp_grpc_server_free(s);
		EXPECT_EQ(n_closed, 3);
		wait_result(e, &r);
		EXPECT_EQ(r.n, 1);
		EXPECT_TRUE(r.code != RDP_GRPC_OK);
	}
	EXPECT_TRUE(access(sock, F_OK) < 0); /* unlinked */

	/* no server: synchronous errors, no callback */
	memset(&r, 0, sizeof(r));
	EXPECT_EQ(do_call(e, missing, "/t.T/Echo", "x", 0, &r), -ENOENT);
	EXPECT_EQ(r.n, 0);
	EXPECT_EQ(mknod(missing, S_IFSOCK | 0600, 0), 0); /* a dead socket file */
	EXPECT_EQ(do_call(e, missing, "/t.T/Echo", "x", 0, &r), -ECONNREFUSED);

	/* a stale socket is replaced; a regular file is not */
	EXPECT_EQ(rdp_grpc_server_new(e, missing, methods, ARRAY_SIZE(methods), NULL, NULL, &s), 0);
	EXPECT_EQ(do_call(e, missing, "/t.T/Echo", "again", 0, &r), 0);
	EXPECT_EQ(r.code, RDP_GRPC_OK);
	/* someone else replaced our socket file: we must not unlink theirs */
	unlink(missing);
	EXPECT_TRUE(!rdp_grpc_server_socket_present(s));
	EXPECT_EQ(mknod(missing, S_IFSOCK | 0600, 0), 0);
	s = rdp_grpc_server_free(s);
	EXPECT_EQ(access(missing, F_OK), 0);
	unlink(missing);
	{
		int fd = open(missing, O_CREAT | O_WRONLY, 0600);

		close(fd);
		EXPECT_EQ(rdp_grpc_server_new(e, missing, methods, ARRAY_SIZE(methods), NULL, NULL,
					      &s),
			  -EEXIST);
		unlink(missing);
	}
	e = rdp_event_free(e);
}

/* Every allocation of a client call and server round trip can fail cleanly. */
static void test_alloc_failures(const char *dir)
{
	char sock[256];
	unsigned long n;

	snprintf(sock, sizeof(sock), "%s/f.sock", dir);
	for (n = 1; n < 400; n++) {
		struct rdp_event *e = NULL;
		struct rdp_grpc_server *s = NULL;
		struct result r = {};
		int i;

		rdp_alloc_fail_at(n);
		if (rdp_event_new(&e) == 0 &&
		    rdp_grpc_server_new(e, sock, methods, ARRAY_SIZE(methods), NULL, NULL, &s) == 0 &&
		    rdp_grpc_unary_call(e, sock, "/t.T/Echo", (const uint8_t *)"x", 1, 1000000,
					on_reply, &r, NULL) == 0) {
			for (i = 0; i < 300 && r.n == 0; i++)
				(void)rdp_event_run_once(e, 10);
			EXPECT_EQ(r.n, 1); /* exactly one answer, whatever failed */
		}
		rdp_alloc_fail_at(0);
		for (i = 0; e && i < 5; i++)
			(void)rdp_event_run_once(e, 1);
		rdp_grpc_server_free(s);
		/* the client sees the server go and frees its connection */
		for (i = 0; e && i < 5; i++)
			(void)rdp_event_run_once(e, 1);
		rdp_event_free(e);
	}
}

int main(void)
{
	char dir[] = "/tmp/rdp-test-grpc-XXXXXX";

	if (!mkdtemp(dir))
		return 1;
	test_calls(dir);
	test_alloc_failures(dir);
	rmdir(dir);
	return test_summary("test-grpc");
}
