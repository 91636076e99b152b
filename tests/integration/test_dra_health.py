# SPDX-License-Identifier: MIT
"""Device health from `rdma-dp dra` to kubelet (KEP-4680, issue 21 item 2): the
DRAResourceHealth service on dra.sock, v1 (kubelet 1.37) and v1alpha1 (1.34+ with
ResourceHealthStatus, on by default since 1.36), listed in supported_versions; each published
device's health from its ports, a change within 1 s; kubelets of 1.34/1.35 undisturbed.

Driven by the kubelet stand-in (dra_kubelet.py: which service each kubelet version opens, the
stream retried every 5 s, kubelet's Unknown after health_check_timeout_seconds) on a private
copy of the dgx-h100 fixture node, whose port states sysfsgen edits."""
import os
import pathlib
import signal
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import dra_env  # noqa: E402
import sysfsgen  # noqa: E402
from dra_env import DRIVER, NODE  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
MLX5_0 = "pci-0000-18-00-0"  # dgx-h100 mlx5_0 (0000:18:00.0)
ALL_SERVICES = ["v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                "v1alpha1.DRAResourceHealth"]
# The port-state poll (h/kernfix, src/host/portpoll.h) lets a change reach the driver without
# any event; until it is there the tests trigger the rescan with SIGHUP.
PORTPOLL = (REPO / "src" / "host" / "portpoll.h").exists()


def make_env(rdma_dp, fixtures_dir, version, health_gate=None):
    e = dra_env.DraEnv(rdma_dp, fixtures_dir, wipe_delay=2, kubelet_version=version,
                       health_gate=health_gate)
    e.node_copy = e.dir / "node"
    sysfsgen.copy_node(fixtures_dir / "dgx-h100", e.node_copy)
    return e


@pytest.fixture
def env37(rdma_dp, fixtures_dir):
    e = make_env(rdma_dp, fixtures_dir, "1.37")
    yield e
    e.close()


def start(env):
    d = env.driver(env.node_copy)
    p = env.kubelet.wait_registered(DRIVER, timeout=30)
    d.wait_log("event=slices-published", timeout=30)
    return d, p


def latest(p):
    return {(pool, dev): (h, msg) for pool, dev, h, msg in p.health_responses[-1][1]}


def wait_health(env, p, device, health, after=0, timeout=5):
    return env.kubelet.wait(
        lambda: next((t for t, devs in p.health_responses[after:]
                      for pool, dev, h, _ in devs if dev == device and h == health), None),
        timeout, "%s %s" % (device, health))


def stopped_clean(d):
    assert d.stop() == 0, d.log()[-3000:]
    log = d.log()
    assert "ERROR: AddressSanitizer" not in log and "runtime error" not in log, log[-3000:]


def test_1_37_streams_v1_and_a_port_change_within_1s(env37):
    env = env37
    d, p = start(env)
    assert list(p.info.supported_versions) == ALL_SERVICES
    assert p.service == "v1.DRAPlugin"
    assert p.health_service == "v1.DRAResourceHealth"
    env.kubelet.wait(lambda: p.health_responses, 10, "the first health list")
    published = sorted(env.api.devices(NODE, DRIVER))
    first = latest(p)
    assert sorted(dev for _, dev in first) == published
    assert {pool for pool, _ in first} == {NODE}
    assert {h for h, _ in first.values()} == {"Healthy"}
    assert first[(NODE, MLX5_0)][1] == "port 1 ACTIVE"
    with env.kubelet.cond:
        assert all(v[3] == 30 and abs(v[2] - time.time()) < 60 for v in p.health.values())
    assert env.kubelet.device_health(DRIVER, NODE, MLX5_0) == ("Healthy", "port 1 ACTIVE")
    d.wait_log("event=health-stream", "v1.DRAResourceHealth")

    # mlx5_0's only port goes down: Unhealthy, naming the port and its state, within 1 s
    n = len(p.health_responses)
    sysfsgen.set_port_state(env.node_copy / "sys", "mlx5_0", 1, "DOWN")
    t0 = time.monotonic()
    if not PORTPOLL:
        d.signal(signal.SIGHUP)
    t = wait_health(env, p, MLX5_0, "Unhealthy", after=n)
    assert t - t0 < 1.0, t - t0
    now = latest(p)
    assert now[(NODE, MLX5_0)] == ("Unhealthy", "port 1 DOWN")
    assert sorted(dev for _, dev in now) == published  # the complete list, every time
    assert {h for k, (h, _) in now.items() if k[1] != MLX5_0} == {"Healthy"}
    assert env.kubelet.device_health(DRIVER, NODE, MLX5_0) == ("Unhealthy", "port 1 DOWN")
    d.wait_log("event=health-changed", "unhealthy=1")

    # INIT is not usable either; then back to ACTIVE
    n = len(p.health_responses)
    sysfsgen.set_port_state(env.node_copy / "sys", "mlx5_0", 1, "INIT")
    if not PORTPOLL:
        d.signal(signal.SIGHUP)
    env.kubelet.wait(lambda: any(devs and dict(((x[1], (x[2], x[3])) for x in devs))
                                 .get(MLX5_0) == ("Unhealthy", "port 1 INIT")
                                 for _, devs in p.health_responses[n:]), 5, "INIT")
    n = len(p.health_responses)
    sysfsgen.set_port_state(env.node_copy / "sys", "mlx5_0", 1, "ACTIVE")
    t0 = time.monotonic()
    if not PORTPOLL:
        d.signal(signal.SIGHUP)
    t = wait_health(env, p, MLX5_0, "Healthy", after=n)
    assert t - t0 < 1.0, t - t0
    assert p.health_streams == 1 and not p.health_errors  # one stream all along
    stopped_clean(d)


@pytest.mark.skipif(not PORTPOLL, reason="needs the port-state poll (src/host/portpoll.h)")
def test_1_37_port_change_without_any_signal(env37):
    env = env37
    d, p = start(env)
    env.kubelet.wait(lambda: p.health_responses, 10, "the first health list")
    n = len(p.health_responses)
    sysfsgen.set_port_state(env.node_copy / "sys", "mlx5_0", 1, "DOWN")
    t0 = time.monotonic()
    t = wait_health(env, p, MLX5_0, "Unhealthy", after=n)
    assert t - t0 < 1.0, t - t0
    stopped_clean(d)


def test_resent_before_kubelets_timeout(env37):
    """Without any change the list comes again every 10 s (kubelet's timeout is 30 s): a
    device never turns Unknown while the driver runs."""
    env = env37
    d, p = start(env)
    env.kubelet.wait(lambda: p.health_responses, 10, "the first health list")
    n = len(p.health_responses)
    env.kubelet.wait(lambda: len(p.health_responses) > n, 15, "a resend")
    assert env.kubelet.device_health(DRIVER, NODE, MLX5_0)[0] == "Healthy"
    stopped_clean(d)


@pytest.mark.parametrize("version,gate,service", [
    ("1.36", None, "v1alpha1.DRAResourceHealth"),      # gate on by default, listed
    ("1.35", True, "v1alpha1.DRAResourceHealth"),      # alpha gate on: opened regardless
    ("1.35", None, None),                              # gate off: never opened
    ("1.34", None, None),
])
def test_older_kubelets(rdma_dp, fixtures_dir, version, gate, service):
    """1.34/1.35 pick v1.DRAPlugin and ignore the health entries (they are not disturbed);
    with their alpha gate on they open v1alpha1, which is served; 1.36 opens v1alpha1."""
    env = make_env(rdma_dp, fixtures_dir, version, gate)
    try:
        d, p = start(env)
        assert p.service == "v1.DRAPlugin"
        assert p.health_service == service
        assert not env.kubelet.errors
        c = env.claim("c1", [("nic", NODE, MLX5_0)])
        resp = env.kubelet.prepare([c])
        assert not resp.claims[c["metadata"]["uid"]].error
        if service:
            env.kubelet.wait(lambda: p.health_responses, 10, "the first health list")
            assert latest(p)[(NODE, MLX5_0)] == ("Healthy", "port 1 ACTIVE")
            d.wait_log("event=health-stream", service)
        else:
            time.sleep(0.5)
            assert p.health_streams == 0 and "event=health-stream" not in d.log()
        env.kubelet.unprepare([c])
        stopped_clean(d)
    finally:
        env.close()


def test_kubelet_restart_reopens_the_stream(env37):
    env = env37
    d, p = start(env)
    env.kubelet.wait(lambda: p.health_responses, 10, "the first health list")
    after = len(env.kubelet.registrations)
    env.kubelet.restart()
    p2 = env.kubelet.wait_registered(DRIVER, after=after, timeout=30)
    env.kubelet.wait(lambda: p2.health_responses, 10, "the health list after a restart")
    assert {h for h, _ in latest(p2).values()} == {"Healthy"}
    # the old stream's end left nothing behind in the driver
    d.wait_log("event=health-stream", "streams=1", start=0)
    stopped_clean(d)
