"""rdma-dp's DRA driver on the real cluster (issue 20): deploy/dra applied with kubectl apply -k
as shipped, with its RBAC and admission policy, against the real kube-apiserver (validation,
defaulting, Node authorizer, NodeRestriction, the ValidatingAdmissionPolicy), scheduler
(DynamicResources), controller manager (resourceclaim controller) and kubelet (DRA manager,
plugin watcher, pod-resources API), with containerd's CDI.

The test overlay (overlay(), written here) changes only what this machine needs:
  * --sysfs-root: the fixture node's sys/ (a hostPath), since this machine has no RDMA devices;
    --dev-root stays the deployed /host/dev (the node namespace's /dev, whose infiniband/ holds
    the fixture's harmless c 1:3 nodes);
  * KUBERNETES_SERVICE_HOST=127.0.0.1, KUBERNETES_SERVICE_PORT=6443: kubelet injects the
    kubernetes Service's ClusterIP (10.0.0.1:443), which only kube-proxy could route, and this
    cluster has none (127.0.0.1 only); variables set in the spec win over injected ones;
  * the memlock hook: installed into a directory of this run instead of the host's
    /opt/rdma-dp/bin (nothing of the host is written), and the specs name it there
    (--memlock-hook); its value is one the runtime can set here: without CAP_SYS_RESOURCE
    (this machine) a hard limit cannot be raised, so half the current one instead of
    "unlimited" (test_memlock.py's reasoning).
The image is deploy/dra's own (localhost/rdma-dp:0.1.0, imported by the cluster).

The node serves the dgx-h100 fixture while these tests run: 8 InfiniBand NICs each on the PCIe
root of one GPU, 4 RoCE functions on two roots of their own, so "one NIC" and "the NIC on the
GPU's root" have one right answer.

A stand-in for NVIDIA's GPU DRA driver (the GPU-aligned example asks for class gpu.nvidia.com):
its DeviceClass and a ResourceSlice of driver gpu.nvidia.com published with kubectl, and a
kubelet plugin of its own (gpu_dra_plugin.py) that prepares its claims with no CDI devices.
"""
import json
import os
import pathlib
import re
import resource
import subprocess
import time

import pytest
import yaml

import cluster as cl

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "deploy" / "dra" / "examples"
DRIVER = "rdma.rdma-dp.io"
GPU_DRIVER = "gpu.nvidia.com"
FIXTURE = "dgx-h100"
WORKLOAD = "localhost/rdp-workload:1"
CKPT = "/var/lib/kubelet/plugins/%s/checkpoint.json" % DRIVER
# dgx-h100: mlx5_3 (0000:40:00.0) is the only InfiniBand NIC on pci0000:3d (GPU1's root);
# pci0000:28 holds only the RoCE functions mlx5_1/mlx5_2, which rdma-nic-ib does not select.
MLX5_3 = "pci-0000-40-00-0"
ROOT_MLX5_3 = "pci0000:3d"
ROOT_ROCE_ONLY = "pci0000:28"


