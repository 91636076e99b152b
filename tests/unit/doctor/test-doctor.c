/* SPDX-License-Identifier: MIT */
/*
 * doctor: the report (adding, bounds, control characters, order, counts), its text and JSON
 * renderings byte for byte, allocation failures; the stack and plugin groups on the generated
 * fixture nodes (RDP_FIXTURES) and on planted faults in a copy made here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "config.h"
#include "diag.h"
#include "discovery.h"
#include "doctor.h"
#include "pool.h"
#include "sysfs.h"
#include "test.h"

static char *render(const struct rdp_doctor_report *r, bool json)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int k;

	if (!f)
		abort();
	k = json ? rdp_doctor_render_json(r, f) : rdp_doctor_render_text(r, f);
	fclose(f);
	if (k < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static int sample(struct rdp_doctor_report *r)
{
	int k = 0;

	k |= rdp_doctor_add(r, RDP_GROUP_PORTS, "port.state", RDP_CHECK_OK, "mlx5_0 port 1", NULL,
			    NULL, "ACTIVE, LinkUp");
	k |= rdp_doctor_add(r, RDP_GROUP_STACK, "stack.uverbs", RDP_CHECK_OK, "", NULL, NULL,
			    "ib_uverbs loaded");
	k |= rdp_doctor_add(r, RDP_GROUP_PORTS, "port.state", RDP_CHECK_FAIL, "mlx5_3 port 1",
			    "NCCL: \"NET/IB : No device found.\"", "ip link set ... up",
			    "state %s (physical %s)", "DOWN", "Disabled");
	k |= rdp_doctor_add(r, RDP_GROUP_PORTS, "port.rate", RDP_CHECK_WARN, "mlx5_4 port 1", "",
			    "reseat the cable", "rate %d Gb/s", 200);
	k |= rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.config", RDP_CHECK_SKIP, "",
			    "not shown", "not shown", "no config read");
	return k;
}

static void test_add_order(void)
{
	struct rdp_doctor_report r = {};

	EXPECT_EQ(sample(&r), 0);
	EXPECT_EQ(r.n, 5);
	EXPECT_STREQ(r.v[2].finding, "state DOWN (physical Disabled)");
	EXPECT_STREQ(r.v[0].symptom, "");
	EXPECT_STREQ(r.v[0].fix, "");
	rdp_doctor_order(&r);
	EXPECT_STREQ(r.v[0].id, "stack.uverbs");
	EXPECT_STREQ(r.v[1].id, "plugin.config");
	EXPECT_STREQ(r.v[2].id, "port.state"); /* fail first within the group */
	EXPECT_EQ(r.v[2].status, RDP_CHECK_FAIL);
	EXPECT_STREQ(r.v[3].id, "port.rate");
	EXPECT_STREQ(r.v[4].subject, "mlx5_0 port 1");
	EXPECT_EQ(rdp_doctor_count(&r, RDP_CHECK_OK), 2);
	EXPECT_EQ(rdp_doctor_count(&r, RDP_CHECK_FAIL), 1);
	EXPECT_EQ(rdp_doctor_exit_status(&r), 1);
	rdp_doctor_report_done(&r);
	EXPECT_EQ(r.n, 0);
	EXPECT_EQ(rdp_doctor_exit_status(&r), 0);
	EXPECT_STREQ(rdp_check_status_name(_RDP_CHECK_STATUS_MAX), "?");
	EXPECT_STREQ(rdp_check_group_name(_RDP_GROUP_MAX), "?");
	EXPECT_STREQ(rdp_check_group_name(RDP_GROUP_CONGESTION), "congestion");
}

