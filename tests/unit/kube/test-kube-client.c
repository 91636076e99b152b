/* SPDX-License-Identifier: MIT */
/*
 * kube-client, kube-http, kube-tls: the configuration (environment, URL, bad values), the
 * HTTP response parser on its own (chunks, limits, Retry-After, keep-alive), and the whole
 * client against an in-process mbedTLS server on 127.0.0.1 whose certificate the openssl CLI
 * makes at test time (skipped, said so, without openssl): keep-alive and reconnects, token
 * rotation noticed by stat and after a 401, a body over the limit, a chunked body, a silent
 * server, retries with Retry-After, the stop fd.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/pk.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include "alloc.h"
#include "kube-client.h"
#include "kube-http.h"
#include "kube-tls.h"
#include "test.h"

static char tmpdir[] = "/tmp/test-kube-client.XXXXXX";

static void write_file(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

/* Replaces a file as kubelet's projected volumes do: a new inode renamed over the old. */
static void rotate_file(const char *name, const char *text)
{
	char from[256], to[256];

	write_file("rotate.tmp", text);
	snprintf(from, sizeof(from), "%s/rotate.tmp", tmpdir);
	snprintf(to, sizeof(to), "%s/%s", tmpdir, name);
	if (rename(from, to) < 0)
		perror("rename");
}

static char *path_of(const char *name)
{
	static char buf[4][256];
	static int i;

	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", tmpdir, name);
	return buf[i];
}

/* ---- configuration ---- */

static void test_config_in_cluster(void)
{
	struct rdp_kube_config cfg = {0};
	char *err = NULL;

	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	EXPECT_EQ(rdp_kube_config_in_cluster(NULL, &cfg, &err), -ENOENT);
	EXPECT_CONTAINS(err, "not running in a pod");

	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "443", 1);
	EXPECT_EQ(rdp_kube_config_in_cluster("/root-x", &cfg, &err), 0);
	EXPECT_STREQ(cfg.host, "10.96.0.1:443");
	EXPECT_STREQ(cfg.server_name, RDP_KUBE_DEFAULT_SERVER_NAME);
	EXPECT_STREQ(cfg.token_file, "/root-x/var/run/secrets/kubernetes.io/serviceaccount/token");
	EXPECT_STREQ(cfg.ca_file, "/root-x/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
	EXPECT_EQ(cfg.addr.ss_family, AF_INET);
	EXPECT_EQ(ntohs(((struct sockaddr_in *)&cfg.addr)->sin_port), 443);
	rdp_kube_config_done(&cfg);

	setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
	EXPECT_EQ(rdp_kube_config_in_cluster(NULL, &cfg, &err), 0);
	EXPECT_STREQ(cfg.host, "[fd00:10:96::1]:6443");
	EXPECT_EQ(cfg.addr.ss_family, AF_INET6);
	EXPECT_STREQ(cfg.token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token");
	rdp_kube_config_done(&cfg);

	setenv("KUBERNETES_SERVICE_HOST", "kubernetes.default.svc", 1);
	EXPECT_EQ(rdp_kube_config_in_cluster(NULL, &cfg, &err), -EINVAL);
	EXPECT_CONTAINS(err, "is not an IP address");
	setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
	static const char *const bad_ports[] = {"0", "65536", "70000", "-1", "44x", " 443", ""};
	for (size_t i = 0; i < sizeof(bad_ports) / sizeof(bad_ports[0]); i++) {
		setenv("KUBERNETES_SERVICE_PORT", bad_ports[i], 1);
		EXPECT_TRUE(rdp_kube_config_in_cluster(NULL, &cfg, &err) < 0);
	}
	setenv("KUBERNETES_SERVICE_PORT", "65535", 1);
	EXPECT_EQ(rdp_kube_config_in_cluster(NULL, &cfg, &err), 0);
	rdp_kube_config_done(&cfg);
	unsetenv("KUBERNETES_SERVICE_HOST");
	unsetenv("KUBERNETES_SERVICE_PORT");
	free(err);
}

static void test_config_explicit(void)
{
	static const struct {
		const char *url, *host;
	} good[] = {
		{"https://127.0.0.1:6443", "127.0.0.1:6443"},
		{"https://127.0.0.1:6443/", "127.0.0.1:6443"},
		{"https://10.0.0.1", "10.0.0.1:443"},
		{"https://[::1]:8443", "[::1]:8443"},
		{"https://[fd00::1]", "[fd00::1]:443"},
	};
	static const char *const bad[] = {
		"http://127.0.0.1:6443",
		"https://",
		"https://api.example.com:6443",
		"https://127.0.0.1:0",
		"https://127.0.0.1:99999",
		"https://127.0.0.1:6443/api",
		"https://[::1:8443",
		"https://127.0.0.1:",
		"127.0.0.1:6443",
		"https://1.2.3.4.5",
	};
	struct rdp_kube_config cfg = {0};
	char *err = NULL;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		EXPECT_EQ(rdp_kube_config_explicit(good[i].url, "t", "c", NULL, &cfg, &err), 0);
		EXPECT_STREQ(cfg.host, good[i].host);
		rdp_kube_config_done(&cfg);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		EXPECT_EQ(rdp_kube_config_explicit(bad[i], "t", "c", NULL, &cfg, &err), -EINVAL);
		EXPECT_TRUE(cfg.host == NULL);
	}
	EXPECT_EQ(rdp_kube_config_explicit("https://127.0.0.1", NULL, "c", NULL, &cfg, &err),
		  -EINVAL);
	EXPECT_CONTAINS(err, "a token file and a CA file");
	EXPECT_EQ(
		rdp_kube_config_explicit("https://127.0.0.1", "t", "c", "api.internal", &cfg, &err),
		0);
	EXPECT_STREQ(cfg.server_name, "api.internal");
	rdp_kube_config_done(&cfg);
	free(err);
}