def memlock_value():
    """--memlock for the claims' specs: unlimited where the runtime may raise a hard limit
    (CAP_SYS_RESOURCE), else half the hard limit containerd's containers inherit (ours)."""
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    if cl._has_cap(24) or hard == resource.RLIM_INFINITY:
        return "unlimited", None
    v = max(4096, (hard // 2) // 4096 * 4096)
    return str(v), v


def overlay(c, memlock, name="dra-fixture-node"):
    """deploy/dra plus the test's changes (module docstring); returns the overlay's directory."""
    d = c.work / "overlays" / name
    d.mkdir(parents=True, exist_ok=True)
    hook = c.work / "dra-hook"
    hook.mkdir(exist_ok=True)
    ct = "/spec/template/spec/containers/0"
    patch = [
        {"op": "add", "path": ct + "/args/-", "value": "--sysfs-root=/host/fixture/sys"},
        {"op": "add", "path": ct + "/args/-", "value": "--memlock=" + memlock},
        {"op": "add", "path": ct + "/args/-", "value": "--memlock-hook=%s/rdma-dp" % hook},
        {"op": "add", "path": ct + "/env/-", "value": {"name": "KUBERNETES_SERVICE_HOST", "value": "127.0.0.1"}},
        {"op": "add", "path": ct + "/env/-", "value": {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}},
        {"op": "add", "path": "/spec/template/spec/volumes/-",
         "value": {"name": "fixture-sys",
                   "hostPath": {"path": str(c.work / "node" / "sys"), "type": "Directory"}}},
        {"op": "add", "path": ct + "/volumeMounts/-",
         "value": {"name": "fixture-sys", "mountPath": "/host/fixture/sys", "readOnly": True}},
        {"op": "test", "path": "/spec/template/spec/volumes/3/name", "value": "hook-bin"},
        {"op": "replace", "path": "/spec/template/spec/volumes/3/hostPath/path", "value": str(hook)},
    ]
    (d / "kustomization.yaml").write_text(json.dumps({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(REPO / "deploy" / "dra", d)],  # kustomize: relative only
        "patches": [{"target": {"kind": "DaemonSet", "name": "rdma-dp-dra"}, "patch": json.dumps(patch)}],
    }, indent=1) + "\n")
    return d


# ------------------------------------------------------------------------------------- helpers
def driver_pods(c):
    return [p for p in c.get("pods", "-n", "kube-system", "-l", "name=rdma-dp-dra")["items"]
            if not p["metadata"].get("deletionTimestamp")]


def driver_ready(c):
    for p in driver_pods(c):
        for cond in p.get("status", {}).get("conditions", []):
            if cond["type"] == "Ready" and cond["status"] == "True":
                return p["metadata"]["name"]
    return None


def driver_log(c):
    name = driver_ready(c) or ([p["metadata"]["name"] for p in driver_pods(c)] or [None])[0]
    return c.kubectl("logs", "-n", "kube-system", name, check=False).stdout if name else ""


def slices(c, driver=DRIVER):
    return [s for s in c.get("resourceslices")["items"] if s["spec"]["driver"] == driver]


def published(c):
    """The pool's slices once complete (every slice of the newest generation present)."""
    s = slices(c)
    if not s:
        return None
    gen = max(x["spec"]["pool"]["generation"] for x in s)
    cur = [x for x in s if x["spec"]["pool"]["generation"] == gen]
    return cur if len(cur) == cur[0]["spec"]["pool"]["resourceSliceCount"] else None


def usable_devices(c):
    """The fixture node's usable RDMA devices, by rdma-dp discover: {ibdev: device}."""
    out = subprocess.run([os.environ["RDMA_DP"], "discover", "--sysfs-root", str(c.work / "node" / "sys"),
                          "--dev-root", str(c.work / "node" / "dev"), "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    return {d["name"]: d for d in json.loads(out)["devices"] if d["usable"]}


def by_device_name(c):
    """{published device name: its attributes} of the pool."""
    return {d["name"]: d["attributes"] for s in published(c) for d in s["spec"]["devices"]}


def exec_out(c, pod, *cmd, container=None):
    args = ["exec", "-n", "default", pod] + (["-c", container] if container else []) + ["--"] + list(cmd)
    return c.kubectl(*args).stdout


def container_nodes(c, pod, container=None):
    out = exec_out(c, pod, "sh", "-c", "ls /dev/infiniband 2>/dev/null; true", container=container)
    return sorted(out.split())


def container_env(c, pod, container=None):
    return dict(kv.split("=", 1) for kv in exec_out(c, pod, "env", container=container).splitlines()
                if "=" in kv)


def container_memlock(c, pod):
    """(soft, hard) RLIMIT_MEMLOCK of the container's process, bytes (None: unlimited). Its
    init process's (PID 1): the hook sets the limit of the process the runtime created; a
    process of kubectl exec (runc exec) starts from the runtime's own limits."""
    for line in exec_out(c, pod, "cat", "/proc/1/limits").splitlines():
        if line.startswith("Max locked memory"):
            f = line.split()
            return tuple(None if v == "unlimited" else int(v) for v in f[3:5])
    raise AssertionError("no memlock line")


def with_image(docs, image=WORKLOAD):
    """The examples' documents with every container's image swapped for the local one (no
    registry is reachable), and hostNetwork where a pod lacks it (the cluster's CNI is
    loopback-only: a pod network's sandbox fails, "failed to find network info"); nothing else
    changed."""
    for d in docs:
        if d["kind"] not in ("Pod", "StatefulSet", "DaemonSet", "Deployment"):
            continue
        spec = d["spec"] if d["kind"] == "Pod" else d["spec"]["template"]["spec"]
        spec["hostNetwork"] = True
        for ct in spec.get("containers", []) + spec.get("initContainers", []):
            ct["image"] = image
    return docs


def example(name):
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def apply(c, docs):
    c.kubectl("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(d) for d in docs))


def pod_claim(c, pod, ref):
    """The ResourceClaim behind the pod's claim reference `ref` (a template's generated one)."""
    p = c.get("pod", "-n", "default", pod)
    for st in p.get("status", {}).get("resourceClaimStatuses", []):
        if st["name"] == ref:
            return c.get("resourceclaim", "-n", "default", st["resourceClaimName"])
    for rc in p["spec"].get("resourceClaims", []):
        if rc["name"] == ref and rc.get("resourceClaimName"):
            return c.get("resourceclaim", "-n", "default", rc["resourceClaimName"])
    return None


def results(claim):
    return [(r["request"], r["driver"], r["pool"], r["device"])
            for r in claim["status"]["allocation"]["devices"]["results"]]


def spec_file(c, uid):
    # /run/cdi, not /var/run/cdi: /var/run is an absolute symlink, which /proc/<pid>/root
    # would resolve against our root, not the node's
    return c.node_path("/run/cdi/rdma-dp.io-claim_%s.json" % uid)


def checkpoint(c):
    try:
        return json.loads(c.node_path(CKPT).read_text()).get("claims", {})
    except FileNotFoundError:
        return {}


def want_nodes(dev_by_ibdev, ibdevs):
    """/dev/infiniband of a container given these NICs: their char devices and rdma_cm."""
    names = {"rdma_cm"}
    for ib in ibdevs:
        names |= {pathlib.Path(p).name for p in dev_by_ibdev[ib]["char_devices"] if p}
    return sorted(names)


def delete_pod(c, name, ns="default"):
    # The workload's sleep is PID 1 and ignores SIGTERM: a short grace period, not the 30 s one.
    c.kubectl("delete", "pod", "-n", ns, name, "--grace-period=1", "--wait=true", "--ignore-not-found",
              timeout=120)


def events_for(c, name):
    return c.get("events", "-n", "default", "--field-selector", "involvedObject.name=" + name)["items"]


# ------------------------------------------------------------------------------------- fixture
@pytest.fixture(scope="module")
def dra(cluster):
    c = cluster
    before = c.node_fixture
    if c.node_fixture != FIXTURE:
        cl.swap_node(c, FIXTURE)
    started_gpu = not c.running("gpu-plugin")
    if started_gpu:  # the seeds' NCCL example asks for nvidia.com/gpu beside its claim
        c.start("gpu-plugin", ["/usr/bin/python3", pathlib.Path(__file__).parent / "gpu_plugin.py"],
                in_node=True)
    memlock, c.dra_memlock = memlock_value()
    t0 = time.monotonic()
    c.kubectl("apply", "-k", overlay(c, memlock))
    cl.wait_for("the rdma-dp-dra pod Ready", lambda: driver_ready(c), 180, 0.5)
    cl.wait_for("the rdma.rdma-dp.io pool published", lambda: published(c), 60, 0.5)
    c.timings["dra_ready"] = time.monotonic() - t0
    print("\ndeploy/dra: driver Ready and pool published %.1f s after apply -k" % c.timings["dra_ready"])
    yield c
    for kind in ("pod", "statefulset", "resourceclaim", "resourceclaimtemplate"):
        c.kubectl("delete", kind, "-n", "default", "--all", "--grace-period=1", "--wait=true",
                  check=False, timeout=180)
    c.kubectl("delete", "-k", overlay(c, memlock), "--wait=true", check=False, timeout=180)
    c.kubectl("delete", "resourceslices", "--field-selector", "spec.driver=" + GPU_DRIVER, check=False)
    c.kubectl("delete", "deviceclass", GPU_DRIVER, "--ignore-not-found", check=False)
    c.stop("gpu-dra-plugin")
    if started_gpu:
        c.stop("gpu-plugin")
    if c.node_fixture != before:
        cl.swap_node(c, before)


# ------------------------------------------------------------------------------------- tests
def test_deploys_and_publishes_the_pool(dra):
    """deploy/dra as shipped reaches Ready on the real cluster (its token, RBAC, the admission
    policy), and the pool is published as upstream's "must manage ResourceSlices" checks: owned
    by the Node (controller, no blockOwnerDeletion), pool == node, the slice count, every usable
    device once, its attributes kept as written by the server's validation and defaulting."""
    c = dra
    pod = c.get("pod", "-n", "kube-system", driver_ready(c))
    assert [ct["image"] for ct in pod["spec"]["containers"] + pod["spec"]["initContainers"]] == \
        ["localhost/rdma-dp:0.1.0"] * 2
    s = published(c)
    node = c.node()
    assert len(s) == 1, s
    md = s[0]["metadata"]
    assert md["name"].startswith("%s-%s-000-" % (cl.NODE, DRIVER)), md["name"]
    assert md["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": cl.NODE,
                                      "uid": node["metadata"]["uid"], "controller": True}]
    spec = s[0]["spec"]
    assert spec["nodeName"] == cl.NODE and spec["driver"] == DRIVER
    assert spec["pool"]["name"] == cl.NODE and spec["pool"]["resourceSliceCount"] == 1
    usable = usable_devices(c)
    devs = {d["name"]: d["attributes"] for d in spec["devices"]}
    assert sorted(a["ibdev"]["string"] for a in devs.values()) == sorted(usable)
    a = devs[MLX5_3]
    assert a["ibdev"] == {"string": "mlx5_3"} and a["linkLayer"] == {"string": "InfiniBand"}
    assert a["resource.kubernetes.io/pcieRoot"] == {"string": ROOT_MLX5_3}
    assert a["resource.kubernetes.io/pciBusID"] == {"string": "0000:40:00.0"}
    # The server's defaulting leaves nothing for the driver's check to find: at its next 10 s
    # resync it writes nothing (the slice's resourceVersion stays, no slices-sync logged).
    rv = md["resourceVersion"]
    syncs = driver_log(c).count("event=slices-sync")
    time.sleep(11)
    assert published(c)[0]["metadata"]["resourceVersion"] == rv
    assert driver_log(c).count("event=slices-sync") == syncs, driver_log(c)[-3000:]
    assert "level=error" not in driver_log(c).lower(), driver_log(c)[-3000:]


def test_admission_policy_limits_slice_writes_to_its_own_node(dra):
    """node-restriction.yaml on the real API server: the driver's identity, with a token bound
    to its pod (so carrying the pod's node-name), may write a slice of its own node and is
    refused one of another node; the same account's token not bound to a pod (no node-name)
    is refused everything."""
    c = dra
    pod = driver_ready(c)
    bound = c.kubectl("create", "token", "rdma-dp-dra", "-n", "kube-system", "--bound-object-kind", "Pod",
                      "--bound-object-name", pod, "--duration", "10m").stdout.strip()
    unbound = c.kubectl("create", "token", "rdma-dp-dra", "-n", "kube-system", "--duration", "10m").stdout.strip()

    def as_driver(token, node, verb="create"):
        # a driver name of its own: the slice is nobody's pool, the driver ignores it
        doc = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
               "metadata": {"name": "vap-probe-" + node.replace(".", "-")},
               "spec": {"driver": "vap-probe.example.com", "nodeName": node,
                        "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}, "devices": []}}
        return subprocess.run([str(c.bin / "kubectl"), "--server", cl.API, "--certificate-authority",
                               str(c.pki / "ca.crt"), "--token", token, verb, "-f", "-"],
                              input=json.dumps(doc), capture_output=True, text=True, timeout=60)

    other = as_driver(bound, "other-node")
    assert other.returncode != 0 and "may write the ResourceSlices of its own node (%s) only" % cl.NODE \
        in other.stderr, other.stderr
    nobody = as_driver(unbound, cl.NODE)
    assert nobody.returncode != 0 and "rdma-dp-dra may write" in nobody.stderr, nobody.stderr
    own = as_driver(bound, cl.NODE)
    assert own.returncode == 0, own.stderr
    gone = as_driver(bound, cl.NODE, "delete")
    assert gone.returncode == 0, gone.stderr
    # the ClusterRole has no claim writes (a watch of slices it has: test_watch_...)
    for verb, res in (("update", "resourceclaims"), ("list", "resourceclaims"),
                      ("get", "secrets")):
        p = c.kubectl("auth", "can-i", verb, res, "--as", "system:serviceaccount:kube-system:rdma-dp-dra",
                      check=False)
        assert p.stdout.strip() == "no", (verb, res, p.stdout)


def test_one_nic_from_a_claim_template(dra):
    """deploy/dra/examples/one-nic.yaml (image swapped): the generated claim is allocated one
    InfiniBand NIC of this pool and reserved for the pod; the container has exactly that NIC's
    char devices and rdma_cm, the claim's variables, the memlock the spec's hook set; kubelet's
    pod-resources API lists the claim's CDI device; a second container that names no claim gets
    none of it (upstream's per-container mapping). Deleting the pod unprepares the claim (spec
    file and checkpoint entry gone) and deletes the generated claim."""
    c = dra
    docs = with_image(example("one-nic.yaml"))
    pod = next(d for d in docs if d["kind"] == "Pod")
    pod["spec"]["containers"].append({"name": "no-claim", "image": WORKLOAD,
                                      "command": ["sh", "-c", "exec sleep infinity"]})
    apply(c, docs)
    c.wait_pod("default", "rdma-one-nic")
    claim = pod_claim(c, "rdma-one-nic", "nic")
    uid = claim["metadata"]["uid"]
    assert claim["metadata"]["ownerReferences"][0]["name"] == "rdma-one-nic"
    res = results(claim)
    assert len(res) == 1 and res[0][:3] == ("nic", DRIVER, cl.NODE), res
    device = res[0][3]
    attrs = by_device_name(c)[device]
    assert attrs["linkLayer"] == {"string": "InfiniBand"}
    ibdev = attrs["ibdev"]["string"]
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["rdma-one-nic"]
    # the container: that NIC, nothing else
    assert container_nodes(c, "rdma-one-nic", "app") == want_nodes(usable_devices(c), [ibdev])
    env = container_env(c, "rdma-one-nic", "app")
    assert {k: env.get(k) for k in ("RDMA_DEVICE_NIC", "NCCL_IB_HCA", "UCX_NET_DEVICES")} == \
        {"RDMA_DEVICE_NIC": ibdev + ":1", "NCCL_IB_HCA": "=%s:1" % ibdev, "UCX_NET_DEVICES": ibdev + ":1"}
    if c.dra_memlock:
        assert container_memlock(c, "rdma-one-nic") == (c.dra_memlock, c.dra_memlock)
    assert container_nodes(c, "rdma-one-nic", "no-claim") == []
    assert not any(k.startswith(("RDMA_DEVICE_", "NCCL_IB_HCA", "UCX_NET"))
                   for k in container_env(c, "rdma-one-nic", "no-claim"))
    # kubelet's record: pod-resources Get
    pr = cl.podresources_pb2()
    got = cl.podresources(c, "Get", pr.GetPodResourcesRequest(pod_name="rdma-one-nic", pod_namespace="default"))
    dyn = {ct.name: [(d.claim_name, d.claim_namespace,
                      [(r.driver_name, r.pool_name, r.device_name, sorted(x.name for x in r.cdi_devices))
                       for r in d.claim_resources]) for d in ct.dynamic_resources]
           for ct in got.pod_resources.containers}
    # the NIC's CDI device (its nodes) and its request's (the request's variables: dra-cdi.h)
    assert dyn == {"app": [(claim["metadata"]["name"], "default",
                            [(DRIVER, cl.NODE, device, sorted(["rdma-dp.io/claim=%s-%s" % (uid, device),
                                                               "rdma-dp.io/claim=%s-req-nic" % uid]))])],
                   "no-claim": []}, dyn
    assert spec_file(c, uid).exists()
    assert checkpoint(c)[uid]["state"] == "prepared"
    # the pod goes: unprepared, and the generated claim deleted
    delete_pod(c, "rdma-one-nic")
    cl.wait_for("the claim's CDI spec removed", lambda: not spec_file(c, uid).exists(), 60)
    assert uid not in checkpoint(c)
    cl.wait_for("the generated claim deleted", lambda: c.kubectl(
        "get", "resourceclaim", "-n", "default", claim["metadata"]["name"], check=False).returncode != 0, 60)
    log = driver_log(c)
    assert re.search(r"event=claim-prepared .*%s" % uid, log) and re.search(r"event=claim-unprepared .*%s" % uid, log), \
        log[-3000:]


def test_shared_claim_two_pods(dra):
    """The seeds' NCCL example (deploy/dra/examples/nccl-test-shared.yaml, image swapped): one
    ResourceClaim of every InfiniBand NIC used by the StatefulSet's two pods; both reserve it,
    both containers get all 8 NICs, one CDI spec serves both. When the pods go, upstream's
    "removes reservation from claim when pod is done": reservedFor empties, the claim is
    unprepared, and the claim itself (not generated) stays."""
    c = dra
    apply(c, with_image(example("nccl-test-shared.yaml")))
    for name in ("nccl-a-0", "nccl-a-1"):
        cl.wait_for("pod " + name, lambda n=name: c.kubectl("get", "pod", n, check=False).returncode == 0, 120, 0.5)
        c.wait_pod("default", name, timeout=180)
    claim = c.get("resourceclaim", "-n", "default", "rdma-shared-a")
    uid = claim["metadata"]["uid"]
    ib = sorted(n for n, d in usable_devices(c).items()
                if any(p.get("link_layer") == "infiniband" for p in d["ports"]))
    assert len(ib) == 8, ib
    pool = by_device_name(c)
    got = sorted(pool[r[3]]["ibdev"]["string"] for r in results(claim))
    assert got == ib and {r[:3] for r in results(claim)} == {("hca", DRIVER, cl.NODE)}
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["nccl-a-0", "nccl-a-1"]
    want = want_nodes(usable_devices(c), ib)
    for name in ("nccl-a-0", "nccl-a-1"):
        assert container_nodes(c, name) == want
        env = container_env(c, name)
        assert sorted(env["NCCL_IB_HCA"].lstrip("=").split(",")) == sorted(x + ":1" for x in ib), env
        assert "NVIDIA_VISIBLE_DEVICES" in env  # the GPU stand-in's Allocate, beside the claim
    assert spec_file(c, uid).exists() and list(checkpoint(c)) == [uid]
    c.kubectl("delete", "statefulset", "nccl-a", "--wait=true")
    for name in ("nccl-a-0", "nccl-a-1"):
        delete_pod(c, name)
    cl.wait_for("reservedFor emptied", lambda: not c.get("resourceclaim", "-n", "default", "rdma-shared-a")
                ["status"].get("reservedFor"), 60)
    cl.wait_for("the shared claim unprepared", lambda: not spec_file(c, uid).exists(), 60)
    assert uid not in checkpoint(c)
    claim = c.get("resourceclaim", "-n", "default", "rdma-shared-a")
    assert claim["metadata"]["uid"] == uid
    c.kubectl("delete", "resourceclaim", "rdma-shared-a", "--wait=true")


def gpu_slice(pcie_root):
    """The stand-in GPU driver's slice: one GPU on pcie_root, pool <node>-gpu."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "%s-gpu" % cl.NODE},
            "spec": {"driver": GPU_DRIVER, "nodeName": cl.NODE,
                     "pool": {"name": cl.NODE, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": "gpu-1", "attributes": {
                         "resource.kubernetes.io/pcieRoot": {"string": pcie_root},
                         "productName": {"string": "stand-in"}}}]}}


def test_gpu_aligned_claim(dra):
    """deploy/dra/examples/gpu-nic-aligned.yaml (image swapped) with a stand-in GPU driver:
    where its one GPU's pcieRoot has only RoCE functions, the pod is refused by the scheduler
    (Unschedulable: no InfiniBand NIC matches); once the GPU slice names mlx5_3's root, the
    scheduler retries and allocates exactly that GPU and mlx5_3, and the pod runs with mlx5_3
    alone (the GPU's kubelet plugin, a stand-in, prepares its half with nothing)."""
    c = dra
    apply(c, [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU_DRIVER},
               "spec": {"selectors": [{"cel": {"expression": 'device.driver == "%s"' % GPU_DRIVER}}]}},
              gpu_slice(ROOT_ROCE_ONLY)])
    c.start("gpu-dra-plugin", ["/usr/bin/python3", pathlib.Path(__file__).parent / "gpu_dra_plugin.py",
                               "--kubeconfig-dir", c.kc], in_node=True)
    apply(c, with_image(example("gpu-nic-aligned.yaml")))

    def unschedulable():
        conds = c.get("pod", "-n", "default", "train-aligned").get("status", {}).get("conditions", [])
        return [x for x in conds if x["type"] == "PodScheduled" and x["status"] == "False"
                and x.get("reason") == "Unschedulable"]
    cond = cl.wait_for("train-aligned Unschedulable", unschedulable, 60)
    assert "cannot allocate all claims" in cond[0].get("message", ""), cond
    time.sleep(2)
    assert not c.get("pod", "-n", "default", "train-aligned")["spec"].get("nodeName")
    # the GPU now on mlx5_3's root: the slice update requeues the pod
    apply(c, [gpu_slice(ROOT_MLX5_3)])
    c.wait_pod("default", "train-aligned", timeout=120)
    claim = pod_claim(c, "train-aligned", "gpunic")
    assert sorted(results(claim)) == [("gpu", GPU_DRIVER, cl.NODE, "gpu-1"), ("nic", DRIVER, cl.NODE, MLX5_3)]
    assert container_nodes(c, "train-aligned") == want_nodes(usable_devices(c), ["mlx5_3"])
    assert container_env(c, "train-aligned").get("RDMA_DEVICE_NIC") == "mlx5_3:1"
    uid = claim["metadata"]["uid"]
    delete_pod(c, "train-aligned")
    cl.wait_for("the aligned claim unprepared", lambda: not spec_file(c, uid).exists(), 60)


def run_one_nic_pod(c, name):
    """one-nic.yaml's pod under another name, Running: (claim uid, its ibdev, container)."""
    docs = with_image(example("one-nic.yaml"))
    pod = next(d for d in docs if d["kind"] == "Pod")
    pod["metadata"]["name"] = name
    apply(c, docs)
    c.wait_pod("default", name)
    claim = pod_claim(c, name, "nic")
    ibdev = by_device_name(c)[results(claim)[0][3]]["ibdev"]["string"]
    return claim["metadata"]["uid"], ibdev, container_id(c, name)


def container_id(c, pod):
    st = c.get("pod", "-n", "default", pod)["status"]["containerStatuses"][0]
    return st["containerID"], st["restartCount"]


def test_kubelet_restart_wipes_and_driver_republishes(dra):
    """Upstream dra_test.go: kubelet removes this node's slices when it starts, and the driver,
    registered again, publishes the pool again (new slices); a pod with a prepared claim keeps
    running through it (same container, no restart), its claim still prepared."""
    c = dra
    uid, ibdev, cid = run_one_nic_pod(c, "rdma-kubelet-restart")
    old = {s["metadata"]["uid"] for s in published(c)}
    c.restart_kubelet()
    cl.wait_for("the pool re-published under new slices",
                lambda: (lambda s: s and not {x["metadata"]["uid"] for x in s} & old)(published(c)), 90, 0.5)
    cl.wait_for("node Ready after the kubelet restart", c.node_ready, 90, 0.5)
    assert container_id(c, "rdma-kubelet-restart") == cid
    assert spec_file(c, uid).exists() and checkpoint(c)[uid]["state"] == "prepared"
    # still has its NIC (exec works once the new kubelet has the pod again)
    ls = cl.wait_for("kubectl exec after the restart", lambda: (lambda p: p.returncode == 0 and p.stdout)(
        c.kubectl("exec", "rdma-kubelet-restart", "--", "ls", "/dev/infiniband", check=False)), 60, 1)
    assert sorted(ls.split()) == want_nodes(usable_devices(c), [ibdev])
    delete_pod(c, "rdma-kubelet-restart")
    cl.wait_for("unprepared after the kubelet restart", lambda: not spec_file(c, uid).exists(), 60)
    assert uid not in checkpoint(c)


def test_driver_restart_with_a_prepared_claim(dra):
    """The driver's pod deleted while a claim is prepared: the DaemonSet's new pod loads the
    checkpoint and registers again; the workload pod keeps running (same container); deleting
    it afterwards is unprepared by the new driver (spec and checkpoint entry gone)."""
    c = dra
    uid, ibdev, cid = run_one_nic_pod(c, "rdma-driver-restart")
    first = driver_ready(c)
    c.kubectl("delete", "pod", "-n", "kube-system", first, "--wait=true", timeout=120)
    cl.wait_for("a new rdma-dp-dra pod Ready", lambda: (lambda n: n and n != first)(driver_ready(c)), 120, 0.5)
    cl.wait_for("the new driver's checkpoint-loaded and registered",
                lambda: "event=registered" in driver_log(c) and "event=checkpoint-loaded" in driver_log(c), 60, 0.5)
    assert published(c)
    assert container_id(c, "rdma-driver-restart") == cid
    assert spec_file(c, uid).exists() and checkpoint(c)[uid]["state"] == "prepared"
    delete_pod(c, "rdma-driver-restart")
    cl.wait_for("unprepared by the new driver", lambda: not spec_file(c, uid).exists(), 60)
    assert uid not in checkpoint(c)
    assert re.search(r"event=claim-unprepared .*%s" % uid, driver_log(c)), driver_log(c)[-3000:]


def test_generated_claim_released_when_the_pod_is_done(dra):
    """Upstream dra.go's "deletes generated claims when pod is done": a pod of one-nic.yaml
    whose container exits 0 (restartPolicy Never) is Succeeded; kubelet unprepares its claim
    (spec and checkpoint entry gone) and the controller manager deletes the generated claim,
    while the pod object stays."""
    c = dra
    docs = with_image(example("one-nic.yaml"))
    pod = next(d for d in docs if d["kind"] == "Pod")
    pod["metadata"]["name"] = "rdma-done"
    pod["spec"]["restartPolicy"] = "Never"
    pod["spec"]["containers"][0]["args"] = ["ls /dev/infiniband/rdma_cm && test -n \"$RDMA_DEVICE_NIC\""]
    apply(c, docs)
    c.wait_pod("default", "rdma-done", phase="Succeeded")
    name = c.get("pod", "-n", "default", "rdma-done")["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    cl.wait_for("the generated claim deleted", lambda: c.kubectl(
        "get", "resourceclaim", "-n", "default", name, check=False).returncode != 0, 60)
    cl.wait_for("no claim left in the checkpoint", lambda: not checkpoint(c), 60)
    assert not list(c.node_path("/run/cdi").glob("rdma-dp.io-claim_*.json"))
    assert c.get("pod", "-n", "default", "rdma-done")["status"]["phase"] == "Succeeded"
    delete_pod(c, "rdma-done")


def test_api_server_restart(dra):
    """kube-apiserver down for 5 s and back, with a prepared claim: the pod runs on, the pool
    stays published (the driver's resync finds it as it was), and the driver, reconnecting,
    prepares a new pod's claim and unprepares both."""
    c = dra
    uid, ibdev, cid = run_one_nic_pod(c, "rdma-api-restart")
    before = {s["metadata"]["uid"] for s in published(c)}
    cl.restart_apiserver(c, down_s=5)
    assert {s["metadata"]["uid"] for s in published(c)} == before
    assert container_id(c, "rdma-api-restart") == cid
    uid2, _, _ = run_one_nic_pod(c, "rdma-api-restart-2")
    assert uid2 != uid and spec_file(c, uid2).exists()
    for name in ("rdma-api-restart", "rdma-api-restart-2"):
        delete_pod(c, name)
    cl.wait_for("both claims unprepared", lambda: not checkpoint(c), 60)
    assert not spec_file(c, uid).exists() and not spec_file(c, uid2).exists()


# ------------------------------------------------------------------- device taints (issue 21)
def _sysfsgen():
    import sys
    sys.path.insert(0, str(REPO / "tests" / "fixtures"))
    import sysfsgen
    return sysfsgen


def _taints(c, name):
    s = published(c)
    return next((d.get("taints") for x in s or [] for d in x["spec"]["devices"] if d["name"] == name), None)


def test_port_down_taint(dra):
    """A port going down on the node (the fixture's mlx5_3 port 1 state file: DOWN) reaches the
    real API server as the device taint rdma.rdma-dp.io/port-down (NoSchedule, timeAdded set by
    the server's defaulting); the driver does not loop on the defaulted field (the slice's
    resourceVersion stays for more than a resync); a claim that can only have mlx5_3 leaves its
    pod Unschedulable; the port back ACTIVE removes the taint and the pod is scheduled on it."""
    c = dra
    sg = _sysfsgen()
    sys_root = c.work / "node" / "sys"
    pod = "rdma-taint"
    try:
        t0 = time.monotonic()
        sg.set_port_state(sys_root, "mlx5_3", 1, "DOWN")
        taints = cl.wait_for("mlx5_3 tainted", lambda: _taints(c, MLX5_3), 30, 0.1)
        took = time.monotonic() - t0
        print("\nport down -> taint on the API server: %.2f s" % took)
        assert took < 5, took
        assert len(taints) == 1 and taints[0]["key"] == DRIVER + "/port-down", taints
        assert taints[0]["effect"] == "NoSchedule" and "value" not in taints[0], taints
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", taints[0]["timeAdded"]), taints
        assert not any(d.get("taints") for x in published(c) for d in x["spec"]["devices"]
                       if d["name"] != MLX5_3)
        # the stored slice carries timeAdded, the driver's does not: no write at the resync
        rv = [x["metadata"]["resourceVersion"] for x in published(c)]
        syncs = driver_log(c).count("event=slices-sync")
        time.sleep(12)
        assert [x["metadata"]["resourceVersion"] for x in published(c)] == rv
        assert driver_log(c).count("event=slices-sync") == syncs
        # a claim that only mlx5_3 satisfies: its pod stays unschedulable
        apply(c, with_image([
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "nic-mlx5-3", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "nic", "exactly": {
                 "deviceClassName": "rdma-nic-ib", "count": 1, "selectors": [{"cel": {
                     "expression": 'device.attributes["%s"].ibdev == "mlx5_3"' % DRIVER}}]}}]}}},
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": "default"},
             "spec": {"resourceClaims": [{"name": "nic", "resourceClaimName": "nic-mlx5-3"}],
                      "containers": [{"name": "app", "image": WORKLOAD, "command": ["sleep", "infinity"],
                                      "resources": {"claims": [{"name": "nic"}]}}]}}]))

        def unschedulable():
            conds = c.get("pod", "-n", "default", pod).get("status", {}).get("conditions", [])
            return [x for x in conds if x["type"] == "PodScheduled" and x["status"] == "False"
                    and x.get("reason") == "Unschedulable"]
        cond = cl.wait_for("%s Unschedulable" % pod, unschedulable, 60)
        print("scheduler: %s" % cond[0].get("message", ""))
        time.sleep(2)
        assert not c.get("pod", "-n", "default", pod)["spec"].get("nodeName")
        assert not c.get("resourceclaim", "-n", "default", "nic-mlx5-3").get("status", {}).get("allocation")
        # back up: untainted, and the pod gets mlx5_3
        t0 = time.monotonic()
        sg.set_port_state(sys_root, "mlx5_3", 1, "ACTIVE")
        cl.wait_for("mlx5_3 untainted", lambda: _taints(c, MLX5_3) is None, 30, 0.1)
        print("port up -> untainted on the API server: %.2f s" % (time.monotonic() - t0))
        c.wait_pod("default", pod, timeout=120)
        claim = c.get("resourceclaim", "-n", "default", "nic-mlx5-3")
        assert results(claim) == [("nic", DRIVER, cl.NODE, MLX5_3)]
    finally:
        sg.set_port_state(sys_root, "mlx5_3", 1, "ACTIVE")
        c.kubectl("delete", "pod", "-n", "default", pod, "--grace-period=1", "--ignore-not-found",
                  "--wait=true", check=False, timeout=120)
        c.kubectl("delete", "resourceclaim", "-n", "default", "nic-mlx5-3", "--ignore-not-found",
                  "--wait=true", check=False, timeout=120)


