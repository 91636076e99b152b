/* SPDX-License-Identifier: MIT */
/* dra-cdi: names, the spec of a claim on dgx-h100, write/remove, serve's cleanup, failmalloc. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "alloc.h"
#include "discovery.h"
#include "dra-cdi.h"
#include "macro.h"
#include "test.h"

#define UID "6f1c2a8e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"

static void test_names(void)
{
	char b[RDP_CDI_QUALIFIED_MAX];

	EXPECT_TRUE(rdp_cdi_claim_uid_valid(UID));
	EXPECT_TRUE(!rdp_cdi_claim_uid_valid(""));
	EXPECT_TRUE(!rdp_cdi_claim_uid_valid("-a"));
	EXPECT_TRUE(!rdp_cdi_claim_uid_valid("a/b"));
	EXPECT_TRUE(!rdp_cdi_claim_uid_valid("a.b"));
	EXPECT_TRUE(!rdp_cdi_claim_uid_valid(NULL));
	EXPECT_EQ(rdp_cdi_claim_file_name(UID, b, sizeof(b)), 0);
	EXPECT_STREQ(b, "rdma-dp.io-claim_" UID ".json");
	EXPECT_EQ(rdp_cdi_claim_file_name("../x", b, sizeof(b)), -EINVAL);
	EXPECT_EQ(rdp_cdi_claim_device_id(UID, "pci-0000-18-00-0", b, sizeof(b)), 0);
	EXPECT_STREQ(b, "rdma-dp.io/claim=" UID "-pci-0000-18-00-0");
	EXPECT_EQ(rdp_cdi_claim_device_id(UID, "pci-0000-18-00-0", b, 10), -ENOBUFS);
	EXPECT_EQ(rdp_cdi_claim_device_id(UID, "a b", b, sizeof(b)), -EINVAL);
	EXPECT_EQ(rdp_cdi_claim_request_id(UID, "nic", b, sizeof(b)), 0);
	EXPECT_STREQ(b, "rdma-dp.io/claim=" UID "-req-nic");
	EXPECT_EQ(rdp_cdi_claim_request_id(UID, "container-0-request-0", b, 20), -ENOBUFS);
	EXPECT_EQ(rdp_cdi_claim_request_id(UID, "", b, sizeof(b)), -EINVAL);
	EXPECT_EQ(rdp_cdi_claim_request_id(UID, "a/b", b, sizeof(b)), -EINVAL);
	EXPECT_EQ(rdp_cdi_claim_request_id("a_b", "nic", b, sizeof(b)), -EINVAL);
}

static void test_first_of_request(void)
{
	char a[] = "a", b[] = "b", p[] = "p", d[] = "d";
	struct rdp_dra_result r[] = {{.request = a, .pool = p, .device = d},
				     {.request = b, .pool = p, .device = d},
				     {.request = a, .pool = p, .device = d}};

	EXPECT_TRUE(rdp_cdi_claim_first_of_request(r, 0));
	EXPECT_TRUE(rdp_cdi_claim_first_of_request(r, 1));
	EXPECT_TRUE(!rdp_cdi_claim_first_of_request(r, 2));
}

static void test_dgx(const char *fixtures)
{
	char sys[4096], dev[4096], dir[] = "/tmp/test-dra-cdi.XXXXXX";
	struct rdp_host *h = NULL;
	struct rdp_dra_inventory inv = {0};
	char nic[] = "nic", st[] = "st", pool[] = "node", d0[] = "pci-0000-18-00-0",
	     d1[] = "pci-0000-29-00-0", bad[] = "pci-0000-ff-00-0";
	struct rdp_dra_result res[] = {{nic, pool, d0, false, NULL, false, 0},
				       {nic, pool, d1, false, NULL, false, 0},
				       {st, pool, d0, false, NULL, false, 0}};
	char *json = NULL;
	unsigned int omitted = 7;
	json_t *j;
	int dfd;

	snprintf(sys, sizeof(sys), "%s/dgx-h100/sys", fixtures);
	snprintf(dev, sizeof(dev), "%s/dgx-h100/dev", fixtures);
	EXPECT_EQ(rdp_discover(sys, dev, &h), 0);
	if (!h)
		return;
	EXPECT_EQ(rdp_dra_inventory_build(h, &inv), 0);
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, UID, res, 3, NULL, NULL, 0, &json, &omitted), 0);
	EXPECT_EQ(omitted, 0);
	j = json_loads(json ? json : "", 0, NULL);
	EXPECT_STREQ(json_string_value(json_object_get(j, "kind")), "rdma-dp.io/claim");
	json_t *devs = json_object_get(j, "devices");
	EXPECT_EQ(json_array_size(devs), 4); /* d0 once, d1; the requests nic and st */
	EXPECT_STREQ(json_string_value(json_object_get(json_array_get(devs, 0), "name")),
		     UID "-pci-0000-18-00-0");
	EXPECT_TRUE(!json_object_get(json_object_get(json_array_get(devs, 0), "containerEdits"),
				     "env"));
	/* each request's variables on its own device, over its devices only */
	json_t *nic_dev = json_array_get(devs, 2), *st_dev = json_array_get(devs, 3);
	EXPECT_STREQ(json_string_value(json_object_get(nic_dev, "name")), UID "-req-nic");
	EXPECT_TRUE(!json_object_get(json_object_get(nic_dev, "containerEdits"), "deviceNodes"));
	json_t *env = json_object_get(json_object_get(nic_dev, "containerEdits"), "env");
	EXPECT_EQ(json_array_size(env), 3);
	EXPECT_STREQ(json_string_value(json_array_get(env, 0)), "RDMA_DEVICE_NIC=mlx5_0:1,mlx5_1:1");
	EXPECT_STREQ(json_string_value(json_array_get(env, 1)), "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1");
	EXPECT_STREQ(json_string_value(json_array_get(env, 2)), "UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1");
	EXPECT_STREQ(json_string_value(json_object_get(st_dev, "name")), UID "-req-st");
	env = json_object_get(json_object_get(st_dev, "containerEdits"), "env");
	EXPECT_EQ(json_array_size(env), 3);
	EXPECT_STREQ(json_string_value(json_array_get(env, 0)), "RDMA_DEVICE_ST=mlx5_0:1");
	EXPECT_STREQ(json_string_value(json_array_get(env, 1)), "NCCL_IB_HCA==mlx5_0:1");
	EXPECT_STREQ(json_string_value(json_array_get(env, 2)), "UCX_NET_DEVICES=mlx5_0:1");
	/* top level: rdma_cm, no variable */
	EXPECT_TRUE(!json_object_get(json_object_get(j, "containerEdits"), "env"));
	EXPECT_TRUE(json_object_get(json_object_get(j, "containerEdits"), "deviceNodes") != NULL);
	json_decref(j);
	rdp_free(json);

	/* the layout of claims prepared before per-request devices: every variable top-level */
	json = NULL;
	EXPECT_EQ(rdp_cdi_claim_spec_render_env(&inv, UID, res, 3, NULL, NULL, 0, true, &json,
						&omitted), 0);
	j = json_loads(json ? json : "", 0, NULL);
	EXPECT_EQ(json_array_size(json_object_get(j, "devices")), 2);
	env = json_object_get(json_object_get(j, "containerEdits"), "env");
	EXPECT_EQ(json_array_size(env), 4);
	EXPECT_STREQ(json_string_value(json_array_get(env, 0)), "RDMA_DEVICE_NIC=mlx5_0:1,mlx5_1:1");
	EXPECT_STREQ(json_string_value(json_array_get(env, 1)), "RDMA_DEVICE_ST=mlx5_0:1");
	EXPECT_STREQ(json_string_value(json_array_get(env, 2)), "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1");
	EXPECT_STREQ(json_string_value(json_array_get(env, 3)), "UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1");
	json_decref(j);

	/* write, unchanged, serve's cleanup leaves it, remove */
	EXPECT_TRUE(mkdtemp(dir) != NULL);
	dfd = rdp_cdi_open_dir(dir, false);
	EXPECT_TRUE(dfd >= 0);
	EXPECT_EQ(rdp_cdi_claim_spec_write_at(dfd, UID, json), 0);
	EXPECT_EQ(rdp_cdi_claim_spec_write_at(dfd, UID, json), 1);
	EXPECT_EQ(rdp_cdi_write_at(dfd, "other", json), 0);
	EXPECT_EQ(rdp_cdi_cleanup_at(dfd, NULL, 0, NULL, NULL), 1); /* "other" only */
	EXPECT_EQ(faccessat(dfd, "rdma-dp.io-claim_" UID ".json", F_OK, 0), 0);
	EXPECT_EQ(rdp_cdi_claim_spec_remove_at(dfd, UID), 0);
	EXPECT_EQ(rdp_cdi_claim_spec_remove_at(dfd, UID), 1);
	EXPECT_EQ(rdp_cdi_claim_spec_write_at(dfd, "x/y", json), -EINVAL);
	close(dfd);
	EXPECT_EQ(rmdir(dir), 0);
	rdp_free(json);

	/* refused: an unknown device, a bad UID, too many results; none: NULL */
	res[1].device = bad;
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, UID, res, 3, NULL, NULL, 0, &json, NULL), -EINVAL);
	res[1].device = d1;
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, "a_b", res, 3, NULL, NULL, 0, &json, NULL), -EINVAL);
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, UID, res, RDP_DRA_CLAIM_MAX_RESULTS + 1, NULL,
					    NULL, 0, &json, NULL), -EINVAL);
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, UID, res, 0, NULL, NULL, 0, &json, NULL), 0);
	EXPECT_TRUE(json == NULL);
	/* with a host prefix */
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, UID, res, 1, "/fx", NULL, 0, &json, NULL), 0);
	EXPECT_CONTAINS(json, "\"hostPath\": \"/fx/dev/infiniband/uverbs0\"");
	EXPECT_CONTAINS(json, "\"hostPath\": \"/fx/dev/infiniband/rdma_cm\"");
	EXPECT_TRUE(json && !strstr(json, "\"hooks\""));
	rdp_free(json);
	json = NULL;
	/* the memlock hook: createRuntime, the binary's path, the ABI and the value */
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, UID, res, 1, "/fx", "/opt/rdma-dp/bin/rdma-dp",
					    64ULL << 30, &json, NULL), 0);
	EXPECT_CONTAINS(json, "\"hookName\": \"createRuntime\"");
	EXPECT_CONTAINS(json, "\"path\": \"/opt/rdma-dp/bin/rdma-dp\"");
	EXPECT_CONTAINS(json, "\"68719476736\"");
	rdp_free(json);
	json = NULL;
	/* 0 leaves the limit alone: no hook; a relative hook path is refused */
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, UID, res, 1, "/fx", "/opt/rdma-dp/bin/rdma-dp", 0,
					    &json, NULL), 0);
	EXPECT_TRUE(json && !strstr(json, "\"hooks\""));
	rdp_free(json);
	json = NULL;
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, UID, res, 1, "/fx", "rdma-dp", 1, &json, NULL),
		  -EINVAL);
	rdp_free(json);

	/* failmalloc */
	rdp_alloc_fail_at(0);
	EXPECT_EQ(rdp_cdi_claim_spec_render(&inv, UID, res, 3, "/fx", NULL, 0, &json, NULL), 0);
	rdp_free(json);
	unsigned long total = rdp_alloc_count();
	for (unsigned long k = 1; k <= total + 1; k++) {
		int r;

		json = NULL;
		rdp_alloc_fail_at(k);
		r = rdp_cdi_claim_spec_render(&inv, UID, res, 3, "/fx", NULL, 0, &json, NULL);
		rdp_alloc_fail_at(0);
		EXPECT_TRUE(r == 0 || r == -ENOMEM);
		EXPECT_TRUE(r == 0 ? json != NULL : json == NULL);
		rdp_free(json);
	}
	rdp_dra_inventory_done(&inv);
	rdp_host_free(h);
}

int main(void)
{
	const char *fixtures = test_fixtures_dir("test-dra-cdi");

	test_names();
	test_first_of_request();
	if (fixtures)
		test_dgx(fixtures);
	return test_summary("test-dra-cdi");
}
