# SPDX-License-Identifier: MIT
"""rdma-dp serve over time: kubelet restarts, rescans (health, NUMA, unplug/re-plug), SIGHUP
reloads with a good and a bad config, SIGTERM/SIGINT cleanup. Real daemon, real sockets,
fixture copies edited with sysfsgen."""
import json
import os
import re
import signal
import socket
import stat
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import kubelet as K  # noqa: E402
import sysfsgen  # noqa: E402
from test_serve import CONFIGS, SEED_RES, SEED_SOCK, char_devices, env, specs  # noqa: E402,F401

DGX_RES = ["rdma/compute_ib", "rdma/storage_roce", "rdma/compute_ib_numa0",
           "rdma/compute_ib_numa1"]


def copy_node(env, name):
    """A private copy of a fixture node, to edit."""
    return env.copy(name)


def health(snap):
    return {d.health for d in snap.devices}


def topo(snap):
    return {tuple(n.ID for n in d.topology.nodes) if d.HasField("topology") else None
            for d in snap.devices}


# ---------------------------------------------------------------------------------------------
def test_kubelet_restarts_50(env):
    """50 kubelet restarts: every time each resource is registered again, with full units."""
    kl = env.start_kubelet()
    d = env.daemon(CONFIGS / "dgx.json", node="dgx-h100", verbose=False)
    for r in DGX_RES:
        kl.wait_registered(r, units=63, healthy=63)
    checkpoint = kl.checkpoint.read_text()
    for i in range(50):
        n = len(kl.registrations)
        kl.restart()
        for r in DGX_RES:
            kl.wait_registered(r, units=63, healthy=63, after=n, timeout=60)
        assert d.proc.poll() is None
    # Settled: every resource registered, serving full units, on its own socket.
    assert kl.capacity() == {r: (63, 63) for r in DGX_RES}
    for r in DGX_RES:
        c = kl.current[r].client
        assert specs(c.allocate(["62"]))
    assert kl.checkpoint.read_text() == checkpoint
    assert not kl.errors, kl.errors
    # Never 0 units toward kubelet, never an exit.
    log = d.log()
    assert "units=0" not in log
    assert d.stop() == 0


def test_kubelet_absent_at_start(env):
    """No kubelet yet: Register backs off (warnings, no exit); kubelet appears: registered."""
    kl = K.FakeKubelet(env.root)  # directory only, not started
    env.kubelet = kl
    d = env.daemon(CONFIGS / "seed000.json", registration="kubelet-sock")
    d.wait_log("level=warning", "event=register-failed", "resource=" + SEED_RES)
    d.wait_log("event=register-failed", "failures=2")
    assert d.proc.poll() is None
    assert stat.S_ISSOCK(os.lstat(kl.plugin_dir / SEED_SOCK).st_mode)
    kl.start()
    kl.wait_registered(SEED_RES, units=200, healthy=200)
    # kubelet stops and stays away: the daemon keeps going, then registers again.
    kl.stop()
    kl.cleanup_plugin_dir()
    d.wait_log("event=socket-removed", "resource=" + SEED_RES)
    assert d.proc.poll() is None
    n = len(kl.registrations)
    kl.start()
    kl.wait_registered(SEED_RES, units=200, healthy=200, after=n)


def test_socket_deleted_is_recreated(env):
    """Someone deletes our socket while kubelet runs: re-created and registered again."""
    kl = env.start_kubelet()
    d = env.daemon(CONFIGS / "seed000.json")
    kl.wait_registered(SEED_RES, units=200)
    n = len(kl.registrations)
    os.unlink(kl.plugin_dir / SEED_SOCK)
    kl.wait_registered(SEED_RES, units=200, after=n)
    assert stat.S_ISSOCK(os.lstat(kl.plugin_dir / SEED_SOCK).st_mode)
    d.wait_log("event=socket-removed")


def test_watcher_mode_socket_deleted_and_kubelet_restart(env):
    kl = env.start_kubelet(mode="plugins-registry")
    env.daemon(CONFIGS / "seed000.json", registration="plugins-registry")
    kl.wait_registered(SEED_RES, units=200)
    # kubelet restarts: it re-discovers the socket that is still there.
    n = len(kl.registrations)
    kl.stop()
    kl.start()
    kl.wait_registered(SEED_RES, units=200, after=n)
    # The socket is deleted: the daemon re-creates it, the watcher registers it again.
    n = len(kl.registrations)
    os.unlink(kl.registry_dir / SEED_SOCK)
    kl.wait_registered(SEED_RES, units=200, after=n)


