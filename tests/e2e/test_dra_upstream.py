"""The checks of upstream's test/e2e_node/dra_test.go (Kubernetes v1.37.2) that apply to a node
driver, run against rdma-dp's DRA driver on the real cluster (deploy/dra, test_dra.py's module
fixture and overlay). Upstream runs them against its test driver with failure injection; here
the real kubelet, scheduler and API server meet rdma-dp as deployed, so the cases that need a
driver that fails on demand (NodePrepareResources timing out or failing, then succeeding) stay
with the stand-ins (tests/integration/test_dra*.py). Mirrored here:

  * "must process pod created when kubelet is not running";
  * "must call NodeUnprepareResources for deleted pod" with a force delete (grace period 0),
    and "... for deleted pod after Kubelet restart" (deleted while kubelet is down);
  * "should reflect device health changes in the Pod's status" (ResourceHealthStatus, beta and
    on by default since 1.36): the port of the claimed NIC goes DOWN in the node's sysfs and
    the pod's allocatedResourcesStatus says Unhealthy, then Healthy again;
  * "should update health to Unknown when plugin stops and recover upon restart", "must be
    removed after plugin unregistration" (the node's slices go once the driver has left), and
    a pod created while no driver serves the node: unschedulable, then Running once the
    driver is back (the scheduler retries when the pool is published again).
"""
import json
import time

import cluster as cl
from test_dra import (apply, by_device_name, checkpoint, delete_pod, dra,  # noqa: F401
                      driver_pods, driver_ready, example, pod_claim, published, results, run_one_nic_pod,
                      slices, spec_file, usable_devices, want_nodes, with_image, container_nodes)


def one_nic_docs(name):
    docs = with_image(example("one-nic.yaml"))
    next(d for d in docs if d["kind"] == "Pod")["metadata"]["name"] = name
    return docs


def force_delete(c, name):
    c.kubectl("delete", "pod", "-n", "default", name, "--grace-period=0", "--force", "--wait=false",
              check=False)


def test_force_deleted_pod_is_unprepared(dra):
    """A pod with a prepared claim force-deleted (grace period 0, the API object gone at once):
    kubelet still tears the sandbox down and calls NodeUnprepareResources; the claim's CDI spec
    and checkpoint entry go."""
    c = dra
    uid, _, _ = run_one_nic_pod(c, "rdma-force-delete")
    force_delete(c, "rdma-force-delete")
    cl.wait_for("the force-deleted pod's claim unprepared",
                lambda: not spec_file(c, uid).exists() and uid not in checkpoint(c), 90, 0.5)


def test_pod_created_while_kubelet_is_down(dra):
    """Upstream's "must process pod created when kubelet is not running": the scheduler
    allocates the claim and binds the pod while kubelet is stopped; the pod stays Pending; the
    kubelet that starts prepares the claim through rdma-dp and runs the pod with its NIC."""
    c = dra
    c.stop("kubelet")
    try:
        apply(c, one_nic_docs("rdma-kubelet-down"))
        claim = cl.wait_for("the claim allocated while kubelet is down", lambda: (
            lambda cl_: cl_ if cl_ and cl_.get("status", {}).get("allocation") else None)(
                pod_claim(c, "rdma-kubelet-down", "nic")), 60, 0.5)
        time.sleep(3)
        assert c.get("pod", "-n", "default", "rdma-kubelet-down")["status"]["phase"] == "Pending"
        assert not spec_file(c, claim["metadata"]["uid"]).exists()
    finally:
        since = cl.utcnow()
        c.start_kubelet()
        cl.wait_for("node Ready, reported by the started kubelet",
                    lambda: c.check_running("kubelet") or c.node_ready(since), 120, 0.5)
    c.wait_pod("default", "rdma-kubelet-down", timeout=180)
    ibdev = by_device_name(c)[results(claim)[0][3]]["ibdev"]["string"]
    assert container_nodes(c, "rdma-kubelet-down") == want_nodes(usable_devices(c), [ibdev])
    delete_pod(c, "rdma-kubelet-down")
    cl.wait_for("unprepared", lambda: not spec_file(c, claim["metadata"]["uid"]).exists(), 60)


