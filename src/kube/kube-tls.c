/* SPDX-License-Identifier: MIT */
/* TLS client connections over mbedTLS 2.28; see kube-tls.h. */
#define _GNU_SOURCE
#include "kube-tls.h"
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

#include "macro.h"

struct rdp_tls_ctx {
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
	mbedtls_x509_crt ca;
	mbedtls_ssl_config conf;
};

struct rdp_tls_conn {
	int fd;
	int stop_fd;
	uint64_t deadline_ms;
	int io_errno; /* what the socket callbacks met, for the caller's errno */
	mbedtls_ssl_context ssl;
};

/* The one ALPN protocol offered; mbedTLS keeps the pointer. */
static const char *alpn_protocols[] = {"http/1.1", NULL};

uint64_t rdp_tls_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void set_error(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static void set_error(char **ret_error, const char *fmt, ...)
{
	va_list ap;
	char buf[512];

	if (!ret_error)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	rdp_free(*ret_error);
	*ret_error = rdp_strdup(buf);
}

static void tls_strerror(int ret, char *buf, size_t len)
{
	mbedtls_strerror(ret, buf, len);
}

/* Reads the whole of a bounded file, NUL-terminated (mbedTLS wants the NUL counted in PEM). */
static int read_bounded(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0)
		return -errno;
	return rdp_read_file_fd(fd, max, ret, ret_len);
}

int rdp_tls_ctx_new(const char *ca_file, struct rdp_tls_ctx **ret, char **ret_error)
{
	static const unsigned char pers[] = "rdma-dp kube-tls";
	_cleanup_free_ char *pem = NULL;
	struct rdp_tls_ctx *ctx;
	char msg[160];
	size_t len = 0;
	int r;

	r = read_bounded(ca_file, RDP_TLS_CA_MAX, &pem, &len);
	if (r < 0) {
		set_error(ret_error, "cannot read CA file '%s': %s", ca_file,
			  r == -EFBIG ? "larger than 1 MiB" : strerror(-r));
		return r;
	}
	ctx = rdp_calloc(1, sizeof(*ctx));
	if (!ctx)
		return -ENOMEM;
	mbedtls_entropy_init(&ctx->entropy);
	mbedtls_ctr_drbg_init(&ctx->drbg);
	mbedtls_x509_crt_init(&ctx->ca);
	mbedtls_ssl_config_init(&ctx->conf);

	/* A PEM bundle wants its NUL counted; DER is taken as it is. */
	r = mbedtls_x509_crt_parse(&ctx->ca, (const unsigned char *)pem,
				   strstr(pem, "-----BEGIN ") ? len + 1 : len);
	if (r < 0 || ctx->ca.version == 0) {
		tls_strerror(r, msg, sizeof(msg));
		set_error(ret_error, "CA file '%s' holds no usable certificate: %s", ca_file,
			  r < 0 ? msg : "none parsed");
		rdp_tls_ctx_free(ctx);
		return -EINVAL;
	}
	/* r > 0: some certificates of the bundle did not parse; the others are used. */
	r = mbedtls_ctr_drbg_seed(&ctx->drbg, mbedtls_entropy_func, &ctx->entropy, pers,
				  sizeof(pers) - 1);
	if (r != 0) {
		tls_strerror(r, msg, sizeof(msg));
		set_error(ret_error, "cannot seed the random generator: %s", msg);
		rdp_tls_ctx_free(ctx);
		return -EIO;
	}
	r = mbedtls_ssl_config_defaults(&ctx->conf, MBEDTLS_SSL_IS_CLIENT,
					MBEDTLS_SSL_TRANSPORT_STREAM, MBEDTLS_SSL_PRESET_DEFAULT);
	if (r == 0)
		r = mbedtls_ssl_conf_alpn_protocols(&ctx->conf, alpn_protocols);
	if (r != 0) {
		tls_strerror(r, msg, sizeof(msg));
		set_error(ret_error, "TLS configuration: %s", msg);
		rdp_tls_ctx_free(ctx);
		return r == MBEDTLS_ERR_SSL_ALLOC_FAILED ? -ENOMEM : -EIO;
	}
	mbedtls_ssl_conf_authmode(&ctx->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
	mbedtls_ssl_conf_ca_chain(&ctx->conf, &ctx->ca, NULL);
	mbedtls_ssl_conf_rng(&ctx->conf, mbedtls_ctr_drbg_random, &ctx->drbg);
	mbedtls_ssl_conf_min_version(&ctx->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
				     MBEDTLS_SSL_MINOR_VERSION_3);
	mbedtls_ssl_conf_renegotiation(&ctx->conf, MBEDTLS_SSL_RENEGOTIATION_DISABLED);
	*ret = ctx;
	return 0;
}

void rdp_tls_ctx_free(struct rdp_tls_ctx *ctx)
{
	if (!ctx)
		return;
	mbedtls_ssl_config_free(&ctx->conf);
	mbedtls_x509_crt_free(&ctx->ca);
	mbedtls_ctr_drbg_free(&ctx->drbg);
	mbedtls_entropy_free(&ctx->entropy);
	rdp_free(ctx);
}

/* Waits until fd is ready for events, the deadline passes or stop_fd is readable. */
static int wait_fd(int fd, short events, uint64_t deadline_ms, int stop_fd)
{
	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = events},
				      {.fd = stop_fd, .events = POLLIN}};
		uint64_t now = rdp_tls_now_ms();
		int timeout, n;

		if (now >= deadline_ms)
			return -ETIMEDOUT;
		timeout = deadline_ms - now > INT_MAX ? INT_MAX : (int)(deadline_ms - now);
		n = poll(p, stop_fd >= 0 ? 2 : 1, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			continue; /* the deadline check above ends it */
		if (stop_fd >= 0 && (p[1].revents & POLLIN))
			return -ECANCELED;
		if (p[0].revents)
			return 0;
	}
}

