/* SPDX-License-Identifier: MIT */
/*
 * The watch event parser (kube-watch.h) on arbitrary stream bytes, fed in chunks of
 * pseudo-random sizes.
 *
 * Input: byte 0 picks the event bound (64 bytes or RDP_KUBE_WATCH_EVENT_MAX) and whether the
 * callback stops at the third event, byte 1 seeds the chunking; the rest is the stream.
 *
 * Checks beyond "no crash, no leak": every event handed on has a known type and an object;
 * results are 0, 1 (only when the callback stopped), -E2BIG, -EBADMSG or -ENOMEM, and once
 * non-zero, the next feed says the same and calls nothing.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kube-watch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct state {
	unsigned events;
	bool stop;
	bool stopped;
	bool sealed;
};

static int on_event(enum rdp_kube_watch_type t, json_t *obj, void *userdata)
{
	struct state *s = userdata;

	if (s->sealed || !rdp_kube_watch_type_name(t) || !json_is_object(obj))
		__builtin_trap();
	(void)rdp_kube_object_rv(obj);
	s->events++;
	if (s->stop && s->events == 3) {
		s->stopped = true;
		return 1;
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdp_kube_watch_parser *p;
	struct state s = {0};
	unsigned int x;
	size_t off = 2;
	int r = 0;

	if (size < 2)
		return 0;
	s.stop = data[0] & 2;
	x = data[1];
	if (rdp_kube_watch_parser_new(data[0] & 1 ? 64 : RDP_KUBE_WATCH_EVENT_MAX, &p) < 0)
		return 0;
	while (off < size && r == 0) {
		size_t n;

		x = x * 1103515245u + 12345u;
		n = 1 + (x >> 16) % 97;
		if (n > size - off)
			n = size - off;
		r = rdp_kube_watch_parser_feed(p, (const char *)data + off, n, on_event, &s);
		off += n;
	}
	if (r == 1 && !s.stopped)
		__builtin_trap();
	if (r != 0 && r != 1 && r != -E2BIG && r != -EBADMSG && r != -ENOMEM)
		__builtin_trap();
	if (r != 0) {
		s.sealed = true;
		if (rdp_kube_watch_parser_feed(p, "{\"type\":\"ADDED\",\"object\":{}}\n", 30,
					       on_event, &s) != r)
			__builtin_trap();
	}
	rdp_kube_watch_parser_free(p);
	return 0;
}
