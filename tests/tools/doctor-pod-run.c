/* SPDX-License-Identifier: MIT */
/*
 * doctor-pod-run PROC_ROOT PID [SYSFS_ROOT DEV_ROOT]: runs the pod group of `rdma-dp doctor`
 * (rdp_doctor_pod) on a proc tree (tests/fixtures/podproc.py) and prints each result as one
 * JSON line {"group","id","status","subject","finding","symptom","fix"}, in the order of
 * rdp_doctor_order(). PID 0 means "self": then SYSFS_ROOT and DEV_ROOT are the container's
 * /sys and /dev. Exit 0 without fail, 1 with a fail, 2 on a usage error or an error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "doctor.h"
#include "sysfs.h"

int main(int argc, char **argv)
{
	struct rdp_doctor_ctx c = {.sys_fd = -1, .dev_fd = -1, .proc_fd = -1};
	struct rdp_doctor_report r = {0};
	char *end;
	long pid;
	int e;

	if (argc != 3 && argc != 5) {
		fprintf(stderr, "usage: %s PROC_ROOT PID [SYSFS_ROOT DEV_ROOT]\n", argv[0]);
		return 2;
	}
	pid = strtol(argv[2], &end, 10);
	if (*end || pid < 0) {
		fprintf(stderr, "bad pid %s\n", argv[2]);
		return 2;
	}
	e = rdp_sysfs_open_root(argv[1], &c.proc_fd);
	if (e == 0 && argc == 5)
		e = rdp_sysfs_open_roots(argv[3], argv[4], &c.sys_fd, &c.dev_fd);
	if (e < 0) {
		fprintf(stderr, "cannot open the roots: %s\n", strerror(-e));
		return 2;
	}
	c.proc_root = argv[1];
	c.pid = (pid_t)pid;
	e = rdp_doctor_pod(&c, &r);
	if (e < 0) {
		fprintf(stderr, "rdp_doctor_pod: %s\n", strerror(-e));
		rdp_doctor_report_done(&r);
		return 2;
	}
	rdp_doctor_order(&r);
	for (size_t i = 0; i < r.n; i++) {
		const struct rdp_check *k = &r.v[i];
		json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "group",
				      rdp_check_group_name(k->group), "id", k->id, "status",
				      rdp_check_status_name(k->status), "subject", k->subject,
				      "finding", k->finding, "symptom", k->symptom, "fix", k->fix);
		char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

		if (s)
			puts(s);
		free(s);
		json_decref(o);
	}
	e = rdp_doctor_count(&r, RDP_CHECK_FAIL) ? 1 : 0;
	rdp_doctor_report_done(&r);
	close(c.proc_fd);
	if (c.sys_fd >= 0)
		close(c.sys_fd);
	if (c.dev_fd >= 0)
		close(c.dev_fd);
	return e;
}
