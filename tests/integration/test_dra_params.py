# SPDX-License-Identifier: MIT
"""`rdma-dp dra`'s opaque parameters (issue 22: "a DRA opaque parameter chooses another"
memlock): status.allocation.devices.config[] entries with opaque.driver rdma.rdma-dp.io and
parameters {apiVersion rdma.rdma-dp.io/v1alpha1, kind RdmaConfig, memlock}, applied per
request to the memlock hook of the claim's CDI spec; strict (an unknown field or kind is the
claim's prepare error, naming the claim and the field); kept in the checkpoint, so a spec
rewritten from it (after a reboot) carries the same hooks. Against the fake API server and the
kubelet stand-in (dra_env.py)."""
import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dra_env  # noqa: E402
from dra_env import DRIVER, NODE  # noqa: E402
from test_dra import MLX5_0, MLX5_3, start, stopped_clean  # noqa: E402

API = "rdma.rdma-dp.io/v1alpha1"


@pytest.fixture
def env(rdma_dp, fixtures_dir):
    e = dra_env.DraEnv(rdma_dp, fixtures_dir, wipe_delay=2)
    yield e
    e.close()


def params(memlock=None, **extra):
    p = {"apiVersion": API, "kind": "RdmaConfig", **extra}
    if memlock is not None:
        p["memlock"] = memlock
    return p


def config(parameters, requests=None, source="FromClaim", driver=DRIVER):
    c = {"source": source, "opaque": {"driver": driver, "parameters": parameters}}
    if requests is not None:
        c["requests"] = requests
    return c


def claim(env, name, devices, configs):
    c = dra_env.make_claim(name, "default", devices, node=env.node)
    c["status"]["allocation"]["devices"]["config"] = configs
    c["spec"]["devices"]["config"] = [x for x in configs if x["source"] == "FromClaim"]
    for x in c["spec"]["devices"]["config"]:
        x.pop("source")
    return env.api.put_claim(c)


def hooks_of(spec):
    """{"top": memlock arg or None, NIC device name suffix: memlock arg or None}."""
    def arg(edits):
        h = (edits or {}).get("hooks") or []
        assert len(h) <= 1, h
        return h[0]["args"][h[0]["args"].index("--memlock") + 1] if h else None
    out = {"top": arg(spec.get("containerEdits"))}
    for d in spec["devices"]:
        if "-req-" in d["name"]:
            # a request's device (dra-cdi.h): its variables only; the limit rides on the
            # devices of the request's NICs, which a container given the request also gets
            assert arg(d["containerEdits"]) is None and not d["containerEdits"].get("deviceNodes"), d
            continue
        out[d["name"].split("-", 5)[-1]] = arg(d["containerEdits"])
    return out


def prepared_spec(env, c, keep=False):
    """The claim's spec once prepared; unprepared again unless keep."""
    uid = c["metadata"]["uid"]
    resp = env.kubelet.prepare([c])
    assert not resp.claims[uid].error, resp.claims[uid].error
    spec = json.loads((env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid)).read_text())
    if not keep:
        env.kubelet.unprepare([c])
    return spec


def test_memlock_parameter_per_request(env, rdma_dp):
    d = start(env, extra=("--memlock-hook", rdma_dp, "--memlock", "1Gi"))
    # no parameter: the driver's --memlock, at the top as before
    c = claim(env, "plain", [("nic", NODE, MLX5_0)], [])
    assert hooks_of(prepared_spec(env, c)) == {"top": "1073741824", MLX5_0: None}
    # one for the whole claim (requests absent), a string with a suffix
    c = claim(env, "one", [("nic", NODE, MLX5_0)], [config(params("64Mi"))])
    assert hooks_of(prepared_spec(env, c)) == {"top": "67108864", MLX5_0: None}
    # per request: the class's for every request, then the claim's for "st" (by its
    # subrequest) wins; "nic" keeps the class's. Another driver's config is not ours.
    c = claim(env, "two", [("nic", NODE, MLX5_0), ("st/fast", NODE, MLX5_3)],
              [config(params("unlimited"), source="FromClass"),
               config({"anything": 1}, driver="gpu.example.com"),
               config(params(1048576), requests=["st/fast"])])
    spec = prepared_spec(env, c, keep=True)
    assert hooks_of(spec) == {"top": None, MLX5_0: "unlimited", MLX5_3: "1048576"}
    uid = c["metadata"]["uid"]
    ck = json.loads(env.checkpoint.read_text())["claims"][uid]["devices"]
    assert sorted((x["device"], x.get("memlock")) for x in ck) == \
        [(MLX5_0, "unlimited"), (MLX5_3, "1048576")]
    # a reboot empties /var/run/cdi: the spec rewritten from the checkpoint is the same
    (env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid)).unlink()
    assert prepared_spec(env, c) == spec
    assert uid not in json.loads(env.checkpoint.read_text())["claims"]
    # 0 leaves the limit alone: no hook at all
    c = claim(env, "zero", [("nic", NODE, MLX5_3)], [config(params(0))])
    assert hooks_of(prepared_spec(env, c)) == {"top": None, MLX5_3: None}
    # a config of ours without memlock changes nothing
    c = claim(env, "empty", [("nic", NODE, MLX5_3)], [config(params())])
    assert hooks_of(prepared_spec(env, c)) == {"top": "1073741824", MLX5_3: None}
    stopped_clean(d)


@pytest.mark.parametrize("parameters,why", [
    (params("1Gi", memlok="1Gi"), 'config[0].opaque.parameters: unknown field "memlok"'),
    ({"apiVersion": API, "kind": "GpuConfig", "memlock": "1Gi"},
     'config[0].opaque.parameters: kind must be "RdmaConfig"'),
    ({"apiVersion": "rdma.rdma-dp.io/v1", "kind": "RdmaConfig"},
     'config[0].opaque.parameters: apiVersion must be "%s"' % API),
    (params("lots"), 'config[0].opaque.parameters: memlock: "lots" is not'),
    (params(-1), "config[0].opaque.parameters: memlock: a negative number"),
    (params(True), "config[0].opaque.parameters: memlock: not a string or an integer"),
])
def test_bad_parameters_fail_the_claim_by_name(env, rdma_dp, parameters, why):
    d = start(env, extra=("--memlock-hook", rdma_dp))
    c = claim(env, "bad", [("nic", NODE, MLX5_0)], [config(parameters)])
    uid = c["metadata"]["uid"]
    ok = claim(env, "fine", [("nic", NODE, MLX5_3)], [])
    resp = env.kubelet.prepare([c, ok], check=False)
    assert resp.claims[uid].error.startswith("claim default/bad: " + why), resp.claims[uid].error
    assert not resp.claims[ok["metadata"]["uid"]].error
    assert not (env.cdi_dir / ("rdma-dp.io-claim_%s.json" % uid)).exists()
    assert uid not in json.loads(env.checkpoint.read_text())["claims"]
    stopped_clean(d)
