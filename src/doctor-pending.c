/* SPDX-License-Identifier: MIT */
/*
 * Stand-ins for the doctor groups not written yet: weak definitions, each adding one `skip`
 * result "not implemented yet". A group's real src/doctor-<group>.c defines the same function
 * strongly and the linker takes it; delete the stand-in here when its group lands (and this
 * file with the last one).
 */
#include "doctor.h"

#define PENDING(fn, group, id)                                                                     \
	__attribute__((weak)) int fn(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r) \
	{                                                                                          \
		(void)c;                                                                           \
		return rdp_doctor_add(r, group, id, RDP_CHECK_SKIP, "", NULL, NULL,                \
				      "not implemented yet");                                      \
	}

PENDING(rdp_doctor_pod, RDP_GROUP_POD, "pod.devices")
