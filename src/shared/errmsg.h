/* SPDX-License-Identifier: MIT */
/*
 * One way to say why in a caller's buffer: library code that returns a negative errno and
 * also explains it in one line (a bad address, a status file that is not one).
 */
#pragma once
#include <stddef.h>

#include "macro.h"

/* Formats into err (errlen bytes; both may be 0/NULL: nothing written) and returns code. */
int rdp_errmsg(char *err, size_t errlen, int code, const char *fmt, ...) _printf_(4, 5);
