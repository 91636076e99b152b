# SPDX-License-Identifier: MIT
"""rdma-dp under NVIDIA network-operator (issue 23): the DaemonSet network-operator renders for a
NicClusterPolicy's rdmaSharedDevicePlugin (tests/fixtures/network-operator/rdma-shared-dp-ds.yaml,
written here), with rdma-dp's -netop image (Containerfile.netop), run under podman against a
fixture node in both CDI modes; the user-facing example (deploy/network-operator/); and the Go
plugin's command line (k8s-rdma-shared-dp, argv[0]) without a container.

How the init container's wait is made to end honestly. Its command, `until lsmod | grep
mlx5_core; ...; sleep 30; done`, reads /proc/modules (busybox lsmod), which in a pod is the
node kernel's module list. Podman cannot mount a file there (runc refuses any mount inside
/proc but a few lxcfs paths), and this kind of machine may have no modules at all. So the
test starts the init container exactly as the DaemonSet says, sees it wait (the first lsmod
finds no mlx5_core, it says "waiting for OFED drivers to be loaded" and keeps running), then
"loads the driver": from the host, in the container's mount namespace only (nsenter -m -r,
running the image's own busybox), it mounts a tmpfs on /proc holding a `modules` file in the
kernel's format with an mlx5_core line. The next round of the loop (the command's own
`sleep 30`, so the test takes about half a minute) finds it and the container exits 0. The
command, the image's sh/lsmod/grep and the exit are real; only the module list is staged.

The main container gets what the template gives it: `command: [/bin/k8s-rdma-shared-dp]`,
`args: [--use-cdi]` with useCdi, privileged, the host's /dev at /dev (here a fixture node's,
its char devices remade as /dev/null's numbers, podman_run.harmless_node), the ConfigMap at
/k8s-rdma-shared-dev-plugin, kubelet's device-plugins and plugins_registry, /var/run/cdi and
/host/etc/pcidp. The one addition: the fixture node's sysfs bind-mounted at /sys, where the
pod sees the host's (the Go plugin's command line has no sysfs flag, nor does rdma-dp's under
that name). kubelet is the Python stand-in (kubelet.py) on the host side of the mounts.

Skips, saying why, without buildah, podman, runc, nsenter or busybox-static, under the
sanitizer build (the image needs the static binary; the command-line tests still run), or where
podman cannot start a container.
"""
import json
import os
import pathlib
import shutil
import stat
import subprocess
import tarfile
import tempfile
import time
import uuid

import pytest
import yaml

import kubelet as K
import podman_run
from test_image import RUNTIME_TROUBLE, _need, _oci, _oci_links, _run

MiB = 1024 * 1024

REPO = pathlib.Path(__file__).resolve().parents[2]
DS_FILE = REPO / "tests/fixtures/network-operator/rdma-shared-dp-ds.yaml"
NCP_FILE = REPO / "deploy/network-operator/nicclusterpolicy.yaml"
INIT_ARGS = ("until lsmod | grep mlx5_core; do echo waiting for OFED drivers to be loaded; "
             "sleep 30; done")
SEED000_DEVICES = ["/dev/infiniband/issm0", "/dev/infiniband/rdma_cm",
                   "/dev/infiniband/umad0", "/dev/infiniband/uverbs0"]
# A /proc/modules line as the kernel writes it (name size refcount users state address).
MLX5_MODULES = ("mlx5_ib 491520 0 - Live 0x0000000000000000\n"
                "mlx5_core 2646016 1 mlx5_ib, Live 0x0000000000000000\n"
                "ib_core 544768 1 mlx5_ib, Live 0x0000000000000000\n")
# What useCdi adds to the template (everything else is the same in both modes).
CDI_ONLY_VOLUMES = {"dynamic-cdi", "host-config-volume"}


