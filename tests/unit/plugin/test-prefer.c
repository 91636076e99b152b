/* SPDX-License-Identifier: MIT */
/*
 * prefer.c: the preferred allocation of an exclusive pool on hand-made PCIe trees (VFs of one
 * PF, a second card behind the same switch, a card behind two switches, another root port,
 * another host bridge of the NUMA node, the other socket), must-include, ties, unhealthy
 * units, a flat VM, virtual units, bad sizes, determinism, random small trees against an
 * exhaustive search, allocation failures, a big pool (8192 units), and the generated
 * dgx-h100 fixture (RDP_FIXTURES): 8 compute NICs, 4 per socket.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "discovery.h"
#include "macro.h"
#include "prefer.h"
#include "sysfs.h"
#include "test.h"
#include "topology.h"

/* A place from its root ("pci0000:15"), NUMA node and chain ("0000:15:01.0/0000:16:00.0");
 * chain NULL: virtual. */
static struct rdp_topo_dev mk(const char *root, int numa, const char *chain)
{
	struct rdp_topo_dev d = {.numa_node = numa};
	char *copy, *save = NULL;

	if (!chain) {
		d.is_virtual = true;
		return d;
	}
	snprintf(d.pcie_root, sizeof(d.pcie_root), "%s", root);
	d.chain = calloc(RDP_TOPO_MAX_DEPTH, sizeof(*d.chain));
	copy = strdup(chain);
	for (char *t = strtok_r(copy, "/", &save); t && d.n_chain < RDP_TOPO_MAX_DEPTH;
	     t = strtok_r(NULL, "/", &save))
		d.chain[d.n_chain++] = strdup(t);
	free(copy);
	snprintf(d.pci_address, sizeof(d.pci_address), "%s", d.chain[d.n_chain - 1]);
	return d;
}

static void done(struct rdp_topo_dev *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < d[i].n_chain; k++)
			free(d[i].chain[k]);
		free(d[i].chain);
	}
}

/* "5,6,7" */
static const char *fmt(const size_t *v, size_t n)
{
	static char buf[4096];
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && len < sizeof(buf) - 32; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%zu", i ? "," : "", v[i]);
	return buf;
}

static struct rdp_prefer_unit units[RDP_PREFER_MAX_UNITS];

static void set_units(const struct rdp_topo_dev *d, size_t n)
{
	for (size_t i = 0; i < n; i++)
		units[i] = (struct rdp_prefer_unit){.place = &d[i]};
}

/* rdp_prefer() gives 0 and `want` ("" for nothing). */
#define EXPECT_PREFER(n, must, n_must, size, want)                                                 \
	do {                                                                                       \
		size_t _ret[64];                                                                   \
		int _r = rdp_prefer(units, n, must, n_must, size, _ret);                           \
		EXPECT_EQ(_r, 0);                                                                  \
		EXPECT_STREQ(_r == 0 ? fmt(_ret, size) : "(error)", want);                         \
		_r = rdp_prefer_mode(units, n, must, n_must, size, _ret, false);                   \
		EXPECT_EQ(_r, 0);                                                                  \
		EXPECT_STREQ(_r == 0 ? fmt(_ret, size) : "(error)", want);                         \
	} while (0)

/*
 * 0,1,2  E: other socket (pci0000:97, NUMA 1), three VFs of one PF
 * 3,4    D: another host bridge of NUMA 0 (pci0000:3d), two VFs
 * 5,6    A: VFs of PF 18:00.0 on downstream port 17:00.0 of switch 16:00.0 (RP 15:01.0)
 * 7,8    B: VFs of another card on downstream port 17:01.0 of the same switch
 * 9      C: on another root port (15:03.0) of host bridge pci0000:15
 * 10     F: behind a second switch on downstream port 17:02.0 (PXB to A and B)
 */
