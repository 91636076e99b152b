/* SPDX-License-Identifier: MIT */
/* rdma-dp serve: the device plugin daemon (daemon.c does the work). */
#include <getopt.h>
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

static void serve_usage(FILE *f)
{
	fprintf(f,
		"Usage: rdma-dp serve [OPTIONS]\n"
		"\n"
		"Run the device plugin: advertise each resource of the config to kubelet as\n"
		"<resourcePrefix>/<resourceName> and hand the RDMA char devices to pods.\n"
		"\n"
		"Options:\n"
		"  -c, --config-file FILE      config.json (default %s)\n"
		"      --sysfs-root DIR        read sysfs from DIR (default %s)\n"
		"      --dev-root DIR          read /dev from DIR (default %s)\n"
		"      --kubelet-root-dir DIR  kubelet's root directory (default %s)\n"
		"      --registration MODE     auto, kubelet-sock or plugins-registry (default "
		"auto:\n"
		"                              kubelet.sock when it exists, else the plugin "
		"watcher\n"
		"                              when <root>/plugins_registry exists, else "
		"kubelet.sock)\n"
		"      --use-cdi[=BOOL]        name the devices through CDI: keep a spec per "
		"resource\n"
		"                              in the CDI spec dir and answer Allocate with "
		"CDI names\n"
		"                              (kubelet >= 1.28 with containerd >= 1.7.2 or "
		"CRI-O >= 1.28)\n"
		"      --cdi-spec-dir DIR      where the specs go (default %s)\n"
		"      --probe-address ADDR    serve GET /healthz and /readyz only on ADDR, with "
		"connection\n"
		"                              slots of their own (the DaemonSet: "
		"127.0.0.1:9471, where\n"
		"                              kubelet's probes go); off unless given\n"
		"      --memlock-hook PATH     the host path of rdma-dp that the specs name as "
		"their\n"
		"                              OCI hook raising RLIMIT_MEMLOCK (config key "
		"\"memlock\";\n"
		"                              default " RDP_OCI_HOOK_DEFAULT_PATH ", where the "
		"DaemonSet\n"
		"                              installs it); \"none\": no hook in the specs\n"
		"      --metrics-address ADDR  serve GET /metrics (Prometheus), /healthz and "
		"/readyz\n"
		"                              on ADDR: IP:PORT, [IPv6]:PORT or :PORT (all "
		"addresses;\n"
		"                              the DaemonSet uses :%d); off unless given\n"
		"  -v, --verbose               log every call\n"
		"  -h, --help                  show this help\n"
		"      --version               show the version\n"
		"\n"
		"Signals: SIGHUP reloads the config and rescans the devices; SIGTERM and SIGINT\n"
		"remove the daemon's sockets and exit 0. Logs go to stderr, one key=value line per "
		"event.\n",
		RDP_DEFAULT_CONFIG_FILE, RDP_DEFAULT_SYSFS_ROOT, RDP_DEFAULT_DEV_ROOT,
		RDP_DEFAULT_KUBELET_ROOT, RDP_DEFAULT_CDI_SPEC_DIR, RDP_DEFAULT_METRICS_PORT);
}

int cmd_serve(int argc, char **argv)
{
	enum { OPT_SYSFS = 0x100, OPT_DEV, OPT_KUBELET, OPT_REG, OPT_VERSION, OPT_CDI,
	       OPT_CDI_DIR, OPT_METRICS, OPT_HOOK, OPT_PROBES };
	static const struct option longopts[] = {
		{"config-file", required_argument, NULL, 'c'},
		{"sysfs-root", required_argument, NULL, OPT_SYSFS},
		{"dev-root", required_argument, NULL, OPT_DEV},
		{"kubelet-root-dir", required_argument, NULL, OPT_KUBELET},
		{"registration", required_argument, NULL, OPT_REG},
		/* As k8s-rdma-shared-dev-plugin's (a Go bool flag: --use-cdi, --use-cdi=true). */
		{"use-cdi", optional_argument, NULL, OPT_CDI},
		{"cdi-spec-dir", required_argument, NULL, OPT_CDI_DIR},
		{"memlock-hook", required_argument, NULL, OPT_HOOK},
		{"metrics-address", required_argument, NULL, OPT_METRICS},
		{"probe-address", required_argument, NULL, OPT_PROBES},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{0},
	};
	struct rdp_daemon_options o = {.registration = RDP_REGISTRATION_AUTO};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, ":c:vh", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			o.config_file = optarg;
			break;
		case OPT_SYSFS:
			o.sysfs_root = optarg;
			break;
		case OPT_DEV:
			o.dev_root = optarg;
			break;
		case OPT_KUBELET:
			o.kubelet_root = optarg;
			break;
		case OPT_REG:
			if (rdp_registration_mode_from_string(optarg, &o.registration) < 0) {
				fprintf(stderr,
					"rdma-dp serve: --registration: unknown mode '%s' "
					"(expected "
					"auto, kubelet-sock or plugins-registry)\n",
					optarg);
				return 2;
			}
			break;
		case OPT_CDI:
			if (!optarg || strcmp(optarg, "true") == 0 || strcmp(optarg, "1") == 0) {
				o.use_cdi = true;
			} else if (strcmp(optarg, "false") == 0 || strcmp(optarg, "0") == 0) {
				o.use_cdi = false;
			} else {
				fprintf(stderr, "rdma-dp serve: --use-cdi: '%s' is not true or false\n",
					optarg);
				return 2;
			}
			break;
		case OPT_CDI_DIR:
			if (!*optarg || optarg[0] != '/') {
				fprintf(stderr, "rdma-dp serve: --cdi-spec-dir: '%s' is not an "
						"absolute path\n", optarg);
				return 2;
			}
			o.cdi_spec_dir = optarg;
			break;
		case OPT_HOOK:
			if (strcmp(optarg, "none") == 0) {
				o.no_memlock_hook = true;
				o.memlock_hook = NULL;
				break;
			}
			if (optarg[0] != '/' || strlen(optarg) >= 4096) {
				fprintf(stderr, "rdma-dp serve: --memlock-hook: '%s' is not an "
						"absolute path or \"none\"\n", optarg);
				return 2;
			}
			o.no_memlock_hook = false;
			o.memlock_hook = optarg;
			break;
		case OPT_PROBES: {
			struct sockaddr_storage ss;
			socklen_t sl;
			char err[160];

			if (rdp_http_parse_address(optarg, &ss, &sl, err, sizeof(err)) < 0) {
				fprintf(stderr, "rdma-dp serve: --probe-address: %s\n", err);
				return 2;
			}
			o.probe_address = optarg;
			break;
		}
		case OPT_METRICS: {
			struct sockaddr_storage ss;
			socklen_t sl;
			char err[160];

			if (rdp_http_parse_address(optarg, &ss, &sl, err, sizeof(err)) < 0) {
				fprintf(stderr, "rdma-dp serve: --metrics-address: %s\n", err);
				return 2;
			}
			o.metrics_address = optarg;
			break;
		}
		case 'v':
			o.verbose = true;
			break;
		case 'h':
			serve_usage(stdout);
			return 0;
		case OPT_VERSION:
			cli_print_version();
			return 0;
		default:
			return cli_option_error("serve", argv, c);
		}
	}
	if (cli_no_operands("serve", argc, argv))
		return 2;
	if (o.kubelet_root && strlen(o.kubelet_root) == 0) {
		fprintf(stderr, "rdma-dp serve: --kubelet-root-dir: empty path\n");
		return 2;
	}
	return rdp_daemon_run(&o);
}
