/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp health: the DaemonSet's liveness probe. It checks what the running daemon serves,
 * never the config on disk: the daemon publishes its sockets in <socket dir>/.rdma-dp/
 * status.json (status.h) after every start, reload and socket change; health reads that file
 * and asks every socket listed as serving /v1beta1.DevicePlugin/GetDevicePluginOptions, all at
 * once on one event loop, the call kubelet makes first on every connection. An answer proves
 * the daemon's loop runs; a wedged daemon (SIGSTOPped, stuck) or a dead one (its sockets gone
 * or refusing) fails. Exit 0 when each one answers, else 1 with a one-line reason.
 *
 * Why not the config: a valid ConfigMap edit that adds or renames a resource names a socket
 * the daemon has not created yet; a probe reading the config would fail on every node at once
 * and restart them all, ignoring the DaemonSet's maxUnavailable. An invalid edit leaves the
 * daemon serving its last valid config; the status file lists that, so the probe stays green.
 *
 * No status file is a failure: the daemon writes it before its first socket, so it is missing
 * only before the daemon has started (the probe's initialDelaySeconds and failureThreshold
 * cover a start) or when the daemon cannot write the directory its sockets go into (then it
 * cannot serve either). Falling back to the config would bring back the failure above.
 * --config-file is accepted for compatibility and ignored.
 *
 * A stale file of a dead daemon lists sockets that are gone or refuse connections: the probe
 * fails, as it should. The pid is shown, never checked: with two pods on a node (a DaemonSet
 * update with maxSurge), the file may be another pod's, in another pid namespace; the waiting
 * daemon's probe then checks the serving one's sockets, which is what the node needs.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "cli-common.h"
#include "cli.h"
#include "config.h"
#include "daemon.h"
#include "deviceplugin.pb-c.h"
#include "event.h"
#include "grpc.h"
#include "macro.h"
#include "methods.h"
#include "status.h"

static const char *const cmd = "health";

#define HEALTH_DEFAULT_TIMEOUT_MS 2000
#define HEALTH_MAX_TIMEOUT_MS (10 * 60 * 1000)

static void help(void)
{
	printf("Usage: rdma-dp health [OPTIONS]\n"
	       "\n"
	       "Check that a running 'rdma-dp serve' answers kubelet: every socket the daemon\n"
	       "says it serves (<root>/device-plugins/.rdma-dp/status.json, or the same under\n"
	       "plugins_registry) must answer GetDevicePluginOptions. The config on disk is not\n"
	       "read: an edit the daemon has not applied yet, or an invalid one it refused,\n"
	       "changes nothing here. No discovery: cheap enough for a liveness probe.\n"
	       "\n"
	       "Options:\n"
	       "  -c, --config-file FILE      accepted for compatibility, ignored\n"
	       "      --kubelet-root-dir DIR  kubelet's root directory (default %s)\n"
	       "      --registration MODE     auto, kubelet-sock or plugins-registry: where the\n"
	       "                              daemon's sockets and status are (default auto:\n"
	       "                              the newer of the two status files)\n"
	       "      --timeout-ms N          give up after N ms (default %d)\n"
	       "  -h, --help                  show this help\n"
	       "      --version               show the version\n"
	       "\n"
	       "Exit status: 0 when every socket the daemon serves answers, 1 when one does not or\n"
	       "the daemon published no status (one line on stderr says why), 2 on a usage error.\n",
	       RDP_DEFAULT_KUBELET_ROOT, HEALTH_DEFAULT_TIMEOUT_MS);
}

struct probe {
	const char *resource; /* "rdma/hca_shared_devices_a" */
	char *path; /* socket probed; NULL when none was found */
	bool done;
	bool ok;
	char reason[256];
	struct rdp_event *e;
	size_t *pending;
};

