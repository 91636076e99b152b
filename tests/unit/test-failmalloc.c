/* SPDX-License-Identifier: MIT */
/*
 * Allocation-failure injection over a whole scenario, in the manner of nghttp2's failmalloc
 * and curl's torture mode: parse dgx.json, discover the dgx-h100 fixture node, build the
 * pools and the first resource's state, then serve kubelet's calls on a memory connection of
 * the real gRPC server with the real dp-service and plugin-watcher handlers (GetInfo,
 * NotifyRegistrationStatus, GetDevicePluginOptions, ListAndWatch, Allocate).
 *
 * The scenario runs once to count its allocations, then once for each of them with that one
 * failing. Every run must end cleanly: a negative errno from a step, the connection closed
 * with an error, or a gRPC error status (or RST_STREAM) on the affected calls; never a call
 * left without an answer on a live connection, never an answer that differs from the
 * undisturbed run's. ASan/LSan (the asan build) catch crashes and leaks.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>
#include <protobuf-c/protobuf-c.h>

#include "alloc.h"
#include "config.h"
#include "deviceplugin.pb-c.h"
#include "diag.h"
#include "discovery.h"
#include "dp-service.h"
#include "event.h"
#include "grpc-frame.h"
#include "grpc.h"
#include "h2.h"
#include "macro.h"
#include "pluginregistration.pb-c.h"
#include "pool.h"
#include "registration.h"
#include "test.h"

#define DP "/v1beta1.DevicePlugin/"
#define WATCHER "/pluginregistration.Registration/"

/* ---- the server side: the daemon's dispatch, on the real modules ---- */

struct server_ctx {
	struct rdp_dp_service *dp;
	struct rdp_watcher_info winfo;
	bool status_seen;
};

static void on_status(void *userdata, bool registered, const char *error)
{
	struct server_ctx *ctx = userdata;

	ctx->status_seen = registered;
}

static void on_call(struct rdp_grpc_call *call, const uint8_t *req, size_t len, void *userdata)
{
	struct server_ctx *ctx = userdata;
	const char *path = rdp_grpc_call_path(call);

	if (rdp_dp_service_handles(path))
		rdp_dp_service_dispatch(ctx->dp, call, req, len);
	else
		rdp_watcher_dispatch(&ctx->winfo, call, req, len);
}

static const struct rdp_grpc_method methods[] = {
	{ .path = DP "GetDevicePluginOptions", .handler = on_call },
	{ .path = DP "ListAndWatch", .handler = on_call, .server_streaming = true },
	{ .path = DP "GetPreferredAllocation", .handler = on_call },
	{ .path = DP "Allocate", .handler = on_call },
	{ .path = DP "PreStartContainer", .handler = on_call },
	{ .path = WATCHER "GetInfo", .handler = on_call },
	{ .path = WATCHER "NotifyRegistrationStatus", .handler = on_call },
};

/* ---- the client side: kubelet, on nghttp2's own allocator (not counted, never failed) ---- */

enum { CALL_INFO, CALL_STATUS, CALL_OPTIONS, CALL_WATCH, CALL_ALLOCATE, N_CALLS };

static const char *const call_paths[N_CALLS] = {
	[CALL_INFO] = WATCHER "GetInfo",
	[CALL_STATUS] = WATCHER "NotifyRegistrationStatus",
	[CALL_OPTIONS] = DP "GetDevicePluginOptions",
	[CALL_WATCH] = DP "ListAndWatch",
	[CALL_ALLOCATE] = DP "Allocate",
};

struct answer {
	int32_t id;
	int grpc_status; /* -1 until trailers (or trailers-only) said */
	bool rst, closed;
	uint8_t data[16384];
	size_t data_len;
	bool data_overflow;
};

struct body {
	uint8_t buf[512];
	size_t len, off;
};

struct client {
	nghttp2_session *s;
	struct answer a[N_CALLS];
	struct body b[N_CALLS];
	bool goaway;
};

