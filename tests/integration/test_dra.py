# SPDX-License-Identifier: MIT
"""`rdma-dp dra` end to end (issue 13), driven by the kubelet stand-in (dra_kubelet.py:
plugin-watcher registration, NodePrepareResources/NodeUnprepareResources on the v1 and
v1beta1 paths with kubelet's reply checks, slice wiping as kubelet does it) against the fake
API server (fake_apiserver.py: HTTPS with a bearer token, the real REST paths, status codes,
and the API server's validation of ResourceSlices), on the fixture nodes.

Covered: registration strings; the node's pool published, owned by the Node, re-published
after kubelet wipes it (at kubelet start, and after the driver was unreachable); claims
prepared through CDI specs the reference CDI library loads, idempotently, from the
checkpoint across a driver restart and after a reboot emptied the CDI directory; errors per
claim; unprepare; an API server that is down for a while; a token rotation."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dra_env  # noqa: E402
from dra_env import DRIVER, NODE  # noqa: E402
from test_cdi_spec import validate, validator  # noqa: E402,F401

REPO = pathlib.Path(__file__).resolve().parents[2]
MLX5_0 = "pci-0000-18-00-0"  # dgx-h100 mlx5_0 (0000:18:00.0)
MLX5_3 = "pci-0000-40-00-0"  # dgx-h100 mlx5_3 (0000:40:00.0)


@pytest.fixture
def env(rdma_dp, fixtures_dir):
    e = dra_env.DraEnv(rdma_dp, fixtures_dir, wipe_delay=2)
    yield e
    e.close()


def start(env, fixture="dgx-h100", extra=()):
    """Starts the driver and waits for ITS registration (after any earlier driver's) and its
    pool."""
    after = len(env.kubelet.registrations)
    d = env.driver(fixture, extra=extra)
    env.kubelet.wait_registered(DRIVER, after=after, timeout=30)
    d.wait_log("event=slices-published", timeout=30)
    return d


def pool_devices(env):
    return sorted(env.api.devices(NODE, DRIVER))


def discover_usable(rdma_dp, fixtures_dir, node):
    out = subprocess.run([str(rdma_dp), "discover", "--sysfs-root",
                          str(fixtures_dir / node / "sys"), "--dev-root",
                          str(fixtures_dir / node / "dev"), "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    return [d for d in json.loads(out)["devices"] if d["usable"]]


def stopped_clean(d):
    assert d.stop() == 0, d.log()[-3000:]
    log = d.log()
    assert "ERROR: AddressSanitizer" not in log and "runtime error" not in log, log[-3000:]


# ---------------------------------------------------------------------------------------------
def test_registers_and_publishes_the_pool(env, rdma_dp, fixtures_dir):
    d = start(env)
    p = env.kubelet.plugin(DRIVER)
    assert p.info.type == "DRAPlugin" and p.info.name == DRIVER
    # DRAPlugin first (kubelet 1.34+ takes the first it supports), then DRAResourceHealth in
    # kubelet 1.37's order of preference (test_dra_health.py)
    assert list(p.info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin",
                                               "v1.DRAResourceHealth",
                                               "v1alpha1.DRAResourceHealth"]
    assert p.info.endpoint == str(env.root / "plugins" / DRIVER / "dra.sock")
    assert p.service == "v1.DRAPlugin"
    slices = env.api.slices(NODE, DRIVER)
    assert len(slices) == 1
    s = slices[0]
    assert s["metadata"]["name"].startswith("node-a-rdma.rdma-dp.io-000-")
    assert s["metadata"]["ownerReferences"] == [{
        "apiVersion": "v1", "kind": "Node", "name": NODE, "uid": env.node_uid,
        "controller": True}]
    assert s["spec"]["pool"]["name"] == NODE and s["spec"]["pool"]["resourceSliceCount"] == 1
    usable = discover_usable(rdma_dp, fixtures_dir, "dgx-h100")
    assert len(s["spec"]["devices"]) == len(usable)
    dev = {x["name"]: x for x in s["spec"]["devices"]}[MLX5_0]
    a = dev["attributes"]
    assert a["ibdev"] == {"string": "mlx5_0"}
    assert a["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:15"}
    assert a["resource.kubernetes.io/pciBusID"] == {"string": "0000:18:00.0"}
    assert a["numaNode"] == {"int": 0} and a["linkLayer"] == {"string": "InfiniBand"}
    # the attributes the DeviceClasses of deploy/dra select on are the ones published
    from test_manifests import DRA_ATTRIBUTES
    for x in s["spec"]["devices"]:
        names = set(x["attributes"])
        assert names - {"resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/pciBusID"} \
            <= DRA_ATTRIBUTES, names
        assert {"rdma", "linkLayer", "ibdev"} <= names
    # nothing to do at the next resync: the pool is left as it is
    gen, n = s["spec"]["pool"]["generation"], len(env.api.requests("POST"))
    d.signal(signal.SIGHUP)
    time.sleep(1.0)
    assert env.api.slices(NODE, DRIVER)[0]["spec"]["pool"]["generation"] == gen
    assert len(env.api.requests("POST")) == n
    stopped_clean(d)


def test_empty_node_publishes_an_empty_slice(env):
    d = start(env, "no-rdma")
    slices = env.api.slices(NODE, DRIVER)
    assert len(slices) == 1 and slices[0]["spec"]["devices"] == []
    stopped_clean(d)


def test_big_node_is_split_at_128(env, fixtures_dir):
    d = start(env, "two-socket-vfs")
    slices = env.api.slices(NODE, DRIVER)
    n = sum(len(s["spec"]["devices"]) for s in slices)
    assert all(len(s["spec"]["devices"]) <= 128 for s in slices)
    assert len(slices) == -(-n // 128) or n <= 128
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {len(slices)}
    stopped_clean(d)


def test_split_pool_slices_sort_as_their_devices(env, tmp_path):
    """The 1.36+ allocator sorts a pool's slices by name and takes the first device that fits
    (issue 21, point 8): the slice names carry their index ("<node>-<driver>-NNN-" + the
    server's 5 random characters), so that order is the devices' name order, the driver's
    preference."""
    gen = REPO / "tests" / "fixtures" / "gen-fixtures.py"
    subprocess.run(["/usr/bin/python3", str(gen), "--out", str(tmp_path), "--scale", "300"],
                   check=True, capture_output=True)
    d = start(env, tmp_path / "scale-300")
    slices = env.api.slices(NODE, DRIVER)
    assert len(slices) == 3
    by_name = sorted(slices, key=lambda s: s["metadata"]["name"])
    for i, s in enumerate(by_name):
        assert s["metadata"]["name"].startswith("%s-%s-%03d-" % (NODE, DRIVER, i))
    order = [dev["name"] for s in by_name for dev in s["spec"]["devices"]]
    assert order == sorted(order) and len(order) == 300
    stopped_clean(d)


def test_prepare_unprepare_both_versions(env):
    d = start(env)
    for version in ("v1", "v1beta1"):
        c = env.claim("c-" + version, [("nic", NODE, MLX5_0), ("nic", NODE, MLX5_3)])
        uid = c["metadata"]["uid"]
        resp = env.kubelet.prepare([c], version=version)
        devs = resp.claims[uid].devices
        assert sorted(x.device_name for x in devs) == sorted([MLX5_0, MLX5_3])
        assert all(list(x.request_names) == ["nic"] and x.pool_name == NODE for x in devs)
        ids = [i for x in devs for i in x.cdi_device_ids]
        assert sorted(ids) == sorted("rdma-dp.io/claim=%s-%s" % (uid, n)
                                     for n in (MLX5_0, MLX5_3, "req-nic"))
        # the request's variables once, with the request's first device
        assert list(devs[0].cdi_device_ids)[1:] == ["rdma-dp.io/claim=%s-req-nic" % uid]
        spec = env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid)
        doc = json.loads(spec.read_text())
        assert doc["kind"] == "rdma-dp.io/claim"
        names = {x["name"] for x in doc["devices"]}
        assert names == {"%s-%s" % (uid, MLX5_0), "%s-%s" % (uid, MLX5_3), uid + "-req-nic"}
        ck = json.loads(env.checkpoint.read_text())
        assert ck["claims"][uid]["state"] == "prepared"
        # idempotent: the same answer again, no new read of the claim
        reads = len(env.api.requests("GET", "resourceclaims"))
        again = env.kubelet.prepare([c], version=version)
        assert again.claims[uid] == resp.claims[uid]
        assert len(env.api.requests("GET", "resourceclaims")) == reads
        env.kubelet.unprepare([c], version=version)
        assert not spec.exists()
        assert uid not in json.loads(env.checkpoint.read_text())["claims"]
        env.kubelet.unprepare([c], version=version)  # unknown now: still success
    stopped_clean(d)


def test_errors_are_per_claim(env):
    d = start(env)
    good = env.claim("good", [("nic", NODE, MLX5_0)])
    unknown_dev = env.claim("bad-dev", [("nic", NODE, "pci-0000-ff-00-0")])
    unallocated = env.claim("unalloc", [("nic", NODE, MLX5_3)], allocated=False)
    replaced = dict(env.claim("replaced", [("nic", NODE, MLX5_3)]))
    replaced = {**replaced, "metadata": {**replaced["metadata"], "uid": "0" * 8 + "-dead"}}
    missing = ("default", "no-such-claim", "11111111-2222-3333-4444-555555555555")
    resp = env.kubelet.prepare([good, unknown_dev, unallocated, replaced, missing],
                               check=False)
    assert len(resp.claims) == 5
    assert not resp.claims[good["metadata"]["uid"]].error
    assert "pci-0000-ff-00-0" in resp.claims[unknown_dev["metadata"]["uid"]].error
    assert "not allocated" in resp.claims[unallocated["metadata"]["uid"]].error
    assert "replaced" in resp.claims["0" * 8 + "-dead"].error
    assert "404" in resp.claims[missing[2]].error
    # a device prepared for one claim is refused to another
    other = env.claim("other", [("nic", NODE, MLX5_0)])
    r = env.kubelet.prepare([other], check=False)
    assert "prepared for another claim" in r.claims[other["metadata"]["uid"]].error
    stopped_clean(d)


def test_admin_access_claims_beside_workload_claims(env):
    """DRAAdminAccess (GA in 1.36): the scheduler gives a device in use to an admin-access
    claim (a monitoring pod), and a device an admin claim has to a workload claim. Admin
    results are prepared beside the device's other claims: an admin claim prepared after a
    workload claim and one prepared before another workload claim both succeed; two workload
    claims still exclude each other; a driver restart keeps knowing which is which."""
    d = start(env)
    with pytest.raises(ValueError, match="admin-access"):
        env.claim("mon-unlabelled", [("mon", NODE, MLX5_0)], ns="monitoring", admin=True)
    env.api.label_namespace("monitoring", {env.api.ADMIN_LABEL: "true"})

    def uid(c):
        return c["metadata"]["uid"]

    def ok(resp, c, devices=(MLX5_0,)):
        r = resp.claims[uid(c)]
        assert not r.error, r.error
        assert sorted(x.device_name for x in r.devices) == sorted(devices)
        assert (env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid(c))).exists()

    # a workload claim first, then an admin claim on its device
    w1 = env.claim("w1", [("nic", NODE, MLX5_0)])
    ok(env.kubelet.prepare([w1]), w1)
    a1 = env.claim("mon1", [("mon", NODE, MLX5_0)], ns="monitoring", admin=True)
    ok(env.kubelet.prepare([a1]), a1)
    # two workload claims still exclude each other, admin claim or not
    w2 = env.claim("w2", [("nic", NODE, MLX5_0)])
    r = env.kubelet.prepare([w2], check=False)
    assert "prepared for another claim, default/w1" in r.claims[uid(w2)].error
    ck = json.loads(env.checkpoint.read_text())["claims"]
    assert ck[uid(a1)]["devices"][0]["admin_access"] is True
    assert "admin_access" not in ck[uid(w1)]["devices"][0]
    env.kubelet.unprepare([w1, w2])

    # an admin claim first (a1 still prepared, and a second one), then a workload claim
    a2 = env.claim("mon2", [("mon", NODE, MLX5_0), ("mon", NODE, MLX5_3)], ns="monitoring",
                   admin=True)
    ok(env.kubelet.prepare([a2]), a2, (MLX5_0, MLX5_3))
    w3 = env.claim("w3", [("nic", NODE, MLX5_0), ("nic", NODE, MLX5_3)])
    ok(env.kubelet.prepare([w3]), w3, (MLX5_0, MLX5_3))

    # after a restart, from the checkpoint: w3 still holds its devices, admin claims do not
    stopped_clean(d)
    d = start(env)
    w4 = env.claim("w4", [("nic", NODE, MLX5_3)])
    r = env.kubelet.prepare([w4], check=False)
    assert "prepared for another claim, default/w3" in r.claims[uid(w4)].error
    a3 = env.claim("mon3", [("mon", NODE, MLX5_3)], ns="monitoring", admin=True)
    ok(env.kubelet.prepare([a3]), a3, (MLX5_3,))
    env.kubelet.unprepare([w3])
    ok(env.kubelet.prepare([w4]), w4, (MLX5_3,))
    env.kubelet.unprepare([a1, a2, a3, w4])
    assert json.loads(env.checkpoint.read_text())["claims"] == {}
    assert env.cdi_specs() == []
    stopped_clean(d)


def test_kubelet_restart_wipes_and_driver_republishes(env):
    d = start(env)
    before = pool_devices(env)
    env.kubelet.restart()  # wipes the node's slices at its start, registers the driver again
    env.api.wait(lambda: pool_devices(env) == before, timeout=30, what="slices republished")
    stopped_clean(d)


def test_unreachable_driver_wipe_then_back(env):
    d = start(env)
    before = pool_devices(env)
    d.kill()  # unreachable: the stand-in wipes the driver's slices after 2 s
    env.kubelet.wait_wipe("spec.driver=" + DRIVER, timeout=30)
    assert pool_devices(env) == []
    d2 = start(env)
    env.api.wait(lambda: pool_devices(env) == before, timeout=30, what="slices republished")
    stopped_clean(d2)


def test_driver_restart_keeps_prepared_claims_and_reboot_rewrites_specs(env):
    d = start(env)
    c = env.claim("keep", [("nic", NODE, MLX5_0)])
    uid = c["metadata"]["uid"]
    first = env.kubelet.prepare([c])
    spec = env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid)
    body = spec.read_text()
    stopped_clean(d)
    # a reboot: /var/run/cdi is tmpfs, the spec is gone; the driver starts again
    spec.unlink()
    d2 = start(env)
    d2.wait_log("event=checkpoint-loaded", "claims=1", timeout=10)
    reads = len(env.api.requests("GET", "resourceclaims"))
    again = env.kubelet.prepare([c])
    assert again.claims[uid] == first.claims[uid]
    assert spec.read_text() == body
    assert len(env.api.requests("GET", "resourceclaims")) == reads  # from the checkpoint
    env.kubelet.unprepare([c])
    assert not spec.exists()
    stopped_clean(d2)


def test_api_server_down_for_a_while(env):
    d = start(env)
    env.api.outage("refuse")
    c = env.claim("during", [("nic", NODE, MLX5_0)])
    t = time.monotonic()
    r = env.kubelet.prepare([c], check=False, timeout=45)
    assert time.monotonic() - t < 40  # within kubelet's deadline, as a per-claim error
    assert r.claims[c["metadata"]["uid"]].error
    # slices: the resync fails and backs off; the driver keeps answering kubelet
    d.wait_log("event=slices-failed", timeout=30)
    env.api.outage(None)
    r = env.kubelet.prepare([c])
    assert not r.claims[c["metadata"]["uid"]].error
    env.kubelet.restart()  # a wipe while it was down is repaired once it is back
    env.api.wait(lambda: len(pool_devices(env)) > 0, timeout=40, what="slices back")
    stopped_clean(d)


def test_token_rotation(env):
    d = start(env)
    env.api.rotate_token(grace=0)  # the old token is refused from now on
    c = env.claim("after-rotation", [("nic", NODE, MLX5_0)])
    r = env.kubelet.prepare([c])
    assert not r.claims[c["metadata"]["uid"]].error
    assert env.api.requests("GET", "resourceclaims", 200)
    stopped_clean(d)


def test_cdi_specs_load_in_the_reference_library(env, validator, rdma_dp,  # noqa: F811
                                                 fixtures_dir):
    """The claim's spec, as the daemon wrote it, through the reference CDI library: it loads
    and the registry resolves exactly the IDs kubelet got. (Injection stats the host's nodes,
    which a fixture node's /dev is not: test_dra_cdi.py injects specs rendered with the
    fixture's paths.)"""
    d = start(env)
    c = env.claim("cdi", [("nic", NODE, MLX5_0), ("nic2", NODE, MLX5_3)])
    uid = c["metadata"]["uid"]
    resp = env.kubelet.prepare([c])
    ids = sorted(i for x in resp.claims[uid].devices for i in x.cdi_device_ids)
    spec = env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid)
    rc, res = validate(validator, spec, dir=env.cdi_dir)
    assert rc == 0, json.dumps(res, indent=2)
    assert res["registry"] == {"devices": ids, "errors": {}}
    assert res["specs"][0]["ok"] and res["specs"][0]["kind"] == "rdma-dp.io/claim"
    doc = json.loads(spec.read_text())
    nodes = {n["path"] for dev in doc["devices"]
             for n in dev["containerEdits"].get("deviceNodes", [])}
    char = {x["name"]: x["char_devices"] for x in discover_usable(rdma_dp, fixtures_dir,
                                                                  "dgx-h100")}
    assert nodes == set(char["mlx5_0"]) | set(char["mlx5_3"]), nodes
    top = doc["containerEdits"]
    assert [n["path"] for n in top["deviceNodes"]] == ["/dev/infiniband/rdma_cm"]
    assert "env" not in top
    env_of = {x["name"]: x["containerEdits"].get("env") for x in doc["devices"]}
    assert env_of[uid + "-req-nic"][0] == "RDMA_DEVICE_NIC=mlx5_0:1"
    assert env_of[uid + "-req-nic2"][0] == "RDMA_DEVICE_NIC2=mlx5_3:1"
    stopped_clean(d)


def test_podman_runs_the_claim(env, fixtures_dir, tmp_path):
    """A real runtime consumes what NodePrepareResources answered: podman (as in the CDI
    work: a FROM scratch busybox, the spec dir as its /var/run/cdi, a copy of the fixture's
    /dev whose nodes are harmless 1:3) runs a container with the claim's CDI device IDs. It
    gets exactly the two NICs' char devices and rdma_cm, and the claim's variables from the
    spec."""
    import podman_run as P
    node = P.harmless_node(fixtures_dir, "dgx-h100", tmp_path / "dgx")
    # No memlock hook here (test_memlock.py tests it): the default needs the binary installed
    # at /opt/rdma-dp/bin and CAP_SYS_RESOURCE.
    d = start(env, node, extra=("--memlock-hook", "none"))
    c = env.claim("podman", [("nic", NODE, MLX5_0), ("nic", NODE, "pci-0000-4f-00-0")])
    uid = c["metadata"]["uid"]
    resp = env.kubelet.prepare([c])
    ids = [i for x in resp.claims[uid].devices for i in x.cdi_device_ids]
    r = P.run(cdi_names=ids, cdi_dir=env.cdi_dir, dev_root=node / "dev")
    want = ["/dev/infiniband/%s%d" % (k, n) for n in (0, 2) for k in ("issm", "umad", "uverbs")]
    assert r.nodes == {pathlib.Path(p).name: ("c",) + P.HARMLESS
                       for p in want + ["/dev/infiniband/rdma_cm"]}, r.nodes
    assert r.added_env == {"RDMA_DEVICE_NIC": "mlx5_0:1,mlx5_4:1",
                           "NCCL_IB_HCA": "=mlx5_0:1,mlx5_4:1",
                           "UCX_NET_DEVICES": "mlx5_0:1,mlx5_4:1"}, r.added_env
    stopped_clean(d)


def test_stops_promptly_while_the_api_server_hangs(env):
    """An API server that accepts and never answers holds the workers' requests; SIGTERM still
    ends the driver at once (the requests are cancelled), and kubelet's call in flight gets an
    answer rather than its deadline."""
    import threading
    d = start(env)
    env.api.outage("hang")
    c = env.claim("hung", [("nic", NODE, MLX5_0)])
    out = {}

    def call():
        try:
            out["resp"] = env.kubelet.prepare([c], check=False, timeout=45)
        except Exception as e:  # noqa: BLE001 - the driver may go away before answering
            out["error"] = e
    t = threading.Thread(target=call)
    t.start()
    time.sleep(1.0)
    t0 = time.monotonic()
    stopped_clean(d)
    assert time.monotonic() - t0 < 5
    t.join(10)
    assert not t.is_alive()
    env.api.outage(None)


def test_per_request_cdi_devices_two_containers(env, rdma_dp, fixtures_dir, tmp_path):
    """A claim with two requests, one per container (what the scheduler makes of a pod whose
    two containers each ask for an extended resource, and what a user claim may say): kubelet
    hands each container the CDI IDs of its request (dra_kubelet.container_cdi_ids(), as
    cdiDevicesAsList does), and podman runs each with them. Each container gets only its NIC's
    char devices and variables naming only its NIC; the whole claim gets both."""
    import dra_kubelet
    import podman_run as P
    node = P.harmless_node(fixtures_dir, "dgx-h100", tmp_path / "dgx")
    d = start(env, node, extra=("--memlock-hook", "none"))
    c = env.claim("two", [("container-0-request-0", NODE, MLX5_0),
                          ("container-1-request-0", NODE, MLX5_3)])
    uid = c["metadata"]["uid"]
    resp = env.kubelet.prepare([c])
    char = {x["name"]: {os.path.basename(p) for p in x["char_devices"]}
            for x in discover_usable(rdma_dp, fixtures_dir, "dgx-h100")}
    want = {"container-0-request-0": ("mlx5_0:1", char["mlx5_0"]),
            "container-1-request-0": ("mlx5_3:1", char["mlx5_3"])}
    assert not char["mlx5_0"] & char["mlx5_3"]
    for req, (hca, nodes) in want.items():
        ids = dra_kubelet.container_cdi_ids(resp, uid, req)
        assert len(ids) == 2, ids
        r = P.run(cdi_names=ids, cdi_dir=env.cdi_dir, dev_root=node / "dev")
        var = "RDMA_DEVICE_" + req.upper().replace("-", "_")
        assert r.added_env == {var: hca, "NCCL_IB_HCA": "=" + hca, "UCX_NET_DEVICES": hca}, \
            (req, r.added_env)
        assert set(r.nodes) == nodes | {"rdma_cm"}, r.nodes
    # the whole claim (a container naming the claim without a request): both NICs' nodes and
    # both requests' RDMA_DEVICE_*
    r = P.run(cdi_names=dra_kubelet.container_cdi_ids(resp, uid), cdi_dir=env.cdi_dir,
              dev_root=node / "dev")
    assert set(r.nodes) == char["mlx5_0"] | char["mlx5_3"] | {"rdma_cm"}
    assert r.added_env["RDMA_DEVICE_CONTAINER_0_REQUEST_0"] == "mlx5_0:1"
    assert r.added_env["RDMA_DEVICE_CONTAINER_1_REQUEST_0"] == "mlx5_3:1"
    stopped_clean(d)


def test_claim_prepared_before_per_request_devices_keeps_its_layout(env):
    """A claim an older rdma-dp prepared (its checkpoint answer names NIC IDs only, which
    kubelet keeps) whose spec a reboot removed: written again as it was then, every variable
    top-level over the claim, so the IDs kubelet holds still bring the NICs and variables."""
    d = start(env)
    c = env.claim("old", [("nic", NODE, MLX5_0), ("nic2", NODE, MLX5_3)])
    uid = c["metadata"]["uid"]
    env.kubelet.prepare([c])
    stopped_clean(d)
    ck = json.loads(env.checkpoint.read_text())
    for dev in ck["claims"][uid]["devices"]:
        dev["cdi_ids"] = dev["cdi_ids"][:1]  # what the older driver recorded
    env.checkpoint.write_text(json.dumps(ck))
    spec = env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid)
    spec.unlink()
    d2 = start(env)
    again = env.kubelet.prepare([c])
    ids = [i for x in again.claims[uid].devices for i in x.cdi_device_ids]
    assert ids == ["rdma-dp.io/claim=%s-%s" % (uid, n) for n in (MLX5_0, MLX5_3)]
    doc = json.loads(spec.read_text())
    assert sorted(x["name"] for x in doc["devices"]) == ["%s-%s" % (uid, n)
                                                         for n in (MLX5_0, MLX5_3)]
    env_top = doc["containerEdits"]["env"]
    assert env_top[:2] == ["RDMA_DEVICE_NIC=mlx5_0:1", "RDMA_DEVICE_NIC2=mlx5_3:1"], env_top
    assert any(v.startswith("NCCL_IB_HCA==") for v in env_top), env_top
    env.kubelet.unprepare([c])
    assert not spec.exists()
    stopped_clean(d2)
