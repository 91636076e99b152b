/* SPDX-License-Identifier: MIT */
/* dra-claims: ResourceClaim parsing, checks and bounds, on hand-written claims. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "dra-claims.h"
#include "macro.h"
#include "test.h"

#define UID "6f1c2a8e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"
#define DRV RDP_DRA_DEFAULT_DRIVER

static struct rdp_host *host;
static struct rdp_dra_inventory inv;
static struct rdp_dra_claim_ctx ctx = {.driver = DRV, .uid = UID, .pool = "node-a", .inv = &inv};

static void setup(void)
{
	host = rdp_calloc(1, sizeof(*host));
	host->devices = rdp_calloc(3, sizeof(*host->devices));
	host->n_devices = 3;
	for (size_t i = 0; i < 3; i++) {
		struct rdp_device *d = &host->devices[i];

		snprintf(d->name, sizeof(d->name), "mlx5_%zu", i);
		snprintf(d->pci_address, sizeof(d->pci_address), "0000:%02zx:00.0", 0x18 + i);
		d->numa_node = -1;
		d->usability = i == 2 ? RDP_UNUSABLE_UVERBS_NODE : RDP_USABLE;
	}
	EXPECT_EQ(rdp_dra_inventory_build(host, &inv), 0);
	EXPECT_EQ(inv.n_devs, 2);
}

/* A claim with the given results ("" for none), uid and allocation. */
static char *claim(const char *uid, bool allocated, const char *results)
{
	return rdp_asprintf("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
			    "\"metadata\":{\"name\":\"c1\",\"namespace\":\"ns\",\"uid\":\"%s\"},"
			    "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"nic\"}]}},"
			    "\"status\":{%s%s%s}}",
			    uid, allocated ? "\"allocation\":{\"devices\":{\"results\":[" : "",
			    allocated ? results : "", allocated ? "]}}" : "");
}

static int parse(const char *s, struct rdp_dra_claim *c, char **err)
{
	return rdp_dra_claim_parse(s, strlen(s), &ctx, c, err);
}

#define R(req, drv, pool, dev)                                                                     \
	"{\"request\":\"" req "\",\"driver\":\"" drv "\",\"pool\":\"" pool "\",\"device\":\"" dev "\"}"

static void test_valid(void)
{
	struct rdp_dra_claim c = {0};
	char *err = NULL, *s;

	s = claim(UID, true, R("gpu", "gpu.nvidia.com", "node-a", "gpu-0") ","
			     R("nic", DRV, "node-a", "pci-0000-18-00-0") ","
			     R("nic2/rdma", DRV, "node-a", "pci-0000-19-00-0"));
	EXPECT_EQ(parse(s, &c, &err), 0);
	EXPECT_TRUE(err == NULL);
	EXPECT_STREQ(c.uid, UID);
	EXPECT_STREQ(c.namespace, "ns");
	EXPECT_STREQ(c.name, "c1");
	EXPECT_EQ(c.n_results, 2);
	if (c.n_results == 2) {
		EXPECT_STREQ(c.results[0].request, "nic");
		EXPECT_STREQ(c.results[0].device, "pci-0000-18-00-0");
		EXPECT_STREQ(c.results[0].pool, "node-a");
		EXPECT_STREQ(c.results[1].request, "nic2");
		EXPECT_STREQ(c.results[1].device, "pci-0000-19-00-0");
	}
	rdp_free(s);
	/* only other drivers: no result, no error */
	s = claim(UID, true, R("gpu", "gpu.nvidia.com", "node-a", "gpu-0"));
	EXPECT_EQ(parse(s, &c, &err), 0);
	EXPECT_EQ(c.n_results, 0);
	rdp_free(s);
	/* no results at all, no kind */
	const char *minimal = "{\"metadata\":{\"uid\":\"" UID "\"},\"status\":{\"allocation\":{}}}";
	EXPECT_EQ(parse(minimal, &c, &err), 0);
	EXPECT_EQ(c.n_results, 0);
	EXPECT_STREQ(c.namespace, "");
	rdp_dra_claim_done(&c);
	rdp_dra_claim_done(&c);
}

