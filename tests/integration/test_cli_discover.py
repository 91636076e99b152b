"""rdma-dp discover on every fixture node: the JSON document checked field by field against the
contract (a hand-written schema check), the table, and the error paths."""
import json
import os
import re
import stat
import subprocess


def natural_key(name):
    """Natural order, as discovery lists devices: mlx5_2 before mlx5_10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]

import pytest

from conftest import node_args

EXPECTED_NODES = ["seed000", "seed001", "dgx-h100", "sriov", "mlx4", "roce-lag", "irdma-bnxt",
                  "rxe", "no-rdma", "broken", "exclusive", "port-down"]

DEVICE_FIELDS = ["name", "pci_address", "vendor", "device_id", "class", "driver", "rdma_driver",
                 "netdevs",
                 "numa_node", "is_vf", "pf_pci_address", "pf_netdev", "sf_num", "unit_id",
                 "node_guid", "fw_ver",
                 "hca_type", "ports", "char_devices", "problems", "usable", "unusable_reason",
                 "pcie_root", "closest_gpus"]
PORT_FIELDS = ["port", "state", "phys_state", "link_layer", "rate", "roce_v2_ipv4_gid_index"]

BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[01][0-9a-f]\.[0-7]$")
HEX4 = re.compile(r"^[0-9a-f]{4}$")
HEX6 = re.compile(r"^[0-9a-f]{6}$")
GUID = re.compile(r"^[0-9a-f]{4}(:[0-9a-f]{4}){3}$")
CHARDEV = re.compile(r"^/dev/infiniband/(uverbs|umad|issm)[0-9]+$")
RATE = re.compile(r"^[0-9]+(\.[0-9]+)? Gb/sec \([0-9]+X( [A-Z0-9]+)?\)$")


def nodes(fixtures_dir):
    return sorted(p.name for p in fixtures_dir.iterdir() if (p / "sys").is_dir())


def discover_json(run, fixtures_dir, node):
    r = run("discover", *node_args(fixtures_dir, node), "-o", "json")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    return json.loads(r.stdout)


def is_str_or_none(v):
    return v is None or (isinstance(v, str) and v != "")


def check_document(doc):
    """The whole `discover -o json` document, as the issue specifies it."""
    assert isinstance(doc, dict)
    assert list(doc) == ["devices", "rdma_cm", "netns_mode"]
    assert doc["rdma_cm"] in (None, "/dev/infiniband/rdma_cm")
    assert doc["netns_mode"] in ("shared", "exclusive")
    assert isinstance(doc["devices"], list)
    names = [d["name"] for d in doc["devices"]]
    assert names == sorted(names, key=natural_key)
    assert len(set(names)) == len(names)
    for d in doc["devices"]:
        check_device(d)


def check_device(d):
    assert isinstance(d, dict)
    assert list(d) == DEVICE_FIELDS, d.get("name")
    assert isinstance(d["name"], str) and d["name"]
    assert d["pci_address"] is None or BDF.match(d["pci_address"]), d["pci_address"]
    assert d["vendor"] is None or HEX4.match(d["vendor"])
    assert d["device_id"] is None or HEX4.match(d["device_id"])
    assert d["class"] is None or HEX6.match(d["class"])
    assert is_str_or_none(d["driver"])
    assert isinstance(d["netdevs"], list)
    assert all(isinstance(n, str) and 0 < len(n) < 16 for n in d["netdevs"])
    assert d["netdevs"] == sorted(set(d["netdevs"]))
    assert isinstance(d["numa_node"], int) and not isinstance(d["numa_node"], bool)
    assert d["numa_node"] >= -1
    assert isinstance(d["is_vf"], bool)
    if d["is_vf"]:
        assert d["pf_pci_address"] is None or BDF.match(d["pf_pci_address"])
        assert is_str_or_none(d["pf_netdev"])
    else:
        assert d["pf_pci_address"] is None
        assert d["pf_netdev"] is None
    assert d["node_guid"] is None or GUID.match(d["node_guid"])
    assert is_str_or_none(d["fw_ver"])
    assert is_str_or_none(d["hca_type"])
    assert isinstance(d["ports"], list)
    nums = []
    assert d["pcie_root"] is None or re.match(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$", d["pcie_root"])
    assert (d["pcie_root"] is None) == (d["pci_address"] is None)
    assert isinstance(d["closest_gpus"], list)
    assert len({g["level"] for g in d["closest_gpus"]}) <= 1
    for g in d["closest_gpus"]:
        assert list(g) == ["name", "pci_address", "level"]
        assert BDF.match(g["pci_address"])
        assert g["level"] in ("PIX", "PXB", "PHB", "NODE", "SYS")
    for p in d["ports"]:
        assert isinstance(p, dict)
        assert list(p) == PORT_FIELDS
        assert isinstance(p["port"], int) and not isinstance(p["port"], bool) and p["port"] >= 1
        nums.append(p["port"])
        assert is_str_or_none(p["state"])
        assert is_str_or_none(p["phys_state"])
        assert p["link_layer"] in (None, "infiniband", "ether")
        assert p["rate"] is None or RATE.match(p["rate"]), p["rate"]
        g = p["roce_v2_ipv4_gid_index"]
        assert g is None or (isinstance(g, int) and not isinstance(g, bool) and g >= 0)
        if g is not None:
            assert p["link_layer"] == "ether"
    assert nums == sorted(set(nums))
    assert isinstance(d["char_devices"], list)
    assert all(isinstance(c, str) and CHARDEV.match(c) for c in d["char_devices"])
    assert len(set(d["char_devices"])) == len(d["char_devices"])
    assert isinstance(d["problems"], list)
    assert all(isinstance(s, str) and s for s in d["problems"])
    assert isinstance(d["usable"], bool)
    if d["usable"]:
        assert d["unusable_reason"] is None
        # usable: its uverbs node is handed out; a device with no problem is usable unless
        # the host lacks rdma_cm
        assert any(re.search(r"/uverbs[0-9]+$", c) for c in d["char_devices"])
    else:
        assert isinstance(d["unusable_reason"], str) and d["unusable_reason"]


def copy_node(fixtures_dir, node, dst):
    """A copy to damage; cp -a keeps symlinks and the char device nodes of dev/."""
    subprocess.run(["cp", "-a", str(fixtures_dir / node), str(dst)], check=True)


def by_name(doc):
    return {d["name"]: d for d in doc["devices"]}


def test_all_nodes_generated(fixtures_dir):
    missing = [n for n in EXPECTED_NODES if not (fixtures_dir / n / "sys").is_dir()]
    assert not missing, f"fixture nodes missing: {missing}"


@pytest.mark.parametrize("node", EXPECTED_NODES)
def test_json_schema(run, fixtures_dir, node):
    check_document(discover_json(run, fixtures_dir, node))


@pytest.mark.parametrize("node", EXPECTED_NODES)
def test_table_lists_every_device(run, fixtures_dir, node):
    doc = discover_json(run, fixtures_dir, node)
    r = run("discover", *node_args(fixtures_dir, node))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for d in doc["devices"]:
        rows = [ln for ln in lines if ln.split() and ln.split()[0] == d["name"]]
        # One row per port (at least one), plus its char device line.
        assert len(rows) >= max(1, len(d["ports"])) + 1, (d["name"], r.stdout)
        if d["pci_address"]:
            assert any(d["pci_address"] in ln for ln in rows)
        for n in d["netdevs"]:
            assert any(n in ln for ln in rows)
        for p in d["problems"]:
            assert f"{d['name']}: {p}" in lines
    if doc["devices"]:
        header = lines[0].split()
        assert header[:3] == ["DEVICE", "PORT", "STATE"]
        assert "NETDEV" in header and "PCI" in header and "NUMA" in header
    assert f"netns: {doc['netns_mode']}" in r.stdout
    # No trailing blanks, no colour codes.
    assert all(ln == ln.rstrip() for ln in lines)
    assert "\x1b[" not in r.stdout


def test_all_generated_nodes(run, fixtures_dir):
    # Nodes added to the generator later are checked too.
    for node in nodes(fixtures_dir):
        check_document(discover_json(run, fixtures_dir, node))


def test_dgx_h100(run, fixtures_dir):
    doc = discover_json(run, fixtures_dir, "dgx-h100")
    devs = by_name(doc)
    assert len(devs) == 12
    d = devs["mlx5_0"]
    assert d["pci_address"] == "0000:18:00.0"
    assert d["numa_node"] == 0
    assert "ibp24s0" in d["netdevs"]
    assert (d["vendor"], d["device_id"], d["class"]) == ("15b3", "1021", "020700")
    assert d["driver"] == "mlx5_core"
    assert d["hca_type"] == "MT4129"
    assert d["ports"][0]["state"] == "ACTIVE"
    assert d["ports"][0]["link_layer"] == "infiniband"
    assert d["ports"][0]["rate"] == "400 Gb/sec (4X NDR)"
    assert d["ports"][0]["roce_v2_ipv4_gid_index"] is None
    assert devs["mlx5_6"]["numa_node"] == 1
    assert all(not d["problems"] for d in devs.values())
    # Every device has its own uverbs, and none is shared.
    uverbs = [c for d in devs.values() for c in d["char_devices"] if "/uverbs" in c]
    assert len(uverbs) == 12 and len(set(uverbs)) == 12
    assert doc["rdma_cm"] == "/dev/infiniband/rdma_cm"
    assert doc["netns_mode"] == "shared"
    roce = [d for d in devs.values() if d["ports"][0]["link_layer"] == "ether"]
    assert roce and all(d["ports"][0]["roce_v2_ipv4_gid_index"] is not None for d in roce)
    # closest GPUs (topology.h): each compute NIC shares its switch with exactly one GPU
    pairs = {"mlx5_0": "0000:1b:00.0", "mlx5_3": "0000:43:00.0", "mlx5_4": "0000:52:00.0",
             "mlx5_5": "0000:61:00.0", "mlx5_6": "0000:9d:00.0", "mlx5_9": "0000:c3:00.0",
             "mlx5_10": "0000:d1:00.0", "mlx5_11": "0000:df:00.0"}
    for nic, gpu in pairs.items():
        assert [(g["pci_address"], g["level"]) for g in devs[nic]["closest_gpus"]] == [
            (gpu, "PXB")]
    assert devs["mlx5_0"]["pcie_root"] == "pci0000:15"
    assert [g["name"] for g in devs["mlx5_1"]["closest_gpus"]] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert {g["level"] for g in devs["mlx5_7"]["closest_gpus"]} == {"NODE"}


def test_uverbs_from_ibdev_files(run, fixtures_dir):
    """The uverbs of each device is the one whose ibdev file names it, whatever its number."""
    sys_root = fixtures_dir / "dgx-h100" / "sys"
    owner = {}
    for e in (sys_root / "class" / "infiniband_verbs").iterdir():
        if e.name.startswith("uverbs"):
            owner[(e / "ibdev").read_text().strip()] = f"/dev/infiniband/{e.name}"
    for d in discover_json(run, fixtures_dir, "dgx-h100")["devices"]:
        assert owner[d["name"]] in d["char_devices"]


def test_sriov(run, fixtures_dir):
    devs = by_name(discover_json(run, fixtures_dir, "sriov"))
    vfs = [d for d in devs.values() if d["is_vf"]]
    assert len(vfs) >= 2
    for d in vfs:
        assert d["pf_netdev"] == "ens3f0"
        assert d["pf_pci_address"] == "0000:3b:00.0"
        assert d["device_id"] == "101e"
    pfs = [d for d in devs.values() if not d["is_vf"]]
    assert any("ens3f0" in d["netdevs"] for d in pfs)
    table = run("discover", *node_args(fixtures_dir, "sriov")).stdout
    assert "ens3f0#0/0000:3b:00.0" in table


def test_mlx4_two_ports(run, fixtures_dir):
    d = by_name(discover_json(run, fixtures_dir, "mlx4"))["mlx4_0"]
    assert [p["port"] for p in d["ports"]] == [1, 2]
    assert len([c for c in d["char_devices"] if "/umad" in c]) == 2
    assert len([c for c in d["char_devices"] if "/issm" in c]) == 2
    assert len([c for c in d["char_devices"] if "/uverbs" in c]) == 1


def test_roce_lag(run, fixtures_dir):
    d = by_name(discover_json(run, fixtures_dir, "roce-lag"))["mlx5_bond_0"]
    assert "bond0" in d["netdevs"]
    assert d["ports"][0]["link_layer"] == "ether"


def test_aux_devices_resolve_to_pci(run, fixtures_dir):
    devs = by_name(discover_json(run, fixtures_dir, "irdma-bnxt"))
    assert devs, "no devices"
    for d in devs.values():
        assert d["pci_address"] is not None, d
        assert d["vendor"] is not None and d["driver"] is not None
    drivers = {d["driver"] for d in devs.values()}
    assert {"ice", "bnxt_en"} <= drivers
    # The SF: its PF's function, its devlink sfnum, the unit ID an exclusive resource gives it.
    assert (devs["mlx5_2"]["pci_address"], devs["mlx5_2"]["sf_num"],
            devs["mlx5_2"]["unit_id"]) == ("0000:03:00.0", 2, "0000:03:00.0-sf2")
    assert (devs["mlx5_0"]["sf_num"], devs["mlx5_0"]["unit_id"]) == (None, "0000:03:00.0")


def test_rxe_virtual(run, fixtures_dir):
    devs = by_name(discover_json(run, fixtures_dir, "rxe"))
    d = devs["rxe0"]
    assert d["pci_address"] is None
    assert d["unit_id"] == "rxe0"
    assert d["vendor"] is None and d["driver"] is None
    assert d["rdma_driver"] == "rdma_rxe"  # its `parent` attribute, no device link
    assert devs.get("mlx5_0") is None or devs["mlx5_0"]["rdma_driver"] is None
    assert d["netdevs"], "rxe's netdev comes from its parent file"
    assert d["ports"][0]["link_layer"] == "ether"


def test_exclusive_netns(run, fixtures_dir):
    assert discover_json(run, fixtures_dir, "exclusive")["netns_mode"] == "exclusive"


def test_no_rdma(run, fixtures_dir):
    doc = discover_json(run, fixtures_dir, "no-rdma")
    assert doc["devices"] == []
    r = run("discover", *node_args(fixtures_dir, "no-rdma"))
    assert r.returncode == 0
    assert "No RDMA devices" in r.stdout


def test_broken_node(run, fixtures_dir):
    doc = discover_json(run, fixtures_dir, "broken")
    devs = doc["devices"]
    broken = [d for d in devs if d["problems"]]
    healthy = [d for d in devs if not d["problems"]]
    assert broken and healthy, "broken entries must be reported and hide nothing"
    problems = [p for d in devs for p in d["problems"]]
    assert any("No such file or directory" in p for p in problems)
    assert any("unparsable value" in p for p in problems)
    assert any("dangling" in p for p in problems)
    assert any(re.match(r"^uverbs[0-9]+: /dev/infiniband/uverbs[0-9]+ missing$", p)
               for p in problems)
    assert doc["rdma_cm"] is None
    # without rdma_cm no device is usable; mlx5_5 lacks its uverbs node too
    assert all(d["usable"] is False for d in devs)
    d5 = by_name(doc)["mlx5_5"]
    assert d5["unusable_reason"] == ("/dev/infiniband/uverbs5 missing; "
                                     "/dev/infiniband/rdma_cm missing")
    assert by_name(doc)["mlx5_0"]["unusable_reason"] == "/dev/infiniband/rdma_cm missing"
    table = run("discover", *node_args(fixtures_dir, "broken")).stdout
    assert "UNUSABLE" in table
    assert ("mlx5_5: /dev/infiniband/uverbs5 missing; /dev/infiniband/rdma_cm missing"
            in table)


def test_broken_copy(run, fixtures_dir, tmp_path):
    """Damage a copy of a good node the way a half-loaded driver would."""
    copy_node(fixtures_dir, "seed000", tmp_path / "n")
    sys_root = tmp_path / "n" / "sys"
    ib = (sys_root / "class" / "infiniband" / "mlx5_0").resolve()
    (ib / "node_guid").unlink()
    (ib / "ports" / "1" / "state").write_text("garbage\n")
    (sys_root / "class" / "infiniband" / "zz_gone").symlink_to("../../devices/nowhere/zz_gone")
    # Absolute link: resolved inside the root, never on the host.
    (sys_root / "class" / "infiniband" / "zz_abs").symlink_to("/etc")
    doc = json.loads(run("discover", *node_args(tmp_path, "n"), "-o", "json").stdout)
    check_document(doc)
    devs = by_name(doc)
    d = devs["mlx5_0"]
    assert "node_guid: No such file or directory" in d["problems"]
    assert 'ports/1/state: unparsable value "garbage"' in d["problems"]
    assert d["node_guid"] is None and d["ports"][0]["state"] is None
    assert d["pci_address"] == "0000:81:00.0" and d["netdevs"] == ["ib0"]
    assert devs["zz_gone"]["problems"] and devs["zz_abs"]["problems"]


def test_dev_node_missing(run, fixtures_dir, tmp_path):
    copy_node(fixtures_dir, "seed000", tmp_path / "n")
    (tmp_path / "n" / "dev" / "infiniband" / "rdma_cm").unlink()
    (tmp_path / "n" / "dev" / "infiniband" / "uverbs0").unlink()
    doc = json.loads(run("discover", *node_args(tmp_path, "n"), "-o", "json").stdout)
    assert doc["rdma_cm"] is None
    d = by_name(doc)["mlx5_0"]
    assert "/dev/infiniband/uverbs0" not in d["char_devices"]
    assert "uverbs0: /dev/infiniband/uverbs0 missing" in d["problems"]
    assert d["usable"] is False
    assert d["unusable_reason"] == ("/dev/infiniband/uverbs0 missing; "
                                    "/dev/infiniband/rdma_cm missing")
    table = run("discover", *node_args(tmp_path, "n")).stdout
    assert "rdma_cm: missing" in table
    assert "host: /dev/infiniband/rdma_cm missing" in table


def test_good_nodes_are_usable(run, fixtures_dir):
    for node in ("seed000", "dgx-h100", "sriov", "rxe"):
        doc = discover_json(run, fixtures_dir, node)
        assert doc["rdma_cm"] == "/dev/infiniband/rdma_cm"
        for d in doc["devices"]:
            if not d["problems"]:
                assert d["usable"] is True, (node, d["name"], d["unusable_reason"])


def test_dev_node_with_another_number(run, fixtures_dir, tmp_path):
    """A uverbs node whose number is not the one sysfs names (a stale /dev, another HCA's)."""
    copy_node(fixtures_dir, "seed000", tmp_path / "n")
    node = tmp_path / "n" / "dev" / "infiniband" / "uverbs0"
    if not node.is_char_device():
        pytest.skip("fixture nodes are regular files here (mknod refused)")
    want = (tmp_path / "n" / "sys" / "class" / "infiniband_verbs" / "uverbs0" / "dev")
    want = want.read_text().strip()
    node.unlink()
    try:
        os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(231, 250))
    except PermissionError:
        pytest.skip("mknod refused")
    doc = json.loads(run("discover", *node_args(tmp_path, "n"), "-o", "json").stdout)
    check_document(doc)
    d = by_name(doc)["mlx5_0"]
    reason = "/dev/infiniband/uverbs0 is 231:250, sysfs uverbs0 says %s" % want
    assert d["usable"] is False
    assert d["unusable_reason"] == reason
    assert "/dev/infiniband/uverbs0" not in d["char_devices"]
    assert "uverbs0: " + reason in d["problems"]


