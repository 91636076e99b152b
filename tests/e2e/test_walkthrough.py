"""docs/walkthrough.md's kubectl workflows, run on the real cluster (issue 20): every block marked

    <!-- real-cluster node=seed000 -->
    ```console
    $ kubectl apply -k deploy/base
    configmap/rdma-devices created
    ...
    ```

is run here, command by command, as the doc types it (bash -c, so pipes work as in a shell),
with the cluster's kubectl first on PATH and KUBECONFIG its admin's, from a directory of this run
that holds what the commands name (deploy/...), on the fixture node the marker names. Each
command's output (stdout and stderr, as a terminal shows them) must equal the lines under it, up to the next `$ ` line,
after normalise() on both sides; a line `...` stands for any number of lines (an excerpt,
tests/integration/docblocks.py).

What the commands find in that directory, and why it differs from the repository:
  * deploy/base, deploy/overlays/multi-pool and deploy/dra: kustomizations of the repository's,
    with the test overlays of
    test_device_plugin.py and test_dra.py (--sysfs-root at the fixture node; for the DRA driver
    the API server's address and the memlock hook's directory): this machine has no RDMA device;
  * deploy/examples/*.yaml and deploy/dra/examples/*.yaml: the repository's, with every image
    swapped for the local workload image (no registry is reachable) and hostNetwork set (the
    cluster's CNI is loopback-only); nothing else changed.

RDP_WRITE_DOCS=1 makes the test write each block's real output into the doc instead of
comparing (without kubectl rollout status's "Waiting for ..." progress lines, whose number
depends on timing) (excerpt blocks, those with `...`, are compared even then: edit those by hand from
the output printed on failure).
"""
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest
import yaml

import cluster as cl  # puts tests/integration first on sys.path: it has a test_dra.py too
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import test_device_plugin as tdp  # noqa: E402
import test_dra as tdra  # noqa: E402
from docblocks import excerpt_matches  # noqa: E402

assert pathlib.Path(tdra.__file__).parent == pathlib.Path(__file__).resolve().parent, tdra.__file__

REPO = pathlib.Path(__file__).resolve().parents[2]
DOC = "docs/walkthrough.md"
REAL_CLUSTER_BLOCK = re.compile(r"<!-- real-cluster((?: [\w.-]+=[\w./-]+)*) -->\s*\n```[a-z]*\n(.*?)```", re.S)
WRITE = os.environ.get("RDP_WRITE_DOCS") == "1"

# What differs from one run to the next, replaced by fixed tokens on both sides.
UID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z\b")
RV = re.compile(r'(resourceVersion: )"\d+"')
# the API server's generated name suffixes (pods of a DaemonSet, ResourceSlices) and controller
# revision hashes: Kubernetes' random alphabet, no vowels and none of 0, 1, 3
SUFFIX = re.compile(r"(?<=-)[bcdfghjklmnpqrstvwxz2456789]{5,10}\b")
LS_DATE = re.compile(r"\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} +(?:\d\d:\d\d|\d{4})\b")
# rdma-dp health's "generation N": how many times the daemon wrote its status file, which
# depends on how events coalesced while it started
GENERATION = re.compile(r"(?<=generation )\d+\b")
# kubectl's tables pad columns to their widest entry (describe node: the longest resource
# name the node has ever had, since kubelet keeps a gone plugin's resources in its capacity)
PADDING = re.compile(r"(?<=\S) {2,}")
WAITING = re.compile(r"^Waiting for .*$\n?", re.M)  # kubectl rollout status's progress lines


def normalise(text):
    text = "\n".join(PADDING.sub("  ", line.rstrip()) for line in text.split("\n"))
    text = WAITING.sub("", text)
    for pat, tok in ((UID, "<uid>"), (TIME, "<time>"), (SUFFIX, "<suffix>"), (LS_DATE, "<date>"),
                     (GENERATION, "<n>")):
        text = pat.sub(tok, text)
    return RV.sub(r'\1"<rv>"', text)


def blocks(text=None):
    """[(section, attrs, [(command, expected)], span)] of the doc's real-cluster blocks, in order;
    section is the `## ` heading above the block, span the block body's (start, end)."""
    text = (REPO / DOC).read_text() if text is None else text
    out = []
    for m in REAL_CLUSTER_BLOCK.finditer(text):
        heads = re.findall(r"^## (.*)$", text[:m.start()], re.M)
        cmds = []
        for line in m.group(2).rstrip("\n").split("\n"):
            if line.startswith("$ "):
                cmds.append([line[2:], []])
            elif cmds:
                cmds[-1][1].append(line)
            else:
                raise ValueError("%s:%d: a real-cluster block starts with `$ <command>`" %
                                 (DOC, text[:m.start()].count("\n") + 1))
        attrs = dict(kv.split("=", 1) for kv in m.group(1).split())
        out.append((heads[-1] if heads else "", attrs, [(c, "\n".join(o)) for c, o in cmds], m.span(2)))
    return out


