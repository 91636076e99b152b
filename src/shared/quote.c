/* SPDX-License-Identifier: MIT */
#include "quote.h"

#include <string.h>

const char *rdp_printable(const char *s, size_t max, char *buf, size_t size)
{
	size_t i, o = 0;

	if (size == 0)
		return buf;
	for (i = 0; s[i] && i < max && o + 4 < size; i++) {
		unsigned char c = (unsigned char)s[i];

		buf[o++] = (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') ? (char)c : '?';
	}
	if (s[i])
		for (int k = 0; k < 3 && o + 1 < size; k++)
			buf[o++] = '.';
	buf[o] = '\0';
	return buf;
}
