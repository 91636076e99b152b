# SPDX-License-Identifier: MIT
"""`rdma-dp doctor`'s pcie, placement and gpudirect groups on the generated fixture nodes and
on the planted faults of tests/fixtures/faults_pci.py, through
`rdma-dp doctor --group pcie,placement,gpudirect -o json`. Each fault makes its check fail
(or warn, where that is the check's worst: an idle GPU, peermem, IOMMU mode) and nothing
else in these groups fails or warns; the healthy nodes give no fail."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "fixtures"))
import faults_pci  # noqa: E402
import sysfsgen  # noqa: E402


@pytest.fixture(scope="module")
def tool(rdma_dp):
    return rdma_dp


def doctor(tool, node_dir):
    node_dir = pathlib.Path(node_dir)
    args = [str(tool), "doctor", "--group", "pcie,placement,gpudirect", "--sysfs-root",
            str(node_dir / "sys"), "--dev-root", str(node_dir / "dev"), "-o", "json"]
    if (node_dir / "proc").is_dir():
        args += ["--proc-root", str(node_dir / "proc")]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert p.returncode in (0, 1), p.stderr
    res = json.loads(p.stdout)["checks"]
    assert (p.returncode == 1) == any(r["status"] == "fail" for r in res)
    for r in res:
        assert set(r) == {"group", "id", "status", "subject", "finding", "symptom", "fix"}
        assert r["status"] in ("ok", "skip", "warn", "fail")
        assert r["finding"]
        if r["status"] in ("warn", "fail"):
            assert r["symptom"] and r["fix"], r
    return res


def bad(res):
    return [r for r in res if r["status"] in ("warn", "fail")]


# --- healthy nodes ----------------------------------------------------------------------------

def test_dgx_h100_healthy(tool, fixtures_dir):
    res = doctor(tool, fixtures_dir / "dgx-h100")
    assert bad(res) == []
    by_id = {}
    for r in res:
        by_id.setdefault(r["id"], []).append(r)
    assert len(by_id["pcie.link"]) == 20 and all(r["status"] == "ok" for r in by_id["pcie.link"])
    assert [r["finding"].split(" at ")[1].split(" ")[0] for r in by_id["placement.gpu_nic"]] \
        == ["PXB"] * 8
    assert by_id["gpudirect.peermem"][0]["status"] == "ok"
    assert "identity" in by_id["gpudirect.iommu"][0]["finding"]
    assert len(by_id["gpudirect.acs"]) == 8
    assert all(r["status"] == "ok" for r in by_id["gpudirect.acs"])
    assert by_id["gpudirect.acs"][0]["subject"] == "GPU0 (0000:1b:00.0) / mlx5_0 (0000:18:00.0)"


def test_hgx_pix_placement(tool, fixtures_dir):
    res = doctor(tool, fixtures_dir / "hgx-pix")
    assert [r for r in res if r["status"] == "fail"] == []
    place = [r for r in res if r["id"] == "placement.gpu_nic"]
    assert len(place) == 8
    for i, r in enumerate(place):
        assert r["status"] == "ok"
        assert " at PIX (" in r["finding"]
    gpu0 = [r for r in place if r["subject"] == "GPU0 (0000:19:00.0)"][0]
    assert "closest NIC mlx5_0 (0000:1a:00.0) at PIX" in gpu0["finding"]
    acs = [r for r in res if r["id"] == "gpudirect.acs"]
    assert [r["status"] for r in acs] == ["skip"]      # no IOMMU on this node


@pytest.mark.parametrize("name", ["seed000", "sriov", "roce-lag", "irdma-bnxt", "mlx4",
                                  "vm-passthrough", "rxe", "no-rdma"])
def test_nodes_without_gpus(tool, fixtures_dir, name):
    """No GPU: placement and peermem skip, links ok (or skip where a VM shows none)."""
    res = doctor(tool, fixtures_dir / name)
    assert bad(res) == []
    st = {(r["id"], r["status"]) for r in res}
    assert ("placement.gpu_nic", "skip") in st
    assert ("gpudirect.peermem", "skip") in st
    assert ("gpudirect.iommu", "ok") in st                 # no IOMMU
    assert not any(r["id"] == "pcie.link" and r["status"] == "ok" and r["subject"] == ""
                   for r in res)


def test_vfs_judged_by_their_pf(tool, fixtures_dir):
    """sriov: the 4 VFs report "Unknown"/0 as the kernel shows a VF; the PF's result covers
    them. vm-passthrough: guest VFs without a PCIe capability skip, never ok."""
    res = doctor(tool, fixtures_dir / "sriov")
    links = [r for r in res if r["id"] == "pcie.link"]
    assert [r["subject"] for r in links] == ["mlx5_0 (0000:3b:00.0)", "mlx5_5 (0000:3b:00.1)"]
    vf = fixtures_dir / "sriov/sys/bus/pci/devices/0000:3b:00.2"
    assert (vf / "current_link_speed").read_text() == "Unknown\n"
    assert (vf / "current_link_width").read_text() == "0\n"
    assert (vf / "max_link_speed").read_text() == "16.0 GT/s PCIe\n"
    res = doctor(tool, fixtures_dir / "vm-passthrough")
    links = [r for r in res if r["id"] == "pcie.link"]
    assert len(links) == 4 and all(r["status"] == "skip" for r in links)


def test_vf_whose_pf_is_no_rdma_device(tool, fixtures_dir, tmp_path):
    """A VF whose PF has no ib device: judged by the PF's link, under the VF's name."""
    d = tmp_path / "sriov"
    sysfsgen.copy_node(fixtures_dir / "sriov", d)
    sysfsgen.unplug(d / "sys", d / "dev", "mlx5_0")           # PF0's ibdev gone
    res = doctor(tool, d)
    links = {r["subject"]: r for r in res if r["id"] == "pcie.link"}
    r = links["mlx5_1 (VF 0000:3b:00.2, PF 0000:3b:00.0)"]
    assert r["status"] == "ok"
    assert "the link of its PF" in r["finding"]
    sysfsgen.set_pcie_link(d / "sys", "0000:3b:00.0", "8.0 GT/s PCIe", 16)
    r = {x["subject"]: x for x in doctor(tool, d)}["mlx5_1 (VF 0000:3b:00.2, PF 0000:3b:00.0)"]
    assert r["status"] == "fail"
    assert "PCIe link 8.0 GT/s x16, capable of 16.0 GT/s x16" in r["finding"]


# --- planted faults ---------------------------------------------------------------------------

@pytest.mark.parametrize("fault", sorted(faults_pci.FAULTS))
def test_fault(tool, fixtures_dir, tmp_path, fault):
    fn, check, status = faults_pci.FAULTS[fault]
    res = doctor(tool, fn(fixtures_dir, tmp_path))
    hits = [r for r in res if r["id"] == check and r["status"] == status]
    assert hits, res
    others = [r for r in bad(res) if r["id"] != check]
    assert others == [], others
    assert all(r["status"] == status for r in bad(res))


def test_fault_texts(tool, fixtures_dir, tmp_path):
    r = [x for x in doctor(tool, faults_pci.nic_link_degraded(fixtures_dir, tmp_path))
         if x["status"] == "fail"]
    assert [x["subject"] for x in r] == ["mlx5_0 (0000:18:00.0)"]
    assert "PCIe link 8.0 GT/s x8, capable of 32.0 GT/s x16 (about 63 of 504 Gb/s)" \
        in r[0]["finding"]
    assert "max_link_speed" in r[0]["symptom"]
    assert "lspci -vv -s 0000:18:00.0" in r[0]["fix"]

    r = [x for x in doctor(tool, faults_pci.gpu_idle_downtrained(fixtures_dir, tmp_path))
         if x["status"] == "warn"]
    assert [x["subject"] for x in r] == ["GPU0 (0000:1b:00.0)"]
    assert "2.5 GT/s x16, capable of 32.0 GT/s x16" in r[0]["finding"]
    assert "idle" in r[0]["symptom"] and "busy" in r[0]["fix"]

    r = [x for x in doctor(tool, faults_pci.no_peermem(fixtures_dir, tmp_path))
         if x["status"] == "warn"]
    assert "DMA-BUF possible" in r[0]["finding"]
    assert "NCCL_DMABUF_ENABLE" in r[0]["symptom"]

    r = [x for x in doctor(tool, faults_pci.acs_split(fixtures_dir, tmp_path))
         if x["status"] == "fail"]
    assert len(r) == 8
    assert "status=4" in r[0]["symptom"]
    assert "ECAP_ACS+0x6.w=0000" in r[0]["fix"]

    r = [x for x in doctor(tool, faults_pci.gpu_nic_sys(fixtures_dir, tmp_path))
         if x["status"] == "fail"]
    assert [x["subject"].split()[0] for x in r] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert all(" at SYS (" in x["finding"] for x in r)
    assert "NCCL_NET_GDR_LEVEL" in r[0]["symptom"]


def test_no_peermem_proprietary_old_kernel(tool, fixtures_dir, tmp_path):
    """DMA-BUF impossible (proprietary module, kernel 5.4): the fix says to load peermem."""
    d = faults_pci.no_peermem(fixtures_dir, tmp_path)
    sysfsgen.add_gpudirect_facts(d, peermem=False, open_module=False, kernel="5.4.0-150-generic")
    r = [x for x in doctor(tool, d) if x["id"] == "gpudirect.peermem"][0]
    assert r["status"] == "warn"
    assert "kernel 5.4.0-150-generic (< 5.12)" in r["finding"]
    assert "proprietary" in r["finding"] and "DMA-BUF possible" not in r["finding"]
    assert r["fix"].startswith("Load nvidia-peermem")


def test_legacy_nv_peer_mem(tool, fixtures_dir, tmp_path):
    d = faults_pci.no_peermem(fixtures_dir, tmp_path)
    p = pathlib.Path(d) / "sys/kernel/mm/memory_peers/nv_mem/version"
    p.parent.mkdir(parents=True)
    p.write_text("1.3-0\n")
    r = [x for x in doctor(tool, d) if x["id"] == "gpudirect.peermem"][0]
    assert r["status"] == "ok" and "nv_peer_mem (legacy) 1.3-0" in r["finding"]


def test_placement_port_down(tool, fixtures_dir, tmp_path):
    """GPU0's NIC is down: the closest ACTIVE NIC (NODE) is judged, and the finding names
    the closer one that is down."""
    d = tmp_path / "dgx"
    sysfsgen.copy_node(fixtures_dir / "dgx-h100", d)
    sysfsgen.set_port_state(d / "sys", "mlx5_0", 1, "DOWN")
    r = [x for x in doctor(tool, d) if x["id"] == "placement.gpu_nic"
         and x["subject"].startswith("GPU0 ")][0]
    assert r["status"] == "fail"
    assert " at NODE (" in r["finding"]
    assert "closer at PXB but with no ACTIVE port: mlx5_0 (0000:18:00.0)" in r["finding"]


def test_unreadable_link_skips(tool, fixtures_dir, tmp_path):
    d = tmp_path / "dgx"
    sysfsgen.copy_node(fixtures_dir / "dgx-h100", d)
    fn = d / "sys/bus/pci/devices/0000:18:00.0"
    os.unlink(fn / "current_link_speed")
    (fn / "max_link_width").write_text("garbage\n")
    r = [x for x in doctor(tool, d) if x["subject"] == "mlx5_0 (0000:18:00.0)"][0]
    assert r["status"] == "skip"
    assert "current_link_speed" in r["finding"]
