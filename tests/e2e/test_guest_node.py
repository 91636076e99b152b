"""Real RDMA between pods: a second node, `rdp-guest`, in the real-kernel stage's QEMU guest
(guest.py), with real soft-RoCE devices; rdma-dp's DaemonSet from deploy/base there with no
fixture (the guest's real /sys and /dev); the seeds' nccl-test DaemonSet as the repository keeps
it (seeds/000-nccl-test.yaml: on this kernel /sys/class/infiniband exists, so its hostPath
works); and ib_write_bw between two pods through the devices rdma-dp handed out.

The seeds' ConfigMap (seeds/000-rdma-config.yaml) is adapted in its selectors only: the
article's ConnectX-6 (vendors 15b3, devices 101d, ifNames ib0, linkTypes infiniband) becomes
the guest's rxe0 and rxe1, the two ends of the veth pair (ifNames vethA, vethB; linkTypes
ether); rxe2, on the virtio NIC, stays out of the pool.

While this module runs the host node carries a NoSchedule taint of its own (removed after), so
that the DaemonSets, applied as they are, land on the guest node only. Skips, saying why, where
QEMU or the prepared guest kernel is missing (make check-kernel prepares it).
"""
import json
import os
import pathlib
import re
import subprocess
import time

import pytest
import yaml

import cluster as cl
import guest

REPO = pathlib.Path(__file__).resolve().parents[2]
SEEDS = pathlib.Path(__file__).resolve().parent / "seeds"
RES = "rdma/hca_shared_devices_a"
HOST_TAINT = "rdp.e2e/host-node"
SERVER_IP = "10.77.0.2"   # vethB, rxe1 (scripts/real-kernel/net-setup.sh)


def adapted_seed_config():
    """The seeds' 000 ConfigMap with its selectors made the guest's rxe0/rxe1; nothing else."""
    doc = yaml.safe_load((SEEDS / "000-rdma-config.yaml").read_text())
    cfg = json.loads(doc["data"]["config.json"])
    assert len(cfg["configList"]) == 1 and cfg["configList"][0]["resourceName"] == "hca_shared_devices_a"
    cfg["configList"][0]["selectors"] = {"ifNames": ["vethA", "vethB"], "linkTypes": ["ether"]}
    doc["data"]["config.json"] = json.dumps(cfg, indent=2) + "\n"
    return doc


def overlay(c):
    """deploy/base with the adapted seeds' ConfigMap in place of base's; the DaemonSet as shipped."""
    d = c.work / "overlays" / "guest-node"
    d.mkdir(parents=True, exist_ok=True)
    (d / "rdma-devices.yaml").write_text(yaml.safe_dump(adapted_seed_config()))
    (d / "kustomization.yaml").write_text(json.dumps({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(REPO / "deploy" / "base", d)],
        "patches": [{"path": "rdma-devices.yaml"}],
    }, indent=1) + "\n")
    return d


def pods_on(c, node, *selector):
    return [p for p in c.get("pods", "-A", *selector)["items"] if p["spec"].get("nodeName") == node]


def ready_pod(c, ns, selector, node):
    for p in pods_on(c, node, "-l", selector):
        if p["metadata"]["namespace"] != ns or p["metadata"].get("deletionTimestamp"):
            continue
        for cond in p.get("status", {}).get("conditions", []):
            if cond["type"] == "Ready" and cond["status"] == "True":
                return p["metadata"]["name"]
    return None


def node_resource(c, res=RES):
    st = c.get("node", guest.NAME)["status"]
    return st.get("capacity", {}).get(res), st.get("allocatable", {}).get(res)


def exec_out(c, ns, pod, *cmd, timeout=120):
    return c.kubectl("exec", "-n", ns, pod, "--", *cmd, timeout=timeout).stdout