/* ---- the HTTP parser on its own ---- */

/* Feeds text in pieces of step bytes (0: all at once), then EOF when eof. */
static int parse(const char *text, size_t step, size_t max_body, bool eof,
		 struct rdp_kube_response *resp, bool *reusable)
{
	struct rdp_kube_http_parser *p;
	size_t len = strlen(text), off = 0;
	int r = 0;

	*resp = (struct rdp_kube_response){.retry_after = -1};
	if (rdp_kube_http_parser_new(max_body, &p) < 0)
		return -ENOMEM;
	while (off < len && r == 0) {
		size_t n = step && step < len - off ? step : len - off;

		r = rdp_kube_http_parser_feed(p, text + off, n);
		off += n;
	}
	if (r == 0 && eof)
		r = rdp_kube_http_parser_feed(p, NULL, 0);
	if (r == 1) {
		*reusable = rdp_kube_http_parser_reusable(p);
		r = rdp_kube_http_parser_take(p, resp);
		if (r == 0)
			r = 1;
	}
	rdp_kube_http_parser_free(p);
	return r;
}

static void test_parser(void)
{
	struct rdp_kube_response resp;
	bool reusable = false;
	char *big;

	EXPECT_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", 0, 100, false, &resp,
			&reusable),
		  1);
	EXPECT_EQ(resp.status, 200);
	EXPECT_STREQ(resp.body, "{}");
	EXPECT_TRUE(reusable);
	EXPECT_EQ(resp.retry_after, -1);
	rdp_kube_response_done(&resp);

	/* chunked, one byte at a time, Retry-After in a split header */
	EXPECT_EQ(parse("HTTP/1.1 503 Service Unavailable\r\nRETRY-after:  7 \r\n"
			"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4;x=y\r\ndefg\r\n0\r\n\r\n",
			1, 100, false, &resp, &reusable),
		  1);
	EXPECT_EQ(resp.status, 503);
	EXPECT_STREQ(resp.body, "abcdefg");
	EXPECT_EQ(resp.body_len, 7);
	EXPECT_EQ(resp.retry_after, 7);
	EXPECT_TRUE(reusable);
	rdp_kube_response_done(&resp);

	/* an HTTP-date or a huge Retry-After */
	EXPECT_EQ(parse("HTTP/1.1 429 x\r\nRetry-After: Wed, 21 Oct 2015 07:28:00 GMT\r\n"
			"Content-Length: 0\r\n\r\n",
			0, 100, false, &resp, &reusable),
		  1);
	EXPECT_EQ(resp.retry_after, -1);
	EXPECT_STREQ(resp.body, "");
	rdp_kube_response_done(&resp);
	EXPECT_EQ(parse("HTTP/1.1 429 x\r\nRetry-After: 99999999999999999999\r\n"
			"Content-Length: 0\r\n\r\n",
			0, 100, false, &resp, &reusable),
		  1);
	EXPECT_EQ(resp.retry_after, RDP_KUBE_RETRY_AFTER_MAX);
	rdp_kube_response_done(&resp);

	/* Connection: close, HTTP/1.0, a body read until the close: not reusable */
	EXPECT_EQ(parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx", 0,
			100, false, &resp, &reusable),
		  1);
	EXPECT_TRUE(!reusable);
	rdp_kube_response_done(&resp);
	EXPECT_EQ(parse("HTTP/1.1 200 OK\r\n\r\nuntil the end", 3, 100, true, &resp, &reusable), 1);
	EXPECT_STREQ(resp.body, "until the end");
	EXPECT_TRUE(!reusable);
	rdp_kube_response_done(&resp);
	/* bytes after the response: nobody asked for them */
	EXPECT_EQ(parse("HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\n", 0, 100, false, &resp,
			&reusable),
		  1);
	EXPECT_TRUE(!reusable);
	rdp_kube_response_done(&resp);

	/* limits: Content-Length over, chunks over, headers over */
	EXPECT_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n", 0, 100, false, &resp,
			&reusable),
		  -E2BIG);
	EXPECT_EQ(
		parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		      "40\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n"
		      "40\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n",
		      5, 100, false, &resp, &reusable),
		-E2BIG);
	big = malloc(2 * RDP_KUBE_HTTP_HEADERS_MAX);
	strcpy(big, "HTTP/1.1 200 OK\r\n");
	for (int i = 0; strlen(big) < RDP_KUBE_HTTP_HEADERS_MAX * 5 / 4; i++)
		sprintf(big + strlen(big), "X-%d: %0100d\r\n", i, 0);
	EXPECT_EQ(parse(big, 1000, 100, false, &resp, &reusable), -E2BIG);
	free(big);

	/* not HTTP, truncated, 1xx */
	EXPECT_EQ(parse("SSH-2.0-OpenSSH_9.2\r\n", 0, 100, false, &resp, &reusable), -EPROTO);
	EXPECT_EQ(parse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0, 100, true, &resp,
			&reusable),
		  -EPROTO);
	EXPECT_EQ(parse("HTTP/1.1 100 Continue\r\n\r\n", 0, 100, false, &resp, &reusable), -EPROTO);
	EXPECT_EQ(parse("", 0, 100, true, &resp, &reusable), -EPROTO);
}

