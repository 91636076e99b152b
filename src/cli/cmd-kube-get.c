/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp kube-get: a diagnostic. GETs one API-server path through the client the DRA driver
 * uses (kube-client.h: TLS, token, CA, timeouts) and prints the JSON. It proves the TLS path
 * from a pod or a node, and is what tests/integration/test_kube_client.py drives.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli-common.h"
#include "cli.h"
#include "kube-client.h"
#include "macro.h"

static const char *const cmd = "kube-get";

enum {
	OPT_TIMEOUT = CLI_KEY_LONG,
	OPT_REPEAT,
	OPT_INTERVAL,
};

static const struct cli_cmd kube_get_cmd = {
	.name = "kube-get",
	.operand = "PATH",
	.about = "A diagnostic: GET PATH (e.g. /api/v1/nodes/node-a) from the Kubernetes API "
		 "server with the client of the DRA driver, and print the JSON. In a pod, the "
		 "service account's token and CA and KUBERNETES_SERVICE_HOST/PORT are used; "
		 "outside one, give --api-server, --token-file and --ca-file.\n",
	.epilog = "Exit status: 0 when every GET answered 2xx, 1 otherwise (one line on stderr "
		  "says why), 2 on a usage error.\n",
};

static int parse_uint(const char *opt, const char *arg, unsigned long max, unsigned long *ret)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(arg, &end, 10);
	if (errno || end == arg || *end || arg[0] == '-' || v > max) {
		fprintf(stderr, "rdma-dp %s: invalid %s '%s'\n", cmd, opt, arg);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

static const char *reason(int status)
{
	switch (status) {
	case 401:
		return "Unauthorized: the API server refused the token";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 429:
		return "Too Many Requests";
	default:
		return status >= 500 ? "server error" : "";
	}
}

/* One GET; 0 on 2xx, 1 otherwise, said on stderr. */
static int get_once(struct rdp_kube_client *c, const char *path, bool verbose)
{
	json_t *doc = NULL;
	int status = 0, r;

	r = rdp_kube_get_json(c, path, NULL, &status, &doc);
	if (verbose && rdp_kube_client_tls_version(c)) {
		struct rdp_kube_client_stats st;

		rdp_kube_client_stats(c, &st);
		fprintf(stderr,
			"rdma-dp %s: %s, ALPN %s; %lu request(s), %lu connection(s), %lu token "
			"read(s), %lu 401(s)\n",
			cmd, rdp_kube_client_tls_version(c), strempty(rdp_kube_client_alpn(c)),
			st.requests, st.connects, st.token_reads, st.unauthorized);
	}
	if (r < 0) {
		const char *e = rdp_kube_client_last_error(c);

		fprintf(stderr, "rdma-dp %s: %s\n", cmd, *e ? e : strerror(-r));
		return 1;
	}
	if (status < 200 || status > 299) {
		const char *msg = rdp_kube_status_message(doc);
		const char *e = rdp_kube_client_last_error(c);

		fprintf(stderr, "rdma-dp %s: GET %s: %d %s%s%s%s%s\n", cmd, path, status,
			reason(status), msg ? ": " : "", msg ? msg : "", *e ? "; " : "", e);
		json_decref(doc);
		return 1;
	}
	if (cli_print_json(doc) < 0) {
		fprintf(stderr, "rdma-dp %s: cannot write the output\n", cmd);
		return 1;
	}
	fflush(stdout);
	return 0;
}

int cmd_kube_get(int argc, char **argv)
{
	const char *server = NULL, *token = NULL, *ca = NULL, *name = NULL, *path;
	unsigned long timeout_ms = RDP_KUBE_REQUEST_TIMEOUT_MS, repeat = 1, interval_ms = 1000;
	struct rdp_kube_config cfg = {0};
	struct rdp_kube_client *c = NULL;
	_cleanup_free_ char *err = NULL;
	bool verbose = false;
	const struct cli_opt opts[] = {
		{"api-server", 0, required_argument, "URL", .str = &server,
		 .help = "https://IP:PORT or https://[IPv6]:PORT (no DNS)"},
		{"token-file", 0, required_argument, "FILE", .str = &token,
		 .help = "the bearer token (re-read when it changes)"},
		{"ca-file", 0, required_argument, "FILE", .str = &ca,
		 .help = "the CA bundle (PEM) the server's certificate must chain to"},
		{"api-server-name", 0, required_argument, "NAME", .str = &name,
		 .help = "the name the certificate must carry (default "
			 RDP_KUBE_DEFAULT_SERVER_NAME "; an IP SAN cannot be checked)"},
		{"timeout-ms", OPT_TIMEOUT, required_argument, "N",
		 .help = "bound of one request, connect included (default "
			 CLI_STR(RDP_KUBE_REQUEST_TIMEOUT_MS) ")"},
		{"repeat", OPT_REPEAT, required_argument, "N",
		 .help = "GET N times on one client (default 1)"},
		{"interval-ms", OPT_INTERVAL, required_argument, "N",
		 .help = "pause between the repeats (default 1000)"},
		{"verbose", 'v', no_argument, NULL, .flag = &verbose,
		 .help = "say the TLS version, ALPN and counts on stderr"},
		{},
	};
	struct cli_parser p;
	int opt, r, rc = 0;

	cli_parser_init(&p, &kube_get_cmd, opts, argc, argv);
	while ((opt = cli_next(&p)) > 0) {
		switch (opt) {
		case OPT_TIMEOUT:
			if (parse_uint("--timeout-ms", p.arg, 600000, &timeout_ms) < 0 ||
			    timeout_ms == 0)
				return 2;
			break;
		case OPT_REPEAT:
			if (parse_uint("--repeat", p.arg, 1000, &repeat) < 0 || repeat == 0)
				return 2;
			break;
		case OPT_INTERVAL:
			if (parse_uint("--interval-ms", p.arg, 600000, &interval_ms) < 0)
				return 2;
			break;
		}
	}
	if (opt < 0)
		return p.exit;
	path = p.operand;
	if (server)
		r = rdp_kube_config_explicit(server, token, ca, name, &cfg, &err);
	else if (token || ca || name) {
		fprintf(stderr,
			"rdma-dp %s: --token-file, --ca-file and --api-server-name go with "
			"--api-server\n",
			cmd);
		return 2;
	} else
		r = rdp_kube_config_in_cluster(NULL, &cfg, &err);
	if (r < 0) {
		fprintf(stderr, "rdma-dp %s: %s\n", cmd, err ? err : strerror(-r));
		return r == -ENOMEM ? 1 : 2;
	}
	cfg.request_timeout_ms = (unsigned)timeout_ms;
	cfg.connect_timeout_ms = timeout_ms < RDP_KUBE_CONNECT_TIMEOUT_MS
					 ? (unsigned)timeout_ms
					 : RDP_KUBE_CONNECT_TIMEOUT_MS;
	r = rdp_kube_client_new(&cfg, &c, &err);
	rdp_kube_config_done(&cfg);
	if (r < 0) {
		fprintf(stderr, "rdma-dp %s: %s\n", cmd, err ? err : strerror(-r));
		return 1;
	}
	for (unsigned long i = 0; i < repeat; i++) {
		if (i > 0 && interval_ms) {
			struct timespec ts = {.tv_sec = (time_t)(interval_ms / 1000),
					      .tv_nsec = (long)(interval_ms % 1000) * 1000000};

			nanosleep(&ts, NULL);
		}
		if (get_once(c, path, verbose))
			rc = 1;
	}
	rdp_kube_client_free(c);
	return rc;
}
