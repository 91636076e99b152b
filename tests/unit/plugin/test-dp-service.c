/* SPDX-License-Identifier: MIT */
/*
 * dp-service: what a pool serves (state), the ListAndWatch snapshot, Allocate and
 * GetPreferredAllocation answers, built from a hand-made host model; plus the state changes
 * the service reports, and every allocation failing in turn.
 */
#include <errno.h>
#include <fcntl.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "alloc.h"
#include "macro.h"
#include "memlock.h"
#include "config.h"
#include "deviceplugin.pb-c.h"
#include "dp-service.h"
#include "event.h"
#include "grpc.h"
#include "pluginregistration.pb-c.h"
#include "pool.h"
#include "registration.h"
#include "test.h"

#define IB "/dev/infiniband/"

static char *xdup(const char *s)
{
	return rdp_strdup(s);
}

/* A device with one port in the given state and the given char devices. */
static void make_device(struct rdp_device *d, const char *name, int numa, int port_state,
			const char *const *chars, size_t n_chars)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->numa_node = numa;
	d->vf_index = -1;
	d->ports = rdp_calloc(1, sizeof(*d->ports));
	d->n_ports = 1;
	d->ports[0].num = 1;
	d->ports[0].state = port_state;
	d->ports[0].roce_v2_ipv4_gid_index = -1;
	d->char_devices = rdp_calloc(n_chars + 1, sizeof(char *));
	for (size_t i = 0; i < n_chars; i++)
		d->char_devices[i] = xdup(chars[i]);
	d->n_char_devices = n_chars;
}

static struct rdp_host *make_host(void)
{
	static const char *const c0[] = {IB "uverbs0", IB "umad0", IB "issm0"};
	static const char *const c1[] = {IB "uverbs1", IB "umad1", IB "issm1"};
	static const char *const c2[] = {IB "uverbs2", IB "umad2", IB "issm2"};
	/* A device listing a path twice, and one that another device also lists. */
	static const char *const c3[] = {IB "uverbs3", IB "uverbs3", IB "umad0"};
	struct rdp_host *h = rdp_calloc(1, sizeof(*h));

	h->devices = rdp_calloc(4, sizeof(*h->devices));
	h->n_devices = 4;
	make_device(&h->devices[0], "mlx5_0", 1, RDP_PORT_ACTIVE, c0, 3);
	make_device(&h->devices[1], "mlx5_1", 1, RDP_PORT_DOWN, c1, 3);
	make_device(&h->devices[2], "mlx5_2", 0, RDP_PORT_ACTIVE, c2, 3);
	make_device(&h->devices[3], "mlx5_3", 1, RDP_PORT_INIT, c3, 3);
	snprintf(h->rdma_cm, sizeof(h->rdma_cm), IB "rdma_cm");
	return h;
}

/* "reportTopology": true, so that the NUMA node of the pool shows (test_no_topology: not). */
static struct rdp_resource res4 = {.name = (char *)"a",
				   .prefix = (char *)"rdma",
				   .full_name = (char *)"rdma/a",
				   .rdma_hca_max = 4,
				   .report_topology = true};

static struct rdp_pool pool_of(size_t *idx, size_t n)
{
	return (struct rdp_pool){.res = &res4, .devices = idx, .n_devices = n, .numa_node = -1};
}

/*
 * A shared pool reports no TopologyInfo by default, as k8s-rdma-shared-dev-plugin: under the
 * Topology Manager's restricted or single-numa-node policy a NUMA node would refuse pods the
 * Go plugin admits.
 */
static void test_no_topology(const struct rdp_host *h)
{
	size_t i01[] = {0, 1};
	struct rdp_resource r = res4;
	struct rdp_pool p = {.res = &r, .devices = i01, .n_devices = 2, .numa_node = 1};
	struct rdp_dp_state s = {.numa_node = -1};
	V1beta1__ListAndWatchResponse *m;
	uint8_t *buf;
	size_t len;

	r.report_topology = false;
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(s.numa_node, -1);
	EXPECT_EQ(rdp_dp_snapshot_pack(&s, &buf, &len), 0);
	m = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
	EXPECT_TRUE(m != NULL);
	if (m) {
		EXPECT_EQ(m->n_devices, 4);
		for (size_t i = 0; i < m->n_devices; i++)
			EXPECT_TRUE(m->devices[i]->topology == NULL);
		v1beta1__list_and_watch_response__free_unpacked(m, NULL);
	}
	rdp_free(buf);
	rdp_dp_state_done(&s);
}

static void test_state(const struct rdp_host *h)
{
	size_t i01[] = {0, 1}, i02[] = {0, 2}, i1[] = {1}, i03[] = {0, 3};
	struct rdp_pool p = pool_of(i01, 2);
	struct rdp_dp_state s = {.numa_node = -1};

	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(s.units, 4);
	EXPECT_TRUE(s.healthy);
	EXPECT_EQ(s.numa_node, 1);
	EXPECT_EQ(s.n_devices, 2);
	EXPECT_EQ(s.n_active, 1);
	EXPECT_STREQ(s.devices, "mlx5_0,mlx5_1");
	EXPECT_EQ(s.n_specs, 7);
	if (s.n_specs == 7) {
		static const char *const want[] = {IB "issm0",	IB "issm1", IB "rdma_cm",
						   IB "umad0",	IB "umad1", IB "uverbs0",
						   IB "uverbs1"};

		for (size_t i = 0; i < 7; i++)
			EXPECT_STREQ(s.specs[i], want[i]);
	}

	/* Two NUMA nodes: no topology. */
	p = pool_of(i02, 2);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(s.numa_node, -1);
	EXPECT_TRUE(s.healthy);

	/* No ACTIVE port in the pool: unhealthy, still all units. */
	p = pool_of(i1, 1);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(s.units, 4);
	EXPECT_TRUE(!s.healthy);
	EXPECT_EQ(s.n_active, 0);

	/* Duplicates across and within devices are listed once. */
	p = pool_of(i03, 2);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(s.n_specs, 5); /* issm0 rdma_cm umad0 uverbs0 uverbs3 */
	for (size_t i = 1; i < s.n_specs; i++)
		EXPECT_TRUE(strcmp(s.specs[i - 1], s.specs[i]) < 0);

	/* Empty pool: 0 units, nothing to hand out, not even rdma_cm. */
	p = pool_of(NULL, 0);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(s.units, 0);
	EXPECT_EQ(s.n_specs, 0);
	EXPECT_EQ(s.numa_node, -1);
	EXPECT_TRUE(!s.healthy);
	EXPECT_STREQ(s.devices, "");
	rdp_dp_state_done(&s);
}

static void test_snapshot(const struct rdp_host *h)
{
	size_t i01[] = {0, 1}, i02[] = {0, 2}, i1[] = {1};
	struct rdp_pool p = pool_of(i01, 2);
	struct rdp_dp_state s = {.numa_node = -1};
	V1beta1__ListAndWatchResponse *m;
	uint8_t *buf;
	size_t len;

	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_snapshot_pack(&s, &buf, &len), 0);
	m = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
	EXPECT_TRUE(m != NULL);
	if (m) {
		EXPECT_EQ(m->n_devices, 4);
		for (size_t i = 0; i < m->n_devices; i++) {
			char id[24];

			snprintf(id, sizeof(id), "%zu", i);
			EXPECT_STREQ(m->devices[i]->id, id);
			EXPECT_STREQ(m->devices[i]->health, "Healthy");
			EXPECT_TRUE(m->devices[i]->topology != NULL);
			if (m->devices[i]->topology) {
				EXPECT_EQ(m->devices[i]->topology->n_nodes, 1);
				EXPECT_EQ(m->devices[i]->topology->nodes[0]->id, 1);
			}
		}
		v1beta1__list_and_watch_response__free_unpacked(m, NULL);
	}
	rdp_free(buf);

	p = pool_of(i02, 2);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_snapshot_pack(&s, &buf, &len), 0);
	m = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
	EXPECT_TRUE(m && m->n_devices == 4 && m->devices[3]->topology == NULL);
	if (m)
		v1beta1__list_and_watch_response__free_unpacked(m, NULL);
	rdp_free(buf);

	p = pool_of(i1, 1);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_snapshot_pack(&s, &buf, &len), 0);
	m = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
	EXPECT_TRUE(m && m->n_devices == 4);
	if (m) {
		EXPECT_STREQ(m->devices[0]->health, "Unhealthy");
		v1beta1__list_and_watch_response__free_unpacked(m, NULL);
	}
	rdp_free(buf);

	/* 0 units: an empty (0-byte) message, which is a valid empty snapshot. */
	p = pool_of(NULL, 0);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_snapshot_pack(&s, &buf, &len), 0);
	EXPECT_EQ(len, 0);
	rdp_free(buf);
	rdp_dp_state_done(&s);
}

