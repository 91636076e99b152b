/* SPDX-License-Identifier: MIT */
/*
 * The preferred allocation of an exclusive pool (the heart of GetPreferredAllocation): which
 * `size` of a pool's units a container should get so that they sit as close to one another in
 * the PCIe tree as possible (same switch before same root port before same NUMA node before
 * across sockets), always containing the must-include units. Pure: no I/O, no logging, the
 * same input gives the same output.
 *
 * Cost of a set (smaller is better, compared in this order):
 *   1. the number of unhealthy members that are not must-include;
 *   2. the number of member pairs at each rdp_topo_level(), compared from the worst level
 *      (RDP_TOPO_NONE, then SYS, NODE, PHB, PXB, PIX, X) down, so the worst pairwise level
 *      decides first and then how many pairs sit at it;
 *   3. the sorted list of indexes, lexicographically (lowest index wins a tie; the caller
 *      sorts units by PCI address, so this is "lowest PCI address").
 *
 * Algorithm (a heuristic; the exact problem is NP-hard in general): greedy growth. Starting
 * from the must-include units (in must[] order) the unit that is added next is the one that
 * minimises (unhealthy, its per-level pair counts to the current set from the worst level
 * down, index); every candidate's counts are kept up to date incrementally, one level per
 * candidate per added unit. With must empty the growth is tried from several seeds: one per
 * "parent group" (units with the same root, NUMA node and chain minus its last element, e.g.
 * the VFs of one PF or the PFs of one card, are interchangeable up to their index: the
 * group's lowest index is its seed), healthy seeds only unless no unit is healthy, and the
 * set of least cost is returned. Unhealthy units are thus taken only when must-included or
 * when the healthy ones run out; virtual units (rxe, siw: level NONE to everything) come
 * last. On a tree whose levels nest (switch inside root port inside host bridge inside
 * NUMA node), the worst level of the result is the best possible.
 *
 * Bound: one growth costs about n * size level computations (integer compares on chains
 * interned once, O(total chain length) memory). The number of seeds tried is capped so that
 * seeds * n * size <= RDP_PREFER_BUDGET (2^26): beyond it only the first seeds in index
 * order are tried, and always at least one. With n <= RDP_PREFER_MAX_UNITS (8192, the
 * pool's bound) the worst case is one growth of 8192 * 4096 or two of 8192 * 4096 / 2..., at
 * most 2^26 level computations (see the figures in the report of the commit adding it).
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "topology.h"

#define RDP_PREFER_MAX_UNITS 8192
#define RDP_PREFER_BUDGET (1ULL << 23) /* candidate-steps over all seeds (~100 ms) */

/* One candidate unit. */
struct rdp_prefer_unit {
	const struct rdp_topo_dev *place; /* its position in the PCIe tree (never NULL) */
	bool unhealthy;			  /* chosen only when must-included or nothing else is left */
};

/*
 * Chooses `size` of the n units (indexes 0..n-1), containing every index of must[] (n_must,
 * distinct, each < n), the set whose members are closest to one another in the PCIe tree
 * (see above). Units are given sorted by their ID (the caller sorts by PCI address), so
 * "lowest index" is the deterministic tie-break. Writes the chosen indexes, ascending, to
 * ret[0..size-1]. Returns 0; -EINVAL when size > n or size < n_must, or must[] has an index
 * >= n or twice (the caller has already produced a message); -ENOMEM. Pure.
 */
int rdp_prefer(const struct rdp_prefer_unit *units, size_t n, const size_t *must, size_t n_must,
	       size_t size, size_t *ret);

/* For tests: grouped false grows over single units instead of groups of interchangeable
 * ones (n instead of the number of groups per step); the result is the same. */
int rdp_prefer_mode(const struct rdp_prefer_unit *units, size_t n, const size_t *must,
		    size_t n_must, size_t size, size_t *ret, bool grouped);
