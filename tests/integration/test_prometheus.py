# SPDX-License-Identifier: MIT
"""A real consumer of `rdma-dp serve --metrics-address`: Debian's Prometheus server scrapes the
daemon on the loopback address every second (tests/integration/prom.py), and the tests read
back through Prometheus' query API what it parsed and stored:

  - the target is `up`, and a fabric counter has exactly the value the fixture's sysfs holds
    (port_xmit_data x 4 as rdma_dp_port_data_transmitted_bytes_total);
  - build info, the plugin's per-resource gauges, a saturated 16-bit counter;
  - counters advanced in the fixture's files between scrapes come out of rate() > 0, and a
    counter rewritten once reads back with its new value.

The daemon runs on a writable copy of the dgx-h100 fixture node (8 InfiniBand HCAs in
rdma/compute, 4 RoCE ones in rdma/storage), under the fake kubelet. Skips, saying why, when
Debian's `prometheus` package is not installed.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402
import prom  # noqa: E402


@pytest.fixture(scope="module")
def served(rdma_dp, fixtures_dir):
    """(env, daemon, address, Counters, Prometheus), shared by the module's tests (each
    Prometheus start costs a second or two)."""
    prom.find_prometheus()  # skip before starting anything
    env = K.TestEnv(rdma_dp, fixtures_dir, prefix="rdpm")
    p = None
    try:
        node = env.dir / "dgx-h100"
        prom._fixtures_mod().copy_node(fixtures_dir / "dgx-h100", node)
        counters = prom.Counters(node)
        # A 16-bit PMA counter at its maximum: it stopped counting (metrics-and-doctor.md A1).
        counters.write("mlx5_4", "symbol_error", 2 ** 16 - 1)
        d, addr = prom.start_metrics_daemon(env, node)
        p = prom.Prometheus(target=addr)
        p.wait_target_up()
        yield env, d, addr, counters, p
    finally:
        if p is not None:
            p.stop()
        env.close()


def test_harness_on_prometheus_itself():
    """prom.py on its own (no rdma-dp): start, wait for the target and for scrapes, instant
    and range queries, a refused query's error, a clean stop that removes the TSDB."""
    with prom.Prometheus(target="self", job="self") as p:
        t = p.wait_target_up()
        assert t["labels"]["instance"] == p.target
        p.wait_scrapes(3)
        (labels, v), = p.query('prometheus_build_info{job="self"}')
        assert v == 1.0 and labels["version"].startswith("2."), labels
        (_, pts), = p.query_range('up{job="self"}', seconds=30)
        assert pts and all(v == 1.0 for _, v in pts)
        with pytest.raises(prom.PromError, match="bad_data"):
            p.query("rate(up[")
        d = p.dir
    assert p.proc.returncode == 0, p.log_tail()
    assert not os.path.exists(d)


def one(result, what):
    assert len(result) == 1, "%s: expected one series, got %r" % (what, result)
    return result[0]


def test_endpoint_answers_the_text_format(served):
    """What Prometheus asks for, directly: /metrics in the text format 0.0.4."""
    _, _, addr, _, _ = served
    status, ctype, body = prom.http_get("http://%s/metrics" % addr)
    assert status == 200
    assert ctype.startswith("text/plain") and "version=0.0.4" in ctype, ctype
    assert "# TYPE rdma_dp_port_data_transmitted_bytes_total counter" in body


