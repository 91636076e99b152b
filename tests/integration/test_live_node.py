# SPDX-License-Identifier: MIT
"""A node that changes under the daemon (issue 8): with `periodicUpdateInterval: 300`, an unplug,
a plug and /dev/infiniband vanishing and coming back reach kubelet through the daemon's own
watches (inotify on the dev root here; kernel uevents and rtnetlink on a real node); a
ConfigMap edit (kubelet's `..data` symlink swap), an in-place write and a rename are applied
without a signal; full rescans run off the event loop, so Allocate keeps answering during
them. Real daemon, real sockets, fixture copies edited with sysfsgen.

The bound checked is the issue's: kubelet sees a host change within 1 s. It is a behaviour
(event-driven instead of the 300 s periodic rescan), not a figure: the figures are make bench's.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import sysfsgen  # noqa: E402
from test_serve import env, specs  # noqa: E402,F401
from test_serve_lifecycle import copy_node, health, seed_resource  # noqa: E402

HOST_CHANGE_S = 1.0  # the bound, event to kubelet


def dgx_config(env):
    return env.config({
        "periodicUpdateInterval": 300,
        "configList": [{"resourceName": "numa0", "rdmaHcaMax": 16,
                        "selectors": {"ifNames": ["ibp24s0", "ibp64s0", "ibp79s0", "ibp94s0"]}}],
    })


def timed_snapshot(client, pred, what):
    """Waits for a snapshot satisfying pred; returns the seconds it took."""
    t0 = time.monotonic()
    client.wait_snapshot(pred, timeout=30)
    dt = time.monotonic() - t0
    assert dt < HOST_CHANGE_S, "%s reached kubelet after %.3f s" % (what, dt)
    return dt


def test_unplug_and_plug_reach_kubelet_within_a_second(env):
    node = copy_node(env, "dgx-h100")
    kl = env.start_kubelet()
    d = env.daemon(dgx_config(env), node="dgx-h100", sysfs=node / "sys", dev=node / "dev")
    c = kl.wait_registered("rdma/numa0", units=16, healthy=16).client
    pool = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5"]
    for dev in pool:
        sysfsgen.unplug(node / "sys", node / "dev", dev)
    timed_snapshot(c, lambda s: len(s.devices) == 0, "unplug")
    assert kl.capacity()["rdma/numa0"] == (0, 0)
    for dev in pool:
        sysfsgen.replug(node / "sys", node / "dev", env.node("dgx-h100"), dev)
    timed_snapshot(c, lambda s: len(s.devices) == 16 and health(s) == {"Healthy"}, "plug")
    assert specs(c.allocate(["0"]))
    # No periodic rescan did it: the log names the watch.
    assert "why=periodic" not in d.log()
    assert "event=host-changed" in d.log()


def test_dev_infiniband_removed_and_recreated(env):
    """devtmpfs removes /dev/infiniband with its last node (driver reload) and re-creates it:
    the units go Unhealthy and Allocate refuses, then everything comes back, without a
    restart and within a second each way."""
    node = copy_node(env, "seed000")
    kl = env.start_kubelet()
    cfg = env.config({"periodicUpdateInterval": 300, "configList": [seed_resource("a", 10)]})
    d = env.daemon(cfg, sysfs=node / "sys", dev=node / "dev")
    c = kl.wait_registered("rdma/a", units=10, healthy=10).client
    full = specs(c.allocate(["0"]))
    saved = env.dir / "saved-infiniband"
    shutil.copytree(node / "dev" / "infiniband", saved, symlinks=True,
                    copy_function=sysfsgen.copy_function)
    m = d.mark()
    shutil.rmtree(node / "dev" / "infiniband")
    timed_snapshot(c, lambda s: health(s) == {"Unhealthy"}, "/dev/infiniband removed")
    d.wait_log("event=device-unusable", "device=mlx5_0", start=m)
    import grpc
    with pytest.raises(grpc.RpcError) as e:
        c.allocate(["0"])
    assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "uverbs0" in e.value.details()
    # Re-created (the directory first, then its nodes, as devtmpfs does).
    os.mkdir(node / "dev" / "infiniband")
    for name in sorted(os.listdir(saved)):
        sysfsgen.copy_function(str(saved / name), str(node / "dev" / "infiniband" / name))
    timed_snapshot(c, lambda s: health(s) == {"Healthy"}, "/dev/infiniband re-created")
    d.wait_log("event=device-usable", "device=mlx5_0", start=m)
    assert specs(c.allocate(["0"])) == full


def configmap_dir(root, content, version):
    """kubelet's AtomicWriter layout: <root>/..<ts>/config.json, ..data -> ..<ts>,
    config.json -> ..data/config.json; a new version swaps ..data atomically."""
    root.mkdir(exist_ok=True)
    ts = "..2026_12_01_10_00_%02d.%09d" % (version, version)
    (root / ts).mkdir()
    (root / ts / "config.json").write_text(content)
    old = os.readlink(root / "..data") if os.path.lexists(root / "..data") else None
    os.symlink(ts, root / "..data_tmp")
    os.rename(root / "..data_tmp", root / "..data")
    if not os.path.lexists(root / "config.json"):
        os.symlink("..data/config.json", root / "config.json")
    if old:
        shutil.rmtree(root / old)
    return root / "config.json"


def test_configmap_edits_apply_without_a_signal(env):
    kl = env.start_kubelet()
    cm = env.dir / "cm"
    body = lambda units: json.dumps({"periodicUpdateInterval": 300,  # noqa: E731
                                     "configList": [seed_resource("a", units)]}, indent=2) + "\n"
    path = configmap_dir(cm, body(10), 1)
    d = env.daemon(path)
    c = kl.wait_registered("rdma/a", units=10).client
    # kubelet's swap of ..data: applied as a diff (same stream, new units).
    m = d.mark()
    configmap_dir(cm, body(20), 2)
    c.wait_snapshot(lambda s: len(s.devices) == 20, timeout=10)
    d.wait_log("event=reload", "trigger=file", start=m)
    d.wait_log("event=config-reloaded", "kept=1", "why=config-file", start=m)
    assert c.stream_error is None
    # An invalid edit: logged with file:line:column, the running config keeps serving.
    m = d.mark()
    configmap_dir(cm, body(30).replace('"rdmaHcaMax"', '"rdmaHcaMx"'), 3)
    line = d.wait_log("event=config-invalid", start=m, timeout=10)
    assert "config.json:" in line and "rdmaHcaMx" in line, line
    d.wait_log("event=config-rejected", start=m)
    assert len(c.snapshots[-1].devices) == 20
    # Fixed again: applied.
    configmap_dir(cm, body(40), 4)
    c.wait_snapshot(lambda s: len(s.devices) == 40, timeout=10)
    # A change event that changes nothing is not a reload.
    m = d.mark()
    os.utime(cm / os.readlink(cm / "..data") / "config.json")
    os.chmod(cm / os.readlink(cm / "..data") / "config.json", 0o644)
    time.sleep(1)
    assert not any("event=config-reloaded" in ln for ln in d.log().splitlines()[m:])
    assert d.stop() == 0


def test_plain_file_edits_apply_without_a_signal(env):
    """An in-place write and an editor's rename over the file are both seen."""
    kl = env.start_kubelet()
    cfg = env.config({"periodicUpdateInterval": 300, "configList": [seed_resource("a", 10)]})
    d = env.daemon(cfg)
    c = kl.wait_registered("rdma/a", units=10).client
    with open(cfg, "r+") as f:  # in place
        text = f.read().replace('"rdmaHcaMax": 10', '"rdmaHcaMax": 11')
        f.seek(0)
        f.write(text)
        f.truncate()
    c.wait_snapshot(lambda s: len(s.devices) == 11, timeout=10)
    tmp = cfg.with_name("config.json.new")  # rename over it
    tmp.write_text(text.replace('"rdmaHcaMax": 11', '"rdmaHcaMax": 12'))
    os.rename(tmp, cfg)
    c.wait_snapshot(lambda s: len(s.devices) == 12, timeout=10)
    assert "signal=SIGHUP" not in d.log()


