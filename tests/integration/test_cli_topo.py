"""rdma-dp topo on every fixture node: the nvidia-smi topo -m matrix of GPUs and RDMA devices,
pinned on dgx-h100 (each compute NIC closest to exactly its GPU, at PXB as on a real DGX
H100; storage PFs PIX to each other, NODE/SYS to the GPUs), on hgx-pix (each NIC PIX to
exactly its GPU: one PCIe switch), on two-socket-vfs (every level between two VFs) and on
vm-passthrough (a flat guest: all PHB), the JSON document, errors."""
import json
import re

import pytest

from conftest import node_args

NODES = ["seed000", "seed001", "dgx-h100", "sriov", "mlx4", "roce-lag", "irdma-bnxt",
         "rxe", "no-rdma", "broken", "exclusive", "port-down", "two-socket-vfs",
         "vm-passthrough", "hgx-pix"]
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
    # The rxe node follows the real kernel's run (issue 19): rxe0 on eth0, rxe1 on a veth.
    doc = topo_json(run, fixtures_dir, "rxe")
    assert [(d["name"], d["pci_address"], d["pcie_root"]) for d in doc["devices"]] == [
        ("rxe0", None, None), ("rxe1", None, None)]
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


# hgx-pix (docs/hardware-topologies.md, HGX H100 OEM table): GPU i and NIC mlx5_i share a switch.
HGX_GPU_BDF = ["0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0",
               "0000:9b:00.0", "0000:bb:00.0", "0000:cb:00.0", "0000:db:00.0"]
HGX_NIC_BDF = ["0000:1a:00.0", "0000:3c:00.0", "0000:4d:00.0", "0000:5e:00.0",
               "0000:9c:00.0", "0000:bc:00.0", "0000:cc:00.0", "0000:dc:00.0"]


def test_hgx_pix_matrix(run, fixtures_dir):
    doc = topo_json(run, fixtures_dir, "hgx-pix")
    by = {d["name"]: d for d in doc["devices"]}
    assert [d["name"] for d in doc["devices"]] == \
        [f"GPU{i}" for i in range(8)] + [f"mlx5_{i}" for i in range(8)]
    assert [by[f"GPU{i}"]["pci_address"] for i in range(8)] == HGX_GPU_BDF
    for i in range(8):
        nic = by[f"mlx5_{i}"]
        assert nic["pci_address"] == HGX_NIC_BDF[i]
        assert nic["pcie_root"] == by[f"GPU{i}"]["pcie_root"]
        assert nic["numa_node"] == (0 if i < 4 else 1)
        assert nic["link_layers"] == ["infiniband"]
        for j in range(8):
            same = (i < 4) == (j < 4)
            assert nic["levels"][f"GPU{j}"] == ("PIX" if i == j else
                                                "NODE" if same else "SYS"), (i, j)
            if j != i:  # NICs: each under its own host bridge
                assert nic["levels"][f"mlx5_{j}"] == ("NODE" if same else "SYS")
            if j != i:
                assert by[f"GPU{i}"]["levels"][f"GPU{j}"] == ("NODE" if same else "SYS")
    assert by["GPU0"]["pcie_root"] == "pci0000:15"

    r = run("topo", *node_args(fixtures_dir, "hgx-pix"))
    row = next(l for l in r.stdout.splitlines() if l.startswith("mlx5_4 "))
    assert row.split()[1:9] == ["SYS"] * 4 + ["PIX", "NODE", "NODE", "NODE"]
    assert "ibp156s0" in row and "pci0000:97" in row and "0000:9c:00.0" in row

    # discover names the one closest GPU of each NIC
    r = run("discover", *node_args(fixtures_dir, "hgx-pix"), "-o", "json")
    assert r.returncode == 0, r.stderr
    for d in json.loads(r.stdout)["devices"]:
        i = int(d["name"].split("_")[1])
        assert d["closest_gpus"] == [{"name": f"GPU{i}", "pci_address": HGX_GPU_BDF[i],
                                      "level": "PIX"}]


# two-socket-vfs (tests/fixtures/README.md): PF ibdev -> first VF ibdev, VF count
TSV_VFS = {"mlx5_0": (10, 16), "mlx5_1": (26, 8), "mlx5_2": (34, 16), "mlx5_4": (50, 8),
           "mlx5_6": (58, 8), "mlx5_8": (66, 8)}
TSV_CARD = {"mlx5_0": "A", "mlx5_1": "A", "mlx5_2": "B", "mlx5_3": "B", "mlx5_4": "C",
            "mlx5_5": "C", "mlx5_6": "D", "mlx5_7": "D", "mlx5_8": "E", "mlx5_9": "E"}
# nvidia-smi levels between cards (and GPUs): A and B are on one switch but B sits behind a
# second (cascaded) switch; D and E hang off two root ports of one host bridge.
TSV_LEVEL = {("A", "B"): "PXB", ("A", "C"): "NODE", ("B", "C"): "NODE", ("D", "E"): "PHB",
             ("A", "GPU0"): "PXB", ("B", "GPU0"): "PIX", ("C", "GPU0"): "NODE",
             ("D", "GPU1"): "NODE", ("E", "GPU1"): "NODE", ("GPU0", "GPU1"): "SYS"}


def _tsv_card(name):
    if name.startswith("GPU"):
        return name
    idx = int(name.split("_")[1])
    for pf, (first, count) in TSV_VFS.items():
        if first <= idx < first + count:
            return TSV_CARD[pf]
    return TSV_CARD[name]


