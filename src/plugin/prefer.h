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
 *   3. the number of virtual members that are not must-include (so that virtual units go
 *      last even where no pair is counted, e.g. size 1);
 *   4. the sorted list of indexes, lexicographically (lowest index wins a tie; the caller
 *      sorts units by PCI address, so this is "lowest PCI address").
 *
 * Algorithm (a heuristic; the exact problem is NP-hard in general): greedy growth. Starting
 * from the must-include units (in must[] order) the unit added next is the one minimising
 * (unhealthy, its per-level pair counts to the current set from the worst level down,
 * virtual, index). Candidates are "parent groups": units with the same root, NUMA node and
 * chain minus its last element (the VFs of one PF, the PFs of one card) are interchangeable
 * up to their index, so a group offers its lowest healthy unit (else its lowest unhealthy
 * one) and one count vector serves the whole group, updated incrementally: one level per
 * group per added unit. That is exact unless two units share a place or a unit sits below
 * another in the tree (checked once, conservatively by PCI address); then every unit is its
 * own group (same result, slower). With must empty the growth is tried from several seeds,
 * one per parent group (its lowest healthy index; the lowest index when no unit is
 * healthy), in index order, and the set of least cost is kept. Unhealthy units are thus
 * taken only when must-included or when the healthy ones run out; virtual units (rxe, siw:
 * level NONE to everything) come last. On random nested trees of up to 12 units (the unit
 * test) the result always has the fewest unhealthy members and the best worst level
 * possible, and is the set of least cost ~99% of the time.
 *
 * Bound: one growth costs about groups * size candidate-steps (a level computation on
 * chains interned once, integer compares, plus a vector compare) and O(n) to reset; memory
 * is O(n + total chain length). The seeds tried are capped so that
 * seeds * (groups * size + n) <= RDP_PREFER_BUDGET (2^23, about 70 ms on the 2-core dev
 * machine): beyond it only the first seeds in index order are tried, always at least one.
 * The one growth that is always done costs at most n * size (2^25 for 8192 units, size 4096,
 * when the grouping is not exact: a pathological pool, a few hundred ms); for a real pool
 * (groups of VFs) it is a few ms.
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
	bool unhealthy; /* chosen only when must-included or nothing else is left */
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