static size_t host(struct rdp_topo_dev *d)
{
	size_t n = 0;

	d[n++] = mk("pci0000:97", 1, "0000:97:01.0/0000:98:00.2");
	d[n++] = mk("pci0000:97", 1, "0000:97:01.0/0000:98:00.3");
	d[n++] = mk("pci0000:97", 1, "0000:97:01.0/0000:98:00.4");
	d[n++] = mk("pci0000:3d", 0, "0000:3d:01.0/0000:3e:00.2");
	d[n++] = mk("pci0000:3d", 0, "0000:3d:01.0/0000:3e:00.3");
	d[n++] = mk("pci0000:15", 0, "0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.2");
	d[n++] = mk("pci0000:15", 0, "0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.3");
	d[n++] = mk("pci0000:15", 0, "0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.2");
	d[n++] = mk("pci0000:15", 0, "0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:19:00.3");
	d[n++] = mk("pci0000:15", 0, "0000:15:03.0/0000:1a:00.2");
	d[n++] =
		mk("pci0000:15", 0,
		   "0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:1b:00.0/0000:1c:00.0/0000:1d:00.2");
	return n;
}

static void test_levels_order(void)
{
	struct rdp_topo_dev d[16];
	size_t n = host(d);

	/* The fixture is what the comment says. */
	EXPECT_EQ(rdp_topo_level(&d[5], &d[6]), RDP_TOPO_PIX);
	EXPECT_EQ(rdp_topo_level(&d[5], &d[7]), RDP_TOPO_PIX);
	EXPECT_EQ(rdp_topo_level(&d[5], &d[10]), RDP_TOPO_PXB);
	EXPECT_EQ(rdp_topo_level(&d[5], &d[9]), RDP_TOPO_PHB);
	EXPECT_EQ(rdp_topo_level(&d[5], &d[3]), RDP_TOPO_NODE);
	EXPECT_EQ(rdp_topo_level(&d[5], &d[0]), RDP_TOPO_SYS);

	set_units(d, n);
	EXPECT_PREFER(n, NULL, 0, 0, "");
	EXPECT_PREFER(n, NULL, 0, 1, "0"); /* no pairs: lowest index */
	EXPECT_PREFER(n, NULL, 0, 2, "0,1"); /* every VF pair is PIX: lowest index */
	EXPECT_PREFER(n, NULL, 0, 3, "0,1,2"); /* 3 PIX pairs, as within A+B: lowest */
	EXPECT_PREFER(n, NULL, 0, 4, "5,6,7,8"); /* one switch */
	EXPECT_PREFER(n, NULL, 0, 5, "5,6,7,8,10"); /* PXB before PHB */
	EXPECT_PREFER(n, NULL, 0, 6, "5,6,7,8,9,10"); /* PHB before NODE */
	EXPECT_PREFER(n, NULL, 0, 7, "3,5,6,7,8,9,10"); /* NODE before SYS */
	EXPECT_PREFER(n, NULL, 0, 8, "3,4,5,6,7,8,9,10");
	EXPECT_PREFER(n, NULL, 0, 9, "0,3,4,5,6,7,8,9,10");
	EXPECT_PREFER(n, NULL, 0, 10, "0,1,3,4,5,6,7,8,9,10");
	EXPECT_PREFER(n, NULL, 0, 11, "0,1,2,3,4,5,6,7,8,9,10");

	/* Must-include pulls the set to its group. */
	EXPECT_PREFER(n, ((size_t[]){3}), 1, 2, "3,4");
	EXPECT_PREFER(n, ((size_t[]){7}), 1, 2, "5,7"); /* 5, 6, 8 all PIX to 7: lowest */
	EXPECT_PREFER(n, ((size_t[]){10}), 1, 4, "5,6,7,10"); /* 3 PIX + 3 PXB pairs */
	EXPECT_PREFER(n, ((size_t[]){9}), 1, 2, "5,9"); /* all of pci0000:15 is PHB to 9 */
	EXPECT_PREFER(n, ((size_t[]){9}), 1, 5, "5,6,7,8,9");
	EXPECT_PREFER(n, ((size_t[]){0}), 1, 4, "0,1,2,3"); /* then SYS to all: lowest */
	EXPECT_PREFER(n, ((size_t[]){4}), 1, 3, "3,4,5");
	/* 1 (PIX to 0, SYS to 5) and 6 (the reverse) tie: the lower index. */
	EXPECT_PREFER(n, ((size_t[]){5, 0}), 2, 3, "0,1,5");
	EXPECT_PREFER(n, ((size_t[]){8, 2}), 2, 2, "2,8"); /* size == n_must */
	EXPECT_PREFER(n, ((size_t[]){8, 2}), 2, 11, "0,1,2,3,4,5,6,7,8,9,10");

	/* Bad requests. */
	size_t ret[16];
	EXPECT_EQ(rdp_prefer(units, n, NULL, 0, n + 1, ret), -EINVAL);
	EXPECT_EQ(rdp_prefer(units, n, (size_t[]){1, 2}, 2, 1, ret), -EINVAL);
	EXPECT_EQ(rdp_prefer(units, n, (size_t[]){1, 1}, 2, 3, ret), -EINVAL);
	EXPECT_EQ(rdp_prefer(units, n, (size_t[]){11}, 1, 3, ret), -EINVAL);
	EXPECT_EQ(rdp_prefer(units, 0, NULL, 0, 0, ret), 0);
	EXPECT_EQ(rdp_prefer(units, 0, NULL, 0, 1, ret), -EINVAL);

	/* Unhealthy: avoided unless must-included or needed. */
	units[6].unhealthy = true;
	EXPECT_PREFER(n, NULL, 0, 4, "5,7,8,10");
	EXPECT_PREFER(n, ((size_t[]){6}), 1, 2, "5,6");
	EXPECT_PREFER(n, NULL, 0, 10, "0,1,2,3,4,5,7,8,9,10");
	EXPECT_PREFER(n, NULL, 0, 11, "0,1,2,3,4,5,6,7,8,9,10");
	for (size_t i = 0; i < n; i++)
		units[i].unhealthy = i != 9;
	EXPECT_PREFER(n, NULL, 0, 1, "9");
	EXPECT_PREFER(n, NULL, 0, 2, "5,9"); /* the one healthy, then the closest */
	EXPECT_PREFER(n, NULL, 0, 6, "5,6,7,8,9,10");
	for (size_t i = 0; i < n; i++)
		units[i].unhealthy = true;
	EXPECT_PREFER(n, NULL, 0, 4, "5,6,7,8"); /* all unhealthy: topology alone */
	done(d, n);
}