/* Packs an AllocateRequest with one container request per NULL-terminated group of IDs. */
static uint8_t *alloc_req(size_t *len, size_t n_containers, const char *const *const *ids)
{
	V1beta1__AllocateRequest r = V1BETA1__ALLOCATE_REQUEST__INIT;
	V1beta1__ContainerAllocateRequest cs[80], *cp[80];
	uint8_t *buf;

	for (size_t i = 0; i < n_containers; i++) {
		size_t n = 0;

		v1beta1__container_allocate_request__init(&cs[i]);
		while (ids[i][n])
			n++;
		cs[i].n_devices_ids = n;
		cs[i].devices_ids = (char **)ids[i];
		cp[i] = &cs[i];
	}
	r.n_container_requests = n_containers;
	r.container_requests = cp;
	*len = v1beta1__allocate_request__get_packed_size(&r);
	buf = rdp_malloc(*len + 1);
	v1beta1__allocate_request__pack(&r, buf);
	return buf;
}

static int allocate(const struct rdp_dp_state *s, size_t n, const char *const *const *ids,
		    V1beta1__AllocateResponse **ret, char **err)
{
	size_t len, out_len;
	uint8_t *req = alloc_req(&len, n, ids), *out = NULL;
	int r = rdp_dp_allocate(s, req, len, &out, &out_len, err);

	*ret = r == 0 ? v1beta1__allocate_response__unpack(NULL, out_len, out) : NULL;
	rdp_free(req);
	rdp_free(out);
	return r;
}