static struct answer *find(struct client *cl, int32_t id)
{
	for (size_t i = 0; i < N_CALLS; i++)
		if (cl->a[i].id == id)
			return &cl->a[i];
	return NULL;
}

static int c_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
		    const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
	struct answer *a = find(ud, f->hd.stream_id);

	if (a && nl == 11 && !memcmp(name, "grpc-status", 11)) {
		char v[16];

		snprintf(v, sizeof(v), "%.*s", (int)(vl < 15 ? vl : 15), (const char *)value);
		a->grpc_status = atoi(v);
	}
	return 0;
}

static int c_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
	struct client *cl = ud;
	struct answer *a = find(cl, f->hd.stream_id);

	if (f->hd.type == NGHTTP2_GOAWAY)
		cl->goaway = true;
	if (a && f->hd.type == NGHTTP2_RST_STREAM)
		a->rst = true;
	return 0;
}

static int c_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
		  void *ud)
{
	struct answer *a = find(ud, id);

	if (!a)
		return 0;
	if (a->data_len + len <= sizeof(a->data)) {
		memcpy(a->data + a->data_len, data, len);
		a->data_len += len;
	} else {
		a->data_overflow = true;
	}
	return 0;
}

static int c_close(nghttp2_session *s, int32_t id, uint32_t code, void *ud)
{
	struct answer *a = find(ud, id);

	if (a) {
		a->closed = true;
		if (code != NGHTTP2_NO_ERROR)
			a->rst = true;
	}
	return 0;
}

static ssize_t c_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
		      uint32_t *flags, nghttp2_data_source *src, void *ud)
{
	struct body *b = src->ptr;
	size_t n = b->len - b->off;

	if (n > length)
		n = length;
	memcpy(buf, b->buf + b->off, n);
	b->off += n;
	if (b->off == b->len)
		*flags |= NGHTTP2_DATA_FLAG_EOF;
	return (ssize_t)n;
}

#define H(n, v) { (uint8_t *)(n), (uint8_t *)(v), strlen(n), strlen(v), NGHTTP2_NV_FLAG_NONE }

/* Queues one call with msg (packed into a gRPC message) as its request. */
static void client_request(struct client *cl, int which, const ProtobufCMessage *msg)
{
	nghttp2_nv nva[] = {
		H(":method", "POST"), H(":scheme", "http"), H(":path", call_paths[which]),
		H(":authority", "localhost"), H("content-type", "application/grpc"),
		H("te", "trailers"),
	};
	struct body *b = &cl->b[which];
	nghttp2_data_provider dp = { .source.ptr = b, .read_callback = c_read };
	size_t n = protobuf_c_message_get_packed_size(msg);

	if (n + RDP_GRPC_PREFIX_LEN > sizeof(b->buf))
		abort();
	rdp_grpc_prefix(b->buf, n);
	protobuf_c_message_pack(msg, b->buf + RDP_GRPC_PREFIX_LEN);
	b->len = n + RDP_GRPC_PREFIX_LEN;
	b->off = 0;
	cl->a[which] = (struct answer){ .grpc_status = -1 };
	cl->a[which].id = nghttp2_submit_request(cl->s, NULL, nva, ARRAY_SIZE(nva), &dp, NULL);
	if (cl->a[which].id < 0)
		abort();
}

