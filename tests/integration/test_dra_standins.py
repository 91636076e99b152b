# SPDX-License-Identifier: MIT
"""Tests of the DRA stand-ins themselves (fake_apiserver.py, dra_kubelet.py, dra_env.py), so
the end-to-end tests of `rdma-dp dra` stand on checked ground. Nothing here runs rdma-dp."""
import os
import pathlib
import re
import shutil
import socket
import ssl
import tempfile
import time

import pytest

import dra_env
import dra_kubelet
import fake_apiserver as F
import kubelet as kl

DRV = "rdma.rdma-dp.io"


# -- fake apiserver --------------------------------------------------------------------------------
@pytest.fixture
def api():
    s = F.FakeAPIServer(node="node-a").start()
    s.add_node("node-b")
    yield s
    s.stop()


@pytest.fixture
def client(api):
    c = F.Client(api.base_url, api.ca_path, token_file=api.token_file, timeout=5)
    yield c
    c.close()


def good_slice(api, node="node-a", driver=DRV, ndev=2, name=None):
    devs = [{"name": "pci-0000-%02x-00-0" % (0x18 + i), "attributes": {
        "rdma": {"bool": True}, "ibdev": {"string": "mlx5_%d" % i}, "numaNode": {"int": 0},
        "fwVersion": {"string": "28.39.1002"}, "drvVersion": {"version": "1.2.3-rc.1+b7"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:15"},
        "resource.kubernetes.io/pciBusID": {"string": "0000:%02x:00.0" % (0x18 + i)}},
        "capacity": {"ports": {"value": "1"}}} for i in range(ndev)]
    m = {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                              "uid": api.node_uid(node), "controller": True}]}
    if name:
        m["name"] = name
    else:
        m["generateName"] = "%s-%s-" % (node, driver)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": m,
            "spec": {"driver": driver, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devs}}


def test_valid_slice_accepted_listed_and_filtered(api, client):
    st, obj = client.request("POST", F.SLICES, good_slice(api))
    assert st == 201, obj
    m = obj["metadata"]
    assert re.fullmatch(r"node-a-rdma\.rdma-dp\.io-[bcdfghjklmnpqrstvwxz2456789]{5}", m["name"])
    assert re.fullmatch(r"[0-9a-f-]{36}", m["uid"]) and m["creationTimestamp"].endswith("Z")
    rv1 = int(m["resourceVersion"])
    assert client.last_headers["Content-Type"] == "application/json"
    assert "Warning" not in client.last_headers and api.warnings == []
    st, o2 = client.request("POST", F.SLICES, good_slice(api, driver="gpu.example.com"))
    assert st == 201 and int(o2["metadata"]["resourceVersion"]) > rv1
    assert client.request("POST", F.SLICES, good_slice(api, node="node-b"))[0] == 201
    # empty slice (no devices) is valid
    empty = good_slice(api, ndev=0)
    empty["spec"]["devices"] = []
    assert client.request("POST", F.SLICES, empty)[0] == 201

    st, lst = client.request("GET", F.SLICES + "?" + F.selector(
        **{"spec.nodeName": "node-a", "spec.driver": DRV}) + "&labelSelector=x%3Dy")
    assert st == 200 and lst["kind"] == "ResourceSliceList"
    assert lst["apiVersion"] == "resource.k8s.io/v1" and lst["metadata"]["resourceVersion"]
    assert sorted(len(i["spec"]["devices"]) for i in lst["items"]) == [0, 2]
    assert all("kind" not in i and "apiVersion" not in i for i in lst["items"])
    assert lst["items"][0]["metadata"]["managedFields"][0]["manager"] == "rdp-test-client"
    assert len(client.request("GET", F.SLICES)[1]["items"]) == 4
    st, one = client.request("GET", F.SLICES + "/" + m["name"])
    assert st == 200 and one["metadata"]["uid"] == m["uid"]
    # unknown fields are accepted with a warning, as fieldValidation=Warn does
    odd = good_slice(api)
    odd["spec"]["devices"][0]["bogus"] = 1
    assert client.request("POST", F.SLICES, odd)[0] == 201
    assert "unknown field" in client.last_headers["Warning"]
    assert api.warnings == ["spec.devices[0].bogus"]


