# SPDX-License-Identifier: MIT
"""A real container runtime as the consumer of what Allocate returns: podman (Debian's 4.3.1)
runs a FROM scratch image holding Debian's busybox-static and reports what the container got.
No tests here (test_podman_harness.py tests the harness itself).

    node = harmless_node(fixtures_dir, "seed000", tmp_path / "node")
    r = run(devices=["/dev/infiniband/uverbs0"], envs={"K": "V"}, dev_root=node / "dev")
    r = run(cdi_names=["rdma-dp.io/x=0000:81:00.0"], cdi_dir=spec_dir, dev_root=node / "dev")
    r.nodes   {"uverbs0": ("c", 1, 3), ...}: `ls -ln /dev/infiniband` inside ({} when absent)
    r.env     {K: V}: the container process's environment (/proc/1/environ, exactly what the
              runtime set; no shell additions)
    r.added_env   r.env without what podman sets in every container (PODMAN_ENV)
    r.memlock     (soft, hard) RLIMIT_MEMLOCK of the container's process, from
                  /proc/1/limits: bytes, or None for unlimited
    run(..., user="1000:1000") runs the container's process as that user (--user)

harmless_node() copies a fixture node and remakes every char node under dev/infiniband as
`c 1:3` (the numbers of /dev/null) with the sysfs `dev` attributes that named the old numbers
saying 1:3, so rdma-dp still finds the devices usable (it checks that a node's number is the
one sysfs names) and a container that gets them can do no harm with them.

How podman sees the fixture and the spec dir. Podman 4.3.1 reads CDI specs from /etc/cdi and
/var/run/cdi only: it vendors CDI v0.5.2 and has no containers.conf `cdi_spec_dirs` (later
podman releases have one; the string is not in Debian's 4.3.1 binary) and no flag or variable
for it. And an
Allocate answer names host paths as kubelet sees them, /dev/infiniband/uverbs0, which this
machine does not have. So with dev_root or cdi_dir, podman runs inside a private mount
namespace (`unshare -m`, propagation private; nothing leaks to the host) where:
  - /dev is a tmpfs copy of the host's /dev (cp -a -x; its submounts pts, shm, mqueue... bound
    back) whose infiniband/ is a copy of <dev_root>/infiniband (cp -a: the same numbers);
  - /var/run/cdi is cdi_dir (bind mount) and /etc/cdi, when the host has one, an empty dir.
The only trace on the host is an empty /run/cdi dir created as the mount point when missing
(what every CDI host has anyway). Device-spec mode passes `--device HOST:CONTAINER:rwm`.

podman gets a private --root/--runroot (vfs) in a temp dir per test session, `--runtime runc`,
`--network none` and explicit `--ulimit nofile=1024:1024 --ulimit nproc=1024:1024` (crun and
the default ulimits fail on these machines), like test_image.py. Every blocker is a skip that
says why: podman, runc, busybox-static or unshare missing, not root (mknod), or podman unable
to run any container here.
"""
import atexit
import dataclasses
import io
import os
import pathlib
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import sysfsgen  # noqa: E402

