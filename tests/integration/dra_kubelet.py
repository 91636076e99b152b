# SPDX-License-Identifier: MIT
"""A kubelet stand-in for DRA (kubelet 1.34/1.35 behaviour), in Python grpcio.

Run with Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf).

What it does, after kubernetes/kubernetes pkg/kubelet/pluginmanager (operation_generator.go)
and pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go, manager.go:
  - polls <root>/plugins_registry every 50 ms for sockets (not starting with '.'); a new one
    (or a changed inode/mtime) is registered: dial, GetInfo (1 s deadline), type must be
    "DRAPlugin" (else "no handler registered for plugin type"), supported_versions walked in
    the plugin's order and the first of ["v1.DRAPlugin", "v1beta1.DRAPlugin"] chosen (else
    kubelet's "none of services supported by the plugin ... are supported by the kubelet"),
    endpoint "" = the registration socket; a second plugin of the same driver on the same
    endpoint is refused; then NotifyRegistrationStatus (5 s). A failed validation is retried
    with exponential backoff (0.5 s doubling), as the reconciler does.
  - the DRA endpoint is dialled lazily and asked to connect (grpc.NewClient + Connect());
    "connected" = the channel is READY (kubelet's stats handler: ConnBegin/ConnEnd); a lost
    connection is re-dialled at once (HandleConn calls conn.Connect() on ConnEnd), with grpc's
    own backoff, so a driver restarted on the same endpoint is usable again without a new
    registration.
  - ResourceSlice wiping through the fake apiserver (DeleteCollection with kubelet's own
    token): at start(), spec.nodeName=<node>; when no registered plugin of a driver is
    connected for wipe_delay seconds (kubelet: 30 s, defaultWipingDelay),
    spec.driver=<driver>,spec.nodeName=<node> (fields.Set order). Becoming usable again
    cancels a pending wipe. A socket that disappears deregisters its plugin.
  - prepare()/unprepare(): /k8s.io.kubelet.pkg.apis.dra.<v1|v1beta1>.DRAPlugin/Node(Un)
    PrepareResources with a 45 s deadline, checked as manager.go does: every requested UID
    answered, no unknown UID, no per-claim error (kubelet's messages).
  - restart(): drops every registration and connection, wipes as at start, starts again (the
    sockets still in plugins_registry register again).
  - device health (KEP-4680), by kubelet version (version=...; default "1.35"):
    1.34/1.35 open /v1alpha1.DRAResourceHealth/NodeWatchResources only with the
    ResourceHealthStatus gate on (health_gate=True; alpha, off by default), whatever the plugin
    listed; 1.36 (gate on by default) only when "v1alpha1.DRAResourceHealth" is listed in
    supported_versions; 1.37 picks by its own preference among those listed (pickHealthService:
    "v1.DRAResourceHealth", then "v1alpha1.DRAResourceHealth"), independent of the plugin's
    order. The stream is opened when the plugin registers and again 5 s after it ends
    (wait.UntilWithContext); each response is the complete list; a device's status is what it
    last reported, Unknown once last_updated_time + health_check_timeout_seconds (<= 0: 30 s)
    has passed or before any report (device_health()).
"""
import pathlib
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import grpc

import kubelet as kl
import waits

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]

SERVICES_SUPPORTED_BY_KUBELET = ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
HEALTH_SERVICES_BY_VERSION = {    # kubelet's healthServicesSupportedByKubelet, preferred first
    "1.34": [], "1.35": [], "1.36": ["v1alpha1.DRAResourceHealth"],
    "1.37": ["v1.DRAResourceHealth", "v1alpha1.DRAResourceHealth"]}
HEALTH_PATH = {"v1.DRAResourceHealth": "/v1.DRAResourceHealth/NodeWatchResources",
               "v1alpha1.DRAResourceHealth": "/v1alpha1.DRAResourceHealth/NodeWatchResources"}
HEALTH_RETRY = 5.0               # wait.UntilWithContext period of the stream loop
HEALTH_DEFAULT_TIMEOUT = 30.0    # kubelet's default health_check_timeout
SERVICE_PATH = {"v1.DRAPlugin": "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/",
                "v1beta1.DRAPlugin": "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"}
CALL_TIMEOUT = 45.0      # defaultClientCallTimeout
WIPE_DELAY = 30.0        # defaultWipingDelay

_dra_pb = None


