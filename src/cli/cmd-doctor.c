/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp doctor: every cause the troubleshooting sections hunt for by hand, named by one
 * command (doctor.h). On the node it reads the same roots as the other commands (discovery
 * with every GID slot, as `discover`; the PCIe topology, as `topo`; the config and its pools,
 * as `check-config`; the daemon's status and sockets, as `health`) and runs the node groups
 * (stack, plugin, ports, pcie, placement, gpudirect, congestion); with --pod (inside the
 * workload container) or --pid N (a process of the workload seen from a debug container
 * sharing its process namespace) it runs the pod group alone. The report is ordered so that
 * the first `fail` is the first thing to fix; -o json carries the same results.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli-common.h"
#include "cli.h"
#include "config.h"
#include "daemon.h"
#include "diag.h"
#include "discovery.h"
#include "doctor.h"
#include "macro.h"
#include "pool.h"
#include "sysfs.h"
#include "topology.h"

static const char *const cmd = "doctor";

#define DOCTOR_DEFAULT_PROC_ROOT "/proc"
#define DOCTOR_DEFAULT_INTERVAL_MS 1000
#define DOCTOR_MAX_INTERVAL_MS 60000

enum {
	OPT_PROC = CLI_KEY_LONG,
	OPT_INTERVAL,
	OPT_PID,
	OPT_GROUP,
};

static const struct cli_cmd doctor_cmd = {
	.name = "doctor",
	.about = "Check what stands between a pod and NCCL over RDMA, one line per check: its ID, "
		 "ok/skip/warn/fail, the finding (device and value), and for warn and fail the "
		 "symptom it explains (in NCCL's words) and the fix. Grouped in the order fixes "
		 "follow (stack, plugin, ports, pcie, placement, gpudirect, congestion), failures "
		 "first, so the first fail is the first thing to fix. A check that cannot run says "
		 "skip and why.\n\nOn the node (default): the node groups. Inside a workload "
		 "container (--pod), or from a debug container sharing its process namespace "
		 "(--pid N): the pod group (devices, memlock, /dev/shm, NCCL variables) alone.\n",
	.epilog = "Exit status: 0 when no check fails, 1 when one does (or the node cannot be "
		  "read), 2 on a usage error.\n",
};

static int parse_uint(const char *opt, const char *arg, unsigned long min, unsigned long max,
		      unsigned long *ret)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || arg[0] == '+' || v < min || v > max) {
		fprintf(stderr, "rdma-dp %s: %s: '%s' is not a number from %lu to %lu\n", cmd, opt,
			arg, min, max);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

typedef int (*group_fn)(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r);

/* The node groups, in the order they run (a later one reads the earlier ones' results). */
static const struct {
	enum rdp_check_group group;
	group_fn fn;
} node_groups[] = {
	{RDP_GROUP_STACK, rdp_doctor_stack},		{RDP_GROUP_PLUGIN, rdp_doctor_plugin},
	{RDP_GROUP_PORTS, rdp_doctor_ports},		{RDP_GROUP_PCIE, rdp_doctor_pcie},
	{RDP_GROUP_PLACEMENT, rdp_doctor_placement}, {RDP_GROUP_GPUDIRECT, rdp_doctor_gpudirect},
	{RDP_GROUP_CONGESTION, rdp_doctor_congestion},
};

/* "ports,pcie" -> a bit per group. -EINVAL (said) for an unknown or empty name. */
static int parse_groups(const char *arg, unsigned int *ret)
{
	unsigned int mask = 0;
	const char *p = arg;

	for (;;) {
		size_t n = strcspn(p, ",");
		int g;

		for (g = 0; g < _RDP_GROUP_MAX; g++)
			if (n && strlen(rdp_check_group_name(g)) == n &&
			    strncmp(p, rdp_check_group_name(g), n) == 0)
				break;
		if (g == _RDP_GROUP_MAX) {
			fprintf(stderr, "rdma-dp %s: --group: '%.*s' is not a group (stack, plugin, "
					"ports, pcie, placement, gpudirect, congestion, pod)\n",
				cmd, (int)n, p);
			return -EINVAL;
		}
		mask |= 1u << g;
		if (!p[n])
			break;
		p += n + 1;
	}
	*ret = mask;
	return 0;
}

int cmd_doctor(int argc, char **argv)
{
	const char *config_file = NULL, *sysfs = RDP_DEFAULT_SYSFS_ROOT;
	const char *dev = RDP_DEFAULT_DEV_ROOT, *proc = DOCTOR_DEFAULT_PROC_ROOT;
	const char *kubelet = RDP_DEFAULT_KUBELET_ROOT;
	bool proc_given = false, pod = false;
	unsigned long interval = DOCTOR_DEFAULT_INTERVAL_MS, pid = 0;
	unsigned int groups = 0; /* 0: all of the mode's */
	enum cli_output output = CLI_OUTPUT_TABLE;
	struct rdp_doctor_report report = {};
	struct rdp_doctor_ctx ctx = {.sys_fd = -1, .dev_fd = -1, .proc_fd = -1};
	_cleanup_close_ int sys_fd = -1, dev_fd = -1, proc_fd = -1;
	struct rdp_diags diags = {};
	struct rdp_config *config = NULL;
	struct rdp_pools *pools = NULL;
	struct rdp_host *h = NULL;
	struct rdp_topo *topo = NULL;
	const struct cli_opt opts[] = {
		{"config-file", 'c', required_argument, "FILE", .str = &config_file,
		 .help = "the plugin's config (default " RDP_DEFAULT_CONFIG_FILE ", read when it "
			 "exists)"},
		CLI_OPT_SYSFS_ROOT(&sysfs),
		CLI_OPT_DEV_ROOT(&dev),
		{"proc-root", OPT_PROC, required_argument, "DIR",
		 .help = "read procfs below DIR (default " DOCTOR_DEFAULT_PROC_ROOT ")"},
		{"kubelet-root-dir", 0, required_argument, "DIR", .str = &kubelet,
		 .help = "kubelet's root directory, for the daemon's status and sockets (default "
			 RDP_DEFAULT_KUBELET_ROOT ")"},
		{"interval", OPT_INTERVAL, required_argument, "MS",
		 .help = "time between the two samples of the loss counters (default "
			 CLI_STR(DOCTOR_DEFAULT_INTERVAL_MS) "; 0: one sample, the counters skip)"},
		{"pod", 0, no_argument, NULL, .flag = &pod,
		 .help = "check this container (run inside the workload pod)"},
		{"pid", OPT_PID, required_argument, "N",
		 .help = "check the container of process N (under the proc root)"},
		{"group", OPT_GROUP, required_argument, "LIST",
		 .help = "only these groups, comma-separated (a later group reads the earlier "
			 "ones' results: without them it cannot tell a cause from its "
			 "consequence)"},
		{"output", 'o', required_argument, "FMT", .help = "text (default) or json"},
		{},
	};
	struct cli_parser p;
	int opt, k, ret = 1;

	cli_parser_init(&p, &doctor_cmd, opts, argc, argv);
	while ((opt = cli_next(&p)) > 0) {
		switch (opt) {
		case OPT_PROC:
			proc = p.arg;
			proc_given = true;
			break;
		case OPT_INTERVAL:
			if (parse_uint("--interval", p.arg, 0, DOCTOR_MAX_INTERVAL_MS, &interval) <
			    0)
				return 2;
			break;
		case OPT_PID:
			if (parse_uint("--pid", p.arg, 1, 0x7fffffff, &pid) < 0)
				return 2;
			break;
		case OPT_GROUP:
			if (parse_groups(p.arg, &groups) < 0)
				return 2;
			break;
		case 'o':
			if (strcmp(p.arg, "text") == 0)
				output = CLI_OUTPUT_TABLE;
			else if (strcmp(p.arg, "table") == 0 ||
				 cli_parse_output(cmd, p.arg, &output) < 0) {
				if (strcmp(p.arg, "table") == 0)
					fprintf(stderr,
						"rdma-dp %s: invalid output format 'table' (expected "
						"'text' or 'json')\n",
						cmd);
				return 2;
			}
			break;
		}
	}
	if (opt < 0)
		return p.exit;
	if (pod && pid) {
		fprintf(stderr, "rdma-dp %s: --pod and --pid exclude each other (see 'rdma-dp %s "
				"--help')\n",
			cmd, cmd);
		return 2;
	}
	if (groups && ((pod || pid) ? groups != 1u << RDP_GROUP_POD
				    : (groups & (1u << RDP_GROUP_POD)) != 0)) {
		fprintf(stderr, "rdma-dp %s: --group: the pod group runs alone, with --pod or "
				"--pid; the others on the node\n", cmd);
		return 2;
	}
	if (!*kubelet || (config_file && !*config_file)) {
		fprintf(stderr, "rdma-dp %s: %s: empty path\n", cmd,
			!*kubelet ? "--kubelet-root-dir" : "--config-file");
		return 2;
	}

	if (cli_open_roots(cmd, sysfs, dev, &sys_fd, &dev_fd) < 0)
		return 1;
	k = *proc ? rdp_sysfs_open_root(proc, &proc_fd) : -EINVAL;
	if (k < 0 && (proc_given || pod || pid)) {
		fprintf(stderr, "rdma-dp %s: cannot open proc root '%s': %s\n", cmd, proc,
			*proc ? strerror(-k) : "empty path");
		return 1;
	}

	k = rdp_discover_at(sys_fd, dev_fd, &h);
	if (k < 0) {
		fprintf(stderr, "rdma-dp %s: cannot read the devices under '%s' and '%s': %s\n", cmd,
			sysfs, dev, strerror(-k));
		goto out;
	}
	k = rdp_topo_read_at(sys_fd, h, &topo);
	if (k == -ENOMEM)
		goto oom;
	if (k < 0)
		topo = NULL; /* the groups that need it skip */

	/* The config: when given, or when the default file exists (never in a pod). */
	if (!pod && !pid) {
		struct stat st;

		if (!config_file && stat(RDP_DEFAULT_CONFIG_FILE, &st) == 0)
			config_file = RDP_DEFAULT_CONFIG_FILE;
		if (config_file) {
			k = rdp_config_load_file(config_file, &config, &diags);
			if (k == -ENOMEM)
				goto oom;
			if (config) {
				k = rdp_pools_build(config, h, &pools, &diags);
				if (k < 0)
					goto oom;
			}
		}
	}

	ctx = (struct rdp_doctor_ctx){
		.sys_fd = sys_fd,
		.dev_fd = dev_fd,
		.proc_fd = proc_fd,
		.sysfs_root = sysfs,
		.dev_root = dev,
		.proc_root = proc_fd >= 0 ? proc : NULL,
		.kubelet_root = kubelet,
		.host = h,
		.topo = topo,
		.config = config,
		.config_path = config_file,
		.config_diags = config_file ? &diags : NULL,
		.pools = pools,
		.interval_ms = (unsigned int)interval,
		.pid = (pid_t)pid,
	};
	if (pod || pid) {
		k = rdp_doctor_pod(&ctx, &report);
	} else {
		k = 0;
		for (size_t i = 0; i < ARRAY_SIZE(node_groups) && k >= 0; i++)
			if (!groups || (groups & (1u << node_groups[i].group)))
				k = node_groups[i].fn(&ctx, &report);
	}
	if (k == -ENOMEM)
		goto oom;
	if (k < 0) {
		fprintf(stderr, "rdma-dp %s: %s\n", cmd, strerror(-k));
		goto out;
	}
	rdp_doctor_order(&report);
	k = output == CLI_OUTPUT_JSON ? rdp_doctor_render_json(&report, stdout)
				      : rdp_doctor_render_text(&report, stdout);
	if (k == -ENOMEM)
		goto oom;
	if (k < 0 || fflush(stdout) != 0) {
		fprintf(stderr, "rdma-dp %s: writing output: %s\n", cmd, strerror(errno));
		goto out;
	}
	ret = rdp_doctor_exit_status(&report);
	goto out;
oom:
	fprintf(stderr, "rdma-dp %s: out of memory\n", cmd);
out:
	rdp_doctor_report_done(&report);
	rdp_topo_free(topo);
	rdp_pools_free(pools);
	rdp_config_free(config);
	rdp_diags_done(&diags);
	rdp_host_free(h);
	return ret;
}
