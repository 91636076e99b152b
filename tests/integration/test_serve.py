# SPDX-License-Identifier: MIT
"""rdma-dp serve against a fake kubelet (grpcio) over real unix sockets: registration in both
modes, ListAndWatch snapshots, Allocate and the other calls, hostile peers, the command line."""
import os
import pathlib
import re
import signal
import socket
import stat
import struct
import sys
import time

import grpc
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = REPO / "tests" / "fixtures" / "configs"
SEED_RES = "rdma/hca_shared_devices_a"
SEED_SOCK = "hca_shared_devices_a.sock"


@pytest.fixture
def env(make_env):
    """kubelet.TestEnv without a kubelet: each test starts its own (env.start_kubelet())."""
    return make_env(prefix="rdp", kubelet=False)


def char_devices(node_dir, ibdevs):
    """The char devices of ibdevs as sysfs describes them (uverbs, umad, issm), independently
    of rdma-dp's discovery: /dev/infiniband/<name> for each class device whose ibdev matches
    and whose node exists under dev/."""
    out = set()
    for cls in ("infiniband_verbs", "infiniband_mad"):
        d = node_dir / "sys" / "class" / cls
        for e in sorted(os.listdir(d)):
            f = d / e / "ibdev"
            if f.exists() and f.read_text().strip() in ibdevs and \
                    (node_dir / "dev" / "infiniband" / e).exists():
                out.add("/dev/infiniband/" + e)
    return out


def specs(resp, i=0):
    return [(d.host_path, d.container_path, d.permissions)
            for d in resp.container_responses[i].devices]


def ids(snap):
    return [d.ID for d in snap.devices]


# ---------------------------------------------------------------------------------------------
def test_register_seed000(env):
    kl = env.start_kubelet()
    d = env.daemon(CONFIGS / "seed000.json")
    reg = kl.wait_registered(SEED_RES, units=200, healthy=200)
    req = [r for r in kl.requests if r.resource_name == SEED_RES][0]
    assert req.version == "v1beta1"
    assert req.endpoint == SEED_SOCK
    assert not req.options.pre_start_required
    assert not req.options.get_preferred_allocation_available
    assert reg.endpoint == str(kl.plugin_dir / SEED_SOCK)
    assert stat.S_ISSOCK(os.lstat(kl.plugin_dir / SEED_SOCK).st_mode)
    # What kubelet got from GetDevicePluginOptions inside Register.
    assert not reg.options.pre_start_required
    assert not reg.options.get_preferred_allocation_available

    snap = reg.client.latest()
    assert ids(snap) == [str(i) for i in range(200)]
    assert all(dv.health == "Healthy" for dv in snap.devices)
    # mlx5_0 is on NUMA node 1, but a shared pool reports no topology, as the Go plugin
    # (issue 22; "reportTopology" turns it on: test_report_topology).
    assert all(not dv.HasField("topology") for dv in snap.devices)
    assert kl.capacity() == {SEED_RES: (200, 200)}
    line = d.wait_log("event=registered", "resource=" + SEED_RES)
    assert "units=200" in line and "healthy=200" in line and "level=info" in line
    assert re.match(r"^time=\S+ level=info event=registered ", line)


