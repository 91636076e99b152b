"""rdma-dp check-config on the generated fixture nodes with the seeds' configs and broken ones."""
import json
import os
import pathlib
import shutil

import pytest

from conftest import node_args

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def check(run, fixtures_dir, config, node, *extra):
    return run("check-config", "--config-file", CONFIGS / config, *node_args(fixtures_dir, node),
               *extra)


def check_json(run, fixtures_dir, config, node):
    p = check(run, fixtures_dir, config, node, "-o", "json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def pool(doc, resource):
    return next(p for p in doc["pools"] if p["resource"] == resource)


def test_seed000_selects_mlx5_0_with_200_units(run, fixtures_dir):
    p = check(run, fixtures_dir, "seed000.json", "seed000")
    assert p.returncode == 0, p.stderr
    assert "+ mlx5_0: deviceIDs: 101d in [101d]" in p.stdout
    assert "+ mlx5_0: linkTypes: infiniband (port 1) in [infiniband]" in p.stdout
    assert "mlx5_0: selected" in p.stdout
    # "devices" inside selectors is the seed's spelling: accepted, with a warning at its place
    assert ('seed000.json:10:9: warning: configList[0].selectors.devices: "devices" is read '
            'as "deviceIDs"') in p.stdout
    doc = check_json(run, fixtures_dir, "seed000.json", "seed000")
    assert doc["valid"] is True
    assert doc["periodic_update_interval"] == 300
    pl = pool(doc, "rdma/hca_shared_devices_a")
    assert pl["devices"] == ["mlx5_0"]
    assert pl["units"] == 200
    assert pl["active_devices"] == 1
    assert pl["usable_devices"] == 1 and pl["healthy"] is True and pl["unusable"] == []
    res = doc["resources"][0]
    assert res["devices"][0]["usable"] is True
    assert res["devices"][0]["unusable_reason"] is None
    assert res["selectors"] == {"vendors": ["15b3"], "deviceIDs": ["101d"], "ifNames": ["ib0"],
                                "linkTypes": ["infiniband"]}
    keys = {k["key"]: k for k in res["devices"][0]["keys"]}
    assert set(keys) == {"vendors", "deviceIDs", "ifNames", "linkTypes"}
    assert all(k["result"] == "match" for k in keys.values())
    assert [d["level"] for d in doc["diagnostics"]] == ["warning"]


def test_seed001_selects_mlx5_0_only(run, fixtures_dir):
    doc = check_json(run, fixtures_dir, "seed001.json", "seed001")
    pl = pool(doc, "rdma/hca_shared_devices_a")
    assert pl["devices"] == ["mlx5_0"]
    assert pl["units"] == 200
    devs = {d["name"]: d for d in doc["resources"][0]["devices"]}
    assert devs["mlx5_0"]["selected"] is True
    assert len(devs) >= 2
    others = [d for n, d in devs.items() if n != "mlx5_0"]
    assert all(not d["selected"] for d in others)
    assert all(d["keys"][0]["result"] == "no-match" and d["keys"][0]["key"] == "ifNames"
               for d in others)
    assert doc["diagnostics"] == []


def test_seed001_selector_example_selects_nothing_and_says_why(run, fixtures_dir):
    # The article's selector example names ib0, 1017 and 0000:81:00.0: not this node's HCA.
    p = check(run, fixtures_dir, "seed001-selectors.json", "seed001")
    assert p.returncode == 0, p.stderr
    assert "- mlx5_0: deviceIDs: 101b not in [1017]" in p.stdout
    assert "- mlx5_0: ifNames: ibs108 not in [ib0]" in p.stdout
    assert "mlx5_0: not selected (deviceIDs, ifNames, pfNames, rootDevices)" in p.stdout
    assert "rdma/hca_shared_devices_a selects no device on this node" in p.stdout
    doc = check_json(run, fixtures_dir, "seed001-selectors.json", "seed001")
    assert pool(doc, "rdma/hca_shared_devices_a")["units"] == 0
    assert pool(doc, "rdma/hca_shared_devices_a")["devices"] == []


def test_seed_configs_on_other_nodes_say_why(run, fixtures_dir):
    p = check(run, fixtures_dir, "seed000.json", "rxe")
    assert p.returncode == 0, p.stderr
    assert "vendors: none (no PCI function) not in [15b3]" in p.stdout
    p = check(run, fixtures_dir, "seed000.json", "no-rdma")
    assert p.returncode == 0, p.stderr
    assert "selects no device on this node" in p.stdout


def test_unquoted_seed_is_a_clear_error(run, fixtures_dir):
    p = check(run, fixtures_dir, "seed-unquoted.json", "seed000")
    assert p.returncode == 1
    assert p.stdout == ""
    assert 'seed-unquoted.json:1:3: error: keys must be quoted: "periodicUpdateInterval"' in p.stderr
    assert "have no quotes" in p.stderr


def test_dgx_pools(run, fixtures_dir):
    doc = check_json(run, fixtures_dir, "dgx.json", "dgx-h100")
    ib = pool(doc, "rdma/compute_ib")
    roce = pool(doc, "rdma/storage_roce")
    n0 = pool(doc, "rdma/compute_ib_numa0")
    n1 = pool(doc, "rdma/compute_ib_numa1")
    assert len(ib["devices"]) == 8
    assert len(roce["devices"]) == 4
    assert not set(ib["devices"]) & set(roce["devices"])
    assert sorted(n0["devices"] + n1["devices"]) == sorted(ib["devices"])
    assert n0["numa_node"] == 0 and n1["numa_node"] == 1
    assert ib["numa_node"] == -1
    texts = [d["text"] for d in doc["diagnostics"]]
    assert any("in both rdma/compute_ib and rdma/compute_ib_numa0" in t for t in texts)


def test_dgx_pools_are_usable(run, fixtures_dir):
    doc = check_json(run, fixtures_dir, "dgx.json", "dgx-h100")
    for pl in doc["pools"]:
        assert pl["usable_devices"] == len(pl["devices"]), pl["resource"]
        assert pl["unusable"] == []
    p = check(run, fixtures_dir, "dgx.json", "dgx-h100")
    assert "unusable" not in p.stdout


def test_selected_but_unusable(run, fixtures_dir, tmp_path):
    """broken: mlx5_5 has no uverbs node and the node no rdma_cm; a pool of mlx5_5 alone."""
    cfg = tmp_path / "only5.json"
    cfg.write_text(json.dumps({"periodicUpdateInterval": 300, "configList": [
        {"resourceName": "only5", "rdmaHcaMax": 10, "selectors": {"ifNames": ["ibp97s0"]}}]}))
    reason = "/dev/infiniband/uverbs5 missing; /dev/infiniband/rdma_cm missing"
    p = run("check-config", "--config-file", cfg, *node_args(fixtures_dir, "broken"))
    assert p.returncode == 0, p.stderr
    assert "  mlx5_5: selected\n    ! mlx5_5 is unusable: " + reason + "\n" in p.stdout
    assert "rdma/only5                           10  1     0/1      mlx5_5" in p.stdout
    assert "no device is usable: all 10 units are Unhealthy and Allocate fails" in p.stdout
    # devices not selected are not flagged in the resource's list
    assert "mlx5_0 is unusable" not in p.stdout.split("pools:")[0]
    doc = json.loads(run("check-config", "--config-file", cfg,
                         *node_args(fixtures_dir, "broken"), "-o", "json").stdout)
    pl = pool(doc, "rdma/only5")
    assert pl["devices"] == ["mlx5_5"] and pl["units"] == 10
    assert pl["usable_devices"] == 0 and pl["healthy"] is False
    assert pl["unusable"] == [{"device": "mlx5_5", "reason": reason}]
    devs = {d["name"]: d for d in doc["resources"][0]["devices"]}
    assert devs["mlx5_5"]["selected"] is True and devs["mlx5_5"]["usable"] is False
    assert devs["mlx5_5"]["unusable_reason"] == reason


def test_sriov_vf_ranges(run, fixtures_dir):
    doc = check_json(run, fixtures_dir, "sriov-vfs.json", "sriov")
    a = pool(doc, "rdma/sriov_vfs_a")
    b = pool(doc, "rdma/sriov_vfs_b")
    assert len(a["devices"]) == 2 and len(b["devices"]) == 2
    assert not set(a["devices"]) & set(b["devices"])
    p = check(run, fixtures_dir, "sriov-vfs.json", "sriov")
    assert "is the PF, ens3f0#0-1 selects only its VFs" in p.stdout
    assert "pfNames: VF 2 of ens3f0 not in [ens3f0#0-1]" in p.stdout


def test_legacy_devices(run, fixtures_dir):
    p = check(run, fixtures_dir, "legacy-devices.json", "seed000")
    assert p.returncode == 0, p.stderr
    assert "+ mlx5_0: ifNames: ib0 in [ib0]" in p.stdout
    assert ('legacy-devices.json:6:7: warning: configList[0].devices: "devices" is deprecated'
            in p.stdout)


DGX_COMPUTE = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]


