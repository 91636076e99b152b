/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp doctor: checks that name what stands between a pod and NCCL over RDMA, one result
 * per check and subject, each with a stable ID, a status, the finding (the device and the
 * value measured), the symptom it explains (in the words NCCL logs) and the fix.
 *
 * The checks are grouped in the order a fix has to follow (a module not loaded explains a
 * port that is missing; a port down explains a GPU without a NIC...); rdp_doctor_order()
 * sorts a report that way, failures first within a group, so the first `fail` is the first
 * thing to fix. A check that cannot run (file absent, no permission) is `skip` with why,
 * never `ok`.
 *
 * Each group is one function over the same context (the roots and the models every other
 * command reads): rdp_doctor_<group>(ctx, report). Library code: results go to the report,
 * nothing is logged; functions return 0 or a negative errno (-ENOMEM), never fail a check by
 * returning an error.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

#include "config.h"
#include "device.h"
#include "macro.h"
#include "pool.h"
#include "topology.h"

enum rdp_check_status {
	RDP_CHECK_OK,
	RDP_CHECK_SKIP, /* could not run: the finding says why */
	RDP_CHECK_WARN,
	RDP_CHECK_FAIL,
	_RDP_CHECK_STATUS_MAX,
};

/* "ok", "skip", "warn", "fail". */
const char *rdp_check_status_name(enum rdp_check_status s);

/* In the order a fix follows. */
enum rdp_check_group {
	RDP_GROUP_STACK, /* kernel modules, RDMA netns mode, rdma_cm */
	RDP_GROUP_PLUGIN, /* rdma-dp itself: config, sockets, units, unusable devices */
	RDP_GROUP_PORTS, /* port state, link layer, rate, RoCE GID and MTU */
	RDP_GROUP_PCIE, /* link speed and width of NICs and GPUs */
	RDP_GROUP_PLACEMENT, /* GPU-NIC distance in the PCIe tree */
	RDP_GROUP_GPUDIRECT, /* peermem / DMA-BUF, IOMMU, ACS */
	RDP_GROUP_CONGESTION, /* loss and retry counters rising */
	RDP_GROUP_POD, /* the workload's side: devices, memlock, /dev/shm, NCCL variables */
	_RDP_GROUP_MAX,
};

/* "stack", "plugin", "ports", "pcie", "placement", "gpudirect", "congestion", "pod". */
const char *rdp_check_group_name(enum rdp_check_group g);

struct rdp_check {
	enum rdp_check_group group;
	char *id; /* stable: "port.state" (docs/troubleshooting.md has an anchor per ID) */
	enum rdp_check_status status;
	char *subject; /* "mlx5_3 port 1", "GPU2 (0000:52:00.0)", "" for the node */
	char *finding; /* what was measured: "state DOWN, physical state Disabled" */
	char *symptom; /* what it causes, NCCL's words: "NET/IB : No device found." ("" for ok) */
	char *fix; /* what to do ("" for ok) */
	size_t seq; /* order of adding */
};

struct rdp_doctor_report {
	struct rdp_check *v;
	size_t n, cap;
};

#define RDP_DOCTOR_MAX_CHECKS 65536 /* results in one report: beyond, rdp_doctor_add -E2BIG */
#define RDP_DOCTOR_TEXT_MAX 2048 /* bytes of one finding, symptom or fix (longer: cut, "...") */

/*
 * Adds a result. symptom and fix may be NULL (""); finding is printf-formatted. Strings are
 * copied (bounded, control characters shown as '?'). Returns 0, -ENOMEM, -E2BIG.
 */
int rdp_doctor_add(struct rdp_doctor_report *r, enum rdp_check_group g, const char *id,
		   enum rdp_check_status s, const char *subject, const char *symptom,
		   const char *fix, const char *finding_fmt, ...) _printf_(8, 9);
void rdp_doctor_report_done(struct rdp_doctor_report *r);
/* Sorts by group (enum order), then fail, warn, skip, ok, then the order of adding. */
void rdp_doctor_order(struct rdp_doctor_report *r);
size_t rdp_doctor_count(const struct rdp_doctor_report *r, enum rdp_check_status s);
/*
 * A result of r with this id and status whose subject starts with subject_prefix (NULL: any
 * subject), or NULL. For a later group to tell a consequence from a cause: a finding that an
 * earlier check's failure explains is reported as `warn` naming that check, so that on any
 * one fault only the check of its cause fails.
 */
const struct rdp_check *rdp_doctor_find(const struct rdp_doctor_report *r, const char *id,
					enum rdp_check_status s, const char *subject_prefix);

/*
 * The report as text, in the report's order (call rdp_doctor_order() first): a header line
 * per group ("stack:"), then one line per result,
 *   "  <status> <id> <subject>: <finding>"
 * the status padded to 4 and the ID to the longest ID of the report, ": " and the subject
 * left out for a node-wide result (subject ""); a warn or fail result goes on with
 *   " | symptom: <symptom>" (when there is one) " | fix: <fix>" (when there is one)
 * on the same line. A blank line, then the summary line
 *   "doctor: N checks: F fail, W warn, S skip, O ok"
 * Returns 0, or -EIO when f fails.
 */
int rdp_doctor_render_text(const struct rdp_doctor_report *r, FILE *f);
/*
 * The report as a JSON document:
 *   {"checks": [{"id": "port.state", "group": "ports", "status": "fail", "subject": "...",
 *                "finding": "...", "symptom": "...", "fix": "..."}, ...],
 *    "summary": {"checks": N, "fail": F, "warn": W, "skip": S, "ok": O}}
 * checks in the report's order, every key always present (strings, "" when none).
 * NULL when out of memory.
 */
json_t *rdp_doctor_to_json(const struct rdp_doctor_report *r);
/* rdp_doctor_to_json() printed (indent 2, keys in that order, a final newline): 0, -ENOMEM,
 * -EIO. */
int rdp_doctor_render_json(const struct rdp_doctor_report *r, FILE *f);
/* The exit status of `rdma-dp doctor`: 1 when a result is fail, else 0. */
int rdp_doctor_exit_status(const struct rdp_doctor_report *r);

/* What every group reads. Pointers may be NULL where said. */
struct rdp_doctor_ctx {
	int sys_fd; /* the sysfs root (rdp_sysfs_open_root) */
	int dev_fd; /* the dev root */
	int proc_fd; /* the proc root; -1: none (the checks that need it skip) */
	const char *sysfs_root, *dev_root, *proc_root; /* the same, as paths, for messages */
	const char *kubelet_root; /* for the plugin's sockets and status; NULL: skip */
	const struct rdp_host *host; /* discovery with every GID slot (as `discover`) */
	const struct rdp_topo *topo; /* GPUs and NICs in the PCIe tree; NULL: none read */
	const struct rdp_config *config; /* NULL: no config (the config's checks skip) */
	const char *config_path; /* as given, for messages */
	const struct rdp_diags *config_diags; /* its diagnostics (NULL: none) */
	const struct rdp_pools *pools; /* the config's pools on host; NULL with config */
	unsigned int interval_ms; /* counters: the time between the two samples */
	pid_t pid; /* pod checks: the process to look at under the proc root; 0: "self" */
};

/* The groups. Each adds one or more results to r; 0 or -ENOMEM. */
int rdp_doctor_stack(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r);
int rdp_doctor_plugin(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r);
int rdp_doctor_ports(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r);
int rdp_doctor_pcie(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r);
int rdp_doctor_placement(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r);
int rdp_doctor_gpudirect(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r);
int rdp_doctor_congestion(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r);
int rdp_doctor_pod(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r);