def test_allocate_seed000(env):
    kl = env.start_kubelet()
    env.daemon(CONFIGS / "seed000.json")
    c = kl.wait_registered(SEED_RES, units=200).client
    want = [(p, p, "rwm") for p in ["/dev/infiniband/issm0", "/dev/infiniband/rdma_cm",
                                    "/dev/infiniband/umad0", "/dev/infiniband/uverbs0"]]
    # Cross-check against sysfs + /dev of the node, not rdma-dp's own discovery.
    assert sorted(p for p, _, _ in want) == sorted(
        char_devices(env.node("seed000"), {"mlx5_0"}) | {"/dev/infiniband/rdma_cm"})

    r = c.allocate(["0"])
    assert len(r.container_responses) == 1
    assert specs(r) == want
    cr = r.container_responses[0]
    assert not cr.mounts and not cr.annotations and not cr.cdi_devices
    # The one variable every container gets (no "env"/"envFromDevices" in the seed's config):
    # the devices it got, with their ports.
    assert dict(cr.envs) == {"RDMA_DEVICE_RDMA_HCA_SHARED_DEVICES_A": "mlx5_0:1"}

    # Several units, several containers: one response each, the same devices.
    r = c.allocate(["3", "199", "7"], ["1"])
    assert len(r.container_responses) == 2
    assert specs(r, 0) == want and specs(r, 1) == want

    # Unknown IDs are named.
    with pytest.raises(grpc.RpcError) as ei:
        c.allocate(["0", "200", "abc", "-1"])
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    for bad in ('"200"', '"abc"', '"-1"'):
        assert bad in ei.value.details()
    # More units than exist.
    with pytest.raises(grpc.RpcError) as ei:
        c.allocate([str(i) for i in range(200)] + ["0"])
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "201" in ei.value.details()
    # A failed call leaves the service working.
    assert specs(c.allocate(["5"])) == want

    # PreStartContainer: empty. GetPreferredAllocation: must-include topped up.
    assert c.prestart(["0"]).ByteSize() == 0
    p = c.preferred([str(i) for i in range(10)], ["7", "3"], 4)
    assert list(p.container_responses[0].deviceIDs) == ["7", "3", "0", "1"]
    o = c.options()
    assert not o.pre_start_required and not o.get_preferred_allocation_available


def test_seed001(env):
    """seed001: the config selects mlx5_0 (ibs108, NUMA 0) only, not the RoCE mlx5_1."""
    kl = env.start_kubelet()
    env.daemon(CONFIGS / "seed001.json", node="seed001")
    reg = kl.wait_registered(SEED_RES, units=200, healthy=200)
    snap = reg.client.latest()
    assert all(not dv.HasField("topology") for dv in snap.devices)  # shared: none by default
    want = sorted(char_devices(env.node("seed001"), {"mlx5_0"}) | {"/dev/infiniband/rdma_cm"})
    assert "/dev/infiniband/uverbs0" in want
    assert [p for p, _, _ in specs(reg.client.allocate(["0"]))] == want


def test_dgx_h100(env):
    kl = env.start_kubelet()
    d = env.daemon(CONFIGS / "dgx.json", node="dgx-h100")
    node = env.node("dgx-h100")
    compute0 = {"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5"}
    compute1 = {"mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"}
    storage = {"mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"}
    cases = {
        "rdma/compute_ib": (compute0 | compute1, None),
        "rdma/storage_roce": (storage, None),
        # one NUMA node each, but no "reportTopology": no topology, as the Go plugin
        "rdma/compute_ib_numa0": (compute0, None),
        "rdma/compute_ib_numa1": (compute1, None),
    }
    for res, (devs, numa) in cases.items():
        reg = kl.wait_registered(res, units=63, healthy=63)
        snap = reg.client.latest()
        assert ids(snap) == [str(i) for i in range(63)]
        for dv in snap.devices:
            if numa is None:
                assert not dv.HasField("topology"), res
            else:
                assert [n.ID for n in dv.topology.nodes] == numa, res
        got = [p for p, _, _ in specs(reg.client.allocate(["0"]))]
        want = sorted(char_devices(node, devs) | {"/dev/infiniband/rdma_cm"})
        assert got == want, res
        # RoCE ports have no umad/issm? They do (mlx5 creates both); just no duplicates.
        assert len(got) == len(set(got))
    assert kl.capacity() == {r: (63, 63) for r in cases}
    # .rdma-dp: the daemon's status for the liveness probe (status.h) and its lock (lock.h), a
    # directory because kubelet unlinks every other file here when it starts
    assert sorted(os.listdir(kl.plugin_dir)) == sorted(
        ["kubelet.sock", "kubelet_internal_checkpoint", "compute_ib.sock",
         "storage_roce.sock", "compute_ib_numa0.sock", "compute_ib_numa1.sock", ".rdma-dp"])
    assert sorted(os.listdir(kl.plugin_dir / ".rdma-dp")) == ["lock", "status.json"]
    # the daemon logs a registration once kubelet's Register answer is back, which may come
    # a moment after the stand-in counted it (seen failing 1 in 3 on a loaded machine)
    kl.wait(lambda: d.count("event=registered") >= 4, what="4 registered lines")