static void test_flat_and_virtual(void)
{
	struct rdp_topo_dev d[8];
	size_t n = 0;

	/* A flat VM: every function directly on pci0000:00 (PHB among them), one on a second
	 * host bridge (NODE: NUMA unknown on both sides is one node). */
	d[n++] = mk("pci0000:01", -1, "0000:01:00.0");
	d[n++] = mk("pci0000:00", -1, "0000:00:03.0");
	d[n++] = mk("pci0000:00", -1, "0000:00:04.0");
	d[n++] = mk("pci0000:00", -1, "0000:00:05.0");
	d[n++] = mk("pci0000:00", -1, "0000:00:06.0");
	set_units(d, n);
	EXPECT_PREFER(n, NULL, 0, 2, "1,2");
	EXPECT_PREFER(n, NULL, 0, 4, "1,2,3,4");
	EXPECT_PREFER(n, ((size_t[]){0}), 1, 2, "0,1");
	EXPECT_PREFER(n, NULL, 0, 5, "0,1,2,3,4");
	done(d, n);

	/* Virtual units (rxe) have no PCIe path: they go last. */
	n = 0;
	d[n++] = mk(NULL, -1, NULL);
	d[n++] = mk(NULL, -1, NULL);
	d[n++] = mk("pci0000:15", 0, "0000:15:01.0/0000:16:00.0");
	d[n++] = mk("pci0000:97", 1, "0000:97:01.0/0000:98:00.0");
	set_units(d, n);
	EXPECT_EQ(rdp_topo_level(&d[0], &d[1]), RDP_TOPO_NONE);
	EXPECT_PREFER(n, NULL, 0, 1, "2");
	EXPECT_PREFER(n, NULL, 0, 2, "2,3");
	EXPECT_PREFER(n, NULL, 0, 3, "0,2,3");
	EXPECT_PREFER(n, ((size_t[]){1}), 1, 2, "1,2");
	/* Only virtual units: by index. */
	EXPECT_PREFER(2, NULL, 0, 1, "0");
	done(d, n);
}