static void test_bounds(void)
{
	struct rdp_doctor_report r = {};
	char *big = malloc(3 * RDP_DOCTOR_TEXT_MAX);
	int k = 0;

	memset(big, 'x', 3 * RDP_DOCTOR_TEXT_MAX - 1);
	big[3 * RDP_DOCTOR_TEXT_MAX - 1] = '\0';
	EXPECT_EQ(rdp_doctor_add(&r, RDP_GROUP_STACK, "a\tb\nc\x7f", RDP_CHECK_WARN, "s\x1b[31m",
				 big, big, "%s", big),
		  0);
	EXPECT_STREQ(r.v[0].id, "a?b?c?");
	EXPECT_STREQ(r.v[0].subject, "s?[31m");
	EXPECT_EQ(strlen(r.v[0].symptom), RDP_DOCTOR_TEXT_MAX - 1);
	EXPECT_EQ(strlen(r.v[0].fix), RDP_DOCTOR_TEXT_MAX - 1);
	EXPECT_EQ(strlen(r.v[0].finding), RDP_DOCTOR_TEXT_MAX - 1);
	EXPECT_TRUE(strcmp(r.v[0].fix + RDP_DOCTOR_TEXT_MAX - 4, "...") == 0);
	/* UTF-8 is kept as it is */
	EXPECT_EQ(rdp_doctor_add(&r, RDP_GROUP_STACK, "x", RDP_CHECK_OK, "", NULL, NULL,
				 "\xc2\xb5s"),
		  0);
	EXPECT_STREQ(r.v[1].finding, "\xc2\xb5s");
	rdp_doctor_report_done(&r);
	free(big);

	for (size_t i = 0; i < RDP_DOCTOR_MAX_CHECKS && k == 0; i++)
		k = rdp_doctor_add(&r, RDP_GROUP_POD, "pod.x", RDP_CHECK_OK, "", NULL, NULL, "%zu",
				   i);
	EXPECT_EQ(k, 0);
	EXPECT_EQ(rdp_doctor_add(&r, RDP_GROUP_POD, "pod.x", RDP_CHECK_OK, "", NULL, NULL, "one "
				 "more"),
		  -E2BIG);
	EXPECT_EQ(r.n, RDP_DOCTOR_MAX_CHECKS);
	rdp_doctor_report_done(&r);
}

static const char expected_text[] =
	"stack:\n"
	"  ok   stack.uverbs  ib_uverbs loaded\n"
	"\n"
	"plugin:\n"
	"  skip plugin.config no config read\n"
	"\n"
	"ports:\n"
	"  fail port.state    mlx5_3 port 1: state DOWN (physical Disabled) | symptom: NCCL: "
	"\"NET/IB : No device found.\" | fix: ip link set ... up\n"
	"  warn port.rate     mlx5_4 port 1: rate 200 Gb/s | fix: reseat the cable\n"
	"  ok   port.state    mlx5_0 port 1: ACTIVE, LinkUp\n"
	"\n"
	"doctor: 5 checks: 1 fail, 1 warn, 1 skip, 2 ok\n";

static const char expected_json[] =
	"{\n"
	"  \"checks\": [\n"
	"    {\n"
	"      \"id\": \"stack.uverbs\",\n"
	"      \"group\": \"stack\",\n"
	"      \"status\": \"ok\",\n"
	"      \"subject\": \"\",\n"
	"      \"finding\": \"ib_uverbs loaded\",\n"
	"      \"symptom\": \"\",\n"
	"      \"fix\": \"\"\n"
	"    },\n"
	"    {\n"
	"      \"id\": \"plugin.config\",\n"
	"      \"group\": \"plugin\",\n"
	"      \"status\": \"skip\",\n"
	"      \"subject\": \"\",\n"
	"      \"finding\": \"no config read\",\n"
	"      \"symptom\": \"not shown\",\n"
	"      \"fix\": \"not shown\"\n"
	"    },\n"
	"    {\n"
	"      \"id\": \"port.state\",\n"
	"      \"group\": \"ports\",\n"
	"      \"status\": \"fail\",\n"
	"      \"subject\": \"mlx5_3 port 1\",\n"
	"      \"finding\": \"state DOWN (physical Disabled)\",\n"
	"      \"symptom\": \"NCCL: \\\"NET/IB : No device found.\\\"\",\n"
	"      \"fix\": \"ip link set ... up\"\n"
	"    },\n"
	"    {\n"
	"      \"id\": \"port.rate\",\n"
	"      \"group\": \"ports\",\n"
	"      \"status\": \"warn\",\n"
	"      \"subject\": \"mlx5_4 port 1\",\n"
	"      \"finding\": \"rate 200 Gb/s\",\n"
	"      \"symptom\": \"\",\n"
	"      \"fix\": \"reseat the cable\"\n"
	"    },\n"
	"    {\n"
	"      \"id\": \"port.state\",\n"
	"      \"group\": \"ports\",\n"
	"      \"status\": \"ok\",\n"
	"      \"subject\": \"mlx5_0 port 1\",\n"
	"      \"finding\": \"ACTIVE, LinkUp\",\n"
	"      \"symptom\": \"\",\n"
	"      \"fix\": \"\"\n"
	"    }\n"
	"  ],\n"
	"  \"summary\": {\n"
	"    \"checks\": 5,\n"
	"    \"fail\": 1,\n"
	"    \"warn\": 1,\n"
	"    \"skip\": 1,\n"
	"    \"ok\": 2\n"
	"  }\n"
	"}\n";