def test_prometheus_reads_the_fixture_counter(served, fixtures_dir):
    _, _, addr, counters, p = served
    labels, up = one(p.query('up{job="rdma-dp"}'), "up")
    assert up == 1.0 and labels["instance"] == addr
    # the counter as the fixture holds it (PortXmitData counts octets / 4); nothing advances
    # mlx5_0 in this module, so it is the generated dgx-h100's value
    want = 4 * counters.read("mlx5_0", "port_xmit_data")
    assert want == 4 * prom.Counters(fixtures_dir / "dgx-h100").read("mlx5_0", "port_xmit_data")
    assert want > 0
    labels, v = one(p.query('rdma_dp_port_data_transmitted_bytes_total'
                            '{device="mlx5_0",port="1"}'), "port_xmit_data")
    assert v == want, "Prometheus stored %r, the fixture holds %d x 4" % (v, want // 4)
    assert labels["job"] == "rdma-dp" and labels["instance"] == addr
    labels, v = one(p.query('rdma_dp_port_data_received_bytes_total{device="mlx5_0",port="1"}'),
                    "port_rcv_data")
    assert v == 4 * counters.read("mlx5_0", "port_rcv_data")
    # every port of the node has its data counter (12 HCAs, one port each)
    ports = p.query("rdma_dp_port_data_transmitted_bytes_total")
    assert sorted(s["device"] for s, _ in ports) == \
        sorted(prom.IB_DEVICES + prom.ROCE_DEVICES)


def test_build_info_and_plugin_metrics(served):
    _, _, _, _, p = served
    labels, v = one(p.query("rdma_dp_build_info"), "build_info")
    assert v == 1.0 and labels.get("version"), labels
    assert "revision" in labels or v == 1.0
    units = {s["resource"]: v for s, v in p.query("rdma_dp_resource_units")}
    assert units == {r: float(u) for r, (_, u) in prom.RESOURCES.items()}, units
    healthy = {s["resource"]: v for s, v in p.query("rdma_dp_resource_healthy_units")}
    assert healthy == units
    devices = {s["resource"]: v for s, v in p.query("rdma_dp_resource_devices")}
    assert devices == {r: float(len(d)) for r, (d, _) in prom.RESOURCES.items()}, devices


def test_port_info_and_state(served):
    _, _, _, _, p = served
    labels, v = one(p.query('rdma_dp_port_info{device="mlx5_1",port="1"}'), "port_info")
    assert v == 1.0
    # link_layer as sysfs spells it ("Ethernet", "InfiniBand"); the case is not the point
    assert labels["link_layer"].lower() == "ethernet", labels
    assert labels["netdev"] == "enp41s0f0np0", labels
    assert labels["pci_address"] and labels["numa_node"] != "", labels
    assert one(p.query('rdma_dp_port_info{device="mlx5_0"}'), "ib port_info")[0][
        "link_layer"].lower() == "infiniband"
    assert one(p.query('rdma_dp_state_id{device="mlx5_0",port="1"}'), "state")[1] == 4.0
    assert one(p.query('rdma_dp_physical_state_id{device="mlx5_0",port="1"}'), "phys")[1] == 5.0
    # "400 Gb/sec (4X NDR)" in bytes per second
    assert one(p.query('rdma_dp_rate_bytes_per_second{device="mlx5_0",port="1"}'),
               "rate")[1] == 400e9 / 8


def test_saturated_counter(served):
    _, _, _, _, p = served
    sat = p.query('rdma_dp_pma_saturated{counter="symbol_error",port="1"}')
    by_dev = {s["device"]: v for s, v in sat}
    assert by_dev.get("mlx5_4") == 1.0, sat
    assert by_dev.get("mlx5_0") == 0.0, sat


def test_rate_of_counters_advanced_between_scrapes(served):
    """Counters rewritten in the fixture every 0.25 s while Prometheus scrapes every second:
    rate() over them is > 0, per port, for data, congestion and error counters; a counter then
    rewritten once reads back with its exact new value after the next scrape."""
    _, _, _, counters, p = served
    adv = prom.Advancer(counters, devices=[d for d in prom.IB_DEVICES + prom.ROCE_DEVICES
                                           if d != "mlx5_0"]).start()
    try:
        start = p.scrapes()
        p.wait_scrapes(start + 6)
    finally:
        adv.stop()
    assert adv.ticks >= 10
    w = prom.RATE_WINDOW
    for expr in ["rate(rdma_dp_port_data_transmitted_bytes_total{device=\"mlx5_3\"}[%s])",
                 "rate(rdma_dp_port_data_received_bytes_total{device=\"mlx5_1\"}[%s])",
                 "rate(rdma_dp_port_packets_transmitted_total{device=\"mlx5_9\"}[%s])",
                 "rate(rdma_dp_np_cnp_packets_sent_total{device=\"mlx5_2\"}[%s])",
                 "rate(rdma_dp_rp_cnp_packets_handled_total{device=\"mlx5_7\"}[%s])",
                 "rate(rdma_dp_local_ack_timeout_errors_total{device=\"mlx5_2\"}[%s])",
                 "rate(rdma_dp_req_transport_retries_exceeded_errors_total{device=\"mlx5_2\"}[%s])",
                 "rate(rdma_dp_symbol_error_total{device=\"mlx5_3\"}[%s])"]:
        q = expr % w
        _, v = one(p.query(q), q)
        assert v > 0, "%s = %r after %d ticks" % (q, v, adv.ticks)
    # bytes per second of the advanced port: 25e6 x 4 bytes per 0.25 s tick = 400 MB/s nominal
    _, v = one(p.query('rate(rdma_dp_port_data_transmitted_bytes_total{device="mlx5_3"}[%s])'
                       % w), "tx rate")
    assert 50e6 < v < 800e6, v
    # the untouched port stays flat
    _, v = one(p.query('rate(rdma_dp_port_data_transmitted_bytes_total{device="mlx5_0"}[%s])'
                       % w), "mlx5_0 rate")
    assert v == 0.0

    new = counters.add("mlx5_5", "port_rcv_data", 1000)
    p.wait_query('rdma_dp_port_data_received_bytes_total{device="mlx5_5",port="1"}',
                 lambda r: len(r) == 1 and r[0][1] == 4.0 * new, timeout=15,
                 what="the rewritten mlx5_5 port_rcv_data")
    # the range API sees the series' history: non-decreasing, ending at the new value
    (_, pts), = p.query_range('rdma_dp_port_data_received_bytes_total{device="mlx5_5"}', 60)
    vals = [v for _, v in pts]
    assert vals == sorted(vals) and vals[-1] == 4.0 * new and vals[0] < vals[-1], vals
