/* SPDX-License-Identifier: MIT */
/* dra-slices: device names, attributes, slices of every fixture node, the validator, compare. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "macro.h"
#include "discovery.h"
#include "dra-slices.h"
#include "test.h"

static const struct rdp_dra_node node = {
	.driver = RDP_DRA_DEFAULT_DRIVER,
	.node_name = "node-a",
	.node_uid = "0b7e6c1e-7c39-4a55-9d56-1a2b3c4d5e6f",
};

static void test_dns(void)
{
	EXPECT_TRUE(rdp_dra_dns_label("pci-0000-18-00-0"));
	EXPECT_TRUE(!rdp_dra_dns_label("mlx5_0"));
	EXPECT_TRUE(!rdp_dra_dns_label("0000:18:00.0"));
	EXPECT_TRUE(!rdp_dra_dns_label("-a"));
	EXPECT_TRUE(!rdp_dra_dns_label("a-"));
	EXPECT_TRUE(!rdp_dra_dns_label(""));
	EXPECT_TRUE(!rdp_dra_dns_label("Abc"));
	EXPECT_TRUE(rdp_dra_dns_subdomain("rdma.rdma-dp.io", 63));
	EXPECT_TRUE(!rdp_dra_dns_subdomain("rdma..io", 63));
	EXPECT_TRUE(!rdp_dra_dns_subdomain("rdma.-a.io", 63));
	EXPECT_TRUE(!rdp_dra_dns_subdomain("Rdma.io", 63));
	EXPECT_TRUE(!rdp_dra_dns_subdomain("a.", 63));
	char long_s[80];
	memset(long_s, 'a', 64);
	long_s[64] = 0;
	EXPECT_TRUE(!rdp_dra_dns_subdomain(long_s, 253)); /* a label > 63 */
}

static void test_names(void)
{
	struct rdp_device d = {0};
	char buf[RDP_DRA_NAME_MAX];

	snprintf(d.name, sizeof(d.name), "mlx5_0");
	snprintf(d.pci_address, sizeof(d.pci_address), "0000:18:00.0");
	EXPECT_EQ(rdp_dra_device_name(&d, buf, sizeof(buf)), 16);
	EXPECT_STREQ(buf, "pci-0000-18-00-0");
	d.is_sf = true;
	d.sf_num = 2;
	rdp_dra_device_name(&d, buf, sizeof(buf));
	EXPECT_STREQ(buf, "pci-0000-18-00-0-sf2");
	snprintf(d.pci_address, sizeof(d.pci_address), "ABCD:0F:1F.7");
	d.is_sf = false;
	rdp_dra_device_name(&d, buf, sizeof(buf));
	EXPECT_STREQ(buf, "pci-abcd-0f-1f-7");
	d.pci_address[0] = 0;
	snprintf(d.name, sizeof(d.name), "rxe0");
	rdp_dra_device_name(&d, buf, sizeof(buf));
	EXPECT_STREQ(buf, "ib-rxe0");
	snprintf(d.name, sizeof(d.name), "My_Rxe.eth0");
	rdp_dra_device_name(&d, buf, sizeof(buf));
	EXPECT_STREQ(buf, "ib-my-rxe-eth0");
	/* ends in '-': cut and hashed, still a label */
	snprintf(d.name, sizeof(d.name), "rxe_");
	rdp_dra_device_name(&d, buf, sizeof(buf));
	EXPECT_TRUE(rdp_dra_dns_label(buf));
	EXPECT_TRUE(strncmp(buf, "ib-rxe-", 7) == 0 && strlen(buf) == 15);
	/* too long: 63 at most, a label, and two long names that differ only at the end differ */
	char a[RDP_DRA_NAME_MAX], b[RDP_DRA_NAME_MAX];
	memset(d.name, 'x', 62);
	d.name[62] = '1';
	d.name[63] = 0;
	rdp_dra_device_name(&d, a, sizeof(a));
	d.name[62] = '2';
	rdp_dra_device_name(&d, b, sizeof(b));
	EXPECT_TRUE(rdp_dra_dns_label(a) && rdp_dra_dns_label(b));
	EXPECT_TRUE(strlen(a) <= 63 && strcmp(a, b) != 0);
	EXPECT_EQ(rdp_dra_device_name(&d, buf, 10), -ENOBUFS);
}

static char *check(json_t *slice)
{
	static char err[256];

	err[0] = 0;
	return rdp_dra_slice_check(slice, err, sizeof(err)) == 0 ? NULL : err;
}

