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


def overlay(c, name="fixture-node", extra_patches=(), base="base"):
    """deploy/<base> plus --sysfs-root=<fixture>; returns the overlay's directory."""
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
        "resources": [os.path.relpath(REPO / "deploy" / base, d)],  # kustomize: relative only
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


def plugin_log(c, since=None):
    """The rdma-dp pod's log (from since, an RFC 3339 time, when given)."""
    name = plugin_pod(c)
    extra = ["--since-time=" + since] if since else []
    return c.kubectl("logs", "-n", "kube-system", name, *extra, check=False).stdout if name else ""


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
    assert "event=registered" in log, log[-2000:]
    # kubelet's pod-resources API: the node's allocatable units, as upstream's
    # device_plugin_test checks before its pods (GetAllocatableResources).
    alloc = cl.podresources(c, "GetAllocatableResources")
    units = [i for d in alloc.devices if d.resource_name == RES for i in d.device_ids]
    assert len(units) == 200, len(units)


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
        "spec": {"hostNetwork": True, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [{
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


def unit_ids(log, event, res):
    """The device IDs of each event=preferred / event=allocated line for res, in order."""
    return [sorted(p.split("=", 1)[0] for p in m.split())
            for m in re.findall(r"event=%s resource=%s .*?ids=\"([^\"]*)\"" % (event, re.escape(res)), log)]


def run_pod(c, name, res=RES, units=1, extra=None):
    """A hostNetwork pod of the workload image holding units of res; waits until it runs."""
    spec = {"hostNetwork": True, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [{
        "name": name, "image": "localhost/rdp-workload:1", "command": ["sh", "-c", "exec sleep infinity"],
        "resources": {"limits": {res: str(units)}, "requests": {res: str(units)}}}]}
    spec.update(extra or {})
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}))
    return c.wait_pod("default", name)


def container_id(c, name):
    st = c.get("pod", "-n", "default", name)["status"]["containerStatuses"][0]
    return st["containerID"], st["restartCount"], st.get("state", {}).get("running") is not None


def test_kubelet_restart_keeps_pods_and_assignments(plugin):
    """As upstream's device_plugin_test "Keeps device plugin assignments across kubelet
    restarts": the resource comes back, the pod keeps running (same container), and the
    pod-resources API reports the same device for it."""
    c = plugin
    run_pod(c, "keep")
    before_ids = cl.container_devices(c, "default", "keep")
    before_ct = container_id(c, "keep")
    c.restart_kubelet()
    cl.wait_for("node Ready after the kubelet restart", c.node_ready, 120, 0.5)
    cl.wait_for("%s back after the kubelet restart" % RES, lambda: node_resource(c) == ("200", "200"), 60, 0.5)
    assert container_id(c, "keep") == before_ct
    # kubelet learns its pods again after the restart: pod-resources answers once it has.
    cl.wait_for("the pod in pod-resources again", lambda: cl.container_devices(c, "default", "keep"), 60, 0.5)
    assert cl.container_devices(c, "default", "keep") == before_ids
    # A new pod is admitted with the re-registered plugin.
    run_pod(c, "after-restart")
    assert list(cl.container_devices(c, "default", "after-restart")["after-restart"]) == [RES]
    c.kubectl("delete", "pod", "keep", "after-restart", "--wait=true")


def test_plugin_pod_deleted_and_recreated(plugin):
    """The DaemonSet's pod deleted: the controller makes a new one, which registers again;
    a pod holding the resource meanwhile keeps running with the same device."""
    c = plugin
    run_pod(c, "survivor")
    before_ids = cl.container_devices(c, "default", "survivor")
    before_ct = container_id(c, "survivor")
    old = plugin_ready(c)
    c.kubectl("delete", "pod", "-n", "kube-system", old, "--wait=true")
    new = cl.wait_for("a new rdma-dp pod Ready", lambda: (plugin_ready(c) or None) if plugin_ready(c) != old else None,
                      120, 0.5)
    assert new != old
    cl.wait_for("%s registered again" % RES, lambda: node_resource(c) == ("200", "200"), 60, 0.5)
    assert "event=registered" in plugin_log(c)
    assert container_id(c, "survivor") == before_ct
    assert cl.container_devices(c, "default", "survivor") == before_ids
    c.kubectl("delete", "pod", "survivor", "--wait=true")