static bool is_socket(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static void probe_answered(enum rdp_grpc_code code, const char *message, const uint8_t *resp,
			   size_t len, void *userdata)
{
	struct probe *p = userdata;

	p->done = true;
	if (code != RDP_GRPC_OK) {
		snprintf(p->reason, sizeof(p->reason), "%s: %s", rdp_grpc_code_name(code),
			 message && *message ? message : "(no message)");
	} else {
		V1beta1__DevicePluginOptions *o =
			v1beta1__device_plugin_options__unpack(NULL, len, resp);
		if (!o) {
			snprintf(p->reason, sizeof(p->reason),
				 "answered with a message that is not DevicePluginOptions");
		} else {
			p->ok = true;
			v1beta1__device_plugin_options__free_unpacked(o, NULL);
		}
	}
	if (--*p->pending == 0)
		rdp_event_exit(p->e, 0);
}

static int overall_timeout(struct rdp_event_source *s, void *userdata)
{
	rdp_event_exit(userdata, 0);
	return 0;
}

/*
 * The daemon's status: from the directory of the mode asked for, or in auto mode from the one
 * of the two written last (a daemon that changed mode leaves no file behind it, but a daemon
 * killed in one mode and started in the other would).
 */
static int load_status(const char *root, enum rdp_registration_mode mode, struct rdp_status **ret,
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

/*
 * Probes every serving socket of st. Returns 0 when all answer, 1 when one does not, -ENOMEM.
 * What to print goes to *out (allocated; stdout on 0, stderr on 1), so that a caller may retry
 * first.
 */
static int run_probes(const struct rdp_status *st, unsigned long timeout_ms, char **out)
{
	struct rdp_event *e = NULL;
	struct rdp_event_source *timer = NULL;
	struct probe *probes;
	size_t pending = 0, n_bad = 0, n_serving = 0, first_bad = SIZE_MAX;
	int rc = 1, k;

	size_t outlen = 0;
	FILE *f = open_memstream(out, &outlen);

	if (!f)
		return -ENOMEM;
	probes = rdp_calloc(st->n_resources + 1, sizeof(*probes));
	if (!probes) {
		fclose(f);
		return -ENOMEM;
	}
	k = rdp_event_new(&e);
	if (k < 0) {
		fprintf(f, "rdma-dp %s: event loop: %s\n", cmd, strerror(-k));
		goto out;
	}
	for (size_t i = 0; i < st->n_resources; i++) {
		const struct rdp_status_resource *r = &st->resources[i];
		struct probe *p = &probes[i];

		p->resource = r->name;
		p->e = e;
		p->pending = &pending;
		if (!r->serving)
			continue; /* not started yet: waiting for its path or for the directory */
		n_serving++;
		p->path = rdp_strdup(r->socket);
		if (!p->path) {
			rc = -ENOMEM;
			goto out;
		}
		if (!is_socket(p->path)) {
			p->done = true;
			snprintf(p->reason, sizeof(p->reason),
				 "the socket the daemon serves is gone");
			continue;
		}
		/* the request is google.protobuf.Empty: zero bytes */
		k = rdp_grpc_unary_call(e, p->path, rdp_method_path(RDP_METHOD_DP_OPTIONS), NULL, 0,
					timeout_ms * 1000ULL,
					probe_answered, p, NULL);
		if (k < 0) {
			p->done = true;
			snprintf(p->reason, sizeof(p->reason), "%s", strerror(-k));
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
		if (k < 0) {
			fprintf(f, "rdma-dp %s: event loop: %s\n", cmd, strerror(-k));
			goto out;
		}
		/* let the answered connections send GOAWAY and close */
		for (int i = 0; i < 4; i++)
			(void)rdp_event_run_once(e, 0);
	}
	for (size_t i = 0; i < st->n_resources; i++) {
		struct probe *p = &probes[i];

		if (!st->resources[i].serving)
			continue;
		if (!p->done)
			snprintf(p->reason, sizeof(p->reason), "no answer within %lu ms",
				 timeout_ms);
		if (!p->ok) {
			n_bad++;
			if (first_bad == SIZE_MAX)
				first_bad = i;
		}
	}
	if (n_bad == 0) {
		bool first = true;

		fprintf(f, "ok: %zu resource%s answer%s (", n_serving, n_serving == 1 ? "" : "s",
		       n_serving == 1 ? "s" : "");
		for (size_t i = 0; i < st->n_resources; i++) {
			if (!st->resources[i].serving)
				continue;
			fprintf(f, "%s%s", first ? "" : ", ", probes[i].resource);
			first = false;
		}
		fprintf(f, ")");
		if (n_serving < st->n_resources)
			fprintf(f, ", %zu not started yet", st->n_resources - n_serving);
		fprintf(f, "; pid %lld generation %llu\n", st->pid,
		       (unsigned long long)st->generation);
		rc = 0;
	} else {
		struct probe *p = &probes[first_bad];

		fprintf(f, "rdma-dp %s: %s: %s: %s", cmd, p->resource, p->path, p->reason);
		if (n_serving > 1)
			fprintf(f, " (%zu of %zu resources failing)", n_bad, n_serving);
		fprintf(f, " (daemon pid %lld generation %llu)\n", st->pid,
			(unsigned long long)st->generation);
	}
out:
	rdp_event_source_free(timer);
	/* an unanswered call is still open: the loop's end closes its socket */
	e = rdp_event_free(e);
	for (size_t i = 0; i < st->n_resources; i++)
		rdp_free(probes[i].path);
	rdp_free(probes);
	fclose(f);
	return rc;
}

int cmd_health(int argc, char **argv)
{
	enum { OPT_KUBELET = 0x100, OPT_REG, OPT_TIMEOUT, OPT_VERSION };
	static const struct option opts[] = {
		{"config-file", required_argument, NULL, 'c'},
		{"kubelet-root-dir", required_argument, NULL, OPT_KUBELET},
		{"registration", required_argument, NULL, OPT_REG},
		{"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{0},
	};
	const char *config_file = RDP_DEFAULT_CONFIG_FILE, *root = RDP_DEFAULT_KUBELET_ROOT;
	enum rdp_registration_mode mode = RDP_REGISTRATION_AUTO;
	unsigned long timeout_ms = HEALTH_DEFAULT_TIMEOUT_MS;
	struct rdp_status *st = NULL;
	char *dir = NULL, *out = NULL, err[512] = "";
	int opt, k, rc;

	optind = 1;
	while ((opt = getopt_long(argc, argv, ":c:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			config_file = optarg;
			break;
		case OPT_KUBELET:
			root = optarg;
			break;
		case OPT_REG:
			if (rdp_registration_mode_from_string(optarg, &mode) < 0) {
				fprintf(stderr,
					"rdma-dp %s: --registration: unknown mode '%s' (expected "
					"auto, kubelet-sock or plugins-registry)\n",
					cmd, optarg);
				return 2;
			}
			break;
		case OPT_TIMEOUT: {
			char *end;

			errno = 0;
			timeout_ms = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || timeout_ms == 0 ||
			    timeout_ms > HEALTH_MAX_TIMEOUT_MS) {
				fprintf(stderr,
					"rdma-dp %s: --timeout-ms: '%s' is not a number of "
					"milliseconds from 1 to %d\n",
					cmd, optarg, HEALTH_MAX_TIMEOUT_MS);
				return 2;
			}
			break;
		}
		case 'h':
			help();
			return 0;
		case OPT_VERSION:
			cli_print_version();
			return 0;
		default:
			return cli_option_error(cmd, argv, opt);
		}
	}
	if (cli_no_operands(cmd, argc, argv))
		return 2;
	if (!*root) {
		fprintf(stderr, "rdma-dp %s: --kubelet-root-dir: empty path\n", cmd);
		return 2;
	}

	(void)config_file; /* the config on disk is what the daemon has NOT applied yet */
	k = load_status(root, mode, &st, &dir, err, sizeof(err));
	if (k == -ENOMEM) {
		fprintf(stderr, "rdma-dp %s: out of memory\n", cmd);
		return 1;
	}
	if (k < 0) {
		fprintf(stderr, "rdma-dp %s: %s\n", cmd, err);
		return 1;
	}
	rc = run_probes(st, timeout_ms, &out);
	if (rc == 1) {
		/*
		 * A reload unlinks a removed resource's socket a moment before the daemon publishes
		 * its new status: when the status changed meanwhile, the new one is what counts.
		 */
		struct rdp_status *again = NULL;
		char *dir2 = NULL;

		if (load_status(root, mode, &again, &dir2, err, sizeof(err)) == 0 &&
		    (again->pid != st->pid || again->generation != st->generation)) {
			free(out);
			out = NULL;
			rc = run_probes(again, timeout_ms, &out);
		}
		rdp_status_free(again);
		rdp_free(dir2);
	}
	if (rc < 0) {
		fprintf(stderr, "rdma-dp %s: out of memory\n", cmd);
		rc = 1;
	} else {
		fputs(out ? out : "", rc == 0 ? stdout : stderr);
	}
	free(out); /* open_memstream's */
	rdp_status_free(st);
	rdp_free(dir);
	return rc;
}
