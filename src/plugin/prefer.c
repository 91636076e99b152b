/* SPDX-License-Identifier: MIT */
/* The preferred allocation of an exclusive pool; see prefer.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "prefer.h"

#define NL _RDP_TOPO_LEVEL_MAX

/* A unit's place with its strings interned, so that a level is integer compares. */
struct spot {
	const struct rdp_topo_dev *place;
	uint32_t root; /* id of pcie_root */
	uint32_t off; /* its chain's ids are ids[off .. off+len-1] */
	uint32_t len; /* 0: virtual (no PCIe path) */
	int numa;
};

struct ctx {
	const struct rdp_prefer_unit *units;
	size_t n;
	struct spot *spots;
	uint32_t *ids;
	uint32_t (*cnt)[NL]; /* per candidate group: pairs at each level to the current set */
	bool *in; /* in the current set */
};

/* One grown set and its cost. */
struct run {
	size_t *set;
	size_t n_set;
	size_t n_unhealthy; /* members that are unhealthy and not must-include */
	uint64_t tot[NL]; /* pairs at each level */
	size_t n_virtual; /* members that are virtual and not must-include */
};

/* String interning: open addressing, sized once for every string we will ever insert. */
struct strtab {
	const char **strs;
	size_t n;
	uint32_t *slots; /* 0 empty, else id + 1 */
	size_t mask;
};

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static uint32_t intern(struct strtab *t, const char *s)
{
	for (size_t i = (size_t)str_hash(s) & t->mask;; i = (i + 1) & t->mask) {
		uint32_t v = t->slots[i];

		if (v == 0) {
			t->strs[t->n] = s;
			t->slots[i] = (uint32_t)++t->n;
			return (uint32_t)(t->n - 1);
		}
		if (strcmp(t->strs[v - 1], s) == 0)
			return v - 1;
	}
}

/* Fills c->spots and c->ids. Returns 0 or -ENOMEM. */
static int build_spots(struct ctx *c, size_t *ret_n_ids)
{
	struct strtab t = {};
	size_t total = 0, cap = 1;
	int r = -ENOMEM;

	for (size_t i = 0; i < c->n; i++) {
		const struct rdp_topo_dev *p = c->units[i].place;

		if (!p->is_virtual)
			total += p->n_chain;
	}
	c->spots = rdp_calloc(c->n, sizeof(*c->spots));
	c->ids = rdp_calloc(total ? total : 1, sizeof(*c->ids));
	while (cap < 2 * (total + c->n) + 2)
		cap <<= 1;
	t.strs = rdp_calloc(total + c->n + 1, sizeof(*t.strs));
	t.slots = rdp_calloc(cap, sizeof(*t.slots));
	t.mask = cap - 1;
	if (!c->spots || !c->ids || !t.strs || !t.slots)
		goto out;

	total = 0;
	for (size_t i = 0; i < c->n; i++) {
		const struct rdp_topo_dev *p = c->units[i].place;
		struct spot *s = &c->spots[i];

		s->place = p;
		s->numa = p->numa_node;
		s->off = (uint32_t)total;
		if (p->is_virtual || p->n_chain == 0)
			continue; /* len 0 */
		s->root = intern(&t, p->pcie_root);
		s->len = (uint32_t)p->n_chain;
		for (size_t k = 0; k < p->n_chain; k++)
			c->ids[total++] = intern(&t, p->chain[k]);
	}
	*ret_n_ids = t.n;
	r = 0;
out:
	rdp_free(t.strs);
	rdp_free(t.slots);
	return r;
}

/* rdp_topo_level() on interned chains: the chains compared as integers, the same rule. */
static enum rdp_topo_level level(const struct ctx *c, size_t a, size_t b)
{
	const struct spot *x = &c->spots[a], *y = &c->spots[b];
	bool no_path = !x->len || !y->len, same_root = !no_path && x->root == y->root;
	size_t k = 0;

	if (same_root) {
		const uint32_t *ia = c->ids + x->off, *ib = c->ids + y->off;

		while (k < x->len && k < y->len && ia[k] == ib[k])
			k++;
	}
	return rdp_topo_level_rule(x->place == y->place, no_path, same_root, x->numa == y->numa,
				   k, x->len, y->len);
}

/* The candidates of a growth: groups of units that are interchangeable up to their index
 * (members ascending), or one unit each. */
struct groups {
	size_t n_groups;
	size_t *mem; /* members of group g: mem[off[g] .. off[g]+len[g]-1] */
	size_t *off, *len;
	size_t *of; /* of[i]: unit i's group */
};