/* The JSON of mlx5_0 on dgx-h100, exactly. */
static void test_dgx(const char *fixtures)
{
	char sys[4096], dev[4096];
	struct rdp_host *h = NULL;
	struct rdp_dra_inventory inv = {0};
	json_t *slices = NULL, *d0;
	char *s;

	snprintf(sys, sizeof(sys), "%s/dgx-h100/sys", fixtures);
	snprintf(dev, sizeof(dev), "%s/dgx-h100/dev", fixtures);
	EXPECT_EQ(rdp_discover(sys, dev, &h), 0);
	if (!h)
		return;
	EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);
	EXPECT_EQ(inv.n_devs, 12);
	EXPECT_EQ(inv.n_dropped, 0);
	EXPECT_EQ(rdp_dra_slices_build(&node, &inv, 1, &slices), 0);
	EXPECT_EQ(json_array_size(slices), 1);
	const struct rdp_dra_dev *f = rdp_dra_inventory_find(&inv, "pci-0000-18-00-0");
	EXPECT_TRUE(f != NULL);
	EXPECT_TRUE(f && strcmp(rdp_dra_dev_device(&inv, f)->name, "mlx5_0") == 0);
	EXPECT_TRUE(rdp_dra_inventory_find(&inv, "mlx5_0") == NULL);
	d0 = f ? rdp_dra_device_json(&inv, f, node.driver) : NULL;
	s = json_dumps(d0, JSON_SORT_KEYS | JSON_COMPACT);
	EXPECT_STREQ(s,
		     "{\"attributes\":{"
		     "\"deviceId\":{\"string\":\"1021\"},"
		     "\"fwVersion\":{\"string\":\"28.39.1002\"},"
		     "\"ibdev\":{\"string\":\"mlx5_0\"},"
		     "\"isSf\":{\"bool\":false},"
		     "\"isVf\":{\"bool\":false},"
		     "\"linkLayer\":{\"string\":\"InfiniBand\"},"
		     "\"netdev\":{\"string\":\"ibp24s0\"},"
		     "\"nodeGuid\":{\"string\":\"946d:ae03:003a:1000\"},"
		     "\"numaNode\":{\"int\":0},"
		     "\"pciAddress\":{\"string\":\"0000:18:00.0\"},"
		     "\"rateGbps\":{\"int\":400},"
		     "\"rdma\":{\"bool\":true},"
		     "\"resource.kubernetes.io/pciBusID\":{\"string\":\"0000:18:00.0\"},"
		     "\"resource.kubernetes.io/pcieRoot\":{\"string\":\"pci0000:15\"},"
		     "\"vendor\":{\"string\":\"15b3\"}},"
		     "\"name\":\"pci-0000-18-00-0\"}");
	if (getenv("RDP_DRA_PRINT")) {
		char *all = json_dumps(json_array_get(slices, 0), JSON_INDENT(2));
		printf("%s\n", all);
		free(all);
	}
	free(s);
	json_decref(d0);
	json_decref(slices);
	rdp_dra_inventory_done(&inv);
	rdp_host_free(h);
}

/* Every fixture node: its slices pass the validator, the devices are its usable ones. */
static void test_fixture_nodes(const char *fixtures)
{
	DIR *dir = opendir(fixtures);
	struct dirent *de;
	int nodes = 0;

	if (!dir)
		return;
	while ((de = readdir(dir))) {
		char sys[4096], dev[4096];
		struct rdp_host *h = NULL;
		struct rdp_dra_inventory inv = {0};
		json_t *slices = NULL, *sl;
		size_t i, total = 0, usable = 0;

		if (de->d_name[0] == '.')
			continue;
		snprintf(sys, sizeof(sys), "%s/%s/sys", fixtures, de->d_name);
		snprintf(dev, sizeof(dev), "%s/%s/dev", fixtures, de->d_name);
		if (access(sys, F_OK) != 0 || rdp_discover(sys, dev, &h) < 0)
			continue;
		nodes++;
		EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);
		EXPECT_EQ(rdp_dra_slices_build(&node, &inv, 7, &slices), 0);
		for (size_t k = 0; k < h->n_devices; k++)
			usable += rdp_device_is_usable(&h->devices[k]);
		EXPECT_EQ(inv.n_devs + inv.n_dropped, usable);
		json_array_foreach(slices, i, sl) {
			char *e = check(sl);

			if (e)
				fprintf(stderr, "%s: slice %zu: %s\n", de->d_name, i, e);
			EXPECT_TRUE(e == NULL);
			total += json_array_size(json_object_get(json_object_get(sl, "spec"),
								 "devices"));
		}
		EXPECT_EQ(total, inv.n_devs);
		json_decref(slices);
		rdp_dra_inventory_done(&inv);
		rdp_host_free(h);
	}
	closedir(dir);
	EXPECT_TRUE(nodes >= 10);
}

/* A host of n fake usable devices, for the split. */
static struct rdp_host *fake_host(size_t n)
{
	struct rdp_host *h = rdp_calloc(1, sizeof(*h));

	h->devices = rdp_calloc(n ? n : 1, sizeof(*h->devices));
	h->n_devices = n;
	for (size_t i = 0; i < n; i++) {
		struct rdp_device *d = &h->devices[i];

		snprintf(d->name, sizeof(d->name), "mlx5_%zu", i);
		snprintf(d->pci_address, sizeof(d->pci_address), "0000:%02zx:%02zx.%zu",
			 i / 256, (i / 8) % 32, i % 8);
		d->numa_node = -1;
		d->usability = RDP_USABLE;
	}
	return h;
}