def dra_protos():
    """dra_pb2 generated once per process with protoc --python_out, from src/rpc/proto/dra.proto
    when it exists (the driver's copy), else tests/integration/dra.proto."""
    global _dra_pb
    if _dra_pb is None:
        src = REPO / "src" / "rpc" / "proto" / "dra.proto"
        if not src.exists():
            src = HERE / "dra.proto"
        out = tempfile.mkdtemp(dir="/tmp", prefix="rdpdraproto")
        subprocess.run(["protoc", "--python_out=" + out, "-I", str(src.parent), str(src)],
                       check=True)
        sys.path.insert(0, out)
        import dra_pb2  # noqa: E402
        _dra_pb = dra_pb2
    return _dra_pb


_health_pb = None


def health_protos():
    """drahealth_pb2 from src/rpc/proto/drahealth.proto (one message set for v1alpha1 and v1),
    generated once per process."""
    global _health_pb
    if _health_pb is None:
        src = REPO / "src" / "rpc" / "proto" / "drahealth.proto"
        out = tempfile.mkdtemp(dir="/tmp", prefix="rdpdrahealth")
        subprocess.run(["protoc", "--python_out=" + out, "-I", str(src.parent), str(src)],
                       check=True)
        sys.path.insert(0, out)
        import drahealth_pb2  # noqa: E402
        _health_pb = drahealth_pb2
    return _health_pb


def pick_health_service(version, supported, gate):
    """The DRAResourceHealth service a kubelet of that version opens for a plugin listing
    supported, or None."""
    if version in ("1.34", "1.35"):
        return "v1alpha1.DRAResourceHealth" if gate else None
    if not gate:
        return None
    return next((h for h in HEALTH_SERVICES_BY_VERSION.get(version, []) if h in supported),
                None)

def go_q(items):
    """Go's %q of a []string: ["a" "b"]."""
    return "[" + " ".join('"%s"' % i.replace("\\", "\\\\").replace('"', '\\"')
                          for i in items) + "]"


class DRAKubeletError(Exception):
    """A failed prepare/unprepare, with kubelet's message; .response holds the reply."""

    def __init__(self, msg, response=None):
        super().__init__(msg)
        self.response = response


class Plugin:
    """One registered plugin instance (kubelet's monitoredPlugin)."""

    def __init__(self, driver, endpoint, socket_path, service, info):
        self.driver = driver
        self.endpoint = endpoint
        self.socket = socket_path
        self.service = service          # "v1.DRAPlugin" | "v1beta1.DRAPlugin"
        self.info = info
        self.channel = grpc.insecure_channel("unix:" + endpoint)
        self.connected = False
        self.ever_connected = False
        self.time = time.monotonic()
        self.closed = False
        self.health_service = None      # the DRAResourceHealth service opened, or None
        self.health = {}                # (pool, device) -> (health name, message, updated, timeout)
        self.health_responses = []      # (monotonic time, [(pool, device, health, message)])
        self.health_errors = []         # (monotonic time, grpc code name) of ended streams
        self.health_streams = 0         # streams opened
        self._health_call = None
        try:  # grpc.NewClient + conn.Connect(): start connecting now
            self.channel._channel.check_connectivity_state(True)
        except Exception:  # noqa: BLE001 - private API missing: the first call connects
            pass

    def state(self):
        try:
            s = self.channel._channel.check_connectivity_state(False)
        except Exception:  # noqa: BLE001
            return None
        return s

    def close(self):
        self.closed = True
        c = self._health_call
        if c is not None:
            c.cancel()
        self.channel.close()


def _claim_msg(pb, c):
    """A Claim message from (namespace, name, uid), a dict claim object, or a Claim."""
    if isinstance(c, pb.Claim):
        return c
    if isinstance(c, dict):
        m = c["metadata"]
        return pb.Claim(namespace=m.get("namespace", "default"), name=m["name"], uid=m["uid"])
    ns, name, uid = c
    return pb.Claim(namespace=ns, name=name, uid=uid)


