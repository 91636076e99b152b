# SPDX-License-Identifier: MIT
"""The memlock hook (issue 22) on the real soft-RoCE devices, with podman and runc: a non-root
process (--user 1000:1000, no capability) in a container started with the CDI names of
`rdma-dp serve --use-cdi` registers a 1 GiB memory region on rxe0 with ibv_reg_mr
(memlock_probe.py), one page more gets ENOMEM (the limit is the configured 1Gi), and the same
spec minus the hook gets ENOMEM for the 1 GiB; a `rdma-dp dra` claim's spec (unlimited)
lets it register 128 MiB, far above the runtime's limit.

The runtime: Debian's podman 4.3.1 with `--runtime runc` (runc 1.1.5; crun, where installed,
unused), root podman with its own storage (vfs) and run root on the guest's /run tmpfs, the
cgroupfs manager (no systemd in the guest), `--network none`, no image: `--rootfs` a directory
holding the probe, with the guest's /usr and /etc/libibverbs.d bound read-only (python3,
libibverbs and the rxe provider). podman 4.3.1 reads CDI specs from /etc/cdi and /var/run/cdi
only (no --cdi-spec-dir yet); the tests copy the specs they use into /var/run/cdi (the guest's
tmpfs).

The runtime's own limit: the guest runs everything with memlock unlimited (guest.sh), so
podman runs under `prlimit --memlock` 8 MiB (soft and hard), containerd's under its systemd unit;
the container's process inherits that from runc unless the hook raises it.

Also measured: which other OCI hook stages act on the container's process before it runs
(the spec's hook under another stage name), and that a missing hook binary fails the
container's start, saying so (another ABI: tests/integration/test_memlock.py). The outputs go
to RESULTS/outputs/memlock-*.txt, the podman runs' wall times to figures.json ("memlock ...").
Six podman runs, one of them pinning 1 GiB: the guest's 2 GiB suffice (about 1.75 GiB
available before it; the test checks).
"""
import contextlib
import copy
import json
import os
import pathlib
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import HERE, ensure_devices, record, save_output, sh
from rdpk import Env
import dra_env
from dra_env import DRIVER, NODE

GiB = 1 << 30
RUNTIME_LIMIT = 8 << 20  # bytes: what runc passes on when no hook raises it
PROBE = HERE / "memlock_probe.py"
CDI_DIR = pathlib.Path("/var/run/cdi")
DRA_SIZE = 128 << 20  # well above the runtime's limit; the 1 GiB pin is shown once above
MISSING = "/opt/rdma-dp-absent/bin/rdma-dp"
LIMITS = ["/usr/bin/grep", "^Max locked memory", "/proc/self/limits"]


class Podman:
    """Root podman with runc on a tmpfs, running a --rootfs directory as --user 1000:1000."""

    def __init__(self):
        for t in ("podman", "runc", "conmon"):
            if shutil.which(t) is None:
                pytest.fail("%s is not installed (scripts/install-deps.sh kernel installs "
                            "podman and runc)" % t)
        self.dir = pathlib.Path(tempfile.mkdtemp(dir="/run", prefix="rdpm"))
        self.rootfs = self.dir / "rootfs"
        for d in ("usr", "etc/libibverbs.d", "proc", "sys", "dev", "run", "tmp"):
            (self.rootfs / d).mkdir(parents=True)
        (self.rootfs / "tmp").chmod(0o1777)
        for link in ("bin", "lib", "lib64", "sbin"):
            if os.path.islink("/" + link):
                (self.rootfs / link).symlink_to(os.readlink("/" + link))
        shutil.copy(PROBE, self.rootfs / "probe.py")
        CDI_DIR.mkdir(parents=True, exist_ok=True)
        # podman also reads /etc/cdi: nothing there may shadow or clash with the specs here
        if os.path.isdir("/etc/cdi") and os.listdir("/etc/cdi"):
            sh("mount", "-t", "tmpfs", "-o", "size=1m", "rdp-empty-cdi", "/etc/cdi")

    def argv(self, devices, cmd):
        d = self.dir
        return ["podman", "--root", d / "storage", "--runroot", d / "runroot",
                "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs",
                "--events-backend", "none", "--runtime", "runc",
                "run", "--rm", "--network", "none", "--user", "1000:1000",
                "-v", "/usr:/usr:ro", "-v", "/etc/libibverbs.d:/etc/libibverbs.d:ro",
                *[a for n in devices for a in ("--device", n)],
                "--rootfs", self.rootfs, *cmd]

    def run(self, what, devices, cmd, specs, timeout=240):
        """podman run with the CDI names `devices`, the spec docs `specs` ({file: doc}) in
        /var/run/cdi for its duration, under the runtime's limit; a CompletedProcess with
        .seconds (also in figures.json as "memlock podman run: WHAT (s)")."""
        limit = "--memlock=%d:%d" % (RUNTIME_LIMIT, RUNTIME_LIMIT)
        with in_cdi_dir(specs):
            t = time.monotonic()
            r = subprocess.run(["prlimit", limit, *map(str, self.argv(devices, cmd))],
                               capture_output=True, text=True, timeout=timeout)
            r.seconds = round(time.monotonic() - t, 2)
        record("memlock podman run: %s (s)" % what, r.seconds)
        return r

    def probe(self, what, devices, ibdev, sizes, specs):
        """memlock_probe.py in the container: .fields {uid, capeff, memlock, seconds: the
        first such line's text} and .reg {size: "ok" or "errno N NAME: TEXT"}."""
        r = self.run(what, devices, ["/usr/bin/python3", "/probe.py", ibdev, *map(str, sizes)],
                     specs)
        r.fields, r.reg = {}, {}
        for line in r.stdout.splitlines():
            k, _, v = line.partition(" ")
            if k == "reg_mr":
                size, _, v = v.partition(" ")
                r.reg[int(size)] = v
            else:
                r.fields.setdefault(k, v)
        return r

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def in_cdi_dir(specs):
    paths = []
    try:
        for name, doc in specs.items():
            p = CDI_DIR / name
            p.write_text(json.dumps(doc))
            paths.append(p)
        yield
    finally:
        for p in paths:
            p.unlink()