def _mutations():
    def dev0(s):
        return s["spec"]["devices"][0]

    def many_attrs(n):
        return lambda s: dev0(s).update(attributes={"a%d" % i: {"int": i} for i in range(n)},
                                        capacity={})

    def set_(path_fn, **kw):
        return lambda s: path_fn(s).update(**kw)

    return [
        ("name-underscore", lambda s: dev0(s).update(name="mlx5_0"), "spec.devices[0].name"),
        ("name-bdf", lambda s: dev0(s).update(name="0000:3b:00.0"), "spec.devices[0].name"),
        ("name-64", lambda s: dev0(s).update(name="a" * 64), "spec.devices[0].name"),
        ("name-missing", lambda s: dev0(s).pop("name"), "spec.devices[0].name"),
        ("dup-names", lambda s: s["spec"]["devices"][1].update(name=dev0(s)["name"]),
         "spec.devices[1]"),
        ("129-devices", lambda s: s["spec"].update(devices=[
            {"name": "d%d" % i} for i in range(129)]), "spec.devices"),
        ("attr-name-dash", lambda s: dev0(s)["attributes"].update({"link-layer": {"int": 1}}),
         "spec.devices[0].attributes"),
        ("attr-name-33", lambda s: dev0(s)["attributes"].update({"a" * 33: {"int": 1}}),
         "spec.devices[0].attributes"),
        ("attr-domain-bad", lambda s: dev0(s)["attributes"].update({"Rdma_X/x": {"int": 1}}),
         "spec.devices[0].attributes"),
        ("attr-two-slashes", lambda s: dev0(s)["attributes"].update({"a.io/b/c": {"int": 1}}),
         "spec.devices[0].attributes"),
        ("attr-two-values", lambda s: dev0(s)["attributes"].update(
            rdma={"bool": True, "int": 1}), "spec.devices[0].attributes[rdma]"),
        ("attr-no-value", lambda s: dev0(s)["attributes"].update(rdma={}),
         "spec.devices[0].attributes[rdma]"),
        ("attr-string-65", lambda s: dev0(s)["attributes"].update(ibdev={"string": "x" * 65}),
         "spec.devices[0].attributes[ibdev].string"),
        ("attr-version-bad", lambda s: dev0(s)["attributes"].update(
            drvVersion={"version": "1.0"}), "spec.devices[0].attributes[drvVersion].version"),
        ("33-attributes", many_attrs(33), "spec.devices[0]"),
        ("30-attrs-3-caps", lambda s: dev0(s).update(
            attributes={"a%d" % i: {"int": i} for i in range(30)},
            capacity={"c%d" % i: {"value": "1"} for i in range(3)}), "spec.devices[0]"),
        ("capacity-bad-quantity", lambda s: dev0(s).update(capacity={"ports": {"value": "x"}}),
         "spec.devices[0].capacity[ports].value"),
        ("driver-upper", lambda s: s["spec"].update(driver="RDMA.example.com"), "spec.driver"),
        ("driver-underscore", lambda s: s["spec"].update(driver="rdma_dp.io"), "spec.driver"),
        ("driver-64", lambda s: s["spec"].update(driver="a" * 60 + ".com"), "spec.driver"),
        ("driver-missing", lambda s: s["spec"].pop("driver"), "spec.driver"),
        ("pool-name-missing", lambda s: s["spec"]["pool"].pop("name"), "spec.pool.name"),
        ("pool-missing", lambda s: s["spec"].pop("pool"), "spec.pool.name"),
        ("slice-count-0", set_(lambda s: s["spec"]["pool"], resourceSliceCount=0),
         "spec.pool.resourceSliceCount"),
        ("slice-count-missing", lambda s: s["spec"]["pool"].pop("resourceSliceCount"),
         "spec.pool.resourceSliceCount"),
        ("generation-negative", set_(lambda s: s["spec"]["pool"], generation=-1),
         "spec.pool.generation"),
        ("node-and-allnodes", lambda s: s["spec"].update(allNodes=True), "spec"),
        ("node-and-selector", lambda s: s["spec"].update(nodeSelector={"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In",
                              "values": ["node-a"]}]}]}), "spec"),
        ("no-node-at-all", lambda s: s["spec"].pop("nodeName"), "spec"),
        ("device-nodename", lambda s: dev0(s).update(nodeName="node-a"), "spec.devices[0]"),
        ("owner-missing", lambda s: s["metadata"].pop("ownerReferences"),
         "metadata.ownerReferences"),
        ("owner-wrong-uid", lambda s: s["metadata"]["ownerReferences"][0].update(
            uid="00000000-0000-0000-0000-000000000000"), "metadata.ownerReferences"),
        ("owner-pod", lambda s: s["metadata"]["ownerReferences"][0].update(kind="Pod"),
         "metadata.ownerReferences"),
        ("owner-other-node", lambda s: s["metadata"]["ownerReferences"][0].update(
            name="node-b"), "metadata.ownerReferences"),
        ("owner-no-uid", lambda s: s["metadata"]["ownerReferences"][0].pop("uid"),
         "metadata.ownerReferences[0].uid"),
        ("namespaced", lambda s: s["metadata"].update(namespace="default"),
         "metadata.namespace"),
        ("bad-name", lambda s: s["metadata"].update(generateName="Node_A-"), "metadata.name"),
    ]


@pytest.mark.parametrize("what,mutate,field", _mutations(), ids=[m[0] for m in _mutations()])
def test_invalid_slice_refused_with_field(api, client, what, mutate, field):
    s = good_slice(api)
    mutate(s)
    st, obj = client.request("POST", F.SLICES, s)
    assert st == 422, (what, obj)
    assert obj["kind"] == "Status" and obj["apiVersion"] == "v1"
    assert obj["status"] == "Failure" and obj["reason"] == "Invalid" and obj["code"] == 422
    assert obj["message"].startswith('ResourceSlice.resource.k8s.io "')
    assert field + ":" in obj["message"], obj["message"]
    assert field in [c["field"] for c in obj["details"]["causes"]], obj["details"]
    assert api.slices() == []


