"""Shared NICs by consumable capacity on the real cluster (issue 21, KEP-5075): deploy/dra with
`--sharing=capacity --share-slots=3` (test_dra.py's overlay plus those two arguments), and the
1.37.2 API server (DRAConsumableCapacity beta, on), scheduler and kubelet.

  * the pool as the server stores it: every device with allowMultipleAllocations and the
    "slots" capacity, kept as written (no write at the next resync);
  * one NIC (mlx5_3, selected by a CEL selector) given to 3 pods, each through a claim of its
    own (a ResourceClaimTemplate), each claim with a share of the device (shareID) and one slot
    consumed; the 4th pod stays Pending, Unschedulable, until one of the 3 goes; every running
    pod has exactly mlx5_3's char devices; each share has its own CDI device and checkpoint
    entry, and the unprepare of one leaves the others.
On 1.34/1.35 (RDP_K8S_BIN of 1.34.4: the gate alpha, off) those two skip, and instead: the API
server drops allowMultipleAllocations and the request policy, and the driver says so once and
publishes as --sharing=claim, with no write at the next resync.
"""
import json
import re
import time

import pytest

import cluster as cl
import test_dra as td

SLOTS = 3
IBDEV = "mlx5_3"


def overlay(c, memlock):
    d = td.overlay(c, memlock, name="dra-capacity")
    k = json.loads((d / "kustomization.yaml").read_text())
    patch = json.loads(k["patches"][0]["patch"])
    ct = "/spec/template/spec/containers/0"
    patch += [{"op": "add", "path": ct + "/args/-", "value": "--sharing=capacity"},
              {"op": "add", "path": ct + "/args/-", "value": "--share-slots=%d" % SLOTS}]
    k["patches"][0]["patch"] = json.dumps(patch)
    (d / "kustomization.yaml").write_text(json.dumps(k, indent=1) + "\n")
    return d


def gate_on(c):
    """DRAConsumableCapacity on by default: Kubernetes 1.36+ (kubelet --version's minor)."""
    m = re.search(r"v1\.(\d+)\.", c.versions()["kubernetes"])
    return bool(m) and int(m.group(1)) >= 36


@pytest.fixture(scope="module")
def dracap(cluster):
    c = cluster
    before = c.node_fixture
    if c.node_fixture != td.FIXTURE:
        cl.swap_node(c, td.FIXTURE)
    memlock, c.dra_memlock = td.memlock_value()
    c.kubectl("apply", "-k", overlay(c, memlock))
    cl.wait_for("the rdma-dp-dra pod Ready", lambda: td.driver_ready(c), 180, 0.5)
    if gate_on(c):
        cl.wait_for("the pool published with capacity",
                    lambda: td.published(c) and all(d.get("allowMultipleAllocations")
                                                    for s in td.published(c)
                                                    for d in s["spec"]["devices"]), 60, 0.5)
    else:
        cl.wait_for("the driver back to claim sharing",
                    lambda: "event=sharing-unsupported" in td.driver_log(c), 60, 0.5)
    yield c
    for kind in ("pod", "resourceclaim", "resourceclaimtemplate"):
        c.kubectl("delete", kind, "-n", "default", "--all", "--grace-period=1", "--wait=true",
                  check=False, timeout=180)
    c.kubectl("delete", "-k", overlay(c, memlock), "--wait=true", check=False, timeout=180)
    if c.node_fixture != before:
        cl.swap_node(c, before)


def test_older_api_server_falls_back_to_claim_sharing(dracap):
    """1.34/1.35 (the gate alpha, off): the API server drops allowMultipleAllocations and the
    request policy; the driver says so once and publishes as --sharing=claim, with no write at
    the next resync."""
    c = dracap
    if gate_on(c):
        pytest.skip("DRAConsumableCapacity is on: " + c.versions()["kubernetes"])
    cl.wait_for("the pool as for claim sharing", lambda: td.published(c) and not any(
        "capacity" in d or "allowMultipleAllocations" in d
        for s in td.published(c) for d in s["spec"]["devices"]), 60, 0.5)
    rv = [x["metadata"]["resourceVersion"] for x in td.published(c)]
    time.sleep(11)
    assert [x["metadata"]["resourceVersion"] for x in td.published(c)] == rv
    assert td.driver_log(c).count("event=sharing-unsupported") == 1