@pytest.fixture(scope="module")
def scale_node(tmp_path_factory):
    """A large node generated for this module: full discoveries take long enough here that an
    event loop blocked by them would be seen."""
    out = tmp_path_factory.mktemp("scale")
    gen = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures",
                       "gen-fixtures.py")
    subprocess.run(["/usr/bin/python3", gen, "--out", str(out), "--scale", "300"], check=True,
                   stdout=subprocess.DEVNULL)
    return out / "scale-300"


def test_allocate_answers_during_full_rescans(env, scale_node):
    """SIGHUP makes a full discovery of 300 devices; Allocate calls made meanwhile are answered
    long before it ends (the scan runs on the worker thread)."""
    kl = env.start_kubelet()
    cfg = env.config({"periodicUpdateInterval": 0,
                      "configList": [{"resourceName": "all", "rdmaHcaMax": 100,
                                      "selectors": {"vendors": ["15b3"]}}]})
    d = env.daemon(cfg, sysfs=scale_node / "sys", dev=scale_node / "dev", verbose=True)
    c = kl.wait_registered("rdma/all", units=100, timeout=120).client
    scans = []
    latencies = []
    for i in range(5):
        m = d.mark()
        d.signal(signal.SIGHUP)
        t_end = time.monotonic() + 10
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            c.allocate([str(i)])
            latencies.append(time.monotonic() - t0)
            if any("event=rescanned" in ln and "why=sighup" in ln
                   for ln in d.log().splitlines()[m:]):
                break
        line = d.wait_log("event=rescanned", "why=sighup", start=m)
        scans.append(int(line.split("ms=")[1].split()[0]))
    # The scans took long; no Allocate waited for one.
    assert max(scans) >= 20, scans
    assert max(latencies) * 1000 < max(scans) / 2 + 10, (scans, latencies)