static void test_allocate(const struct rdp_host *h)
{
	size_t i01[] = {0, 1};
	struct rdp_pool p = pool_of(i01, 2);
	struct rdp_dp_state s = {.numa_node = -1};
	V1beta1__AllocateResponse *m;
	char *err = NULL;
	static const char *const ok1[] = {"0", "3", NULL};
	static const char *const ok2[] = {"1", NULL};
	static const char *const bad[] = {"0", "4", "x", "01", NULL};
	static const char *const dupl[] = {"2", "2", NULL};
	static const char *const many[] = {"0", "1", "2", "3", "0", NULL};
	static const char *const none[] = {NULL};

	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);

	EXPECT_EQ(allocate(&s, 1, (const char *const *const[]){ok1}, &m, &err), 0);
	EXPECT_TRUE(m != NULL);
	if (m) {
		EXPECT_EQ(m->n_container_responses, 1);
		if (m->n_container_responses == 1) {
			V1beta1__ContainerAllocateResponse *c = m->container_responses[0];

			EXPECT_EQ(c->n_devices, 7);
			for (size_t i = 0; i < c->n_devices && i < s.n_specs; i++) {
				EXPECT_STREQ(c->devices[i]->host_path, s.specs[i]);
				EXPECT_STREQ(c->devices[i]->container_path, s.specs[i]);
				EXPECT_STREQ(c->devices[i]->permissions, "rwm");
			}
			EXPECT_EQ(c->n_mounts, 0);
			/* Always: the devices the container got, every port (workload-env.h). */
			EXPECT_EQ(c->n_envs, 1);
			if (c->n_envs == 1) {
				EXPECT_STREQ(c->envs[0]->key, "RDMA_DEVICE_RDMA_A");
				EXPECT_STREQ(c->envs[0]->value, "mlx5_0:1,mlx5_1:1");
			}
			EXPECT_EQ(c->n_cdi_devices, 0);
		}
		v1beta1__allocate_response__free_unpacked(m, NULL);
	}

	/* One response per container request. */
	EXPECT_EQ(allocate(&s, 2, (const char *const *const[]){ok1, ok2}, &m, &err), 0);
	EXPECT_TRUE(m && m->n_container_responses == 2 &&
		    m->container_responses[1]->n_devices == 7);
	if (m)
		v1beta1__allocate_response__free_unpacked(m, NULL);

	/* Unknown IDs are named; "01" is not "1". */
	EXPECT_EQ(allocate(&s, 2, (const char *const *const[]){ok1, bad}, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "container request 1");
	EXPECT_CONTAINS(err, "\"4\", \"x\", \"01\"");
	EXPECT_CONTAINS(err, "\"0\"..\"3\"");
	rdp_free(err);
	err = NULL;

	EXPECT_EQ(allocate(&s, 1, (const char *const *const[]){dupl}, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "duplicate device IDs \"2\"");
	rdp_free(err);
	err = NULL;

	EXPECT_EQ(allocate(&s, 1, (const char *const *const[]){many}, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "asks for 5 units, the resource has 4");
	rdp_free(err);
	err = NULL;

	EXPECT_EQ(allocate(&s, 1, (const char *const *const[]){none}, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "no device IDs");
	rdp_free(err);
	err = NULL;

	/* No container request: no container response. */
	EXPECT_EQ(allocate(&s, 0, NULL, &m, &err), 0);
	EXPECT_TRUE(m == NULL || m->n_container_responses == 0);
	if (m)
		v1beta1__allocate_response__free_unpacked(m, NULL);

	/* Too many container requests. */
	{
		const char *const *many_c[RDP_DP_MAX_CONTAINER_REQUESTS + 1];

		for (size_t i = 0; i < ARRAY_SIZE(many_c); i++)
			many_c[i] = ok2;
		EXPECT_EQ(allocate(&s, ARRAY_SIZE(many_c), many_c, &m, &err), -E2BIG);
		EXPECT_CONTAINS(err, "container requests");
		rdp_free(err);
		err = NULL;
	}

	/* Garbage. */
	{
		static const uint8_t junk[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01};
		uint8_t *out = NULL;
		size_t out_len;

		EXPECT_EQ(rdp_dp_allocate(&s, junk, sizeof(junk), &out, &out_len, &err), -EBADMSG);
		EXPECT_TRUE(out == NULL && err == NULL);
	}

	/* A unit ID of a peer's choosing is shown bounded and printable. */
	{
		char longid[300];
		const char *const lid[] = {longid, NULL};

		memset(longid, 'z', sizeof(longid) - 1);
		longid[sizeof(longid) - 1] = '\0';
		longid[3] = '\n';
		EXPECT_EQ(allocate(&s, 1, (const char *const *const[]){lid}, &m, &err), -EINVAL);
		EXPECT_TRUE(err && strlen(err) < 300 && !strchr(err, '\n'));
		EXPECT_CONTAINS(err, "zzz?zz");
		rdp_free(err);
		err = NULL;
	}
	rdp_dp_state_done(&s);
}

static int x_preferred(const struct rdp_dp_state *s, const char *const *avail,
		       const char *const *must, int size, V1beta1__PreferredAllocationResponse **ret,
		       char **err)
{
	V1beta1__PreferredAllocationRequest r = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
	V1beta1__ContainerPreferredAllocationRequest c =
		V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
	V1beta1__ContainerPreferredAllocationRequest *cp[] = {&c};
	uint8_t buf[4096], *out = NULL;
	size_t len, out_len;
	int k;

	while (avail[c.n_available_deviceids])
		c.n_available_deviceids++;
	while (must[c.n_must_include_deviceids])
		c.n_must_include_deviceids++;
	c.available_deviceids = (char **)avail;
	c.must_include_deviceids = (char **)must;
	c.allocation_size = size;
	r.n_container_requests = 1;
	r.container_requests = cp;
	len = v1beta1__preferred_allocation_request__pack(&r, buf);
	k = rdp_dp_preferred_allocation(s, buf, len, &out, &out_len, err);
	*ret = k == 0 ? v1beta1__preferred_allocation_response__unpack(NULL, out_len, out) : NULL;
	rdp_free(out);
	return k;
}

/* A shared resource of 4 units. */
static int preferred(const char *const *avail, const char *const *must, int size,
		     V1beta1__PreferredAllocationResponse **ret, char **err)
{
	struct rdp_dp_state s = {.units = 4, .numa_node = -1};

	return x_preferred(&s, avail, must, size, ret, err);
}

static void expect_ids(V1beta1__PreferredAllocationResponse *m, const char *want)
{
	char got[256] = "";

	EXPECT_TRUE(m && m->n_container_responses == 1);
	if (!m || m->n_container_responses != 1)
		return;
	for (size_t i = 0; i < m->container_responses[0]->n_deviceids; i++) {
		if (i)
			strcat(got, ",");
		strcat(got, m->container_responses[0]->deviceids[i]);
	}
	EXPECT_STREQ(got, want);
	v1beta1__preferred_allocation_response__free_unpacked(m, NULL);
}

static void test_preferred(void)
{
	static const char *const avail[] = {"0", "1", "2", "3", NULL};
	static const char *const must2[] = {"2", NULL};
	static const char *const must22[] = {"2", "2", "3", NULL};
	static const char *const none[] = {NULL};
	V1beta1__PreferredAllocationResponse *m;
	char *err = NULL;

	EXPECT_EQ(preferred(avail, must2, 2, &m, &err), 0);
	expect_ids(m, "2,0");
	EXPECT_EQ(preferred(avail, must22, 3, &m, &err), 0);
	expect_ids(m, "2,3,0");
	EXPECT_EQ(preferred(avail, none, 3, &m, &err), 0);
	expect_ids(m, "0,1,2");
	/* must-include always kept, even beyond the size. */
	EXPECT_EQ(preferred(avail, must22, 1, &m, &err), 0);
	expect_ids(m, "2,3");
	/* Not enough available: all there is. */
	EXPECT_EQ(preferred(avail, must2, 10, &m, &err), 0);
	expect_ids(m, "2,0,1,3");
	EXPECT_EQ(preferred(avail, must2, -1, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "negative allocation_size");
	rdp_free(err);
}

static void test_options(void)
{
	uint8_t *buf = NULL;
	size_t len = 99;
	V1beta1__DevicePluginOptions *o;

	EXPECT_EQ(rdp_dp_options_pack(RDP_MODE_SHARED, &buf, &len), 0);
	o = v1beta1__device_plugin_options__unpack(NULL, len, buf ? buf : (uint8_t *)"");
	EXPECT_TRUE(o && !o->pre_start_required && !o->get_preferred_allocation_available);
	if (o)
		v1beta1__device_plugin_options__free_unpacked(o, NULL);
	rdp_free(buf);
}

static void test_service(const struct rdp_host *h)
{
	size_t i01[] = {0, 1}, i1[] = {1}, i2[] = {2};
	struct rdp_pool p = pool_of(i01, 2);
	struct rdp_dp_service *svc = NULL;
	struct rdp_dp_state s = {.numa_node = -1};

	EXPECT_EQ(rdp_dp_service_new(NULL, NULL, &svc), 0);
	EXPECT_EQ(rdp_dp_service_state(svc)->units, 0);
	EXPECT_EQ(rdp_dp_service_streams(svc), 0);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_service_set_state(svc, &s),
		  RDP_DP_CHANGED_SNAPSHOT | RDP_DP_CHANGED_SPECS | RDP_DP_CHANGED_ENV);
	EXPECT_EQ(s.n_specs, 0); /* taken over */
	EXPECT_EQ(rdp_dp_service_state(svc)->units, 4);

	/* The same host again: nothing changed, nothing sent. */
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_service_set_state(svc, &s), 0);

	/* Health goes: snapshot, specs and variables (other devices) change. */
	p = pool_of(i1, 1);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_service_set_state(svc, &s),
		  RDP_DP_CHANGED_SNAPSHOT | RDP_DP_CHANGED_SPECS | RDP_DP_CHANGED_ENV);
	EXPECT_TRUE(!rdp_dp_service_state(svc)->healthy);

	/* Other NUMA node, health back. */
	p = pool_of(i2, 1);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_TRUE(rdp_dp_service_set_state(svc, &s) & RDP_DP_CHANGED_SNAPSHOT);
	EXPECT_EQ(rdp_dp_service_state(svc)->numa_node, 0);

	EXPECT_TRUE(rdp_dp_service_handles("/v1beta1.DevicePlugin/Allocate"));
	EXPECT_TRUE(rdp_dp_service_handles("/v1beta1.DevicePlugin/ListAndWatch"));
	EXPECT_TRUE(!rdp_dp_service_handles("/v1beta1.DevicePlugin/Nope"));
	EXPECT_TRUE(!rdp_dp_service_handles("/v1beta1.Registration/Register"));
	rdp_dp_service_free(svc);
	rdp_dp_state_done(&s);
}

/* What the daemon does for an Allocate: build s, its snapshot, the answer to req. */
static int build_and_answer(const struct rdp_host *h, const struct rdp_pool *p, const uint8_t *req,
			    size_t len, struct rdp_dp_state *s)
{
	uint8_t *out = NULL;
	size_t out_len;
	char *err = NULL;
	int r = rdp_dp_state_build(h, p, s);

	if (r == 0)
		r = rdp_dp_snapshot_pack(s, &out, &out_len);
	rdp_free(out);
	out = NULL;
	if (r == 0)
		r = rdp_dp_allocate(s, req, len, &out, &out_len, &err);
	rdp_free(out);
	rdp_free(err);
	return r;
}

/* Each allocation of a build / an answer fails in turn: -ENOMEM, nothing leaks (ASan). */
static void test_failmalloc(const struct rdp_host *h)
{
	size_t i01[] = {0, 1};
	struct rdp_pool p = pool_of(i01, 2);
	static const char *const ok1[] = {"0", "3", NULL};
	size_t len;
	uint8_t *req = alloc_req(&len, 1, (const char *const *const[]){ok1});
	bool all_ok = true;

	for (unsigned long n = 1; n < 200; n++) {
		struct rdp_dp_state s = {.numa_node = -1};
		int r;

		rdp_alloc_fail_at(n);
		r = build_and_answer(h, &p, req, len, &s);
		rdp_alloc_fail_at(0);
		if (r != 0 && r != -ENOMEM && r != -EBADMSG)
			all_ok = false;
		rdp_dp_state_done(&s);
		if (r == 0)
			break;
	}
	EXPECT_TRUE(all_ok);
	rdp_free(req);
}


/* ---- usability: only usable devices count ---- */

static void make_unusable(struct rdp_device *d, enum rdp_usability u, const char *reason)
{
	d->usability = u;
	snprintf(d->unusable_reason, sizeof(d->unusable_reason), "%s", reason);
}

struct diff_ev {
	char log[512];
};

static void diff_log(enum rdp_dp_unusable_event e, const char *device, const char *reason, void *ud)
{
	char *log = ((struct diff_ev *)ud)->log;
	size_t n = strlen(log);

	snprintf(log + n, 512 - n, "%s %s (%s);",
		 e == RDP_DP_UNUSABLE_APPEARED  ? "appeared"
		 : e == RDP_DP_UNUSABLE_CLEARED ? "cleared"
						: "changed",
		 device, reason);
}

static void test_usable_state(void)
{
	struct rdp_host *h = make_host();
	size_t i02[] = {0, 2}, i2[] = {2}, i0[] = {0};
	struct rdp_pool p = pool_of(i02, 2);
	struct rdp_dp_state s = {.numa_node = -1}, t = {.numa_node = -1};
	V1beta1__ListAndWatchResponse *m;
	V1beta1__AllocateResponse *am = NULL;
	static const char *const ok1[] = {"0", NULL};
	uint8_t *buf = NULL;
	size_t len;
	char *err = NULL;

	/* mlx5_2 (ACTIVE) cannot be used: it counts for nothing but units and the list. */
	make_unusable(&h->devices[2], RDP_UNUSABLE_UVERBS_NODE, "/dev/infiniband/uverbs2 missing");
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(s.units, 4);
	EXPECT_EQ(s.n_devices, 2);
	EXPECT_EQ(s.n_usable, 1);
	EXPECT_EQ(s.n_active, 1);
	EXPECT_TRUE(s.healthy);
	EXPECT_EQ(s.n_unusable, 1);
	if (s.n_unusable == 1) {
		EXPECT_STREQ(s.unusable[0].device, "mlx5_2");
		EXPECT_STREQ(s.unusable[0].reason, "/dev/infiniband/uverbs2 missing");
	}
	EXPECT_EQ(s.n_specs, 4); /* issm0 rdma_cm umad0 uverbs0: nothing of mlx5_2 */
	for (size_t i = 0; i < s.n_specs; i++) {
		EXPECT_TRUE(strstr(s.specs[i], "2") == NULL);
		EXPECT_STREQ(s.spec_owners[i],
			     strcmp(s.specs[i], IB "rdma_cm") == 0 ? "rdma_cm" : "mlx5_0");
	}

	/* A pool whose only device is unusable: registered, all units Unhealthy, no specs. */
	p = pool_of(i2, 1);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(s.units, 4);
	EXPECT_TRUE(!s.healthy);
	EXPECT_EQ(s.n_usable, 0);
	EXPECT_EQ(s.n_active, 0);
	EXPECT_EQ(s.n_specs, 0); /* not even rdma_cm */
	EXPECT_EQ(rdp_dp_snapshot_pack(&s, &buf, &len), 0);
	m = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
	EXPECT_TRUE(m && m->n_devices == 4);
	for (size_t i = 0; m && i < m->n_devices; i++)
		EXPECT_STREQ(m->devices[i]->health, "Unhealthy");
	if (m)
		v1beta1__list_and_watch_response__free_unpacked(m, NULL);
	rdp_free(buf);
	/* Allocate on it: FAILED_PRECONDITION's errno, naming the device and the problem. */
	EXPECT_EQ(allocate(&s, 1, (const char *const *const[]){ok1}, &am, &err), -ENODEV);
	EXPECT_TRUE(am == NULL);
	EXPECT_CONTAINS(err, "mlx5_2: /dev/infiniband/uverbs2 missing");
	rdp_free(err);
	err = NULL;

	/* The diff the daemon logs from. */
	p = pool_of(i02, 2);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &t), 0);
	EXPECT_TRUE(rdp_dp_state_same_unusable(&s, &t));
	make_unusable(&h->devices[0], RDP_UNUSABLE_NO_RDMA_CM, "/dev/infiniband/rdma_cm missing");
	make_unusable(&h->devices[2], RDP_USABLE, "");
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_TRUE(!rdp_dp_state_same_unusable(&s, &t));
	{
		struct diff_ev ev = {.log = ""};
		rdp_dp_unusable_cb cb = diff_log;

		rdp_dp_unusable_diff(&t, &s, cb, &ev);
		EXPECT_STREQ(ev.log, "cleared mlx5_2 (/dev/infiniband/uverbs2 missing);"
				     "appeared mlx5_0 (/dev/infiniband/rdma_cm missing);");
		ev.log[0] = '\0';
		rdp_dp_unusable_diff(&s, &s, cb, &ev);
		EXPECT_STREQ(ev.log, "");
		make_unusable(&h->devices[0], RDP_UNUSABLE_UVERBS_NODE, "other");
		EXPECT_EQ(rdp_dp_state_build(h, &p, &t), 0);
		rdp_dp_unusable_diff(&s, &t, cb, &ev);
		EXPECT_STREQ(ev.log, "changed mlx5_0 (other);");
	}

	/* The service reports a change of the list alone. */
	{
		struct rdp_dp_service *svc = NULL;

		EXPECT_EQ(rdp_dp_service_new(NULL, NULL, &svc), 0);
		p = pool_of(i0, 1);
		make_unusable(&h->devices[0], RDP_USABLE, "");
		EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
		EXPECT_TRUE(rdp_dp_service_set_state(svc, &s) > 0);
		/* mlx5_0 stays unhealthy-or-not the same, but becomes unusable: all changes. */
		make_unusable(&h->devices[0], RDP_UNUSABLE_UVERBS_NODE, "x");
		EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
		EXPECT_EQ(rdp_dp_service_set_state(svc, &s), RDP_DP_CHANGED_SNAPSHOT |
								     RDP_DP_CHANGED_SPECS |
								     RDP_DP_CHANGED_UNUSABLE |
								     RDP_DP_CHANGED_ENV);
		make_unusable(&h->devices[0], RDP_UNUSABLE_UVERBS_NODE, "y");
		EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
		EXPECT_EQ(rdp_dp_service_set_state(svc, &s), RDP_DP_CHANGED_UNUSABLE);
		rdp_dp_service_free(svc);
	}
	rdp_dp_state_done(&s);
	rdp_dp_state_done(&t);
	rdp_host_free(h);
}