def _ds(use_cdi=True):
    """The DaemonSet's pod spec; with use_cdi False, as the template renders useCdi: false."""
    doc = yaml.safe_load(DS_FILE.read_text())
    spec = doc["spec"]["template"]["spec"]
    if not use_cdi:
        c = spec["containers"][0]
        del c["args"]
        c["volumeMounts"] = [m for m in c["volumeMounts"] if m["name"] not in CDI_ONLY_VOLUMES]
        spec["volumes"] = [v for v in spec["volumes"] if v["name"] not in CDI_ONLY_VOLUMES]
    return doc, spec


def _ncp():
    return yaml.safe_load(NCP_FILE.read_text())["spec"]["rdmaSharedDevicePlugin"]


# ---- the manifests, without a container ---------------------------------------------------------
def test_daemonset_is_network_operators_shape():
    doc, spec = _ds()
    assert doc["kind"] == "DaemonSet" and doc["apiVersion"] == "apps/v1"
    assert spec["priorityClassName"] == "system-node-critical" and spec["hostNetwork"] is True
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in \
        spec["tolerations"]
    assert spec["nodeSelector"] == {"feature.node.kubernetes.io/pci-15b3.present": "true",
                                    "network.nvidia.com/operator.mofed.wait": "false"}
    (init,), (c,) = spec["initContainers"], spec["containers"]
    assert init["image"] == c["image"], "the init container runs the same image"
    assert init["command"] == ["sh", "-c"] and init["args"] == [INIT_ARGS]
    assert "securityContext" not in init
    assert c["command"] == ["/bin/k8s-rdma-shared-dp"] and c["args"] == ["--use-cdi"]
    assert c["securityContext"] == {"privileged": True}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts == {"device-plugin": "/var/lib/kubelet/device-plugins",
                      "plugins-registry": "/var/lib/kubelet/plugins_registry",
                      "config": "/k8s-rdma-shared-dev-plugin", "devs": "/dev/",
                      "dynamic-cdi": "/var/run/cdi", "host-config-volume": "/host/etc/pcidp/"}
    vols = {v["name"]: v for v in spec["volumes"]}
    assert set(vols) == set(mounts)
    assert vols["config"]["configMap"] == {"name": "rdma-devices", "items": [
        {"key": "config.json", "path": "config.json"}]}
    assert {n: v["hostPath"]["path"] for n, v in vols.items() if "hostPath" in v} == {
        "device-plugin": "/var/lib/kubelet/device-plugins",
        "plugins-registry": "/var/lib/kubelet/plugins_registry", "devs": "/dev/",
        "dynamic-cdi": "/var/run/cdi", "host-config-volume": "/etc/pcidp"}
    # useCdi: false drops the args and the two CDI mounts, nothing else
    _, off = _ds(use_cdi=False)
    assert "args" not in off["containers"][0]
    assert {m["name"] for m in off["containers"][0]["volumeMounts"]} == \
        set(mounts) - CDI_ONLY_VOLUMES


def test_nicclusterpolicy_example_names_the_netop_image(run, fixtures_dir, tmp_path):
    ncp = _ncp()
    _, spec = _ds()
    # network-operator's imagePath: <repository>/<image>:<version>
    assert "%s/%s:%s" % (ncp["repository"], ncp["image"], ncp["version"]) == \
        spec["containers"][0]["image"]
    assert ncp["version"].endswith("-netop") and ncp["useCdi"] is False
    cfg = tmp_path / "config.json"
    cfg.write_text(ncp["config"])
    p = run("check-config", "--config-file", cfg, "--sysfs-root",
            fixtures_dir / "seed000" / "sys", "--dev-root", fixtures_dir / "seed000" / "dev")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "rdma/rdma_shared_device_a" in p.stdout


# ---- the Go plugin's command line (argv[0] = k8s-rdma-shared-dp) ---------------------------------
@pytest.fixture
def shared_dp(rdma_dp, tmp_path):
    """run(*args): the binary under test called as k8s-rdma-shared-dp (a hard link when the
    file system allows, as in the image, else a symlink: argv[0] is what counts)."""
    link = tmp_path / "bin" / "k8s-rdma-shared-dp"
    link.parent.mkdir()
    try:
        os.link(rdma_dp, link)
    except OSError:
        link.symlink_to(rdma_dp)

    def _run(*args, timeout=30):
        return subprocess.run([str(link), *map(str, args)], capture_output=True, text=True,
                              timeout=timeout)
    _run.path = link
    return _run


