/* SPDX-License-Identifier: MIT */
/*
 * dra-share: consumable capacity on the published devices, share IDs through the claim
 * parser, the checkpoint and the claim's CDI spec (two shares of one NIC).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "alloc.h"
#include "discovery.h"
#include "dra-cdi.h"
#include "dra-checkpoint.h"
#include "dra-claims.h"
#include "dra-share.h"
#include "dra-slices.h"
#include "macro.h"
#include "test.h"

#define UID "6f1c2a8e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"
#define S1 "0b7e4c6a-1d2f-4e3a-9b8c-7d6e5f4a3b2c"
#define S2 "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
#define DRV RDP_DRA_DEFAULT_DRIVER

static void test_names(void)
{
	enum rdp_dra_sharing s = RDP_DRA_SHARING_CAPACITY;
	char b[256];

	EXPECT_EQ(rdp_dra_sharing_parse("claim", &s), 0);
	EXPECT_EQ(s, RDP_DRA_SHARING_CLAIM);
	EXPECT_EQ(rdp_dra_sharing_parse("capacity", &s), 0);
	EXPECT_EQ(s, RDP_DRA_SHARING_CAPACITY);
	EXPECT_EQ(rdp_dra_sharing_parse("Capacity", &s), -EINVAL);
	EXPECT_EQ(rdp_dra_sharing_parse(NULL, &s), -EINVAL);
	EXPECT_STREQ(rdp_dra_sharing_name(RDP_DRA_SHARING_CLAIM), "claim");

	EXPECT_TRUE(rdp_dra_share_id_valid(S1));
	EXPECT_TRUE(!rdp_dra_share_id_valid(""));
	EXPECT_TRUE(!rdp_dra_share_id_valid(NULL));
	EXPECT_TRUE(!rdp_dra_share_id_valid("-a"));
	EXPECT_TRUE(!rdp_dra_share_id_valid("a/b"));
	EXPECT_TRUE(!rdp_dra_share_id_valid("a b"));
	EXPECT_TRUE(!rdp_dra_share_id_valid(
		"0123456789012345678901234567890123456789012345678901234567890123x"));

	EXPECT_EQ(rdp_dra_share_cdi_name("pci-0000-18-00-0", NULL, b, sizeof(b)), 16);
	EXPECT_STREQ(b, "pci-0000-18-00-0");
	EXPECT_TRUE(rdp_dra_share_cdi_name("pci-0000-18-00-0", S1, b, sizeof(b)) > 0);
	EXPECT_STREQ(b, "pci-0000-18-00-0-" S1);
	EXPECT_EQ(rdp_dra_share_cdi_name("pci-0000-18-00-0", "x/y", b, sizeof(b)), -EINVAL);
	EXPECT_EQ(rdp_dra_share_cdi_name("pci-0000-18-00-0", S1, b, 20), -ENOBUFS);

	EXPECT_TRUE(rdp_dra_share_same("a", NULL, "a", NULL));
	EXPECT_TRUE(rdp_dra_share_same("a", S1, "a", S1));
	EXPECT_TRUE(!rdp_dra_share_same("a", S1, "a", S2));
	EXPECT_TRUE(!rdp_dra_share_same("a", S1, "a", NULL));
	EXPECT_TRUE(!rdp_dra_share_same("a", NULL, "b", NULL));
}

static void test_device(void)
{
	struct rdp_dra_share_options claim = {0},
				     cap = {.sharing = RDP_DRA_SHARING_CAPACITY},
				     cap_bw = {.sharing = RDP_DRA_SHARING_CAPACITY, .slots = 16,
					       .bandwidth = true},
				     bad = {.sharing = RDP_DRA_SHARING_CAPACITY,
					    .slots = RDP_DRA_SHARE_SLOTS_MAX + 1};
	json_t *d, *want;

	d = json_pack("{s:s, s:{s:{s:i}}}", "name", "pci-0000-18-00-0", "attributes", "rateGbps",
		      "int", 400);
	EXPECT_EQ(rdp_dra_share_device(d, &claim), 0);
	EXPECT_TRUE(!json_object_get(d, "capacity"));
	EXPECT_TRUE(!json_object_get(d, "allowMultipleAllocations"));
	EXPECT_EQ(rdp_dra_share_device(d, &bad), -EINVAL);

	EXPECT_EQ(rdp_dra_share_device(d, &cap), 0);
	want = json_loads("{\"name\": \"pci-0000-18-00-0\", \"attributes\": {\"rateGbps\": "
			  "{\"int\": 400}}, \"allowMultipleAllocations\": true, \"capacity\": "
			  "{\"slots\": {\"value\": \"200\", \"requestPolicy\": {\"default\": \"1\", "
			  "\"validRange\": {\"min\": \"1\"}}}}}", 0, NULL);
	EXPECT_TRUE(json_equal(d, want));
	json_decref(want);

	EXPECT_EQ(rdp_dra_share_device(d, &cap_bw), 0);
	want = json_loads("{\"name\": \"pci-0000-18-00-0\", \"attributes\": {\"rateGbps\": "
			  "{\"int\": 400}}, \"allowMultipleAllocations\": true, \"capacity\": "
			  "{\"slots\": {\"value\": \"16\", \"requestPolicy\": {\"default\": \"1\", "
			  "\"validRange\": {\"min\": \"1\"}}}, \"bandwidth\": {\"value\": \"400G\", "
			  "\"requestPolicy\": {\"default\": \"0\", \"validRange\": {\"min\": \"0\"}}}}}",
			  0, NULL);
	EXPECT_TRUE(json_equal(d, want));
	json_decref(want);
	json_decref(d);

	/* no rate: no bandwidth */
	d = json_pack("{s:s, s:{}}", "name", "ib-rxe0", "attributes");
	EXPECT_EQ(rdp_dra_share_device(d, &cap_bw), 0);
	EXPECT_TRUE(json_object_get(json_object_get(d, "capacity"), "slots") != NULL);
	EXPECT_TRUE(!json_object_get(json_object_get(d, "capacity"), "bandwidth"));
	json_decref(d);

	EXPECT_EQ(rdp_dra_share_device(NULL, &cap), -EINVAL);
	EXPECT_EQ(rdp_dra_share_slices(NULL, &cap), -EINVAL);
}

