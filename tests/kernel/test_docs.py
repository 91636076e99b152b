"""The real-kernel transcripts of the docs (docs/soft-roce.md, the real-kernel blocks of
docs/walkthrough.md) are what this kernel shows, as the fixture transcripts are checked by
tests/integration/test_manifests.py: each `<!-- real-kernel -->` block's commands run here, on
rxe0-2, and their output must equal the block's (tests/integration/docblocks.py: the syntax, `...`
excerpts, and what is normalised). `rdma-dp doctor` gets, unless the command names one, a
kubelet root directory that does not exist, printed as /var/lib/kubelet (the host's root, seen
by the guest, may hold a kubelet's), as the fixture blocks do. Every output is also kept in
RDP_RESULTS/outputs/docs/ (to paste when the binary's output changed on purpose)."""
import difflib
import os
import re
import shlex
import shutil
import subprocess

import pytest

from conftest import REPO, save_output
from docblocks import excerpt_matches, normalise, real_kernel_blocks

BLOCKS = real_kernel_blocks(REPO)


def test_docs_quote_real_kernel_outputs():
    files = {w.split(":")[0] for w, _, _ in BLOCKS}
    assert {"docs/soft-roce.md", "docs/walkthrough.md"} <= files, files


@pytest.mark.parametrize("where,files,cmds", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_doc_block_matches(rdma_dp, tmp_path, where, files, cmds):
    for dst, src in files.items():
        shutil.copyfile(REPO / src, tmp_path / dst)
    no_kubelet = str(tmp_path / "no-kubelet")
    bad = []
    for i, (cmd, expected) in enumerate(cmds):
        argv = shlex.split(cmd)
        assert not {"|", ">", "<", "&&", ";"} & set(argv), "%s: `%s`: no shell here" % (where, cmd)
        if argv[0] == "rdma-dp":
            argv[0] = str(rdma_dp)
            if argv[1] == "doctor" and "--kubelet-root-dir" not in argv:
                argv += ["--kubelet-root-dir", no_kubelet + "/var/lib/kubelet"]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        got = (p.stdout + p.stderr).rstrip("\n").replace(no_kubelet, "")
        name = re.sub(r"[^\w.-]+", "_", "%s-%d-%s" % (where, i, cmd))[:120]
        os.makedirs(os.path.join(os.environ["RDP_RESULTS"], "outputs", "docs"), exist_ok=True)
        save_output(os.path.join("docs", name + ".txt"), "$ %s\n%s\n" % (cmd, got))
        g, e = normalise(got), normalise(expected.rstrip("\n"))
        if not excerpt_matches(g, e):
            diff = "\n".join(difflib.unified_diff(e.split("\n"), g.split("\n"), "the doc",
                                                  "this kernel", lineterm="", n=2))
            bad.append("%s: the output of `%s` is not the doc's (normalised; the real output "
                       "is in outputs/docs/%s.txt):\n%s" % (where, cmd, name, diff))
    if bad:
        pytest.fail("\n\n".join(bad))
