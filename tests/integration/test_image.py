# SPDX-License-Identifier: MIT
"""The container image (Containerfile), built with buildah and run with podman the way the
DaemonSet of deploy/base runs it.

The test builds its own image from the binary under test (scripts/build-image.sh, under a
second), so it never runs a stale build/rdma-dp-image.tar. podman gets a private vfs storage
root in a temp dir, so nothing is left in /var/lib/containers.

The container is started with what the DaemonSet asks of the runtime: read-only root
filesystem (and no tmpfs added), every capability dropped, no-new-privileges, unprivileged,
no network (rdma-dp opens no port; the DaemonSet's hostNetwork is about what sysfs shows,
which here is a fixture tree), explicit ulimits (needed on these machines), runc. Its args,
volume mounts and liveness command are read from deploy/base/daemonset.yaml; the only
addition is --sysfs-root, pointing at the fixture node instead of the host's /sys. The
Python fake kubelet (kubelet.py) serves kubelet.sock on the host side of the bind mount.

Skips, saying why, when buildah/podman/runc are missing, when the binary is a sanitizer build
(dynamic, cannot go FROM scratch), or when podman cannot start any container here.

At the end, `rdma-dp health` (the DaemonSet's probe) on its own, against the real daemon and
the fake kubelet without a container: these run everywhere, also under the sanitizers.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid

import grpc
import pytest
import yaml

import kubelet as K

REPO = pathlib.Path(__file__).resolve().parents[2]
MiB = 1024 * 1024
RESOURCE = "rdma/hca_shared_devices_a"
SEED000_DEVICES = ["/dev/infiniband/issm0", "/dev/infiniband/rdma_cm",
                   "/dev/infiniband/umad0", "/dev/infiniband/uverbs0"]



def _need(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip("%s not installed (scripts/install-deps.sh installs buildah, podman and "
                    "runc)" % ", ".join(missing))


def _run(args, timeout=120, check=True):
    p = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError("%s -> %d\nstdout: %s\nstderr: %s" % (
            " ".join(map(str, args)), p.returncode, p.stdout, p.stderr))
    return p


@pytest.fixture(scope="module")
def image(rdma_dp, tmp_path_factory):
    """Builds the image from the binary under test: {'tar', 'report'}."""
    if K.sanitized():
        pytest.skip("sanitizer build: the binary is dynamic and cannot go into the FROM "
                    "scratch image (the release pass of make check runs the image tests)")
    _need("buildah")
    out = tmp_path_factory.mktemp("image") / "rdma-dp-image.tar"
    p = _run(["sh", str(REPO / "scripts" / "build-image.sh"), str(rdma_dp), str(out)])
    return {"tar": out, "report": p.stdout}


def _oci(tar_path):
    """(config, manifest, [(name, size, mode, type)] of the layers) of an OCI archive."""
    with tarfile.open(tar_path) as t:
        def blob(digest):
            return t.extractfile("blobs/sha256/" + digest.split(":", 1)[1])

        index = json.load(t.extractfile("index.json"))
        assert len(index["manifests"]) == 1
        manifest = json.load(blob(index["manifests"][0]["digest"]))
        config = json.load(blob(manifest["config"]["digest"]))
        files = []
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r:*") as lt:
                files += [(m.name, m.size, m.mode, m.type) for m in lt.getmembers()]
    return config, manifest, files


def _oci_links(tar_path):
    """{name: target} of the hard links in the layers of an OCI archive."""
    links = {}
    with tarfile.open(tar_path) as t:
        def blob(digest):
            return t.extractfile("blobs/sha256/" + digest.split(":", 1)[1])

        index = json.load(t.extractfile("index.json"))
        manifest = json.load(blob(index["manifests"][0]["digest"]))
        for layer in manifest["layers"]:
            with tarfile.open(fileobj=blob(layer["digest"]), mode="r:*") as lt:
                links.update({m.name.lstrip("./"): m.linkname.lstrip("./")
                              for m in lt.getmembers() if m.type == tarfile.LNKTYPE})
    return links


def test_image_holds_only_the_binary_and_the_notice(image):
    config, manifest, files = _oci(image["tar"])
    assert config["config"]["Entrypoint"] == ["/rdma-dp"]
    assert config["config"]["Cmd"] == ["serve"]
    assert config["os"] == "linux"
    regular = {n.lstrip("./"): (size, mode) for n, size, mode, typ in files
               if typ == tarfile.REGTYPE}
    # The Go plugin's command (network-operator runs it) is a hard link to /rdma-dp: one
    # file, two names. The tar holds the file under one name, the link under the other.
    links = _oci_links(image["tar"])
    names = {"rdma-dp", "bin/k8s-rdma-shared-dp"}
    assert len(links) == 1 and set(links.items()) <= {
        ("rdma-dp", "bin/k8s-rdma-shared-dp"), ("bin/k8s-rdma-shared-dp", "rdma-dp")}, links
    (link, target), = links.items()
    assert target in regular and link not in regular
    regular["rdma-dp"] = regular.pop(target)
    assert set(regular) == {
        "rdma-dp", "usr/share/doc/rdma-dp/NOTICE",
        "usr/share/doc/rdma-dp/licenses/LGPL-2.1",
        "usr/share/doc/rdma-dp/licenses/libc6.copyright",
        "usr/share/doc/rdma-dp/licenses/nghttp2.copyright",
        "usr/share/doc/rdma-dp/licenses/protobuf-c.copyright",
        "usr/share/doc/rdma-dp/licenses/jansson.copyright",
        "usr/share/doc/rdma-dp/licenses/mbedtls.copyright",
        "usr/share/doc/rdma-dp/licenses/Apache-2.0"}, regular
    assert regular["rdma-dp"][1] & 0o111, "the binary is not executable"
    # no shell, no symlinks, no devices: only directories besides the regular files and that
    # one hard link
    assert all(typ in (tarfile.REGTYPE, tarfile.DIRTYPE) for n, _, _, typ in files
               if n.lstrip("./") not in names), files
    # A guard against a stray file or a dynamic build, not a size goal (README: Figures): the
    # binary is ~1.5 MB stripped since the doctor's checks (their texts) and CDI landed, ~2.2 MB
    # since mbedTLS (the API-server client, kube-tls.c) did.
    content = sum(size for size, _ in regular.values())
    assert content <= 3 * MiB, "image content %d bytes > 3 MiB" % content
    assert os.path.getsize(image["tar"]) <= 3 * MiB
    # reproducible: files and config carry the fixed --timestamp 0 date
    assert config["created"].startswith("1970-01-01")
    print(image["report"])


def _daemonset():
    docs = list(yaml.safe_load_all((REPO / "deploy/base/daemonset.yaml").read_text()))
    ds = [d for d in docs if d and d.get("kind") == "DaemonSet"][0]
    return ds["spec"]["template"]["spec"]


def _base_config():
    cm = yaml.safe_load((REPO / "deploy/base/configmap.yaml").read_text())
    return cm["data"]["config.json"]


class Podman:
    def __init__(self, root):
        self.base = ["podman", "--root", str(root / "storage"), "--runroot", str(root / "run"),
                     "--storage-driver", "vfs"]

    def __call__(self, *args, timeout=120, check=True):
        return _run(self.base + list(args), timeout=timeout, check=check)


# What the DaemonSet runtime is asked for (deploy/base/daemonset.yaml securityContext).
RUN_FLAGS = ["--runtime", "runc", "--read-only", "--read-only-tmpfs=false",
             "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
             "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=64:64", "--network", "none",
             "--user", "0:0"]
RUNTIME_TROUBLE = ("oci runtime", "runc", "cgroup", "namespace", "permission denied",
                   "operation not permitted", "mount", "crun", "conmon", "netns")


@pytest.fixture(scope="module")
def podman(image, tmp_path_factory):
    _need("podman", "runc")
    pm = Podman(tmp_path_factory.mktemp("podman"))
    p = pm("load", "-q", "-i", str(image["tar"]), check=False)
    if p.returncode != 0:
        pytest.skip("podman cannot load images here: %s" % (p.stderr.strip() or p.stdout))
    tag = [ln.split(":", 1)[1].strip() for ln in p.stdout.splitlines()
           if ln.startswith("Loaded image")][0]
    # Can this machine run a container at all? The image's own binary is the probe.
    p = pm("run", "--rm", *RUN_FLAGS, tag, "--version", check=False, timeout=60)
    if p.returncode != 0:
        err = (p.stderr + p.stdout).strip()
        if any(w in err.lower() for w in RUNTIME_TROUBLE):
            pytest.skip("podman cannot run a container on this machine: %s" % err[-400:])
        raise AssertionError("the image does not run: rc=%d %s" % (p.returncode, err))
    assert p.stdout.startswith("rdma-dp "), p.stdout
    pm.tag = tag
    yield pm
    pm("rmi", "-a", "-f", check=False)


def _run_like_daemonset(pm, fixtures_dir, kroot, cfgdir, node="seed000", with_dev=True):
    """podman run with the DaemonSet's args and mounts; returns the container name."""
    spec = _daemonset()
    c = spec["containers"][0]
    sources = {
        "device-plugins": kroot / "device-plugins",
        "plugins-registry": kroot / "plugins_registry",
        "host-dev": fixtures_dir / node / "dev",
        "config": cfgdir,
    }
    vols = {v["name"]: v for v in spec["volumes"]}
    assert set(vols) == set(sources), "a volume was added to the DaemonSet: mount it here too"
    mounts = []
    for m in c["volumeMounts"]:
        if m["name"] == "host-dev" and not with_dev:
            continue
        mounts += ["-v", "%s:%s:%s" % (sources[m["name"]], m["mountPath"],
                                       "ro" if m.get("readOnly") else "rw")]
    name = "rdma-dp-test-" + uuid.uuid4().hex[:8]
    args = list(c["args"]) + ["--sysfs-root=/host/sys"]
    if not with_dev:  # no hostPath: the daemon can only look at the container's own /dev
        args = [a for a in args if not a.startswith("--dev-root")]
    pm("run", "-d", "--name", name, *RUN_FLAGS, *mounts,
       "-v", "%s:/host/sys:ro" % (fixtures_dir / node / "sys"), pm.tag, *args)
    return name


