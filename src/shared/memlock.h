/* SPDX-License-Identifier: MIT */
/*
 * RLIMIT_MEMLOCK values as the config ("memlock"), the DRA opaque parameters and the OCI
 * hook's arguments spell them: "unlimited", a number of bytes ("1073741824"), or a number with
 * a binary suffix ("64Ki", "512Mi", "1Gi", "2Ti"; "K", "M", "G", "T" mean the same). 0 means
 * "leave the container's limit alone" (no hook in the spec).
 *
 * Strict: no sign, no space, no fraction, no other suffix, at most 20 digits, no overflow
 * (-ERANGE). Pure; never logs.
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define RDP_MEMLOCK_UNLIMITED UINT64_MAX /* RLIM_INFINITY */
#define RDP_MEMLOCK_LEAVE 0
#define RDP_MEMLOCK_STR_MAX 24 /* "unlimited", or 20 digits, with the NUL */

/* 0 with *ret; -EINVAL for anything not spelled as above, -ERANGE above 2^64-2 bytes. */
int rdp_memlock_parse(const char *s, uint64_t *ret);

/* "unlimited" or the number of bytes in decimal (what rdp_memlock_parse() reads back). */
int rdp_memlock_format(uint64_t v, char *buf, size_t size);
