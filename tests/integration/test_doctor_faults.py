# SPDX-License-Identifier: MIT
"""The whole of `rdma-dp doctor` (every group, through the command line) on the healthy DGX
H100 fixture and on each planted fault: healthy, no warn and no fail; on a fault, its check
fails (or warns, for what is only a risk) and nothing else fails: a finding that another
failure explains is a warning naming it. The groups' own tests (test_doctor_core.py,
test_doctor_ports.py, test_doctor_pci.py, test_doctor_pod.py) check each finding's text."""
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
import faults_pci  # noqa: E402
import faults_ports  # noqa: E402
import faults_stack  # noqa: E402
import podproc  # noqa: E402
import sysfsgen  # noqa: E402

CONFIG = {"configList": [
    {"resourceName": "compute", "mode": "exclusive",
     "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}},
    {"resourceName": "storage", "rdmaHcaMax": 10,
     "selectors": {"vendors": ["15b3"], "linkTypes": ["ether"]}}]}


@pytest.fixture(scope="module")
def cfg(tmp_path_factory):
    p = tmp_path_factory.mktemp("cfg") / "config.json"
    p.write_text(json.dumps(CONFIG))
    return p


def doctor(rdma_dp, node, cfg, *extra, interval=0):
    proc = ["--proc-root", str(node / "proc")] if (node / "proc").is_dir() else []
    p = subprocess.run([str(rdma_dp), "doctor", "--sysfs-root", str(node / "sys"), "--dev-root",
                        str(node / "dev"), *proc, "--kubelet-root-dir", "/nonexistent", "-c",
                        str(cfg), "--interval", str(interval), "-o", "json", *extra],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    checks = json.loads(p.stdout)["checks"]
    assert p.returncode == (1 if any(c["status"] == "fail" for c in checks) else 0)
    return checks


def bad(checks, status):
    return sorted({c["id"] for c in checks if c["status"] == status})


def copy(fixtures_dir, tmp_path, name="node"):
    node = tmp_path / name
    sysfsgen.copy_node(fixtures_dir / "dgx-h100", node)
    return node


def test_healthy_dgx_has_no_warn_and_no_fail(rdma_dp, fixtures_dir, cfg):
    checks = doctor(rdma_dp, fixtures_dir / "dgx-h100", cfg)
    assert bad(checks, "fail") == [] and bad(checks, "warn") == []
    # every node group ran (skips: no kubelet here; --interval 0 takes no second sample)
    assert {c["group"] for c in checks} == {"stack", "plugin", "ports", "pcie", "placement",
                                            "gpudirect", "congestion"}
    assert [c["id"] for c in checks if c["status"] == "skip"] == ["plugin.sockets",
                                                                  "counters.loss"]


NODE_FAULTS = [
    # (name, plant(node), failing check or None, warning checks that may come with it)
    ("no-uverbs", faults_stack.no_uverbs, "stack.uverbs", {"plugin.unusable", "plugin.units"}),
    ("no-rdma-ucm", faults_stack.no_rdma_ucm, "stack.rdma_ucm",
     {"plugin.unusable", "plugin.units"}),
    ("no-rdma-driver", faults_stack.no_rdma_driver, "stack.driver",
     {"placement.gpu_nic", "plugin.units", "plugin.config"}),
    ("port-down", faults_ports.port_down, "port.state", {"placement.gpu_nic", "plugin.units"}),
    ("port-no-sm", faults_ports.port_no_sm, "port.state", {"placement.gpu_nic", "plugin.units"}),
    ("no-v2-gid", faults_ports.no_v2_ipv4_gid, "port.roce_gid", set()),
    ("lower-rate", faults_ports.lower_rate, None, {"port.rate"}),
    ("mtu-1500", faults_ports.netdev_mtu, None, {"port.mtu"}),
]


@pytest.mark.parametrize("name,plant,fails,warns", NODE_FAULTS, ids=[f[0] for f in NODE_FAULTS])
def test_node_fault(rdma_dp, fixtures_dir, tmp_path, cfg, name, plant, fails, warns):
    node = copy(fixtures_dir, tmp_path)
    plant(node)
    checks = doctor(rdma_dp, node, cfg)
    assert bad(checks, "fail") == ([fails] if fails else [])
    assert set(bad(checks, "warn")) <= warns
    if not fails:
        assert set(bad(checks, "warn")) == warns
    # the consequences name their cause
    for c in checks:
        if c["status"] == "warn" and c["id"] in ("plugin.unusable", "placement.gpu_nic"):
            assert "explained by " + fails in c["finding"], c


@pytest.mark.parametrize("name", sorted(faults_pci.FAULTS))
def test_pci_fault(rdma_dp, fixtures_dir, tmp_path, cfg, name):
    plant, check, status = faults_pci.FAULTS[name]
    node = pathlib.Path(plant(fixtures_dir, tmp_path))
    checks = doctor(rdma_dp, node, cfg)
    if status == "fail":
        assert bad(checks, "fail") == [check]
    else:
        assert bad(checks, "fail") == [] and bad(checks, "warn") == [check]


def test_link_layer_fault(rdma_dp, fixtures_dir, tmp_path):
    cfg = faults_ports.roce_pool_config(tmp_path / "roce.json")
    checks = doctor(rdma_dp, fixtures_dir / "dgx-h100", cfg)
    assert bad(checks, "fail") == ["port.link_layer"]


def test_rising_loss_counter(rdma_dp, fixtures_dir, tmp_path, cfg):
    node = copy(fixtures_dir, tmp_path)
    t = threading.Thread(target=lambda: (time.sleep(0.8), faults_ports.bump_counter(
        node, "mlx5_1", 1, "req_transport_retries_exceeded", 3)))
    t.start()
    try:
        checks = doctor(rdma_dp, node, cfg, interval=2500)
    finally:
        t.join()
    assert bad(checks, "fail") == ["counters.loss"]


def test_netns_exclusive_with_a_shared_pool(rdma_dp, fixtures_dir, tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"configList": [{"resourceName": "hca", "rdmaHcaMax": 10,
                                               "selectors": {"vendors": ["15b3"]}}]}))
    checks = doctor(rdma_dp, fixtures_dir / "exclusive", cfg)
    assert bad(checks, "fail") == [] and "stack.netns" in bad(checks, "warn")