static void test_split(void)
{
	static const struct {
		size_t n, slices, first, last;
	} cases[] = {
		{0, 1, 0, 0}, {1, 1, 1, 1}, {128, 1, 128, 128}, {129, 2, 65, 64},
		{256, 2, 128, 128}, {300, 3, 100, 100}, {1000, 8, 125, 125},
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		struct rdp_host *h = fake_host(cases[c].n);
		struct rdp_dra_inventory inv = {0};
		json_t *slices = NULL;
		size_t i;
		json_t *sl;

		EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);
		EXPECT_EQ(rdp_dra_slices_build(&node, &inv, 3, &slices), 0);
		EXPECT_EQ(json_array_size(slices), cases[c].slices);
		json_array_foreach(slices, i, sl) {
			json_t *spec = json_object_get(sl, "spec");
			json_t *pool = json_object_get(spec, "pool");
			size_t n = json_array_size(json_object_get(spec, "devices"));

			EXPECT_TRUE(json_is_array(json_object_get(spec, "devices")));
			EXPECT_TRUE(check(sl) == NULL);
			EXPECT_EQ(json_integer_value(json_object_get(pool, "resourceSliceCount")),
				  cases[c].slices);
			EXPECT_EQ(json_integer_value(json_object_get(pool, "generation")), 3);
			if (i == 0)
				EXPECT_EQ(n, cases[c].first);
			if (i == json_array_size(slices) - 1)
				EXPECT_EQ(n, cases[c].last);
		}
		if (cases[c].n == 0) {
			char *s = json_dumps(json_array_get(slices, 0), JSON_SORT_KEYS | JSON_COMPACT);
			EXPECT_STREQ(s,
				     "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\","
				     "\"metadata\":{\"generateName\":\"node-a-rdma.rdma-dp.io-000-\","
				     "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"controller\":true,"
				     "\"kind\":\"Node\",\"name\":\"node-a\","
				     "\"uid\":\"0b7e6c1e-7c39-4a55-9d56-1a2b3c4d5e6f\"}]},"
				     "\"spec\":{\"devices\":[],\"driver\":\"rdma.rdma-dp.io\","
				     "\"nodeName\":\"node-a\",\"pool\":{\"generation\":3,\"name\":\"node-a\","
				     "\"resourceSliceCount\":1}}}");
			free(s);
		}
		json_decref(slices);
		rdp_dra_inventory_done(&inv);
		rdp_host_free(h);
	}
	/* bad inputs */
	struct rdp_host *h = fake_host(1);
	struct rdp_dra_inventory inv = {0};
	json_t *slices = NULL;
	struct rdp_dra_node bad = node;

	rdp_dra_inventory_build(h, &inv);
	bad.driver = "Rdma.io";
	EXPECT_EQ(rdp_dra_slices_build(&bad, &inv, 1, &slices), -EINVAL);
	bad = node;
	bad.node_uid = "";
	EXPECT_EQ(rdp_dra_slices_build(&bad, &inv, 1, &slices), -EINVAL);
	EXPECT_EQ(rdp_dra_slices_build(&node, &inv, -1, &slices), -EINVAL);
	/* duplicate names: the first by ibdev stays */
	snprintf(h->devices[0].name, sizeof(h->devices[0].name), "rxe_a");
	rdp_dra_inventory_done(&inv);
	rdp_host_free(h);
	h = fake_host(2);
	h->devices[0].pci_address[0] = h->devices[1].pci_address[0] = 0;
	snprintf(h->devices[0].name, sizeof(h->devices[0].name), "rxe.a");
	snprintf(h->devices[1].name, sizeof(h->devices[1].name), "rxe_a");
	h->devices[1].usability = RDP_USABLE;
	EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);
	EXPECT_EQ(inv.n_devs, 1);
	EXPECT_EQ(inv.n_dropped, 1);
	EXPECT_STREQ(inv.n_dropped ? inv.dropped[0] : NULL, "rxe_a");
	/* unusable devices are not offered */
	h->devices[1].usability = RDP_UNUSABLE_NO_UVERBS;
	EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);
	EXPECT_EQ(inv.n_devs, 1);
	EXPECT_EQ(inv.n_dropped, 0);
	rdp_dra_inventory_done(&inv);
	rdp_host_free(h);
}

static json_t *good_slice(void)
{
	return json_loads("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\","
			  "\"metadata\":{\"generateName\":\"n-\"},"
			  "\"spec\":{\"driver\":\"rdma.rdma-dp.io\",\"nodeName\":\"n\","
			  "\"pool\":{\"name\":\"n\",\"generation\":0,\"resourceSliceCount\":1},"
			  "\"devices\":[{\"name\":\"d\",\"attributes\":{\"a\":{\"int\":1},"
			  "\"x.io/b\":{\"version\":\"1.2.3-rc.1+b.5\"}},"
			  "\"capacity\":{\"mem\":{\"value\":\"10Gi\"}}}]}}", 0, NULL);
}

static void test_validator(void)
{
	static const struct {
		const char *path, *json, *err;
	} bad[] = {
		{"/spec/driver", "\"Rdma.io\"", "spec.driver"},
		{"/spec/driver", "\"a234567890123456789012345678901234567890123456789012345678901.io\"",
		 "spec.driver"},
		{"/spec/allNodes", "true", "exactly one of nodeName"},
		{"/spec/pool/name", "\"a//b\"", "spec.pool.name"},
		{"/spec/pool/resourceSliceCount", "0", "resourceSliceCount"},
		{"/spec/pool/generation", "-1", "generation"},
		{"/spec/devices/0/name", "\"mlx5_0\"", "is not a DNS label"},
		{"/spec/devices/0/attributes/1abc", "{\"int\":1}", "C identifier"},
		{"/spec/devices/0/attributes/a234567890123456789012345678901234", "{\"int\":1}",
		 "C identifier"},
		{"/spec/devices/0/attributes/A.io~1x", "{\"int\":1}", "C identifier"},
		{"/spec/devices/0/attributes/a", "{\"int\":1,\"bool\":true}", "exactly one"},
		{"/spec/devices/0/attributes/a", "{\"float\":1}", "exactly one"},
		{"/spec/devices/0/attributes/a", "{\"int\":\"1\"}", "wrong JSON type"},
		{"/spec/devices/0/attributes/a", "{\"bool\":1}", "wrong JSON type"},
		{"/spec/devices/0/attributes/a",
		 "{\"string\":\"12345678901234567890123456789012345678901234567890123456789012345\"}",
		 "longer than 64"},
		{"/spec/devices/0/attributes/a", "{\"version\":\"1.02.3\"}", "not semver"},
		{"/spec/devices/0/attributes/a", "{\"version\":\"1.2\"}", "not semver"},
		{"/spec/devices/0/attributes/rdma.rdma-dp.io~1a", "{\"int\":1}", "same name"},
		{"/spec/devices/0/capacity/mem", "{\"value\":\"lots\"}", "quantity"},
		{"/spec/devices/0/capacity/a", "{\"value\":\"1\"}", "both an attribute"},
		{"/kind", "\"Slice\"", "kind"},
		{"/spec/devices/1", "{\"name\":\"d\"}", "twice"},
	};

	json_t *s = good_slice();
	EXPECT_TRUE(s && check(s) == NULL);
	json_decref(s);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		json_t *v = json_loads(bad[i].json, JSON_DECODE_ANY, NULL);
		json_t *parent;
		char path[256], *last, *tok, *save = NULL;
		char *e;

		s = good_slice();
		snprintf(path, sizeof(path), "%s", bad[i].path);
		last = strrchr(path, '/');
		*last++ = 0;
		parent = s;
		for (tok = strtok_r(path, "/", &save); tok; tok = strtok_r(NULL, "/", &save))
			parent = json_is_array(parent) ? json_array_get(parent, (size_t)atoi(tok))
						       : json_object_get(parent, tok);
		char key[128];
		size_t k = 0;
		for (const char *p = last; *p && k < sizeof(key) - 1; p++)
			key[k++] = (p[0] == '~' && p[1] == '1') ? (p++, '/') : *p;
		key[k] = 0;
		if (json_is_array(parent))
			json_array_append_new(parent, v);
		else
			json_object_set_new(parent, key, v);
		e = check(s);
		if (!e || !strstr(e, bad[i].err))
			fprintf(stderr, "case %zu (%s): got %s\n", i, bad[i].path, e ? e : "ok");
		EXPECT_TRUE(e && strstr(e, bad[i].err));
		json_decref(s);
	}
	/* 33 attributes, 129 devices */
	s = good_slice();
	json_t *attrs = json_object_get(json_array_get(json_object_get(json_object_get(s, "spec"),
								      "devices"), 0), "attributes");
	for (int i = 0; i < 30; i++) {
		char k[16];
		snprintf(k, sizeof(k), "x%d", i);
		json_object_set_new(attrs, k, json_pack("{s:b}", "bool", 1));
	}
	EXPECT_CONTAINS(check(s), "at most 32");
	json_decref(s);
	s = good_slice();
	json_t *devs = json_object_get(json_object_get(s, "spec"), "devices");
	for (int i = 0; i < 128; i++) {
		char n[16];
		snprintf(n, sizeof(n), "e%d", i);
		json_array_append_new(devs, json_pack("{s:s}", "name", n));
	}
	EXPECT_CONTAINS(check(s), "at most 128");
	json_decref(s);
	EXPECT_CONTAINS(check(NULL), "not an object");
}

