# SPDX-License-Identifier: MIT
"""`make demo` (scripts/demo.sh) runs to the end on the bundled DGX H100 node: discovery,
check-config, the daemon serving shared pools to the fake kubelet, `rdma-dp topo`, and an
exclusive resource whose pods kubelet places with GetPreferredAllocation."""
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_demo_runs_to_the_end():
    build = os.environ.get("RDP_BUILD")
    if not build or not (pathlib.Path(build) / "fixtures" / "dgx-h100" / "sys").is_dir():
        pytest.skip("RDP_BUILD with generated fixtures not set (run through ctest/make check)")
    p = subprocess.run(["sh", str(REPO / "scripts" / "demo.sh"), build], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    out = p.stdout
    for want in ("### rdma-dp discover", "### rdma-dp check-config", "Capacity:",
                 "rdma/compute_ib_numa0:", "GPU0     X", "0000:18:00.0           mlx5_0",
                 "pod train-0  4 NICs, NUMA hint none  -> 0000:18:00.0 0000:40:00.0 "
                 "0000:4f:00.0 0000:5e:00.0",
                 "pod infer-2  2 NICs, NUMA hint 1     -> 0000:ce:00.0 0000:dc:00.0",
                 "== daemon stopped with SIGTERM: exit 0, its sockets removed"):
        assert want in out, want
    assert out.count("== daemon stopped with SIGTERM: exit 0") == 2
    # The README quotes the /metrics excerpt the demo prints, line for line.
    lines = out.split("\n")
    start = next(i for i, ln in enumerate(lines) if ln.startswith("== GET /metrics"))
    end = lines.index("", start)
    excerpt = "\n".join(lines[start:end])
    assert len(lines[start:end]) > 10, excerpt
    readme = (REPO / "README.md").read_text()
    assert "$ make demo\n...\n" + excerpt + "\n```" in readme, excerpt


def test_demo_cdi_matches_the_docs():
    """docs/cdi.md quotes scripts/demo-cdi.sh: the spec file and both Allocate answers."""
    build = os.environ.get("RDP_BUILD")
    if not build or not (pathlib.Path(build) / "fixtures" / "seed000" / "sys").is_dir():
        pytest.skip("RDP_BUILD with generated fixtures not set (run through ctest/make check)")
    p = subprocess.run(["sh", str(REPO / "scripts" / "demo-cdi.sh"), build], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    chunks, cur = [], []
    for line in p.stdout.rstrip("\n").split("\n"):
        if (line.startswith("$ cat") or line.startswith("# Allocate")) and cur:
            chunks.append(cur)
            cur = []
        cur.append(line)
    chunks.append(cur)
    assert len(chunks) == 3
    docs = (REPO / "docs" / "cdi.md").read_text()
    for c in chunks:
        assert "```console\n" + "\n".join(c) + "\n```" in docs, "\n".join(c)
