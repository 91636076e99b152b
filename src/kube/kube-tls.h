/* SPDX-License-Identifier: MIT */
/*
 * A TLS client connection to the Kubernetes API server, over mbedTLS 2.28 (Debian's
 * libmbedtls-dev, linked statically). Client side only, for kube-client.c.
 *
 * What it does and does not:
 *   - TLS 1.2 only. mbedTLS 2.28's TLS 1.3 (MBEDTLS_SSL_PROTO_TLS1_3_EXPERIMENTAL) is
 *     experimental and not built into Debian's library; an API server started with
 *     --tls-min-version=VersionTLS13 cannot be reached.
 *   - The server certificate must chain to the CA file (verify required) and carry the name
 *     given as server_name, which is also sent as SNI. mbedTLS 2.28 never matches IP SANs
 *     (it compares the name with DNS SANs and the CN only): connect to the IP, verify a DNS
 *     name. kube-client uses "kubernetes.default.svc" (RDP_KUBE_DEFAULT_SERVER_NAME) when the
 *     address is an IP, which kube-apiserver's serving certificate always carries.
 *   - ALPN offers "http/1.1" only.
 *   - Randomness: mbedtls_entropy (getrandom(2)) seeding a CTR_DRBG.
 *   - I/O: a non-blocking socket and poll(2) against an absolute deadline (CLOCK_MONOTONIC ms)
 *     and an optional stop fd (an eventfd or a pipe's read end): when the stop fd becomes
 *     readable, the operation under way ends with -ECANCELED. Poll rather than SO_RCVTIMEO:
 *     a socket timeout cannot watch a stop fd, and restarts on every byte received.
 *
 * Threading: a context and its connections belong to one thread at a time (the CTR_DRBG has
 * no lock). mbedTLS allocates with the libc's calloc/free (Debian builds it without
 * MBEDTLS_PLATFORM_MEMORY), not through alloc.h; everything else here does.
 *
 * Errors (negative errno; *ret_error, when given, gets an allocated sentence):
 *   -ETIMEDOUT deadline passed, -ECANCELED stop fd readable, -ECONNREFUSED and the other
 *   connect(2)/send(2)/recv(2) errnos as they come, -EKEYREJECTED the certificate failed
 *   verification (untrusted, expired, wrong name), -EPROTO any other TLS failure, -EINVAL a
 *   CA file without a certificate, -EFBIG a CA file over RDP_TLS_CA_MAX, -ENOMEM.
 *
 * Library code: no logging.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define RDP_TLS_CA_MAX (1024 * 1024) /* bytes of a CA bundle */

struct rdp_tls_ctx;
struct rdp_tls_conn;

/* CLOCK_MONOTONIC in milliseconds: the clock of every deadline here. */
uint64_t rdp_tls_now_ms(void);

/* Loads the PEM bundle ca_file (bounded) and seeds the RNG. */
int rdp_tls_ctx_new(const char *ca_file, struct rdp_tls_ctx **ret, char **ret_error);
void rdp_tls_ctx_free(struct rdp_tls_ctx *ctx);

/*
 * TCP connect to addr and TLS handshake, verifying server_name, before deadline_ms. stop_fd
 * may be -1. On success *ret is a connection ready for requests.
 */
int rdp_tls_connect(struct rdp_tls_ctx *ctx, const struct sockaddr *addr, socklen_t addrlen,
		    const char *server_name, uint64_t deadline_ms, int stop_fd,
		    struct rdp_tls_conn **ret, char **ret_error);

/* Writes all len bytes. 0 or negative errno. */
int rdp_tls_write(struct rdp_tls_conn *c, const void *buf, size_t len, uint64_t deadline_ms,
		  char **ret_error);

/*
 * Reads up to len bytes: > 0 bytes read, 0 the peer closed (close_notify or a plain FIN),
 * negative errno.
 */
ssize_t rdp_tls_read(struct rdp_tls_conn *c, void *buf, size_t len, uint64_t deadline_ms,
		     char **ret_error);

/*
 * True when an idle connection can no longer carry a request: the peer closed it, reset it,
 * or sent something nobody asked for. One poll(2) with a zero timeout.
 */
bool rdp_tls_conn_stale(struct rdp_tls_conn *c);

/* "TLSv1.2"; the negotiated ALPN protocol or NULL. */
const char *rdp_tls_conn_version(struct rdp_tls_conn *c);
const char *rdp_tls_conn_alpn(struct rdp_tls_conn *c);

/* Sends close_notify if the socket takes it at once, closes, frees. NULL is fine. */
void rdp_tls_conn_free(struct rdp_tls_conn *c);
