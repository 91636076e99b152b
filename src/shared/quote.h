/* SPDX-License-Identifier: MIT */
/*
 * The one way a value that a peer, an operator or the host controls is shown in a message
 * (an error answered to kubelet, a device problem, a config diagnostic): printable ASCII only,
 * bounded. Logs quote whole lines for logfmt with rdp_log_q() (log.h) on top of this.
 */
#pragma once
#include <stddef.h>

/*
 * Copies at most max bytes of s into buf (size bytes), each byte outside printable ASCII, and
 * '"' and '\\', replaced by '?', then "..." when s was longer (or buf too small). Returns buf.
 * No surrounding quotes: the caller's format has them ("value \"%s\"").
 */
const char *rdp_printable(const char *s, size_t max, char *buf, size_t size);
