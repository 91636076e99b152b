# SPDX-License-Identifier: MIT
"""deploy/ and docs/ cannot rot: every kustomization renders offline with `kubectl kustomize`,
the rendered DaemonSet and ConfigMap carry every field issue 4 asks for, the configs they ship
pass `rdma-dp check-config` on the fixture nodes and select what the comments say (the
exclusive overlay: one unit per HCA, by PCI address, issue 9), the examples request their
rdma resource without a /dev/infiniband hostPath (the exclusive one as a Guaranteed pod), and
the command outputs quoted in docs/ are what the binary prints on the fixture node they name.

The rendering tests skip, saying so, where kubectl is not installed (it is not a Debian
package); everything else runs everywhere.
"""
import json
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

from conftest import node_args
from docblocks import excerpt_matches

REPO = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
KUSTOMIZATIONS = ["base", "overlays/plugin-watcher", "overlays/multi-pool", "overlays/exclusive",
                  "overlays/cdi", "overlays/nccl", "overlays/metrics-podmonitor"]
# Kinds a kustomization renders besides the ConfigMap and the DaemonSet.
EXTRA_KINDS = {"overlays/metrics-podmonitor": {"PodMonitor"}}
CONFIG_FILE = "/k8s-rdma-shared-dev-plugin/config.json"
ALLOWED_HOSTPATHS = {"/var/lib/kubelet/device-plugins", "/var/lib/kubelet/plugins_registry",
                     "/dev"}
CDI_DIR = "/var/run/cdi"  # the runtimes' dynamic CDI spec dir: overlays/cdi only
Mi = 1024 * 1024


def _quantity(q):
    units = {"Ki": 1024, "Mi": Mi, "Gi": 1024 * Mi, "m": 0.001}
    for u, f in units.items():
        if str(q).endswith(u):
            return float(str(q)[:-len(u)]) * f
    return float(q)


