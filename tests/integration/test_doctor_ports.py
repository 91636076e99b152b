"""The doctor's "ports" and "congestion" groups (src/doctor/doctor-ports.c, src/doctor/doctor-congestion.c)
through `rdma-dp doctor --group <group> -o json`, on fixture nodes: the healthy
dgx-h100 with its config gives only `ok`; each planted fault of tests/fixtures/faults_ports.py
makes exactly its check fail (or warn, for rate and MTU) and nothing else in the two groups;
loss counters bumped by a thread between doctor's two samples are reported with their delta."""
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
import faults_ports  # noqa: E402
import sysfsgen  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
DGX_CONFIG = REPO / "tests" / "fixtures" / "configs" / "dgx.json"


@pytest.fixture(scope="session")
def doctor_run(rdma_dp):
    return rdma_dp


def run_group(doctor_run, node, group, *, config=None, interval=100, timeout=60):
    """rdma-dp doctor --group <group> -o json on a node: its results."""
    args = [str(doctor_run), "doctor", "--group", group, "--sysfs-root", str(node / "sys"),
            "--dev-root", str(node / "dev"), "--interval", str(interval), "-o", "json"]
    if config:
        args += ["--config-file", str(config)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    assert r.returncode in (0, 1), r.stderr
    assert r.stderr == ""
    res = json.loads(r.stdout)["checks"]
    assert (r.returncode == 1) == any(x["status"] == "fail" for x in res)
    for x in res:
        assert list(x) == ["id", "group", "status", "subject", "finding", "symptom", "fix"]
        assert x["group"] == group
        assert x["status"] in ("ok", "skip", "warn", "fail")
        if x["status"] in ("warn", "fail"):
            assert x["symptom"] and x["fix"], x
    return res


def both_groups(doctor_run, node, **kw):
    return run_group(doctor_run, node, "ports", **kw) + \
        run_group(doctor_run, node, "congestion", **kw)


def bad(results):
    return [(x["id"], x["subject"], x["status"]) for x in results
            if x["status"] in ("warn", "fail")]


@pytest.fixture
def dgx(fixtures_dir, tmp_path):
    node = tmp_path / "dgx-h100"
    sysfsgen.copy_node(fixtures_dir / "dgx-h100", node)
    return node


def test_healthy_dgx_all_ok(doctor_run, fixtures_dir):
    res = both_groups(doctor_run, fixtures_dir / "dgx-h100", config=DGX_CONFIG)
    assert {x["status"] for x in res} == {"ok"}, [x for x in res if x["status"] != "ok"]
    ids = {}
    for x in res:
        ids.setdefault(x["id"], set()).add(x["subject"])
    compute = {"mlx5_%d port 1" % i for i in (0, 3, 4, 5, 6, 9, 10, 11)}
    storage = {"mlx5_%d port 1" % i for i in (1, 2, 7, 8)}
    for i in ("port.state", "port.link_layer", "port.rate", "counters.loss"):
        assert ids[i] == compute | storage
    assert ids["port.roce_gid"] == storage and ids["port.mtu"] == storage
    by = {(x["id"], x["subject"]): x["finding"] for x in res}
    assert by[("port.mtu", "mlx5_1 port 1")] == "enp41s0f0np0 MTU 9000: RoCE MTU 4096"
    assert by[("port.roce_gid", "mlx5_1 port 1")] == \
        "RoCE v2 IPv4 GID at index 3 (::ffff:10.10.1.11 on enp41s0f0np0)"
    assert by[("counters.loss", "mlx5_1 port 1")] == \
        "13 loss and retry counters read twice 100 ms apart: none rose"
    assert by[("counters.loss", "mlx5_0 port 1")].startswith("9 loss and retry counters")


def test_no_config_skips_link_layer(doctor_run, fixtures_dir):
    res = run_group(doctor_run, fixtures_dir / "dgx-h100", "ports")
    ll = [x for x in res if x["id"] == "port.link_layer"]
    assert len(ll) == 1 and ll[0]["status"] == "skip" and ll[0]["subject"] == ""
    assert "no config" in ll[0]["finding"]
    assert bad(res) == []


def test_port_down(doctor_run, dgx):
    faults_ports.port_down(dgx, "mlx5_0")
    res = both_groups(doctor_run, dgx, config=DGX_CONFIG)
    assert bad(res) == [("port.state", "mlx5_0 port 1", "fail")]
    x = next(x for x in res if x["id"] == "port.state" and x["status"] == "fail")
    assert x["finding"] == "state DOWN, physical state Disabled"
    assert "NET/IB : No device found." in x["symptom"]
    rate = next(x for x in res if x["id"] == "port.rate" and x["subject"] == "mlx5_0 port 1")
    assert rate["status"] == "skip"


def test_port_no_subnet_manager(doctor_run, dgx):
    faults_ports.port_no_sm(dgx, "mlx5_4")
    res = both_groups(doctor_run, dgx, config=DGX_CONFIG)
    assert bad(res) == [("port.state", "mlx5_4 port 1", "fail")]
    x = next(x for x in res if x["status"] == "fail")
    assert "no subnet manager" in x["finding"] and "opensm" in x["fix"]


def test_port_down_fixture_node(doctor_run, fixtures_dir):
    res = both_groups(doctor_run, fixtures_dir / "port-down")
    assert sorted(bad(res)) == [("port.state", "mlx5_0 port 1", "fail"),
                                ("port.state", "mlx5_1 port 1", "fail")]


def test_ib_port_in_roce_pool(doctor_run, dgx, tmp_path):
    cfg = faults_ports.roce_pool_config(tmp_path / "roce.json")
    res = both_groups(doctor_run, dgx, config=cfg)
    named = ["mlx5_0 port 1", "mlx5_3 port 1"]
    assert sorted(bad(res)) == sorted(("port.link_layer", s, "fail") for s in named)
    x = next(x for x in res if x["subject"] == "mlx5_0 port 1" and x["id"] == "port.link_layer")
    assert x["finding"] == ("InfiniBand port; resource roce (linkTypes [ether]) has no device "
                            "and matches mlx5_0 on every other selector, so mlx5_0 is in no "
                            "pool")
    assert "LINK_TYPE_P1=2" in x["fix"]
    # the devices the resource does not name are none of its business
    ok = next(x for x in res if x["subject"] == "mlx5_1 port 1" and x["id"] == "port.link_layer")
    assert ok["status"] == "ok"


def test_lower_rate(doctor_run, dgx):
    faults_ports.lower_rate(dgx, "mlx5_3")
    res = both_groups(doctor_run, dgx, config=DGX_CONFIG)
    assert bad(res) == [("port.rate", "mlx5_3 port 1", "warn")]
    x = next(x for x in res if x["status"] == "warn")
    assert x["finding"] == ("200 Gb/sec (4X HDR), below 400 Gb/sec (4X NDR) of mlx5_0 port 1 "
                            "(same device ID 15b3:1021)")


def test_no_v2_ipv4_gid(doctor_run, dgx):
    faults_ports.no_v2_ipv4_gid(dgx, "mlx5_1")
    res = both_groups(doctor_run, dgx, config=DGX_CONFIG)
    assert bad(res) == [("port.roce_gid", "mlx5_1 port 1", "fail")]
    x = next(x for x in res if x["status"] == "fail")
    assert x["finding"] == ("enp41s0f0np0 has IPv4 10.10.1.11 (RoCE v1 GID at index 2) but no "
                            "RoCE v2 GID for it")
    assert "ibv_modify_qp failed with 22" in x["symptom"]


def test_roce_netdev_without_ipv4_skips(doctor_run, dgx):
    for i in (2, 3):
        sysfsgen.clear_gid(dgx / "sys", "mlx5_2", 1, i)
    res = both_groups(doctor_run, dgx, config=DGX_CONFIG)
    assert bad(res) == []
    x = next(x for x in res if x["id"] == "port.roce_gid" and x["subject"] == "mlx5_2 port 1")
    assert x["status"] == "skip" and "no IPv4 address on enp41s0f1np1" in x["finding"]


@pytest.mark.parametrize("mtu,roce", [(1500, 1024), (4000, 2048), (4191, 2048)])
def test_mtu_low(doctor_run, dgx, mtu, roce):
    faults_ports.netdev_mtu(dgx, "enp41s0f0np0", mtu)
    res = both_groups(doctor_run, dgx, config=DGX_CONFIG)
    assert bad(res) == [("port.mtu", "mlx5_1 port 1", "warn")]
    x = next(x for x in res if x["status"] == "warn")
    assert x["finding"].startswith("enp41s0f0np0 MTU %d: RoCE MTU %d " % (mtu, roce))
    assert "mtu 9000" in x["fix"]


def test_mtu_4192_is_enough(doctor_run, dgx):
    faults_ports.netdev_mtu(dgx, "enp41s0f0np0", 4192)
    res = run_group(doctor_run, dgx, "ports", config=DGX_CONFIG)
    assert bad(res) == []


def bump_later(node, delay, **kw):
    t = threading.Thread(target=lambda: (time.sleep(delay),
                                         faults_ports.bump_counter(node, **kw)))
    t.start()
    return t


@pytest.mark.parametrize("name,status", [("out_of_sequence", "warn"),
                                         ("rp_cnp_ignored", "warn"),
                                         ("local_ack_timeout_err", "warn"),
                                         ("req_transport_retries_exceeded", "fail")])
def test_counter_rises(doctor_run, dgx, name, status):
    t = bump_later(dgx, 0.8, ibdev="mlx5_1", name=name, by=17)
    try:
        res = run_group(doctor_run, dgx, "congestion", interval=2500)
    finally:
        t.join()
    assert bad(res) == [("counters.loss", "mlx5_1 port 1", status)]
    x = next(x for x in res if x["status"] == status)
    assert x["finding"] == "%s +17 in 2500 ms" % name
    assert name in x["symptom"]
    if status == "fail":
        assert "status=12" in x["symptom"]
    # the ports group does not look at counters
    assert bad(run_group(doctor_run, dgx, "ports", config=DGX_CONFIG)) == []


def test_counter_rises_on_ib_port(doctor_run, dgx):
    t = bump_later(dgx, 0.8, ibdev="mlx5_9", name="packet_seq_err", by=3)
    try:
        res = run_group(doctor_run, dgx, "congestion", interval=2500)
    finally:
        t.join()
    assert bad(res) == [("counters.loss", "mlx5_9 port 1", "warn")]
    assert "ibqueryerrors" in next(x for x in res if x["status"] == "warn")["fix"]


def test_counters_interval_zero_skips(doctor_run, fixtures_dir):
    res = run_group(doctor_run, fixtures_dir / "dgx-h100", "congestion", interval=0)
    assert [(x["id"], x["status"], x["subject"]) for x in res] == \
        [("counters.loss", "skip", "")]


def test_counters_absent_skip(doctor_run, fixtures_dir, tmp_path):
    """A port without hw_counters/ (siw, kernels before 4.6): skip. The rxe fixture used to
    be such a port; the real kernel's rxe has hw_counters (issue 19), so the fixture has them
    now and this test removes them."""
    node = tmp_path / "rxe"
    sysfsgen.copy_node(fixtures_dir / "rxe", node)
    for dev in ("rxe0", "rxe1"):
        hc = node / "sys/class/infiniband" / dev / "ports/1/hw_counters"
        for f in hc.iterdir():
            f.unlink()
        hc.rmdir()
    res = run_group(doctor_run, node, "congestion", interval=10)
    assert [(x["subject"], x["status"]) for x in res] == [("rxe0 port 1", "skip"),
                                                          ("rxe1 port 1", "skip")]
    assert "no loss counter readable" in res[0]["finding"]


def test_rxe_counters_are_read_by_their_own_names(doctor_run, fixtures_dir, tmp_path):
    """rxe's loss counters have names of their own (rxe_hw_counters.c): all 9 that show loss
    or retries are read (issue 19: only duplicate_request, a name mlx5 shares, was); a rising
    retry_exceeded_err fails with NCCL's status 12, and the fix talks about rxe's netdev, not
    PFC on a NIC."""
    node = tmp_path / "rxe"
    sysfsgen.copy_node(fixtures_dir / "rxe", node)
    res = run_group(doctor_run, node, "congestion", interval=10)
    assert [(x["subject"], x["status"]) for x in res] == [("rxe0 port 1", "ok"),
                                                          ("rxe1 port 1", "ok")]
    assert res[0]["finding"].startswith("9 loss and retry counters read twice")
    for name, status in (("retry_exceeded_err", "fail"), ("out_of_seq_request", "warn"),
                         ("rcvd_seq_err", "warn"), ("completer_retry_err", "warn")):
        t = bump_later(node, 0.8, ibdev="rxe1", name=name, by=5)
        try:
            res = run_group(doctor_run, node, "congestion", interval=2500)
        finally:
            t.join()
        assert bad(res) == [("counters.loss", "rxe1 port 1", status)], name
        x = next(x for x in res if x["status"] == status)
        assert x["finding"] == "%s +5 in 2500 ms" % name
        assert "rdma_rxe runs over vethA" in x["fix"] and "PFC on its priority" not in x["fix"]
        if status == "fail":
            assert "status=12" in x["symptom"]


def test_rxe_rate_and_link_layer(doctor_run, fixtures_dir, tmp_path):
    """Soft devices (issue 19): port.rate does not compare rxe0 (virtio-net, 2.5 Gb/s) with
    rxe1 (veth, 10 Gb/s) as one model, nor suggests mlxlink; port.link_layer under a config
    without linkTypes says so rather than "no resource with linkTypes selects rxe0"."""
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"configList": [
        {"resourceName": "soft", "rdmaHcaMax": 4, "selectors": {"drivers": ["rdma_rxe"]}}]}))
    res = run_group(doctor_run, fixtures_dir / "rxe", "ports", config=cfg)
    rate = {x["subject"]: x for x in res if x["id"] == "port.rate"}
    assert rate["rxe0 port 1"]["status"] == "skip"
    assert "rxe0 has no PCI device ID (rdma_rxe)" in rate["rxe0 port 1"]["finding"]
    assert "follows its netdev eth0" in rate["rxe0 port 1"]["finding"]
    assert not any("mlxlink" in (x["fix"] or "") for x in res)
    ll = [x for x in res if x["id"] == "port.link_layer"]
    assert [x["finding"] for x in ll] == ["Ethernet (no resource selects by linkTypes)"] * 2
    # A port down: the fix is the netdev's, not a cable's.
    node = tmp_path / "rxe"
    sysfsgen.copy_node(fixtures_dir / "rxe", node)
    sysfsgen.set_port_state(node / "sys", "rxe1", 1, "DOWN")
    res = run_group(doctor_run, node, "ports", config=cfg)
    st = next(x for x in res if x["id"] == "port.state" and x["subject"] == "rxe1 port 1")
    assert st["status"] == "fail"
    assert "ip link set vethA up" in st["fix"] and "mlxlink" not in st["fix"]


def test_no_rdma(doctor_run, fixtures_dir):
    res = both_groups(doctor_run, fixtures_dir / "no-rdma")
    assert {x["status"] for x in res} == {"skip"}