def test_dgx_env_shared_and_exclusive(run, fixtures_dir):
    """The variables a container gets: shared, all of them from the pool; exclusive, the
    constants, the names computed per allocation and an example for the first unit."""
    ports = ",".join(d + ":1" for d in DGX_COMPUTE)
    p = check(run, fixtures_dir, "dgx-env.json", "dgx-h100")
    assert p.returncode == 0, p.stderr
    assert ("  environment of a container given a unit (every usable device of the pool):\n"
            f"    RDMA_DEVICE_RDMA_COMPUTE_IB={ports}\n"
            f"    NCCL_IB_HCA=={ports}\n"
            "    NCCL_IB_TIMEOUT=22\n"
            "    NCCL_SOCKET_IFNAME==eth0\n") in p.stdout
    assert ("  environment of a container:\n"
            "    per allocation, from the devices of its units: RDMA_DEVICE_RDMA_STORAGE_ROCE, "
            "UCX_NET_DEVICES\n"
            "    constant:\n"
            "      NCCL_IB_TC=106\n"
            "      NCCL_IB_ADDR_RANGE=10.20.0.0/16\n"
            "    e.g. given unit 0000:29:00.0 alone:\n"
            "      RDMA_DEVICE_RDMA_STORAGE_ROCE=mlx5_1:1\n"
            "      UCX_NET_DEVICES=mlx5_1:1\n") in p.stdout
    assert "warning" not in p.stdout
    doc = check_json(run, fixtures_dir, "dgx-env.json", "dgx-h100")
    res = {r["full_name"]: r for r in doc["resources"]}
    assert res["rdma/compute_ib"]["env"] == {"NCCL_IB_TIMEOUT": "22",
                                             "NCCL_SOCKET_IFNAME": "=eth0"}
    assert res["rdma/compute_ib"]["env_from_devices"] == ["NCCL_IB_HCA"]
    assert res["rdma/storage_roce"]["env_from_devices"] == ["UCX_NET_DEVICES"]
    env = pool(doc, "rdma/compute_ib")["env"]
    assert env["variables"] == {"RDMA_DEVICE_RDMA_COMPUTE_IB": ports,
                                "NCCL_IB_HCA": "=" + ports, "NCCL_IB_TIMEOUT": "22",
                                "NCCL_SOCKET_IFNAME": "=eth0"}
    assert list(env["variables"]) == env["constant"] and env["per_allocation"] == []
    assert env["example_unit"] is None and env["omitted"] == []
    env = pool(doc, "rdma/storage_roce")["env"]
    assert env["variables"] == {"RDMA_DEVICE_RDMA_STORAGE_ROCE": "mlx5_1:1",
                                "UCX_NET_DEVICES": "mlx5_1:1", "NCCL_IB_TC": "106",
                                "NCCL_IB_ADDR_RANGE": "10.20.0.0/16"}
    assert env["constant"] == ["NCCL_IB_TC", "NCCL_IB_ADDR_RANGE"]
    assert env["per_allocation"] == ["RDMA_DEVICE_RDMA_STORAGE_ROCE", "UCX_NET_DEVICES"]
    assert env["example_unit"] == "0000:29:00.0"
    assert [d["level"] for d in doc["diagnostics"]] == ["note"] * 5


