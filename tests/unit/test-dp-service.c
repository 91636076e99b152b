/* SPDX-License-Identifier: MIT */
/*
 * dp-service: what a pool serves (state), the ListAndWatch snapshot, Allocate and
 * GetPreferredAllocation answers, built from a hand-made host model; plus the state changes
 * the service reports, and every allocation failing in turn.
 */
#include <errno.h>
#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <string.h>

#include "alloc.h"
#include "macro.h"
#include "config.h"
#include "deviceplugin.pb-c.h"
#include "dp-service.h"
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

static struct rdp_resource res4 = {.name = (char *)"a",
				   .prefix = (char *)"rdma",
				   .full_name = (char *)"rdma/a",
				   .rdma_hca_max = 4};

static struct rdp_pool pool_of(size_t *idx, size_t n)
{
	return (struct rdp_pool){.res = &res4, .devices = idx, .n_devices = n, .numa_node = -1};
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
			EXPECT_EQ(c->n_envs, 0);
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

static int preferred(const char *const *avail, const char *const *must, int size,
		     V1beta1__PreferredAllocationResponse **ret, char **err)
{
	V1beta1__PreferredAllocationRequest r = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
	V1beta1__ContainerPreferredAllocationRequest c =
		V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
	V1beta1__ContainerPreferredAllocationRequest *cp[] = {&c};
	struct rdp_dp_state s = {.units = 4, .numa_node = -1};
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
	k = rdp_dp_preferred_allocation(&s, buf, len, &out, &out_len, err);
	*ret = k == 0 ? v1beta1__preferred_allocation_response__unpack(NULL, out_len, out) : NULL;
	rdp_free(out);
	return k;
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

	EXPECT_EQ(rdp_dp_options_pack(&buf, &len), 0);
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
		  RDP_DP_CHANGED_SNAPSHOT | RDP_DP_CHANGED_SPECS);
	EXPECT_EQ(s.n_specs, 0); /* taken over */
	EXPECT_EQ(rdp_dp_service_state(svc)->units, 4);

	/* The same host again: nothing changed, nothing sent. */
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_service_set_state(svc, &s), 0);

	/* Health goes: snapshot and specs (other devices) change. */
	p = pool_of(i1, 1);
	EXPECT_EQ(rdp_dp_state_build(h, &p, &s), 0);
	EXPECT_EQ(rdp_dp_service_set_state(svc, &s),
		  RDP_DP_CHANGED_SNAPSHOT | RDP_DP_CHANGED_SPECS);
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
		uint8_t *out = NULL;
		size_t out_len;
		char *err = NULL;
		int r;

		rdp_alloc_fail_at(n);
		r = rdp_dp_state_build(h, &p, &s);
		if (r == 0)
			r = rdp_dp_snapshot_pack(&s, &out, &out_len);
		rdp_free(out);
		out = NULL;
		if (r == 0)
			r = rdp_dp_allocate(&s, req, len, &out, &out_len, &err);
		rdp_alloc_fail_at(0);
		if (r != 0 && r != -ENOMEM && r != -EBADMSG)
			all_ok = false;
		rdp_free(out);
		rdp_free(err);
		rdp_dp_state_done(&s);
		if (r == 0)
			break;
	}
	EXPECT_TRUE(all_ok);
	rdp_free(req);
}

/* The messages registration.c sends: RegisterRequest and the plugin watcher's PluginInfo. */
static void test_registration_messages(void)
{
	V1beta1__RegisterRequest *r;
	Pluginregistration__PluginInfo *pi;
	uint8_t *buf = NULL;
	size_t len;

	EXPECT_EQ(rdp_register_request_pack("a.sock", "rdma/a", &buf, &len), 0);
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

	EXPECT_EQ(rdp_watcher_info_pack("rdma/a", "", &buf, &len), 0);
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

int main(void)
{
	struct rdp_host *h = make_host();

	test_state(h);
	test_snapshot(h);
	test_allocate(h);
	test_preferred();
	test_options();
	test_service(h);
	test_failmalloc(h);
	test_registration_messages();
	rdp_host_free(h);
	return test_summary("test-dp-service");
}
