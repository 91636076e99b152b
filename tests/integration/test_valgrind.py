# SPDX-License-Identifier: MIT
"""valgrind memcheck over the integration scenario: `rdma-dp serve` starts, registers its four
dgx-h100 resources with the fake kubelet, serves ListAndWatch, 50 Allocate calls and the other
calls, a rescan that changes a pool, SIGHUP with a good config (one pool kept and changed, one
removed, one added) and with a bad one, a kubelet restart, hostile connections, then SIGTERM.
It must exit 0 with zero memcheck errors and zero definite, indirect or possible leaks.

Release build only: valgrind and ASan do not mix, so the sanitized run skips it. valgrind sees
no malloc in a static glibc binary, so it runs rdma-dp-dyn (CMakeLists.txt), the same program
linked dynamically, or RDMA_DP itself when that is dynamic. Under valgrind the daemon takes its
no-openat2 path (valgrind 3.19 does not know that system call; sysfs.c falls back on ENOSYS).
"""
import json
import os
import pathlib
import random
import re
import shutil
import signal
import struct
import sys

import grpc
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import kubelet as K  # noqa: E402
import sysfsgen  # noqa: E402
from test_chaos import ONESHOT, expected, hostile_lingering, hostile_oneshot  # noqa: E402
from test_serve import CONFIGS, env, specs  # noqa: E402,F401

WAIT = 180  # valgrind slows the daemon 20-50x: generous, never a timing assertion
VALGRIND_ARGS = ["--error-exitcode=99", "--leak-check=full",
                 "--errors-for-leak-kinds=definite,indirect,possible",
                 "--show-leak-kinds=definite,indirect,possible", "--num-callers=30",
                 "--track-origins=yes"]


def is_dynamic(path):
    """True when the ELF file has a PT_INTERP program header (a dynamically linked program)."""
    with open(path, "rb") as f:
        h = f.read(64)
        if h[:4] != b"\x7fELF" or h[4] != 2:
            return False
        phoff, = struct.unpack_from("<Q", h, 32)
        phentsize, phnum = struct.unpack_from("<HH", h, 54)
        for i in range(phnum):
            f.seek(phoff + i * phentsize)
            if struct.unpack("<I", f.read(4))[0] == 3:
                return True
    return False


def memcheck_binary(rdma_dp):
    if is_dynamic(rdma_dp):
        return rdma_dp
    build = os.environ.get("RDP_BUILD")
    cands = [pathlib.Path(build) / "rdma-dp-dyn"] if build else []
    cands.append(pathlib.Path(rdma_dp).parent / "rdma-dp-dyn")
    for c in cands:
        if c.exists() and is_dynamic(c):
            return c
    pytest.fail("rdma-dp is static and no rdma-dp-dyn was found (looked at %s): build the "
                "rdma-dp-dyn target" % ", ".join(map(str, cands)))


def leak_figures(text):
    """{"definitely": bytes, ...} from memcheck's LEAK SUMMARY (0 for kinds not listed)."""
    out = {}
    for kind in ("definitely", "indirectly", "possibly", "still reachable"):
        m = re.search(r"%s(?: lost)?: ([\d,]+) bytes" % kind, text)
        out[kind] = int(m.group(1).replace(",", "")) if m else 0
    return out