@pytest.mark.parametrize("mutate,where", [
    (lambda s: s["spec"]["devices"][0]["attributes"].update(numaNode={"int": "0"}),
     "DeviceAttribute.spec.devices.attributes.int of type int64"),
    (lambda s: s["spec"]["devices"][0]["attributes"].update(rdma={"bool": "true"}),
     "DeviceAttribute.spec.devices.attributes.bool of type bool"),
    (lambda s: s["spec"]["devices"][0]["attributes"].update(ibdev={"string": 5}),
     "DeviceAttribute.spec.devices.attributes.string of type string"),
    (lambda s: s["spec"]["pool"].update(generation="1"),
     "ResourcePool.spec.pool.generation of type int64"),
    (lambda s: s["spec"].update(devices={}), "ResourceSliceSpec.spec.devices of type"),
])
def test_wrong_json_types_are_decode_errors(api, client, mutate, where):
    """The real apiserver fails to decode these (400), before any validation (422)."""
    s = good_slice(api)
    mutate(s)
    st, obj = client.request("POST", F.SLICES, s)
    assert st == 400 and obj["reason"] == "BadRequest", obj
    assert obj["message"].startswith('ResourceSlice in version "v1" cannot be handled as a '
                                     'ResourceSlice: json: cannot unmarshal ')
    assert where in obj["message"]
    assert api.slices() == []


def test_limits_exactly_at_the_edge_are_accepted(api, client):
    s = good_slice(api)
    s["spec"]["devices"] = [{"name": "d%d" % i} for i in range(128)]
    d0 = s["spec"]["devices"][0]
    d0["attributes"] = {"a%d" % i: {"int": i} for i in range(31)}
    d0["attributes"]["s"] = {"string": "x" * 64}
    d0["attributes"]["a" * 32] = d0["attributes"].pop("a0")
    d0["attributes"]["d" * 63 + "/x"] = d0["attributes"].pop("a1")
    s["spec"]["devices"][1]["name"] = "a" * 63
    st, obj = client.request("POST", F.SLICES, s)
    assert st == 201, obj["message"]


def test_generate_name_exists_and_required(api, client):
    names = {client.request("POST", F.SLICES, good_slice(api))[1]["metadata"]["name"]
             for _ in range(5)}
    assert len(names) == 5
    st, obj = client.request("POST", F.SLICES, good_slice(api, name=sorted(names)[0]))
    assert st == 409 and obj["reason"] == "AlreadyExists" and "already exists" in obj["message"]
    s = good_slice(api)
    del s["metadata"]["generateName"]
    st, obj = client.request("POST", F.SLICES, s)
    assert st == 422 and "metadata.name: Required value" in obj["message"]
    # a long generateName is cut to 58 characters before the 5 random ones
    s = good_slice(api)
    s["metadata"]["generateName"] = "n" * 70
    st, obj = client.request("POST", F.SLICES, s)
    assert st == 201 and len(obj["metadata"]["name"]) == 63


def test_update_conflict_immutable_and_missing(api, client):
    st, obj = client.request("POST", F.SLICES, good_slice(api))
    name, rv = obj["metadata"]["name"], obj["metadata"]["resourceVersion"]
    obj["spec"]["pool"]["generation"] = 2
    st, upd = client.request("PUT", F.SLICES + "/" + name, obj)
    assert st == 200 and upd["metadata"]["resourceVersion"] != rv
    assert upd["metadata"]["generation"] == 2 and upd["metadata"]["uid"] == obj["metadata"]["uid"]
    # the stale resourceVersion: 409 Conflict, as client-go's retry.RetryOnConflict expects
    st, c = client.request("PUT", F.SLICES + "/" + name, obj)
    assert st == 409 and c["reason"] == "Conflict" and c["code"] == 409
    assert c["message"] == ('Operation cannot be fulfilled on resourceslices.resource.k8s.io '
                            '"%s": the object has been modified; please apply your changes to '
                            'the latest version and try again' % name)
    assert c["details"] == {"name": name, "group": "resource.k8s.io", "kind": "resourceslices"}
    upd["spec"]["driver"] = "other.example.com"
    st, c = client.request("PUT", F.SLICES + "/" + name, upd)
    assert st == 422 and "spec.driver: Invalid value" in c["message"] and "immutable" in c[
        "message"]
    st, c = client.request("PUT", F.SLICES + "/nope", dict(upd, metadata=dict(
        upd["metadata"], name="nope")))
    assert st == 404 and c["reason"] == "NotFound"
    st, c = client.request("PUT", F.SLICES + "/" + name, dict(upd, metadata=dict(
        upd["metadata"], name="other")))
    assert st == 400 and c["reason"] == "BadRequest"
    # invalid content on update is refused too
    upd["spec"]["driver"] = DRV
    upd["spec"]["devices"][0]["name"] = "mlx5_0"
    st, c = client.request("PUT", F.SLICES + "/" + name, upd)
    assert st == 422 and "spec.devices[0].name" in c["message"]