@pytest.fixture(scope="module")
def guest_node(cluster):
    why = guest.missing()
    if why:
        pytest.skip("no guest node: %s" % why)
    c = cluster
    # Another module's plugin (a fixture node's) must not reach the new node, nor the
    # DaemonSets below the host node.
    c.kubectl("delete", "ds", "-n", "kube-system", "rdma-dp", "--ignore-not-found", "--wait=true")
    c.kubectl("taint", "node", cl.NODE, HOST_TAINT + "=true:NoSchedule", "--overwrite")
    g = guest.GuestNode(c)
    try:
        g.start()
        print("\nguest node %s Ready: %s" % (guest.NAME, ", ".join(
            "%s %.0f s" % kv for kv in g.timings.items())))
        yield g
    finally:
        print("\nguest node timings (s; ib_write_bw in Gb/s): %s" % ", ".join(
            "%s %.3g" % kv for kv in g.timings.items()))
        for what in (("ds", "nccl-test"), ("pod", "rdma-a"), ("pod", "rdma-b")):
            c.kubectl("delete", *what, "--ignore-not-found", "--wait=false", check=False)
        c.kubectl("delete", "-k", overlay(c), "--ignore-not-found", "--wait=false", check=False)
        g.stop()
        c.kubectl("taint", "node", cl.NODE, HOST_TAINT + "-", check=False)


@pytest.fixture(scope="module")
def guest_plugin(guest_node):
    g = guest_node
    c = g.c
    t0 = time.monotonic()
    c.kubectl("apply", "-k", overlay(c))
    try:
        cl.wait_for("the rdma-dp pod on %s Ready" % guest.NAME, lambda: g._check() or ready_pod(
            c, "kube-system", "name=rdma-dp", guest.NAME), 600, 2)
        cl.wait_for("%s on %s" % (RES, guest.NAME), lambda: node_resource(c) == ("200", "200"), 120, 1)
    except cl.ClusterError as e:
        raise cl.ClusterError("%s\n%s\nkubelet: %s" % (e, c.kubectl(
            "describe", "pods", "-n", "kube-system", "-l", "name=rdma-dp", check=False).stdout[-3000:],
            g.log_tail("kubelet")))
    g.timings["plugin_ready_after_apply"] = time.monotonic() - t0
    yield g


def test_guest_node_ready(guest_node):
    """kubelet in the guest registered as rdp-guest through the guestfwd and is Ready, with the
    host's kubelet version and the guest's kernel; its endpoint is the hostfwd's (127.0.0.1:
    10350; the nodes/proxy subresource refuses loopback addresses, logs and exec do not: the
    next tests use them)."""
    c = guest_node.c
    node = c.get("node", guest.NAME)
    assert node["status"]["nodeInfo"]["kubeletVersion"] == c.get("node", cl.NODE)["status"]["nodeInfo"]["kubeletVersion"]
    assert node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] == guest.KUBELET_PORT
    assert not any(t["key"] == guest.UNINIT_TAINT for t in node["spec"].get("taints", []))
    assert node["status"]["nodeInfo"]["kernelVersion"] != os.uname().release
    assert {"type": "InternalIP", "address": "127.0.0.1"} in node["status"]["addresses"]


def test_plugin_on_real_devices(guest_plugin):
    """deploy/base's DaemonSet on the guest node serves the seeds' resource from the real
    rxe devices: 200 units, and a log naming rxe0 and rxe1 (the veth ends), not rxe2."""
    c = guest_plugin.c
    assert node_resource(c) == ("200", "200")
    pod = ready_pod(c, "kube-system", "name=rdma-dp", guest.NAME)
    log = c.kubectl("logs", "-n", "kube-system", pod).stdout   # through the hostfwd
    assert "rxe0" in log and "rxe1" in log, log[-3000:]


def test_seed_daemonset_running(guest_plugin):
    """The seeds' nccl-test DaemonSet, applied as the repository keeps it (its
    /sys/class/infiniband hostPath included), Running on the guest node with one unit of the
    seeds' resource and one GPU (the stand-in); the container sees the real RDMA class."""
    c = guest_plugin.c
    c.kubectl("apply", "-f", SEEDS / "000-nccl-test.yaml")
    pod = cl.wait_for("a nccl-test pod on %s" % guest.NAME,
                      lambda: (pods_on(c, guest.NAME, "-l", "app=nccl-test") or [None])[0], 120, 1)
    name = pod["metadata"]["name"]
    c.wait_pod("default", name, timeout=600)
    assert "Pod is ready" in c.kubectl("logs", name).stdout
    ibs = exec_out(c, "default", name, "ls", "/sys/class/infiniband").split()
    assert {"rxe0", "rxe1", "rxe2"} <= set(ibs), ibs
    desc = c.kubectl("describe", "node", guest.NAME).stdout
    alloc = desc.split("Allocated resources:")[1]
    assert re.search(r"^\s+rdma/hca_shared_devices_a\s+1\s+1$", alloc, re.M), alloc
    assert re.search(r"^\s+nvidia.com/gpu\s+1\s+1$", alloc, re.M), alloc
    c.kubectl("delete", "ds", "nccl-test", "--wait=true", timeout=300)


