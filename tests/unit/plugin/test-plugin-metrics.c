/* SPDX-License-Identifier: MIT */
/* The plugin's own metrics: rescan causes, the histogram, per-resource families, bounds. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "http-server.h"
#include "metrics-text.h"
#include "plugin-metrics.h"
#include "test.h"

static void test_causes(void)
{
	static const struct {
		const char *why;
		enum rdp_rescan_cause cause;
	} cases[] = {
		{"start", RDP_RESCAN_START},
		{"periodic", RDP_RESCAN_PERIODIC},
		{"config-file", RDP_RESCAN_CONFIG},
		{"sighup", RDP_RESCAN_CONFIG},
		{"allocate-check", RDP_RESCAN_ALLOCATE_CHECK},
		{"dev-infiniband-created", RDP_RESCAN_HOST},
		{"dev:create uverbs3", RDP_RESCAN_HOST},
		{"uevent:infiniband add mlx5_0", RDP_RESCAN_HOST},
		{"link:ens1f0 carrier 1", RDP_RESCAN_HOST},
		{"inotify-overflow", RDP_RESCAN_HOST},
		{"rtnl-overflow", RDP_RESCAN_HOST},
		{"uevent-overflow", RDP_RESCAN_HOST},
		{"", RDP_RESCAN_OTHER},
		{"something new", RDP_RESCAN_OTHER},
		{NULL, RDP_RESCAN_OTHER},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		EXPECT_EQ(rdp_rescan_cause(cases[i].why), cases[i].cause);
	EXPECT_STREQ(rdp_rescan_cause_name(RDP_RESCAN_HOST), "host-change");
	EXPECT_STREQ(rdp_rescan_cause_name(RDP_RESCAN_N_CAUSES), "other");
	EXPECT_STREQ(rdp_reload_result_name(RDP_RELOAD_REJECTED), "rejected");
}

static void test_histogram(void)
{
	struct rdp_daemon_counters c = {0};

	rdp_daemon_count_rescan(&c, "start", 3400);       /* 3.4 ms: le 0.005 */
	rdp_daemon_count_rescan(&c, "periodic", 230);     /* le 0.001 */
	rdp_daemon_count_rescan(&c, "periodic", 9000000); /* 9 s: only +Inf */
	EXPECT_EQ(c.rescan_count, 3);
	EXPECT_EQ(c.rescans[RDP_RESCAN_PERIODIC], 2);
	EXPECT_EQ(c.rescans[RDP_RESCAN_START], 1);
	EXPECT_EQ(c.rescan_bucket[0], 1);
	EXPECT_EQ(c.rescan_bucket[2], 1);
	EXPECT_TRUE(c.rescan_seconds > 9.003 && c.rescan_seconds < 9.004);
}

static char *render(const struct rdp_plugin_metrics *p, size_t max, int *err)
{
	struct rdp_mtext m;
	char *text;

	rdp_mtext_init(&m, max);
	*err = rdp_plugin_metrics_write(&m, p);
	text = *err < 0 ? NULL : rdp_mtext_steal(&m, NULL);
	rdp_mtext_done(&m);
	return text;
}

