"""rdma-dp discover on every fixture node: the JSON document checked field by field against the
contract (a hand-written schema check), the table, and the error paths."""
import json
import re
import subprocess


def natural_key(name):
    """Natural order, as discovery lists devices: mlx5_2 before mlx5_10."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]

import pytest

from conftest import node_args

EXPECTED_NODES = ["seed000", "seed001", "dgx-h100", "sriov", "mlx4", "roce-lag", "irdma-bnxt",
                  "rxe", "no-rdma", "broken", "exclusive", "port-down"]

DEVICE_FIELDS = ["name", "pci_address", "vendor", "device_id", "class", "driver", "netdevs",
                 "numa_node", "is_vf", "pf_pci_address", "pf_netdev", "node_guid", "fw_ver",
                 "hca_type", "ports", "char_devices", "problems"]
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


def test_rxe_virtual(run, fixtures_dir):
    devs = by_name(discover_json(run, fixtures_dir, "rxe"))
    d = devs["rxe0"]
    assert d["pci_address"] is None
    assert d["vendor"] is None and d["driver"] is None
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
    table = run("discover", *node_args(tmp_path, "n")).stdout
    assert "rdma_cm: missing" in table
    assert "host: /dev/infiniband/rdma_cm missing" in table


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