/* The cost of rdp_prefer's definition, with rdp_topo_level() itself. */
struct cost {
	size_t unhealthy;
	unsigned long long pairs[_RDP_TOPO_LEVEL_MAX];
	size_t virt;
};

static struct cost cost_of(const size_t *set, size_t size, const bool *is_must)
{
	struct cost c = {};

	for (size_t i = 0; i < size; i++) {
		if (units[set[i]].unhealthy && !is_must[set[i]])
			c.unhealthy++;
		if (units[set[i]].place->is_virtual && !is_must[set[i]])
			c.virt++;
		for (size_t j = i + 1; j < size; j++)
			c.pairs[rdp_topo_level(units[set[i]].place, units[set[j]].place)]++;
	}
	return c;
}

static int cost_cmp(const struct cost *a, const struct cost *b)
{
	if (a->unhealthy != b->unhealthy)
		return a->unhealthy < b->unhealthy ? -1 : 1;
	for (int l = _RDP_TOPO_LEVEL_MAX - 1; l >= 0; l--)
		if (a->pairs[l] != b->pairs[l])
			return a->pairs[l] < b->pairs[l] ? -1 : 1;
	if (a->virt != b->virt)
		return a->virt < b->virt ? -1 : 1;
	return 0;
}

static int worst(const struct cost *c)
{
	for (int l = _RDP_TOPO_LEVEL_MAX - 1; l >= 0; l--)
		if (c->pairs[l])
			return l;
	return -1;
}

static unsigned rnd_state = 12345;
static unsigned rnd(unsigned m)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return (rnd_state >> 16) % m;
}

/* A random device of a small nested tree: 2 sockets, 2 host bridges each, 2 root ports
 * each, then either directly a function, or a switch (2 downstream ports) with a function,
 * or two switches deep. */
static struct rdp_topo_dev rnd_dev(void)
{
	unsigned numa = rnd(2), hb = rnd(2), rp = rnd(2), shape = rnd(3), f = rnd(3);
	unsigned bus = 0x10 + numa * 0x80 + hb * 0x20 + rp * 0x8;
	char root[16], chain[256];
	int len;

	if (rnd(12) == 0)
		return mk(NULL, -1, NULL);
	snprintf(root, sizeof(root), "pci0000:%02x", 0x10 + numa * 0x80 + hb * 0x20);
	len = snprintf(chain, sizeof(chain), "0000:%02x:0%u.0", 0x10 + numa * 0x80 + hb * 0x20,
		       rp + 1);
	if (shape == 0) {
		snprintf(chain + len, sizeof(chain) - (size_t)len, "/0000:%02x:00.%u", bus + 1, f);
	} else {
		unsigned dsp = rnd(2);

		len += snprintf(chain + len, sizeof(chain) - (size_t)len,
				"/0000:%02x:00.0/0000:%02x:0%u.0", bus + 1, bus + 2, dsp);
		if (shape == 2)
			len += snprintf(chain + len, sizeof(chain) - (size_t)len,
					"/0000:%02x:00.0/0000:%02x:00.0", bus + 3 + dsp,
					bus + 5 + dsp);
		snprintf(chain + len, sizeof(chain) - (size_t)len, "/0000:%02x:00.%u",
			 bus + 6 + dsp * 2 + (shape == 2), f);
	}
	return mk(root, (int)numa, chain);
}