def test_plugins_registry_mode(env):
    kl = env.start_kubelet(mode="plugins-registry")
    d = env.daemon(CONFIGS / "seed000.json", registration="plugins-registry")
    reg = kl.wait_registered(SEED_RES, units=200, healthy=200)
    sock = kl.registry_dir / SEED_SOCK
    assert reg.info[0] == str(sock)
    info = reg.info[1]
    assert info.type == "DevicePlugin"
    assert info.name == SEED_RES
    # Empty: kubelet dials the socket it found, which also works where kubelet's path to
    # plugins_registry differs from the container's (issue 8).
    assert info.endpoint == ""
    assert list(info.supported_versions) == ["v1beta1"]
    assert reg.endpoint == str(sock)
    kl.wait(lambda: any(p == str(sock) and ok for p, ok, _ in kl.notified), what="notify")
    d.wait_log("event=registered", "mode=plugins-registry", "resource=" + SEED_RES)
    # Nothing in device-plugins: kubelet wipes that directory.
    assert sorted(os.listdir(kl.plugin_dir)) == ["kubelet_internal_checkpoint"]
    assert specs(reg.client.allocate(["0"]))[0][0] == "/dev/infiniband/issm0"


def test_registration_auto(env):
    # No kubelet.sock, plugins_registry exists: the plugin watcher.
    kl = env.start_kubelet(mode="plugins-registry")
    d = env.daemon(CONFIGS / "seed000.json")
    kl.wait_registered(SEED_RES, units=200)
    d.wait_log("event=starting", "registration=plugins-registry")
    assert d.stop() == 0
    kl.stop()
    # kubelet.sock and plugins_registry both there: still the plugin watcher, as the Go
    # plugin (issue 22: it used to prefer kubelet.sock, which kubelet marks deprecated).
    kl2 = env.start_kubelet()
    d2 = env.daemon(CONFIGS / "seed000.json")
    d2.wait_log("event=starting", "registration=plugins-registry")
    assert d2.stop() == 0
    kl2.stop()
    # kubelet.sock without plugins_registry: kubelet-sock.
    os.rename(env.root / "plugins_registry", env.dir / "registry-1")
    kl3 = env.start_kubelet()
    d3 = env.daemon(CONFIGS / "seed000.json")
    kl3.wait_registered(SEED_RES, units=200)
    d3.wait_log("event=starting", "registration=kubelet-sock")
    # kubelet restarts with plugins_registry: the daemon follows it to the plugin watcher...
    kl3.stop()
    kl4 = env.start_kubelet(mode="plugins-registry")
    kl4._start_server()  # the restarted kubelet serves kubelet.sock too
    kl4.wait_registered(SEED_RES, units=200)
    d3.wait_log("event=registration-mode", "from=kubelet-sock", "to=plugins-registry",
                "why=plugins_registry-exists")
    # ...and back when plugins_registry goes while kubelet.sock serves (moved away at once:
    # the daemon writes its status in it meanwhile).
    os.rename(env.root / "plugins_registry", env.dir / "registry-2")
    d3.wait_log("event=registration-mode", "from=plugins-registry", "to=kubelet-sock",
                "why=plugins_registry-gone")