# ---------------------------------------------------------------------------------------------
def test_health_down_and_up_sighup(env):
    node = copy_node(env, "seed000")
    kl = env.start_kubelet()
    d = env.daemon(CONFIGS / "seed000.json", sysfs=node / "sys", dev=node / "dev")
    c = kl.wait_registered(SEED_RES, units=200, healthy=200).client
    # An unchanged host sends nothing: a SIGHUP rescan, then a change; the change's snapshot
    # must directly follow the first one.
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=rescanned", "why=sighup", start=m)
    # Marked before the change: the port-state poll may see it before the SIGHUP does.
    m = d.mark()
    sysfsgen.set_port_state(node / "sys", "mlx5_0", 1, "DOWN")
    d.signal(signal.SIGHUP)
    snap = c.wait_snapshot(lambda s: health(s) == {"Unhealthy"})
    assert len(snap.devices) == 200
    assert len(c.snapshots) == 2
    assert kl.capacity() == {SEED_RES: (200, 0)}
    d.wait_log("event=updated", "units=200", "healthy=0", start=m)
    # Unhealthy units can still be allocated by a pod that has them: specs unchanged.
    assert [p for p, _, _ in specs(c.allocate(["0"]))][-1] == "/dev/infiniband/uverbs0"
    # And back.
    sysfsgen.set_port_state(node / "sys", "mlx5_0", 1, "ACTIVE")
    d.signal(signal.SIGHUP)
    c.wait_snapshot(lambda s: health(s) == {"Healthy"} and len(s.devices) == 200)
    assert len(c.snapshots) == 3
    assert c.stream_error is None
    assert kl.current[SEED_RES].client is c  # the same stream all along


def test_health_periodic_rescan(env):
    """periodicUpdateInterval 1: port state changes reach kubelet without any signal."""
    node = copy_node(env, "seed000")
    cfg = json.loads((CONFIGS / "seed000.json").read_text())
    cfg["periodicUpdateInterval"] = 1
    kl = env.start_kubelet()
    env.daemon(env.config(cfg), sysfs=node / "sys", dev=node / "dev")
    c = kl.wait_registered(SEED_RES, units=200, healthy=200).client
    sysfsgen.set_port_state(node / "sys", "mlx5_0", 1, "INIT")
    c.wait_snapshot(lambda s: health(s) == {"Unhealthy"})
    sysfsgen.set_port_state(node / "sys", "mlx5_0", 1, "ACTIVE")
    c.wait_snapshot(lambda s: health(s) == {"Healthy"})


def test_numa_change(env):
    node = copy_node(env, "seed000")
    kl = env.start_kubelet()
    cfg = json.loads((CONFIGS / "seed000.json").read_text())
    cfg["configList"][0]["reportTopology"] = True  # shared pools report none by default
    d = env.daemon(env.config(cfg), sysfs=node / "sys", dev=node / "dev")
    c = kl.wait_registered(SEED_RES, units=200).client
    assert topo(c.latest()) == {(1,)}
    sysfsgen.set_numa_node(node / "sys", "mlx5_0", 0)
    d.signal(signal.SIGHUP)
    c.wait_snapshot(lambda s: topo(s) == {(0,)})
    # Unknown NUMA node: no topology at all.
    sysfsgen.set_numa_node(node / "sys", "mlx5_0", -1)
    d.signal(signal.SIGHUP)
    c.wait_snapshot(lambda s: topo(s) == {None} and len(s.devices) == 200)


