"""The CLI against the real kernel: `discover`, `topo`, `check-config`, `doctor` and `metrics`
agree with what rdma-core's own tools say (ibv_devinfo -v, rdma link/dev, ibstat) about the
rxe devices: the same devices, port states, link layers, rates, GID indexes and char devices."""
import json
import os
import re

import pytest

from conftest import save_output, sh

DEVS = {"rxe0": "vethA", "rxe1": "vethB", "rxe2": "eth0"}
IPV4 = {"rxe0": "10.77.0.1", "rxe1": "10.77.0.2", "rxe2": "10.0.2.15"}


def discover(run):
    r = run("discover", "-o", "json")
    assert r.returncode == 0, r.stderr
    return {d["name"]: d for d in json.loads(r.stdout)["devices"]}


def ibv_devinfo():
    """{dev: {"state", "link_layer", "gids": {index: (gid, type)}}} from ibv_devinfo -v."""
    out = sh("ibv_devinfo", "-v").stdout
    devs = {}
    cur = None
    for line in out.splitlines():
        m = re.match(r"hca_id:\s*(\S+)", line)
        if m:
            cur = devs.setdefault(m.group(1), {"gids": {}})
            continue
        if cur is None:
            continue
        m = re.match(r"\s+state:\s+(\S+)", line)
        if m:
            cur["state"] = m.group(1)
        m = re.match(r"\s+link_layer:\s+(\S+)", line)
        if m:
            cur["link_layer"] = m.group(1)
        m = re.match(r"\s+GID\[\s*(\d+)\]:\s+(\S+), RoCE (v\d)", line)
        if m:
            cur["gids"][int(m.group(1))] = (m.group(2), m.group(3))
    return devs


def ibstat():
    """{dev: {"State", "Rate", "Link layer"}} from ibstat."""
    devs = {}
    cur = None
    for line in sh("ibstat").stdout.splitlines():
        m = re.match(r"CA '(\S+)'", line)
        if m:
            cur = devs.setdefault(m.group(1), {})
            continue
        m = re.match(r"\s+(State|Rate|Link layer|Physical state):\s+(.*)$", line)
        if m and cur is not None:
            cur[m.group(1)] = m.group(2).strip()
    return devs


def test_discover_agrees_with_rdma_core(run):
    got = discover(run)
    assert sorted(got) == sorted(DEVS)
    links = {l["ifname"]: l for l in json.loads(sh("rdma", "-j", "link").stdout)}
    rdev = {d["ifname"]: d for d in json.loads(sh("rdma", "-j", "dev").stdout)}
    info = ibv_devinfo()
    st = ibstat()
    assert sorted(links) == sorted(rdev) == sorted(info) == sorted(st) == sorted(DEVS)
    for name, netdev in DEVS.items():
        d = got[name]
        port = d["ports"][0]
        assert len(d["ports"]) == 1
        assert d["netdevs"] == [netdev] == [links[name]["netdev"]]
        assert d["pci_address"] is None and d["driver"] is None
        assert d["usable"] is True, d
        assert port["state"] == links[name]["state"] == "ACTIVE"
        assert info[name]["state"] == "PORT_ACTIVE"
        assert st[name]["State"] == "Active"
        assert port["phys_state"] == "LinkUp" and links[name]["physical_state"] == "LINK_UP"
        assert port["link_layer"] == "ether"
        assert info[name]["link_layer"] == "Ethernet" == st[name]["Link layer"]
        # the rate follows the netdev: 10 Gb/s on veth, 2.5 on virtio-net
        rate = open("/sys/class/infiniband/%s/ports/1/rate" % name).read().strip()
        assert port["rate"] == rate
        assert float(st[name]["Rate"].split()[0]) == float(rate.split()[0])
        assert rate.startswith("10 Gb/sec" if netdev.startswith("veth") else "2.5 Gb/sec")
        # the RoCE v2 IPv4 GID index: the one ibv_devinfo shows as ::ffff:<addr>, v2
        idx = port["roce_v2_ipv4_gid_index"]
        assert info[name]["gids"][idx] == ("::ffff:" + IPV4[name], "v2"), info[name]["gids"]
        assert d["node_guid"] == rdev[name]["node_guid"]
        # char devices: the kernel's uverbs/umad/issm for this device, present in /dev
        verbs = [v for v in os.listdir("/sys/class/infiniband_verbs") if v.startswith("uverbs")
                 and open("/sys/class/infiniband_verbs/%s/ibdev" % v).read().strip() == name]
        assert len(verbs) == 1
        assert "/dev/infiniband/" + verbs[0] in d["char_devices"]
        for c in d["char_devices"]:
            assert os.path.exists(c), c
    assert json.loads(run("discover", "-o", "json").stdout)["rdma_cm"] == "/dev/infiniband/rdma_cm"


def test_discover_table_names_every_device(run):
    r = run("discover")
    assert r.returncode == 0, r.stderr
    save_output("discover.txt", r.stdout)
    for name, netdev in DEVS.items():
        assert re.search(r"\b%s\b.*\b%s\b" % (name, netdev), r.stdout), r.stdout


