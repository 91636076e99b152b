/* SPDX-License-Identifier: MIT */
/* Decimal numbers as sysfs, the config and the hook's arguments write them. */
#pragma once
#include <stdint.h>

/*
 * The unsigned decimal at the start of s (at most 20 digits, no sign, no blank) into *ret.
 * Returns how many digits it took (> 0), -EINVAL when s starts with none or has more than 20,
 * -ERANGE when the value does not fit 64 bits. What follows the digits is the caller's.
 */
int rdp_decimal_prefix(const char *s, uint64_t *ret);