def test_unplug_replug(env):
    """dgx-h100: unplugging one HCA of a pool changes what Allocate hands out; unplugging
    the whole pool empties it (0 units); re-plugging brings everything back."""
    node = copy_node(env, "dgx-h100")
    kl = env.start_kubelet()
    d = env.daemon(CONFIGS / "dgx.json", node="dgx-h100", sysfs=node / "sys", dev=node / "dev")
    res = "rdma/compute_ib_numa0"
    pool = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5"]
    c = kl.wait_registered(res, units=63, healthy=63).client
    full = [p for p, _, _ in specs(c.allocate(["0"]))]
    gone = char_devices(node, {"mlx5_3"})
    assert gone and gone <= set(full)

    sysfsgen.unplug(node / "sys", node / "dev", "mlx5_3")
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=updated", "resource=" + res, "devices=mlx5_0,mlx5_4,mlx5_5", start=m)
    got = [p for p, _, _ in specs(c.allocate(["0"]))]
    assert got == sorted(set(full) - gone)
    assert len(c.snapshots) == 1  # same units, health and NUMA: nothing sent

    for dev in ("mlx5_0", "mlx5_4", "mlx5_5"):
        sysfsgen.unplug(node / "sys", node / "dev", dev)
    d.signal(signal.SIGHUP)
    c.wait_snapshot(lambda s: len(s.devices) == 0)
    assert kl.capacity()[res] == (0, 0)
    # The other NUMA node's pool is untouched.
    assert kl.capacity()["rdma/compute_ib_numa1"] == (63, 63)

    m = d.mark()
    for dev in pool:
        sysfsgen.replug(node / "sys", node / "dev", env.node("dgx-h100"), dev)
    d.signal(signal.SIGHUP)
    # (dgx.json sets no "reportTopology": no topology, as the Go plugin)
    c.wait_snapshot(lambda s: len(s.devices) == 63 and health(s) == {"Healthy"} and
                    topo(s) == {None})
    # The dev watch may rescan between two re-plugs (or between a device's sysfs and its /dev
    # nodes coming back): the snapshot is the same with one device back as with four, so wait
    # for the state that has all of them usable.
    # A device counts as usable once its uverbs node is back; its umad/issm nodes may come a
    # scan later: wait for the state that hands out every node again.
    d.wait_log("resource=" + res, "devices=" + ",".join(pool), "usable=4",
               "specs=%d" % len(full), start=m)
    assert [p for p, _, _ in specs(c.allocate(["0"]))] == full
    assert c.stream_error is None


# ---------------------------------------------------------------------------------------------
def seed_resource(name, hca_max=10, ifname="ib0", prefix=None):
    r = {"resourceName": name, "rdmaHcaMax": hca_max, "selectors": {"ifNames": [ifname]}}
    if prefix:
        r["resourcePrefix"] = prefix
    return r


def test_sighup_good_config_diff(env):
    kl = env.start_kubelet()
    cfg = env.config({"periodicUpdateInterval": 0,
                      "configList": [seed_resource("a", 10), seed_resource("b", 20)]})
    d = env.daemon(cfg)
    ra = kl.wait_registered("rdma/a", units=10)
    kl.wait_registered("rdma/b", units=20)
    n_a = sum(1 for r in kl.registrations if r.resource == "rdma/a")
    # a changes (10 -> 30 units), b goes, c comes.
    env.config({"periodicUpdateInterval": 0,
                "configList": [seed_resource("a", 30), seed_resource("c", 5)]})
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=config-reloaded", "added=1", "removed=1", "kept=1", start=m)
    kl.wait_registered("rdma/c", units=5)
    # a: same socket, same stream, new snapshot; no new registration.
    ra.client.wait_snapshot(lambda s: len(s.devices) == 30)
    assert ra.client.stream_error is None
    assert sum(1 for r in kl.registrations if r.resource == "rdma/a") == n_a
    # b: its socket is gone, its stream ended.
    assert not os.path.exists(kl.plugin_dir / "b.sock")
    assert os.path.exists(kl.plugin_dir / "a.sock") and os.path.exists(kl.plugin_dir / "c.sock")
    d.wait_log("event=resource-removed", "resource=rdma/b", start=m)
    # Allocate answers with the new unit count.
    specs(ra.client.allocate(["29"]))


def test_sighup_bad_config_keeps_old(env):
    kl = env.start_kubelet()
    cfg = env.config({"configList": [seed_resource("a", 10)]})
    d = env.daemon(cfg)
    ra = kl.wait_registered("rdma/a", units=10)
    n = len(kl.registrations)
    # An unknown key on line 6, column 7.
    cfg.write_text('{\n  "configList": [\n    {\n      "resourceName": "a",\n'
                   '      "rdmaHcaMax": 99,\n      "selectrs": {"ifNames": ["ib0"]}\n'
                   '    }\n  ]\n}\n')
    m = d.mark()
    d.signal(signal.SIGHUP)
    line = d.wait_log("level=error", "event=config-invalid", start=m)
    assert re.search(re.escape(str(cfg)) + r":6:7", line), line
    d.wait_log("event=config-rejected", start=m)
    # The old config keeps serving: same stream, 10 units, Allocate works.
    assert specs(ra.client.allocate(["9"]))
    assert len(ra.client.latest().devices) == 10
    assert ra.client.stream_error is None
    assert len(kl.registrations) == n
    # Broken JSON too.
    cfg.write_text('{"configList": [\n')
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=config-rejected", start=m)
    assert d.proc.poll() is None
    # A good config afterwards applies.
    cfg.write_text(json.dumps({"configList": [seed_resource("a", 12)]}))
    d.signal(signal.SIGHUP)
    ra.client.wait_snapshot(lambda s: len(s.devices) == 12)


