/* SPDX-License-Identifier: MIT */
/*
 * gRPC framing pieces that need no connection: the 5-byte length prefix and the reassembly of
 * messages from arbitrary DATA chunks, grpc-message percent-encoding, grpc-timeout values.
 * Pure functions over memory, so tests and fuzzers can drive them directly.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDP_GRPC_PREFIX_LEN 5

/* Writes the uncompressed prefix for a message of len bytes (len must fit in 32 bits). */
void rdp_grpc_prefix(uint8_t out[RDP_GRPC_PREFIX_LEN], size_t len);

/*
 * Reassembles length-prefixed messages. The payload buffer grows with the bytes actually
 * received (not with the declared length), and never beyond max.
 */
struct rdp_grpc_reader {
	size_t max;
	uint8_t hdr[RDP_GRPC_PREFIX_LEN];
	size_t hdr_len;
	uint8_t *buf;
	size_t len, cap, want;
	uint64_t too_big; /* declared length of the message refused with -EMSGSIZE */
	uint8_t bad_flag; /* the flag byte refused with -EBADMSG */
	bool failed;
};

void rdp_grpc_reader_init(struct rdp_grpc_reader *r, size_t max);
void rdp_grpc_reader_done(struct rdp_grpc_reader *r);
/*
 * Feeds bytes; calls cb for every complete message, handing over msg (rdp_malloc'ed, NULL for
 * an empty message; cb owns it). Returns 0; -EMSGSIZE when a declared length exceeds max;
 * -EBADMSG when the compressed flag is not 0; -ENOMEM; or cb's negative return. After an
 * error the reader refuses further input with the same error class (-EIO).
 */
int rdp_grpc_reader_feed(struct rdp_grpc_reader *r, const uint8_t *data, size_t len,
			 int (*cb)(uint8_t *msg, size_t len, void *userdata), void *userdata);
/* True while part of a message (prefix or payload) has been received. */
bool rdp_grpc_reader_partial(const struct rdp_grpc_reader *r);

/*
 * Percent-encodes a grpc-message value as grpc-go does: every byte outside 0x20..0x7E, and
 * '%', becomes %XX (upper-case hex). Returns a new string or NULL (ENOMEM).
 */
char *rdp_grpc_percent_encode(const char *s);
/* Decodes %XX sequences; malformed ones are kept verbatim. Returns a new string or NULL. */
char *rdp_grpc_percent_decode(const char *s, size_t len);

/*
 * Parses a grpc-timeout value (1..8 ASCII digits followed by one of H M S m u n) into
 * microseconds, rounding nanoseconds up. Returns 0 or -EINVAL.
 */
int rdp_grpc_timeout_parse(const char *s, size_t len, uint64_t *ret_usec);
/*
 * Formats usec (> 0) as grpc-go does: the finest unit whose value fits in 8 digits.
 * buf must hold 16 bytes. Returns the length.
 */
size_t rdp_grpc_timeout_format(uint64_t usec, char buf[16]);