def _netns_tools():
    for tool in ("unshare", "nsenter", "ip"):
        if not shutil.which(tool):
            return "no %s" % tool
    r = subprocess.run(["unshare", "-n", "--", "ip", "link", "add", "v0", "type", "veth",
                        "peer", "name", "v1"], capture_output=True, text=True)
    if r.returncode != 0:
        return "cannot create a network namespace with a veth pair here: %s" % r.stderr.strip()
    return None


def test_link_down_and_up_reach_kubelet_within_a_second(env):
    """The rtnetlink path end to end: the daemon runs in a network namespace of its own (its
    netlink sockets see that namespace's links); a physical-like link there (a macvlan: not a
    virtual kind the watch ignores) goes down with the port, and kubelet sees the units
    Unhealthy within a second with periodicUpdateInterval 300; then up again."""
    why = _netns_tools()
    if why:
        pytest.skip(why)
    node = copy_node(env, "seed000")
    kl = env.start_kubelet()
    cfg = env.config({"periodicUpdateInterval": 300, "configList": [seed_resource("a", 10)]})
    d = env.daemon(cfg, node, wrapper=("unshare", "-n", "--"))
    c = kl.wait_registered("rdma/a", units=10, healthy=10).client
    d.wait_log("event=lock-taken")

    def ip(*args):
        subprocess.run(["nsenter", "-t", str(d.pid), "-n", "ip", *args], check=True,
                       capture_output=True)

    ip("link", "add", "v0", "type", "veth", "peer", "name", "v1")
    ip("link", "add", "mv0", "link", "v0", "type", "macvlan")
    ip("link", "set", "v1", "up")
    ip("link", "set", "v0", "up")
    ip("link", "set", "mv0", "up")
    time.sleep(0.5)  # the watch learns mv0's state; no change of ours yet
    sysfsgen.set_port_state(node / "sys", "mlx5_0", 1, "DOWN")
    m = d.mark()
    ip("link", "set", "mv0", "down")
    timed_snapshot(c, lambda s: health(s) == {"Unhealthy"}, "link down")
    line = d.wait_log("event=host-changed", start=m)
    assert "mv0" in line, line  # the link event, not another watch
    sysfsgen.set_port_state(node / "sys", "mlx5_0", 1, "ACTIVE")
    ip("link", "set", "mv0", "up")
    timed_snapshot(c, lambda s: health(s) == {"Healthy"}, "link up")
    assert "why=periodic" not in d.log()


def test_kernel_uevent_triggers_a_rescan(env):
    """The uevent path end to end: a real kernel uevent (a `change` written to a PCI function's
    uevent file, harmless) makes the daemon rescan at once; a device changed in the fixture
    meanwhile reaches kubelet within a second."""
    pci = "/sys/bus/pci/devices"
    devs = sorted(os.listdir(pci)) if os.path.isdir(pci) else []
    if not devs or not os.access(os.path.join(pci, devs[0], "uevent"), os.W_OK):
        pytest.skip("no writable PCI uevent file on this machine")
    node = copy_node(env, "seed000")
    kl = env.start_kubelet()
    cfg = env.config({"periodicUpdateInterval": 300, "configList": [seed_resource("a", 10)]})
    d = env.daemon(cfg, sysfs=node / "sys", dev=node / "dev")
    c = kl.wait_registered("rdma/a", units=10, healthy=10).client
    d.wait_log("event=lock-taken")
    if "source=uevent" in d.log():
        pytest.skip("kernel uevents are not receivable here: %s" % d.log())
    sysfsgen.set_port_state(node / "sys", "mlx5_0", 1, "DOWN")
    m = d.mark()
    with open(os.path.join(pci, devs[0], "uevent"), "w") as f:
        f.write("change\n")
    timed_snapshot(c, lambda s: health(s) == {"Unhealthy"}, "uevent")
    line = d.wait_log("event=host-changed", start=m)
    assert "uevent" in line, line


def test_reload_that_starts_selecting_by_netdev_reads_the_gid_table(env):
    """Without ifNames selectors the daemon's scans skip the GID tables (they only add netdevs:
    a RoCE LAG's bond0); a reload that adds `ifNames: [bond0]` makes the next scan read them,
    so the new pool selects the LAG device."""
    kl = env.start_kubelet()
    cfg = env.config({"periodicUpdateInterval": 300, "configList": [
        {"resourceName": "all", "rdmaHcaMax": 5, "selectors": {"vendors": ["15b3"]}}]})
    d = env.daemon(cfg, node="roce-lag")
    kl.wait_registered("rdma/all", units=5)
    env.config({"periodicUpdateInterval": 300, "configList": [
        {"resourceName": "all", "rdmaHcaMax": 5, "selectors": {"vendors": ["15b3"]}},
        {"resourceName": "lag", "rdmaHcaMax": 7, "selectors": {"ifNames": ["bond0"]}}]})
    d.signal(signal.SIGHUP)
    kl.wait_registered("rdma/lag", units=7, timeout=10)
    d.wait_log("event=pool", "resource=rdma/lag", "devices=mlx5_bond_0")
