# SPDX-License-Identifier: MIT
"""Shared NICs by consumable capacity (DRAConsumableCapacity, KEP-5075; issue 21): `rdma-dp
dra --sharing=capacity` publishes every device with allowMultipleAllocations and a "slots"
capacity (the seeds' rdmaHcaMax), and prepares claims that each hold a share of one NIC
(results[].shareID): prepared side by side, one CDI device per share, kept across a
restart, unprepared one by one. Against the fake API server (which validates the request
policy as 1.36's validation does, and drops the fields as a 1.34/1.35 server does with the
gate off) and the kubelet stand-in."""
import json
import os
import signal
import sys
import time
import uuid

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dra_env  # noqa: E402
from dra_env import DRIVER, NODE  # noqa: E402
from test_cdi_spec import validate, validator  # noqa: E402,F401

MLX5_0 = "pci-0000-18-00-0"  # dgx-h100 mlx5_0 (0000:18:00.0)
MLX5_3 = "pci-0000-40-00-0"  # dgx-h100 mlx5_3 (0000:40:00.0)
CAPACITY = ("--sharing=capacity", "--share-slots", "4", "--share-bandwidth")


@pytest.fixture
def env(rdma_dp, fixtures_dir):
    e = dra_env.DraEnv(rdma_dp, fixtures_dir, wipe_delay=2)
    yield e
    e.close()


def start(env, extra=CAPACITY):
    after = len(env.kubelet.registrations)
    d = env.driver("dgx-h100", extra=extra)
    env.kubelet.wait_registered(DRIVER, after=after, timeout=30)
    d.wait_log("event=slices-published", timeout=30)
    return d


def stopped_clean(d):
    assert d.stop() == 0, d.log()[-3000:]
    log = d.log()
    assert "ERROR: AddressSanitizer" not in log and "runtime error" not in log, log[-3000:]


def pool(env):
    return {d["name"]: d for s in env.api.slices(NODE, DRIVER) for d in s["spec"]["devices"]}


def shared_claim(env, name, shares, ns="default"):
    """A claim allocated as the 1.36+ scheduler allocates a device that allows multiple
    allocations: each result with its own shareID and consumedCapacity (the request's
    default: one slot). shares: [(request, device)]; returns (claim, [shareID])."""
    c = dra_env.make_claim(name, ns, [(r, NODE, dev) for r, dev in shares], node=env.node)
    ids = []
    for res in c["status"]["allocation"]["devices"]["results"]:
        ids.append(str(uuid.uuid4()))
        res["shareID"] = ids[-1]
        res["consumedCapacity"] = {"slots": "1"}
    return env.api.put_claim(c), ids


def uid(c):
    return c["metadata"]["uid"]


def slice_writes(env):
    return len(env.api.requests("POST", "resourceslices")) + \
        len(env.api.requests("PUT", "resourceslices"))


def test_capacity_pool_published_and_kept(env):
    """Every device: allowMultipleAllocations, slots (4, default one per request), bandwidth
    (the port's rate, none by default); the server's validation takes it, and a re-check
    after a rescan writes nothing (canonical quantities: what the server stores is what the
    driver wants)."""
    d = start(env)
    devs = pool(env)
    assert len(devs) == 12, sorted(devs)  # the DGX H100 fixture's usable devices
    dev = devs[MLX5_0]
    assert dev["allowMultipleAllocations"] is True
    assert dev["capacity"] == {
        "slots": {"value": "4", "requestPolicy": {"default": "1", "validRange": {"min": "1"}}},
        "bandwidth": {"value": "400G",
                      "requestPolicy": {"default": "0", "validRange": {"min": "0"}}}}
    assert "event=sharing mode=capacity slots=4 bandwidth=yes" in d.log()
    writes = slice_writes(env)
    lists = len(env.api.requests("GET", "resourceslices"))
    d.signal(signal.SIGHUP)
    env.api.wait(lambda: len(env.api.requests("GET", "resourceslices")) > lists, timeout=15,
                 what="the pool re-listed after SIGHUP")
    time.sleep(1)
    assert slice_writes(env) == writes
    stopped_clean(d)


def test_default_is_one_claim_per_device(env):
    d = start(env, extra=())
    dev = pool(env)[MLX5_0]
    assert "allowMultipleAllocations" not in dev and "capacity" not in dev
    stopped_clean(d)


def test_flags_refused(env, rdma_dp):
    import subprocess
    for extra, msg in ((["--sharing=pods"], "--sharing: 'pods'"),
                       (["--share-slots", "4"], "go with --sharing=capacity"),
                       (["--sharing=capacity", "--share-slots", "0"], "from 1 to 1000000"),
                       (["--sharing=capacity", "--share-slots", "4x"], "from 1 to 1000000")):
        p = subprocess.run(env.args("dgx-h100", extra=extra), capture_output=True, text=True,
                           timeout=30)
        assert p.returncode == 2 and msg in p.stderr, (extra, p.stderr)


