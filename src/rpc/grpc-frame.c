/* SPDX-License-Identifier: MIT */
#include "grpc-frame.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"

void rdp_grpc_prefix(uint8_t out[RDP_GRPC_PREFIX_LEN], size_t len)
{
	out[0] = 0;
	out[1] = (uint8_t)(len >> 24);
	out[2] = (uint8_t)(len >> 16);
	out[3] = (uint8_t)(len >> 8);
	out[4] = (uint8_t)len;
}

void rdp_grpc_reader_init(struct rdp_grpc_reader *r, size_t max)
{
	*r = (struct rdp_grpc_reader){ .max = max };
}

void rdp_grpc_reader_done(struct rdp_grpc_reader *r)
{
	rdp_free(r->buf);
	r->buf = NULL;
	r->len = r->cap = r->want = r->hdr_len = 0;
}

bool rdp_grpc_reader_partial(const struct rdp_grpc_reader *r)
{
	return r->hdr_len > 0;
}

static int reader_emit(struct rdp_grpc_reader *r,
		       int (*cb)(uint8_t *msg, size_t len, void *userdata), void *userdata)
{
	uint8_t *msg = r->buf;
	size_t len = r->len;

	r->buf = NULL;
	r->len = r->cap = r->want = r->hdr_len = 0;
	return cb(msg, len, userdata);
}

int rdp_grpc_reader_feed(struct rdp_grpc_reader *r, const uint8_t *data, size_t len,
			 int (*cb)(uint8_t *msg, size_t len, void *userdata), void *userdata)
{
	int ret;

	if (r->failed)
		return -EIO;
	while (len > 0) {
		if (r->hdr_len < RDP_GRPC_PREFIX_LEN) {
			size_t n = RDP_GRPC_PREFIX_LEN - r->hdr_len;
			uint64_t want;

			if (n > len)
				n = len;
			memcpy(r->hdr + r->hdr_len, data, n);
			r->hdr_len += n;
			data += n;
			len -= n;
			if (r->hdr_len < RDP_GRPC_PREFIX_LEN)
				break;
			if (r->hdr[0] != 0) {
				r->bad_flag = r->hdr[0];
				r->failed = true;
				return -EBADMSG;
			}
			want = (uint64_t)r->hdr[1] << 24 | (uint64_t)r->hdr[2] << 16 |
			       (uint64_t)r->hdr[3] << 8 | r->hdr[4];
			if (want > r->max) {
				r->too_big = want;
				r->failed = true;
				return -EMSGSIZE;
			}
			r->want = (size_t)want;
			if (r->want == 0) {
				ret = reader_emit(r, cb, userdata);
				if (ret < 0) {
					r->failed = true;
					return ret;
				}
			}
			continue;
		}
		{
			size_t n = r->want - r->len;

			if (n > len)
				n = len;
			if (r->len + n > r->cap) {
				size_t cap = r->cap ? r->cap : 4096;
				uint8_t *p;

				while (cap < r->len + n)
					cap *= 2;
				if (cap > r->want)
					cap = r->want;
				p = rdp_realloc(r->buf, cap);
				if (!p) {
					r->failed = true;
					return -ENOMEM;
				}
				r->buf = p;
				r->cap = cap;
			}
			memcpy(r->buf + r->len, data, n);
			r->len += n;
			data += n;
			len -= n;
			if (r->len == r->want) {
				ret = reader_emit(r, cb, userdata);
				if (ret < 0) {
					r->failed = true;
					return ret;
				}
			}
		}
	}
	return 0;
}

static bool needs_escape(unsigned char c)
{
	return c < 0x20 || c > 0x7e || c == '%';
}

char *rdp_grpc_percent_encode(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0, i;
	char *out, *p;

	for (i = 0; s[i]; i++)
		n += needs_escape((unsigned char)s[i]) ? 3 : 1;
	out = rdp_malloc(n + 1);
	if (!out)
		return NULL;
	for (p = out, i = 0; s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (needs_escape(c)) {
			*p++ = '%';
			*p++ = hex[c >> 4];
			*p++ = hex[c & 15];
		} else {
			*p++ = (char)c;
		}
	}
	*p = '\0';
	return out;
}

static int unhex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *rdp_grpc_percent_decode(const char *s, size_t len)
{
	char *out, *p;
	size_t i;

	out = rdp_malloc(len + 1);
	if (!out)
		return NULL;
	for (p = out, i = 0; i < len; i++) {
		if (s[i] == '%' && i + 2 < len) {
			int hi = unhex(s[i + 1]);
			int lo = unhex(s[i + 2]);

			if (hi >= 0 && lo >= 0) {
				*p++ = (char)(hi << 4 | lo);
				i += 2;
				continue;
			}
		}
		*p++ = s[i];
	}
	*p = '\0';
	return out;
}

int rdp_grpc_timeout_parse(const char *s, size_t len, uint64_t *ret_usec)
{
	uint64_t v = 0, usec;
	size_t i;

	if (len < 2 || len > 9)
		return -EINVAL;
	for (i = 0; i < len - 1; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	switch (s[len - 1]) {
	case 'H':
		usec = v * 3600ULL * 1000000ULL;
		break;
	case 'M':
		usec = v * 60ULL * 1000000ULL;
		break;
	case 'S':
		usec = v * 1000000ULL;
		break;
	case 'm':
		usec = v * 1000ULL;
		break;
	case 'u':
		usec = v;
		break;
	case 'n':
		usec = (v + 999) / 1000;
		break;
	default:
		return -EINVAL;
	}
	*ret_usec = usec;
	return 0;
}

size_t rdp_grpc_timeout_format(uint64_t usec, char buf[16])
{
	static const struct {
		char unit;
		uint64_t usec;
	} units[] = { { 'u', 1 }, { 'm', 1000 }, { 'S', 1000000 }, { 'M', 60000000 },
		      { 'H', 3600000000ULL } };
	size_t i;
	int n;

	for (i = 0; i < ARRAY_SIZE(units); i++) {
		uint64_t v = (usec + units[i].usec - 1) / units[i].usec;

		if (v <= 99999999 || i == ARRAY_SIZE(units) - 1) {
			if (v > 99999999)
				v = 99999999;
			n = snprintf(buf, 16, "%llu%c", (unsigned long long)v, units[i].unit);
			return (size_t)n;
		}
	}
	return 0;
}
