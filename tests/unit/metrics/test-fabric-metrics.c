/* SPDX-License-Identifier: MIT */
/*
 * fabric-metrics.[ch]: targets from a fixture node's host model, collection on the fixture
 * trees (names, x4, renamed devices, saturation, unreadable and unknown files, families
 * contiguous, order), bounds on a temp tree, failmalloc, and the CPU cost on dgx-h100.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "alloc.h"
#include "discovery.h"
#include "fabric-metrics.h"
#include "macro.h"
#include "metrics-text.h"
#include "sysfs.h"
#include "test.h"

static struct rdp_host *discover(const char *fixtures, const char *node, char *sys, size_t size)
{
	char dev[PATH_MAX];
	int sfd = -1, dfd = -1;
	struct rdp_host *h = NULL;

	snprintf(sys, size, "%s/%s/sys", fixtures, node);
	snprintf(dev, sizeof(dev), "%s/%s/dev", fixtures, node);
	if (rdp_sysfs_open_roots(sys, dev, &sfd, &dfd) < 0)
		return NULL;
	if (rdp_discover_at(sfd, dfd, &h) < 0)
		h = NULL;
	close(sfd);
	close(dfd);
	return h;
}

/* The whole fabric text of a node, or NULL. */
static char *collect(const char *fixtures, const char *node, struct rdp_fabric_stats *st)
{
	char sys[PATH_MAX];
	struct rdp_host *h = discover(fixtures, node, sys, sizeof(sys));
	struct rdp_fabric_targets *t = NULL;
	struct rdp_mtext m;
	char *s = NULL;

	if (!h)
		return NULL;
	if (rdp_fabric_targets_from_host(h, sys, &t) == 0) {
		rdp_mtext_init(&m, 0);
		if (rdp_fabric_collect(t, &m, st) == 0)
			s = rdp_mtext_steal(&m, NULL);
		rdp_mtext_done(&m);
	}
	rdp_fabric_targets_free(t);
	rdp_host_free(h);
	return s;
}

/* The value of the sample line that starts with prefix ("name{labels} "), or -1. */
static long long sample(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);

	for (const char *p = text; p && *p;) {
		if (strncmp(p, prefix, n) == 0)
			return strtoll(p + n, NULL, 10);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -1;
}

static long long file_value(const char *fixtures, const char *rel)
{
	char path[PATH_MAX], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", fixtures, rel);
	f = fopen(path, "r");
	if (!f)
		return -2;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return strtoll(buf, NULL, 10);
}

/* Every family's samples are contiguous and its TYPE comes once, before them. */
static void check_contiguous(const char *text)
{
	char seen[256][128];
	size_t n_seen = 0;
	char cur[128] = "";
	int ok = 1;

	for (const char *p = text; *p;) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char name[128];
		size_t k;

		if (strncmp(p, "# TYPE ", 7) == 0) {
			k = strcspn(p + 7, " ");
			snprintf(name, sizeof(name), "%.*s", (int)k, p + 7);
			for (size_t i = 0; i < n_seen; i++)
				ok &= strcmp(seen[i], name) != 0;
			if (n_seen < 256)
				snprintf(seen[n_seen++], sizeof(seen[0]), "%s", name);
			snprintf(cur, sizeof(cur), "%s", name);
		} else if (*p != '#') {
			k = strcspn(p, "{ ");
			ok &= k == strlen(cur) && strncmp(p, cur, k) == 0;
		}
		p += len + (e ? 1 : 0);
	}
	EXPECT_TRUE(ok);
}