def test_env_without_keys_is_rdma_device_only(run, fixtures_dir):
    doc = check_json(run, fixtures_dir, "seed000.json", "seed000")
    env = pool(doc, "rdma/hca_shared_devices_a")["env"]
    assert env["variables"] == {"RDMA_DEVICE_RDMA_HCA_SHARED_DEVICES_A": "mlx5_0:1"}
    assert doc["resources"][0]["env"] == {} and doc["resources"][0]["env_from_devices"] == []


def test_mlx4_both_ports(run, fixtures_dir):
    """ConnectX-3 VPI: port 1 InfiniBand and port 2 Ethernet both carry traffic."""
    doc = check_json(run, fixtures_dir, "mlx4-env.json", "mlx4")
    env = pool(doc, "rdma/vpi")["env"]
    assert env["variables"]["NCCL_IB_HCA"] == "=mlx4_0:1,mlx4_0:2"
    assert env["variables"]["UCX_NET_DEVICES"] == "mlx4_0:1,mlx4_0:2"
    assert env["variables"]["RDMA_DEVICE_RDMA_VPI"] == "mlx4_0:1,mlx4_0:2"
    assert env["example_unit"] == "0000:04:00.0"


def test_port_down_leaves_computed_out(run, fixtures_dir):
    """mlx5_0 DOWN, mlx5_1 INIT: no port carries traffic, NCCL_IB_HCA would be empty."""
    p = check(run, fixtures_dir, "port-down-env.json", "port-down")
    assert p.returncode == 0, p.stderr
    assert ("port-down-env.json:4: warning: rdma/hca: no port of its devices can carry "
            "traffic on this node (none is ACTIVE with link layer InfiniBand or Ethernet): "
            "NCCL_IB_HCA and UCX_NET_DEVICES would be empty and are left out") in p.stdout
    assert ("    RDMA_DEVICE_RDMA_HCA=mlx5_0:1,mlx5_1:1\n"
            "    ! NCCL_IB_HCA and UCX_NET_DEVICES left out: no port of the pool's usable "
            "devices can carry traffic\n") in p.stdout
    doc = check_json(run, fixtures_dir, "port-down-env.json", "port-down")
    env = pool(doc, "rdma/hca")["env"]
    assert env["variables"] == {"RDMA_DEVICE_RDMA_HCA": "mlx5_0:1,mlx5_1:1"}
    assert env["omitted"] == ["NCCL_IB_HCA", "UCX_NET_DEVICES"]
    assert [d["level"] for d in doc["diagnostics"]].count("warning") == 1