@pytest.mark.parametrize("flag", ["-v", "--v", "-version", "--version", "-v=true",
                                  "--version=1"])
def test_version(shared_dp, run, flag):
    p = shared_dp(flag)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    version = run("--version").stdout.split()[1]
    # the Go plugin's "k8s-rdma-shared-dev-plugin version:V, commit:C, date:D", in spirit
    assert p.stdout.startswith("rdma-dp version:%s, commit:" % version), p.stdout
    assert p.stdout.endswith(" (as k8s-rdma-shared-dp)\n") and p.stdout.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (["--nope"], "flag provided but not defined: -nope"),
    (["--use-cdi", "--kubelet-root-dir=/x"], "flag provided but not defined: -kubelet-root-dir"),
    (["-c", "/x"], "flag provided but not defined: -c"),
    (["--help-me"], "flag provided but not defined: -help-me"),
    (["--use-cdi=yes"], 'invalid boolean value "yes" for -use-cdi: parse error'),
    (["--config-file"], "flag needs an argument: -config-file"),
    (["---use-cdi"], "bad flag syntax: ---use-cdi"),
])
def test_unknown_and_bad_flags(shared_dp, args, message):
    p = shared_dp(*args)
    assert p.returncode == 2, (args, p.stdout, p.stderr)
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    # Go's flag package: the message, then the usage
    assert lines[0] == message and lines[1] == "Usage of %s:" % shared_dp.path, p.stderr
    for f in ("-config-file string", "-use-cdi", "-v\t", "-version"):
        assert f in p.stderr


@pytest.mark.parametrize("flag", ["-h", "--help", "-help"])
def test_help_exits_0_on_stderr(shared_dp, flag):
    p = shared_dp(flag)
    assert p.returncode == 0 and p.stdout == ""
    assert p.stderr.startswith("Usage of %s:\n" % shared_dp.path)
    assert '(default "/k8s-rdma-shared-dev-plugin/config.json")' in p.stderr


@pytest.mark.parametrize("cdi_args", [[], ["--use-cdi"], ["--use-cdi=false"],
                                      ["-use-cdi", "--config-file"]])
def test_daemon_reads_the_go_plugins_config_path(shared_dp, tmp_path, cdi_args):
    """The daemon starts with the Go plugin's config path (or -config-file's) and, finding no
    file there, stops before it touches kubelet's directories; serving is for the podman
    tests below."""
    args = list(cdi_args)
    if args and args[-1] == "--config-file":
        args.append(tmp_path / "elsewhere.json")
    want = str(tmp_path / "elsewhere.json") if "--config-file" in cdi_args else \
        "/k8s-rdma-shared-dev-plugin/config.json"
    if os.path.exists(want):  # it would start serving this machine's kubelet
        pytest.skip("%s exists on this machine" % want)
    p = shared_dp(*args)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "event=config-rejected config=%s " % want in p.stderr, p.stderr
    assert "event=start-failed" in p.stderr


def test_operands_are_not_read(shared_dp, tmp_path):
    """Like the Go plugin (flag.Args() unused), arguments after the flags are not read; rdma-dp
    names them on stderr. "--use-cdi false" is CDI on and an ignored "false", as in Go."""
    if os.path.exists("/k8s-rdma-shared-dev-plugin/config.json"):
        pytest.skip("/k8s-rdma-shared-dev-plugin/config.json exists on this machine")
    p = shared_dp("--use-cdi", "false", "--nope")
    assert p.returncode == 1, p.stderr  # the daemon ran (and found no config here)
    assert p.stderr.startswith(
        "%s: ignoring 2 argument(s) from 'false' on: k8s-rdma-shared-dp reads no argument "
        "after its flags\n" % shared_dp.path), p.stderr