static void test_render(void)
{
	struct rdp_doctor_report r = {};
	char *s;

	s = render(&r, false);
	EXPECT_STREQ(s, "doctor: 0 checks: 0 fail, 0 warn, 0 skip, 0 ok\n");
	free(s);
	s = render(&r, true);
	EXPECT_STREQ(s, "{\n  \"checks\": [],\n  \"summary\": {\n    \"checks\": 0,\n    "
			"\"fail\": 0,\n    \"warn\": 0,\n    \"skip\": 0,\n    \"ok\": 0\n  }\n}\n");
	free(s);
	EXPECT_EQ(sample(&r), 0);
	rdp_doctor_order(&r);
	s = render(&r, false);
	EXPECT_STREQ(s, expected_text);
	free(s);
	s = render(&r, true);
	EXPECT_STREQ(s, expected_json);
	free(s);
	rdp_doctor_report_done(&r);

	EXPECT_EQ(rdp_doctor_add(&r, RDP_GROUP_POD, "pod.shm", RDP_CHECK_OK, "", NULL, NULL, "x"),
		  0);
	s = render(&r, false);
	EXPECT_STREQ(s, "pod:\n  ok   pod.shm x\n\ndoctor: 1 check: 0 fail, 0 warn, 0 skip, 1 ok\n");
	free(s);
	rdp_doctor_report_done(&r);
}

/* Every allocation of adding and rendering fails once in turn: an error, never a crash. */
static void test_failmalloc(void)
{
	unsigned long n;

	for (n = 1;; n++) {
		struct rdp_doctor_report r = {};
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		int k;

		rdp_alloc_fail_at(n);
		k = sample(&r);
		if (k == 0)
			rdp_doctor_order(&r);
		rdp_alloc_fail_at(0);
		rdp_doctor_report_done(&r);
		fclose(f);
		free(buf);
		if (k == 0)
			break;
		EXPECT_TRUE(k < 0);
	}
	EXPECT_TRUE(n > 5);
}

/* ---- the groups on fixture nodes ---- */

static const char *fixtures;

struct node {
	int sys, dev;
	char sysfs[512], devroot[512];
	struct rdp_host *h;
	struct rdp_config *c;
	struct rdp_pools *p;
	struct rdp_diags d;
	struct rdp_doctor_ctx ctx;
	struct rdp_doctor_report r;
};

static int node_open(struct node *n, const char *dir, const char *config_text)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->sysfs, sizeof(n->sysfs), "%s/sys", dir);
	snprintf(n->devroot, sizeof(n->devroot), "%s/dev", dir);
	if (rdp_sysfs_open_roots(n->sysfs, n->devroot, &n->sys, &n->dev) < 0)
		return -1;
	if (rdp_discover_at(n->sys, n->dev, &n->h) < 0)
		return -1;
	if (config_text) {
		if (rdp_config_parse(config_text, strlen(config_text), "c.json", &n->c, &n->d) == 0 &&
		    rdp_pools_build(n->c, n->h, &n->p, &n->d) < 0)
			return -1;
	}
	n->ctx = (struct rdp_doctor_ctx){
		.sys_fd = n->sys, .dev_fd = n->dev, .proc_fd = -1, .sysfs_root = n->sysfs,
		.dev_root = n->devroot, .host = n->h, .config = n->c,
		.config_path = config_text ? "c.json" : NULL,
		.config_diags = config_text ? &n->d : NULL, .pools = n->p,
	};
	return 0;
}