def test_delete_single_and_preconditions(api, client):
    _, obj = client.request("POST", F.SLICES, good_slice(api))
    name = obj["metadata"]["name"]
    st, c = client.request("DELETE", F.SLICES + "/" + name, {
        "kind": "DeleteOptions", "apiVersion": "v1",
        "preconditions": {"uid": obj["metadata"]["uid"], "resourceVersion": "1"}})
    assert st == 409 and "Precondition failed" in c["message"]
    st, c = client.request("DELETE", F.SLICES + "/" + name, {
        "preconditions": {"uid": obj["metadata"]["uid"],
                          "resourceVersion": obj["metadata"]["resourceVersion"]}})
    assert st == 200 and c["status"] == "Success" and c["details"]["name"] == name
    st, c = client.request("DELETE", F.SLICES + "/" + name)
    assert st == 404 and c == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'resourceslices.resource.k8s.io "%s" not found' % name,
        "reason": "NotFound", "code": 404,
        "details": {"name": name, "group": "resource.k8s.io", "kind": "resourceslices"}}


def test_delete_collection_by_field_selector(api, client):
    for node, drv in (("node-a", DRV), ("node-a", "gpu.example.com"), ("node-b", DRV)):
        assert client.request("POST", F.SLICES, good_slice(api, node=node, driver=drv))[0] == 201
    # kubelet's wipe of one driver: spec.driver=...,spec.nodeName=... (URL-encoded)
    st, lst = client.request("DELETE", F.SLICES + "?" + F.selector(
        **{"spec.nodeName": "node-a", "spec.driver": DRV}))
    assert st == 200 and lst["kind"] == "ResourceSliceList" and len(lst["items"]) == 1
    assert sorted((s["spec"]["nodeName"], s["spec"]["driver"]) for s in api.slices()) == [
        ("node-a", "gpu.example.com"), ("node-b", DRV)]
    # kubelet's wipe at start: every driver of the node
    st, lst = client.request("DELETE", F.SLICES + "?fieldSelector=spec.nodeName%3Dnode-a")
    assert st == 200 and len(lst["items"]) == 1
    assert [s["spec"]["nodeName"] for s in api.slices()] == ["node-b"]
    st, c = client.request("DELETE", F.SLICES + "?fieldSelector=spec.pool.name%3Dx")
    assert st == 400 and c["reason"] == "BadRequest" and "not supported" in c["message"]
    st, lst = client.request("GET", F.SLICES + "?fieldSelector=spec.nodeName%21%3Dnode-b")
    assert st == 200 and lst["items"] == []


def test_nodes_claims_watch_and_misc(api, client):
    st, n = client.request("GET", "/api/v1/nodes/node-a")
    assert st == 200 and n["metadata"]["uid"] == api.node_uid("node-a")
    st, c = client.request("GET", "/api/v1/nodes/nope")
    assert st == 404 and c["message"] == 'nodes "nope" not found'
    claim = api.put_claim(dra_env.make_claim("c1", "ns1", [("nic", "node-a", "pci-0000-18-00-0")]))
    st, got = client.request("GET", F.RV1 + "/namespaces/ns1/resourceclaims/c1")
    assert st == 200 and got["metadata"]["uid"] == claim["metadata"]["uid"]
    assert got["status"]["allocation"]["devices"]["results"] == [
        {"request": "nic", "driver": DRV, "pool": "node-a", "device": "pci-0000-18-00-0"}]
    assert got["status"]["reservedFor"][0]["resource"] == "pods"
    api.delete_claim("ns1", "c1")
    st, c = client.request("GET", F.RV1 + "/namespaces/ns1/resourceclaims/c1")
    assert st == 404 and c["message"] == 'resourceclaims.resource.k8s.io "c1" not found'
    st, c = client.request("GET", F.SLICES + "?watch=1&resourceVersion=1")
    assert st == 410 and c["reason"] == "Expired"
    # a watch from now: a stream that ends after timeoutSeconds, empty here (test_dra_watch.py)
    st, c = client.request("GET", F.SLICES + "?watch=true&resourceVersion=%d&timeoutSeconds=1"
                           % api.rv)
    assert st == 200 and c is None
    assert client.last_headers.get("Transfer-Encoding") == "chunked"
    st, c = client.request("POST", F.SLICES, b"x: y", content_type="text/plain")
    assert st == 415 and c["reason"] == "UnsupportedMediaType"
    st, c = client.request("POST", F.SLICES, b"{not json")
    assert st == 400
    st, c = client.request("GET", "/apis/resource.k8s.io/v1beta1/resourceslices")
    assert st == 404
    st, c = client.request("POST", F.SLICES, b"{" + b" " * (3 * 1024 * 1024) + b"}")
    assert st == 413