def _logs(pm, name):
    p = pm("logs", name, check=False)
    return p.stdout + p.stderr


@pytest.fixture
def node_env():
    # short paths: the host side dials <root>/device-plugins/<name>.sock (sun_path: 108 bytes)
    tmp = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="rdpimg"))
    kroot = tmp / "kubelet"
    cfgdir = tmp / "config"
    cfgdir.mkdir()
    (cfgdir / "config.json").write_text(_base_config())
    # A node's kubelet has plugins_registry: the DaemonSet's `--registration auto` then takes
    # the plugin watcher, as k8s-rdma-shared-dev-plugin does (issue 22).
    kl = K.FakeKubelet(kroot, mode="plugins-registry").start()
    yield kl, kroot, cfgdir
    kl.stop()
    shutil.rmtree(tmp, ignore_errors=True)


def test_container_registers_and_serves_allocate(podman, fixtures_dir, node_env):
    kl, kroot, cfgdir = node_env
    name = _run_like_daemonset(podman, fixtures_dir, kroot, cfgdir)
    try:
        try:
            reg = kl.wait_registered(RESOURCE, units=200, healthy=200, timeout=30)
        except TimeoutError as e:
            raise AssertionError("%s\ncontainer log:\n%s" % (e, _logs(podman, name)))
        assert reg.endpoint == str(kroot / "plugins_registry" / "hca_shared_devices_a.sock")
        resp = reg.client.allocate(["0"], ["7", "199"])
        for cr in resp.container_responses:
            assert [d.host_path for d in cr.devices] == SEED000_DEVICES
            assert all(d.container_path == d.host_path and d.permissions == "rwm"
                       for d in cr.devices)

        # The probes, exactly as the DaemonSet defines them: httpGet of 127.0.0.1:9471 (the
        # probe listener; a named port would be the container's), here from inside the
        # container's network namespace (it runs with --network none; kubelet's prober runs in
        # the node's network namespace, which a hostNetwork pod shares).
        dsc = _daemonset()["containers"][0]
        ports = {p["name"]: p["containerPort"] for p in dsc["ports"]}
        pid = podman("inspect", name, "--format", "{{.State.Pid}}").stdout.strip()
        fetch = ("import sys, urllib.request\n"
                 "r = urllib.request.urlopen(sys.argv[1], timeout=5)\n"
                 "print(r.status, r.read().decode().strip())")
        for probe in ("livenessProbe", "readinessProbe"):
            hg = dsc[probe]["httpGet"]
            port = hg["port"] if isinstance(hg["port"], int) else ports[hg["port"]]
            url = "http://%s:%d%s" % (hg.get("host", "127.0.0.1"), port, hg["path"])
            deadline = time.monotonic() + 15
            while True:  # readiness follows the registration by a moment
                p = subprocess.run(["nsenter", "-t", pid, "-n", sys.executable, "-c", fetch,
                                    url], capture_output=True, text=True, timeout=30)
                if p.returncode == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert p.returncode == 0, (probe, url, p.stdout + p.stderr)
            assert p.stdout.startswith("200 ok: 1 resources, 1 registered"), (probe, p.stdout)
        # `rdma-dp health`, the exec probe for those who keep it (exec of the binary: no shell)
        p = podman("exec", name, "/rdma-dp", "health", "--timeout-ms=3000", check=False)
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.startswith("ok: 1 resource answers (%s)" % RESOURCE)

        # Read-only root filesystem and no capabilities, as seen from inside.
        st = podman("inspect", name, "--format",
                    "{{.HostConfig.ReadonlyRootfs}} {{.EffectiveCaps}}").stdout.split()
        assert st[0] == "true" and st[1] in ("[]", "<no", "map[]"), st
    finally:
        podman("stop", "-t", "10", name, check=False)
        code = podman("inspect", name, "--format", "{{.State.ExitCode}}",
                      check=False).stdout.strip()
        log = _logs(podman, name)
        podman("rm", "-f", name, check=False)
    assert code == "0", log
    assert "event=stopped code=0" in log, log
    # SIGTERM removed its socket, and only its own
    assert not (kroot / "plugins_registry" / "hca_shared_devices_a.sock").exists()
    assert (kroot / "device-plugins" / "kubelet_internal_checkpoint").exists()


