/* SPDX-License-Identifier: MIT */
/*
 * The API-server client's response parser (kube-http.h) on arbitrary server bytes, without
 * TLS: fed in chunks of pseudo-random sizes, then the close.
 *
 * Input: byte 0 picks the body limit (64 bytes or RDP_KUBE_BODY_MAX), byte 1 seeds the
 * chunking; the rest is what the server sends.
 *
 * Checks beyond "no crash, no leak": a complete response has a status 200..999, a
 * NUL-terminated body within the limit, a Retry-After of -1 or 0..RDP_KUBE_RETRY_AFTER_MAX;
 * once a feed says complete or failed, the next one says the same.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kube-client.h"
#include "kube-http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdp_kube_http_parser *p;
	struct rdp_kube_response resp;
	unsigned int x;
	size_t max_body, off = 2;
	int r = 0;

	if (size < 2)
		return 0;
	max_body = data[0] & 1 ? 64 : RDP_KUBE_BODY_MAX;
	x = data[1];
	if (rdp_kube_http_parser_new(max_body, &p) < 0)
		return 0;
	while (off < size && r == 0) {
		size_t n;

		x = x * 1103515245u + 12345u;
		n = 1 + (x >> 16) % 97;
		if (n > size - off)
			n = size - off;
		r = rdp_kube_http_parser_feed(p, (const char *)data + off, n);
		off += n;
	}
	if (r == 0)
		r = rdp_kube_http_parser_feed(p, NULL, 0);
	if (r != 0 && rdp_kube_http_parser_feed(p, "x", 1) != r)
		__builtin_trap();
	if (r == 1 && rdp_kube_http_parser_take(p, &resp) == 0) {
		if (resp.status < 200 || resp.status > 999 || resp.body_len > max_body ||
		    resp.body[resp.body_len] != '\0' || resp.retry_after < -1 ||
		    resp.retry_after > RDP_KUBE_RETRY_AFTER_MAX)
			__builtin_trap();
		rdp_kube_response_done(&resp);
	}
	if (r != 0 && r != 1 && r != -E2BIG && r != -EPROTO && r != -ENOMEM)
		__builtin_trap();
	rdp_kube_http_parser_free(p);
	return 0;
}
