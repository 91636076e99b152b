# SPDX-License-Identifier: MIT
"""rdma-dp health, the DaemonSet's liveness probe, checks what the daemon serves (the status it
publishes in <socket dir>/.rdma-dp/status.json), never the config on disk.

Issue 8, item 5: a valid ConfigMap edit that adds or renames a resource made the probe fail on
every node at once (it read the new config and looked for sockets the daemon had not created),
so every node restarted together. Here: valid edits (add, rename, remove) and an invalid one,
before and after the daemon reloads them, leave the probe green; a wedged daemon (SIGSTOP), a
killed one (its sockets refuse) and sockets gone make it fail within its timeout."""
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402,F401
from test_serve import env  # noqa: E402,F401


def seed_resource(name, hca_max=10, ifname="ib0"):
    return {"resourceName": name, "rdmaHcaMax": hca_max, "selectors": {"ifNames": [ifname]}}


def status_path(root, mode):
    sub = "device-plugins" if mode == "kubelet-sock" else "plugins_registry"
    return pathlib.Path(root) / sub / ".rdma-dp" / "status.json"


def read_status(root, mode):
    return json.loads(status_path(root, mode).read_text())


def health(run, root, *extra, config=None, timeout_ms=2000):
    args = ["health", "--kubelet-root-dir", root, "--timeout-ms", str(timeout_ms), *extra]
    if config is not None:
        args += ["--config-file", config]
    return run(*args)


def assert_green(p, names):
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert p.stdout.startswith("ok: %d resource%s answer%s (%s)" % (
        len(names), "" if len(names) == 1 else "s", "s" if len(names) == 1 else "",
        ", ".join(names))), p.stdout
    assert p.stderr == ""


