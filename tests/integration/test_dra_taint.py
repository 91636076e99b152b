# SPDX-License-Identifier: MIT
"""Device taints on port down (issue 21): a device whose ports are all down is published with
the taint <driver>/port-down (effect NoSchedule unless --port-down-taint-effect says otherwise),
untainted when a port comes back, each within about 1 s of the port's change; and the slice
comparison owns its fields only, so that what the API server adds (the defaulted timeAdded,
fields of a newer API) never makes the driver write again.

Driven against the fake API server (fake_apiserver.py: SetDefaults_DeviceTaint's timeAdded,
validateDeviceTaint, the gate off dropping taints) and the kubelet stand-in, on a private copy
of the dgx-h100 fixture node whose port states sysfsgen edits."""
import os
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import dra_env  # noqa: E402
import sysfsgen  # noqa: E402
from dra_env import DRIVER, NODE  # noqa: E402

MLX5_0 = "pci-0000-18-00-0"  # dgx-h100 mlx5_0 (0000:18:00.0), one InfiniBand port
KEY = DRIVER + "/port-down"
RESYNC = 10  # RDP_DRA_RESYNC_USEC


@pytest.fixture
def env(rdma_dp, fixtures_dir):
    e = dra_env.DraEnv(rdma_dp, fixtures_dir, wipe_delay=2, kubelet_version="1.37")
    e.node_copy = e.dir / "node"
    sysfsgen.copy_node(fixtures_dir / "dgx-h100", e.node_copy)
    yield e
    e.close()


def start(env, extra=()):
    d = env.driver(env.node_copy, extra=extra)
    env.kubelet.wait_registered(DRIVER, timeout=30)
    d.wait_log("event=slices-published", timeout=30)
    return d


def writes(env):
    return [e for e in env.api.log if e["method"] in ("POST", "PUT", "DELETE") and
            "/resourceslices" in e["path"]]


def taints(env, device=MLX5_0):
    return env.api.devices(NODE, DRIVER)[device].get("taints")


def set_state(env, state):
    sysfsgen.set_port_state(env.node_copy / "sys", "mlx5_0", 1, state)
    return time.monotonic()


def stopped_clean(d):
    assert d.stop() == 0, d.log()[-3000:]
    log = d.log()
    assert "ERROR: AddressSanitizer" not in log and "runtime error" not in log, log[-3000:]


def test_port_down_taints_then_untaints_within_1s_and_no_write_loop(env):
    d = start(env)
    devs = env.api.devices(NODE, DRIVER)
    assert len(devs) > 1 and not any(v.get("taints") for v in devs.values())
    n0 = len(writes(env))

    # mlx5_0's only port goes down: tainted, the API server stamps timeAdded
    t0 = set_state(env, "DOWN")
    env.api.wait(lambda: taints(env), 10, "the port-down taint")
    took = time.monotonic() - t0
    print("took %.3f s" % took)
    assert took < 1.5, took
    (t,) = taints(env)
    assert t["key"] == KEY and t["effect"] == "NoSchedule" and "value" not in t, t
    assert t["timeAdded"].endswith("Z"), t
    others = {k: v for k, v in env.api.devices(NODE, DRIVER).items() if k != MLX5_0}
    assert not any(v.get("taints") for v in others.values())
    assert [e["method"] for e in writes(env)[n0:]] == ["PUT"]  # one update, in place
    d.wait_log("event=slices-published", "tainted=1")

    # the stored slice differs from what the driver builds (timeAdded): a resync and more
    # writes nothing, and keeps the server's timeAdded
    rv = env.api.slices(NODE, DRIVER)[0]["metadata"]["resourceVersion"]
    time.sleep(RESYNC + 2)
    assert len(writes(env)) == n0 + 1, writes(env)[n0:]
    assert env.api.slices(NODE, DRIVER)[0]["metadata"]["resourceVersion"] == rv
    assert taints(env) == [t]

    # back up: untainted, one more PUT
    t0 = set_state(env, "ACTIVE")
    env.api.wait(lambda: not taints(env), 10, "no taint")
    took = time.monotonic() - t0
    print("took %.3f s" % took)
    assert took < 1.5, took
    assert [e["method"] for e in writes(env)[n0:]] == ["PUT", "PUT"]
    assert "event=slices-failed" not in d.log()
    stopped_clean(d)


def test_a_device_down_at_start_other_effects(env):
    # INIT is not usable either: tainted from the first slice on
    set_state(env, "INIT")
    d = start(env, extra=("--port-down-taint-effect", "NoExecute"))
    (t,) = taints(env)
    assert t["key"] == KEY and t["effect"] == "NoExecute" and t["timeAdded"], t
    stopped_clean(d)
    env.api.delete_slices()
    d = start(env, extra=("--port-down-taint-effect", "None"))
    assert [x["effect"] for x in taints(env)] == ["None"]
    stopped_clean(d)
    env.api.delete_slices()
    d = start(env, extra=("--port-down-taint-effect", "off"))
    assert not taints(env)
    stopped_clean(d)
    # a port whose state cannot be read is not down
    os.unlink(os.path.join(sysfsgen.ibdev_dir(env.node_copy / "sys", "mlx5_0"), "ports", "1",
                           "state"))
    env.api.delete_slices()
    d = start(env)
    assert not taints(env)
    stopped_clean(d)


def test_bad_effect_is_refused(env):
    r = subprocess.run(env.args(env.node_copy, extra=("--port-down-taint-effect",
                                                      "PreferNoSchedule")),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r
    assert "--port-down-taint-effect" in r.stderr and "NoSchedule" in r.stderr, r.stderr


def test_server_additions_cause_no_update(env):
    """A newer API server adds fields to what it stores (a field of its own on each device, an
    empty list): the comparison owns its fields only, so no write follows."""
    d = start(env)
    with env.api._lock:
        for s in env.api._slices.values():
            for dev in s["spec"]["devices"]:
                dev["bindingConditions"] = []
                dev["futureField"] = {"x": 1}
    n0 = len(writes(env))
    time.sleep(RESYNC + 2)
    assert writes(env)[n0:] == []
    # the driver's own field changed under it: repaired at the next resync
    with env.api._lock:
        for s in env.api._slices.values():
            s["spec"]["devices"][0]["attributes"]["rdma"] = {"bool": False}
    env.api.wait(lambda: len(writes(env)) > n0, RESYNC + 5, "the repair")
    time.sleep(1)
    assert [e["method"] for e in writes(env)[n0:]] == ["PUT"]
    stopped_clean(d)


def test_server_dropping_taints_is_no_write_loop(env):
    """An API server with DRADeviceTaints off (1.33-1.35 by default) drops the taints it is
    given: the driver sees it on the read-back, says so once and publishes without them."""
    env.api.device_taints = False
    d = start(env)
    n0 = len(writes(env))
    set_state(env, "DOWN")
    d.wait_log("event=taints-dropped", timeout=10)
    time.sleep(RESYNC + 2)
    assert [e["method"] for e in writes(env)[n0:]] == ["PUT"], writes(env)[n0:]
    assert not taints(env)
    assert d.count("event=taints-dropped") == 1
    assert "event=slices-failed" not in d.log()
    stopped_clean(d)