static void test_render(void)
{
	char *s = NULL;
	size_t len = 0;

	EXPECT_EQ(rdp_kube_http_render(RDP_KUBE_GET, "10.96.0.1:443", "/api/v1/nodes/a", "tok",
				       NULL, &s, &len),
		  0);
	EXPECT_TRUE(strncmp(s, "GET /api/v1/nodes/a HTTP/1.1\r\nHost: 10.96.0.1:443\r\n", 49) == 0);
	EXPECT_CONTAINS(s, "\r\nAuthorization: Bearer tok\r\n");
	EXPECT_CONTAINS(s, "\r\nAccept: application/json\r\n");
	EXPECT_CONTAINS(s, "\r\nUser-Agent: rdma-dp/");
	EXPECT_TRUE(strstr(s, "Content-Length") == NULL);
	EXPECT_EQ(len, strlen(s));
	rdp_free(s);
	EXPECT_EQ(rdp_kube_http_render(RDP_KUBE_PATCH, "h", "/x", "t", "{\"a\":1}", &s, &len), 0);
	EXPECT_CONTAINS(s, "PATCH /x HTTP/1.1\r\n");
	EXPECT_CONTAINS(s, "Content-Type: application/merge-patch+json\r\nContent-Length: 7\r\n");
	EXPECT_TRUE(len > 7 && strcmp(s + len - 7, "{\"a\":1}") == 0);
	rdp_free(s);
	EXPECT_EQ(rdp_kube_http_render(RDP_KUBE_POST, "h", "/x", "t", "{}", &s, &len), 0);
	EXPECT_CONTAINS(s, "Content-Type: application/json\r\nContent-Length: 2\r\n");
	rdp_free(s);
	EXPECT_EQ(rdp_kube_http_render(RDP_KUBE_APPLY, "h", "/x?fieldManager=d", "t", "{}", &s, &len),
		  0);
	EXPECT_CONTAINS(s, "PATCH /x?fieldManager=d HTTP/1.1\r\n");
	EXPECT_CONTAINS(s, "Content-Type: application/apply-patch+yaml\r\nContent-Length: 2\r\n");
	rdp_free(s);
	EXPECT_EQ(rdp_kube_http_render(RDP_KUBE_GET, "h", "/x\r\nEvil: 1", "t", NULL, &s, &len),
		  -EINVAL);
	EXPECT_EQ(rdp_kube_http_render(RDP_KUBE_GET, "h", "/x y", "t", NULL, &s, &len), -EINVAL);
	EXPECT_EQ(rdp_kube_http_render(RDP_KUBE_GET, "h", "x", "t", NULL, &s, &len), -EINVAL);
	EXPECT_EQ(rdp_kube_http_render(RDP_KUBE_GET, "h", "/x", "t\nEvil: 1", NULL, &s, &len),
		  -EINVAL);
}

