"""The DRA driver's per-claim CDI specs (src/dra/dra-cdi.c), loaded by the reference CDI library,
and its ResourceSlices (src/dra/dra-slices.c) for every fixture node.

tests/tools/dra-render discovers a fixture node and writes the spec of one claim
(rdma-dp.io-claim_<uid>.json, kind rdma-dp.io/claim, devices "<uid>-<DRA device name>" with
the nodes, then "<uid>-req-<request>" with each request's variables);
tests/tools/cdi-validate (the CDI Go library v0.5.2, see test_cdi_spec.py) reads it with the
schema validator, and tests/tools/cdi-validate-current (the current library) with its own checks;
each builds a registry over the directory and injects device IDs into an empty
OCI spec as runtimes do.
"""
import json
import os
import subprocess

import pytest

from test_cdi_spec import _build_dir, discover, need_char_nodes, validate, validator  # noqa: F401

UID = "6f1c2a8e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"


@pytest.fixture(scope="session")
def dra_render():
    p = _build_dir() / "dra-render"
    if not p.exists():
        pytest.fail(f"{p} not built")
    return p


def dra_name(unit_id):
    return ("pci-" if ":" in unit_id else "ib-") + \
        "".join(c if c.isalnum() else "-" for c in unit_id.lower())


def spec(dra_render, fixtures_dir, node, outdir, uid, *results):
    return subprocess.run([str(dra_render), "spec", "--host-prefix", str(fixtures_dir / node),
                           str(fixtures_dir / node / "sys"), str(fixtures_dir / node / "dev"),
                           str(outdir), uid, *results],
                          capture_output=True, text=True, timeout=60)


def ports(dev, traffic=False):
    """"mlx5_0:1,...": every port, or those that carry traffic as NCCL counts them."""
    return ",".join(f"{dev['name']}:{p['port']}" for p in dev["ports"]
                    if not traffic or (p["state"] in ("ACTIVE", "ACTIVE_DEFER") and
                                       p["link_layer"] in ("infiniband", "ether")))


def check_claim(validator, fixtures_dir, node, outdir, names, inject, env, host):  # noqa: F811
    """names: every CDI device of the spec ("<DRA device name>" or "req-<request>"), inject: the
    ones a container is given; its nodes are those of the DRA devices among them."""
    path = outdir / f"rdma-dp.io-claim_{UID}.json"
    all_ids = [f"rdma-dp.io/claim={UID}-{n}" for n in names]
    rc, res = validate(validator, path, dir=outdir,
                       inject=[f"rdma-dp.io/claim={UID}-{n}" for n in inject])
    assert rc == 0, json.dumps(res, indent=2)
    assert res["specs"] == [{"path": str(path), "ok": True, "kind": "rdma-dp.io/claim",
                             "devices": all_ids}]
    assert res["registry"] == {"devices": sorted(all_ids), "errors": {}}
    inj = res["inject"]
    assert "error" not in inj and "unresolved" not in inj
    by_name = {dra_name(d["unit_id"]): d for d in host["devices"] if d["usable"]}
    want = {"/dev/infiniband/rdma_cm"}
    for n in inject:
        if not n.startswith("req-"):
            want |= set(by_name[n]["char_devices"])
    got = {d["path"]: d for d in inj["devices"]}
    assert set(got) == want
    for p, d in got.items():
        st = os.stat(fixtures_dir / node / p.lstrip("/"))
        assert (d["major"], d["minor"]) == (os.major(st.st_rdev), os.minor(st.st_rdev)), p
    assert (inj["env"] or []) == env  # None: no variable at all
    return by_name