/* results[].adminAccess: read per result; absent or null is false; another type is refused. */
static void test_admin_access(void)
{
	struct rdp_dra_claim c = {0};
	char *err = NULL, *s;

	s = claim(UID, true, "{\"request\":\"mon\",\"driver\":\"" DRV "\",\"pool\":\"node-a\","
			     "\"device\":\"pci-0000-18-00-0\",\"adminAccess\":true},"
			     "{\"request\":\"nic\",\"driver\":\"" DRV "\",\"pool\":\"node-a\","
			     "\"device\":\"pci-0000-19-00-0\",\"adminAccess\":false},"
			     "{\"request\":\"n3\",\"driver\":\"" DRV "\",\"pool\":\"node-a\","
			     "\"device\":\"pci-0000-19-00-0\",\"adminAccess\":null},"
			     R("n4", DRV, "node-a", "pci-0000-18-00-0"));
	EXPECT_EQ(parse(s, &c, &err), 0);
	EXPECT_EQ(c.n_results, 4);
	if (c.n_results == 4) {
		EXPECT_TRUE(c.results[0].admin_access);
		EXPECT_TRUE(!c.results[1].admin_access);
		EXPECT_TRUE(!c.results[2].admin_access);
		EXPECT_TRUE(!c.results[3].admin_access);
	}
	rdp_free(s);
	rdp_dra_claim_done(&c);
	s = claim(UID, true, "{\"request\":\"mon\",\"driver\":\"" DRV "\",\"pool\":\"node-a\","
			     "\"device\":\"pci-0000-18-00-0\",\"adminAccess\":\"true\"}");
	EXPECT_EQ(parse(s, &c, &err), -EBADMSG);
	EXPECT_CONTAINS(err, "adminAccess is not a boolean");
	rdp_free(err);
	rdp_free(s);
	/* another driver's odd adminAccess is not ours to judge */
	s = claim(UID, true, "{\"request\":\"g\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"p\","
			     "\"device\":\"gpu-0\",\"adminAccess\":1}");
	EXPECT_EQ(parse(s, &c, NULL), 0);
	rdp_free(s);
	rdp_dra_claim_done(&c);
}

static void expect_error(const char *s, int want, const char *text)
{
	struct rdp_dra_claim c = {0};
	char *err = NULL;

	EXPECT_EQ(parse(s, &c, &err), want);
	EXPECT_CONTAINS(err, text);
	EXPECT_TRUE(c.uid == NULL && c.n_results == 0);
	rdp_free(err);
	/* without an error text too */
	EXPECT_EQ(rdp_dra_claim_parse(s, strlen(s), &ctx, &c, NULL), want);
}

static void test_errors(void)
{
	char *s;

	s = claim("00000000-0000-0000-0000-000000000000", true, "");
	expect_error(s, -ESTALE, "claim got replaced");
	rdp_free(s);
	s = claim(UID, false, "");
	expect_error(s, -ENOMSG, "is not allocated");
	rdp_free(s);
	expect_error("{\"metadata\":{\"uid\":\"" UID "\"},\"status\":{\"allocation\":null}}",
		     -ENOMSG, "not allocated");
	s = claim(UID, true, R("nic", DRV, "node-a", "pci-0000-99-00-0"));
	expect_error(s, -ENODEV, "device pci-0000-99-00-0 is not offered");
	rdp_free(s);
	/* known but unusable */
	s = claim(UID, true, R("nic", DRV, "node-a", "pci-0000-1a-00-0"));
	expect_error(s, -ENODEV, "not usable");
	rdp_free(s);
	s = claim(UID, true, R("nic", DRV, "node-b", "pci-0000-18-00-0"));
	expect_error(s, -ENODEV, "of pool node-b is not on this node");
	rdp_free(s);
	s = claim(UID, true, "{\"driver\":\"" DRV "\",\"pool\":\"node-a\"}");
	expect_error(s, -EBADMSG, "missing");
	rdp_free(s);
	s = claim(UID, true, R("/x", DRV, "node-a", "pci-0000-18-00-0"));
	expect_error(s, -EBADMSG, "missing");
	rdp_free(s);
}