class DRAKubelet(kl.PluginWatcher):
    def __init__(self, root, node="node-a", api=None, wipe_delay=WIPE_DELAY, poll=0.05,
                 dial_timeout=10, retry=True, version="1.35", health_gate=None):
        """root: kubelet's root dir (plugins_registry/ and plugins/ are created).
        api: a fake_apiserver.FakeAPIServer (kubelet gets its own token there) or None (no
        wiping). wipe_delay: seconds a driver may be unusable before its slices are wiped."""
        self.pb = dra_protos()
        _, self.rpb = kl.protos()
        self.root = pathlib.Path(root)
        self.registry_dir = self.root / "plugins_registry"
        self.plugins_dir = self.root / "plugins"
        self.registry_dir.mkdir(parents=True, exist_ok=True, mode=0o750)
        self.plugins_dir.mkdir(parents=True, exist_ok=True, mode=0o750)
        self.node = node
        self.api = api
        self.client = None
        if api is not None:
            import fake_apiserver
            self.token = api.add_token("kubelet-" + node + "-" + api.new_token())
            self.client = fake_apiserver.Client(api.base_url, api.ca_path, token=self.token,
                                                timeout=10)
        self.wipe_delay = wipe_delay
        self.version = version
        # ResourceHealthStatus: alpha (off) in 1.34/1.35, beta (on) since 1.36
        self.health_gate = (version not in ("1.34", "1.35")) if health_gate is None \
            else health_gate
        self.poll = poll
        self.dial_timeout = dial_timeout
        self.retry = retry
        self.cond = threading.Condition()
        self.plugins = {}         # driver -> [Plugin] (kubelet's store)
        self.registrations = []   # every accepted Plugin, in order
        self.errors = []          # registration errors (kubelet's text)
        self.notified = []        # (socket, registered, error)
        self.infos = []           # every PluginInfo received: (socket, info)
        self.wipes = []           # (monotonic time, fieldSelector, HTTP status or error)
        self.calls = []           # (method, service, [uids], outcome)
        self.generation = 0
        self._known = set()       # drivers ever registered (to watch for wiping)
        self._pending = {}        # driver -> fire time (monotonic)
        self._wipe_backoff = {}   # driver -> last retry delay of a failed wipe
        self._watch_reset()
        self._stop = threading.Event()
        self._thread = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, wipe=True):
        """kubelet starts: wipes this node's slices (all drivers), then watches for plugins."""
        with self.cond:
            self.generation += 1
        if wipe:
            self._wipe_at_start()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """kubelet goes away: every registration and connection is dropped (nothing wiped)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        with self.cond:
            plugins = [p for ps in self.plugins.values() for p in ps]
            self.plugins = {}
            self._watch_reset()
            self._pending = {}
            self._known = set()
            self.cond.notify_all()
        for p in plugins:
            p.close()

    def restart(self):
        self.stop()
        return self.start()

    def close(self):
        self.stop()
        if self.client is not None:
            self.client.close()

    # -- wiping ----------------------------------------------------------------------------------
    def _delete_collection(self, fields):
        import fake_apiserver
        sel = fake_apiserver.selector(**fields)
        try:
            st, _ = self.client.request("DELETE", fake_apiserver.SLICES + "?" + sel)
        except Exception as e:  # noqa: BLE001 - recorded
            self.client.close()
            st = repr(e)
        with self.cond:
            self.wipes.append((time.monotonic(), urllib.parse.unquote(sel[len(
                "fieldSelector="):]), st))
            self.cond.notify_all()
        return st

    def _wipe_at_start(self, attempts=8):
        """kubelet runs this in the background, retrying (1 s doubling) on any error, in
        parallel with the plugin watcher; here it runs first, so a driver registering at once
        never races it (kubelet's reconciler starts a second later, in practice the same)."""
        if self.client is None:
            return
        delay = 0.25
        for _ in range(attempts):
            if self._delete_collection({"spec.nodeName": self.node}) in (200, 404):
                return
            time.sleep(delay)
            delay *= 2

    def _sync_wipes(self):
        """Called every poll: schedules, cancels and fires per-driver wipes."""
        if self.client is None:
            return
        fire = []
        now = time.monotonic()
        with self.cond:
            for drv in list(self._known):
                if self._usable(drv):
                    self._pending.pop(drv, None)
                elif drv not in self._pending:
                    self._pending[drv] = now + self.wipe_delay
                elif self._pending[drv] is not None and now >= self._pending[drv]:
                    self._pending[drv] = None  # fired; re-armed when usable again
                    fire.append(drv)
        for drv in fire:
            st = self._delete_collection({"spec.nodeName": self.node, "spec.driver": drv})
            if st not in (200, 404):  # wipeResourceSlices retries (1 s doubling)
                with self.cond:
                    back = self._wipe_backoff.get(drv, 0.5) * 2
                    self._wipe_backoff[drv] = min(back, 300.0)
                    if drv in self._pending and not self._usable(drv):
                        self._pending[drv] = time.monotonic() + back
            else:
                self._wipe_backoff.pop(drv, None)

    def _usable(self, driver):
        return any(p.connected for p in self.plugins.get(driver, []))

    def usable(self, driver):
        with self.cond:
            return self._usable(driver)

    def pending_wipe(self, driver):
        """Seconds until the driver's slices are wiped, or None."""
        with self.cond:
            t = self._pending.get(driver)
            return None if t is None else max(0.0, t - time.monotonic())

    # -- the loop ---------------------------------------------------------------------------------
    def _loop(self):
        while not self._stop.is_set():
            self._scan_registry(self.retry)
            self._watch_connections()
            self._sync_wipes()
            self._stop.wait(self.poll)

    def _watch_connections(self):
        with self.cond:
            plugins = [p for ps in self.plugins.values() for p in ps]
        changed = False
        for p in plugins:
            s = p.state()  # cygrpc's int: 0 idle, 1 connecting, 2 ready, 3 failure, 4 down
            c = (s == 2) if s is not None else p.connected
            if s in (0, 3) and not p.closed:
                # kubelet's HandleConn calls conn.Connect() on ConnEnd "otherwise gRPC wouldn't
                # try and thus we wouldn't be notified about a restart of the plugin"
                try:
                    p.channel._channel.check_connectivity_state(True)
                except Exception:  # noqa: BLE001
                    pass
            if c != p.connected:
                p.connected = c
                p.ever_connected |= c
                changed = True
        if changed:
            with self.cond:
                self.cond.notify_all()

    def _forget_socket(self, sock):
        gone = []
        with self.cond:
            for drv, ps in list(self.plugins.items()):
                keep = [p for p in ps if p.socket != sock]
                gone += [p for p in ps if p.socket == sock]
                if keep:
                    self.plugins[drv] = keep
                else:
                    self.plugins.pop(drv, None)
            if self.client is not None:
                # the last plugin of a driver gone: its wipe is pending from now on (as
                # _sync_wipes would arm it at the next poll; a waiter sees both at once)
                now = time.monotonic()
                for drv in {p.driver for p in gone}:
                    if drv in self._known and not self._usable(drv):
                        self._pending.setdefault(drv, now + self.wipe_delay)
            self.cond.notify_all()
        for p in gone:
            p.close()

    def _handle_plugin(self, path, info):
        """kubelet's DRA handler: ValidatePlugin (type, the first supported service in the
        plugin's order), then RegisterPlugin (one plugin per driver and endpoint)."""
        with self.cond:
            self.infos.append((str(path), info))
        endpoint = info.endpoint or str(path)
        versions = list(info.supported_versions)
        if info.type != "DRAPlugin":
            return ("RegisterPlugin error -- no handler registered for plugin type: %s at "
                    "socket %s" % (info.type, path), "retry", None)
        chosen = next((v for v in versions if v in SERVICES_SUPPORTED_BY_KUBELET), None)
        why = None
        if not versions:
            why = "empty list of supported gRPC services (aka supported versions)"
        elif chosen is None:
            why = "none of services supported by the plugin (%s) are supported by the " \
                  "kubelet (%s)" % (go_q(versions), go_q(SERVICES_SUPPORTED_BY_KUBELET))
        if why:
            return ("RegisterPlugin error -- plugin validation failed with err: invalid "
                    "supported gRPC versions of DRA driver plugin %s at endpoint %s: %s" % (
                        info.name, endpoint, why), "retry", None)
        with self.cond:
            dup = any(p.endpoint == endpoint for p in self.plugins.get(info.name, []))
        if dup:
            return ("RegisterPlugin error -- plugin registration failed with err: endpoint %s "
                    "already registered for DRA driver plugin %s" % (endpoint, info.name),
                    None, None)
        return None, None, Plugin(info.name, endpoint, str(path), chosen, info)

    def _add_plugin(self, plugin):
        self.plugins.setdefault(plugin.driver, []).append(plugin)
        self.registrations.append(plugin)
        self._known.add(plugin.driver)
        # DRAPluginManager.add: the health stream's goroutine, for the service this kubelet
        # version picks
        plugin.health_service = pick_health_service(self.version,
                                                    list(plugin.info.supported_versions),
                                                    self.health_gate)
        if plugin.health_service:
            threading.Thread(target=self._health_loop, args=(plugin,), daemon=True).start()

    # -- health -----------------------------------------------------------------------------------
    def _health_loop(self, p):
        """DRAPluginManager.add's goroutine: NodeWatchResources, again 5 s after it ends."""
        hpb = health_protos()
        fn = p.channel.unary_stream(HEALTH_PATH[p.health_service],
                                    request_serializer=hpb.NodeWatchResourcesRequest
                                    .SerializeToString,
                                    response_deserializer=hpb.NodeWatchResourcesResponse
                                    .FromString)
        names = {0: "Unknown", 1: "Healthy", 2: "Unhealthy"}
        while not p.closed and not self._stop.is_set():
            try:
                call = fn(hpb.NodeWatchResourcesRequest())
                p._health_call = call
                with self.cond:
                    p.health_streams += 1
                for resp in call:
                    now = time.monotonic()
                    got = []
                    with self.cond:
                        for dh in resp.devices:
                            key = (dh.device.pool_name, dh.device.device_name)
                            msg = dh.message if len(dh.message) <= 1024 else \
                                dh.message[:1021] + "..."
                            p.health[key] = (names.get(dh.health, "Unknown"), msg,
                                             dh.last_updated_time,
                                             dh.health_check_timeout_seconds)
                            got.append((key[0], key[1], names.get(dh.health, "Unknown"), msg))
                        p.health_responses.append((now, got))
                        self.cond.notify_all()
                code = "stream ended"
            except grpc.RpcError as e:
                code = str(e.code())
            with self.cond:
                p.health_errors.append((time.monotonic(), code))
                self.cond.notify_all()
            if p.closed or self._stop.wait(HEALTH_RETRY):
                return

    def device_health(self, driver, pool, device):
        """(health, message) as kubelet puts it in allocatedResourcesStatus: the last report,
        Unknown once it is older than its timeout or when there is none."""
        p = self.plugin(driver)
        with self.cond:
            h = p.health.get((pool, device))
        if h is None:
            return ("Unknown", "")
        timeout = h[3] if h[3] > 0 else HEALTH_DEFAULT_TIMEOUT
        if time.time() > h[2] + timeout:
            return ("Unknown", h[1])
        return (h[0], h[1])

    # -- what tests ask ---------------------------------------------------------------------------
    def wait(self, pred, timeout=30, what="condition"):
        return waits.wait_until(self.cond, pred, timeout, lambda: (
            "dra kubelet: timed out waiting for %s; plugins=%r errors=%r wipes=%r" % (
                what, {d: [(p.endpoint, p.service, p.connected) for p in ps]
                       for d, ps in self.plugins.items()}, self.errors[-4:], self.wipes[-4:])),
            step=0.1)

    def wait_registered(self, driver, after=0, connected=True, timeout=30):
        """Waits for the (after+1)-th or a later registration of driver, still registered (and
        connected unless connected=False); returns its Plugin."""

        def ok():
            regs = [p for p in self.registrations[after:] if p.driver == driver]
            cur = self.plugins.get(driver, [])
            for p in reversed(regs):
                if p in cur and (p.connected or not connected):
                    return p
            return None

        return self.wait(ok, timeout, "registration of %s" % driver)

    def wait_wipe(self, selector_part, after=0, timeout=60):
        """Waits for a wipe (index >= after) whose selector contains selector_part."""
        return self.wait(lambda: next((w for w in self.wipes[after:]
                                       if selector_part in w[1]), None), timeout,
                         "a wipe of %s" % selector_part)

    def plugin(self, driver):
        """The plugin kubelet would call: the latest connected one, else the latest."""
        with self.cond:
            ps = self.plugins.get(driver, [])
            for p in reversed(ps):
                if p.connected:
                    return p
            if ps:
                return ps[-1]
        raise DRAKubeletError("DRA driver %s is not registered" % driver)

    def _call(self, method, driver, claims, version, timeout, check):
        pb = self.pb
        p = self.plugin(driver)
        service = {"v1": "v1.DRAPlugin", "v1beta1": "v1beta1.DRAPlugin",
                   None: p.service}.get(version, version)
        msgs = [_claim_msg(pb, c) for c in claims]
        if method == "NodePrepareResources":
            req_cls, resp_cls = pb.NodePrepareResourcesRequest, pb.NodePrepareResourcesResponse
        else:
            req_cls, resp_cls = pb.NodeUnprepareResourcesRequest, \
                pb.NodeUnprepareResourcesResponse
        fn = kl.stub(p.channel, SERVICE_PATH[service] + method, req_cls, resp_cls)
        t0 = time.monotonic()
        try:
            resp = fn(req_cls(claims=msgs), timeout=timeout)
        except grpc.RpcError as e:
            with self.cond:
                self.calls.append((method, service, [m.uid for m in msgs],
                                   "grpc %s" % e.code()))
            raise
        elapsed = time.monotonic() - t0
        err = None
        by_uid = {m.uid: m for m in msgs}
        for uid, r in resp.claims.items():
            if uid not in by_uid:
                err = "%s returned result for unknown claim UID %s" % (method, uid)
                break
            if r.error:
                err = "%s failed for ResourceClaim %s: %s" % (method, by_uid[uid].name, r.error)
                break
        if err is None and len(msgs) - len(resp.claims) != 0:
            err = "%s skipped %d ResourceClaims" % (method, len(msgs) - len(resp.claims))
        with self.cond:
            self.calls.append((method, service, [m.uid for m in msgs], err or "ok", elapsed))
        if err and check:
            raise DRAKubeletError(err, resp)
        return resp

    def prepare(self, claims, driver="rdma.rdma-dp.io", version=None, timeout=CALL_TIMEOUT,
                check=True):
        """NodePrepareResources for claims ((ns, name, uid) tuples, claim dicts or Claim
        messages) on the driver's plugin; version "v1" | "v1beta1" | None (the service chosen
        at registration). Returns the response; raises DRAKubeletError (kubelet's message) when
        check and the reply fails kubelet's checks, grpc.RpcError on a gRPC error."""
        return self._call("NodePrepareResources", driver, claims, version, timeout, check)

    def unprepare(self, claims, driver="rdma.rdma-dp.io", version=None, timeout=CALL_TIMEOUT,
                  check=True):
        return self._call("NodeUnprepareResources", driver, claims, version, timeout, check)

    def prepare_pod(self, pod_uid, claim_refs, driver="rdma.rdma-dp.io", version=None,
                    timeout=CALL_TIMEOUT):
        """What kubelet's DRA manager does for a pod before calling the driver (manager.go
        prepareResources): GET each claim [(namespace, name)] from the apiserver, require it
        allocated and reserved for the pod, then one batched NodePrepareResources with the
        claims that have results for the driver. Returns the response (None when no claim
        concerns the driver)."""
        import fake_apiserver
        batch = []
        for ns, name in claim_refs:
            st, c = self.client.request("GET", "%s/namespaces/%s/resourceclaims/%s" % (
                fake_apiserver.RV1, ns, name))
            if st != 200:
                raise DRAKubeletError("failed to fetch ResourceClaim %s referenced by pod %s: "
                                      "%s" % (name, pod_uid, (c or {}).get("message")))
            status = c.get("status") or {}
            if not any(r.get("uid") == pod_uid for r in status.get("reservedFor") or []):
                raise DRAKubeletError("pod %s is not allowed to use resource claim %s(%s)" % (
                    pod_uid, name, c["metadata"]["uid"]))
            alloc = status.get("allocation")
            if alloc is None:
                raise DRAKubeletError("claim %s: no allocation" % name)
            if any(r.get("driver") == driver for r in
                   (alloc.get("devices") or {}).get("results") or []):
                batch.append((ns, name, c["metadata"]["uid"]))
        if not batch:
            return None
        return self.prepare(batch, driver=driver, version=version, timeout=timeout)


def cdi_ids(resp, uid):
    """All CDI device IDs of one claim in a NodePrepareResourcesResponse."""
    return [i for d in resp.claims[uid].devices for i in d.cdi_device_ids]


def container_cdi_ids(resp, uid, request=""):
    """The CDI device IDs kubelet hands a container that names claim `uid` with `request`
    ("": the whole claim), as kubelet's ClaimInfo.cdiDevicesAsList() picks them: every device
    of the claim whose request_names holds the request (or is empty), in answer order. For the
    scheduler's extended-resource claim the request is the one
    pod.status.extendedResourceClaimStatus.requestMappings maps to the container."""
    return [i for d in resp.claims[uid].devices
            if not request or not d.request_names or request in d.request_names
            for i in d.cdi_device_ids]