@pytest.fixture(scope="module")
def rendered():
    """{kustomization: [documents]} rendered by kubectl kustomize (offline)."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed: cannot render deploy/ with `kubectl kustomize` "
                    "(kubectl is not a Debian package; install it from pkgs.k8s.io)")
    out = {}
    for k in KUSTOMIZATIONS:
        p = subprocess.run([kubectl, "kustomize", str(DEPLOY / k)], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 0, "kubectl kustomize %s failed:\n%s" % (k, p.stderr)
        out[k] = [d for d in yaml.safe_load_all(p.stdout) if d]
    return out


def _one(docs, kind, name):
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(found) == 1, "%s/%s: %d found" % (kind, name, len(found))
    return found[0]


def _flag(args, name):
    vals = [a.split("=", 1)[1] for a in args if a.startswith(name + "=")]
    return vals[-1] if vals else None


@pytest.mark.parametrize("k", KUSTOMIZATIONS)
def test_rendered_daemonset(rendered, k):
    docs = rendered[k]
    assert {d["kind"] for d in docs} == {"ConfigMap", "DaemonSet"} | EXTRA_KINDS.get(k, set())
    cm = _one(docs, "ConfigMap", "rdma-devices")
    assert cm["metadata"]["namespace"] == "kube-system"
    assert list(cm["data"]) == ["config.json"]
    json.loads(cm["data"]["config.json"])

    ds = _one(docs, "DaemonSet", "rdma-dp")
    assert ds["metadata"]["namespace"] == "kube-system"
    spec = ds["spec"]["template"]["spec"]
    assert spec["priorityClassName"] == "system-node-critical"
    assert spec["hostNetwork"] is True
    assert spec.get("hostPID") is not True and spec.get("hostIPC") is not True
    assert spec["automountServiceAccountToken"] is False
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in \
        spec["tolerations"]
    assert isinstance(spec["nodeSelector"], dict)  # there for users to set
    assert len(spec["containers"]) == 1
    # only CDI mode has an init container: it installs the memlock hook the specs name
    assert not spec.get("initContainers") or k == "overlays/cdi"
    c = spec["containers"][0]
    assert c["image"].startswith("localhost/rdma-dp:")

    sc = c["securityContext"]
    assert sc["privileged"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}

    # sized from measurement (1.5 MiB resident on the DGX fixture, 3.4 MiB on 1000 devices)
    res = c["resources"]
    for kind in ("requests", "limits"):
        assert set(res[kind]) == {"cpu", "memory"}, res
    assert 8 * Mi <= _quantity(res["requests"]["memory"]) <= _quantity(res["limits"]["memory"])
    assert _quantity(res["limits"]["memory"]) <= 64 * Mi
    assert _quantity(res["requests"]["cpu"]) <= _quantity(res["limits"]["cpu"])

    args = c["args"]
    assert args[0] == "serve"
    assert _flag(args, "--config-file") == CONFIG_FILE
    assert _flag(args, "--dev-root") == "/host/dev"
    assert _flag(args, "--sysfs-root") is None  # the container's own read-only sysfs
    registration = _flag(args, "--registration")

    # The metrics endpoint on the documented port, named for the PodMonitor and the probes
    # (issue 12); the probes are httpGet on it, answered by the daemon's loop, and check what
    # the daemon serves, never the config (issue 8, item 5).
    metrics = _flag(args, "--metrics-address")
    assert metrics == ":9470", args
    ports = {p["name"]: p for p in c["ports"]}
    assert ports["metrics"]["containerPort"] == 9470 and ports["metrics"]["protocol"] == "TCP"
    assert spec["hostNetwork"] is True  # containerPort is the node's port
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert "exec" not in c[probe], (probe, c[probe])
        # the probe listener on loopback (issue 22): slots no neighbour can take
        assert c[probe]["httpGet"] == {"host": "127.0.0.1", "path": path, "port": 9471}, \
            c[probe]
    assert _flag(args, "--probe-address") == "127.0.0.1:9471"
    for probe in ("livenessProbe", "readinessProbe"):
        assert c[probe]["timeoutSeconds"] >= 2
    assert c["livenessProbe"]["failureThreshold"] >= 2  # rides over a kubelet restart

    # the init container's hook directory (overlays/cdi) is mounted there only
    vols = {v["name"]: v for v in spec["volumes"] if v["name"] != "hook-bin"}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert set(vols) == set(mounts)
    hostpaths = {v["hostPath"]["path"]: n for n, v in vols.items() if "hostPath" in v}
    assert set(hostpaths) <= ALLOWED_HOSTPATHS | ({CDI_DIR} if k == "overlays/cdi" else set()), \
        hostpaths
    # The host's whole /dev, read-only, at the --dev-root: a /dev/infiniband that devtmpfs
    # removes and re-creates (driver reload) is seen; a bind mount of the old directory is not
    # (issue 8, item 3).
    assert "/dev" in hostpaths and "/dev/infiniband" not in hostpaths
    assert vols[hostpaths["/dev"]]["hostPath"]["type"] == "Directory"
    for path, n in hostpaths.items():
        if path == "/dev":
            assert mounts[n]["readOnly"] is True
            assert mounts[n]["mountPath"] == _flag(args, "--dev-root") == "/host/dev"
            assert mounts[n].get("mountPropagation", "None") == "None"
        else:
            assert mounts[n]["mountPath"] == path  # same path inside: kubelet sees our names
            assert mounts[n].get("readOnly") is not True  # we write sockets / specs there
    assert vols["config"]["configMap"]["name"] == "rdma-devices"
    assert mounts["config"]["mountPath"] + "/config.json" == CONFIG_FILE
    assert mounts["config"]["readOnly"] is True

    assert ("--use-cdi" in args) == (k == "overlays/cdi") == (CDI_DIR in hostpaths)
    if k == "overlays/plugin-watcher":
        assert registration == "plugins-registry"
        assert "/var/lib/kubelet/device-plugins" not in hostpaths
    else:
        assert registration is None  # auto: kubelet.sock when present
        assert "/var/lib/kubelet/device-plugins" in hostpaths


def _check_config(run, fixtures_dir, text, node, tmp_path):
    f = tmp_path / ("config-%s.json" % node)
    f.write_text(text)
    p = run("check-config", "--config-file", f, "-o", "json", *node_args(fixtures_dir, node))
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    assert doc["valid"] is True
    errors = [d for d in doc["diagnostics"] if d["level"] == "error"]
    assert not errors, errors
    return {pl["resource"]: pl for pl in doc["pools"]}, doc


def _configmap_text(path):
    return yaml.safe_load(path.read_text())["data"]["config.json"]


@pytest.mark.parametrize("node,devices", [
    ("seed000", ["mlx5_0"]),
    ("seed001", ["mlx5_0"]),
    ("dgx-h100", ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10",
                  "mlx5_11"]),
])
def test_base_config_selects_the_infiniband_hcas(run, fixtures_dir, tmp_path, node, devices):
    pools, doc = _check_config(run, fixtures_dir,
                               _configmap_text(DEPLOY / "base/configmap.yaml"), node, tmp_path)
    assert doc["diagnostics"] == []  # the shipped config is clean: no warning, no note
    assert list(pools) == ["rdma/hca_shared_devices_a"]
    assert pools["rdma/hca_shared_devices_a"]["devices"] == devices
    assert pools["rdma/hca_shared_devices_a"]["units"] == 200


MULTI_POOL = {
    "dgx-h100": {
        "rdma/compute_ib_numa0": (["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5"], 0),
        "rdma/compute_ib_numa1": (["mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"], 1),
        "rdma/storage_roce": (["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"], -1),
        "rdma/sriov_vf_ens3f0": ([], -1),
    },
    "sriov": {
        "rdma/compute_ib_numa0": ([], -1),
        "rdma/compute_ib_numa1": ([], -1),
        "rdma/storage_roce": ([], -1),
        "rdma/sriov_vf_ens3f0": (["mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4"], None),
    },
}


@pytest.mark.parametrize("node", sorted(MULTI_POOL))
def test_multi_pool_config(run, fixtures_dir, tmp_path, node):
    text = (DEPLOY / "overlays/multi-pool/config.json").read_text()
    pools, doc = _check_config(run, fixtures_dir, text, node, tmp_path)
    assert set(pools) == set(MULTI_POOL[node])
    for name, (devices, numa) in MULTI_POOL[node].items():
        assert pools[name]["devices"] == devices, name
        if numa is not None and devices:
            assert pools[name]["numa_node"] == numa, name
    # no two pools share a device: the per-NUMA split is the whole point
    seen = [d for pl in pools.values() for d in pl["devices"]]
    assert len(seen) == len(set(seen))


def test_multi_pool_configmap_is_the_file(rendered):
    cm = _one(rendered["overlays/multi-pool"], "ConfigMap", "rdma-devices")
    assert json.loads(cm["data"]["config.json"]) == \
        json.loads((DEPLOY / "overlays/multi-pool/config.json").read_text())


# dgx-h100: the 8 compute HCAs by PCI address, with their ibdev and NUMA node.
DGX_COMPUTE_UNITS = [("0000:18:00.0", "mlx5_0", 0), ("0000:40:00.0", "mlx5_3", 0),
                     ("0000:4f:00.0", "mlx5_4", 0), ("0000:5e:00.0", "mlx5_5", 0),
                     ("0000:9a:00.0", "mlx5_6", 1), ("0000:c0:00.0", "mlx5_9", 1),
                     ("0000:ce:00.0", "mlx5_10", 1), ("0000:dc:00.0", "mlx5_11", 1)]
EXCLUSIVE = {
    # node: (compute units (ID, device, NUMA), storage_roce devices)
    "dgx-h100": (DGX_COMPUTE_UNITS, ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]),
    "seed000": ([("0000:81:00.0", "mlx5_0", 1)], []),
    "sriov": ([], []),
}


@pytest.mark.parametrize("node", sorted(EXCLUSIVE))
def test_exclusive_overlay_config(run, fixtures_dir, tmp_path, node):
    text = (DEPLOY / "overlays/exclusive/config.json").read_text()
    pools, doc = _check_config(run, fixtures_dir, text, node, tmp_path)
    assert list(pools) == ["rdma/compute", "rdma/storage_roce"]
    units, storage = EXCLUSIVE[node]
    compute = pools["rdma/compute"]
    assert compute["mode"] == "exclusive"
    # one unit per HCA, named by its PCI address, with its own NUMA node and health
    assert compute["units"] == len(units)
    assert [(u["id"], u["device"], u["numa_node"]) for u in compute["unit_list"]] == units
    assert all(u["healthy"] for u in compute["unit_list"])
    assert compute["devices"] == [d for _, d, _ in units]
    roce = pools["rdma/storage_roce"]
    assert roce["mode"] == "shared" and roce["devices"] == storage
    assert roce["units"] == (63 if storage else 0)
    # the config is clean: only "selects no device on this node" warnings where that is so,
    # and the one note that the Go plugin would not know "mode"
    empty = [r for r, pl in pools.items() if not pl["devices"]]
    warnings = [d for d in doc["diagnostics"] if d["level"] == "warning"]
    notes = [d for d in doc["diagnostics"] if d["level"] == "note"]
    assert len(warnings) + len(notes) == len(doc["diagnostics"])
    assert sorted(d["text"].split(": warning: ")[1] for d in warnings) == sorted(
        "%s selects no device on this node: it is advertised with 0 units" % r for r in empty)
    assert [d["text"].split(": note: ")[1] for d in notes] == [
        'configList[0].mode: k8s-rdma-shared-dev-plugin does not know "mode" and ignores it: '
        "there this resource, without rdmaHcaMax, advertises nothing"]


def test_exclusive_overlay_configmap_is_the_file(rendered):
    cm = _one(rendered["overlays/exclusive"], "ConfigMap", "rdma-devices")
    assert json.loads(cm["data"]["config.json"]) == \
        json.loads((DEPLOY / "overlays/exclusive/config.json").read_text())


def test_exclusive_overlay_text_explains_units(run, fixtures_dir, tmp_path):
    f = tmp_path / "config.json"
    f.write_text((DEPLOY / "overlays/exclusive/config.json").read_text())
    p = run("check-config", "--config-file", f, *node_args(fixtures_dir, "dgx-h100"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "resource rdma/compute (exclusive: one unit per device): 8 of 12 devices selected" \
        in p.stdout
    assert "resource rdma/storage_roce (shared, rdmaHcaMax 63): 4 of 12 devices selected" \
        in p.stdout
    rows = [l.split() for l in p.stdout.splitlines() if l.startswith("    0000:")]
    assert [(r[0], r[1], int(r[2]), r[4]) for r in rows] == \
        [(a, d, n, "Healthy") for a, d, n in DGX_COMPUTE_UNITS]


def _without(ds, arg=None, volume=None):
    """A deep copy of a rendered DaemonSet without one arg and one volume (and its mount)."""
    ds = json.loads(json.dumps(ds))
    spec = ds["spec"]["template"]["spec"]
    c = spec["containers"][0]
    if arg is not None:
        c["args"] = [a for a in c["args"] if a != arg]
    if volume is not None:
        c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] != volume]
        spec["volumes"] = [v for v in spec["volumes"] if v["name"] != volume]
    return ds


def test_cdi_overlay_is_base_plus_cdi(rendered):
    """overlays/cdi adds --use-cdi and the host's /var/run/cdi read-write, and nothing more: the
    read-only root filesystem, the dropped capabilities, the read-only /dev stay (checked for
    every kustomization by test_rendered_daemonset)."""
    base, cdi = rendered["base"], rendered["overlays/cdi"]
    assert _one(cdi, "ConfigMap", "rdma-devices") == _one(base, "ConfigMap", "rdma-devices")
    ds = _one(cdi, "DaemonSet", "rdma-dp")
    c = ds["spec"]["template"]["spec"]["containers"][0]
    assert c["args"].count("--use-cdi") == 1 and c["args"][-1] == "--use-cdi"
    # the daemon's default spec dir is the one mounted
    assert _flag(c["args"], "--cdi-spec-dir") in (None, CDI_DIR)
    vol = [v for v in ds["spec"]["template"]["spec"]["volumes"]
           if v.get("hostPath", {}).get("path") == CDI_DIR]
    assert len(vol) == 1
    assert vol[0]["hostPath"] == {"path": CDI_DIR, "type": "DirectoryOrCreate"}
    mount = [m for m in c["volumeMounts"] if m["name"] == vol[0]["name"]]
    assert len(mount) == 1
    assert mount[0] == {"name": vol[0]["name"], "mountPath": CDI_DIR}  # read-write, private
    # the memlock hook: an init container installs the image's binary where the specs name it
    init = ds["spec"]["template"]["spec"]["initContainers"]
    assert len(init) == 1 and init[0]["args"] == ["install-hook", "--to=/host-hook/rdma-dp"]
    assert init[0]["image"] == c["image"]
    assert init[0]["securityContext"] == c["securityContext"]
    hook = [v for v in ds["spec"]["template"]["spec"]["volumes"] if v["name"] == "hook-bin"]
    assert hook == [{"name": "hook-bin",
                     "hostPath": {"path": "/opt/rdma-dp/bin", "type": "DirectoryOrCreate"}}]
    assert init[0]["volumeMounts"] == [{"name": "hook-bin", "mountPath": "/host-hook"}]
    assert _flag(c["args"], "--memlock-hook") is None  # the default: /opt/rdma-dp/bin/rdma-dp
    del ds["spec"]["template"]["spec"]["initContainers"]
    assert _without(_without(ds, arg="--use-cdi", volume=vol[0]["name"]),
                    volume="hook-bin") == _one(base, "DaemonSet", "rdma-dp")
    assert len(cdi) == len(base)


def test_podmonitor_overlay_is_base_plus_podmonitor(rendered):
    """overlays/metrics-podmonitor: base unchanged, plus a Prometheus Operator PodMonitor that
    selects the DaemonSet's pods and scrapes their container port named `metrics` (which
    deploy/base declares) at /metrics every 30 s."""
    base, pm = rendered["base"], rendered["overlays/metrics-podmonitor"]
    assert _one(pm, "DaemonSet", "rdma-dp") == _one(base, "DaemonSet", "rdma-dp")
    assert _one(pm, "ConfigMap", "rdma-devices") == _one(base, "ConfigMap", "rdma-devices")
    assert len(pm) == len(base) + 1
    mon = _one(pm, "PodMonitor", "rdma-dp")
    assert mon["apiVersion"] == "monitoring.coreos.com/v1"
    assert mon["metadata"]["namespace"] == "kube-system"
    ds = _one(pm, "DaemonSet", "rdma-dp")
    assert ds["metadata"]["namespace"] == "kube-system"
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    sel = mon["spec"]["selector"]
    assert set(sel) == {"matchLabels"}
    assert sel["matchLabels"].items() <= pod_labels.items(), (sel, pod_labels)
    eps = mon["spec"]["podMetricsEndpoints"]
    assert len(eps) == 1
    ep = eps[0]
    assert ep["port"] == "metrics" and ep["path"] == "/metrics" and ep["interval"] == "30s"
    assert ep.get("scheme", "http") == "http"
    assert int(ep["scrapeTimeout"].rstrip("s")) < int(ep["interval"].rstrip("s"))
    ports = {p.get("name"): p for c in ds["spec"]["template"]["spec"]["containers"]
             for p in c.get("ports", [])}
    assert "metrics" in ports, "the PodMonitor scrapes port `metrics`, the DaemonSet has %r" % (
        list(ports),)
    assert ports["metrics"].get("protocol", "TCP") == "TCP"
    # the commented example that reuses node_exporter's dashboards is there to uncomment
    text = (DEPLOY / "overlays/metrics-podmonitor/podmonitor.yaml").read_text()
    assert "#     regex: rdma_dp_(.*)" in text and "#     replacement: node_infiniband_$1" in text
    uncommented = yaml.safe_load(text.replace("      # metricRelabelings:",
                                              "      metricRelabelings:")
                                 .replace("      #   - ", "        - ")
                                 .replace("      #     ", "          "))
    rel = uncommented["spec"]["podMetricsEndpoints"][0]["metricRelabelings"]
    assert rel == [{"sourceLabels": ["__name__"], "regex": "rdma_dp_(.*)",
                    "targetLabel": "__name__", "replacement": "node_infiniband_$1"}]


NCCL_CONFIG = DEPLOY / "overlays/nccl/config.json"
DEVICE_VARS = ("NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "UCX_NET_DEVICES")


def test_nccl_overlay_is_base_plus_envfromdevices(rendered):
    """overlays/nccl: the DaemonSet of base, and base's resource with envFromDevices (and the
    fabric's constant NCCL_IB_TIMEOUT) added, nothing else changed."""
    nccl = rendered["overlays/nccl"]
    assert _one(nccl, "DaemonSet", "rdma-dp") == _one(rendered["base"], "DaemonSet", "rdma-dp")
    cm = json.loads(_one(nccl, "ConfigMap", "rdma-devices")["data"]["config.json"])
    assert cm == json.loads(NCCL_CONFIG.read_text())
    base = json.loads(_configmap_text(DEPLOY / "base/configmap.yaml"))
    assert len(cm["configList"]) == len(base["configList"]) == 1
    got = dict(cm["configList"][0])
    assert got.pop("envFromDevices") == ["NCCL_IB_HCA", "UCX_NET_DEVICES"]
    assert got.pop("env") == {"NCCL_IB_TIMEOUT": "22"}
    assert dict(cm, configList=[got]) == base


