# SPDX-License-Identifier: MIT
"""deploy/grafana/rdma-dp-dashboard.json is proven without Grafana (not packaged here):

  - its structure is what Grafana (schemaVersion 39) loads: unique panel ids, a gridPos on every
    panel inside the 24-column grid and without overlaps, a `datasource` variable of type
    prometheus that every panel and target refers to, a `node` variable, every query panel
    with targets that have a refId and an expr;
  - EVERY PromQL expression in it (panels and template variables) is evaluated by a real
    Prometheus server (tests/integration/prom.py) scraping `rdma-dp serve --metrics-address`
    on a copy of the dgx-h100 fixture whose counters a thread advances between scrapes (data,
    packets, congestion, and the error counters too, so the error panels have series), after
    the plugin saw Allocate calls, an Allocate error, a rejected and an applied config reload:
    each evaluates without error and returns at least one series with a finite value.

Grafana's variables are substituted as Grafana would for this setup (see substitute()):
$__rate_interval -> prom.RATE_WINDOW (30s: with the 1 s scrape, rate() sees ~30 samples),
$__interval -> 5s, $__range -> 5m; $node/$instance -> the scraped target "127.0.0.1:PORT" (a
single-valued variable: Grafana inserts the value as is); $device (multi, "All") -> its
allValue ".*". Any other variable fails the test, so a typo cannot hide.
"""
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys

import grpc
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402
import prom  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "deploy" / "grafana" / "rdma-dp-dashboard.json"
FIXED = {"__rate_interval": prom.RATE_WINDOW, "__interval": "5s", "__interval_ms": "5000",
         "__range": "5m", "__range_s": "300", "__range_ms": "300000"}
VAR_RE = re.compile(r"\$\{(\w+)(?::[\w]+)?\}|\$(\w+)|\[\[(\w+)\]\]")
LABEL_VALUES_RE = re.compile(r"^\s*label_values\((.*),\s*(\w+)\s*\)\s*$", re.S)
NO_QUERY_PANELS = {"row", "text", "news", "dashlist"}
# Grafana's core panel types this dashboard may use (no plugin to install).
PANEL_TYPES = {"row", "text", "timeseries", "stat", "gauge", "bargauge", "table"}


def load():
    return json.loads(DASHBOARD.read_text())


def all_panels(dash):
    """Every panel, those nested in collapsed rows included."""
    for p in dash["panels"]:
        yield p
        for q in p.get("panels", []):
            yield q


def variables(dash):
    return {v["name"]: v for v in dash["templating"]["list"]}


def substitute(expr, target, dash_vars):
    """expr with Grafana's variables replaced as described in the module docstring."""

    def rep(m):
        name = m.group(1) or m.group(2) or m.group(3)
        if name in FIXED:
            return FIXED[name]
        if name in ("node", "instance"):
            return target
        v = dash_vars.get(name)
        if v is not None and v.get("includeAll") and v.get("allValue"):
            return v["allValue"]
        raise AssertionError("unknown Grafana variable $%s in %r" % (name, expr))

    return VAR_RE.sub(rep, expr)


def expressions(dash):
    """[(where, expr)] for every target of every panel and every query variable."""
    out = []
    for p in all_panels(dash):
        for t in p.get("targets", []):
            out.append(("panel %d %r target %s" % (p["id"], p["title"], t.get("refId")),
                        t.get("expr", "")))
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            out.append(("variable $%s" % v["name"], q))
    return out