def rdma_pod(name):
    return json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"hostNetwork": True, "restartPolicy": "Never",
                 "nodeSelector": {"kubernetes.io/hostname": guest.NAME},
                 "containers": [{
                     "name": name, "image": "localhost/rdp-workload:1",
                     "command": ["sh", "-c", "exec sleep infinity"],
                     "resources": {"limits": {RES: "1"}, "requests": {RES: "1"}},
                     "securityContext": {"allowPrivilegeEscalation": False,
                                         "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}}]}})


BW_ITERS, BW_SIZE = 1000, 65536


def ib_write_bw(c, srv_pod, srv_dev, cli_pod, cli_dev):
    """ib_write_bw between two pods of the guest node (server srv_pod on srv_dev, whose netdev
    has SERVER_IP; client cli_pod on cli_dev): (peak, average, wall-clock Gb/s, client seconds).
    Each end pinned to one vCPU: perftest times with the TSC, and an unpinned run reported
    0 Gb/s (most likely moving between TCG vCPUs whose TSCs differ; not proven). The client's
    wall time (the guest's /proc/uptime around it, set-up included) gives a second figure."""
    common = ["ib_write_bw", "-x", "1", "-F", "-s", str(BW_SIZE), "-n", str(BW_ITERS), "--report_gbits",
              "-p", "18515"]
    srv = subprocess.Popen([str(c.bin / "kubectl"), "--kubeconfig", str(c.kc / "admin.conf"), "exec",
                            "-n", "default", srv_pod, "--", "taskset", "-c", "0"] + common + ["-d", srv_dev],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    client = "cat /proc/uptime; taskset -c 1 %s -d %s %s; rc=$?; cat /proc/uptime; exit $rc" % (
        " ".join(common), cli_dev, SERVER_IP)
    try:
        cli = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and srv.poll() is None:
            cli = c.kubectl("exec", "-n", "default", cli_pod, "--", "sh", "-c", client,
                            check=False, timeout=300)
            if cli.returncode == 0 or "Couldn't connect" not in cli.stdout + cli.stderr:
                break
            time.sleep(2)
        out, _ = srv.communicate(timeout=300)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait(10)
    assert cli is not None and cli.returncode == 0, (cli and cli.stdout + cli.stderr, out)
    assert srv.returncode == 0, out
    m = re.search(r"^\s*%d\s+%d\s+(\S+)\s+(\S+)\s+(\S+)\s*$" % (BW_SIZE, BW_ITERS), cli.stdout, re.M)
    assert m, cli.stdout
    peak, avg = float(m.group(1)), float(m.group(2))
    ups = [float(line.split()[0]) for line in cli.stdout.splitlines()
           if re.match(r"^\d+\.\d+ \d+\.\d+$", line.strip())]
    assert len(ups) == 2 and ups[1] > ups[0], cli.stdout
    secs = ups[1] - ups[0]
    return peak, avg, BW_SIZE * BW_ITERS * 8 / secs / 1e9, secs


def test_ib_write_bw_between_pods(guest_plugin):
    """Two pods on the guest node, each asking for one unit of rdma/hca_shared_devices_a and
    given no hostPath: each holds exactly the pool's device nodes (rxe0's and rxe1's uverbs,
    not rxe2's), and ib_write_bw runs between them, server on rxe1 (vethB), client on rxe0
    (vethA), through those nodes. The bandwidth is printed."""
    c = guest_plugin.c
    for n in ("rdma-a", "rdma-b"):
        c.kubectl("apply", "-f", "-", input=rdma_pod(n))
    for n in ("rdma-a", "rdma-b"):
        c.wait_pod("default", n, timeout=600)
    # uverbsN -> its device, from the guest's sysfs as the pod sees it
    verbs = {}
    for line in exec_out(c, "default", "rdma-a", "sh", "-c",
                         "for d in /sys/class/infiniband_verbs/uverbs*; do echo ${d##*/} $(cat $d/ibdev); done").splitlines():
        uv, ib = line.split()
        verbs[ib] = uv
    assert set(verbs) >= {"rxe0", "rxe1", "rxe2"}, verbs
    for n in ("rdma-a", "rdma-b"):
        held = set(exec_out(c, "default", n, "ls", "/dev/infiniband").split())
        assert {verbs["rxe0"], verbs["rxe1"]} <= held, held
        assert verbs["rxe2"] not in held, held
    peak, avg, wall, secs = ib_write_bw(c, "rdma-a", "rxe1", "rdma-b", "rxe0")
    print("\nib_write_bw rxe0 -> rxe1 between pods on %s (QEMU TCG): %d B x %d, perftest peak %.3f "
          "average %.3f Gb/s; wall clock %.3f Gb/s (%.2f s, set-up included)" % (
              guest.NAME, BW_SIZE, BW_ITERS, peak, avg, wall, secs))
    guest_plugin.timings["ib_write_bw_avg_gbps"] = avg
    guest_plugin.timings["ib_write_bw_wall_gbps"] = wall


# ------------------------------------------------------------------ DRA on the guest node
DRA_DRIVER = "rdma.rdma-dp.io"


def dra_overlay(c):
    """deploy/dra as shipped, plus where the driver finds the API server from inside the guest:
    the QEMU user network's relay (guest.API_GUEST:6443, in the test PKI's server certificate),
    since there is no kube-proxy for the kubernetes Service's ClusterIP. The driver reads the
    guest's real /sys and /dev; the memlock hook goes to the guest's /opt/rdma-dp/bin (the
    guest's root is an overlay on its own tmpfs: nothing of the host is written)."""
    d = c.work / "overlays" / "guest-dra"
    d.mkdir(parents=True, exist_ok=True)
    ct = "/spec/template/spec/containers/0"
    patch = [
        {"op": "add", "path": ct + "/env/-", "value": {"name": "KUBERNETES_SERVICE_HOST", "value": guest.API_GUEST}},
        {"op": "add", "path": ct + "/env/-", "value": {"name": "KUBERNETES_SERVICE_PORT", "value": "6443"}},
    ]
    (d / "kustomization.yaml").write_text(json.dumps({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(REPO / "deploy" / "dra", d)],
        "patches": [{"target": {"kind": "DaemonSet", "name": "rdma-dp-dra"}, "patch": json.dumps(patch)}],
    }, indent=1) + "\n")
    return d


def dra_claim_and_pod(name, ibdev):
    """A ResourceClaim for the RoCE device `ibdev` (class rdma-nic-roce, a CEL selector on the
    driver's ibdev attribute) and a pod on the guest node using it; nothing else asked for."""
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": name, "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "nic", "exactly": {
                 "deviceClassName": "rdma-nic-roce",
                 "selectors": [{"cel": {"expression": 'device.attributes["%s"].ibdev == "%s"' % (
                     DRA_DRIVER, ibdev)}}]}}]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"hostNetwork": True, "restartPolicy": "Never",
                    "nodeSelector": {"kubernetes.io/hostname": guest.NAME},
                    "resourceClaims": [{"name": "nic", "resourceClaimName": name}],
                    "containers": [{
                        "name": name, "image": "localhost/rdp-workload:1",
                        "command": ["sh", "-c", "exec sleep infinity"],
                        "resources": {"claims": [{"name": "nic"}]},
                        "securityContext": {"allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}}]}}
    return "\n---\n".join(yaml.safe_dump(d) for d in (claim, pod))


def test_dra_claims_between_pods(guest_plugin):
    """The DRA path on the guest node: deploy/base's DaemonSet leaves (one driver per node),
    deploy/dra comes (its ServiceAccount's token through the relay), the guest's rxe devices
    are published, a claim for rxe1 and a claim for rxe0 are allocated by the real scheduler
    and prepared by rdma-dp, each pod holds only its NIC's device nodes and is told its NIC by
    the claim's variables (RDMA_DEVICE_NIC, NCCL_IB_HCA), and ib_write_bw runs between the two
    pods on the devices those variables name."""
    g = guest_plugin
    c = g.c
    for n in ("rdma-a", "rdma-b"):
        c.kubectl("delete", "pod", n, "--ignore-not-found", "--grace-period=1", "--wait=true", timeout=300)
    c.kubectl("delete", "-k", overlay(c), "--ignore-not-found", "--wait=true", timeout=300)
    t0 = time.monotonic()
    c.kubectl("apply", "-k", dra_overlay(c))
    try:
        cl.wait_for("the rdma-dp-dra pod on %s Ready" % guest.NAME, lambda: g._check() or ready_pod(
            c, "kube-system", "name=rdma-dp-dra", guest.NAME), 600, 2)

        def guest_devices():
            s = [x for x in c.get("resourceslices")["items"]
                 if x["spec"]["driver"] == DRA_DRIVER and x["spec"].get("nodeName") == guest.NAME]
            return {d["attributes"]["ibdev"]["string"]: d for x in s for d in x["spec"]["devices"]}
        devs = cl.wait_for("the guest's pool published", lambda: (
            lambda d: d if {"rxe0", "rxe1"} <= set(d) else None)(guest_devices()), 120, 1)
        g.timings["dra_published_after_apply"] = time.monotonic() - t0
        assert devs["rxe0"]["attributes"]["linkLayer"] == {"string": "Ethernet"}
        for name, ibdev in (("rdma-dra-srv", "rxe1"), ("rdma-dra-cli", "rxe0")):
            c.kubectl("apply", "-f", "-", input=dra_claim_and_pod(name, ibdev))
        for name in ("rdma-dra-srv", "rdma-dra-cli"):
            c.wait_pod("default", name, timeout=600)
        verbs = {}
        for line in exec_out(c, "default", "rdma-dra-srv", "sh", "-c",
                             "for d in /sys/class/infiniband_verbs/uverbs*; do echo ${d##*/} $(cat $d/ibdev); done").splitlines():
            uv, ib = line.split()
            verbs[ib] = uv
        dev_of = {}
        for name, ibdev in (("rdma-dra-srv", "rxe1"), ("rdma-dra-cli", "rxe0")):
            env = dict(kv.split("=", 1) for kv in exec_out(c, "default", name, "env").splitlines() if "=" in kv)
            assert env.get("RDMA_DEVICE_NIC", "").split(":")[0] == ibdev, env
            assert env.get("NCCL_IB_HCA", "").lstrip("=^").split(":")[0] == ibdev, env
            held = set(exec_out(c, "default", name, "ls", "/dev/infiniband").split())
            assert held == {verbs[ibdev], "rdma_cm"}, (name, held, verbs)
            dev_of[name] = env["RDMA_DEVICE_NIC"].split(":")[0]
        peak, avg, wall, secs = ib_write_bw(c, "rdma-dra-srv", dev_of["rdma-dra-srv"],
                                            "rdma-dra-cli", dev_of["rdma-dra-cli"])
        print("\nib_write_bw between DRA claims on %s: perftest peak %.3f average %.3f Gb/s; wall clock "
              "%.3f Gb/s (%.2f s)" % (guest.NAME, peak, avg, wall, secs))
        g.timings["dra_ib_write_bw_avg_gbps"] = avg
    finally:
        for name in ("rdma-dra-srv", "rdma-dra-cli"):
            c.kubectl("delete", "pod", name, "--ignore-not-found", "--grace-period=1", "--wait=true",
                      check=False, timeout=300)
            c.kubectl("delete", "resourceclaim", name, "--ignore-not-found", check=False)
        c.kubectl("delete", "-k", dra_overlay(c), "--ignore-not-found", "--wait=true", check=False, timeout=300)