static json_t *as_found(json_t *desired, long long gen, const char *prefix)
{
	json_t *f = json_deep_copy(desired);
	size_t i;
	json_t *s;

	rdp_dra_slices_set_generation(f, gen);
	json_array_foreach(f, i, s) {
		char name[128];
		json_t *m = json_object_get(s, "metadata");

		/* as the API server names it: the generateName and a random suffix */
		snprintf(name, sizeof(name), "%s%s%zu",
			 json_string_value(json_object_get(m, "generateName")), prefix, i);
		json_object_del(m, "generateName");
		json_object_set_new(m, "name", json_string(name));
		json_object_set_new(m, "resourceVersion", json_string("42"));
	}
	return f;
}

/* generateName: the slice's index, three digits, kept within the server's 58 characters. */
static void test_generate_name(void)
{
	char buf[128];
	const char *long_node = "ip-10-0-1-23.us-west-2.compute.internal";

	EXPECT_EQ(rdp_dra_slice_generate_name("node-a", "rdma.rdma-dp.io", 0, buf, sizeof(buf)),
		  27);
	EXPECT_STREQ(buf, "node-a-rdma.rdma-dp.io-000-");
	EXPECT_EQ(rdp_dra_slice_generate_name("node-a", "rdma.rdma-dp.io", 12, buf, sizeof(buf)),
		  27);
	EXPECT_STREQ(buf, "node-a-rdma.rdma-dp.io-012-");
	/* "ip-...internal-rdma.rdma-dp.io" is 55: cut to 53, the '.' it ends in dropped */
	EXPECT_EQ(rdp_dra_slice_generate_name(long_node, "rdma.rdma-dp.io", 7, buf, sizeof(buf)),
		  57);
	EXPECT_STREQ(buf, "ip-10-0-1-23.us-west-2.compute.internal-rdma.rdma-dp-007-");
	EXPECT_TRUE(strlen(buf) <= RDP_DRA_GENERATE_NAME_MAX);
	EXPECT_EQ(rdp_dra_slice_generate_name("n", "d", 1000, buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_dra_slice_generate_name("n", "d", 1, buf, 4), -ENOBUFS);
	/* the slices of a split pool sort by name as their devices do */
	{
		struct rdp_host *h = fake_host(300);
		struct rdp_dra_inventory inv = {0};
		json_t *sl = NULL;

		EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);
		EXPECT_EQ(rdp_dra_slices_build(&node, &inv, 1, &sl), 0);
		for (size_t i = 1; i < json_array_size(sl); i++) {
			const char *a = json_string_value(json_object_get(json_object_get(
				json_array_get(sl, i - 1), "metadata"), "generateName"));
			const char *b = json_string_value(json_object_get(json_object_get(
				json_array_get(sl, i), "metadata"), "generateName"));

			EXPECT_TRUE(a && b && strcmp(a, b) < 0);
		}
		json_decref(sl);
		rdp_dra_inventory_done(&inv);
		rdp_host_free(h);
	}
}

/* resource.kubernetes.io/pciBusID is the device's own address: a PF's, never an SF's (whose
 * pciAddress is its PF's). */
