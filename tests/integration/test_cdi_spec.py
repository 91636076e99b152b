"""CDI specs written by src/cdi/cdi.c, loaded by the reference CDI library.

The specs come from tests/tools/cdi-render (a fixture node discovered, src/cdi/cdi.c renders and
writes the spec); tests/tools/cdi-validate is the CDI Go library as Debian 12 packages it
(v0.5.2, the version podman 4.3 vendors): cdi.ReadSpec with the JSON schema validator, then a
registry over the spec directory and InjectDevices into an empty OCI spec, as runtimes do.
hostPath points at the fixture's device nodes (cdi-render --host-prefix) so that the
injection can stat them; one test shows that it really does.

tests/tools/cdi-validate-current is the same validator against the current library from the Go
module proxy (pinned in its go.mod); every check that runs one runs the other (the validator
fixture is parametrized), so a spec rdma-dp writes must satisfy both. Version facts have their
own tables (BAD for v0.5.2, BAD_CURRENT and GOOD_CURRENT for the current library).

The validators are built once per session into $RDP_BUILD (v0.5.2: GOPATH mode, offline;
without go or the Debian package its cases skip and say which is missing, and
scripts/install-deps.sh installs both; current: module mode, module and build caches under
$RDP_BUILD/cdi-validate-current-go, a failed build fails its cases with go's reason).
"""
import json
import os
import pathlib
import shutil
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOLS = REPO / "tests" / "tools"
# name -> (tool folder, binary in $RDP_BUILD). "v0.5.2": Debian's package, GOPATH mode, offline
# (the compatibility floor; skips when go or the package is missing). "current": the current
# library, pinned in tests/tools/cdi-validate-current/go.mod, from the Go module proxy; a build
# that fails (no proxy, no Go) fails its cases with the reason: CI has the proxy.
VALIDATORS = {"v0.5.2": ("cdi-validate", "cdi-validate"),
              "current": ("cdi-validate-current", "cdi-validate-current")}


def _build_dir():
    build = os.environ.get("RDP_BUILD")
    if not build:
        pytest.skip("RDP_BUILD not set (run through ctest/make check)")
    return pathlib.Path(build)


def _build_validator(which):
    folder, name = VALIDATORS[which]
    src = TOOLS / folder
    out = _build_dir() / name
    newest = max(f.stat().st_mtime for f in src.iterdir())
    if out.exists() and out.stat().st_mtime >= newest:
        return out
    p = subprocess.run([str(src / "build.sh"), str(out)], capture_output=True, text=True,
                       timeout=900)
    if p.returncode == 3 and which == "v0.5.2":
        pytest.skip(p.stderr.strip())
    assert p.returncode == 0, f"building {name} failed:\n{p.stdout}\n{p.stderr}"
    return out


@pytest.fixture(scope="session")
def validator_v052():
    """The reference CDI library as Debian 12 packages it (v0.5.2): facts of that version."""
    return _build_validator("v0.5.2")


@pytest.fixture(scope="session")
def validator_current():
    """The current reference CDI library (tests/tools/cdi-validate-current/go.mod)."""
    return _build_validator("current")


@pytest.fixture(scope="session", params=list(VALIDATORS))
def validator(request):
    """Both libraries: a spec rdma-dp writes must satisfy the floor and the current one."""
    return _build_validator(request.param)


@pytest.fixture(scope="session")
def cdi_render():
    p = _build_dir() / "cdi-render"
    if not p.exists():
        pytest.fail(f"{p} not built")
    return p