def test_pod_deleted_while_kubelet_is_down(dra):
    """Upstream's "must call NodeUnprepareResources for deleted pod after Kubelet restart": the
    pod is force-deleted while kubelet is stopped; the kubelet that starts finds the orphaned
    sandbox, removes it and unprepares the claim (spec and checkpoint entry gone)."""
    c = dra
    uid, _, _ = run_one_nic_pod(c, "rdma-deleted-kubelet-down")
    c.stop("kubelet")
    try:
        force_delete(c, "rdma-deleted-kubelet-down")
        cl.wait_for("the pod object gone", lambda: c.kubectl(
            "get", "pod", "-n", "default", "rdma-deleted-kubelet-down", check=False).returncode != 0, 60, 0.5)
        assert spec_file(c, uid).exists() and uid in checkpoint(c)
    finally:
        since = cl.utcnow()
        c.start_kubelet()
        cl.wait_for("node Ready, reported by the started kubelet",
                    lambda: c.check_running("kubelet") or c.node_ready(since), 120, 0.5)
    cl.wait_for("the orphan's claim unprepared by the started kubelet",
                lambda: not spec_file(c, uid).exists() and uid not in checkpoint(c), 120, 0.5)


def health(c, pod, claim_ref):
    """{resourceID: (health, message)} of the pod's allocatedResourcesStatus entries for
    claim_ref (named "claim:<ref>" or "claim:<ref>/<request>", as kubelet's DRA manager names
    them). kubelet 1.37 (pkg/kubelet/cm/dra/manager.go) names a device by the first CDI ID the
    driver returned for it, and by "<driver>/<pool>/<device>" only for a device without one
    (upstream's test driver returns none): rdma-dp's are "rdma-dp.io/claim=<claim uid>-<device>"."""
    out = {}
    st = c.get("pod", "-n", "default", pod).get("status", {})
    for cs in st.get("containerStatuses", []):
        for rs in cs.get("allocatedResourcesStatus") or []:
            if rs["name"] == "claim:" + claim_ref or rs["name"].startswith("claim:%s/" % claim_ref):
                for r in rs.get("resources") or []:
                    out[r["resourceID"]] = (r.get("health"), r.get("message"))
    return out


def port_state_file(c, ibdev):
    return c.work / "node" / "sys" / "class" / "infiniband" / ibdev / "ports" / "1" / "state"


def test_device_health_in_pod_status(dra):
    """Upstream's "should reflect device health changes in the Pod's status": kubelet 1.37 opens
    rdma-dp's health stream (v1.DRAResourceHealth) and shows the claimed NIC in the container's
    allocatedResourcesStatus as "<driver>/<pool>/<device>": Healthy while its port is ACTIVE,
    Unhealthy with the port's state as message once the port is DOWN in the node's sysfs (the
    driver's port poll sees it), Healthy again when it comes back."""
    c = dra
    uid, ibdev, _ = run_one_nic_pod(c, "rdma-health")
    claim = pod_claim(c, "rdma-health", "nic")
    _, drv, pool, dev = results(claim)[0]
    rid = "rdma-dp.io/claim=%s-%s" % (uid, dev)
    try:
        cl.wait_for("Healthy in the pod's status", lambda: health(c, "rdma-health", "nic").get(rid, (None,))[0]
                    == "Healthy", 60, 0.5)
    except cl.ClusterError as e:
        raise cl.ClusterError("%s (want %s)\n%s" % (e, rid, json.dumps(c.get(
            "pod", "-n", "default", "rdma-health")["status"].get("containerStatuses"), indent=1)))
    state = port_state_file(c, ibdev)
    before = state.read_text()
    try:
        state.write_text("1: DOWN\n")
        t0 = time.monotonic()
        got = cl.wait_for("Unhealthy in the pod's status", lambda: (lambda h: h if h[0] == "Unhealthy" else None)(
            health(c, "rdma-health", "nic").get(rid, (None, None))), 60, 0.25)
        print("\nport DOWN -> Unhealthy in the pod's status: %.1f s (%s)" % (time.monotonic() - t0, got[1]))
        assert got[1] is None or "DOWN" in got[1], got
    finally:
        state.write_text(before)
    cl.wait_for("Healthy again", lambda: health(c, "rdma-health", "nic").get(rid, (None,))[0] == "Healthy", 60, 0.25)
    delete_pod(c, "rdma-health")
    cl.wait_for("unprepared", lambda: not spec_file(c, uid).exists(), 60)