static void client_init(struct client *cl)
{
	nghttp2_session_callbacks *cbs;
	V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
	Pluginregistration__InfoRequest ireq = PLUGINREGISTRATION__INFO_REQUEST__INIT;
	Pluginregistration__RegistrationStatus st = PLUGINREGISTRATION__REGISTRATION_STATUS__INIT;
	V1beta1__AllocateRequest areq = V1BETA1__ALLOCATE_REQUEST__INIT;
	V1beta1__ContainerAllocateRequest creq = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
	V1beta1__ContainerAllocateRequest *creqs[] = { &creq };
	char id0[] = "0", id7[] = "7";
	char *ids[] = { id0, id7 };

	memset(cl, 0, sizeof(*cl));
	if (nghttp2_session_callbacks_new(&cbs) != 0)
		abort();
	nghttp2_session_callbacks_set_on_header_callback(cbs, c_header);
	nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, c_frame_recv);
	nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, c_data);
	nghttp2_session_callbacks_set_on_stream_close_callback(cbs, c_close);
	if (nghttp2_session_client_new(&cl->s, cbs, cl) != 0)
		abort();
	nghttp2_session_callbacks_del(cbs);
	nghttp2_submit_settings(cl->s, NGHTTP2_FLAG_NONE, NULL, 0);

	/* kubelet's plugin watcher, then kubelet's device manager */
	client_request(cl, CALL_INFO, &ireq.base);
	st.plugin_registered = true;
	client_request(cl, CALL_STATUS, &st.base);
	client_request(cl, CALL_OPTIONS, &empty.base);
	client_request(cl, CALL_WATCH, &empty.base);
	creq.n_devices_ids = ARRAY_SIZE(ids);
	creq.devices_ids = ids;
	areq.n_container_requests = 1;
	areq.container_requests = creqs;
	client_request(cl, CALL_ALLOCATE, &areq.base);
}

/* Moves bytes both ways until neither side has anything more to say. */
static int pump(struct client *cl, struct rdp_event *e, struct rdp_h2 *h)
{
	int r = 0;

	for (int i = 0; i < 1000; i++) {
		const uint8_t *p;
		bool progress = false;
		ssize_t n;
		size_t out;

		while (!rdp_h2_is_closed(h) && (n = nghttp2_session_mem_send(cl->s, &p)) > 0) {
			int k = rdp_h2_feed(h, p, (size_t)n);

			if (k < 0 && r == 0)
				r = k;
			progress = true;
		}
		(void)rdp_event_run_once(e, 0);
		out = rdp_h2_output(h, &p);
		if (out) {
			(void)nghttp2_session_mem_recv(cl->s, p, out);
			rdp_h2_consume(h, out);
			progress = true;
		}
		if (!progress)
			break;
	}
	return r;
}

/* ---- the scenario ---- */

struct paths {
	char config[PATH_MAX], sys[PATH_MAX], dev[PATH_MAX];
};

/* What the undisturbed run answered, to compare the others with. */
struct expected {
	bool set;
	char info_name[128];
	size_t n_specs;
	size_t n_units;
};

enum outcome {
	OUT_OK,           /* every call answered OK, as the undisturbed run */
	OUT_ERRNO,        /* a step returned a negative errno */
	OUT_CONN_CLOSED,  /* the connection ended with an error */
	OUT_GRPC_ERROR,   /* some call got an error status or a reset, the others OK */
	N_OUTCOMES,
};

static const char *const outcome_names[N_OUTCOMES] = {
	"all answered", "errno from a step", "connection closed", "gRPC error status",
};

static struct expected expected;
/* gRPC status codes the calls got across the failing runs, for the summary line. */
static unsigned long codes_seen[17];