static void test_sf_pci_bus_id(void)
{
	struct rdp_host *h = fake_host(2);
	struct rdp_dra_inventory inv = {0};
	const char *bus = "resource.kubernetes.io/pciBusID";

	snprintf(h->devices[1].pci_address, sizeof(h->devices[1].pci_address), "%s",
		 h->devices[0].pci_address);
	h->devices[1].is_sf = true;
	h->devices[1].sf_num = 2;
	EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);
	EXPECT_EQ(inv.n_devs, 2);
	for (size_t i = 0; i < inv.n_devs; i++) {
		json_t *d = rdp_dra_device_json(&inv, &inv.devs[i], node.driver);
		json_t *a = json_object_get(d, "attributes");
		bool sf = rdp_dra_dev_device(&inv, &inv.devs[i])->is_sf;

		EXPECT_TRUE(d != NULL);
		EXPECT_STREQ(json_string_value(json_object_get(json_object_get(a, "pciAddress"),
							       "string")), "0000:00:00.0");
		if (sf)
			EXPECT_TRUE(json_object_get(a, bus) == NULL);
		else
			EXPECT_STREQ(json_string_value(json_object_get(json_object_get(a, bus),
								       "string")), "0000:00:00.0");
		json_decref(d);
	}
	rdp_dra_inventory_done(&inv);
	rdp_host_free(h);
}

static void test_compare(void)
{
	struct rdp_host *h = fake_host(2), *h300 = fake_host(300);
	struct rdp_dra_inventory inv = {0}, inv300 = {0};
	json_t *d = NULL, *d300 = NULL, *f, *put;
	struct rdp_dra_sync sy;

	rdp_dra_inventory_build(h, &inv);
	rdp_dra_inventory_build(h300, &inv300);
	rdp_dra_slices_build(&node, &inv, 0, &d);
	rdp_dra_slices_build(&node, &inv300, 0, &d300);

	EXPECT_EQ(rdp_dra_slices_compare(NULL, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_RECREATE);
	EXPECT_EQ(sy.generation, 1);
	f = as_found(d, 5, "s");
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UNCHANGED);
	EXPECT_EQ(sy.generation, 5);
	/* an attribute changed: update in place, same generation */
	json_object_set_new(json_object_get(json_array_get(json_object_get(json_object_get(
		json_array_get(f, 0), "spec"), "devices"), 0), "attributes"), "numaNode",
		json_pack("{s:i}", "int", 1));
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
	EXPECT_EQ(sy.generation, 5);
	EXPECT_STREQ(rdp_dra_sync_action_name(sy.action), "update");
	put = rdp_dra_slice_for_update(json_array_get(d, 0), json_array_get(f, sy.update_index));
	EXPECT_STREQ(json_string_value(json_object_get(json_object_get(put, "metadata"), "name")),
		     "node-a-rdma.rdma-dp.io-000-s0");
	EXPECT_STREQ(json_string_value(json_object_get(json_object_get(put, "metadata"),
						       "resourceVersion")), "42");
	EXPECT_TRUE(!json_object_get(json_object_get(put, "metadata"), "generateName"));
	json_decref(put);
	json_decref(f);
	/* 3 desired, 3 found in another order: unchanged */
	f = as_found(d300, 9, "t");
	json_t *first = json_incref(json_array_get(f, 0));
	json_array_remove(f, 0);
	json_array_append_new(f, first);
	EXPECT_EQ(rdp_dra_slices_compare(f, d300, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UNCHANGED);
	EXPECT_EQ(sy.generation, 9);
	/* the same slices named without the index (as before issue 21): recreate, so that the
	 * allocator's name order becomes the devices' order */
	{
		json_t *g = json_deep_copy(f), *sl;
		size_t i;

		json_array_foreach(g, i, sl) {
			char name[64];

			snprintf(name, sizeof(name), "node-a-rdma.rdma-dp.io-x%zu", i);
			json_object_set_new(json_object_get(sl, "metadata"), "name",
					    json_string(name));
		}
		EXPECT_EQ(rdp_dra_slices_compare(g, d300, &sy), 0);
		EXPECT_EQ(sy.action, RDP_DRA_SYNC_RECREATE);
		EXPECT_EQ(sy.generation, 10);
		/* one slice (not split): its name does not matter */
		json_decref(g);
		g = as_found(d, 4, "s");
		json_object_set_new(json_object_get(json_array_get(g, 0), "metadata"), "name",
				    json_string("node-a-rdma.rdma-dp.io-abcde"));
		EXPECT_EQ(rdp_dra_slices_compare(g, d, &sy), 0);
		EXPECT_EQ(sy.action, RDP_DRA_SYNC_UNCHANGED);
		json_decref(g);
	}
	/* mixed generations: recreate with the highest + 1 */
	json_object_set_new(json_object_get(json_object_get(json_array_get(f, 1), "spec"), "pool"),
			    "generation", json_integer(11));
	EXPECT_EQ(rdp_dra_slices_compare(f, d300, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_RECREATE);
	EXPECT_EQ(sy.generation, 12);
	/* 3 found, 1 desired: recreate */
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_RECREATE);
	json_decref(f);
	/* another owner: update */
	f = as_found(d, 2, "s");
	json_t *owner = json_array_get(json_object_get(json_object_get(json_array_get(f, 0),
									 "metadata"),
						     "ownerReferences"), 0);
	json_object_set_new(owner, "uid", json_string("other"));
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
	json_decref(f);
	/* malformed found slice */
	f = json_loads("[{\"spec\":{\"pool\":{\"generation\":\"x\"}}}]", 0, NULL);
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_RECREATE);
	EXPECT_EQ(sy.generation, 1);
	json_decref(f);
	f = json_loads("[{\"metadata\":{\"name\":\"x\"},\"spec\":{\"pool\":{\"generation\":"
		       "9223372036854775807}}}]", 0, NULL);
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_TRUE(sy.generation >= 0 && sy.generation < 9223372036854775807LL);
	json_decref(f);
	f = json_object();
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), -EINVAL);
	EXPECT_EQ(rdp_dra_slices_compare(NULL, f, &sy), -EINVAL);
	json_decref(f);
	f = json_array();
	for (int i = 0; i < 200; i++)
		json_array_append_new(f, json_object());
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), -E2BIG);
	json_decref(f);

	json_decref(d);
	json_decref(d300);
	rdp_dra_inventory_done(&inv);
	rdp_dra_inventory_done(&inv300);
	rdp_host_free(h);
	rdp_host_free(h300);
}