/* Random small pools against an exhaustive search: valid, never more unhealthy members
 * than needed, the best worst level, and how often the very best set. */
static void test_random(void)
{
	struct rdp_topo_dev d[12];
	unsigned trials = 0, optimal = 0;

	for (int round = 0; round < 400; round++) {
		size_t n = 1 + rnd(12), size = rnd((unsigned)n + 1), n_must = 0;
		size_t must[12], ret[12], ret2[12];
		bool is_must[12] = {};
		struct cost got, best = {};
		bool have_best = false;

		for (size_t i = 0; i < n; i++) {
			d[i] = rnd_dev();
			units[i] =
				(struct rdp_prefer_unit){.place = &d[i], .unhealthy = rnd(5) == 0};
		}
		if (size && rnd(3) == 0)
			for (size_t k = 0, want = 1 + rnd((unsigned)size); k < want; k++) {
				size_t m = rnd((unsigned)n);

				if (!is_must[m]) {
					is_must[m] = true;
					must[n_must++] = m;
				}
			}
		EXPECT_EQ(rdp_prefer(units, n, must, n_must, size, ret), 0);
		EXPECT_EQ(rdp_prefer(units, n, must, n_must, size, ret2), 0);
		EXPECT_TRUE(memcmp(ret, ret2, size * sizeof(*ret)) == 0);
		/* Growing over single units gives the same as over groups. */
		EXPECT_EQ(rdp_prefer_mode(units, n, must, n_must, size, ret2, false), 0);
		EXPECT_TRUE(memcmp(ret, ret2, size * sizeof(*ret)) == 0);
		for (size_t i = 1; i < size; i++)
			EXPECT_TRUE(ret[i - 1] < ret[i]);
		for (size_t k = 0; k < n_must; k++) {
			bool found = false;

			for (size_t i = 0; i < size; i++)
				found |= ret[i] == must[k];
			EXPECT_TRUE(found);
		}
		got = cost_of(ret, size, is_must);

		for (unsigned long mask = 0; mask < (1ul << n); mask++) {
			size_t set[12], k = 0;
			bool ok = true;
			struct cost c;

			if ((size_t)__builtin_popcountl(mask) != size)
				continue;
			for (size_t i = 0; i < n; i++)
				if (mask & (1ul << i))
					set[k++] = i;
			for (size_t m = 0; m < n_must; m++)
				ok &= (mask >> must[m]) & 1;
			if (!ok)
				continue;
			c = cost_of(set, size, is_must);
			if (!have_best || cost_cmp(&c, &best) < 0)
				best = c, have_best = true;
		}
		EXPECT_EQ(got.unhealthy, best.unhealthy);
		if (got.unhealthy == best.unhealthy)
			EXPECT_EQ(worst(&got), worst(&best));
		trials++;
		optimal += cost_cmp(&got, &best) == 0;
		done(d, n);
	}
	fprintf(stderr, "test-prefer: random pools: %u of %u sets of least cost\n", optimal,
		trials);
}