def variant(doc, cls, **hook):
    """{file: doc} of a copy of spec doc under kind rdma-dp.io/cls, its hook changed (hook:
    keys of the hook entry to replace; drop=True: no hook at all)."""
    d = copy.deepcopy(doc)
    d["kind"] = "rdma-dp.io/" + cls
    edits = d["containerEdits"]
    if hook.get("drop"):
        del edits["hooks"]
    else:
        edits["hooks"][0].update({k: v for k, v in hook.items() if k != "drop"})
    return {"rdma-dp.io-%s.json" % cls: d}


def names_of(devices, cls):
    return ["rdma-dp.io/%s=%s" % (cls, n.split("=", 1)[1]) for n in devices]


def describe(r):
    return "exit %d in %.1f s\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.seconds, r.stdout,
                                                           r.stderr)


def mem_available():
    for line in open("/proc/meminfo"):
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


class Served:
    """serve --use-cdi on the real node: rdma/g1 (rxe0, "memlock": "1Gi"), its spec doc and
    the CDI names of one Allocate."""

    def __init__(self, rdma_dp):
        ensure_devices()  # module scope: before the autouse fixture puts them back
        self.env = Env(rdma_dp)
        self.binary = str(pathlib.Path(rdma_dp).resolve())
        cdi = self.env.dir / "cdi"
        cdi.mkdir()
        cfg = self.env.config([{"resourceName": "g1", "mode": "exclusive", "memlock": "1Gi",
                                "selectors": {"ifNames": ["vethA"]}}])
        self.env.daemon(cfg, extra=("--use-cdi", "--cdi-spec-dir", cdi,
                                    "--memlock-hook", self.binary))
        reg = self.env.kubelet.wait_registered("rdma/g1", units=1, healthy=1)
        resp = reg.client.allocate(["rxe0"]).container_responses[0]
        self.names = [c.name for c in resp.cdi_devices]
        self.spec = json.loads((cdi / "rdma-dp.io-g1.json").read_text())
        self.files = {"rdma-dp.io-g1.json": self.spec}


@pytest.fixture(scope="module")
def podman():
    p = Podman()
    yield p
    p.close()


@pytest.fixture(scope="module")
def served(rdma_dp):
    s = Served(rdma_dp)
    yield s
    s.env.close()


def test_hook_lets_a_non_root_process_register_1gib(served, podman):
    assert served.spec["containerEdits"]["hooks"] == [{
        "hookName": "createRuntime", "path": served.binary,
        "args": ["rdma-dp", "hook", "--abi", "1", "--memlock", "1073741824"]}], served.spec
    avail = mem_available()
    record("memlock guest MemAvailable before (MiB)", avail >> 20)
    assert avail > GiB + (128 << 20), "the guest needs more memory (RDP_KERNEL_MEM)"
    # 1 GiB, then one page more than the configured limit
    r = podman.probe("hook 1Gi, 1 GiB + 1 page", served.names, "rxe0", [GiB, 4096],
                     served.files)
    runc = sh("runc", "--version").stdout.splitlines()[0]
    save_output("memlock-hook-1g.txt", "%s, crun %s\n%s" % (
        runc, "installed" if shutil.which("crun") else "absent", describe(r)))
    assert r.fields.get("uid") == "1000" and int(r.fields["capeff"], 16) == 0, describe(r)
    assert r.fields["memlock"] == "1073741824 1073741824", r.stdout
    assert r.reg == {GiB: "ok", 4096: "errno 12 ENOMEM: Cannot allocate memory"}, r.stdout
    record("memlock ibv_reg_mr of 1 GiB in the container (s)",
           float(r.fields["seconds"].split()[1]))