def test_auth_and_token_rotation(api):
    base = F.Client(api.base_url, api.ca_path, timeout=5)
    st, c = base.request("GET", "/api/v1/nodes/node-a")
    assert st == 401 and c == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Failure", "message": "Unauthorized",
                               "reason": "Unauthorized", "code": 401}
    base.token = "wrong"
    assert base.request("GET", "/api/v1/nodes/node-a")[0] == 401
    tf = pathlib.Path(api.token_file)
    assert tf.is_symlink() and os.readlink(tf) == "..data/token"
    old_tok, m0 = tf.read_text(), os.stat(tf).st_mtime_ns
    old = F.Client(api.base_url, api.ca_path, token=old_tok, timeout=5)
    assert old.request("GET", "/api/v1/nodes/node-a")[0] == 200
    time.sleep(0.01)
    o, new = api.rotate_token(grace=0.6)
    assert o == old_tok and tf.read_text() == new != old_tok
    assert os.stat(tf).st_mtime_ns != m0  # what a driver watching the mtime sees
    fresh = F.Client(api.base_url, api.ca_path, token_file=tf, timeout=5)
    assert fresh.request("GET", "/api/v1/nodes/node-a")[0] == 200
    assert old.request("GET", "/api/v1/nodes/node-a")[0] == 200   # within the grace period
    time.sleep(0.7)
    assert old.request("GET", "/api/v1/nodes/node-a")[0] == 401   # expired
    assert fresh.request("GET", "/api/v1/nodes/node-a")[0] == 200
    api.revoke_token(new)
    assert fresh.request("GET", "/api/v1/nodes/node-a")[0] == 401
    assert [e["status"] for e in api.requests(path="^/api/v1/nodes/")][-1] == 401
    for c in (base, old, fresh):
        c.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_tls_names_versions_and_keepalive(api, client):
    ctx = ssl.create_default_context(cafile=api.ca_path)
    for name in ("kubernetes.default.svc", "kubernetes.default", "127.0.0.1"):
        with socket.create_connection(("127.0.0.1", api.port), timeout=5) as s:
            with ctx.wrap_socket(s, server_hostname=name) as t:
                assert t.version() in ("TLSv1.2", "TLSv1.3")
    with socket.create_connection(("127.0.0.1", api.port), timeout=5) as s:
        with pytest.raises(ssl.SSLCertVerificationError):
            ctx.wrap_socket(s, server_hostname="example.com")
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.check_hostname = False
    old.verify_mode = ssl.CERT_NONE
    try:
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        old.set_ciphers("ALL:@SECLEVEL=0")
    except (ValueError, ssl.SSLError):
        pytest.skip("this OpenSSL cannot even offer TLS 1.1")
    with socket.create_connection(("127.0.0.1", api.port), timeout=5) as s:
        with pytest.raises((ssl.SSLError, OSError)):
            old.wrap_socket(s)
    # HTTP/1.1 keep-alive: ten requests, one connection
    n0 = api.accepted
    for _ in range(10):
        assert client.request("GET", F.SLICES)[0] == 200
    assert api.accepted - n0 == 1
    assert api.requests("GET", "^/apis/resource.k8s.io/v1/resourceslices$")[-1]["token"] == \
        api.token


def test_outages_latency_and_faults(api, client):
    for code, reason in ((503, "ServiceUnavailable"), (500, "InternalError"),
                         (429, "TooManyRequests")):
        api.outage(code)
        st, c = client.request("GET", F.SLICES)
        assert st == code and c["reason"] == reason and c["kind"] == "Status"
        if code in (503, 429):
            assert client.last_headers["Retry-After"] == "1"
    api.outage("hang")
    c2 = F.Client(api.base_url, api.ca_path, token_file=api.token_file, timeout=0.5)
    t0 = time.monotonic()
    with pytest.raises((socket.timeout, TimeoutError)):
        c2.request("GET", F.SLICES)
    assert 0.4 < time.monotonic() - t0 < 3
    c2.close()
    api.outage(None)
    assert client.request("GET", F.SLICES)[0] == 200
    api.outage("stall")
    with socket.create_connection(("127.0.0.1", api.port), timeout=2) as s:
        ctx = ssl.create_default_context(cafile=api.ca_path)
        s.settimeout(0.5)
        with pytest.raises((socket.timeout, TimeoutError)):
            ctx.wrap_socket(s, server_hostname="kubernetes.default.svc")
    api.outage(None)
    assert client.request("GET", F.SLICES)[0] == 200
    api.outage("refuse")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", api.port), timeout=2)
    client.close()
    with pytest.raises(ConnectionRefusedError):
        client.request("GET", F.SLICES)
    api.outage(None)
    assert client.request("GET", F.SLICES)[0] == 200  # same port again
    api.outage("reset")
    client.close()
    with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
        client.request("GET", F.SLICES)
    api.outage(None)
    client.close()
    api.latency = 0.3
    t0 = time.monotonic()
    assert client.request("GET", F.SLICES)[0] == 200
    assert time.monotonic() - t0 >= 0.3
    api.latency = 0
    api.inject(409, method="PUT", count=1)
    _, obj = client.request("POST", F.SLICES, good_slice(api))
    st, _ = client.request("PUT", F.SLICES + "/" + obj["metadata"]["name"], obj)
    assert st == 409
    st, _ = client.request("PUT", F.SLICES + "/" + obj["metadata"]["name"], obj)
    assert st == 200
    assert [e["status"] for e in api.requests("PUT")] == [409, 200]


