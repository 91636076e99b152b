# SPDX-License-Identifier: MIT
"""rdma-dp doctor, its command line, output and the groups of the core (stack, plugin).

On every default fixture node doctor runs, never crashes, and exits 1 exactly when it prints a
fail; text and JSON carry the same results. The healthy dgx-h100 gives no fail. Each stack and
plugin check fails on its planted fault (a copy of a fixture node with one thing taken away,
tests/fixtures/faults_stack.py) and passes on a healthy node; the plugin checks run against a
running daemon (the fake kubelet of kubelet.py) and with none."""
import json
import os
import pathlib
import re
import shutil
import signal
import sys
import tempfile

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "fixtures"))
import faults_stack  # noqa: E402
import kubelet as K  # noqa: E402
import sysfsgen  # noqa: E402

DEFAULT_NODES = ["seed000", "seed001", "dgx-h100", "sriov", "mlx4", "roce-lag", "irdma-bnxt",
                 "rxe", "no-rdma", "broken", "exclusive", "port-down", "two-socket-vfs",
                 "vm-passthrough", "hgx-pix"]
CORE = ("stack.", "plugin.")
LINE = re.compile(r"^  (ok|skip|warn|fail) +(\S+) +(.*)$")

SHARED = [{"resourceName": "hca", "rdmaHcaMax": 100, "selectors": {"vendors": ["15b3"]}}]
EXCLUSIVE = [{"resourceName": "nic", "mode": "exclusive",
              "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}}]


@pytest.fixture
def tmp():
    d = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="rdpdoc"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def doctor(run, node_dir, *extra, kubelet="/nonexistent-kubelet-root", config=None):
    args = ["doctor", "--sysfs-root", pathlib.Path(node_dir) / "sys",
            "--dev-root", pathlib.Path(node_dir) / "dev", "--kubelet-root-dir", kubelet,
            "--interval", "0", *extra]
    if config is not None:
        args += ["--config-file", config]
    return run(*args)


def parse_text(out):
    """[(status, id, rest)] of the result lines, and the summary line."""
    rows, summary = [], None
    for line in out.splitlines():
        m = LINE.match(line)
        if m:
            rows.append(m.groups())
        elif line.startswith("doctor: "):
            summary = line
    return rows, summary


def results(p):
    assert p.returncode in (0, 1), (p.returncode, p.stdout, p.stderr)
    return json.loads(p.stdout)["checks"]


def fails(checks):
    return [c["id"] for c in checks if c["status"] == "fail"]


def write_config(tmp, resources, name="config.json"):
    p = tmp / name
    p.write_text(json.dumps({"configList": resources}))
    return p


def copy(fixtures_dir, tmp, node):
    return sysfsgen.copy_node(fixtures_dir / node, tmp / node)


# ---- every node ------------------------------------------------------------------------------

@pytest.mark.parametrize("node", DEFAULT_NODES)
def test_every_node(run, fixtures_dir, node):
    t = doctor(run, fixtures_dir / node)
    j = doctor(run, fixtures_dir / node, "-o", "json")
    assert t.returncode in (0, 1), (t.stdout, t.stderr)
    assert t.stderr == "" and j.stderr == ""
    rows, summary = parse_text(t.stdout)
    n_fail = sum(1 for r in rows if r[0] == "fail")
    assert t.returncode == (1 if n_fail else 0)
    assert j.returncode == t.returncode
    doc = json.loads(j.stdout)
    checks = doc["checks"]
    # the same results, in the same order
    assert [(c["status"], c["id"]) for c in checks] == [(r[0], r[1]) for r in rows]
    for c, r in zip(checks, rows):
        assert r[2].startswith((c["subject"] + ": " if c["subject"] else "") + c["finding"])
        if c["status"] in ("warn", "fail"):
            if c["symptom"]:
                assert " | symptom: " + c["symptom"] in r[2]
            if c["fix"]:
                assert " | fix: " + c["fix"] in r[2]
        assert set(c) == {"id", "group", "status", "subject", "finding", "symptom", "fix"}
    s = doc["summary"]
    assert summary == "doctor: %d checks: %d fail, %d warn, %d skip, %d ok" % (
        s["checks"], s["fail"], s["warn"], s["skip"], s["ok"])
    assert s["checks"] == len(checks) and s["fail"] == n_fail
    # every group runs, in order, failures first within each
    groups = [c["group"] for c in checks]
    order = ["stack", "plugin", "ports", "pcie", "placement", "gpudirect", "congestion"]
    assert sorted(set(groups), key=order.index) == order
    assert groups == sorted(groups, key=order.index)
    rank = {"fail": 0, "warn": 1, "skip": 2, "ok": 3}
    for g in order:
        st = [rank[c["status"]] for c in checks if c["group"] == g]
        assert st == sorted(st)
    # a check that cannot run says why
    for c in checks:
        assert c["finding"], c


@pytest.mark.parametrize("node", ["dgx-h100", "hgx-pix", "seed000", "seed001", "sriov",
                                  "roce-lag", "irdma-bnxt", "rxe", "mlx4", "two-socket-vfs",
                                  "vm-passthrough"])
def test_healthy_nodes_no_core_fail(run, fixtures_dir, node):
    checks = results(doctor(run, fixtures_dir / node, "-o", "json"))
    assert [c for c in checks if c["id"].startswith(CORE) and c["status"] in ("fail", "warn")
            and c["id"] != "plugin.sockets"] == []


def test_dgx_text(run, fixtures_dir, tmp):
    cfg = write_config(tmp, SHARED)
    p = doctor(run, fixtures_dir / "dgx-h100", config=cfg)
    assert p.returncode == 0, p.stdout
    rows, summary = parse_text(p.stdout)
    assert not [r for r in rows if r[0] == "fail"]
    lines = p.stdout.splitlines()
    assert lines[0] == "stack:"
    assert "  ok   stack.uverbs      ib_uverbs loaded" in lines
    assert "  ok   stack.rdma_ucm    rdma_ucm loaded, /dev/infiniband/rdma_cm present" in lines
    assert ("  ok   stack.driver      mlx5_0 (0000:18:00.0): mlx5_core -> mlx5_ib loaded"
            in lines)
    assert [r[1] for r in rows].count("stack.driver") == 12
    assert ("  ok   plugin.units      rdma/hca: 100 units (rdmaHcaMax), all Healthy "
            "(12 devices)") in lines
    assert "  ok   plugin.config     %s: valid, 1 resource" % cfg in lines


# ---- stack -----------------------------------------------------------------------------------

def test_stack_uverbs(run, fixtures_dir, tmp):
    node = copy(fixtures_dir, tmp, "dgx-h100")
    faults_stack.no_uverbs(node)
    p = doctor(run, node, "-o", "json")
    checks = results(p)
    assert p.returncode == 1
    f = fails(checks)
    assert f[0] == "stack.uverbs"
    # the devices it leaves without a uverbs node are its consequence: warnings that name it
    assert set(f) == {"stack.uverbs"}
    un = [c for c in checks if c["id"] == "plugin.unusable"]
    assert un and all(c["status"] == "warn" and "explained by stack.uverbs" in c["finding"]
                      for c in un)
    c = next(c for c in checks if c["id"] == "stack.uverbs")
    assert "ib_uverbs is not loaded" in c["finding"]
    assert "NET/IB : No device found." in c["symptom"]
    assert c["fix"].startswith("modprobe ib_uverbs")
    t = doctor(run, node)
    assert parse_text(t.stdout)[0][0][:2] == ("fail", "stack.uverbs")


def test_stack_uverbs_builtin(run, fixtures_dir, tmp):
    """Built in without parameters: no /sys/module/ib_uverbs, but its class devices."""
    node = copy(fixtures_dir, tmp, "dgx-h100")
    faults_stack.unload_module(node, "ib_uverbs")
    checks = results(doctor(run, node, "-o", "json"))
    c = next(c for c in checks if c["id"] == "stack.uverbs")
    assert c["status"] == "ok" and "built in" in c["finding"]
    assert fails(checks) == []


def test_stack_rdma_ucm(run, fixtures_dir, tmp):
    node = copy(fixtures_dir, tmp, "dgx-h100")
    faults_stack.no_rdma_ucm(node)
    p = doctor(run, node, "-o", "json")
    checks = results(p)
    assert p.returncode == 1
    f = fails(checks)
    assert f[0] == "stack.rdma_ucm"
    assert set(f) == {"stack.rdma_ucm"}
    c = next(c for c in checks if c["id"] == "stack.rdma_ucm")
    assert "rdma_ucm is not loaded" in c["finding"] and c["fix"].startswith("modprobe rdma_ucm")


def test_stack_rdma_cm_node_missing(run, fixtures_dir, tmp):
    """Loaded, but no /dev/infiniband/rdma_cm (the broken node's defect)."""
    node = copy(fixtures_dir, tmp, "seed000")
    os.unlink(node / "dev" / "infiniband" / "rdma_cm")
    checks = results(doctor(run, node, "-o", "json"))
    c = next(c for c in checks if c["id"] == "stack.rdma_ucm")
    assert c["status"] == "fail" and "rdma_cm is missing" in c["finding"]


def test_stack_driver(run, fixtures_dir, tmp):
    node = copy(fixtures_dir, tmp, "dgx-h100")
    faults_stack.no_rdma_driver(node)
    p = doctor(run, node, "-o", "json")
    checks = results(p)
    assert p.returncode == 1
    assert set(fails(checks)) == {"stack.driver"}
    drv = [c for c in checks if c["id"] == "stack.driver"]
    assert len(drv) == 12
    for c in drv:
        assert c["status"] == "fail"
        assert "bound to mlx5_core but mlx5_ib is not loaded" in c["finding"]
        assert c["fix"].startswith("modprobe mlx5_ib")
        assert "NET/IB : No device found." in c["symptom"]


def test_stack_driver_one_of_many(run, fixtures_dir, tmp):
    """A NIC without its RDMA driver beside working HCAs: warn (it may be Ethernet only)."""
    node = copy(fixtures_dir, tmp, "irdma-bnxt")
    faults_stack.no_rdma_driver(node, "ice", "irdma", "irdma")
    checks = results(doctor(run, node, "-o", "json"))
    c = next(c for c in checks if c["id"] == "stack.driver" and c["subject"] == "0000:17:00.0")
    assert c["status"] == "warn" and "ice but irdma is not loaded" in c["finding"]
    assert fails(checks) == []


def test_stack_driver_healthy(run, fixtures_dir):
    for node, want in (("irdma-bnxt", {"ice -> irdma", "bnxt_en -> bnxt_re",
                                       "mlx5_core -> mlx5_ib"}),
                       ("mlx4", {"mlx4_core -> mlx4_ib"}), ("rxe", {"rdma_rxe"})):
        checks = results(doctor(run, fixtures_dir / node, "-o", "json"))
        drv = [c for c in checks if c["id"] == "stack.driver"]
        assert drv and all(c["status"] == "ok" for c in drv)
        for w in want:
            assert any(w in c["finding"] for c in drv), (w, drv)
    # a RoCE LAG slave has no ibdev of its own: ok, said
    checks = results(doctor(run, fixtures_dir / "roce-lag", "-o", "json"))
    assert any("no RDMA device on this function" in c["finding"] for c in checks
               if c["id"] == "stack.driver" and c["status"] == "ok")


def test_stack_netns(run, fixtures_dir, tmp):
    shared = write_config(tmp, SHARED)
    p = doctor(run, fixtures_dir / "exclusive", "-o", "json", config=shared)
    checks = results(p)
    c = next(c for c in checks if c["id"] == "stack.netns")
    assert c["status"] == "warn"
    assert "exclusive, and rdma/hca is a shared resource" in c["finding"]
    assert "NET/IB : No device found." in c["symptom"]
    assert "rdma system set netns shared" in c["fix"]
    assert fails(checks) == []
    # shared mode: ok
    c = next(c for c in results(doctor(run, fixtures_dir / "seed000", "-o", "json",
                                       config=shared)) if c["id"] == "stack.netns")
    assert c["status"] == "ok"
    # exclusive mode with exclusive resources only: ok, said
    excl = write_config(tmp, [{"resourceName": "nic", "mode": "exclusive",
                               "selectors": {"vendors": ["15b3"]}}], "excl.json")
    c = next(c for c in results(doctor(run, fixtures_dir / "exclusive", "-o", "json",
                                       config=excl)) if c["id"] == "stack.netns")
    assert c["status"] == "ok" and "RDMA CNI" in c["finding"]


# ---- plugin ----------------------------------------------------------------------------------

def test_plugin_config(run, fixtures_dir, tmp):
    bad = tmp / "bad.json"
    bad.write_text('{"configList": [{"resourceName": "hca", "selectors": {"vendors": ["15b3"]}}]}')
    p = doctor(run, fixtures_dir / "dgx-h100", "-o", "json", config=bad)
    checks = results(p)
    assert p.returncode == 1
    assert fails(checks) == ["plugin.config"]
    c = checks[[c["id"] for c in checks].index("plugin.config")]
    assert c["subject"] == str(bad)
    assert c["finding"].startswith("invalid, 1 error: ") and "rdmaHcaMax" in c["finding"]
    assert c["fix"] == "fix what rdma-dp check-config -c %s says" % bad
    # a missing file: invalid too, says so
    checks = results(doctor(run, fixtures_dir / "dgx-h100", "-o", "json",
                            config=tmp / "none.json"))
    assert fails(checks) == ["plugin.config"]
    # valid: ok; a warning (a device in two pools): warn
    good = write_config(tmp, SHARED, "good.json")
    checks = results(doctor(run, fixtures_dir / "dgx-h100", "-o", "json", config=good))
    assert next(c for c in checks if c["id"] == "plugin.config")["status"] == "ok"
    twice = write_config(tmp, SHARED + [dict(SHARED[0], resourceName="again")], "twice.json")
    checks = results(doctor(run, fixtures_dir / "dgx-h100", "-o", "json", config=twice))
    c = next(c for c in checks if c["id"] == "plugin.config")
    assert c["status"] == "warn" and "warning" in c["finding"]


def test_plugin_units(run, fixtures_dir, tmp):
    # healthy: every exclusive unit Healthy
    cfg = write_config(tmp, EXCLUSIVE)
    checks = results(doctor(run, fixtures_dir / "dgx-h100", "-o", "json", config=cfg))
    c = next(c for c in checks if c["id"] == "plugin.units")
    assert c["status"] == "ok" and c["subject"] == "rdma/nic"
    assert c["finding"] == "8 units (one per device), all Healthy (8 devices)"
    # planted: every device of the pool unusable (its uverbs node gone)
    node = copy(fixtures_dir, tmp, "dgx-h100")
    for i in range(8):  # the compute HCAs (IB) are uverbs0..7
        os.unlink(node / "dev" / "infiniband" / ("uverbs%d" % i))
    p = doctor(run, node, "-o", "json", config=cfg)
    checks = results(p)
    c = next(c for c in checks if c["id"] == "plugin.units")
    # the cause fails (plugin.unusable), the count points at it
    assert c["status"] == "warn" and "none of its 8 devices is usable" in c["finding"]
    assert "explained by plugin.unusable" in c["finding"]
    assert "Insufficient rdma/nic" in c["symptom"]
    assert set(fails(checks)) == {"plugin.unusable"}
    # a resource selecting nothing here: warn
    none = write_config(tmp, [{"resourceName": "x", "rdmaHcaMax": 5,
                               "selectors": {"vendors": ["8086"]}}], "none.json")
    checks = results(doctor(run, fixtures_dir / "dgx-h100", "-o", "json", config=none))
    c = next(c for c in checks if c["id"] == "plugin.units")
    assert c["status"] == "warn" and c["finding"].startswith("0 units")


def test_plugin_unusable(run, fixtures_dir, tmp):
    cfg = write_config(tmp, SHARED)
    checks = results(doctor(run, fixtures_dir / "dgx-h100", "-o", "json", config=cfg))
    c = next(c for c in checks if c["id"] == "plugin.unusable")
    assert c["status"] == "ok" and "12 devices, all usable" in c["finding"]
    node = copy(fixtures_dir, tmp, "dgx-h100")
    os.unlink(node / "dev" / "infiniband" / "uverbs3")
    p = doctor(run, node, "-o", "json", config=cfg)
    checks = results(p)
    assert p.returncode == 1
    assert fails(checks) == ["plugin.unusable"]
    c = next(c for c in checks if c["id"] == "plugin.unusable")
    assert c["subject"] == "mlx5_5"  # uverbs3: the fourth compute HCA
    assert c["finding"].startswith("selected by rdma/hca, unusable: /dev/infiniband/uverbs3")
    # a device no pool selects is not the plugin's business
    other = write_config(tmp, [{"resourceName": "roce", "rdmaHcaMax": 5,
                                "selectors": {"linkTypes": ["ether"]}}], "roce.json")
    checks = results(doctor(run, node, "-o", "json", config=other))
    assert fails(checks) == []


def test_plugin_sockets_no_daemon(run, fixtures_dir, tmp):
    root = tmp / "kubelet"
    (root / "device-plugins").mkdir(parents=True)
    p = doctor(run, fixtures_dir / "dgx-h100", "-o", "json", kubelet=root)
    checks = results(p)
    assert p.returncode == 1
    assert fails(checks) == ["plugin.sockets"]
    c = next(c for c in checks if c["id"] == "plugin.sockets")
    assert c["finding"].startswith("no rdma-dp daemon is running: no status.json in %s" % root)
    assert "Pending" in c["symptom"]
    # no kubelet root here at all: skip, saying why
    checks = results(doctor(run, fixtures_dir / "dgx-h100", "-o", "json",
                            kubelet=tmp / "absent"))
    c = next(c for c in checks if c["id"] == "plugin.sockets")
    assert c["status"] == "skip" and "is not here" in c["finding"]


def test_plugin_with_daemon(rdma_dp, run, fixtures_dir):
    env = K.TestEnv(rdma_dp, fixtures_dir, prefix="rdpdoc")
    try:
        cfg = env.config(SHARED + [{"resourceName": "nic", "mode": "exclusive",
                                    "selectors": {"vendors": ["15b3"],
                                                  "linkTypes": ["ether"]}}])
        d = env.daemon(cfg, "dgx-h100")
        env.kubelet.wait_registered("rdma/hca")
        env.kubelet.wait_registered("rdma/nic")
        p = doctor(run, fixtures_dir / "dgx-h100", "-o", "json", kubelet=env.root, config=cfg)
        checks = results(p)
        assert p.returncode == 0, checks
        socks = {c["subject"]: c for c in checks if c["id"] == "plugin.sockets"}
        assert set(socks) == {"rdma/hca", "rdma/nic"}
        for c in socks.values():
            assert c["status"] == "ok" and "answers GetDevicePluginOptions" in c["finding"]
            assert "daemon pid %d" % d.pid in c["finding"]
        units = {c["subject"]: c for c in checks if c["id"] == "plugin.units"}
        assert units["rdma/nic"]["finding"] == ("4 units (one per device), all Healthy "
                                                "(4 devices), as the daemon told kubelet")
        # the daemon told kubelet other units than this config gives: fail
        cfg3 = env.config([dict(SHARED[0], rdmaHcaMax=SHARED[0]["rdmaHcaMax"] + 1)] +
                          [{"resourceName": "nic", "mode": "exclusive",
                            "selectors": {"vendors": ["15b3"], "linkTypes": ["ether"]}}],
                          name="other.json")
        p = doctor(run, fixtures_dir / "dgx-h100", "-o", "json", kubelet=env.root, config=cfg3)
        checks = results(p)
        assert p.returncode == 1 and fails(checks) == ["plugin.units"]
        c = next(c for c in checks if c["id"] == "plugin.units" and c["status"] == "fail")
        assert c["subject"] == "rdma/hca" and "the daemon (pid %d) told kubelet" % d.pid in \
            c["finding"]
        # a resource of the config the daemon has not applied: warn
        cfg2 = env.config(SHARED + [dict(SHARED[0], resourceName="later",
                                         selectors={"vendors": ["15b3"]})], name="new.json")
        checks = results(doctor(run, fixtures_dir / "dgx-h100", "-o", "json",
                                kubelet=env.root, config=cfg2))
        c = next(c for c in checks if c["id"] == "plugin.sockets" and
                 c["subject"] == "rdma/later")
        assert c["status"] == "warn" and "not served by the daemon" in c["finding"]
        # a wedged daemon does not answer: fail, within the probe's deadline
        d.signal(signal.SIGSTOP)
        try:
            p = doctor(run, fixtures_dir / "dgx-h100", "-o", "json", kubelet=env.root)
            checks = results(p)
        finally:
            d.signal(signal.SIGCONT)
        assert p.returncode == 1
        bad = [c for c in checks if c["id"] == "plugin.sockets"]
        assert bad and all(c["status"] == "fail" and ("DEADLINE_EXCEEDED" in c["finding"] or
                                                      "no answer within" in c["finding"])
                           for c in bad)
        # a killed one leaves its status: its sockets refuse
        d.kill()
        p = doctor(run, fixtures_dir / "dgx-h100", "-o", "json", kubelet=env.root)
        checks = results(p)
        assert p.returncode == 1 and set(fails(checks)) == {"plugin.sockets"}
    finally:
        env.close()


# ---- the command line --------------------------------------------------------------------------

@pytest.mark.parametrize("args,msg", [
    (["--bogus"], "unknown option '--bogus'"),
    (["--interval", "x"], "--interval: 'x' is not a number"),
    (["--interval", "-1"], "--interval"),
    (["--interval", "60001"], "--interval"),
    (["--pid", "0"], "--pid"),
    (["--pid"], "option '--pid' needs an argument"),
    (["--pod", "--pid", "1"], "--pod and --pid exclude each other"),
    (["--group", "ports,bogus"], "--group: 'bogus' is not a group"),
    (["--group", ""], "--group: '' is not a group"),
    (["--group", "pod"], "the pod group runs alone, with --pod or --pid"),
    (["--pod", "--group", "ports"], "the pod group runs alone, with --pod or --pid"),
    (["-o", "table"], "invalid output format 'table'"),
    (["-o", "yaml"], "invalid output format 'yaml'"),
    (["extra"], "unexpected argument 'extra'"),
    (["--kubelet-root-dir", ""], "empty path"),
])
def test_usage_errors(run, args, msg):
    p = run("doctor", *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert msg in p.stderr and p.stdout == ""


def test_help_and_roots(run, fixtures_dir):
    p = run("doctor", "--help")
    assert p.returncode == 0 and p.stdout.startswith("Usage: rdma-dp doctor [OPTIONS]")
    for opt in ("--config-file", "--sysfs-root", "--dev-root", "--proc-root",
                "--kubelet-root-dir", "--interval", "--pod", "--pid", "--output"):
        assert opt in p.stdout
    assert "doctor" in run("--help").stdout
    p = run("doctor", "--sysfs-root", "/nonexistent-sys")
    assert p.returncode == 1 and "cannot open sysfs root '/nonexistent-sys'" in p.stderr
    p = doctor(run, fixtures_dir / "seed000", "--proc-root", "/nonexistent-proc")
    assert p.returncode == 1 and "cannot open proc root '/nonexistent-proc'" in p.stderr


def test_pod_mode(run, fixtures_dir):
    """--pod / --pid run the pod group alone."""
    for extra in (["--pod"], ["--pid", str(os.getpid())]):
        p = doctor(run, fixtures_dir / "seed000", "-o", "json", "--proc-root", "/proc", *extra)
        checks = results(p)
        assert checks and {c["group"] for c in checks} == {"pod"}