def test_dgx_h100_claim(validator, dra_render, rdma_dp, fixtures_dir, tmp_path):  # noqa: F811
    need_char_nodes(fixtures_dir, "dgx-h100")
    host = discover(rdma_dp, fixtures_dir, "dgx-h100")
    ib = [d for d in host["devices"] if d["usable"] and
          d["ports"][0]["link_layer"] == "infiniband"]
    eth = [d for d in host["devices"] if d["usable"] and
           d["ports"][0]["link_layer"] != "infiniband"]
    a, b, s = dra_name(ib[0]["unit_id"]), dra_name(ib[1]["unit_id"]), dra_name(eth[0]["unit_id"])
    assert a == "pci-0000-18-00-0"
    p = spec(dra_render, fixtures_dir, "dgx-h100", tmp_path, UID,
             f"nic={a}", f"nic={b}", f"storage/ethernet={s}")
    assert p.returncode == 0, p.stderr
    f = tmp_path / f"rdma-dp.io-claim_{UID}.json"
    names = [a, b, s, "req-nic", "req-storage"]
    assert p.stdout.splitlines() == [f"written {f}"] + \
        [f"rdma-dp.io/claim={UID}-{n}" for n in names]
    assert oct(f.stat().st_mode & 0o7777) == "0o644"

    def hca(*devs):
        return ",".join(x for x in (ports(d, True) for d in devs) if x)
    nic = [f"RDMA_DEVICE_NIC={ports(ib[0])},{ports(ib[1])}"]
    assert hca(ib[0], ib[1]) and hca(eth[0])
    nic += [f"NCCL_IB_HCA=={hca(ib[0], ib[1])}", f"UCX_NET_DEVICES={hca(ib[0], ib[1])}"]
    storage = [f"RDMA_DEVICE_STORAGE={ports(eth[0])}",
               f"NCCL_IB_HCA=={hca(eth[0])}", f"UCX_NET_DEVICES={hca(eth[0])}"]
    # a container given request nic (what kubelet hands it: the devices of nic and nic's ID):
    # nic's nodes and variables, nothing of storage's
    check_claim(validator, fixtures_dir, "dgx-h100", tmp_path, names, [a, b, "req-nic"], nic,
                host)
    # request storage alone: its NIC, its variables
    check_claim(validator, fixtures_dir, "dgx-h100", tmp_path, names, [s, "req-storage"],
                storage, host)
    # one device alone: its nodes and rdma_cm, no variable
    check_claim(validator, fixtures_dir, "dgx-h100", tmp_path, names, [b], [], host)
    # the same claim again: unchanged, same file
    ino = f.stat().st_ino
    p = spec(dra_render, fixtures_dir, "dgx-h100", tmp_path, UID,
             f"nic={a}", f"nic={b}", f"storage/ethernet={s}")
    assert p.stdout.startswith("unchanged "), p.stdout
    assert f.stat().st_ino == ino


def test_sf_and_rxe_names(validator, dra_render, rdma_dp, fixtures_dir, tmp_path):  # noqa: F811
    for node, name in (("irdma-bnxt", "pci-0000-03-00-0-sf2"), ("rxe", "ib-rxe0")):
        need_char_nodes(fixtures_dir, node)
        host = discover(rdma_dp, fixtures_dir, node)
        out = tmp_path / node
        p = spec(dra_render, fixtures_dir, node, out, UID, f"nic={name}")
        assert p.returncode == 0, p.stderr
        dev = next(d for d in host["devices"] if dra_name(d["unit_id"]) == name)
        env = [f"RDMA_DEVICE_NIC={ports(dev)}"]
        if ports(dev, True):
            env += [f"NCCL_IB_HCA=={ports(dev, True)}", f"UCX_NET_DEVICES={ports(dev, True)}"]
        check_claim(validator, fixtures_dir, node, out, [name, "req-nic"], [name, "req-nic"], env,
                    host)


def test_refused(dra_render, fixtures_dir, tmp_path):
    p = spec(dra_render, fixtures_dir, "dgx-h100", tmp_path, UID, "nic=mlx5_0")
    assert p.returncode == 1 and "no offered device mlx5_0" in p.stderr
    p = spec(dra_render, fixtures_dir, "dgx-h100", tmp_path, "bad/uid", "nic=pci-0000-18-00-0")
    assert p.returncode == 1 and "Invalid argument" in p.stderr
    assert os.listdir(tmp_path) == []


def test_slices_of_every_fixture_node(dra_render, rdma_dp, fixtures_dir):
    nodes = sorted(n for n in os.listdir(fixtures_dir) if (fixtures_dir / n / "sys").is_dir())
    assert len(nodes) >= 10
    for node in nodes:
        p = subprocess.run([str(dra_render), "slices", str(fixtures_dir / node / "sys"),
                            str(fixtures_dir / node / "dev"), "node-a", "uid-1"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, f"{node}: {p.stderr}"
        slices = json.loads(p.stdout)
        host = discover(rdma_dp, fixtures_dir, node)
        usable = sorted(dra_name(d["unit_id"]) for d in host["devices"] if d["usable"])
        got = sorted(d["name"] for s in slices for d in s["spec"]["devices"])
        assert got == usable, node
        assert len(slices) == 1 and slices[0]["spec"]["pool"] == \
            {"name": "node-a", "generation": 1, "resourceSliceCount": 1}
        for s in slices:
            for d in s["spec"]["devices"]:
                a = d["attributes"]
                assert a["rdma"] == {"bool": True}
                dev = next(x for x in host["devices"] if x["name"] == a["ibdev"]["string"])
                if dev.get("pci_address"):
                    root = a["resource.kubernetes.io/pcieRoot"]["string"]
                    assert root.startswith("pci") and len(root) == 10, root
                    if dev.get("sf_num") is not None:
                        # an SF has no PCI function of its own (issue 21, point 8)
                        assert "resource.kubernetes.io/pciBusID" not in a, (node, dev["name"])
                    else:
                        assert a["resource.kubernetes.io/pciBusID"]["string"] == \
                            dev["pci_address"]