# -- a tiny DRA plugin (not rdma-dp) ---------------------------------------------------------------
class TinyPlugin:
    """A DRA plugin in Python: the registration socket (GetInfo, NotifyRegistrationStatus) and a
    DRA endpoint serving v1 and v1beta1, answering one device per claim unless told to
    misbehave (skip, extra, error)."""

    def __init__(self, root, driver=DRV, versions=("v1.DRAPlugin", "v1beta1.DRAPlugin"),
                 ptype="DRAPlugin"):
        self.pb = dra_kubelet.dra_protos()
        _, self.rpb = kl.protos()
        self.root = pathlib.Path(root)
        self.driver, self.versions, self.ptype = driver, list(versions), ptype
        self.reg_sock = self.root / "plugins_registry" / (driver + "-reg.sock")
        self.dra_sock = self.root / "plugins" / driver / "dra.sock"
        self.dra_sock.parent.mkdir(parents=True, exist_ok=True)
        self.calls = []       # (path, [uids])
        self.status = []      # RegistrationStatus received
        self.misbehave = None
        self.reg = self.dra = None

    def _reg_server(self):
        return kl.serve_unix(self.reg_sock, kl.plugin_registration(
            lambda r, c: self.rpb.PluginInfo(type=self.ptype, name=self.driver,
                                             endpoint=str(self.dra_sock),
                                             supported_versions=self.versions),
            self._notify))

    def _notify(self, req, ctx):
        self.status.append(req)
        return self.rpb.RegistrationStatusResponse()

    def _prepare(self, path):
        def fn(req, ctx):
            pb = self.pb
            self.calls.append((path, [c.uid for c in req.claims]))
            out = pb.NodePrepareResourcesResponse()
            for i, c in enumerate(req.claims):
                if self.misbehave == "skip" and i == 0:
                    continue
                r = out.claims[c.uid]
                if self.misbehave == "error" and i == 0:
                    r.error = "device gone"
                    continue
                r.devices.add(request_names=["nic"], pool_name="node-a",
                              device_name="pci-0000-18-00-0",
                              cdi_device_ids=["rdma-dp.io/claim=%s-pci-0000-18-00-0" % c.uid])
            if self.misbehave == "extra":
                out.claims["not-asked"].error = ""
            return out
        return fn

    def _unprepare(self, path):
        def fn(req, ctx):
            self.calls.append((path, [c.uid for c in req.claims]))
            out = self.pb.NodeUnprepareResourcesResponse()
            for c in req.claims:
                out.claims[c.uid].error = ""
            return out
        return fn

    def start_dra(self):
        pb = self.pb
        hs = []
        for pkg in ("k8s.io.kubelet.pkg.apis.dra.v1", "k8s.io.kubelet.pkg.apis.dra.v1beta1"):
            svc = pkg + ".DRAPlugin"
            hs.append(kl.grpc_service(svc, {
                "NodePrepareResources": (self._prepare("/%s/NodePrepareResources" % svc),
                                         pb.NodePrepareResourcesRequest,
                                         pb.NodePrepareResourcesResponse),
                "NodeUnprepareResources": (self._unprepare("/%s/NodeUnprepareResources" % svc),
                                           pb.NodeUnprepareResourcesRequest,
                                           pb.NodeUnprepareResourcesResponse)}))
        self.dra = kl.serve_unix(self.dra_sock, tuple(hs))
        return self

    def start(self):
        self.start_dra()
        self.reg = self._reg_server()
        return self

    def stop_dra(self):
        if self.dra is not None:
            self.dra.stop(None).wait(5)
            self.dra = None

    def stop(self, unlink=True):
        self.stop_dra()
        if self.reg is not None:
            self.reg.stop(None).wait(5)
            self.reg = None
        if unlink:
            for p in (self.reg_sock, self.dra_sock):
                if os.path.lexists(p):
                    os.unlink(p)


@pytest.fixture
def kdir():
    d = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix="rdpk"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kube(kdir, api):
    k = dra_kubelet.DRAKubelet(kdir, node="node-a", api=api, wipe_delay=1.0)
    yield k
    k.close()


def claims3():
    return [("ns1", "c%d" % i, "uid-%d" % i) for i in range(3)]


@pytest.mark.parametrize("order,chosen", [
    (("v1.DRAPlugin", "v1beta1.DRAPlugin"), "v1.DRAPlugin"),
    (("v1beta1.DRAPlugin", "v1.DRAPlugin"), "v1beta1.DRAPlugin"),
    (("v1alpha4.Node", "v1beta1.DRAPlugin"), "v1beta1.DRAPlugin"),
])
def test_registration_picks_first_supported_in_plugin_order(kdir, kube, order, chosen):
    p = TinyPlugin(kdir, versions=order).start()
    try:
        kube.start()
        reg = kube.wait_registered(DRV)
        assert reg.service == chosen and reg.endpoint == str(p.dra_sock)
        assert kube.wait(lambda: p.status) and p.status[-1].plugin_registered
        resp = kube.prepare(claims3())  # the chosen service's path
        assert sorted(resp.claims) == ["uid-0", "uid-1", "uid-2"]
        pkg = chosen.split(".")[0]
        assert p.calls[-1] == ("/k8s.io.kubelet.pkg.apis.dra.%s.DRAPlugin/NodePrepareResources"
                               % pkg, ["uid-0", "uid-1", "uid-2"])
        assert dra_kubelet.cdi_ids(resp, "uid-1") == [
            "rdma-dp.io/claim=uid-1-pci-0000-18-00-0"]
        for ver in ("v1", "v1beta1"):  # both paths, explicitly
            kube.prepare(claims3()[:1], version=ver)
            assert p.calls[-1][0] == "/k8s.io.kubelet.pkg.apis.dra.%s.DRAPlugin/" \
                "NodePrepareResources" % ver
            kube.unprepare(claims3()[:1], version=ver)
            assert p.calls[-1] == ("/k8s.io.kubelet.pkg.apis.dra.%s.DRAPlugin/"
                                   "NodeUnprepareResources" % ver, ["uid-0"])
        claim = dra_env.make_claim("c9", "ns9", [("nic", "node-a", "pci-0000-18-00-0")])
        assert sorted(kube.prepare([claim]).claims) == [claim["metadata"]["uid"]]
    finally:
        p.stop()