def test_valgrind_memcheck(env, rdma_dp):
    if K.sanitized():
        pytest.skip("valgrind memcheck runs in the release build only: it does not mix with ASan")
    vg = shutil.which("valgrind")
    if vg is None:
        pytest.skip("valgrind is not installed (Debian package valgrind)")
    binary = memcheck_binary(rdma_dp)
    vlog = env.dir / "memcheck.log"

    node = env.dir / "node"
    sysfsgen.copy_node(env.node("dgx-h100"), node)
    cfg = json.loads((CONFIGS / "dgx.json").read_text())
    cfg_path = env.config(cfg)
    kl = env.start_kubelet()
    kl.dial_timeout = 30
    d = env.daemon(cfg_path, node, verbose=False, binary=binary,
                   wrapper=[vg, "--log-file=%s" % vlog, *VALGRIND_ARGS])

    def settled(config, after=None):
        want = expected(node, config)
        for res, (summ, _) in want.items():
            kl.wait(lambda: (kl.current.get(res) is not None and
                             kl.current[res].client.stream_error is None and
                             K.summary(kl.current[res].client.latest()) == summ),
                    WAIT, "%s at %r" % (res, summ))
        return want

    def allocate_all(want, n):
        for i in range(n):
            res = sorted(want)[i % len(want)]
            (units, _, _), paths = want[res]
            c = kl.current[res].client
            got = [p for p, _, _ in specs(c.allocate([str(i % units)], timeout=WAIT))]
            assert got == paths, res

    # Start, register, ListAndWatch (the fake kubelet opens it inside Register).
    want = settled(cfg)
    # 50 Allocate calls over the four pools, and the other calls once.
    allocate_all(want, 50)
    c = kl.current["rdma/compute_ib"].client
    with pytest.raises(grpc.RpcError) as ei:
        c.allocate(["0", "63", "x"], timeout=WAIT)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert c.prestart(["0"], timeout=WAIT).ByteSize() == 0
    assert list(c.preferred(["1", "2", "3"], ["2"], 2, timeout=WAIT)
                .container_responses[0].deviceIDs) == ["2", "1"]
    assert not c.options(timeout=WAIT).pre_start_required

    # A rescan that changes pools: an HCA unplugged, a port down.
    sysfsgen.unplug(node / "sys", node / "dev", "mlx5_3")
    sysfsgen.set_port_state(node / "sys", "mlx5_7", 1, "DOWN")
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=updated", start=m, timeout=WAIT)
    want = settled(cfg)
    allocate_all(want, 4)

    # SIGHUP, good config: compute_ib kept with fewer units, storage_roce removed, a new pool.
    cfg2 = {"periodicUpdateInterval": 30, "configList": [
        dict(cfg["configList"][0], rdmaHcaMax=10),
        cfg["configList"][2], cfg["configList"][3],
        {"resourceName": "picked", "rdmaHcaMax": 3,
         "selectors": {"rootDevices": ["0000:29:00.0", "0000:a9:00.0"]}}]}
    env.config(cfg2)
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=config-reloaded", "added=1", "removed=1", "kept=3", start=m, timeout=WAIT)
    want = settled(cfg2)
    allocate_all(want, 4)
    # SIGHUP, bad config: rejected, the running one keeps serving.
    env.config('{"configList": [{"resourceName": "x", "rdmaHcaMax": 5, "selectrs": {}}]}\n')
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=config-rejected", start=m, timeout=WAIT)
    want = settled(cfg2)

    # One kubelet restart: every resource registers again.
    n = len(kl.registrations)
    kl.restart()
    for res, ((units, healthy, _), _) in want.items():
        kl.wait_registered(res, units=units, healthy=healthy, after=n, timeout=WAIT)
    allocate_all(want, 4)

    # Hostile connections, every kind once, and two left open at SIGTERM.
    sock = kl.plugin_dir / "compute_ib.sock"
    rng = random.Random(1)
    for kind in ONESHOT:
        hostile_oneshot(sock, kind, rng)
    open_at_exit = [hostile_lingering(sock, "stuck-watch"), hostile_lingering(sock, "slowloris")]
    want = settled(cfg2)
    allocate_all(want, 4)

    rc = d.stop(WAIT)
    for s in open_at_exit:
        if s is not None:
            s.close()
    assert rc == 0, "rdma-dp under valgrind exited %s (99: memcheck errors or leaks):\n%s" % (
        rc, vlog.read_text()[-20000:])
    check_memcheck_log(vlog)
    assert not [p for p in os.listdir(kl.plugin_dir) if p.endswith(".sock") and
                p != "kubelet.sock"]


def check_memcheck_log(vlog):
    text = vlog.read_text()
    summary = "\n".join(ln for ln in text.splitlines() if "ERROR SUMMARY" in ln or
                        "lost:" in ln or "reachable:" in ln or "total heap usage" in ln)
    print(summary)
    assert re.search(r"ERROR SUMMARY: 0 errors", text), text[-20000:]
    leaks = leak_figures(text)
    assert leaks["definitely"] == leaks["indirectly"] == leaks["possibly"] == 0, text[-20000:]
    assert "total heap usage" in text and not re.search(r"total heap usage: 0 allocs", text), \
        "valgrind saw no allocation: is the binary static?"


def test_valgrind_chaos(env, rdma_dp):
    """A short chaos run (test_chaos.py) with the daemon under memcheck: the error paths the
    scenario above does not reach (prefix changes, removed pools with open streams, kubelet
    away, sockets deleted, every hostile peer) must not leak or touch bad memory either.
    RDP_VALGRIND_CHAOS_SECONDS, default 30."""
    if K.sanitized():
        pytest.skip("valgrind memcheck runs in the release build only: it does not mix with ASan")
    vg = shutil.which("valgrind")
    if vg is None:
        pytest.skip("valgrind is not installed (Debian package valgrind)")
    from test_chaos import Chaos, chaos_seed
    vlog = env.dir / "memcheck.log"
    seconds = float(os.environ.get("RDP_VALGRIND_CHAOS_SECONDS", "30"))
    try:
        Chaos(env, "kubelet-sock", chaos_seed() + 2, seconds, binary=memcheck_binary(rdma_dp),
              wrapper=[vg, "--log-file=%s" % vlog, *VALGRIND_ARGS], wait=WAIT).run()
    except pytest.fail.Exception as e:
        text = vlog.read_text() if vlog.exists() else "(no memcheck log)"
        pytest.fail("%s\n--- memcheck log (exit code 99: errors or leaks):\n%s" % (
            e, text[-20000:]), pytrace=False)
    check_memcheck_log(vlog)
