# SPDX-License-Identifier: MIT
"""A real Prometheus server (Debian's `prometheus` package, /usr/bin/prometheus) for the
integration tests: it scrapes one target on the loopback address every second and answers
PromQL through its HTTP API, so a test reads back what Prometheus itself parsed and stored.

    with Prometheus(target="127.0.0.1:%d" % port) as p:   # skips when not installed
        p.wait_target_up()
        p.wait_scrapes(3)
        p.query('rdma_dp_port_data_transmitted_bytes_total{device="mlx5_0"}')

Everything is bounded: each wait has a deadline and fails with what it saw last plus the tail
of Prometheus' own log. Only urllib (no Python dependency beyond the standard library).
Prometheus listens on 127.0.0.1 only, on a free port, with its TSDB in a temp dir that stop()
removes.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

PROMETHEUS = os.environ.get("RDP_PROMETHEUS", "/usr/bin/prometheus")
PACKAGE = "prometheus"  # Debian's package of the server (and of promtool)
SCRAPE_INTERVAL_S = 1
# The window Grafana's $__rate_interval becomes here: max(4 x scrape interval, ...) as Grafana
# computes it for a 1 s scrape would be 4 s; 30 s leaves rate() several samples even when a
# scrape is late on a loaded machine, and matches what the tests advance counters over.
RATE_WINDOW = "30s"


def find_prometheus():
    """The server binary, or pytest.skip naming the package."""
    p = shutil.which(PROMETHEUS) if os.sep not in PROMETHEUS else PROMETHEUS
    if not p or not os.access(p, os.X_OK):
        pytest.skip("Prometheus server not found at %s: install Debian's `%s` package "
                    "(apt-get install %s; scripts/install-deps.sh does)" % (
                        PROMETHEUS, PACKAGE, PACKAGE))
    return p


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PromError(AssertionError):
    pass


class Prometheus:
    """One Prometheus server scraping `target` ("127.0.0.1:PORT") at metrics_path; target
    "self" is Prometheus' own /metrics (to test this harness on its own)."""

    def __init__(self, target, metrics_path="/metrics", job="rdma-dp",
                 interval_s=SCRAPE_INTERVAL_S, binary=None, start_timeout=60):
        self.binary = binary or find_prometheus()
        self.job = job
        self.dir = tempfile.mkdtemp(dir="/tmp", prefix="rdpprom")
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.target = target = "127.0.0.1:%d" % self.port if target == "self" else target
        self.config = os.path.join(self.dir, "prometheus.yml")
        # JSON is YAML: no YAML writer needed.
        cfg = {
            "global": {"scrape_interval": "%ds" % interval_s,
                       "scrape_timeout": "%ds" % interval_s,
                       "evaluation_interval": "%ds" % interval_s},
            "scrape_configs": [{
                "job_name": job,
                "metrics_path": metrics_path,
                "scheme": "http",
                "static_configs": [{"targets": [target]}],
            }],
        }
        with open(self.config, "w") as f:
            json.dump(cfg, f, indent=1)
        self.logfile = os.path.join(self.dir, "prometheus.log")
        self._log = open(self.logfile, "w")
        self.proc = subprocess.Popen(
            [self.binary, "--config.file=" + self.config,
             "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port,
             "--web.enable-lifecycle",
             "--log.level=info"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            cwd=self.dir)
        try:
            self.wait_ready(start_timeout)
        except BaseException:
            self.stop()
            raise

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def log_tail(self, n=30):
        try:
            with open(self.logfile, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError as e:
            return "(no log: %s)" % e

    def _fail(self, what):
        raise PromError("%s\n--- prometheus log (%s, tail) ---\n%s" % (
            what, self.logfile, self.log_tail()))

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._fail("prometheus exited (%s) before it was ready" % self.proc.returncode)
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
                    last = r.status
            except (urllib.error.URLError, OSError) as e:
                last = e
            time.sleep(0.2)
        self._fail("prometheus at %s not ready within %ss (last: %r)" % (self.url, timeout,
                                                                         last))

    def stop(self, timeout=20):
        """SIGTERM, wait, SIGKILL past timeout; removes the temp dir. Idempotent."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if not self._log.closed:
            self._log.close()
        if os.environ.get("RDP_KEEP_PROM"):
            return
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- HTTP API ----------------------------------------------------------------------------
    def api(self, path, params=None, timeout=10):
        """GET /api/v1/<path>: the "data" of a success answer, or PromError with the error."""
        url = self.url + "/api/v1/" + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                body = r.read()
        except urllib.error.HTTPError as e:  # 400/422/503: the body says why
            body = e.read()
        except (urllib.error.URLError, OSError) as e:
            self._fail("GET %s: %r" % (url, e))
        try:
            doc = json.loads(body)
        except ValueError:
            self._fail("GET %s: not JSON: %r" % (url, body[:300]))
        if doc.get("status") != "success":
            raise PromError("GET %s: %s: %s" % (url, doc.get("errorType"), doc.get("error")))
        return doc["data"]

    def query(self, expr, at=None):
        """Instant query: [(labels dict, float value)] (vector), or a scalar as [({}, v)]."""
        params = {"query": expr}
        if at is not None:
            params["time"] = "%.3f" % at
        data = self.api("query", params)
        if data["resultType"] == "vector":
            return [(s["metric"], float(s["value"][1])) for s in data["result"]]
        if data["resultType"] in ("scalar", "string"):
            return [({}, data["result"][1])]
        return [(s["metric"], [float(v) for _, v in s["values"]]) for s in data["result"]]

    def query_range(self, expr, seconds=60, step=1):
        """Range query over the last `seconds`: [(labels, [(t, float)])]."""
        end = time.time()
        data = self.api("query_range", {"query": expr, "start": "%.3f" % (end - seconds),
                                        "end": "%.3f" % end, "step": str(step)})
        return [(s["metric"], [(float(t), float(v)) for t, v in s["values"]])
                for s in data["result"]]

    def targets(self):
        return self.api("targets", {"state": "active"})["activeTargets"]

    def wait_target_up(self, timeout=60):
        """Waits for the target's health to be "up" (a scrape succeeded); returns it."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._fail("prometheus exited (%s)" % self.proc.returncode)
            ts = [t for t in self.targets() if t["labels"].get("job") == self.job]
            last = ts
            if ts and ts[0]["health"] == "up":
                return ts[0]
            time.sleep(0.25)
        self._fail("target %s not up within %ss; last target state: %s" % (
            self.target, timeout, json.dumps(last)))

    def scrapes(self):
        """Samples of up{job} seen so far (one per scrape), from the TSDB."""
        r = self.query('count_over_time(up{job="%s"}[10m])' % self.job)
        return int(r[0][1]) if r else 0

    def wait_scrapes(self, n, timeout=None):
        """Waits until Prometheus has stored n or more scrapes of the target in total."""
        timeout = timeout if timeout is not None else 30 + 3 * n
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            seen = self.scrapes()
            if seen >= n:
                return seen
            time.sleep(0.25)
        self._fail("only %d of %d scrapes of %s within %ss; targets: %s" % (
            seen, n, self.target, timeout, json.dumps(self.targets())))

    def wait_query(self, expr, pred=bool, timeout=30, what=None):
        """Polls an instant query until pred(result) is true; returns the result."""
        deadline = time.monotonic() + timeout
        res = None
        while time.monotonic() < deadline:
            res = self.query(expr)
            if pred(res):
                return res
            time.sleep(0.25)
        self._fail("%s: %s never satisfied the condition within %ss; last result: %r" % (
            what or "query", expr, timeout, res))


# ---------------------------------------------------------------------------------------------
# `rdma-dp serve --metrics-address 127.0.0.1:0` on a writable copy of a fixture node, with the
# fake kubelet, and a writer that advances the node's sysfs counters between scrapes.

# dgx-h100: the compute HCAs are InfiniBand, the storage ones RoCE (tests/fixtures/faults_ports.py).
IB_DEVICES = ["mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"]
ROCE_DEVICES = ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]
RESOURCES = {"rdma/compute": (IB_DEVICES, 200), "rdma/storage": (ROCE_DEVICES, 63)}
CONFIG = [
    {"resourceName": "compute", "rdmaHcaMax": 200,
     "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}},
    {"resourceName": "storage", "rdmaHcaMax": 63,
     "selectors": {"vendors": ["15b3"], "linkTypes": ["ethernet"]}},
]


def _fixtures_mod():
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    fx = os.path.join(os.path.dirname(here), "fixtures")
    if fx not in sys.path:
        sys.path.insert(0, fx)
    import sysfsgen  # noqa: E402
    return sysfsgen


class Counters:
    """Reads and rewrites a node copy's counters/ and hw_counters/ files (plain files: each write
    replaces the file, never through a link, as faults_ports._replace)."""

    def __init__(self, node):
        self.node = str(node)
        self.sysfsgen = _fixtures_mod()

    def path(self, device, name, port=1, group="counters"):
        return os.path.join(self.sysfsgen.ibdev_dir(os.path.join(self.node, "sys"), device),
                            "ports", str(port), group, name)

    def exists(self, device, name, port=1, group="counters"):
        return os.path.exists(self.path(device, name, port, group))

    def read(self, device, name, port=1, group="counters"):
        with open(self.path(device, name, port, group)) as f:
            return int(f.read())

    def write(self, device, name, value, port=1, group="counters"):
        p = self.path(device, name, port, group)
        tmp = p + ".new"
        with open(tmp, "w") as f:
            f.write("%d\n" % value)
        os.replace(tmp, p)  # atomic: a scrape reads the old or the new value, never half

    def add(self, device, name, by, port=1, group="counters"):
        v = self.read(device, name, port, group) + by
        self.write(device, name, v, port, group)
        return v


# What the advancer adds per tick (0.25 s): data and packets on every port, congestion counters
# on the RoCE ports, and one of each error counter the dashboard shows on one port of each kind
# (mlx5_3 IB, mlx5_2 RoCE), so the error panels have moving series too.
TRAFFIC = [("counters", "port_xmit_data", 25_000_000), ("counters", "port_rcv_data", 20_000_000),
           ("counters", "port_xmit_packets", 24_000), ("counters", "port_rcv_packets", 20_000),
           ("counters", "port_xmit_wait", 1000)]
CONGESTION = [("hw_counters", "np_ecn_marked_roce_packets", 40), ("hw_counters", "np_cnp_sent", 30),
              ("hw_counters", "rp_cnp_handled", 25), ("hw_counters", "rp_cnp_ignored", 1)]
# link_downed is an 8-bit counter: +1 every 8th tick stays far below 255 for minutes.
ERRORS = [("counters", "symbol_error", 2), ("counters", "link_downed", 1),
          ("counters", "port_rcv_errors", 3), ("counters", "port_xmit_discards", 1),
          ("hw_counters", "local_ack_timeout_err", 2), ("hw_counters", "packet_seq_err", 1),
          ("hw_counters", "out_of_sequence", 4),
          ("hw_counters", "req_transport_retries_exceeded", 1),
          ("hw_counters", "rnr_nak_retry_err", 2), ("hw_counters", "req_rnr_retries_exceeded", 1),
          ("hw_counters", "out_of_buffer", 5)]
ERROR_DEVICES = ["mlx5_3", "mlx5_2"]


class Advancer:
    """A thread advancing the counters above every `tick` seconds until stop()."""

    def __init__(self, counters, tick=0.25, devices=None):
        import threading
        self.c = counters
        self.devices = list(devices) if devices is not None else IB_DEVICES + ROCE_DEVICES
        self.tick = tick
        self.ticks = 0
        self.error = None
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def step(self):
        for dev in self.devices:
            for group, name, by in TRAFFIC:
                self.c.add(dev, name, by, group=group)
            if dev in ROCE_DEVICES:
                for group, name, by in CONGESTION:
                    self.c.add(dev, name, by, group=group)
            if dev in ERROR_DEVICES:
                for group, name, by in ERRORS:
                    if name == "link_downed" and self.ticks % 8:
                        continue
                    if self.c.exists(dev, name, group=group):
                        self.c.add(dev, name, by, group=group)
        self.ticks += 1

    def _run(self):
        try:
            while not self._stop.wait(self.tick):
                self.step()
        except Exception as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def start(self):
        self._t.start()
        return self

    def stop(self):
        self._stop.set()
        self._t.join(10)
        if self.error:
            raise self.error


def start_metrics_daemon(env, node, config=CONFIG, periodic=1, extra=()):
    """`rdma-dp serve --metrics-address 127.0.0.1:0 -v` on node (a directory) under the fake
    kubelet of env (kubelet.TestEnv); waits for `event=metrics-serving address=IP:PORT` and for
    every resource of RESOURCES to register. Returns (daemon, "IP:PORT")."""
    cfg = env.config(list(config), periodic=periodic)
    d = env.daemon(cfg, node, extra=["--metrics-address", "127.0.0.1:0", *extra])
    line = d.wait_log("event=metrics-serving", timeout=30)
    m = re.search(r"\baddress=(127\.0\.0\.1:(\d+))(\s|$)", line)
    assert m and m.group(2) != "0", \
        "event=metrics-serving must name the bound address (port 0 asked): %r" % line
    for res, (_, units) in RESOURCES.items():
        env.kubelet.wait_registered(res, units=units, timeout=30)
    return d, m.group(1)


def http_get(url, timeout=10):
    """(status, content type, body text) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type"), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read().decode(errors="replace")
