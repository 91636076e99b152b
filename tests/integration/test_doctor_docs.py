# SPDX-License-Identifier: MIT
"""docs/troubleshooting.md explains every check `rdma-dp doctor` can emit, and names no other:
every check ID in the doctor sources (the ID argument of rdp_doctor_add and of the pod
group's ADD) has an anchor `<a id="ID"></a>` there, so `troubleshooting.md#ID` links it; every
anchor and every ID the docs and the README mention is one the code emits; and the IDs doctor
really prints on the fixture nodes and in pod mode are among those found in the sources (so
the source scan cannot miss IDs built elsewhere)."""
import json
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TROUBLESHOOTING = REPO / "docs" / "troubleshooting.md"
GROUPS = ("stack", "plugin", "port", "pcie", "placement", "gpudirect", "counters", "pod")
ID_RE = r"(?:%s)\.[a-z_]+" % "|".join(GROUPS)
sys.path.insert(0, str(REPO / "tests" / "fixtures"))


def code_ids():
    ids = set()
    for f in sorted((REPO / "src" / "doctor").glob("*.c")):
        text = f.read_text()
        # rdp_doctor_add(r, RDP_GROUP_X, "id", ...) and the pod group's `const char *id = "..."`
        ids |= set(re.findall(r'rdp_doctor_add\(\s*\w+,\s*RDP_GROUP_\w+,\s*"(%s)"' % ID_RE, text))
        ids |= set(re.findall(r'\bid\s*=\s*"(%s)"' % ID_RE, text))
        # any other literal that looks like an ID (helpers taking the ID as a parameter)
        ids |= {m for m in re.findall(r'"(%s)"' % ID_RE, text)}
    return ids


def anchors():
    return re.findall(r'<a id="([^"]+)"></a>', TROUBLESHOOTING.read_text())


def test_code_ids_found():
    ids = code_ids()
    # the IDs of issue 11's design, at least
    assert {"stack.uverbs", "plugin.sockets", "port.state", "pcie.link", "placement.gpu_nic",
            "gpudirect.acs", "counters.loss", "pod.memlock", "pod.nccl_disable"} <= ids, ids
    assert len(ids) >= 26


def test_every_code_id_has_an_anchor():
    missing = code_ids() - set(anchors())
    assert not missing, "check IDs without an anchor in docs/troubleshooting.md: %s" % sorted(
        missing)


def test_anchors_are_unique_and_exist_in_code():
    a = [x for x in anchors() if re.fullmatch(ID_RE, x)]
    assert len(a) == len(set(a)), "duplicate anchors"
    unknown = set(a) - code_ids()
    assert not unknown, "anchors for IDs doctor does not emit: %s" % sorted(unknown)


@pytest.mark.parametrize("path", [TROUBLESHOOTING, REPO / "docs" / "walkthrough.md",
                                  REPO / "README.md"], ids=lambda p: p.name)
def test_ids_mentioned_exist_and_links_resolve(path):
    text = path.read_text()
    ids = code_ids()
    mentioned = {m for m in re.findall(r"`(%s)`" % ID_RE, text)
                 if m.rsplit(".", 1)[1] not in ("yaml", "json", "md", "py", "c", "h")}
    assert not mentioned - ids, "%s names IDs doctor does not emit: %s" % (
        path.name, sorted(mentioned - ids))
    targets = set(anchors()) | {"doctor-checks", "running-doctor"}
    links = re.findall(r"\]\((?:troubleshooting\.md)?#([^)]+)\)", text)
    if path.name != "troubleshooting.md":
        links = re.findall(r"\]\(troubleshooting\.md#([^)]+)\)", text)
    bad = [l for l in links if l not in targets]
    assert not bad, "%s links to missing anchors: %s" % (path.name, bad)


def _doctor_ids(rdma_dp, *args):
    p = subprocess.run([str(rdma_dp), "doctor", "-o", "json", "--interval", "0",
                        "--kubelet-root-dir", "/nonexistent", *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode in (0, 1), p.stderr
    return {c["id"] for c in json.loads(p.stdout)["checks"]}


def test_emitted_ids_are_documented(rdma_dp, fixtures_dir, tmp_path):
    """Every ID doctor prints on every fixture node (node mode, with a config on dgx-h100) and
    in pod mode is among the sources' IDs, and so has an anchor."""
    import podproc
    seen = set()
    for node in sorted(p for p in fixtures_dir.iterdir() if (p / "sys").is_dir()):
        args = ["--sysfs-root", node / "sys", "--dev-root", node / "dev"]
        if (node / "proc").is_dir():
            args += ["--proc-root", node / "proc"]
        if node.name == "dgx-h100":
            args += ["-c", REPO / "tests" / "fixtures" / "configs" / "dgx.json"]
        seen |= _doctor_ids(rdma_dp, *args)
    dgx = fixtures_dir / "dgx-h100"
    proc = podproc.make_pod(dgx, tmp_path / "pod")
    seen |= _doctor_ids(rdma_dp, "--sysfs-root", dgx / "sys", "--dev-root", dgx / "dev",
                        "--proc-root", proc, "--pid", "1")
    assert any(i.startswith("pod.") for i in seen) and "port.state" in seen
    assert not seen - code_ids(), sorted(seen - code_ids())
    assert not seen - set(anchors()), sorted(seen - set(anchors()))