BUSYBOX = "/bin/busybox"
IMAGE = "localhost/rdp-busybox:test"
HARMLESS = (1, 3)  # /dev/null's numbers
# What podman 4.3 puts into every container's environment (checked by the harness tests).
PODMAN_ENV = frozenset({"PATH", "TERM", "container", "HOSTNAME", "HOME"})
RUN_FLAGS = ["--rm", "--runtime", "runc", "--network", "none",
             "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
RUNTIME_TROUBLE = ("oci runtime", "runc", "cgroup", "namespace", "permission denied",
                   "operation not permitted", "mount", "crun", "conmon", "netns", "rlimit")
# Inside the container: the environment of pid 1 (this shell, as the runtime started it: not
# the last command, which ash would exec in its place), its locked-memory limit, then the
# /dev/infiniband listing.
SCRIPT = ("cat /proc/1/environ; echo; echo '@@LIMITS'; grep '^Max locked memory' /proc/1/limits; "
          "echo '@@DEV'; if [ -d /dev/infiniband ]; then "
          "echo '@@IB'; ls -ln /dev/infiniband; else echo '@@NOIB'; fi")

# Runs "$@" (podman) in a private mount namespace prepared from RDP_* variables.
NS_SCRIPT = r"""
set -eu
if [ -n "${RDP_DEV_IB:-}" ]; then
    T="$RDP_NEWDEV"
    mount -t tmpfs -o mode=755,size=64m rdp-dev "$T"
    cp -a -x /dev/. "$T"/
    rm -rf "$T/infiniband"
    cp -a "$RDP_DEV_IB" "$T/infiniband"
    for d in /dev/*/; do
        d="${d%/}"
        if mountpoint -q "$d"; then mount --rbind "$d" "$T/${d#/dev/}"; fi
    done
    mount --move "$T" /dev
fi
if [ -n "${RDP_CDI_DIR:-}" ]; then
    mkdir -p /var/run/cdi
    mount --bind "$RDP_CDI_DIR" /var/run/cdi
    if [ -d /etc/cdi ]; then mount --bind "$RDP_EMPTY" /etc/cdi; fi
fi
exec "$@"
"""


class PodmanError(AssertionError):
    pass


@dataclasses.dataclass
class Result:
    argv: list
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    nodes: dict = None     # name -> (type char, major, minor); majors None for non-devices
    env: dict = None
    memlock: tuple = None  # (soft, hard) bytes, None for unlimited

    @property
    def added_env(self):
        return {k: v for k, v in (self.env or {}).items() if k not in PODMAN_ENV}


def _need(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip("%s not installed (scripts/install-deps.sh installs podman, runc and "
                    "busybox-static)" % ", ".join(missing))


def _tar_of_busybox():
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        d = tarfile.TarInfo("bin")
        d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, 0
        t.addfile(d)
        info = t.gettarinfo(BUSYBOX, arcname="bin/busybox")
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = 0
        with open(BUSYBOX, "rb") as f:
            t.addfile(info, f)
    return buf.getvalue()


class Harness:
    """One private podman storage with the busybox image; made once per test session by
    harness() (module cache), removed at exit."""

    def __init__(self):
        _need("podman", "runc", "unshare", "mountpoint")
        if not os.path.exists(BUSYBOX):
            pytest.skip("%s missing: scripts/install-deps.sh installs busybox-static" % BUSYBOX)
        with open(BUSYBOX, "rb") as f:
            if f.read(4) != b"\x7fELF":
                pytest.skip("%s is not an ELF binary" % BUSYBOX)
        self.root = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="rdppm"))
        atexit.register(shutil.rmtree, str(self.root), True)
        self.base = ["podman", "--root", str(self.root / "storage"),
                     "--runroot", str(self.root / "run"), "--storage-driver", "vfs",
                     "--tmpdir", str(self.root / "tmp")]
        tar = self.root / "busybox.tar"
        tar.write_bytes(_tar_of_busybox())
        t0 = time.monotonic()
        p = self.podman("import", "-q", str(tar), IMAGE, check=False)
        if p.returncode != 0:
            pytest.skip("podman cannot import an image here: %s" % (p.stderr or p.stdout)[-400:])
        self.import_seconds = time.monotonic() - t0
        # Can this machine run a container at all? A bare run is the probe (and the baseline).
        r = self.run(check=False)
        if r.returncode != 0:
            err = (r.stderr + r.stdout).strip()
            if any(w in err.lower() for w in RUNTIME_TROUBLE):
                pytest.skip("podman cannot run a container on this machine: %s" % err[-400:])
            raise PodmanError("the busybox image does not run: rc=%d %s" % (r.returncode, err))
        self.probe = r

    def podman(self, *args, timeout=120, check=True, env=None):
        p = subprocess.run(self.base + list(map(str, args)), capture_output=True, text=True,
                           timeout=timeout, env=env)
        if check and p.returncode != 0:
            raise PodmanError("%s -> %d\n%s" % (" ".join(p.args), p.returncode,
                                                (p.stderr + p.stdout)[-2000:]))
        return p

    def run(self, devices=(), envs=None, cdi_names=(), cdi_dir=None, dev_root=None,
            check=True, timeout=120, user=None):
        """podman run of the image with --device for each of devices (a host path, which is
        also the container path, or a (host, container) pair) and for each CDI name, --env
        for each of envs. dev_root: a node's dev dir that podman sees as /dev (its
        infiniband/ only); cdi_dir: the dir podman reads as /var/run/cdi. Returns a Result;
        raises PodmanError when podman fails and check is set."""
        argv = ["run", *RUN_FLAGS]
        if user is not None:
            argv += ["--user", str(user)]
        for d in devices:
            host, ctr = (d, d) if isinstance(d, (str, os.PathLike)) else d
            argv += ["--device", "%s:%s:rwm" % (host, ctr)]
        for name in cdi_names:
            argv += ["--device", name]
        for k, v in (envs or {}).items():
            argv += ["--env", "%s=%s" % (k, v)]
        argv += [IMAGE, BUSYBOX, "sh", "-c", SCRIPT]

        cmd = self.base + argv
        env = dict(os.environ)
        scratch = None
        if dev_root is not None or cdi_dir is not None:
            scratch = pathlib.Path(tempfile.mkdtemp(dir=str(self.root), prefix="ns"))
            (scratch / "newdev").mkdir()
            (scratch / "empty").mkdir()
            env.update(RDP_NEWDEV=str(scratch / "newdev"), RDP_EMPTY=str(scratch / "empty"),
                       RDP_DEV_IB="", RDP_CDI_DIR="")
            if dev_root is not None:
                ib = pathlib.Path(dev_root) / "infiniband"
                if not ib.is_dir():
                    raise PodmanError("%s is not a directory" % ib)
                env["RDP_DEV_IB"] = str(ib)
            if cdi_dir is not None:
                env["RDP_CDI_DIR"] = str(pathlib.Path(cdi_dir).resolve())
            cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", NS_SCRIPT,
                   "rdp-ns"] + cmd
        t0 = time.monotonic()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        finally:
            if scratch is not None:
                shutil.rmtree(str(scratch), ignore_errors=True)
        r = Result(argv=cmd, returncode=p.returncode, stdout=p.stdout, stderr=p.stderr,
                   seconds=time.monotonic() - t0)
        if p.returncode == 0:
            r.nodes, r.env, r.memlock = _parse(p.stdout)
        elif scratch is not None and "unshare failed" in p.stderr:
            pytest.skip("cannot make a private mount namespace here: %s" % p.stderr.strip())
        if check and p.returncode != 0:
            raise PodmanError("podman run -> %d\n%s\nstderr: %s\nstdout: %s" % (
                p.returncode, " ".join(argv), p.stderr[-2000:], p.stdout[-1000:]))
        return r


