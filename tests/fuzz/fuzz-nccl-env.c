/* SPDX-License-Identifier: MIT */
/*
 * The pure parsers of the pod group of doctor (doctor-pod.h) on arbitrary bytes: NCCL's list
 * syntax (NCCL_IB_HCA / NCCL_SOCKET_IFNAME) and its matcher, /proc/<pid>/limits, status,
 * mountinfo, environ and net/dev. The whole input goes to the procfs parsers (they take a
 * length and may meet NUL bytes); the list parser gets it cut at its first NUL, as a value
 * from environ is.
 *
 * Beyond "no crash": the list's bounds (entries, names NUL-terminated and shorter than 64),
 * the '=' contract (an exact entry matches only its own name), names from net/dev bounded.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor-pod.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	char *s = malloc(size + 1), val[64], names[8][RDP_NCCL_NAME_MAX];
	struct rdp_nccl_list l;
	struct rdp_mount m;
	uint64_t a, b;
	size_t n;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	for (size_t max = 0; max <= RDP_NCCL_IB_MAX_ENTRIES; max += 16) {
		rdp_nccl_list_parse(s, max, &l);
		CHECK(l.n <= max);
		for (size_t i = 0; i < l.n; i++) {
			CHECK(strlen(l.v[i].name) < RDP_NCCL_NAME_MAX && l.v[i].name[0]);
			CHECK(l.v[i].port >= -1);
			CHECK(rdp_nccl_entry_matches(&l.v[i], l.exact, l.v[i].name, l.v[i].port));
			if (l.exact) {
				char other[RDP_NCCL_NAME_MAX + 1];

				snprintf(other, sizeof(other), "%sx", l.v[i].name);
				CHECK(!rdp_nccl_entry_matches(&l.v[i], true, other, -1));
			}
			(void)rdp_nccl_list_selects(&l, l.v[i].name, 1);
		}
		(void)rdp_nccl_list_selects(&l, "mlx5_10", 1);
	}
	(void)rdp_proc_limits_memlock(buf, size, &a, &b);
	(void)rdp_proc_status_capeff(buf, size, &a);
	if (rdp_mountinfo_find(buf, size, "/dev/shm", &m) == 0)
		CHECK(strlen(m.mount_point) < sizeof(m.mount_point) && strlen(m.fstype) < sizeof(m.fstype));
	if (rdp_environ_get(buf, size, "NCCL_IB_HCA", val, sizeof(val)) >= 0)
		CHECK(strlen(val) < sizeof(val));
	(void)rdp_environ_each_prefix(buf, size, "RDMA_DEVICE_", NULL, NULL);
	n = rdp_proc_net_dev_names(buf, size, names, 8);
	for (size_t i = 0; i < n && i < 8; i++)
		CHECK(strlen(names[i]) < RDP_NCCL_NAME_MAX);
	free(s);
	return 0;
}