static void test_claim(void)
{
	struct rdp_host h = {0};
	struct rdp_device devs[1] = {0};
	struct rdp_dra_inventory inv = {0};
	struct rdp_dra_claim_ctx ctx = {.driver = DRV, .uid = UID, .pool = "node-a", .inv = &inv};
	struct rdp_dra_claim c = {0};
	char *err = NULL;
	const char *s;

	snprintf(devs[0].name, sizeof(devs[0].name), "mlx5_0");
	snprintf(devs[0].pci_address, sizeof(devs[0].pci_address), "0000:18:00.0");
	devs[0].numa_node = -1;
	h.devices = devs;
	h.n_devices = 1;
	EXPECT_EQ(rdp_dra_inventory_build(&h, &inv), 0);

#define CLAIM(results)                                                                             \
	"{\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"c1\",\"namespace\":\"ns\",\"uid\":\"" UID \
	"\"},\"status\":{\"allocation\":{\"devices\":{\"results\":[" results "]}}}}"
#define RES(req, share)                                                                            \
	"{\"request\":\"" req "\",\"driver\":\"" DRV "\",\"pool\":\"node-a\",\"device\":"            \
	"\"pci-0000-18-00-0\"" share "}"
	s = CLAIM(RES("a", ",\"shareID\":\"" S1 "\",\"consumedCapacity\":{\"slots\":\"1\"}") ","
		  RES("b", ",\"shareID\":\"" S2 "\"") "," RES("c", ""));
	EXPECT_EQ(rdp_dra_claim_parse(s, strlen(s), &ctx, &c, &err), 0);
	EXPECT_EQ(c.n_results, 3);
	if (c.n_results == 3) {
		EXPECT_STREQ(c.results[0].share_id, S1);
		EXPECT_STREQ(c.results[1].share_id, S2);
		EXPECT_TRUE(c.results[2].share_id == NULL);
	}
	rdp_dra_claim_done(&c);

	s = CLAIM(RES("a", ",\"shareID\":\"a/b\""));
	EXPECT_EQ(rdp_dra_claim_parse(s, strlen(s), &ctx, &c, &err), -EBADMSG);
	EXPECT_CONTAINS(err, "shareID");
	rdp_free(err);
	err = NULL;
	s = CLAIM(RES("a", ",\"shareID\":7"));
	EXPECT_EQ(rdp_dra_claim_parse(s, strlen(s), &ctx, &c, &err), -EBADMSG);
	rdp_free(err);
	rdp_dra_inventory_done(&inv);
}