@pytest.mark.parametrize("node,devices", [
    ("seed000", ["mlx5_0"]), ("seed001", ["mlx5_0"]),
    ("dgx-h100", ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10",
                  "mlx5_11"]),
])
def test_nccl_overlay_config(run, fixtures_dir, tmp_path, node, devices):
    """The environment check-config says a container gets: computed from the node's pool."""
    pools, doc = _check_config(run, fixtures_dir, NCCL_CONFIG.read_text(), node, tmp_path)
    pool = pools["rdma/hca_shared_devices_a"]
    assert pool["devices"] == devices and pool["units"] == 200
    ports = ",".join("%s:1" % d for d in devices)
    assert pool["env"]["variables"] == {
        "RDMA_DEVICE_RDMA_HCA_SHARED_DEVICES_A": ports, "NCCL_IB_HCA": "=" + ports,
        "UCX_NET_DEVICES": ports, "NCCL_IB_TIMEOUT": "22"}
    # clean but for the notes that the Go plugin ignores the two keys
    assert [d["level"] for d in doc["diagnostics"]] == ["note", "note"], doc["diagnostics"]
    assert all("k8s-rdma-shared-dev-plugin does not know" in d["text"]
               for d in doc["diagnostics"])


# ---- examples ----------------------------------------------------------------------------------
def _pod_specs(doc):
    """Every pod spec inside a workload document, with a label."""
    kind = doc["kind"]
    if kind == "Pod":
        return [("Pod", doc["spec"])]
    if kind in ("DaemonSet", "Deployment", "Job", "StatefulSet"):
        return [(kind, doc["spec"]["template"]["spec"])]
    if kind == "MPIJob":
        return [(r, s["template"]["spec"]) for r, s in doc["spec"]["mpiReplicaSpecs"].items()]
    return []


