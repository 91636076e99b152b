"""The seeds' resource name served by rdma-dp's DRA driver (issue 21, extended resources) on the
real cluster: deploy/dra's DeviceClass rdma-hca-shared-devices-a (extendedResourceName
rdma/hca_shared_devices_a, DRAExtendedResource: GA in 1.37) lets the seeds' pod spec run,
unchanged, on the DRA node; the scheduler makes a claim per pod (one request per container,
pod.status.extendedResourceClaimStatus maps each container to its request) and kubelet hands
each container the CDI devices of its request: RDMA_DEVICE_*, NCCL_IB_HCA and UCX_NET_DEVICES
name only the NIC it got.

The driver, the dgx-h100 fixture node (8 InfiniBand NICs, all vendor 15b3, which the class
selects) and the stand-in GPU plugin (the seeds ask for nvidia.com/gpu too) come from
test_dra.py's module fixture, reused here. No device plugin advertises
rdma/hca_shared_devices_a on the node while these run, which is what makes the scheduler
serve the name by DRA.
"""
import copy

import yaml

import cluster as cl
from test_device_plugin import seed_daemonset as seed_text
from test_dra import (DRIVER, WORKLOAD, apply, by_device_name, checkpoint,  # noqa: F401
                      container_env, container_nodes, delete_pod, dra, spec_file,
                      usable_devices, want_nodes)

RESOURCE = "rdma/hca_shared_devices_a"


def seed_daemonset():
    """Seed 000's DaemonSet as test_device_plugin.py runs it: unchanged, but for the
    /sys/class/infiniband hostPath where this kernel has no such class (said there)."""
    text, note = seed_text("000")
    if note:
        print("\nseed 000: " + note)
    return yaml.safe_load(text)


def pod_from_template(ds, name):
    """A Pod with the DaemonSet's pod spec, unchanged. Not its labels: the DaemonSet controller
    would adopt a pod its selector matches and delete it (one pod per node)."""
    t = copy.deepcopy(ds["spec"]["template"])
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
            "spec": t["spec"]}


def extres_claim(c, pod):
    """(the pod's extendedResourceClaimStatus, its claim)."""
    st = c.get("pod", "-n", "default", pod)["status"].get("extendedResourceClaimStatus")
    assert st, "no extendedResourceClaimStatus on %s" % pod
    return st, c.get("resourceclaim", "-n", "default", st["resourceClaimName"])


def request_of(st, container):
    got = [m["requestName"] for m in st["requestMappings"]
           if m["containerName"] == container and m["resourceName"] == RESOURCE]
    assert len(got) == 1, st
    return got[0]


def var(request):
    return "RDMA_DEVICE_" + request.upper().replace("-", "_")


def ibdev_of(c, claim, request):
    res = [r for r in claim["status"]["allocation"]["devices"]["results"] if r["request"] == request]
    assert len(res) == 1 and res[0]["driver"] == DRIVER and res[0]["pool"] == cl.NODE, res
    return by_device_name(c)[res[0]["device"]]["ibdev"]["string"]


def check_env(env, request, ibdev):
    """The container's variables name its NIC and no other."""
    hca = ibdev + ":1"
    assert env.get(var(request)) == hca, env
    assert env.get("NCCL_IB_HCA") == "=" + hca and env.get("UCX_NET_DEVICES") == hca, env
    others = [k for k in env if k.startswith("RDMA_DEVICE_") and k != var(request)]
    assert not others, env


def wait_running(c, name):
    cl.wait_for("pod " + name, lambda: c.kubectl("get", "pod", "-n", "default", name,
                                                 check=False).returncode == 0, 120, 0.5)
    c.wait_pod("default", name, timeout=180)


def test_seed_pods_get_distinct_nics_through_the_extended_resource(dra):  # noqa: F811
    """The seeds' DaemonSet (000-nccl-test.yaml, image-swapped; see seed_daemonset()) and a
    second pod of its spec: each is scheduled with a claim the scheduler made (class
    rdma-hca-shared-devices-a, one result), the two NICs differ, each container's variables
    name its own NIC. Deleting the pods unprepares and deletes the claims."""
    c = dra
    ds = seed_daemonset()
    assert ds["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][RESOURCE] == 1
    got = {}
    apply(c, [ds, pod_from_template(ds, "extres-b")])
    try:
        cl.wait_for("the seed DaemonSet's pod", lambda: [
            p["metadata"]["name"] for p in c.get("pods", "-n", "default", "-l", "app=nccl-test")["items"]
            if p["metadata"].get("ownerReferences")], 120, 0.5)
        ds_pod = next(p["metadata"]["name"] for p in
                      c.get("pods", "-n", "default", "-l", "app=nccl-test")["items"]
                      if p["metadata"].get("ownerReferences"))
        for name in (ds_pod, "extres-b"):
            wait_running(c, name)
            st, claim = extres_claim(c, name)
            req = request_of(st, "nccl-test")
            spec_req = claim["spec"]["devices"]["requests"]
            assert [(r["name"], r["exactly"]["deviceClassName"], r["exactly"]["count"])
                    for r in spec_req] == [(req, "rdma-hca-shared-devices-a", 1)], spec_req
            ibdev = ibdev_of(c, claim, req)
            check_env(container_env(c, name), req, ibdev)
            assert "NVIDIA_VISIBLE_DEVICES" in container_env(c, name)  # the GPU beside it
            assert spec_file(c, claim["metadata"]["uid"]).exists()
            got[name] = (ibdev, claim["metadata"]["uid"], claim["metadata"]["name"])
        print("\nextended resource: %s" % {k: v[0] for k, v in got.items()})
        assert got[ds_pod][0] != got["extres-b"][0], got
    finally:
        c.kubectl("delete", "daemonset", "-n", "default", "nccl-test", "--wait=true",
                  check=False, timeout=180)
        delete_pod(c, "extres-b")
    for ibdev, uid, name in got.values():
        cl.wait_for("claim %s unprepared" % name, lambda u=uid: not spec_file(c, u).exists(), 90)
        assert uid not in checkpoint(c)
        cl.wait_for("claim %s deleted" % name, lambda n=name: c.kubectl(
            "get", "resourceclaim", "-n", "default", n, check=False).returncode != 0, 90)


def test_two_containers_each_told_only_its_nic(dra):  # noqa: F811
    """One pod, two containers, each with rdma/hca_shared_devices_a: 1 (no claim in the spec):
    one claim of two requests, one per container; kubectl exec in each shows its own NIC's
    char devices and variables naming only that NIC."""
    c = dra
    ctr = {"image": WORKLOAD, "command": ["sleep", "infinity"],
           "resources": {"limits": {RESOURCE: 1}}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "extres-two", "namespace": "default"},
           "spec": {"hostNetwork": True, "terminationGracePeriodSeconds": 1,
                    "containers": [dict(ctr, name="a"), dict(ctr, name="b")]}}
    apply(c, [pod])
    try:
        wait_running(c, "extres-two")
        st, claim = extres_claim(c, "extres-two")
        dev = usable_devices(c)
        seen = {}
        for name in ("a", "b"):
            req = request_of(st, name)
            ibdev = ibdev_of(c, claim, req)
            check_env(container_env(c, "extres-two", container=name), req, ibdev)
            assert container_nodes(c, "extres-two", container=name) == want_nodes(dev, [ibdev])
            seen[name] = (req, ibdev)
        print("\ntwo containers: %s" % seen)
        assert seen["a"][0] != seen["b"][0] and seen["a"][1] != seen["b"][1], seen
    finally:
        delete_pod(c, "extres-two")
