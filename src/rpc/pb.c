/* SPDX-License-Identifier: MIT */
#include "pb.h"

#include <errno.h>
#include <stdint.h>

#include "macro.h"

#define CHUNK_SIZE 16384
#define ALIGN 8

struct rdp_pb_chunk {
	struct rdp_pb_chunk *next;
	size_t size, used;
	_Alignas(16) unsigned char data[];
};

static void *arena_alloc(void *ud, size_t size)
{
	struct rdp_pb_arena *a = ud;
	struct rdp_pb_chunk *c = a->chunks;
	size_t n;

	if (size > SIZE_MAX - ALIGN)
		size = SIZE_MAX - ALIGN; /* fails the budget below */
	n = (size + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	if (n == 0)
		n = ALIGN;
	if (n > a->budget - a->used) {
		a->over_budget = true;
		return NULL;
	}
	if (!c || c->size - c->used < n) {
		size_t sz = n > CHUNK_SIZE ? n : CHUNK_SIZE;

		/* never more than the budget left: the last chunk is no bigger than needed */
		if (sz > a->budget - a->used)
			sz = n;
		c = rdp_malloc(sizeof(*c) + sz);
		if (!c) {
			a->out_of_memory = true;
			return NULL;
		}
		c->size = sz;
		c->used = 0;
		c->next = a->chunks;
		a->chunks = c;
	}
	a->used += n;
	c->used += n;
	return c->data + c->used - n;
}

static void arena_free(void *ud, void *p)
{
	(void)ud;
	(void)p;
}

void rdp_pb_arena_init(struct rdp_pb_arena *a, size_t budget)
{
	*a = (struct rdp_pb_arena){
		.allocator = { .alloc = arena_alloc, .free = arena_free, .allocator_data = a },
		.budget = budget,
	};
}

void rdp_pb_arena_done(struct rdp_pb_arena *a)
{
	while (a->chunks) {
		struct rdp_pb_chunk *c = a->chunks;

		a->chunks = c->next;
		rdp_free(c);
	}
	rdp_pb_arena_init(a, a->budget);
}

ProtobufCAllocator *rdp_pb_arena_allocator(struct rdp_pb_arena *a)
{
	/* set here too: RDP_PB_ARENA_INIT cannot point the allocator at its own arena */
	a->allocator = (ProtobufCAllocator){
		.alloc = arena_alloc, .free = arena_free, .allocator_data = a
	};
	return &a->allocator;
}

int rdp_pb_arena_error(const struct rdp_pb_arena *a)
{
	if (a->out_of_memory)
		return -ENOMEM;
	if (a->over_budget)
		return -ENOBUFS;
	return 0;
}

int rdp_pb_pack(const ProtobufCMessage *m, uint8_t **ret, size_t *ret_len)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = rdp_malloc(n ? n : 1);

	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(m, buf);
	*ret = buf;
	*ret_len = n;
	return 0;
}