def section_blocks(prefix):
    got = [(i, b) for i, b in enumerate(blocks()) if b[0].startswith(prefix)]
    assert got, "%s has no real-cluster block under a heading %r" % (DOC, prefix)
    return got


def swapped(src, dst):
    """src's YAML documents with the images local and hostNetwork on, written to dst."""
    docs = tdra.with_image([d for d in yaml.safe_load_all(src.read_text()) if d])
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text("\n---\n".join(yaml.safe_dump(d) for d in docs))


def view_overlay(src, dst):
    """The overlay directory src (a test module's) as dst: its resources path made relative to dst."""
    k = json.loads((src / "kustomization.yaml").read_text())
    k["resources"] = [os.path.relpath((src / r).resolve(), dst) for r in k["resources"]]
    dst.mkdir(parents=True, exist_ok=True)
    (dst / "kustomization.yaml").write_text(json.dumps(k, indent=1) + "\n")


def cleanup(c):
    """What an earlier module, or an earlier run of the doc's commands, left: the doc's steps
    start from a node without rdma-dp (and `kubectl apply` then says "created"). The DRA
    driver leaves its ResourceSlices when it stops (kubelet wipes them at its restart): a new
    driver would take over the pool at a higher generation, so they go too."""
    for args in (("statefulset", "nccl-a"), ("pod", "nccl-a-0", "nccl-a-1"), ("resourceclaim", "rdma-shared-a"),
                 ("ds", "nccl-test"), ("pod", "rdma-test"), ("ds", "-n", "kube-system", "rdma-dp"),
                 ("configmap", "-n", "kube-system", "rdma-devices"), ("-k", c.walk_view / "deploy" / "dra")):
        c.kubectl("delete", *args, "--ignore-not-found", "--wait=true", "--grace-period=1", check=False, timeout=180)
    cl.wait_for("no rdma-dp pods", lambda: not c.get("pods", "-n", "kube-system", "-l", "name in (rdma-dp,rdma-dp-dra)")
                ["items"], 120, 0.5)
    c.kubectl("delete", "resourceslices", "--field-selector", "spec.driver=" + tdra.DRIVER, "--wait=true", timeout=60)
    cl.wait_for("no workload pods", lambda: not [p for p in c.get("pods", "-n", "default")["items"]
                                                 if p["metadata"]["name"].startswith(("nccl-", "rdma-test"))], 120, 0.5)


@pytest.fixture(scope="module")
def walk(cluster):
    c = cluster
    before = c.node_fixture
    node = {b[1].get("node") for b in blocks()}
    assert len(node) == 1 and None not in node, node
    node = node.pop()
    if c.node_fixture != node:
        cl.swap_node(c, node)
    started_gpu = not c.running("gpu-plugin")
    if started_gpu:  # the nccl-test examples ask for nvidia.com/gpu
        c.start("gpu-plugin", ["/usr/bin/python3", pathlib.Path(__file__).parent / "gpu_plugin.py"], in_node=True)
    view = c.work / "walkthrough"
    view_overlay(tdp.overlay(c, "walkthrough-base"), view / "deploy" / "base")
    view_overlay(tdp.overlay(c, "walkthrough-multi-pool", base="overlays/multi-pool"),
                 view / "deploy" / "overlays" / "multi-pool")
    memlock, c.dra_memlock = tdra.memlock_value()
    view_overlay(tdra.overlay(c, memlock, "walkthrough-dra"), view / "deploy" / "dra")
    for ex in ("deploy/examples/pod.yaml", "deploy/examples/nccl-test-daemonset.yaml",
               "deploy/dra/examples/nccl-test-shared.yaml"):
        swapped(REPO / ex, view / ex)
    bindir = c.work / "walkthrough-bin"
    bindir.mkdir(exist_ok=True)
    if not (bindir / "kubectl").exists():
        (bindir / "kubectl").symlink_to(c.bin / "kubectl")
    c.walk_view, c.walk_env = view, dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]),
                                         KUBECONFIG=str(c.kc / "admin.conf"))
    cleanup(c)
    t0 = time.monotonic()
    yield c
    print("\nwalkthrough: %.0f s" % (time.monotonic() - t0))
    cleanup(c)
    if started_gpu:
        c.stop("gpu-plugin")
    if c.node_fixture != before:
        cl.swap_node(c, before)


