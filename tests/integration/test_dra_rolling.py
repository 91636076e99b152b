# SPDX-License-Identifier: MIT
"""Two `rdma-dp dra` instances side by side, as during a DaemonSet update with maxSurge
(issue 21, point 7; src/dra/dra-instance.h), against the kubelet stand-in (dra_kubelet.py:
kubelet 1.33+ keeps every registered instance of a driver, one per endpoint, calls the newest
connected one, and wipes the slices only when none is left) and the fake API server.

Covered: per-pod socket names (--rolling-update-uid, $POD_UID); both registered at once;
prepare through either, the one checkpoint shared (a claim prepared by one is known to the
other, a device held through one is refused through the other); prepare waits for the lock
between instances; the old one leaves on SIGTERM (its sockets removed, no slice deleted, no
wipe pending) and the new one keeps serving, unpreparing what the old one prepared; the
sockets of a killed instance removed by the next one."""
import fcntl
import json
import os
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dra_env  # noqa: E402
import dra_kubelet  # noqa: E402
import kubelet as kl  # noqa: E402
from dra_env import DRIVER, NODE  # noqa: E402

MLX5_0 = "pci-0000-18-00-0"
MLX5_3 = "pci-0000-40-00-0"
UID_OLD = "11111111-aaaa-4bbb-8ccc-000000000001"
UID_NEW = "22222222-aaaa-4bbb-8ccc-000000000002"
UID_NEXT = "33333333-aaaa-4bbb-8ccc-000000000003"


@pytest.fixture
def env(rdma_dp, fixtures_dir):
    e = dra_env.DraEnv(rdma_dp, fixtures_dir, wipe_delay=2)
    yield e
    e.close()


def start(env, uid, how="flag"):
    after = len(env.kubelet.registrations)
    if how == "flag":
        d = env.driver("dgx-h100", extra=("--rolling-update-uid=" + uid,))
    else:  # $POD_UID, as the DaemonSet sets it from the downward API
        old = os.environ.get("POD_UID")
        os.environ["POD_UID"] = uid
        try:
            d = env.driver("dgx-h100")
        finally:
            if old is None:
                del os.environ["POD_UID"]
            else:
                os.environ["POD_UID"] = old
    p = env.kubelet.wait_registered(DRIVER, after=after, timeout=30)
    d.wait_log("event=slices-published", timeout=30)
    return d, p


def call(env, plugin, method, claims):
    """NodePrepareResources / NodeUnprepareResources on one given instance (kubelet would
    call the newest connected one)."""
    pb = env.kubelet.pb
    req_cls, resp_cls = ((pb.NodePrepareResourcesRequest, pb.NodePrepareResourcesResponse)
                         if method == "NodePrepareResources" else
                         (pb.NodeUnprepareResourcesRequest, pb.NodeUnprepareResourcesResponse))
    fn = kl.stub(plugin.channel, dra_kubelet.SERVICE_PATH["v1.DRAPlugin"] + method, req_cls,
                 resp_cls)
    return fn(req_cls(claims=[dra_kubelet._claim_msg(pb, c) for c in claims]), timeout=45)


def uid_of(c):
    return c["metadata"]["uid"]


def stopped_clean(d):
    assert d.stop() == 0, d.log()[-3000:]
    log = d.log()
    assert "ERROR: AddressSanitizer" not in log and "runtime error" not in log, log[-3000:]