def test_container_restart_keeps_assignment(plugin):
    """As upstream's "Keeps device plugin assignments across pod restarts": a container that
    exits and is restarted by kubelet holds the same unit, and sees the same device nodes."""
    c = plugin
    name = "restarter"
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"hostNetwork": True, "restartPolicy": "Always", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": name, "image": "localhost/rdp-workload:1",
                                 "command": ["sh", "-c", "ls /dev/infiniband; sleep 3; exit 1"],
                                 "resources": {"limits": {RES: "1"}}}]}}))
    try:
        cl.wait_for("a first run", lambda: c.get("pod", name)["status"].get("containerStatuses", [{}])[0].get(
            "state", {}).get("running"), 60, 0.5)
        first = cl.container_devices(c, "default", name)
        cl.wait_for("the container restarted", lambda: c.get("pod", name)["status"]["containerStatuses"][0][
            "restartCount"] >= 1, 90, 0.5)
        assert cl.container_devices(c, "default", name) == first
        # Each run listed the same device nodes (the Allocate answer is kubelet's, replayed).
        runs = c.kubectl("logs", name, "--previous").stdout.split()
        assert runs and set(runs) <= {p.name for p in (c.work / "node" / "dev" / "infiniband").iterdir()}, runs
    finally:
        c.kubectl("delete", "pod", name, "--wait=true", "--ignore-not-found")


def test_plugin_removed_running_pod_stays(plugin):
    """As upstream's device_plugin_test after "device plugin removed": the DaemonSet deleted,
    rdma-dp stops (SIGTERM), kubelet marks its units unavailable: allocatable 0 while capacity
    stays; the pod holding a unit keeps running. Applied again, everything is back."""
    c = plugin
    run_pod(c, "orphan")
    before_ct = container_id(c, "orphan")
    c.kubectl("delete", "ds", "-n", "kube-system", "rdma-dp", "--wait=true")
    cl.wait_for("no rdma-dp pod", lambda: not c.get("pods", "-n", "kube-system", "-l", "name=rdma-dp")["items"], 60, 0.5)
    cl.wait_for("allocatable 0, capacity 200", lambda: node_resource(c) == ("200", "0"), 60, 0.5)
    assert container_id(c, "orphan") == before_ct
    c.kubectl("apply", "-k", overlay(c))
    cl.wait_for("rdma-dp Ready again", lambda: plugin_ready(c), 120, 0.5)
    cl.wait_for("%s back" % RES, lambda: node_resource(c) == ("200", "200"), 60, 0.5)
    assert container_id(c, "orphan") == before_ct
    c.kubectl("delete", "pod", "orphan", "--wait=true")


def test_configmap_edit_applied_without_restart(plugin):
    """rdmaHcaMax changed in the ConfigMap: kubelet updates the mounted file, rdma-dp applies the
    diff (event=config-reloaded) and the node's capacity follows; the pod never restarts."""
    c = plugin
    name = plugin_ready(c)
    cm = c.get("configmap", "-n", "kube-system", "rdma-devices")
    cfg = json.loads(cm["data"]["config.json"])
    cfg["configList"][0]["rdmaHcaMax"] = 120
    before = plugin_log(c).count("event=config-reloaded")
    c.kubectl("patch", "configmap", "-n", "kube-system", "rdma-devices", "--type=merge", "-p",
              json.dumps({"data": {"config.json": json.dumps(cfg, indent=2)}}))
    cl.wait_for("event=config-reloaded", lambda: plugin_log(c).count("event=config-reloaded") > before, 150, 1)
    cl.wait_for("capacity 120", lambda: node_resource(c) == ("120", "120"), 30, 0.5)
    assert plugin_ready(c) == name
    assert c.get("pod", "-n", "kube-system", name)["status"]["containerStatuses"][0]["restartCount"] == 0
    cfg["configList"][0]["rdmaHcaMax"] = 200
    c.kubectl("patch", "configmap", "-n", "kube-system", "rdma-devices", "--type=merge", "-p",
              json.dumps({"data": {"config.json": json.dumps(cfg, indent=2)}}))
    cl.wait_for("capacity 200 again", lambda: node_resource(c) == ("200", "200"), 150, 1)


