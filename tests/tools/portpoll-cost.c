/* SPDX-License-Identifier: MIT */
/*
 * portpoll-cost SYSFS_ROOT DEV_ROOT [TICKS] [serve]: the cost of the port-state poll
 * (portpoll.h) on a (fixture) node: every port of every device watched, TICKS (default 200)
 * ticks run back to back, and the CPU time (user + system, getrusage) per file read and per tick printed, with
 * the wall time per tick. "serve" models the host as the daemon does (RDP_DISCOVER_SERVE:
 * no phys_state, so one file per port); without it, as the DRA driver does (state and
 * phys_state). On real sysfs each read is one pread() of a kept-open attribute.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

#include <string.h>

#include "discovery.h"
#include "event.h"
#include "portpoll.h"
#include "rescan.h"

static double cpu_us(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static void on_change(const char *reason, unsigned int n, void *userdata)
{
	unsigned int *changes = userdata;

	*changes += n;
}

int main(int argc, char **argv)
{
	struct rdp_scanner *s = NULL;
	struct rdp_event *e = NULL;
	struct rdp_portpoll *p = NULL;
	unsigned int changes = 0;
	long ticks = argc > 3 ? strtol(argv[3], NULL, 10) : 200;
	double c0, w0;
	size_t files;

	if (argc < 3 || ticks <= 0) {
		fprintf(stderr, "usage: %s SYSFS_ROOT DEV_ROOT [TICKS]\n", argv[0]);
		return 2;
	}
	bool serve = argc > 4 && strcmp(argv[4], "serve") == 0;

	if (rdp_scanner_new_flags(argv[1], argv[2], serve ? RDP_DISCOVER_SERVE : 0, &s) < 0 || rdp_scanner_scan(s, RDP_SCAN_FULL) < 0 ||
	    rdp_event_new(&e) < 0 || rdp_portpoll_new(e, argv[1], 0, on_change, &changes, &p) < 0 ||
	    rdp_portpoll_set(p, rdp_scanner_host(s), NULL) < 0) {
		fprintf(stderr, "%s: cannot read the node\n", argv[0]);
		return 1;
	}
	files = rdp_portpoll_files(p);
	if (!files) {
		fprintf(stderr, "%s: no port to poll\n", argv[0]);
		return 1;
	}
	w0 = (double)rdp_now_usec();
	c0 = cpu_us();
	for (long i = 0; i < ticks; i++)
		(void)rdp_portpoll_tick(p);
	{
		double cpu = cpu_us() - c0, wall = (double)rdp_now_usec() - w0;
		double reads = (double)rdp_portpoll_reads(p);

		printf("devices=%zu files=%zu ticks=%ld reads=%.0f changes=%u\n",
		       rdp_scanner_host(s)->n_devices, files, ticks, reads, changes);
		printf("cpu_per_read_us=%.2f cpu_per_tick_ms=%.3f wall_per_tick_ms=%.3f\n",
		       cpu / reads, cpu / (double)ticks / 1000, wall / (double)ticks / 1000);
		printf("cpu_share_at_%llu_ms=%.3f%%\n", RDP_PORTPOLL_INTERVAL_USEC / 1000,
		       100.0 * (cpu / (double)ticks) / (double)RDP_PORTPOLL_INTERVAL_USEC);
	}
	rdp_portpoll_free(p);
	rdp_event_free(e);
	rdp_scanner_free(s);
	return 0;
}
