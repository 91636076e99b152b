# SPDX-License-Identifier: MIT
"""Exclusive resources ("mode": "exclusive") against the fake kubelet over real unix sockets:
one unit per usable device named by its PCI address, per-unit health and NUMA node, Allocate
handing out exactly the units' char devices plus rdma_cm, GetPreferredAllocation advertised
(in the RegisterRequest and GetDevicePluginOptions) and answered from the PCIe tree, called
the way kubelet's device manager calls it (must_include = reused devices, allocation_size =
the whole request, candidates narrowed by the Topology Manager's NUMA hint)."""
import json
import os
import pathlib
import subprocess
import sys

import grpc
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

RES = "rdma/nics"
# dgx-h100: the 8 compute HCAs (InfiniBand), by PCI address, with NUMA node and ibdev.
DGX_COMPUTE = [("0000:18:00.0", 0, "mlx5_0"), ("0000:40:00.0", 0, "mlx5_3"),
               ("0000:4f:00.0", 0, "mlx5_4"), ("0000:5e:00.0", 0, "mlx5_5"),
               ("0000:9a:00.0", 1, "mlx5_6"), ("0000:c0:00.0", 1, "mlx5_9"),
               ("0000:ce:00.0", 1, "mlx5_10"), ("0000:dc:00.0", 1, "mlx5_11")]


@pytest.fixture
def env(make_env):
    return make_env(prefix="rdpx")


def exclusive(name="nics", **sel):
    return {"resourceName": name, "mode": "exclusive", "selectors": sel}


def char_devices(rdma_dp, fixtures_dir, node):
    out = subprocess.run([str(rdma_dp), "discover", "--sysfs-root", str(fixtures_dir / node / "sys"),
                          "--dev-root", str(fixtures_dir / node / "dev"), "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    return {d["name"]: d["char_devices"] for d in json.loads(out)["devices"]}


def units(snap):
    return [(d.ID, d.health, [n.ID for n in d.topology.nodes] if d.HasField("topology") else None)
            for d in snap.devices]


def paths(container_response):
    return sorted(s.host_path for s in container_response.devices)


# ---------------------------------------------------------------------------------------------
def test_units_are_devices_by_pci_address(env):
    env.daemon(env.config([exclusive(vendors=["15b3"], linkTypes=["infiniband"])]), "dgx-h100")
    reg = env.kubelet.wait_registered(RES, units=8, healthy=8)
    req = [r for r in env.kubelet.requests if r.resource_name == RES][-1]
    # kubelet reads the options from GetDevicePluginOptions; the RegisterRequest says the same.
    assert req.options.get_preferred_allocation_available
    assert reg.options.get_preferred_allocation_available
    assert not reg.options.pre_start_required
    assert units(reg.client.latest()) == [(a, "Healthy", [numa]) for a, numa, _ in DGX_COMPUTE]
    line = env.daemons[0].wait_log("event=registered", "resource=" + RES)
    assert "units=8" in line and "healthy=8" in line
    line = env.daemons[0].wait_log("event=pool", "resource=" + RES)
    assert "sharing=exclusive" in line and "numa=per-unit" in line


def test_allocate_gives_exactly_the_units_devices(env, rdma_dp, fixtures_dir):
    env.daemon(env.config([exclusive(vendors=["15b3"], linkTypes=["infiniband"])]), "dgx-h100")
    c = env.kubelet.wait_registered(RES, units=8).client
    cdevs = char_devices(rdma_dp, fixtures_dir, "dgx-h100")
    resp = c.allocate(["0000:40:00.0"], ["0000:dc:00.0", "0000:18:00.0"])
    assert paths(resp.container_responses[0]) == sorted(
        cdevs["mlx5_3"] + ["/dev/infiniband/rdma_cm"])
    assert paths(resp.container_responses[1]) == sorted(
        cdevs["mlx5_11"] + cdevs["mlx5_0"] + ["/dev/infiniband/rdma_cm"])
    for cr in resp.container_responses:
        assert all(s.container_path == s.host_path and s.permissions == "rwm"
                   for s in cr.devices)


def invalid(fn, *args):
    with pytest.raises(grpc.RpcError) as e:
        fn(*args)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()
    return e.value.details()


def test_allocate_refuses_unknown_duplicate_and_unhealthy(env):
    env.daemon(env.config([exclusive(vendors=["15b3"])]), "port-down")
    reg = env.kubelet.wait_registered(RES, units=2, healthy=0)
    assert [u[1] for u in units(reg.client.latest())] == ["Unhealthy", "Unhealthy"]
    c = reg.client
    msg = invalid(c.allocate, ["0000:17:00.0", "0"])
    assert 'unknown device IDs "0"' in msg and '"0000:17:00.0"' in msg
    msg = invalid(c.allocate, ["0000:17:00.0", "0000:17:00.0"])
    assert 'duplicate device IDs "0000:17:00.0"' in msg
    assert 'unhealthy device IDs "0000:17:00.0" (mlx5_0: no active port)' in msg
    msg = invalid(c.allocate, ["0000:65:00.0"])
    assert 'unhealthy device IDs "0000:65:00.0" (mlx5_1: no active port)' in msg


def test_unusable_device_is_no_unit(env, fixtures_dir):
    # dgx-h100 without mlx5_4's uverbs node (uverbs2): 7 units; asking for it names why.
    node = env.dir / "node"
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "fixtures"))
    import sysfsgen
    sysfsgen.copy_node(fixtures_dir / "dgx-h100", node)
    (node / "dev" / "infiniband" / "uverbs2").unlink()
    env.daemon(env.config([exclusive(vendors=["15b3"], linkTypes=["infiniband"])]), node)
    reg = env.kubelet.wait_registered(RES, units=7, healthy=7)
    ids = [u[0] for u in units(reg.client.latest())]
    assert "0000:4f:00.0" not in ids and "0000:18:00.0" in ids
    msg = invalid(reg.client.allocate, ["0000:4f:00.0"])
    assert 'unknown device IDs "0000:4f:00.0"' in msg
    assert "mlx5_4 is unusable: /dev/infiniband/uverbs2 missing" in msg