/* Checks one answered OK call against the undisturbed run; false when it differs. */
static bool check_ok_answer(int which, const struct answer *a)
{
	const uint8_t *msg = a->data + RDP_GRPC_PREFIX_LEN;
	size_t len;

	if (a->data_len < RDP_GRPC_PREFIX_LEN || a->data_overflow)
		return false;
	len = a->data_len - RDP_GRPC_PREFIX_LEN;
	switch (which) {
	case CALL_INFO: {
		Pluginregistration__PluginInfo *pi =
			pluginregistration__plugin_info__unpack(NULL, len, msg);
		bool ok = pi && !strcmp(pi->type, "DevicePlugin") &&
			  pi->n_supported_versions == 1 &&
			  !strcmp(pi->supported_versions[0], "v1beta1");

		if (ok && !expected.set)
			snprintf(expected.info_name, sizeof(expected.info_name), "%s", pi->name);
		ok = ok && !strcmp(pi->name, expected.info_name);
		if (pi)
			pluginregistration__plugin_info__free_unpacked(pi, NULL);
		return ok;
	}
	case CALL_STATUS:
		return len == 0;
	case CALL_OPTIONS: {
		V1beta1__DevicePluginOptions *o =
			v1beta1__device_plugin_options__unpack(NULL, len, msg);
		bool ok = o != NULL;

		if (o)
			v1beta1__device_plugin_options__free_unpacked(o, NULL);
		return ok;
	}
	case CALL_WATCH: {
		V1beta1__ListAndWatchResponse *lw =
			v1beta1__list_and_watch_response__unpack(NULL, len, msg);
		bool ok = lw && lw->n_devices > 0;

		if (ok && !expected.set)
			expected.n_units = lw->n_devices;
		ok = ok && lw->n_devices == expected.n_units;
		if (lw)
			v1beta1__list_and_watch_response__free_unpacked(lw, NULL);
		return ok;
	}
	case CALL_ALLOCATE: {
		V1beta1__AllocateResponse *ar = v1beta1__allocate_response__unpack(NULL, len, msg);
		bool ok = ar && ar->n_container_responses == 1 &&
			  ar->container_responses[0]->n_devices > 0;

		if (ok && !expected.set)
			expected.n_specs = ar->container_responses[0]->n_devices;
		ok = ok && ar->container_responses[0]->n_devices == expected.n_specs;
		if (ar)
			v1beta1__allocate_response__free_unpacked(ar, NULL);
		return ok;
	}
	}
	return false;
}

/*
 * Runs the scenario. Returns its outcome, or -1 when the run did not end cleanly (reported on
 * stderr with the failing allocation n).
 */
static int scenario(const struct paths *p, unsigned long n)
{
	struct rdp_diags diags = {};
	struct rdp_config *cfg = NULL;
	struct rdp_host *host = NULL;
	struct rdp_pools *pools = NULL;
	struct rdp_dp_state state = {};
	struct server_ctx ctx = {};
	struct rdp_event *e = NULL;
	struct rdp_grpc_server *s = NULL;
	struct rdp_h2 *h = NULL;
	struct client cl = {};
	bool client = false, any_error = false;
	int r, ret = -1;

	r = rdp_config_load_file(p->config, &cfg, &diags);
	if (r < 0)
		goto step_failed;
	r = rdp_discover(p->sys, p->dev, &host);
	if (r < 0)
		goto step_failed;
	r = rdp_pools_build(cfg, host, &pools, &diags);
	if (r < 0)
		goto step_failed;
	if (pools->n < 1 || pools->v[0].n_devices == 0) {
		fprintf(stderr, "failing allocation %lu: first pool empty\n", n);
		goto out;
	}
	r = rdp_dp_state_build(host, &pools->v[0], &state);
	if (r < 0)
		goto step_failed;
	r = rdp_dp_service_new(NULL, NULL, &ctx.dp);
	if (r < 0)
		goto step_failed;
	r = rdp_dp_service_set_state(ctx.dp, &state);
	if (r < 0)
		goto step_failed;
	ctx.winfo = (struct rdp_watcher_info){
		.name = pools->v[0].res->full_name,
		.endpoint = "",
		.status = on_status,
		.userdata = &ctx,
	};
	r = rdp_event_new(&e);
	if (r < 0)
		goto step_failed;
	r = rdp_grpc_server_new(e, NULL, methods, ARRAY_SIZE(methods), NULL, &ctx, &s);
	if (r < 0)
		goto step_failed;
	r = rdp_grpc_server_add_memory_conn(s, &h);
	if (r < 0)
		goto step_failed;

	client_init(&cl);
	client = true;
	r = pump(&cl, e, h);
	if (r < 0 || rdp_h2_is_closed(h)) {
		/* the session ended: that must be an error, said as one */
		if (r == 0 && !cl.goaway) {
			fprintf(stderr, "failing allocation %lu: connection closed silently\n", n);
			goto out;
		}
		ret = OUT_CONN_CLOSED;
		goto out;
	}
	for (int i = 0; i < N_CALLS; i++) {
		const struct answer *a = &cl.a[i];
		bool ended = a->closed || a->rst;

		if (a->rst || (a->grpc_status > 0)) {
			any_error = true;
			if (a->grpc_status > 0 && a->grpc_status < (int)ARRAY_SIZE(codes_seen))
				codes_seen[a->grpc_status]++;
			continue;
		}
		/* ListAndWatch stays open: its first snapshot is the answer */
		if (i == CALL_WATCH ? a->data_len == 0 : !ended || a->grpc_status != 0) {
			fprintf(stderr, "failing allocation %lu: %s left without an answer\n", n,
				call_paths[i]);
			goto out;
		}
		if (!check_ok_answer(i, a)) {
			fprintf(stderr, "failing allocation %lu: %s answered OK, but not as "
				"without failures\n", n, call_paths[i]);
			goto out;
		}
	}
	if (!any_error && !ctx.status_seen) {
		fprintf(stderr, "failing allocation %lu: NotifyRegistrationStatus not seen\n", n);
		goto out;
	}
	ret = any_error ? OUT_GRPC_ERROR : OUT_OK;
	goto out;

step_failed:
	if (r != -ENOMEM) {
		fprintf(stderr, "failing allocation %lu: a step failed with %s, not ENOMEM\n", n,
			strerror(-r));
		goto out;
	}
	ret = OUT_ERRNO;
out:
	if (client)
		nghttp2_session_del(cl.s);
	/* as the daemon: servers first, their close callbacks take the streams off the service */
	s = rdp_grpc_server_free(s);
	e = rdp_event_free(e);
	ctx.dp = rdp_dp_service_free(ctx.dp);
	rdp_dp_state_done(&state);
	pools = rdp_pools_free(pools);
	host = rdp_host_free(host);
	cfg = rdp_config_free(cfg);
	rdp_diags_done(&diags);
	return ret;
}