EXAMPLES = sorted(p.relative_to(DEPLOY) for p in (DEPLOY / "examples").rglob("*.yaml"))
# The rdma resource each example asks for; rdma/hca_shared_devices_a (deploy/base) unless named.
EXAMPLE_RESOURCE = {"examples/pod-exclusive.yaml": "rdma/compute"}  # deploy/overlays/exclusive


def test_examples_exist():
    names = {str(p) for p in EXAMPLES}
    assert {"examples/pod.yaml", "examples/nccl-test-daemonset.yaml",
            "examples/nccl-two-node/mpijob.yaml", "examples/pod-exclusive.yaml"} <= names
    assert set(EXAMPLE_RESOURCE) <= names
    assert (DEPLOY / "examples/nccl-two-node/README.md").exists()


@pytest.mark.parametrize("path", EXAMPLES, ids=str)
def test_example_requests_rdma_without_hostpath(path):
    docs = [d for d in yaml.safe_load_all((DEPLOY / path).read_text()) if d]
    requesting = 0
    for doc in docs:
        for role, spec in _pod_specs(doc):
            for v in spec.get("volumes", []):
                hp = v.get("hostPath", {}).get("path", "")
                assert not hp.startswith(("/dev", "/sys")), (path, role, hp)
            assert spec.get("hostPID") is not True, (path, role)
            for c in spec["containers"]:
                res = c.get("resources", {})
                rdma = {k for part in ("limits", "requests") for k in res.get(part, {})
                        if k.startswith("rdma/")}
                if not rdma:
                    continue
                requesting += 1
                want = EXAMPLE_RESOURCE.get(str(path), "rdma/hca_shared_devices_a")
                assert rdma == {want}, (path, role, rdma)
                assert res["limits"][want] == res["requests"][want] == 1
                caps = c.get("securityContext", {}).get("capabilities", {})
                assert caps.get("add") == ["IPC_LOCK"], (path, role, caps)
                assert not c.get("securityContext", {}).get("privileged")
    assert requesting >= 1, "%s requests no rdma resource" % path