def test_report_topology(env):
    """Issue 22: "reportTopology": true makes a shared pool whose devices share a NUMA node
    report it on every unit; a pool across nodes reports none even then."""
    kl = env.start_kubelet()
    cfg = env.config({"configList": [
        {"resourceName": "n1", "rdmaHcaMax": 4, "reportTopology": True,
         "selectors": {"vendors": ["15b3"], "numaNodes": [1]}},
        {"resourceName": "all", "rdmaHcaMax": 4, "reportTopology": True,
         "selectors": {"vendors": ["15b3"]}},
        {"resourceName": "n0", "rdmaHcaMax": 4,
         "selectors": {"vendors": ["15b3"], "numaNodes": [0]}}]})
    env.daemon(cfg, node="dgx-h100")
    snap = kl.wait_registered("rdma/n1", units=4).client.latest()
    assert all([n.ID for n in dv.topology.nodes] == [1] for dv in snap.devices)
    snap = kl.wait_registered("rdma/all", units=4).client.latest()
    assert all(not dv.HasField("topology") for dv in snap.devices)
    snap = kl.wait_registered("rdma/n0", units=4).client.latest()
    assert all(not dv.HasField("topology") for dv in snap.devices)


def test_empty_pool(env):
    kl = env.start_kubelet()
    cfg = env.config({"configList": [{"resourceName": "nothing", "rdmaHcaMax": 10,
                                      "selectors": {"vendors": ["8086"]}}]})
    d = env.daemon(cfg)
    reg = kl.wait_registered("rdma/nothing", units=0)
    assert len(reg.client.latest().devices) == 0
    d.wait_log("level=warning", "event=pool-empty", "resource=rdma/nothing")
    with pytest.raises(grpc.RpcError) as ei:
        reg.client.allocate(["0"])
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_netns_exclusive_warns_and_serves(env):
    kl = env.start_kubelet()
    d = env.daemon(CONFIGS / "seed000.json", node="exclusive")
    kl.wait_registered(SEED_RES, units=200, healthy=200)
    line = d.wait_log("level=warning", "event=netns-exclusive")
    assert "exclusive" in line and "pods" in line


def test_port_down_fixture_unhealthy(env):
    """The port-down node: mlx5_0's port is DOWN, mlx5_1's INIT (no SM): no ACTIVE port in
    the pool, so every unit is Unhealthy (capacity 5, allocatable 0), with topology (NUMA 0:
    "reportTopology")."""
    kl = env.start_kubelet()
    cfg = env.config({"configList": [{"resourceName": "all", "rdmaHcaMax": 5,
                                      "reportTopology": True,
                                      "selectors": {"vendors": ["15b3"]}}]})
    d = env.daemon(cfg, node="port-down")
    reg = kl.wait_registered("rdma/all", units=5, healthy=0)
    snap = reg.client.latest()
    assert all(dv.health == "Unhealthy" for dv in snap.devices)
    assert all([n.ID for n in dv.topology.nodes] == [0] for dv in snap.devices)
    assert kl.capacity() == {"rdma/all": (5, 0)}
    d.wait_log("event=registered", "units=5", "healthy=0")


# ---------------------------------------------------------------------------------------------
# Hostile peers: the daemon keeps serving kubelet's stream and new calls.

def h2_frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def read_some(s, n=65536):
    try:
        return s.recv(n)
    except (socket.timeout, ConnectionResetError):
        return b""


