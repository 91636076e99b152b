/* SPDX-License-Identifier: MIT */
/*
 * gRPC framing on arbitrary bytes: message reassembly from DATA chunks of fuzzer-chosen sizes,
 * grpc-message percent-decoding (and encode/decode round trips), grpc-timeout parsing (and
 * format/parse round trips).
 *
 * Input: byte 0 picks the reader's max message size, byte 1 seeds the chunk sizes; the rest
 * is the stream. The same rest is also given to the string parsers.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "grpc-frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
	size_t n, bytes, max;
};

static int on_msg(uint8_t *msg, size_t len, void *userdata)
{
	struct seen *s = userdata;

	if (len > s->max || (len && !msg))
		__builtin_trap();
	if (len)
		msg[len - 1] ^= 1; /* the whole message is ours to touch */
	s->n++;
	s->bytes += len;
	rdp_free(msg);
	/* a callback error must stop the reader cleanly, too */
	return s->n == 1000 ? -ECANCELED : 0;
}

static void fuzz_reader(const uint8_t *data, size_t size, size_t max, uint8_t seed)
{
	struct rdp_grpc_reader r;
	struct seen s = { .max = max };
	size_t off = 0, total = 0;
	unsigned int x = seed | 1;
	int k = 0, first_err = 0;

	rdp_grpc_reader_init(&r, max);
	while (off < size) {
		size_t chunk;

		x = x * 1103515245u + 12345u;
		chunk = 1 + (x >> 16) % 64;
		if (chunk > size - off)
			chunk = size - off;
		k = rdp_grpc_reader_feed(&r, data + off, chunk, on_msg, &s);
		if (k < 0) {
			if (k != -EMSGSIZE && k != -EBADMSG && k != -ENOMEM && k != -ECANCELED &&
			    k != -EIO)
				__builtin_trap();
			if (!first_err)
				first_err = k;
			else if (k != -EIO && k != first_err)
				__builtin_trap(); /* after an error: refused */
		}
		off += chunk;
		total += chunk;
	}
	/* prefix bytes + payload bytes account for everything delivered */
	if (!first_err && s.bytes + s.n * RDP_GRPC_PREFIX_LEN > total)
		__builtin_trap();
	(void)rdp_grpc_reader_partial(&r);
	rdp_grpc_reader_done(&r);
}

static void fuzz_strings(const uint8_t *data, size_t size)
{
	char *dec, *enc, *back;
	uint64_t usec;

	dec = rdp_grpc_percent_decode((const char *)data, size);
	if (!dec)
		return;
	if (strlen(dec) > size)
		__builtin_trap();
	/* encode(decoded) decodes back to decoded */
	enc = rdp_grpc_percent_encode(dec);
	if (enc) {
		size_t i;

		for (i = 0; enc[i]; i++)
			if (enc[i] < 0x20 || enc[i] > 0x7e)
				__builtin_trap();
		back = rdp_grpc_percent_decode(enc, strlen(enc));
		if (back && strcmp(back, dec))
			__builtin_trap();
		rdp_free(back);
	}
	rdp_free(enc);
	rdp_free(dec);

	if (rdp_grpc_timeout_parse((const char *)data, size, &usec) == 0 && usec > 0) {
		char buf[16];
		uint64_t again;
		size_t n = rdp_grpc_timeout_format(usec, buf);

		if (n == 0 || n >= sizeof(buf) || buf[n] != '\0')
			__builtin_trap();
		if (rdp_grpc_timeout_parse(buf, n, &again) < 0 || again < usec)
			__builtin_trap(); /* formatting may round up, never down */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t maxes[] = { 0, 1, 5, 16, 100, 4096, 4u << 20 };
	uint8_t pfx[RDP_GRPC_PREFIX_LEN];

	if (size < 2 || size > 1 << 16)
		return 0;
	fuzz_reader(data + 2, size - 2, maxes[data[0] % (sizeof(maxes) / sizeof(maxes[0]))],
		    data[1]);
	fuzz_strings(data + 2, size - 2);
	/* the prefix encodes the length big-endian after a zero flag */
	rdp_grpc_prefix(pfx, size);
	if (pfx[0] != 0 || ((size_t)pfx[1] << 24 | (size_t)pfx[2] << 16 | (size_t)pfx[3] << 8 |
			    pfx[4]) != size)
		__builtin_trap();
	return 0;
}
