# SPDX-License-Identifier: MIT
"""Sanity checks of the generated fixture nodes (tests/fixtures/gen-fixtures.py) and of the
sysfsgen mutation API. Needs only RDP_FIXTURES (a generated fixtures dir)."""
import os
import pathlib
import re
import resource
import stat
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "fixtures"))
import sysfsgen  # noqa: E402

GEN = REPO / "tests" / "fixtures" / "gen-fixtures.py"
NODES = ["seed000", "seed001", "dgx-h100", "sriov", "mlx4", "roce-lag", "irdma-bnxt", "rxe",
         "no-rdma", "broken", "exclusive", "port-down", "two-socket-vfs", "vm-passthrough",
         "hgx-pix", "renamed"]
RDMA_NODES = [n for n in NODES if n != "no-rdma"]
UNREADABLE_OK = re.compile(r"/ports/\d+/gid_attrs/(types|ndevs)/\d+$")
DANGLING_OK = {("broken", "class/infiniband/mlx5_4")}
MISSING_DEV_OK = {("broken", "uverbs5")}


def rd(p):
    with open(p) as f:
        return f.read()


def val(p):
    return rd(p).rstrip("\n")


@pytest.fixture(params=NODES)
def node(request, fixtures_dir):
    return request.param, fixtures_dir / request.param


@pytest.fixture(params=RDMA_NODES)
def rnode(request, fixtures_dir):
    return request.param, fixtures_dir / request.param


def ibdevs(sysd):
    d = sysd / "class/infiniband"
    return sorted(os.listdir(d)) if d.is_dir() else []


def ib(fx, node, dev):
    return fx / node / "sys/class/infiniband" / dev


# --- every node -------------------------------------------------------------------------------

