/* SPDX-License-Identifier: MIT */
#include "registration.h"

#include <errno.h>
#include <protobuf-c/protobuf-c.h>
#include <string.h>

#include "deviceplugin.pb-c.h"
#include "event.h"
#include "macro.h"
#include "methods.h"
#include "pb.h"
#include "pluginregistration.pb-c.h"

int rdp_register_request_pack(const char *endpoint, const char *resource_name, bool preferred,
			      uint8_t **ret, size_t *ret_len)
{
	V1beta1__RegisterRequest req = V1BETA1__REGISTER_REQUEST__INIT;
	V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;

	o.pre_start_required = false;
	o.get_preferred_allocation_available = preferred;
	req.version = (char *)RDP_API_VERSION;
	req.endpoint = (char *)endpoint;
	req.resource_name = (char *)resource_name;
	req.options = &o;
	return rdp_pb_pack(&req.base, ret, ret_len);
}

struct rdp_registration {
	struct rdp_event *event;
	char *kubelet_sock;
	uint8_t *req; /* packed RegisterRequest */
	size_t req_len;
	const struct rdp_registration_ops *ops;
	void *userdata;
	struct rdp_event_source *timer;
	struct rdp_grpc_client_call *call;
	uint64_t backoff_usec;
	unsigned int attempts;
	bool registered;
};

int rdp_registration_new(struct rdp_event *e, const char *kubelet_sock, const char *endpoint,
			 const char *resource_name, bool preferred,
			 const struct rdp_registration_ops *ops,
			 void *userdata, struct rdp_registration **ret)
{
	struct rdp_registration *r = rdp_calloc(1, sizeof(*r));
	int k;

	if (!r)
		return -ENOMEM;
	r->event = e;
	r->ops = ops;
	r->userdata = userdata;
	r->kubelet_sock = rdp_strdup(kubelet_sock);
	if (!r->kubelet_sock) {
		rdp_registration_free(r);
		return -ENOMEM;
	}
	k = rdp_register_request_pack(endpoint, resource_name, preferred, &r->req, &r->req_len);
	if (k < 0) {
		rdp_registration_free(r);
		return k;
	}
	*ret = r;
	return 0;
}

void rdp_registration_stop(struct rdp_registration *r)
{
	if (!r)
		return;
	r->call = rdp_grpc_client_call_cancel(r->call);
	if (r->timer)
		rdp_event_source_set_timer(r->timer, 0);
	r->registered = false;
}

struct rdp_registration *rdp_registration_free(struct rdp_registration *r)
{
	if (!r)
		return NULL;
	r->call = rdp_grpc_client_call_cancel(r->call);
	rdp_event_source_free(r->timer);
	rdp_free(r->kubelet_sock);
	rdp_free(r->req);
	rdp_free(r);
	return NULL;
}

bool rdp_registration_registered(const struct rdp_registration *r)
{
	return r && r->registered;
}

bool rdp_registration_in_flight(const struct rdp_registration *r)
{
	return r && r->call;
}

/* Schedules the retry, then tells the owner (last: the callback may free r). */
static void failed(struct rdp_registration *r, int error, enum rdp_grpc_code code,
		   const char *message)
{
	uint64_t retry = rdp_backoff_next(&r->backoff_usec, RDP_REGISTRATION_BACKOFF_MIN_USEC,
					  RDP_REGISTRATION_BACKOFF_MAX_USEC);

	r->registered = false;
	rdp_event_source_set_timer(r->timer, retry);
	if (r->ops->done)
		r->ops->done(r->userdata, error, code, message, retry);
}

static void on_reply(enum rdp_grpc_code code, const char *message, const uint8_t *resp, size_t len,
		     void *userdata)
{
	struct rdp_registration *r = userdata;

	r->call = NULL; /* the gRPC layer frees it after this callback */
	if (code != RDP_GRPC_OK) {
		failed(r, 0, code, message);
		return;
	}
	r->registered = true;
	r->backoff_usec = 0;
	if (r->ops->done)
		r->ops->done(r->userdata, 0, RDP_GRPC_OK, NULL, 0);
}

