/* SPDX-License-Identifier: MIT */
/*
 * The API-server client; see kube-client.h.
 *
 * Connection lifecycle (set_state() is the one place it changes):
 *   DISCONNECTED -> IDLE          TLS connection made (connect_conn())
 *   IDLE         -> DISCONNECTED  any error, a response that does not keep the connection
 *                                 alive, a connection the server closed while idle, free
 * A request runs on an IDLE connection and leaves it IDLE or DISCONNECTED.
 */
#define _GNU_SOURCE
#include "kube-client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kube-tls.h"
#include "macro.h"

#define READ_CHUNK 16384

enum conn_state {
	CONN_DISCONNECTED,
	CONN_IDLE,
};

struct token {
	char *value;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	uint64_t read_ms;
};

/* What stat(2) says of a file, to notice a replaced one. */
struct file_id {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
};

struct rdp_kube_client {
	struct rdp_kube_config cfg;
	struct rdp_tls_ctx *tls;
	struct file_id ca_id; /* of the CA file tls was made from */
	struct rdp_tls_conn *conn;
	enum conn_state state;
	struct token token;
	int stop_fd;
	char *error;
	struct rdp_kube_client_stats stats;
};

static void set_msg(char **dst, const char *fmt, ...) _printf_(2, 3);
static void set_msg(char **dst, const char *fmt, ...)
{
	va_list ap;
	char buf[768];

	if (!dst)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	rdp_free(*dst);
	*dst = rdp_strdup(buf);
}

/* ---- configuration ---- */

void rdp_kube_config_done(struct rdp_kube_config *cfg)
{
	rdp_free(cfg->host);
	rdp_free(cfg->server_name);
	rdp_free(cfg->token_file);
	rdp_free(cfg->ca_file);
	*cfg = (struct rdp_kube_config){0};
}

/* "1".."65535", digits only. */
static int parse_port(const char *s, unsigned *ret)
{
	unsigned long v = 0;

	if (!*s || strlen(s) > 5)
		return -EINVAL;
	for (const char *p = s; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*p - '0');
	}
	if (v < 1 || v > 65535)
		return -EINVAL;
	*ret = (unsigned)v;
	return 0;
}

/* An IPv4 or IPv6 literal (no brackets) and a port into cfg->addr and cfg->host. */
static int set_address(struct rdp_kube_config *cfg, const char *ip, unsigned port)
{
	struct sockaddr_in *in4 = (struct sockaddr_in *)&cfg->addr;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&cfg->addr;

	memset(&cfg->addr, 0, sizeof(cfg->addr));
	if (inet_pton(AF_INET, ip, &in4->sin_addr) == 1) {
		in4->sin_family = AF_INET;
		in4->sin_port = htons((uint16_t)port);
		cfg->addrlen = sizeof(*in4);
		cfg->host = rdp_asprintf("%s:%u", ip, port);
	} else if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		cfg->addrlen = sizeof(*in6);
		cfg->host = rdp_asprintf("[%s]:%u", ip, port);
	} else {
		return -EINVAL;
	}
	return cfg->host ? 0 : -ENOMEM;
}

static int config_files(struct rdp_kube_config *cfg, const char *token_file, const char *ca_file,
			const char *server_name)
{
	cfg->token_file = rdp_strdup(token_file);
	cfg->ca_file = rdp_strdup(ca_file);
	cfg->server_name = rdp_strdup(server_name ? server_name : RDP_KUBE_DEFAULT_SERVER_NAME);
	if (!cfg->token_file || !cfg->ca_file || !cfg->server_name)
		return -ENOMEM;
	return 0;
}