/* Gives device i of h one port in state st (-1: unknown). */
static void set_port(struct rdp_host *h, size_t i, int st)
{
	struct rdp_device *d = &h->devices[i];

	if (!d->ports)
		d->ports = rdp_calloc(1, sizeof(*d->ports));
	d->n_ports = 1;
	d->ports[0] = (struct rdp_port){.num = 1, .state = st, .phys_state = -1,
					.roce_v2_ipv4_gid_index = -1};
	snprintf(d->ports[0].state_name, sizeof(d->ports[0].state_name), "%s",
		 st == RDP_PORT_ACTIVE ? "ACTIVE" : st == RDP_PORT_DOWN ? "DOWN"
			: st == RDP_PORT_INIT ? "INIT" : "");
}

static json_t *devices_of(json_t *slices, size_t i)
{
	return json_object_get(json_object_get(json_array_get(slices, i), "spec"), "devices");
}

/* Issue 21: a device whose ports are all down is tainted; the effect; unknown is not down. */
static void test_taints(void)
{
	struct rdp_host *h = fake_host(5);
	struct rdp_dra_inventory inv = {0};
	struct rdp_dra_node n = node;
	enum rdp_dra_taint_effect e = RDP_DRA_TAINT_OFF;
	json_t *slices = NULL, *devs;
	char *s;

	EXPECT_EQ(rdp_dra_taint_effect_parse("NoSchedule", &e), 0);
	EXPECT_EQ(e, RDP_DRA_TAINT_NO_SCHEDULE);
	EXPECT_EQ(rdp_dra_taint_effect_parse("NoExecute", &e), 0);
	EXPECT_EQ(e, RDP_DRA_TAINT_NO_EXECUTE);
	EXPECT_EQ(rdp_dra_taint_effect_parse("None", &e), 0);
	EXPECT_EQ(e, RDP_DRA_TAINT_NONE);
	EXPECT_EQ(rdp_dra_taint_effect_parse("off", &e), 0);
	EXPECT_EQ(e, RDP_DRA_TAINT_OFF);
	EXPECT_EQ(rdp_dra_taint_effect_parse("noschedule", &e), -EINVAL);
	EXPECT_EQ(rdp_dra_taint_effect_parse("", &e), -EINVAL);
	EXPECT_EQ(rdp_dra_taint_effect_parse(NULL, &e), -EINVAL);
	EXPECT_STREQ(rdp_dra_taint_effect_name(RDP_DRA_TAINT_NO_EXECUTE), "NoExecute");
	/* 0: no port; 1: ACTIVE; 2: DOWN; 3: state unreadable; 4: INIT */
	set_port(h, 1, RDP_PORT_ACTIVE);
	set_port(h, 2, RDP_PORT_DOWN);
	set_port(h, 3, RDP_PORT_STATE_UNKNOWN);
	set_port(h, 4, RDP_PORT_INIT);
	EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);
	EXPECT_EQ(rdp_dra_slices_build(&n, &inv, 1, &slices), 0);
	EXPECT_TRUE(check(json_array_get(slices, 0)) == NULL);
	devs = devices_of(slices, 0);
	EXPECT_EQ(json_array_size(devs), 5);
	EXPECT_TRUE(!json_object_get(json_array_get(devs, 0), "taints"));
	EXPECT_TRUE(!json_object_get(json_array_get(devs, 1), "taints"));
	EXPECT_TRUE(!json_object_get(json_array_get(devs, 3), "taints"));
	s = json_dumps(json_object_get(json_array_get(devs, 2), "taints"), JSON_SORT_KEYS);
	EXPECT_STREQ(s, "[{\"effect\": \"NoSchedule\", \"key\": \"rdma.rdma-dp.io/port-down\"}]");
	free(s);
	EXPECT_EQ(json_array_size(json_object_get(json_array_get(devs, 4), "taints")), 1);
	json_decref(slices);
	/* the effect follows the option; off: none */
	n.port_down_taint = RDP_DRA_TAINT_NO_EXECUTE;
	n.driver = "nic.example.com";
	EXPECT_EQ(rdp_dra_slices_build(&n, &inv, 1, &slices), 0);
	EXPECT_TRUE(check(json_array_get(slices, 0)) == NULL);
	s = json_dumps(json_object_get(json_array_get(devices_of(slices, 0), 2), "taints"),
		       JSON_SORT_KEYS);
	EXPECT_STREQ(s, "[{\"effect\": \"NoExecute\", \"key\": \"nic.example.com/port-down\"}]");
	free(s);
	json_decref(slices);
	n.port_down_taint = RDP_DRA_TAINT_NONE;
	EXPECT_EQ(rdp_dra_slices_build(&n, &inv, 1, &slices), 0);
	EXPECT_STREQ(json_string_value(json_object_get(json_array_get(json_object_get(
		json_array_get(devices_of(slices, 0), 2), "taints"), 0), "effect")), "None");
	json_decref(slices);
	n.port_down_taint = RDP_DRA_TAINT_OFF;
	EXPECT_EQ(rdp_dra_slices_build(&n, &inv, 1, &slices), 0);
	for (size_t i = 0; i < 5; i++)
		EXPECT_TRUE(!json_object_get(json_array_get(devices_of(slices, 0), i), "taints"));
	json_decref(slices);
	/* back up: untainted */
	set_port(h, 2, RDP_PORT_ACTIVE);
	set_port(h, 4, RDP_PORT_ACTIVE);
	EXPECT_EQ(rdp_dra_slices_build(&node, &inv, 1, &slices), 0);
	for (size_t i = 0; i < 5; i++)
		EXPECT_TRUE(!json_object_get(json_array_get(devices_of(slices, 0), i), "taints"));
	json_decref(slices);
	rdp_dra_inventory_done(&inv);
	rdp_host_free(h);

	/* 100 devices: 1 slice; one tainted: 2 of 50 (the API's 64 with taints) */
	h = fake_host(100);
	EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);
	EXPECT_EQ(rdp_dra_slices_build(&node, &inv, 1, &slices), 0);
	EXPECT_EQ(json_array_size(slices), 1);
	json_decref(slices);
	set_port(h, 7, RDP_PORT_DOWN);
	EXPECT_EQ(rdp_dra_slices_build(&node, &inv, 1, &slices), 0);
	EXPECT_EQ(json_array_size(slices), 2);
	EXPECT_EQ(json_array_size(devices_of(slices, 0)), 50);
	EXPECT_TRUE(check(json_array_get(slices, 0)) == NULL);
	EXPECT_TRUE(check(json_array_get(slices, 1)) == NULL);
	json_decref(slices);
	rdp_dra_inventory_done(&inv);
	rdp_host_free(h);
}

