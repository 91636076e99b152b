/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp health: the DaemonSet's liveness probe. Cheap on purpose: it reads the config only
 * for the resource names (no discovery, no sysfs), then asks every resource's socket
 * /v1beta1.DevicePlugin/GetDevicePluginOptions, all at once on one event loop, the call
 * kubelet makes first on every connection. Exit 0 when each one answers, else 1 with a
 * one-line reason.
 *
 * An invalid config is not a liveness failure: the daemon keeps serving its last valid config
 * (SIGHUP), and restarting it would only trade a serving daemon for one that cannot start, on
 * every node at once. health then says so on stdout and exits 0; `check-config` is the tool
 * for the config itself.
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

static const char *const cmd = "health";

#define HEALTH_DEFAULT_TIMEOUT_MS 2000
#define HEALTH_MAX_TIMEOUT_MS (10 * 60 * 1000)
#define OPTIONS_PATH "/v1beta1.DevicePlugin/GetDevicePluginOptions"

static void help(void)
{
	printf("Usage: rdma-dp health [OPTIONS]\n"
	       "\n"
	       "Check that a running 'rdma-dp serve' answers kubelet: for each resource of the\n"
	       "config, its socket must exist and answer GetDevicePluginOptions. No discovery:\n"
	       "cheap enough for a liveness probe.\n"
	       "\n"
	       "Options:\n"
	       "  -c, --config-file FILE      config.json (default %s)\n"
	       "      --kubelet-root-dir DIR  kubelet's root directory (default %s)\n"
	       "      --registration MODE     auto, kubelet-sock or plugins-registry (default "
	       "auto:\n"
	       "                              <root>/device-plugins/<name>.sock, else\n"
	       "                              <root>/plugins_registry/<name>.sock)\n"
	       "      --timeout-ms N          give up after N ms (default %d)\n"
	       "  -h, --help                  show this help\n"
	       "      --version               show the version\n"
	       "\n"
	       "Exit status: 0 when every resource answers (or the config is invalid: the daemon\n"
	       "keeps its last valid config, so a restart would not help; stdout says so), 1 when\n"
	       "one does not (one line on stderr says why), 2 on a usage error.\n",
	       RDP_DEFAULT_CONFIG_FILE, RDP_DEFAULT_KUBELET_ROOT, HEALTH_DEFAULT_TIMEOUT_MS);
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

static int socket_path(const char *root, enum rdp_registration_mode mode, const char *name,
		       char **ret)
{
	static const char *const dirs[] = {"device-plugins", "plugins_registry"};

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char *p;

		if ((mode == RDP_REGISTRATION_KUBELET_SOCK && i != 0) ||
		    (mode == RDP_REGISTRATION_PLUGINS_REGISTRY && i != 1))
			continue;
		p = rdp_asprintf("%s/%s/%s.sock", root, dirs[i], name);
		if (!p)
			return -ENOMEM;
		if (is_socket(p)) {
			*ret = p;
			return 0;
		}
		rdp_free(p);
	}
	*ret = NULL;
	return 0;
}

static int run_probes(const struct rdp_config *c, const char *root, enum rdp_registration_mode mode,
		      unsigned long timeout_ms)
{
	struct rdp_event *e = NULL;
	struct rdp_event_source *timer = NULL;
	struct probe *probes;
	size_t pending = 0, n_bad = 0, first_bad = SIZE_MAX;
	int rc = 1, k;

	probes = rdp_calloc(c->n_resources, sizeof(*probes));
	if (!probes) {
		fprintf(stderr, "rdma-dp %s: out of memory\n", cmd);
		return 1;
	}
	k = rdp_event_new(&e);
	if (k < 0) {
		fprintf(stderr, "rdma-dp %s: event loop: %s\n", cmd, strerror(-k));
		goto out;
	}
	for (size_t i = 0; i < c->n_resources; i++) {
		struct probe *p = &probes[i];

		p->resource = c->resources[i].full_name;
		p->e = e;
		p->pending = &pending;
		k = socket_path(root, mode, c->resources[i].name, &p->path);
		if (k < 0) {
			fprintf(stderr, "rdma-dp %s: out of memory\n", cmd);
			goto out;
		}
		if (!p->path) {
			p->done = true;
			snprintf(p->reason, sizeof(p->reason), "no socket %s.sock in %s/%s",
				 c->resources[i].name, root,
				 mode == RDP_REGISTRATION_PLUGINS_REGISTRY ? "plugins_registry"
				 : mode == RDP_REGISTRATION_KUBELET_SOCK
					 ? "device-plugins"
					 : "device-plugins or plugins_registry");
			continue;
		}
		/* the request is google.protobuf.Empty: zero bytes */
		k = rdp_grpc_unary_call(e, p->path, OPTIONS_PATH, NULL, 0, timeout_ms * 1000ULL,
					probe_answered, p, NULL);
		if (k < 0) {
			p->done = true;
			snprintf(p->reason, sizeof(p->reason), "%s: %s", p->path, strerror(-k));
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
			fprintf(stderr, "rdma-dp %s: event loop: %s\n", cmd, strerror(-k));
			goto out;
		}
		/* let the answered connections send GOAWAY and close */
		for (int i = 0; i < 4; i++)
			(void)rdp_event_run_once(e, 0);
	}
	for (size_t i = 0; i < c->n_resources; i++) {
		struct probe *p = &probes[i];

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
		printf("ok: %zu resource%s answer%s (", c->n_resources,
		       c->n_resources == 1 ? "" : "s", c->n_resources == 1 ? "s" : "");
		for (size_t i = 0; i < c->n_resources; i++)
			printf("%s%s", i ? ", " : "", probes[i].resource);
		printf(")\n");
		rc = 0;
	} else {
		struct probe *p = &probes[first_bad];

		fprintf(stderr, "rdma-dp %s: %s: %s%s%s", cmd, p->resource,
			p->path && !strstr(p->reason, p->path) ? p->path : "",
			p->path && !strstr(p->reason, p->path) ? ": " : "", p->reason);
		if (c->n_resources > 1)
			fprintf(stderr, " (%zu of %zu resources failing)", n_bad, c->n_resources);
		fprintf(stderr, "\n");
	}
out:
	rdp_event_source_free(timer);
	/* an unanswered call is still open: the loop's end closes its socket */
	e = rdp_event_free(e);
	for (size_t i = 0; i < c->n_resources; i++)
		rdp_free(probes[i].path);
	rdp_free(probes);
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
	struct rdp_config *c = NULL;
	struct rdp_diags diags = {0};
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

	k = rdp_config_load_file(config_file, &c, &diags);
	if (k < 0) {
		const char *first = NULL;

		for (size_t i = 0; i < diags.n && !first; i++)
			if (diags.v[i].level == RDP_DIAG_ERROR)
				first = diags.v[i].text;
		printf("ok: nothing checked: the config is invalid (%s); the daemon keeps serving "
		       "its last valid config: fix it (rdma-dp check-config)\n",
		       first ? first : strerror(-k));
		rdp_diags_done(&diags);
		return 0;
	}
	rdp_diags_done(&diags);
	rc = run_probes(c, root, mode, timeout_ms);
	rdp_config_free(c);
	return rc;
}