static int on_timer(struct rdp_event_source *s, void *userdata)
{
	struct rdp_registration *r = userdata;
	int k;

	r->call = rdp_grpc_client_call_cancel(r->call);
	r->attempts++;
	if (r->ops->attempt)
		r->ops->attempt(r->userdata, r->attempts);
	k = rdp_grpc_unary_call(r->event, r->kubelet_sock, rdp_method_path(RDP_METHOD_REGISTER), r->req, r->req_len,
				RDP_REGISTRATION_TIMEOUT_USEC, on_reply, r, &r->call);
	if (k < 0) {
		r->call = NULL;
		failed(r, k, RDP_GRPC_UNAVAILABLE, NULL);
	}
	return 0;
}

int rdp_registration_start(struct rdp_registration *r)
{
	int k;

	r->call = rdp_grpc_client_call_cancel(r->call);
	r->backoff_usec = 0;
	r->attempts = 0;
	r->registered = false;
	if (!r->timer) {
		k = rdp_event_add_timer(r->event, 1, on_timer, r, &r->timer);
		if (k < 0)
			return k;
		return 0;
	}
	/* 1 µs: "now", but from the loop, never inside the caller. */
	return rdp_event_source_set_timer(r->timer, 1);
}

/* Plugin watcher. */


int rdp_watcher_info_pack(const char *name, const char *endpoint, const char *type,
			  const char *const *versions, size_t n_versions, uint8_t **ret,
			  size_t *ret_len)
{
	Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
	static const char *const dp_versions[] = {RDP_API_VERSION};

	if (!type) {
		type = RDP_WATCHER_PLUGIN_TYPE;
		versions = dp_versions;
		n_versions = ARRAY_SIZE(dp_versions);
	}
	info.type = (char *)type;
	info.name = (char *)name;
	info.endpoint = (char *)endpoint;
	info.n_supported_versions = n_versions;
	info.supported_versions = (char **)versions;
	return rdp_pb_pack(&info.base, ret, ret_len);
}

bool rdp_watcher_handles(const char *path)
{
	enum rdp_method m = rdp_method_lookup(path);

	return m != RDP_METHOD_UNKNOWN && rdp_methods[m].service == RDP_SERVICE_WATCHER;
}

void rdp_watcher_dispatch(const struct rdp_watcher_info *info, struct rdp_grpc_call *call,
			  const uint8_t *req, size_t len)
{
	const char *path = rdp_grpc_call_path(call);
	_cleanup_free_ uint8_t *out = NULL;
	size_t out_len = 0;
	int k;

	if (strcmp(path, rdp_method_path(RDP_METHOD_WATCHER_GET_INFO)) == 0) {
		k = rdp_watcher_info_pack(info->name, info->endpoint, info->type, info->versions,
					  info->n_versions, &out, &out_len);
		if (k < 0) {
			rdp_grpc_call_fail(call, RDP_GRPC_RESOURCE_EXHAUSTED, "out of memory");
			return;
		}
		rdp_grpc_call_reply(call, out, out_len);
	} else if (strcmp(path, rdp_method_path(RDP_METHOD_WATCHER_NOTIFY)) == 0) {
		Pluginregistration__RegistrationStatus *st =
			pluginregistration__registration_status__unpack(rdp_protobuf_allocator(),
									len, req);
		static const uint8_t empty[1];

		if (!st) {
			rdp_grpc_call_fail(call, RDP_GRPC_INVALID_ARGUMENT,
					   "cannot parse RegistrationStatus");
			return;
		}
		rdp_grpc_call_reply(call, empty, 0);
		if (info->status)
			info->status(info->userdata, st->plugin_registered, st->error);
		pluginregistration__registration_status__free_unpacked(st,
								       rdp_protobuf_allocator());
	} else {
		rdp_grpc_call_fail(call, RDP_GRPC_UNIMPLEMENTED, "unknown method");
	}
}

const char *rdp_registration_mode_name(enum rdp_registration_mode m)
{
	switch (m) {
	case RDP_REGISTRATION_KUBELET_SOCK:
		return "kubelet-sock";
	case RDP_REGISTRATION_PLUGINS_REGISTRY:
		return "plugins-registry";
	case RDP_REGISTRATION_AUTO:
		break;
	}
	return "auto";
}

int rdp_registration_mode_from_string(const char *s, enum rdp_registration_mode *ret)
{
	static const enum rdp_registration_mode all[] = {
		RDP_REGISTRATION_AUTO,
		RDP_REGISTRATION_KUBELET_SOCK,
		RDP_REGISTRATION_PLUGINS_REGISTRY,
	};

	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		if (strcmp(s, rdp_registration_mode_name(all[i])) == 0) {
			*ret = all[i];
			return 0;
		}
	}
	return -EINVAL;
}