int rdp_kube_config_in_cluster(const char *root, struct rdp_kube_config *ret, char **ret_error)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST");
	const char *port = getenv("KUBERNETES_SERVICE_PORT");
	_cleanup_free_ char *token = NULL, *ca = NULL;
	struct rdp_kube_config cfg = {0};
	unsigned p;
	int r;

	if (!host || !*host || !port || !*port) {
		set_msg(ret_error,
			"KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both "
			"set: not running in a pod (give --api-server)");
		return -ENOENT;
	}
	if (parse_port(port, &p) < 0) {
		set_msg(ret_error, "KUBERNETES_SERVICE_PORT '%.64s' is not a port (1-65535)", port);
		return -EINVAL;
	}
	r = set_address(&cfg, host, p);
	if (r < 0) {
		rdp_kube_config_done(&cfg);
		if (r == -EINVAL)
			set_msg(ret_error,
				"KUBERNETES_SERVICE_HOST '%.64s' is not an IP address (no DNS "
				"here)",
				host);
		return r;
	}
	root = root ? root : "";
	token = rdp_asprintf("%s%s/token", root, RDP_KUBE_SA_DIR);
	ca = rdp_asprintf("%s%s/ca.crt", root, RDP_KUBE_SA_DIR);
	if (!token || !ca || config_files(&cfg, token, ca, NULL) < 0) {
		rdp_kube_config_done(&cfg);
		return -ENOMEM;
	}
	*ret = cfg;
	return 0;
}

int rdp_kube_config_explicit(const char *url, const char *token_file, const char *ca_file,
			     const char *server_name, struct rdp_kube_config *ret, char **ret_error)
{
	struct rdp_kube_config cfg = {0};
	char ip[INET6_ADDRSTRLEN + 1], port[8] = "443";
	const char *p, *end;
	size_t n;
	unsigned port_n;
	int r;

	if (!url || strncmp(url, "https://", 8) != 0) {
		set_msg(ret_error, "API server '%.128s' is not an https:// URL", strempty(url));
		return -EINVAL;
	}
	if (!token_file || !*token_file || !ca_file || !*ca_file) {
		set_msg(ret_error, "a token file and a CA file are needed with an API server URL");
		return -EINVAL;
	}
	if (server_name && (!*server_name || strlen(server_name) > 253)) {
		set_msg(ret_error, "invalid API server name '%.64s'", server_name);
		return -EINVAL;
	}
	p = url + 8;
	if (*p == '[') {
		end = strchr(p, ']');
		if (!end)
			goto bad;
		p++;
	} else {
		end = p + strcspn(p, ":/");
	}
	n = (size_t)(end - p);
	if (n == 0 || n >= sizeof(ip))
		goto bad;
	memcpy(ip, p, n);
	ip[n] = '\0';
	p = end + (*end == ']');
	if (*p == ':') {
		n = strcspn(p + 1, "/");
		if (n == 0 || n >= sizeof(port))
			goto bad;
		memcpy(port, p + 1, n);
		port[n] = '\0';
		p += 1 + n;
	}
	if (*p && strcmp(p, "/") != 0)
		goto bad;
	if (parse_port(port, &port_n) < 0)
		goto bad;
	r = set_address(&cfg, ip, port_n);
	if (r == -ENOMEM || (r == 0 && config_files(&cfg, token_file, ca_file, server_name) < 0)) {
		rdp_kube_config_done(&cfg);
		return -ENOMEM;
	}
	if (r < 0) {
		rdp_kube_config_done(&cfg);
		set_msg(ret_error, "API server '%.128s': '%s' is not an IP address (no DNS here)",
			url, ip);
		return r;
	}
	*ret = cfg;
	return 0;
bad:
	set_msg(ret_error, "API server '%.128s' is not https://IP:PORT or https://[IPv6]:PORT",
		url);
	return -EINVAL;
}

static int config_copy(const struct rdp_kube_config *src, struct rdp_kube_config *dst)
{
	*dst = *src;
	dst->host = rdp_strdup(src->host);
	dst->server_name =
		rdp_strdup(src->server_name ? src->server_name : RDP_KUBE_DEFAULT_SERVER_NAME);
	dst->token_file = rdp_strdup(src->token_file);
	dst->ca_file = rdp_strdup(src->ca_file);
	if (!dst->connect_timeout_ms)
		dst->connect_timeout_ms = RDP_KUBE_CONNECT_TIMEOUT_MS;
	if (!dst->request_timeout_ms)
		dst->request_timeout_ms = RDP_KUBE_REQUEST_TIMEOUT_MS;
	if (!dst->max_body)
		dst->max_body = RDP_KUBE_BODY_MAX;
	if (!dst->host || !dst->server_name || !dst->token_file || !dst->ca_file)
		return -ENOMEM;
	return 0;
}

