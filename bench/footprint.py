#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The resident footprint of an idle `rdma-dp serve`: VmRSS and where it lies (/proc/PID/smaps),
on the DGX H100 fixture node with tests/fixtures/configs/dgx.json (four resources), registered
with the kubelet stand-in, after a settle time and after N Allocate calls.

    bench/footprint.py [--fixtures DIR] [--allocs N] BINARY [BINARY...]

Prints one JSON object per binary: VmRSS, VmHWM, and the Rss of the binary's own mappings
(text r-xp, read-only data, data+bss), heap, stacks and other anonymous memory, in KiB; the
size of the text segment; the text pages resident as a fraction of the text; and, where the
build left its link map (<build>/rdma-dp.map), the text linked and resident per part of src/ and
per library. Used by
bench.py (the figure "resident memory, idle serve"); run by hand to compare two builds.
"""
import argparse
import json
import os
import re
import struct
import pathlib
import shutil
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))


def smaps_summary(pid, binary):
    """Rss per kind of mapping, in KiB."""
    real = os.path.realpath(binary)
    out = {"text": 0, "rodata": 0, "data": 0, "heap": 0, "stack": 0, "anon": 0, "other": 0,
           "text_size": 0}
    kind = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            head = line.split()
            if not head:
                continue
            if not head[0].endswith(":") or "-" in head[0]:
                # a mapping line: "start-end perms offset dev inode [path]"
                lo, hi = (int(x, 16) for x in head[0].split("-"))
                perms = head[1]
                path = head[5] if len(head) > 5 else ""
                if path and os.path.realpath(path) == real:
                    kind = "text" if "x" in perms else ("data" if "w" in perms else "rodata")
                    if kind == "text":
                        out["text_size"] += (hi - lo) // 1024
                elif path == "[heap]":
                    kind = "heap"
                elif path.startswith("[stack"):
                    kind = "stack"
                elif not path:
                    kind = "anon"
                else:
                    kind = "other"
                continue
            if head[0] == "Rss:" and kind:
                out[kind] += int(head[1])
    return out


def part_of(path):
    """The part of src/ (or the library) an input file of the link comes from."""
    m = re.search(r"librdp_(\w+)\.a\(", path)
    if m:
        return m.group(1)
    if "/src/cli/" in path:
        return "cli"
    m = re.search(r"lib(\w+?)(?:\.a|-[\d.]+\.so)", os.path.basename(path.split("(")[0]))
    if m:
        name = m.group(1)
        return {"c": "libc", "gcc": "libc", "gcc_eh": "libc", "pthread": "libc",
                "mbedcrypto": "mbedtls", "mbedx509": "mbedtls"}.get(name, name)
    return "other"


def text_sections(map_file):
    """(start, size, part) of every input section of the output section .text."""
    out, in_text, pending = [], False, None
    for line in open(map_file, errors="replace"):
        if line.startswith(".text"):
            in_text = True
            continue
        if in_text and line[:1] not in (" ", "\n", "\t", "*"):
            if line.strip():
                in_text = False
            continue
        if not in_text:
            continue
        f = line.split()
        if len(f) == 1 and f[0].startswith("."):
            pending = f[0]
            continue
        if len(f) >= 3 and (f[0].startswith(".") or pending) and f[-2].startswith("0x"):
            addr, size = (f[1], f[2]) if f[0].startswith(".") else (f[0], f[1])
            try:
                a, s = int(addr, 16), int(size, 16)
            except ValueError:
                pending = None
                continue
            if s:
                out.append((a, s, part_of(f[-1])))
        pending = None
    return out


def resident_pages(pid, lo, hi):
    """The set of page addresses in [lo, hi) that are mapped in the process (pagemap)."""
    page = os.sysconf("SC_PAGE_SIZE")
    res = set()
    with open("/proc/%d/pagemap" % pid, "rb") as f:
        f.seek(lo // page * 8)
        data = f.read((hi - lo) // page * 8)
    for i in range(len(data) // 8):
        if struct.unpack_from("<Q", data, i * 8)[0] >> 63:
            res.add(lo + i * page)
    return res


def text_by_part(pid, binary, map_file):
    """KiB of text per part: linked, and resident (pages mapped in the process)."""
    page = os.sysconf("SC_PAGE_SIZE")
    real = os.path.realpath(binary)
    spans = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            x = line.split()
            if len(x) > 5 and "x" in x[1] and os.path.realpath(x[5]) == real:
                spans.append(tuple(int(v, 16) for v in x[0].split("-")))
    pages = set()
    for lo, hi in spans:
        pages |= resident_pages(pid, lo, hi)
    linked, resident = {}, {}
    for a, s, part in text_sections(map_file):
        linked[part] = linked.get(part, 0) + s
        p = a - a % page
        while p < a + s:
            if p in pages:
                lo, hi = max(p, a), min(p + page, a + s)
                resident[part] = resident.get(part, 0) + hi - lo
            p += page
    return {k: {"linked_kib": round(v / 1024, 1), "resident_kib": round(resident.get(k, 0) / 1024, 1)}
            for k, v in sorted(linked.items(), key=lambda kv: -kv[1])}


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def measure(binary, fixtures, allocs=0, settle=1.0, map_file=None):
    import kubelet as K
    root = tempfile.mkdtemp(prefix="rdpf.", dir="/tmp")
    node = pathlib.Path(fixtures) / "dgx-h100"
    kl = K.FakeKubelet(root).start()
    d = K.Daemon(str(binary), config=REPO / "tests" / "fixtures" / "configs" / "dgx.json",
                 sysfs=node / "sys", dev=node / "dev", kubelet_root=root)
    try:
        for n in ("compute_ib", "storage_roce", "compute_ib_numa0", "compute_ib_numa1"):
            kl.wait_registered("rdma/" + n, timeout=60)
        time.sleep(settle)
        res = {"binary": str(binary), "binary_bytes": os.path.getsize(binary)}
        res["idle"] = {"VmRSS": status_kib(d.pid, "VmRSS"), "VmHWM": status_kib(d.pid, "VmHWM"),
                       **smaps_summary(d.pid, binary)}
        if map_file and os.path.exists(map_file):
            res["text_by_part"] = text_by_part(d.pid, binary, map_file)
        if allocs:
            c = K.DevicePluginClient(kl.plugin_dir / "compute_ib.sock")
            try:
                for i in range(allocs):
                    c.allocate([str(i % 63)])
            finally:
                c.close()
            res["after_allocs"] = {"allocs": allocs, "VmRSS": status_kib(d.pid, "VmRSS"),
                                   **smaps_summary(d.pid, binary)}
        t = res["idle"]
        t["text_resident_pct"] = round(100.0 * t["text"] / t["text_size"], 1) \
            if t["text_size"] else None
        return res
    finally:
        d.stop()
        kl.stop()
        shutil.rmtree(root, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fixtures", default=str(REPO / "build" / "fixtures"))
    ap.add_argument("--allocs", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3, help="runs per binary; the median is kept")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    for b in a.binaries:
        mp = os.path.join(os.path.dirname(os.path.abspath(b)), "rdma-dp.map")
        runs = sorted((measure(b, a.fixtures, a.allocs, map_file=mp) for _ in range(a.runs)),
                      key=lambda r: r["idle"]["VmRSS"])
        print(json.dumps(runs[len(runs) // 2]))


if __name__ == "__main__":
    main()