def test_pool_published_with_capacity(dracap):
    c = dracap
    if not gate_on(c):
        pytest.skip("DRAConsumableCapacity is off: " + c.versions()["kubernetes"])
    s = td.published(c)
    devs = {d["name"]: d for x in s for d in x["spec"]["devices"]}
    assert sorted(d["attributes"]["ibdev"]["string"] for d in devs.values()) == \
        sorted(td.usable_devices(c))
    d = devs[td.MLX5_3]
    assert d["allowMultipleAllocations"] is True
    assert d["capacity"] == {"slots": {"value": str(SLOTS), "requestPolicy": {
        "default": "1", "validRange": {"min": "1"}}}}
    # as the server stored it: nothing to write at the next 10 s resync
    rv = [x["metadata"]["resourceVersion"] for x in s]
    syncs = td.driver_log(c).count("event=slices-sync")
    time.sleep(11)
    assert [x["metadata"]["resourceVersion"] for x in td.published(c)] == rv
    assert td.driver_log(c).count("event=slices-sync") == syncs, td.driver_log(c)[-3000:]
    assert "event=sharing-unsupported" not in td.driver_log(c)


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"hostNetwork": True, "terminationGracePeriodSeconds": 1,
                     "resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "mlx5-3-share"}],
                     "containers": [{"name": "app", "image": td.WORKLOAD,
                                     "command": ["sh", "-c", "exec sleep infinity"],
                                     "resources": {"claims": [{"name": "nic"}]}}]}}


def unschedulable(c, name):
    p = c.get("pod", "-n", "default", name)
    return any(x["type"] == "PodScheduled" and x["status"] == "False" and
               x.get("reason") == "Unschedulable" for x in p.get("status", {}).get("conditions", []))


def test_one_nic_shared_by_pods_up_to_its_capacity(dracap):
    c = dracap
    if not gate_on(c):
        pytest.skip("DRAConsumableCapacity is off: " + c.versions()["kubernetes"])
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "mlx5-3-share", "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [{"name": "nic", "exactly": {
                    "deviceClassName": "rdma-nic-ib", "count": 1,
                    "selectors": [{"cel": {"expression":
                        'device.attributes["%s"].ibdev == "%s"' % (td.DRIVER, IBDEV)}}]}}]}}}}
    names = ["share-%d" % i for i in range(SLOTS + 1)]
    td.apply(c, [template] + [pod(n) for n in names[:SLOTS]])
    for n in names[:SLOTS]:
        c.wait_pod("default", n)
    td.apply(c, [pod(names[SLOTS])])
    cl.wait_for("the 4th pod Unschedulable", lambda: unschedulable(c, names[SLOTS]), 60, 0.5)

    want = td.want_nodes(td.usable_devices(c), [IBDEV])
    shares = {}
    for n in names[:SLOTS]:
        claim = td.pod_claim(c, n, "nic")
        (r,) = claim["status"]["allocation"]["devices"]["results"]
        assert (r["driver"], r["pool"], r["device"]) == (td.DRIVER, cl.NODE, td.MLX5_3), r
        assert r["consumedCapacity"] == {"slots": "1"}, r
        shares[claim["metadata"]["uid"]] = r["shareID"]
        assert td.container_nodes(c, n, "app") == want
        assert td.container_env(c, n, "app")["NCCL_IB_HCA"] == "=%s:1" % IBDEV
    assert len(set(shares.values())) == SLOTS
    ck = td.checkpoint(c)
    for uid, share in shares.items():
        assert ck[uid]["devices"][0]["share_id"] == share
        # the share's CDI device, and the claim's request device (its variables, dra-cdi.h)
        assert ck[uid]["devices"][0]["cdi_ids"] == [
            "rdma-dp.io/claim=%s-%s-%s" % (uid, td.MLX5_3, share), "rdma-dp.io/claim=%s-req-nic" % uid]
        assert td.spec_file(c, uid).exists()
    assert c.get("pod", "-n", "default", names[SLOTS])["spec"].get("nodeName") is None

    # one share goes: its claim is unprepared, the others stay; the 4th pod gets the slot
    first = td.pod_claim(c, names[0], "nic")["metadata"]["uid"]
    td.delete_pod(c, names[0])
    cl.wait_for("the first share unprepared", lambda: first not in td.checkpoint(c), 60, 0.5)
    assert not td.spec_file(c, first).exists()
    for uid in shares:
        if uid != first:
            assert uid in td.checkpoint(c) and td.spec_file(c, uid).exists()
    c.wait_pod("default", names[SLOTS])
    assert td.container_nodes(c, names[SLOTS], "app") == want