def apiserver_requests(c, verb, resource="resourceslices"):
    """kube-apiserver's apiserver_request_total for verb on resource, all clients and codes."""
    n = 0.0
    for line in c.kubectl("get", "--raw", "/metrics").stdout.splitlines():
        if line.startswith("apiserver_request_total{") and 'resource="%s"' % resource in line \
                and 'verb="%s"' % verb in line and 'subresource=""' in line:
            n += float(line.rsplit(" ", 1)[1])
    return n


def test_watch_no_periodic_list_and_a_deleted_slice_recreated(dra):
    """Issue 21 point 6 on the real API server: the driver watches its slices (the ClusterRole
    allows it), so in 60 s at idle no LIST of resourceslices reaches kube-apiserver (its own
    request counter; the scheduler's informers watch too); `kubectl delete resourceslice` of
    ours is recreated within 2 s (the watch's DELETED event, compared at once)."""
    c = dra
    p = c.kubectl("auth", "can-i", "watch", "resourceslices", "--as",
                  "system:serviceaccount:kube-system:rdma-dp-dra", check=False)
    assert p.stdout.strip() == "yes", p.stdout
    name = published(c)[0]["metadata"]["name"]
    # after the API server's restart (an earlier test) the watch is open again and working
    cl.wait_for("the driver's watch working", lambda: (lambda log: log.rfind("watching=yes") >=
                                                       log.rfind("watching=no"))(driver_log(c)),
                60, 1)
    failed = driver_log(c).count("event=slices-watch-failed")
    time.sleep(2)
    lists0, t0 = apiserver_requests(c, "LIST"), time.monotonic()
    time.sleep(60)
    lists1, t1 = apiserver_requests(c, "LIST"), time.monotonic()
    print("\nLISTs of resourceslices in %.0f s at idle: %d (watches now: %d)" % (
        t1 - t0, lists1 - lists0, apiserver_requests(c, "WATCH")))
    assert lists1 == lists0, (lists0, lists1)
    assert driver_log(c).count("event=slices-watch-failed") == failed, driver_log(c)[-3000:]

    t0 = time.monotonic()
    c.kubectl("delete", "resourceslice", name, "--wait=false")
    cl.wait_for("our slice recreated", lambda: [s for s in published(c) or []
                                                 if s["metadata"]["name"] != name], 10, 0.1)
    took = time.monotonic() - t0
    print("kubectl delete resourceslice -> recreated: %.2f s" % took)
    assert took < 2.0, took
    assert len(published(c)) == 1
    cl.wait_for("the driver logged why", lambda: "why=watch-deleted" in driver_log(c), 10, 0.5)