def test_two_instances_side_by_side(env):
    reg = env.root / "plugins_registry"
    plug = env.root / "plugins" / DRIVER
    old, p_old = start(env, UID_OLD)
    assert p_old.endpoint == str(plug / ("dra-%s.sock" % UID_OLD))
    assert p_old.socket == str(reg / ("%s-%s-reg.sock" % (DRIVER, UID_OLD)))
    slices = sorted(s["metadata"]["name"] for s in env.api.slices(NODE, DRIVER))
    c1 = env.claim("c1", [("nic", NODE, MLX5_0)])
    r1 = env.kubelet.prepare([c1])  # through the only one
    assert json.loads(env.checkpoint.read_text())["claims"][uid_of(c1)]["state"] == "prepared"

    # the new pod's instance ($POD_UID), beside the old one
    new, p_new = start(env, UID_NEW, how="env")
    assert p_new.endpoint == str(plug / ("dra-%s.sock" % UID_NEW))
    assert sorted(os.listdir(reg)) == sorted("%s-%s-reg.sock" % (DRIVER, u)
                                             for u in (UID_OLD, UID_NEW))
    with env.kubelet.cond:
        assert [p.endpoint for p in env.kubelet.plugins[DRIVER]] == [p_old.endpoint,
                                                                     p_new.endpoint]
    assert env.kubelet.plugin(DRIVER) is p_new  # kubelet calls the newest
    new.wait_log("event=checkpoint-loaded", "claims=1", timeout=10)

    # c1, prepared by the old one: the new one answers it from the shared checkpoint
    reads = len(env.api.requests("GET", "resourceclaims"))
    again = call(env, p_new, "NodePrepareResources", [c1])
    assert again.claims[uid_of(c1)] == r1.claims[uid_of(c1)]
    assert len(env.api.requests("GET", "resourceclaims")) == reads
    new.wait_log("event=claim-prepared", uid_of(c1), "from=checkpoint", timeout=5)

    # c2 through the new one holds mlx5_3: c3 on mlx5_3 through the OLD one is refused
    c2 = env.claim("c2", [("nic", NODE, MLX5_3)])
    call(env, p_new, "NodePrepareResources", [c2])
    c3 = env.claim("c3", [("nic", NODE, MLX5_3)])
    r3 = call(env, p_old, "NodePrepareResources", [c3])
    assert "prepared for another claim, default/c2" in r3.claims[uid_of(c3)].error
    ck = json.loads(env.checkpoint.read_text())["claims"]
    assert sorted(ck) == sorted([uid_of(c1), uid_of(c2)])

    # serialised: while another instance holds serialize.lock, a prepare waits for it
    c4 = env.claim("c4", [("nic", NODE, "pci-0000-4f-00-0")])
    lock = open(plug / "serialize.lock", "r+")
    fcntl.flock(lock, fcntl.LOCK_EX)
    out = {}
    t = threading.Thread(target=lambda: out.update(r=call(env, p_old, "NodePrepareResources",
                                                          [c4])))
    t0 = time.monotonic()
    t.start()
    time.sleep(1.0)
    assert t.is_alive(), "prepare answered while another instance held the lock"
    fcntl.flock(lock, fcntl.LOCK_UN)
    lock.close()
    t.join(30)
    assert not t.is_alive() and time.monotonic() - t0 >= 1.0
    assert out["r"].claims[uid_of(c4)].error == ""
    ck = json.loads(env.checkpoint.read_text())["claims"]
    assert sorted(ck) == sorted([uid_of(c1), uid_of(c2), uid_of(c4)])

    # the old one leaves: its sockets go, kubelet drops it, nothing is wiped or deleted
    deletes = len(env.api.requests("DELETE"))
    stopped_clean(old)
    assert sorted(os.listdir(reg)) == ["%s-%s-reg.sock" % (DRIVER, UID_NEW)]
    assert not (plug / ("dra-%s.sock" % UID_OLD)).exists()
    env.kubelet.wait(lambda: [p.endpoint for p in env.kubelet.plugins.get(DRIVER, [])] ==
                     [p_new.endpoint], timeout=10, what="the old instance deregistered")
    time.sleep(2.5)  # the stand-in's wipe delay
    assert env.kubelet.pending_wipe(DRIVER) is None
    assert not [w for w in env.kubelet.wipes if "spec.driver" in w[1]]
    assert len(env.api.requests("DELETE")) == deletes
    assert sorted(s["metadata"]["name"] for s in env.api.slices(NODE, DRIVER)) == slices

    # the new one serves on: it unprepares what the old one prepared
    env.kubelet.unprepare([c1, c4])
    assert not (env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid_of(c1))).exists()
    assert sorted(json.loads(env.checkpoint.read_text())["claims"]) == [uid_of(c2)]
    env.kubelet.unprepare([c2])
    assert json.loads(env.checkpoint.read_text())["claims"] == {}
    stopped_clean(new)


def test_killed_instance_sockets_removed_by_the_next(env):
    reg = env.root / "plugins_registry"
    plug = env.root / "plugins" / DRIVER
    old, _ = start(env, UID_OLD)
    old.kill()  # SIGKILL: no chance to remove its sockets
    assert (reg / ("%s-%s-reg.sock" % (DRIVER, UID_OLD))).exists()
    new, p_new = start(env, UID_NEXT)
    new.wait_log("event=rolling-update", "stale_removed=2", timeout=10)
    assert sorted(os.listdir(reg)) == ["%s-%s-reg.sock" % (DRIVER, UID_NEXT)]
    assert sorted(x for x in os.listdir(plug) if x.endswith(".sock")) == [
        "dra-%s.sock" % UID_NEXT]
    stopped_clean(new)


def test_bad_uid_is_refused(env, rdma_dp):
    import subprocess
    r = subprocess.run(env.args("dgx-h100", extra=("--rolling-update-uid=../etc",)),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--rolling-update-uid" in r.stderr, r.stderr


def test_no_uid_keeps_the_fixed_names(env):
    after = len(env.kubelet.registrations)
    d = env.driver("dgx-h100", extra=("--rolling-update-uid=",))
    p = env.kubelet.wait_registered(DRIVER, after=after, timeout=30)
    assert p.endpoint == str(env.root / "plugins" / DRIVER / "dra.sock")
    assert os.listdir(env.root / "plugins_registry") == ["%s-reg.sock" % DRIVER]
    stopped_clean(d)