static void test_dgx(const char *fx)
{
	struct rdp_fabric_stats st;
	char *s = collect(fx, "dgx-h100", &st);
	long long raw;

	EXPECT_TRUE(s != NULL);
	if (!s)
		return;
	EXPECT_EQ(st.read_errors, 0);
	EXPECT_TRUE(st.files_read > 12 * 40);
	raw = file_value(fx,
			 "dgx-h100/sys/class/infiniband/mlx5_3/ports/1/counters/port_xmit_data");
	EXPECT_TRUE(raw > 0);
	EXPECT_EQ(
		sample(s,
		       "rdma_dp_port_data_transmitted_bytes_total{device=\"mlx5_3\",port=\"1\"} "),
		raw * 4);
	raw = file_value(fx, "dgx-h100/sys/class/infiniband/mlx5_0/ports/1/counters/port_rcv_data");
	EXPECT_EQ(
		sample(s, "rdma_dp_port_data_received_bytes_total{device=\"mlx5_0\",port=\"1\"} "),
		raw * 4);
	EXPECT_EQ(sample(s, "rdma_dp_rate_bytes_per_second{device=\"mlx5_0\",port=\"1\"} "),
		  50000000000LL);
	EXPECT_EQ(sample(s, "rdma_dp_rate_bytes_per_second{device=\"mlx5_1\",port=\"1\"} "),
		  25000000000LL);
	EXPECT_EQ(sample(s, "rdma_dp_state_id{device=\"mlx5_11\",port=\"1\"} "), 4);
	EXPECT_EQ(sample(s, "rdma_dp_physical_state_id{device=\"mlx5_11\",port=\"1\"} "), 5);
	EXPECT_EQ(sample(s,
			 "rdma_dp_port_info{device=\"mlx5_0\",port=\"1\",link_layer=\"InfiniBand\","
			 "netdev=\"ibp24s0\",pci_address=\"0000:18:00.0\",numa_node=\"0\"} "),
		  1);
	EXPECT_EQ(sample(s, "rdma_dp_info{device=\"mlx5_0\",board_id=\"NVD0000000033\","
			    "firmware_version=\"28.39.1002\",hca_type=\"MT4129\"} "),
		  1);
	EXPECT_EQ(sample(s, "rdma_dp_rx_write_requests_total{device=\"mlx5_0\",port=\"1\"} "),
		  9834512);
	EXPECT_EQ(sample(s, "rdma_dp_req_transport_retries_exceeded_errors_total{device=\"mlx5_9\","
			    "port=\"1\"} "),
		  0);
	EXPECT_EQ(sample(s, "rdma_dp_np_cnp_packets_sent_total{device=\"mlx5_1\",port=\"1\"} "), 0);
	EXPECT_EQ(sample(s, "rdma_dp_pma_saturated{device=\"mlx5_0\",port=\"1\","
			    "counter=\"symbol_error\"} "),
		  0);
	EXPECT_CONTAINS(s, "rdma_dp_lifespan_seconds{device=\"mlx5_0\",port=\"1\"} 0.01\n");
	/* order: device (model order: mlx5_2 before mlx5_10), then port */
	EXPECT_TRUE(strstr(s, "rdma_dp_state_id{device=\"mlx5_2\"") <
		    strstr(s, "rdma_dp_state_id{device=\"mlx5_10\""));
	check_contiguous(s);
	rdp_free(s);
}

static void test_renamed(const char *fx)
{
	struct rdp_fabric_stats st;
	char *s = collect(fx, "renamed", &st);

	EXPECT_TRUE(s != NULL);
	if (!s)
		return;
	/* hw counters whatever the device's name */
	EXPECT_EQ(sample(s, "rdma_dp_rx_write_requests_total{device=\"ibp24s0\",port=\"1\"} "),
		  9834512);
	EXPECT_EQ(
		sample(s, "rdma_dp_np_cnp_packets_sent_total{device=\"rocep41s0f0\",port=\"1\"} "),
		0);
	/* saturated 16-bit counter */
	EXPECT_EQ(sample(s, "rdma_dp_symbol_error_total{device=\"ibp24s0\",port=\"1\"} "), 65535);
	EXPECT_EQ(sample(s, "rdma_dp_pma_saturated{device=\"ibp24s0\",port=\"1\","
			    "counter=\"symbol_error\"} "),
		  1);
	EXPECT_EQ(sample(s, "rdma_dp_pma_saturated{device=\"rocep41s0f0\",port=\"1\","
			    "counter=\"symbol_error\"} "),
		  0);
	/* N/A (no PMA): no sample, counted, said */
	EXPECT_TRUE(!strstr(
		s, "rdma_dp_port_receive_switch_relay_errors_total{device=\"rocep41s0f0\""));
	EXPECT_TRUE(
		strstr(s, "rdma_dp_port_receive_switch_relay_errors_total{device=\"ibp24s0\"") !=
		NULL);
	EXPECT_EQ(st.read_errors, 1);
	EXPECT_EQ(st.n_errors, 1);
	EXPECT_STREQ(st.errors[0], "rocep41s0f0/1: counters/port_rcv_switch_relay_errors: not a "
				   "decimal number");
	check_contiguous(s);
	rdp_free(s);
}