def test_device_unplugged_while_pod_runs(plugin):
    """The node's HCAs go, as an unplug or a driver unload takes them (their sysfs entries and
    their char nodes under /dev/infiniband; rdma_cm stays): allocatable drops to 0 within
    seconds, capacity with it, the pod holding a unit keeps running; all back when they return."""
    c = plugin
    run_pod(c, "unplug")
    before_ct = container_id(c, "unplug")
    node = c.work / "node"
    moves = [(node / "sys" / "class" / "infiniband" / h) for h in sorted(os.listdir(node / "sys" / "class" / "infiniband"))]
    moves += [p for p in sorted((node / "dev" / "infiniband").iterdir()) if p.name != "rdma_cm"]
    assert moves
    saved = c.work / "unplugged"
    saved.mkdir(exist_ok=True)
    done = []
    try:
        for p in moves:
            os.rename(p, saved / (p.parent.name + "-" + p.name))
            done.append(p)
        t0 = time.monotonic()
        cl.wait_for("allocatable 0 after the unplug", lambda: node_resource(c)[1] == "0", 30, 0.05)
        print("unplug reached the node's allocatable in %.2f s" % (time.monotonic() - t0))
        assert container_id(c, "unplug") == before_ct
    finally:
        for p in done:
            os.rename(saved / (p.parent.name + "-" + p.name), p)
    t0 = time.monotonic()
    cl.wait_for("allocatable 200 after the replug", lambda: node_resource(c) == ("200", "200"), 30, 0.05)
    print("replug reached the node's allocatable in %.2f s" % (time.monotonic() - t0))
    assert container_id(c, "unplug") == before_ct
    c.kubectl("delete", "pod", "unplug", "--wait=true")


def test_rolling_update_to_kubelet_sock_registration(plugin):
    """A DaemonSet rolling update (new args: --registration=kubelet-sock instead of auto, which
    took the plugin watcher): the old pod goes, the new one registers through kubelet.sock and
    becomes Ready; the resource is there after it, and a pod is admitted through the new path."""
    c = plugin
    old = plugin_ready(c)
    c.kubectl("apply", "-k", overlay(c, "kubelet-sock", [
        {"op": "add", "path": "/spec/template/spec/containers/0/args/-", "value": "--registration=kubelet-sock"}]))
    c.kubectl("rollout", "status", "-n", "kube-system", "ds/rdma-dp", "--timeout=180s", timeout=200)
    new = cl.wait_for("the updated pod Ready", lambda: (plugin_ready(c) or None) if plugin_ready(c) != old else None,
                      60, 0.5)
    cl.wait_for("%s after the update" % RES, lambda: node_resource(c) == ("200", "200"), 60, 0.5)
    log = plugin_log(c)
    assert "mode=kubelet-sock" in log, log[-2000:]
    assert plugin_socket(c, RES).startswith("/var/lib/kubelet/device-plugins/")
    assert c.node_path(plugin_socket(c, RES)).exists()
    run_pod(c, "via-kubelet-sock")
    ids = cl.container_devices(c, "default", "via-kubelet-sock")["via-kubelet-sock"][RES]
    assert len(ids) == 1
    c.kubectl("delete", "pod", "via-kubelet-sock", "--wait=true")
    assert new != old


