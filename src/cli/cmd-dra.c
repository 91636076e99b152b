/* SPDX-License-Identifier: MIT */
/* rdma-dp dra: the node part of the DRA driver (dra-driver.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdi.h"
#include "cli-common.h"
#include "cli.h"
#include "daemon.h"
#include "discovery.h"
#include "dra-driver.h"
#include "dra-instance.h"
#include "dra-share.h"
#include "dra-slices.h"
#include "kube-client.h"
#include "memlock.h"
#include "oci-hook.h"

static const struct cli_cmd dra_cmd = {
	.name = "dra",
	.about = "Run the node part of a DRA (Dynamic Resource Allocation, resource.k8s.io/v1) "
		 "driver for this node's RDMA devices: publish them as a ResourceSlice pool of the "
		 "node, register with kubelet's plugin watcher as a DRAPlugin (v1, v1beta1), and "
		 "prepare the claims kubelet hands over: a CDI spec per claim with its devices' "
		 "char devices, rdma_cm and the NCCL/UCX variables, recorded in a checkpoint.\n",
	.epilog = "Signals: SIGHUP rescans and re-publishes; SIGTERM and SIGINT remove the "
		  "driver's sockets and exit 0 (prepared claims stay prepared: the checkpoint "
		  "keeps them).\n",
};

int cmd_dra(int argc, char **argv)
{
	struct rdp_dra_options o = {.memlock = RDP_MEMLOCK_UNLIMITED,
				    .memlock_hook = RDP_OCI_HOOK_DEFAULT_PATH};
	const char *memlock = NULL, *taint = NULL, *sharing = NULL, *slots = NULL;
	const struct cli_opt opts[] = {
		{"node-name", 0, required_argument, "NAME", .str = &o.node_name,
		 .help = "this node (default $NODE_NAME: the downward API)"},
		{"driver-name", 0, required_argument, "NAME", .str = &o.driver,
		 .help = "the driver (default " RDP_DRA_DEFAULT_DRIVER ")"},
		{"rolling-update-uid", 0, required_argument, "UID", .str = &o.rolling_update_uid,
		 .help = "this pod's UID (default $POD_UID: the downward API): sockets named after "
			 "it, so that a new pod runs beside the old one during an update (the "
			 "DaemonSet's maxSurge); \"\" for the fixed names"},
		CLI_OPT_KUBELET_ROOT(&o.kubelet_root),
		{"cdi-spec-dir", 0, required_argument, "DIR", .str = &o.cdi_spec_dir,
		 .help = "where the claims' CDI specs go (default " RDP_DEFAULT_CDI_SPEC_DIR ")"},
		{"memlock", 0, required_argument, "VALUE", .str = &memlock,
		 .help = "RLIMIT_MEMLOCK of the claims' containers, set by the specs' OCI hook: "
			 "unlimited (default), a size (64Gi), or 0 to leave the runtime's limit "
			 "alone"},
		{"memlock-hook", 0, required_argument, "PATH", .str = &o.memlock_hook,
		 .help = "the host path of rdma-dp the specs name as that hook (default "
			 RDP_OCI_HOOK_DEFAULT_PATH "), or none"},
		{"port-down-taint-effect", 0, required_argument, "EFFECT", .str = &taint,
		 .help = "the effect of the " RDP_DRA_PORT_DOWN_TAINT " taint of a device whose "
			 "ports are all down: NoSchedule (default), NoExecute, None (shown only; "
			 "API server 1.36+) or off"},
		{"sharing", 0, required_argument, "claim|capacity", .str = &sharing,
		 .help = "how pods share a NIC: claim (default: one claim, many pods; any "
			 "1.34+ cluster) or capacity (each device allocatable to several claims, "
			 "allowMultipleAllocations; needs DRAConsumableCapacity: on by default "
			 "since 1.36)"},
		{"share-slots", 0, required_argument, "N", .str = &slots,
		 .help = "capacity: the claims one NIC takes, its \"slots\" capacity (the "
			 "seeds' rdmaHcaMax; default 200)"},
		{"share-bandwidth", 0, no_argument, NULL, .flag = &o.share.bandwidth,
		 .help = "capacity: also publish \"bandwidth\" (the port's rate; a request takes "
			 "none unless it asks)"},
		CLI_OPT_SYSFS_ROOT(&o.sysfs_root),
		CLI_OPT_DEV_ROOT(&o.dev_root),
		{.help = "The API server: in a pod, the service account's (KUBERNETES_SERVICE_HOST "
			 "and _PORT, " RDP_KUBE_SA_DIR "/token and ca.crt); elsewhere:"},
		{"api-server", 0, required_argument, "URL", .str = &o.api_server,
		 .help = "https://IP:PORT (an IP: there is no DNS)"},
		{"token-file", 0, required_argument, "FILE", .str = &o.token_file,
		 .help = "a bearer token (re-read when it changes)"},
		{"ca-file", 0, required_argument, "FILE", .str = &o.ca_file,
		 .help = "the CA that signed the API server's certificate"},
		{"api-server-name", 0, required_argument, "NAME", .str = &o.api_server_name,
		 .help = "the name its certificate must carry (default "
			 RDP_KUBE_DEFAULT_SERVER_NAME ")"},
		/* tests: the in-cluster files under this root (not in --help) */
		{"service-account-root", 0, required_argument, "DIR", .str = &o.sa_root},
		{"verbose", 'v', no_argument, NULL, .flag = &o.verbose, .help = "log every call"},
		{},
	};
	struct cli_parser p;

	cli_parser_init(&p, &dra_cmd, opts, argc, argv);
	if (cli_next(&p) < 0) /* every option is stored: one call parses them all */
		return p.exit;
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
	if (!o.rolling_update_uid)
		o.rolling_update_uid = getenv("POD_UID");
	if (o.rolling_update_uid && *o.rolling_update_uid &&
	    !rdp_dra_instance_uid_valid(o.rolling_update_uid)) {
		fprintf(stderr, "rdma-dp dra: --rolling-update-uid: '%s' is not a pod UID (letters, "
				"digits and '-', at most %d)\n", o.rolling_update_uid,
			RDP_DRA_INSTANCE_UID_MAX);
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
	if (sharing && rdp_dra_sharing_parse(sharing, &o.share.sharing) < 0) {
		fprintf(stderr, "rdma-dp dra: --sharing: '%s' is not \"claim\" or \"capacity\"\n",
			sharing);
		return 2;
	}
	if (slots) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(slots, &end, 10);
		if (errno || end == slots || *end || slots[0] == '-' || v == 0 ||
		    v > RDP_DRA_SHARE_SLOTS_MAX) {
			fprintf(stderr, "rdma-dp dra: --share-slots: '%s' is not a number from 1 to "
					"%d\n", slots, RDP_DRA_SHARE_SLOTS_MAX);
			return 2;
		}
		o.share.slots = (unsigned int)v;
	}
	if ((slots || o.share.bandwidth) && o.share.sharing != RDP_DRA_SHARING_CAPACITY) {
		fprintf(stderr, "rdma-dp dra: --share-slots and --share-bandwidth go with "
				"--sharing=capacity\n");
		return 2;
	}
	if (memlock && rdp_memlock_parse(memlock, &o.memlock) < 0) {
		fprintf(stderr, "rdma-dp dra: --memlock: '%s' is not \"unlimited\", a size (bytes, "
				"or with Ki, Mi, Gi, Ti) or 0\n", memlock);
		return 2;
	}
	if (o.memlock_hook && strcmp(o.memlock_hook, "none") == 0)
		o.memlock_hook = NULL;
	else if (o.memlock_hook && o.memlock_hook[0] != '/') {
		fprintf(stderr, "rdma-dp dra: --memlock-hook: '%s' is not an absolute path or "
				"\"none\"\n", o.memlock_hook);
		return 2;
	}
	if (taint && rdp_dra_taint_effect_parse(taint, &o.port_down_taint) < 0) {
		fprintf(stderr, "rdma-dp dra: --port-down-taint-effect: '%s' is not NoSchedule, "
				"NoExecute, None or off\n", taint);
		return 2;
	}
	if (o.cdi_spec_dir && o.cdi_spec_dir[0] != '/') {
		fprintf(stderr, "rdma-dp dra: --cdi-spec-dir: '%s' is not an absolute path\n",
			o.cdi_spec_dir);
		return 2;
	}
	return rdp_dra_run(&o);
}
