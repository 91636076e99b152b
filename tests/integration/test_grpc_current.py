"""rdma-dp's device-plugin service against the current grpc-go, as a kubelet built today speaks it.

bench/go-kubelet is kubelet's device-manager side in grpc-go (it serves Registration on
kubelet.sock, dials each plugin that registers, keeps ListAndWatch open, calls Allocate and
GetPreferredAllocation, and restarts like kubelet: sockets removed, kubelet.sock served again).
bench/build-go.sh builds it against Debian's grpc-go (the compatibility floor, for make bench);
bench/go-current/build.sh builds the same source in module mode against the current grpc-go and
protobuf-go, pinned in bench/go-current/go.mod, from the Go module proxy. A failed build (no Go,
no proxy) fails these tests with go's reason: CI has both. (The real kubelet of make e2e is a
second current consumer: Kubernetes 1.37.2 is built with grpc-go v1.82.1.)
"""
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BUILD = REPO / "bench" / "go-current" / "build.sh"


@pytest.fixture(scope="session")
def go_kubelet():
    build = os.environ.get("RDP_BUILD")
    if not build:
        pytest.skip("RDP_BUILD not set (run through ctest/make check)")
    out = pathlib.Path(build) / "go-current-bin"
    srcs = [REPO / "bench" / "go-current" / f for f in ("go.mod", "go.sum", "build.sh")]
    srcs += list((REPO / "bench" / "go-kubelet").iterdir()) + list((REPO / "bench" / "go-proto").iterdir())
    srcs.append(REPO / "src" / "rpc" / "proto" / "deviceplugin.proto")
    exe = out / "go-kubelet"
    if not exe.exists() or exe.stat().st_mtime < max(f.stat().st_mtime for f in srcs):
        p = subprocess.run(["sh", str(BUILD), str(out)], capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, f"bench/go-current/build.sh failed:\n{p.stdout}\n{p.stderr}"
        assert "google.golang.org/grpc v1.85.0" in p.stdout, p.stdout
    return exe


def run(go_kubelet, rdma_dp, fixtures_dir, node, config, opts):
    root = tempfile.mkdtemp(prefix="rdpgc.", dir="/tmp")  # short: unix socket paths
    try:
        cfg = pathlib.Path(root) / "config.json"
        cfg.write_text(json.dumps(config))
        log = pathlib.Path(root) / "plugin.log"
        argv = [str(go_kubelet), "-root", root, "-log", str(log), "-timeout", "30s"] + opts + [
            "--", str(rdma_dp), "serve", "--config-file", str(cfg),
            "--sysfs-root", str(fixtures_dir / node / "sys"), "--dev-root", str(fixtures_dir / node / "dev"),
            "--kubelet-root-dir", root]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, f"go-kubelet failed:\n{p.stderr}\nplugin log:\n" + (
            log.read_text() if log.exists() else "")
        return json.loads(p.stdout)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_shared_pool_current_grpc_go(go_kubelet, rdma_dp, fixtures_dir):
    """The seeds' shared pool on seed000: registration, the first ListAndWatch snapshot, Allocate
    (the four char devices and one variable), GetPreferredAllocation, two kubelet restarts."""
    cfg = {"configList": [{"resourceName": "hca_shared_devices_a", "rdmaHcaMax": 200,
                           "selectors": {"vendors": ["15b3"], "deviceIDs": ["101d"]}}]}
    r = run(go_kubelet, rdma_dp, fixtures_dir, "seed000", cfg,
            ["-units", "200", "-starts", "2", "-allocs", "20", "-prefs", "3", "-rereg", "2"])
    assert r["exit"] == 0
    assert r["snapshot"]["units"] == 200
    assert r["starts"]["n"] == 2
    assert r["allocate"]["n"] == 20
    assert r["allocate_response"]["devices"] == 4   # uverbs0, umad0, issm0, rdma_cm
    assert r["allocate_envs"]["envs"] == 1
    assert r["preferred"]["n"] == 3 and len(r["preferred_response"]) == 1
    assert r["rereg_register"]["n"] == 2 and r["rereg_snapshot"]["n"] == 2


def test_exclusive_pool_current_grpc_go(go_kubelet, rdma_dp, fixtures_dir):
    """An exclusive pool of the DGX H100's 8 InfiniBand HCAs: a unit per HCA, GetPreferredAllocation
    of 2 with one must-include answered with 2 IDs, Allocate of one HCA."""
    cfg = {"configList": [{"resourceName": "compute_ib", "mode": "exclusive",
                           "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}}]}
    r = run(go_kubelet, rdma_dp, fixtures_dir, "dgx-h100", cfg,
            ["-units", "8", "-allocs", "5", "-alloc-id", "0000:18:00.0", "-prefs", "3", "-pref-size", "2", "-pref-must", "1"])
    assert r["exit"] == 0
    assert r["snapshot"]["units"] == 8
    assert r["preferred"]["n"] == 3 and len(r["preferred_response"]) == 2
    assert r["allocate"]["n"] == 5 and r["allocate_response"]["devices"] >= 2
