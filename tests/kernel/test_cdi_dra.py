"""CDI and DRA on the real kernel: `serve --use-cdi` writes a spec whose device nodes exist on
the real /dev with the same major:minor, and whose nodes carry traffic; `rdma-dp dra`
publishes the rxe devices to the API-server stand-in and prepares a claim whose CDI spec's
nodes carry traffic (ibv_rc_pingpong between two claimed devices)."""
import itertools
import json
import os
import pathlib

import pytest

from rdpk import Env, traffic
from test_serve import uverbs_of, ok
import dra_env
from dra_env import DRIVER, NODE

PORTS = itertools.count(18600)


def spec_nodes(edits):
    """[(path, host_path)] of a CDI containerEdits' deviceNodes."""
    return [(n["path"], n.get("hostPath", n["path"])) for n in edits.get("deviceNodes", [])]


def check_nodes_real(nodes, doc_nodes):
    for n in doc_nodes:
        hp = n.get("hostPath", n["path"])
        st = os.stat(hp)
        if "major" in n:
            assert (n["major"], n["minor"]) == (os.major(st.st_rdev), os.minor(st.st_rdev)), n


def test_use_cdi_spec_nodes_are_real(rdma_dp):
    e = Env(rdma_dp)
    try:
        cdi = e.dir / "cdi"
        cdi.mkdir()
        cfg = e.config([{"resourceName": "solo", "mode": "exclusive",
                         "selectors": {"ifNames": ["vethA", "vethB", "eth0"]}}])
        e.daemon(cfg, extra=("--use-cdi", "--cdi-spec-dir", cdi))
        reg = e.kubelet.wait_registered("rdma/solo", units=3, healthy=3)
        specs = list(cdi.iterdir())
        assert len(specs) == 1, specs
        doc = json.loads(specs[0].read_text())
        by_name = {}
        for dev in doc["devices"]:
            nodes = dev["containerEdits"].get("deviceNodes", [])
            check_nodes_real(None, nodes)
            by_name[dev["name"]] = spec_nodes(dev["containerEdits"])
        common = spec_nodes(doc.get("containerEdits", {}))
        check_nodes_real(None, doc.get("containerEdits", {}).get("deviceNodes", []))
        ans = {}
        for unit in ("rxe0", "rxe1"):
            r = reg.client.allocate([unit]).container_responses[0]
            names = [c.name for c in r.cdi_devices]
            assert names, r
            nodes = list(common)
            for n in names:
                nodes += by_name[n.split("=", 1)[1]]
            paths = {p for p, _ in nodes}
            assert uverbs_of(unit) in paths, (unit, paths)
            ans[unit] = nodes
        ok(traffic(ans["rxe1"], ans["rxe0"], "pingpong", next(PORTS)), "pingpong, CDI nodes")
    finally:
        e.close()


@pytest.fixture
def dra(rdma_dp):
    e = dra_env.DraEnv(rdma_dp, None, wipe_delay=2)
    yield e
    e.close()


def test_dra_publishes_rxe_and_claim_carries_traffic(dra):
    after = len(dra.kubelet.registrations)
    d = dra.driver(pathlib.Path("/"))
    dra.kubelet.wait_registered(DRIVER, after=after, timeout=60)
    d.wait_log("event=slices-published", timeout=60)
    slices = dra.api.slices(NODE, DRIVER)
    devs = {x["attributes"]["ibdev"]["string"]: x for s in slices for x in s["spec"]["devices"]}
    assert sorted(devs) == ["rxe0", "rxe1", "rxe2"], sorted(devs)
    for name, x in devs.items():
        a = x["attributes"]
        assert a["linkLayer"] == {"string": "Ethernet"}, a
        assert "resource.kubernetes.io/pciBusID" not in a
    nodes = {}
    for ib in ("rxe0", "rxe1"):
        c = dra.claim("c-" + ib, [("nic", NODE, devs[ib]["name"])])
        uid = c["metadata"]["uid"]
        resp = dra.kubelet.prepare([c])
        ids = [i for x in resp.claims[uid].devices for i in x.cdi_device_ids]
        # the NIC's CDI device (its nodes) and its request's (the request's variables)
        assert sorted(ids) == sorted("rdma-dp.io/claim=%s-%s" % (uid, part)
                                     for part in (devs[ib]["name"], "req-nic")), resp
        spec = json.loads((dra.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid)).read_text())
        n = spec_nodes(spec.get("containerEdits", {}))
        for dev in spec["devices"]:
            check_nodes_real(None, dev["containerEdits"].get("deviceNodes", []))
            n += spec_nodes(dev["containerEdits"])
        paths = {p for p, _ in n}
        assert uverbs_of(ib) in paths, paths
        nodes[ib] = n
    ok(traffic(nodes["rxe1"], nodes["rxe0"], "pingpong", next(PORTS)), "pingpong, DRA claims")
