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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "cli-common.h"
#include "cli.h"
#include "config.h"
#include "daemon.h"
#include "macro.h"
#include "status-probe.h"
#include "status.h"

static const char *const cmd = "health";

#define HEALTH_DEFAULT_TIMEOUT_MS 2000
#define HEALTH_MAX_TIMEOUT_MS (10 * 60 * 1000)

enum { OPT_REG = CLI_KEY_LONG, OPT_TIMEOUT };

static const struct cli_cmd health_cmd = {
	.name = "health",
	.about = "Check that a running 'rdma-dp serve' answers kubelet: every socket the daemon "
		 "says it serves (<root>/device-plugins/.rdma-dp/status.json, or the same under "
		 "plugins_registry) must answer GetDevicePluginOptions. The config on disk is not "
		 "read: an edit the daemon has not applied yet, or an invalid one it refused, "
		 "changes nothing here. No discovery: cheap enough for a liveness probe.\n",
	.epilog = "Exit status: 0 when every socket the daemon serves answers, 1 when one does not "
		  "or the daemon published no status (one line on stderr says why), 2 on a usage "
		  "error.\n",
};

/*
 * Probes every serving socket of st (status-probe.h). Returns 0 when all answer, 1 when one
 * does not, -ENOMEM. What to print goes to *out (allocated; stdout on 0, stderr on 1), so that
 * a caller may retry first.
 */
static int run_probes(const struct rdp_status *st, unsigned long timeout_ms, char **out)
{
	struct rdp_probe *probes = NULL;
	size_t n_bad = 0, n_serving = 0, first_bad = SIZE_MAX, outlen = 0;
	FILE *f = open_memstream(out, &outlen);
	int rc = 1, k;

	if (!f)
		return -ENOMEM;
	k = rdp_status_probe(st, timeout_ms, &probes);
	if (k == -ENOMEM) {
		fclose(f);
		return k;
	}
	if (k < 0) {
		fprintf(f, "rdma-dp %s: event loop: %s\n", cmd, strerror(-k));
		fclose(f);
		return 1;
	}
	for (size_t i = 0; i < st->n_resources; i++) {
		if (probes[i].state == RDP_PROBE_NOT_SERVING)
			continue;
		n_serving++;
		if (probes[i].state != RDP_PROBE_OK) {
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
			fprintf(f, "%s%s", first ? "" : ", ", st->resources[i].name);
			first = false;
		}
		fprintf(f, ")");
		if (n_serving < st->n_resources)
			fprintf(f, ", %zu not started yet", st->n_resources - n_serving);
		fprintf(f, "; pid %lld generation %llu\n", st->pid,
			(unsigned long long)st->generation);
		rc = 0;
	} else {
		const struct rdp_status_resource *r = &st->resources[first_bad];

		fprintf(f, "rdma-dp %s: %s: %s: %s", cmd, r->name, r->socket,
			probes[first_bad].reason);
		if (n_serving > 1)
			fprintf(f, " (%zu of %zu resources failing)", n_bad, n_serving);
		fprintf(f, " (daemon pid %lld generation %llu)\n", st->pid,
			(unsigned long long)st->generation);
	}
	rdp_free(probes);
	fclose(f);
	return rc;
}

int cmd_health(int argc, char **argv)
{
	const char *config_file = RDP_DEFAULT_CONFIG_FILE, *root = RDP_DEFAULT_KUBELET_ROOT;
	enum rdp_registration_mode mode = RDP_REGISTRATION_AUTO;
	unsigned long timeout_ms = HEALTH_DEFAULT_TIMEOUT_MS;
	struct rdp_status *st = NULL;
	char *dir = NULL, *out = NULL, err[512] = "";
	const struct cli_opt opts[] = {
		{"config-file", 'c', required_argument, "FILE", .str = &config_file,
		 .help = "accepted for compatibility, ignored"},
		CLI_OPT_KUBELET_ROOT(&root),
		{"registration", OPT_REG, required_argument, "MODE",
		 .help = "auto, kubelet-sock or plugins-registry: where the daemon's sockets and "
			 "status are (default auto: the newer of the two status files)"},
		{"timeout-ms", OPT_TIMEOUT, required_argument, "N",
		 .help = "give up after N ms (default " CLI_STR(HEALTH_DEFAULT_TIMEOUT_MS) ")"},
		{},
	};
	struct cli_parser p;
	int opt, k, rc;

	cli_parser_init(&p, &health_cmd, opts, argc, argv);
	while ((opt = cli_next(&p)) > 0) {
		switch (opt) {
		case OPT_REG:
			if (rdp_registration_mode_from_string(p.arg, &mode) < 0) {
				fprintf(stderr,
					"rdma-dp %s: --registration: unknown mode '%s' (expected "
					"auto, kubelet-sock or plugins-registry)\n",
					cmd, p.arg);
				return 2;
			}
			break;
		case OPT_TIMEOUT: {
			char *end;

			errno = 0;
			timeout_ms = strtoul(p.arg, &end, 10);
			if (errno || end == p.arg || *end || p.arg[0] == '-' || timeout_ms == 0 ||
			    timeout_ms > HEALTH_MAX_TIMEOUT_MS) {
				fprintf(stderr,
					"rdma-dp %s: --timeout-ms: '%s' is not a number of "
					"milliseconds from 1 to %d\n",
					cmd, p.arg, HEALTH_MAX_TIMEOUT_MS);
				return 2;
			}
			break;
		}
		}
	}
	if (opt < 0)
		return p.exit;
	if (!*root) {
		fprintf(stderr, "rdma-dp %s: --kubelet-root-dir: empty path\n", cmd);
		return 2;
	}

	(void)config_file; /* the config on disk is what the daemon has NOT applied yet */
	k = rdp_status_load(root, mode, &st, &dir, err, sizeof(err));
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

		if (rdp_status_load(root, mode, &again, &dir2, err, sizeof(err)) == 0 &&
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
