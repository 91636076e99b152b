# SPDX-License-Identifier: MIT
"""`rdma-dp dra` writes a prepared claim's status.devices (issue 21, "Claim status"): a
server-side apply of resourceclaims/<name>/status with the driver as field manager, one entry
per device (Ready, data with the ibdev and uverbs node, networkData with the netdev and its
MAC), removed on unprepare; other drivers' entries untouched; a slow or failing API server
never delays a prepare (the write runs on a worker of its own, retried, logged once). Against
the fake API server, whose apply follows pkg/apis/resource/validation for status.devices."""
import os
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dra_env  # noqa: E402
import fake_apiserver  # noqa: E402
from dra_env import DRIVER, NODE  # noqa: E402
from test_dra import MLX5_0, MLX5_3, start, stopped_clean  # noqa: E402

STATUS = r"/resourceclaims/[^/]+/status$"


@pytest.fixture
def env(rdma_dp, fixtures_dir):
    e = dra_env.DraEnv(rdma_dp, fixtures_dir, wipe_delay=2)
    yield e
    e.close()


def hold(env):
    """The next PATCH of a status hangs (read, never answered) until release(env)."""
    env.api._released.clear()
    env.api.inject("hang", method="PATCH", path=STATUS)


def release(env):
    env.api._released.set()


def ours(env, name, ns="default"):
    c = env.api.get_claim(ns, name) or {}
    return [d for d in (c.get("status") or {}).get("devices") or [] if d["driver"] == DRIVER]


def netdev(fixtures_dir, ibdev):
    sysfs = fixtures_dir / "dgx-h100" / "sys"
    (n,) = os.listdir(sysfs / "class" / "infiniband" / ibdev / "device" / "net")
    return n, (sysfs / "class" / "net" / n / "address").read_text().strip()


def test_status_written_after_prepare_and_removed_on_unprepare(env, fixtures_dir):
    d = start(env)
    other = ("nic", NODE, MLX5_0)
    c = env.claim("st", [other, ("nic", NODE, MLX5_3), ("gpu", "node-a", "gpu-0", "gpu.example.com")])
    uid = c["metadata"]["uid"]
    # another driver's entry, written by its own manager first: ours must leave it alone
    gpu = {"driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0",
           "conditions": [{"type": "Ready", "status": "True", "reason": "Up", "message": "",
                           "lastTransitionTime": "2026-12-03T00:00:00Z"}]}
    code, body, _ = env.api._apply_claim_status(
        "default", "st", {"fieldManager": ["gpu.example.com"]},
        fake_apiserver.json.dumps({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                   "metadata": {"name": "st", "namespace": "default"},
                                   "status": {"devices": [gpu]}}).encode(),
        {"Content-Type": "application/apply-patch+yaml"})
    assert code == 200, body
    resp = env.kubelet.prepare([c])
    assert not resp.claims[uid].error
    env.api.wait(lambda: len(ours(env, "st")) == 2, what="our status.devices")
    req = env.api.requests("PATCH", STATUS)[-1]
    assert req["status"] == 200
    assert req["content_type"] == "application/apply-patch+yaml"
    assert req["query"]["fieldManager"] == [DRIVER] and req["query"]["force"] == ["true"]
    assert req["body"]["metadata"]["uid"] == uid
    by_dev = {x["device"]: x for x in ours(env, "st")}
    for dev, ibdev in ((MLX5_0, "mlx5_0"), (MLX5_3, "mlx5_3")):
        e = by_dev[dev]
        assert e["pool"] == NODE
        (cond,) = e["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == ("Ready", "True", "Prepared")
        assert e["data"]["ibdev"] == ibdev
        assert e["data"]["uverbs"].startswith("/dev/infiniband/uverbs")
        assert e["data"]["ports"] and e["data"]["ports"][0]["port"] == 1
        name, mac = netdev(fixtures_dir, ibdev)
        assert e["networkData"]["interfaceName"] == name
        assert e["networkData"]["hardwareAddress"] == mac
        # a fixture's netdev is not a live one: no addresses taken from this host
        assert "ips" not in e["networkData"]
    devs = env.api.get_claim("default", "st")["status"]["devices"]
    assert [x for x in devs if x["driver"] == "gpu.example.com"] == [gpu]
    d.wait_log("event=claim-status-written", "uid=" + uid, timeout=10)
    assert d.count("event=claim-status-written", "uid=" + uid) == 1
    env.kubelet.unprepare([c])
    env.api.wait(lambda: not ours(env, "st"), what="our entries removed")
    devs = env.api.get_claim("default", "st")["status"]["devices"]
    assert devs == [gpu]
    d.wait_log("event=claim-status-written", "cleared=1", timeout=10)
    stopped_clean(d)


def test_prepare_never_waits_for_the_status_write(env):
    d = start(env)
    hold(env)
    a = env.claim("slow-a", [("nic", NODE, MLX5_0)])
    b = env.claim("slow-b", [("nic", NODE, MLX5_3)])
    t0 = time.monotonic()
    assert not env.kubelet.prepare([a]).claims[a["metadata"]["uid"]].error
    # the first status write hangs on the API server; the next claim's read and prepare do
    # not queue behind it
    assert not env.kubelet.prepare([b]).claims[b["metadata"]["uid"]].error
    assert time.monotonic() - t0 < 5
    assert not ours(env, "slow-a") and not ours(env, "slow-b")
    release(env)
    env.api.wait(lambda: ours(env, "slow-a") and ours(env, "slow-b"), timeout=60,
                 what="both written after the hang")
    stopped_clean(d)


def test_failures_are_retried_and_logged_once(env):
    d = start(env)
    env.api.inject(503, method="PATCH", path=STATUS, count=6)
    c = env.claim("retry", [("nic", NODE, MLX5_0)])
    uid = c["metadata"]["uid"]
    assert not env.kubelet.prepare([c]).claims[uid].error
    env.api.wait(lambda: ours(env, "retry"), timeout=60, what="written after 503s")
    assert len(env.api.requests("PATCH", STATUS, status=503)) == 6
    d.wait_log("event=claim-status-written", "uid=" + uid, timeout=10)
    assert d.count("event=claim-status-failed", "uid=" + uid) == 1
    assert d.count("event=claim-status-written", "uid=" + uid) == 1
    stopped_clean(d)


def test_gone_claim_and_rejected_write_are_final(env):
    d = start(env)
    c = env.claim("gone", [("nic", NODE, MLX5_0)])
    uid = c["metadata"]["uid"]
    hold(env)
    assert not env.kubelet.prepare([c]).claims[uid].error
    env.api.delete_claim("default", "gone")
    release(env)
    d.wait_log("event=claim-status-skipped", "uid=" + uid, timeout=30)
    # a 422 is logged and dropped, not retried
    c2 = env.claim("bad", [("nic", NODE, MLX5_3)])
    uid2 = c2["metadata"]["uid"]
    env.api.inject(422, method="PATCH", path=STATUS)
    assert not env.kubelet.prepare([c2]).claims[uid2].error
    d.wait_log("event=claim-status-failed", "uid=" + uid2, "retry=0", timeout=30)
    time.sleep(1.5)
    assert len(env.api.requests("PATCH", "/resourceclaims/bad/status")) == 1
    stopped_clean(d)
