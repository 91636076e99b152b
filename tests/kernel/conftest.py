"""The real-kernel tests (scripts/real-kernel/run.sh, `make check-kernel`): run inside the QEMU
guest, against its real /sys and /dev, where scripts/real-kernel/net-setup.sh created rxe0 on
vethA (10.77.0.1), rxe1 on vethB (10.77.0.2) and rxe2 on the virtio NIC eth0 (10.0.2.15).
Outside such a guest (no /sys/class/infiniband/rxe0) every test skips, saying so.

RDMA_DP: the binary under test; RDP_RESULTS: the results export (figures.json gets the measured
event latencies).
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
SETUP = REPO / "scripts" / "real-kernel"

IN_GUEST = os.path.exists("/sys/class/infiniband/rxe0") and os.environ.get("RDP_RESULTS")


def pytest_collection_modifyitems(config, items):
    if IN_GUEST:
        return
    skip = pytest.mark.skip(reason="not in the real-kernel guest (make check-kernel runs these)")
    for it in items:
        it.add_marker(skip)


@pytest.fixture(scope="session")
def rdma_dp():
    return pathlib.Path(os.environ.get("RDMA_DP", str(REPO / "build" / "rdma-dp")))


def sh(*args, check=True, timeout=60, **kw):
    """A command's CompletedProcess (text), raising on failure when check."""
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout,
                       **kw)
    if check and r.returncode != 0:
        raise AssertionError("%s: exit %d\n%s%s" % (" ".join(map(str, args)), r.returncode,
                                                    r.stdout[-3000:], r.stderr[-3000:]))
    return r


@pytest.fixture
def run(rdma_dp):
    def _run(*args, timeout=60, **kw):
        return subprocess.run([str(rdma_dp), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout, **kw)
    return _run


def record(key, value):
    """Adds key: value to RDP_RESULTS/figures.json (the stage prints it)."""
    p = pathlib.Path(os.environ["RDP_RESULTS"]) / "figures.json"
    d = json.loads(p.read_text()) if p.exists() else {}
    d[key] = value
    p.write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")


def save_output(name, text):
    """Keeps a command's output in RDP_RESULTS/outputs/ (for docs/soft-roce.md)."""
    d = pathlib.Path(os.environ["RDP_RESULTS"]) / "outputs"
    d.mkdir(exist_ok=True)
    (d / name).write_text(text)


def rdma_links():
    """{rxeN: (netdev, state)} from `rdma -j link`."""
    out = json.loads(sh("rdma", "-j", "link").stdout)
    return {l["ifname"]: (l.get("netdev"), l.get("state")) for l in out}


def ensure_devices():
    """Puts the three devices back as net-setup.sh made them (after a test deleted, unloaded or
    downed something); bounded."""
    want = {"rxe0": "vethA", "rxe1": "vethB", "rxe2": "eth0"}
    try:
        if all(port_state(d) == "ACTIVE" and
               pathlib.Path("/sys/class/infiniband/%s/parent" % d).read_text().strip() == nd
               for d, nd in want.items()):
            return  # as net-setup.sh left them (the usual case: no subprocess at all)
    except OSError:
        pass
    sh("modprobe", "-a", "rdma_rxe", "rdma_ucm", "ib_uverbs", "veth")
    for n in ("vethA", "vethB", "eth0"):
        sh("ip", "link", "set", n, "up")
    sh("sh", SETUP / "routes.sh")
    have = rdma_links()
    for dev, nd in (("rxe0", "vethA"), ("rxe1", "vethB"), ("rxe2", "eth0")):
        if dev not in have:
            sh("rdma", "link", "add", dev, "type", "rxe", "netdev", nd)
    wait_for(lambda: all(port_state(d) == "ACTIVE" for d in ("rxe0", "rxe1", "rxe2")), 10,
             "the three ports ACTIVE")


def port_state(dev):
    try:
        return pathlib.Path("/sys/class/infiniband/%s/ports/1/state" % dev).read_text().split()[-1]
    except OSError:
        return None


def wait_for(pred, timeout, what):
    import time
    t = time.monotonic() + timeout
    while time.monotonic() < t:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise TimeoutError("timed out after %s s waiting for %s" % (timeout, what))


@pytest.fixture(autouse=True)
def _devices_back():
    if IN_GUEST:
        ensure_devices()
    yield
