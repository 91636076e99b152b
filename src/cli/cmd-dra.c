/* SPDX-License-Identifier: MIT */
/* rdma-dp dra: the node part of the DRA driver (dra-driver.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi.h"
#include "cli-common.h"
#include "cli.h"
#include "daemon.h"
#include "discovery.h"
#include "dra-driver.h"
#include "dra-slices.h"
#include "kube-client.h"
#include "memlock.h"
#include "oci-hook.h"

static void help(void)
{
	printf("Usage: rdma-dp dra [OPTIONS]\n"
	       "\n"
	       "Run the node part of a DRA (Dynamic Resource Allocation, resource.k8s.io/v1)\n"
	       "driver for this node's RDMA devices: publish them as a ResourceSlice pool of the\n"
	       "node, register with kubelet's plugin watcher as a DRAPlugin (v1, v1beta1), and\n"
	       "prepare the claims kubelet hands over: a CDI spec per claim with its devices'\n"
	       "char devices, rdma_cm and the NCCL/UCX variables, recorded in a checkpoint.\n"
	       "\n"
	       "Options:\n"
	       "      --node-name NAME         this node (default $NODE_NAME: the downward API)\n"
	       "      --driver-name NAME       the driver (default %s)\n"
	       "      --kubelet-root-dir DIR   kubelet's root directory (default %s)\n"
	       "      --cdi-spec-dir DIR       where the claims' CDI specs go (default %s)\n"
	       "      --memlock VALUE          RLIMIT_MEMLOCK of the claims' containers, set by\n"
	       "                               the specs' OCI hook: unlimited (default), a size\n"
	       "                               (64Gi), or 0 to leave the runtime's limit alone\n"
	       "      --memlock-hook PATH      the host path of rdma-dp the specs name as that\n"
	       "                               hook (default " RDP_OCI_HOOK_DEFAULT_PATH "), or none\n"
	       "      --sysfs-root DIR         read sysfs from DIR (default %s)\n"
	       "      --dev-root DIR           read /dev from DIR (default %s)\n"
	       "  The API server: in a pod, the service account's (KUBERNETES_SERVICE_HOST and\n"
	       "  _PORT, %s/token and ca.crt); elsewhere:\n"
	       "      --api-server URL         https://IP:PORT (an IP: there is no DNS)\n"
	       "      --token-file FILE        a bearer token (re-read when it changes)\n"
	       "      --ca-file FILE           the CA that signed the API server's certificate\n"
	       "      --api-server-name NAME   the name its certificate must carry (default %s)\n"
	       "  -v, --verbose                log every call\n"
	       "  -h, --help                   show this help\n"
	       "      --version                show the version\n"
	       "\n"
	       "Signals: SIGHUP rescans and re-publishes; SIGTERM and SIGINT remove the driver's\n"
	       "sockets and exit 0 (prepared claims stay prepared: the checkpoint keeps them).\n",
	       RDP_DRA_DEFAULT_DRIVER, RDP_DEFAULT_KUBELET_ROOT, RDP_DEFAULT_CDI_SPEC_DIR,
	       RDP_DEFAULT_SYSFS_ROOT, RDP_DEFAULT_DEV_ROOT, RDP_KUBE_SA_DIR,
	       RDP_KUBE_DEFAULT_SERVER_NAME);
}

int cmd_dra(int argc, char **argv)
{
	enum { OPT_NODE = 0x100, OPT_DRIVER, OPT_KUBELET, OPT_CDI, OPT_SYSFS, OPT_DEV, OPT_API,
	       OPT_TOKEN, OPT_CA, OPT_API_NAME, OPT_SA_ROOT, OPT_VERSION, OPT_MEMLOCK,
	       OPT_HOOK };
	static const struct option longopts[] = {
		{"node-name", required_argument, NULL, OPT_NODE},
		{"driver-name", required_argument, NULL, OPT_DRIVER},
		{"kubelet-root-dir", required_argument, NULL, OPT_KUBELET},
		{"cdi-spec-dir", required_argument, NULL, OPT_CDI},
		{"memlock", required_argument, NULL, OPT_MEMLOCK},
		{"memlock-hook", required_argument, NULL, OPT_HOOK},
		{"sysfs-root", required_argument, NULL, OPT_SYSFS},
		{"dev-root", required_argument, NULL, OPT_DEV},
		{"api-server", required_argument, NULL, OPT_API},
		{"token-file", required_argument, NULL, OPT_TOKEN},
		{"ca-file", required_argument, NULL, OPT_CA},
		{"api-server-name", required_argument, NULL, OPT_API_NAME},
		/* tests: the in-cluster files under this root */
		{"service-account-root", required_argument, NULL, OPT_SA_ROOT},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
		{0},
	};
	struct rdp_dra_options o = {.memlock = RDP_MEMLOCK_UNLIMITED,
				    .memlock_hook = RDP_OCI_HOOK_DEFAULT_PATH};
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, ":vh", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_NODE:
			o.node_name = optarg;
			break;
		case OPT_DRIVER:
			o.driver = optarg;
			break;
		case OPT_KUBELET:
			o.kubelet_root = optarg;
			break;
		case OPT_CDI:
			o.cdi_spec_dir = optarg;
			break;
		case OPT_MEMLOCK:
			if (rdp_memlock_parse(optarg, &o.memlock) < 0) {
				fprintf(stderr, "rdma-dp dra: --memlock: '%s' is not \"unlimited\", "
					"a size (bytes, or with Ki, Mi, Gi, Ti) or 0\n", optarg);
				return 2;
			}
			break;
		case OPT_HOOK:
			if (strcmp(optarg, "none") == 0) {
				o.memlock_hook = NULL;
				break;
			}
			if (optarg[0] != '/') {
				fprintf(stderr, "rdma-dp dra: --memlock-hook: '%s' is not an absolute "
					"path or \"none\"\n", optarg);
				return 2;
			}
			o.memlock_hook = optarg;
			break;
		case OPT_SYSFS:
			o.sysfs_root = optarg;
			break;
		case OPT_DEV:
			o.dev_root = optarg;
			break;
		case OPT_API:
			o.api_server = optarg;
			break;
		case OPT_TOKEN:
			o.token_file = optarg;
			break;
		case OPT_CA:
			o.ca_file = optarg;
			break;
		case OPT_API_NAME:
			o.api_server_name = optarg;
			break;
		case OPT_SA_ROOT:
			o.sa_root = optarg;
			break;
		case 'v':
			o.verbose = true;
			break;
		case 'h':
			help();
			return 0;
		case OPT_VERSION:
			cli_print_version();
			return 0;
		default:
			return cli_option_error("dra", argv, c);
		}
	}
	if (cli_no_operands("dra", argc, argv))
		return 2;
	if (!o.node_name)
		o.node_name = getenv("NODE_NAME");
	if (!o.node_name || !*o.node_name) {
		fprintf(stderr, "rdma-dp dra: no node name: give --node-name or set NODE_NAME "
				"(the DaemonSet sets it from spec.nodeName)\n");
		return 2;
	}
	if (!rdp_dra_dns_subdomain(o.node_name, RDP_DRA_NODE_NAME_MAX)) {
		fprintf(stderr, "rdma-dp dra: --node-name: '%s' is not a node name (a DNS "
				"subdomain)\n", o.node_name);
		return 2;
	}
	if (o.driver && !rdp_dra_dns_subdomain(o.driver, RDP_DRA_DRIVER_MAX)) {
		fprintf(stderr, "rdma-dp dra: --driver-name: '%s' is not a DNS subdomain of at most "
				"%d characters\n", o.driver, RDP_DRA_DRIVER_MAX);
		return 2;
	}
	if (o.api_server && (!o.token_file || !o.ca_file)) {
		fprintf(stderr, "rdma-dp dra: --api-server needs --token-file and --ca-file\n");
		return 2;
	}
	if (!o.api_server && (o.token_file || o.ca_file)) {
		fprintf(stderr, "rdma-dp dra: --token-file and --ca-file go with --api-server\n");
		return 2;
	}
	if (o.cdi_spec_dir && o.cdi_spec_dir[0] != '/') {
		fprintf(stderr, "rdma-dp dra: --cdi-spec-dir: '%s' is not an absolute path\n",
			o.cdi_spec_dir);
		return 2;
	}
	return rdp_dra_run(&o);
}