def test_use_cdi_through_containerd(plugin):
    """deploy/overlays/cdi (--use-cdi, the spec directory, the memlock hook's install): Allocate
    answers with CDI device names, containerd's CDI resolves them from the spec rdma-dp wrote on
    the node, and the container gets the spec's device nodes and variables."""
    c = plugin
    old = plugin_ready(c)
    c.kubectl("apply", "-k", overlay(c, "cdi", base="overlays/cdi"))
    c.kubectl("rollout", "status", "-n", "kube-system", "ds/rdma-dp", "--timeout=180s", timeout=200)
    cl.wait_for("the CDI pod Ready", lambda: (plugin_ready(c) or None) if plugin_ready(c) != old else None, 60, 0.5)
    cl.wait_for("%s with --use-cdi" % RES, lambda: node_resource(c) == ("200", "200"), 60, 0.5)
    specs = cl.wait_for("a CDI spec on the node", lambda: sorted(c.node_path("/var/run/cdi").glob("*.json")), 30, 0.5)
    if not cl.has_cap_sys_resource():
        # This machine's runtime cannot raise a hard limit (no CAP_SYS_RESOURCE, unlike a normal
        # node): the default "memlock": "unlimited" hook fails the container, saying why.
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cdi-nocap", "namespace": "default"},
               "spec": {"hostNetwork": True, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                        "containers": [{"name": "c", "image": "localhost/rdp-workload:1", "command": ["true"],
                                        "resources": {"limits": {RES: "1"}}}]}}
        c.kubectl("apply", "-f", "-", input=json.dumps(pod))
        msg = cl.wait_for("the hook's error in the pod status", lambda: (c.get("pod", "cdi-nocap")["status"].get(
            "containerStatuses", [{}])[0].get("state", {}).get("terminated", {}).get("message")), 60, 0.5)
        assert "rdma-dp hook" in msg and "CAP_SYS_RESOURCE" in msg, msg
        c.kubectl("delete", "pod", "cdi-nocap", "--wait=true")
        # The hard limit this runtime has, then: the hook raises the soft limit up to it.
        cm = c.get("configmap", "-n", "kube-system", "rdma-devices")
        cfg = json.loads(cm["data"]["config.json"])
        memlock = int(cl._memlock_hard())
        cfg["configList"][0]["memlock"] = memlock
        before = plugin_log(c).count("event=config-reloaded")
        c.kubectl("patch", "configmap", "-n", "kube-system", "rdma-devices", "--type=merge", "-p",
                  json.dumps({"data": {"config.json": json.dumps(cfg, indent=2)}}))
        cl.wait_for("event=config-reloaded", lambda: plugin_log(c).count("event=config-reloaded") > before, 150, 1)
        cl.wait_for("the spec's hook at %d" % memlock,
                    lambda: str(memlock) in c.node_path("/var/run/cdi").joinpath(specs[0].name).read_text(), 30, 0.5)
    else:
        memlock = None
    run_pod(c, "cdi-user")
    ids = cl.container_devices(c, "default", "cdi-user")["cdi-user"][RES]
    want = cl.plugin_allocate(c, plugin_socket(c, RES), ids)
    assert want.cdi_devices and not want.devices, want
    names = [d.name for d in want.cdi_devices]
    # What containerd resolved: the spec's devices (the pool's, and the common edits).
    spec = json.loads(specs[0].read_text())
    kind = spec["kind"]
    nodes, env = set(), {}
    for edits in [spec.get("containerEdits", {})] + [d.get("containerEdits", {}) for d in spec["devices"]
                                                     if "%s=%s" % (kind, d["name"]) in names]:
        nodes |= {n["path"] for n in edits.get("deviceNodes", [])}
        env.update(kv.split("=", 1) for kv in edits.get("env", []))
    assert nodes, spec
    listing = exec_out(c, "default", "cdi-user", "ls", "/dev/infiniband").split()
    assert sorted("/dev/infiniband/" + n for n in listing) == sorted(nodes), (listing, nodes)
    got = dict(kv.split("=", 1) for kv in exec_out(c, "default", "cdi-user", "env").splitlines() if "=" in kv)
    for k, v in env.items():
        assert got.get(k) == v, (k, v, got.get(k))
    # The memlock hook ran (containerd runs the spec's createRuntime hook): the runtime's soft
    # limit of 64 KiB was raised.
    lim = [line for line in exec_out(c, "default", "cdi-user", "cat", "/proc/1/limits").splitlines()
           if line.startswith("Max locked memory")][0].split()
    assert lim[3] == (str(memlock) if memlock else "unlimited"), lim
    c.kubectl("delete", "pod", "cdi-user", "--wait=true")