def test_sighup_prefix_change_reregisters(env):
    kl = env.start_kubelet()
    cfg = env.config({"configList": [seed_resource("a", 10)]})
    d = env.daemon(cfg)
    kl.wait_registered("rdma/a", units=10)
    env.config({"configList": [seed_resource("a", 10, prefix="example.com")]})
    d.signal(signal.SIGHUP)
    kl.wait_registered("example.com/a", units=10)
    assert os.path.exists(kl.plugin_dir / "a.sock")


def line_index(d, *needles):
    """Index of the first log line containing every needle."""
    with d.cond:
        return next(i for i, ln in enumerate(d.lines) if all(n in ln for n in needles))


@pytest.mark.parametrize("mode", ["kubelet-sock", "plugins-registry"])
def test_prefix_change_waits_for_registration_in_flight(env, mode):
    """A prefix change (example.com/a -> rdma/a, both on a.sock) while kubelet is still
    registering example.com/a: kubelet's dial of a.sock for example.com/a comes after the
    reload. The removed resource keeps a.sock and answers that dial itself; once kubelet has
    answered (Register's reply; NotifyRegistrationStatus in watcher mode) it closes a.sock,
    ending the stream kubelet opened for example.com/a. Only then rdma/a listens and registers,
    so kubelet never has an example.com/a fed by rdma/a."""
    kl = env.start_kubelet(mode=mode)
    delay = [1.0]
    dialing = threading.Event()
    connect = kl._connect

    def slow_connect(*args, **kw):  # a slow kubelet: the dial of the plugin comes late
        dialing.set()
        time.sleep(delay[0])
        return connect(*args, **kw)

    kl._connect = slow_connect
    cfg = env.config({"configList": [seed_resource("a", 10, prefix="example.com")]})
    d = env.daemon(cfg, registration=mode)
    assert dialing.wait(60), "kubelet never started registering example.com/a"
    env.config({"configList": [seed_resource("a", 20)]})
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=config-reloaded", "added=1", "removed=1", start=m)
    new = kl.wait_registered("rdma/a", units=20)
    delay[0] = 0
    # kubelet did register example.com/a, on the removed resource's own server: its snapshots
    # are example.com/a's (10 units), never rdma/a's (20), and its stream ended.
    ghosts = [r for r in kl.registrations if r.resource == "example.com/a"]
    assert len(ghosts) == 1, kl.registrations
    c = ghosts[0].client
    with c.cond:
        c.cond.wait_for(lambda: c.stream_error is not None, 30)
        assert c.stream_error is not None, "example.com/a still live: %r" % (kl.describe(),)
        assert c.snapshots and all(len(s.devices) == 10 for s in c.snapshots), \
            [len(s.devices) for s in c.snapshots]
    # The daemon's account: a.sock held, then released, then taken by rdma/a.
    d.wait_log("event=resource-removed", "resource=example.com/a", "release=after-handshake",
               start=m)
    d.wait_log("event=socket-busy", "resource=rdma/a", "holder=example.com/a", start=m)
    why = "why=registered" if mode == "kubelet-sock" else "why=notified"
    released = line_index(d, "event=socket-released", "resource=example.com/a", why)
    assert released < line_index(d, "event=listening", "resource=rdma/a")
    assert d.count("event=listening", "resource=rdma/a") == 1
    # rdma/a serves on a.sock, live.
    assert stat.S_ISSOCK(os.lstat(new.endpoint).st_mode)
    assert os.path.basename(new.endpoint) == "a.sock"
    assert specs(new.client.allocate(["19"]))
    assert new.client.stream_error is None
    assert d.proc.poll() is None


