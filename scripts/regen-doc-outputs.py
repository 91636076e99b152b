#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# scripts/regen-doc-outputs.py REPO BINARY FIXTURES FILE.md...: rewrites every console block
# marked `<!-- fixture: NODE -->` with what the binary prints now (the blocks that
# tests/integration/test_manifests.py::test_doc_output_matches checks). Review the diff.
# Regenerate the outputs of fixture-marked console blocks by running the real binary.
import pathlib, re, shutil, subprocess, sys, tempfile, yaml
REPO = pathlib.Path(sys.argv[1]); BIN = sys.argv[2]; FIX = pathlib.Path(sys.argv[3])
files = [pathlib.Path(f) for f in sys.argv[4:]]
RX = re.compile(r"(<!-- fixture: ([\w-]+)((?: [\w.-]+=[\w./-]+)*) -->\s*\n```[a-z]*\n)(.*?)```", re.S)
for f in files:
    text = f.read_text()
    def sub(m):
        node, fm, block = m.group(2), dict(kv.split("=", 1) for kv in m.group(3).split()), m.group(4)
        first = block.split("\n")[0]
        argv = first[len("$ rdma-dp "):].split()
        with tempfile.TemporaryDirectory() as td:
            td = pathlib.Path(td)
            for dst, src in fm.items():
                if src.endswith(".yaml"):
                    (td / dst).write_text(yaml.safe_load((REPO / src).read_text())["data"]["config.json"])
                else:
                    shutil.copyfile(REPO / src, td / dst)
            p = subprocess.run([BIN, *argv, "--sysfs-root", str(FIX / node / "sys"), "--dev-root", str(FIX / node / "dev")],
                               capture_output=True, text=True, cwd=td if fm else REPO)
        got = (p.stdout + p.stderr).rstrip("\n")
        new = first + "\n" + got + "\n"
        if new != block:
            print("%s:%d: regenerated (%s on %s)" % (f, text[:m.start()].count("\n") + 1, first, node))
        return m.group(1) + new + "```"
    f.write_text(RX.sub(sub, text))