/* ACTIVE_DEFER (5) is active: it counts toward health. */
static void test_active_defer(void)
{
	struct rdp_host *h = make_host();
	size_t i1[] = {1};
	struct rdp_pool p = pool_of(i1, 1);
	struct rdp_dp_state s = {.numa_node = -1};

	EXPECT_TRUE(rdp_port_state_is_active(RDP_PORT_ACTIVE));
	EXPECT_TRUE(rdp_port_state_is_active(RDP_PORT_ACTIVE_DEFER));
	EXPECT_TRUE(!rdp_port_state_is_active(RDP_PORT_ARMED));
	EXPECT_TRUE(!rdp_port_state_is_active(RDP_PORT_INIT));
	EXPECT_TRUE(!rdp_port_state_is_active(RDP_PORT_STATE_UNKNOWN));
	EXPECT_TRUE(!rdp_device_is_active(&h->devices[1])); /* DOWN */
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_TRUE(!s.healthy);
	h->devices[1].ports[0].state = RDP_PORT_ACTIVE_DEFER;
	EXPECT_TRUE(rdp_device_is_active(&h->devices[1]));
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_TRUE(s.healthy);
	EXPECT_EQ(s.n_active, 1);
	rdp_dp_state_done(&s);
	rdp_host_free(h);
}

/* ---- Allocate checks its nodes: real files, a real gRPC server and client ---- */

struct vctx {
	struct rdp_event *e;
	struct rdp_dp_service *svc;
	char sock[256];
	char dev[256];
	int n_refresh;
	char refresh_reason[512];
	/* what the refresh callback does: nothing (the test answers later), or at once */
	enum { REFRESH_LATER, REFRESH_NOW } mode;
	int n_cancelled;
	int n_waited;
};

struct vresult {
	int n;
	enum rdp_grpc_code code;
	char message[1024];
	size_t n_specs;
};

static void v_on_call(struct rdp_grpc_call *call, const uint8_t *req, size_t len, void *ud)
{
	struct vctx *v = ud;

	rdp_dp_service_dispatch(v->svc, call, req, len);
}

static const struct rdp_grpc_method v_methods[] = {
	{ .path = "/v1beta1.DevicePlugin/Allocate", .handler = v_on_call },
};

static void v_on_info(const struct rdp_dp_call_info *info, void *ud)
{
	struct vctx *v = ud;

	if (info->code == RDP_GRPC_CANCELLED && info->waited)
		v->n_cancelled++;
	if (info->waited)
		v->n_waited++;
}

static void v_on_refresh(const char *reason, void *ud)
{
	struct vctx *v = ud;

	v->n_refresh++;
	snprintf(v->refresh_reason, sizeof(v->refresh_reason), "%s", reason);
	if (v->mode == REFRESH_NOW)
		rdp_dp_service_refreshed(v->svc);
}

static void v_on_reply(enum rdp_grpc_code code, const char *message, const uint8_t *resp,
		       size_t len, void *ud)
{
	struct vresult *r = ud;

	r->n++;
	r->code = code;
	snprintf(r->message, sizeof(r->message), "%s", message ? message : "");
	r->n_specs = 0;
	if (code == RDP_GRPC_OK) {
		V1beta1__AllocateResponse *m = v1beta1__allocate_response__unpack(NULL, len, resp);

		if (m && m->n_container_responses == 1)
			r->n_specs = m->container_responses[0]->n_devices;
		if (m)
			v1beta1__allocate_response__free_unpacked(m, NULL);
	}
}

static void v_spin(struct vctx *v, int rounds)
{
	for (int i = 0; i < rounds; i++)
		(void)rdp_event_run_once(v->e, 2);
}

/* Starts an Allocate for unit "0"; returns the client call (r gets the answer). */
static struct rdp_grpc_client_call *v_start(struct vctx *v, struct vresult *r)
{
	static const char *const ids[] = {"0", NULL};
	struct rdp_grpc_client_call *c = NULL;
	size_t len;
	uint8_t *req = alloc_req(&len, 1, (const char *const *const[]){ids});

	memset(r, 0, sizeof(*r));
	EXPECT_EQ(rdp_grpc_unary_call(v->e, v->sock, "/v1beta1.DevicePlugin/Allocate", req, len,
				      0, v_on_reply, r, &c),
		  0);
	rdp_free(req);
	return c;
}

static void v_wait(struct vctx *v, struct vresult *r)
{
	for (int i = 0; i < 2000 && r->n == 0; i++)
		(void)rdp_event_run_once(v->e, 5);
}

static void v_call(struct vctx *v, struct vresult *r)
{
	v_start(v, r);
	v_wait(v, r);
}

static int node(const struct vctx *v, const char *name, unsigned int maj, unsigned int min)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/infiniband/%s", v->dev, name);
	unlink(path);
	return mknod(path, S_IFCHR | 0600, makedev(maj, min));
}

/* mlx5_0 and mlx5_1 with uverbs/umad as a kernel numbers them, and rdma_cm 10:58. */
static struct rdp_host *v_host(unsigned int uverbs1_minor)
{
	struct rdp_host *h = make_host();

	for (size_t i = 0; i < 2; i++) {
		struct rdp_device *d = &h->devices[i];

		d->char_devnums = rdp_calloc(d->n_char_devices, sizeof(dev_t));
		d->char_devnums[0] = makedev(231, i == 1 ? uverbs1_minor : 192 + i); /* uverbsN */
		d->char_devnums[1] = makedev(231, i);                                 /* umadN */
		d->char_devnums[2] = makedev(231, 64 + i);                            /* issmN */
	}
	h->rdma_cm_devnum = makedev(10, 58);
	return h;
}

static void v_set_state(struct vctx *v, unsigned int uverbs1_minor)
{
	struct rdp_host *h = v_host(uverbs1_minor);
	size_t i01[] = {0, 1};
	struct rdp_pool p = pool_of(i01, 2);
	struct rdp_dp_state s = {.numa_node = -1};

	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_TRUE(rdp_dp_service_set_state(v->svc, &s) >= 0);
	rdp_dp_state_done(&s);
	rdp_host_free(h);
}