def wait_status(root, mode, names, serving=True, timeout=30):
    """Waits until the published status lists exactly names (all serving); returns it."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = read_status(root, mode)
        except (FileNotFoundError, ValueError):
            last = None
        if last is not None and [r["name"] for r in last["resources"]] == names and \
                all(r["serving"] == serving for r in last["resources"]):
            return last
        time.sleep(0.05)
    raise TimeoutError("status never listed %r: %r" % (names, last))


@pytest.mark.parametrize("mode", ["kubelet-sock", "plugins-registry"])
def test_config_edits_leave_the_probe_green(env, run, mode):  # noqa: F811
    kl = env.start_kubelet(mode=mode)
    cfg = env.config({"periodicUpdateInterval": 0,
                      "configList": [seed_resource("a"), seed_resource("b")]})
    d = env.daemon(cfg, registration=mode)
    kl.wait_registered("rdma/a")
    kl.wait_registered("rdma/b")
    st = wait_status(env.root, mode, ["rdma/a", "rdma/b"])
    assert st["pid"] == d.pid and st["mode"] == mode
    sock_dir = status_path(env.root, mode).parent.parent
    assert {r["socket"] for r in st["resources"]} == {str(sock_dir / "a.sock"),
                                                      str(sock_dir / "b.sock")}
    for args in ([], ["--registration", mode]):
        assert_green(health(run, env.root, *args, config=cfg), ["rdma/a", "rdma/b"])

    # A valid edit: b renamed to b2, c added. On disk only: the daemon has not loaded it, the
    # probe (which used to read this file and look for b2.sock and c.sock) stays green.
    env.config({"periodicUpdateInterval": 0,
                "configList": [seed_resource("a"), seed_resource("b2"), seed_resource("c")]})
    assert_green(health(run, env.root, config=cfg), ["rdma/a", "rdma/b"])
    # Applied: green all along, then listing the new set.
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=config-reloaded", "added=2", "removed=1", "kept=1", start=m)
    p = health(run, env.root, config=cfg)
    assert p.returncode == 0, p.stderr
    kl.wait_registered("rdma/b2")
    kl.wait_registered("rdma/c")
    wait_status(env.root, mode, ["rdma/a", "rdma/b2", "rdma/c"])
    assert_green(health(run, env.root, config=cfg), ["rdma/a", "rdma/b2", "rdma/c"])

    # A valid edit that removes resources.
    env.config({"periodicUpdateInterval": 0, "configList": [seed_resource("c")]})
    assert_green(health(run, env.root), ["rdma/a", "rdma/b2", "rdma/c"])
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=config-reloaded", "added=0", "removed=2", "kept=1", start=m)
    assert health(run, env.root).returncode == 0
    wait_status(env.root, mode, ["rdma/c"])
    assert_green(health(run, env.root), ["rdma/c"])

    # An invalid edit: the daemon keeps its last valid config, the probe stays green.
    cfg.write_text('{"configList": [{"resourceName": "x", "devics": []}]}\n')
    assert_green(health(run, env.root, config=cfg), ["rdma/c"])
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=config-rejected", start=m)
    assert_green(health(run, env.root, config=cfg), ["rdma/c"])
    # even with the config gone
    cfg.unlink()
    assert_green(health(run, env.root, config=cfg), ["rdma/c"])

    # A wedged daemon: the sockets exist, nobody answers. Fails within its timeout.
    d.signal(signal.SIGSTOP)
    try:
        t = time.monotonic()
        p = health(run, env.root, timeout_ms=500)
        took = time.monotonic() - t
    finally:
        d.signal(signal.SIGCONT)
    assert p.returncode == 1, p.stdout
    assert p.stderr.startswith("rdma-dp health: rdma/c: %s: DEADLINE_EXCEEDED" %
                               (sock_dir / "c.sock")), p.stderr
    assert "(daemon pid %d " % d.pid in p.stderr
    assert took < 3, took
    assert_green(health(run, env.root), ["rdma/c"])

    # Its socket gone while it is wedged: fails at once, saying so.
    d.signal(signal.SIGSTOP)
    try:
        os.unlink(sock_dir / "c.sock")
        p = health(run, env.root, timeout_ms=500)
    finally:
        d.signal(signal.SIGCONT)
    assert p.returncode == 1
    assert "the socket the daemon serves is gone" in p.stderr, p.stderr
    # awake, the daemon re-creates it (inotify) and the probe is green again
    deadline = time.monotonic() + 30
    while health(run, env.root).returncode != 0:
        assert time.monotonic() < deadline, health(run, env.root).stderr
        time.sleep(0.1)

    # A stopped daemon takes its status with it.
    assert d.stop() == 0
    assert not status_path(env.root, mode).exists()
    p = health(run, env.root)
    assert p.returncode == 1 and "no status.json in" in p.stderr, p.stderr


def test_killed_daemon_fails_the_probe(env, run):  # noqa: F811
    """SIGKILL leaves the socket files and the status behind: they refuse connections."""
    kl = env.start_kubelet()
    cfg = env.config({"configList": [seed_resource("a")]})
    d = env.daemon(cfg)
    kl.wait_registered("rdma/a")
    wait_status(env.root, "kubelet-sock", ["rdma/a"])
    assert_green(health(run, env.root), ["rdma/a"])
    d.kill()
    p = health(run, env.root)
    assert p.returncode == 1
    assert p.stderr.startswith("rdma-dp health: rdma/a: %s/device-plugins/a.sock: " %
                               env.root), p.stderr
    assert "Connection refused" in p.stderr, p.stderr


def test_probe_without_a_daemon(run, tmp_path):
    root = pathlib.Path(str(tmp_path))
    # nothing published
    p = health(run, root)
    assert p.returncode == 1
    assert p.stderr == ("rdma-dp health: no status.json in %s/{device-plugins,plugins_registry}"
                        "/.rdma-dp: rdma-dp serve has not published what it serves (not "
                        "started yet, or another --kubelet-root-dir / --registration)\n" % root)
    p = health(run, root, "--registration", "plugins-registry")
    assert p.returncode == 1 and "no status.json in %s/plugins_registry/.rdma-dp" % root \
        in p.stderr
    # a torn or foreign status file: a clear failure
    sp = status_path(root, "kubelet-sock")
    sp.parent.mkdir(parents=True)
    sp.write_text('{"format": 1, "pid": ')
    p = health(run, root)
    assert p.returncode == 1
    assert p.stderr.startswith("rdma-dp health: %s: not JSON: " % sp), p.stderr
    sp.write_text('{"format": 9}')
    p = health(run, root)
    assert p.returncode == 1 and "format 9, this rdma-dp reads format 1" in p.stderr
    # a status whose socket is a file nobody listens on (a daemon killed with SIGKILL)
    sock = root / "device-plugins" / "a.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    s.close()
    sp.write_text(json.dumps({"format": 1, "pid": 1, "generation": 3, "mode": "kubelet-sock",
                              "resources": [{"name": "rdma/a", "socket": str(sock),
                                             "serving": True},
                                            {"name": "rdma/b", "socket": str(sock) + "x",
                                             "serving": False}]}))
    p = health(run, root)
    assert p.returncode == 1
    assert p.stderr == ("rdma-dp health: rdma/a: %s: Connection refused (daemon pid 1 "
                        "generation 3)\n" % sock), p.stderr
    # nothing serving yet (waiting for its directory, say): not a liveness failure
    sp.write_text(json.dumps({"format": 1, "pid": 1, "generation": 4, "mode": "kubelet-sock",
                              "resources": [{"name": "rdma/b", "socket": str(sock) + "x",
                                             "serving": False}]}))
    p = health(run, root)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "ok: 0 resources answer (), 1 not started yet; pid 1 generation 4\n"


def test_auto_mode_reads_the_newer_status(env, run):  # noqa: F811
    """A daemon killed in one mode and started in the other leaves an old status behind: auto
    takes the newer file."""
    kl = env.start_kubelet(mode="plugins-registry")
    stale = status_path(env.root, "kubelet-sock")
    stale.parent.mkdir(parents=True)
    stale.write_text(json.dumps({
        "format": 1, "pid": 1, "generation": 1, "mode": "kubelet-sock",
        "resources": [{"name": "rdma/gone", "socket": str(env.root / "device-plugins/g.sock"),
                       "serving": True}]}))
    old = time.time() - 60
    os.utime(stale, (old, old))
    cfg = env.config({"configList": [seed_resource("a")]})
    env.daemon(cfg, registration="plugins-registry")
    kl.wait_registered("rdma/a")
    wait_status(env.root, "plugins-registry", ["rdma/a"])
    assert_green(health(run, env.root), ["rdma/a"])
    p = health(run, env.root, "--registration", "kubelet-sock")
    assert p.returncode == 1 and "rdma/gone" in p.stderr


def test_help_says_the_config_is_not_read(run):
    p = run("health", "--help")
    assert p.returncode == 0
    assert "accepted for compatibility, ignored" in p.stdout
    assert "status.json" in p.stdout


def test_probe_is_not_fooled_by_a_second_reader(env, run):  # noqa: F811
    """Probes while the daemon reloads in a loop: never a failure (the status is replaced
    atomically; a socket removed a moment before the new status is re-checked)."""
    kl = env.start_kubelet()
    cfgs = [{"periodicUpdateInterval": 0, "configList": [seed_resource("a"),
                                                         seed_resource("b")]},
            {"periodicUpdateInterval": 0, "configList": [seed_resource("a"),
                                                         seed_resource("c")]}]
    cfg = env.config(cfgs[0])
    d = env.daemon(cfg, verbose=False)
    kl.wait_registered("rdma/b")
    failures = []
    for i in range(20):
        env.config(cfgs[(i + 1) % 2])
        d.signal(signal.SIGHUP)
        p = subprocess.run([str(env.binary), "health", "--kubelet-root-dir", str(env.root)],
                           capture_output=True, text=True, timeout=30)
        if p.returncode != 0:
            failures.append(p.stderr)
        time.sleep(0.02)
    assert failures == []