# ---- the images and the DaemonSet under podman -----------------------------------------------------
@pytest.fixture(scope="module")
def images(rdma_dp, tmp_path_factory):
    """Both images from the binary under test: {'tar', 'netop', 'report'}."""
    if K.sanitized():
        pytest.skip("sanitizer build: the binary is dynamic and cannot go into the FROM "
                    "scratch image (the release pass of make check runs the image tests)")
    _need("buildah")
    if not os.path.exists(podman_run.BUSYBOX):
        pytest.skip("busybox-static not installed (scripts/install-deps.sh installs it)")
    d = tmp_path_factory.mktemp("netop-image")
    p = _run(["sh", str(REPO / "scripts" / "build-image.sh"), str(rdma_dp),
              str(d / "rdma-dp-image.tar"), str(d / "rdma-dp-netop-image.tar")])
    return {"tar": d / "rdma-dp-image.tar", "netop": d / "rdma-dp-netop-image.tar",
            "report": p.stdout}


def _digests(tar_path):
    with tarfile.open(tar_path) as t:
        index = json.load(t.extractfile("index.json"))
        (m,) = index["manifests"]
        manifest = json.load(t.extractfile("blobs/sha256/" + m["digest"].split(":", 1)[1]))
    return m["annotations"]["org.opencontainers.image.ref.name"], \
        [layer["digest"] for layer in manifest["layers"]]


def test_netop_image_is_the_default_plus_busybox(images, run):
    version = run("--version").stdout.split()[1]
    ref, base_layers = _digests(images["tar"])
    nref, layers = _digests(images["netop"])
    assert ref == "localhost/rdma-dp:%s" % version
    assert nref == "localhost/rdma-dp:%s-netop" % version
    # one layer on top of the default image's own, which it shares
    assert len(layers) == len(base_layers) + 1 and layers[:-1] == base_layers
    config, _, files = _oci(images["netop"])
    assert config["config"]["Entrypoint"] == ["/bin/k8s-rdma-shared-dp"]
    assert not config["config"].get("Cmd")
    assert any(e.startswith("PATH=") and "/bin" in e and "/sbin" in e
               for e in config["config"]["Env"])
    links = _oci_links(images["netop"])
    assert {k: v for k, v in links.items() if v == "bin/busybox"} == {
        "bin/sh": "bin/busybox", "bin/grep": "bin/busybox", "bin/sleep": "bin/busybox",
        "sbin/lsmod": "bin/busybox"}
    regular = {n.lstrip("./"): size for n, size, _, typ in files if typ == tarfile.REGTYPE}
    assert regular["bin/busybox"] == os.path.getsize(podman_run.BUSYBOX)
    assert "usr/share/doc/rdma-dp/licenses/busybox.copyright" in regular
    assert "usr/share/doc/rdma-dp/licenses/GPL-2" in regular
    # busybox-static (about 1.9 MiB) is what the variant adds
    assert os.path.getsize(images["netop"]) - os.path.getsize(images["tar"]) <= 1.5 * MiB
    print(images["report"])


@pytest.fixture(scope="module")
def podman(images, tmp_path_factory):
    _need("podman", "runc", "nsenter")
    pm = Podman(tmp_path_factory.mktemp("podman"))
    p = pm("load", "-q", "-i", str(images["netop"]), check=False)
    if p.returncode != 0:
        pytest.skip("podman cannot load images here: %s" % (p.stderr.strip() or p.stdout))
    pm.tag = [ln.split(":", 1)[1].strip() for ln in p.stdout.splitlines()
              if ln.startswith("Loaded image")][0]
    p = pm("run", "--rm", *RUN_FLAGS, "--entrypoint", '["/bin/k8s-rdma-shared-dp"]', pm.tag,
           "-v", check=False, timeout=60)
    if p.returncode != 0:
        err = (p.stderr + p.stdout).strip()
        if any(w in err.lower() for w in RUNTIME_TROUBLE):
            pytest.skip("podman cannot run a container on this machine: %s" % err[-400:])
        raise AssertionError("the image does not run: rc=%d %s" % (p.returncode, err))
    assert p.stdout.startswith("rdma-dp version:"), p.stdout
    yield pm
    pm("rmi", "-a", "-f", check=False)


