# SPDX-License-Identifier: MIT
"""A device is usable only when a pod could use it: rdma-dp serve against the fake kubelet on
nodes whose /dev does not match sysfs. A pool of unusable devices stays registered with its
units Unhealthy and Allocate fails with FAILED_PRECONDITION naming the device and the problem;
Allocate never hands out a node whose number is not the one sysfs names."""
import os
import time
import stat
import sys

import grpc
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def env(make_env):
    """kubelet.TestEnv; env.copy(node) gives copies of fixture nodes to break."""
    return make_env(prefix="rdpu")


def test_pool_of_an_unusable_device(env, fixtures_dir):
    """broken: mlx5_5 (ibp97s0) has no /dev/infiniband/uverbs5, and the node no rdma_cm."""
    cfg = env.config([{"resourceName": "only5", "rdmaHcaMax": 10,
                       "selectors": {"ifNames": ["ibp97s0"]}}])
    env.daemon(cfg, fixtures_dir / "broken")
    reg = env.kubelet.wait_registered("rdma/only5", units=10, healthy=0)
    snap = reg.client.latest()
    assert [d.health for d in snap.devices] == ["Unhealthy"] * 10
    with pytest.raises(grpc.RpcError) as ei:
        reg.client.allocate(["0"])
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    msg = ei.value.details()
    assert "mlx5_5" in msg and "uverbs5" in msg, msg
    assert "/dev/infiniband/uverbs5 missing" in msg and "rdma_cm missing" in msg, msg


def test_allocate_checks_device_numbers(env):
    """A uverbs node replaced under a running daemon by one with another number (what a
    stale /dev or a reused name looks like) is never handed out."""
    node = env.copy("seed000")
    uverbs = node / "dev" / "infiniband" / "uverbs0"
    if not uverbs.is_char_device():
        pytest.skip("fixture nodes are regular files here (mknod refused)")
    want = (node / "sys" / "class" / "infiniband_verbs" / "uverbs0" / "dev").read_text().strip()
    cfg = env.config([{"resourceName": "a", "rdmaHcaMax": 4,
                       "selectors": {"vendors": ["15b3"], "deviceIDs": ["101d"]}}])
    env.daemon(cfg, node)
    reg = env.kubelet.wait_registered("rdma/a", units=4, healthy=4)
    paths = [d.host_path for d in reg.client.allocate(["0"]).container_responses[0].devices]
    assert "/dev/infiniband/uverbs0" in paths and "/dev/infiniband/rdma_cm" in paths
    st = os.stat(uverbs)
    uverbs.unlink()
    os.mknod(uverbs, 0o600 | stat.S_IFCHR, os.makedev(os.major(st.st_rdev), 250))
    with pytest.raises(grpc.RpcError) as ei:
        reg.client.allocate(["1"])
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    msg = ei.value.details()
    assert ("mlx5_0: /dev/infiniband/uverbs0 is %d:250, sysfs uverbs0 says %s"
            % (os.major(st.st_rdev), want)) in msg, msg
    # the rescan it asked for made the device unusable: the pool's units went Unhealthy
    reg.client.wait_snapshot(lambda s: {d.health for d in s.devices} == {"Unhealthy"}, timeout=5)
    # put back: answered again, once the daemon's dev watch has rescanned (well within 1 s)
    uverbs.unlink()
    os.mknod(uverbs, 0o600 | stat.S_IFCHR, st.st_rdev)
    reg.client.wait_snapshot(lambda s: {d.health for d in s.devices} == {"Healthy"}, timeout=5)
    paths = [d.host_path for d in reg.client.allocate(["2"]).container_responses[0].devices]
    assert "/dev/infiniband/uverbs0" in paths


def test_allocate_checks_whose_node_it_is(env):
    """The kernel gives a freed uverbs number to the next device registered: after an unplug
    and a plug, /dev/infiniband/uverbs0 can be another HCA's with the very number sysfs names
    for uverbs0. Allocate asks sysfs whose node it is (devtmpfs re-created the node: the dev
    watch saw it, so Allocate checks) and never hands out another's."""
    node = env.copy("seed000")
    ibdev = node / "sys" / "class" / "infiniband_verbs" / "uverbs0" / "ibdev"
    uverbs = node / "dev" / "infiniband" / "uverbs0"
    cfg = env.config([{"resourceName": "a", "rdmaHcaMax": 4,
                       "selectors": {"vendors": ["15b3"], "deviceIDs": ["101d"]}}])
    env.daemon(cfg, node)
    reg = env.kubelet.wait_registered("rdma/a", units=4, healthy=4)
    assert "/dev/infiniband/uverbs0" in [
        d.host_path for d in reg.client.allocate(["0"]).container_responses[0].devices]

    cls = node / "sys" / "class" / "infiniband_verbs" / "uverbs0"

    def recreate_node():
        # as the kernel does on a re-registration: a new class entry (created before the old
        # one goes, so that ext4 cannot hand it the old inode number: kernfs never reuses one),
        # a new /dev node
        target = os.readlink(cls)
        os.symlink(target, cls.with_name("uverbs0.new"))
        os.rename(cls.with_name("uverbs0.new"), cls)
        st = os.lstat(uverbs)
        uverbs.unlink()
        if stat.S_ISCHR(st.st_mode):
            os.mknod(uverbs, st.st_mode, st.st_rdev)
        else:
            uverbs.write_text("")

    ibdev.write_text("mlx5_9\n")  # uverbs0 is another device's now
    recreate_node()
    with pytest.raises(grpc.RpcError) as ei:
        reg.client.allocate(["1"])
    assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    msg = ei.value.details()
    assert "mlx5_0: " in msg and ("now belongs to mlx5_9" in msg or "uverbs" in msg), msg
    # the rescan that followed took mlx5_0's uverbs away from it: the units went Unhealthy
    reg.client.wait_snapshot(lambda s: {d.health for d in s.devices} == {"Unhealthy"}, timeout=5)
    ibdev.write_text("mlx5_0\n")
    recreate_node()
    reg.client.wait_snapshot(lambda s: {d.health for d in s.devices} == {"Healthy"}, timeout=5)
    for _ in range(50):  # the rescan that follows the node's re-creation
        try:
            devs = reg.client.allocate(["2"]).container_responses[0].devices
            break
        except grpc.RpcError:
            time.sleep(0.1)
    assert "/dev/infiniband/uverbs0" in [d.host_path for d in devs]