/* ---- an in-process TLS server ---- */

struct step {
	const char *response; /* raw bytes; NULL: never answer (until the client goes) */
	bool close_after;
	const char *rotate_to; /* token file content written before answering */
};

struct server {
	int lfd, port;
	pthread_t thread;
	const struct step *steps;
	size_t n_steps, next;
	char tokens[16][64]; /* the bearer token of each request */
	size_t n_requests, n_conns;
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
	mbedtls_x509_crt cert;
	mbedtls_pk_context key;
	mbedtls_ssl_config conf;
};

static const char *server_alpn[] = {"h2", "http/1.1", NULL};

static int server_init(struct server *s)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);

	memset(s, 0, sizeof(*s));
	mbedtls_entropy_init(&s->entropy);
	mbedtls_ctr_drbg_init(&s->drbg);
	mbedtls_x509_crt_init(&s->cert);
	mbedtls_pk_init(&s->key);
	mbedtls_ssl_config_init(&s->conf);
	if (mbedtls_ctr_drbg_seed(&s->drbg, mbedtls_entropy_func, &s->entropy, NULL, 0) ||
	    mbedtls_x509_crt_parse_file(&s->cert, path_of("server.crt")) ||
	    mbedtls_pk_parse_keyfile(&s->key, path_of("server.key"), NULL) ||
	    mbedtls_ssl_config_defaults(&s->conf, MBEDTLS_SSL_IS_SERVER,
					MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT) ||
	    mbedtls_ssl_conf_own_cert(&s->conf, &s->cert, &s->key) ||
	    mbedtls_ssl_conf_alpn_protocols(&s->conf, server_alpn))
		return -1;
	mbedtls_ssl_conf_rng(&s->conf, mbedtls_ctr_drbg_random, &s->drbg);
	s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(s->lfd, 8) < 0 || getsockname(s->lfd, (struct sockaddr *)&a, &alen) < 0)
		return -1;
	s->port = ntohs(a.sin_port);
	return 0;
}

/* Reads one request's head (GETs only here); false when the client went away. */
static bool read_request(struct server *s, mbedtls_ssl_context *ssl)
{
	char buf[4096];
	size_t len = 0;
	const char *auth;

	while (!memmem(buf, len, "\r\n\r\n", 4)) {
		int n;

		if (len == sizeof(buf))
			return false;
		n = mbedtls_ssl_read(ssl, (unsigned char *)buf + len, sizeof(buf) - len);
		if (n <= 0)
			return false;
		len += (size_t)n;
	}
	buf[len < sizeof(buf) ? len : sizeof(buf) - 1] = '\0';
	auth = strstr(buf, "Authorization: Bearer ");
	if (s->n_requests < 16) {
		s->tokens[s->n_requests][0] = '\0';
		if (auth)
			sscanf(auth + 22, "%63[^\r]", s->tokens[s->n_requests]);
	}
	s->n_requests++;
	return true;
}

