# SPDX-License-Identifier: MIT
"""The memlock hook (issue 22): `rdma-dp hook` as the OCI createRuntime hook of the CDI specs
of `serve --use-cdi` and `dra`, through the reference CDI library and a real runtime (podman
4.3.1 with runc 1.1.5, as podman_run.py sets it up):

- the specs carry one createRuntime hook {path: the --memlock-hook path, args: rdma-dp hook
  --abi 1 --memlock VALUE} per the config's "memlock" (default unlimited, 0: none); the
  reference CDI library loads them and injects the hook as an OCI createRuntime hook;
- a non-root process in a container started with the CDI names sees RLIMIT_MEMLOCK = VALUE
  (soft and hard), and without the hook the runtime's own limit;
- "unlimited": the container sees unlimited where the runtime may raise a hard limit
  (CAP_SYS_RESOURCE, every real node); where it may not (this sandbox lacks the capability)
  the container does not start, and the message says why;
- a binary of another hook ABI, or none at the path, fails the container's start, saying so;
- the hook itself: strict about stdin and arguments, exit 1 or 2 with one line.

The value for the podman runs is one this machine's runtime can set without CAP_SYS_RESOURCE
(half of the current hard limit) when it lacks the capability, else 1 GiB.
"""
import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402
import podman_run as P  # noqa: E402
from test_cdi_spec import validate, validator  # noqa: E402,F401

CAP_SYS_RESOURCE = 24
GiB = 1 << 30


def has_cap_sys_resource():
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


def settable_value():
    """A limit the runtime here can give a container: 1 GiB with CAP_SYS_RESOURCE, else half
    the current hard limit (page-aligned)."""
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    if has_cap_sys_resource() or hard == resource.RLIM_INFINITY:
        return GiB
    return max(4096, (hard // 2) // 4096 * 4096)


VALUE = settable_value()
CONFIG = [
    {"resourceName": "nic", "rdmaHcaMax": 10, "memlock": str(VALUE),
     "selectors": {"vendors": ["15b3"], "linkTypes": ["ether"]}},
    {"resourceName": "plain", "rdmaHcaMax": 10, "memlock": 0,
     "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"], "numaNodes": [0]}},
    {"resourceName": "unl", "rdmaHcaMax": 10,
     "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"], "numaNodes": [1]}},
]


class Env(K.TestEnv):
    def __init__(self, binary, fixtures):
        super().__init__(binary, fixtures, prefix="rdpm")
        self.binary = pathlib.Path(binary).resolve()
        self.cdi = self.dir / "cdi"

    def daemon(self, node_dir, hook=None, resources=CONFIG):
        hook = str(self.binary) if hook is None else str(hook)
        return super().daemon(self.config(resources), node_dir,
                              extra=["--use-cdi", "--cdi-spec-dir", str(self.cdi),
                                     "--memlock-hook", hook])

    def spec(self, cls):
        return json.loads((self.cdi / ("rdma-dp.io-%s.json" % cls)).read_text())

    def names(self, resource, units):
        c = self.kubelet.wait_registered(resource, units=units).client
        return [x.name for x in c.allocate(["0"]).container_responses[0].cdi_devices]


@pytest.fixture
def env(rdma_dp, fixtures_dir):
    e = Env(rdma_dp, fixtures_dir)
    yield e
    e.close()


@pytest.fixture(scope="module")
def harmless_dgx(fixtures_dir, tmp_path_factory):
    return P.harmless_node(fixtures_dir, "dgx-h100", tmp_path_factory.mktemp("mlk") / "dgx")


def hook_args(value):
    return ["rdma-dp", "hook", "--abi", "1", "--memlock", value]