def test_missing_sysfs_root(run, tmp_path):
    r = run("discover", "--sysfs-root", tmp_path / "nope", "--dev-root", tmp_path)
    assert r.returncode == 1
    assert str(tmp_path / "nope") in r.stderr
    assert "No such file or directory" in r.stderr
    assert r.stdout == ""


def test_missing_dev_root(run, fixtures_dir, tmp_path):
    r = run("discover", "--sysfs-root", fixtures_dir / "seed000" / "sys",
            "--dev-root", tmp_path / "nodev")
    assert r.returncode == 1
    assert str(tmp_path / "nodev") in r.stderr and "dev root" in r.stderr


def test_root_is_a_file(run, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = run("discover", "--sysfs-root", f, "--dev-root", tmp_path)
    assert r.returncode == 1
    assert str(f) in r.stderr and "Not a directory" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--bogus"], "unknown option '--bogus'"),
    (["-x"], "unknown option '-x'"),
    (["-o", "xml"], "invalid output format 'xml'"),
    (["--output=yaml"], "invalid output format 'yaml'"),
    (["--sysfs-root"], "needs an argument"),
    (["-o"], "needs an argument"),
    (["extra"], "unexpected argument 'extra'"),
])
def test_usage_errors(run, args, needle):
    r = run("discover", *args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert r.stdout == ""


def test_help_and_version(run):
    r = run("discover", "--help")
    assert r.returncode == 0
    assert "Usage: rdma-dp discover" in r.stdout
    for opt in ("--sysfs-root", "--dev-root", "--output", "--version"):
        assert opt in r.stdout
    r = run("discover", "-h")
    assert r.returncode == 0 and "Usage" in r.stdout
    r = run("discover", "--version")
    assert r.returncode == 0 and r.stdout.startswith("rdma-dp ")


def test_output_table_is_default(run, fixtures_dir):
    a = run("discover", *node_args(fixtures_dir, "seed001"))
    b = run("discover", *node_args(fixtures_dir, "seed001"), "-o", "table")
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout
    assert "ibs108" in a.stdout


# ---- node types the fixtures do not cover, built here with the sysfsgen Node builder ----------

import os  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import sysfsgen as g  # noqa: E402


def tree_json(run, root):
    r = run("discover", "--sysfs-root", root / "sys", "--dev-root", root / "dev", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    doc = json.loads(r.stdout)
    check_document(doc)
    t = run("discover", "--sysfs-root", root / "sys", "--dev-root", root / "dev")
    assert t.returncode == 0, t.stderr
    for d in doc["devices"]:
        assert d["name"] in t.stdout
    return doc


def rm_class_everywhere(n, cls):
    """As if the module behind the class (ib_umad, ib_uverbs) were not loaded."""
    shutil.rmtree(n.path("class", cls), ignore_errors=True)
    for top, dirs, _ in os.walk(n.path("devices")):
        if cls in dirs:
            shutil.rmtree(os.path.join(top, cls))
            dirs.remove(cls)


def test_azure_vfs_without_pf(run, tmp_path):
    """§11: IB VFs 15b3:101c/101e at PCI domains 0101..0108, no visible PF (no physfn); one
    more whose physfn dangles."""
    n = g.Node(tmp_path, "azure", numa_cpus={0: "0-47", 1: "48-95"})
    for i in range(8):
        dom = "%04x" % (0x101 + i)
        n.add_mlx5(dom + ":00:00.0", "pci%s:00" % dom, device_id=0x101c if i % 2 else 0x101e,
                   ibdev="mlx5_%d" % i, link="ib", numa=i // 4, mac=0x00155d000000 + i,
                   netdev="ibP%ds%d" % (257 + i, 154043 + i))
    r = n.add_mlx5("0109:00:00.0", "pci0109:00", device_id=0x101e, ibdev="mlx5_8", link="ib",
                   numa=-1, mac=0x00155d000100, netdev="ibP265s1")
    os.symlink("../0000:99:00.0", os.path.join(r["fn"], "physfn"))
    n.finish()
    devs = by_name(tree_json(run, tmp_path / "azure"))
    assert sorted(devs, key=natural_key) == ["mlx5_%d" % i for i in range(9)]
    for i in range(8):
        d = devs["mlx5_%d" % i]
        assert d["pci_address"] == "%04x:00:00.0" % (0x101 + i)
        assert d["device_id"] == ("101c" if i % 2 else "101e")
        assert d["numa_node"] == i // 4
        # a VF by its device ID although its PF is not visible
        assert d["is_vf"] and d["pf_pci_address"] is None and d["pf_netdev"] is None
        assert d["problems"] == []
        assert d["char_devices"][0] == "/dev/infiniband/uverbs%d" % i
    d = devs["mlx5_8"]
    assert d["is_vf"] and d["pf_pci_address"] is None and d["numa_node"] == -1
    assert d["problems"] == ["physfn: link dangling"]


def test_efa_like_without_umad(run, tmp_path):
    """§11 AWS EFA-like ibdev rdmap79s0, no umad (no infiniband_mad at all)."""
    n = g.Node(tmp_path, "efa")
    fn = n.add_pci_function("0000:4f:00.0", "pci0000:4f", 0x1d0f, 0xefa1, 0x020000, "efa", 0)
    n.add_netdev(fn, "ens32", mac=0x0a1b2c3d4e5f)
    # efa's link layer is IB_LINK_LAYER_UNSPECIFIED: the kernel prints "Unknown"
    n.add_ibdev("rdmap79s0", fn, [g.Port("Unknown", rate="100 Gb/sec (4X EDR)", mad=False)],
                node_guid=0x0a1b2cfffe3d4e5f, fw_ver="0.0.0.0")
    n.finish()
    rm_class_everywhere(n, "infiniband_mad")
    d = by_name(tree_json(run, tmp_path / "efa"))["rdmap79s0"]
    assert (d["vendor"], d["driver"], d["netdevs"]) == ("1d0f", "efa", ["ens32"])
    assert d["char_devices"] == ["/dev/infiniband/uverbs0"]
    assert d["hca_type"] is None and d["problems"] == []
    assert d["ports"][0]["link_layer"] is None
    assert d["ports"][0]["rate"] == "100 Gb/sec (4X EDR)"


def test_cx8_smi_and_12_ports(run, tmp_path):
    """§5: an SMI ibdev smi1 on mlx5_0's PCI function with umad/issm per plane; a CX-8 RoCE
    ibdev with 12 ports at 800 Gb/sec (4X XDR)."""
    n = g.Node(tmp_path, "cx8")
    r = n.add_mlx5("0000:18:00.0", "pci0000:15", device_id=0x1023, ibdev="mlx5_0", link="ib",
                   numa=0, mac=0x58a2e11b2576, netdev="ibp24s0", rate="800 Gb/sec (4X XDR)",
                   fw_ver="40.48.1000")
    n.add_ibdev("smi1", r["fn"], [g.ib_port(0x58a2e103001b2576, rate="800 Gb/sec (4X XDR)")
                                  for _ in range(4)],
                node_guid=0x58a2e103001b2576, fw_ver="40.48.1000")
    fn = n.add_pci_function("0000:29:00.0", "pci0000:28", 0x15b3, 0x1023, 0x020000,
                            "mlx5_core", 1)
    n.add_netdev(fn, "enp41s0np0", mac=0x58a2e11b3000)
    ports = [g.roce_port(0x58a2e11b3000, "enp41s0np0", ipv4=["10.0.0.%d" % (i + 1)],
                         rate="800 Gb/sec (4X XDR)") for i in range(12)]
    n.add_ibdev("mlx5_1", fn, ports, node_guid=0x58a2e103001b3000, fw_ver="40.48.1000",
                extra={"hca_type": "MT4131"})
    n.finish()
    devs = by_name(tree_json(run, tmp_path / "cx8"))
    assert devs["smi1"]["pci_address"] == devs["mlx5_0"]["pci_address"] == "0000:18:00.0"
    assert [p["port"] for p in devs["smi1"]["ports"]] == [1, 2, 3, 4]
    assert sum(c.startswith("/dev/infiniband/umad") for c in devs["smi1"]["char_devices"]) == 4
    d = devs["mlx5_1"]
    assert [p["port"] for p in d["ports"]] == list(range(1, 13))
    assert all(p["rate"] == "800 Gb/sec (4X XDR)" and p["roce_v2_ipv4_gid_index"] == 3
               for p in d["ports"])
    assert sum(c.startswith("/dev/infiniband/issm") for c in d["char_devices"]) == 12
    assert d["problems"] == [] and devs["mlx5_0"]["problems"] == []


def test_iwarp_and_siw(run, tmp_path):
    """§4/§11: iWARP (node_type 4: RNIC, no umad, no infiniband_mad class at all), and siw
    under devices/virtual naming its netdev in `parent`."""
    n = g.Node(tmp_path, "iwarp")
    fn = n.add_pci_function("0000:17:00.0", "pci0000:16", 0x8086, 0x37d2, 0x020000, "i40e", 0)
    n.add_netdev(fn, "eno1", mac=0x3cfdfe000001)
    n.add_aux(fn, "i40e.iwarp.0", "irdma")
    n.add_ibdev("iwp23s0f0", fn, [g.Port("Ethernet", rate="10 Gb/sec (1X QDR)", mad=False)],
                node_type="4: RNIC", node_guid=0x3cfdfe0000010000, fw_ver="0.2",
                extra={"hca_type": "I40IW"})
    n.add_netdev(None, "veth0", mac=0x020000000001)
    n.add_ibdev("siw0", None, [g.Port("Ethernet", rate="10 Gb/sec (1X QDR)", mad=False)],
                node_type="4: RNIC", node_guid=0x0200000000010000, extra={"parent": "veth0"})
    n.finish()
    rm_class_everywhere(n, "infiniband_mad")
    devs = by_name(tree_json(run, tmp_path / "iwarp"))
    assert devs["iwp23s0f0"]["pci_address"] == "0000:17:00.0"
    assert devs["iwp23s0f0"]["char_devices"] == ["/dev/infiniband/uverbs0"]
    assert devs["siw0"]["pci_address"] is None and devs["siw0"]["netdevs"] == ["veth0"]
    assert devs["siw0"]["char_devices"] == ["/dev/infiniband/uverbs1"]
    assert all(d["problems"] == [] for d in devs.values())


@pytest.mark.parametrize("cls", ["infiniband_mad", "infiniband_verbs"])
def test_module_not_loaded(run, tmp_path, cls):
    """§1: mlx5 without ib_umad (no infiniband_mad) or without ib_uverbs."""
    n = g.Node(tmp_path, "m")
    n.add_mlx5("0000:03:00.0", "pci0000:00", device_id=0x1015, ibdev="mlx5_0", link="eth",
               numa=-1, mac=0x248a07000001, netdev="enp3s0f0np0", ipv4=["10.2.0.1"])
    n.finish()
    rm_class_everywhere(n, cls)
    d = by_name(tree_json(run, tmp_path / "m"))["mlx5_0"]
    assert d["ports"][0]["roce_v2_ipv4_gid_index"] == 3 and d["numa_node"] == -1
    if cls == "infiniband_mad":
        assert d["char_devices"] == ["/dev/infiniband/uverbs0"] and d["problems"] == []
    else:
        assert d["char_devices"] == ["/dev/infiniband/umad0", "/dev/infiniband/issm0"]
        assert d["problems"] == ["no uverbs device"]


def test_udev_names_and_dynamic_majors(run, tmp_path):
    """§7 udev names (ibp24s0, rocep193s0f0, rocep193s0f0S88 for an SF, a GUID name);
    §5 uverbs40 / umad70 beyond the fixed minors."""
    n = g.Node(tmp_path, "u")
    n.add_mlx5("0000:18:00.0", "pci0000:15", device_id=0x1021, ibdev="ibp24s0", link="ib",
               numa=0, mac=0x58a2e11b2576, netdev="ibp24s0", uverbs=40, umad=[70])
    r = n.add_mlx5("0000:c1:00.0", "pci0000:c0", device_id=0x101d, ibdev="rocep193s0f0",
                   link="eth", numa=1, mac=0x248a07000001, netdev="enp193s0f0np0",
                   ipv4=["10.3.0.1"], aux_id=0)
    sf = n.add_aux(r["fn"], "mlx5_core.sf.88", "mlx5_core.sf", extra={"sfnum": "88"})
    n.add_netdev(sf, "enp193s0f0s88", mac=0x248a07000088)
    n.add_mlx5_ibdev(sf, "rocep193s0f0S88", device_id=0x101d, link="eth", mac=0x248a07000088,
                     netdev="enp193s0f0s88", ipv4=["10.3.0.88"], rate="100 Gb/sec (4X EDR)",
                     fw_ver="22.38.1002", board_id="MT_0000000359")
    fn = n.add_pci_function("0000:00:04.0", "pci0000:00", 0x1af4, 0x1041, 0x020000,
                            "virtio-pci", -1)
    n.add_netdev(fn, "enp0s4", mac=0x525400c0fe12)
    n.add_ibdev("rocex525400c0fe123455", None,
                [g.roce_port(0x525400c0fe12, "enp0s4", ipv4=["10.4.0.1"], v1=False,
                             rate="2.5 Gb/sec (1X SDR)")],
                node_guid=0x525400fffec0fe12, extra={"parent": "enp0s4"})
    n.finish()
    devs = by_name(tree_json(run, tmp_path / "u"))
    assert devs["ibp24s0"]["char_devices"] == ["/dev/infiniband/uverbs40",
                                               "/dev/infiniband/umad70", "/dev/infiniband/issm70"]
    sf = devs["rocep193s0f0S88"]
    assert sf["pci_address"] == "0000:c1:00.0" and sf["netdevs"] == ["enp193s0f0s88"]
    assert devs["rocep193s0f0"]["netdevs"] == ["enp193s0f0np0"]
    g2 = devs["rocex525400c0fe123455"]
    assert g2["netdevs"] == ["enp0s4"] and g2["ports"][0]["roce_v2_ipv4_gid_index"] == 1
    assert all(d["problems"] == [] for d in devs.values())


def test_gid_table_256_empty_and_missing_slots(run, tmp_path):
    """§4/§10: 256 GID slots; empty slots both as empty files and as missing files are
    skipped; an IPv4 on a VLAN netdev far into the table."""
    n = g.Node(tmp_path, "gid")
    n.gid_slots = 256
    r = n.add_mlx5("0000:18:00.0", "pci0000:15", device_id=0x101d, ibdev="mlx5_0", link="eth",
                   numa=0, mac=0x58a2e11b2576, netdev="enp24s0np0")
    n.add_netdev(None, "enp24s0np0.100", mac=0x58a2e11b2576)
    n.finish()
    pd = os.path.join(r["ibdev"], "ports/1")
    for i in range(10, 200):
        os.unlink(os.path.join(pd, "gid_attrs/types/%d" % i))
        os.unlink(os.path.join(pd, "gid_attrs/ndevs/%d" % i))
    for i in range(200, 210):
        os.unlink(os.path.join(pd, "gids/%d" % i))
    g.Node.write(os.path.join(pd, "gids/250"), g.ipv4_gid("10.100.0.1"))
    g.Node.write(os.path.join(pd, "gid_attrs/types/250"), "RoCE v2")
    g.Node.write(os.path.join(pd, "gid_attrs/ndevs/250"), "enp24s0np0.100")
    d = by_name(tree_json(run, tmp_path / "gid"))["mlx5_0"]
    assert d["ports"][0]["roce_v2_ipv4_gid_index"] == 250
    assert d["netdevs"] == ["enp24s0np0", "enp24s0np0.100"]
    assert d["problems"] == []


def test_pf_with_127_vfs(run, tmp_path):
    """§2: a PF with 127 VFs (sriov_offset 1, VFs 3b:00.1 .. 3b:0f.7)."""
    n = g.Node(tmp_path, "v")
    n.gid_slots = 4
    n.add_mlx5("0000:3b:00.0", "pci0000:3a", device_id=0x101d, ibdev="mlx5_0", link="eth",
               numa=1, mac=0x248a07000000, netdev="ens3f0",
               sriov={"totalvfs": 127, "offset": 1, "stride": 1, "vf_device": 0x101e})
    for i in range(127):
        f = 1 + i
        n.add_mlx5("0000:3b:%02x.%d" % (f // 8, f % 8), None, device_id=0x101e,
                   ibdev="mlx5_%d" % (i + 1), link="eth", pf="0000:3b:00.0", vf_index=i,
                   mac=0x248a07000100 + i, netdev="ens3f0v%d" % i)
    n.finish()
    devs = tree_json(run, tmp_path / "v")["devices"]
    assert len(devs) == 128
    for d in devs[1:]:
        assert d["is_vf"] and d["pf_pci_address"] == "0000:3b:00.0"
        assert d["pf_netdev"] == "ens3f0" and d["problems"] == [] and d["numa_node"] == 1


def test_host_edges(run, tmp_path):
    """class/infiniband exists but is empty; /dev/infiniband missing; class/infiniband
    entries that are plain directories (old kernels); ibdev names at and past 63 bytes."""
    n = g.Node(tmp_path, "empty")
    os.makedirs(n.path("class/infiniband"))
    n.finish()
    assert tree_json(run, tmp_path / "empty")["devices"] == []

    n = g.Node(tmp_path, "nodev")
    n.add_mlx5("0000:18:00.0", "pci0000:15", device_id=0x1021, ibdev="mlx5_0", link="ib",
               numa=0, mac=0x58a2e11b2576, netdev="ibp24s0")
    n.add_mlx5("0000:19:00.0", "pci0000:15", device_id=0x1021, ibdev="x" * 63, link="eth",
               numa=0, mac=0x58a2e11b2577, netdev="abcdefghijklmno", ipv4=["10.0.0.1"])
    n.add_mlx5("0000:1a:00.0", "pci0000:15", device_id=0x1021, ibdev="y" * 64, link="ib",
               numa=0, mac=0x58a2e11b2578, netdev="ibp26s0")
    n.finish()
    shutil.rmtree(os.path.join(n.dev, "infiniband"))
    doc = tree_json(run, tmp_path / "nodev")
    assert doc["rdma_cm"] is None
    devs = by_name(doc)
    assert sorted(devs) == ["mlx5_0", "x" * 63]
    assert devs["x" * 63]["netdevs"] == ["abcdefghijklmno"]
    assert all(d["char_devices"] == [] and d["problems"] for d in devs.values())

    n = g.Node(tmp_path, "dirs")
    n.add_mlx5("0000:18:00.0", "pci0000:15", device_id=0x1021, ibdev="mlx5_0", link="ib",
               numa=0, mac=0x58a2e11b2576, netdev="ibp24s0")
    n.finish()
    c = n.path("class/infiniband/mlx5_0")
    real = os.path.realpath(c)
    os.unlink(c)
    shutil.copytree(real, c, symlinks=True)
    os.unlink(os.path.join(c, "device"))
    os.symlink(os.path.relpath(os.path.dirname(os.path.dirname(real)), c),
               os.path.join(c, "device"))
    d = by_name(tree_json(run, tmp_path / "dirs"))["mlx5_0"]
    assert d["pci_address"] == "0000:18:00.0" and d["netdevs"] == ["ibp24s0"]
    assert d["problems"] == []