static void test_checkpoint(void)
{
	static char id0[] = "rdma-dp.io/claim=u1-pci-0000-18-00-0-" S1;
	static char *ids[] = {id0};
	static char nic[] = "nic", pool[] = "node-a", d18[] = "pci-0000-18-00-0", s1[] = S1,
		    bad[] = "x/y", ns[] = "ns", c1[] = "c1", spec[] = "/s.json", uid[] = "u1";
	struct rdp_dra_ckpt_device devs[] = {{nic, pool, d18, ids, 1, false, s1, false, 0},
					     {nic, pool, d18, NULL, 0, false, NULL, false, 0}};
	struct rdp_dra_ckpt_claim cl = {.uid = uid, .namespace = ns, .name = c1,
					.state = RDP_DRA_PREPARE_STARTED, .devices = devs,
					.n_devices = 2, .cdi_spec = spec};
	struct rdp_dra_checkpoint c = {0}, back = {0};
	const struct rdp_dra_ckpt_claim *f;
	char *text = NULL, *err = NULL;

	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), 0);
	EXPECT_EQ(rdp_dra_checkpoint_render(&c, &text), 0);
	EXPECT_CONTAINS(text, "\"share_id\": \"" S1 "\"");
	EXPECT_EQ(rdp_dra_checkpoint_parse(text, strlen(text), &back, &err), 0);
	f = rdp_dra_checkpoint_find(&back, "u1");
	EXPECT_TRUE(f != NULL);
	if (f && f->n_devices == 2) {
		EXPECT_STREQ(f->devices[0].share_id, S1);
		EXPECT_TRUE(f->devices[1].share_id == NULL);
	}
	rdp_free(text);
	text = NULL;
	/* a share ID that is not a UID is refused by put and by the parser */
	devs[0].share_id = bad;
	EXPECT_EQ(rdp_dra_checkpoint_put(&c, &cl), -EINVAL);
	{
		const char *t = "{\"version\": 1, \"claims\": {\"u1\": {\"namespace\": \"ns\", "
				"\"name\": \"c1\", \"state\": \"prepared\", \"cdi_spec\": \"\", "
				"\"devices\": [{\"request\": \"nic\", \"pool\": \"p\", \"device\": "
				"\"d\", \"cdi_ids\": [], \"share_id\": \"x/y\"}]}}}";
		struct rdp_dra_checkpoint x = {0};

		EXPECT_EQ(rdp_dra_checkpoint_parse(t, strlen(t), &x, &err), -EBADMSG);
		EXPECT_CONTAINS(err, "share_id");
		rdp_free(err);
		rdp_dra_checkpoint_done(&x);
	}
	rdp_dra_checkpoint_done(&c);
	rdp_dra_checkpoint_done(&back);
}