# ---- the specs ------------------------------------------------------------------------------
def test_specs_carry_the_hook(env, fixtures_dir, validator):
    env.daemon(fixtures_dir / "dgx-h100")
    for r in ("rdma/nic", "rdma/plain", "rdma/unl"):
        env.kubelet.wait_registered(r)
    nic, plain, unl = env.spec("nic"), env.spec("plain"), env.spec("unl")
    assert nic["containerEdits"]["hooks"] == [{
        "hookName": "createRuntime", "path": str(env.binary), "args": hook_args(str(VALUE))}]
    assert unl["containerEdits"]["hooks"][0]["args"] == hook_args("unlimited")
    assert "hooks" not in plain["containerEdits"]  # "memlock": 0 leaves the limit alone
    assert nic["cdiVersion"] == "0.5.0"  # hooks need no newer version
    # The reference CDI library (v0.5.2, what podman 4.3 vendors) loads them and injects the
    # hook as an OCI createRuntime hook.
    rc, out = validate(validator, dir=env.cdi)
    assert rc == 0, json.dumps(out, indent=2)
    # Injection stats every host node, which this machine lacks: the same spec with /dev/null
    # as its nodes shows what the library does with the hook.
    inj = env.dir / "inject"
    inj.mkdir()
    for dev in nic["devices"]:
        dev["containerEdits"]["deviceNodes"] = [{"path": "/dev/null"}]
    nic["containerEdits"].pop("deviceNodes", None)
    (inj / "rdma-dp.io-nic.json").write_text(json.dumps(nic))
    rc, out = validate(validator, dir=inj, inject=["rdma-dp.io/nic=0000:29:00.0"])
    assert rc == 0, json.dumps(out, indent=2)
    hooks = out["inject"]["hooks"]
    assert list(hooks) == ["createRuntime"], hooks
    assert hooks["createRuntime"] == [{"path": str(env.binary),
                                       "args": hook_args(str(VALUE))}], hooks


# ---- podman ---------------------------------------------------------------------------------
def test_podman_non_root_gets_the_limit(env, harmless_dgx):
    """A non-root process sees the configured limit; without the hook, the runtime's own."""
    env.daemon(harmless_dgx)
    names = env.names("rdma/nic", 10)
    r = P.run(cdi_names=names, cdi_dir=env.cdi, dev_root=harmless_dgx / "dev", user="1000:1000")
    assert r.memlock == (VALUE, VALUE), r.memlock
    # the same container without the hook: the runtime's limit, not ours
    plain = env.names("rdma/plain", 10)
    r0 = P.run(cdi_names=plain, cdi_dir=env.cdi, dev_root=harmless_dgx / "dev",
               user="1000:1000")
    assert r0.memlock is not None and r0.memlock != (VALUE, VALUE), r0.memlock
    # a spec that sets RLIMIT_MEMLOCK itself is not ours to override: runc applies it after
    # the createRuntime hooks (see oci-hook.h); measured, so that a runc change shows here
    h = P.harness()
    p = h.podman("run", *P.RUN_FLAGS, "--ulimit", "memlock=65536:65536", "--user", "1000:1000",
                 P.IMAGE, P.BUSYBOX, "sh", "-c", "grep '^Max locked' /proc/1/limits")
    assert p.stdout.split()[3:5] == ["65536", "65536"], p.stdout


def test_podman_unlimited(env, harmless_dgx):
    env.daemon(harmless_dgx)
    names = env.names("rdma/unl", 10)
    r = P.run(cdi_names=names, cdi_dir=env.cdi, dev_root=harmless_dgx / "dev", user="1000:1000",
              check=False)
    if has_cap_sys_resource():
        assert r.returncode == 0, r.stderr
        assert r.memlock == (None, None), r.memlock
    else:
        assert r.returncode != 0
        assert "rdma-dp hook" in r.stderr and "CAP_SYS_RESOURCE" in r.stderr, r.stderr


def test_podman_wrong_abi_or_no_binary_fails_the_start(env, harmless_dgx, tmp_path):
    env.daemon(harmless_dgx, hook=tmp_path / "bin" / "rdma-dp")
    names = env.names("rdma/nic", 10)
    # no binary at the path
    r = P.run(cdi_names=names, cdi_dir=env.cdi, dev_root=harmless_dgx / "dev", check=False)
    assert r.returncode != 0
    assert str(tmp_path / "bin" / "rdma-dp") in r.stderr and "no such file" in r.stderr, r.stderr
    # a binary that speaks another ABI (the spec as a newer rdma-dp would write it)
    (tmp_path / "bin").mkdir()
    shutil.copy(env.binary, tmp_path / "bin" / "rdma-dp")
    other = tmp_path / "cdi2"
    other.mkdir()
    spec = env.spec("nic")
    spec["containerEdits"]["hooks"][0]["args"][3] = "2"
    (other / "rdma-dp.io-nic.json").write_text(json.dumps(spec))
    r = P.run(cdi_names=names, cdi_dir=other, dev_root=harmless_dgx / "dev", check=False)
    assert r.returncode != 0
    assert "asks for hook ABI 2" in r.stderr and "speaks ABI 1" in r.stderr, r.stderr


