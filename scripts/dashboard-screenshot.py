#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Pictures of the dashboard's graphs without Grafana: runs `rdma-dp serve --metrics-address
127.0.0.1:0` on a writable copy of the dgx-h100 fixture node (under the integration tests'
fake kubelet), Debian's Prometheus scraping it every second, advances the node's counters
(traffic on every port, congestion on the RoCE ports, errors on mlx5_3 and mlx5_2) and makes a
few Allocate calls for --seconds, then has Debian's headless Chromium screenshot Prometheus'
own graph page (/graph?g0.expr=...) with expressions taken from deploy/grafana's dashboard,
one PNG per group, into --out (docs/images by default).

Run through scripts/dashboard-screenshot.sh (it finds the binary and the fixtures).
"""
import argparse
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "integration"))
import kubelet as K  # noqa: E402
import prom  # noqa: E402

DASHBOARD = REPO / "deploy" / "grafana" / "rdma-dp-dashboard.json"

# PNG name -> dashboard panel titles whose first targets it stacks (g0, g1, ...), at most 4.
PAGES = {
    "dashboard-throughput": [("Transmit throughput per port", "A"),
                             ("Receive throughput per port", "A"),
                             ("Link utilisation (transmit)", "A")],
    "dashboard-congestion": [("RoCE congestion control: CNPs and ECN marks", "A"),
                             ("RoCE congestion control: CNPs and ECN marks", "B"),
                             ("RoCE congestion control: CNPs and ECN marks", "C"),
                             ("Transmit wait (credit stalls)", "A")],
    "dashboard-errors": [("Transport retries and timeouts", "A"),
                         ("Transport retries and timeouts", "D"),
                         ("Link errors", "A"),
                         ("Transport retries and timeouts", "C")],
    "dashboard-plugin": [("Units per resource", "B"),
                         ("Allocate calls and errors", "A"),
                         ("Rescans by cause", "A"),
                         ("Rescan duration", "B")],
}


def log(*a):
    print("dashboard-screenshot:", *a, file=sys.stderr, flush=True)


def dashboard_exprs():
    dash = json.loads(DASHBOARD.read_text())
    out = {}
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out[(p["title"], t["refId"])] = t["expr"]
    return out


def substitute(expr, target):
    """Grafana's variables as tests/integration/test_dashboard.py substitutes them."""
    return (expr.replace("$__rate_interval", prom.RATE_WINDOW)
            .replace('instance=~"$node"', 'instance="%s"' % target)
            .replace('device=~"$device"', 'device=~".+"'))


def graph_url(base, exprs, range_input):
    q = {}
    for i, e in enumerate(exprs):
        q["g%d.expr" % i] = e
        q["g%d.tab" % i] = "0"        # the Graph tab
        q["g%d.stacked" % i] = "0"
        q["g%d.show_exemplars" % i] = "0"
        q["g%d.range_input" % i] = range_input
    return base + "/graph?" + urllib.parse.urlencode(q)


def screenshot(chromium, url, png, width, height, budget_ms):
    prof = tempfile.mkdtemp(dir="/tmp", prefix="rdpchrome")
    try:
        args = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--hide-scrollbars", "--no-first-run",
                "--no-default-browser-check", "--user-data-dir=" + prof,
                "--window-size=%d,%d" % (width, height),
                "--virtual-time-budget=%d" % budget_ms, "--screenshot=" + str(png), url]
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or not png.exists() or png.stat().st_size < 10000:
            raise SystemExit("chromium failed (%s) for %s:\n%s" % (r.returncode, url,
                                                                   r.stderr[-2000:]))
    finally:
        shutil.rmtree(prof, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rdma-dp", required=True, help="the rdma-dp binary")
    ap.add_argument("--fixtures", required=True, help="the generated fixture nodes")
    ap.add_argument("--out", default=str(REPO / "docs" / "images"))
    ap.add_argument("--seconds", type=int, default=60, help="how long counters advance")
    ap.add_argument("--range", default="2m", help="the graph page's range_input")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    ap.add_argument("--width", type=int, default=1400)
    ap.add_argument("--budget-ms", type=int, default=15000,
                    help="Chromium's --virtual-time-budget: time the page gets to render")
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    exprs = dashboard_exprs()

    env = K.TestEnv(pathlib.Path(a.rdma_dp).resolve(), pathlib.Path(a.fixtures).resolve(),
                    prefix="rdps")
    p = adv = None
    try:
        node = env.dir / "dgx-h100"
        prom._fixtures_mod().copy_node(pathlib.Path(a.fixtures) / "dgx-h100", node)
        d, addr = prom.start_metrics_daemon(env, node)
        log("rdma-dp serves metrics on", addr)
        p = prom.Prometheus(target=addr)
        p.wait_target_up()
        log("prometheus on", p.url, "scraping", addr)
        adv = prom.Advancer(prom.Counters(node)).start()
        client = env.kubelet.current["rdma/compute"].client
        end = time.monotonic() + a.seconds
        i = 0
        while time.monotonic() < end:
            client.allocate([str(i % 200)])  # the Allocate panel's traffic: 1 call/s
            i += 1
            time.sleep(1)
        adv.stop()
        adv = None
        log("%d scrapes stored; taking screenshots" % p.scrapes())
        for name, refs in PAGES.items():
            page = [substitute(exprs[r], addr) for r in refs]
            # Tall enough for every graph and its legend: the page never scrolls (a window
            # shorter than the page gets scrolled to the focused expression box).
            height = 110
            for e in page:
                n = len(p.query(e))
                if not n:
                    raise SystemExit("%s: %s returns no series" % (name, e))
                height += 700 + 20 * n
            png = out / (name + ".png")
            screenshot(a.chromium, graph_url(p.url, page, a.range), png, a.width, height,
                       a.budget_ms)
            log("wrote", png, png.stat().st_size, "bytes")
    finally:
        if adv is not None:
            adv.stop()
        if p is not None:
            p.stop()
        env.close()


if __name__ == "__main__":
    main()
