# SPDX-License-Identifier: MIT
"""`rdma-dp dra` follows its ResourceSlices with a watch (issue 21, point 6), against the fake
API server's watch (fake_apiserver.py: chunked event stream, bookmarks, 410 for a history it
no longer has, the stream ended after timeoutSeconds):

- the watch is of our slices only (the LIST's field selector), from the LIST's
  resourceVersion, with bookmarks and a timeoutSeconds of 300..600;
- a slice deleted or edited by another client is repaired within 1 s, with no LIST between
  the change and the repair;
- a 410 (the history dropped) leads to one LIST, then a new watch;
- at idle the driver sends no request for a minute (the figure for the README);
- where watching fails (a server without it), the old 10 s LIST comes back."""
import http.client
import json
import os
import ssl
import sys
import time
import urllib.parse

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dra_env  # noqa: E402
import fake_apiserver as F  # noqa: E402
from dra_env import DRIVER, NODE  # noqa: E402

LIST_RE = r"^/apis/resource.k8s.io/v1/resourceslices$"


@pytest.fixture
def env(rdma_dp, fixtures_dir):
    e = dra_env.DraEnv(rdma_dp, fixtures_dir, wipe_delay=2)
    yield e
    e.close()


def start(env, fixture="dgx-h100"):
    after = len(env.kubelet.registrations)
    d = env.driver(fixture)
    env.kubelet.wait_registered(DRIVER, after=after, timeout=30)
    d.wait_log("event=slices-published", timeout=30)
    return d


def lists(api):
    return [e for e in api.requests("GET", LIST_RE) if not e.get("watch")]


def watches(api):
    return [e for e in api.requests("GET", LIST_RE) if e.get("watch")]


def wait_watch(api, n=1, timeout=10):
    api.wait(lambda: len(watches(api)) >= n and api.watches_open >= 1, timeout,
             "%d watch(es) open" % n)


def stopped_clean(d):
    assert d.stop() == 0, d.log()[-3000:]
    log = d.log()
    assert "ERROR: AddressSanitizer" not in log and "runtime error" not in log, log[-3000:]


def test_watch_request_and_repair_without_list(env):
    d = start(env)
    wait_watch(env.api)
    w = watches(env.api)[0]
    q = w["query"]
    first_list = lists(env.api)[0]
    assert q["fieldSelector"] == ["spec.nodeName=%s,spec.driver=%s" % (NODE, DRIVER)]
    assert q["watch"] == ["1"] and q["allowWatchBookmarks"] == ["true"]
    assert 300 <= int(q["timeoutSeconds"][0]) < 600
    # from a LIST's resourceVersion (a later sync that wrote nothing leaves the watch running)
    assert int(q["resourceVersion"][0]) >= 1 and w["t"] >= first_list["t"]

    # deleted by someone else: recreated within 1 s, no LIST before the POST
    n_lists, n_posts = len(lists(env.api)), len(env.api.requests("POST", LIST_RE))
    t0 = time.time()
    env.api.delete_slices(NODE, DRIVER)
    env.api.wait(lambda: len(env.api.slices(NODE, DRIVER)) == 1, 5, "the slice recreated")
    took = time.time() - t0
    assert took < 1.0, took
    post = env.api.requests("POST", LIST_RE)[n_posts]
    assert not [e for e in lists(env.api)[n_lists:] if e["t"] < post["t"]]
    d.wait_log("event=slices-published", "why=watch-deleted", timeout=5)

    # edited by someone else: put back within 1 s (one PUT over it), no LIST before it
    wait_watch(env.api, 2)
    s = env.api.slices(NODE, DRIVER)[0]
    name = s["metadata"]["name"]
    n_lists, n_puts = len(lists(env.api)), len(env.api.requests("PUT"))
    t0 = time.time()
    env.api.edit_slice(name, lambda o: o["spec"]["devices"].pop())
    env.api.wait(lambda: len(env.api.slices(NODE, DRIVER)[0]["spec"]["devices"]) ==
                 len(s["spec"]["devices"]), 5, "the slice repaired")
    took = time.time() - t0
    assert took < 1.0, took
    put = env.api.requests("PUT")[n_puts]
    assert put["path"].endswith("/" + name)
    assert not [e for e in lists(env.api)[n_lists:] if e["t"] < put["t"]]
    d.wait_log("why=watch-modified", timeout=5)
    # our own writes never come back as events to act on: a watch runs again, quietly
    wait_watch(env.api, 3)
    time.sleep(1.0)
    assert len(env.api.requests("PUT")) == n_puts + 1
    stopped_clean(d)


def test_gone_leads_to_one_relist(env):
    d = start(env)
    wait_watch(env.api)
    n_lists, n_watches = len(lists(env.api)), len(watches(env.api))
    env.api.expire_watch_history()
    d.wait_log("event=slices-watch-expired", timeout=5)
    wait_watch(env.api, n_watches + 1)
    time.sleep(1.0)
    assert len(lists(env.api)) == n_lists + 1
    assert len(watches(env.api)) == n_watches + 1
    new = watches(env.api)[-1]
    assert int(new["query"]["resourceVersion"][0]) >= env.api._hist_floor
    assert not env.api.requests("POST", LIST_RE)[1:]  # nothing rewritten
    stopped_clean(d)