def test_list_matches(fixtures_dir):
    out = subprocess.run([sys.executable, str(GEN), "--list"], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == NODES
    for n in NODES:
        assert (fixtures_dir / n / "sys").is_dir() and (fixtures_dir / n / "dev").is_dir()


def test_class_entries_are_relative_resolving_symlinks(node):
    name, root = node
    for cls in ("infiniband", "infiniband_verbs", "infiniband_mad", "net", "misc"):
        d = root / "sys/class" / cls
        if not d.is_dir():
            continue
        for e in os.listdir(d):
            p = d / e
            if e in ("abi_version", "bonding_masters"):
                assert p.is_file() and not p.is_symlink()
                continue
            assert p.is_symlink(), p
            t = os.readlink(p)
            assert t.startswith("../../devices/"), (p, t)
            if (name, "class/%s/%s" % (cls, e)) in DANGLING_OK:
                assert not p.exists()
                continue
            assert p.resolve().is_dir(), p
            assert str(p.resolve()).startswith(str(root.resolve() / "sys/devices")), p


def test_values_end_with_newline(node):
    _, root = node
    n = 0
    for dirpath, dirs, files in os.walk(root / "sys"):
        for f in files + dirs:
            p = os.path.join(dirpath, f)
            if os.path.islink(p):
                # the only links whose read fails: empty GID slots (and IB ports' ndevs)
                if sysfsgen.is_unreadable(p):
                    assert UNREADABLE_OK.search(p), "undocumented unreadable entry %s" % p
                    with pytest.raises(IsADirectoryError):
                        rd(p)
                continue
            if f in dirs:
                continue
            data = rd(p)
            n += 1
            assert data != "", "empty file %s" % p
            assert data.endswith("\n"), p
    assert n > 10
    ur = root / "sys" / sysfsgen.UNREADABLE
    assert not ur.exists() or (ur.is_dir() and os.listdir(ur) == [])


def test_no_absolute_symlinks(node):
    _, root = node
    for dirpath, dirs, files in os.walk(root):
        for f in dirs + files:
            p = os.path.join(dirpath, f)
            if os.path.islink(p):
                assert not os.readlink(p).startswith("/"), p


def test_pci_devices(node):
    _, root = node
    sysd = root / "sys"
    for e in os.listdir(sysd / "bus/pci/devices"):
        p = sysd / "bus/pci/devices" / e
        assert os.readlink(p).startswith("../../../devices/pci"), p
        fn = p.resolve()
        assert fn.name == e
        for a in ("vendor", "device", "subsystem_vendor", "subsystem_device"):
            assert re.fullmatch(r"0x[0-9a-f]{4}\n", rd(fn / a)), (fn, a)
        assert re.fullmatch(r"0x[0-9a-f]{6}\n", rd(fn / "class"))
        assert re.fullmatch(r"-?\d+\n", rd(fn / "numa_node"))
        assert "PCI_SLOT_NAME=%s\n" % e in rd(fn / "uevent")
        drv = fn / "driver"
        if drv.is_symlink():
            depth = len(fn.relative_to(sysd.resolve()).parts)
            assert os.readlink(drv) == "../" * depth + "bus/pci/drivers/" + drv.resolve().name
            assert (drv.resolve() / e).resolve() == fn
            assert "DRIVER=%s\n" % drv.resolve().name in rd(fn / "uevent")


def test_ibdev_structure(rnode):
    name, root = rnode
    sysd = root / "sys"
    for dev in ibdevs(sysd):
        d = sysd / "class/infiniband" / dev
        if (name, "class/infiniband/" + dev) in DANGLING_OK:
            continue
        assert val(d / "uevent") == "NAME=" + dev
        assert val(d / "node_type") in ("1: CA", "4: RNIC")
        if (d / "node_guid").exists():
            assert re.fullmatch(r"([0-9a-f]{4}:){3}[0-9a-f]{4}\n", rd(d / "node_guid"))
        if (d / "device").is_symlink():
            t = os.readlink(d / "device")
            parent = d.resolve().parent.parent
            assert t == "../../../" + parent.name
            assert (d / "device").resolve() == parent
        if not (d / "ports").is_dir():
            continue
        for port in os.listdir(d / "ports"):
            pd = d / "ports" / port
            assert val(pd / "link_layer") in ("InfiniBand", "Ethernet")
            slots = sorted(os.listdir(pd / "gids"), key=int)
            # gid_tbl_len as the drivers report it (sysfsgen.GID_TBL_LEN_*)
            ll = val(pd / "link_layer")
            assert len(slots) >= (8 if ll == "InfiniBand" else 32), (pd, len(slots))
            assert slots == [str(i) for i in range(len(slots))]
            for sub in ("gid_attrs/types", "gid_attrs/ndevs"):
                assert sorted(os.listdir(pd / sub), key=int) == slots, (pd, sub)
            valid = 0
            for i in slots:
                assert re.fullmatch(r"([0-9a-f]{4}:){7}[0-9a-f]{4}\n", rd(pd / "gids" / i))
                t = pd / "gid_attrs/types" / i
                nd = pd / "gid_attrs/ndevs" / i
                if sysfsgen.is_unreadable(t):
                    # empty slot: all-zero GID, both attributes fail on read
                    assert val(pd / "gids" / i) == sysfsgen.ZERO_GID
                    assert sysfsgen.is_unreadable(nd)
                    continue
                valid += 1
                assert rd(t) in ("IB/RoCE v1\n", "RoCE v2\n")
                assert val(pd / "gids" / i) != sysfsgen.ZERO_GID
                if ll == "InfiniBand":
                    assert sysfsgen.is_unreadable(nd)   # no netdev: EINVAL on the kernel
                else:
                    assert re.fullmatch(r"[^/: ]{1,15}\n", rd(nd)), nd
            assert valid >= 1 and valid < len(slots)
            assert re.fullmatch(r"\d: [A-Z_]+\n", rd(pd / "state")) or name == "broken"


def _cdevs(root):
    sysd = root / "sys"
    for cls, pat, fn, mode in (("infiniband_verbs", r"uverbs(\d+)", sysfsgen.uverbs_devt, 0o666),
                               ("infiniband_mad", r"umad(\d+)", sysfsgen.umad_devt, 0o600),
                               ("infiniband_mad", r"issm(\d+)", sysfsgen.issm_devt, 0o600)):
        d = sysd / "class" / cls
        if not d.is_dir():
            continue
        for e in sorted(os.listdir(d)):
            m = re.fullmatch(pat, e)
            if m:
                yield d / e, e, fn(int(m.group(1))), mode


def test_char_devices_match_names(rnode):
    name, root = rnode
    seen = 0
    for p, e, devt, mode in _cdevs(root):
        seen += 1
        assert val(p / "dev") == "%d:%d" % devt
        # uverbs: its devnode mode too, as the kernel sends it (tests/kernel/dumps/sysfs.txt)
        assert "MAJOR=%d\nMINOR=%d\nDEVNAME=infiniband/%s\n%s" % (
            devt + (e, "DEVMODE=0666\n" if e.startswith("uverbs") else "")) == rd(p / "uevent")
        owner = val(p / "ibdev")
        assert (root / "sys/class/infiniband" / owner).is_symlink()
        if e.startswith(("umad", "issm")):
            assert (root / "sys/class/infiniband" / owner / "ports" / val(p / "port")).exists() \
                or name == "broken"
        else:
            assert re.fullmatch(r"\d+\n", rd(p / "abi_version"))
        dn = root / "dev/infiniband" / e
        if (name, e) in MISSING_DEV_OK:
            assert not dn.exists()
            continue
        st = os.lstat(dn)
        assert stat.S_IMODE(st.st_mode) == mode
        if stat.S_ISCHR(st.st_mode):
            assert (os.major(st.st_rdev), os.minor(st.st_rdev)) == devt
        # the parent of uverbs/umad is the parent of the ib device (§5)
        ibd = (root / "sys/class/infiniband" / owner).resolve()
        assert p.resolve().parent.parent == ibd.parent.parent
    assert seen > 0
    assert val(root / "sys/class/infiniband_verbs/abi_version") == "6"
    assert val(root / "sys/class/infiniband_mad/abi_version") == "5"


def test_rdma_cm_and_netns(rnode):
    name, root = rnode
    # the real kernel's (Debian 6.1, tests/kernel/dumps/sysfs.txt): 10:124, ABI 4
    assert val(root / "sys/class/misc/rdma_cm/dev") == "10:124"
    assert val(root / "sys/class/misc/rdma_cm/abi_version") == "4"
    dn = root / "dev/infiniband/rdma_cm"
    if name == "broken":
        assert not dn.exists()
    else:
        assert stat.S_IMODE(os.lstat(dn).st_mode) == 0o666
    assert val(root / "sys/module/ib_core/parameters/netns_mode") == \
        ("N" if name == "exclusive" else "Y")


def test_netdevs(node):
    _, root = node
    for e in os.listdir(root / "sys/class/net"):
        if e == "bonding_masters":
            continue
        d = root / "sys/class/net" / e
        t = int(val(d / "type"))
        alen = int(val(d / "addr_len"))
        assert len(val(d / "address").split(":")) == alen
        assert (t, alen) in ((1, 6), (32, 20), (772, 6))
        assert val(d / "uevent").startswith("INTERFACE=%s\nIFINDEX=%s" % (e, val(d / "ifindex")))
        if (d / "device").is_symlink():
            assert os.readlink(d / "device") == "../../../" + d.resolve().parent.parent.name


# --- node specifics ------------------------------------------------------------------------------

def test_seed000(fixtures_dir):
    d = ib(fixtures_dir, "seed000", "mlx5_0")
    fn = (d / "device").resolve()
    assert fn.name == "0000:81:00.0"
    assert [val(fn / a) for a in ("vendor", "device", "class", "numa_node")] == \
        ["0x15b3", "0x101d", "0x020700", "1"]
    assert os.listdir(fn / "net") == ["ib0"]
    assert val(fn / "net/ib0/type") == "32"
    assert val(d / "ports/1/state") == "4: ACTIVE"
    assert val(d / "ports/1/phys_state") == "5: LinkUp"
    assert val(d / "ports/1/link_layer") == "InfiniBand"
    assert val(d / "ports/1/rate") == "200 Gb/sec (4X HDR)"
    assert val(d / "hca_type") == "MT4125"
    assert ibdevs(fixtures_dir / "seed000/sys") == ["mlx5_0"]


def test_seed001(fixtures_dir):
    fn = (ib(fixtures_dir, "seed001", "mlx5_0") / "device").resolve()
    assert val(fn / "device") == "0x101b" and os.listdir(fn / "net") == ["ibs108"]
    other = (ib(fixtures_dir, "seed001", "mlx5_1") / "device").resolve()
    assert val(other / "class") == "0x020000"
    assert os.listdir(other / "net") == ["ens9f0np0"]


def test_dgx_topology(fixtures_dir):
    sysd = fixtures_dir / "dgx-h100/sys"
    assert ibdevs(sysd) == sorted("mlx5_%d" % i for i in range(12))
    compute = {"mlx5_0": ("0000:18:00.0", "ibp24s0", "0000:1b:00.0"),
               "mlx5_3": ("0000:40:00.0", "ibp64s0", "0000:43:00.0"),
               "mlx5_4": ("0000:4f:00.0", "ibp79s0", "0000:52:00.0"),
               "mlx5_5": ("0000:5e:00.0", "ibp94s0", "0000:61:00.0"),
               "mlx5_6": ("0000:9a:00.0", "ibp154s0", "0000:9d:00.0"),
               "mlx5_9": ("0000:c0:00.0", "ibp192s0", "0000:c3:00.0"),
               "mlx5_10": ("0000:ce:00.0", "ibp206s0", "0000:d1:00.0"),
               "mlx5_11": ("0000:dc:00.0", "ibp220s0", "0000:df:00.0")}
    for dev, (bdf, ifname, gpu) in compute.items():
        d = sysd / "class/infiniband" / dev
        fn = (d / "device").resolve()
        assert fn.name == bdf and os.listdir(fn / "net") == [ifname]
        assert val(fn / "class") == "0x020700" and val(d / "hca_type") == "MT4129"
        assert val(d / "ports/1/rate") == "400 Gb/sec (4X NDR)"
        numa = int(val(fn / "numa_node"))
        assert val(fn / "local_cpulist") == ("0-55,112-167" if numa == 0 else "56-111,168-223")
        assert numa == (0 if int(bdf[5:7], 16) < 0x80 else 1)
        # RP -> USP -> DSP -> NIC, GPU under a sibling DSP of the same USP
        usp = fn.parent.parent
        gfn = (sysd / "bus/pci/devices" / gpu).resolve()
        assert usp in gfn.parents and fn.parent not in gfn.parents
        assert val(usp / "device") == "0x1979" and not (usp / "infiniband").exists()
        assert val(gfn / "device") == "0x2330" and val(gfn / "class") == "0x030200"
        assert (gfn / "driver").resolve().name == "nvidia"
    for a, b, ifa in (("mlx5_1", "mlx5_2", "enp41s0f0np0"), ("mlx5_7", "mlx5_8", "enp169s0f0np0")):
        da, db = sysd / "class/infiniband" / a, sysd / "class/infiniband" / b
        ga, gb = (int(val(x / "node_guid").replace(":", ""), 16) for x in (da, db))
        assert gb == ga + 1
        assert val(da / "sys_image_guid") == val(db / "sys_image_guid") == val(da / "node_guid")
        fa = (da / "device").resolve()
        assert fa.parent == (db / "device").resolve().parent and fa.name.endswith(".0")
        assert ifa in os.listdir(fa / "net")
        assert val(fa / "class") == "0x020000"
        assert val(da / "ports/1/link_layer") == "Ethernet"
        assert val(da / "ports/1/gid_attrs/types/3") == "RoCE v2"
        assert val(da / "ports/1/gids/3").startswith("0000:0000:0000:0000:0000:ffff:")
        assert val(da / "ports/1/gid_attrs/ndevs/3") == ifa
    owners = {}
    for e in os.listdir(sysd / "class/infiniband_verbs"):
        if e.startswith("uverbs"):
            owners[val(sysd / "class/infiniband_verbs" / e / "ibdev")] = int(e[6:])
    assert sorted(owners) == ibdevs(sysd)
    assert any(int(k.split("_")[1]) != v for k, v in owners.items())
    assert owners["mlx5_1"] != 1
    bridges = [e for e in os.listdir(sysd / "bus/pci/devices")
               if val(sysd / "bus/pci/devices" / e / "device") == "0x1979"]
    assert len(bridges) == 24
    assert sum(val(sysd / "bus/pci/devices" / e / "class") == "0x010802"
               for e in os.listdir(sysd / "bus/pci/devices")) == 2


def test_sriov(fixtures_dir):
    sysd = fixtures_dir / "sriov/sys"
    pf = sysd / "bus/pci/devices/0000:3b:00.0"
    assert val(pf / "sriov_numvfs") == "4" and val(pf / "sriov_vf_device") == "101e"
    assert os.listdir(pf / "net") == ["ens3f0"]
    for i in range(4):
        vf = sysd / ("bus/pci/devices/0000:3b:00.%d" % (2 + i))
        assert os.readlink(pf / ("virtfn%d" % i)) == "../0000:3b:00.%d" % (2 + i)
        assert os.readlink(vf / "physfn") == "../0000:3b:00.0"
        assert val(vf / "device") == "0x101e"
        assert (vf / "driver").resolve().name == "mlx5_core"
        d = sysd / ("class/infiniband/mlx5_%d" % (1 + i))
        assert (d / "device").resolve() == vf.resolve()
        assert os.listdir(vf / "net") == ["ens3f0v%d" % i]
        assert val(d / "ports/1/state") == "4: ACTIVE"
    assert (sysd / "class/infiniband/mlx5_5/device").resolve().name == "0000:3b:00.1"
    assert val(sysd / "bus/pci/devices/0000:3b:00.1/sriov_numvfs") == "0"


def test_mlx4(fixtures_dir):
    root = fixtures_dir / "mlx4"
    d = root / "sys/class/infiniband/mlx4_0"
    assert ibdevs(root / "sys") == ["mlx4_0"]
    assert val(d / "hca_type") == "MT4099"
    assert val(d / "ports/1/link_layer") == "InfiniBand"
    assert val(d / "ports/2/link_layer") == "Ethernet"
    fn = (d / "device").resolve()
    assert sorted(os.listdir(fn / "net")) == ["ens1d1", "ib0"]
    assert (fn / "driver").resolve().name == "mlx4_core"
    cd = [e for _, e, _, _ in _cdevs(root)]
    assert sorted(cd) == ["issm0", "issm1", "umad0", "umad1", "uverbs0"]
    ports = {val(root / "sys/class/infiniband_mad" / u / "port") for u in ("umad0", "umad1")}
    assert ports == {"1", "2"}
    types = {rd(p) for p in (d / "ports/2/gid_attrs/types").iterdir()
             if not sysfsgen.is_unreadable(p)}
    assert "RoCE v2\n" not in types


def test_roce_lag(fixtures_dir):
    sysd = fixtures_dir / "roce-lag/sys"
    assert ibdevs(sysd) == ["mlx5_2", "mlx5_bond_0"]
    d = sysd / "class/infiniband/mlx5_bond_0"
    assert (d / "device").resolve().name == "0000:5e:00.0"
    assert val(d / "ports/1/link_layer") == "Ethernet"
    nd = {val(p) for p in (d / "ports/1/gid_attrs/ndevs").iterdir()
          if not sysfsgen.is_unreadable(p)}
    assert nd == {"bond0"}
    bond = sysd / "class/net/bond0"
    assert os.readlink(bond) == "../../devices/virtual/net/bond0"
    assert (bond / "lower_ens1f0np0").resolve() == (sysd / "class/net/ens1f0np0").resolve()
    assert (bond / "lower_ens1f1np1").is_symlink()
    assert val(bond / "bonding/slaves") == "ens1f0np0 ens1f1np1"
    assert (sysd / "class/net/ens1f1np1/master").resolve() == bond.resolve()


def test_irdma_bnxt_sf(fixtures_dir):
    sysd = fixtures_dir / "irdma-bnxt/sys"
    assert ibdevs(sysd) == ["bnxt_re0", "irdma0", "mlx5_0", "mlx5_1", "mlx5_2"]
    for dev, aux, drv in (("irdma0", "ice.roce.0", "ice"), ("bnxt_re0", "bnxt_en.rdma.0",
                                                            "bnxt_en")):
        fn = (sysd / "class/infiniband" / dev / "device").resolve()
        assert (fn / "driver").resolve().name == drv
        assert (sysd / "bus/auxiliary/devices" / aux).resolve() == fn / aux
    sf = sysd / "class/infiniband/mlx5_2"
    sfdir = (sf / "device").resolve()
    assert sfdir.name == "mlx5_core.sf.2" and val(sfdir / "sfnum") == "2"
    assert sf.resolve().parent.parent == sfdir
    assert os.listdir(sfdir / "net") == ["en3f0pf0sf2"]
    assert pathlib.Path(sysfsgen.pci_function_dir(str(sysd), "mlx5_2")).name == "0000:03:00.0"
    assert val(sysd / "class/infiniband/irdma0/ports/1/gid_attrs/types/1") == "RoCE v2"


def test_rxe(fixtures_dir):
    sysd = fixtures_dir / "rxe/sys"
    d = sysd / "class/infiniband/rxe0"
    assert os.readlink(d) == "../../devices/virtual/infiniband/rxe0"
    assert not (d / "device").exists() and val(d / "parent") == "eth0"
    assert val(d / "ports/1/gid_attrs/types/1") == "RoCE v2"
    assert val(d / "ports/1/gids/1") == "0000:0000:0000:0000:0000:ffff:0a00:020f"
    assert val(d / "ports/1/gid_attrs/types/0") == "RoCE v2"
    assert os.readlink(sysd / "class/infiniband_verbs/uverbs0") == \
        "../../devices/virtual/infiniband_verbs/uverbs0"
    eth0 = (sysd / "class/net/eth0").resolve()
    assert eth0.parent.parent.name == "virtio0"
    assert not (eth0.parent.parent.parent / "infiniband").exists()
    assert sysfsgen.pci_function_dir(str(sysd), "rxe0") is None
    # as the real kernel shows rxe (tests/kernel/dumps/sysfs.txt)
    assert val(d / "node_desc") == "rxe" and val(d / "fw_ver") == ""
    assert val(d / "node_type") == "1: CA" and not (d / "hca_type").exists()
    assert sorted(os.listdir(d / "ports/1/hw_counters")) == \
        sorted(sysfsgen.HW_COUNTERS_RXE + ("lifespan",))
    assert len(sysfsgen.HW_COUNTERS_RXE) == 15
    assert val(d / "ports/1/hw_counters/lifespan") == "12"
    for g in ("cm_rx_msgs", "cm_tx_msgs", "cm_rx_duplicates", "cm_tx_retries"):
        assert val(d / "ports/1" / g / "req") == "0"
    assert not (d / "ports/1/counters").exists()
    assert val(d / "ports/1/pkeys/0") == "0xffff" and val(d / "ports/1/lid") == "0x0"
    assert val(d / "ports/1/cap_mask") == "0x00010000"
    assert val(sysd / "class/infiniband_verbs/uverbs0/abi_version") == "2"
    assert val(sysd / "class/infiniband_verbs/uverbs0/dev") == "231:192"
    assert val(sysd / "class/infiniband_mad/umad0/dev") == "231:0"
    assert val(sysd / "class/infiniband_mad/issm0/dev") == "231:64"
    # the rate follows the netdev: virtio-net 2.5 Gb/s, a veth 10 Gb/s
    assert val(d / "ports/1/rate") == "2.5 Gb/sec (1X SDR)"
    r1 = sysd / "class/infiniband/rxe1"
    assert val(r1 / "parent") == "vethA" and val(r1 / "ports/1/rate") == "10 Gb/sec (1X FDR10)"
    assert (sysd / "class/net/vethA").resolve().parent.name == "net"
    assert val(r1 / "ports/1/gids/1") == "0000:0000:0000:0000:0000:ffff:0a4d:0001"


def test_no_rdma(fixtures_dir):
    root = fixtures_dir / "no-rdma"
    assert not (root / "sys/class/infiniband").exists()
    assert not (root / "dev/infiniband").exists()
    assert not (root / "sys/module/ib_core").exists()
    assert (root / "sys/class/net/eth0").is_symlink()


def test_broken(fixtures_dir):
    root = fixtures_dir / "broken"
    c = root / "sys/class/infiniband"
    assert ibdevs(root / "sys") == ["mlx5_%d" % i for i in range(6)]
    assert not (c / "mlx5_1/node_guid").exists() and not (c / "mlx5_1/fw_ver").exists()
    assert not (c / "mlx5_2/ports").exists()
    assert val(c / "mlx5_3/ports/1/state") == "weird"
    assert (c / "mlx5_4").is_symlink() and not (c / "mlx5_4").exists()
    assert not (root / "dev/infiniband/uverbs5").exists()
    assert val(root / "sys/class/infiniband_verbs/uverbs5/ibdev") == "mlx5_5"
    assert (root / "dev/infiniband/umad5").exists()
    assert not (root / "dev/infiniband/rdma_cm").exists()
    assert val(c / "mlx5_0/ports/1/state") == "4: ACTIVE"


def test_renamed(fixtures_dir):
    c = fixtures_dir / "renamed/sys/class/infiniband"
    assert ibdevs(fixtures_dir / "renamed/sys") == ["ibp24s0", "rocep41s0f0"]
    assert val(c / "ibp24s0/ports/1/counters/symbol_error") == "65535"
    assert val(c / "rocep41s0f0/ports/1/counters/port_rcv_switch_relay_errors") == \
        "N/A (no PMA)"
    # udev renamed them: the hw counters are there all the same
    assert (c / "ibp24s0/ports/1/hw_counters/local_ack_timeout_err").exists()
    assert (c / "rocep41s0f0/ports/1/hw_counters/np_cnp_sent").exists()


def test_pma_counters(fixtures_dir):
    """mlx5 ports have the kernel's whole counters/ set, traffic differing per device;
    irdma, bnxt_re and rxe have no counters/ (no process_mad)."""
    c = fixtures_dir / "dgx-h100/sys/class/infiniband"
    names = sorted(p.name for p in (c / "mlx5_0/ports/1/counters").iterdir())
    assert names == sorted(sysfsgen.PMA_COUNTERS_MLX5)
    data = {d: val(c / d / "ports/1/counters/port_xmit_data") for d in ("mlx5_0", "mlx5_3")}
    assert data["mlx5_0"] != data["mlx5_3"] and int(data["mlx5_0"]) > 0
    for node, dev in (("irdma-bnxt", "irdma0"), ("irdma-bnxt", "bnxt_re0"), ("rxe", "rxe0")):
        assert not (fixtures_dir / node / "sys/class/infiniband" / dev /
                    "ports/1/counters").exists()
    assert val(fixtures_dir / "irdma-bnxt/sys/class/infiniband/irdma0/ports/1/hw_counters/"
               "cnpHandled") == "12"


def test_port_down(fixtures_dir):
    c = fixtures_dir / "port-down/sys/class/infiniband"
    assert val(c / "mlx5_0/ports/1/state") == "1: DOWN"
    assert val(c / "mlx5_0/ports/1/phys_state") == "3: Disabled"
    assert val(c / "mlx5_1/ports/1/state") == "2: INIT"
    assert val(c / "mlx5_1/ports/1/phys_state") == "5: LinkUp"



# two-socket-vfs (README): PF BDF -> (ibdev, netdev stem, NUMA, host bridge, VF count,
# first VF ibdev index, sriov_offset)
TSV_PFS = {
    "0000:19:00.0": ("mlx5_0", "ens1f0", 0, "pci0000:16", 16, 10, 2),
    "0000:19:00.1": ("mlx5_1", "ens1f1", 0, "pci0000:16", 8, 26, 17),
    "0000:1c:00.0": ("mlx5_2", "ens2f0", 0, "pci0000:16", 16, 34, 2),
    "0000:1c:00.1": ("mlx5_3", "ens2f1", 0, "pci0000:16", 0, None, 17),
    "0000:31:00.0": ("mlx5_4", "ens3f0", 0, "pci0000:30", 8, 50, 2),
    "0000:31:00.1": ("mlx5_5", "ens3f1", 0, "pci0000:30", 0, None, 17),
    "0000:98:00.0": ("mlx5_6", "ens5f0", 1, "pci0000:97", 8, 58, 2),
    "0000:98:00.1": ("mlx5_7", "ens5f1", 1, "pci0000:97", 0, None, 17),
    "0000:99:00.0": ("mlx5_8", "ens6f0", 1, "pci0000:97", 8, 66, 2),
    "0000:99:00.1": ("mlx5_9", "ens6f1", 1, "pci0000:97", 0, None, 17),
}


def _bdf_plus(bdf, n):
    """The BDF whose routing ID is bdf's + n (what the kernel does for VF i: + offset +
    i * stride)."""
    dom, bus, df = bdf.split(":")
    dev, fn = df.split(".")
    rid = (int(bus, 16) << 8) + (int(dev, 16) << 3) + int(fn) + n
    return "%s:%02x:%02x.%d" % (dom, rid >> 8, (rid >> 3) & 0x1f, rid & 7)


def _path_below_root(sysd, bdf):
    """[host bridge, BDFs from the root port down to bdf] from the resolved sysfs dir."""
    fn = (sysd / "bus/pci/devices" / bdf).resolve()
    parts = fn.relative_to((sysd / "devices").resolve()).parts
    return list(parts)


def test_two_socket_vfs(fixtures_dir):
    sysd = fixtures_dir / "two-socket-vfs/sys"
    assert ibdevs(sysd) == sorted("mlx5_%d" % i for i in range(74))
    nvf = 0
    for pf_bdf, (dev, stem, numa, root, count, first, offset) in TSV_PFS.items():
        pf = sysd / "bus/pci/devices" / pf_bdf
        d = sysd / "class/infiniband" / dev
        assert (d / "device").resolve() == pf.resolve()
        assert [val(pf / a) for a in ("vendor", "device", "class", "numa_node")] == \
            ["0x15b3", "0x101d", "0x020000", str(numa)]
        assert val(pf / "local_cpulist") == ("0-27,56-83" if numa == 0 else "28-55,84-111")
        assert [val(pf / a) for a in ("sriov_totalvfs", "sriov_numvfs", "sriov_offset",
                                      "sriov_stride", "sriov_vf_device")] == \
            ["16", str(count), str(offset), "1", "101e"]
        assert os.listdir(pf / "net") == ["%snp%s" % (stem, stem[-1])]
        assert _path_below_root(sysd, pf_bdf)[0] == root
        assert not (pf / "physfn").exists()
        assert sorted(e for e in os.listdir(pf) if e.startswith("virtfn")) == \
            sorted("virtfn%d" % i for i in range(count))
        assert val(d / "hca_type") == "MT4125"
        for i in range(count):
            vbdf = _bdf_plus(pf_bdf, offset + i)
            vf = sysd / "bus/pci/devices" / vbdf
            assert os.readlink(pf / ("virtfn%d" % i)) == "../" + vbdf
            assert os.readlink(vf / "physfn") == "../" + pf_bdf
            assert vf.resolve().parent == pf.resolve().parent       # siblings (§2)
            assert [val(vf / a) for a in ("vendor", "device", "class", "numa_node")] == \
                ["0x15b3", "0x101e", "0x020000", str(numa)]
            assert not (vf / "sriov_totalvfs").exists()
            assert (vf / "driver").resolve().name == "mlx5_core"
            vd = sysd / "class/infiniband" / ("mlx5_%d" % (first + i))
            assert (vd / "device").resolve() == vf.resolve()
            assert val(vd / "hca_type") == "MT4126"
            assert os.listdir(vf / "net") == ["%sv%d" % (stem, i)]
            # unassigned VF: only the fe80 v1/v2 pair
            assert val(vd / "ports/1/gids/0").startswith("fe80:")
            assert val(vd / "ports/1/gids/2") == sysfsgen.ZERO_GID
            assert sysfsgen.is_unreadable(vd / "ports/1/gid_attrs/types/2")
            nvf += 1
    assert nvf == 64
    # A VF BDF spills into the next device number, exactly as pci_iov_virtfn_devfn() does.
    assert os.readlink(sysd / "bus/pci/devices/0000:19:00.0/virtfn15") == "../0000:19:02.1"
    assert os.readlink(sysd / "bus/pci/devices/0000:19:00.1/virtfn0") == "../0000:19:02.2"
    # Registration order: PFs uverbs0..9, the VFs after them; dynamic majors beyond 31/63.
    assert val(sysd / "class/infiniband_verbs/uverbs10/ibdev") == "mlx5_10"
    assert val(sysd / "class/infiniband_verbs/uverbs73/dev") == "%d:%d" % sysfsgen.uverbs_devt(73)
    assert sysfsgen.uverbs_devt(73)[0] != 231
    # The PCIe tree: switch, cascaded switch, GPUs.
    assert _path_below_root(sysd, "0000:19:00.5") == [
        "pci0000:16", "0000:16:02.0", "0000:17:00.0", "0000:18:00.0", "0000:19:00.5"]
    assert _path_below_root(sysd, "0000:1c:00.2") == [
        "pci0000:16", "0000:16:02.0", "0000:17:00.0", "0000:18:01.0", "0000:1a:00.0",
        "0000:1b:00.0", "0000:1c:00.2"]
    assert _path_below_root(sysd, "0000:1d:00.0") == [
        "pci0000:16", "0000:16:02.0", "0000:17:00.0", "0000:18:01.0", "0000:1a:00.0",
        "0000:1b:01.0", "0000:1d:00.0"]
    assert _path_below_root(sysd, "0000:99:00.3") == ["pci0000:97", "0000:97:04.0",
                                                      "0000:99:00.3"]
    assert _path_below_root(sysd, "0000:b1:00.0") == ["pci0000:b0", "0000:b0:02.0",
                                                      "0000:b1:00.0"]
    for b in ("0000:17:00.0", "0000:18:00.0", "0000:18:01.0", "0000:1a:00.0", "0000:1b:00.0",
              "0000:1b:01.0"):
        p = sysd / "bus/pci/devices" / b
        assert (val(p / "vendor"), val(p / "device"), val(p / "class")) == \
            ("0x1000", "0xc010", "0x060400")
    for g, numa in (("0000:1d:00.0", "0"), ("0000:b1:00.0", "1")):
        p = sysd / "bus/pci/devices" / g
        assert (val(p / "device"), val(p / "class"), val(p / "numa_node")) == \
            ("0x2330", "0x030200", numa)


def test_vm_passthrough(fixtures_dir):
    sysd = fixtures_dir / "vm-passthrough/sys"
    assert ibdevs(sysd) == ["mlx5_%d" % i for i in range(4)]
    for i in range(4):
        bdf = "0000:00:%02x.0" % (5 + i)
        fn = sysd / "bus/pci/devices" / bdf
        assert os.readlink(fn) == "../../../devices/pci0000:00/" + bdf   # on the root bus
        assert (sysd / "class/infiniband" / ("mlx5_%d" % i) / "device").resolve() == \
            fn.resolve()
        assert [val(fn / a) for a in ("vendor", "device", "class", "numa_node")] == \
            ["0x15b3", "0x101e", "0x020000", "-1"]
        assert val(fn / "local_cpulist") == "0-15"
        assert (fn / "driver").resolve().name == "mlx5_core"
        assert not os.path.lexists(fn / "physfn")          # a guest sees no PF
        assert not [e for e in os.listdir(fn) if e.startswith(("sriov_", "virtfn"))]
        assert os.listdir(fn / "net") == ["ens%d" % (5 + i)]
        d = sysd / "class/infiniband" / ("mlx5_%d" % i)
        assert val(d / "hca_type") == "MT4126"
        assert os.listdir(d / "ports") == ["1"]
        assert val(d / "ports/1/link_layer") == "Ethernet"
        assert val(d / "ports/1/gid_attrs/types/3") == "RoCE v2"
    # nothing but the root bus: no bridges at all
    classes = {e: val(sysd / "bus/pci/devices" / e / "class")
               for e in os.listdir(sysd / "bus/pci/devices")}
    assert "0x060400" not in classes.values()
    assert sorted(classes) == ["0000:00:03.0"] + ["0000:00:%02x.0" % s for s in range(5, 9)]
    virtio = (sysd / "class/net/ens3").resolve()
    assert virtio.parent.parent.name == "virtio0"
    assert val(sysd / "bus/pci/devices/0000:00:03.0/device") == "0x1041"


HGX_PAIRS = [  # (GPU BDF, NIC BDF, ibdev, IPoIB netdev, NUMA): hardware-topologies.md
    ("0000:19:00.0", "0000:1a:00.0", "mlx5_0", "ibp26s0", 0),
    ("0000:3b:00.0", "0000:3c:00.0", "mlx5_1", "ibp60s0", 0),
    ("0000:4c:00.0", "0000:4d:00.0", "mlx5_2", "ibp77s0", 0),
    ("0000:5d:00.0", "0000:5e:00.0", "mlx5_3", "ibp94s0", 0),
    ("0000:9b:00.0", "0000:9c:00.0", "mlx5_4", "ibp156s0", 1),
    ("0000:bb:00.0", "0000:bc:00.0", "mlx5_5", "ibp188s0", 1),
    ("0000:cb:00.0", "0000:cc:00.0", "mlx5_6", "ibp204s0", 1),
    ("0000:db:00.0", "0000:dc:00.0", "mlx5_7", "ibp220s0", 1)]


def test_hgx_pix(fixtures_dir):
    sysd = fixtures_dir / "hgx-pix/sys"
    assert ibdevs(sysd) == ["mlx5_%d" % i for i in range(8)]
    gpus = sorted(e for e in os.listdir(sysd / "bus/pci/devices")
                  if val(sysd / "bus/pci/devices" / e / "class") == "0x030200")
    assert gpus == [g for g, *_ in HGX_PAIRS]
    for gpu, nic, dev, ifname, numa in HGX_PAIRS:
        d = sysd / "class/infiniband" / dev
        fn = (d / "device").resolve()
        gfn = (sysd / "bus/pci/devices" / gpu).resolve()
        assert fn.name == nic and os.listdir(fn / "net") == [ifname]
        assert [val(fn / a) for a in ("device", "class", "numa_node")] == \
            ["0x1021", "0x020700", str(numa)]
        assert val(d / "hca_type") == "MT4129"
        assert val(d / "ports/1/rate") == "400 Gb/sec (4X NDR)"
        # NIC and GPU on sibling DSPs of one PEX890xx switch: PIX
        usp = fn.parent.parent
        assert gfn.parent.parent == usp and gfn.parent != fn.parent
        for b in (usp, fn.parent, gfn.parent):
            assert (val(b / "vendor"), val(b / "device")) == ("0x1000", "0xc030")
        rp = usp.parent
        assert rp.parent.name == "pci0000:" + rp.name[5:7]
        assert val(gfn / "numa_node") == str(numa)
    roots = {(sysd / "bus/pci/devices" / n).resolve().relative_to(
        (sysd / "devices").resolve()).parts[0] for _, n, *_ in HGX_PAIRS}
    assert len(roots) == 8                     # one host bridge per switch
    assert sum(val(sysd / "bus/pci/devices" / e / "class") == "0x010802"
               for e in os.listdir(sysd / "bus/pci/devices")) == 4


# --- mutation API --------------------------------------------------------------------------------

def test_set_port_state_and_numa(fixtures_dir, tmp_path):
    w = tmp_path / "n"
    sysfsgen.copy_node(fixtures_dir / "dgx-h100", w)
    sysfsgen.set_port_state(w / "sys", "mlx5_3", 1, "DOWN")
    d = w / "sys/class/infiniband/mlx5_3/ports/1"
    assert (val(d / "state"), val(d / "phys_state")) == ("1: DOWN", "3: Disabled")
    sysfsgen.set_port_state(w / "sys", "mlx5_3", 1, "INIT")
    assert (val(d / "state"), val(d / "phys_state")) == ("2: INIT", "5: LinkUp")
    sysfsgen.set_port_state(w / "sys", "mlx5_3", 1, "DOWN", phys_state="Polling")
    assert val(d / "phys_state") == "2: Polling"
    with pytest.raises(FileNotFoundError):
        sysfsgen.set_port_state(w / "sys", "mlx5_3", 2, "ACTIVE")
    sysfsgen.set_numa_node(w / "sys", "mlx5_3", 1)
    fn = w / "sys/bus/pci/devices/0000:40:00.0"
    assert val(fn / "numa_node") == "1" and val(fn / "local_cpulist") == "56-111,168-223"
    sysfsgen.set_numa_node(w / "sys", "mlx5_3", -1)
    assert val(fn / "numa_node") == "-1" and val(fn / "local_cpulist") == "0-223"
    # the pristine tree is untouched
    assert val(fixtures_dir / "dgx-h100/sys/bus/pci/devices/0000:40:00.0/numa_node") == "0"


@pytest.mark.parametrize("nodename,dev", [("dgx-h100", "mlx5_1"), ("mlx4", "mlx4_0"),
                                          ("rxe", "rxe0"), ("irdma-bnxt", "mlx5_2"),
                                          ("roce-lag", "mlx5_bond_0")])
def test_unplug_replug_roundtrip(fixtures_dir, tmp_path, nodename, dev):
    pristine = fixtures_dir / nodename
    w = tmp_path / "n"
    sysfsgen.copy_node(pristine, w)
    assert sysfsgen.snapshot(w) == sysfsgen.snapshot(pristine)
    owned = [e for p, e, _, _ in _cdevs(w) if val(p / "ibdev") == dev]
    assert owned
    sysfsgen.unplug(w / "sys", w / "dev", dev)
    assert not os.path.lexists(w / "sys/class/infiniband" / dev)
    for e in owned:
        cls = "infiniband_verbs" if e.startswith("uverbs") else "infiniband_mad"
        assert not os.path.lexists(w / "sys/class" / cls / e)
        assert not os.path.lexists(w / "dev/infiniband" / e)
    snap = sysfsgen.snapshot(w)
    assert not any(k.endswith("/infiniband/" + dev) for k in snap)
    others = [d for d in ibdevs(pristine / "sys") if d != dev]
    assert ibdevs(w / "sys") == others
    sysfsgen.replug(w / "sys", w / "dev", pristine, dev)
    assert sysfsgen.snapshot(w) == sysfsgen.snapshot(pristine)


# --- the generator itself ------------------------------------------------------------------------

def test_generator_deterministic_idempotent_fast(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, str(GEN), "--out", str(a)], check=True,
                   capture_output=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    # CPU time, not wall time: the build machine may be loaded. Typically 5-7 s since the GID
    # tables are as large as real ports report them (255 slots on mlx5 RoCE) and
    # two-socket-vfs has 74 RoCE ibdevs (64 VFs): ~65,000 entries in all, most of the time
    # system time (directory entries), which grows under concurrent file-system load. A
    # bound against the generator ballooning, not a figure.
    assert (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime) < 20
    (a / "dgx-h100/sys/stray").write_text("x\n")
    (a / "keep.me").write_text("x\n")
    subprocess.run([sys.executable, str(GEN), "--out", str(a)], check=True,
                   capture_output=True)
    subprocess.run([sys.executable, str(GEN), "--out", str(b)], check=True,
                   capture_output=True)
    assert (a / "keep.me").exists()
    (a / "keep.me").unlink()
    assert sysfsgen.snapshot(a) == sysfsgen.snapshot(b)


def test_scale_node(tmp_path):
    subprocess.run([sys.executable, str(GEN), "--out", str(tmp_path), "--scale", "300"],
                   check=True, capture_output=True)
    assert os.listdir(tmp_path) == ["scale-300"]
    root = tmp_path / "scale-300"
    assert len(ibdevs(root / "sys")) == 300
    assert val(root / "sys/class/infiniband_verbs/uverbs40/dev") == "%d:%d" % \
        sysfsgen.uverbs_devt(40)
    pf = root / "sys/bus/pci/devices/0000:11:00.0"
    assert val(pf / "sriov_numvfs") == "127"
    assert os.readlink(pf / "virtfn126") == "../0000:11:0f.7"
    assert len(os.listdir(root / "dev/infiniband")) == 3 * 300 + 1
    # realistic GID tables on the scale node too: 255 slots, 2 valid (fe80 v1 + v2)
    pd = root / "sys/class/infiniband/mlx5_299/ports/1"
    assert len(os.listdir(pd / "gids")) == sysfsgen.GID_TBL_LEN_MLX5_ROCE
    assert sysfsgen.is_unreadable(pd / "gid_attrs/types/2")
    assert val(pd / "gid_attrs/types/1") == "RoCE v2"


@pytest.mark.parametrize("node,dev,port,size", [
    ("dgx-h100", "mlx5_0", 1, 8),            # mlx5 IB: 8 << gid_table_size (ibv_devinfo)
    ("dgx-h100", "mlx5_1", 1, 255),          # mlx5 RoCE: roce_address_table_size
    ("roce-lag", "mlx5_bond_0", 1, 255),
    ("rxe", "rxe0", 1, 1024),                # sysfs.md §4
    ("irdma-bnxt", "irdma0", 1, 32),         # irdma_query_port()
    ("irdma-bnxt", "bnxt_re0", 1, 256),      # BNXT_QPLIB_NUM_GIDS_SUPPORTED
    ("mlx4", "mlx4_0", 1, 128),
    ("mlx4", "mlx4_0", 2, 128),
])
def test_gid_table_sizes(fixtures_dir, node, dev, port, size):
    """GID tables as large as the driver reports (gid_tbl_len), most slots empty."""
    pd = ib(fixtures_dir, node, dev) / "ports" / str(port)
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        assert len(os.listdir(pd / sub)) == size, sub
    empty = [i for i in range(size) if sysfsgen.is_unreadable(pd / "gid_attrs/types" / str(i))]
    assert len(empty) >= size - 8
    # the kernel's EINVAL: the entry opens, its read fails
    fd = os.open(pd / "gid_attrs/types" / str(empty[0]), os.O_RDONLY)
    try:
        with pytest.raises(OSError):
            os.read(fd, 4096)
    finally:
        os.close(fd)


def test_gid_slot_api(tmp_path, fixtures_dir):
    """set_gid / clear_gid: a slot becomes valid and empty again; the copy equals the pristine
    node afterwards, and the pristine node's shared zero-GID file is never written through."""
    work = tmp_path / "n"
    sysfsgen.copy_node(fixtures_dir / "dgx-h100", work)
    sysd = work / "sys"
    pd = sysd / "class/infiniband/mlx5_1/ports/1"
    sysfsgen.set_gid(str(sysd), "mlx5_1", 1, 9, sysfsgen.ipv4_gid("10.9.9.9"), "RoCE v2",
                     "enp41s0f0np0")
    assert val(pd / "gid_attrs/types/9") == "RoCE v2"
    assert val(pd / "gid_attrs/ndevs/9") == "enp41s0f0np0"
    assert val(pd / "gids/10") == sysfsgen.ZERO_GID
    sysfsgen.clear_gid(str(sysd), "mlx5_1", 1, 9)
    assert sysfsgen.is_unreadable(pd / "gid_attrs/types/9")
    assert val(pd / "gids/9") == sysfsgen.ZERO_GID
    a = sysfsgen.snapshot(work)
    b = sysfsgen.snapshot(fixtures_dir / "dgx-h100")
    assert a == b