def test_an_api_server_without_the_gate_drops_the_fields(env):
    """1.34/1.35 (DRAConsumableCapacity alpha, off): the server stores the devices without
    allowMultipleAllocations and without request policies (the scheduler would give each
    device to one claim). The driver notices it in what the server stored, says so once, and
    publishes as --sharing=claim: no write loop. Why --sharing=claim is the default."""
    env.api.consumable_capacity = False
    d = start(env)
    d.wait_log("event=sharing-unsupported", timeout=15)
    env.api.wait(lambda: "capacity" not in pool(env)[MLX5_0], timeout=15,
                 what="the pool published as for --sharing=claim")
    assert "allowMultipleAllocations" not in pool(env)[MLX5_0]
    time.sleep(1)
    writes = slice_writes(env)
    lists = len(env.api.requests("GET", "resourceslices"))
    d.signal(signal.SIGHUP)
    env.api.wait(lambda: len(env.api.requests("GET", "resourceslices")) > lists, timeout=15,
                 what="the pool re-listed after SIGHUP")
    time.sleep(1)
    assert slice_writes(env) == writes
    assert d.log().count("event=sharing-unsupported") == 1
    stopped_clean(d)


def test_two_claims_share_one_nic(env, validator):  # noqa: F811
    """Two claims, each with a share of mlx5_0: both prepared, each with its own CDI device
    (the share ID in its name) and share_id in the answer; a claim of the whole device is
    still refused while shares are prepared; a restart answers from the checkpoint; the
    unprepare of one share leaves the other."""
    d = start(env)
    c1, (s1,) = shared_claim(env, "share1", [("nic", MLX5_0)])
    c2, (s2,) = shared_claim(env, "share2", [("nic", MLX5_0)])
    r1 = env.kubelet.prepare([c1])
    r2 = env.kubelet.prepare([c2])
    a1, a2 = r1.claims[uid(c1)], r2.claims[uid(c2)]
    assert not a1.error and not a2.error
    assert [(x.device_name, x.share_id) for x in a1.devices] == [(MLX5_0, s1)]
    assert [(x.device_name, x.share_id) for x in a2.devices] == [(MLX5_0, s2)]
    id1, id2 = a1.devices[0].cdi_device_ids[0], a2.devices[0].cdi_device_ids[0]
    assert id1 == "rdma-dp.io/claim=%s-%s-%s" % (uid(c1), MLX5_0, s1)
    assert id2 == "rdma-dp.io/claim=%s-%s-%s" % (uid(c2), MLX5_0, s2)
    spec1 = env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid(c1))
    spec2 = env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid(c2))
    rc, res = validate(validator, spec1, spec2, dir=env.cdi_dir)
    assert rc == 0, json.dumps(res, indent=2)
    # each share's CDI device, and each claim's request device (its variables, dra-cdi.h)
    req1, req2 = ("rdma-dp.io/claim=%s-req-nic" % uid(x) for x in (c1, c2))
    assert list(a1.devices[0].cdi_device_ids) == [id1, req1]
    assert res["registry"] == {"devices": sorted([id1, id2, req1, req2]), "errors": {}}
    ck = json.loads(env.checkpoint.read_text())["claims"]
    assert ck[uid(c1)]["devices"][0]["share_id"] == s1
    assert ck[uid(c2)]["devices"][0]["share_id"] == s2

    # the device whole (no shareID) is not given while shares of it are prepared
    whole = env.claim("whole", [("nic", NODE, MLX5_0)])
    r = env.kubelet.prepare([whole], check=False)
    assert "prepared for another claim" in r.claims[uid(whole)].error

    # a restart: the same answers from the checkpoint, and a third share is prepared
    stopped_clean(d)
    d = start(env)
    d.wait_log("event=checkpoint-loaded", "claims=2", timeout=10)
    assert env.kubelet.prepare([c1]).claims[uid(c1)] == a1
    c3, (s3,) = shared_claim(env, "share3", [("nic", MLX5_0)])
    a3 = env.kubelet.prepare([c3]).claims[uid(c3)]
    assert not a3.error and a3.devices[0].share_id == s3

    # unprepared one by one: the others' specs and records stay
    env.kubelet.unprepare([c1])
    assert not spec1.exists() and spec2.exists()
    ck = json.loads(env.checkpoint.read_text())["claims"]
    assert sorted(ck) == sorted([uid(c2), uid(c3)])
    assert env.kubelet.prepare([c2]).claims[uid(c2)] == a2
    env.kubelet.unprepare([c2, c3, whole])
    assert json.loads(env.checkpoint.read_text())["claims"] == {}
    assert env.cdi_specs() == []
    stopped_clean(d)


def test_two_shares_of_one_nic_in_one_claim(env):
    """Two requests of one claim, each given a share of mlx5_0: two CDI devices, one per
    share, and one per request with its variables; the HCA once in each NCCL_IB_HCA."""
    d = start(env)
    c, (s1, s2) = shared_claim(env, "two", [("a", MLX5_0), ("b", MLX5_0)])
    a = env.kubelet.prepare([c]).claims[uid(c)]
    assert not a.error
    names = sorted(i for x in a.devices for i in x.cdi_device_ids)
    assert names == sorted(["rdma-dp.io/claim=%s-%s-%s" % (uid(c), MLX5_0, s)
                            for s in (s1, s2)] +
                           ["rdma-dp.io/claim=%s-req-%s" % (uid(c), r) for r in "ab"])
    doc = json.loads((env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid(c))).read_text())
    assert len(doc["devices"]) == 4
    env_of = {x["name"]: x["containerEdits"].get("env") for x in doc["devices"]}
    for r in "ab":
        assert env_of["%s-req-%s" % (uid(c), r)] == [
            "RDMA_DEVICE_%s=mlx5_0:1" % r.upper(), "NCCL_IB_HCA==mlx5_0:1",
            "UCX_NET_DEVICES=mlx5_0:1"], env_of
    env.kubelet.unprepare([c])
    stopped_clean(d)
