/* SPDX-License-Identifier: MIT */
/*
 * What the doctor's "ports" and "congestion" groups (doctor-ports.c, doctor-congestion.c)
 * share with their tests: the RoCE MTU rule and the loss counters they watch. The groups
 * themselves are declared in doctor.h.
 */
#pragma once
#include <stddef.h>

#include "doctor.h"

/*
 * The RoCE MTU the kernel derives from a netdev MTU (iboe_get_mtu(), include/rdma/ib_addr.h):
 * the MTU minus 96 bytes of headers (GRH 40, UDP 8, BTH 12, XRC 4, AtomicETH 28, ICRC 4),
 * rounded down to 4096/2048/1024/512/256; 0 below 352. mlx5 then takes the minimum with the
 * port's max MTU (4096).
 */
int rdp_doctor_roce_mtu(long netdev_mtu);

/* A hw_counters file counters.loss watches, with what it means when it rises. */
struct rdp_loss_counter {
	const char *name; /* "out_of_sequence" */
	enum rdp_check_status status; /* when it rises: RDP_CHECK_WARN or RDP_CHECK_FAIL */
	const char *meaning; /* "out-of-sequence packets received: packets lost upstream" */
};

extern const struct rdp_loss_counter rdp_loss_counters[];
extern const size_t rdp_n_loss_counters;