static void groups_free(struct groups *g)
{
	rdp_free(g->mem);
	rdp_free(g->off);
	rdp_free(g->len);
	rdp_free(g->of);
}

/* Growth state beyond struct ctx: cursors over each group's healthy and unhealthy members. */
struct grower {
	struct ctx *c;
	const struct groups *g;
	size_t *hcur, *ucur;
};

/* Adds unit x to the set; updates the groups' counts unless it is the last one. */
static void add(struct grower *w, struct run *r, size_t x, bool not_must, bool last)
{
	struct ctx *c = w->c;
	const struct groups *g = w->g;
	size_t gx = g->of[x];

	c->in[x] = true;
	r->set[r->n_set++] = x;
	if (not_must && c->units[x].unhealthy)
		r->n_unhealthy++;
	if (not_must && !c->spots[x].len)
		r->n_virtual++;
	for (int l = 0; l < NL; l++)
		r->tot[l] += c->cnt[gx][l];
	if (last)
		return;
	for (size_t k = 0; k < g->n_groups; k++)
		if (k == gx) /* another member of x's group (distinct places): siblings */
			c->cnt[k][c->spots[x].len ? RDP_TOPO_PIX : RDP_TOPO_NONE]++;
		else
			c->cnt[k][level(c, g->mem[g->off[k]], x)]++;
}

/* The member group k would give next: its lowest healthy one not in the set, else its
 * lowest unhealthy one; c->n when none is left. */
static size_t next_member(struct grower *w, size_t k)
{
	const struct ctx *c = w->c;
	const size_t *m = w->g->mem + w->g->off[k], n = w->g->len[k];

	while (w->hcur[k] < n && (c->in[m[w->hcur[k]]] || c->units[m[w->hcur[k]]].unhealthy))
		w->hcur[k]++;
	if (w->hcur[k] < n)
		return m[w->hcur[k]];
	while (w->ucur[k] < n && (c->in[m[w->ucur[k]]] || !c->units[m[w->ucur[k]]].unhealthy))
		w->ucur[k]++;
	return w->ucur[k] < n ? m[w->ucur[k]] : c->n;
}