/* ---- the token ---- */

static bool same_file(const struct token *t, const struct stat *st)
{
	return t->dev == st->st_dev && t->ino == st->st_ino && t->size == st->st_size &&
	       t->mtime.tv_sec == st->st_mtim.tv_sec && t->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

static int token_read(struct rdp_kube_client *c)
{
	_cleanup_close_ int fd = -1;
	_cleanup_free_ char *buf = NULL;
	const char *path = c->cfg.token_file;
	size_t len = 0, start = 0;
	struct stat st;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st) < 0) {
		int r = -errno;

		set_msg(&c->error, "cannot read token file '%s': %s", path, strerror(-r));
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		set_msg(&c->error, "token file '%s' is not a regular file", path);
		return -EINVAL;
	}
	buf = rdp_malloc(RDP_KUBE_TOKEN_MAX + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + len, RDP_KUBE_TOKEN_MAX + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int r = -errno;

			set_msg(&c->error, "cannot read token file '%s': %s", path, strerror(-r));
			return r;
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len > RDP_KUBE_TOKEN_MAX) {
			set_msg(&c->error, "token file '%s' is larger than %d bytes", path,
				RDP_KUBE_TOKEN_MAX);
			return -EFBIG;
		}
	}
	while (len && strchr(" \t\r\n", buf[len - 1]))
		len--;
	while (start < len && strchr(" \t\r\n", buf[start]))
		start++;
	buf[len] = '\0';
	if (start == len) {
		set_msg(&c->error, "token file '%s' is empty", path);
		return -EINVAL;
	}
	for (size_t i = start; i < len; i++)
		if ((unsigned char)buf[i] <= 0x20 || (unsigned char)buf[i] >= 0x7f) {
			set_msg(&c->error, "token file '%s' holds a character a token cannot have",
				path);
			return -EINVAL;
		}
	if (start)
		memmove(buf, buf + start, len - start + 1);
	rdp_free(c->token.value);
	c->token.value = TAKE_PTR(buf);
	c->token.dev = st.st_dev;
	c->token.ino = st.st_ino;
	c->token.size = st.st_size;
	c->token.mtime = st.st_mtim;
	c->token.read_ms = rdp_tls_now_ms();
	c->stats.token_reads++;
	return 0;
}

/* Reads the token again when forced, when its file changed, or when it is 60 s old. */
static int token_refresh(struct rdp_kube_client *c, bool force)
{
	struct stat st;

	if (!force && c->token.value) {
		if (stat(c->cfg.token_file, &st) < 0)
			return 0; /* mid-rotation or gone: the token we have is the best guess */
		if (same_file(&c->token, &st) &&
		    rdp_tls_now_ms() - c->token.read_ms < RDP_KUBE_TOKEN_REREAD_MS)
			return 0;
	}
	return token_read(c);
}

/* ---- the client ---- */

static void file_id_of(const struct stat *st, struct file_id *ret)
{
	*ret = (struct file_id){
		.dev = st->st_dev, .ino = st->st_ino, .size = st->st_size, .mtime = st->st_mtim};
}

