/* SPDX-License-Identifier: MIT */
/* The bounded protobuf-c arena, and the device plugin's requests unpacked through it. */
#include <errno.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <string.h>

#include "alloc.h"
#include "deviceplugin.pb-c.h"
#include "dp-service.h"
#include "macro.h"
#include "pb.h"
#include "test.h"

/* An AllocateRequest with one container asking for n IDs, each id (possibly ""). */
static uint8_t *many_ids(size_t n, const char *id, size_t *len)
{
	V1beta1__AllocateRequest r = V1BETA1__ALLOCATE_REQUEST__INIT;
	V1beta1__ContainerAllocateRequest c = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT, *cp = &c;
	char **ids = rdp_calloc(n + 1, sizeof(char *));
	uint8_t *buf;

	for (size_t i = 0; i < n; i++)
		ids[i] = (char *)id;
	c.n_devices_ids = n;
	c.devices_ids = ids;
	r.n_container_requests = 1;
	r.container_requests = &cp;
	*len = v1beta1__allocate_request__get_packed_size(&r);
	buf = rdp_malloc(*len + 1);
	v1beta1__allocate_request__pack(&r, buf);
	rdp_free(ids);
	return buf;
}

static void test_arena_basics(void)
{
	struct rdp_pb_arena a;
	ProtobufCAllocator *al;
	void *p, *q;

	rdp_pb_arena_init(&a, 100);
	al = rdp_pb_arena_allocator(&a);
	p = al->alloc(al->allocator_data, 1);
	q = al->alloc(al->allocator_data, 3);
	EXPECT_TRUE(p && q);
	EXPECT_EQ(((uintptr_t)p) % 8, 0);
	EXPECT_EQ(((uintptr_t)q) % 8, 0);
	EXPECT_EQ(a.used, 16); /* aligned sizes are charged */
	EXPECT_TRUE(al->alloc(al->allocator_data, 84) == NULL);
	EXPECT_EQ(rdp_pb_arena_error(&a), -ENOBUFS);
	al->free(al->allocator_data, p); /* a no-op */
	rdp_pb_arena_done(&a);
	EXPECT_EQ(a.used, 0);
	EXPECT_EQ(rdp_pb_arena_error(&a), 0);
	EXPECT_TRUE(al->alloc(al->allocator_data, 96) != NULL); /* the whole budget, once */
	EXPECT_TRUE(al->alloc(al->allocator_data, (size_t)-1) == NULL);
	rdp_pb_arena_done(&a);

	/* an allocation larger than a chunk gets its own */
	rdp_pb_arena_init(&a, 1 << 20);
	p = al->alloc(al->allocator_data, 100000);
	EXPECT_TRUE(p != NULL);
	if (p)
		memset(p, 0xaa, 100000);
	rdp_pb_arena_done(&a);

	/* malloc failure is told apart from the budget */
	rdp_pb_arena_init(&a, 1 << 20);
	rdp_alloc_fail_at(1);
	EXPECT_TRUE(al->alloc(al->allocator_data, 10) == NULL);
	rdp_alloc_fail_at(0);
	EXPECT_EQ(rdp_pb_arena_error(&a), -ENOMEM);
	rdp_pb_arena_done(&a);
}

static void test_unpack_bounded(void)
{
	_cleanup_(rdp_pb_arena_done) struct rdp_pb_arena a = RDP_PB_ARENA_INIT(1 << 20);
	V1beta1__AllocateRequest *m;
	size_t len;
	uint8_t *buf;

	/* 100 normal IDs unpack well within the budget */
	buf = many_ids(100, "17", &len);
	m = v1beta1__allocate_request__unpack(rdp_pb_arena_allocator(&a), len, buf);
	EXPECT_TRUE(m != NULL);
	if (m) {
		EXPECT_EQ(m->container_requests[0]->n_devices_ids, 100);
		EXPECT_STREQ(m->container_requests[0]->devices_ids[99], "17");
		v1beta1__allocate_request__free_unpacked(m, rdp_pb_arena_allocator(&a));
	}
	EXPECT_TRUE(a.used < 8192); /* 100 pointers and strings, two messages, scan slabs */
	if (a.used >= 8192)
		fprintf(stderr, "used %zu\n", a.used);
	rdp_free(buf);
	rdp_pb_arena_done(&a);

	/* 128 Ki empty IDs: 256 KiB on the wire, 2 MiB unpacked: refused by the budget */
	buf = many_ids(128 * 1024, "", &len);
	EXPECT_TRUE(len < 256 * 1024 + 16);
	m = v1beta1__allocate_request__unpack(rdp_pb_arena_allocator(&a), len, buf);
	EXPECT_TRUE(m == NULL);
	EXPECT_EQ(rdp_pb_arena_error(&a), -ENOBUFS);
	EXPECT_TRUE(a.used <= 1 << 20);
	rdp_free(buf);
}

/* Allocate and GetPreferredAllocation answer a budget failure with a message naming it. */
static void test_dp_service(void)
{
	struct rdp_dp_state s;
	uint8_t *buf, *out = NULL;
	char *err = NULL;
	size_t len, out_len = 0;
	int r;

	memset(&s, 0, sizeof(s));
	buf = many_ids(128 * 1024, "", &len);
	r = rdp_dp_allocate(&s, buf, len, &out, &out_len, &err);
	EXPECT_EQ(r, -ENOBUFS);
	EXPECT_CONTAINS(err, "more than 524288 bytes");
	rdp_free(err);
	err = NULL;
	rdp_free(out);
	out = NULL;
	/* the same bytes read as a GetPreferredAllocation request (fields 1 and 1.1 alike) */
	r = rdp_dp_preferred_allocation(&s, buf, len, &out, &out_len, &err);
	EXPECT_EQ(r, -ENOBUFS);
	EXPECT_CONTAINS(err, "more than 524288 bytes");
	rdp_free(err);
	rdp_free(out);
	rdp_free(buf);
}

int main(void)
{
	test_arena_basics();
	test_unpack_bounded();
	test_dp_service();
	return test_summary("test-pb");
}
