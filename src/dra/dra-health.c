/* SPDX-License-Identifier: MIT */
#include "dra-health.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "drahealth.pb-c.h"
#include "grpc.h"
#include "macro.h"

const char *rdp_dra_health_status_name(enum rdp_dra_health_status s)
{
	switch (s) {
	case RDP_DRA_HEALTH_HEALTHY:
		return "Healthy";
	case RDP_DRA_HEALTH_UNHEALTHY:
		return "Unhealthy";
	default:
		return "Unknown";
	}
}

/* Appends "; " (unless first) and text to buf; cuts with "..." when it does not fit. */
static void append(char *buf, size_t len, const char *text)
{
	size_t n = strlen(buf), t = strlen(text) + (n ? 2 : 0);

	if (n >= 3 && strcmp(buf + n - 3, "...") == 0)
		return;
	if (n + t < len) {
		snprintf(buf + n, len - n, "%s%s", n ? "; " : "", text);
		return;
	}
	/* no room: cut at len - 4 and end with "..." */
	if (len < 4)
		return;
	snprintf(buf + n, len - n, "%s%s", n ? "; " : "", text);
	memcpy(buf + len - 4, "...", 4);
}

void rdp_dra_health_of(const struct rdp_device *d, struct rdp_dra_health *ret)
{
	bool active = false, known = false;

	ret->message[0] = '\0';
	for (size_t i = 0; i < d->n_ports; i++) {
		const struct rdp_port *p = &d->ports[i];
		char one[64];

		if (p->state < 0)
			snprintf(one, sizeof(one), "port %u state unknown", p->num);
		else if (p->state_name[0])
			snprintf(one, sizeof(one), "port %u %s", p->num, p->state_name);
		else
			snprintf(one, sizeof(one), "port %u state %d", p->num, p->state);
		append(ret->message, sizeof(ret->message), one);
		known |= p->state >= 0;
		active |= rdp_port_state_is_active(p->state);
	}
	if (active) {
		ret->status = RDP_DRA_HEALTH_HEALTHY;
	} else if (known) {
		ret->status = RDP_DRA_HEALTH_UNHEALTHY;
	} else {
		ret->status = RDP_DRA_HEALTH_UNKNOWN;
		if (!d->n_ports)
			snprintf(ret->message, sizeof(ret->message), "no port state known");
	}
}

int rdp_dra_health_build(const struct rdp_dra_inventory *inv, struct rdp_dra_health **ret,
			 size_t *n)
{
	struct rdp_dra_health *h = NULL;

	*ret = NULL;
	*n = 0;
	if (!inv || !inv->n_devs)
		return 0;
	h = rdp_calloc(inv->n_devs, sizeof(*h));
	if (!h)
		return -ENOMEM;
	for (size_t i = 0; i < inv->n_devs; i++) {
		rdp_dra_health_of(rdp_dra_dev_device(inv, &inv->devs[i]), &h[i]);
		snprintf(h[i].device, sizeof(h[i].device), "%s", inv->devs[i].name);
	}
	*ret = h;
	*n = inv->n_devs;
	return 0;
}

/* One open NodeWatchResources call. */
struct stream {
	struct rdp_dra_health_server *s;
	struct rdp_grpc_call *call;
};

struct rdp_dra_health_server {
	char *pool;
	struct rdp_dra_health *list;
	size_t n;
	struct stream *streams[RDP_DRA_HEALTH_MAX_STREAMS];
	size_t n_streams;
};

int rdp_dra_health_server_new(const char *pool, struct rdp_dra_health_server **ret)
{
	struct rdp_dra_health_server *s = rdp_calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->pool = rdp_strdup(pool);
	if (!s->pool) {
		rdp_free(s);
		return -ENOMEM;
	}
	*ret = s;
	return 0;
}

static void forget(struct rdp_dra_health_server *s, struct stream *st)
{
	for (size_t i = 0; i < s->n_streams; i++)
		if (s->streams[i] == st) {
			s->streams[i] = s->streams[--s->n_streams];
			break;
		}
	rdp_free(st);
}

struct rdp_dra_health_server *rdp_dra_health_server_free(struct rdp_dra_health_server *s)
{
	if (!s)
		return NULL;
	while (s->n_streams) {
		struct stream *st = s->streams[s->n_streams - 1];

		rdp_grpc_call_set_close_cb(st->call, NULL, NULL);
		rdp_grpc_call_fail(st->call, RDP_GRPC_UNAVAILABLE, "the driver is stopping");
		forget(s, st);
	}
	rdp_free(s->list);
	rdp_free(s->pool);
	rdp_free(s);
	return NULL;
}

