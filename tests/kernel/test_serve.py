"""`rdma-dp serve` on the real kernel, in both registration modes, shared and exclusive
pools, driven by the kubelet stand-in (tests/integration/kubelet.py): the Allocate answer's
device nodes carry RDMA traffic (ibv_rc_pingpong, ib_write_bw, ib_write_bw -R through rdma_cm)
in a mount namespace holding only those nodes; with one node left out the traffic fails."""
import itertools
import os

import pytest

from rdpk import Env, answer_nodes, traffic

PORTS = itertools.count(18515)
MODES = ["kubelet-sock", "plugins-registry"]


@pytest.fixture
def env(rdma_dp, request):
    e = Env(rdma_dp, mode=getattr(request, "param", "kubelet-sock"))
    yield e
    e.close()


def uverbs_of(dev):
    for v in os.listdir("/sys/class/infiniband_verbs"):
        p = "/sys/class/infiniband_verbs/%s/ibdev" % v
        if os.path.exists(p) and open(p).read().strip() == dev:
            return "/dev/infiniband/" + v
    raise AssertionError("no uverbs for " + dev)


def ok(res, what):
    (src, sout), (crc, cout) = res
    assert src == 0 and crc == 0, "%s: server %s:\n%s\nclient %s:\n%s" % (
        what, src, sout[-2000:], crc, cout[-2000:])


@pytest.mark.parametrize("env", MODES, indirect=True)
def test_shared_pool_answer_carries_traffic(env):
    cfg = env.config([{"resourceName": "soft", "rdmaHcaMax": 4,
                       "selectors": {"ifNames": ["vethA", "vethB"]}}])
    env.daemon(cfg)
    reg = env.kubelet.wait_registered("rdma/soft", units=4, healthy=4)
    resp = reg.client.allocate([reg.client.latest().devices[0].ID])
    nodes = answer_nodes(resp)
    paths = sorted(c for c, _ in nodes)
    want = sorted([uverbs_of("rxe0"), uverbs_of("rxe1"), "/dev/infiniband/rdma_cm"])
    assert set(want) <= set(paths), paths
    assert all(p.startswith("/dev/infiniband/") for p in paths)
    tools = ("pingpong", "write_bw", "write_bw_cm") if env.mode == "kubelet-sock" else ("pingpong",)
    for tool in tools:
        ok(traffic(nodes, nodes, tool, next(PORTS)), tool)
    if env.mode != "kubelet-sock":
        return  # the nodes are the same whichever way the plugin registered
    # one node left out: verbs without the device's uverbs, rdma_cm without rdma_cm
    no_uv = [n for n in nodes if n[0] != uverbs_of("rxe1")]
    (src, sout), _ = traffic(no_uv, nodes, "pingpong", next(PORTS))
    assert src != 0, sout
    no_cm = [n for n in nodes if n[0] != "/dev/infiniband/rdma_cm"]
    (src, sout), (crc, _) = traffic(no_cm, no_cm, "write_bw_cm", next(PORTS))
    assert src != 0 or crc != 0, sout
    # without the cm node, plain verbs traffic still works (the answer's nodes are minimal)
    ok(traffic(no_cm, no_cm, "pingpong", next(PORTS)), "pingpong without rdma_cm")


@pytest.mark.parametrize("env", MODES, indirect=True)
def test_exclusive_pool_each_unit_is_its_device(env):
    cfg = env.config([{"resourceName": "solo", "mode": "exclusive",
                       "selectors": {"ifNames": ["vethA", "vethB", "eth0"]}}])
    env.daemon(cfg)
    reg = env.kubelet.wait_registered("rdma/solo", units=3, healthy=3)
    ids = sorted(d.ID for d in reg.client.latest().devices)
    assert ids == ["rxe0", "rxe1", "rxe2"], ids
    a = answer_nodes(reg.client.allocate(["rxe0"]))
    b = answer_nodes(reg.client.allocate(["rxe1"]))
    pa = {c for c, _ in a}
    pb = {c for c, _ in b}
    assert uverbs_of("rxe0") in pa and uverbs_of("rxe1") not in pa, pa
    assert uverbs_of("rxe1") in pb and uverbs_of("rxe0") not in pb, pb
    # the client holds rxe0's unit, the server rxe1's: traffic between the two pods
    ok(traffic(b, a, "pingpong", next(PORTS)), "pingpong between two exclusive units")
    if env.mode != "kubelet-sock":
        return
    ok(traffic(b, a, "write_bw_cm", next(PORTS)), "ib_write_bw -R between two exclusive units")
    # the client pod's view lacks rxe1: it cannot open it
    (src, sout), (crc, cout) = traffic(a, a, "pingpong", next(PORTS))
    assert src != 0, sout