/* The validator's taint rules (validateDeviceTaint, the 64 devices of a tainted slice). */
static void test_taint_validator(void)
{
	static const struct {
		const char *taint, *err;
	} cases[] = {
		{"{\"key\":\"a.io/port-down\",\"effect\":\"NoSchedule\"}", NULL},
		{"{\"key\":\"port-down\",\"value\":\"DOWN\",\"effect\":\"None\","
		 "\"timeAdded\":\"2026-12-03T13:00:00Z\"}", NULL},
		{"{\"key\":\"a.io/port-down\",\"effect\":\"PreferNoSchedule\"}", ".effect"},
		{"{\"key\":\"a.io/port-down\"}", ".effect"},
		{"{\"key\":\"A_.io/x\",\"effect\":\"NoSchedule\"}", ".key"},
		{"{\"key\":\"a.io/-x\",\"effect\":\"NoSchedule\"}", ".key"},
		{"{\"key\":\"\",\"effect\":\"NoSchedule\"}", ".key"},
		{"{\"key\":\"x\",\"value\":\"a b\",\"effect\":\"NoSchedule\"}", ".value"},
		{"{\"key\":\"x\",\"effect\":\"NoSchedule\",\"timeAdded\":5}", ".timeAdded"},
	};

	for (size_t c = 0; c < ARRAY_SIZE(cases); c++) {
		json_t *sl = good_slice(), *t = json_loads(cases[c].taint, 0, NULL);
		char *e;

		json_object_set_new(json_array_get(json_object_get(json_object_get(sl, "spec"),
								   "devices"), 0),
				    "taints", json_pack("[o]", t));
		e = check(sl);
		if (cases[c].err)
			EXPECT_CONTAINS(e ? e : "", cases[c].err);
		else
			EXPECT_TRUE(e == NULL);
		json_decref(sl);
	}
	/* 65 devices, one tainted: too many */
	{
		json_t *sl = good_slice(), *devs;

		devs = json_object_get(json_object_get(sl, "spec"), "devices");
		for (int i = 1; i < 65; i++) {
			char name[16];

			snprintf(name, sizeof(name), "d%d", i);
			json_array_append_new(devs, json_pack("{s:s}", "name", name));
		}
		EXPECT_TRUE(check(sl) == NULL);
		json_object_set_new(json_array_get(devs, 3), "taints",
				    json_pack("[{s:s, s:s}]", "key", "x", "effect", "NoSchedule"));
		EXPECT_CONTAINS(check(sl) ? check(sl) : "", "at most 64 with taints");
		json_array_remove(devs, 64);
		EXPECT_TRUE(check(sl) == NULL);
		json_decref(sl);
	}
}

static void test_quantity_equal(void)
{
	EXPECT_TRUE(rdp_dra_quantity_equal("1Gi", "1Gi"));
	EXPECT_TRUE(rdp_dra_quantity_equal("1Gi", "1024Mi"));
	EXPECT_TRUE(rdp_dra_quantity_equal("1073741824", "1Gi"));
	EXPECT_TRUE(rdp_dra_quantity_equal("0.5", "500m"));
	EXPECT_TRUE(rdp_dra_quantity_equal("1k", "1000"));
	EXPECT_TRUE(rdp_dra_quantity_equal("1e3", "1k"));
	EXPECT_TRUE(rdp_dra_quantity_equal("1E", "1000P"));
	EXPECT_TRUE(rdp_dra_quantity_equal("+2", "2"));
	EXPECT_TRUE(rdp_dra_quantity_equal("400G", "400000M"));
	EXPECT_TRUE(rdp_dra_quantity_equal("16", "16.0"));
	EXPECT_TRUE(!rdp_dra_quantity_equal("1Gi", "1G"));
	EXPECT_TRUE(!rdp_dra_quantity_equal("1", "-1"));
	EXPECT_TRUE(!rdp_dra_quantity_equal("1x", "1"));
	EXPECT_TRUE(!rdp_dra_quantity_equal("", "0"));
	EXPECT_TRUE(!rdp_dra_quantity_equal("1", NULL));
	EXPECT_TRUE(rdp_dra_quantity_equal("abc", "abc")); /* not quantities: as strings */
	EXPECT_TRUE(!rdp_dra_quantity_equal("99999999999999999999999999999999999999999Ei", "1"));
}

/*
 * The comparison owns its fields only: what the API server adds (timeAdded, canonical
 * quantities, fields of a newer API) is no difference; a taint gained or lost is.
 */