def test_hostile_peers(env):
    kl = env.start_kubelet()
    d = env.daemon(CONFIGS / "seed000.json")
    reg = kl.wait_registered(SEED_RES, units=200)
    sock = kl.plugin_dir / SEED_SOCK
    pb, _ = K.protos()

    # Garbage: the connection is dropped, nothing else.
    s = K.raw_connect(sock)
    s.sendall(os.urandom(4096))
    read_some(s)
    s.close()
    # HTTP/1.1.
    s = K.raw_connect(sock)
    s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    read_some(s)
    s.close()
    # A preface then a truncated frame, then hang up.
    s = K.raw_connect(sock)
    s.sendall(PREFACE + h2_frame(4, 0, 0, b"") + b"\x00\x00\x40\x01\x04\x00\x00\x00\x01abc")
    read_some(s)
    s.close()
    # A HEADERS frame claiming 16 MiB: a frame-size error for the connection.
    s = K.raw_connect(sock)
    s.sendall(PREFACE + h2_frame(4, 0, 0, b"") + b"\xff\xff\xff\x01\x04\x00\x00\x00\x01")
    read_some(s)
    s.close()
    # Many idle connections at once, closed again.
    many = [K.raw_connect(sock) for _ in range(20)]
    for m in many:
        m.close()

    ch = K.dial(sock, options=[("grpc.max_send_message_length", -1),
                               ("grpc.max_receive_message_length", -1)])
    raw = lambda m: ch.unary_unary(m, request_serializer=lambda b: b,  # noqa: E731
                                   response_deserializer=lambda b: b)
    # Unknown method and service.
    for m in ("/v1beta1.DevicePlugin/Nope", "/foo.Bar/Baz"):
        with pytest.raises(grpc.RpcError) as ei:
            raw(m)(b"", timeout=30)
        assert ei.value.code() == grpc.StatusCode.UNIMPLEMENTED
    # A request that does not parse.
    with pytest.raises(grpc.RpcError) as ei:
        raw("/v1beta1.DevicePlugin/Allocate")(b"\x0a\xff\xff\xff\xff\x0f", timeout=30)
    assert ei.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INTERNAL)
    # A message above 4 MiB.
    big = pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(
        devices_ids=["x" * 1000] * 5000)]).SerializeToString()
    assert len(big) > 4 * 1024 * 1024
    with pytest.raises(grpc.RpcError) as ei:
        raw("/v1beta1.DevicePlugin/Allocate")(big, timeout=60)
    assert ei.value.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED,
                               grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNAVAILABLE,
                               grpc.StatusCode.INTERNAL, grpc.StatusCode.CANCELLED)
    # Too many container requests, each bounded.
    many_req = pb.AllocateRequest(container_requests=[
        pb.ContainerAllocateRequest(devices_ids=["0"]) for _ in range(1000)])
    with pytest.raises(grpc.RpcError) as ei:
        raw("/v1beta1.DevicePlugin/Allocate")(many_req.SerializeToString(), timeout=30)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # An ID of 100 KiB is named, bounded.
    with pytest.raises(grpc.RpcError) as ei:
        reg.client.allocate(["9" * 100000])
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len(ei.value.details()) < 2000
    ch.close()

    # Still serving: the daemon, kubelet's stream, and new calls.
    assert d.proc.poll() is None
    assert reg.client.stream_error is None
    assert kl.current[SEED_RES] is reg
    assert specs(reg.client.allocate(["1"]))[3][0] == "/dev/infiniband/uverbs0"
    c2 = K.DevicePluginClient(sock)
    c2.watch()
    assert len(c2.wait_snapshot(lambda s: len(s.devices) == 200).devices) == 200
    c2.close()
    assert d.stop() == 0


# ---------------------------------------------------------------------------------------------
def test_cli(env, run):
    r = run("serve", "--help")
    assert r.returncode == 0
    for flag in ("--config-file", "--sysfs-root", "--dev-root", "--kubelet-root-dir",
                 "--registration", "-v", "SIGHUP", "SIGTERM"):
        assert flag in r.stdout
    r = run("serve", "--version")
    assert r.returncode == 0 and r.stdout.startswith("rdma-dp ")
    r = run("serve", "--registration", "bogus")
    assert r.returncode == 2 and "bogus" in r.stderr
    r = run("serve", "--nope")
    assert r.returncode == 2
    r = run("serve", "extra-arg")
    assert r.returncode == 2

    node = env.node("seed000")
    common = ["--sysfs-root", node / "sys", "--dev-root", node / "dev",
              "--kubelet-root-dir", env.root]
    # A missing config: exit 1, saying which file.
    r = run("serve", "--config-file", env.dir / "missing.json", *common)
    assert r.returncode == 1
    assert "missing.json" in r.stderr
    # An invalid one: exit 1 with file:line:column.
    bad = env.config('{\n  "configList": [\n    {"resourceName": "a", "rdmaHcaMax": 1, '
                     '"selectrs": {}}\n  ]\n}\n', name="bad.json")
    r = run("serve", "--config-file", bad, *common)
    assert r.returncode == 1
    assert re.search(r"bad\.json:\d+:\d+", r.stderr), r.stderr
    # A sysfs root that does not exist: exit 1.
    r = run("serve", "--config-file", CONFIGS / "seed000.json", "--sysfs-root",
            env.dir / "nosys", "--dev-root", node / "dev", "--kubelet-root-dir", env.root)
    assert r.returncode == 1
    assert not os.path.exists(env.root / "device-plugins" / SEED_SOCK)


