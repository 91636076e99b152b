#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""make bench: rdma-dp beside the smallest grpc-go device plugin (the Go floor), both driven by
the same grpc-go kubelet (bench/go-kubelet), on generated fixture nodes; prints one table.

    bench/bench.py [--build DIR] [--quick] [--no-callgrind]

Needs the Go toolchain and packages of `scripts/install-deps.sh bench` (Makefile: make bench).
Everything it writes goes to <build>/bench/: the Go binaries, fixture nodes (dgx-h100, scale-8,
scale-64, scale-1000), configs, logs of every run, results.json and table.md.
Figures are only worth quoting from an idle machine: the table's header carries the load.
"""
import argparse
import datetime
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
MiB = 1024 * 1024

GOALS = {  # issue 5, "Benchmark"
    "rss_allocs_kib": 1.25 * 1024,
    "alloc_p50_ratio": 0.5,
    "rereg_p50_ms": 20.0,
    "rereg_max_ms": 200.0,
    "start_dgx_ms": 10.0,
    "rescan_1000_ms": 10.0,
    "binary_bytes": 1 * MiB,
}


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


class Bench:
    def __init__(self, a):
        self.a = a
        self.build = pathlib.Path(a.build).resolve()
        self.out = self.build / "bench"
        self.bin = self.out / "bin"
        self.fix = self.out / "fixtures"
        self.cfg = self.out / "configs"
        self.logs = self.out / "logs"
        self.rdma = self.build / "rdma-dp"
        self.kubelet = self.bin / "go-kubelet"
        self.floor = self.bin / "go-floor"
        self.res = {}

    # -- preparation ---------------------------------------------------------------------------
    def prepare(self):
        if not self.rdma.exists():
            sys.exit("bench: %s missing: run make first" % self.rdma)
        for d in (self.cfg, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        log("building the Go floor and kubelet (bench/build-go.sh)")
        subprocess.run(["sh", str(HERE / "build-go.sh"), str(self.bin)], check=True)
        gen = REPO / "tests" / "fixtures" / "gen-fixtures.py"
        stamp = self.fix / ".stamp"
        srcs = [gen, REPO / "tests" / "fixtures" / "sysfsgen.py"]
        if not stamp.exists() or any(s.stat().st_mtime > stamp.stat().st_mtime for s in srcs):
            log("generating fixture nodes dgx-h100, scale-8, scale-64, scale-1000")
            subprocess.run(["/usr/bin/python3", str(gen), "--out", str(self.fix), "--node",
                            "dgx-h100", "--scale", "8", "--scale", "64", "--scale", "1000"],
                           check=True, stdout=subprocess.DEVNULL)
            stamp.touch()

    def config(self, name, resource, units, selectors):
        p = self.cfg / ("%s.json" % name)
        p.write_text(json.dumps({"configList": [{"resourceName": resource, "rdmaHcaMax": units,
                                                 "selectors": selectors}]}, indent=1) + "\n")
        return p

    # -- one run of the Go kubelet against one plugin --------------------------------------------
    def run(self, tag, plugin, node, units, resource, selectors, link, opts, verbose=False,
            wrap=()):
        node_dir = self.fix / node
        cfg = self.config("%s-%d" % (node, units), resource, units, selectors)
        root = tempfile.mkdtemp(prefix="rdpb.", dir="/tmp")  # short: unix socket paths
        logf = self.logs / ("%s-%s.log" % (tag, plugin))
        if logf.exists():
            logf.unlink()
        if plugin == "rdma-dp":
            cmd = [str(self.rdma), "serve", "--config-file", str(cfg), "--sysfs-root",
                   str(node_dir / "sys"), "--dev-root", str(node_dir / "dev"),
                   "--kubelet-root-dir", root] + (["-v"] if verbose else [])
            marker = "event=rescanned"
        else:
            cmd = [str(self.floor), "-resource", "rdma/" + resource, "-units", str(units),
                   "-link-layer", link, "-sysfs-root", str(node_dir / "sys"), "-dev-root",
                   str(node_dir / "dev"), "-kubelet-root-dir", root]
            marker = "event=rescanned"
        argv = [str(self.kubelet), "-root", root, "-log", str(logf), "-marker", marker,
                "-units", str(units)] + [str(x) for x in opts] + ["--"] + list(wrap) + cmd
        try:
            p = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=1800)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if p.returncode != 0:
            sys.exit("bench: %s/%s failed (exit %d); log: %s" % (tag, plugin, p.returncode, logf))
        r = json.loads(p.stdout)
        r["log"] = str(logf)
        return r

    def both(self, tag, node, units, resource, selectors, link, opts, **kw):
        out = {}
        for plugin in ("rdma-dp", "go-floor"):
            log("%s: %s on %s, %d units" % (tag, plugin, node, units))
            out[plugin] = self.run(tag, plugin, node, units, resource, selectors, link, opts,
                                   verbose=kw.get("verbose_rdma", False) and plugin == "rdma-dp")
        return out

    # -- scenarios ---------------------------------------------------------------------------------
    def scenarios(self):
        q = self.a.quick
        ib = {"vendors": ["15b3"], "linkTypes": ["infiniband"]}
        allsel = {"vendors": ["15b3"]}
        starts = 3 if q else 10
        allocs = 2000 if q else 10000
        rereg = 20 if q else 100
        # DGX H100 node, one pool of its 8 compute HCAs (IB), 100 units.
        self.res["main"] = self.both("main", "dgx-h100", 100, "compute_ib", ib, "InfiniBand",
                                     ["-starts", starts, "-allocs", allocs, "-rereg", rereg])
        # Units: the same pool with rdmaHcaMax 1000 and 10000.
        for u in (1000, 10000):
            self.res["law-%d" % u] = self.both("law-%d" % u, "dgx-h100", u, "compute_ib", ib,
                                               "InfiniBand", ["-starts", 3 if q else 5])
        # Devices: SR-IOV nodes of 8, 64 and 1000 ib devices, one pool of all, SIGHUP rescans
        # (rdma-dp logs event=rescanned at -v; one Allocate checks both hand out the same).
        for n in (8, 64, 1000):
            k = (5 if q else 20) if n < 1000 else (3 if q else 10)
            self.res["scale-%d" % n] = self.both(
                "scale-%d" % n, "scale-%d" % n, 100, "vfs", allsel, "",
                ["-starts", 3, "-allocs", 1, "-rescans", k], verbose_rdma=True)

    def sizes(self):
        stripped = self.out / "rdma-dp.stripped"
        subprocess.run(["strip", "-o", str(stripped), str(self.rdma)], check=True)
        self.res["binary"] = {"rdma-dp": stripped.stat().st_size,
                              "go-floor": self.floor.stat().st_size,
                              "rdma-dp-static": "INTERP" not in subprocess.run(
                                  ["readelf", "-lW", str(stripped)], stdout=subprocess.PIPE,
                                  text=True, check=True).stdout}

    def callgrind(self):
        if self.a.no_callgrind or not shutil.which("valgrind"):
            return
        cg = {}
        for node in ("dgx-h100", "scale-8", "scale-64", "scale-1000"):
            log("callgrind: rdma-dp discover -o json on %s" % node)
            d = self.fix / node
            p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                                str(self.rdma), "discover", "-o", "json", "--sysfs-root",
                                str(d / "sys"), "--dev-root", str(d / "dev")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            cg["discover " + node] = collected(p.stderr)
        # One Allocate: the daemon under callgrind, 0 and N Allocate calls, the difference / N.
        n = 1000
        wrap = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
        ib = {"vendors": ["15b3"], "linkTypes": ["infiniband"]}
        tot = {}
        for calls in (0, n):
            log("callgrind: rdma-dp serve, %d Allocate calls" % calls)
            r = self.run("callgrind-%d" % calls, "rdma-dp", "dgx-h100", 100, "compute_ib", ib,
                         "InfiniBand", ["-starts", 1, "-allocs", calls, "-settle", "1s",
                                        "-timeout", "120s"], wrap=wrap)
            tot[calls] = collected(pathlib.Path(r["log"]).read_text())
        if tot[0] and tot[n]:
            cg["allocate"] = (tot[n] - tot[0]) // n
            cg["serve, start + register + stop"] = tot[0]
        self.res["callgrind"] = cg

    def machine(self):
        cpu = ""
        try:
            for ln in open("/proc/cpuinfo"):
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        go = subprocess.run(["go", "version"], stdout=subprocess.PIPE, text=True).stdout.strip()
        return {"date": datetime.date.today().isoformat(), "kernel": platform.release(),
                "cpu": cpu, "cpus": os.cpu_count(), "go": go, "load": os.getloadavg()}


def collected(text):
    m = re.findall(r"Collected : (\d+)", text or "")
    return int(m[-1]) if m else None


# -- the table -------------------------------------------------------------------------------------
def ms(ns):
    return ns / 1e6


def fmt_ms(v):
    return "%.2f ms" % v if v < 100 else "%.0f ms" % v


def ratio(a, b):
    if a is None or not b:
        return "n/a"
    r = a / b
    return "%.2fx" % r if r >= 0.1 else "%.3fx" % r


def verdict(ok, miss):
    return "met" if ok else "**missed** " + miss


def table(res, mach):
    rows = []
    goals = []

    def row(name, a, b, fmt, goal=""):
        rows.append("| %s | %s | %s | %s | %s |" % (
            name, fmt(a) if a is not None else "n/a", fmt(b) if b is not None else "n/a",
            ratio(a, b), goal))

    m = res["main"]
    R, F = m["rdma-dp"], m["go-floor"]
    kib = lambda v: "{:,} KiB".format(v)  # noqa: E731
    us = lambda v: "%.0f µs" % (v / 1e3)  # noqa: E731
    msf = lambda v: fmt_ms(ms(v))  # noqa: E731
    row("resident memory idle (DGX, 100 units)", R["rss_idle"]["VmRSS"], F["rss_idle"]["VmRSS"],
        kib)
    n_alloc = R["allocate"]["n"]
    row("resident memory after %s Allocate" % "{:,}".format(n_alloc), R["rss_allocs"]["VmRSS"],
        F["rss_allocs"]["VmRSS"], kib, "≤ 1,280 KiB")
    row("peak resident (VmHWM) over the run", R["rss_rereg"]["VmHWM"], F["rss_rereg"]["VmHWM"], kib)
    row("Allocate latency p50", R["allocate"]["p50"], F["allocate"]["p50"], us, "≤ 0.5x")
    row("Allocate latency p99", R["allocate"]["p99"], F["allocate"]["p99"], us)
    row("plugin CPU per Allocate", R["allocate_cpu_ns"] // n_alloc,
        F["allocate_cpu_ns"] // n_alloc, us)
    row("start-up to first snapshot (DGX, p50 of %d)" % R["starts"]["n"], R["starts"]["p50"],
        F["starts"]["p50"], msf, "≤ 10 ms")
    if R.get("starts_register"):
        row("  of which: start to Register received", R["starts_register"]["p50"],
            F["starts_register"]["p50"], msf)
    b = res["binary"]
    row("binary size, stripped static", b["rdma-dp"], b["go-floor"],
        lambda v: "{:,} B".format(v), "≤ 1,048,576 B")
    row("re-registration after kubelet restart, median of %d" % R["rereg_register"]["n"],
        R["rereg_register"]["p50"], F["rereg_register"]["p50"], msf, "≤ 20 ms")
    row("re-registration, max", R["rereg_register"]["max"], F["rereg_register"]["max"], msf,
        "≤ 200 ms")
    row("kubelet restart to first snapshot, median", R["rereg_snapshot"]["p50"],
        F["rereg_snapshot"]["p50"], msf)
    for n in (8, 64, 1000):
        s = res["scale-%d" % n]
        Rs, Fs = s["rdma-dp"], s["go-floor"]
        g = "≤ 10 ms" if n == 1000 else ""
        row("rescan, %d devices: wall p50 (SIGHUP)" % n, Rs["rescan_wall"]["p50"],
            Fs["rescan_wall"]["p50"], msf, g)
        row("rescan, %d devices: CPU p50" % n, Rs["rescan_cpu"]["p50"], Fs["rescan_cpu"]["p50"],
            msf, g)
        row("rescan, %d devices: messages sent, nothing changed" % n, Rs["rescan_messages"],
            Fs["rescan_messages"], str, "0" if n == 1000 else "")
        row("start-up to first snapshot, %d devices" % n, Rs["starts"]["p50"],
            Fs["starts"]["p50"], msf)
        row("resident memory idle, %d devices" % n, Rs["rss_idle"]["VmRSS"],
            Fs["rss_idle"]["VmRSS"], kib)
        row("peak resident after the rescans, %d devices" % n, Rs["rss_rescan"]["VmHWM"],
            Fs["rss_rescan"]["VmHWM"], kib)
    for u in (100, 1000, 10000):
        s = res["main"] if u == 100 else res["law-%d" % u]
        Rs, Fs = s["rdma-dp"], s["go-floor"]
        row("ListAndWatch %d units: start to first snapshot" % u, Rs["starts"]["p50"],
            Fs["starts"]["p50"], msf)
        row("ListAndWatch %d units: message size" % u, Rs["snapshot"]["bytes"],
            Fs["snapshot"]["bytes"], lambda v: "{:,} B".format(v))

    same = []
    for k, v in sorted(res.items()):
        if isinstance(v, dict) and isinstance(v.get("rdma-dp"), dict):
            a, f = v["rdma-dp"], v["go-floor"]
            if a["snapshot"] != f["snapshot"] or a.get("allocate_response") != f.get(
                    "allocate_response"):
                same.append(k)
    rows.append("")
    rows.append("Same answers from both (first snapshot: units and bytes; Allocate: device specs "
                "and bytes): %s." % ("yes, in every scenario" if not same else
                                     "**NO** in " + ", ".join(same)))

    # goals
    rss = R["rss_allocs"]["VmRSS"]
    lim = GOALS["rss_allocs_kib"]
    miss = "by {:,} KiB ({:.2f} MiB, {:.0%} over)".format(int(rss - lim), rss / 1024, rss / lim - 1)
    goals.append("- resident memory after %s Allocate ≤ 1.25 MiB (1,280 KiB): %s" % (
        "{:,}".format(n_alloc), verdict(rss <= lim, miss)))
    pr = R["allocate"]["p50"] / F["allocate"]["p50"]
    goals.append("- Allocate p50 ≤ 0.5x the floor's: %.2fx, %s" % (pr, verdict(
        pr <= GOALS["alloc_p50_ratio"], "by %.2fx (%.0f µs, goal %.0f µs)" % (
            pr - 0.5, R["allocate"]["p50"] / 1e3, F["allocate"]["p50"] / 2e3))))
    rm, rx = ms(R["rereg_register"]["p50"]), ms(R["rereg_register"]["max"])
    goals.append("- re-registration median ≤ 20 ms, max ≤ 200 ms: %s / %s, %s" % (
        fmt_ms(rm), fmt_ms(rx), verdict(rm <= 20 and rx <= 200, "(median +%s, max +%s)" % (
            fmt_ms(max(0, rm - 20)), fmt_ms(max(0, rx - 200))))))
    st = ms(R["starts"]["p50"])
    goals.append("- first snapshot within 10 ms of start on the DGX node: %s, %s" % (
        fmt_ms(st), verdict(st <= 10, "by %s" % fmt_ms(st - 10))))
    s1k = res["scale-1000"]["rdma-dp"]
    w, c = ms(s1k["rescan_wall"]["p50"]), ms(s1k["rescan_cpu"]["p50"])
    msgs = s1k["rescan_messages"]
    goals.append("- rescan of 1000 devices ≤ 10 ms and no message when nothing changed: "
                 "wall %s, CPU %s, %d message(s): %s" % (
                     fmt_ms(w), fmt_ms(c), msgs, verdict(
                         w <= 10 and msgs == 0, "by %s (%.0fx)" % (fmt_ms(max(0, w - 10)), w / 10)
                         + ("" if msgs == 0 else ", and sent messages"))))
    bs = b["rdma-dp"]
    goals.append("- stripped static binary ≤ 1 MiB: {:,} B ({:.2f} MiB), {}".format(
        bs, bs / MiB, verdict(bs <= MiB and b["rdma-dp-static"], "by {:,} B ({:.0%})".format(
            bs - MiB, bs / MiB - 1))))

    # growth
    growth = []
    c8, c64, c1k = (res["scale-%d" % n]["rdma-dp"]["rescan_cpu"]["p50"] for n in (8, 64, 1000))
    f8, f64, f1k = (res["scale-%d" % n]["go-floor"]["rescan_cpu"]["p50"] for n in (8, 64, 1000))
    growth.append("- rescan CPU per device (64 -> 1000 devices): rdma-dp %.0f µs, Go floor "
                  "%.0f µs (8 -> 64: %.0f µs, %.0f µs)" % ((c1k - c64) / 936e3, (f1k - f64) / 936e3,
                                                  (c64 - c8) / 56e3, (f64 - f8) / 56e3))
    r8, r1k = (res["scale-%d" % n]["rdma-dp"]["rss_idle"]["VmRSS"] for n in (8, 1000))
    g8, g1k = (res["scale-%d" % n]["go-floor"]["rss_idle"]["VmRSS"] for n in (8, 1000))
    growth.append("- idle resident memory per device (8 -> 1000): rdma-dp %.2f KiB, Go floor "
                  "%.2f KiB"
                  % ((r1k - r8) / 992, (g1k - g8) / 992))
    for who in ("rdma-dp", "go-floor"):
        b1 = res["law-1000"][who]["snapshot"]["bytes"]
        b10 = res["law-10000"][who]["snapshot"]["bytes"]
        t1, t10 = res["law-1000"][who]["starts"]["p50"], res["law-10000"][who]["starts"]["p50"]
        growth.append("- ListAndWatch per unit (1000 -> 10000), %s: %.1f B, %.2f µs of start-up"
                      % (who, (b10 - b1) / 9000, (t10 - t1) / 9000e3))
    cg = res.get("callgrind") or {}
    cgl = ["- %s: {:,} instructions".format(v) % k for k, v in cg.items() if v]

    head = ("rdma-dp vs the Go floor, measured %s on %s (%d CPUs, kernel %s, %s); load average "
            "%.2f at the start, %.2f at the end." % (
                mach["date"], mach["cpu"] or "?", mach["cpus"], mach["kernel"], mach["go"],
                mach["load"][0], mach["load_end"][0]))
    out = [head, ""]
    if max(mach["load"][0], mach["load_end"][0]) > 0.25 * mach["cpus"]:
        out += ["**The machine was not idle: latencies and times below are noisy; take figures "
                "for the README on an idle machine.**", ""]
    out += ["| figure | rdma-dp | Go floor | ratio | goal |", "|---|---|---|---|---|"] + rows
    out += ["", "Goals (issue 5):"] + goals + ["", "Growth:"] + growth
    if cgl:
        out += ["", "callgrind (rdma-dp; instruction counts do not depend on load):"] + cgl
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=str(REPO / "build"), help="the build directory (rdma-dp)")
    ap.add_argument("--quick", action="store_true", help="fewer iterations (a smoke run)")
    ap.add_argument("--no-callgrind", action="store_true", help="skip the callgrind counts")
    ap.add_argument("--table-only", metavar="JSON", help="print the table of a saved results.json")
    a = ap.parse_args()
    if a.table_only:
        d = json.loads(pathlib.Path(a.table_only).read_text())
        sys.stdout.write(table(d["results"], d["machine"]))
        return 0
    b = Bench(a)
    t0 = time.monotonic()
    mach = b.machine()
    b.prepare()
    b.sizes()
    b.scenarios()
    b.callgrind()
    mach["load_end"] = os.getloadavg()
    mach["seconds"] = round(time.monotonic() - t0, 1)
    (b.out / "results.json").write_text(json.dumps({"machine": mach, "results": b.res}, indent=1))
    t = table(b.res, mach)
    (b.out / "table.md").write_text(t)
    sys.stdout.write(t)
    log("done in %.0f s; %s and %s" % (mach["seconds"], b.out / "table.md", b.out / "results.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