def test_two_resources_same_variable(run, fixtures_dir):
    p = check(run, fixtures_dir, "two-resources-env.json", "dgx-h100")
    assert p.returncode == 0, p.stderr
    why = ("a container that gets both sees one of them (kubelet keeps the first it meets); "
           "put the NICs a job uses in one resource")
    assert ('two-resources-env.json:21:7: warning: configList[1].envFromDevices: '
            '"NCCL_IB_HCA" is also computed by rdma/compute_ib_numa0 (line 4): ' + why
            in p.stdout)
    assert ('two-resources-env.json:22:15: warning: configList[1].env.NCCL_IB_TIMEOUT: '
            '"NCCL_IB_TIMEOUT" is also set by rdma/compute_ib_numa0 (line 4), to "22": ' + why
            in p.stdout)
    doc = check_json(run, fixtures_dir, "two-resources-env.json", "dgx-h100")
    assert pool(doc, "rdma/compute_ib_numa0")["env"]["variables"]["NCCL_IB_HCA"] == \
        "=mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1"
    assert pool(doc, "rdma/compute_ib_numa1")["env"]["variables"]["NCCL_IB_HCA"] == \
        "=mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1"


def test_nccl_ib_hca_over_32_devices(run, fixtures_dir, tmp_path):
    """two-socket-vfs has 64 VFs: a shared pool of all of them computes an NCCL_IB_HCA NCCL
    reads only 32 entries of."""
    cfg = tmp_path / "many.json"
    cfg.write_text(json.dumps({"configList": [
        {"resourceName": "all", "rdmaHcaMax": 10, "selectors": {"vendors": ["15b3"]},
         "envFromDevices": ["NCCL_IB_HCA"]},
        {"resourceName": "each", "mode": "exclusive", "selectors": {"vendors": ["15b3"]},
         "envFromDevices": ["UCX_NET_DEVICES"]}]}))
    doc = json.loads(run("check-config", "--config-file", cfg,
                         *node_args(fixtures_dir, "two-socket-vfs"), "-o", "json").stdout)
    n = len(pool(doc, "rdma/all")["env"]["variables"]["NCCL_IB_HCA"].split(","))
    assert n > 32
    texts = [d["text"] for d in doc["diagnostics"] if d["level"] == "warning"]
    assert any(f"warning: rdma/all: NCCL_IB_HCA names {n} devices on this node: NCCL uses "
               "only the first 32" in t for t in texts), texts
    # the exclusive resource computes no NCCL_IB_HCA: no such warning for it
    assert not any("warning: rdma/each:" in t for t in texts), texts


