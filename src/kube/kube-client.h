/* SPDX-License-Identifier: MIT */
/*
 * A blocking client of the Kubernetes API server: HTTP/1.1 over TLS (kube-tls.h), one request
 * at a time on one keep-alive connection, bearer-token authentication, JSON bodies.
 *
 * Threading: every call blocks (connect <= connect_timeout_ms, a whole request <=
 * request_timeout_ms, a retried one up to its policy's deadline), so it belongs on a worker
 * thread, never on the daemon's event loop. One client is used by one thread at a time. A
 * stop fd (an eventfd or a pipe's read end, rdp_kube_client_set_stop_fd()) makes every wait
 * (connect, TLS, a response, a backoff sleep) end with -ECANCELED once it is readable, so the
 * daemon can exit promptly: it writes the eventfd, then joins the worker.
 *
 * Configuration (struct rdp_kube_config):
 *   - in a pod: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT (the host must be an
 *     IPv4 or IPv6 literal: no DNS, static glibc has no NSS), the service-account token and
 *     CA under /var/run/secrets/kubernetes.io/serviceaccount (a root prefix moves them, for
 *     tests);
 *   - outside: "https://IP:PORT" ("https://[IPv6]:PORT"), a token file and a CA file.
 * The certificate name checked is server_name: RDP_KUBE_DEFAULT_SERVER_NAME unless the caller
 * gives one (mbedTLS 2.28 cannot match an IP SAN; kube-tls.h).
 *
 * The token: read when the client starts, read again before a request when its file changed
 * (inode, size or mtime: one stat(2)) or 60 s after the last read (a projected token rotates
 * without always changing all three), and after a 401, once, the request then retried once.
 * <= RDP_KUBE_TOKEN_MAX bytes, surrounding whitespace dropped, printable ASCII only.
 *
 * The CA file: loaded when the client starts, and again before a new connection when it
 * changed (stat(2)); a changed file that does not load leaves the previous CA in use.
 *
 * Connections: reused while the server keeps them alive; an idle one the server closed is
 * noticed before the next request (rdp_tls_conn_stale()), and a request that fails on a reused
 * connection before any byte of its response is sent once more on a new one (the server
 * closed an idle connection as we wrote). Any error closes the connection.
 *
 * Errors: negative errno as kube-tls.h lists them, plus -E2BIG (a response over
 * RDP_KUBE_BODY_MAX or its headers over RDP_KUBE_HTTP_HEADERS_MAX), -EPROTO (not HTTP),
 * -EACCES (unreadable token), -EINVAL; an HTTP status is not an error: it is in resp.status.
 * rdp_kube_client_last_error() says in one sentence what the last failure was.
 *
 * Library code: no logging.
 */
#pragma once
#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "kube-http.h"

#define RDP_KUBE_DEFAULT_SERVER_NAME "kubernetes.default.svc"
#define RDP_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define RDP_KUBE_TOKEN_MAX (64 * 1024)
#define RDP_KUBE_BODY_MAX (8 * 1024 * 1024)
#define RDP_KUBE_TOKEN_REREAD_MS 60000
#define RDP_KUBE_CONNECT_TIMEOUT_MS 5000
#define RDP_KUBE_REQUEST_TIMEOUT_MS 10000

struct rdp_kube_config {
	struct sockaddr_storage addr; /* the API server */
	socklen_t addrlen;
	char *host; /* "10.96.0.1:443", "[fd00::1]:443": the Host header and messages */
	char *server_name; /* the name its certificate must carry; also SNI */
	char *token_file;
	char *ca_file;
	unsigned connect_timeout_ms; /* 0: RDP_KUBE_CONNECT_TIMEOUT_MS */
	unsigned request_timeout_ms; /* 0: RDP_KUBE_REQUEST_TIMEOUT_MS */
	size_t max_body; /* 0: RDP_KUBE_BODY_MAX */
};

/*
 * The in-pod configuration from the environment (KUBERNETES_SERVICE_HOST, _PORT) and
 * root + RDP_KUBE_SA_DIR "/token" and "/ca.crt" (root NULL or "" for "/"). The files are not
 * opened here. -ENOENT when KUBERNETES_SERVICE_HOST or _PORT is unset or empty (not in a
 * pod), -EINVAL for a host that is not an IP literal or a port outside 1..65535, -ENOMEM.
 * *ret_error (may be NULL) gets an allocated sentence on failure.
 */
int rdp_kube_config_in_cluster(const char *root, struct rdp_kube_config *ret, char **ret_error);

/*
 * An explicit configuration: url "https://IP:PORT" or "https://[IPv6]:PORT" (the port may be
 * omitted: 443; nothing after it but an optional '/'), the token and CA files, server_name
 * NULL for the default. Errors as above.
 */
