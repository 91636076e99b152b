# SPDX-License-Identifier: MIT
"""The static binary's layout (src/cli/serve-layout.ld): what `serve` runs lies together in
.text.serve and .rodata.serve, what only other commands run (doctor, the DRA driver, the
API-server client, mbedTLS) lies outside them, and constants are never executable. Read from the
build's link map and section headers; the figures themselves come from bench/footprint.py."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
import footprint  # noqa: E402

SERVE = {"plugin", "metrics", "node", "rpc", "config", "host", "cdi", "base", "shared",
         "nghttp2", "jansson", "http_parser", "libc"}
OTHERS = {"doctor", "dra", "kube", "mbedtls"}


def build():
    b = os.environ.get("RDP_BUILD")
    return pathlib.Path(b) if b else REPO / "build"


def serve_sections(map_file, name):
    """part -> bytes of the input sections placed in the output section `name`."""
    parts, inside = {}, False
    for line in open(map_file, errors="replace"):
        if re.match(r"^\S", line):
            inside = line.split()[0] == name
            continue
        if not inside:
            continue
        f = line.split()
        if len(f) >= 3 and f[-2].startswith("0x") and f[-3].startswith("0x"):
            size = int(f[-2], 16)
            if size:
                p = footprint.part_of(f[-1])
                parts[p] = parts.get(p, 0) + size
    return parts


@pytest.fixture(scope="module")
def linked():
    if os.environ.get("RDP_SANITIZED", "").lower() in ("1", "on", "true", "yes"):
        pytest.skip("the sanitizer build links dynamically, without the layout script")
    m = build() / "rdma-dp.map"
    if not m.exists():
        pytest.fail("no link map at %s (CMakeLists.txt writes it with the binary)" % m)
    return m


def test_serve_parts_first(linked):
    text = serve_sections(linked, ".text.serve")
    assert SERVE <= set(text), "parts missing from .text.serve: %s" % sorted(SERVE - set(text))
    assert not OTHERS & set(text), "in .text.serve: %s" % sorted(OTHERS & set(text))
    ro = serve_sections(linked, ".rodata.serve")
    assert not OTHERS & set(ro), "in .rodata.serve: %s" % sorted(OTHERS & set(ro))


def test_other_commands_outside(linked):
    text = serve_sections(linked, ".text")
    assert OTHERS <= set(text), "not linked after serve's code: %s" % sorted(OTHERS - set(text))


def test_constants_not_executable(linked):
    out = subprocess.run(["readelf", "-lW", str(build() / "rdma-dp")], capture_output=True,
                         text=True, check=True).stdout
    heads, maps = out.split("Program Headers:")[1].split("Section to Segment mapping:")
    # One program header per line (the interpreter line has no flags column: none here).
    hdrs = [l.split() for l in heads.splitlines() if re.match(r"\s+[A-Z_]+\s+0x", l)]
    segs = {int(m.group(1)): m.group(2).split()
            for m in re.finditer(r"^\s+(\d\d)\s+(.*)$", maps, re.M)}
    executable = [segs.get(i, []) for i, h in enumerate(hdrs) if h[0] == "LOAD" and "E" in h]
    assert executable, out
    for names in executable:
        assert ".text.serve" in names or ".text" in names
        assert not {".rodata", ".rodata.serve"} & set(names), names