# Every file of invalid/ with the message it must give, position included.
INVALID = {
    "typo-devics.json": '10:9: error: configList[0].selectors: unknown key "devics" (did you mean "devices"?)',
    "typo-configlist.json": '3:3: error: unknown key "configlist" (did you mean "configList"?)',
    "typo-link-type.json": '8:11: error: configList[0].selectors.linkTypes[0]: "infiniban" is not a link type',
    "misplaced-selector.json": '6:7: error: configList[0]: unknown key "vendors" here: selector keys go inside "selectors"',
    "duplicate-key.json": '6:7: error: configList[0]: duplicate key "resourceName"',
    "duplicate-resource-name.json": '13:23: error: configList[1].resourceName: "hca_shared_devices_a" is already the name',
    "empty-list.json": "7:20: error: configList[0].selectors.ifNames: empty list",
    "empty-configlist.json": "2:17: error: configList: empty",
    "empty-selectors.json": "6:20: error: configList[0].selectors: no selector",
    "no-selectors.json": '3:5: error: configList[0]: no "selectors"',
    "selectors-and-devices.json": '11:7: error: configList[0].devices: "devices" and "selectors" together',
    "devices-and-deviceids.json": '10:9: error: configList[0].selectors.devices: both "deviceIDs" and its alias "devices"',
    "negative-hca.json": "5:21: error: configList[0].rdmaHcaMax: must be at least 0, not -1",
    "huge-hca.json": "5:21: error: configList[0].rdmaHcaMax: must be at most 100000, not 1000000: kubelet's 4 MiB message limit",
    "hca-real.json": "5:21: error: configList[0].rdmaHcaMax: must be an integer, not 1.5",
    "missing-hca.json": '3:5: error: configList[0]: missing "rdmaHcaMax"',
    "missing-resource-name.json": '3:5: error: configList[0]: missing "resourceName"',
    "missing-configlist.json": '1:1: error: missing "configList"',
    "interval-string.json": "2:29: error: periodicUpdateInterval: must be a number, not a string: write 300 without quotes",
    "interval-negative.json": "2:29: error: periodicUpdateInterval: must be at least 0, not -5",
    "interval-huge.json": "2:29: error: periodicUpdateInterval: must be at most 604800",
    "bad-resource-name.json": "4:23: error: configList[0].resourceName: \"hca-shared\": a resource name may contain only letters, digits and '_'",
    "bad-prefix.json": '11:25: error: configList[0].resourcePrefix: "RDMA" is not a valid resource prefix',
    "vendor-name.json": '8:11: error: configList[0].selectors.vendors[0]: "mellanox" is not a PCI vendor ID: mellanox devices have "15b3"',
    "bad-device-id.json": '8:11: error: configList[0].selectors.deviceIDs[0]: "101" is not a PCI ID',
    "device-id-number.json": '8:11: error: configList[0].selectors.deviceIDs[0]: must be a string: write "1017"',
    "bad-ifname.json": '8:11: error: configList[0].selectors.ifNames[0]: "ib0/1" is not an interface name',
    "long-ifname.json": "8:11: error: configList[0].selectors.ifNames[0]: \"ibp0s0f0np0abcdef\" is longer than 15 characters",
    "bad-link-type.json": '8:11: error: configList[0].selectors.linkTypes[0]: "roce" is not a link type: RoCE and iWARP devices have link type "ether"',
    "reversed-vf-range.json": '8:11: error: configList[0].selectors.pfNames[0]: "ens3f0#3-1": the VF range 3-1 is reversed',
    "bad-vf-range.json": "8:11: error: configList[0].selectors.pfNames[0]: \"ens3f0#\": expected VF indexes after '#'",
    "bad-root-device.json": '8:11: error: configList[0].selectors.rootDevices[0]: "81:00" is not a PCI address',
    "negative-numa.json": "8:11: error: configList[0].selectors.numaNodes[0]: must be at least 0, not -1",
    "list-as-string.json": '7:20: error: configList[0].selectors.ifNames: must be a list of interface names: write ["ib0"]',
    "not-object.json": '1:1: error: the top level must be an object with "configList", not a list',
    "trailing-comma.json": "6:45: error: trailing comma before ']'",
    "comment.json": "2:3: error: comments are not allowed in JSON",
    "empty-file.json": "1:1: error: the file is empty",
    "single-quotes.json": "2:3: error: strings must use double quotes",
    "missing-comma.json": "3:3: error: expected ',' or '}' after the value of \"periodicUpdateInterval\", found '\"' (missing comma?)",
    "unterminated-string.json": "3:22: error: unterminated string",
    "capital-true.json": "2:17: error: JSON literals are lower-case: write true, not True",
    "trailing-garbage.json": "2:1: error: unexpected '}' after the end of the JSON document",
    "env-number.json": '8:28: error: configList[0].env.NCCL_IB_TIMEOUT: must be a string: write "22"',
    "env-computed-too.json": '9:9: error: configList[0].env.NCCL_IB_HCA: "NCCL_IB_HCA" is also in "envFromDevices", which computes it from the devices a container gets: remove one of them',
    "typo-env-from-devices.json": '7:26: error: configList[0].envFromDevices[0]: "NCCL_IB_HCAS" is not a variable rdma-dp computes: expected one of "NCCL_IB_HCA", "UCX_NET_DEVICES" (did you mean "NCCL_IB_HCA"?)',
}