# ---------------------------------------------------------------------------------------------
def foreign_socket(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(1)
    return s


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_cleanup(env, sig):
    kl = env.start_kubelet()
    other = foreign_socket(kl.plugin_dir / "other-vendor.sock")
    (kl.plugin_dir / "notes.txt").write_text("not ours\n")
    d = env.daemon(CONFIGS / "dgx.json", node="dgx-h100")
    regs = [kl.wait_registered(r, units=63) for r in DGX_RES]
    d.signal(sig)
    assert d.proc.wait(60) == 0
    left = sorted(os.listdir(kl.plugin_dir))
    assert left == ["kubelet.sock", "kubelet_internal_checkpoint", "notes.txt",
                    "other-vendor.sock"]
    assert stat.S_ISSOCK(os.lstat(kl.kubelet_sock).st_mode)
    for r in regs:
        r.client.wait_snapshot(lambda s: True)
        with r.client.cond:
            r.client.cond.wait_for(lambda: r.client.stream_error is not None, 30)
        assert r.client.stream_error is not None
    d.wait_log("event=stopped", "code=0")
    other.close()


def test_sigterm_cleanup_watcher_mode(env):
    kl = env.start_kubelet(mode="plugins-registry")
    d = env.daemon(CONFIGS / "seed000.json", registration="plugins-registry")
    kl.wait_registered(SEED_RES, units=200)
    # Another plugin's socket (made after, so the fake watcher does not wait on it).
    kl.stop()
    other = foreign_socket(kl.registry_dir / "csi.example.com-reg.sock")
    assert d.stop() == 0
    assert sorted(os.listdir(kl.registry_dir)) == ["csi.example.com-reg.sock"]
    other.close()


def test_socket_dir_appears_later(env):
    """kubelet-sock mode before kubelet ever ran: no device-plugins directory yet. The daemon
    waits (no exit: its lock, and so its sockets, wait for the directory) and registers once
    kubelet creates it."""
    d = env.daemon(CONFIGS / "seed000.json", registration="kubelet-sock")
    d.wait_log("event=socket-dir-missing")
    time.sleep(1.5)  # the lock is retried every second meanwhile
    assert d.proc.poll() is None
    assert "event=lock-taken" not in d.log()
    kl = env.start_kubelet()  # creates device-plugins/ and kubelet.sock
    kl.wait_registered(SEED_RES, units=200, healthy=200)
    assert d.stop() == 0
    assert not os.path.exists(kl.plugin_dir / SEED_SOCK)


def test_socket_path_too_long(env, run):
    root = env.dir / ("r" * 60)
    (root / "device-plugins").mkdir(parents=True)
    node = env.node("seed000")
    cfg = env.config({"configList": [{"resourceName": "n" * 40, "rdmaHcaMax": 1,
                                      "selectors": {"ifNames": ["ib0"]}}]})
    r = run("serve", "--config-file", cfg, "--sysfs-root", node / "sys", "--dev-root",
            node / "dev", "--kubelet-root-dir", root, "--registration", "kubelet-sock",
            timeout=60)
    assert r.returncode == 1
    assert "event=socket-path-too-long" in r.stderr


# ---------------------------------------------------------------------------------------------
class RawKubelet:
    """kubelet.sock served frame by frame (hyper-h2), as a kubelet that is not ours: it binds,
    listens only `listen_delay` later, and inside Register dials the plugin, calls
    GetDevicePluginOptions and opens ListAndWatch on that one connection, and answers only
    once the first snapshot arrived."""

    def __init__(self, plugin_dir, listen_delay=0.0):
        import h2.config
        import h2.connection
        self.h2c, self.h2cfg = h2.connection, h2.config
        self.ev = __import__("h2.events").events
        self.plugin_dir = plugin_dir
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ls.bind(str(plugin_dir / "kubelet.sock"))
        time.sleep(listen_delay)
        self.ls.listen(8)
        self.ls.settimeout(30)

    def register_one(self):
        """Serves one Register; returns (request headers, RegisterRequest, plugin client)."""
        pb, _ = K.protos()
        s, _ = self.ls.accept()
        s.settimeout(10)
        c = self.h2c.H2Connection(self.h2cfg.H2Configuration(client_side=False,
                                                             header_encoding="utf-8"))
        c.initiate_connection()
        s.sendall(c.data_to_send())
        hdrs, body, data_end = None, b"", False
        while not data_end:
            b = s.recv(65536)
            assert b, "EOF before the Register request ended"
            for e in c.receive_data(b):
                if isinstance(e, self.ev.RequestReceived):
                    hdrs = e.headers
                elif isinstance(e, self.ev.DataReceived):
                    body += e.data
                    c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                    data_end = data_end or e.stream_ended is not None
                elif isinstance(e, self.ev.StreamEnded):
                    assert body, "END_STREAM without the request message"
            s.sendall(c.data_to_send())
        (msg,) = K.messages(body)
        req = pb.RegisterRequest.FromString(msg)
        # Dial back before answering; one connection for everything.
        p = K.RawClient(self.plugin_dir / req.endpoint)
        p.send(1, "/v1beta1.DevicePlugin/GetDevicePluginOptions", b"")
        hs, msgs, ts = p.response(1)
        assert ts == [("grpc-status", "0"), ("grpc-message", "")] and msgs == [b""]
        p.send(3, "/v1beta1.DevicePlugin/ListAndWatch", b"", split=True)
        p.pump(lambda cl: cl.data.get(3), timeout=10)
        assert p.data.get(3), "no first snapshot"
        c.send_headers(1, [(":status", "200"), ("content-type", "application/grpc")])
        c.send_data(1, K.grpc_msg(b""))
        c.send_headers(1, [("grpc-status", "0"), ("grpc-message", "")], end_stream=True)
        s.sendall(c.data_to_send())
        # The plugin closes its Register connection itself: GOAWAY(NO_ERROR), then EOF.
        seen = []
        while True:
            try:
                b = s.recv(65536)
            except ConnectionResetError:
                b = b""
            if not b:
                break
            seen += c.receive_data(b)
            try:
                s.sendall(c.data_to_send())
            except (BrokenPipeError, ConnectionResetError):
                pass  # the plugin closed first: fine
        goaway = [e for e in seen if isinstance(e, self.ev.ConnectionTerminated)]
        assert goaway and goaway[0].error_code == 0, seen
        s.close()
        return hdrs, req, p

    def close(self):
        self.ls.close()


def test_independent_kubelet_restarts_delete_all_sockets_then_listen_late(env):
    pytest.importorskip("h2")
    pd = env.root / "device-plugins"
    pd.mkdir()
    (pd / "kubelet_internal_checkpoint").write_text("{}\n")
    cfg = env.config({"periodicUpdateInterval": 60, "configList": [
        {"resourceName": "hca_shared_devices_a", "rdmaHcaMax": 3,
         "selectors": {"vendors": ["15b3"]}}]})
    kl = RawKubelet(pd)
    d = env.daemon(cfg, registration="kubelet-sock")
    hdrs, req, plugin = kl.register_one()
    assert hdrs[:7] == [(":method", "POST"), (":scheme", "http"),
                        (":path", "/v1beta1.Registration/Register"),
                        (":authority", "localhost"), ("content-type", "application/grpc"),
                        hdrs[5], ("te", "trailers")]
    tmo = dict(hdrs)["grpc-timeout"]
    assert re.fullmatch(r"[0-9]{1,8}[HMSmun]", tmo)
    assert req.version == "v1beta1" and req.endpoint == SEED_SOCK
    assert req.resource_name == SEED_RES
    d.wait_log("event=registered")
    for delay in (0.03, 0.2, 0.0):
        # kubelet dies without closing its client connection, a new one wipes every socket
        # (not the checkpoint) and re-creates kubelet.sock, listening a moment later.
        kl.close()
        for e in os.listdir(pd):
            if stat.S_ISSOCK(os.lstat(pd / e).st_mode):
                os.unlink(pd / e)
        mark = d.mark()
        kl = RawKubelet(pd, listen_delay=delay)
        _, req, new_plugin = kl.register_one()
        assert req.endpoint == SEED_SOCK
        d.wait_log("event=registered", start=mark)
        # The old kubelet's connection was ended by the plugin: GOAWAY, then EOF.
        plugin.pump(lambda cl: cl.eof, timeout=10)
        assert plugin.eof and plugin.of(0, plugin.h2.ConnectionTerminated)
        plugin.s.close()
        plugin = new_plugin
        assert not plugin.ended(3)
        assert (pd / "kubelet_internal_checkpoint").exists()
    plugin.close()
    kl.close()
    assert d.stop() == 0