def test_without_dev_infiniband_pods_would_get_no_devices(podman, fixtures_dir, node_env):
    """The measured reason for the DaemonSet's read-only host /dev: without it (and so with the
    default --dev-root=/dev, the container's own /dev) no device is usable. The pool registers
    Unhealthy units, the daemon says why, and Allocate refuses rather than handing pods
    nothing (issue 8)."""
    kl, kroot, cfgdir = node_env
    name = _run_like_daemonset(podman, fixtures_dir, kroot, cfgdir, with_dev=False)
    try:
        try:
            reg = kl.wait_registered(RESOURCE, units=200, healthy=0, timeout=30)
        except TimeoutError as e:
            raise AssertionError("%s\ncontainer log:\n%s" % (e, _logs(podman, name)))
        with pytest.raises(grpc.RpcError) as ei:
            reg.client.allocate(["0"])
        assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "mlx5_0: /dev/infiniband/uverbs0 missing" in ei.value.details()
        log = _logs(podman, name)
        assert "specs=0" in log, log
        assert "event=device-unusable" in log and "event=pool-unusable" in log, log
    finally:
        podman("rm", "-f", "-t", "10", name, check=False)


# ---- rdma-dp health, the liveness probe, without a container ------------------------------------
DGX_RESOURCES = ["rdma/compute_ib", "rdma/storage_roce", "rdma/compute_ib_numa0",
                 "rdma/compute_ib_numa1"]