# ---- pod mode ---------------------------------------------------------------------------------
POD_FAULTS = [
    ("healthy", {}, None, set()),
    ("memlock", dict(memlock=("65536", "65536"), capeff=podproc.CAPEFF_DEFAULT), "pod.memlock",
     set()),
    ("shm", dict(shm_size=64 << 20), "pod.shm", set()),
    ("hca-missing", dict(env={"NCCL_IB_HCA": "=mlx5_7:1"}), "pod.nccl_ib_hca", set()),
    ("hca-prefix", dict(devices=("mlx5_0", "mlx5_1", "mlx5_10"), env={"NCCL_IB_HCA": "mlx5_1"}),
     None, {"pod.nccl_ib_hca"}),
    ("ifname", dict(env={"NCCL_SOCKET_IFNAME": "eth9"}), "pod.nccl_socket_ifname", set()),
    ("ib-disable", dict(env={"NCCL_IB_DISABLE": "1"}), "pod.nccl_disable", set()),
    ("no-uverbs-node", dict(drop_nodes=("mlx5_0",)), "pod.devices", set()),
]


@pytest.mark.parametrize("name,kw,fails,warns", POD_FAULTS, ids=[f[0] for f in POD_FAULTS])
def test_pod_fault(rdma_dp, fixtures_dir, tmp_path, name, kw, fails, warns):
    proc = podproc.make_pod(fixtures_dir / "dgx-h100", tmp_path / "pod", **kw)
    p = subprocess.run([str(rdma_dp), "doctor", "--pid", "1", "--proc-root", str(proc), "-o",
                        "json"], capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    checks = json.loads(p.stdout)["checks"]
    assert {c["group"] for c in checks} == {"pod"}
    assert bad(checks, "fail") == ([fails] if fails else [])
    assert set(bad(checks, "warn")) == warns
    assert p.returncode == (1 if fails else 0)