/* <0 when member a of group ga is a better next unit than b of gb. */
static int cmp_cand(const struct ctx *c, size_t ga, size_t a, size_t gb, size_t b)
{
	if (c->units[a].unhealthy != c->units[b].unhealthy)
		return c->units[a].unhealthy ? 1 : -1;
	for (int l = NL - 1; l >= 0; l--)
		if (c->cnt[ga][l] != c->cnt[gb][l])
			return c->cnt[ga][l] < c->cnt[gb][l] ? -1 : 1;
	if (!c->spots[a].len != !c->spots[b].len)
		return !c->spots[a].len ? 1 : -1;
	return a < b ? -1 : a > b;
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

/* Grows a set of `size` from must[] (or the single seed when n_must is 0). */
static void grow(struct grower *w, struct run *r, const size_t *must, size_t n_must, size_t seed,
		 size_t size)
{
	struct ctx *c = w->c;
	size_t ng = w->g->n_groups;

	memset(c->in, 0, c->n * sizeof(*c->in));
	memset(c->cnt, 0, ng * sizeof(*c->cnt));
	memset(w->hcur, 0, ng * sizeof(*w->hcur));
	memset(w->ucur, 0, ng * sizeof(*w->ucur));
	memset(r->tot, 0, sizeof(r->tot));
	r->n_set = 0;
	r->n_unhealthy = 0;
	r->n_virtual = 0;
	if (n_must) {
		for (size_t j = 0; j < n_must; j++)
			add(w, r, must[j], false, r->n_set + 1 == size);
	} else {
		add(w, r, seed, true, size == 1);
	}
	while (r->n_set < size) {
		size_t best = c->n, bestg = 0;

		for (size_t k = 0; k < ng; k++) {
			size_t m = next_member(w, k);

			if (m < c->n && (best == c->n || cmp_cand(c, k, m, bestg, best) < 0))
				best = m, bestg = k;
		}
		add(w, r, best, true, r->n_set + 1 == size);
	}
	qsort(r->set, r->n_set, sizeof(*r->set), cmp_size);
}

/* <0 when set a costs less than set b (both sorted, of one size). */
static int cmp_run(const struct run *a, const struct run *b)
{
	if (a->n_unhealthy != b->n_unhealthy)
		return a->n_unhealthy < b->n_unhealthy ? -1 : 1;
	for (int l = NL - 1; l >= 0; l--)
		if (a->tot[l] != b->tot[l])
			return a->tot[l] < b->tot[l] ? -1 : 1;
	if (a->n_virtual != b->n_virtual)
		return a->n_virtual < b->n_virtual ? -1 : 1;
	for (size_t i = 0; i < a->n_set; i++)
		if (a->set[i] != b->set[i])
			return a->set[i] < b->set[i] ? -1 : 1;
	return 0;
}

/* Parent-group key order: virtual last, root, NUMA node, chain length, chain minus its last
 * id. 0 when a and b are in one group. */
static int cmp_key(const struct ctx *c, size_t a, size_t b)
{
	const struct spot *x = &c->spots[a], *y = &c->spots[b];

	if ((x->len == 0) != (y->len == 0))
		return x->len == 0 ? 1 : -1;
	if (x->len && x->root != y->root)
		return x->root < y->root ? -1 : 1;
	if (x->numa != y->numa)
		return x->numa < y->numa ? -1 : 1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	for (size_t k = 0; k + 1 < x->len; k++) {
		uint32_t u = c->ids[x->off + k], v = c->ids[y->off + k];

		if (u != v)
			return u < v ? -1 : 1;
	}
	return 0;
}

/* The group key, then the index. */
static int cmp_group(const void *pa, const void *pb, void *arg)
{
	size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
	int r = cmp_key(arg, a, b);

	return r ? r : a < b ? -1 : a > b;
}

/* Room for n units in at most n groups. Returns 0 or -ENOMEM (freed with the groups). */
static int groups_alloc(struct groups *g, size_t n)
{
	g->mem = rdp_calloc(n, sizeof(*g->mem));
	g->off = rdp_calloc(n, sizeof(*g->off));
	g->len = rdp_calloc(n, sizeof(*g->len));
	g->of = rdp_calloc(n, sizeof(*g->of));
	return g->mem && g->off && g->len && g->of ? 0 : -ENOMEM;
}

/* The parent groups (cmp_key), members ascending. Returns 0 or -ENOMEM. */
static int parent_groups(const struct ctx *c, struct groups *g)
{
	if (groups_alloc(g, c->n) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < c->n; i++)
		g->mem[i] = i;
	qsort_r(g->mem, c->n, sizeof(*g->mem), cmp_group, (void *)c);
	for (size_t i = 0; i < c->n; i++) {
		if (i == 0 || cmp_key(c, g->mem[i - 1], g->mem[i]) != 0)
			g->off[g->n_groups++] = i;
		g->len[g->n_groups - 1]++;
		g->of[g->mem[i]] = g->n_groups - 1;
	}
	return 0;
}

/* One group per unit. Returns 0 or -ENOMEM. */
static int unit_groups(const struct ctx *c, struct groups *g)
{
	if (groups_alloc(g, c->n) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < c->n; i++) {
		g->mem[i] = g->off[i] = g->of[i] = i;
		g->len[i] = 1;
	}
	g->n_groups = c->n;
	return 0;
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Whether the members of each parent group have the same level to every unit outside it,
 * and PIX (NONE when virtual) among themselves: true unless two units share a place (X) or
 * a unit's chain has, before its end, an address that ends another unit's chain (a unit
 * below another: PIX to it, maybe PXB to its siblings). Real pools of RDMA functions never
 * do either; the check is conservative (by address). Returns 1, 0 or -ENOMEM.
 */
static int groups_exact(const struct ctx *c, size_t n_ids)
{
	uintptr_t *p = rdp_calloc(c->n, sizeof(*p));
	bool *last = rdp_calloc(n_ids ? n_ids : 1, sizeof(*last));
	int r = -ENOMEM;

	if (!p || !last)
		goto out;
	r = 1;
	for (size_t i = 0; i < c->n; i++) {
		p[i] = (uintptr_t)c->spots[i].place;
		if (c->spots[i].len)
			last[c->ids[c->spots[i].off + c->spots[i].len - 1]] = true;
	}
	qsort(p, c->n, sizeof(*p), cmp_ptr);
	for (size_t i = 1; i < c->n && r; i++)
		if (p[i] == p[i - 1])
			r = 0;
	for (size_t i = 0; i < c->n && r; i++)
		for (size_t k = 0; k + 1 < c->spots[i].len && r; k++)
			if (last[c->ids[c->spots[i].off + k]])
				r = 0;
out:
	rdp_free(p);
	rdp_free(last);
	return r;
}

/*
 * The seeds when must is empty: per parent group its lowest healthy index (its lowest index
 * when no unit at all is healthy), ascending. Returns how many.
 */
static size_t pick_seeds(const struct ctx *c, const struct groups *pg, size_t *seeds)
{
	bool any_healthy = false;
	size_t n_seeds = 0;

	for (size_t i = 0; i < c->n; i++)
		any_healthy |= !c->units[i].unhealthy;
	for (size_t k = 0; k < pg->n_groups; k++)
		for (size_t j = 0; j < pg->len[k]; j++) {
			size_t m = pg->mem[pg->off[k] + j];

			if (!any_healthy || !c->units[m].unhealthy) {
				seeds[n_seeds++] = m;
				break;
			}
		}
	qsort(seeds, n_seeds, sizeof(*seeds), cmp_size);
	return n_seeds;
}

int rdp_prefer_mode(const struct rdp_prefer_unit *units, size_t n, const size_t *must,
		    size_t n_must, size_t size, size_t *ret, bool grouped)
{
	struct ctx c = {.units = units, .n = n};
	struct groups pg = {}, ug = {};
	struct grower w = {.c = &c};
	struct run cur = {}, best = {};
	size_t *seeds = NULL, n_ids = 0;
	bool *seen;
	int r = -ENOMEM;

	if (size > n || size < n_must)
		return -EINVAL;
	seen = rdp_calloc(n ? n : 1, sizeof(*seen));
	if (!seen)
		return -ENOMEM;
	for (size_t j = 0; j < n_must; j++) {
		if (must[j] >= n || seen[must[j]]) {
			rdp_free(seen);
			return -EINVAL;
		}
		seen[must[j]] = true;
	}
	rdp_free(seen);

	if (size == n || size == n_must) {
		if (size == n)
			for (size_t i = 0; i < n; i++)
				ret[i] = i;
		else if (n_must)
			memcpy(ret, must, n_must * sizeof(*must));
		if (size > 1)
			qsort(ret, size, sizeof(*ret), cmp_size);
		return 0;
	}
	/* Here 0 < size < n: n >= 2. */

	c.in = rdp_calloc(n, sizeof(*c.in));
	c.cnt = rdp_calloc(n, sizeof(*c.cnt));
	w.hcur = rdp_calloc(n, sizeof(*w.hcur));
	w.ucur = rdp_calloc(n, sizeof(*w.ucur));
	cur.set = rdp_calloc(size, sizeof(*cur.set));
	best.set = rdp_calloc(size, sizeof(*best.set));
	if (!c.in || !c.cnt || !w.hcur || !w.ucur || !cur.set || !best.set)
		goto out;
	r = build_spots(&c, &n_ids);
	if (r < 0)
		goto out;
	r = parent_groups(&c, &pg);
	if (r < 0)
		goto out;
	if (grouped) {
		r = groups_exact(&c, n_ids);
		if (r < 0)
			goto out;
		grouped = r;
	}
	if (!grouped) {
		r = unit_groups(&c, &ug);
		if (r < 0)
			goto out;
	}
	w.g = grouped ? &pg : &ug;

	if (n_must) {
		grow(&w, &best, must, n_must, 0, size);
	} else {
		unsigned long long work = (unsigned long long)w.g->n_groups * size + n, max_seeds;
		size_t n_seeds;

		r = -ENOMEM;
		seeds = rdp_calloc(n, sizeof(*seeds));
		if (!seeds)
			goto out;
		n_seeds = pick_seeds(&c, &pg, seeds);
		max_seeds = RDP_PREFER_BUDGET / work;
		if (max_seeds < 1)
			max_seeds = 1;
		if (n_seeds > max_seeds)
			n_seeds = (size_t)max_seeds;
		for (size_t s = 0; s < n_seeds; s++) {
			grow(&w, s == 0 ? &best : &cur, NULL, 0, seeds[s], size);
			if (s > 0 && cmp_run(&cur, &best) < 0) {
				struct run t = best;

				best = cur;
				cur = t;
			}
		}
	}
	memcpy(ret, best.set, size * sizeof(*ret));
	r = 0;
out:
	groups_free(&pg);
	groups_free(&ug);
	rdp_free(seeds);
	rdp_free(c.in);
	rdp_free(c.cnt);
	rdp_free(w.hcur);
	rdp_free(w.ucur);
	rdp_free(c.spots);
	rdp_free(c.ids);
	rdp_free(cur.set);
	rdp_free(best.set);
	return r;
}

int rdp_prefer(const struct rdp_prefer_unit *units, size_t n, const size_t *must, size_t n_must,
	       size_t size, size_t *ret)
{
	return rdp_prefer_mode(units, n, must, n_must, size, ret, true);
}
