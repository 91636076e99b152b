/* SPDX-License-Identifier: MIT */
/*
 * k8s-rdma-shared-dp: rdma-dp under the Go plugin's binary name, as NVIDIA network-operator
 * runs it (`command: ["/bin/k8s-rdma-shared-dp"]`, `args: ["--use-cdi"]` when useCdi is set).
 * main.c comes here when argv[0]'s basename is that name: no sub-command, the Go plugin's
 * flags only, in Go's `flag` syntax (goflag.h), with its exit codes (2 for a bad flag, 0 for
 * -h), and rdma-dp serve's defaults, which are the Go plugin's paths: the config at
 * /k8s-rdma-shared-dev-plugin/config.json, devices under /dev, sysfs at /sys, CDI specs in
 * /var/run/cdi, kubelet's sockets under /var/lib/kubelet.
 *
 * The Go plugin's flags (cmd/k8s-rdma-shared-dp/main.go, its own FlagSet, so no glog or
 * klog flags): -version and -v (the same bool), -config-file PATH, -use-cdi. Like the Go
 * plugin, arguments after the flags are not read; unlike it, they are named on stderr.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "cdi.h"
#include "cli.h"
#include "config.h"
#include "daemon.h"
#include "goflag.h"

#ifndef RDP_REVISION
#define RDP_REVISION "unknown"
#endif

static void shared_dp_usage(const char *argv0)
{
	/* Go's flag.PrintDefaults() layout: sorted, a one-letter bool on the flag's line. */
	fprintf(stderr,
		"Usage of %s:\n"
		"  -config-file string\n"
		"    \tthe config.json to serve (default \"%s\")\n"
		"  -use-cdi\n"
		"    \tname the devices through CDI: a spec per resource in %s\n"
		"  -v\tprint the version and exit\n"
		"  -version\n"
		"    \tprint the version and exit\n"
		"\n"
		"This is rdma-dp (rdma-dp serve) under k8s-rdma-shared-dev-plugin's name and flags;\n"
		"'rdma-dp serve --help' lists everything rdma-dp itself takes.\n",
		argv0, RDP_DEFAULT_CONFIG_FILE, RDP_DEFAULT_CDI_SPEC_DIR);
}

int cmd_shared_dp(int argc, char **argv)
{
	bool version = false, use_cdi = false;
	const char *config_file = RDP_DEFAULT_CONFIG_FILE;
	const struct rdp_goflag flags[] = {
		{"config-file", RDP_GOFLAG_STRING, &config_file},
		{"use-cdi", RDP_GOFLAG_BOOL, &use_cdi},
		{"v", RDP_GOFLAG_BOOL, &version},
		{"version", RDP_GOFLAG_BOOL, &version},
	};
	struct rdp_daemon_options o = {.registration = RDP_REGISTRATION_AUTO};
	const char *argv0 = argc > 0 && argv[0] ? argv[0] : "k8s-rdma-shared-dp";
	char err[512];
	int k;

	k = rdp_goflag_parse(flags, sizeof(flags) / sizeof(flags[0]), argc, argv, err,
			     sizeof(err));
	if (k == 0) {
		shared_dp_usage(argv0);
		return 0;
	}
	if (k < 0) {
		fprintf(stderr, "%s\n", err);
		shared_dp_usage(argv0);
		return 2;
	}
	if (version) {
		/* The Go plugin's "k8s-rdma-shared-dev-plugin version:V, commit:C, date:D" */
		printf("rdma-dp version:%s, commit:%s (as k8s-rdma-shared-dp)\n", RDP_VERSION,
		       RDP_REVISION);
		return 0;
	}
	if (k < argc)
		fprintf(stderr,
			"%s: ignoring %d argument(s) from '%s' on: k8s-rdma-shared-dp reads no "
			"argument after its flags\n",
			argv0, argc - k, argv[k]);
	o.config_file = config_file;
	o.use_cdi = use_cdi;
	/*
	 * No memlock hook in the specs: under the Go plugin's name (network-operator's DaemonSet)
	 * nothing installs /opt/rdma-dp/bin/rdma-dp on the host, and a spec naming a missing
	 * hook fails every container's start. `rdma-dp serve --use-cdi` has the hook.
	 */
	o.no_memlock_hook = true;
	return rdp_daemon_run(&o);
}
