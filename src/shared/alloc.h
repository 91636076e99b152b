/* SPDX-License-Identifier: MIT */
/*
 * Every allocation of the project goes through here, so that a test can make the n-th one
 * fail (in the manner of nghttp2's failmalloc and curl's torture mode).
 */
#pragma once
#include <stddef.h>

#include <nghttp2/nghttp2.h>

void *rdp_malloc(size_t size);
void *rdp_calloc(size_t nmemb, size_t size);
void *rdp_realloc(void *p, size_t size);
/* realloc of nmemb * size bytes, failing with NULL on overflow. */
void *rdp_reallocarray(void *p, size_t nmemb, size_t size);
char *rdp_strdup(const char *s);
char *rdp_strndup(const char *s, size_t n);
/* Returns a newly allocated formatted string, or NULL. */
char *rdp_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rdp_free(void *p);

/*
 * Failure injection. rdp_alloc_fail_at(n) makes the n-th allocation from now fail (1-based),
 * 0 turns it off. rdp_alloc_count() returns how many allocations were made since the last
 * rdp_alloc_fail_at() call.
 */
void rdp_alloc_fail_at(unsigned long n);
unsigned long rdp_alloc_count(void);

/* The nghttp2 allocator that routes through the functions above. */
nghttp2_mem *rdp_nghttp2_mem(void);
/* A protobuf-c allocator likewise. */
struct ProtobufCAllocator;
struct ProtobufCAllocator *rdp_protobuf_allocator(void);
