"""rdma-dp's device plugin on the real kubelet, deployed from deploy/base with kubectl apply -k.

A test overlay (written here, overlay()) adds one thing to deploy/base: --sysfs-root pointing at
the fixture node's sys/ (a hostPath), since this machine has no RDMA devices. --dev-root stays the
deployed /host/dev: the node namespace's /dev, whose infiniband/ holds the fixture's nodes
(harmless c 1:3 copies). Everything else (image, ConfigMap, probes, securityContext, volumes)
is what deploy/base ships.
"""
import json
import os
import pathlib
import re
import time

import pytest
import yaml

import cluster as cl

REPO = pathlib.Path(__file__).resolve().parents[2]
SEEDS = pathlib.Path(__file__).resolve().parent / "seeds"
RES = "rdma/hca_shared_devices_a"


def overlay(c, name="fixture-node", extra_patches=()):
    """deploy/base plus --sysfs-root=<fixture>; returns the overlay's directory."""
    d = c.work / "overlays" / name
    d.mkdir(parents=True, exist_ok=True)
    patch = [
        {"op": "add", "path": "/spec/template/spec/containers/0/args/-",
         "value": "--sysfs-root=/host/fixture/sys"},
        {"op": "add", "path": "/spec/template/spec/volumes/-",
         "value": {"name": "fixture-sys",
                   "hostPath": {"path": str(c.work / "node" / "sys"), "type": "Directory"}}},
        {"op": "add", "path": "/spec/template/spec/containers/0/volumeMounts/-",
         "value": {"name": "fixture-sys", "mountPath": "/host/fixture/sys", "readOnly": True}},
    ] + list(extra_patches)
    (d / "kustomization.yaml").write_text(json.dumps({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(REPO / "deploy" / "base", d)],  # kustomize: relative only
        "patches": [{"target": {"kind": "DaemonSet", "name": "rdma-dp"}, "patch": json.dumps(patch)}],
    }, indent=1) + "\n")
    return d


def plugin_pod(c):
    pods = c.get("pods", "-n", "kube-system", "-l", "name=rdma-dp")["items"]
    return pods[0]["metadata"]["name"] if pods else None


def plugin_ready(c):
    pods = c.get("pods", "-n", "kube-system", "-l", "name=rdma-dp")["items"]
    for p in pods:
        if p["metadata"].get("deletionTimestamp"):
            continue
        for cond in p.get("status", {}).get("conditions", []):
            if cond["type"] == "Ready" and cond["status"] == "True":
                return p["metadata"]["name"]
    return None


def node_resource(c, res=RES):
    st = c.node()["status"]
    return st.get("capacity", {}).get(res), st.get("allocatable", {}).get(res)


def plugin_log(c):
    name = plugin_pod(c)
    return c.kubectl("logs", "-n", "kube-system", name, check=False).stdout if name else ""


def plugin_socket(c, res):
    """The socket rdma-dp serves res on (its log's event=listening), a path on the node."""
    found = re.findall(r"event=listening resource=%s socket=(\S+)" % re.escape(res), plugin_log(c))
    assert found, plugin_log(c)[-2000:]
    return found[-1]


def exec_out(c, ns, pod, *cmd):
    return c.kubectl("exec", "-n", ns, pod, "--", *cmd).stdout


@pytest.fixture(scope="module")
def plugin(cluster):
    c = cluster
    c.start("gpu-plugin", ["/usr/bin/python3", pathlib.Path(__file__).parent / "gpu_plugin.py"],
            in_node=True)
    c.kubectl("apply", "-k", overlay(c))
    t0 = time.monotonic()
    cl.wait_for("the rdma-dp pod Ready", lambda: plugin_ready(c), 180, 0.5)
    cl.wait_for("%s on the node" % RES, lambda: node_resource(c) == ("200", "200"), 60, 0.5)
    c.timings["plugin_ready"] = time.monotonic() - t0
    yield c


def test_base_deploys_and_registers(plugin):
    """deploy/base as shipped reaches Ready under the real prober (its probes on
    127.0.0.1:9471), and the node shows the base ConfigMap's resource."""
    c = plugin
    pod = c.get("pod", "-n", "kube-system", plugin_ready(c))
    assert pod["spec"]["containers"][0]["image"] == "localhost/rdma-dp:0.1.0"
    assert node_resource(c) == ("200", "200")
    assert node_resource(c, "nvidia.com/gpu") == ("8", "8")
    log = plugin_log(c)
    assert "event=registered" in log or "registered" in log, log[-2000:]


def apply_seed_config(c, seed):
    before = plugin_log(c).count("event=config-reloaded")
    c.kubectl("apply", "-f", SEEDS / ("%s-rdma-config.yaml" % seed))
    # kubelet refreshes the mounted ConfigMap within its sync period; rdma-dp applies the diff.
    cl.wait_for("event=config-reloaded after the %s ConfigMap" % seed,
                lambda: plugin_log(c).count("event=config-reloaded") > before, 150, 1)


