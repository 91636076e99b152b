/* SPDX-License-Identifier: MIT */
/* Small language helpers shared by every module: cleanup attributes and ownership transfer. */
#pragma once
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#include "alloc.h"

/* The struct holding member, from a pointer to it. */
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _warn_unused_result_ __attribute__((warn_unused_result))

static inline void rdp_freep(void *p)
{
	rdp_free(*(void **)p);
}

static inline void rdp_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
	}
}

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _cleanup_free_ _cleanup_(rdp_freep)
#define _cleanup_close_ _cleanup_(rdp_closep)

/* Hand a pointer or fd over to a new owner and forget it here. */
#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		typeof(p) _p = (p);                                                                \
		(p) = NULL;                                                                        \
		_p;                                                                                \
	})
#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _fd = (fd);                                                                    \
		(fd) = -1;                                                                         \
		_fd;                                                                               \
	})

/* Declare a cleanup helper for a type whose destructor returns NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                                                    \
	static inline void func##p(type *p)                                                        \
	{                                                                                          \
		if (*p)                                                                            \
			func(*p);                                                                  \
	}

static inline const char *strempty(const char *s)
{
	return s ? s : "";
}