static void test_other_drivers(const char *fx)
{
	struct rdp_fabric_stats st;
	char *s = collect(fx, "irdma-bnxt", &st);

	EXPECT_TRUE(s != NULL);
	if (!s)
		return;
	EXPECT_EQ(st.read_errors, 0);
	/* irdma's own names: generic; no counters/ so no PMA sample for it */
	EXPECT_EQ(sample(s, "rdma_dp_hw_stat_total{device=\"irdma0\",port=\"1\","
			    "counter=\"cnpHandled\"} "),
		  12);
	EXPECT_TRUE(!strstr(s, "rdma_dp_port_data_transmitted_bytes_total{device=\"irdma0\""));
	EXPECT_TRUE(!strstr(s, "rdma_dp_port_data_transmitted_bytes_total{device=\"bnxt_re0\""));
	EXPECT_EQ(sample(s, "rdma_dp_state_id{device=\"bnxt_re0\",port=\"1\"} "), 4);
	/* generic ones sorted by name within a port */
	EXPECT_TRUE(strstr(s, "counter=\"RxECNMrkd\"") < strstr(s, "counter=\"cnpHandled\""));
	check_contiguous(s);
	rdp_free(s);

	/* mlx4: two ports, netdev "" (the model's netdevs are per device) */
	s = collect(fx, "mlx4", &st);
	EXPECT_TRUE(s != NULL);
	EXPECT_CONTAINS(s, "rdma_dp_port_info{device=\"mlx4_0\",port=\"2\",link_layer=\"Ethernet\","
			   "netdev=\"\",pci_address=\"0000:04:00.0\",numa_node=\"0\"} 1\n");
	EXPECT_EQ(sample(s, "rdma_dp_rate_bytes_per_second{device=\"mlx4_0\",port=\"1\"} "),
		  7000000000LL);
	rdp_free(s);

	/* rxe: virtual, no PCI address, 2.5 Gb/s */
	s = collect(fx, "rxe", &st);
	EXPECT_TRUE(s != NULL);
	EXPECT_CONTAINS(s, "netdev=\"eth0\",pci_address=\"\"");
	EXPECT_EQ(sample(s, "rdma_dp_rate_bytes_per_second{device=\"rxe0\",port=\"1\"} "),
		  312500000);
	rdp_free(s);

	/* broken: garbage state counted, no sample; nothing else lost */
	s = collect(fx, "broken", &st);
	EXPECT_TRUE(s != NULL);
	EXPECT_TRUE(st.read_errors >= 1);
	EXPECT_TRUE(!strstr(s ? s : "", "rdma_dp_state_id{device=\"mlx5_3\""));
	EXPECT_EQ(sample(s, "rdma_dp_state_id{device=\"mlx5_0\",port=\"1\"} "), 4);
	rdp_free(s);
}

/* ---- bounds on a temp tree ---- */

static char tmp[256];

static void put(const char *rel, const char *content)
{
	char path[PATH_MAX + 512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(2);
	}
	fputs(content, f);
	fclose(f);
}

static void mk(const char *rel)
{
	char path[PATH_MAX + 512];

	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	mkdir(path, 0755);
}

static void test_bounds(void)
{
	struct rdp_fabric_targets t = {};
	struct rdp_fabric_device d = {.name = "mlx5_0"};
	struct rdp_fabric_port p = {.device = 0, .num = 1, .num_str = "1"};
	struct rdp_fabric_stats st;
	struct rdp_mtext m;
	char name[64], big[200];
	int r;

	snprintf(tmp, sizeof(tmp), "/tmp/test-fabric-metrics.XXXXXX");
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		exit(2);
	}
	mk("class");
	mk("class/infiniband");
	mk("class/infiniband/mlx5_0");
	mk("class/infiniband/mlx5_0/ports");
	mk("class/infiniband/mlx5_0/ports/1");
	mk("class/infiniband/mlx5_0/ports/1/counters");
	mk("class/infiniband/mlx5_0/ports/1/hw_counters");
	mk("class/infiniband/mlx5_0/ports/1/hw_counters/subdir");
	put("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
	put("class/infiniband/mlx5_0/ports/1/phys_state", "5: LinkUp\n");
	put("class/infiniband/mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)\n");
	/* the largest u64 octets/4: x4 does not fit, printed as a float */
	put("class/infiniband/mlx5_0/ports/1/counters/port_xmit_data", "18446744073709551615\n");
	put("class/infiniband/mlx5_0/ports/1/counters/port_rcv_data", "18446744073709551616\n");
	put("class/infiniband/mlx5_0/ports/1/counters/link_downed", "255\n");
	put("class/infiniband/mlx5_0/ports/1/counters/excessive_buffer_overrun_errors", "14\n");
	put("class/infiniband/mlx5_0/ports/1/counters/weird \"name\"", "5\n");
	memset(big, '1', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	put("class/infiniband/mlx5_0/ports/1/counters/symbol_error", big);
	put("class/infiniband/mlx5_0/ports/1/counters/VL15_dropped", "");
	put("class/infiniband/mlx5_0/ports/1/hw_counters/lifespan", "10\n");
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "class/infiniband/mlx5_0/ports/1/hw_counters/c%03d",
			 i);
		put(name, "1\n");
	}

	t.sysfs_root = tmp;
	t.devices = &d;
	t.n_devices = 1;
	t.ports = &p;
	t.n_ports = 1;
	rdp_mtext_init(&m, 0);
	r = rdp_fabric_collect(&t, &m, &st);
	EXPECT_EQ(r, 0);
	EXPECT_EQ(st.files_ignored, 300 + 1 - RDP_FABRIC_MAX_FILES); /* + lifespan */
	EXPECT_EQ(st.read_errors, 3); /* 2^64, 199 digits, empty */
	EXPECT_CONTAINS(m.buf, "rdma_dp_port_data_transmitted_bytes_total{device=\"mlx5_0\","
			       "port=\"1\"} 7.378697629483821e+19\n");
	EXPECT_CONTAINS(m.buf, "rdma_dp_pma_saturated{device=\"mlx5_0\",port=\"1\","
			       "counter=\"link_downed\"} 1\n");
	EXPECT_CONTAINS(m.buf, "rdma_dp_pma_saturated{device=\"mlx5_0\",port=\"1\","
			       "counter=\"excessive_buffer_overrun_errors\"} 0\n");
	EXPECT_CONTAINS(m.buf, "rdma_dp_pma_total{device=\"mlx5_0\",port=\"1\","
			       "counter=\"weird \\\"name\\\"\"} 5\n");
	EXPECT_CONTAINS(m.buf, "rdma_dp_rate_bytes_per_second{device=\"mlx5_0\",port=\"1\"} "
			       "12500000000\n");
	EXPECT_TRUE(!strstr(m.buf, "subdir"));
	check_contiguous(m.buf);
	/* an output bound: the error comes back */
	rdp_mtext_done(&m);
	rdp_mtext_init(&m, 512);
	EXPECT_EQ(rdp_fabric_collect(&t, &m, NULL), -E2BIG);
	rdp_mtext_done(&m);
	/* a port that went away: counted, nothing else */
	p.num = 2;
	rdp_mtext_init(&m, 0);
	EXPECT_EQ(rdp_fabric_collect(&t, &m, &st), 0);
	EXPECT_EQ(st.read_errors, 1);
	EXPECT_CONTAINS(st.errors[0], "mlx5_0/1: No such file");
	rdp_mtext_done(&m);
	/* no root */
	{
		static char none[] = "/nonexistent/sys";

		t.sysfs_root = none;
	}
	rdp_mtext_init(&m, 0);
	EXPECT_EQ(rdp_fabric_collect(&t, &m, &st), -ENOENT);
	rdp_mtext_done(&m);

	char cmd[PATH_MAX + 16];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
}