NOWHERE = [{"op": "add", "path": "/spec/template/spec/nodeSelector",
            "value": {"rdma-dp.io/e2e-no-such-node": "true"}}]
ANYWHERE = [{"op": "remove", "path": "/spec/template/spec/nodeSelector"}]


def test_driver_gone_and_back(dra):
    """The DaemonSet kept off the node (a nodeSelector no node matches), with a pod holding a
    prepared claim: the pod runs on; its device turns Unknown in its status (upstream's "should
    update health to Unknown when plugin stops"); the node's slices are removed once the driver
    has left ("must be removed after plugin unregistration"); a pod created then stays
    unschedulable. The DaemonSet back on the node: the pool is published again, the waiting pod
    is scheduled and runs with a NIC, the first pod's device is Healthy again, and both claims
    unprepare."""
    c = dra
    uid, _, cid = run_one_nic_pod(c, "rdma-driver-away")
    claim = pod_claim(c, "rdma-driver-away", "nic")
    rid = "rdma-dp.io/claim=%s-%s" % (uid, results(claim)[0][3])
    cl.wait_for("Healthy", lambda: health(c, "rdma-driver-away", "nic").get(rid, (None,))[0] == "Healthy", 60, 0.5)
    ds = ["-n", "kube-system", "daemonset", "rdma-dp-dra", "--type=json"]
    c.kubectl("patch", *ds, "-p", json.dumps(NOWHERE))
    try:
        cl.wait_for("the driver pod gone", lambda: not driver_pods(c), 120, 0.5)
        t0 = time.monotonic()
        cl.wait_for("Unknown in the pod's status", lambda: health(c, "rdma-driver-away", "nic").get(
            rid, (None,))[0] == "Unknown", 120, 0.5)
        t_unknown = time.monotonic() - t0
        cl.wait_for("the node's slices removed", lambda: not slices(c), 120, 0.5)
        t_wiped = time.monotonic() - t0
        print("\ndriver gone: Unknown after %.1f s, slices removed after %.1f s" % (t_unknown, t_wiped))
        assert c.get("pod", "-n", "default", "rdma-driver-away")["status"]["phase"] == "Running"
        apply(c, one_nic_docs("rdma-before-driver"))
        cl.wait_for("the new pod unschedulable", lambda: any(
            cond["type"] == "PodScheduled" and cond["status"] == "False"
            for cond in c.get("pod", "-n", "default", "rdma-before-driver").get("status", {}).get("conditions", [])),
            60, 0.5)
    finally:
        c.kubectl("patch", *ds, "-p", json.dumps(ANYWHERE))
    cl.wait_for("the driver Ready again", lambda: driver_ready(c), 180, 0.5)
    cl.wait_for("the pool published again", lambda: published(c), 60, 0.5)
    c.wait_pod("default", "rdma-before-driver", timeout=180)
    uid2 = pod_claim(c, "rdma-before-driver", "nic")["metadata"]["uid"]
    assert spec_file(c, uid2).exists()
    cl.wait_for("Healthy again", lambda: health(c, "rdma-driver-away", "nic").get(rid, (None,))[0] == "Healthy", 60, 0.5)
    st = c.get("pod", "-n", "default", "rdma-driver-away")["status"]["containerStatuses"][0]
    assert (st["containerID"], st["restartCount"]) == cid
    for name in ("rdma-driver-away", "rdma-before-driver"):
        delete_pod(c, name)
    cl.wait_for("both claims unprepared", lambda: uid not in checkpoint(c) and uid2 not in checkpoint(c), 60)
