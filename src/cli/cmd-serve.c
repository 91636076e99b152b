/* SPDX-License-Identifier: MIT */
/* rdma-dp serve: the device plugin daemon (daemon.c does the work). */
#include <stdio.h>
#include <string.h>

#include "cdi.h"
#include "cli-common.h"
#include "cli.h"
#include "config.h"
#include "daemon.h"
#include "http-server.h"
#include "oci-hook.h"
#include "discovery.h"

enum {
	OPT_REG = CLI_KEY_LONG,
	OPT_CDI,
	OPT_CDI_DIR,
	OPT_METRICS,
	OPT_HOOK,
	OPT_PROBES,
};

static const struct cli_cmd serve_cmd = {
	.name = "serve",
	.about = "Run the device plugin: advertise each resource of the config to kubelet as "
		 "<resourcePrefix>/<resourceName> and hand the RDMA char devices to pods.\n",
	.epilog = "Signals: SIGHUP reloads the config and rescans the devices; SIGTERM and SIGINT "
		  "remove the daemon's sockets and exit 0. Logs go to stderr, one key=value line "
		  "per event.\n",
};

/* An HTTP listen address (IP:PORT, [IPv6]:PORT, :PORT), or false after saying why. */
static bool address_ok(const char *option, const char *arg)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char err[160];

	if (rdp_http_parse_address(arg, &ss, &sl, err, sizeof(err)) >= 0)
		return true;
	fprintf(stderr, "rdma-dp serve: %s: %s\n", option, err);
	return false;
}

int cmd_serve(int argc, char **argv)
{
	struct rdp_daemon_options o = {.registration = RDP_REGISTRATION_AUTO};
	const struct cli_opt opts[] = {
		{"config-file", 'c', required_argument, "FILE", .str = &o.config_file,
		 .help = "config.json (default " RDP_DEFAULT_CONFIG_FILE ")"},
		CLI_OPT_SYSFS_ROOT(&o.sysfs_root),
		CLI_OPT_DEV_ROOT(&o.dev_root),
		CLI_OPT_KUBELET_ROOT(&o.kubelet_root),
		{"registration", OPT_REG, required_argument, "MODE",
		 .help = "auto, kubelet-sock or plugins-registry (default auto: the plugin "
			 "watcher when <root>/plugins_registry exists, else kubelet.sock, as "
			 "k8s-rdma-shared-dev-plugin; it follows kubelet when that changes)"},
		/* As k8s-rdma-shared-dev-plugin's (a Go bool flag: --use-cdi, --use-cdi=true). */
		{"use-cdi", OPT_CDI, optional_argument, "BOOL",
		 .help = "name the devices through CDI: keep a spec per resource in the CDI spec "
			 "dir and answer Allocate with CDI names (kubelet >= 1.28 with containerd "
			 ">= 1.7.2 or CRI-O >= 1.28)"},
		{"cdi-spec-dir", OPT_CDI_DIR, required_argument, "DIR",
		 .help = "where the specs go (default " RDP_DEFAULT_CDI_SPEC_DIR ")"},
		{"memlock-hook", OPT_HOOK, required_argument, "PATH",
		 .help = "the host path of rdma-dp that the specs name as their OCI hook raising "
			 "RLIMIT_MEMLOCK (config key \"memlock\"; default "
			 RDP_OCI_HOOK_DEFAULT_PATH ", where the DaemonSet installs it); \"none\": "
			 "no hook in the specs"},
		{"metrics-address", OPT_METRICS, required_argument, "ADDR",
		 .help = "serve GET /metrics (Prometheus), /healthz and /readyz on ADDR: IP:PORT, "
			 "[IPv6]:PORT or :PORT (all addresses; the DaemonSet uses :"
			 CLI_STR(RDP_DEFAULT_METRICS_PORT) "); off unless given"},
		{"probe-address", OPT_PROBES, required_argument, "ADDR",
		 .help = "serve GET /healthz and /readyz only on ADDR, with connection slots of "
			 "their own (the DaemonSet: 127.0.0.1:" CLI_STR(RDP_DEFAULT_PROBE_PORT)
			 ", where kubelet's probes go); off unless given"},
		{"verbose", 'v', no_argument, NULL, .flag = &o.verbose, .help = "log every call"},
		{},
	};
	struct cli_parser p;
	int c;

	cli_parser_init(&p, &serve_cmd, opts, argc, argv);
	while ((c = cli_next(&p)) > 0) {
		switch (c) {
		case OPT_REG:
			if (rdp_registration_mode_from_string(p.arg, &o.registration) < 0) {
				fprintf(stderr,
					"rdma-dp serve: --registration: unknown mode '%s' "
					"(expected "
					"auto, kubelet-sock or plugins-registry)\n",
					p.arg);
				return 2;
			}
			break;
		case OPT_CDI:
			if (!p.arg || strcmp(p.arg, "true") == 0 || strcmp(p.arg, "1") == 0) {
				o.use_cdi = true;
			} else if (strcmp(p.arg, "false") == 0 || strcmp(p.arg, "0") == 0) {
				o.use_cdi = false;
			} else {
				fprintf(stderr,
					"rdma-dp serve: --use-cdi: '%s' is not true or false\n", p.arg);
				return 2;
			}
			break;
		case OPT_CDI_DIR:
			if (!*p.arg || p.arg[0] != '/') {
				fprintf(stderr, "rdma-dp serve: --cdi-spec-dir: '%s' is not an "
						"absolute path\n", p.arg);
				return 2;
			}
			o.cdi_spec_dir = p.arg;
			break;
		case OPT_HOOK:
			if (strcmp(p.arg, "none") == 0) {
				o.no_memlock_hook = true;
				o.memlock_hook = NULL;
				break;
			}
			if (p.arg[0] != '/' || strlen(p.arg) >= 4096) {
				fprintf(stderr, "rdma-dp serve: --memlock-hook: '%s' is not an "
						"absolute path or \"none\"\n", p.arg);
				return 2;
			}
			o.no_memlock_hook = false;
			o.memlock_hook = p.arg;
			break;
		case OPT_PROBES:
			if (!address_ok("--probe-address", p.arg))
				return 2;
			o.probe_address = p.arg;
			break;
		case OPT_METRICS:
			if (!address_ok("--metrics-address", p.arg))
				return 2;
			o.metrics_address = p.arg;
			break;
		}
	}
	if (c < 0)
		return p.exit;
	if (o.kubelet_root && strlen(o.kubelet_root) == 0) {
		fprintf(stderr, "rdma-dp serve: --kubelet-root-dir: empty path\n");
		return 2;
	}
	return rdp_daemon_run(&o);
}