static void test_dgx(const char *fixtures)
{
	char sys[4096], dev[4096];
	struct rdp_host *h = NULL;
	struct rdp_dra_inventory inv = {0};
	struct rdp_dra_node node = {.driver = DRV, .node_name = "node-a", .node_uid = "u"};
	struct rdp_dra_share_options cap = {.sharing = RDP_DRA_SHARING_CAPACITY, .slots = 4,
					    .bandwidth = true};
	char nic[] = "nic", st[] = "st", pool[] = "node-a", d0[] = "pci-0000-18-00-0",
	     s1[] = S1, s2[] = S2;
	struct rdp_dra_result res[] = {{nic, pool, d0, false, s1, false, 0}, {st, pool, d0, false, s2, false, 0},
				       {nic, pool, d0, false, s1, false, 0}};
	char *json = NULL, err[256] = "";
	json_t *slices = NULL, *j, *devs, *s;
	size_t i;

	snprintf(sys, sizeof(sys), "%s/dgx-h100/sys", fixtures);
	snprintf(dev, sizeof(dev), "%s/dgx-h100/dev", fixtures);
	EXPECT_EQ(rdp_discover(sys, dev, &h), 0);
	if (!h)
		return;
	EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);

	/* the pool with capacity passes the API server's slice rules */
	EXPECT_EQ(rdp_dra_slices_build(&node, &inv, 1, &slices), 0);
	EXPECT_EQ(rdp_dra_share_slices(slices, &cap), 0);
	json_array_foreach(slices, i, s) {
		EXPECT_EQ(rdp_dra_slice_check(s, err, sizeof(err)), 0);
		if (err[0])
			fprintf(stderr, "%s\n", err);
	}
	devs = json_object_get(json_object_get(json_array_get(slices, 0), "spec"), "devices");
	EXPECT_TRUE(json_is_true(json_object_get(json_array_get(devs, 0),
						 "allowMultipleAllocations")));
	s = json_object_get(json_object_get(json_array_get(devs, 0), "capacity"), "bandwidth");
	EXPECT_STREQ(json_string_value(json_object_get(s, "value")), "400G");
	json_decref(slices);

	/* two shares of one NIC in one claim: two CDI devices, one HCA in NCCL_IB_HCA */
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, UID, res, 3, NULL, NULL, 0, &json, NULL), 0);
	j = json ? json_loads(json, 0, NULL) : NULL;
	devs = json_object_get(j, "devices");
	EXPECT_EQ(json_array_size(devs), 4); /* the two shares, then the requests nic and st */
	EXPECT_STREQ(json_string_value(json_object_get(json_array_get(devs, 0), "name")),
		     UID "-pci-0000-18-00-0-" S1);
	EXPECT_STREQ(json_string_value(json_object_get(json_array_get(devs, 1), "name")),
		     UID "-pci-0000-18-00-0-" S2);
	EXPECT_STREQ(json_string_value(json_object_get(json_array_get(devs, 2), "name")),
		     UID "-req-nic");
	EXPECT_CONTAINS(json, "NCCL_IB_HCA==mlx5_0:1\"");
	json_decref(j);
	rdp_free(json);
	/* two shares of one NIC in one request: one HCA in that request's NCCL_IB_HCA */
	res[1].request = nic;
	json = NULL;
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, UID, res, 3, NULL, NULL, 0, &json, NULL), 0);
	EXPECT_CONTAINS(json, "\"NCCL_IB_HCA==mlx5_0:1\"");
	EXPECT_CONTAINS(json, "\"RDMA_DEVICE_NIC=mlx5_0:1\"");
	rdp_free(json);
	rdp_dra_inventory_done(&inv);
	rdp_host_free(h);
}

int main(void)
{
	const char *fixtures = test_fixtures_dir("test-dra-share");

	test_names();
	test_device();
	test_claim();
	test_checkpoint();
	if (fixtures)
		test_dgx(fixtures);
	return test_summary("test-dra-share");
}