def test_every_invalid_file_is_listed():
    assert sorted(p.name for p in (CONFIGS / "invalid").glob("*.json")) == sorted(INVALID)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid(run, fixtures_dir, name):
    p = check(run, fixtures_dir, "invalid/" + name, "seed000")
    assert p.returncode == 1
    assert p.stdout == ""
    assert f"{name}:{INVALID[name]}" in p.stderr
    assert "invalid config" in p.stderr


def test_invalid_json_output(run, fixtures_dir):
    p = check(run, fixtures_dir, "invalid/typo-devics.json", "seed000", "-o", "json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["valid"] is False
    assert doc["diagnostics"][0]["level"] == "error"
    assert 'unknown key "devics"' in doc["diagnostics"][0]["text"]


def test_usage(run, fixtures_dir):
    p = run("check-config", "--help")
    assert p.returncode == 0 and "--config-file" in p.stdout
    p = run("check-config", "--version")
    assert p.returncode == 0 and p.stdout.startswith("rdma-dp ")
    p = run("check-config", "--bogus")
    assert p.returncode == 2 and "--bogus" in p.stderr
    p = run("check-config", "-o", "yaml", "--config-file", CONFIGS / "seed000.json")
    assert p.returncode == 2
    p = run("check-config", "--config-file")
    assert p.returncode == 2
    p = run("check-config", "--config-file", CONFIGS / "nonexistent.json")
    assert p.returncode == 1 and "cannot read: No such file or directory" in p.stderr
    p = run("check-config", "--config-file", CONFIGS / "seed000.json",
            "--sysfs-root", fixtures_dir / "nonexistent")
    assert p.returncode == 1 and "cannot read the devices" in p.stderr


def test_cdi_kinds_as_serve_names_them(run, fixtures_dir, tmp_path):
    """check-config tells which CDI kind serve --use-cdi gives each resource, and which get no
    spec (a one-letter name: v0.5.2 of the CDI library panics on such a class; two resources
    whose classes meet) and so hand out device specs."""
    cfg = tmp_path / "c.json"
    sel = {"vendors": ["15b3"]}
    cfg.write_text(json.dumps({"configList": [
        {"resourceName": "a", "rdmaHcaMax": 1, "selectors": sel},
        {"resourceName": "x_com__y", "rdmaHcaMax": 1, "selectors": sel},
        {"resourceName": "y", "resourcePrefix": "x.com", "rdmaHcaMax": 1, "selectors": sel},
        {"resourceName": "compute", "mode": "exclusive", "selectors": sel}]}))
    r = run("check-config", "--config-file", cfg, *node_args(fixtures_dir, "seed000"), "-o", "json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)["resources"]
    assert [(x["cdi_kind"], x["cdi_problem"] is None) for x in res] == [
        (None, False), ("rdma-dp.io/x_com__y", True), (None, False),
        ("rdma-dp.io/compute", True)]
    assert "earlier resource" in res[2]["cdi_problem"]
    text = run("check-config", "--config-file", cfg, *node_args(fixtures_dir, "seed000")).stdout
    assert text.count("! with --use-cdi: no CDI spec") == 2


def test_drivers_selects_soft_devices_by_their_rdma_driver(run, fixtures_dir, tmp_path):
    """`"drivers": ["rdma_rxe"]` selects soft-RoCE devices (issue 19: it selected nothing, "no
    driver not in [rdma_rxe]"): rxe's RDMA driver comes from its own `parent` attribute and
    its missing device link, not from its name; a PCI driver still selects hardware, and a
    soft device is not selected by a PCI driver's name."""
    def cfg(drivers):
        p = tmp_path / "c.json"
        p.write_text(json.dumps({"configList": [
            {"resourceName": "soft", "rdmaHcaMax": 4, "selectors": {"drivers": drivers}}]}))
        return p

    p = run("check-config", "--config-file", cfg(["rdma_rxe"]), *node_args(fixtures_dir, "rxe"))
    assert p.returncode == 0, p.stderr
    assert "+ rxe0: drivers: rdma_rxe in [rdma_rxe]" in p.stdout
    assert "rxe0: selected" in p.stdout
    p = run("check-config", "--config-file", cfg(["mlx5_core"]), *node_args(fixtures_dir, "rxe"))
    assert "- rxe0: drivers: rdma_rxe not in [mlx5_core]" in p.stdout
    p = run("check-config", "--config-file", cfg(["rdma_rxe", "mlx5_core"]),
            *node_args(fixtures_dir, "seed000"))
    assert "+ mlx5_0: drivers: mlx5_core in [rdma_rxe, mlx5_core]" in p.stdout
    # Renamed (`rdma dev set rxe0 name roce0`): still rdma_rxe.
    node = tmp_path / "rxe"
    shutil.copytree(fixtures_dir / "rxe" / "sys", node / "sys", symlinks=True)
    ib = node / "sys/class/infiniband"
    target = os.readlink(ib / "rxe0")
    os.unlink(ib / "rxe0")
    os.symlink(target, ib / "roce0")
    p = run("check-config", "--config-file", cfg(["rdma_rxe"]), "--sysfs-root", node / "sys",
            "--dev-root", fixtures_dir / "rxe" / "dev")
    assert "+ roce0: drivers: rdma_rxe in [rdma_rxe]" in p.stdout, p.stdout


def test_report_topology_explains_each_policy(run, fixtures_dir, tmp_path):
    """Issue 22: a shared pool reports no TopologyInfo unless "reportTopology" asks for it, and
    check-config then says what that does under each Topology Manager policy."""
    cfg = tmp_path / "topo.json"
    cfg.write_text(json.dumps({"configList": [
        {"resourceName": "n0", "rdmaHcaMax": 3, "reportTopology": True,
         "selectors": {"vendors": ["15b3"], "numaNodes": [0]}},
        {"resourceName": "all", "rdmaHcaMax": 3, "reportTopology": True,
         "selectors": {"vendors": ["15b3"]}},
        {"resourceName": "plain", "rdmaHcaMax": 3,
         "selectors": {"vendors": ["15b3"], "numaNodes": [1]}}]}))
    p = run("check-config", "--config-file", cfg, *node_args(fixtures_dir, "dgx-h100"))
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "topology (reportTopology): every unit reports NUMA node 0 to kubelet" in out
    for policy in ("none: ignored", "best-effort:", "restricted: a pod whose CPUs or other "
                   "devices cannot share node 0", "single-numa-node:"):
        assert policy in out, policy
    assert "none reported: the pool's devices are on several NUMA nodes" in out
    assert out.count("topology (reportTopology)") == 2  # not for "plain"
    p = run("check-config", "--config-file", cfg, *node_args(fixtures_dir, "dgx-h100"), "-o",
            "json")
    assert p.returncode == 0, p.stderr
