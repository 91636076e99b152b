"""Live events on the real kernel with `periodicUpdateInterval: 300`: a carrier change on the
veth and on the virtio NIC, `rdma link delete` and `add`, and `modprobe -r rdma_rxe` with a
reload each reach kubelet (the stand-in's ListAndWatch stream) within 1 s, so never through
the periodic rescan. The latencies are written to RDP_RESULTS/figures.json.

The kernel sends no uevent for a port state change and the daemon's link watch ignores veth:
the veth carrier test needs the port-state poll (branch h/kernfix, issue 19 item 1)."""
import threading
import time

import pytest

from conftest import SETUP, record, sh, wait_for, port_state
from rdpk import Env
from test_serve import uverbs_of

BOUND_S = 1.0


@pytest.fixture
def watched(rdma_dp):
    e = Env(rdma_dp)
    cfg = e.config([{"resourceName": "solo", "mode": "exclusive",
                     "selectors": {"ifNames": ["vethA", "vethB", "eth0"]}}], periodic=300)
    d = e.daemon(cfg)
    reg = e.kubelet.wait_registered("rdma/solo", units=3, healthy=3)
    yield e, d, reg.client
    e.close()


def health(snap):
    return {u.ID: u.health for u in snap.devices}


def timed(client, action, pred, what, port=None):
    """Runs action(), then waits for a snapshot with pred; records and returns the seconds
    from the action's end to that snapshot. port: a device whose port state the action
    changes: the seconds are counted from the moment its state file changed (polled here every
    5 ms), since the kernel itself may change it later than the command returns (linkwatch
    delays a non-urgent carrier change, e.g. virtio-net's, by up to 1 s); the seconds from the
    command's end are recorded too."""
    before = port_state(port) if port else None
    changed = []

    def watch():
        end = time.monotonic() + 10
        while time.monotonic() < end:
            if port_state(port) != before:
                changed.append(time.monotonic())
                return
            time.sleep(0.005)

    action()
    t0 = time.monotonic()
    th = None
    if port:
        th = threading.Thread(target=watch, daemon=True)
        th.start()
    client.wait_snapshot(lambda s: pred(health(s)), timeout=30)
    t1 = time.monotonic()
    if th:
        th.join(11)
        assert changed, "%s: %s's port state never changed" % (what, port)
        record("event " + what + " (from the command)", round(t1 - t0, 3))
        t0 = min(changed[0], t1)
    dt = t1 - t0
    record("event " + what, round(dt, 3))
    assert dt < BOUND_S, "%s reached kubelet after %.3f s" % (what, dt)
    return dt


def test_virtio_nic_down_and_up(watched):
    _, _, c = watched
    timed(c, lambda: sh("ip", "link", "set", "eth0", "down"),
          lambda h: h.get("rxe2") != "Healthy" and h.get("rxe0") == "Healthy",
          "virtio eth0 down", port="rxe2")
    timed(c, lambda: sh("ip", "link", "set", "eth0", "up"),
          lambda h: h.get("rxe2") == "Healthy", "virtio eth0 up", port="rxe2")


def test_veth_carrier_down_and_up(watched):
    """vethB admin down: vethA loses its carrier (NO-CARRIER) and rxe0's port goes DOWN with
    no event for vethA at all."""
    _, _, c = watched
    try:
        timed(c, lambda: sh("ip", "link", "set", "vethB", "down"),
              lambda h: h.get("rxe0") != "Healthy" and h.get("rxe2") == "Healthy",
              "veth carrier down", port="rxe0")
        assert port_state("rxe0") == "DOWN"
        timed(c, lambda: sh("ip", "link", "set", "vethB", "up"),
              lambda h: h.get("rxe0") == "Healthy" and h.get("rxe1") == "Healthy",
              "veth carrier up", port="rxe0")
    finally:
        sh("ip", "link", "set", "vethB", "up")
        sh("sh", SETUP / "routes.sh")


def test_rdma_link_delete_and_add_renumbers(watched):
    """Delete rxe0 and rxe1, add rxe1 first: it gets the lowest free numbers (uverbs0), so the
    Allocate answer after the re-add must name rxe1's current node, not its old one."""
    _, _, c = watched
    old1 = uverbs_of("rxe1")
    timed(c, lambda: sh("rdma", "link", "delete", "rxe0"),
          lambda h: h.get("rxe0") != "Healthy", "rdma link delete")
    sh("rdma", "link", "delete", "rxe1")
    c.wait_snapshot(lambda s: health(s).get("rxe1") != "Healthy", timeout=10)
    timed(c, lambda: sh("rdma", "link", "add", "rxe1", "type", "rxe", "netdev", "vethB"),
          lambda h: h.get("rxe1") == "Healthy", "rdma link add")
    sh("rdma", "link", "add", "rxe0", "type", "rxe", "netdev", "vethA")
    c.wait_snapshot(lambda s: health(s).get("rxe0") == "Healthy", timeout=10)
    now1 = uverbs_of("rxe1")
    assert now1 != old1, (old1, now1)
    paths = {d.container_path for d in c.allocate(["rxe1"]).container_responses[0].devices}
    assert now1 in paths and uverbs_of("rxe0") not in paths, paths


def test_module_unload_and_reload(watched):
    _, _, c = watched
    timed(c, lambda: sh("modprobe", "-r", "rdma_rxe", timeout=60),
          lambda h: all(h.get(d) != "Healthy" for d in ("rxe0", "rxe1", "rxe2")),
          "modprobe -r rdma_rxe")

    def reload():
        sh("modprobe", "rdma_rxe")
        for dev, nd in (("rxe0", "vethA"), ("rxe1", "vethB"), ("rxe2", "eth0")):
            sh("rdma", "link", "add", dev, "type", "rxe", "netdev", nd)
        wait_for(lambda: all(port_state(d) == "ACTIVE" for d in ("rxe0", "rxe1", "rxe2")), 10,
                 "ports ACTIVE")

    timed(c, reload, lambda h: all(h.get(d) == "Healthy" for d in ("rxe0", "rxe1", "rxe2")),
          "modprobe rdma_rxe + rdma link add")