/* Every allocation failure is -ENOMEM and leaks nothing. */
static void test_enomem(void)
{
	struct rdp_topo_dev d[16];
	size_t n = host(d), ret[16];

	set_units(d, n);
	for (unsigned long k = 1;; k++) {
		int r;

		rdp_alloc_fail_at(k);
		r = rdp_prefer(units, n, NULL, 0, 5, ret);
		rdp_alloc_fail_at(0);
		if (r == 0) {
			EXPECT_STREQ(fmt(ret, 5), "5,6,7,8,10");
			break;
		}
		EXPECT_EQ(r, -ENOMEM);
		if (k > 1000) {
			EXPECT_TRUE(!"no end to allocations");
			break;
		}
	}
	done(d, n);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 8192 units: 2 sockets x 4 host bridges x 4 root ports x a switch with 4 downstream ports x
 * 2 PFs x 32 functions (siblings under the port) = 8192. */
static void test_big(void)
{
	static struct rdp_topo_dev d[RDP_PREFER_MAX_UNITS];
	static size_t ret[RDP_PREFER_MAX_UNITS];
	size_t n = 0;
	double t0, t1;

	for (unsigned s = 0; s < 2; s++)
		for (unsigned hb = 0; hb < 4; hb++)
			for (unsigned rp = 0; rp < 4; rp++)
				for (unsigned p = 0; p < 4; p++)
					for (unsigned pf = 0; pf < 2; pf++)
						for (unsigned f = 0; f < 32; f++) {
							unsigned b = s * 0x80 + hb * 0x20 + rp * 8;
							char root[16], chain[128];

							snprintf(root, sizeof(root), "pci0000:%02x",
								 s * 0x80 + hb * 0x20);
							snprintf(
								chain, sizeof(chain),
								"0000:%02x:0%u.0/0000:%02x:00.0/"
								"0000:%02x:0%u.0/0001:%02x:%02x.%u",
								s * 0x80 + hb * 0x20, rp + 1, b + 1,
								b + 2, p, b + 3 + p, pf * 4 + f / 8,
								f % 8);
							d[n++] = mk(root, (int)s, chain);
						}
	EXPECT_EQ(n, RDP_PREFER_MAX_UNITS);
	set_units(d, n);

	struct {
		size_t size, n_must;
		size_t must[1];
	} cases[] = {{4096, 0, {0}}, {64, 0, {0}}, {8, 0, {0}}, {4096, 1, {8000}}, {8191, 0, {0}}};
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		t0 = now();
		EXPECT_EQ(rdp_prefer(units, n, cases[c].must, cases[c].n_must, cases[c].size, ret),
			  0);
		t1 = now();
		fprintf(stderr, "test-prefer: %zu units, size %zu, %zu must: %.1f ms\n", n,
			cases[c].size, cases[c].n_must, (t1 - t0) * 1e3);
	}
	/* The slow path (every unit its own group), one growth of 8192 x 4096. */
	t0 = now();
	EXPECT_EQ(rdp_prefer_mode(units, n, (size_t[]){8000}, 1, 4096, ret, false), 0);
	t1 = now();
	fprintf(stderr, "test-prefer: %zu units, size 4096, 1 must, per unit: %.1f ms\n", n,
		(t1 - t0) * 1e3);
	EXPECT_EQ(ret[0], 4096);
	/* 8 of one PF's 32 functions; 4096: one socket. */
	EXPECT_EQ(rdp_prefer(units, n, NULL, 0, 8, ret), 0);
	EXPECT_STREQ(fmt(ret, 8), "0,1,2,3,4,5,6,7");
	EXPECT_EQ(rdp_prefer(units, n, NULL, 0, 4096, ret), 0);
	EXPECT_EQ(ret[0], 0);
	EXPECT_EQ(ret[4095], 4095);
	EXPECT_EQ(rdp_prefer(units, n, (size_t[]){8000}, 1, 4096, ret), 0);
	EXPECT_EQ(ret[0], 4096);
	EXPECT_EQ(ret[4095], 8191);
	done(d, n);
}

static int cmp_addr(const void *a, const void *b)
{
	const struct rdp_topo_dev *x = *(const struct rdp_topo_dev *const *)a;
	const struct rdp_topo_dev *y = *(const struct rdp_topo_dev *const *)b;

	return strcmp(x->pci_address, y->pci_address);
}

static int cmp_place(const void *a, const void *b)
{
	return strcmp(((const struct rdp_topo_dev *)a)->pci_address,
		      ((const struct rdp_topo_dev *)b)->pci_address);
}

