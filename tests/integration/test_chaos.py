# SPDX-License-Identifier: MIT
"""Chaos: `rdma-dp serve` on a private copy of the dgx-h100 node while, for a bounded time,
kubelet restarts (and goes away for a while), SIGHUPs bring good and bad configs, HCAs are
unplugged and re-plugged, ports go down and up, NUMA nodes move, our sockets get deleted and
hostile peers connect, several of these at once. After every step the invariants are checked
against what the fixture tree and the config say, computed here in Python (never taken from
the daemon's own discovery):

  - every resource of the current valid config is registered with the fake kubelet, on its
    socket, with a live ListAndWatch stream; resources no longer configured have no live stream;
  - its latest snapshot has rdmaHcaMax units (0 when no device matches), healthy iff a device
    of the pool has an ACTIVE port, with the pool's NUMA node when all its devices share one
    and the resource sets "reportTopology" (none otherwise, as the Go plugin);
  - Allocate hands out exactly the pool devices' uverbs/umad/issm nodes plus rdma_cm, and an
    unknown unit ID is INVALID_ARGUMENT;
  - the daemon never exits; its open descriptors stay below 2x + 16 the count after warm-up,
    its VmRSS below 2x the value after warm-up (release build; under ASan the quarantine holds
    freed memory, so the figures are only reported).

test_chaos runs in kubelet-sock mode for RDP_CHAOS_SECONDS (default 60, 25 under ASan),
test_chaos_plugin_watcher in plugin-watcher mode for a third of that. RDP_CHAOS_SEED (default
below) seeds every choice and is printed, with each step, so a failure can be replayed (the
choices are the same; the daemon's timing is not). RDP_CHAOS_REPORT=<file> appends a summary
line per run (steps, actions, VmRSS and descriptor figures). test_valgrind.py reuses Chaos
under memcheck. The last test is a bug the chaos found, made deterministic.
"""
import json
import os
import random
import signal
import socket
import stat
import struct
import sys
import threading
import time

import grpc
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import kubelet as K  # noqa: E402
import sysfsgen  # noqa: E402
from test_serve import char_devices, env, specs  # noqa: E402,F401

DEFAULT_SEED = 20240917
NODE = "dgx-h100"
RDMA_CM = "/dev/infiniband/rdma_cm"
WAIT = 120 if K.sanitized() else 60   # generous: never a timing assertion
UNITS = [1, 7, 63, 250, 1000]
INTERVALS = [0, 1, 1, 60, 300]       # periodicUpdateInterval; 1 = rescans on its own
# Pool templates; "pick" takes random PCI functions (rootDevices) each time it is written.
TEMPLATES = {
    "ib": {"vendors": ["15b3"], "linkTypes": ["infiniband"]},
    "roce": {"linkTypes": ["ETH"]},
    "numa0": {"linkTypes": ["infiniband"], "numaNodes": [0]},
    "numa1": {"linkTypes": ["IB"], "numaNodes": [1]},
    "pick": None,
    "none": {"vendors": ["8086"]},
}


# ---------------------------------------------------------------------------------------------
# The model: what the fixture tree and the config say the daemon must serve.

def _read(p):
    with open(p) as f:
        return f.read().strip()


def host_devices(node):
    """{ibdev: {"pci", "vendor", "numa", "links": {port: link_layer}, "active": bool}} read from
    the node's sysfs (sysfsgen's lexical link resolution, nothing of rdma-dp)."""
    sysr = node / "sys"
    cls = sysr / "class" / "infiniband"
    out = {}
    for name in sorted(os.listdir(cls)) if cls.is_dir() else []:
        d = sysfsgen.ibdev_dir(sysr, name)
        if not os.path.isdir(d):
            continue
        fn = sysfsgen.pci_function_dir(sysr, name)
        ports, active = {}, False
        for p in sorted(os.listdir(os.path.join(d, "ports"))):
            pd = os.path.join(d, "ports", p)
            ports[int(p)] = _read(os.path.join(pd, "link_layer"))
            active |= _read(os.path.join(pd, "state")).split(":")[0].strip() == "4"
        out[name] = {"pci": os.path.basename(fn), "vendor": _read(fn + "/vendor")[2:].lower(),
                     "numa": int(_read(fn + "/numa_node")), "links": ports, "active": active}
    return out


