"""Helpers of the real-kernel tests: the daemon on the real /sys and /dev driven by the
project's kubelet stand-in, and RDMA traffic in a mount namespace that holds only the device
nodes an Allocate answer named (a pod's view)."""
import json
import os
import shutil
import subprocess
import tempfile
import time
import pathlib

from conftest import sh, wait_for
import kubelet as kl

SERVER_IP = "10.77.0.2"  # vethB, rxe1


class Env:
    """A fake kubelet in a temp root and `rdma-dp serve` on the real node."""

    def __init__(self, binary, mode="kubelet-sock"):
        self.binary = binary
        self.dir = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="rdpk"))
        self.root = self.dir / "k"
        self.root.mkdir()
        self.kubelet = kl.FakeKubelet(self.root, mode=mode).start()
        self.mode = mode
        self.daemons = []

    def config(self, resources, periodic=300):
        p = self.dir / "config.json"
        p.write_text(json.dumps({"periodicUpdateInterval": periodic, "configList": resources}))
        return p

    def daemon(self, config, extra=()):
        reg = "kubelet-sock" if self.mode == "kubelet-sock" else "plugins-registry"
        d = kl.Daemon(self.binary, config=config, sysfs="/sys", dev="/dev",
                      kubelet_root=self.root, registration=reg, verbose=True, extra=extra)
        self.daemons.append(d)
        return d

    def close(self):
        for d in self.daemons:
            if d.proc.poll() is None:
                try:
                    d.stop(30)
                except Exception:  # noqa: BLE001
                    d.kill()
        self.kubelet.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def answer_nodes(resp):
    """[(container_path, host_path)] of the first container's answer."""
    return [(d.container_path, d.host_path) for d in resp.container_responses[0].devices]


def pod_cmd(nodes, cmd):
    """argv running cmd in a new mount namespace whose /dev/infiniband is a tmpfs holding
    exactly `nodes` ([(container_path, host_path)]), made with mknod from the host's numbers."""
    mk = []
    for cpath, hpath in nodes:
        st = os.stat(hpath)
        mk.append("mknod -m 666 %s c %d %d" % (cpath, os.major(st.st_rdev), os.minor(st.st_rdev)))
    script = "set -e; mount -t tmpfs -o mode=755 none /dev/infiniband; %s; exec \"$@\"" % (
        "; ".join(mk) if mk else "true")
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "pod", *cmd]


def listening(port):
    return str(port) in sh("ss", "-Hltn", "sport = :%d" % port).stdout


def traffic(server_nodes, client_nodes, tool, port, timeout=90):
    """Runs tool's server on rxe1 and its client on rxe0, each in its own pod view; returns
    (server CompletedProcess-like (rc, out), client (rc, out))."""
    common = {
        "pingpong": ["ibv_rc_pingpong", "-g", "1", "-n", "20", "-s", "4096"],
        "write_bw": ["ib_write_bw", "-x", "1", "-s", "4096", "-n", "100", "-F"],
        "write_bw_cm": ["ib_write_bw", "-R", "-s", "4096", "-n", "100", "-F"],
    }[tool] + ["-p", str(port)]
    srv = subprocess.Popen(pod_cmd(server_nodes, common + ["-d", "rxe1"]),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        t = time.monotonic() + 30
        while time.monotonic() < t and srv.poll() is None and not listening(port):
            time.sleep(0.1)
        if srv.poll() is not None:
            return (srv.returncode, srv.stdout.read()), (None, "server exited first")
        cli = subprocess.run(pod_cmd(client_nodes, common + ["-d", "rxe0", SERVER_IP]),
                             capture_output=True, text=True, timeout=timeout)
        out, _ = srv.communicate(timeout=timeout)
        return (srv.returncode, out), (cli.returncode, cli.stdout + cli.stderr)
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait(10)