def test_register_refused_retries(env):
    """kubelet answers Register with an error: logged with kubelet's text, retried with
    backoff, registered in the end; the daemon never exits over it."""
    kl = env.start_kubelet()
    kl.refuse = 3
    d = env.daemon(CONFIGS / "seed000.json")
    kl.wait_registered(SEED_RES, units=200, healthy=200)
    assert len(kl.requests) == 4
    line = d.wait_log("level=warning", "event=register-failed")
    assert "fake kubelet refuses this registration" in line
    assert "retry_ms=" in line
    assert d.proc.poll() is None


def test_log_verbosity(env):
    kl = env.start_kubelet()
    quiet = env.daemon(CONFIGS / "seed000.json", verbose=False)
    c = kl.wait_registered(SEED_RES, units=200).client
    c.allocate(["0"])
    with pytest.raises(grpc.RpcError):
        c.allocate(["x"])
    quiet.wait_log("level=warning", "event=call-failed", "method=Allocate",
                   "code=INVALID_ARGUMENT")
    quiet.wait_log("level=info", "event=allocated", "units=1", "devices=4")
    assert quiet.stop() == 0
    assert "level=debug" not in quiet.log()
    # Every line is key=value pairs, starting with time, level and event.
    kv = re.compile(r'^time=\S+ level=(error|warning|info|debug) event=[a-z.-]+'
                    r'( [a-z_]+=("([^"\\]|\\.)*"|\S+))*$')
    for ln in quiet.log().splitlines():
        assert kv.match(ln), ln
    kl.stop()

    kl2 = env.start_kubelet()
    loud = env.daemon(CONFIGS / "seed000.json", verbose=True)
    kl2.wait_registered(SEED_RES, units=200)
    loud.wait_log("level=debug", "event=call", "method=GetDevicePluginOptions")
    loud.wait_log("level=debug", "event=register-attempt")


# ---------------------------------------------------------------------------------------------
# A kubelet that is not ours, on the wire (hyper-h2): what grpc-go's client checks, exactly.

def raw_daemon(env, units=3):
    """A daemon in plugins-registry mode with no kubelet: its socket takes raw peers."""
    pytest.importorskip("h2")
    (env.root / "plugins_registry").mkdir(exist_ok=True)
    cfg = env.config({"periodicUpdateInterval": 60, "configList": [
        {"resourceName": "hca_shared_devices_a", "rdmaHcaMax": units,
         "selectors": {"vendors": ["15b3"]}}]})
    d = env.daemon(cfg, registration="plugins-registry")
    d.wait_log("event=listening")
    return d, env.root / "plugins_registry" / SEED_SOCK


OK_HEADERS = [(":status", "200"), ("content-type", "application/grpc")]
OK_TRAILERS = [("grpc-status", "0"), ("grpc-message", "")]


def assert_no_data_end_stream(c, sid):
    """grpc-go: END_STREAM on DATA is "server closed the stream without sending trailers"."""
    assert not [e for e in c.of(sid, c.h2.DataReceived) if e.stream_ended], c.events


