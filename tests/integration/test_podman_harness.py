# SPDX-License-Identifier: MIT
"""The podman harness (podman_run.py) on its own, before it judges rdma-dp's answers: the
fixture nodes it makes are harmless yet usable to rdma-dp, a device-spec run gets exactly the
nodes and variables asked for, podman 4.3 reads a hand-written CDI spec from the test's dir,
and refuses a spec it should refuse (so a CDI test that passes proves something).

Skips (with the reason) where podman cannot run here; see podman_run.py.
"""
import json
import os
import pathlib
import stat

import pytest

import podman_run as P

HARMLESS = ("c",) + P.HARMLESS


def _discover(run, node):
    p = run("discover", "--sysfs-root", node / "sys", "--dev-root", node / "dev", "-o", "json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.fixture(scope="module")
def dgx(fixtures_dir, tmp_path_factory):
    return P.harmless_node(fixtures_dir, "dgx-h100", tmp_path_factory.mktemp("pm") / "dgx")


@pytest.mark.parametrize("node", ["seed000", "dgx-h100", "sriov", "rxe"])
def test_harmless_node_is_usable(run, fixtures_dir, tmp_path, node):
    before = _discover(run, fixtures_dir / node)
    n = P.harmless_node(fixtures_dir, node, tmp_path / node)
    after = _discover(run, n)
    ib = n / "dev" / "infiniband"
    for ent in os.listdir(ib):
        st = os.lstat(ib / ent)
        assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 \
            and os.minor(st.st_rdev) == 3, ent
        # the mode is kept (umad/issm 0600, uverbs/rdma_cm 0666)
        orig = os.lstat(fixtures_dir / node / "dev" / "infiniband" / ent)
        assert stat.S_IMODE(st.st_mode) == stat.S_IMODE(orig.st_mode), ent
    for cls in ("infiniband_verbs", "infiniband_mad"):
        for ent in os.listdir(n / "sys" / "class" / cls):
            if ent != "abi_version":
                assert (n / "sys" / "class" / cls / ent / "dev").read_text() == "1:3\n"
    assert (n / "sys" / "class" / "misc" / "rdma_cm" / "dev").read_text() == "1:3\n"
    assert after["devices"], after
    assert [(d["name"], d["usable"], d["char_devices"]) for d in after["devices"]] == \
        [(d["name"], d["usable"], d["char_devices"]) for d in before["devices"]]
    assert all(d["usable"] and not d["problems"] for d in after["devices"]), after
    assert after["rdma_cm"] == "/dev/infiniband/rdma_cm"


def test_harmless_nodes_need_their_sysfs_numbers(run, fixtures_dir, tmp_path):
    """Why harmless_node rewrites sysfs: rdma-dp checks a node's number against sysfs, so 1:3
    nodes alone make the device unusable (the check harmless_node keeps satisfied is real)."""
    n = tmp_path / "seed000"
    P.sysfsgen.copy_node(fixtures_dir / "seed000", n)
    uv = n / "dev" / "infiniband" / "uverbs0"
    os.unlink(uv)
    try:
        os.mknod(uv, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError as e:
        pytest.skip("mknod refused (not root?): %s" % e)
    d = _discover(run, n)["devices"][0]
    assert not d["usable"], d
    assert "uverbs0" in json.dumps(d["problems"]), d


@pytest.fixture(scope="module")
def pm():
    return P.harness()


def test_bare_container(pm):
    """The probe run: no /dev/infiniband, and podman's own variables are PODMAN_ENV exactly
    (what added_env leaves out)."""
    r = pm.probe
    assert r.nodes == {} and "@@NOIB" in r.stdout, r.stdout
    assert set(r.env) == P.PODMAN_ENV, r.env
    assert r.added_env == {}
    print("podman import %.2fs, bare run %.2fs" % (pm.import_seconds, r.seconds))


def test_device_spec_mode(pm, dgx):
    """As kubelet passes an Allocate answer's DeviceSpecs (host path = container path) to the
    runtime, with the fixture's dev dir seen as the host's /dev: exactly the asked nodes."""
    envs = {"RDMA_DEVICE_RDMA_TEST": "mlx5_1:1", "NCCL_IB_HCA": "=mlx5_1:1",
            "SPACES": "a b  c", "EMPTY": ""}
    r = P.run(devices=["/dev/infiniband/uverbs8", "/dev/infiniband/rdma_cm"], envs=envs,
              dev_root=dgx / "dev")
    assert r.nodes == {"uverbs8": HARMLESS, "rdma_cm": HARMLESS}, r.stdout
    assert r.added_env == envs
    print("podman run, device-spec mode, 2 nodes: %.2fs" % r.seconds)


def test_device_spec_mode_host_container_pair(pm, dgx):
    """Without the namespace: a fixture path on the host side, the /dev path in the container."""
    ib = dgx / "dev" / "infiniband"
    r = P.run(devices=[(ib / "umad0", "/dev/infiniband/umad0"),
                       (ib / "uverbs0", "/dev/infiniband/uverbs0")], envs={"X": "1"})
    assert r.nodes == {"umad0": HARMLESS, "uverbs0": HARMLESS}, r.stdout
    assert r.added_env == {"X": "1"}


def _spec(version="0.5.0", host_prefix="/dev/infiniband"):
    """What the design asks of rdma-dp's spec (docs: issue10-design.md), written by hand."""
    def nodes(*names):
        return [{"path": "/dev/infiniband/" + n, "hostPath": host_prefix + "/" + n,
                 "permissions": "rw"} for n in names]
    return {
        "cdiVersion": version,
        "kind": "rdma-dp.io/testclass",
        "devices": [
            {"name": "0000:18:00.0",
             "containerEdits": {"deviceNodes": nodes("uverbs0", "umad0", "issm0")}},
            {"name": "0000:29:00.0",
             "containerEdits": {"deviceNodes": nodes("uverbs8", "umad8", "issm8")}},
            {"name": "0000:29:00.1",
             "containerEdits": {"deviceNodes": nodes("uverbs9", "umad9", "issm9")}},
        ],
        "containerEdits": {"env": ["NCCL_IB_TC=106", "RDMA_TEST_SPACES=a b"],
                           "deviceNodes": nodes("rdma_cm")},
    }


def _write(d, spec):
    d.mkdir(exist_ok=True)
    (d / "rdma-dp.io-testclass.json").write_text(json.dumps(spec, indent=2) + "\n")
    return d


def test_cdi_mode(pm, dgx, tmp_path):
    """podman reads the test's spec dir as /var/run/cdi: the named devices' nodes, rdma_cm
    and the spec's env, nothing of the device not named."""
    cdi = _write(tmp_path / "cdi", _spec())
    r = P.run(cdi_names=["rdma-dp.io/testclass=0000:18:00.0",
                         "rdma-dp.io/testclass=0000:29:00.1"],
              envs={"RDMA_DEVICE_RDMA_TESTCLASS": "mlx5_0:1,mlx5_2:1"},
              cdi_dir=cdi, dev_root=dgx / "dev")
    assert r.nodes == {n: HARMLESS for n in ("uverbs0", "umad0", "issm0", "uverbs9", "umad9",
                                             "issm9", "rdma_cm")}, r.stdout
    assert r.added_env == {"NCCL_IB_TC": "106", "RDMA_TEST_SPACES": "a b",
                           "RDMA_DEVICE_RDMA_TESTCLASS": "mlx5_0:1,mlx5_2:1"}
    print("podman run, CDI mode, 2 devices: %.2fs" % r.seconds)


def test_cdi_mode_host_paths_of_the_fixture(pm, dgx, tmp_path):
    """hostPath naming the fixture's own nodes works without the /dev copy too."""
    cdi = _write(tmp_path / "cdi", _spec(host_prefix=str(dgx / "dev" / "infiniband")))
    r = P.run(cdi_names=["rdma-dp.io/testclass=0000:29:00.0"], cdi_dir=cdi)
    assert r.nodes == {n: HARMLESS for n in ("uverbs8", "umad8", "issm8", "rdma_cm")}, r.stdout
    assert r.added_env == {"NCCL_IB_TC": "106", "RDMA_TEST_SPACES": "a b"}


@pytest.mark.parametrize("version", ["0.6.0", "1.0.0", "v0.5.0"])
def test_cdi_version_refused(pm, dgx, tmp_path, version):
    """podman 4.3.1 (CDI v0.5.2) refuses any other cdiVersion: the file is dropped and the name
    unresolvable. With the same spec at 0.5.0 test_cdi_mode passes: the check is real."""
    cdi = _write(tmp_path / "cdi", _spec(version=version))
    r = P.run(cdi_names=["rdma-dp.io/testclass=0000:18:00.0"], cdi_dir=cdi,
              dev_root=dgx / "dev", check=False)
    assert r.returncode != 0, r.stdout
    assert "unresolvable CDI devices rdma-dp.io/testclass=0000:18:00.0" in r.stderr, r.stderr


def test_cdi_unknown_device_and_missing_host_node(pm, dgx, tmp_path):
    cdi = _write(tmp_path / "cdi", _spec())
    r = P.run(cdi_names=["rdma-dp.io/testclass=0000:99:00.0"], cdi_dir=cdi,
              dev_root=dgx / "dev", check=False)
    assert r.returncode != 0 and "unresolvable CDI devices" in r.stderr, r.stderr
    # without the fixture as /dev the host has no /dev/infiniband/uverbs0
    if os.path.exists("/dev/infiniband/uverbs0"):
        pytest.skip("this host has /dev/infiniband/uverbs0")
    r = P.run(cdi_names=["rdma-dp.io/testclass=0000:18:00.0"], cdi_dir=cdi, check=False)
    assert r.returncode != 0 and "failed to stat CDI host device" in r.stderr, r.stderr


def test_nothing_leaks_to_the_host(pm, dgx, tmp_path):
    """The spec dir and the /dev copy live in podman's private mount namespace only."""
    cdi = _write(tmp_path / "cdi", _spec())
    before = sorted(os.listdir("/var/run/cdi")) if os.path.isdir("/var/run/cdi") else []
    P.run(cdi_names=["rdma-dp.io/testclass=0000:18:00.0"], cdi_dir=cdi, dev_root=dgx / "dev")
    assert os.path.isdir("/var/run/cdi")  # the mount point, made when missing
    assert sorted(os.listdir("/var/run/cdi")) == before
    assert "rdma-dp.io-testclass.json" not in before
    mounts = pathlib.Path("/proc/self/mountinfo").read_text()
    assert "rdp-dev" not in mounts and str(cdi) not in mounts
    assert not os.path.exists("/dev/infiniband/issm9") or os.stat(
        "/dev/infiniband/issm9").st_rdev != os.makedev(1, 3)