static void test_hostile(void)
{
	static const struct {
		const char *json;
		int err;
		const char *text;
	} cases[] = {
		{"", -EBADMSG, "not a ResourceClaim"},
		{"[]", -EBADMSG, "not a ResourceClaim"},
		{"{\"metadata\":[]}", -EBADMSG, "not a ResourceClaim"},
		{"{\"metadata\":{}}", -EBADMSG, "metadata.uid"},
		{"{\"metadata\":{\"uid\":5}}", -EBADMSG, "metadata.uid"},
		{"{\"metadata\":{\"uid\":\"" UID "\",\"name\":1}}", -EBADMSG, "metadata.uid"},
		{"{\"kind\":\"Pod\",\"metadata\":{\"uid\":\"" UID "\"}}", -EBADMSG, "kind"},
		{"{\"metadata\":{\"uid\":\"" UID "\"},\"status\":[]}", -EBADMSG, "status.allocation"},
		{"{\"metadata\":{\"uid\":\"" UID "\"},\"status\":{\"allocation\":1}}", -EBADMSG,
		 "status.allocation"},
		{"{\"metadata\":{\"uid\":\"" UID "\"},\"status\":{\"allocation\":{\"devices\":"
		 "{\"results\":{}}}}}", -EBADMSG, "not a list"},
		{"{\"metadata\":{\"uid\":\"" UID "\"},\"status\":{\"allocation\":{\"devices\":"
		 "{\"results\":[1]}}}}", -EBADMSG, "not an object"},
		{"{\"metadata\":{\"uid\":\"" UID "\"},\"status\":{\"allocation\":{\"devices\":"
		 "{\"results\":[{\"driver\":7}]}}}}", -EBADMSG, "bounded string"},
		{"{\"metadata\":{\"uid\":\"" UID "\"},\"status\":{\"allocation\":{\"devices\":"
		 "{\"results\":[{\"driver\":\"x\",\"device\":[]}]}}}}", -EBADMSG, "bounded string"},
		/* duplicate keys are refused (the API server never sends them) */
		{"{\"metadata\":{\"uid\":\"x\",\"uid\":\"" UID "\"}}", -EBADMSG, "not a ResourceClaim"},
		/* an embedded NUL in a string */
		{"{\"metadata\":{\"uid\":\"" UID "\\u0000x\"}}", -EBADMSG, "not a ResourceClaim"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		expect_error(cases[i].json, cases[i].err, cases[i].text);

	/* a huge results array */
	size_t n = 100000, cap = n * 4 + 256, off;
	char *big = rdp_malloc(cap);
	off = (size_t)snprintf(big, cap, "{\"metadata\":{\"uid\":\"" UID "\"},\"status\":"
				"{\"allocation\":{\"devices\":{\"results\":[");
	for (size_t i = 0; i < n; i++)
		off += (size_t)snprintf(big + off, cap - off, "%s{}", i ? "," : "");
	snprintf(big + off, cap - off, "]}}}}");
	expect_error(big, -E2BIG, "allocation results, at most");
	rdp_free(big);
	/* a huge string */
	big = rdp_malloc(1 << 20);
	off = (size_t)snprintf(big, 1 << 20, "{\"metadata\":{\"uid\":\"");
	memset(big + off, 'a', (1 << 19));
	snprintf(big + off + (1 << 19), 64, "\"}}");
	expect_error(big, -EBADMSG, "metadata.uid");
	rdp_free(big);
	/* too large a body: refused before parsing */
	struct rdp_dra_claim c = {0};
	char *err = NULL;
	EXPECT_EQ(rdp_dra_claim_parse("{}", RDP_DRA_CLAIM_MAX_BYTES + 1ul, &ctx, &c, &err), -E2BIG);
	rdp_free(err);
	/* deep nesting */
	size_t depth = 100000;
	big = rdp_malloc(depth * 2 + 1);
	memset(big, '[', depth);
	memset(big + depth, ']', depth);
	big[depth * 2] = 0;
	expect_error(big, -EBADMSG, "not a ResourceClaim");
	rdp_free(big);
}

static void test_base_request(void)
{
	char b[8];

	EXPECT_EQ(rdp_dra_base_request("nic", b, sizeof(b)), 3);
	EXPECT_STREQ(b, "nic");
	EXPECT_EQ(rdp_dra_base_request("nic/a/b", b, sizeof(b)), 3);
	EXPECT_STREQ(b, "nic");
	EXPECT_EQ(rdp_dra_base_request("", b, sizeof(b)), -EINVAL);
	EXPECT_EQ(rdp_dra_base_request("/x", b, sizeof(b)), -EINVAL);
	EXPECT_EQ(rdp_dra_base_request("verylongname", b, sizeof(b)), -ENOBUFS);
}

/* Every allocation failing once: -ENOMEM or success, never a leak (ASan) or a crash. */
static void test_failmalloc(void)
{
	char *s = claim(UID, true, R("nic", DRV, "node-a", "pci-0000-18-00-0") ","
				   R("nic2/rdma", DRV, "node-a", "pci-0000-19-00-0"));
	unsigned long total;
	struct rdp_dra_claim c = {0};
	char *err = NULL;

	rdp_alloc_fail_at(0);
	EXPECT_EQ(parse(s, &c, &err), 0);
	total = rdp_alloc_count();
	rdp_dra_claim_done(&c);
	for (unsigned long k = 1; k <= total + 1; k++) {
		int r;

		rdp_alloc_fail_at(k);
		r = parse(s, &c, &err);
		rdp_alloc_fail_at(0);
		EXPECT_TRUE(r == 0 || r == -ENOMEM);
		EXPECT_TRUE(r == 0 ? c.n_results == 2 : c.uid == NULL);
		rdp_dra_claim_done(&c);
	}
	rdp_free(s);
}

int main(void)
{
	setup();
	test_valid();
	test_admin_access();
	test_errors();
	test_hostile();
	test_base_request();
	test_failmalloc();
	rdp_dra_inventory_done(&inv);
	rdp_host_free(host);
	return test_summary("test-dra-claims");
}