@pytest.mark.parametrize("authority", ["localhost", "RAW", "ENCODED"])
def test_wire_watcher_calls_any_authority(env, authority):
    """Plugin watcher: no :authority override (kubelet <= 1.28 sends the raw path, >= 1.29
    percent-encodes it), GetInfo with a 1 s grpc-timeout and repeated, Notify without one."""
    d, sock = raw_daemon(env)
    auth = {"localhost": "localhost", "RAW": str(sock),
            "ENCODED": str(sock).replace("/", "%2F")}[authority]
    pb, rpb = K.protos()
    c = K.RawClient(sock)
    try:
        for sid in (1, 3):
            c.send(sid, "/pluginregistration.Registration/GetInfo", b"", authority=auth,
                   extra=[("grpc-timeout", "999871u")])
            hs, msgs, ts = c.response(sid)
            assert hs == OK_HEADERS and ts == OK_TRAILERS
            assert_no_data_end_stream(c, sid)
            info = rpb.PluginInfo.FromString(msgs[0])
            assert len(msgs) == 1 and info.type == "DevicePlugin"
            assert info.name == SEED_RES and list(info.supported_versions) == ["v1beta1"]
        # Registration failed on kubelet's side: acknowledged (an empty message, 5 bytes),
        # logged, and the socket keeps serving.
        st = rpb.RegistrationStatus(plugin_registered=False, error="no room\nfor you")
        c.send(5, "/pluginregistration.Registration/NotifyRegistrationStatus",
               st.SerializeToString(), authority=auth, split=True)
        hs, msgs, ts = c.response(5)
        assert hs == OK_HEADERS and msgs == [b""] and ts == OK_TRAILERS
        assert c.data[5] == b"\0\0\0\0\0"
        d.wait_log("event=register-failed", "mode=plugins-registry")
        c.send(7, "/v1beta1.DevicePlugin/GetDevicePluginOptions", b"", authority=auth)
        hs, msgs, ts = c.response(7)
        assert hs == OK_HEADERS and ts == OK_TRAILERS and msgs == [b""]
    finally:
        c.close()
    assert d.stop() == 0


def test_wire_errors_are_trailers_only_and_percent_encoded(env):
    d, sock = raw_daemon(env)
    pb, _ = K.protos()
    c = K.RawClient(sock)
    try:
        req = pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=["1", "x\u00fc%\n"])])
        c.send(1, "/v1beta1.DevicePlugin/Allocate", req.SerializeToString())
        hs, msgs, ts = c.response(1)
        assert ts is None and msgs == []
        h = dict(hs)
        assert hs[:2] == OK_HEADERS and h["grpc-status"] == "3"
        m = h["grpc-message"]
        assert all(0x20 <= ord(ch) <= 0x7e for ch in m), m
        assert '"x??%25?"' in m and "%" not in m.replace("%25", ""), m
        # Unknown method: UNIMPLEMENTED, trailers-only too.
        c.send(3, "/v1beta1.DevicePlugin/Nope", b"")
        hs, msgs, ts = c.response(3)
        assert hs[:2] == OK_HEADERS and dict(hs)["grpc-status"] == "12" and ts is None
        # The connection still serves.
        c.send(5, "/v1beta1.DevicePlugin/PreStartContainer",
               pb.PreStartContainerRequest(devices_ids=["0"]).SerializeToString())
        hs, msgs, ts = c.response(5)
        assert hs == OK_HEADERS and msgs == [b""] and ts == OK_TRAILERS
    finally:
        c.close()
    assert d.stop() == 0