def test_idle_requests_per_minute(env):
    """The README's figure: API requests of one node's driver per minute at idle."""
    d = start(env)
    wait_watch(env.api)
    n = len(env.api.log)
    t0 = time.time()
    time.sleep(60)
    idle = env.api.log[n:]
    per_min = len(idle) * 60 / (time.time() - t0)
    print("idle API requests per node per minute: %.1f (%s)" % (
        per_min, [(e["method"], e["path"]) for e in idle]))
    assert per_min == 0, idle
    assert env.api.watches_open == 1
    stopped_clean(d)


def test_without_watch_the_old_poll_returns(env):
    """A server that refuses the watch (405, as before 1.x, or a ClusterRole without watch:
    403): the driver logs it, backs off, and lists every 10 s as before."""
    orig = env.api._watch
    env.api._watch = lambda q: (403, F.status(403, "Forbidden", "watch is forbidden"), {})
    try:
        d = start(env)
        d.wait_log("event=slices-watch-failed", timeout=10)
        d.wait_log("event=slices-watch-health", "watching=no", timeout=10)
        n = len(lists(env.api))
        time.sleep(11)
        assert len(lists(env.api)) >= n + 1
    finally:
        env.api._watch = orig
    stopped_clean(d)


def _watch_raw(api, query, read_for=5.0):
    """A raw watch against the stand-in: (status, [events], ended)."""
    ctx = ssl.create_default_context(cafile=str(api.ca_path))
    ctx.check_hostname = False
    c = http.client.HTTPSConnection("127.0.0.1", api.port, context=ctx, timeout=read_for)
    c.request("GET", F.SLICES + "?" + urllib.parse.urlencode(query),
              headers={"Authorization": "Bearer " + api.token})
    r = c.getresponse()
    if r.status != 200:
        return r.status, json.loads(r.read()), True
    assert r.getheader("Transfer-Encoding") == "chunked"
    evs, ended, buf = [], False, b""
    try:
        while True:
            b = r.read1(65536) if hasattr(r, "read1") else r.read(1)
            if not b:
                ended = True
                break
            buf += b
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                evs.append(json.loads(line))
    except (TimeoutError, OSError):
        pass
    c.close()
    return 200, evs, ended


def test_standin_watch_protocol(env):
    """The stand-in speaks the watch as kube-apiserver does."""
    api = env.api
    api.bookmark_interval = 0.3
    s = api.add_slice({"apiVersion": F.GROUP + "/v1", "kind": "ResourceSlice",
                       "metadata": {"name": "x"},
                       "spec": {"driver": DRIVER, "nodeName": NODE,
                                "pool": {"name": NODE, "generation": 1,
                                         "resourceSliceCount": 1}, "devices": []}})
    rv = int(s["metadata"]["resourceVersion"])
    # from "0": the current objects as ADDED, then bookmarks, ended after timeoutSeconds
    st, evs, ended = _watch_raw(api, {"watch": "1", "resourceVersion": "0",
                                      "allowWatchBookmarks": "true", "timeoutSeconds": "1"})
    assert st == 200 and ended
    assert evs[0]["type"] == "ADDED" and evs[0]["object"]["metadata"]["name"] == "x"
    assert {e["type"] for e in evs[1:]} == {"BOOKMARK"}
    assert int(evs[-1]["object"]["metadata"]["resourceVersion"]) >= rv
    # from an RV: only what came after it, filtered by the field selector
    api.edit_slice("x", lambda o: None)
    api.delete_slices(NODE, DRIVER)
    st, evs, ended = _watch_raw(api, {"watch": "true", "resourceVersion": str(rv),
                                      "timeoutSeconds": "1",
                                      "fieldSelector": "spec.nodeName=" + NODE})
    assert [e["type"] for e in evs] == ["MODIFIED", "DELETED"] and ended
    st, evs, _ = _watch_raw(api, {"watch": "true", "resourceVersion": str(rv),
                                  "timeoutSeconds": "1", "fieldSelector": "spec.nodeName=b"})
    assert evs == []
    # a dropped history: 410 at the start, an ERROR event on a running watch
    api.expire_watch_history()
    st, body, _ = _watch_raw(api, {"watch": "1", "resourceVersion": str(rv)})
    assert st == 410 and body["reason"] == "Expired"
    import threading
    threading.Timer(0.5, api.expire_watch_history).start()
    st, evs, ended = _watch_raw(api, {"watch": "1", "resourceVersion": str(api.rv),
                                      "timeoutSeconds": "5"})
    assert evs[-1]["type"] == "ERROR" and evs[-1]["object"]["code"] == 410 and ended