int rdp_kube_config_explicit(const char *url, const char *token_file, const char *ca_file,
			     const char *server_name, struct rdp_kube_config *ret,
			     char **ret_error);

/* Frees what a configuration holds. */
void rdp_kube_config_done(struct rdp_kube_config *cfg);

struct rdp_kube_client;

/*
 * A client for cfg (copied): loads the CA and reads the token now, so that a missing file is
 * reported at start. No connection yet.
 */
int rdp_kube_client_new(const struct rdp_kube_config *cfg, struct rdp_kube_client **ret,
			char **ret_error);
void rdp_kube_client_free(struct rdp_kube_client *c);

/* The fd that, once readable, makes every wait end with -ECANCELED; -1 for none. */
void rdp_kube_client_set_stop_fd(struct rdp_kube_client *c, int fd);

/* The last failure in one sentence ("" when none); valid until the next call. */
const char *rdp_kube_client_last_error(const struct rdp_kube_client *c);

/* The TLS version and ALPN protocol of the current connection, or NULL without one. */
const char *rdp_kube_client_tls_version(const struct rdp_kube_client *c);
const char *rdp_kube_client_alpn(const struct rdp_kube_client *c);

struct rdp_kube_client_stats {
	unsigned long requests; /* sent, retries included */
	unsigned long connects; /* TLS connections made */
	unsigned long token_reads; /* reads of the token file */
	unsigned long unauthorized; /* 401s met */
	unsigned long ca_reads; /* loads of the CA file (again when it changed) */
};
void rdp_kube_client_stats(const struct rdp_kube_client *c, struct rdp_kube_client_stats *ret);

/*
 * One request: path with its query ("/api/v1/nodes/node-a"), body JSON text or NULL. 0 with
 * *resp filled (any status) or negative errno (*resp zeroed). A 401 re-reads the token and
 * sends the request once more.
 */
int rdp_kube_request(struct rdp_kube_client *c, enum rdp_kube_method m, const char *path,
		     const char *body, struct rdp_kube_response *resp);

/*
 * A GET whose 2xx body is a stream (a watch): its bytes go to cb as they come (kube-http.h,
 * rdp_kube_http_parser_set_stream(); cb runs on the calling thread), until the server ends the
 * response, cb returns 1 (the connection is then closed), or timeout_ms passes (-ETIMEDOUT).
 * Any other status comes back in *resp as rdp_kube_request() gives it, a 401 retried as
 * there. Returns as rdp_kube_request() does, or cb's negative errno.
 */
int rdp_kube_request_stream(struct rdp_kube_client *c, const char *path, unsigned timeout_ms,
			    rdp_kube_http_stream_cb cb, void *userdata,
			    struct rdp_kube_response *resp);

/*
 * Retries: a connection error (refused, reset, timed out, TLS -EPROTO...), 429 or a 5xx is
 * tried again after 0.5 s, 1 s, 2 s... up to 30 s (initial_ms, max_ms), or after Retry-After
 * when the server said longer, until max_attempts (0: no limit) or deadline_ms (CLOCK_MONOTONIC
 * ms as rdp_tls_now_ms(); 0: none; no attempt starts that could not sleep its delay first).
 * Never retried: a certificate refused (-EKEYREJECTED), -ECANCELED, -ENOMEM, -EINVAL, other
 * statuses. The methods are the caller's business: a POST whose answer was lost may have
 * happened (a slice created with generateName twice); the DRA pool sync cleans that up.
 */
struct rdp_kube_retry {
	unsigned max_attempts;
	uint64_t deadline_ms;
	unsigned initial_ms; /* 0: 500 */
	unsigned max_ms; /* 0: 30000 */
};

/* Whether rdp_kube_request_retry() would try again after (r, status). */
bool rdp_kube_retryable(int r, int status);

/* rdp_kube_request() under policy (NULL: 5 attempts). Returns as it does, for the last try. */
int rdp_kube_request_retry(struct rdp_kube_client *c, enum rdp_kube_method m, const char *path,
			   const char *body, const struct rdp_kube_retry *policy,
			   struct rdp_kube_response *resp);

/*
 * GET path (retried under policy, NULL for a single try) and parse the body as JSON: 0 with
 * *ret_status and *ret (the object, also for an error status: kube-apiserver answers those
 * with a Status object; NULL when such a body is not JSON). -EBADMSG for a 2xx body that is
 * not JSON. The request's own errors as above.
 */
int rdp_kube_get_json(struct rdp_kube_client *c, const char *path,
		      const struct rdp_kube_retry *policy, int *ret_status, json_t **ret);

/* The "message" of a Status object (kind Status), or NULL. */
const char *rdp_kube_status_message(const json_t *status);