def test_prepare_pod_reads_claims_as_kubelet_does(kdir, kube, api):
    p = TinyPlugin(kdir).start()
    try:
        kube.start()
        kube.wait_registered(DRV)
        pod = ("pod-1", "pod-uid-1")
        nic = api.put_claim(dra_env.make_claim("nic", "ns1", [("nic", "node-a", "d0")], pod=pod))
        gpu = api.put_claim(dra_env.make_claim("gpu", "ns1", [("gpu", "node-a", "g0",
                                                                 "gpu.example.com")], pod=pod))
        other = api.put_claim(dra_env.make_claim("other", "ns1", [("nic", "node-a", "d1")]))
        resp = kube.prepare_pod("pod-uid-1", [("ns1", "nic"), ("ns1", "gpu")])
        assert sorted(resp.claims) == [nic["metadata"]["uid"]]   # only this driver's claims
        assert p.calls[-1][1] == [nic["metadata"]["uid"]]
        assert kube.prepare_pod("pod-uid-1", [("ns1", "gpu")]) is None
        with pytest.raises(dra_kubelet.DRAKubeletError, match="not allowed to use"):
            kube.prepare_pod("pod-uid-1", [("ns1", "other")])
        with pytest.raises(dra_kubelet.DRAKubeletError, match="failed to fetch"):
            kube.prepare_pod("pod-uid-1", [("ns1", "missing")])
        assert api.requests("GET", "resourceclaims/nic$")[-1]["token"] == kube.token
        del gpu, other
    finally:
        p.stop()


def test_semver_versions_refused_with_kubelet_message(kdir, kube):
    p = TinyPlugin(kdir, versions=("1.0.0",)).start()
    try:
        kube.start()
        kube.wait(lambda: p.status, what="a NotifyRegistrationStatus")
        assert not p.status[0].plugin_registered
        want = ('RegisterPlugin error -- plugin validation failed with err: invalid supported '
                'gRPC versions of DRA driver plugin %s at endpoint %s: none of services '
                'supported by the plugin (["1.0.0"]) are supported by the kubelet '
                '(["v1.DRAPlugin" "v1beta1.DRAPlugin"])' % (DRV, p.dra_sock))
        assert p.status[0].error == want and kube.errors[0] == want
        assert kube.plugins == {}
        with pytest.raises(dra_kubelet.DRAKubeletError, match="is not registered"):
            kube.prepare(claims3())
        # the reconciler retries (0.5 s, then 1 s): the same refusal again
        kube.wait(lambda: len(p.status) >= 2, timeout=5, what="a retry")
    finally:
        p.stop()


def test_wrong_type_and_empty_versions_refused(kdir, kube):
    p = TinyPlugin(kdir, ptype="DevicePlugin").start()
    try:
        kube.start()
        kube.wait(lambda: p.status)
        assert p.status[0].error == ("RegisterPlugin error -- no handler registered for plugin "
                                     "type: DevicePlugin at socket %s" % p.reg_sock)
        p.ptype, p.versions = "DRAPlugin", []
        kube.wait(lambda: len(p.status) >= 2, timeout=5)
        assert p.status[-1].error.endswith(
            "empty list of supported gRPC services (aka supported versions)")
    finally:
        p.stop()


@pytest.mark.parametrize("mode,msg", [
    ("skip", "NodePrepareResources skipped 1 ResourceClaims"),
    ("extra", "NodePrepareResources returned result for unknown claim UID not-asked"),
    ("error", "NodePrepareResources failed for ResourceClaim c0: device gone"),
])
def test_prepare_reply_checked_as_kubelet_does(kdir, kube, mode, msg):
    p = TinyPlugin(kdir).start()
    try:
        kube.start()
        kube.wait_registered(DRV)
        p.misbehave = mode
        with pytest.raises(dra_kubelet.DRAKubeletError) as ei:
            kube.prepare(claims3())
        assert str(ei.value) == msg and ei.value.response is not None
        assert kube.prepare(claims3(), check=False) is not None
    finally:
        p.stop()


def _seed(api, pairs):
    for node, drv in pairs:
        s = good_slice(api, node=node, driver=drv)
        s["metadata"]["name"] = s["metadata"].pop("generateName") + "x"
        api.add_slice(s)