def test_exclusive_example_is_a_guaranteed_gpu_pod(run, fixtures_dir, tmp_path):
    """pod-exclusive.yaml is what the Topology Manager aligns (docs/exclusive.md): a Guaranteed
    pod (every container's CPU and memory requests equal its limits), whole CPUs (the static
    CPU manager's condition for exclusive cores), one GPU and one unit of a resource that the
    exclusive overlay really defines as exclusive."""
    doc = yaml.safe_load((DEPLOY / "examples/pod-exclusive.yaml").read_text())
    assert doc["kind"] == "Pod"
    spec = doc["spec"]
    assert not spec.get("initContainers")
    for c in spec["containers"]:
        res = c["resources"]
        assert res["requests"] == res["limits"], c["name"]
        assert {"cpu", "memory"} <= set(res["limits"]), c["name"]
        assert float(str(res["limits"]["cpu"])).is_integer(), res["limits"]["cpu"]
    c = spec["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert c["resources"]["limits"]["rdma/compute"] == 1
    assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
    pools, _ = _check_config(run, fixtures_dir,
                             (DEPLOY / "overlays/exclusive/config.json").read_text(),
                             "dgx-h100", tmp_path)
    assert pools["rdma/compute"]["mode"] == "exclusive"


NCCL_EXAMPLES = ["examples/nccl-test-daemonset.yaml", "examples/nccl-two-node/mpijob.yaml"]


def _container_env_names(c):
    names = {e["name"] for e in c.get("env", [])}
    assert not c.get("envFrom"), c["name"]  # no ConfigMap of hand-set variables either
    return names


@pytest.mark.parametrize("path", EXAMPLES, ids=str)
def test_example_sets_no_device_variable(path):
    """No example sets an RDMA-device variable by hand (issue 10): rdma-dp computes them."""
    for doc in yaml.safe_load_all((DEPLOY / path).read_text()):
        for role, spec in _pod_specs(doc or {"kind": None}):
            for c in spec.get("initContainers", []) + spec["containers"]:
                names = _container_env_names(c)
                bad = {n for n in names if n in DEVICE_VARS or n.startswith("RDMA_DEVICE_")}
                assert not bad, (path, role, c["name"], bad)


@pytest.mark.parametrize("path", NCCL_EXAMPLES)
def test_nccl_examples_use_the_nccl_overlay(path):
    """The NCCL examples say to deploy overlays/nccl, whose config computes the variables for
    the resource they ask for."""
    text = (DEPLOY / path).read_text()
    assert "kubectl apply -k deploy/overlays/nccl" in text
    cfg = json.loads(NCCL_CONFIG.read_text())["configList"]
    want = EXAMPLE_RESOURCE.get(path, "rdma/hca_shared_devices_a")
    res = [r for r in cfg if "%s/%s" % (r["resourcePrefix"], r["resourceName"]) == want]
    assert len(res) == 1
    assert {"NCCL_IB_HCA", "UCX_NET_DEVICES"} <= set(res[0]["envFromDevices"])


def _mpijob():
    doc = yaml.safe_load((DEPLOY / "examples/nccl-two-node/mpijob.yaml").read_text())
    assert doc["apiVersion"] == "kubeflow.org/v2beta1"
    return doc["spec"]["mpiReplicaSpecs"]


def test_mpijob_nccl_environment():
    specs = _mpijob()
    assert specs["Worker"]["replicas"] == 2
    launcher = specs["Launcher"]["template"]["spec"]["containers"][0]
    env = {e["name"] for e in launcher["env"]}
    assert env == {"NCCL_DEBUG", "NCCL_NET_GDR_LEVEL"}, env  # nothing about the devices
    args = launcher["args"]
    exported = [args[i + 1] for i, a in enumerate(args) if a == "-x"]
    assert sorted(exported) == sorted(env), "every launcher variable passed with -x, no other"
    # the launcher has no RDMA device: -x of a device variable would override the workers'
    assert not {a.split("=")[0] for a in exported} & set(DEVICE_VARS + ("NCCL_IB_TIMEOUT",))
    assert "all_reduce_perf" in " ".join(args)
    worker = specs["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["rdma/hca_shared_devices_a"] == 1
    readme = (DEPLOY / "examples/nccl-two-node/README.md").read_text()
    for var in ("NCCL_IB_HCA", "UCX_NET_DEVICES", "NCCL_SOCKET_IFNAME", "NCCL_IB_GID_INDEX",
                "rdma-dp discover", "rdma-dp check-config", "deploy/overlays/nccl", "SetEnv"):
        assert var in readme, var


def test_mpijob_workers_hand_their_environment_to_the_ranks(tmp_path):
    """mpirun starts the ranks through the worker's sshd, whose sessions start with a fresh
    environment: the worker's command writes what rdma-dp set (NCCL_*, UCX_*, RDMA_DEVICE_*)
    into one sshd SetEnv line (sshd honours the first SetEnv only), each NAME=VALUE quoted,
    and writes nothing when there is nothing (an empty SetEnv is fatal to sshd). Runs the
    worker's own script with sh, sshd replaced by `exit 0`."""
    worker = _mpijob()["Worker"]["template"]["spec"]["containers"][0]
    assert worker["command"] == ["/bin/sh", "-c"]
    script = worker["args"][0]
    conf = "/etc/ssh/sshd_config.d/rdma-env.conf"
    assert conf in script and script.rstrip().endswith("exec /usr/sbin/sshd -De")
    out = tmp_path / "rdma-env.conf"
    script = script.replace(conf, str(out)).replace("exec /usr/sbin/sshd -De", "exit 0")
    base_env = {"PATH": "/usr/bin:/bin", "HOME": "/root"}
    env = dict(base_env, NCCL_IB_HCA="=mlx5_0:1,mlx5_3:1", UCX_NET_DEVICES="mlx5_0:1,mlx5_3:1",
               RDMA_DEVICE_RDMA_HCA_SHARED_DEVICES_A="mlx5_0:1,mlx5_3:1",
               NCCL_IB_TIMEOUT="22", NCCL_IB_ADDR_RANGE="10.0.0.0/16 ", OTHER="x",
               MY_NCCL_IB_HCA="no")
    p = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    line = out.read_text()
    assert line.endswith("\n") and line.count("\n") == 1 and line.startswith("SetEnv "), line
    import shlex
    got = shlex.split(line[len("SetEnv "):])
    assert sorted(got) == sorted("%s=%s" % kv for kv in env.items()
                                 if kv[0] not in base_env and kv[0] not in ("OTHER",
                                                                            "MY_NCCL_IB_HCA"))
    out.unlink()
    p = subprocess.run(["sh", "-c", script], env=dict(base_env, OTHER="x"),
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and not out.exists(), p.stderr


# ---- docs: quoted outputs are what the binary prints -------------------------------------------
# A block in README.md, docs/*.md or deploy/**/README.md preceded by `<!-- fixture: NODE -->` is
# a console transcript: `$ rdma-dp ...` then its output (stdout, then stderr). The test runs the
# command on fixture NODE (adding --sysfs-root/--dev-root) and compares. `<!-- fixture: NODE
# F=SRC -->` first copies SRC (relative to the repository; for a ConfigMap .yaml, its
# config.json) to F in the directory the command runs in, so the docs can say `--config-file
# config.json`. `fault=MODULE.FUNCTION` runs on a copy of NODE with that planted fault of
# tests/fixtures/MODULE.py (its defaults; faults_pci's functions make their own dgx-h100 copy).
# `doctor` also gets the node's proc root (when it has one) and, unless the command names one,
# a kubelet root directory that does not exist, printed as /var/lib/kubelet: the output of a
# machine without kubelet, whatever the machine running the tests has there. A line `...` in
# the expected output stands for any number of lines (an excerpt).
FIXTURE_BLOCK = re.compile(r"<!-- fixture: ([\w-]+)((?: [\w.-]+=[\w./-]+)*) -->\s*\n```[a-z]*\n(.*?)```",
                           re.S)


def _doc_blocks():
    files = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")) + \
        sorted(DEPLOY.rglob("README.md"))
    out = []
    for f in files:
        text = f.read_text()
        for m in FIXTURE_BLOCK.finditer(text):
            files_map = dict(kv.split("=", 1) for kv in m.group(2).split())
            out.append(pytest.param(m.group(1), files_map, m.group(3),
                                    id="%s:%d" % (f.relative_to(REPO),
                                                  text[:m.start()].count("\n") + 1)))
    return out


DOC_BLOCKS = _doc_blocks()


def test_docs_quote_outputs():
    assert len(DOC_BLOCKS) >= 4, "docs/ quote no fixture outputs"


def _planted(fixtures_dir, node, fault, work):
    """The node dir of fixture node with fault "MODULE.FUNCTION" planted (tests/fixtures)."""
    import importlib
    import sys
    sys.path.insert(0, str(REPO / "tests" / "fixtures"))
    import sysfsgen
    module, func = fault.split(".")
    f = getattr(importlib.import_module(module), func)
    if module == "faults_pci":  # copies dgx-h100 itself
        assert node == "dgx-h100", node
        return pathlib.Path(f(fixtures_dir, work / "planted"))
    d = work / "planted" / node
    sysfsgen.copy_node(fixtures_dir / node, d)
    f(str(d))
    return d


@pytest.mark.parametrize("node,files,block", DOC_BLOCKS)
def test_doc_output_matches(run, fixtures_dir, tmp_path, node, files, block):
    files = dict(files)
    fault = files.pop("fault", None)
    for dst, src in files.items():
        if src.endswith(".yaml"):  # a ConfigMap: its config.json
            (tmp_path / dst).write_text(_configmap_text(REPO / src))
        else:
            shutil.copyfile(REPO / src, tmp_path / dst)
    lines = block.rstrip("\n").split("\n")
    assert lines[0].startswith("$ rdma-dp "), lines[0]
    argv = lines[0][len("$ rdma-dp "):].split()
    expected = "\n".join(lines[1:])
    node_dir = _planted(fixtures_dir, node, fault, tmp_path) if fault else fixtures_dir / node
    extra = ["--sysfs-root", str(node_dir / "sys"), "--dev-root", str(node_dir / "dev")]
    no_kubelet = str(tmp_path / "no-kubelet")
    if argv[0] == "doctor":
        if (node_dir / "proc").is_dir() and "--proc-root" not in argv:
            extra += ["--proc-root", str(node_dir / "proc")]
        if "--kubelet-root-dir" not in argv:
            extra += ["--kubelet-root-dir", no_kubelet + "/var/lib/kubelet"]
    p = run(*argv, *extra, cwd=tmp_path if files else REPO)
    got = (p.stdout + p.stderr).rstrip("\n").replace(no_kubelet, "")
    assert excerpt_matches(got, expected.rstrip("\n")), \
        "output of `rdma-dp %s` on %s changed:\n%s" % (" ".join(argv), node, got)


# ---- the DRA driver (deploy/dra, issue 13) -------------------------------------------------------
DRA_DRIVER = "rdma.rdma-dp.io"
DRA_ATTRIBUTES = {"rdma", "ibdev", "pciAddress", "numaNode", "linkLayer", "rateGbps", "vendor",
                  "deviceId", "netdev", "isVf", "pfPciAddress", "isSf", "nodeGuid", "fwVersion"}


@pytest.fixture(scope="module")
def dra_rendered():
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed: cannot render deploy/dra with `kubectl kustomize`")
    p = subprocess.run([kubectl, "kustomize", str(DEPLOY / "dra")], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def test_dra_driver_name_is_the_binarys(run):
    assert "(default %s)" % DRA_DRIVER in run("dra", "--help").stdout


def test_dra_kustomization(dra_rendered):
    docs = dra_rendered
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert kinds == sorted([
        ("ServiceAccount", "rdma-dp-dra"), ("ClusterRole", "rdma-dp-dra"),
        ("ClusterRoleBinding", "rdma-dp-dra"),
        ("ValidatingAdmissionPolicy", "rdma-dp-dra-own-node-slices"),
        ("ValidatingAdmissionPolicyBinding", "rdma-dp-dra-own-node-slices"),
        ("DeviceClass", "rdma-nic"), ("DeviceClass", "rdma-nic-ib"),
        ("DeviceClass", "rdma-nic-roce"), ("DeviceClass", "rdma-hca-shared-devices-a"),
        ("DaemonSet", "rdma-dp-dra")])
    # least privilege: exactly these rules, a watch of slices only (the driver follows its
    # own: dra-follow.h), no wildcard; of a claim only its status is written (status.devices,
    # for this driver's name only)
    role = _one(docs, "ClusterRole", "rdma-dp-dra")
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role["rules"]}
    assert rules == {(("",), ("nodes",)): {"get"},
                     (("resource.k8s.io",), ("resourceslices",)):
                         {"get", "list", "watch", "create", "update", "delete"},
                     (("resource.k8s.io",), ("resourceclaims",)): {"get"},
                     (("resource.k8s.io",), ("resourceclaims/status",)): {"patch"},
                     (("resource.k8s.io",), ("resourceclaims/driver",)):
                         {"associated-node:patch"}}
    drv = [r for r in role["rules"] if r["resources"] == ["resourceclaims/driver"]]
    assert drv[0]["resourceNames"] == [DRA_DRIVER]
    assert all("resourceNames" not in r for r in role["rules"] if r not in drv)
    binding = _one(docs, "ClusterRoleBinding", "rdma-dp-dra")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "rdma-dp-dra",
                                    "namespace": "kube-system"}]
    # slices of its own node only
    vap = _one(docs, "ValidatingAdmissionPolicy", "rdma-dp-dra-own-node-slices")
    assert "system:serviceaccount:kube-system:rdma-dp-dra" in \
        vap["spec"]["matchConditions"][0]["expression"]
    assert vap["spec"]["failurePolicy"] == "Fail"
    assert {"CREATE", "UPDATE", "DELETE"} == set(
        vap["spec"]["matchConstraints"]["resourceRules"][0]["operations"])
    assert _one(docs, "ValidatingAdmissionPolicyBinding", "rdma-dp-dra-own-node-slices")[
        "spec"]["validationActions"] == ["Deny"]
    # the DaemonSet: as the device plugin's, plus the API identity and the DRA paths
    ds = _one(docs, "DaemonSet", "rdma-dp-dra")
    spec = ds["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert spec["serviceAccountName"] == "rdma-dp-dra"
    assert spec.get("automountServiceAccountToken", True) is True
    assert c["args"][0] == "dra"
    # the pod's UID names its sockets (--rolling-update-uid): the update below runs the new
    # pod beside the old one (issue 21, point 7; test_dra_rolling.py)
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in c["env"]} == \
        {"NODE_NAME": "spec.nodeName", "POD_UID": "metadata.uid"}
    assert ds["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert ds["spec"]["minReadySeconds"] >= 5
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] and sc["capabilities"] == {"drop": ["ALL"]}
    assert not sc["privileged"] and not sc["allowPrivilegeEscalation"]
    vols = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    assert set(vols.values()) == {"/var/lib/kubelet/plugins_registry",
                                  "/var/lib/kubelet/plugins", "/var/run/cdi", "/dev",
                                  "/opt/rdma-dp/bin"}
    # the memlock hook: installed by the init container where the specs name it
    init = spec["initContainers"]
    assert len(init) == 1 and init[0]["args"] == ["install-hook", "--to=/host-hook/rdma-dp"]
    assert init[0]["volumeMounts"] == [{"name": "hook-bin", "mountPath": "/host-hook"}]
    assert vols["hook-bin"] == "/opt/rdma-dp/bin"
    assert _flag(c["args"], "--memlock") == "unlimited"
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    for name, path in vols.items():  # kubelet dials the endpoint the driver names
        if path not in ("/dev", "/opt/rdma-dp/bin"):
            assert mounts[name]["mountPath"] == path and not mounts[name].get("readOnly")
    assert mounts["host-dev"]["readOnly"] is True and _flag(c["args"], "--dev-root") == \
        mounts["host-dev"]["mountPath"]
    assert _flag(c["args"], "--cdi-spec-dir") == "/var/run/cdi"
    # DeviceClasses select this driver's devices by attributes it publishes
    for name in ("rdma-nic", "rdma-nic-ib", "rdma-nic-roce", "rdma-hca-shared-devices-a"):
        expr = _one(docs, "DeviceClass", name)["spec"]["selectors"][0]["cel"]["expression"]
        assert 'device.driver == "%s"' % DRA_DRIVER in expr, expr
        used = set(re.findall(r'\.attributes\["%s"\]\.(\w+)' % re.escape(DRA_DRIVER), expr))
        assert used and used <= DRA_ATTRIBUTES, (name, used)
    # the seeds' resource name, served by DRA, by this class alone
    ext = {d["metadata"]["name"]: d["spec"]["extendedResourceName"] for d in docs
           if d["kind"] == "DeviceClass" and d["spec"].get("extendedResourceName")}
    assert ext == {"rdma-hca-shared-devices-a": "rdma/hca_shared_devices_a"}


def test_dra_examples():
    classes = {"rdma-nic", "rdma-nic-ib", "rdma-nic-roce", "gpu.nvidia.com"}
    ex = DEPLOY / "dra" / "examples"
    tmpl = [d for d in yaml.safe_load_all((ex / "gpu-nic-aligned.yaml").read_text()) if d]
    rct = next(d for d in tmpl if d["kind"] == "ResourceClaimTemplate")
    assert rct["apiVersion"] == "resource.k8s.io/v1"
    devs = rct["spec"]["spec"]["devices"]
    assert {r["name"]: r["exactly"]["deviceClassName"] for r in devs["requests"]} == \
        {"gpu": "gpu.nvidia.com", "nic": "rdma-nic-ib"}
    assert devs["constraints"] == [{"requests": ["gpu", "nic"],
                                    "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    pod = next(d for d in tmpl if d["kind"] == "Pod")
    assert pod["spec"]["resourceClaims"] == [{"name": "gpunic",
                                              "resourceClaimTemplateName": "gpu-nic-aligned"}]
    one = [d for d in yaml.safe_load_all((ex / "one-nic.yaml").read_text()) if d]
    rct = next(d for d in one if d["kind"] == "ResourceClaimTemplate")
    assert rct["spec"]["spec"]["devices"]["requests"] == [
        {"name": "nic", "exactly": {"deviceClassName": "rdma-nic-ib", "count": 1}}]
    pod = next(d for d in one if d["kind"] == "Pod")
    assert pod["spec"]["resourceClaims"] == [{"name": "nic", "resourceClaimTemplateName": "rdma-nic-one"}]
    assert [c["resources"]["claims"] for c in pod["spec"]["containers"]] == [[{"name": "nic"}]]
    # the memlock parameter: parsed by the driver's own rules (dra-params.h)
    ml = [d for d in yaml.safe_load_all((ex / "memlock-parameter.yaml").read_text()) if d]
    rct = next(d for d in ml if d["kind"] == "ResourceClaimTemplate")
    (cfg,) = rct["spec"]["spec"]["devices"]["config"]
    assert cfg["requests"] == ["nic"] and cfg["opaque"]["driver"] == DRA_DRIVER
    assert cfg["opaque"]["parameters"] == {"apiVersion": "rdma.rdma-dp.io/v1alpha1",
                                           "kind": "RdmaConfig", "memlock": "64Gi"}
    pod = next(d for d in ml if d["kind"] == "Pod")
    assert pod["spec"]["resourceClaims"] == [{"name": "nic",
                                              "resourceClaimTemplateName": "rdma-nic-memlock"}]
    shared = [d for d in yaml.safe_load_all((ex / "nccl-test-shared.yaml").read_text()) if d]
    claim = next(d for d in shared if d["kind"] == "ResourceClaim")
    req = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert req["allocationMode"] == "All" and req["deviceClassName"] in classes
    sts = next(d for d in shared if d["kind"] == "StatefulSet")
    ps = sts["spec"]["template"]["spec"]
    assert ps["resourceClaims"] == [{"name": "hca", "resourceClaimName": "rdma-shared-a"}]
    for c in ps["containers"]:
        assert c["resources"]["claims"] == [{"name": "hca"}]
        assert c["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert not any(k.startswith("rdma/") for k in c["resources"].get("limits", {}))