LINK = {"infiniband": "InfiniBand", "ib": "InfiniBand", "eth": "Ethernet", "ether": "Ethernet",
        "ethernet": "Ethernet"}


def selects(sel, dev):
    if "vendors" in sel and dev["vendor"] not in [v.lower() for v in sel["vendors"]]:
        return False
    if "linkTypes" in sel and not any(LINK[t.lower()] == ll for t in sel["linkTypes"]
                                      for ll in dev["links"].values()):
        return False
    if "numaNodes" in sel and not (dev["numa"] >= 0 and dev["numa"] in sel["numaNodes"]):
        return False
    if "rootDevices" in sel and dev["pci"] not in sel["rootDevices"]:
        return False
    return True


def full_name(r):
    return "%s/%s" % (r.get("resourcePrefix", "rdma"), r["resourceName"])


def expected(node, config):
    """{resource: (summary as kubelet.summary() gives it, sorted Allocate paths or None)}."""
    devs = host_devices(node)
    out = {}
    for r in config["configList"]:
        pool = sorted(n for n, d in devs.items() if selects(r["selectors"], d))
        if not pool:
            out[full_name(r)] = ((0, 0, []), None)
            continue
        units = r["rdmaHcaMax"]
        healthy = units if any(devs[n]["active"] for n in pool) else 0
        numas = {devs[n]["numa"] for n in pool}
        topo = [(numas.pop(),)] if len(numas) == 1 and min(numas) >= 0 and \
            r.get("reportTopology") else [None]
        paths = char_devices(node, set(pool))
        if os.path.exists(node / "dev" / "infiniband" / "rdma_cm"):
            paths.add(RDMA_CM)
        out[full_name(r)] = ((units, healthy if units else 0, topo if units else []),
                             sorted(paths))
    return out


# ---------------------------------------------------------------------------------------------
# Hostile peers (raw bytes on our sockets, or calls grpcio makes but kubelet never would).

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def _hpack_int(n, prefix_bits):
    limit = (1 << prefix_bits) - 1
    if n < limit:
        return bytes([n])
    out, n = [limit], n - limit
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    return bytes(out + [n])


def hpack(headers):
    """Literal header fields without indexing, new names, no Huffman."""
    out = b""
    for k, v in headers:
        k, v = k.encode(), v.encode()
        out += b"\x00" + _hpack_int(len(k), 7) + k + _hpack_int(len(v), 7) + v
    return out


def request_block(method):
    return hpack([(":method", "POST"), (":scheme", "http"), (":path", method),
                  (":authority", "localhost"), ("content-type", "application/grpc"),
                  ("te", "trailers")])


def _drain(s, limit=1 << 20):
    got = 0
    try:
        s.settimeout(2)
        while got < limit:
            b = s.recv(65536)
            if not b:
                break
            got += len(b)
    except (OSError, socket.timeout):
        pass