def test_wipe_at_start_and_restart(kdir, kube, api):
    _seed(api, [("node-a", DRV), ("node-a", "gpu.example.com"), ("node-b", DRV)])
    kube.start()
    assert [s["spec"]["nodeName"] for s in api.slices()] == ["node-b"]
    e = api.requests("DELETE", "resourceslices$")[-1]
    assert e["raw_query"] == "fieldSelector=spec.nodeName%3Dnode-a" and e["status"] == 200
    assert e["token"] == kube.token != api.token
    p = TinyPlugin(kdir).start()
    try:
        kube.wait_registered(DRV)
        _seed(api, [("node-a", DRV)])
        n = len(kube.registrations)
        kube.restart()
        assert [s["spec"]["nodeName"] for s in api.slices()] == ["node-b"]
        kube.wait_registered(DRV, after=n)   # the socket still there registers again
        assert len(kube.registrations) == n + 1
        assert kube.prepare(claims3()[:1]) is not None
    finally:
        p.stop()


def test_wipe_after_driver_unreachable(kdir, kube, api):
    p = TinyPlugin(kdir).start()
    try:
        kube.start()
        kube.wait_registered(DRV)
        _seed(api, [("node-a", DRV), ("node-a", "gpu.example.com"), ("node-b", DRV)])
        n = len(kube.wipes)
        t0 = time.monotonic()
        p.stop_dra()    # the driver dies; its registration socket stays
        kube.wait(lambda: not kube.usable(DRV), timeout=5, what="disconnect")
        w = kube.wait_wipe("spec.driver=%s" % DRV, after=n, timeout=10)
        assert w[1] == "spec.driver=%s,spec.nodeName=node-a" % DRV and w[2] == 200
        assert w[0] - t0 >= 1.0   # not before wipe_delay
        assert sorted((s["spec"]["nodeName"], s["spec"]["driver"]) for s in api.slices()) == [
            ("node-a", "gpu.example.com"), ("node-b", DRV)]
    finally:
        p.stop()


def test_driver_restarted_on_same_endpoint_is_reconnected(kdir, api):
    k = dra_kubelet.DRAKubelet(kdir, node="node-a", api=api, wipe_delay=3.0)
    p = TinyPlugin(kdir).start()
    try:
        k.start()
        k.wait_registered(DRV)
        n, nreg = len(k.wipes), len(k.registrations)
        p.stop_dra()                  # the DRA endpoint goes away, the registration stays
        k.wait(lambda: not k.usable(DRV), timeout=5, what="disconnect")
        assert k.pending_wipe(DRV) is not None
        p.start_dra()                 # and comes back on the same path
        k.wait(lambda: k.usable(DRV), timeout=5, what="reconnect")
        assert len(k.registrations) == nreg and k.pending_wipe(DRV) is None
        assert k.prepare(claims3()[:1]) is not None
        assert k.wipes[n:] == []
    finally:
        p.stop()
        k.close()


def test_failed_wipe_is_retried(kdir, kube, api):
    p = TinyPlugin(kdir).start()
    try:
        kube.start()
        kube.wait_registered(DRV)
        n = len(kube.wipes)
        api.inject(503, method="DELETE", count=1)
        p.stop_dra()
        w = kube.wait_wipe("spec.driver=", after=n, timeout=10)
        assert w[2] == 503
        w = kube.wait_wipe("spec.driver=", after=n + 1, timeout=10)
        assert w[2] == 200
    finally:
        p.stop()


def test_wipe_cancelled_when_driver_comes_back(kdir, api):
    k = dra_kubelet.DRAKubelet(kdir, node="node-a", api=api, wipe_delay=1.5)
    p = TinyPlugin(kdir).start()
    try:
        k.start()
        k.wait_registered(DRV)
        n, nreg = len(k.wipes), len(k.registrations)
        p.stop()                      # the driver goes away, sockets removed
        k.wait(lambda: DRV not in k.plugins, timeout=5, what="deregistration")
        assert k.pending_wipe(DRV) is not None
        time.sleep(0.3)
        p = TinyPlugin(kdir).start()  # and comes back before the delay
        k.wait_registered(DRV, after=nreg)
        time.sleep(2.0)
        assert k.wipes[n:] == [] and k.pending_wipe(DRV) is None
    finally:
        p.stop()
        k.close()


def test_dra_env_builds_the_command_line_and_claims(tmp_path):
    env = dra_env.DraEnv("/bin/true", tmp_path, start_kubelet=False)
    try:
        a = env.args("nodeX")
        assert a[:2] == ["/bin/true", "dra"]
        flags = dict(zip(a[2::2], a[3::2]))
        assert flags["--node-name"] == "node-a"
        assert flags["--api-server"] == env.api.base_url
        assert pathlib.Path(flags["--token-file"]).read_text() == env.api.token
        assert flags["--ca-file"] == env.api.ca_path
        assert flags["--sysfs-root"] == str(tmp_path / "nodeX" / "sys")
        c = env.claim("c1", [("nic", "node-a", "pci-0000-18-00-0"),
                             ("gpu", "node-a", "gpu-0", "gpu.example.com")], ns="ns1")
        got = env.api.get_claim("ns1", "c1")
        assert got["metadata"]["uid"] == c["metadata"]["uid"] and got["metadata"][
            "resourceVersion"]
        assert [r["driver"] for r in got["status"]["allocation"]["devices"]["results"]] == [
            DRV, "gpu.example.com"]
        assert [r["name"] for r in got["spec"]["devices"]["requests"]] == ["nic", "gpu"]
        d = env.driver("nodeX", verbose=False)
        assert d.proc.wait(5) == 0
    finally:
        env.close()