static void test_failmalloc(const char *fx)
{
	char sys[PATH_MAX];
	struct rdp_host *h = discover(fx, "renamed", sys, sizeof(sys));
	unsigned long total;

	EXPECT_TRUE(h != NULL);
	if (!h)
		return;
	for (unsigned long i = 0;; i++) {
		struct rdp_fabric_targets *t = NULL;
		struct rdp_mtext m;
		int r;

		rdp_alloc_fail_at(i);
		r = rdp_fabric_targets_from_host(h, sys, &t);
		if (r == 0) {
			rdp_mtext_init(&m, 0);
			r = rdp_fabric_collect(t, &m, NULL);
			rdp_mtext_done(&m);
		}
		total = rdp_alloc_count();
		rdp_alloc_fail_at(0);
		rdp_fabric_targets_free(t);
		if (i == 0) {
			EXPECT_EQ(r, 0);
		} else {
			EXPECT_TRUE(r == -ENOMEM || (r == 0 && i > total));
			if (r == 0)
				break;
		}
		if (i > 1000)
			break;
	}
	rdp_host_free(h);
}

/* CPU time of one collection (targets built once, as the daemon does between rescans). */
static void measure(const char *fx, const char *node, int rounds)
{
	char sys[PATH_MAX];
	struct rdp_host *h = discover(fx, node, sys, sizeof(sys));
	struct rdp_fabric_targets *t = NULL;
	struct timespec a, b;
	struct rdp_mtext m;
	size_t bytes = 0;

	if (!h || rdp_fabric_targets_from_host(h, sys, &t) < 0) {
		rdp_host_free(h);
		return;
	}
	rdp_mtext_init(&m, 0);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
	for (int i = 0; i < rounds; i++) {
		rdp_mtext_reset(&m);
		EXPECT_EQ(rdp_fabric_collect(t, &m, NULL), 0);
		bytes = m.len;
	}
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
	printf("test-fabric-metrics: %s: %zu ports, %zu bytes, %.3f ms CPU per collection "
	       "(mean of %d)\n",
	       node, t->n_ports, bytes,
	       ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6) /
		       rounds,
	       rounds);
	rdp_mtext_done(&m);
	rdp_fabric_targets_free(t);
	rdp_host_free(h);
}

int main(void)
{
	const char *fx = test_fixtures_dir("test-fabric-metrics");

	test_bounds();
	if (fx) {
		test_dgx(fx);
		test_renamed(fx);
		test_other_drivers(fx);
		test_failmalloc(fx);
		measure(fx, "dgx-h100", 50);
		measure(fx, "two-socket-vfs", 20);
	}
	return test_summary("test-fabric-metrics");
}