def test_sf_and_virtual_unit_ids(env):
    env.daemon(env.config([exclusive("cx", vendors=["15b3"]),
                           exclusive("others", drivers=["ice", "bnxt_en"])]), "irdma-bnxt")
    snap = env.kubelet.wait_registered("rdma/cx", units=3).client.latest()
    # The SF is named by its PF's address and its sfnum (devlink's), not its ibdev name.
    assert [u[0] for u in units(snap)] == ["0000:03:00.0", "0000:03:00.0-sf2", "0000:03:00.1"]
    snap = env.kubelet.wait_registered("rdma/others", units=2).client.latest()
    assert [u[0] for u in units(snap)] == ["0000:17:00.0", "0000:c1:00.0"]


def test_rxe_unit_is_its_ibdev_without_topology(env):
    env.daemon(env.config([exclusive("soft", ifNames=["eth0"])]), "rxe")
    snap = env.kubelet.wait_registered("rdma/soft", units=1).client.latest()
    assert units(snap) == [("rxe0", "Healthy", None)]


# ---- GetPreferredAllocation ------------------------------------------------------------------
def test_preferred_keeps_a_pod_on_one_socket(env):
    env.daemon(env.config([exclusive(vendors=["15b3"], linkTypes=["infiniband"])]), "dgx-h100")
    env.kubelet.wait_registered(RES, units=8)
    a, _ = env.kubelet.admit(RES, 4)
    assert a == [x for x, numa, _ in DGX_COMPUTE if numa == 0]
    b, _ = env.kubelet.admit(RES, 4)
    assert sorted(b) == [x for x, numa, _ in DGX_COMPUTE if numa == 1]
    # kubelet asked with allocation_size = 4 and nothing to include.
    assert [(c[2], c[3]) for c in env.kubelet.preferred_calls] == [([], 4), ([], 4)]


def test_preferred_follows_must_include(env):
    env.daemon(env.config([exclusive(vendors=["15b3"], linkTypes=["infiniband"])]), "dgx-h100")
    env.kubelet.wait_registered(RES, units=8)
    # An init container held mlx5_9 (NUMA 1): the app container reuses it and gets 3 more.
    ids, resp = env.kubelet.admit(RES, 4, reuse=["0000:c0:00.0"])
    assert sorted(ids) == [x for x, numa, _ in DGX_COMPUTE if numa == 1]
    _, cands, must, size, pref = env.kubelet.preferred_calls[-1]
    assert must == ["0000:c0:00.0"] and size == 4 and "0000:c0:00.0" in cands
    assert "0000:c0:00.0" in pref and len(pref) == 4
    assert len(resp.container_responses[0].devices) == 4 * 3 + 1