def test_claim_status_devices(dra):
    """Issue 21, "Claim status": a standalone claim (one InfiniBand NIC) used by a pod: once the
    pod runs, the real API server holds our status.devices entry, written by server-side apply
    of resourceclaims/status under deploy/dra's RBAC (patch on resourceclaims/status,
    associated-node:patch on resourceclaims/driver for the driver's name): condition Ready
    True, data naming the ibdev and its uverbs node, networkData with the fixture's netdev and
    its MAC, the field manager the driver's name. When the pod is deleted the claim survives,
    is unprepared, and our entry is gone."""
    c = dra
    claim_doc = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "rdma-status", "namespace": "default"},
                 "spec": {"devices": {"requests": [{"name": "nic", "exactly": {
                     "deviceClassName": "rdma-nic-ib", "count": 1}}]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rdma-status", "namespace": "default"},
           "spec": {"hostNetwork": True, "resourceClaims": [{"name": "nic", "resourceClaimName": "rdma-status"}],
                    "containers": [{"name": "app", "image": WORKLOAD,
                                    "command": ["sh", "-c", "exec sleep infinity"],
                                    "resources": {"claims": [{"name": "nic"}]}}]}}
    apply(c, [claim_doc, pod])
    c.wait_pod("default", "rdma-status")

    def ours():
        cl_ = c.get("resourceclaim", "-n", "default", "rdma-status")
        return cl_, [d for d in cl_.get("status", {}).get("devices", []) if d["driver"] == DRIVER]

    cl.wait_for("our status.devices entry", lambda: ours()[1], 60, 0.5)
    claim, entries = ours()
    uid = claim["metadata"]["uid"]
    (res,) = results(claim)
    (e,) = entries
    assert (e["pool"], e["device"]) == (res[2], res[3])
    ibdev = by_device_name(c)[res[3]]["ibdev"]["string"]
    dev = usable_devices(c)[ibdev]
    assert [(x["type"], x["status"], x["reason"]) for x in e["conditions"]] == [("Ready", "True", "Prepared")]
    assert e["data"]["ibdev"] == ibdev
    assert e["data"]["uverbs"] in dev["char_devices"]
    netdev = dev["netdevs"][0]
    assert e["networkData"]["interfaceName"] == netdev
    mac = (c.work / "node" / "sys" / "class" / "net" / netdev / "address").read_text().strip()
    assert e["networkData"]["hardwareAddress"] == mac
    managed = c.get("resourceclaim", "-n", "default", "rdma-status", "--show-managed-fields")[
        "metadata"].get("managedFields", [])
    mf = [m for m in managed if m.get("subresource") == "status" and m["manager"] == DRIVER]
    assert mf and mf[0]["operation"] == "Apply", managed
    assert "event=claim-status-failed" not in driver_log(c)
    delete_pod(c, "rdma-status")
    cl.wait_for("the claim unprepared", lambda: not spec_file(c, uid).exists(), 60)
    cl.wait_for("our status.devices entry removed", lambda: not ours()[1], 60, 0.5)
    claim, _ = ours()
    assert claim["metadata"]["uid"] == uid
    assert re.search(r"event=claim-status-written .*%s.* cleared=1" % uid, driver_log(c)), driver_log(c)[-3000:]
    c.kubectl("delete", "resourceclaim", "rdma-status", "--wait=true")


def test_memlock_opaque_parameter(dra):
    """Issue 22, "a DRA opaque parameter chooses another" memlock: a claim whose
    spec.devices.config names our driver with RdmaConfig {memlock}; the scheduler copies it into
    the allocation, the driver's spec hook sets that limit (half the deployed one where the
    runtime cannot raise a hard limit, else 1 GiB), and containerd's runc applies it to the container."""
    c = dra
    want = c.dra_memlock // 2 if c.dra_memlock else 1 << 30
    claim_doc = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "rdma-memlock", "namespace": "default"},
                 "spec": {"devices": {
                     "requests": [{"name": "nic", "exactly": {"deviceClassName": "rdma-nic-ib", "count": 1}}],
                     "config": [{"requests": ["nic"], "opaque": {"driver": DRIVER, "parameters": {
                         "apiVersion": "rdma.rdma-dp.io/v1alpha1", "kind": "RdmaConfig",
                         "memlock": str(want)}}}]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rdma-memlock", "namespace": "default"},
           "spec": {"hostNetwork": True, "resourceClaims": [{"name": "nic", "resourceClaimName": "rdma-memlock"}],
                    "containers": [{"name": "app", "image": WORKLOAD,
                                    "command": ["sh", "-c", "exec sleep infinity"],
                                    "resources": {"claims": [{"name": "nic"}]}}]}}
    apply(c, [claim_doc, pod])
    c.wait_pod("default", "rdma-memlock")
    claim = c.get("resourceclaim", "-n", "default", "rdma-memlock")
    assert claim["status"]["allocation"]["devices"]["config"][0]["source"] == "FromClaim"
    assert container_memlock(c, "rdma-memlock") == (want, want)
    delete_pod(c, "rdma-memlock")
    c.kubectl("delete", "resourceclaim", "rdma-memlock", "--wait=true")