static bool same(const struct rdp_dra_health *a, size_t na, const struct rdp_dra_health *b,
		 size_t nb)
{
	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (a[i].status != b[i].status || strcmp(a[i].device, b[i].device) != 0 ||
		    strcmp(a[i].message, b[i].message) != 0)
			return false;
	return true;
}

/* Sends the list on one stream. 0 or -ENOMEM (the stream stays; the next send retries). */
static int send_list(struct rdp_dra_health_server *s, struct rdp_grpc_call *call)
{
	size_t n = s->n;
	_cleanup_free_ Drahealth__DeviceHealth *dh = rdp_calloc(n ? n : 1, sizeof(*dh));
	_cleanup_free_ Drahealth__DeviceHealth **dp = rdp_calloc(n ? n : 1, sizeof(*dp));
	_cleanup_free_ Drahealth__DeviceIdentifier *id = rdp_calloc(n ? n : 1, sizeof(*id));
	Drahealth__NodeWatchResourcesResponse resp = DRAHEALTH__NODE_WATCH_RESOURCES_RESPONSE__INIT;
	int64_t now = (int64_t)time(NULL);

	if (!dh || !dp || !id)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		id[i] = (Drahealth__DeviceIdentifier)DRAHEALTH__DEVICE_IDENTIFIER__INIT;
		id[i].pool_name = s->pool;
		id[i].device_name = s->list[i].device;
		dh[i] = (Drahealth__DeviceHealth)DRAHEALTH__DEVICE_HEALTH__INIT;
		dh[i].device = &id[i];
		dh[i].health = (Drahealth__HealthStatus)s->list[i].status;
		dh[i].last_updated_time = now;
		dh[i].health_check_timeout_seconds = RDP_DRA_HEALTH_TIMEOUT_SEC;
		dh[i].message = s->list[i].message;
		dp[i] = &dh[i];
	}
	resp.n_devices = n;
	resp.devices = dp;
	return rdp_grpc_call_send_pb(call, &resp.base);
}

static void send_all(struct rdp_dra_health_server *s)
{
	for (size_t i = 0; i < s->n_streams; i++)
		(void)send_list(s, s->streams[i]->call);
}

int rdp_dra_health_set_inventory(struct rdp_dra_health_server *s,
				 const struct rdp_dra_inventory *inv)
{
	struct rdp_dra_health *h;
	size_t n;
	int k = rdp_dra_health_build(inv, &h, &n);

	if (k < 0)
		return k;
	if (same(h, n, s->list, s->n)) {
		rdp_free(h);
		return 0;
	}
	rdp_free(s->list);
	s->list = h;
	s->n = n;
	send_all(s);
	return 1;
}

void rdp_dra_health_resend(struct rdp_dra_health_server *s)
{
	send_all(s);
}

static void on_close(struct rdp_grpc_call *call, void *userdata)
{
	struct stream *st = userdata;

	(void)call;
	forget(st->s, st);
}

void rdp_dra_health_dispatch(struct rdp_dra_health_server *s, struct rdp_grpc_call *call,
			     const uint8_t *req, size_t len)
{
	struct stream *st;

	(void)req;
	(void)len; /* NodeWatchResourcesRequest has no field; anything in it is ignored */
	if (s->n_streams >= RDP_DRA_HEALTH_MAX_STREAMS) {
		rdp_grpc_call_fail(call, RDP_GRPC_RESOURCE_EXHAUSTED,
				   "too many NodeWatchResources streams open");
		return;
	}
	st = rdp_calloc(1, sizeof(*st));
	if (!st) {
		rdp_grpc_call_fail(call, RDP_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	st->s = s;
	st->call = call;
	s->streams[s->n_streams++] = st;
	rdp_grpc_call_set_close_cb(call, on_close, st);
	(void)send_list(s, call);
}

size_t rdp_dra_health_streams(const struct rdp_dra_health_server *s)
{
	return s ? s->n_streams : 0;
}

const struct rdp_dra_health *rdp_dra_health_list(const struct rdp_dra_health_server *s,
						 size_t *n)
{
	*n = s->n;
	return s->list;
}