static void test_verify(void)
{
	char tmpl[] = "/tmp/rdp-dp-verify-XXXXXX", path[512];
	struct vctx v = {.mode = REFRESH_LATER};
	struct rdp_grpc_server *srv = NULL;
	struct vresult r, many[RDP_DP_MAX_PARKED + 1];
	struct rdp_grpc_client_call *c;
	int k = 0;

	if (!mkdtemp(tmpl)) {
		EXPECT_TRUE(false);
		return;
	}
	snprintf(v.dev, sizeof(v.dev), "%s/dev", tmpl);
	snprintf(v.sock, sizeof(v.sock), "%s/dp.sock", tmpl);
	snprintf(path, sizeof(path), "%s/infiniband", v.dev);
	EXPECT_EQ(mkdir(v.dev, 0755), 0);
	EXPECT_EQ(mkdir(path, 0755), 0);
	for (unsigned int i = 0; i < 2 && k == 0; i++) {
		char n[32];

		snprintf(n, sizeof(n), "uverbs%u", i);
		k |= node(&v, n, 231, 192 + i);
		snprintf(n, sizeof(n), "umad%u", i);
		k |= node(&v, n, 231, i);
		snprintf(n, sizeof(n), "issm%u", i);
		k |= node(&v, n, 231, 64 + i);
	}
	if (k == 0)
		k = node(&v, "rdma_cm", 10, 58);
	if (k != 0) {
		fprintf(stderr, "test-dp-service: SKIP node checks: mknod refused (%s)\n",
			strerror(errno));
		goto out;
	}

	EXPECT_EQ(rdp_event_new(&v.e), 0);
	EXPECT_EQ(rdp_dp_service_new(v_on_info, &v, &v.svc), 0);
	EXPECT_EQ(rdp_grpc_server_new(v.e, v.sock, v_methods, ARRAY_SIZE(v_methods), NULL, &v,
				      &srv),
		  0);
	EXPECT_EQ(rdp_dp_service_set_dev_root(v.svc, "/nonexistent-rdp-dev"), -ENOENT);
	EXPECT_EQ(rdp_dp_service_set_dev_root(v.svc, v.dev), 0);
	v_set_state(&v, 193);

	/* Everything as sysfs names it: answered. */
	v_call(&v, &r);
	EXPECT_EQ(r.code, RDP_GRPC_OK);
	EXPECT_EQ(r.n_specs, 7);

	/* No refresh callback: a node with another number fails the call at once. */
	EXPECT_EQ(node(&v, "uverbs1", 231, 200), 0);
	v_call(&v, &r);
	EXPECT_EQ(r.code, RDP_GRPC_FAILED_PRECONDITION);
	EXPECT_CONTAINS(r.message, "mlx5_1: /dev/infiniband/uverbs1 is 231:200, sysfs uverbs1 "
				   "says 231:193");
	/* ... a missing node too, each problem named. */
	snprintf(path, sizeof(path), "%s/infiniband/umad0", v.dev);
	EXPECT_EQ(unlink(path), 0);
	v_call(&v, &r);
	EXPECT_EQ(r.code, RDP_GRPC_FAILED_PRECONDITION);
	EXPECT_CONTAINS(r.message, "mlx5_0: /dev/infiniband/umad0 missing");
	EXPECT_CONTAINS(r.message, "mlx5_1: /dev/infiniband/uverbs1 is 231:200");
	EXPECT_EQ(node(&v, "umad0", 231, 0), 0);
	/* ... and a regular file that is no stand-in (not empty). */
	snprintf(path, sizeof(path), "%s/infiniband/rdma_cm", v.dev);
	EXPECT_EQ(unlink(path), 0);
	{
		int fd = open(path, O_WRONLY | O_CREAT, 0600);

		EXPECT_TRUE(fd >= 0 && write(fd, "x", 1) == 1);
		if (fd >= 0)
			close(fd);
	}
	v_call(&v, &r);
	EXPECT_EQ(r.code, RDP_GRPC_FAILED_PRECONDITION);
	EXPECT_CONTAINS(r.message, "rdma_cm: /dev/infiniband/rdma_cm is not a character device");
	/* An empty regular file is a stand-in (fixtures without mknod): accepted. */
	EXPECT_EQ(truncate(path, 0), 0);
	EXPECT_EQ(node(&v, "uverbs1", 231, 193), 0);
	v_call(&v, &r);
	EXPECT_EQ(r.code, RDP_GRPC_OK);
	EXPECT_EQ(node(&v, "rdma_cm", 10, 58), 0);

	/* With a refresh callback: the call waits; the rescan finds the new number. */
	rdp_dp_service_set_refresh(v.svc, v_on_refresh, &v);
	EXPECT_EQ(node(&v, "uverbs1", 231, 200), 0);
	v_start(&v, &r);
	v_spin(&v, 50);
	EXPECT_EQ(r.n, 0);
	EXPECT_EQ(rdp_dp_service_parked(v.svc), 1);
	EXPECT_EQ(v.n_refresh, 1);
	EXPECT_CONTAINS(v.refresh_reason, "mlx5_1: /dev/infiniband/uverbs1 is 231:200");
	v_set_state(&v, 200); /* what a rescan reads from sysfs now */
	EXPECT_EQ(rdp_dp_service_parked(v.svc), 0);
	v_wait(&v, &r);
	EXPECT_EQ(r.code, RDP_GRPC_OK);
	EXPECT_EQ(r.n_specs, 7);
	EXPECT_EQ(v.n_waited, 1);

	/* The rescan found nothing new: checked again, still wrong, FAILED_PRECONDITION. */
	EXPECT_EQ(node(&v, "uverbs1", 231, 201), 0);
	v_start(&v, &r);
	v_spin(&v, 50);
	EXPECT_EQ(v.n_refresh, 2);
	EXPECT_EQ(rdp_dp_service_parked(v.svc), 1);
	rdp_dp_service_refreshed(v.svc);
	v_wait(&v, &r);
	EXPECT_EQ(r.code, RDP_GRPC_FAILED_PRECONDITION);
	EXPECT_CONTAINS(r.message, "mlx5_1: /dev/infiniband/uverbs1 is 231:201, sysfs uverbs1 "
				   "says 231:200");

	/* ... or the node came back meanwhile: answered. */
	v_start(&v, &r);
	v_spin(&v, 50);
	EXPECT_EQ(v.n_refresh, 3);
	EXPECT_EQ(node(&v, "uverbs1", 231, 200), 0);
	rdp_dp_service_refreshed(v.svc);
	v_wait(&v, &r);
	EXPECT_EQ(r.code, RDP_GRPC_OK);

	/* A callback that rescans at once (synchronously) answers the call from inside. */
	v.mode = REFRESH_NOW;
	EXPECT_EQ(node(&v, "uverbs1", 231, 202), 0);
	v_call(&v, &r);
	EXPECT_EQ(v.n_refresh, 4);
	EXPECT_EQ(r.code, RDP_GRPC_FAILED_PRECONDITION);
	EXPECT_EQ(rdp_dp_service_parked(v.svc), 0);
	v.mode = REFRESH_LATER;

	/* Bounded: RDP_DP_MAX_PARKED calls wait, the next is UNAVAILABLE; one refresh asked. */
	for (size_t i = 0; i < ARRAY_SIZE(many); i++)
		v_start(&v, &many[i]);
	v_spin(&v, 200);
	EXPECT_EQ(rdp_dp_service_parked(v.svc), RDP_DP_MAX_PARKED);
	EXPECT_EQ(v.n_refresh, 5);
	{
		size_t n_unavail = 0;

		for (size_t i = 0; i < ARRAY_SIZE(many); i++)
			if (many[i].n == 1 && many[i].code == RDP_GRPC_UNAVAILABLE)
				n_unavail++;
		EXPECT_EQ(n_unavail, 1);
	}
	EXPECT_EQ(node(&v, "uverbs1", 231, 200), 0);
	rdp_dp_service_refreshed(v.svc);
	v_spin(&v, 200);
	{
		size_t n_ok = 0;

		for (size_t i = 0; i < ARRAY_SIZE(many); i++)
			if (many[i].n == 1 && many[i].code == RDP_GRPC_OK)
				n_ok++;
		EXPECT_EQ(n_ok, RDP_DP_MAX_PARKED);
	}

	/* A waiting call whose client goes away is dropped; the refresh answers no one. */
	EXPECT_EQ(node(&v, "uverbs1", 231, 203), 0);
	v.n_cancelled = 0;
	c = v_start(&v, &r);
	v_spin(&v, 50);
	EXPECT_EQ(rdp_dp_service_parked(v.svc), 1);
	rdp_grpc_client_call_cancel(c);
	v_spin(&v, 50);
	EXPECT_EQ(rdp_dp_service_parked(v.svc), 0);
	EXPECT_EQ(v.n_cancelled, 1);
	EXPECT_EQ(r.n, 0);
	rdp_dp_service_refreshed(v.svc);

	/* Waiting calls end UNAVAILABLE when the service goes. */
	v_start(&v, &r);
	v_spin(&v, 50);
	EXPECT_EQ(rdp_dp_service_parked(v.svc), 1);
	v.svc = rdp_dp_service_free(v.svc);
	v_wait(&v, &r);
	EXPECT_EQ(r.code, RDP_GRPC_UNAVAILABLE);

	rdp_grpc_server_free(srv);
	v_spin(&v, 20);
	rdp_event_free(v.e);
out:
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpl);
		EXPECT_EQ(system(cmd), 0);
	}
}

