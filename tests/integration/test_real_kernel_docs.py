# SPDX-License-Identifier: MIT
"""The docs' real-kernel blocks (tests/integration/docblocks.py) are well formed, here on any
machine: their output is compared only inside the real-kernel stage's guest
(tests/kernel/test_docs.py, `make check-kernel`), so a broken marker, a missing config file or a
config shown differently from the file it names is caught by the ordinary suite."""
import pathlib
import shlex

from docblocks import real_kernel_blocks

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_real_kernel_blocks():
    blocks = real_kernel_blocks(REPO)
    where = {w.split(":")[0] for w, _, _ in blocks}
    assert {"docs/soft-roce.md", "docs/walkthrough.md"} <= where, where
    for w, files, cmds in blocks:
        assert cmds, "%s: a real-kernel block without a `$ ` command" % w
        for dst, src in files.items():
            assert (REPO / src).is_file(), "%s: %s=%s: no such file" % (w, dst, src)
        for cmd, expected in cmds:
            argv = shlex.split(cmd)
            assert not {"|", ">", "<", "&&", ";"} & set(argv), "%s: `%s`: no shell" % (w, cmd)
            if argv[0] == "cat" and len(argv) == 2 and argv[1] in files:
                text = (REPO / files[argv[1]]).read_text().rstrip("\n")
                assert expected.rstrip("\n") == text, "%s: `%s` is not %s" % (
                    w, cmd, files[argv[1]])


def test_walkthrough_steps_have_real_kernel_blocks():
    """Steps 1, 2 and 4 each end with one (the README and the walkthrough's intro say so)."""
    text = (REPO / "docs" / "walkthrough.md").read_text()
    steps = {}
    for part in text.split("\n## ")[1:]:
        steps[part.split("\n", 1)[0]] = part.count("<!-- real-kernel")
    got = {k.split(".")[0]: n for k, n in steps.items() if n}
    assert got == {"1": 1, "2": 1, "4": 1}, steps
