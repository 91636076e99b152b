/* SPDX-License-Identifier: MIT */
/*
 * rescan-time SYSFS_ROOT DEV_ROOT [N] [full|fast|both] [FLAGS]: times N
 * (default 20) full discoveries and N rescans of an unchanged host through a scanner, and prints the median and best wall and
 * CPU time of each, in ms. With "full" or "fast" it does only that kind, so that
 * `strace -c -f rescan-time ... 1 fast` counts the system calls of one cheap rescan (plus
 * the first, full, scan the scanner needs; run "full" alongside to subtract it).
 * "serve" uses the daemon's scanner flags (RDP_DISCOVER_SERVE, discovery.h and rescan.h) for
 * both; "serve-no-gid-table" adds RDP_DISCOVER_NO_GID_TABLE (a config without ifNames
 * selectors); "no-gid-index" is RDP_DISCOVER_NO_GID_INDEX alone (what the daemon passed
 * before RDP_DISCOVER_SERVE).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <unistd.h>

#include "discovery.h"
#include "rescan.h"
#include "sysfs.h"

static double ms(clockid_t id)
{
	struct timespec t;

	clock_gettime(id, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, double *wall, double *cpu, int n)
{
	qsort(wall, (size_t)n, sizeof(*wall), cmp_double);
	qsort(cpu, (size_t)n, sizeof(*cpu), cmp_double);
	printf("%-28s wall median %8.3f ms best %8.3f ms | cpu median %8.3f ms best %8.3f ms\n",
	       what, wall[n / 2], wall[0], cpu[n / 2], cpu[0]);
}

/* rdp_discover() with flags: opening the roots is part of what is timed, as there. */
static int discover_flags(const char *sys, const char *dev, unsigned int flags,
			  struct rdp_host **ret)
{
	int sfd, dfd, r;

	r = rdp_sysfs_open_roots(sys, dev, &sfd, &dfd);
	if (r < 0)
		return r;
	r = rdp_discover_flags_at(sfd, dfd, flags, ret, NULL);
	close(sfd);
	close(dfd);
	return r;
}

int main(int argc, char **argv)
{
	const char *only = argc > 4 ? argv[4] : "";
	const char *fl = argc > 5 ? argv[5] : "";
	unsigned int flags = strcmp(fl, "serve") == 0 ? RDP_DISCOVER_SERVE
			     : strcmp(fl, "serve-no-gid-table") == 0
				     ? RDP_DISCOVER_SERVE | RDP_DISCOVER_NO_GID_TABLE
			     : strcmp(fl, "no-gid-index") == 0 ? RDP_DISCOVER_NO_GID_INDEX
							       : 0;
	struct rdp_scanner *s = NULL;
	double *wall, *cpu;
	int n, r;

	if (argc < 3) {
		fprintf(stderr, "usage: %s SYSFS_ROOT DEV_ROOT [N] [full|fast|both] "
			"[serve|serve-no-gid-table|no-gid-index]\n",
			argv[0]);
		return 2;
	}
	n = argc > 3 ? atoi(argv[3]) : 20;
	if (n < 1)
		n = 1;
	wall = calloc((size_t)n, sizeof(*wall));
	cpu = calloc((size_t)n, sizeof(*cpu));
	if (!wall || !cpu)
		return 1;

	if (strcmp(only, "fast") != 0) {
		for (int i = 0; i < n; i++) {
			struct rdp_host *h = NULL;
			double w0 = ms(CLOCK_MONOTONIC), c0 = ms(CLOCK_PROCESS_CPUTIME_ID);

			r = flags ? discover_flags(argv[1], argv[2], flags, &h)
				  : rdp_discover(argv[1], argv[2], &h);
			wall[i] = ms(CLOCK_MONOTONIC) - w0;
			cpu[i] = ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
			if (r < 0) {
				fprintf(stderr, "discovery: %s\n", strerror(-r));
				return 1;
			}
			if (i == 0)
				printf("devices: %zu\n", h->n_devices);
			rdp_host_free(h);
		}
		report("full discovery", wall, cpu, n);
	}
	if (strcmp(only, "full") == 0)
		return 0;

	r = rdp_scanner_new_flags(argv[1], argv[2], flags, &s);
	if (r >= 0)
		r = rdp_scanner_scan(s, RDP_SCAN_AUTO);
	if (r < 0) {
		fprintf(stderr, "scanner: %s\n", strerror(-r));
		return 1;
	}
	for (int i = 0; i < n; i++) {
		double w0 = ms(CLOCK_MONOTONIC), c0 = ms(CLOCK_PROCESS_CPUTIME_ID);

		r = rdp_scanner_scan(s, RDP_SCAN_AUTO);
		wall[i] = ms(CLOCK_MONOTONIC) - w0;
		cpu[i] = ms(CLOCK_PROCESS_CPUTIME_ID) - c0;
		if (r != 0 || rdp_scanner_stats(s)->last_full) {
			fprintf(stderr, "rescan %d: returned %d, %s\n", i, r,
				rdp_scanner_stats(s)->last_full ? "full" : "cheap");
			return 1;
		}
	}
	report("rescan, nothing changed", wall, cpu, n);
	rdp_scanner_free(s);
	free(wall);
	free(cpu);
	return 0;
}