def test_topo(run):
    r = run("topo", "-o", "json")
    assert r.returncode == 0, r.stderr
    txt = json.dumps(json.loads(r.stdout))
    for name in DEVS:
        assert name in txt
    r = run("topo")
    assert r.returncode == 0 and "rxe2" in r.stdout, r.stdout + r.stderr
    save_output("topo.txt", r.stdout)


def check(run, tmp_path, selectors, mode=None):
    entry = {"resourceName": "soft", "rdmaHcaMax": 4, "selectors": selectors}
    if mode:
        entry = {"resourceName": "soft", "mode": mode, "selectors": selectors}
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"periodicUpdateInterval": 300, "configList": [entry]}))
    r = run("check-config", "-c", p, "-o", "json")
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads(r.stdout)
    assert d["valid"], d
    return sorted(d["pools"][0]["devices"]) if d["pools"] else [], d


@pytest.mark.parametrize("selectors,want", [
    ({"ifNames": ["vethA", "vethB"]}, ["rxe0", "rxe1"]),
    ({"ifNames": ["eth0"]}, ["rxe2"]),
    ({"linkTypes": ["ether"]}, ["rxe0", "rxe1", "rxe2"]),
    ({"linkTypes": ["ethernet"]}, ["rxe0", "rxe1", "rxe2"]),  # the seeds' spelling
    ({"linkTypes": ["Ethernet"]}, ["rxe0", "rxe1", "rxe2"]),
    ({"linkTypes": ["infiniband"]}, []),
    ({"linkTypes": ["IB"]}, []),
    ({"vendors": ["15b3"]}, []),            # no PCI IDs on a soft device
    ({"devices": ["1017"]}, []),
    ({"deviceIDs": ["101b"]}, []),          # the seed's spelling of devices
    ({"drivers": ["mlx5_core"]}, []),
    ({"drivers": ["rdma_rxe"]}, ["rxe0", "rxe1", "rxe2"]),  # issue 19 item 2 (h/kernfix)
    ({"pfNames": ["vethA"]}, ["rxe0"]),     # a device that is no VF is its own PF
    ({"rootDevices": ["0000:81:00.0"]}, []),
    ({"ifNames": ["vethA"], "linkTypes": ["ether"]}, ["rxe0"]),
])
def test_check_config_selector_keys(run, tmp_path, selectors, want):
    got, d = check(run, tmp_path, selectors)
    assert got == want, json.dumps(d["resources"][0]["devices"])
    # every key is explained for every device
    for dev in d["resources"][0]["devices"]:
        keys = {k["key"] for k in dev["keys"]}
        assert dev["name"] in DEVS
        assert keys, dev


def test_check_config_exclusive_units_are_devices(run, tmp_path):
    got, d = check(run, tmp_path, {"ifNames": ["vethA", "vethB", "eth0"]}, mode="exclusive")
    assert got == ["rxe0", "rxe1", "rxe2"]
    assert d["pools"][0]["units"] == 3


def test_doctor_on_soft_devices(run, tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"periodicUpdateInterval": 300, "configList": [
        {"resourceName": "soft", "rdmaHcaMax": 4, "selectors": {"ifNames": ["vethA", "vethB", "eth0"]}}]}))
    # a kubelet root that does not exist: the guest sees the host's /, and a host that ran a
    # kubelet (make e2e) has a /var/lib/kubelet without an rdma-dp daemon (plugin.sockets fails)
    r = run("doctor", "--config-file", p, "--kubelet-root-dir", tmp_path / "no-kubelet",
            timeout=120)
    out = r.stdout + r.stderr
    save_output("doctor.txt", out)
    save_output("check-config.txt", run("check-config", "-c", p).stdout)
    assert re.search(r"doctor: \d+ checks: 0 fail", out), out
    assert "ok   stack.uverbs" in out, out
    for name in DEVS:
        assert name in out
    # issue 19 item 3 (h/kernfix): no mlx5 advice for a soft device, rxe's loss counters read,
    # no linkTypes complaint under a config without linkTypes
    assert "mlxlink" not in out, out
    assert "no resource with linkTypes" not in out, out
    for m in re.finditer(r"counters\.loss +(rxe\d) port 1: (\d+) loss and retry counters", out):
        assert int(m.group(2)) >= 3, m.group(0)
    assert len(re.findall(r"counters\.loss +rxe", out)) == 3, out


def test_metrics_match_sysfs(run):
    r = run("metrics")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    for name, netdev in DEVS.items():
        assert re.search(r'rdma_dp_port_info\{device="%s",port="1",link_layer="Ethernet",'
                         r'netdev="%s"' % (name, netdev), text), text[:3000]
        assert re.search(r'rdma_dp_state_id\{device="%s",port="1"\} 4' % name, text)
        rate = open("/sys/class/infiniband/%s/ports/1/rate" % name).read().split()[0]
        bps = float(rate) * 1e9 / 8
        m = re.search(r'rdma_dp_rate_bytes_per_second\{device="%s",port="1"\} (\S+)' % name, text)
        assert m and float(m.group(1)) == bps, (m and m.group(0))
        # rxe's hw_counters are exported (sent_pkts, rcvd_pkts)
        assert re.search(r'device="%s"' % name, text)
