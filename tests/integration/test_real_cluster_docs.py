# SPDX-License-Identifier: MIT
"""docs/walkthrough.md's cluster workflows are run on the real cluster (issue 20): every console
block there that types `kubectl` or `curl` carries the `<!-- real-cluster node=NODE -->` marker
that tests/e2e/test_walkthrough.py (`make e2e`) runs and compares, so none is shown unrun. Only
the doc's structure is checked here; the outputs need the cluster. `sh` blocks (commands shown
without output, such as all_reduce_perf, which the test cluster cannot run) are not transcripts."""
import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "walkthrough.md"
CONSOLE = re.compile(r"(?:(<!-- [^\n]*-->)\s*\n)?```console\n(.*?)```", re.S)
MARKER = re.compile(r"<!-- real-cluster((?: [\w.-]+=[\w./-]+)*) -->")


def test_cluster_transcripts_are_marked():
    text = DOC.read_text()
    marked, unmarked = 0, []
    for m in CONSOLE.finditer(text):
        cmds = [line[2:] for line in m.group(2).split("\n") if line.startswith("$ ")]
        if not any(c.split()[0] in ("kubectl", "curl") for c in cmds):
            continue
        mk = MARKER.fullmatch(m.group(1) or "")
        if not mk:
            unmarked.append("docs/walkthrough.md:%d: %s" % (text[:m.start()].count("\n") + 1, cmds[0]))
            continue
        attrs = dict(kv.split("=", 1) for kv in mk.group(1).split())
        assert set(attrs) == {"node"} and (REPO / "tests" / "fixtures").is_dir(), attrs
        marked += 1
    assert not unmarked, "console blocks with kubectl/curl but no real-cluster marker:\n" + "\n".join(unmarked)
    assert marked >= 8, marked


def test_intro_says_where_the_cluster_outputs_come_from():
    intro = " ".join(DOC.read_text().split("## 0.")[0].split())
    for what in ("Kubernetes 1.37.2", "containerd", "2.4.2", "127.0.0.1", "tests/e2e/test_walkthrough.py",
                 "RDP_WRITE_DOCS=1"):
        assert what in intro, what