def test_without_the_hook_enomem(served, podman):
    """The same spec minus the hook: the runtime's limit, and ENOMEM."""
    r = podman.probe("no hook, 1 GiB", names_of(served.names, "g1-nohook"), "rxe0", [GiB],
                     variant(served.spec, "g1-nohook", drop=True))
    save_output("memlock-nohook-1g.txt", describe(r))
    assert r.fields.get("uid") == "1000" and int(r.fields["capeff"], 16) == 0, describe(r)
    assert r.fields["memlock"] == "%d %d" % (RUNTIME_LIMIT, RUNTIME_LIMIT), r.stdout
    assert r.reg == {GiB: "errno 12 ENOMEM: Cannot allocate memory"}, r.stdout
    assert r.returncode == 1, describe(r)


def test_which_stage_acts_before_the_process(served, podman):
    """The spec's hook under other OCI stage names (the spec's own, createRuntime, is the
    test above): createContainer acts on the process too (runc runs it in the container's
    namespaces before pivot_root, where the host path still resolves and the state's pid is
    the container's init); startContainer runs inside the container, as the container's
    user, where the host path does not exist: the start fails. prestart (deprecated) runs
    where createRuntime does; poststart runs once the process runs, too late."""
    got, report = {}, []
    for stage in ("createContainer", "startContainer"):
        cls = "g1-" + stage.lower()
        r = podman.run("stage " + stage, names_of(served.names, cls), LIMITS,
                       variant(served.spec, cls, hookName=stage))
        got[stage] = (r.returncode, " ".join(r.stdout.split()[3:5]))
        report.append("== %s: %s" % (stage, describe(r)))
    save_output("memlock-stages.txt", "\n".join(report))
    assert got["createContainer"] == (0, "1073741824 1073741824"), report
    assert got["startContainer"][0] != 0, report
    assert "no such file or directory" in report[1], report


def test_missing_binary_fails_the_start(served, podman):
    r = podman.run("no hook binary", names_of(served.names, "g1-missing"), LIMITS,
                   variant(served.spec, "g1-missing", path=MISSING))
    save_output("memlock-missing-binary.txt", describe(r))
    assert r.returncode != 0 and r.stdout == "", describe(r)
    assert "runc create failed" in r.stderr, describe(r)  # runc ran it, not crun
    assert "error running hook #0: fork/exec %s: no such file or directory" % MISSING \
        in r.stderr, describe(r)


def test_dra_claim_spec_hook(rdma_dp, podman):
    """A claim's spec written by `rdma-dp dra` (default --memlock: unlimited) on rxe2."""
    binary = str(pathlib.Path(rdma_dp).resolve())
    dra = dra_env.DraEnv(rdma_dp, None, wipe_delay=2)
    try:
        after = len(dra.kubelet.registrations)
        d = dra.driver(pathlib.Path("/"), extra=("--memlock-hook", binary))
        dra.kubelet.wait_registered(DRIVER, after=after, timeout=60)
        d.wait_log("event=slices-published", timeout=60)
        devs = {x["attributes"]["ibdev"]["string"]: x["name"]
                for s in dra.api.slices(NODE, DRIVER) for x in s["spec"]["devices"]}
        c = dra.claim("c-mlk", [("nic", NODE, devs["rxe2"])])
        uid = c["metadata"]["uid"]
        resp = dra.kubelet.prepare([c])
        ids = [i for x in resp.claims[uid].devices for i in x.cdi_device_ids]
        name = "rdma-dp.io-claim_%s.json" % uid
        spec = json.loads((dra.cdi_dir / name).read_text())
        hooks = [h for e in [spec.get("containerEdits", {})] +
                 [x["containerEdits"] for x in spec["devices"]] for h in e.get("hooks", [])]
        assert hooks == [{"hookName": "createRuntime", "path": binary,
                          "args": ["rdma-dp", "hook", "--abi", "1", "--memlock",
                                   "unlimited"]}], spec
        r = podman.probe("DRA claim, unlimited, 128 MiB", ids, "rxe2", [DRA_SIZE], {name: spec})
        save_output("memlock-dra-1g.txt", describe(r))
        assert r.returncode == 0, describe(r)
        assert r.fields["uid"] == "1000" and int(r.fields["capeff"], 16) == 0, describe(r)
        assert r.fields["memlock"] == "unlimited unlimited", r.stdout
        assert r.reg == {DRA_SIZE: "ok"}, r.stdout
    finally:
        dra.close()
