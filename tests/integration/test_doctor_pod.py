# SPDX-License-Identifier: MIT
"""The pod group of `rdma-dp doctor` (src/doctor/doctor-pod.c) on proc trees made by
tests/fixtures/podproc.py, through `rdma-dp doctor --pid 1 -o json` (or --pod with the container's roots).

Every check: a healthy tree where it passes, a planted fault where it fails (or warns where
that is its verdict) and NO other pod check fails."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
import podproc  # noqa: E402
import sysfsgen  # noqa: E402

CHECKS = ["pod.devices", "pod.memlock", "pod.shm", "pod.nccl_ib_hca",
          "pod.nccl_socket_ifname", "pod.nccl_gid_index", "pod.nccl_disable"]
DGX_ALL = ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7",
           "mlx5_8", "mlx5_9", "mlx5_10", "mlx5_11"]


@pytest.fixture(scope="session")
def tool(rdma_dp):
    return rdma_dp


def run(tool, proc, pid=1, roots=()):
    """rdma-dp doctor on the pod's proc tree: --pid N, or (pid 0) --pod with the container's
    sysfs and dev roots."""
    args = [str(tool), "doctor", "--proc-root", str(proc), "-o", "json"]
    if pid:
        args += ["--pid", str(pid)]
    else:
        args += ["--pod", "--sysfs-root", str(roots[0]), "--dev-root", str(roots[1])]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert p.returncode in (0, 1), p.stderr
    res = json.loads(p.stdout)["checks"]
    assert (p.returncode == 1) == any(r["status"] == "fail" for r in res)
    assert all(r["group"] == "pod" for r in res)
    return res


def status(res, check):
    """The worst status of a check: fail > warn > skip > ok."""
    order = ["ok", "skip", "warn", "fail"]
    st = [r["status"] for r in res if r["id"] == check]
    assert st, "no result for %s" % check
    return max(st, key=order.index)


def only_fails(res, check, want="fail"):
    """check has status want and no other check fails."""
    assert status(res, check) == want, res
    others = [r for r in res if r["status"] == "fail" and r["id"] != check]
    assert not others, others


def healthy(res):
    for c in CHECKS:
        assert status(res, c) == "ok", [r for r in res if r["id"] == c]


def pod(fixtures_dir, tmp_path, node="dgx-h100", **kw):
    return podproc.make_pod(fixtures_dir / node, tmp_path, **kw)


# --- healthy trees ------------------------------------------------------------------------

@pytest.mark.parametrize("node,devices", [("dgx-h100", ("mlx5_0",)),
                                          ("dgx-h100", ("mlx5_1",)),
                                          ("dgx-h100", tuple(DGX_ALL)),
                                          ("seed000", ("mlx5_0",))])
def test_healthy(tool, fixtures_dir, tmp_path, node, devices):
    res = run(tool, pod(fixtures_dir, tmp_path, node=node, devices=devices, gpus=8))
    healthy(res)
    assert len({r["id"] for r in res}) == len(CHECKS)
    hca = [r for r in res if r["id"] == "pod.nccl_ib_hca"][0]
    assert "selects " + devices[0] + ":1" in hca["finding"]


def test_self_uses_the_given_roots(tool, fixtures_dir, tmp_path):
    proc = pod(fixtures_dir, tmp_path, pid="self")
    root = proc / "self" / "root"
    healthy(run(tool, proc, 0, (root / "sys", root / "dev")))


def test_environ_unreadable_skips(tool, fixtures_dir, tmp_path):
    proc = pod(fixtures_dir, tmp_path)
    os.unlink(proc / "1" / "environ")
    res = run(tool, proc)
    for c in ["pod.nccl_ib_hca", "pod.nccl_socket_ifname", "pod.nccl_gid_index",
              "pod.nccl_disable"]:
        assert status(res, c) == "skip"
        assert "environ" in [r for r in res if r["id"] == c][0]["finding"]


# --- pod.devices -------------------------------------------------------------------------

def test_devices_missing_uverbs_node(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, devices=("mlx5_0", "mlx5_3"),
                        drop_nodes=("mlx5_3",)))
    only_fails(res, "pod.devices")
    f = [r for r in res if r["id"] == "pod.devices" and r["status"] == "fail"]
    assert [r["subject"] for r in f] == ["mlx5_3"]
    assert "uverbs1" in f[0]["finding"] and "NET/IB : No device found." in f[0]["symptom"]


def test_devices_none_in_sysfs(tool, fixtures_dir, tmp_path):
    """RDMA netns exclusive, the device not moved in: no /sys/class/infiniband at all."""
    res = run(tool, pod(fixtures_dir, tmp_path, copy_sys=False))
    only_fails(res, "pod.devices")
    f = [r for r in res if r["id"] == "pod.devices" and r["status"] == "fail"]
    assert any("NET/IB : No device found." in r["symptom"] for r in f)


def test_devices_no_plugin_no_nodes(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, devices=(), rdma_cm=False))
    only_fails(res, "pod.devices")
    assert status(res, "pod.nccl_disable") == "ok"


def test_devices_rdma_cm_missing_warns(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, rdma_cm=False))
    assert status(res, "pod.devices") == "warn"
    assert not [r for r in res if r["status"] == "fail"]


# --- pod.memlock -------------------------------------------------------------------------

def test_memlock_64k_without_ipc_lock(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, memlock=65536,
                        capeff=podproc.CAPEFF_DEFAULT))
    only_fails(res, "pod.memlock")
    r = [r for r in res if r["id"] == "pod.memlock"][0]
    assert "64 KiB" in r["finding"]
    assert "Call to ibv_reg_mr failed with error Cannot allocate memory" in r["symptom"]
    assert "IPC_LOCK" in r["fix"]


def test_memlock_64k_with_ipc_lock_ok(tool, fixtures_dir, tmp_path):
    healthy(run(tool, pod(fixtures_dir, tmp_path, memlock=65536)))


def test_memlock_large_finite_warns(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, memlock=8 << 30,
                        capeff=podproc.CAPEFF_DEFAULT))
    assert status(res, "pod.memlock") == "warn"


# --- pod.shm -----------------------------------------------------------------------------

def test_shm_64m(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, shm_size=64 << 20))
    only_fails(res, "pod.shm")
    r = [r for r in res if r["id"] == "pod.shm"][0]
    assert "64 MiB" in r["finding"] and "failed to extend /dev/shm/nccl-" in r["symptom"]
    assert "medium: Memory" in r["fix"]


@pytest.mark.parametrize("kw,want", [({"shm_size": 512 << 20}, "warn"),
                                     ({"shm_size": 0}, "ok"),
                                     ({"shm_size": 16 << 30}, "ok"),
                                     ({"shm_fstype": "ext4"}, "ok"),
                                     # no /dev/shm mount: /dev's 64 MiB tmpfs holds it
                                     ({"shm_size": None}, "fail"),
                                     ({"shm_size": None, "shm_dir": False}, "fail")])
def test_shm_variants(tool, fixtures_dir, tmp_path, kw, want):
    res = run(tool, pod(fixtures_dir, tmp_path, **kw))
    assert status(res, "pod.shm") == want
    assert not [r for r in res if r["status"] == "fail" and r["id"] != "pod.shm"]


# --- pod.nccl_ib_hca ---------------------------------------------------------------------

def test_ib_hca_prefix_pitfall(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, devices=DGX_ALL,
                        env={"NCCL_IB_HCA": "mlx5_1"}))
    only_fails(res, "pod.nccl_ib_hca", want="warn")
    r = [r for r in res if r["id"] == "pod.nccl_ib_hca" and r["status"] == "warn"][0]
    assert "mlx5_10" in r["finding"] and "mlx5_11" in r["finding"]
    assert "==mlx5_" in r["fix"]


def test_ib_hca_exact_no_pitfall(tool, fixtures_dir, tmp_path):
    healthy(run(tool, pod(fixtures_dir, tmp_path, devices=DGX_ALL,
                          env={"NCCL_IB_HCA": "=mlx5_1"})))


@pytest.mark.parametrize("val", ["=mlx5_5:1", "mlx5_99", "=mlx5_0:2"])
def test_ib_hca_names_a_missing_device(tool, fixtures_dir, tmp_path, val):
    res = run(tool, pod(fixtures_dir, tmp_path, env={"NCCL_IB_HCA": val}))
    only_fails(res, "pod.nccl_ib_hca")
    assert any("NET/IB : No device found." in r["symptom"]
               for r in res if r["id"] == "pod.nccl_ib_hca")


def test_ib_hca_exclude_all(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, env={"NCCL_IB_HCA": "^mlx5"}))
    only_fails(res, "pod.nccl_ib_hca")


def test_ib_hca_unset_ok(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, env={"NCCL_IB_HCA": None}))
    healthy(res)
    assert "unset" in [r for r in res if r["id"] == "pod.nccl_ib_hca"][0]["finding"]


# --- pod.nccl_socket_ifname --------------------------------------------------------------

def test_socket_ifname_missing(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, env={"NCCL_SOCKET_IFNAME": "eth9"}))
    only_fails(res, "pod.nccl_socket_ifname")
    r = [r for r in res if r["id"] == "pod.nccl_socket_ifname"][0]
    assert "eth9" in r["finding"] and "NET/IB : No IP interface found." in r["symptom"]


@pytest.mark.parametrize("val,want", [("eth0", "ok"), ("=eth0", "ok"), ("eth", "ok"),
                                      ("^lo", "ok"), ("=eth", "fail"), ("^eth,lo", "fail")])
def test_socket_ifname_rules(tool, fixtures_dir, tmp_path, val, want):
    res = run(tool, pod(fixtures_dir, tmp_path, env={"NCCL_SOCKET_IFNAME": val}))
    assert status(res, "pod.nccl_socket_ifname") == want


# --- pod.nccl_gid_index ------------------------------------------------------------------

@pytest.mark.parametrize("idx,want", [("3", "ok"), ("2", "fail"), ("0", "fail"),
                                      ("9", "fail"), ("300", "fail"), ("1", "warn"),
                                      ("-1", "ok"), ("x", "fail")])
def test_gid_index_roce(tool, fixtures_dir, tmp_path, idx, want):
    """dgx-h100 mlx5_1 port 1 (RoCE): 0 fe80 v1, 1 fe80 v2, 2 IPv4 v1, 3 IPv4 v2, 4.. empty."""
    res = run(tool, pod(fixtures_dir, tmp_path, devices=("mlx5_1",),
                        env={"NCCL_IB_GID_INDEX": idx}))
    assert status(res, "pod.nccl_gid_index") == want
    assert not [r for r in res if r["status"] == "fail" and r["id"] != "pod.nccl_gid_index"]
    if want == "fail" and idx != "x":
        r = [r for r in res if r["id"] == "pod.nccl_gid_index"][0]
        assert "Call to ibv_modify_qp failed with 22 Invalid argument" in r["symptom"]
        assert "set it to 3" in r["fix"]


def test_gid_index_slot_emptied(tool, fixtures_dir, tmp_path):
    proc = pod(fixtures_dir, tmp_path, devices=("mlx5_1",), env={"NCCL_IB_GID_INDEX": "3"})
    sysfsgen.clear_gid(proc / "1" / "root" / "sys", "mlx5_1", 1, 3)
    res = run(tool, proc)
    only_fails(res, "pod.nccl_gid_index")
    assert "no RoCE v2 IPv4 GID" in [r for r in res if r["id"] == "pod.nccl_gid_index"][0]["fix"]


def test_gid_index_ib_port_ok(tool, fixtures_dir, tmp_path):
    healthy(run(tool, pod(fixtures_dir, tmp_path, env={"NCCL_IB_GID_INDEX": "0"})))


# --- pod.nccl_disable --------------------------------------------------------------------

def test_ib_disable(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, env={"NCCL_IB_DISABLE": "1"}))
    only_fails(res, "pod.nccl_disable")
    r = [r for r in res if r["id"] == "pod.nccl_disable"][0]
    assert "Using network Socket" in r["symptom"]


def test_net_socket(tool, fixtures_dir, tmp_path):
    only_fails(run(tool, pod(fixtures_dir, tmp_path, env={"NCCL_NET": "Socket"})),
               "pod.nccl_disable")


def test_gdr_level_loc_warns(tool, fixtures_dir, tmp_path):
    res = run(tool, pod(fixtures_dir, tmp_path, gpus=8, env={"NCCL_NET_GDR_LEVEL": "LOC"}))
    only_fails(res, "pod.nccl_disable", want="warn")
    # without GPUs there is nothing GPUDirect could do
    res = run(tool, pod(fixtures_dir, tmp_path, gpus=0, env={"NCCL_NET_GDR_LEVEL": "LOC"}))
    healthy(res)


@pytest.mark.parametrize("env", [{"NCCL_IB_DISABLE": "0"}, {"NCCL_NET": "IB"},
                                 {"NCCL_NET_GDR_LEVEL": "PXB"}])
def test_disable_ok(tool, fixtures_dir, tmp_path, env):
    healthy(run(tool, pod(fixtures_dir, tmp_path, gpus=8, env=env)))


# --- odd input never crashes -------------------------------------------------------------

@pytest.mark.parametrize("name,data", [
    ("limits", b""), ("limits", b"Max locked memory\n"), ("limits", b"\0\0\0" * 1000),
    ("status", b"CapEff:\tzz\n"), ("mountinfo", b"- - -\n" * 10),
    ("mountinfo", b"x" * (2 << 20)), ("environ", b"NCCL_IB_HCA=" + b"^=,,:::" * 5000),
    ("environ", b"NCCL_IB_HCA=" + b"a" * 300 + b":1:2:3:4\0NCCL_IB_GID_INDEX=99999999999"),
    ("net/dev", b":\n:\n:::\n")], ids=lambda v: v if isinstance(v, str) else "%dB" % len(v))
def test_odd_input(tool, fixtures_dir, tmp_path, name, data):
    proc = pod(fixtures_dir, tmp_path)
    (proc / "1" / name).write_bytes(data)
    res = run(tool, proc)
    assert {r["id"] for r in res} == set(CHECKS)
