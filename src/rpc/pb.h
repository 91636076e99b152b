/* SPDX-License-Identifier: MIT */
/*
 * protobuf-c helpers: the one way messages are packed (rdp_pb_pack), and a bounded arena for
 * unpack.
 *
 * The arena:  protobuf-c unpacks a message in one call, allocating
 * every repeated field's pointer array and every string; a message of many tiny fields (two
 * million empty IDs fit in 4 MB) expands to about 30 times its wire size with malloc's per
 * block overhead. The arena hands protobuf-c bump-allocated memory from a few rdp_malloc'ed
 * chunks and fails the unpack once the budget (bytes handed out, 8-byte aligned) is spent,
 * so the expansion is bounded before it happens. free is a no-op; rdp_pb_arena_done() gives
 * everything back at once.
 *
 * Usage:
 *	_cleanup_(rdp_pb_arena_done) struct rdp_pb_arena a = RDP_PB_ARENA_INIT(1 << 20);
 *	m = foo__unpack(rdp_pb_arena_allocator(&a), len, buf);
 *	if (!m) r = rdp_pb_arena_error(&a) ?: -EBADMSG;
 *	...
 *	foo__free_unpacked(m, rdp_pb_arena_allocator(&a));  (optional: a no-op)
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

struct rdp_pb_chunk;

struct rdp_pb_arena {
	ProtobufCAllocator allocator;
	size_t budget;       /* bytes protobuf-c may get in total */
	size_t used;         /* bytes handed out so far (aligned) */
	struct rdp_pb_chunk *chunks;
	bool over_budget;    /* an allocation was refused for the budget */
	bool out_of_memory;  /* an rdp_malloc failed */
};

/* Static initializer, for use with _cleanup_(rdp_pb_arena_done). */
#define RDP_PB_ARENA_INIT(b) { .budget = (b) }

/*
 * Packs m into a fresh rdp_malloc'd buffer (never NULL on success: an empty message gives a
 * 1-byte buffer and *ret_len 0). Returns 0 or -ENOMEM.
 */
int rdp_pb_pack(const ProtobufCMessage *m, uint8_t **ret, size_t *ret_len);

void rdp_pb_arena_init(struct rdp_pb_arena *a, size_t budget);
/* Frees every chunk; the arena may be used again (the budget is restored). */
void rdp_pb_arena_done(struct rdp_pb_arena *a);
ProtobufCAllocator *rdp_pb_arena_allocator(struct rdp_pb_arena *a);
/* Why the last unpack failed, as far as the arena knows: -ENOBUFS (budget), -ENOMEM, or 0. */
int rdp_pb_arena_error(const struct rdp_pb_arena *a);