static void *server_run(void *arg)
{
	struct server *s = arg;

	for (;;) {
		mbedtls_net_context net = {.fd = accept(s->lfd, NULL, NULL)};
		mbedtls_ssl_context ssl;

		if (net.fd < 0)
			return NULL;
		s->n_conns++;
		mbedtls_ssl_init(&ssl);
		mbedtls_ssl_setup(&ssl, &s->conf);
		mbedtls_ssl_set_bio(&ssl, &net, mbedtls_net_send, mbedtls_net_recv, NULL);
		if (mbedtls_ssl_handshake(&ssl) == 0) {
			while (s->next < s->n_steps && read_request(s, &ssl)) {
				const struct step *st = &s->steps[s->next++];

				if (st->rotate_to)
					rotate_file("token", st->rotate_to);
				if (!st->response) {
					char b[64];

					while (mbedtls_ssl_read(&ssl, (unsigned char *)b,
								sizeof(b)) > 0)
						;
					break;
				}
				mbedtls_ssl_write(&ssl, (const unsigned char *)st->response,
						  strlen(st->response));
				if (st->close_after)
					break;
			}
			mbedtls_ssl_close_notify(&ssl);
		}
		mbedtls_ssl_free(&ssl);
		mbedtls_net_free(&net);
	}
}

static void server_start(struct server *s, const struct step *steps, size_t n)
{
	s->steps = steps;
	s->n_steps = n;
	s->next = s->n_requests = s->n_conns = 0;
	pthread_create(&s->thread, NULL, server_run, s);
}

static void server_stop(struct server *s)
{
	shutdown(s->lfd, SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->lfd);
	mbedtls_ssl_config_free(&s->conf);
	mbedtls_pk_free(&s->key);
	mbedtls_x509_crt_free(&s->cert);
	mbedtls_ctr_drbg_free(&s->drbg);
	mbedtls_entropy_free(&s->entropy);
}