HOOKS = {
    # a user reads the node once kubelet has posted the new resource (nodeStatusUpdateFrequency)
    "kubectl describe node": lambda c: cl.wait_for(
        "%s 200 on the node" % tdp.RES, lambda: tdp.node_resource(c) == ("200", "200"), 60, 0.5),
    "kubectl get resourceslices": lambda c: cl.wait_for("the pool published", lambda: tdra.published(c), 60, 0.5),
    # a user asks until every resource is registered (after a config change, the new ones)
    "curl -s http://localhost:9470/readyz": lambda c: cl.wait_for("readyz: every resource registered", lambda: re.fullmatch(
        r"ok: (\d+) resources, \1 registered", subprocess.run(["curl", "-s", "http://localhost:9470/readyz"],
                                                              capture_output=True, text=True).stdout.strip()), 60, 0.5),
    # the change reaches the container once kubelet has synced the ConfigMap's volume
    "kubectl -n kube-system logs ds/rdma-dp | grep -e event=reload": lambda c: cl.wait_for(
        "event=config-reloaded", lambda: "event=config-reloaded" in tdp.plugin_log(c), 180, 1),
}


def run_cmd(c, cmd):
    for prefix, hook in HOOKS.items():
        if cmd.startswith(prefix):
            hook(c)
    p = subprocess.run(["bash", "-c", cmd], cwd=c.walk_view, env=c.walk_env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=240)
    got = p.stdout.rstrip("\n")
    assert p.returncode == 0, "`%s` exited %d:\n%s" % (cmd, p.returncode, got)
    return got


def run_section(c, prefix):
    """Runs every real-cluster block under the heading `prefix`; compares, or writes (RDP_WRITE_DOCS)."""
    bad = []
    for i, (_, attrs, cmds, _) in section_blocks(prefix):
        assert attrs["node"] == c.node_fixture, (attrs, c.node_fixture)
        outs = []
        for cmd, expected in cmds:
            got = run_cmd(c, cmd)
            outs.append((cmd, got))
            print("$ %s\n%s" % (cmd, got))
            g, e = normalise(got), normalise(expected)
            if (not WRITE or "..." in expected.split("\n")) and not excerpt_matches(g, e):
                bad.append("%s, block %d: the output of `%s` is not the doc's (normalised):\n--- the doc\n%s\n"
                           "--- the cluster\n%s\n--- the real output\n%s" % (DOC, i + 1, cmd, e, g, got))
        if WRITE and not any("..." in e.split("\n") for _, e in cmds):
            text = (REPO / DOC).read_text()
            start, end = blocks(text)[i][3]
            body = "".join("$ %s\n%s" % (cmd, WAITING.sub("", got).rstrip("\n") + "\n" if got else "")
                           for cmd, got in outs)
            (REPO / DOC).write_text(text[:start] + body + text[end:])
    if bad:
        pytest.fail("\n\n".join(bad))


def test_every_block_is_run():
    """Each real-cluster block sits under a heading that a test below runs."""
    heads = {b[0] for b in blocks()}
    assert heads <= {"3. Deploy", "4. Verify", "5. Request the resource", "6. Run NCCL tests",
                     "The DRA path (instead of steps 3 to 6)", "7. Tune"}, heads


def test_step3_deploy(walk):
    run_section(walk, "3. ")


def test_step4_verify(walk):
    run_section(walk, "4. ")


def test_step5_request(walk):
    run_section(walk, "5. ")


def test_step6_nccl_test_daemonset(walk):
    run_section(walk, "6. ")


def test_dra_path(walk):
    """After steps 3 to 6 (which the DRA path replaces: both would hand out the same devices):
    their objects go first, as on a node that took the DRA path from the start."""
    c = walk
    cleanup(c)
    run_section(c, "The DRA path")
    uid = c.get("resourceclaim", "-n", "default", "rdma-shared-a")["metadata"]["uid"]
    # the doc's "its CDI spec is /var/run/cdi/rdma-dp.io-claim_<uid>.json on the node"
    assert c.node_path("/var/run/cdi/rdma-dp.io-claim_%s.json" % uid).exists()


def test_step7_config_change(walk):
    """Step 7's config change on step 3's deployment (the DRA path removed it: deployed again
    as step 3 does, before the doc's commands)."""
    c = walk
    cleanup(c)
    c.kubectl("apply", "-k", c.walk_view / "deploy" / "base")
    pod = cl.wait_for("the rdma-dp pod Ready", lambda: tdp.plugin_ready(c), 180, 0.5)
    run_section(c, "7. ")
    assert tdp.plugin_ready(c) == pod
    assert c.get("pod", "-n", "kube-system", pod)["status"]["containerStatuses"][0]["restartCount"] == 0
    cl.wait_for("rdma/compute_ib_numa1 on the node",
                lambda: tdp.node_resource(c, "rdma/compute_ib_numa1") == ("63", "63"), 30, 0.5)

