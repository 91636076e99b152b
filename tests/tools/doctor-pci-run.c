/* SPDX-License-Identifier: MIT */
/*
 * doctor-pci-run SYSFS_ROOT DEV_ROOT [PROC_ROOT]: runs the doctor's pcie, placement and
 * gpudirect groups (src/doctor-{pcie,placement,gpudirect}.c) on a (fixture) node, as
 * `rdma-dp doctor` does with its discovery and topology model, and prints each result as one
 * JSON line {"group","id","status","subject","finding","symptom","fix"} in report order
 * (rdp_doctor_order). For tests/integration/test_doctor_pci.py, until the CLI exists.
 * Exit 0 no fail, 1 a fail, 2 usage or setup error.
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "discovery.h"
#include "doctor.h"
#include "sysfs.h"
#include "topology.h"

int main(int argc, char **argv)
{
	struct rdp_doctor_ctx c = {.sys_fd = -1, .dev_fd = -1, .proc_fd = -1};
	struct rdp_doctor_report rep = {0};
	struct rdp_host *h = NULL;
	struct rdp_topo *t = NULL;
	int e, rc;

	if (argc < 3 || argc > 4) {
		fprintf(stderr, "usage: %s SYSFS_ROOT DEV_ROOT [PROC_ROOT]\n", argv[0]);
		return 2;
	}
	if ((e = rdp_sysfs_open_roots(argv[1], argv[2], &c.sys_fd, &c.dev_fd)) < 0 ||
	    (argc == 4 && (e = rdp_sysfs_open_root(argv[3], &c.proc_fd)) < 0)) {
		fprintf(stderr, "doctor-pci-run: roots: %s\n", strerror(-e));
		return 2;
	}
	c.sysfs_root = argv[1];
	c.dev_root = argv[2];
	c.proc_root = argc == 4 ? argv[3] : NULL;
	if ((e = rdp_discover_at(c.sys_fd, c.dev_fd, &h)) < 0 ||
	    (e = rdp_topo_read_at(c.sys_fd, h, &t)) < 0) {
		fprintf(stderr, "doctor-pci-run: discovery/topology: %s\n", strerror(-e));
		return 2;
	}
	c.host = h;
	c.topo = t;
	if ((e = rdp_doctor_pcie(&c, &rep)) < 0 || (e = rdp_doctor_placement(&c, &rep)) < 0 ||
	    (e = rdp_doctor_gpudirect(&c, &rep)) < 0) {
		fprintf(stderr, "doctor-pci-run: %s\n", strerror(-e));
		return 2;
	}
	rdp_doctor_order(&rep);
	for (size_t i = 0; i < rep.n; i++) {
		const struct rdp_check *k = &rep.v[i];
		json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "group",
				      rdp_check_group_name(k->group), "id", k->id, "status",
				      rdp_check_status_name(k->status), "subject", k->subject,
				      "finding", k->finding, "symptom", k->symptom, "fix", k->fix);
		char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;

		if (!s) {
			fprintf(stderr, "doctor-pci-run: JSON failed\n");
			return 2;
		}
		puts(s);
		free(s);
		json_decref(j);
	}
	rc = rdp_doctor_count(&rep, RDP_CHECK_FAIL) ? 1 : 0;
	rdp_doctor_report_done(&rep);
	rdp_topo_free(t);
	rdp_host_free(h);
	close(c.sys_fd);
	close(c.dev_fd);
	if (c.proc_fd >= 0)
		close(c.proc_fd);
	return rc;
}
