/* SPDX-License-Identifier: MIT */
/* dra-params: the RdmaConfig opaque parameters, strict, and their application per request. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "dra-params.h"
#include "macro.h"
#include "memlock.h"
#include "test.h"

#define HEAD "{\"apiVersion\":\"rdma.rdma-dp.io/v1alpha1\",\"kind\":\"RdmaConfig\""

static void test_parse(void)
{
	static const struct {
		const char *text;
		int r;
		uint64_t memlock;
		const char *err;
	} cases[] = {
		{HEAD ",\"memlock\":\"unlimited\"}", 0, RDP_MEMLOCK_UNLIMITED, NULL},
		{HEAD ",\"memlock\":\"1073741824\"}", 0, 1ULL << 30, NULL},
		{HEAD ",\"memlock\":\"64Mi\"}", 0, 64ULL << 20, NULL},
		{HEAD ",\"memlock\":1048576}", 0, 1ULL << 20, NULL},
		{HEAD ",\"memlock\":0}", 0, 0, NULL},
		{HEAD "}", 0, 0, NULL},
		{HEAD ",\"memlock\":-1}", -EBADMSG, 0, "negative"},
		{HEAD ",\"memlock\":1.5}", -EBADMSG, 0, "not a string or an integer"},
		{HEAD ",\"memlock\":\"lots\"}", -EBADMSG, 0, "\"lots\" is not"},
		{HEAD ",\"memlock\":true}", -EBADMSG, 0, "not a string or an integer"},
		{HEAD ",\"memlok\":\"1Gi\"}", -EBADMSG, 0, "unknown field \"memlok\""},
		{"{\"apiVersion\":\"rdma.rdma-dp.io/v1\",\"kind\":\"RdmaConfig\"}", -EBADMSG, 0,
		 "apiVersion must be"},
		{"{\"apiVersion\":\"rdma.rdma-dp.io/v1alpha1\",\"kind\":\"GpuConfig\"}", -EBADMSG, 0,
		 "kind must be \"RdmaConfig\""},
		{"[]", -EBADMSG, 0, "not an object"},
		{HEAD ",\"memlock\":\"1Gi\",\"memlock\":\"2Gi\"}", -EBADMSG, 0, "not JSON"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct rdp_dra_params p = {0};
		char *err = NULL;
		int r = rdp_dra_params_parse_text(cases[i].text, strlen(cases[i].text), &p, &err);

		EXPECT_EQ(r, cases[i].r);
		if (r == 0)
			EXPECT_TRUE(p.memlock == cases[i].memlock);
		if (cases[i].err)
			EXPECT_CONTAINS(err, cases[i].err);
		else
			EXPECT_TRUE(err == NULL);
		rdp_free(err);
	}
}

#define CLAIM(configs)                                                                             \
	"{\"status\":{\"allocation\":{\"devices\":{\"results\":[],\"config\":" configs "}}}}"
#define OURS(reqs, memlock)                                                                        \
	"{\"source\":\"FromClaim\"" reqs ",\"opaque\":{\"driver\":\"rdma.rdma-dp.io\","          \
	"\"parameters\":" HEAD ",\"memlock\":" memlock "}}}"

static void test_apply(void)
{
	char nic[] = "nic", st[] = "st", pool[] = "p", d0[] = "d0", d1[] = "d1", ns[] = "ns",
	     name[] = "c";
	struct rdp_dra_result res[2] = {{.request = nic, .pool = pool, .device = d0},
					{.request = st, .pool = pool, .device = d1}};
	struct rdp_dra_claim c = {.namespace = ns, .name = name, .results = res, .n_results = 2};
	const char *body;
	char *err = NULL;

	/* a class config for every request, then the claim's for "st" (by a subrequest) wins;
	 * another driver's entry (with parameters we would refuse) is not ours */
	body = CLAIM("[" OURS("", "\"1Gi\"") ","
		     "{\"source\":\"FromClaim\",\"opaque\":{\"driver\":\"gpu.example.com\","
		     "\"parameters\":{\"x\":1}}}," OURS(",\"requests\":[\"st/fast\"]", "0") "]");
	EXPECT_EQ(rdp_dra_params_apply(body, strlen(body), "rdma.rdma-dp.io", &c, &err), 0);
	EXPECT_TRUE(res[0].has_memlock && res[0].memlock == 1ULL << 30);
	EXPECT_TRUE(res[1].has_memlock && res[1].memlock == 0);
	/* none of ours: nothing set */
	res[0] = (struct rdp_dra_result){.request = nic, .pool = pool, .device = d0};
	res[1] = (struct rdp_dra_result){.request = st, .pool = pool, .device = d1};
	body = CLAIM("[" OURS(",\"requests\":[\"other\"]", "\"unlimited\"") "]");
	EXPECT_EQ(rdp_dra_params_apply(body, strlen(body), "rdma.rdma-dp.io", &c, &err), 0);
	EXPECT_TRUE(!res[0].has_memlock && !res[1].has_memlock);
	/* a bad one names the claim, the entry and the field */
	body = CLAIM("[{\"opaque\":{\"driver\":\"gpu.example.com\"}}," OURS("", "\"big\"") "]");
	EXPECT_EQ(rdp_dra_params_apply(body, strlen(body), "rdma.rdma-dp.io", &c, &err), -EBADMSG);
	EXPECT_CONTAINS(err, "claim ns/c: config[1].opaque.parameters: memlock: \"big\"");
	rdp_free(err);
	err = NULL;
	body = CLAIM("{}");
	EXPECT_EQ(rdp_dra_params_apply(body, strlen(body), "rdma.rdma-dp.io", &c, &err), -EBADMSG);
	EXPECT_CONTAINS(err, "config is not a list");
	rdp_free(err);
}

int main(void)
{
	test_parse();
	test_apply();
	return test_summary("test-dra-params");
}