def _tsv_want(a, b):
    ca, cb = _tsv_card(a), _tsv_card(b)
    if a == b:
        return "X"
    if ca == cb:
        return "PIX"  # PFs and VFs of one card: siblings under one bridge
    socket = {"A": 0, "B": 0, "C": 0, "GPU0": 0, "D": 1, "E": 1, "GPU1": 1}
    if socket[ca] != socket[cb]:
        return "SYS"
    return TSV_LEVEL.get((ca, cb)) or TSV_LEVEL[(cb, ca)]


def test_two_socket_vfs_matrix(run, fixtures_dir):
    doc = topo_json(run, fixtures_dir, "two-socket-vfs")
    names = [d["name"] for d in doc["devices"]]
    assert names[:2] == ["GPU0", "GPU1"] and len(names) == 2 + 74
    by = {d["name"]: d for d in doc["devices"]}
    assert (by["GPU0"]["pci_address"], by["GPU1"]["pci_address"]) == \
        ("0000:1d:00.0", "0000:b1:00.0")
    for a in names:
        for b in names:
            assert by[a]["levels"][b] == _tsv_want(a, b), (a, b)
    # every level occurs between two VFs
    vf_levels = {by["mlx5_10"]["levels"][b] for b in ("mlx5_10", "mlx5_11", "mlx5_34",
                                                       "mlx5_50", "mlx5_58")}
    vf_levels.add(by["mlx5_58"]["levels"]["mlx5_66"])
    assert vf_levels == {"X", "PIX", "PXB", "NODE", "SYS", "PHB"}
    assert by["mlx5_10"]["levels"]["mlx5_0"] == "PIX"        # VF and its PF
    assert by["mlx5_10"]["levels"]["mlx5_26"] == "PIX"       # VFs of the card's two PFs
    assert [by[f"mlx5_{i}"]["numa_node"] for i in (10, 50, 58, 73)] == [0, 0, 1, 1]
    assert [by[f"mlx5_{i}"]["pcie_root"] for i in (10, 34, 50, 58, 66)] == \
        ["pci0000:16", "pci0000:16", "pci0000:30", "pci0000:97", "pci0000:97"]
    assert by["mlx5_34"]["pci_address"] == "0000:1c:00.2"
    assert by["mlx5_34"]["netdevs"] == ["ens2f0v0"]

    r = run("topo", *node_args(fixtures_dir, "two-socket-vfs"))
    row = next(l for l in r.stdout.splitlines() if l.startswith("mlx5_34 "))
    assert row.split()[1:3] == ["PIX", "SYS"]
    assert "GPUs: 2   RDMA devices: 74" in r.stdout


def test_vm_passthrough_flat(run, fixtures_dir):
    """Functions straight on the root bus of one host bridge, no bridge between them: the path
    between two of them crosses the host bridge only, PHB; numa_node -1 in JSON, "-" in the
    table."""
    doc = topo_json(run, fixtures_dir, "vm-passthrough")
    assert [(d["name"], d["kind"], d["pci_address"], d["pcie_root"], d["numa_node"],
             d["device_id"]) for d in doc["devices"]] == [
        (f"mlx5_{i}", "nic", "0000:00:%02x.0" % (5 + i), "pci0000:00", -1, "101e")
        for i in range(4)]
    for d in doc["devices"]:
        assert {k: v for k, v in d["levels"].items() if k != d["name"]} == \
            {f"mlx5_{j}": "PHB" for j in range(4) if f"mlx5_{j}" != d["name"]}
        assert d["netdevs"] == ["ens%d" % (5 + int(d["name"][-1]))]
    r = run("topo", *node_args(fixtures_dir, "vm-passthrough"))
    row = next(l for l in r.stdout.splitlines() if l.startswith("mlx5_2 "))
    assert row.split()[1:6] == ["PHB", "PHB", "X", "PHB", "-"]


@pytest.mark.parametrize("node,count,vfs", [("two-socket-vfs", 74, 64),
                                            ("vm-passthrough", 4, 4), ("hgx-pix", 8, 0)])
def test_new_nodes_discover_usable(run, fixtures_dir, node, count, vfs):
    """rdma-dp discover on the exclusive-pool/topology nodes: every device usable, no problem;
    VFs known as VFs of their PF; in the guest the VFs are VFs by their device id (101e) with
    no PF (it sees none)."""
    r = run("discover", *node_args(fixtures_dir, node), "-o", "json")
    assert r.returncode == 0, r.stderr
    devs = json.loads(r.stdout)["devices"]
    assert len(devs) == count
    for d in devs:
        assert d["usable"] is True and d["problems"] == [], d["name"]
        if node == "vm-passthrough":
            assert d["is_vf"] and d["pf_pci_address"] is None and d["pf_netdev"] is None
        else:
            assert d["is_vf"] == (d["pf_pci_address"] is not None)
    assert sum(d["is_vf"] for d in devs) == vfs
    if node == "two-socket-vfs":
        by = {d["name"]: d for d in devs}
        assert (by["mlx5_73"]["pf_pci_address"], by["mlx5_73"]["pf_netdev"]) == \
            ("0000:99:00.0", "ens6f0np0")
        assert by["mlx5_73"]["closest_gpus"] == [
            {"name": "GPU1", "pci_address": "0000:b1:00.0", "level": "NODE"}]
        assert by["mlx5_34"]["closest_gpus"][0]["level"] == "PIX"