def _raw(path, payload, rcvbuf=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(10)
    try:
        s.connect(str(path))
        s.sendall(payload)
    except OSError:  # the socket went away under us (a restart, a reload): part of the game
        s.close()
        return None
    return s


def hostile_oneshot(path, kind, rng):
    """One hostile exchange that ends at once. Errors from a vanished socket are fine."""
    pb, _ = K.protos()
    if kind == "garbage":
        s = _raw(path, rng.randbytes(rng.randint(1, 8192)))
    elif kind == "http1":
        s = _raw(path, b"GET /v1beta1.DevicePlugin/Allocate HTTP/1.1\r\nHost: x\r\n\r\n")
    elif kind == "truncated":
        s = _raw(path, PREFACE + h2_frame(4, 0, 0) + b"\x00\x00\x40\x01\x04\x00\x00\x00\x01abc")
    elif kind == "huge-frame":
        s = _raw(path, PREFACE + h2_frame(4, 0, 0) + b"\xff\xff\xff\x01\x04\x00\x00\x00\x01")
    elif kind == "half-request":   # headers, half a message, then hang up
        s = _raw(path, PREFACE + h2_frame(4, 0, 0) +
                 h2_frame(1, 4, 1, request_block("/v1beta1.DevicePlugin/Allocate")) +
                 h2_frame(0, 0, 1, b"\x00\x00\x00\x10\x00\x0a\x03"))
    elif kind == "rst-storm":      # open and reset many streams
        data = PREFACE + h2_frame(4, 0, 0)
        for sid in range(1, 200, 2):
            data += h2_frame(1, 4, sid, request_block("/v1beta1.DevicePlugin/ListAndWatch"))
            data += h2_frame(3, 0, sid, struct.pack(">I", 8))
        s = _raw(path, data)
    elif kind == "burst":          # many connections at once, closed again
        socks = [_raw(path, b"") for _ in range(24)]
        for x in socks:
            if x:
                x.close()
        return
    else:                          # calls through grpcio
        try:
            ch = K.dial(path, timeout=10, options=[("grpc.max_send_message_length", -1),
                                                   ("grpc.max_receive_message_length", -1)])
        except Exception:  # noqa: BLE001
            return
        raw = lambda m: ch.unary_unary(m, request_serializer=lambda b: b,  # noqa: E731
                                       response_deserializer=lambda b: b)
        try:
            if kind == "unknown-method":
                raw("/v1beta1.DevicePlugin/Nope")(b"", timeout=30)
            elif kind == "bad-protobuf":
                raw("/v1beta1.DevicePlugin/Allocate")(b"\x0a\xff\xff\xff\xff\x0f", timeout=30)
            elif kind == "big-message":
                raw("/v1beta1.DevicePlugin/Allocate")(b"\x0a" + b"\xff" * (5 << 20),
                                                      timeout=60)
            elif kind == "many-containers":
                req = pb.AllocateRequest(container_requests=[
                    pb.ContainerAllocateRequest(devices_ids=["0"]) for _ in range(1000)])
                raw("/v1beta1.DevicePlugin/Allocate")(req.SerializeToString(), timeout=30)
            elif kind == "cancelled-watch":
                it = ch.unary_stream("/v1beta1.DevicePlugin/ListAndWatch",
                                     request_serializer=lambda b: b,
                                     response_deserializer=lambda b: b)(b"")
                next(it)
                it.cancel()
        except (grpc.RpcError, StopIteration):
            pass
        finally:
            ch.close()
        return
    if s is not None:
        _drain(s)
        s.close()


def hostile_lingering(path, kind):
    """A connection left open across steps: half a preface (slowloris), or a ListAndWatch whose
    reader never reads, its windows opened wide (the daemon must bound what it buffers)."""
    if kind == "slowloris":
        return _raw(path, PREFACE[:10])
    return _raw(path, PREFACE + h2_frame(4, 0, 0, struct.pack(">HI", 4, 0x7FFFFFFF)) +
                h2_frame(8, 0, 0, struct.pack(">I", 0x7FFFFFFF - 65535)) +
                h2_frame(1, 4, 1, request_block("/v1beta1.DevicePlugin/ListAndWatch")) +
                h2_frame(0, 1, 1, b"\x00\x00\x00\x00\x00"), rcvbuf=4096)


ONESHOT = ["garbage", "http1", "truncated", "huge-frame", "half-request", "rst-storm", "burst",
           "unknown-method", "bad-protobuf", "big-message", "many-containers",
           "cancelled-watch"]


# ---------------------------------------------------------------------------------------------
class Chaos:
    def __init__(self, env, mode, seed, seconds, binary=None, wrapper=(), wait=WAIT):
        """mode: kubelet-sock or plugins-registry; wrapper: a command the daemon runs under
        (valgrind), binary then being the one to run (default: the env's)."""
        self.env = env
        self.mode = mode
        self.binary = binary or env.binary
        self.wrapper = list(wrapper)
        self.wait = wait
        self.rng = random.Random(seed)
        self.arng = random.Random(seed + 1)  # Allocate checks: as many as timing wants
        self.seed = seed
        self.seconds = seconds
        self.pristine = env.node(NODE)
        self.node = env.dir / "node"
        sysfsgen.copy_node(self.pristine, self.node)
        self.all_devs = host_devices(self.pristine)
        self.cfg_path = env.dir / "config.json"
        self.valid = None           # the config the daemon runs
        self.ever = set()           # every resource name ever configured
        self.lingering = []         # (socket, steps left)
        self.deleted = []           # (socket name, registrations before) of this step
        self.transcript = []
        self.counts = {}
        self.rss = []               # (step, KiB)
        self.fds = []
        self.baseline = None
        self.step = 0
        self.sighups = self.rejected = 0

    # -- bookkeeping -----------------------------------------------------------------------
    def say(self, msg):
        line = "chaos[%d] %s" % (self.step, msg)
        self.transcript.append(line)
        print(line, flush=True)

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    def fail(self, msg):
        tail = "\n".join(self.transcript[-25:])
        log = "\n".join(self.d.lines[-60:]) if getattr(self, "d", None) else ""
        pytest.fail("chaos seed=%d step=%d: %s\n--- last steps:\n%s\n--- daemon log tail:\n%s"
                    % (self.seed, self.step, msg, tail, log), pytrace=False)

    # -- configs ---------------------------------------------------------------------------
    def random_config(self, rng, full=False):
        names = list(TEMPLATES) if full else rng.sample(
            list(TEMPLATES), rng.randint(1, len(TEMPLATES)))
        res = []
        for t in sorted(names):
            sel = TEMPLATES[t]
            r = {"resourceName": "chaos_" + t,
                 "rdmaHcaMax": max(UNITS) if full else rng.choice(UNITS)}
            if full or rng.random() < 0.5:
                r["reportTopology"] = True
            if sel is None:
                pcis = sorted({d["pci"] for d in self.all_devs.values()})
                sel = {"rootDevices": rng.sample(pcis, rng.randint(1, 3))}
                if not full and rng.random() < 0.3:
                    r["resourcePrefix"] = "example.com"
            r["selectors"] = sel
            res.append(r)
        return {"periodicUpdateInterval": 1 if full else rng.choice(INTERVALS),
                "configList": res}

    def bad_config(self, rng):
        good = json.dumps(self.random_config(rng), indent=2) + "\n"
        choices = [
            good[:rng.randint(1, len(good) - 3)],       # truncated
            "",
            '{"configList": [{"resourceName": "x", "rdmaHcaMax": -1, '
            '"selectors": {"vendors": ["15b3"]}}]}',
            good.replace('"selectors"', '"selectrs"', 1),
            '{"configList": {}}',
            '{"periodicUpdateInterval": "often", "configList": []}',
            "[1, 2, 3]",
            '{"configList": [{"resourceName": "bad/name", "rdmaHcaMax": 5, '
            '"selectors": {"vendors": ["15b3"]}}]}',
            '{"configList": [{"resourceName": "x", "rdmaHcaMax": 100000000, '
            '"selectors": {"vendors": ["15b3"]}}]}',
            rng.randbytes(rng.randint(1, 512)).decode("latin-1"),
        ]
        return rng.choice(choices)

    def write_config(self, text):
        tmp = self.cfg_path.with_suffix(".tmp")
        tmp.write_text(text, encoding="latin-1")
        os.replace(tmp, self.cfg_path)   # atomic, as a ConfigMap update

    def sighup(self, good, rng):
        """Writes a config (good: a random valid one, else a broken one), sends SIGHUP and waits
        for the daemon to have applied or rejected it."""
        if good is None:
            what, cfg = "sighup-same", None
        elif good:
            cfg = self.random_config(rng)
            self.write_config(json.dumps(cfg, indent=2) + "\n")
            what = "sighup-good"
        else:
            cfg = None
            self.write_config(self.bad_config(rng))
            what = "sighup-bad"
        m = self.d.mark()
        self.d.signal(signal.SIGHUP)
        self.sighups += 1
        line = self.wait_reload(m)
        if "config-rejected" in line:
            self.rejected += 1
            if what == "sighup-good":
                self.fail("a valid config was rejected: " + line)
        else:
            if what == "sighup-bad":
                self.fail("an invalid config was applied: " + line)
            if cfg is not None:
                self.valid = cfg
        return "%s -> %s" % (what, "rejected" if "config-rejected" in line else
                             "resources=" + ",".join(full_name(r) for r in self.valid[
                                 "configList"]))

    def wait_reload(self, start):
        deadline = time.monotonic() + self.wait
        with self.d.cond:
            while True:
                for ln in self.d.lines[start:]:
                    if "event=config-reloaded" in ln or "event=config-rejected" in ln:
                        return ln
                if self.d.proc.poll() is not None:
                    self.fail("the daemon exited (%s)" % self.d.proc.returncode)
                if time.monotonic() > deadline:
                    self.fail("SIGHUP was neither applied nor rejected")
                self.d.cond.wait(0.5)

    # -- actions ---------------------------------------------------------------------------
    def act_kubelet(self, rng):
        kl = self.env.kubelet
        r = rng.random()
        if r < 0.6:
            kl.restart()
            return "kubelet-restart"
        if r < 0.85:
            pause = rng.uniform(0, 1.5)
            kl.stop()
            kl.cleanup_plugin_dir()
            time.sleep(pause)
            kl.start()
            return "kubelet-away %.1fs" % pause
        ours = sorted(p for p in os.listdir(self.sock_dir) if p.startswith("chaos_"))
        if not ours:
            return "socket-delete (none)"
        p = rng.choice(ours)
        with kl.cond:
            self.deleted.append((p, len(kl.registrations)))
        try:
            os.unlink(self.sock_dir / p)
        except FileNotFoundError:
            pass
        return "socket-delete " + p

    def act_device(self, rng):
        sysr, devr = self.node / "sys", self.node / "dev"
        present = sorted(host_devices(self.node))
        gone = sorted(set(self.all_devs) - set(present))
        r = rng.random()
        if gone and (r < 0.35 or not present):
            n = rng.choice(gone)
            sysfsgen.replug(sysr, devr, self.pristine, n)
            return "replug " + n
        if r < 0.6 and present:
            n = rng.choice(present)
            sysfsgen.unplug(sysr, devr, n)
            return "unplug " + n
        if r < 0.85 and present:
            n = rng.choice(present)
            st = rng.choice(["DOWN", "INIT", "ACTIVE", "ACTIVE"])
            sysfsgen.set_port_state(sysr, n, 1, st)
            return "port %s %s" % (n, st)
        if not present:
            return "numa (no device)"
        n = rng.choice(present)
        numa = rng.choice([0, 1, -1, self.all_devs[n]["numa"]])
        sysfsgen.set_numa_node(sysr, n, numa)
        return "numa %s %d" % (n, numa)

    def act_hostile(self, rng):
        ours = sorted(p for p in os.listdir(self.sock_dir) if p.startswith("chaos_"))
        if not ours:
            return "hostile (no socket)"
        path = self.sock_dir / rng.choice(ours)
        if rng.random() < 0.25 and len(self.lingering) < 4:
            kind = rng.choice(["slowloris", "stuck-watch"])
            s = hostile_lingering(path, kind)
            if s is not None:
                self.lingering.append((s, rng.randint(1, 6)))
            return "hostile %s %s (lingers)" % (kind, path.name)
        kind = rng.choice(ONESHOT)
        hostile_oneshot(path, kind, rng)
        return "hostile %s %s" % (kind, path.name)

    def age_lingering(self):
        keep = []
        for s, left in self.lingering:
            if left <= 1:
                s.close()
            else:
                keep.append((s, left - 1))
        self.lingering = keep

    def run_step(self, plan):
        """plan: list of action names. Kubelet and hostile actions run in threads, at the same
        time as the device edits and the SIGHUP of the main thread."""
        done, errors, threads = [], [], []

        def bg(fn):
            def run():
                try:
                    done.append(fn())
                except BaseException as e:  # noqa: BLE001 - reported below
                    errors.append(repr(e))
            t = threading.Thread(target=run, daemon=True)
            t.start()
            threads.append(t)

        # Each action draws its choices from its own generator, seeded here in order, so
        # that the seed fixes them whatever the threads do.
        sub = [random.Random(self.rng.getrandbits(64)) for _ in plan]
        for name, rng in zip(plan, sub):
            self.count(name)
            if name == "kubelet":
                bg(lambda rng=rng: self.act_kubelet(rng))
            elif name == "hostile":
                bg(lambda rng=rng: self.act_hostile(rng))
        for name, rng in zip(plan, sub):
            if name == "device":
                done.append(self.act_device(rng))
            elif name.startswith("sighup-"):
                done.append(self.sighup({"sighup-good": True, "sighup-bad": False}.get(name),
                                        rng))
        for t in threads:
            t.join(self.wait + 60)  # a hostile call may take its own 60 s deadline
            if t.is_alive():
                self.fail("an action hung")
        if errors:
            self.fail("an action failed: %s" % errors)
        self.say(" | ".join(done))

    # -- invariants ------------------------------------------------------------------------
    def check(self):
        kl = self.env.kubelet
        if self.d.proc.poll() is not None:
            self.fail("the daemon exited with %s" % self.d.proc.returncode)
        want = expected(self.node, self.valid)
        self.ever |= set(want)

        socks = {full_name(r): r["resourceName"] + ".sock" for r in self.valid["configList"]}
        # A deleted socket must be re-created and registered again (the old connection, and
        # its stream, outlive the file).
        again = {res: n for res, sock in socks.items() for p, n in self.deleted if p == sock}
        self.deleted = []

        def is_sock(p):
            try:
                return stat.S_ISSOCK(os.lstat(p).st_mode)
            except FileNotFoundError:
                return False

        def settled():
            for res, (summ, _) in want.items():
                cur = kl.current.get(res)
                if cur is None or cur.client.stream_error is not None:
                    return False
                if K.summary(cur.client.latest()) != summ:
                    return False
                if res in again and not any(r.resource == res
                                            for r in kl.registrations[again[res]:]):
                    return False
                if not is_sock(self.sock_dir / socks[res]):
                    return False
            for res in self.ever - set(want):
                cur = kl.current.get(res)
                if cur is not None and cur.client.stream_error is None:
                    return False
            return True

        try:
            kl.wait(settled, self.wait, "the resources of the config")
        except TimeoutError:
            self.fail("not settled: want %r, kubelet has %r, sockets %r, re-registration "
                      "wanted %r" % ({r: s for r, (s, _) in want.items()},
                                     {r: (K.summary(c.client.latest()), c.client.stream_error)
                                      for r, c in kl.current.items()},
                                     sorted(os.listdir(self.sock_dir)), again))
        # Allocate through kubelet's own connection. A rescan the daemon has not run yet (a
        # change picked up by the periodic timer) may lag: poll until it is right.
        for res, ((units, _, _), paths) in sorted(want.items()):
            c = kl.current[res].client
            deadline = time.monotonic() + self.wait
            while True:
                got = self.allocate_once(c, units)
                if got == paths:
                    break
                if time.monotonic() > deadline:
                    self.fail("Allocate on %s: got %r, want %r" % (res, got, paths))
                time.sleep(0.2)
            self.count("allocate")
        self.measure()

    def allocate_once(self, c, units):
        """Sorted paths the daemon hands out for a random unit (plus, sometimes, a second
        container), or None when it rightly refuses; checks that unit ID `units` is refused."""
        try:
            if units == 0:
                c.allocate(["0"])
                return "Allocate of unit 0 succeeded with 0 units"
            ids = [str(self.arng.randrange(units))]
            if units > 1 and self.arng.random() < 0.3:
                ids.append(str(self.arng.randrange(units)))
            ids = sorted(set(ids))
            containers = [ids] + ([[str(units - 1)]] if self.arng.random() < 0.3 else [])
            resp = c.allocate(*containers)
        except grpc.RpcError as e:
            if units == 0 and e.code() == grpc.StatusCode.INVALID_ARGUMENT:
                return None
            return "%s: %s" % (e.code(), e.details())
        got = [[p for p, cp, perm in specs(resp, i) if p == cp and perm == "rwm"]
               for i in range(len(containers))]
        if len(resp.container_responses) != len(containers) or any(g != got[0] for g in got):
            return "per-container answers differ: %r" % got
        try:
            c.allocate([str(units)])
            return "unit %d of %d was accepted" % (units, units)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.INVALID_ARGUMENT:
                return "unit %d: %s" % (units, e.code())
        return got[0]

    def measure(self):
        st = K.proc_status(self.d.pid)
        rss = int(st["VmRSS"].split()[0])
        self.rss.append((self.step, rss))
        self.fds.append(st["fds"])
        if self.baseline is None:
            return
        if rss > 2 * self.baseline and not K.sanitized() and not self.wrapper:
            self.fail("VmRSS %d KiB > 2x the %d KiB after warm-up" % (rss, self.baseline))
        if st["fds"] > 2 * self.baseline_fds + 16:
            self.fail("%d open descriptors (%d after warm-up)" % (st["fds"], self.baseline_fds))

    # -- the run ---------------------------------------------------------------------------
    def plan(self):
        acts = []
        if self.rng.random() < 0.35:
            acts.append("kubelet")
        if self.rng.random() < 0.35:
            acts.append("hostile")
        acts += ["device"] * self.rng.choice([0, 0, 1, 1, 2, 3])
        r = self.rng.random()
        if r < 0.3:
            acts.append("sighup-good")
        elif r < 0.45:
            acts.append("sighup-bad")
        elif r < 0.75 or ("device" in acts and self.valid["periodicUpdateInterval"] != 1):
            acts.append("sighup-same")   # device edits need a rescan: SIGHUP or the timer
        return acts or ["sighup-same"]

    def run(self):
        env = self.env
        self.say("seed=%d seconds=%g mode=%s node=%s" % (self.seed, self.seconds, self.mode,
                                                         NODE))
        env.start_kubelet(self.mode)
        if self.wrapper:  # a slow daemon; not longer: a dial stuck on a stale socket holds
            env.kubelet.dial_timeout = 30  # a thread of the fake kubelet's server that long
        self.sock_dir = env.kubelet.plugin_dir if self.mode == "kubelet-sock" else \
            env.kubelet.registry_dir
        self.valid = self.random_config(self.rng, full=True)
        self.write_config(json.dumps(self.valid, indent=2) + "\n")
        self.d = env.daemon(self.cfg_path, self.node, registration=self.mode, verbose=False,
                            wrapper=self.wrapper, binary=self.binary)
        self.check()
        # Warm-up: every kind of action once, the largest config in force.
        warm = [["kubelet"], ["hostile"], ["device", "sighup-same"], ["sighup-bad"],
                ["hostile", "kubelet", "device", "sighup-same"]]
        for p in warm:
            self.step += 1
            self.run_step(p)
            self.check()
        self.baseline = max(r for _, r in self.rss[-2:])
        self.baseline_fds = max(self.fds[-2:])
        self.say("warm-up done: VmRSS %d KiB, %d fds" % (self.baseline, self.baseline_fds))
        end = time.monotonic() + self.seconds
        while time.monotonic() < end:
            self.step += 1
            self.age_lingering()
            self.run_step(self.plan())
            self.check()
        for s, _ in self.lingering:
            s.close()
        self.lingering = []
        # Last: everything restored, the largest config again, then a clean SIGTERM.
        for n in sorted(set(self.all_devs) - set(host_devices(self.node))):
            sysfsgen.replug(self.node / "sys", self.node / "dev", self.pristine, n)
        for n, dv in self.all_devs.items():
            sysfsgen.set_port_state(self.node / "sys", n, 1, "ACTIVE")
            sysfsgen.set_numa_node(self.node / "sys", n, dv["numa"])
        self.step += 1
        self.valid = self.random_config(self.rng, full=True)
        self.write_config(json.dumps(self.valid, indent=2) + "\n")
        m = self.d.mark()
        self.d.signal(signal.SIGHUP)
        self.wait_reload(m)
        self.check()
        final = self.rss[-1][1]
        rc = self.d.stop(self.wait)
        left = sorted(p for p in os.listdir(self.sock_dir) if p.startswith("chaos_"))
        peak = max(r for _, r in self.rss)
        summary = ("seed=%d mode=%s steps=%d seconds=%g sighups=%d rejected=%d actions=%s "
                   "VmRSS_KiB start=%d warm=%d peak=%d final=%d fds warm=%d peak=%d "
                   "kubelet_registrations=%d kubelet_errors=%d" % (
                       self.seed, self.mode, self.step, self.seconds, self.sighups,
                       self.rejected, json.dumps(self.counts, sort_keys=True), self.rss[0][1],
                       self.baseline, peak, final, self.baseline_fds, max(self.fds),
                       len(env.kubelet.registrations), len(env.kubelet.errors)))
        self.say(summary)
        rep = os.environ.get("RDP_CHAOS_REPORT")
        if rep:
            with open(rep, "a") as f:
                f.write(summary + "\n")
        if rc != 0:
            self.fail("SIGTERM: exit code %s" % rc)
        if left:
            self.fail("sockets left behind: %r" % left)
        if "ERROR: AddressSanitizer" in self.d.log() or "runtime error" in self.d.log():
            self.fail("sanitizer report in the log")


def chaos_seconds():
    return float(os.environ.get("RDP_CHAOS_SECONDS", "25" if K.sanitized() else "60"))


def chaos_seed():
    return int(os.environ.get("RDP_CHAOS_SEED", DEFAULT_SEED))


def test_chaos(env):
    Chaos(env, "kubelet-sock", chaos_seed(), chaos_seconds()).run()


def test_chaos_plugin_watcher(env):
    """The same in plugin-watcher mode (sockets in plugins_registry), for a third of the time."""
    Chaos(env, "plugins-registry", chaos_seed() + 1, chaos_seconds() / 3).run()


# ---------------------------------------------------------------------------------------------
# A bug the chaos run found (seed 6, step 145), made deterministic with a slow kubelet: the
# removed resource keeps a.sock until kubelet has answered its Register, then closes it.

def test_prefix_change_while_register_in_flight(env):
    """The config changes a resource's prefix (example.com/a -> rdma/a) while kubelet is still
    handling example.com/a's Register. kubelet then dials a.sock; when that was already
    rdma/a's socket, kubelet kept an endpoint "example.com/a" fed by rdma/a's ListAndWatch: a
    resource the config no longer has, advertised with live units (and Allocate on it handed
    out rdma/a's devices) until the next kubelet restart. Expected: example.com/a has no live
    stream."""
    def cfg(prefix):
        return {"configList": [{"resourceName": "a", "resourcePrefix": prefix, "rdmaHcaMax": 3,
                                "selectors": {"ifNames": ["ib0"]}}]}

    kl = env.start_kubelet()
    kl.register_delay = 1.0
    c = env.config(cfg("example.com"))
    d = env.daemon(c)
    d.wait_log("event=register-attempt", "resource=example.com/a")
    kl.wait(lambda: kl.requests, what="Register of example.com/a")
    env.config(cfg("rdma"))
    m = d.mark()
    d.signal(signal.SIGHUP)
    d.wait_log("event=config-reloaded", "added=1", "removed=1", start=m)
    kl.wait_registered("rdma/a", units=3)
    # Both Register calls handled (accepted or refused), the first one last or not.
    kl.wait(lambda: len(kl.registrations) + len(kl.errors) >= 2, what="both Register calls")
    kl.register_delay = 0
    ghost = kl.current.get("example.com/a")
    if ghost is not None:  # its stream must end, as a removed resource's does
        with ghost.client.cond:
            ghost.client.cond.wait_for(lambda: ghost.client.stream_error is not None, 5)
        assert ghost.client.stream_error is not None, \
            "kubelet still has a live example.com/a: %r" % (kl.describe(),)