def discover(rdma_dp, fixtures_dir, node):
    p = subprocess.run([str(rdma_dp), "discover", "--sysfs-root", str(fixtures_dir / node / "sys"),
                        "--dev-root", str(fixtures_dir / node / "dev"), "-o", "json"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def render(cdi_render, fixtures_dir, node, outdir, cls, *args, host_prefix=True):
    cmd = [str(cdi_render)]
    if host_prefix:
        cmd += ["--host-prefix", str(fixtures_dir / node)]
    cmd += [str(fixtures_dir / node / "sys"), str(fixtures_dir / node / "dev"), str(outdir), cls,
            *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def validate(validator, *specs, dir=None, inject=None):
    cmd = [str(validator)]
    if dir is not None:
        cmd += ["-dir", str(dir)]
    if inject:
        cmd += ["-inject", ",".join(inject)]
    cmd += [str(s) for s in specs]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert p.returncode in (0, 1), f"cdi-validate: {p.returncode}\n{p.stderr}"
    return p.returncode, json.loads(p.stdout)


def check_spec(validator, fixtures_dir, node, outdir, cls, spec_units, units, env, host_devices):
    """Validates outdir's spec for cls (devices spec_units, in that order), injects units, and
    checks the OCI result."""
    spec = outdir / f"rdma-dp.io-{cls}.json"
    all_names = [f"rdma-dp.io/{cls}={u}" for u in spec_units]
    names = [f"rdma-dp.io/{cls}={u}" for u in units]
    rc, res = validate(validator, spec, dir=outdir, inject=names)
    assert rc == 0, json.dumps(res, indent=2)
    assert res["specs"] == [{"path": str(spec), "ok": True, "kind": f"rdma-dp.io/{cls}",
                             "devices": all_names}]
    assert res["registry"] == {"devices": sorted(all_names), "errors": {}}
    inj = res["inject"]
    assert "error" not in inj and "unresolved" not in inj
    want = {"/dev/infiniband/rdma_cm"}
    for u in units:
        want |= set(host_devices[u])
    got = {d["path"]: d for d in inj["devices"]}
    assert set(got) == want
    for path, d in got.items():
        st = os.stat(fixtures_dir / node / path.lstrip("/"))
        assert (d["type"], d["major"], d["minor"]) == ("c", os.major(st.st_rdev),
                                                     os.minor(st.st_rdev)), path
    assert sorted((c["major"], c["minor"], c["access"]) for c in inj["cgroupDevices"]) == \
        sorted((d["major"], d["minor"], "rw") for d in got.values())
    assert inj["env"] == (list(env) or None)
    return res


def need_char_nodes(fixtures_dir, node):
    p = fixtures_dir / node / "dev" / "infiniband" / "rdma_cm"
    if not p.is_char_device():
        pytest.skip(f"{p} is a stand-in file (mknod refused): the injection needs char nodes")


def units_of(host, pred=lambda d: True):
    return [d["unit_id"] for d in host["devices"] if d["usable"] and pred(d)]


def test_dgx_h100_compute_nics(validator, cdi_render, rdma_dp, fixtures_dir, tmp_path):
    need_char_nodes(fixtures_dir, "dgx-h100")
    host = discover(rdma_dp, fixtures_dir, "dgx-h100")
    units = units_of(host, lambda d: d["ports"][0]["link_layer"] == "infiniband")
    assert len(units) == 8
    env = ["NCCL_IB_TC=106", "NCCL_IB_TIMEOUT=22"]
    p = render(cdi_render, fixtures_dir, "dgx-h100", tmp_path, "rdma/hca_shared_devices_a",
               *units, *env)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"written {tmp_path}/rdma-dp.io-hca_shared_devices_a.json\n"
    chars = {d["unit_id"]: d["char_devices"] for d in host["devices"]}
    check_spec(validator, fixtures_dir, "dgx-h100", tmp_path, "hca_shared_devices_a", units,
               units, env, chars)
    # one device alone gets its own nodes and the spec's rdma_cm, nothing of the others
    check_spec(validator, fixtures_dir, "dgx-h100", tmp_path, "hca_shared_devices_a", units,
               units[3:4], env, chars)


def test_irdma_bnxt_sf(validator, cdi_render, rdma_dp, fixtures_dir, tmp_path):
    need_char_nodes(fixtures_dir, "irdma-bnxt")
    host = discover(rdma_dp, fixtures_dir, "irdma-bnxt")
    units = units_of(host)
    assert "0000:03:00.0-sf2" in units
    p = render(cdi_render, fixtures_dir, "irdma-bnxt", tmp_path, "example.com/sf", *units)
    assert p.returncode == 0, p.stderr
    chars = {d["unit_id"]: d["char_devices"] for d in host["devices"]}
    check_spec(validator, fixtures_dir, "irdma-bnxt", tmp_path, "example_com__sf", units,
               ["0000:03:00.0-sf2"], [], chars)
    check_spec(validator, fixtures_dir, "irdma-bnxt", tmp_path, "example_com__sf", units, units,
               [], chars)


def test_rxe(validator, cdi_render, rdma_dp, fixtures_dir, tmp_path):
    need_char_nodes(fixtures_dir, "rxe")
    host = discover(rdma_dp, fixtures_dir, "rxe")
    # The node has rxe1 on a veth too since the fixture follows the real kernel's run.
    assert units_of(host) == ["rxe0", "rxe1"]
    p = render(cdi_render, fixtures_dir, "rxe", tmp_path, "rdma/soft_roce", "rxe0")
    assert p.returncode == 0, p.stderr
    check_spec(validator, fixtures_dir, "rxe", tmp_path, "soft_roce", ["rxe0"], ["rxe0"], [],
               {"rxe0": host["devices"][0]["char_devices"]})


def test_env_with_equals_and_utf8(validator, cdi_render, rdma_dp, fixtures_dir, tmp_path):
    need_char_nodes(fixtures_dir, "rxe")
    host = discover(rdma_dp, fixtures_dir, "rxe")
    env = ["NCCL_IB_HCA==mlx5_0:1,mlx5_3:1", "MSG=a=b=c \"quoted\" \\ back/slash",
           "UTF=grüße € 日本 😀", "EMPTY="]
    p = render(cdi_render, fixtures_dir, "rxe", tmp_path, "rdma/hca", "rxe0", *env)
    assert p.returncode == 0, p.stderr
    raw = (tmp_path / "rdma-dp.io-hca.json").read_bytes()
    assert "grüße € 日本 😀".encode() in raw  # UTF-8 as is, not \u escapes
    check_spec(validator, fixtures_dir, "rxe", tmp_path, "hca", ["rxe0"], ["rxe0"], env,
               {"rxe0": host["devices"][0]["char_devices"]})


def test_rewrite_only_on_change_and_remove(validator, cdi_render, fixtures_dir, tmp_path):
    args = (cdi_render, fixtures_dir, "rxe", tmp_path, "rdma/hca")
    assert render(*args, "rxe0").stdout.startswith("written ")
    f = tmp_path / "rdma-dp.io-hca.json"
    ino = f.stat().st_ino
    assert render(*args, "rxe0").stdout.startswith("unchanged ")
    assert f.stat().st_ino == ino
    assert oct(f.stat().st_mode & 0o7777) == "0o644"
    assert render(*args, "rxe0", "A=1").stdout.startswith("written ")
    assert f.stat().st_ino != ino
    # no device left: no file (v0.5.2 would take an empty spec, later releases refuse it)
    assert render(*args).stdout.startswith("removed ")
    assert sorted(os.listdir(tmp_path)) == []
    rc, res = validate(validator, dir=tmp_path)
    assert rc == 0 and res["registry"] == {"devices": [], "errors": {}}


def test_host_path_is_really_stat(validator, cdi_render, fixtures_dir, tmp_path):
    """Without --host-prefix hostPath is the host's /dev/infiniband/...: the spec loads, but
    injecting needs the node to exist on this machine (the library stats it)."""
    if os.path.exists("/dev/infiniband/uverbs0"):
        pytest.skip("this machine has /dev/infiniband/uverbs0")
    p = render(cdi_render, fixtures_dir, "rxe", tmp_path, "rdma/hca", "rxe0", host_prefix=False)
    assert p.returncode == 0, p.stderr
    rc, res = validate(validator, tmp_path / "rdma-dp.io-hca.json", dir=tmp_path,
                       inject=["rdma-dp.io/hca=rxe0"])
    assert rc == 1
    assert res["specs"][0]["ok"] and res["registry"]["devices"] == ["rdma-dp.io/hca=rxe0"]
    assert "failed to stat CDI host device" in res["inject"]["error"]


def test_unresolvable_name(validator, cdi_render, fixtures_dir, tmp_path):
    assert render(cdi_render, fixtures_dir, "rxe", tmp_path, "rdma/hca", "rxe0").returncode == 0
    rc, res = validate(validator, dir=tmp_path, inject=["rdma-dp.io/hca=rxe1"])
    assert rc == 1
    assert res["inject"]["unresolved"] == ["rdma-dp.io/hca=rxe1"]
    assert "unresolvable CDI devices" in res["inject"]["error"]


def test_c_side_refuses_bad_classes(cdi_render, fixtures_dir, tmp_path):
    for res in ("rdma/hca.a", "rdma/1hca", "rdma/hca_", "rdma/a", "1example.com/x"):
        p = render(cdi_render, fixtures_dir, "rxe", tmp_path, res, "rxe0")
        assert p.returncode == 1 and "no CDI class" in p.stderr, res
    p = render(cdi_render, fixtures_dir, "rxe", tmp_path, "rdma/hca", "rxe0", "1X=y")
    assert p.returncode == 1 and "Invalid argument" in p.stderr
    assert os.listdir(tmp_path) == []


# The validator is real: hand-edited variants of a spec we rendered are rejected, each for its
# reason, while the original passes. Facts of v0.5.2 (Debian 12, podman 4.3).
BAD = [
    ("version-0.6.0", lambda s: s.update(cdiVersion="0.6.0"), 'invalid version "0.6.0"'),
    ("version-v0.5.0", lambda s: s.update(cdiVersion="v0.5.0"), 'invalid version "v0.5.0"'),
    ("dotted-class", lambda s: s.update(kind="rdma-dp.io/hca.a"),
     "invalid character '.' in device class"),
    ("empty-device-edits", lambda s: s["devices"][0].update(containerEdits={}),
     "empty device edits"),
    ("no-device-edits", lambda s: s["devices"][0].pop("containerEdits"), "empty device edits"),
    ("annotations", lambda s: s.update(annotations={"a": "b"}), "unknown field"),
    ("additional-gids", lambda s: s["containerEdits"].update(additionalGids=[5]),
     "unknown field"),
    ("permissions-none",
     lambda s: s["devices"][0]["containerEdits"]["deviceNodes"][0].update(permissions="none"),
     "invalid persmissions"),
    ("env-no-name", lambda s: s["containerEdits"].update(env=["=x"]),
     "invalid environment variable"),
    ("two-devices-one-name", lambda s: s["devices"].append(s["devices"][0]),
     "multiple device"),
    ("device-name-slash", lambda s: s["devices"][0].update(name="a/b"),
     "invalid character '/' in device name"),
    ("vendor-digit-first", lambda s: s.update(kind="1rdma-dp.io/hca"), "should start with letter"),
    # v0.5.2 indexes class[1:len-1]: a 1-character class panics inside the library (a runtime
    # refreshing its registry would go down with it). cdi.h refuses such classes.
    ("one-char-class", lambda s: s.update(kind="rdma-dp.io/a"), "panic: runtime error"),
]


@pytest.fixture
def good_spec(cdi_render, fixtures_dir, tmp_path):
    d = tmp_path / "good"
    p = render(cdi_render, fixtures_dir, "rxe", d, "rdma/hca", "rxe0", "A=1")
    assert p.returncode == 0, p.stderr
    return d / "rdma-dp.io-hca.json"


@pytest.mark.parametrize("name,edit,error", BAD, ids=[b[0] for b in BAD])
def test_validator_rejects(validator_v052, good_spec, tmp_path, name, edit, error):
    check_rejects(validator_v052, good_spec, tmp_path, name, edit, error)


def check_rejects(validator, good_spec, tmp_path, name, edit, error):
    rc, res = validate(validator, good_spec)
    assert rc == 0 and res["specs"][0]["ok"]
    spec = json.loads(good_spec.read_text())
    edit(spec)
    bad = tmp_path / f"rdma-dp.io-{name}.json"
    bad.write_text(json.dumps(spec, indent=2))
    rc, res = validate(validator, bad)
    assert rc == 1
    assert not res["specs"][0]["ok"]
    assert error in res["specs"][0]["error"], res["specs"][0]["error"]


# The same edits under the current library (tests/tools/cdi-validate-current/go.mod): its own
# checks, without v0.5.2's JSON schema (no longer in the module). It gates newer fields on
# cdiVersion and no longer panics on a 1-character class.
BAD_CURRENT = [
    ("dotted-class", lambda s: s.update(kind="rdma-dp.io/hca.a"),
     "spec version must be at least v0.6.0"),
    ("empty-device-edits", lambda s: s["devices"][0].update(containerEdits={}),
     "empty device edits"),
    ("no-device-edits", lambda s: s["devices"][0].pop("containerEdits"), "empty device edits"),
    ("annotations", lambda s: s.update(annotations={"a": "b"}),
     "spec version must be at least v0.6.0"),
    ("additional-gids", lambda s: s["containerEdits"].update(additionalGids=[5]),
     "spec version must be at least v0.7.0"),
    ("env-no-name", lambda s: s["containerEdits"].update(env=["=x"]),
     "invalid environment variable"),
    ("two-devices-one-name", lambda s: s["devices"].append(s["devices"][0]),
     "multiple device"),
    ("device-name-slash", lambda s: s["devices"][0].update(name="a/b"),
     "invalid character '/' in device name"),
    ("vendor-digit-first", lambda s: s.update(kind="1rdma-dp.io/hca"), "should start with letter"),
    ("no-devices", lambda s: s.update(devices=[]), "no devices"),
]


@pytest.mark.parametrize("name,edit,error", BAD_CURRENT, ids=[b[0] for b in BAD_CURRENT])
def test_current_library_rejects(validator_current, good_spec, tmp_path, name, edit, error):
    check_rejects(validator_current, good_spec, tmp_path, name, edit, error)


# What v0.5.2 refuses and the current library takes: newer versions, permissions outside its
# schema, a 1-character class (v0.5.2 panics).
GOOD_CURRENT = [
    ("version-0.6.0", lambda s: s.update(cdiVersion="0.6.0")),
    ("version-v0.5.0", lambda s: s.update(cdiVersion="v0.5.0")),
    ("permissions-none",
     lambda s: s["devices"][0]["containerEdits"]["deviceNodes"][0].update(permissions="none")),
    ("one-char-class", lambda s: s.update(kind="rdma-dp.io/a")),
]


@pytest.mark.parametrize("name,edit", GOOD_CURRENT, ids=[b[0] for b in GOOD_CURRENT])
def test_current_library_accepts(validator_current, good_spec, tmp_path, name, edit):
    spec = json.loads(good_spec.read_text())
    edit(spec)
    f = tmp_path / f"rdma-dp.io-{name}.json"
    f.write_text(json.dumps(spec))
    rc, res = validate(validator_current, f)
    assert rc == 0 and res["specs"][0]["ok"], res


def test_validator_accepts_spec_without_devices(validator_v052, good_spec, tmp_path):
    """v0.5.2 takes a spec with "devices": [] (the current library refuses "no devices",
    BAD_CURRENT): one reason why cdi.c writes no file for a resource without devices rather
    than an empty spec."""
    spec = json.loads(good_spec.read_text())
    spec["devices"] = []
    f = tmp_path / "empty.json"
    f.write_text(json.dumps(spec))
    rc, res = validate(validator_v052, f)
    assert rc == 0 and res["specs"][0]["ok"]


def test_registry_drops_conflicting_files(validator, good_spec, tmp_path):
    """The same qualified device in two files of one directory is dropped: why every resource
    has its own class."""
    d = tmp_path / "conflict"
    d.mkdir()
    shutil.copy(good_spec, d / "rdma-dp.io-hca.json")
    shutil.copy(good_spec, d / "rdma-dp.io-hca-copy.json")
    rc, res = validate(validator, dir=d)
    assert rc == 1
    assert res["registry"]["devices"] == []
    assert any("conflicting device" in e for errs in res["registry"]["errors"].values()
               for e in errs)
