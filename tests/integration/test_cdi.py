# SPDX-License-Identifier: MIT
"""serve --use-cdi end to end, against the fake kubelet, the reference CDI library and podman:

- each resource keeps one spec, <dir>/rdma-dp.io-<class>.json, kind rdma-dp.io/<class>, a
  device per usable device named by its unit ID, rdma_cm at the top level; stale specs of
  ours go at start and when a resource leaves the config, nobody else's file is touched;
- Allocate answers with cdi_devices (no device specs) naming devices the spec on disk names;
- the workload's variables: in the spec for a shared resource (every container gets every
  device), constants in the spec and per-allocation ones in envs for an exclusive resource;
  in device-spec mode everything in envs;
- the spec follows the node (a device unplugged leaves it) and a spec dir that cannot be
  used leaves the daemon serving device specs;
- the reference CDI Go library (Debian's v0.5.2, tests/tools/cdi-validate, and the current one,
  tests/tools/cdi-validate-current) loads every spec the daemon wrote;
- podman (Debian's 4.3) runs a container with the names Allocate returned and gets exactly
  the nodes and variables expected; the same in device-spec mode from devices and envs.
"""
import json
import os
import pathlib
import signal
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
import kubelet as K  # noqa: E402
import podman_run as P  # noqa: E402
import sysfsgen  # noqa: E402
from test_cdi_spec import validate, validator  # noqa: E402,F401

COMPUTE = [("0000:18:00.0", "mlx5_0", 0), ("0000:40:00.0", "mlx5_3", 1),
           ("0000:4f:00.0", "mlx5_4", 2), ("0000:5e:00.0", "mlx5_5", 3),
           ("0000:9a:00.0", "mlx5_6", 4), ("0000:c0:00.0", "mlx5_9", 5),
           ("0000:ce:00.0", "mlx5_10", 6), ("0000:dc:00.0", "mlx5_11", 7)]  # id, ibdev, uverbs
STORAGE = [("0000:29:00.0", "mlx5_1", 8), ("0000:29:00.1", "mlx5_2", 9),
           ("0000:a9:00.0", "mlx5_7", 10), ("0000:a9:00.1", "mlx5_8", 11)]