def test_preferred_with_topology_manager_hint(env):
    env.daemon(env.config([exclusive(vendors=["15b3"], linkTypes=["infiniband"])]), "dgx-h100")
    env.kubelet.wait_registered(RES, units=8)
    ids, _ = env.kubelet.admit(RES, 2, numa={1})
    assert ids == ["0000:9a:00.0", "0000:c0:00.0"]
    # Only aligned devices were offered to the plugin.
    assert all(c in [x for x, numa, _ in DGX_COMPUTE if numa == 1]
               for c in env.kubelet.preferred_calls[-1][1])


def test_preferred_pairs_the_two_pfs_of_a_card(env):
    # dgx-h100 storage: mlx5_1/2 = 29:00.0/.1 (one card, NUMA 0), mlx5_7/8 = a9:00.0/.1.
    env.daemon(env.config([exclusive("storage", vendors=["15b3"], linkTypes=["ether"])]),
               "dgx-h100")
    c = env.kubelet.wait_registered("rdma/storage", units=4).client
    r = c.preferred(["0000:29:00.0", "0000:29:00.1", "0000:a9:00.0", "0000:a9:00.1"],
                    ["0000:a9:00.1"], 2)
    assert list(r.container_responses[0].deviceIDs) == ["0000:a9:00.0", "0000:a9:00.1"]


def test_preferred_refuses_impossible_requests(env):
    env.daemon(env.config([exclusive(vendors=["15b3"], linkTypes=["infiniband"])]), "dgx-h100")
    c = env.kubelet.wait_registered(RES, units=8).client
    two = ["0000:18:00.0", "0000:40:00.0"]
    msg = invalid(c.preferred, two, [], 3)
    assert "allocation_size 3, but 2 distinct device IDs are available" in msg
    msg = invalid(c.preferred, two, ["0000:9a:00.0"], 2)
    assert 'must-include device IDs not among the available ones "0000:9a:00.0"' in msg
    msg = invalid(c.preferred, two + ["0000:99:00.0"], [], 1)
    assert 'unknown device IDs "0000:99:00.0"' in msg
    msg = invalid(c.preferred, two, two, 1)
    assert "allocation_size 1, but 2 distinct device IDs must be included" in msg


def test_shared_resource_does_not_advertise_preferred(env):
    env.daemon(env.config([{"resourceName": "nics", "rdmaHcaMax": 10,
                            "selectors": {"vendors": ["15b3"]}}]), "dgx-h100")
    reg = env.kubelet.wait_registered(RES, units=10)
    assert not reg.options.get_preferred_allocation_available
    assert not [r for r in env.kubelet.requests
                if r.resource_name == RES][-1].options.get_preferred_allocation_available