static void node_close(struct node *n)
{
	rdp_doctor_report_done(&n->r);
	rdp_pools_free(n->p);
	rdp_config_free(n->c);
	rdp_diags_done(&n->d);
	rdp_host_free(n->h);
	if (n->sys >= 0)
		close(n->sys);
	if (n->dev >= 0)
		close(n->dev);
}

/* The status of the first result of id (and subject, when not NULL); -1 when none. */
static int status_of(const struct rdp_doctor_report *r, const char *id, const char *subject)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->v[i].id, id) == 0 &&
		    (!subject || strncmp(r->v[i].subject, subject, strlen(subject)) == 0))
			return (int)r->v[i].status;
	return -1;
}

static const struct rdp_check *find(const struct rdp_doctor_report *r, const char *id,
				    enum rdp_check_status s)
{
	for (size_t i = 0; i < r->n; i++)
		if (strcmp(r->v[i].id, id) == 0 && r->v[i].status == s)
			return &r->v[i];
	return NULL;
}

static const char shared_cfg[] =
	"{\"configList\": [{\"resourceName\": \"hca\", \"rdmaHcaMax\": 100, "
	"\"selectors\": {\"vendors\": [\"15b3\"]}}]}";
static const char exclusive_cfg[] =
	"{\"configList\": [{\"resourceName\": \"nic\", \"mode\": \"exclusive\", "
	"\"selectors\": {\"vendors\": [\"15b3\"]}}]}";

static void test_dgx(void)
{
	char dir[512];
	struct node n;

	snprintf(dir, sizeof(dir), "%s/dgx-h100", fixtures);
	if (node_open(&n, dir, shared_cfg) < 0) {
		EXPECT_TRUE(!"dgx-h100 opens");
		node_close(&n);
		return;
	}
	EXPECT_EQ(rdp_doctor_stack(&n.ctx, &n.r), 0);
	EXPECT_EQ(rdp_doctor_plugin(&n.ctx, &n.r), 0);
	EXPECT_EQ(rdp_doctor_count(&n.r, RDP_CHECK_FAIL), 0);
	EXPECT_EQ(rdp_doctor_count(&n.r, RDP_CHECK_WARN), 0);
	EXPECT_EQ(status_of(&n.r, "stack.uverbs", NULL), RDP_CHECK_OK);
	EXPECT_EQ(status_of(&n.r, "stack.rdma_ucm", NULL), RDP_CHECK_OK);
	EXPECT_EQ(status_of(&n.r, "stack.driver", "mlx5_0 "), RDP_CHECK_OK);
	EXPECT_EQ(status_of(&n.r, "stack.netns", NULL), RDP_CHECK_OK);
	EXPECT_EQ(status_of(&n.r, "plugin.config", NULL), RDP_CHECK_OK);
	EXPECT_EQ(status_of(&n.r, "plugin.sockets", NULL), RDP_CHECK_SKIP); /* no kubelet root */
	EXPECT_EQ(status_of(&n.r, "plugin.units", "rdma/hca"), RDP_CHECK_OK);
	EXPECT_EQ(status_of(&n.r, "plugin.unusable", NULL), RDP_CHECK_OK);
	{
		size_t drivers = 0;

		for (size_t i = 0; i < n.r.n; i++)
			drivers += strcmp(n.r.v[i].id, "stack.driver") == 0;
		EXPECT_EQ(drivers, 12); /* one per HCA */
	}
	node_close(&n);
}

static void test_exclusive_netns(void)
{
	char dir[512];
	struct node n;
	const struct rdp_check *c;

	snprintf(dir, sizeof(dir), "%s/exclusive", fixtures);
	if (node_open(&n, dir, shared_cfg) == 0) {
		EXPECT_EQ(rdp_doctor_stack(&n.ctx, &n.r), 0);
		c = find(&n.r, "stack.netns", RDP_CHECK_WARN);
		EXPECT_TRUE(c != NULL);
		if (c) {
			EXPECT_CONTAINS(c->finding, "rdma/hca is a shared resource");
			EXPECT_CONTAINS(c->fix, "rdma system set netns shared");
		}
	}
	node_close(&n);
	if (node_open(&n, dir, exclusive_cfg) == 0) {
		EXPECT_EQ(rdp_doctor_stack(&n.ctx, &n.r), 0);
		EXPECT_EQ(status_of(&n.r, "stack.netns", NULL), RDP_CHECK_OK);
	}
	node_close(&n);
}