static void test_dgx(const char *fixtures)
{
	static const char *const compute[8] = {"mlx5_0", "mlx5_3", "mlx5_4",  "mlx5_5",
					       "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"};
	char sys[PATH_MAX], dev[PATH_MAX];
	_cleanup_close_ int sfd = -1, dfd = -1;
	struct rdp_host *h = NULL;
	struct rdp_topo *t = NULL;
	const struct rdp_topo_dev *nics[8];
	size_t n = 0, ret[32];

	snprintf(sys, sizeof(sys), "%s/dgx-h100/sys", fixtures);
	snprintf(dev, sizeof(dev), "%s/dgx-h100/dev", fixtures);
	EXPECT_EQ(rdp_sysfs_open_roots(sys, dev, &sfd, &dfd), 0);
	EXPECT_EQ(rdp_discover_at(sfd, dfd, &h), 0);
	if (!h)
		return;
	EXPECT_EQ(rdp_topo_read_at(sfd, h, &t), 0);
	if (!t) {
		rdp_host_free(h);
		return;
	}
	for (size_t i = 0; i < t->n_devs; i++)
		for (int c = 0; c < 8; c++)
			if (t->devs[i].kind == RDP_TOPO_NIC &&
			    strcmp(t->devs[i].name, compute[c]) == 0)
				nics[n++] = &t->devs[i];
	EXPECT_EQ(n, 8);
	if (n == 8) {
		qsort(nics, n, sizeof(*nics), cmp_addr);
		for (size_t i = 0; i < n; i++) {
			units[i] = (struct rdp_prefer_unit){.place = nics[i]};
			EXPECT_EQ(nics[i]->numa_node, i < 4 ? 0 : 1);
		}
		EXPECT_PREFER(n, NULL, 0, 4, "0,1,2,3");
		EXPECT_PREFER(n, ((size_t[]){5}), 1, 4, "4,5,6,7");
		EXPECT_PREFER(n, ((size_t[]){2}), 1, 2, "0,2");
		EXPECT_PREFER(n, NULL, 0, 5, "0,1,2,3,4");
		units[1].unhealthy = true;
		EXPECT_PREFER(n, NULL, 0, 4, "4,5,6,7");
		EXPECT_PREFER(n, NULL, 0, 3, "0,2,3");
	}

	/* Every device of the node (GPUs too): asked for a pair with must = i, the partner is
	 * at the best level rdp_topo_level() gives to i. */
	n = t->n_devs < 32 ? t->n_devs : 32;
	for (size_t i = 0; i < n; i++)
		units[i] = (struct rdp_prefer_unit){.place = &t->devs[i]};
	for (size_t i = 0; i < n; i++) {
		enum rdp_topo_level best = RDP_TOPO_NONE;

		for (size_t j = 0; j < n; j++)
			if (j != i && rdp_topo_level(&t->devs[i], &t->devs[j]) < best)
				best = rdp_topo_level(&t->devs[i], &t->devs[j]);
		EXPECT_EQ(rdp_prefer(units, n, (size_t[]){i}, 1, 2, ret), 0);
		size_t other = ret[0] == i ? ret[1] : ret[0];
		EXPECT_EQ(rdp_topo_level(&t->devs[i], &t->devs[other]), best);
	}
	rdp_topo_free(t);
	rdp_host_free(h);
}

/*
 * The devices of a fixture node whose device ID is device_id, placed as an exclusive pool
 * places its units (rdp_topo_dev_of_device(): from discovery's PCI path), sorted by PCI
 * address, into places and units[]. Returns how many (0 on failure).
 */
static size_t load_pool(const char *fixtures, const char *node, const char *device_id,
			struct rdp_topo_dev *places, size_t max)
{
	char sys[PATH_MAX], dev[PATH_MAX];
	_cleanup_close_ int sfd = -1, dfd = -1;
	struct rdp_host *h = NULL;
	size_t n = 0;