@pytest.mark.parametrize("policy", ["single-numa-node", "restricted"])
def test_exclusive_pool_under_topology_and_cpu_managers(plugin, policy):
    """deploy/overlays/exclusive on a DGX-like node (8 InfiniBand HCAs, 4 per NUMA node; their
    NUMA node read from the fixture) under kubelet's Topology Manager (`policy`) and static CPU
    manager: a Guaranteed pod with one exclusive CPU and 2 units of rdma/compute gets the two
    HCAs GetPreferredAllocation named, from the NUMA node the Topology Manager aligned (this
    machine has NUMA node 0 only: the HCAs of node 1 can never be aligned), and its CPU."""
    c = plugin
    if c.node_fixture != "dgx-h100":
        cl.swap_node(c, "dgx-h100")
    # 100m reserved: the static policy keeps a whole CPU (0) for the shared pool, and 1.9 CPUs stay
    # allocatable, so one exclusive CPU fits beside the plugin's request.
    c.reconfigure_kubelet(topologyManagerPolicy=policy, cpuManagerPolicy="static", kubeReserved={"cpu": "100m"})
    c.kubectl("apply", "-k", overlay(c, "exclusive", base="overlays/exclusive"))
    c.kubectl("rollout", "status", "-n", "kube-system", "ds/rdma-dp", "--timeout=180s", timeout=200)
    cl.wait_for("rdma/compute on the node", lambda: node_resource(c, "rdma/compute") == ("8", "8"), 120, 0.5)
    # Right after a kubelet restart, until its pod sources are ready, the units of pods deleted
    # just before it still count as in use (devicemanager: UpdateAllocatedDevices waits for the
    # sources), and kubelet skips GetPreferredAllocation when the aligned units left are exactly
    # the request. reconfigure_kubelet waited for the new kubelet's own Ready heartbeat; a
    # moment more, as a pod arriving later would find it.
    time.sleep(3)
    since = cl.utcnow()
    name = "aligned-" + policy
    run_pod(c, name, "rdma/compute", 2, extra={"containers": [{
        "name": name, "image": "localhost/rdp-workload:1", "command": ["sh", "-c", "exec sleep infinity"],
        "resources": {"limits": {"rdma/compute": "2", "cpu": "1", "memory": "64Mi"},
                      "requests": {"rdma/compute": "2", "cpu": "1", "memory": "64Mi"}}}]})
    try:
        held = cl.container_devices(c, "default", name)[name]["rdma/compute"]
        log = plugin_log(c, since)
        preferred = unit_ids(log, "preferred", "rdma/compute")
        allocated = unit_ids(log, "allocated", "rdma/compute")
        assert preferred and allocated, log[-3000:]
        assert preferred[-1] == held == allocated[-1], (preferred, held, allocated)
        # Every unit held is on NUMA node 0 (pod-resources' topology; the fixture's numa_node).
        pr = cl.podresources_pb2()
        r = cl.podresources(c, "Get", pr.GetPodResourcesRequest(pod_name=name, pod_namespace="default"))
        topo = {n.ID for d in r.pod_resources.containers[0].devices if d.resource_name == "rdma/compute"
                for n in d.topology.nodes}
        assert topo == {0}, topo
        numa = {d.name: (d / "device" / "numa_node").read_text().strip()
                for d in (c.work / "node" / "sys" / "class" / "infiniband").iterdir()}
        pci = {os.path.basename(os.path.realpath(d / "device")): n
               for d in (c.work / "node" / "sys" / "class" / "infiniband").iterdir() for n in [numa[d.name]]}
        assert {pci.get(i) for i in held} == {"0"}, (held, pci)
        cpus = [line for line in exec_out(c, "default", name, "cat", "/proc/1/status").splitlines()
                if line.startswith("Cpus_allowed_list")][0].split()[1]
        assert cpus == "1", cpus
    finally:
        c.kubectl("delete", "pod", name, "--wait=true", "--ignore-not-found")
    # More than NUMA node 0 can give: refused by the Topology Manager, never started.
    big = "unaligned-" + policy
    c.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": big, "namespace": "default"},
        "spec": {"hostNetwork": True, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": big, "image": "localhost/rdp-workload:1", "command": ["true"],
                                 "resources": {"limits": {"rdma/compute": "5", "cpu": "1", "memory": "64Mi"}}}]}}))
    try:
        st = cl.wait_for("the 5-unit pod refused", lambda: c.get("pod", big)["status"].get("reason"), 60, 0.5)
        assert st == "TopologyAffinityError", c.get("pod", big)["status"]
    finally:
        c.kubectl("delete", "pod", big, "--wait=true", "--ignore-not-found")