# ---- the hook itself ------------------------------------------------------------------------
def hook(rdma_dp, args, stdin):
    return subprocess.run([str(rdma_dp), "hook", *args], input=stdin, capture_output=True,
                          timeout=30)


def state(pid, status="creating"):
    return json.dumps({"ociVersion": "1.0.2", "id": "c1", "status": status, "pid": pid,
                       "bundle": "/run/c1", "annotations": {"a": "b"}}).encode()


def test_hook_sets_the_limit_of_the_pid(rdma_dp):
    p = subprocess.Popen(["sleep", "30"])
    try:
        r = hook(rdma_dp, ["--abi", "1", "--memlock", str(VALUE)], state(p.pid))
        assert r.returncode == 0, r.stderr
        assert r.stderr == b""
        lim = [x for x in pathlib.Path("/proc/%d/limits" % p.pid).read_text().splitlines()
               if x.startswith("Max locked memory")][0].split()
        assert lim[3:5] == [str(VALUE), str(VALUE)], lim
    finally:
        p.kill()
        p.wait()


@pytest.mark.parametrize("args,stdin,rc,msg", [
    (["--abi", "1", "--memlock", "1Gi"], b"", 1, b"not JSON"),
    (["--abi", "1", "--memlock", "1Gi"], b"[1]", 1, b"not an object"),
    (["--abi", "1", "--memlock", "1Gi"], state(1, "running"), 1, b"createRuntime"),
    (["--abi", "1", "--memlock", "1Gi"], b"{" + b" " * (1 << 20) + b"}", 1, b"over 1048576"),
    (["--abi", "1", "--memlock", "1Gi"],
     b'{"ociVersion":"1","id":"c","status":"creating","pid":5,"pid":6,"bundle":"/b"}', 1,
     b"duplicate"),
    (["--abi", "3", "--memlock", "1Gi"], state(1), 1, b"asks for hook ABI 3"),
    (["--abi", "1", "--memlock", "0"], state(1), 2, b"not 0"),
    (["--abi", "1", "--memlock", "1GB"], state(1), 2, b"is not \"unlimited\""),
    (["--memlock", "1Gi"], state(1), 2, b"--abi and --memlock are required"),
    (["--abi", "1", "--memlock", "1Gi", "extra"], state(1), 2, b"unexpected argument"),
], ids=["empty", "array", "running", "too-big", "duplicate", "abi", "zero", "unit", "no-abi",
        "extra"])
def test_hook_refuses(rdma_dp, args, stdin, rc, msg):
    r = hook(rdma_dp, args, stdin)
    assert r.returncode == rc, r
    assert msg in r.stderr, r.stderr
    assert r.stderr.startswith(b"rdma-dp hook: ") or rc == 2 and b"rdma-dp" in r.stderr
    assert r.stderr.count(b"\n") == 1, r.stderr


# ---- install-hook (the DaemonSet's init container) ------------------------------------------
def test_install_hook_copies_the_binary(rdma_dp, tmp_path):
    dest = tmp_path / "bin" / "rdma-dp"
    r = subprocess.run([str(rdma_dp), "install-hook", "--to", str(dest)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "No such file or directory" in r.stderr, r  # no directory
    dest.parent.mkdir()
    r = subprocess.run([str(rdma_dp), "install-hook", "--to", str(dest)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "installed" in r.stdout and "hook ABI 1" in r.stdout, r
    assert dest.read_bytes() == pathlib.Path(rdma_dp).read_bytes()
    assert dest.stat().st_mode & 0o7777 == 0o755
    assert sorted(p.name for p in dest.parent.iterdir()) == ["rdma-dp"]  # no temporary left
    ino = dest.stat().st_ino
    r = subprocess.run([str(rdma_dp), "install-hook", "--to", str(dest)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "unchanged" in r.stdout and dest.stat().st_ino == ino, r
    # another binary there (an older rdma-dp): replaced, atomically (a new inode)
    dest.write_bytes(b"#!/bin/sh\nexit 0\n")
    r = subprocess.run([str(rdma_dp), "install-hook", "--to", str(dest)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and "installed" in r.stdout
    assert dest.read_bytes() == pathlib.Path(rdma_dp).read_bytes()
    # the installed copy is a working hook
    r = subprocess.run([str(dest), "hook", "--abi", "1", "--memlock", "1Gi"], input=b"[]",
                       capture_output=True, timeout=30)
    assert r.returncode == 1 and b"not an object" in r.stderr
    r = subprocess.run([str(rdma_dp), "install-hook", "--to", "relative"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