static int bio_send(void *userdata, const unsigned char *buf, size_t len)
{
	struct rdp_tls_conn *c = userdata;

	for (;;) {
		ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
		int r;

		if (n >= 0)
			return (int)n; /* mbedTLS never asks for more than a record */
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			c->io_errno = errno;
			return errno == EPIPE || errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET
								     : MBEDTLS_ERR_NET_SEND_FAILED;
		}
		r = wait_fd(c->fd, POLLOUT, c->deadline_ms, c->stop_fd);
		if (r < 0) {
			c->io_errno = -r;
			return MBEDTLS_ERR_NET_SEND_FAILED;
		}
	}
}

static int bio_recv(void *userdata, unsigned char *buf, size_t len)
{
	struct rdp_tls_conn *c = userdata;

	for (;;) {
		ssize_t n = recv(c->fd, buf, len, 0);
		int r;

		if (n >= 0)
			return (int)n; /* 0: EOF, which mbedTLS reports as such */
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			c->io_errno = errno;
			return errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET
						   : MBEDTLS_ERR_NET_RECV_FAILED;
		}
		r = wait_fd(c->fd, POLLIN, c->deadline_ms, c->stop_fd);
		if (r < 0) {
			c->io_errno = -r;
			return MBEDTLS_ERR_NET_RECV_FAILED;
		}
	}
}

/* The errno for an mbedTLS failure: what the socket met, else by kind. */
static int map_error(struct rdp_tls_conn *c, int ret, const char *what, char **ret_error)
{
	char msg[160];

	if (c->io_errno) {
		set_error(ret_error, "%s: %s", what,
			  c->io_errno == ETIMEDOUT   ? "timed out"
			  : c->io_errno == ECANCELED ? "stopped"
						     : strerror(c->io_errno));
		return -c->io_errno;
	}
	if (ret == MBEDTLS_ERR_SSL_ALLOC_FAILED)
		return -ENOMEM;
	if (ret == MBEDTLS_ERR_NET_CONN_RESET) {
		set_error(ret_error, "%s: connection reset by the server", what);
		return -ECONNRESET;
	}
	if (ret == MBEDTLS_ERR_SSL_CONN_EOF) {
		set_error(ret_error, "%s: the server closed the connection", what);
		return -ECONNRESET;
	}
	tls_strerror(ret, msg, sizeof(msg));
	set_error(ret_error, "%s: %s", what, msg);
	return -EPROTO;
}

static int tcp_connect(const struct sockaddr *addr, socklen_t addrlen, uint64_t deadline_ms,
		       int stop_fd, char **ret_error)
{
	_cleanup_close_ int fd = -1;
	socklen_t elen = sizeof(int);
	int one = 1, err = 0, r;

	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, addr, addrlen) < 0) {
		if (errno != EINPROGRESS && errno != EINTR) {
			r = -errno;
			set_error(ret_error, "connect: %s", strerror(-r));
			return r;
		}
		r = wait_fd(fd, POLLOUT, deadline_ms, stop_fd);
		if (r < 0) {
			set_error(ret_error, "connect: %s",
				  r == -ETIMEDOUT ? "timed out" : strerror(-r));
			return r;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0)
			return -errno;
		if (err) {
			set_error(ret_error, "connect: %s", strerror(err));
			return -err;
		}
	}
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return TAKE_FD(fd);
}