	snprintf(sys, sizeof(sys), "%s/%s/sys", fixtures, node);
	snprintf(dev, sizeof(dev), "%s/%s/dev", fixtures, node);
	EXPECT_EQ(rdp_sysfs_open_roots(sys, dev, &sfd, &dfd), 0);
	EXPECT_EQ(rdp_discover_at(sfd, dfd, &h), 0);
	for (size_t i = 0; h && i < h->n_devices && n < max; i++)
		if (strcmp(h->devices[i].device_id, device_id) == 0)
			EXPECT_EQ(rdp_topo_dev_of_device(&h->devices[i], &places[n++]), 0);
	rdp_host_free(h);
	qsort(places, n, sizeof(*places), cmp_place);
	for (size_t i = 0; i < n; i++)
		units[i] = (struct rdp_prefer_unit){.place = &places[i]};
	return n;
}

/*
 * two-socket-vfs: its 64 VFs by address: 0-15 card A PF0 (19:00.2-), 16-23 card A PF1,
 * 24-39 card B PF0 (behind a second switch below A's: PXB), 40-47 card C (another host
 * bridge of socket 0: NODE), 48-55 card D, 56-63 card E (socket 1, one host bridge: PHB).
 */
static void test_two_socket_vfs(const char *fixtures)
{
	static struct rdp_topo_dev places[64];
	size_t n = load_pool(fixtures, "two-socket-vfs", "101e", places, 64);

	EXPECT_EQ(n, 64);
	if (n != 64)
		goto out;
	EXPECT_STREQ(places[0].pci_address, "0000:19:00.2");
	EXPECT_STREQ(places[24].pci_address, "0000:1c:00.2");
	EXPECT_STREQ(places[40].pci_address, "0000:31:00.2");
	EXPECT_STREQ(places[63].pci_address, "0000:99:01.1");
	EXPECT_PREFER(n, NULL, 0, 2, "0,1");
	/* All 24 VFs of card A are PIX to one another; the 25th is card B's (PXB < NODE). */
	EXPECT_PREFER(n, NULL, 0, 25, "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,"
				      "22,23,24");
	EXPECT_PREFER(n, ((size_t[]){60}), 1, 3, "56,57,60");
	/* Card C's 8, then the closest left: NODE (socket 0), the lowest address. */
	EXPECT_PREFER(n, ((size_t[]){40}), 1, 9, "0,40,41,42,43,44,45,46,47");
	/* Socket 1's 16 VFs together: D and E are PHB, better than anything across. */
	EXPECT_PREFER(n, ((size_t[]){48}), 1, 16,
		      "48,49,50,51,52,53,54,55,56,57,58,59,60,61,62,63");
	for (size_t i = 0; i < 24; i++)
		units[i].unhealthy = true;
	EXPECT_PREFER(n, NULL, 0, 2, "24,25");
out:
	for (size_t i = 0; i < n; i++)
		rdp_topo_dev_done(&places[i]);
}

/* vm-passthrough: 4 VFs on the root bus of a guest, every pair PHB, no NUMA. */
static void test_vm_passthrough(const char *fixtures)
{
	static struct rdp_topo_dev places[4];
	size_t n = load_pool(fixtures, "vm-passthrough", "101e", places, 4);

	EXPECT_EQ(n, 4);
	if (n == 4) {
		EXPECT_EQ(rdp_topo_level(&places[0], &places[3]), RDP_TOPO_PHB);
		EXPECT_EQ(places[0].numa_node, -1);
		EXPECT_PREFER(n, NULL, 0, 2, "0,1");
		EXPECT_PREFER(n, ((size_t[]){3}), 1, 2, "0,3");
	}
	for (size_t i = 0; i < n; i++)
		rdp_topo_dev_done(&places[i]);
}

int main(void)
{
	const char *fixtures;

	test_levels_order();
	test_flat_and_virtual();
	test_random();
	test_enomem();
	test_big();
	fixtures = test_fixtures_dir("test-prefer");
	if (fixtures) {
		test_dgx(fixtures);
		test_two_socket_vfs(fixtures);
		test_vm_passthrough(fixtures);
	}
	return test_summary("test-prefer");
}