@pytest.fixture
def short_root():
    tmp = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="rdphl"))
    yield tmp
    shutil.rmtree(tmp, ignore_errors=True)


def _health(run, root, config, *extra):
    return run("health", "--kubelet-root-dir", root, "--config-file", config, *extra)


def test_health_usage_errors(run):
    for args in (["--timeout-ms", "0"], ["--timeout-ms", "-5"], ["--timeout-ms", "x"],
                 ["--registration", "bogus"], ["--kubelet-root-dir", ""], ["extra"],
                 ["--nope"]):
        p = run("health", *args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert p.stderr.startswith("rdma-dp "), p.stderr
    p = run("health", "--help")
    assert p.returncode == 0 and "GetDevicePluginOptions" in p.stdout


def test_health_invalid_config_is_not_a_liveness_failure(run, short_root):
    """The probe never reads the config (issue 8, item 5; tests/integration/test_health.py
    has the daemon side): an invalid, a valid and a missing config give the same answer."""
    outs = set()
    for cfg in (REPO / "tests/fixtures/configs/invalid/typo-devics.json",
                REPO / "tests/fixtures/configs/dgx.json", short_root / "missing.json"):
        p = _health(run, short_root, cfg)
        outs.add((p.returncode, p.stdout, p.stderr))
    assert len(outs) == 1, outs
    assert "devics" not in repr(outs)


def test_health_without_daemon(run, short_root):
    cfg = REPO / "tests/fixtures/configs/dgx.json"
    p = _health(run, short_root, cfg)
    assert p.returncode == 1
    assert p.stderr == ("rdma-dp health: no status.json in %s/{device-plugins,plugins_registry}"
                        "/.rdma-dp: rdma-dp serve has not published what it serves (not "
                        "started yet, or another --kubelet-root-dir / --registration)\n"
                        % short_root)
    # a socket file nobody listens on any more (a daemon killed with SIGKILL), its status left
    import json
    import socket
    (short_root / "device-plugins" / ".rdma-dp").mkdir(parents=True)
    sock = short_root / "device-plugins" / "compute_ib.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(sock))
    s.close()
    (short_root / "device-plugins" / ".rdma-dp" / "status.json").write_text(json.dumps(
        {"format": 1, "pid": 7, "generation": 1, "mode": "kubelet-sock",
         "resources": [{"name": "rdma/compute_ib", "socket": str(sock), "serving": True}]}))
    p = _health(run, short_root, cfg, "--registration", "kubelet-sock")
    assert p.returncode == 1
    assert p.stderr.startswith("rdma-dp health: rdma/compute_ib: %s/device-plugins/"
                               "compute_ib.sock: Connection refused" % short_root), p.stderr


@pytest.mark.parametrize("mode", ["kubelet-sock", "plugins-registry"])
def test_health_against_the_daemon(rdma_dp, run, fixtures_dir, short_root, mode):
    cfg = REPO / "tests/fixtures/configs/dgx.json"
    kl = K.FakeKubelet(short_root, mode=mode).start()
    d = K.Daemon(rdma_dp, config=cfg, sysfs=fixtures_dir / "dgx-h100" / "sys",
                 dev=fixtures_dir / "dgx-h100" / "dev", kubelet_root=short_root,
                 registration=mode)
    try:
        for r in DGX_RESOURCES:
            kl.wait_registered(r, timeout=30)
        for args in ([], ["--registration", mode]):
            p = _health(run, short_root, cfg, *args)
            assert p.returncode == 0, p.stderr
            assert p.stdout.startswith("ok: 4 resources answer (%s); pid %d generation " % (
                ", ".join(DGX_RESOURCES), d.pid)), p.stdout
        other = "kubelet-sock" if mode == "plugins-registry" else "plugins-registry"
        p = _health(run, short_root, cfg, "--registration", other)
        assert p.returncode == 1 and "no status.json in" in p.stderr
        # a hung daemon: the sockets exist, nobody answers
        d.signal(signal.SIGSTOP)
        try:
            t = time.monotonic()
            p = _health(run, short_root, cfg, "--timeout-ms", "300")
            took = time.monotonic() - t
        finally:
            d.signal(signal.SIGCONT)
        assert p.returncode == 1
        assert "DEADLINE_EXCEEDED" in p.stderr and "(4 of 4 resources failing)" in p.stderr
        assert took < 5, took
        p = _health(run, short_root, cfg)
        assert p.returncode == 0, p.stderr
    finally:
        assert d.stop() == 0
        kl.stop()