static void test_no_rdma(void)
{
	char dir[512];
	struct node n;

	snprintf(dir, sizeof(dir), "%s/no-rdma", fixtures);
	if (node_open(&n, dir, NULL) == 0) {
		EXPECT_EQ(rdp_doctor_stack(&n.ctx, &n.r), 0);
		EXPECT_EQ(rdp_doctor_plugin(&n.ctx, &n.r), 0);
		EXPECT_EQ(status_of(&n.r, "stack.uverbs", NULL), RDP_CHECK_FAIL);
		EXPECT_EQ(status_of(&n.r, "stack.rdma_ucm", NULL), RDP_CHECK_FAIL);
		EXPECT_EQ(status_of(&n.r, "stack.driver", NULL), RDP_CHECK_SKIP);
		EXPECT_EQ(status_of(&n.r, "stack.netns", NULL), RDP_CHECK_SKIP);
		EXPECT_EQ(status_of(&n.r, "plugin.config", NULL), RDP_CHECK_SKIP);
		EXPECT_EQ(status_of(&n.r, "plugin.units", NULL), RDP_CHECK_SKIP);
	}
	node_close(&n);
}

static void test_plugin_config(void)
{
	char dir[512];
	struct node n;
	const struct rdp_check *c;

	snprintf(dir, sizeof(dir), "%s/seed000", fixtures);
	if (node_open(&n, dir, "{\"configList\": [{\"resourceName\": \"a-b\"}]}") == 0) {
		EXPECT_TRUE(n.c == NULL);
		EXPECT_EQ(rdp_doctor_plugin(&n.ctx, &n.r), 0);
		c = find(&n.r, "plugin.config", RDP_CHECK_FAIL);
		EXPECT_TRUE(c != NULL);
		if (c) {
			EXPECT_CONTAINS(c->finding, "invalid");
			EXPECT_CONTAINS(c->fix, "rdma-dp check-config -c c.json");
		}
		EXPECT_EQ(status_of(&n.r, "plugin.units", NULL), RDP_CHECK_SKIP);
	}
	node_close(&n);
	/* a resource that selects nothing here: warn, not fail */
	if (node_open(&n, dir,
		      "{\"configList\": [{\"resourceName\": \"x\", \"rdmaHcaMax\": 10, \"selectors\": "
		      "{\"vendors\": [\"8086\"]}}]}") == 0) {
		EXPECT_EQ(rdp_doctor_plugin(&n.ctx, &n.r), 0);
		EXPECT_EQ(status_of(&n.r, "plugin.units", "rdma/x"), RDP_CHECK_WARN);
		EXPECT_EQ(rdp_doctor_count(&n.r, RDP_CHECK_FAIL), 0);
	}
	node_close(&n);
}

/* The groups on every default node, under allocation failures: an error, never a crash. */
static void test_groups_failmalloc(void)
{
	char dir[512];
	struct node n;
	unsigned long i;

	snprintf(dir, sizeof(dir), "%s/broken", fixtures);
	if (node_open(&n, dir, shared_cfg) < 0) {
		node_close(&n);
		EXPECT_TRUE(!"broken opens");
		return;
	}
	for (i = 1;; i++) {
		int k;

		rdp_alloc_fail_at(i);
		k = rdp_doctor_stack(&n.ctx, &n.r);
		if (k == 0)
			k = rdp_doctor_plugin(&n.ctx, &n.r);
		rdp_alloc_fail_at(0);
		rdp_doctor_report_done(&n.r);
		if (k == 0)
			break;
		EXPECT_EQ(k, -ENOMEM);
	}
	EXPECT_TRUE(i > 10);
	node_close(&n);
}

int main(void)
{
	test_add_order();
	test_bounds();
	test_render();
	test_failmalloc();
	fixtures = getenv("RDP_FIXTURES");
	if (fixtures) {
		test_dgx();
		test_exclusive_netns();
		test_no_rdma();
		test_plugin_config();
		test_groups_failmalloc();
	} else {
		printf("test-doctor: RDP_FIXTURES unset, fixture tests skipped\n");
	}
	return test_summary("test-doctor");
}
