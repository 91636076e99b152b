# SPDX-License-Identifier: MIT
"""The fake kubelet made less kind (issue 8, item 10), against the real daemon:

  - a second plugin registering the same resource name disconnects the older client;
  - NotifyRegistrationStatus(registered=false) inside the real plugin-watcher handshake, with
    kubelet not retrying by itself (the plugin is in its actual state of world);
  - kubelet's root on the host differing from the path the plugin sees.

The daemon behaviours issue 8 asked for (re-registering when kubelet keeps no stream, a fresh
registration after registered=false, an empty GetInfo endpoint) are tested here too."""
import os
import pathlib
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402


def seed_config(path, names=("a",)):
    import json
    path.write_text(json.dumps({"periodicUpdateInterval": 0, "configList": [
        {"resourceName": n, "rdmaHcaMax": 10, "selectors": {"ifNames": ["ib0"]}}
        for n in names]}))
    return path


@pytest.fixture
def env(make_env):
    """kubelet.TestEnv without a kubelet: each test starts its own, with its realism."""
    return make_env(prefix="rdpkr", kubelet=False)


class Impostor:
    """Another device plugin (a second daemon, another vendor's plugin) serving a resource name
    of ours on its own socket, registered with kubelet.sock."""

    def __init__(self, sock, kubelet_sock, resource):
        pb, _ = K.protos()
        self.stop_ev = threading.Event()

        def options(req, ctx):
            return pb.DevicePluginOptions()

        def law(req, ctx):
            yield pb.ListAndWatchResponse(devices=[pb.Device(ID="x", health="Healthy")])
            while not self.stop_ev.wait(0.1) and ctx.is_active():
                pass

        self.server = K.serve_unix(sock, K.grpc_service("v1beta1.DevicePlugin", {
            "GetDevicePluginOptions": (options, pb.Empty, pb.DevicePluginOptions),
            "ListAndWatch": (law, pb.Empty, [pb.ListAndWatchResponse])}))
        ch = K.dial(kubelet_sock)
        K.stub(ch, "/v1beta1.Registration/Register", pb.RegisterRequest, pb.Empty)(
            pb.RegisterRequest(version="v1beta1", endpoint=pathlib.Path(sock).name,
                               resource_name=resource), timeout=30)
        ch.close()

    def stop(self):
        self.stop_ev.set()
        self.server.stop(None).wait(10)


def _duplicate(env):
    kl = env.start_kubelet()
    d = env.daemon(seed_config(env.dir / "c.json"))
    ours = kl.wait_registered("rdma/a", units=10)
    imp = Impostor(env.root / "device-plugins" / "impostor.sock", kl.kubelet_sock, "rdma/a")
    env.closers.append(imp.stop)
    # kubelet took the newer plugin and disconnected ours: the stream kubelet had is gone
    kl.wait(lambda: kl.current["rdma/a"] is not ours, what="the impostor's registration")
    ours.client.wait_snapshot(lambda s: True)
    with ours.client.cond:
        deadline = time.monotonic() + 10
        while ours.client.stream_error is None and time.monotonic() < deadline:
            ours.client.cond.wait(0.2)
    assert ours.client.stream_error is not None, "kubelet kept the older client's stream"
    assert d.proc.poll() is None
    return kl, d, imp


def test_duplicate_registration_disconnects_the_older_client(env):
    _duplicate(env)


def test_resource_left_without_stream_registers_again(env):
    kl, d, imp = _duplicate(env)
    n = len(kl.registrations)
    imp.stop()  # the other plugin goes: kubelet has no stream for rdma/a at all
    kl.wait_registered("rdma/a", units=10, after=n, timeout=20)


def test_registered_false_inside_the_watcher_handshake(env):
    kl = env.start_kubelet("plugins-registry", watcher_retry=True)
    kl.refuse = 1
    d = env.daemon(seed_config(env.dir / "c.json"), registration="plugins-registry")
    sock = str(env.root / "plugins_registry" / "a.sock")
    kl.wait(lambda: any(p == sock and not ok for p, ok, _ in kl.notified),
            what="registered=false")
    line = d.wait_log("event=register-failed", "mode=plugins-registry")
    assert "plugin registration failed with err: fake kubelet refuses" in line, line
    # kubelet itself does not retry: the plugin is in its actual state of world. (The daemon
    # re-announces its socket after a backoff of 1 s: test_registered_false_registers_again.)
    time.sleep(0.7)
    assert [ok for p, ok, _ in kl.notified if p == sock] == [False]
    assert "rdma/a" not in kl.current


def test_registered_false_registers_again(env):
    kl = env.start_kubelet("plugins-registry", watcher_retry=True)
    kl.refuse = 1
    env.daemon(seed_config(env.dir / "c.json"), registration="plugins-registry")
    kl.wait_registered("rdma/a", units=10, timeout=20)


def test_watcher_retries_a_failed_validation(env):
    """The fake's own realism, no daemon: a socket whose GetInfo fails validation is retried
    with backoff (the plugin is not in the actual state of world), and named in the error."""
    kl = env.start_kubelet("plugins-registry", watcher_retry=True)
    _, rpb = K.protos()
    calls = []

    def get_info(req, ctx):
        calls.append(time.monotonic())
        return rpb.PluginInfo(type="CSIPlugin", name="x", supported_versions=["v1"])

    def notify(req, ctx):
        return rpb.RegistrationStatusResponse()

    sock = env.root / "plugins_registry" / "csi.sock"
    server = K.serve_unix(sock, K.plugin_registration(get_info, notify), workers=2)
    env.closers.append(lambda: server.stop(None).wait(10))
    kl.wait(lambda: len(kl.notified) >= 3, timeout=10, what="three attempts")
    assert all(not ok and "no handler registered for plugin type: CSIPlugin at socket %s"
               % sock in err for _, ok, err in kl.notified)
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert gaps[0] >= 0.4 and gaps[1] >= 0.9, gaps  # 0.5 s, then 1 s


def _distinct_roots(env):
    """kubelet's root on the host (env.root) and the daemon's view of it: another path, a
    symlink to the same directory, that does not exist in kubelet's mount namespace."""
    view = env.dir / "container-view"
    view.symlink_to(env.root)
    return view


def test_distinct_roots_kubelet_sock(env):
    """kubelet-sock mode: Register's endpoint is a name relative to kubelet's own directory,
    so the daemon's view of the path does not matter."""
    view = _distinct_roots(env)
    kl = env.start_kubelet(hidden_roots=[view])
    env.daemon(seed_config(env.dir / "c.json"), kubelet_root=view)
    reg = kl.wait_registered("rdma/a", units=10)
    assert reg.endpoint == str(env.root / "device-plugins" / "a.sock")


def test_distinct_roots_hide_the_container_path(env):
    """The fake kubelet cannot dial a path under a hidden root, as real kubelet cannot dial a
    path that exists only in the container."""
    view = _distinct_roots(env)
    kl = K.FakeKubelet(env.root, hidden_roots=[view])
    with pytest.raises(FileNotFoundError, match="not in kubelet's mount namespace"):
        kl._connect("rdma/a", view / "plugins_registry" / "a.sock", "plugins-registry")


def test_distinct_roots_plugin_watcher(env):
    view = _distinct_roots(env)
    kl = env.start_kubelet("plugins-registry", hidden_roots=[view])
    env.daemon(seed_config(env.dir / "c.json"), registration="plugins-registry",
               kubelet_root=view)
    reg = kl.wait_registered("rdma/a", units=10, timeout=15)
    assert reg.endpoint == str(env.root / "plugins_registry" / "a.sock")