class Podman:
    def __init__(self, root):
        self.base = ["podman", "--root", str(root / "storage"), "--runroot", str(root / "run"),
                     "--storage-driver", "vfs"]

    def __call__(self, *args, timeout=120, check=True):
        return _run(self.base + list(args), timeout=timeout, check=check)

    def logs(self, name):
        p = self("logs", name, check=False)
        return p.stdout + p.stderr

    def state(self, name):
        return self("inspect", name, "--format", "{{.State.Status}} {{.State.ExitCode}}",
                    check=False).stdout.split()


# What any container here needs (runc; crun and the default ulimits fail on these machines);
# no network: hostNetwork is about what the node's sysfs shows, a fixture tree here.
RUN_FLAGS = ["--runtime", "runc", "--network", "none",
             "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]


def _entrypoint(c):
    """podman's --entrypoint and arguments for a container's command and args (both replace
    the image's ENTRYPOINT and CMD, as in Kubernetes)."""
    return ["--entrypoint", json.dumps(c["command"])], list(c.get("args", []))


def test_init_container_waits_for_mlx5_core(podman):
    """The init container as the DaemonSet defines it: waits while the kernel's module list has
    no mlx5_core, ends (exit 0) once it has (see the module docstring for how it is staged)."""
    if os.path.exists("/proc/modules") and "mlx5_core " in open("/proc/modules").read():
        pytest.skip("mlx5_core is loaded on this machine: the init container would not wait")
    _, spec = _ds()
    init = spec["initContainers"][0]
    assert "securityContext" not in init  # unprivileged, as in the template
    ep, args = _entrypoint(init)
    name = "rdp-netop-init-" + uuid.uuid4().hex[:8]
    podman("run", "-d", "--name", name, *RUN_FLAGS, *ep, podman.tag, *args)
    try:
        deadline = time.monotonic() + 20
        while "waiting for OFED drivers to be loaded" not in podman.logs(name):
            assert time.monotonic() < deadline, podman.logs(name)
            time.sleep(0.2)
        time.sleep(2)
        assert podman.state(name)[0] == "running", podman.logs(name)
        # the driver loads: the container's /proc now lists mlx5_core
        pid = podman("inspect", name, "--format", "{{.State.Pid}}").stdout.strip()
        stage = ("/bin/busybox mount -t tmpfs -o size=64k rdp-modules /proc && "
                 "printf '%s' > /proc/modules" % MLX5_MODULES)
        _run(["nsenter", "-t", pid, "-m", "-r", "-w", "/bin/busybox", "sh", "-c", stage])
        t0 = time.monotonic()
        p = podman("wait", name, timeout=60)
        waited = time.monotonic() - t0
        log = podman.logs(name)
        assert p.stdout.strip() == "0", log
        assert waited <= 35, waited  # the loop's own sleep 30, then lsmod sees it
        # grep printed lsmod's line: busybox lsmod read the staged list (podman logs mixes
        # stdout and stderr, so in no set order)
        assert ["mlx5_core", "2646016", "1", "mlx5_ib"] in [ln.split() for ln in
                                                            log.splitlines()], log
        assert log.count("waiting for OFED drivers to be loaded") >= 1
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)