/* The messages registration.c sends: RegisterRequest and the plugin watcher's PluginInfo. */
static void test_registration_messages(void)
{
	V1beta1__RegisterRequest *r;
	Pluginregistration__PluginInfo *pi;
	uint8_t *buf = NULL;
	size_t len;

	EXPECT_EQ(rdp_register_request_pack("a.sock", "rdma/a", false, &buf, &len), 0);
	r = v1beta1__register_request__unpack(NULL, len, buf);
	EXPECT_TRUE(r != NULL);
	if (r) {
		EXPECT_STREQ(r->version, "v1beta1");
		EXPECT_STREQ(r->endpoint, "a.sock");
		EXPECT_STREQ(r->resource_name, "rdma/a");
		EXPECT_TRUE(!r->options || (!r->options->pre_start_required &&
					    !r->options->get_preferred_allocation_available));
		v1beta1__register_request__free_unpacked(r, NULL);
	}
	rdp_free(buf);

	EXPECT_EQ(rdp_watcher_info_pack("rdma/a", "", NULL, NULL, 0, &buf, &len), 0);
	pi = pluginregistration__plugin_info__unpack(NULL, len, buf);
	EXPECT_TRUE(pi != NULL);
	if (pi) {
		EXPECT_STREQ(pi->type, "DevicePlugin");
		EXPECT_STREQ(pi->name, "rdma/a");
		EXPECT_STREQ(pi->endpoint, "");
		EXPECT_EQ(pi->n_supported_versions, 1);
		if (pi->n_supported_versions == 1)
			EXPECT_STREQ(pi->supported_versions[0], "v1beta1");
		pluginregistration__plugin_info__free_unpacked(pi, NULL);
	}
	rdp_free(buf);
	EXPECT_TRUE(rdp_watcher_handles("/pluginregistration.Registration/GetInfo"));
	EXPECT_TRUE(!rdp_watcher_handles("/v1beta1.DevicePlugin/Allocate"));
}

/* ---- exclusive resources: a unit per usable device ---- */

static struct rdp_resource res_x = {.name = (char *)"x",
				    .prefix = (char *)"rdma",
				    .full_name = (char *)"rdma/x",
				    .mode = RDP_MODE_EXCLUSIVE};

static void place(struct rdp_device *d, const char *pci, const char *path)
{
	snprintf(d->pci_address, sizeof(d->pci_address), "%s", pci);
	d->pci_path = path ? xdup(path) : NULL;
}

/*
 * PF mlx5_0 0000:3b:00.0 (NUMA 0) with VFs mlx5_1..3 at 3b:00.2-.4 (mlx5_2 DOWN), an SF
 * mlx5_5 (sfnum 7) on the PF, PF mlx5_4 0000:af:00.0 on the other socket, rxe0 (no PCI),
 * and mlx5_6 at 0000:3b:00.5 without a uverbs node (unusable). Pool order != ID order.
 */
static struct rdp_host *make_x_host(void)
{
	static const char *const c[][3] = {
		{IB "uverbs0", IB "umad0", IB "issm0"}, {IB "uverbs1", IB "umad1", IB "issm1"},
		{IB "uverbs2", IB "umad2", IB "issm2"}, {IB "uverbs3", IB "umad3", IB "issm3"},
		{IB "uverbs4", IB "umad4", IB "issm4"}, {IB "uverbs5", IB "umad5", IB "issm5"},
		{IB "uverbs6", IB "umad6", IB "issm6"}, {IB "uverbs7", IB "umad7", IB "issm7"}};
	static const char *const names[] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3",
					    "mlx5_4", "mlx5_5", "mlx5_6", "rxe0"};
	const char *rp0 = "devices/pci0000:3a/0000:3a:00.0/";
	struct rdp_host *h = rdp_calloc(1, sizeof(*h));
	char path[128];

	h->devices = rdp_calloc(8, sizeof(*h->devices));
	h->n_devices = 8;
	for (size_t i = 0; i < 8; i++)
		make_device(&h->devices[i], names[i], i == 4 ? 1 : i == 7 ? -1 : 0,
			    i == 2 ? RDP_PORT_DOWN : RDP_PORT_ACTIVE, c[i], 3);
	snprintf(path, sizeof(path), "%s0000:3b:00.0", rp0);
	place(&h->devices[0], "0000:3b:00.0", path);
	place(&h->devices[5], "0000:3b:00.0", path);
	h->devices[5].is_sf = true;
	h->devices[5].sf_num = 7;
	for (size_t i = 1; i <= 3; i++) {
		char pci[16];

		snprintf(pci, sizeof(pci), "0000:3b:00.%zu", i + 1);
		snprintf(path, sizeof(path), "%s%s", rp0, pci);
		place(&h->devices[i], pci, path);
		h->devices[i].is_vf = true;
	}
	place(&h->devices[4], "0000:af:00.0", "devices/pci0000:ae/0000:ae:00.0/0000:af:00.0");
	snprintf(path, sizeof(path), "%s0000:3b:00.5", rp0);
	place(&h->devices[6], "0000:3b:00.5", path);
	make_unusable(&h->devices[6], RDP_UNUSABLE_NO_UVERBS, "no uverbs device in sysfs");
	place(&h->devices[7], "", NULL);
	snprintf(h->rdma_cm, sizeof(h->rdma_cm), IB "rdma_cm");
	return h;
}

static struct rdp_pool x_pool(size_t *idx, size_t n)
{
	return (struct rdp_pool){.res = &res_x, .devices = idx, .n_devices = n, .numa_node = -1};
}

static size_t x_all[] = {7, 6, 5, 4, 3, 2, 1, 0};

static void test_x_state(const struct rdp_host *h)
{
	struct rdp_pool p = x_pool(x_all, 8);
	struct rdp_dp_state s = {.numa_node = -1};
	static const char *const ids[] = {"0000:3b:00.0", "0000:3b:00.0-sf7", "0000:3b:00.2",
					  "0000:3b:00.3", "0000:3b:00.4", "0000:af:00.0", "rxe0"};
	static const char *const devs[] = {"mlx5_0", "mlx5_5", "mlx5_1", "mlx5_2",
					   "mlx5_3", "mlx5_4", "rxe0"};
	static const int numa[] = {0, 0, 0, 0, 0, 1, -1};

	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(s.mode, RDP_MODE_EXCLUSIVE);
	EXPECT_EQ(s.units, 7); /* mlx5_6 is unusable: no unit */
	EXPECT_EQ(s.n_unit_v, 7);
	EXPECT_EQ(s.n_unusable, 1);
	EXPECT_EQ(rdp_dp_state_healthy_units(&s), 6);
	for (size_t i = 0; i < s.n_unit_v && i < 7; i++) {
		const struct rdp_dp_unit *u = &s.unit_v[i];

		EXPECT_STREQ(u->id, ids[i]);
		EXPECT_STREQ(u->device, devs[i]);
		EXPECT_EQ(u->numa_node, numa[i]);
		EXPECT_EQ(u->healthy, i != 3);
		EXPECT_EQ(u->n_specs, 3);
		for (size_t j = 0; j < u->n_specs; j++)
			EXPECT_TRUE(strstr(s.specs[u->specs[j]], devs[i][0] == 'r' ? "7" :
					   devs[i] + 5) != NULL);
	}
	EXPECT_STREQ(s.unit_v[0].place.pcie_root, "pci0000:3a");
	EXPECT_EQ(s.unit_v[0].place.n_chain, 2);
	EXPECT_TRUE(s.unit_v[6].place.is_virtual);
	EXPECT_TRUE(s.rdma_cm_spec < s.n_specs && strcmp(s.specs[s.rdma_cm_spec], IB "rdma_cm") == 0);
	rdp_dp_state_done(&s);
}

static void test_x_snapshot(const struct rdp_host *h)
{
	struct rdp_pool p = x_pool(x_all, 8);
	struct rdp_dp_state s = {.numa_node = -1};
	V1beta1__ListAndWatchResponse *m;
	uint8_t *buf = NULL;
	size_t len = 0;

	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_snapshot_pack(&s, &buf, &len), 0);
	m = v1beta1__list_and_watch_response__unpack(NULL, len, buf);
	EXPECT_TRUE(m && m->n_devices == 7);
	if (m && m->n_devices == 7) {
		EXPECT_STREQ(m->devices[0]->id, "0000:3b:00.0");
		EXPECT_STREQ(m->devices[0]->health, "Healthy");
		EXPECT_TRUE(m->devices[0]->topology && m->devices[0]->topology->n_nodes == 1 &&
			    m->devices[0]->topology->nodes[0]->id == 0);
		EXPECT_STREQ(m->devices[3]->health, "Unhealthy");
		EXPECT_TRUE(m->devices[5]->topology->nodes[0]->id == 1);
		/* NUMA -1 (rxe, a VM): no TopologyInfo at all, not node -1. */
		EXPECT_STREQ(m->devices[6]->id, "rxe0");
		EXPECT_TRUE(m->devices[6]->topology == NULL);
	}
	if (m)
		v1beta1__list_and_watch_response__free_unpacked(m, NULL);
	rdp_free(buf);
	rdp_dp_state_done(&s);
}