CONFIG = [
    {"resourceName": "compute", "mode": "exclusive",
     "envFromDevices": ["NCCL_IB_HCA", "UCX_NET_DEVICES"], "env": {"NCCL_IB_TC": "106"},
     "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}},
    {"resourceName": "storage", "rdmaHcaMax": 10, "envFromDevices": ["UCX_NET_DEVICES"],
     "env": {"NCCL_IB_TIMEOUT": "22"},
     "selectors": {"vendors": ["15b3"], "linkTypes": ["ether"]}},
]


def nodes_of(n):
    return ["/dev/infiniband/%s%d" % (k, n) for k in ("issm", "umad", "uverbs")]


class Env(K.TestEnv):
    def __init__(self, binary, fixtures):
        super().__init__(binary, fixtures, prefix="rdpc")
        self.cdi = self.dir / "cdi"

    def daemon(self, node_dir, cdi=True, resources=CONFIG, cdi_dir=None, hook="none"):
        # No memlock hook unless asked: the default (unlimited, /opt/rdma-dp/bin/rdma-dp) needs
        # an installed binary and CAP_SYS_RESOURCE; test_memlock.py tests the hook.
        extra = ["--use-cdi", "--cdi-spec-dir", str(cdi_dir or self.cdi),
                 "--memlock-hook", str(hook)] if cdi else []
        return super().daemon(self.config(resources), node_dir, extra=extra)

    def spec(self, cls):
        return json.loads((self.cdi / ("rdma-dp.io-%s.json" % cls)).read_text())


@pytest.fixture
def env(make_env):
    return make_env(Env)


def devices(cr):
    return sorted(s.host_path for s in cr.devices)


# ---------------------------------------------------------------------------------------------
def test_one_spec_per_resource_stale_ones_removed(env, fixtures_dir):
    env.cdi.mkdir()
    (env.cdi / "rdma-dp.io-gone.json").write_text("{}\n")  # a previous run's resource
    (env.cdi / "nvidia.com-net-rdma.yaml").write_text("x\n")  # another plugin's
    (env.cdi / "other.json").write_text("{}\n")
    d = env.daemon(fixtures_dir / "dgx-h100")
    env.kubelet.wait_registered("rdma/compute", units=8)
    env.kubelet.wait_registered("rdma/storage", units=10)
    assert sorted(os.listdir(env.cdi)) == ["nvidia.com-net-rdma.yaml", "other.json",
                                           "rdma-dp.io-compute.json", "rdma-dp.io-storage.json"]
    d.wait_log("event=cdi-spec-removed", "file=rdma-dp.io-gone.json")
    line = d.wait_log("event=cdi-spec-written", "resource=rdma/compute")
    assert "kind=rdma-dp.io/compute" in line and "devices=8" in line

    s = env.spec("compute")
    assert s["cdiVersion"] == "0.5.0" and s["kind"] == "rdma-dp.io/compute"
    assert [dv["name"] for dv in s["devices"]] == [i for i, _, _ in COMPUTE]
    for dv, (_, _, n) in zip(s["devices"], COMPUTE):
        assert [(x["path"], x["hostPath"], x["permissions"])
                for x in dv["containerEdits"]["deviceNodes"]] == [(p, p, "rw") for p in nodes_of(n)]
    assert s["containerEdits"]["deviceNodes"] == [
        {"path": "/dev/infiniband/rdma_cm", "hostPath": "/dev/infiniband/rdma_cm",
         "permissions": "rw"}]
    # Exclusive: only the constants are the same for every container.
    assert s["containerEdits"]["env"] == ["NCCL_IB_TC=106"]
    # Shared: every container gets every device: all of it is constant.
    assert env.spec("storage")["containerEdits"]["env"] == [
        "RDMA_DEVICE_RDMA_STORAGE=mlx5_1:1,mlx5_2:1,mlx5_7:1,mlx5_8:1",
        "UCX_NET_DEVICES=mlx5_1:1,mlx5_2:1,mlx5_7:1,mlx5_8:1", "NCCL_IB_TIMEOUT=22"]


def test_allocate_names_cdi_devices(env, fixtures_dir):
    env.daemon(fixtures_dir / "dgx-h100")
    c = env.kubelet.wait_registered("rdma/compute", units=8).client
    # kubelet's order is a Go set's: the variables follow the unit IDs all the same.
    r = c.allocate(["0000:c0:00.0", "0000:18:00.0"])
    cr = r.container_responses[0]
    assert not cr.devices
    assert [x.name for x in cr.cdi_devices] == ["rdma-dp.io/compute=0000:18:00.0",
                                               "rdma-dp.io/compute=0000:c0:00.0"]
    assert dict(cr.envs) == {"RDMA_DEVICE_RDMA_COMPUTE": "mlx5_0:1,mlx5_9:1",
                             "NCCL_IB_HCA": "=mlx5_0:1,mlx5_9:1",
                             "UCX_NET_DEVICES": "mlx5_0:1,mlx5_9:1"}
    s = env.kubelet.wait_registered("rdma/storage", units=10).client
    cr = s.allocate(["3"]).container_responses[0]
    assert not cr.devices and not cr.envs
    assert [x.name for x in cr.cdi_devices] == ["rdma-dp.io/storage=" + i for i, _, _ in STORAGE]


def test_device_spec_mode_carries_every_variable(env, fixtures_dir):
    env.daemon(fixtures_dir / "dgx-h100", cdi=False)
    c = env.kubelet.wait_registered("rdma/compute", units=8).client
    cr = c.allocate(["0000:dc:00.0", "0000:40:00.0"]).container_responses[0]
    assert not cr.cdi_devices
    assert devices(cr) == sorted(nodes_of(1) + nodes_of(7) + ["/dev/infiniband/rdma_cm"])
    assert dict(cr.envs) == {"RDMA_DEVICE_RDMA_COMPUTE": "mlx5_3:1,mlx5_11:1",
                             "NCCL_IB_HCA": "=mlx5_3:1,mlx5_11:1",
                             "UCX_NET_DEVICES": "mlx5_3:1,mlx5_11:1", "NCCL_IB_TC": "106"}
    assert not (env.cdi).exists()  # no spec dir touched without --use-cdi
    s = env.kubelet.wait_registered("rdma/storage", units=10).client
    cr = s.allocate(["0"]).container_responses[0]
    assert dict(cr.envs) == {"RDMA_DEVICE_RDMA_STORAGE": "mlx5_1:1,mlx5_2:1,mlx5_7:1,mlx5_8:1",
                             "UCX_NET_DEVICES": "mlx5_1:1,mlx5_2:1,mlx5_7:1,mlx5_8:1",
                             "NCCL_IB_TIMEOUT": "22"}


def test_spec_follows_the_node_and_the_config(env, fixtures_dir):
    node = env.dir / "node"
    sysfsgen.copy_node(fixtures_dir / "dgx-h100", node)
    d = env.daemon(node)
    c = env.kubelet.wait_registered("rdma/compute", units=8).client
    m = d.mark()
    sysfsgen.unplug(node / "sys", node / "dev", "mlx5_3")
    d.signal(signal.SIGHUP)
    c.wait_snapshot(lambda s: len(s.devices) == 7)
    d.wait_log("event=cdi-spec-written", "resource=rdma/compute", "devices=7", start=m)
    assert "0000:40:00.0" not in [dv["name"] for dv in env.spec("compute")["devices"]]
    cr = c.allocate(["0000:18:00.0"]).container_responses[0]
    assert [x.name for x in cr.cdi_devices] == ["rdma-dp.io/compute=0000:18:00.0"]
    # The storage resource leaves the config: its spec goes, the other stays.
    m = d.mark()
    env.config(CONFIG[:1])
    d.signal(signal.SIGHUP)
    d.wait_log("event=cdi-spec-removed", "file=rdma-dp.io-storage.json", start=m)
    assert sorted(os.listdir(env.cdi)) == ["rdma-dp.io-compute.json"]


def test_unusable_spec_dir_means_device_specs(env, fixtures_dir):
    blocker = env.dir / "file"
    blocker.write_text("x")
    d = env.daemon(fixtures_dir / "dgx-h100", cdi_dir=blocker / "cdi")
    c = env.kubelet.wait_registered("rdma/compute", units=8).client
    d.wait_log("event=cdi-unavailable", "level=error")
    cr = c.allocate(["0000:18:00.0"]).container_responses[0]
    assert not cr.cdi_devices and devices(cr) == sorted(nodes_of(0) + ["/dev/infiniband/rdma_cm"])
    assert dict(cr.envs)["NCCL_IB_TC"] == "106"  # no spec to carry the constants


def test_resource_without_a_class_keeps_device_specs(env, fixtures_dir):
    # A one-letter class would panic the CDI library podman 4.3 vendors: no spec for it.
    d = env.daemon(fixtures_dir / "dgx-h100",
                   resources=[dict(CONFIG[1], resourceName="s"), CONFIG[0]])
    c = env.kubelet.wait_registered("rdma/s", units=10).client
    d.wait_log("event=cdi-no-class", "resource=rdma/s")
    assert not c.allocate(["0"]).container_responses[0].cdi_devices
    env.kubelet.wait_registered("rdma/compute", units=8)
    assert sorted(os.listdir(env.cdi)) == ["rdma-dp.io-compute.json"]


# ---- the reference CDI library ------------------------------------------------------------
def test_reference_library_loads_the_daemons_specs(env, fixtures_dir, validator):  # noqa: F811
    env.daemon(fixtures_dir / "dgx-h100")
    env.kubelet.wait_registered("rdma/compute", units=8)
    env.kubelet.wait_registered("rdma/storage", units=10)
    specs = sorted(env.cdi.glob("rdma-dp.io-*.json"))
    assert len(specs) == 2
    rc, out = validate(validator, *specs, dir=env.cdi)
    assert rc == 0, out
    text = json.dumps(out)
    for i, _, _ in COMPUTE:
        assert "rdma-dp.io/compute=" + i in text
    for i, _, _ in STORAGE:
        assert "rdma-dp.io/storage=" + i in text


# ---- podman ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def harmless_dgx(fixtures_dir, tmp_path_factory):
    return P.harmless_node(fixtures_dir, "dgx-h100", tmp_path_factory.mktemp("cdi") / "dgx")


def expect_nodes(paths):
    return {pathlib.Path(p).name: ("c",) + P.HARMLESS for p in paths}


def test_podman_runs_the_cdi_answer(env, harmless_dgx):
    env.daemon(harmless_dgx)
    c = env.kubelet.wait_registered("rdma/compute", units=8).client
    cr = c.allocate(["0000:4f:00.0", "0000:18:00.0"]).container_responses[0]
    names = [x.name for x in cr.cdi_devices]
    r = P.run(cdi_names=names, envs=dict(cr.envs), cdi_dir=env.cdi, dev_root=harmless_dgx / "dev")
    assert r.nodes == expect_nodes(nodes_of(0) + nodes_of(2) + ["rdma_cm"])
    assert r.added_env == {"RDMA_DEVICE_RDMA_COMPUTE": "mlx5_0:1,mlx5_4:1",
                           "NCCL_IB_HCA": "=mlx5_0:1,mlx5_4:1",
                           "UCX_NET_DEVICES": "mlx5_0:1,mlx5_4:1", "NCCL_IB_TC": "106"}
    # The shared resource: names only; the spec carries the variables.
    s = env.kubelet.wait_registered("rdma/storage", units=10).client
    cr = s.allocate(["0"]).container_responses[0]
    r = P.run(cdi_names=[x.name for x in cr.cdi_devices], envs=dict(cr.envs), cdi_dir=env.cdi,
              dev_root=harmless_dgx / "dev")
    assert r.nodes == expect_nodes(sum((nodes_of(n) for _, _, n in STORAGE), []) + ["rdma_cm"])
    assert r.added_env == {"RDMA_DEVICE_RDMA_STORAGE": "mlx5_1:1,mlx5_2:1,mlx5_7:1,mlx5_8:1",
                           "UCX_NET_DEVICES": "mlx5_1:1,mlx5_2:1,mlx5_7:1,mlx5_8:1",
                           "NCCL_IB_TIMEOUT": "22"}


def test_podman_runs_the_device_spec_answer(env, harmless_dgx):
    env.daemon(harmless_dgx, cdi=False)
    c = env.kubelet.wait_registered("rdma/compute", units=8).client
    cr = c.allocate(["0000:ce:00.0"]).container_responses[0]
    r = P.run(devices=[s.host_path for s in cr.devices], envs=dict(cr.envs),
              dev_root=harmless_dgx / "dev")
    assert r.nodes == expect_nodes(nodes_of(6) + ["rdma_cm"])
    assert r.added_env == {"RDMA_DEVICE_RDMA_COMPUTE": "mlx5_10:1", "NCCL_IB_HCA": "=mlx5_10:1",
                           "UCX_NET_DEVICES": "mlx5_10:1", "NCCL_IB_TC": "106"}