#define OK_NODE                                                                                    \
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 42\r\n\r\n"          \
	"{\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"}}   "
#define UNAUTHORIZED                                                                               \
	"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nContent-Length: "          \
	"42\r\n\r\n"                                                                               \
	"{\"kind\":\"Status\",\"message\":\"Unauthorized\"}"

static struct rdp_kube_client *new_client(struct server *s, unsigned timeout_ms, size_t max_body)
{
	struct rdp_kube_config cfg = {0};
	struct rdp_kube_client *c = NULL;
	char url[64], *err = NULL;

	snprintf(url, sizeof(url), "https://127.0.0.1:%d", s->port);
	if (rdp_kube_config_explicit(url, path_of("token"), path_of("ca-copy.crt"), NULL, &cfg,
				     &err) < 0)
		return NULL;
	cfg.request_timeout_ms = timeout_ms;
	cfg.max_body = max_body;
	if (rdp_kube_client_new(&cfg, &c, &err) < 0)
		fprintf(stderr, "client: %s\n", err ? err : "?");
	rdp_kube_config_done(&cfg);
	rdp_free(err);
	return c;
}

static void test_tls_get_keepalive_rotation(void)
{
	static const struct step steps[] = {
		{.response = OK_NODE},
		{.response = OK_NODE, .close_after = true},
		{.response = OK_NODE},
		{.response = OK_NODE},
	};
	struct rdp_kube_client_stats st;
	struct rdp_kube_client *c;
	struct rdp_kube_response resp;
	struct server s;
	json_t *doc = NULL;
	int status = 0;

	write_file("token", "token-one\n");
	if (server_init(&s) < 0) {
		test_failed++;
		fprintf(stderr, "server_init failed\n");
		return;
	}
	server_start(&s, steps, sizeof(steps) / sizeof(steps[0]));
	c = new_client(&s, 5000, 0);
	EXPECT_TRUE(c != NULL);
	if (!c)
		goto out;
	EXPECT_EQ(rdp_kube_get_json(c, "/api/v1/nodes/n", NULL, &status, &doc), 0);
	EXPECT_EQ(status, 200);
	EXPECT_STREQ(json_string_value(json_object_get(json_object_get(doc, "metadata"), "name")),
		     "n");
	json_decref(doc);
	EXPECT_STREQ(rdp_kube_client_tls_version(c), "TLSv1.2");
	EXPECT_STREQ(rdp_kube_client_alpn(c), "http/1.1");
	/* the same connection; the server closes it after answering */
	EXPECT_EQ(rdp_kube_request(c, RDP_KUBE_GET, "/api/v1/nodes/n", NULL, &resp), 0);
	EXPECT_EQ(resp.status, 200);
	rdp_kube_response_done(&resp);
	/* rotated: a new inode and size; noticed by stat before the request; the CA file
	 * replaced too (same certificate, new inode): loaded again for the new connection */
	rotate_file("token", "token-two-longer");
	{
		char pem[8192] = "";
		FILE *f = fopen(path_of("ca.crt"), "r");

		if (f) {
			pem[fread(pem, 1, sizeof(pem) - 1, f)] = '\0';
			fclose(f);
		}
		rotate_file("ca-copy.crt", pem);
	}
	EXPECT_EQ(rdp_kube_request(c, RDP_KUBE_GET, "/api/v1/nodes/n", NULL, &resp), 0);
	EXPECT_EQ(resp.status, 200);
	rdp_kube_response_done(&resp);
	EXPECT_EQ(rdp_kube_request(c, RDP_KUBE_GET, "/api/v1/nodes/n", NULL, &resp), 0);
	rdp_kube_response_done(&resp);
	rdp_kube_client_stats(c, &st);
	EXPECT_EQ(st.requests, 4);
	EXPECT_EQ(st.connects, 2);
	EXPECT_EQ(st.token_reads, 2);
	EXPECT_EQ(st.ca_reads, 2);
	rdp_kube_client_free(c);
out:
	server_stop(&s);
	EXPECT_EQ(s.n_requests, 4);
	EXPECT_STREQ(s.tokens[0], "token-one");
	EXPECT_STREQ(s.tokens[1], "token-one");
	EXPECT_STREQ(s.tokens[2], "token-two-longer");
	EXPECT_STREQ(s.tokens[3], "token-two-longer");
}

static void test_tls_401_then_rotated_token(void)
{
	/* the server rotates the file as it refuses: the client cannot have seen it yet */
	static const struct step steps[] = {
		{.response = UNAUTHORIZED, .rotate_to = "token-new"},
		{.response = OK_NODE},
		{.response = UNAUTHORIZED},
		{.response = UNAUTHORIZED},
	};
	struct rdp_kube_client_stats st;
	struct rdp_kube_client *c;
	struct rdp_kube_response resp;
	struct server s;

	write_file("token", "token-old");
	if (server_init(&s) < 0) {
		test_failed++;
		return;
	}
	server_start(&s, steps, sizeof(steps) / sizeof(steps[0]));
	c = new_client(&s, 5000, 0);
	EXPECT_TRUE(c != NULL);
	if (!c)
		goto out;
	EXPECT_EQ(rdp_kube_request(c, RDP_KUBE_GET, "/api/v1/nodes/n", NULL, &resp), 0);
	EXPECT_EQ(resp.status, 200);
	rdp_kube_response_done(&resp);
	/* a token that stays refused: one retry, then the 401 stands */
	EXPECT_EQ(rdp_kube_request(c, RDP_KUBE_GET, "/api/v1/nodes/n", NULL, &resp), 0);
	EXPECT_EQ(resp.status, 401);
	rdp_kube_response_done(&resp);
	rdp_kube_client_stats(c, &st);
	EXPECT_EQ(st.unauthorized, 3);
	EXPECT_EQ(st.requests, 4);
	EXPECT_EQ(st.token_reads, 3);
	rdp_kube_client_free(c);
out:
	server_stop(&s);
	EXPECT_STREQ(s.tokens[0], "token-old");
	EXPECT_STREQ(s.tokens[1], "token-new");
}

static void test_tls_limits_chunked_timeout(void)
{
	static char big[4096];
	static const struct step chunked[] = {
		{.response = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			     "5\r\n{\"a\":\r\n3\r\n42}\r\n0\r\n\r\n"},
	};
	struct step over[] = {{.response = big}};
	static const struct step silent[] = {{.response = NULL}};
	struct rdp_kube_client *c;
	struct rdp_kube_response resp;
	struct server s;
	json_t *doc = NULL;
	uint64_t t0;
	int status = 0;

	write_file("token", "t");
	/* chunked */
	if (server_init(&s) < 0) {
		test_failed++;
		return;
	}
	server_start(&s, chunked, 1);
	c = new_client(&s, 5000, 0);
	EXPECT_TRUE(c != NULL);
	if (c) {
		EXPECT_EQ(rdp_kube_get_json(c, "/x", NULL, &status, &doc), 0);
		EXPECT_EQ(json_integer_value(json_object_get(doc, "a")), 42);
		json_decref(doc);
		rdp_kube_client_free(c);
	}
	server_stop(&s);

	/* over the body limit (1 KiB here) */
	snprintf(big, sizeof(big), "HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n%02000d", 0);
	if (server_init(&s) < 0) {
		test_failed++;
		return;
	}
	server_start(&s, over, 1);
	c = new_client(&s, 5000, 1024);
	EXPECT_TRUE(c != NULL);
	if (c) {
		EXPECT_EQ(rdp_kube_request(c, RDP_KUBE_GET, "/x", NULL, &resp), -E2BIG);
		EXPECT_CONTAINS(rdp_kube_client_last_error(c), "over the limit");
		EXPECT_TRUE(resp.body == NULL);
		rdp_kube_client_free(c);
	}
	server_stop(&s);

	/* a server that never answers: -ETIMEDOUT at the request's bound */
	if (server_init(&s) < 0) {
		test_failed++;
		return;
	}
	server_start(&s, silent, 1);
	c = new_client(&s, 400, 0);
	EXPECT_TRUE(c != NULL);
	if (c) {
		t0 = rdp_tls_now_ms();
		EXPECT_EQ(rdp_kube_request(c, RDP_KUBE_GET, "/x", NULL, &resp), -ETIMEDOUT);
		EXPECT_TRUE(rdp_tls_now_ms() - t0 >= 390 && rdp_tls_now_ms() - t0 < 2000);
		EXPECT_CONTAINS(rdp_kube_client_last_error(c), "timed out");
		rdp_kube_client_free(c);
	}
	server_stop(&s);
}

static void *stop_later(void *arg)
{
	uint64_t one = 1;

	usleep(300 * 1000);
	if (write(*(int *)arg, &one, sizeof(one)) != sizeof(one))
		perror("eventfd");
	return NULL;
}

static void test_tls_retry_and_stop(void)
{
	pthread_t stopper;
	static const struct step steps[] = {
		{.response = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"},
		{.response = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: "
			     "0\r\n\r\n"},
		{.response = OK_NODE},
		{.response = "HTTP/1.1 500 x\r\nContent-Length: 0\r\n\r\n"},
		{.response = "HTTP/1.1 404 x\r\nContent-Length: 0\r\n\r\n"},
	};
	struct rdp_kube_retry policy = {.max_attempts = 5, .initial_ms = 50};
	struct rdp_kube_client_stats st;
	struct rdp_kube_client *c;
	struct rdp_kube_response resp;
	struct server s;
	uint64_t t0, took;
	int efd;

	write_file("token", "t");
	if (server_init(&s) < 0) {
		test_failed++;
		return;
	}
	server_start(&s, steps, sizeof(steps) / sizeof(steps[0]));
	c = new_client(&s, 5000, 0);
	EXPECT_TRUE(c != NULL);
	if (!c)
		goto out;
	/* 503 after 50 ms, 429 after Retry-After's 1 s, then 200 */
	t0 = rdp_tls_now_ms();
	EXPECT_EQ(rdp_kube_request_retry(c, RDP_KUBE_GET, "/x", NULL, &policy, &resp), 0);
	took = rdp_tls_now_ms() - t0;
	EXPECT_EQ(resp.status, 200);
	EXPECT_TRUE(took >= 1000 && took < 3000);
	rdp_kube_response_done(&resp);
	/* a 500, then the stop fd fires during the backoff: -ECANCELED, promptly */
	efd = eventfd(0, EFD_CLOEXEC);
	rdp_kube_client_set_stop_fd(c, efd);
	policy.initial_ms = 10000;
	t0 = rdp_tls_now_ms();
	pthread_create(&stopper, NULL, stop_later, &efd);
	EXPECT_EQ(rdp_kube_request_retry(c, RDP_KUBE_GET, "/x", NULL, &policy, &resp), -ECANCELED);
	EXPECT_TRUE(rdp_tls_now_ms() - t0 < 2000);
	pthread_join(stopper, NULL);
	EXPECT_TRUE(resp.body == NULL);
	rdp_kube_client_set_stop_fd(c, -1);
	close(efd);
	/* a 404 is an answer, not retried */
	EXPECT_EQ(rdp_kube_request_retry(c, RDP_KUBE_GET, "/x", NULL, &policy, &resp), 0);
	EXPECT_EQ(resp.status, 404);
	rdp_kube_response_done(&resp);
	rdp_kube_client_stats(c, &st);
	EXPECT_EQ(st.requests, 5);
	EXPECT_EQ(st.connects, 1);
	rdp_kube_client_free(c);
out:
	server_stop(&s);
	EXPECT_TRUE(rdp_kube_retryable(-ECONNREFUSED, 0));
	EXPECT_TRUE(rdp_kube_retryable(0, 503));
	EXPECT_TRUE(!rdp_kube_retryable(-EKEYREJECTED, 0));
	EXPECT_TRUE(!rdp_kube_retryable(-ECANCELED, 0));
	EXPECT_TRUE(!rdp_kube_retryable(0, 409));
}

static void test_tls_bad_ca_and_missing_token(void)
{
	struct rdp_kube_config cfg = {0};
	struct rdp_kube_client *c = NULL;
	char *err = NULL;

	EXPECT_EQ(rdp_kube_config_explicit("https://127.0.0.1:1", path_of("token"),
					   path_of("not-a-ca"), NULL, &cfg, &err),
		  0);
	write_file("not-a-ca", "hello\n");
	EXPECT_EQ(rdp_kube_client_new(&cfg, &c, &err), -EINVAL);
	EXPECT_CONTAINS(err, "holds no usable certificate");
	rdp_kube_config_done(&cfg);

	EXPECT_EQ(rdp_kube_config_explicit("https://127.0.0.1:1", path_of("no-token"),
					   path_of("ca.crt"), NULL, &cfg, &err),
		  0);
	EXPECT_EQ(rdp_kube_client_new(&cfg, &c, &err), -ENOENT);
	EXPECT_CONTAINS(err, "cannot read token file");
	rdp_kube_config_done(&cfg);
	write_file("empty-token", " \n");
	EXPECT_EQ(rdp_kube_config_explicit("https://127.0.0.1:1", path_of("empty-token"),
					   path_of("ca.crt"), NULL, &cfg, &err),
		  0);
	EXPECT_EQ(rdp_kube_client_new(&cfg, &c, &err), -EINVAL);
	EXPECT_CONTAINS(err, "is empty");
	rdp_kube_config_done(&cfg);
	rdp_free(err);
}

static bool make_pki(void)
{
	char cmd[2048];

	if (system("command -v openssl >/dev/null 2>&1") != 0)
		return false;
	snprintf(cmd, sizeof(cmd),
		 "(cd %s && "
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
		 "-keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca && "
		 "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
		 "-keyout server.key -out server.csr -subj /CN=kube-apiserver && "
		 "printf 'subjectAltName=DNS:kubernetes.default.svc,IP:127.0.0.1\\n' > ext.cnf && "
		 "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
		 "-out server.crt -days 2 -extfile ext.cnf && cp ca.crt ca-copy.crt) >/dev/null "
		 "2>&1",
		 tmpdir);
	return system(cmd) == 0;
}

int main(void)
{
	char cmd[128];

	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	test_config_in_cluster();
	test_config_explicit();
	test_parser();
	test_render();
	if (make_pki()) {
		test_tls_get_keepalive_rotation();
		test_tls_401_then_rotated_token();
		test_tls_limits_chunked_timeout();
		test_tls_retry_and_stop();
		test_tls_bad_ca_and_missing_token();
	} else {
		printf("test-kube-client: openssl CLI missing or failing, skipped the TLS tests\n");
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", tmpdir);
	return test_summary("test-kube-client");
}