def test_mode_change_on_reload_registers_again(env):
    cfg = env.config([{"resourceName": "nics", "rdmaHcaMax": 10,
                       "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}}])
    d = env.daemon(cfg, "dgx-h100")
    env.kubelet.wait_registered(RES, units=10)
    n = len(env.kubelet.registrations)
    env.config([exclusive(vendors=["15b3"], linkTypes=["infiniband"])])
    reg = env.kubelet.wait_registered(RES, units=8, after=n)
    assert reg.options.get_preferred_allocation_available
    d.wait_log("event=resource-mode-changed", "from=shared", "to=exclusive")


def test_plugin_watcher_mode(make_env):
    e = make_env(prefix="rdpx", mode="plugins-registry")
    e.daemon(e.config([exclusive(vendors=["15b3"], linkTypes=["infiniband"])]), "dgx-h100",
             registration="plugins-registry")
    reg = e.kubelet.wait_registered(RES, units=8)
    assert reg.options.get_preferred_allocation_available
    ids, _ = e.kubelet.admit(RES, 2)
    assert ids == ["0000:18:00.0", "0000:40:00.0"]


# ---- two-socket-vfs: 64 VFs on 5 cards, every PCIe level between them ---------------------
# card A PFs 19:00.0/.1 (socket 0, below a switch), card B 1c:00.0/.1 (behind a second switch
# below the first: A-B is PXB), card C 31:00.0/.1 (another host bridge of socket 0: NODE),
# cards D 98:00.0/.1 and E 99:00.0/.1 (socket 1, two root ports of one host bridge: PHB).
VFS = dict(vendors=["15b3"], deviceIDs=["101e"])


def test_vf_units_by_pf_names(env):
    env.daemon(env.config([exclusive(pfNames=["ens1f0np0#0-3", "ens6f0np0#0-3"])]), "two-socket-vfs")
    snap = env.kubelet.wait_registered(RES, units=8, healthy=8).client.latest()
    assert units(snap) == [("0000:19:00.%d" % f, "Healthy", [0]) for f in range(2, 6)] + \
        [("0000:99:00.%d" % f, "Healthy", [1]) for f in range(2, 6)]


def test_admit_prefers_vfs_of_one_pf(env):
    env.daemon(env.config([exclusive(**VFS)]), "two-socket-vfs")
    env.kubelet.wait_registered(RES, units=64, healthy=64)
    ids, _ = env.kubelet.admit(RES, 2)
    assert ids == ["0000:19:00.2", "0000:19:00.3"]
    # An init container's VF on card E is reused: the others come from card E too.
    ids, _ = env.kubelet.admit(RES, 3, reuse=["0000:99:00.5"])
    assert sorted(ids) == ["0000:99:00.2", "0000:99:00.3", "0000:99:00.5"]
    # The Topology Manager says NUMA node 1: 4 of the aligned VFs, on one card.
    ids, _ = env.kubelet.admit(RES, 4, numa={1})
    assert sorted(ids) == ["0000:98:00.2", "0000:98:00.3", "0000:98:00.4", "0000:98:00.5"]


@pytest.mark.parametrize("available,want", [
    # one VF on each of cards A, B, C: A-B (PXB, one switch tree) beats NODE (card C)
    (["0000:31:00.2", "0000:1c:00.2", "0000:19:00.2"], ["0000:19:00.2", "0000:1c:00.2"]),
    # cards D and E share a host bridge (PHB); card A is on the other socket (SYS)
    (["0000:19:00.2", "0000:99:00.2", "0000:98:00.2"], ["0000:98:00.2", "0000:99:00.2"]),
    # card C and card A: same socket (NODE) beats the other socket
    (["0000:98:00.2", "0000:31:00.2", "0000:19:00.2"], ["0000:19:00.2", "0000:31:00.2"]),
])
def test_preferred_levels_between_cards(env, available, want):
    env.daemon(env.config([exclusive(**VFS)]), "two-socket-vfs")
    c = env.kubelet.wait_registered(RES, units=64).client
    r = c.preferred(available, [], 2)
    assert list(r.container_responses[0].deviceIDs) == want


# ---- a flat VM: passed-through VFs on the root bus, no NUMA --------------------------------
def test_vm_passthrough_units_without_topology(env):
    env.daemon(env.config([exclusive(**VFS)]), "vm-passthrough")
    reg = env.kubelet.wait_registered(RES, units=4, healthy=4)
    assert units(reg.client.latest()) == [("0000:00:%02x.0" % d, "Healthy", None)
                                          for d in range(5, 9)]
    # Every pair is PHB: the lowest addresses, whatever the order kubelet passes.
    ids, _ = env.kubelet.admit(RES, 2, numa={0})
    assert ids == ["0000:00:05.0", "0000:00:06.0"]


# ---- HGX with NIC and GPU on one switch ----------------------------------------------------
def test_hgx_pix_units(env):
    env.daemon(env.config([exclusive(vendors=["15b3"], linkTypes=["infiniband"])]), "hgx-pix")
    snap = env.kubelet.wait_registered(RES, units=8, healthy=8).client.latest()
    numa = [u[2] for u in units(snap)]
    assert numa == [[0]] * 4 + [[1]] * 4


def test_log_names_the_units(env):
    d = env.daemon(env.config([exclusive(vendors=["15b3"], linkTypes=["infiniband"])]),
                   "dgx-h100")
    c = env.kubelet.wait_registered(RES, units=8).client
    c.preferred([x for x, _, _ in DGX_COMPUTE], [], 2)
    line = d.wait_log("event=preferred", "resource=" + RES)
    assert 'ids="0000:18:00.0=mlx5_0 0000:40:00.0=mlx5_3"' in line
    c.allocate(["0000:dc:00.0"], ["0000:18:00.0", "0000:40:00.0"])
    line = d.wait_log("event=allocated", "resource=" + RES)
    assert 'ids="0000:dc:00.0=mlx5_11; 0000:18:00.0=mlx5_0 0000:40:00.0=mlx5_3"' in line
    assert "containers=2 units=3 devices=7" in line
