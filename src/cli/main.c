/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp: the RDMA device plugin for Kubernetes. Dispatches sub-commands, iproute2 style;
 * called as k8s-rdma-shared-dp (argv[0]), it is the Go plugin's command (cmd-shared-dp.c).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli-opt.h"
#include "cli.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
} commands[] = {
	{ "discover", cmd_discover, "show the RDMA devices of this node, as selectors see them" },
	{ "topo", cmd_topo,
	  "show the PCIe topology of GPUs and RDMA devices, as nvidia-smi topo -m does" },
	{ "check-config", cmd_check_config,
	  "validate a config.json and explain, device by device, what each resource selects" },
	{ "serve", cmd_serve, "run the device plugin daemon for kubelet" },
	{ "health", cmd_health, "check that a running daemon answers on every resource socket" },
	{ "dra", cmd_dra,
	  "run the DRA driver: ResourceSlices of this node's RDMA devices, claims through CDI" },
	{ "metrics", cmd_metrics,
	  "print this node's port counters in the Prometheus text format (or a textfile)" },
	{ "doctor", cmd_doctor,
	  "name what stands between a pod and NCCL over RDMA: one line per check, with the fix" },
	{ "hook", cmd_hook,
	  "OCI hook of the CDI specs (run by the container runtime): sets RLIMIT_MEMLOCK" },
	{ "install-hook", cmd_install_hook,
	  "copy this binary to the host path the CDI specs name as their hook (init container)" },
	{ "kube-get", cmd_kube_get,
	  "diagnostic: GET an API-server path through the DRA driver's TLS client, print JSON" },
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: rdma-dp [--help] [--version] COMMAND [OPTIONS]\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		cli_print_row(f, commands[i].name, 18, commands[i].help);
	fprintf(f, "\nRun 'rdma-dp COMMAND --help' for the options of a command.\n");
}

/* The Go plugin's binary name: /bin/k8s-rdma-shared-dp in the image (a hard link). */
#define SHARED_DP_NAME "k8s-rdma-shared-dp"

static bool called_as(const char *argv0, const char *name)
{
	const char *slash = argv0 ? strrchr(argv0, '/') : NULL;

	return argv0 && strcmp(slash ? slash + 1 : argv0, name) == 0;
}

int main(int argc, char **argv)
{
	if (argc > 0 && called_as(argv[0], SHARED_DP_NAME))
		return cmd_shared_dp(argc, argv);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0 ||
	    strcmp(argv[1], "version") == 0) {
		cli_print_version();
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0)
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "rdma-dp: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