int rdp_tls_connect(struct rdp_tls_ctx *ctx, const struct sockaddr *addr, socklen_t addrlen,
		    const char *server_name, uint64_t deadline_ms, int stop_fd,
		    struct rdp_tls_conn **ret, char **ret_error)
{
	struct rdp_tls_conn *c;
	char info[512];
	int fd, r;

	fd = tcp_connect(addr, addrlen, deadline_ms, stop_fd, ret_error);
	if (fd < 0)
		return fd;
	c = rdp_calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->fd = fd;
	c->stop_fd = stop_fd;
	c->deadline_ms = deadline_ms;
	mbedtls_ssl_init(&c->ssl);
	r = mbedtls_ssl_setup(&c->ssl, &ctx->conf);
	if (r == 0)
		r = mbedtls_ssl_set_hostname(&c->ssl, server_name);
	if (r != 0) {
		r = map_error(c, r, "TLS setup", ret_error);
		rdp_tls_conn_free(c);
		return r;
	}
	mbedtls_ssl_set_bio(&c->ssl, c, bio_send, bio_recv, NULL);
	do
		r = mbedtls_ssl_handshake(&c->ssl);
	while (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE);
	if (r == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED) {
		uint32_t flags = mbedtls_ssl_get_verify_result(&c->ssl);
		size_t n;

		mbedtls_x509_crt_verify_info(info, sizeof(info), "", flags);
		/* one line: the flags' texts joined by "; " */
		for (char *p = info; *p; p++)
			if (*p == '\n')
				*p = p[1] ? ';' : '\0';
		n = strlen(info);
		while (n && info[n - 1] == ';')
			info[--n] = '\0';
		set_error(ret_error,
			  "TLS: the server certificate failed verification for name '%s': %s",
			  server_name, info);
		rdp_tls_conn_free(c);
		return -EKEYREJECTED;
	}
	if (r != 0) {
		r = map_error(c, r, "TLS handshake", ret_error);
		rdp_tls_conn_free(c);
		return r;
	}
	*ret = c;
	return 0;
}

int rdp_tls_write(struct rdp_tls_conn *c, const void *buf, size_t len, uint64_t deadline_ms,
		  char **ret_error)
{
	const unsigned char *p = buf;

	c->deadline_ms = deadline_ms;
	c->io_errno = 0;
	while (len) {
		int r = mbedtls_ssl_write(&c->ssl, p, len);

		if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		if (r < 0)
			return map_error(c, r, "TLS write", ret_error);
		p += r;
		len -= (size_t)r;
	}
	return 0;
}

ssize_t rdp_tls_read(struct rdp_tls_conn *c, void *buf, size_t len, uint64_t deadline_ms,
		     char **ret_error)
{
	c->deadline_ms = deadline_ms;
	c->io_errno = 0;
	for (;;) {
		int r = mbedtls_ssl_read(&c->ssl, buf, len);

		if (r > 0)
			return r;
		if (r == 0 || r == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY ||
		    r == MBEDTLS_ERR_SSL_CONN_EOF)
			return 0;
		if (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		return map_error(c, r, "TLS read", ret_error);
	}
}

bool rdp_tls_conn_stale(struct rdp_tls_conn *c)
{
	struct pollfd p = {.fd = c->fd, .events = POLLIN};

	if (mbedtls_ssl_get_bytes_avail(&c->ssl) > 0)
		return true;
	return poll(&p, 1, 0) != 0; /* readable, hung up, error, or poll failing */
}

const char *rdp_tls_conn_version(struct rdp_tls_conn *c)
{
	return mbedtls_ssl_get_version(&c->ssl);
}

const char *rdp_tls_conn_alpn(struct rdp_tls_conn *c)
{
	return mbedtls_ssl_get_alpn_protocol(&c->ssl);
}

void rdp_tls_conn_free(struct rdp_tls_conn *c)
{
	if (!c)
		return;
	if (c->fd >= 0) {
		c->deadline_ms = 0; /* one attempt, never a wait */
		c->stop_fd = -1;
		(void)mbedtls_ssl_close_notify(&c->ssl);
		close(c->fd);
	}
	mbedtls_ssl_free(&c->ssl);
	rdp_free(c);
}
