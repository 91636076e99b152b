/* SPDX-License-Identifier: MIT */
/* dra-status: the apply path and body of a claim's status.devices, on the dgx-h100 fixture. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "alloc.h"
#include "discovery.h"
#include "dra-status.h"
#include "macro.h"
#include "test.h"

#define UID "6f1c2a8e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"
#define DRV "rdma.rdma-dp.io"

static void test_path(void)
{
	char buf[512];

	EXPECT_EQ(rdp_dra_status_path(DRV, "default", "c1", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/c1/status"
			  "?fieldManager=rdma.rdma-dp.io&force=true");
	EXPECT_EQ(rdp_dra_status_path(DRV, "default", "a/b", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_dra_status_path(DRV, "", "c", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_dra_status_path(DRV, "x?y", "c", buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(rdp_dra_status_path(DRV, "default", "c1", buf, 20), -ENOBUFS);
}

static void test_body(const char *fixtures)
{
	char sys[4096], dev[4096];
	struct rdp_host *h = NULL;
	struct rdp_dra_inventory inv = {0};
	char nic[] = "nic", st[] = "st", pool[] = "node-a", d0[] = "pci-0000-18-00-0",
	     bad[] = "pci-0000-ff-00-0";
	struct rdp_dra_result res[] = {{.request = nic, .pool = pool, .device = d0},
				       {.request = st, .pool = pool, .device = d0}};
	struct rdp_dra_status_ctx ctx = {.driver = DRV, .sysfs_root = sys,
					 .now = "2026-12-03T13:00:00Z"};
	char *json = NULL;
	json_t *j, *e;

	snprintf(sys, sizeof(sys), "%s/dgx-h100/sys", fixtures);
	snprintf(dev, sizeof(dev), "%s/dgx-h100/dev", fixtures);
	EXPECT_EQ(rdp_discover(sys, dev, &h), 0);
	if (!h)
		return;
	EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);
	/* one entry for a device of two requests */
	EXPECT_EQ(rdp_dra_status_body(&ctx, "default", "c1", UID, &inv, res, 2, &json), 0);
	j = json_loads(json ? json : "", 0, NULL);
	EXPECT_TRUE(j != NULL);
	EXPECT_STREQ(json_string_value(json_object_get(j, "kind")), "ResourceClaim");
	EXPECT_STREQ(json_string_value(json_object_get(json_object_get(j, "metadata"), "uid")), UID);
	EXPECT_EQ(json_array_size(json_object_get(json_object_get(j, "status"), "devices")), 1);
	e = json_array_get(json_object_get(json_object_get(j, "status"), "devices"), 0);
	EXPECT_STREQ(json_string_value(json_object_get(e, "driver")), DRV);
	EXPECT_STREQ(json_string_value(json_object_get(e, "pool")), "node-a");
	EXPECT_STREQ(json_string_value(json_object_get(e, "device")), d0);
	EXPECT_STREQ(json_string_value(json_object_get(json_object_get(e, "data"), "ibdev")),
		     "mlx5_0");
	EXPECT_STREQ(json_string_value(json_object_get(
			     json_array_get(json_object_get(e, "conditions"), 0), "lastTransitionTime")),
		     "2026-12-03T13:00:00Z");
	EXPECT_STREQ(json_string_value(json_object_get(json_object_get(e, "networkData"),
						       "interfaceName")),
		     "ibp24s0");
	EXPECT_TRUE(json_object_get(json_object_get(e, "networkData"), "hardwareAddress") != NULL);
	EXPECT_TRUE(json_object_get(json_object_get(e, "networkData"), "ips") == NULL);
	json_decref(j);
	rdp_free(json);
	/* cleared: no entries */
	EXPECT_EQ(rdp_dra_status_body(&ctx, "default", "c1", UID, &inv, NULL, 0, &json), 0);
	EXPECT_CONTAINS(json, "\"status\":{}");
	rdp_free(json);
	/* two shares of one device (consumable capacity): two entries, each with its shareID */
	{
		char s1[] = "8d3c6d5e-0000-4000-8000-000000000001",
		     s2[] = "8d3c6d5e-0000-4000-8000-000000000002";
		struct rdp_dra_result sh[] = {{.request = nic, .pool = pool, .device = d0,
					       .share_id = s1},
					      {.request = st, .pool = pool, .device = d0,
					       .share_id = s2}};

		EXPECT_EQ(rdp_dra_status_body(&ctx, "default", "c1", UID, &inv, sh, 2, &json), 0);
		j = json_loads(json ? json : "", 0, NULL);
		e = json_object_get(json_object_get(j, "status"), "devices");
		EXPECT_EQ(json_array_size(e), 2);
		EXPECT_STREQ(json_string_value(json_object_get(json_array_get(e, 0), "shareID")), s1);
		EXPECT_STREQ(json_string_value(json_object_get(json_array_get(e, 1), "shareID")), s2);
		json_decref(j);
		rdp_free(json);
	}
	/* a device not offered, a missing name */
	res[1].device = bad;
	EXPECT_EQ(rdp_dra_status_body(&ctx, "default", "c1", UID, &inv, res, 2, &json), -EINVAL);
	EXPECT_TRUE(json == NULL);
	EXPECT_EQ(rdp_dra_status_body(&ctx, "default", "", UID, &inv, res, 1, &json), -EINVAL);
	rdp_dra_inventory_done(&inv);
	rdp_host_free(h);
}

int main(void)
{
	const char *fixtures = test_fixtures_dir("test-dra-status");

	test_path();
	if (fixtures)
		test_body(fixtures);
	return test_summary("test-dra-status");
}