static void test_write(void)
{
	struct rdp_resource_status res[2] = {
		{.full_name = "rdma/hca_shared_devices_a", .state = RDP_RES_REGISTERED, .units = 1000,
		 .healthy_units = 1000, .serving = true, .n_devices = 2, .n_usable = 2,
		 .counters = {.allocate_calls = 7, .allocate_errors = 1, .registrations = 3,
			      .reregistrations = 2}},
		{.full_name = "rdma/\"odd\"\\name", .state = RDP_RES_ANNOUNCED, .units = 0},
	};
	struct rdp_daemon_counters c = {.kubelet_restarts = 2};
	struct rdp_http_stats hs = {.responses = {0, 0, 5, 0, 2, 1}, .rejected_full = 4};
	struct rdp_plugin_metrics p = {.version = "1.2.3", .revision = "abc", .res = res,
				       .n_res = 2, .counters = &c, .http = &hs, .lock_held = 1,
				       .scrape_seconds = 0.00125};
	int err;
	char *t;

	c.reloads[RDP_RELOAD_APPLIED] = 4;
	rdp_daemon_count_rescan(&c, "dev:create uverbs0", 1500);
	t = render(&p, 0, &err);
	EXPECT_EQ(err, 0);
	EXPECT_CONTAINS(t, "# TYPE rdma_dp_build_info gauge\n"
			   "rdma_dp_build_info{version=\"1.2.3\",revision=\"abc\"} 1\n");
	EXPECT_CONTAINS(t, "rdma_dp_resource_units{resource=\"rdma/hca_shared_devices_a\"} 1000\n");
	/* label values escaped */
	EXPECT_CONTAINS(t, "rdma_dp_resource_units{resource=\"rdma/\\\"odd\\\"\\\\name\"} 0\n");
	EXPECT_CONTAINS(t, "rdma_dp_resource_registered{resource=\"rdma/hca_shared_devices_a\"} 1\n");
	EXPECT_CONTAINS(t, "rdma_dp_resource_registered{resource=\"rdma/\\\"odd\\\"\\\\name\"} 0\n");
	EXPECT_CONTAINS(t, "rdma_dp_allocate_errors_total{resource=\"rdma/hca_shared_devices_a\"} 1");
	EXPECT_CONTAINS(t, "rdma_dp_reregistrations_total{resource=\"rdma/hca_shared_devices_a\"} 2");
	EXPECT_CONTAINS(t, "rdma_dp_kubelet_restarts_total 2\n");
	EXPECT_CONTAINS(t, "rdma_dp_rescans_total{cause=\"host-change\"} 1\n");
	EXPECT_CONTAINS(t, "rdma_dp_rescans_total{cause=\"periodic\"} 0\n");
	EXPECT_CONTAINS(t, "# TYPE rdma_dp_rescan_duration_seconds histogram\n");
	EXPECT_CONTAINS(t, "rdma_dp_rescan_duration_seconds_bucket{le=\"0.001\"} 0\n"
			   "rdma_dp_rescan_duration_seconds_bucket{le=\"0.0025\"} 1\n");
	EXPECT_CONTAINS(t, "rdma_dp_rescan_duration_seconds_bucket{le=\"+Inf\"} 1\n"
			   "rdma_dp_rescan_duration_seconds_sum 0.0015\n"
			   "rdma_dp_rescan_duration_seconds_count 1\n");
	EXPECT_CONTAINS(t, "rdma_dp_config_reloads_total{result=\"applied\"} 4\n");
	EXPECT_CONTAINS(t, "rdma_dp_http_responses_total{code=\"2xx\"} 5\n");
	EXPECT_CONTAINS(t, "rdma_dp_http_responses_total{code=\"5xx\"} 1\n");
	EXPECT_CONTAINS(t, "rdma_dp_http_connections_rejected_total{reason=\"max-connections\"} 4");
	EXPECT_CONTAINS(t, "rdma_dp_node_lock_held 1\n");
	EXPECT_CONTAINS(t, "rdma_dp_scrape_duration_seconds 0.00125\n");
	rdp_free(t);

	/* No resources, no endpoint stats: the daemon-wide families stand alone. */
	p.n_res = 0;
	p.http = NULL;
	t = render(&p, 0, &err);
	EXPECT_EQ(err, 0);
	EXPECT_TRUE(t && !strstr(t, "rdma_dp_resource_units{"));
	EXPECT_TRUE(t && !strstr(t, "rdma_dp_http_"));
	rdp_free(t);

	/* The bound is an error, never a truncated family. */
	p.n_res = 2;
	t = render(&p, 512, &err);
	EXPECT_EQ(err, -E2BIG);
	EXPECT_TRUE(t == NULL);
}

int main(void)
{
	test_causes();
	test_histogram();
	test_write();
	return test_summary("test-plugin-metrics");
}
