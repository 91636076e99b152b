/* SPDX-License-Identifier: MIT */
#include "status-probe.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "deviceplugin.pb-c.h"
#include "event.h"
#include "grpc.h"
#include "macro.h"
#include "methods.h"

int rdp_status_load(const char *root, enum rdp_registration_mode mode, struct rdp_status **ret,
		    char **dir_ret, char *err, size_t errlen)
{
	static const char *const dirs[] = {"device-plugins", "plugins_registry"};
	struct rdp_status *best = NULL;
	char *best_dir = NULL;
	uint64_t best_mtime = 0;
	int first_err = -ENOENT;

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		_cleanup_free_ char *sock_dir = NULL, *dir = NULL;
		struct rdp_status *s = NULL;
		uint64_t mtime = 0;
		char e[256];
		int k;

		if ((mode == RDP_REGISTRATION_KUBELET_SOCK && i != 0) ||
		    (mode == RDP_REGISTRATION_PLUGINS_REGISTRY && i != 1))
			continue;
		sock_dir = rdp_asprintf("%s/%s", root, dirs[i]);
		if (!sock_dir || rdp_state_dir(sock_dir, &dir) < 0) {
			rdp_status_free(best);
			rdp_free(best_dir);
			return -ENOMEM;
		}
		k = rdp_status_read(dir, &s, &mtime, e, sizeof(e));
		if (k == -ENOMEM) {
			rdp_status_free(best);
			rdp_free(best_dir);
			return k;
		}
		if (k < 0) {
			/* the first real error wins over "no file" */
			if (k != -ENOENT && first_err == -ENOENT) {
				first_err = k;
				snprintf(err, errlen, "%s/%s: %s", dir, RDP_STATUS_FILE,
					 k == -EINVAL || k == -E2BIG ? e : strerror(-k));
			}
			continue;
		}
		if (!best || mtime > best_mtime) {
			rdp_status_free(best);
			rdp_free(best_dir);
			best = s;
			best_dir = TAKE_PTR(dir);
			best_mtime = mtime;
		} else {
			rdp_status_free(s);
		}
	}
	if (!best) {
		if (first_err == -ENOENT)
			snprintf(err, errlen,
				 "no %s in %s/%s/%s: rdma-dp serve has not published what it serves "
				 "(not started yet, or another --kubelet-root-dir / --registration)",
				 RDP_STATUS_FILE, root,
				 mode == RDP_REGISTRATION_PLUGINS_REGISTRY ? "plugins_registry"
				 : mode == RDP_REGISTRATION_KUBELET_SOCK
					 ? "device-plugins"
					 : "{device-plugins,plugins_registry}",
				 RDP_STATE_DIR_NAME);
		return first_err;
	}
	*ret = best;
	*dir_ret = best_dir;
	return 0;
}

struct call {
	struct rdp_probe *p;
	bool done;
	bool closed; /* the loop is going away: whatever it says now is not an answer */
	struct rdp_event *e;
	size_t *pending;
};

static bool is_socket(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static void answered(enum rdp_grpc_code code, const char *message, const uint8_t *resp,
		     size_t len, void *userdata)
{
	struct call *c = userdata;

	if (c->closed)
		return;
	c->done = true;
	if (code != RDP_GRPC_OK) {
		snprintf(c->p->reason, sizeof(c->p->reason), "%s: %s", rdp_grpc_code_name(code),
			 message && *message ? message : "(no message)");
	} else {
		V1beta1__DevicePluginOptions *o =
			v1beta1__device_plugin_options__unpack(NULL, len, resp);
		if (!o) {
			snprintf(c->p->reason, sizeof(c->p->reason),
				 "answered with a message that is not DevicePluginOptions");
		} else {
			c->p->state = RDP_PROBE_OK;
			v1beta1__device_plugin_options__free_unpacked(o, NULL);
		}
	}
	if (--*c->pending == 0)
		rdp_event_exit(c->e, 0);
}

static int overall_timeout(struct rdp_event_source *s, void *userdata)
{
	rdp_event_exit(userdata, 0);
	return 0;
}

int rdp_status_probe(const struct rdp_status *st, unsigned long timeout_ms,
		     struct rdp_probe **ret)
{
	struct rdp_event *e = NULL;
	struct rdp_event_source *timer = NULL;
	struct rdp_probe *probes;
	struct call *calls;
	size_t pending = 0;
	int k = 0;

	probes = rdp_calloc(st->n_resources + 1, sizeof(*probes));
	calls = rdp_calloc(st->n_resources + 1, sizeof(*calls));
	if (!probes || !calls) {
		rdp_free(probes);
		rdp_free(calls);
		return -ENOMEM;
	}
	for (size_t i = 0; i < st->n_resources; i++) {
		const struct rdp_status_resource *r = &st->resources[i];
		struct call *c = &calls[i];

		c->p = &probes[i];
		c->pending = &pending;
		if (!r->serving)
			continue; /* not started yet: waiting for its path or for the directory */
		probes[i].state = RDP_PROBE_FAILED; /* until it answers */
		if (!is_socket(r->socket)) {
			c->done = true;
			snprintf(c->p->reason, sizeof(c->p->reason),
				 "the socket the daemon serves is gone");
			continue;
		}
		if (!e) {
			k = rdp_event_new(&e);
			if (k < 0)
				goto out;
		}
		c->e = e;
		/* the request is google.protobuf.Empty: zero bytes */
		k = rdp_grpc_unary_call(e, r->socket, rdp_method_path(RDP_METHOD_DP_OPTIONS), NULL,
					0, timeout_ms * 1000ULL, answered, c, NULL);
		if (k == -ENOMEM)
			goto out;
		if (k < 0) {
			c->done = true;
			snprintf(c->p->reason, sizeof(c->p->reason), "%s", strerror(-k));
			k = 0;
			continue;
		}
		pending++;
	}
	if (pending > 0) {
		/* the per-call deadline ends each call; this only bounds the whole run */
		k = rdp_event_add_timer(e, (timeout_ms + 500) * 1000ULL, overall_timeout, e,
					&timer);
		if (k >= 0)
			k = rdp_event_run(e);
		if (k < 0)
			goto out;
		k = 0;
		/* let the answered connections send GOAWAY and close */
		for (int i = 0; i < 4; i++)
			(void)rdp_event_run_once(e, 0);
	}
	for (size_t i = 0; i < st->n_resources; i++)
		if (st->resources[i].serving && !calls[i].done)
			snprintf(probes[i].reason, sizeof(probes[i].reason),
				 "no answer within %lu ms", timeout_ms);
out:
	for (size_t i = 0; i < st->n_resources; i++)
		calls[i].closed = true;
	rdp_event_source_free(timer);
	/* an unanswered call is still open: the loop's end closes its socket */
	rdp_event_free(e);
	rdp_free(calls);
	if (k < 0) {
		rdp_free(probes);
		return k;
	}
	*ret = probes;
	return 0;
}
