"""rdma-dp topo on every fixture node: the nvidia-smi topo -m matrix of GPUs and RDMA devices,
pinned on dgx-h100 (each compute NIC closest to exactly its GPU, at PXB as on a real DGX
H100; storage PFs PIX to each other, NODE/SYS to the GPUs), the JSON document, errors."""
import json
import re

import pytest

from conftest import node_args

NODES = ["seed000", "seed001", "dgx-h100", "sriov", "mlx4", "roce-lag", "irdma-bnxt",
         "rxe", "no-rdma", "broken", "exclusive", "port-down"]
LEVELS = {"X", "PIX", "PXB", "PHB", "NODE", "SYS", "-"}
DEV_FIELDS = ["name", "kind", "pci_address", "vendor", "device_id", "pcie_root", "numa_node",
              "netdevs", "link_layers", "levels"]
PCIE_ROOT = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")

# DGX H100 (docs/hardware-topologies.md): GPU i and its compute NIC.
DGX_PAIRS = [("GPU0", "mlx5_0"), ("GPU1", "mlx5_3"), ("GPU2", "mlx5_4"), ("GPU3", "mlx5_5"),
             ("GPU4", "mlx5_6"), ("GPU5", "mlx5_9"), ("GPU6", "mlx5_10"), ("GPU7", "mlx5_11")]
DGX_GPU_BDF = ["0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
               "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"]


def topo_json(run, fixtures_dir, node):
    r = run("topo", *node_args(fixtures_dir, node), "-o", "json")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    return json.loads(r.stdout)


@pytest.mark.parametrize("node", NODES)
def test_every_node(run, fixtures_dir, node):
    doc = topo_json(run, fixtures_dir, node)
    assert list(doc) == ["devices", "legend"]
    assert set(doc["legend"]) == LEVELS
    names = [d["name"] for d in doc["devices"]]
    assert len(set(names)) == len(names)
    kinds = [d["kind"] for d in doc["devices"]]
    assert kinds == sorted(kinds, key=lambda k: k != "gpu")  # GPUs first
    for d in doc["devices"]:
        assert list(d) == DEV_FIELDS
        assert d["pcie_root"] is None or PCIE_ROOT.match(d["pcie_root"])
        assert (d["pcie_root"] is None) == (d["pci_address"] is None)
        assert isinstance(d["numa_node"], int) and d["numa_node"] >= -1
        assert list(d["levels"]) == names
        assert d["levels"][d["name"]] == "X"
        for other, lvl in d["levels"].items():
            assert lvl in LEVELS
            assert (lvl == "X") == (other == d["name"])
    by = {d["name"]: d for d in doc["devices"]}
    for a in names:  # symmetric
        for b in names:
            assert by[a]["levels"][b] == by[b]["levels"][a]

    # The same rows and cells in the table.
    r = run("topo", *node_args(fixtures_dir, node))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    if not names:
        assert "No GPUs and no RDMA devices" in r.stdout
        return
    lines = r.stdout.splitlines()
    assert lines[0].split()[:len(names)] == names
    for i, n in enumerate(names):
        cells = lines[1 + i].split()
        assert cells[0] == n
        assert cells[1:1 + len(names)] == [by[n]["levels"][m] for m in names]
        numa = by[n]["numa_node"]
        assert cells[1 + len(names)] == (str(numa) if numa >= 0 else "-")
    assert "Legend:" in r.stdout
    assert "PIX  = Connection traversing at most a single PCIe bridge" in r.stdout


def test_dgx_h100_matrix(run, fixtures_dir):
    doc = topo_json(run, fixtures_dir, "dgx-h100")
    by = {d["name"]: d for d in doc["devices"]}
    gpus = [d for d in doc["devices"] if d["kind"] == "gpu"]
    assert [g["name"] for g in gpus] == [f"GPU{i}" for i in range(8)]
    assert [g["pci_address"] for g in gpus] == DGX_GPU_BDF
    assert all(g["vendor"] == "10de" and g["device_id"] == "2330" for g in gpus)
    assert len(doc["devices"]) == 8 + 12
    for i, (gpu, nic) in enumerate(DGX_PAIRS):
        levels = by[nic]["levels"]
        assert by[nic]["kind"] == "nic"
        assert by[nic]["pcie_root"] == by[gpu]["pcie_root"]
        assert by[nic]["link_layers"] == ["infiniband"]
        # exactly one GPU shares the NIC's switch; the rest of the socket is NODE, the
        # other socket SYS (what nvidia-smi topo -m prints on a real DGX H100)
        for j in range(8):
            want = "PXB" if j == i else ("NODE" if (j < 4) == (i < 4) else "SYS")
            assert levels[f"GPU{j}"] == want, (nic, j)
        assert by[nic]["numa_node"] == (0 if i < 4 else 1)
    assert by["GPU0"]["pcie_root"] == "pci0000:15"
    for a, b in (("mlx5_1", "mlx5_2"), ("mlx5_7", "mlx5_8")):
        assert by[a]["levels"][b] == "PIX"
        assert by[a]["link_layers"] == ["ether"]
    for j in range(8):
        assert by["mlx5_1"]["levels"][f"GPU{j}"] == ("NODE" if j < 4 else "SYS")
        assert by["mlx5_8"]["levels"][f"GPU{j}"] == ("SYS" if j < 4 else "NODE")

    r = run("topo", *node_args(fixtures_dir, "dgx-h100"))
    row = next(l for l in r.stdout.splitlines() if l.startswith("mlx5_0 "))
    assert row.split()[1:9] == ["PXB", "NODE", "NODE", "NODE", "SYS", "SYS", "SYS", "SYS"]
    assert "ibp24s0" in row and "pci0000:15" in row and "0000:18:00.0" in row


def test_flat_and_virtual(run, fixtures_dir):
    doc = topo_json(run, fixtures_dir, "seed000")
    assert [(d["name"], d["pcie_root"], d["numa_node"]) for d in doc["devices"]] == [
        ("mlx5_0", "pci0000:80", 1)]
    doc = topo_json(run, fixtures_dir, "rxe")
    assert [(d["name"], d["pci_address"], d["pcie_root"]) for d in doc["devices"]] == [
        ("rxe0", None, None)]
    doc = topo_json(run, fixtures_dir, "sriov")
    for d in doc["devices"]:
        assert set(d["levels"].values()) == {"X", "PIX"}
    assert topo_json(run, fixtures_dir, "no-rdma")["devices"] == []


def test_errors(run, fixtures_dir, tmp_path):
    r = run("topo", "--sysfs-root", str(tmp_path / "nope"))
    assert r.returncode == 1
    assert "rdma-dp topo: cannot open sysfs root" in r.stderr
    r = run("topo", "-o", "yaml")
    assert r.returncode == 2
    r = run("topo", "extra")
    assert r.returncode == 2
    r = run("topo", "--help")
    assert r.returncode == 0 and "nvidia-smi topo -m" in r.stdout