int main(void)
{
	const char *fixtures = getenv("RDP_FIXTURES");
	const char *srcdir = getenv("RDP_SRCDIR");
	unsigned long count, n, outcomes[N_OUTCOMES] = {};
	struct timespec t0, t1;
	struct paths p;
	int r;

	if (!fixtures || !srcdir) {
		printf("test-failmalloc: RDP_FIXTURES and RDP_SRCDIR not set, skipped\n");
		return EXIT_SUCCESS;
	}
	snprintf(p.config, sizeof(p.config), "%s/tests/fixtures/configs/dgx.json", srcdir);
	snprintf(p.sys, sizeof(p.sys), "%s/dgx-h100/sys", fixtures);
	snprintf(p.dev, sizeof(p.dev), "%s/dgx-h100/dev", fixtures);
	if (access(p.sys, F_OK) < 0) {
		printf("test-failmalloc: no generated fixtures in %s, skipped\n", fixtures);
		return EXIT_SUCCESS;
	}

	/* Undisturbed: everything answered, and the answers recorded. */
	rdp_alloc_fail_at(0);
	r = scenario(&p, 0);
	count = rdp_alloc_count();
	EXPECT_EQ(r, OUT_OK);
	expected.set = r == OUT_OK;
	EXPECT_TRUE(expected.n_specs > 1 && expected.n_units == 63);
	EXPECT_TRUE(count > 100);
	printf("test-failmalloc: the scenario makes %lu allocations\n", count);

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (n = 1; n <= count; n++) {
		rdp_alloc_fail_at(n);
		r = scenario(&p, n);
		EXPECT_TRUE(r >= 0);
		if (r >= 0)
			outcomes[r]++;
	}
	rdp_alloc_fail_at(0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("test-failmalloc: %lu runs with one allocation failing in %.1f s:",
	       count, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	for (int i = 0; i < N_OUTCOMES; i++)
		printf("%s %s %lu", i ? "," : "", outcome_names[i], outcomes[i]);
	printf("\ntest-failmalloc: error statuses sent:");
	for (size_t i = 0; i < ARRAY_SIZE(codes_seen); i++)
		if (codes_seen[i])
			printf(" %s %lu", rdp_grpc_code_name((enum rdp_grpc_code)i), codes_seen[i]);
	printf("\n");
	return test_summary("test-failmalloc");
}