static bool file_id_eq(const struct file_id *a, const struct file_id *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

static void set_state(struct rdp_kube_client *c, enum conn_state st)
{
	if (st == CONN_DISCONNECTED) {
		rdp_tls_conn_free(c->conn);
		c->conn = NULL;
	}
	c->state = st;
}

int rdp_kube_client_new(const struct rdp_kube_config *cfg, struct rdp_kube_client **ret,
			char **ret_error)
{
	struct rdp_kube_client *c;
	int r;

	if (!cfg->host || !cfg->token_file || !cfg->ca_file || !cfg->addrlen)
		return -EINVAL;
	c = rdp_calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->stop_fd = -1;
	c->state = CONN_DISCONNECTED;
	r = config_copy(cfg, &c->cfg);
	if (r == 0) {
		struct stat st;

		/* the CA's identity before reading it: a change in between is read again later */
		if (stat(c->cfg.ca_file, &st) == 0)
			file_id_of(&st, &c->ca_id);
		r = rdp_tls_ctx_new(c->cfg.ca_file, &c->tls, ret_error);
		if (r == 0)
			c->stats.ca_reads++;
	}
	if (r == 0) {
		r = token_read(c);
		if (r < 0 && c->error)
			set_msg(ret_error, "%s", c->error);
	}
	if (r < 0) {
		rdp_kube_client_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

void rdp_kube_client_free(struct rdp_kube_client *c)
{
	if (!c)
		return;
	set_state(c, CONN_DISCONNECTED);
	rdp_tls_ctx_free(c->tls);
	rdp_kube_config_done(&c->cfg);
	rdp_free(c->token.value);
	rdp_free(c->error);
	rdp_free(c);
}

void rdp_kube_client_set_stop_fd(struct rdp_kube_client *c, int fd)
{
	c->stop_fd = fd;
}

const char *rdp_kube_client_last_error(const struct rdp_kube_client *c)
{
	return c->error ? c->error : "";
}

const char *rdp_kube_client_tls_version(const struct rdp_kube_client *c)
{
	return c->conn ? rdp_tls_conn_version(c->conn) : NULL;
}

const char *rdp_kube_client_alpn(const struct rdp_kube_client *c)
{
	return c->conn ? rdp_tls_conn_alpn(c->conn) : NULL;
}

void rdp_kube_client_stats(const struct rdp_kube_client *c, struct rdp_kube_client_stats *ret)
{
	*ret = c->stats;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/*
 * Before a new connection: a CA file that changed since it was loaded (the cluster's CA
 * rotated, kube-root-ca.crt updated) is loaded again. A new file that does not load leaves
 * the old CA in use; the handshake then says whether it still fits.
 */
static void ca_refresh(struct rdp_kube_client *c)
{
	struct rdp_tls_ctx *tls = NULL;
	struct file_id id;
	struct stat st;

	if (stat(c->cfg.ca_file, &st) < 0)
		return;
	file_id_of(&st, &id);
	if (file_id_eq(&id, &c->ca_id) || rdp_tls_ctx_new(c->cfg.ca_file, &tls, NULL) < 0)
		return;
	rdp_tls_ctx_free(c->tls);
	c->tls = tls;
	c->ca_id = id;
	c->stats.ca_reads++;
}

static int connect_conn(struct rdp_kube_client *c, uint64_t deadline_ms)
{
	_cleanup_free_ char *err = NULL;
	uint64_t d = min_u64(deadline_ms, rdp_tls_now_ms() + c->cfg.connect_timeout_ms);
	int r;

	ca_refresh(c);
	r = rdp_tls_connect(c->tls, (const struct sockaddr *)&c->cfg.addr, c->cfg.addrlen,
			    c->cfg.server_name, d, c->stop_fd, &c->conn, &err);
	if (r < 0) {
		set_msg(&c->error, "https://%s: %s", c->cfg.host, err ? err : strerror(-r));
		return r;
	}
	c->stats.connects++;
	set_state(c, CONN_IDLE);
	return 0;
}

/*
 * One request and its response on the current connection (made first if needed). *started
 * tells whether any byte of a response came.
 */
struct stream {
	rdp_kube_http_stream_cb cb;
	void *userdata;
};

static int exchange(struct rdp_kube_client *c, enum rdp_kube_method m, const char *path,
		    const char *body, uint64_t deadline_ms, const struct stream *stream,
		    struct rdp_kube_response *resp, bool *started)
{
	struct rdp_kube_http_parser *p = NULL;
	_cleanup_free_ char *req = NULL, *err = NULL, *buf = NULL;
	const char *method = rdp_kube_method_name(m);
	size_t req_len = 0;
	int r;

	*started = false;
	if (c->state == CONN_IDLE && rdp_tls_conn_stale(c->conn))
		set_state(c, CONN_DISCONNECTED);
	if (c->state == CONN_DISCONNECTED) {
		r = connect_conn(c, deadline_ms);
		if (r < 0)
			return r;
	}
	r = rdp_kube_http_render(m, c->cfg.host, path, c->token.value, body, &req, &req_len);
	if (r < 0) {
		if (r == -EINVAL)
			set_msg(&c->error, "%s %.256s: invalid path", method, path);
		set_state(c, CONN_DISCONNECTED);
		return r;
	}
	buf = rdp_malloc(READ_CHUNK);
	r = buf ? rdp_kube_http_parser_new(c->cfg.max_body, &p) : -ENOMEM;
	if (r < 0) {
		set_state(c, CONN_DISCONNECTED);
		return r;
	}
	if (stream)
		rdp_kube_http_parser_set_stream(p, stream->cb, stream->userdata);
	c->stats.requests++;
	r = rdp_tls_write(c->conn, req, req_len, deadline_ms, &err);
	while (r == 0) {
		ssize_t n = rdp_tls_read(c->conn, buf, READ_CHUNK, deadline_ms, &err);

		if (n < 0) {
			r = (int)n;
			break;
		}
		if (n == 0 && !rdp_kube_http_parser_started(p)) {
			set_msg(&err, "the server closed the connection before answering");
			r = -ECONNRESET;
			break;
		}
		r = rdp_kube_http_parser_feed(p, buf, (size_t)n);
		if (r == 1) {
			r = rdp_kube_http_parser_take(p, resp);
			break;
		}
		if (r == -E2BIG)
			set_msg(&err,
				"the response is over the limit (%zu bytes of body, %d of "
				"headers)",
				c->cfg.max_body, RDP_KUBE_HTTP_HEADERS_MAX);
		else if (r == -EPROTO)
			set_msg(&err, "the answer is not an HTTP/1.1 response%s",
				n == 0 ? " (closed before its end)" : "");
	}
	*started = rdp_kube_http_parser_started(p);
	if (r < 0) {
		set_msg(&c->error, "%s https://%s%.256s: %s", method, c->cfg.host, path,
			err ? err : strerror(-r));
		set_state(c, CONN_DISCONNECTED);
	} else if (!rdp_kube_http_parser_reusable(p)) {
		set_state(c, CONN_DISCONNECTED);
	}
	rdp_kube_http_parser_free(p);
	return r;
}

/* exchange(), once more on a new connection when a reused one turned out closed. */
static int send_once(struct rdp_kube_client *c, enum rdp_kube_method m, const char *path,
		     const char *body, uint64_t timeout_ms, const struct stream *stream,
		     struct rdp_kube_response *resp)
{
	uint64_t deadline = rdp_tls_now_ms() + timeout_ms;
	bool reused = c->state == CONN_IDLE, started;
	int r;

	r = exchange(c, m, path, body, deadline, stream, resp, &started);
	if (r < 0 && reused && !started && (r == -ECONNRESET || r == -EPIPE))
		r = exchange(c, m, path, body, deadline, stream, resp, &started);
	return r;
}

static int request(struct rdp_kube_client *c, enum rdp_kube_method m, const char *path,
		   const char *body, uint64_t timeout_ms, const struct stream *stream,
		   struct rdp_kube_response *resp)
{
	int r;

	*resp = (struct rdp_kube_response){.retry_after = -1};
	if (!path || !rdp_kube_method_name(m))
		return -EINVAL;
	rdp_free(c->error);
	c->error = NULL;
	r = token_refresh(c, false);
	if (r < 0)
		return r;
	r = send_once(c, m, path, body, timeout_ms, stream, resp);
	if (r == 0 && resp->status == 401) {
		c->stats.unauthorized++;
		r = token_refresh(c, true);
		if (r < 0)
			return 0; /* the 401 stands; the token file's trouble is in last_error */
		rdp_kube_response_done(resp);
		r = send_once(c, m, path, body, timeout_ms, stream, resp);
		if (r == 0 && resp->status == 401)
			c->stats.unauthorized++;
	}
	return r;
}

int rdp_kube_request(struct rdp_kube_client *c, enum rdp_kube_method m, const char *path,
		     const char *body, struct rdp_kube_response *resp)
{
	return request(c, m, path, body, c->cfg.request_timeout_ms, NULL, resp);
}

bool rdp_kube_retryable(int r, int status)
{
	if (r == 0)
		return status == 429 || (status >= 500 && status <= 599);
	switch (-r) {
	case ETIMEDOUT:
	case ECONNREFUSED:
	case ECONNRESET:
	case ECONNABORTED:
	case EPIPE:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case ENETDOWN:
	case EHOSTDOWN:
	case EPROTO:
	case EAGAIN:
	case EIO:
		return true;
	default:
		return false;
	}
}

/* Sleeps ms, or less when the stop fd becomes readable: then -ECANCELED. */
static int sleep_ms(struct rdp_kube_client *c, uint64_t ms)
{
	uint64_t end = rdp_tls_now_ms() + ms;

	for (;;) {
		struct pollfd pfd = {.fd = c->stop_fd, .events = POLLIN};
		uint64_t now = rdp_tls_now_ms();
		int n;

		if (now >= end)
			return 0;
		n = poll(&pfd, c->stop_fd >= 0 ? 1 : 0, (int)min_u64(end - now, 60000));
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0 && (pfd.revents & POLLIN))
			return -ECANCELED;
	}
}

int rdp_kube_request_retry(struct rdp_kube_client *c, enum rdp_kube_method m, const char *path,
			   const char *body, const struct rdp_kube_retry *policy,
			   struct rdp_kube_response *resp)
{
	static const struct rdp_kube_retry def = {.max_attempts = 5};
	uint64_t delay, max_ms;

	policy = policy ? policy : &def;
	delay = policy->initial_ms ? policy->initial_ms : 500;
	max_ms = policy->max_ms ? policy->max_ms : 30000;
	for (unsigned attempt = 1;; attempt++) {
		int r = rdp_kube_request(c, m, path, body, resp), s;
		uint64_t wait = delay;

		if (!rdp_kube_retryable(r, r == 0 ? resp->status : 0))
			return r;
		if (policy->max_attempts && attempt >= policy->max_attempts)
			return r;
		if (r == 0 && resp->retry_after >= 0 && (uint64_t)resp->retry_after * 1000 > wait)
			wait = (uint64_t)resp->retry_after * 1000;
		if (policy->deadline_ms && rdp_tls_now_ms() + wait >= policy->deadline_ms)
			return r;
		s = sleep_ms(c, wait);
		if (s < 0) {
			if (r == 0)
				rdp_kube_response_done(resp);
			set_msg(&c->error, "%s %.256s: stopped", rdp_kube_method_name(m), path);
			return s;
		}
		if (r == 0)
			rdp_kube_response_done(resp);
		delay = min_u64(delay * 2, max_ms);
	}
}

int rdp_kube_get_json(struct rdp_kube_client *c, const char *path,
		      const struct rdp_kube_retry *policy, int *ret_status, json_t **ret)
{
	struct rdp_kube_response resp;
	json_error_t jerr;
	json_t *doc;
	int r;

	r = policy ? rdp_kube_request_retry(c, RDP_KUBE_GET, path, NULL, policy, &resp)
		   : rdp_kube_request(c, RDP_KUBE_GET, path, NULL, &resp);
	if (r < 0)
		return r;
	doc = json_loadb(resp.body, resp.body_len, 0, &jerr);
	if (!doc && resp.status >= 200 && resp.status <= 299) {
		set_msg(&c->error, "GET https://%s%.256s: %d with a body that is not JSON: %s",
			c->cfg.host, path, resp.status, jerr.text);
		rdp_kube_response_done(&resp);
		return -EBADMSG;
	}
	*ret_status = resp.status;
	*ret = doc;
	rdp_kube_response_done(&resp);
	return 0;
}

const char *rdp_kube_status_message(const json_t *status)
{
	const char *kind = json_string_value(json_object_get(status, "kind"));

	if (!kind || strcmp(kind, "Status") != 0)
		return NULL;
	return json_string_value(json_object_get(status, "message"));
}

int rdp_kube_request_stream(struct rdp_kube_client *c, const char *path, unsigned timeout_ms,
			    rdp_kube_http_stream_cb cb, void *userdata,
			    struct rdp_kube_response *resp)
{
	const struct stream st = {.cb = cb, .userdata = userdata};

	return request(c, RDP_KUBE_GET, path, NULL, timeout_ms, &st, resp);
}