def seed_daemonset(seed):
    """The seed's nccl-test DaemonSet as YAML text, and what had to change here: where this
    kernel has no /sys/class/infiniband (no RDMA driver loaded: the host, not the real-kernel
    guest), runc cannot create the seeds' hostPath mount point inside the container's
    read-only sysfs, so that one volume is left out (on any RDMA node the class exists)."""
    text = (SEEDS / ("%s-nccl-test.yaml" % seed)).read_text()
    if os.path.isdir("/sys/class/infiniband"):
        return text, None
    doc = yaml.safe_load(text)
    spec = doc["spec"]["template"]["spec"]
    spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "sys-infiniband"]
    ct = spec["containers"][0]
    ct["volumeMounts"] = [m for m in ct["volumeMounts"] if m["name"] != "sys-infiniband"]
    return yaml.safe_dump(doc), "without the /sys/class/infiniband hostPath (no RDMA class in this kernel)"


@pytest.mark.parametrize("seed,fixture", [("000", "seed000"), ("001", "seed001")])
def test_seed_configmap_and_daemonset(plugin, seed, fixture):
    """Each article's ConfigMap applied to the running plugin (no restart: event=config-reloaded)
    on a node like the article's, its nccl-test DaemonSet (image swapped) Running with one unit
    and a GPU, `kubectl describe node` showing the resource as the article says, and the
    container's /dev/infiniband the node's (the seeds' hostPath)."""
    c = plugin
    if c.node_fixture != fixture:
        cl.swap_node(c, fixture)
    restarts = c.get("pod", "-n", "kube-system", plugin_pod(c))["status"]["containerStatuses"][0]["restartCount"]
    apply_seed_config(c, seed)
    assert "event=config-rejected" not in plugin_log(c)
    cl.wait_for("%s 200 after the reload" % RES, lambda: node_resource(c) == ("200", "200"), 30)
    ds, changed = seed_daemonset(seed)
    if changed:
        print("seed %s DaemonSet applied %s" % (seed, changed))
    c.kubectl("apply", "-f", "-", input=ds)
    pod = cl.wait_for("a nccl-test pod", lambda: (c.get("pods", "-l", "app=nccl-test")["items"] or [None])[0], 60)
    name = pod["metadata"]["name"]
    c.wait_pod("default", name)
    desc = c.kubectl("describe", "node", cl.NODE).stdout
    cap = desc.split("Capacity:")[1].split("Allocatable:")[0]
    assert re.search(r"^\s+rdma/hca_shared_devices_a:\s+200$", cap, re.M), cap
    alloc = desc.split("Allocated resources:")[1]
    assert re.search(r"^\s+rdma/hca_shared_devices_a\s+1\s+1$", alloc, re.M), alloc
    assert re.search(r"^\s+nvidia.com/gpu\s+1\s+1$", alloc, re.M), alloc
    assert "Pod is ready" in c.kubectl("logs", name).stdout
    assert sorted(exec_out(c, "default", name, "ls", "/dev/infiniband").split()) == \
        sorted(p.name for p in (c.work / "node" / "dev" / "infiniband").iterdir())
    assert c.get("pod", "-n", "kube-system", plugin_pod(c))["status"]["containerStatuses"][0]["restartCount"] == restarts
    c.kubectl("delete", "ds", "nccl-test", "--wait=true")
    cl.wait_for("the nccl-test pod gone", lambda: not c.get("pods", "-l", "app=nccl-test")["items"], 60)


def test_container_gets_what_allocate_returned(plugin):
    """A pod without hostPath volumes: its container's /dev/infiniband and environment are what
    rdma-dp's Allocate returns for the device IDs kubelet gave it (pod-resources API)."""
    c = plugin
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "rdma-test", "namespace": "default"},
        "spec": {"hostNetwork": True, "restartPolicy": "Never", "containers": [{
            "name": "rdma-test", "image": "localhost/rdp-workload:1",
            "command": ["sh", "-c", "exec sleep infinity"],
            "resources": {"limits": {RES: "1"}, "requests": {RES: "1"}},
            "securityContext": {"allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}}]}}))
    c.wait_pod("default", "rdma-test")
    held = cl.container_devices(c, "default", "rdma-test")
    assert list(held) == ["rdma-test"] and list(held["rdma-test"]) == [RES], held
    ids = held["rdma-test"][RES]
    assert len(ids) == 1
    want = cl.plugin_allocate(c, plugin_socket(c, RES), ids)
    # Device nodes: exactly the answer's container paths, with the host node's numbers.
    listing = exec_out(c, "default", "rdma-test", "ls", "-ln", "/dev/infiniband")
    got = {}
    for line in listing.splitlines():
        m = re.match(r"^c\S+\s+\d+\s+\d+\s+\d+\s+(\d+),\s+(\d+)\s.*\s(\S+)$", line)
        if m:
            got["/dev/infiniband/" + m.group(3)] = (int(m.group(1)), int(m.group(2)))
    assert sorted(got) == sorted(d.container_path for d in want.devices), (listing, want)
    assert set(got.values()) == {(1, 3)}
    # Variables: every one of the answer's, with its value.
    env = dict(kv.split("=", 1) for kv in exec_out(c, "default", "rdma-test", "env").splitlines() if "=" in kv)
    assert want.envs, want
    for k, v in want.envs.items():
        assert env.get(k) == v, (k, v, env.get(k))
    c.kubectl("delete", "pod", "rdma-test", "--wait=true")