def _limit(s):
    return None if s == "unlimited" else int(s)


def _parse(out):
    """(nodes, env, memlock) from SCRIPT's output."""
    env_blob, sep, rest = out.partition("\n@@LIMITS\n")
    if not sep:
        raise PodmanError("no @@LIMITS marker in the container's output: %r" % out[-1000:])
    limits, sep, head = rest.partition("@@DEV\n")
    if not sep:
        raise PodmanError("no @@DEV marker in the container's output: %r" % out[-1000:])
    f = limits.split()  # Max locked memory SOFT HARD bytes
    memlock = (_limit(f[3]), _limit(f[4])) if len(f) >= 5 else None
    nodes = {}
    lines = head.splitlines()
    if lines and lines[0] == "@@IB":
        for ln in lines[1:]:
            f = ln.split()
            if not f or f[0] == "total":
                continue
            name = f[-1]
            if f[4].endswith(","):       # "crw-rw-rw- 1 0 0 1, 3 Dec 1 17:31 name"
                nodes[name] = (f[0][0], int(f[4][:-1]), int(f[5]))
            else:
                nodes[name] = (f[0][0], None, None)
    elif not lines or lines[0] != "@@NOIB":
        raise PodmanError("unexpected output: %r" % head[-1000:])
    env = {}
    for entry in env_blob.split("\0"):
        if entry:
            k, _, v = entry.partition("=")
            env[k] = v
    return nodes, env, memlock


_HARNESS = None


def harness():
    """The session's Harness (built on first use: image import and a probe run)."""
    global _HARNESS
    if _HARNESS is None:
        _HARNESS = Harness()
    return _HARNESS


def run(devices=(), envs=None, cdi_names=(), cdi_dir=None, dev_root=None, check=True,
        timeout=120, user=None):
    """Harness.run() on the session's harness (see there)."""
    return harness().run(devices=devices, envs=envs, cdi_names=cdi_names, cdi_dir=cdi_dir,
                         dev_root=dev_root, check=check, timeout=timeout, user=user)


def harmless_node(fixtures_dir, node, dest):
    """Copy of fixture node <fixtures_dir>/<node> at dest with every char node under
    dev/infiniband re-made as c 1:3 (mode kept) and every sysfs `dev` attribute that named one
    of the old numbers saying 1:3. Returns dest (a pathlib.Path). Skips when mknod is refused."""
    dest = pathlib.Path(dest)
    sysfsgen.copy_node(pathlib.Path(fixtures_dir) / node, dest)
    ib = dest / "dev" / "infiniband"
    old = set()
    for ent in sorted(os.listdir(ib)):
        p = ib / ent
        st = os.lstat(p)
        if not stat.S_ISCHR(st.st_mode):
            continue
        old.add("%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev)))
        os.unlink(p)
        try:
            os.mknod(p, stat.S_IFCHR | stat.S_IMODE(st.st_mode), os.makedev(*HARMLESS))
        except PermissionError as e:
            pytest.skip("mknod refused (not root?): %s" % e)
        os.chmod(p, stat.S_IMODE(st.st_mode))
    new = "%d:%d\n" % HARMLESS
    for d, _dirs, files in os.walk(dest / "sys"):  # real dirs only: links are not followed
        if "dev" in files:
            f = pathlib.Path(d) / "dev"
            if not f.is_symlink() and f.read_text().strip() in old:
                f.write_text(new)
    return dest