static char *spec_list(const V1beta1__ContainerAllocateResponse *c)
{
	static char out[512];

	out[0] = '\0';
	for (size_t i = 0; i < c->n_devices; i++)
		snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", i ? "," : "",
			 c->devices[i]->host_path + strlen(IB));
	return out;
}

static void test_x_allocate(const struct rdp_host *h)
{
	struct rdp_pool p = x_pool(x_all, 8);
	struct rdp_dp_state s = {.numa_node = -1};
	V1beta1__AllocateResponse *m;
	char *err = NULL;
	static const char *const one[] = {"0000:3b:00.4", NULL};
	static const char *const two[] = {"rxe0", "0000:3b:00.0-sf7", NULL};
	static const char *const unknown[] = {"0", "0000:3b:00.5", "mlx5_0", NULL};
	static const char *const dup[] = {"0000:af:00.0", "0000:af:00.0", NULL};
	static const char *const sick[] = {"0000:3b:00.3", NULL};
	static const char *const none[] = {NULL};

	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(allocate(&s, 2, (const char *const *const[]){one, two}, &m, &err), 0);
	EXPECT_TRUE(m && m->n_container_responses == 2);
	if (m && m->n_container_responses == 2) {
		EXPECT_STREQ(spec_list(m->container_responses[0]), "issm3,rdma_cm,umad3,uverbs3");
		EXPECT_STREQ(spec_list(m->container_responses[1]),
			     "issm5,issm7,rdma_cm,umad5,umad7,uverbs5,uverbs7");
		EXPECT_STREQ(m->container_responses[0]->devices[0]->permissions, "rwm");
	}
	if (m)
		v1beta1__allocate_response__free_unpacked(m, NULL);

	EXPECT_EQ(allocate(&s, 1, (const char *const *const[]){unknown}, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "container request 0: unknown device IDs \"0\", \"0000:3b:00.5\", "
			     "\"mlx5_0\" (the resource's units are \"0000:3b:00.0\"");
	EXPECT_CONTAINS(err, "; mlx5_6 is unusable: no uverbs device in sysfs)");
	rdp_free(err);
	err = NULL;
	EXPECT_EQ(allocate(&s, 2, (const char *const *const[]){one, dup}, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "container request 1: duplicate device IDs \"0000:af:00.0\"");
	rdp_free(err);
	err = NULL;
	EXPECT_EQ(allocate(&s, 1, (const char *const *const[]){sick}, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "unhealthy device IDs \"0000:3b:00.3\" (mlx5_2: no active port)");
	rdp_free(err);
	err = NULL;
	EXPECT_EQ(allocate(&s, 1, (const char *const *const[]){none}, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "names no device IDs");
	rdp_free(err);
	rdp_dp_state_done(&s);
}

static void test_x_preferred(const struct rdp_host *h)
{
	struct rdp_pool p = x_pool(x_all, 8);
	struct rdp_dp_state s = {.numa_node = -1};
	V1beta1__PreferredAllocationResponse *m;
	char *err = NULL;
	/* kubelet's order is a Go set's: any. */
	static const char *const all[] = {"rxe0", "0000:af:00.0", "0000:3b:00.4", "0000:3b:00.2",
					  "0000:3b:00.0", "0000:3b:00.3", "0000:3b:00.0-sf7", NULL};
	static const char *const far[] = {"0000:af:00.0", "0000:3b:00.4", "rxe0",
					  "0000:3b:00.2", NULL};
	static const char *const must_af[] = {"0000:af:00.0", NULL};
	static const char *const must_rxe[] = {"rxe0", NULL};
	static const char *const must_bad[] = {"0000:3b:00.2", NULL};
	static const char *const unknown[] = {"0000:3b:00.2", "nope", NULL};
	static const char *const none[] = {NULL};

	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	/* One unit: the lowest address among the closest (every one alone is as close). */
	EXPECT_EQ(x_preferred(&s, all, none, 1, &m, &err), 0);
	expect_ids(m, "0000:3b:00.0");
	/* Three: the PF, its SF and a VF (one function is closest), never the sick VF. */
	EXPECT_EQ(x_preferred(&s, all, none, 3, &m, &err), 0);
	expect_ids(m, "0000:3b:00.0,0000:3b:00.0-sf7,0000:3b:00.2");
	EXPECT_EQ(x_preferred(&s, far, none, 2, &m, &err), 0);
	expect_ids(m, "0000:3b:00.2,0000:3b:00.4");
	/* Must-include is kept; then the closest to it (other socket: SYS beats rxe's none). */
	EXPECT_EQ(x_preferred(&s, far, must_af, 2, &m, &err), 0);
	expect_ids(m, "0000:3b:00.2,0000:af:00.0");
	EXPECT_EQ(x_preferred(&s, far, must_rxe, 1, &m, &err), 0);
	expect_ids(m, "rxe0");
	/* All of them, unhealthy one included, when that is what is asked. */
	EXPECT_EQ(x_preferred(&s, all, none, 7, &m, &err), 0);
	expect_ids(m, "0000:3b:00.0,0000:3b:00.0-sf7,0000:3b:00.2,0000:3b:00.3,0000:3b:00.4,"
		      "0000:af:00.0,rxe0");
	EXPECT_EQ(x_preferred(&s, all, none, 0, &m, &err), 0);
	expect_ids(m, "");

	EXPECT_EQ(x_preferred(&s, far, none, 5, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "allocation_size 5, but 4 distinct device IDs are available");
	rdp_free(err);
	EXPECT_EQ(x_preferred(&s, must_af, must_bad, 1, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "must-include device IDs not among the available ones "
			     "\"0000:3b:00.2\"");
	rdp_free(err);
	EXPECT_EQ(x_preferred(&s, unknown, none, 1, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "unknown device IDs \"nope\"");
	rdp_free(err);
	EXPECT_EQ(x_preferred(&s, far, far, 2, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "allocation_size 2, but 4 distinct device IDs must be included");
	rdp_free(err);
	EXPECT_EQ(x_preferred(&s, far, none, -2, &m, &err), -EINVAL);
	EXPECT_CONTAINS(err, "negative allocation_size");
	rdp_free(err);
	rdp_dp_state_done(&s);
}

static void test_x_changes(struct rdp_host *h)
{
	struct rdp_pool p = x_pool(x_all, 8);
	struct rdp_dp_state a = {.numa_node = -1}, b = {.numa_node = -1};
	uint8_t *buf = NULL;
	size_t len;
	V1beta1__DevicePluginOptions *o;

	EXPECT_EQ(rdp_dp_options_pack(RDP_MODE_EXCLUSIVE, &buf, &len), 0);
	o = v1beta1__device_plugin_options__unpack(NULL, len, buf);
	EXPECT_TRUE(o && o->get_preferred_allocation_available && !o->pre_start_required);
	if (o)
		v1beta1__device_plugin_options__free_unpacked(o, NULL);
	rdp_free(buf);

	EXPECT_EQ(rdp_dp_state_build(h, &p, &a), 0);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &b), 0);
	EXPECT_TRUE(rdp_dp_state_same_snapshot(&a, &b) && rdp_dp_state_same_specs(&a, &b));
	rdp_dp_state_done(&b);
	/* One unit's port goes down: another snapshot, the same specs. */
	h->devices[1].ports[0].state = RDP_PORT_DOWN;
	EXPECT_EQ(rdp_dp_state_build(h, &p, &b), 0);
	EXPECT_TRUE(!rdp_dp_state_same_snapshot(&a, &b) && rdp_dp_state_same_specs(&a, &b));
	h->devices[1].ports[0].state = RDP_PORT_ACTIVE;
	rdp_dp_state_done(&b);
	/* Two devices swap their nodes: the same paths, other owners. */
	{
		char **t = h->devices[0].char_devices;

		h->devices[0].char_devices = h->devices[1].char_devices;
		h->devices[1].char_devices = t;
		EXPECT_EQ(rdp_dp_state_build(h, &p, &b), 0);
		EXPECT_TRUE(rdp_dp_state_same_snapshot(&a, &b));
		EXPECT_TRUE(!rdp_dp_state_same_specs(&a, &b));
		h->devices[1].char_devices = h->devices[0].char_devices;
		h->devices[0].char_devices = t;
	}
	rdp_dp_state_done(&b);
	/* The same devices shared: another mode, another snapshot. */
	p.res = &res4;
	EXPECT_EQ(rdp_dp_state_build(h, &p, &b), 0);
	EXPECT_TRUE(!rdp_dp_state_same_snapshot(&a, &b));
	rdp_dp_state_done(&a);
	rdp_dp_state_done(&b);
}

/* Each allocation of an exclusive build / answer fails in turn: -ENOMEM, no leak. */
static void test_x_failmalloc(const struct rdp_host *h)
{
	struct rdp_pool p = x_pool(x_all, 8);
	static const char *const one[] = {"0000:3b:00.4", "rxe0", NULL};
	static const char *const all[] = {"rxe0", "0000:af:00.0", "0000:3b:00.4", "0000:3b:00.2",
					  "0000:3b:00.0", NULL};
	size_t len;
	uint8_t *req = alloc_req(&len, 1, (const char *const *const[]){one});
	bool all_ok = true, done = false;

	for (unsigned long n = 1; n < 400 && !done; n++) {
		struct rdp_dp_state s = {.numa_node = -1};
		V1beta1__PreferredAllocationResponse *m = NULL;
		char *err = NULL;
		int r;

		rdp_alloc_fail_at(n);
		r = build_and_answer(h, &p, req, len, &s);
		if (r == 0)
			r = x_preferred(&s, all, (const char *const[]){NULL}, 3, &m, &err);
		rdp_alloc_fail_at(0);
		if (r != 0 && r != -ENOMEM)
			all_ok = false;
		if (m)
			v1beta1__preferred_allocation_response__free_unpacked(m, NULL);
		rdp_free(err);
		rdp_dp_state_done(&s);
		done = r == 0;
	}
	EXPECT_TRUE(all_ok && done);
	rdp_free(req);
}

/* Two ibdevs of one PCI function without an SF number: each ID gets its ibdev name. */
static void test_x_shared_function(void)
{
	static const char *const c0[] = {IB "uverbs0"}, *const c1[] = {IB "uverbs1"};
	const char *path = "devices/pci0000:5d/0000:5d:00.0/0000:5e:00.0";
	struct rdp_host *h = rdp_calloc(1, sizeof(*h));
	size_t idx[] = {0, 1};
	struct rdp_pool p = x_pool(idx, 2);
	struct rdp_dp_state s = {.numa_node = -1};

	h->devices = rdp_calloc(2, sizeof(*h->devices));
	h->n_devices = 2;
	make_device(&h->devices[0], "mlx5_bond_0", 0, RDP_PORT_ACTIVE, c0, 1);
	make_device(&h->devices[1], "mlx5_9", 0, RDP_PORT_ACTIVE, c1, 1);
	place(&h->devices[0], "0000:5e:00.0", path);
	place(&h->devices[1], "0000:5e:00.0", path);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(s.n_unit_v, 2);
	if (s.n_unit_v == 2) {
		EXPECT_STREQ(s.unit_v[0].id, "0000:5e:00.0-mlx5_9");
		EXPECT_STREQ(s.unit_v[1].id, "0000:5e:00.0-mlx5_bond_0");
	}
	rdp_dp_state_done(&s);
	rdp_host_free(h);
}

/* CDI answers: names for what the spec names, device specs and every variable otherwise. */
static void test_x_cdi(struct rdp_host *h)
{
	struct rdp_resource rx = res_x;
	struct rdp_env_var tc = {.name = (char *)"NCCL_IB_TC", .value = (char *)"106"};
	size_t idx[] = {0, 1, 4};
	struct rdp_pool p;
	struct rdp_dp_state s = {.numa_node = -1};
	static char id0[] = "0000:3b:00.0", id2[] = "0000:3b:00.2";
	char *const written[] = {id0, id2};
	const struct rdp_dp_cdi cdi = {.kind = "rdma-dp.io/x", .ids = written, .n_ids = 2};
	static const char *const both[] = {"0000:3b:00.2", "0000:3b:00.0", NULL};
	static const char *const other[] = {"0000:af:00.0", NULL};
	size_t len, out_len, fallback = 9;
	uint8_t *req = alloc_req(&len, 2, (const char *const *const[]){both, other}), *out = NULL;
	V1beta1__AllocateResponse *m;
	char *err = NULL, *json = NULL;

	rx.env = &tc;
	rx.n_env = 1;
	rx.env_from = RDP_ENV_NCCL_IB_HCA;
	for (size_t i = 0; i < ARRAY_SIZE(idx); i++) /* RoCE ports: NCCL counts them */
		h->devices[idx[i]].ports[0].link_layer = RDP_LINK_ETHER;
	p = (struct rdp_pool){.res = &rx, .devices = idx, .n_devices = 3, .numa_node = -1};
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_allocate_cdi(&s, &cdi, req, len, &out, &out_len, &err, &fallback), 0);
	EXPECT_EQ(fallback, 1);
	m = v1beta1__allocate_response__unpack(NULL, out_len, out);
	EXPECT_TRUE(m && m->n_container_responses == 2);
	if (m && m->n_container_responses == 2) {
		V1beta1__ContainerAllocateResponse *a = m->container_responses[0];
		V1beta1__ContainerAllocateResponse *b = m->container_responses[1];

		/* Named by CDI, in ID order; per-allocation variables only (constants: spec). */
		EXPECT_EQ(a->n_devices, 0);
		EXPECT_EQ(a->n_cdi_devices, 2);
		if (a->n_cdi_devices == 2) {
			EXPECT_STREQ(a->cdi_devices[0]->name, "rdma-dp.io/x=0000:3b:00.0");
			EXPECT_STREQ(a->cdi_devices[1]->name, "rdma-dp.io/x=0000:3b:00.2");
		}
		EXPECT_EQ(a->n_envs, 2);
		if (a->n_envs == 2) {
			EXPECT_STREQ(a->envs[0]->key, "RDMA_DEVICE_RDMA_X");
			EXPECT_STREQ(a->envs[0]->value, "mlx5_0:1,mlx5_1:1");
			EXPECT_STREQ(a->envs[1]->key, "NCCL_IB_HCA");
			EXPECT_STREQ(a->envs[1]->value, "=mlx5_0:1,mlx5_1:1");
		}
		/* Not in the spec on disk: device specs and every variable. */
		EXPECT_EQ(b->n_cdi_devices, 0);
		EXPECT_STREQ(spec_list(b), "issm4,rdma_cm,umad4,uverbs4");
		EXPECT_EQ(b->n_envs, 3);
		if (b->n_envs == 3)
			EXPECT_STREQ(b->envs[2]->key, "NCCL_IB_TC");
	}
	if (m)
		v1beta1__allocate_response__free_unpacked(m, NULL);
	rdp_free(out);
	rdp_free(req);

	/* The spec: a device per unit, rdma_cm on top, the constants only (exclusive). */
	EXPECT_EQ(rdp_dp_state_cdi_render(&s, "x1", NULL, &json), 0);
	EXPECT_CONTAINS(json, "\"kind\": \"rdma-dp.io/x1\"");
	EXPECT_TRUE(json && !strstr(json, "hooks")); /* no hook path: no hook */
	EXPECT_CONTAINS(json, "\"name\": \"0000:af:00.0\"");
	EXPECT_CONTAINS(json, "\"NCCL_IB_TC=106\"");
	EXPECT_TRUE(json && !strstr(json, "NCCL_IB_HCA") && strstr(json, "/dev/infiniband/rdma_cm"));
	rdp_free(json);
	json = NULL;
	/* Shared: everything is the same for every container, so all of it is in the spec. */
	rx.mode = RDP_MODE_SHARED;
	rx.rdma_hca_max = 2;
	rx.memlock = RDP_MEMLOCK_UNLIMITED;
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_state_cdi_render(&s, "x1", "/opt/rdma-dp/bin/rdma-dp", &json), 0);
	/* the memlock hook: the config's default (unlimited), at createRuntime */
	EXPECT_CONTAINS(json, "\"hookName\": \"createRuntime\"");
	EXPECT_CONTAINS(json, "\"path\": \"/opt/rdma-dp/bin/rdma-dp\"");
	EXPECT_CONTAINS(json, "\"--abi\",\n          \"1\",\n          \"--memlock\",\n"
			      "          \"unlimited\"");
	rdp_free(json);
	json = NULL;
	/* "memlock": 0 leaves the limit alone: no hook */
	rx.memlock = RDP_MEMLOCK_LEAVE;
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_state_cdi_render(&s, "x1", "/opt/rdma-dp/bin/rdma-dp", &json), 0);
	EXPECT_TRUE(json && !strstr(json, "hooks"));
	EXPECT_CONTAINS(json, "\"RDMA_DEVICE_RDMA_X=mlx5_0:1,mlx5_1:1,mlx5_4:1\"");
	EXPECT_CONTAINS(json, "\"NCCL_IB_HCA==mlx5_0:1,mlx5_1:1,mlx5_4:1\"");
	rdp_free(json);
	rdp_dp_state_done(&s);
}

static void test_exclusive(void)
{
	test_x_shared_function();
	struct rdp_host *h = make_x_host();

	test_x_state(h);
	test_x_snapshot(h);
	test_x_allocate(h);
	test_x_preferred(h);
	test_x_changes(h);
	test_x_cdi(h);
	test_x_failmalloc(h);
	rdp_host_free(h);
}

int main(void)
{
	struct rdp_host *h = make_host();

	test_state(h);
	test_no_topology(h);
	test_snapshot(h);
	test_allocate(h);
	test_preferred();
	test_options();
	test_service(h);
	test_failmalloc(h);
	test_registration_messages();
	test_usable_state();
	test_active_defer();
	test_verify();
	test_exclusive();
	rdp_host_free(h);
	return test_summary("test-dp-service");
}
