/* SPDX-License-Identifier: MIT */
#include "alloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>
#include <protobuf-c/protobuf-c.h>

/* Atomic: the daemon's scan worker allocates on its own thread. */
static unsigned long alloc_count;
static unsigned long alloc_fail_at;

void rdp_alloc_fail_at(unsigned long n)
{
	__atomic_store_n(&alloc_fail_at, n, __ATOMIC_RELAXED);
	__atomic_store_n(&alloc_count, 0, __ATOMIC_RELAXED);
}

unsigned long rdp_alloc_count(void)
{
	return __atomic_load_n(&alloc_count, __ATOMIC_RELAXED);
}

/* Counts one allocation; true when this one is to fail. */
static int alloc_should_fail(void)
{
	unsigned long n = __atomic_add_fetch(&alloc_count, 1, __ATOMIC_RELAXED);
	unsigned long at = __atomic_load_n(&alloc_fail_at, __ATOMIC_RELAXED);

	return at && n == at;
}

void *rdp_malloc(size_t size)
{
	if (alloc_should_fail()) {
		errno = ENOMEM;
		return NULL;
	}
	return malloc(size ? size : 1);
}

void *rdp_calloc(size_t nmemb, size_t size)
{
	if (alloc_should_fail()) {
		errno = ENOMEM;
		return NULL;
	}
	return calloc(nmemb ? nmemb : 1, size ? size : 1);
}

void *rdp_realloc(void *p, size_t size)
{
	if (alloc_should_fail()) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(p, size ? size : 1);
}

void *rdp_reallocarray(void *p, size_t nmemb, size_t size)
{
	if (size && nmemb > SIZE_MAX / size) {
		errno = ENOMEM;
		return NULL;
	}
	return rdp_realloc(p, nmemb * size);
}

char *rdp_strdup(const char *s)
{
	return rdp_strndup(s, strlen(s));
}

char *rdp_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *d = rdp_malloc(len + 1);

	if (!d)
		return NULL;
	memcpy(d, s, len);
	d[len] = '\0';
	return d;
}

char *rdp_asprintf(const char *fmt, ...)
{
	va_list ap;
	int len;
	char *s;

	va_start(ap, fmt);
	len = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (len < 0)
		return NULL;
	s = rdp_malloc((size_t)len + 1);
	if (!s)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(s, (size_t)len + 1, fmt, ap);
	va_end(ap);
	return s;
}

void rdp_free(void *p)
{
	free(p);
}

static void *ng_malloc(size_t size, void *ud)
{
	(void)ud;
	return rdp_malloc(size);
}

static void ng_free(void *p, void *ud)
{
	(void)ud;
	rdp_free(p);
}

static void *ng_calloc(size_t nmemb, size_t size, void *ud)
{
	(void)ud;
	return rdp_calloc(nmemb, size);
}

static void *ng_realloc(void *p, size_t size, void *ud)
{
	(void)ud;
	return rdp_realloc(p, size);
}

static nghttp2_mem ng_mem = {
	.mem_user_data = NULL,
	.malloc = ng_malloc,
	.free = ng_free,
	.calloc = ng_calloc,
	.realloc = ng_realloc,
};

nghttp2_mem *rdp_nghttp2_mem(void)
{
	return &ng_mem;
}

static void *pb_alloc(void *ud, size_t size)
{
	(void)ud;
	return rdp_malloc(size);
}

static void pb_free(void *ud, void *p)
{
	(void)ud;
	rdp_free(p);
}

static ProtobufCAllocator pb_allocator = {
	.alloc = pb_alloc,
	.free = pb_free,
	.allocator_data = NULL,
};

struct ProtobufCAllocator *rdp_protobuf_allocator(void)
{
	return &pb_allocator;
}