# ---- structure: no Prometheus needed ------------------------------------------------------
def test_dashboard_structure():
    dash = load()
    assert dash["title"] == "rdma-dp: RDMA fabric and device plugin"
    assert dash["uid"] and len(dash["uid"]) <= 40 and re.fullmatch(r"[\w-]+", dash["uid"])
    assert 36 <= dash["schemaVersion"] <= 41
    assert dash.get("id") is None  # importable into any Grafana
    vs = variables(dash)
    ds = vs["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    node = vs["node"]
    assert node["type"] == "query" and not node.get("multi")
    q = node["query"]["query"] if isinstance(node["query"], dict) else node["query"]
    assert LABEL_VALUES_RE.match(q) and q.rstrip().endswith("instance)"), q
    for v in vs.values():
        if v["type"] == "query":
            assert v["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, v["name"]

    ids = [p["id"] for p in all_panels(dash)]
    assert len(ids) == len(set(ids)), "duplicate panel ids: %r" % ids
    cells = {}
    for p in all_panels(dash):
        g = p["gridPos"]
        assert set(g) >= {"h", "w", "x", "y"}, p["title"]
        assert g["w"] > 0 and g["h"] > 0 and g["x"] >= 0 and g["y"] >= 0, p["title"]
        assert g["x"] + g["w"] <= 24, "panel %r is wider than the grid" % p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, "panels %r and %r overlap" % (cells[(x, y)],
                                                                          p["title"])
                cells[(x, y)] = p["title"]
        assert p.get("title"), p["id"]
        assert p["type"] in PANEL_TYPES, (p["title"], p["type"])
        if p["type"] in NO_QUERY_PANELS:
            assert not p.get("targets"), p["title"]
            continue
        assert p.get("description"), "panel %r has no description" % p["title"]
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p.get("targets"), "panel %r has no targets" % p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
            assert t.get("expr", "").strip(), "panel %r target %s has no expr" % (
                p["title"], t["refId"])
            assert "$node" in t["expr"], "panel %r target %s ignores $node" % (
                p["title"], t["refId"])
            if re.search(r"\b(rate|increase|irate)\(", t["expr"]):
                assert "[$__rate_interval]" in t["expr"], (p["title"], t["expr"])
    # what the issue asks the dashboard to show
    text = json.dumps(dash)
    for need in ["rdma_dp_port_data_transmitted_bytes_total",
                 "rdma_dp_port_data_received_bytes_total",
                 "rdma_dp_np_cnp_packets_sent_total", "rdma_dp_rp_cnp_packets_handled_total",
                 "rdma_dp_np_ecn_marked_roce_packets_received_total",
                 "rdma_dp_port_transmit_wait_total", "rdma_dp_symbol_error_total",
                 "rdma_dp_req_transport_retries_exceeded_errors_total",
                 "rdma_dp_pma_saturated", "rdma_dp_resource_units",
                 "rdma_dp_resource_healthy_units", "rdma_dp_allocate_requests_total",
                 "rdma_dp_allocate_errors_total", "rdma_dp_rescan_duration_seconds_bucket",
                 "rdma_dp_config_reloads_total", "PFC"]:
        assert need in text, need
    # every expression substitutes cleanly
    for where, e in expressions(dash):
        out = substitute(e, "127.0.0.1:9470", vs)
        assert "$" not in out, (where, out)


def test_expressions_parse_with_promtool(tmp_path):
    """Without any server: Debian's promtool parses every substituted expression (as recording
    rules), so a syntax error is caught even where the daemon cannot run."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not found: install Debian's `prometheus` package")
    dash = load()
    vs = variables(dash)
    rules = []
    for i, (where, e) in enumerate(expressions(dash)):
        if LABEL_VALUES_RE.match(e):
            e = LABEL_VALUES_RE.match(e).group(1)  # its selector must parse
        rules.append({"record": "rdma_dp:dashboard_expr_%d" % i,
                      "expr": substitute(e, "127.0.0.1:9470", vs)})
    f = tmp_path / "rules.yml"
    f.write_text(json.dumps({"groups": [{"name": "dashboard", "rules": rules}]}))
    r = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: %d rules found" % len(rules) in r.stdout + r.stderr


# ---- every expression through a real Prometheus --------------------------------------------
def _replace_file(path, text):
    tmp = str(path) + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


@pytest.fixture(scope="module")
def evaluated(rdma_dp, fixtures_dir):
    """A daemon on a dgx-h100 copy with moving counters and some plugin activity, scraped by
    Prometheus for at least 10 scrapes: (Prometheus, target)."""
    prom.find_prometheus()
    env = K.TestEnv(rdma_dp, fixtures_dir, prefix="rdpg")
    p = adv = None
    try:
        node = env.dir / "dgx-h100"
        prom._fixtures_mod().copy_node(fixtures_dir / "dgx-h100", node)
        counters = prom.Counters(node)
        d, addr = prom.start_metrics_daemon(env, node)
        p = prom.Prometheus(target=addr)
        p.wait_target_up()
        adv = prom.Advancer(counters).start()
        # the plugin: Allocate calls, one refused, a rejected config and an applied one
        client = env.kubelet.current["rdma/compute"].client
        for i in range(5):
            client.allocate([str(i)])
        with pytest.raises(grpc.RpcError):
            client.allocate(["no-such-unit"])
        cfg = env.dir / "config.json"
        good = cfg.read_text()
        mark = d.mark()
        _replace_file(cfg, '{"configList": [')
        d.wait_log("event=config-rejected", start=mark, timeout=30)
        mark = d.mark()
        _replace_file(cfg, good)
        d.wait_log("event=config-reloaded", start=mark, timeout=30)
        p.wait_scrapes(p.scrapes() + 10)
        adv.stop()
        adv = None
        yield p, addr
    finally:
        if adv is not None:
            adv.stop()
        if p is not None:
            p.stop()
        env.close()


def _finite(v):
    return v is not None and not math.isnan(v) and not math.isinf(v)


@pytest.mark.parametrize("where,expr", expressions(load()), ids=lambda x: x if len(x) < 60
                         else None)
def test_expression_returns_series(evaluated, where, expr):
    p, target = evaluated
    vs = variables(load())
    m = LABEL_VALUES_RE.match(expr)
    if m:  # a Grafana template query: label_values(<selector>, <label>)
        sel, label = m.group(1), m.group(2)
        q = "count by (%s) (%s)" % (label, substitute(sel, target, vs))
        res = p.query(q)
        values = sorted(s.get(label) for s, _ in res if s.get(label))
        assert values, "%s: %s gives no %s values" % (where, q, label)
        if label == "instance":
            assert values == [target], values
        return
    q = substitute(expr, target, vs)
    try:
        res = p.query(q)
    except prom.PromError as e:
        pytest.fail("%s: %s: Prometheus refused it: %s" % (where, q, e))
    assert res, "%s: %s returned no series" % (where, q)
    assert any(_finite(v) for _, v in res), "%s: %s: no finite value: %r" % (where, q, res)
    # and as Grafana draws a time series panel: a range query over the last minute
    rng = p.query_range(q, seconds=60, step=2)
    assert rng, "%s: %s: the range query returned no series" % (where, q)


def test_throughput_panels_move(evaluated):
    """The throughput and error panels show the traffic the advancer made, not just zeros."""
    p, target = evaluated
    dash = load()
    vs = variables(dash)
    moving = {"Transmit throughput per port", "Receive throughput per port", "Packets per port",
              "RoCE congestion control: CNPs and ECN marks", "Transport retries and timeouts",
              "Link errors", "Transmit wait (credit stalls)", "Allocate calls and errors",
              "Rescans by cause"}
    seen = set()
    for panel in all_panels(dash):
        if panel["title"] not in moving:
            continue
        seen.add(panel["title"])
        for t in panel["targets"]:
            q = substitute(t["expr"], target, vs)
            res = p.query_range(q, seconds=40, step=2)
            assert any(v > 0 for _, pts in res for _, v in pts), \
                "%r target %s never above 0: %s" % (panel["title"], t["refId"], q)
    assert seen == moving


def test_screenshot_command_makes_the_pictures(rdma_dp, fixtures_dir, tmp_path):
    """The command docs/metrics.md gives for its pictures works: Debian's Prometheus scrapes
    the daemon, Debian's headless Chromium photographs the graphs of Prometheus' web UI, and
    each PNG holds graphs (a blank page compresses to a few KiB)."""
    if os.environ.get("RDP_SANITIZED") == "1":
        pytest.skip("the screenshots do not depend on the build: the release pass takes them")
    for exe, pkg in (("/usr/bin/prometheus", "prometheus"), ("/usr/bin/chromium", "chromium")):
        if not os.access(exe, os.X_OK):
            pytest.skip("%s not found (Debian package %s)" % (exe, pkg))
    env = dict(os.environ, RDMA_DP=str(rdma_dp), RDP_FIXTURES=str(fixtures_dir), SECONDS_RUN="20")
    p = subprocess.run(["sh", str(REPO / "scripts" / "dashboard-screenshot.sh"), "--out",
                        str(tmp_path)], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    names = sorted(f.name for f in tmp_path.glob("*.png"))
    assert names == sorted(f.name for f in (REPO / "docs" / "images").glob("dashboard-*.png"))
    for f in tmp_path.glob("*.png"):
        data = f.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", f
        width = int.from_bytes(data[16:20], "big")
        assert width == 1400 and len(data) > 50000, (f, width, len(data))