@pytest.fixture
def node(fixtures_dir):
    # short paths: the host side dials <root>/device-plugins/<name>.sock (sun_path: 108 bytes)
    tmp = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="rdpno"))
    env = {"tmp": tmp, "kroot": tmp / "kubelet", "config": tmp / "config",
           "cdi": tmp / "cdi", "pcidp": tmp / "pcidp"}
    for k in ("config", "cdi", "pcidp"):
        env[k].mkdir()
    (env["config"] / "config.json").write_text(_ncp()["config"])
    env["node"] = podman_run.harmless_node(fixtures_dir, "seed000", tmp / "node")
    # runc mounts the cgroup fs at /sys/fs/cgroup, on the node's sysfs here: a real one has it
    (env["node"] / "sys" / "fs" / "cgroup").mkdir(parents=True, exist_ok=True)
    # and the host's /dev has null, which runc needs (the fixture's has infiniband/ only)
    os.mknod(env["node"] / "dev" / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.chmod(env["node"] / "dev" / "null", 0o666)
    # network-operator mounts plugins_registry: like the Go plugin, rdma-dp then registers
    # through the plugin watcher (issue 22), which this stand-in kubelet serves
    env["kubelet"] = K.FakeKubelet(env["kroot"], mode="plugins-registry").start()
    (env["kroot"] / "device-plugins").mkdir(parents=True, exist_ok=True)
    yield env
    env["kubelet"].stop()
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("use_cdi", [False, True], ids=["useCdi-false", "useCdi-true"])
def test_daemonset_registers_and_serves_allocate(podman, node, use_cdi):
    _, spec = _ds(use_cdi)
    c = spec["containers"][0]
    assert c["securityContext"] == {"privileged": True}
    sources = {"device-plugin": node["kroot"] / "device-plugins",
               "plugins-registry": node["kroot"] / "plugins_registry",
               "config": node["config"], "devs": node["node"] / "dev",
               "dynamic-cdi": node["cdi"], "host-config-volume": node["pcidp"]}
    mounts = []
    for m in c["volumeMounts"]:
        mounts += ["-v", "%s:%s:%s" % (sources[m["name"]], m["mountPath"].rstrip("/"),
                                       "ro" if m.get("readOnly") else "rw")]
    ep, args = _entrypoint(c)
    name = "rdp-netop-" + uuid.uuid4().hex[:8]
    podman("run", "-d", "--name", name, *RUN_FLAGS, "--privileged", *mounts,
           "-v", "%s:/sys:ro" % (node["node"] / "sys"), *ep, podman.tag, *args)
    kl = node["kubelet"]
    resource = "rdma/rdma_shared_device_a"
    try:
        try:
            reg = kl.wait_registered(resource, units=63, healthy=63, timeout=30)
        except TimeoutError as e:
            raise AssertionError("%s\ncontainer log:\n%s" % (e, podman.logs(name)))
        assert reg.endpoint == str(node["kroot"] / "plugins_registry" /
                                   "rdma_shared_device_a.sock")
        (cr,) = reg.client.allocate(["3"]).container_responses
        specs = sorted(os.listdir(node["cdi"]))
        if use_cdi:
            assert not cr.devices
            assert specs == ["rdma-dp.io-rdma_shared_device_a.json"], specs
            text = (node["cdi"] / specs[0]).read_text()
            names = [d.name for d in cr.cdi_devices]
            assert names and all(n.startswith("rdma-dp.io/rdma_shared_device_a=") for n in names)
            assert all('"%s"' % n.split("=", 1)[1] in text for n in names)
            for dev in SEED000_DEVICES:
                assert dev in text
        else:
            assert not cr.cdi_devices and specs == []
            assert [d.host_path for d in cr.devices] == SEED000_DEVICES
            assert all(d.container_path == d.host_path and d.permissions == "rwm"
                       for d in cr.devices)
        log = podman.logs(name)
        assert "config=/k8s-rdma-shared-dev-plugin/config.json" in log, log
        assert os.listdir(node["pcidp"]) == []  # mounted for the Go plugin, unused by either
    finally:
        podman("stop", "-t", "10", name, check=False)
        state = podman.state(name)
        log = podman.logs(name)
        podman("rm", "-f", name, check=False)
    assert state[1:] == ["0"], log
    assert "event=stopped code=0" in log, log
    assert not (node["kroot"] / "device-plugins" / "rdma_shared_device_a.sock").exists()