static void test_compare_owned(void)
{
	struct rdp_host *h = fake_host(3);
	struct rdp_dra_inventory inv = {0};
	json_t *d = NULL, *f, *fd, *put, *t;
	struct rdp_dra_sync sy;

	set_port(h, 1, RDP_PORT_DOWN);
	rdp_dra_inventory_build(h, &inv);
	rdp_dra_slices_build(&node, &inv, 0, &d);
	json_object_set_new(json_array_get(devices_of(d, 0), 0), "capacity",
			    json_pack("{s:{s:s}}", "mem", "value", "1024Mi"));
	f = as_found(d, 3, "s");
	fd = devices_of(f, 0);
	/* as the API server returns it: timeAdded defaulted, the quantity canonicalised,
	 * a field of a newer API, an empty field */
	t = json_array_get(json_object_get(json_array_get(fd, 1), "taints"), 0);
	json_object_set_new(t, "timeAdded", json_string("2026-12-03T13:00:00Z"));
	json_object_set_new(json_object_get(json_object_get(json_array_get(fd, 0), "capacity"),
					    "mem"), "value", json_string("1Gi"));
	json_object_set_new(json_array_get(fd, 2), "futureField", json_string("x"));
	json_object_set_new(json_array_get(fd, 2), "bindingConditions", json_array());
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UNCHANGED);
	/* the exact JSON differs: the old comparison would have updated */
	EXPECT_TRUE(!json_equal(fd, devices_of(d, 0)));
	/* the update keeps the server's timeAdded */
	put = rdp_dra_slice_for_update(json_array_get(d, 0), json_array_get(f, 0));
	EXPECT_STREQ(json_string_value(json_object_get(json_array_get(json_object_get(
		json_array_get(json_object_get(json_object_get(put, "spec"), "devices"), 1),
		"taints"), 0), "timeAdded")), "2026-12-03T13:00:00Z");
	/* ... only there: desired is untouched */
	EXPECT_TRUE(!json_object_get(json_array_get(json_object_get(
		json_array_get(devices_of(d, 0), 1), "taints"), 0), "timeAdded"));
	json_decref(put);
	/* another effect: no timeAdded kept, and a difference */
	json_object_set_new(t, "effect", json_string("NoExecute"));
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
	put = rdp_dra_slice_for_update(json_array_get(d, 0), json_array_get(f, 0));
	EXPECT_TRUE(!json_object_get(json_array_get(json_object_get(
		json_array_get(json_object_get(json_object_get(put, "spec"), "devices"), 1),
		"taints"), 0), "timeAdded"));
	json_decref(put);
	json_object_set_new(t, "effect", json_string("NoSchedule"));
	/* the taint gone from what is found (someone removed it): update */
	json_object_del(json_array_get(fd, 1), "taints");
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
	json_object_set_new(json_array_get(fd, 1), "taints", json_array());
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
	json_object_set_new(json_array_get(fd, 1), "taints", json_deep_copy(json_object_get(
		json_array_get(devices_of(d, 0), 1), "taints")));
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UNCHANGED);
	/* [] is no taint */
	json_object_set_new(json_array_get(fd, 0), "taints", json_array());
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UNCHANGED);
	/* a taint found that is not wanted (the port came back): update */
	json_object_set_new(json_array_get(fd, 0), "taints",
			    json_pack("[{s:s, s:s}]", "key", "x", "effect", "NoSchedule"));
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
	json_object_del(json_array_get(fd, 0), "taints");
	/* an attribute more, one less, another value: update */
	json_object_set_new(json_object_get(json_array_get(fd, 2), "attributes"), "extra",
			    json_pack("{s:b}", "bool", 1));
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
	json_object_del(json_object_get(json_array_get(fd, 2), "attributes"), "extra");
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UNCHANGED);
	json_object_del(json_object_get(json_array_get(fd, 2), "attributes"), "rdma");
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
	json_object_set_new(json_object_get(json_array_get(fd, 2), "attributes"), "rdma",
			    json_pack("{s:b}", "bool", 0));
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
	json_object_set_new(json_object_get(json_array_get(fd, 2), "attributes"), "rdma",
			    json_pack("{s:b}", "bool", 1));
	/* another quantity: update */
	json_object_set_new(json_object_get(json_object_get(json_array_get(fd, 0), "capacity"),
					    "mem"), "value", json_string("1G"));
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
	json_object_set_new(json_object_get(json_object_get(json_array_get(fd, 0), "capacity"),
					    "mem"), "value", json_string("1073741824"));
	EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
	EXPECT_EQ(sy.action, RDP_DRA_SYNC_UNCHANGED);
	/* devices in another order, one less: update */
	{
		json_t *g = json_deep_copy(fd);

		json_array_remove(fd, 2);
		EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
		EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
		json_array_clear(fd);
		json_array_append(fd, json_array_get(g, 1));
		json_array_append(fd, json_array_get(g, 0));
		json_array_append(fd, json_array_get(g, 2));
		EXPECT_EQ(rdp_dra_slices_compare(f, d, &sy), 0);
		EXPECT_EQ(sy.action, RDP_DRA_SYNC_UPDATE);
		json_decref(g);
	}
	{
		json_t *empty = json_array();

		EXPECT_TRUE(rdp_dra_devices_owned_equal(NULL, empty));
		json_decref(empty);
	}
	json_decref(f);
	json_decref(d);
	rdp_dra_inventory_done(&inv);
	rdp_host_free(h);
}

int main(void)
{
	const char *fixtures = test_fixtures_dir("test-dra-slices");

	test_dns();
	test_names();
	test_split();
	test_validator();
	test_generate_name();
	test_sf_pci_bus_id();
	test_compare();
	test_taints();
	test_taint_validator();
	test_quantity_equal();
	test_compare_owned();
	if (fixtures) {
		test_dgx(fixtures);
		test_fixture_nodes(fixtures);
	}
	return test_summary("test-dra-slices");
}