def test_wire_list_and_watch_large_slow_reader_then_unary_on_same_connection(env):
    """rdmaHcaMax 10000: a snapshot of ~229 KB, far above the 65535 initial windows, read
    1 KiB at a time through a small receive buffer, with BDP pings and a window raised by
    SETTINGS + connection WINDOW_UPDATE as grpc-go does. It must arrive whole, the stream must
    stay open, and the same connection must answer Allocate (several containers, IDs in any
    order) and GetDevicePluginOptions meanwhile."""
    import h2.settings
    d, sock = raw_daemon(env, units=10000)
    pb, _ = K.protos()
    c = K.RawClient(sock, rcvbuf=4096)
    try:
        # ListAndWatch as a kubelet that half-closes with a separate DATA frame.
        c.send(1, "/v1beta1.DevicePlugin/ListAndWatch", b"", split=True)
        c.c.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20})
        c.c.increment_flow_control_window(1 << 20)
        c.flush()

        def whole(cl):
            b = cl.data.get(1, b"")
            return len(b) >= 5 and len(b) >= 5 + int.from_bytes(b[1:5], "big")

        c.pump(whole, timeout=60, chunk=1024, delay=0.002, ping=True)
        assert whole(c), len(c.data.get(1, b""))
        (snap,) = [pb.ListAndWatchResponse.FromString(m) for m in K.messages(c.data[1])]
        assert ids(snap) == [str(i) for i in range(10000)]
        assert c.of(1, c.h2.ResponseReceived)[0].headers == OK_HEADERS
        assert not c.ended(1)
        assert c.of(0, c.h2.PingAckReceived)

        req = pb.AllocateRequest(container_requests=[
            pb.ContainerAllocateRequest(devices_ids=["9999", "17", "3"]),
            pb.ContainerAllocateRequest(devices_ids=["3"])])
        c.send(3, "/v1beta1.DevicePlugin/Allocate", req.SerializeToString())
        c.send(5, "/v1beta1.DevicePlugin/GetDevicePluginOptions", b"", split=True)
        for sid in (3, 5):
            hs, msgs, ts = c.response(sid)
            assert hs == OK_HEADERS and ts == OK_TRAILERS and len(msgs) == 1
            assert_no_data_end_stream(c, sid)
        resp = pb.AllocateResponse.FromString(K.messages(c.data[3])[0])
        assert len(resp.container_responses) == 2
        assert specs(resp, 0) == specs(resp, 1) and specs(resp, 0)
        assert not c.ended(1)
        assert_no_data_end_stream(c, 1)
    finally:
        c.close()
    d.wait_log("event=stream-closed")
    assert d.stop() == 0


def test_wire_list_and_watch_never_half_closed(env):
    """A client that sends the request message without END_STREAM (and never half-closes)
    still gets the first snapshot at once; a deadline-less GetDevicePluginOptions on another
    connection is answered meanwhile; a SIGHUP with no change sends nothing."""
    d, sock = raw_daemon(env)
    pb, _ = K.protos()
    a = K.RawClient(sock)
    b = K.RawClient(sock)
    try:
        a.send(1, "/v1beta1.DevicePlugin/ListAndWatch", b"", end=False)
        a.pump(lambda cl: cl.data.get(1), timeout=10)
        (snap,) = [pb.ListAndWatchResponse.FromString(m) for m in K.messages(a.data[1])]
        assert ids(snap) == ["0", "1", "2"]
        b.send(1, "/v1beta1.DevicePlugin/GetDevicePluginOptions", b"")
        hs, msgs, ts = b.response(1)
        assert hs == OK_HEADERS and ts == OK_TRAILERS and msgs == [b""]
        mark = d.mark()
        d.signal(signal.SIGHUP)
        d.wait_log("event=config-reloaded", start=mark)
        a.pump(timeout=0.5)
        assert len(K.messages(a.data[1])) == 1 and not a.ended(1)
    finally:
        a.close()
        b.close()
    assert d.stop() == 0


def test_wire_grpc_timeout_on_list_and_watch(env):
    """A deadline on a stream is the client's choice: the snapshot, then DEADLINE_EXCEEDED in
    trailers (never END_STREAM on DATA), then RST_STREAM(NO_ERROR) as the client had not
    half-closed."""
    d, sock = raw_daemon(env)
    c = K.RawClient(sock)
    try:
        c.send(1, "/v1beta1.DevicePlugin/ListAndWatch", b"", end=False,
               extra=[("grpc-timeout", "200m")])
        hs, msgs, ts = c.response(1)
        assert hs == OK_HEADERS and len(msgs) == 1
        assert ts == [("grpc-status", "4"), ("grpc-message", "context deadline exceeded")]
        assert_no_data_end_stream(c, 1)
        c.pump(lambda cl: cl.of(1, cl.h2.StreamReset), timeout=5)
        assert [e.error_code for e in c.of(1, c.h2.StreamReset)] == [0]
    finally:
        c.close()
    d.wait_log("event=stream-closed")
    assert d.stop() == 0
