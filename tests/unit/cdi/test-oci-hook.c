/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "memlock.h"
#include "oci-hook.h"
#include "test.h"

static int parse(const char *s, struct rdp_oci_state *st, char *err, size_t errlen)
{
	return rdp_oci_state_parse(s, strlen(s), st, err, errlen);
}

static void test_state(void)
{
	struct rdp_oci_state st;
	char err[256];

	/* what runc 1.1 passes at createRuntime (annotations as podman sets them) */
	EXPECT_EQ(parse("{\"ociVersion\":\"1.0.2-dev\",\"id\":\"abc\",\"status\":\"creating\","
			"\"pid\":4242,\"bundle\":\"/run/x/abc/userdata\","
			"\"annotations\":{\"io.podman.annotations.autoremove\":\"TRUE\"}}",
			&st, err, sizeof(err)),
		  0);
	EXPECT_EQ(st.pid, 4242);
	EXPECT_STREQ(st.id, "abc");
	EXPECT_STREQ(st.status, "creating");
	EXPECT_EQ(parse("{\"ociVersion\":\"1.0.0\",\"id\":\"a\",\"status\":\"created\",\"pid\":1,"
			"\"bundle\":\"/b\",\"later\":[1,2]}",
			&st, err, sizeof(err)),
		  0);
	/* strict */
	EXPECT_EQ(parse("", &st, err, sizeof(err)), -EINVAL);
	EXPECT_CONTAINS(err, "not JSON");
	EXPECT_EQ(parse("[]", &st, err, sizeof(err)), -EINVAL);
	EXPECT_CONTAINS(err, "an array, not an object");
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":\"a\",\"status\":\"creating\",\"pid\":5,"
			"\"pid\":6,\"bundle\":\"/b\"}",
			&st, err, sizeof(err)),
		  -EINVAL); /* duplicate key */
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":\"a\",\"status\":\"creating\",\"bundle\":\"/b\"}",
			&st, err, sizeof(err)),
		  -EINVAL);
	EXPECT_CONTAINS(err, "no \"pid\"");
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":\"a\",\"status\":\"creating\",\"pid\":\"5\","
			"\"bundle\":\"/b\"}",
			&st, err, sizeof(err)),
		  -EINVAL);
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":\"a\",\"status\":\"creating\",\"pid\":0,"
			"\"bundle\":\"/b\"}",
			&st, err, sizeof(err)),
		  -EINVAL);
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":\"a\",\"status\":\"creating\",\"pid\":-3,"
			"\"bundle\":\"/b\"}",
			&st, err, sizeof(err)),
		  -EINVAL);
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":\"a\",\"status\":\"creating\",\"pid\":5.0,"
			"\"bundle\":\"/b\"}",
			&st, err, sizeof(err)),
		  -EINVAL);
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":\"a\",\"status\":\"creating\","
			"\"pid\":99999999999,\"bundle\":\"/b\"}",
			&st, err, sizeof(err)),
		  -EINVAL);
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":\"a\",\"status\":\"running\",\"pid\":5,"
			"\"bundle\":\"/b\"}",
			&st, err, sizeof(err)),
		  -EINVAL);
	EXPECT_CONTAINS(err, "createRuntime");
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":7,\"status\":\"creating\",\"pid\":5,"
			"\"bundle\":\"/b\"}",
			&st, err, sizeof(err)),
		  -EINVAL);
	EXPECT_CONTAINS(err, "\"id\" is an integer");
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":\"a\\u0000b\",\"status\":\"creating\","
			"\"pid\":5,\"bundle\":\"/b\"}",
			&st, err, sizeof(err)),
		  -EINVAL);
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":\"a\",\"status\":\"creating\",\"pid\":5,"
			"\"bundle\":\"/b\",\"annotations\":[]}",
			&st, err, sizeof(err)),
		  -EINVAL);
	EXPECT_EQ(parse("{\"ociVersion\":\"1\",\"id\":\"a\",\"status\":\"creating\",\"pid\":5}",
			&st, err, sizeof(err)),
		  -EINVAL);
	EXPECT_CONTAINS(err, "no \"bundle\"");
	/* bounded */
	{
		size_t n = RDP_OCI_STATE_MAX + 1;
		char *big = rdp_malloc(n);

		if (big) {
			memset(big, ' ', n);
			EXPECT_EQ(rdp_oci_state_parse(big, n, &st, err, sizeof(err)), -EFBIG);
			rdp_free(big);
		}
	}
	/* err may be absent */
	EXPECT_EQ(parse("nope", &st, NULL, 0), -EINVAL);
}

static void test_args(void)
{
	const char *a[RDP_OCI_HOOK_ARGS_MAX];
	char v[RDP_MEMLOCK_STR_MAX];

	EXPECT_EQ(rdp_oci_hook_args(RDP_MEMLOCK_UNLIMITED, a, v, sizeof(v)), 6);
	EXPECT_STREQ(a[0], "rdma-dp");
	EXPECT_STREQ(a[1], "hook");
	EXPECT_STREQ(a[2], "--abi");
	EXPECT_STREQ(a[3], RDP_OCI_HOOK_ABI);
	EXPECT_STREQ(a[4], "--memlock");
	EXPECT_STREQ(a[5], "unlimited");
	EXPECT_EQ(rdp_oci_hook_args(1ULL << 30, a, v, sizeof(v)), 6);
	EXPECT_STREQ(a[5], "1073741824");
	EXPECT_EQ(rdp_oci_hook_args(RDP_MEMLOCK_LEAVE, a, v, sizeof(v)), -EINVAL);
}

int main(void)
{
	test_state();
	test_args();
	return test_summary("test-oci-hook");
}
