# SPDX-License-Identifier: MIT
"""A fake kubelet (device manager + plugin watcher) in Python grpcio, and a runner for
`rdma-dp serve`, for the integration tests and the demo. The pieces other stand-ins and every
daemon test share are here: PluginWatcher (kubelet's plugin manager, also dra_kubelet's),
Process (a child daemon and its log, also dra_env's), TestEnv (a daemon test's environment;
conftest's make_env fixture makes and closes them), grpc_service/serve_unix/
plugin_registration (the servers of stand-in plugins).

Run with Debian's /usr/bin/python3 (python3-grpcio, python3-protobuf).

kubelet-sock mode, as kubelet's device manager does it:
  - serves /v1beta1.Registration/Register on <root>/device-plugins/kubelet.sock;
  - on Register: checks version and resource name, dials the plugin's endpoint
    (<root>/device-plugins/<endpoint>, :authority localhost), calls GetDevicePluginOptions, then
    opens ListAndWatch (before answering Register, as kubelet's goroutine may) and keeps the
    stream, recording every snapshot;
  - restart(): stop, unlink every socket in device-plugins (keeping kubelet_internal_checkpoint
    and non-sockets), start again.
plugin-watcher mode, as kubelet's plugin manager does it:
  - polls <root>/plugins_registry for sockets not starting with '.'; for a new one: dial,
    GetInfo (1 s deadline), validate, connect the device plugin (endpoint or the socket itself),
    GetDevicePluginOptions, ListAndWatch, then NotifyRegistrationStatus (5 s deadline).

Both modes: a registration of a resource name that already has a plugin disconnects the older
client (its ListAndWatch stream is cancelled and its connection closed), as kubelet's device
manager stops the old endpoint when a new one registers the same name.

Opt-in realism (kubelet does these; the defaults keep the older, kinder behaviour the existing
tests were written against):
  - watcher_retry=True: a watcher registration that fails before kubelet adds the plugin to its
    actual state of world (dial, GetInfo, validation: operation_generator.go returns an error and
    the reconciler retries with exponential backoff, 0.5 s doubling) is retried; one that fails
    in RegisterPlugin itself (the device plugin cannot be dialled, or `refuse`) is answered with
    NotifyRegistrationStatus(registered=false, error=...) and NOT retried: the plugin is in the
    actual state of world with that socket's timestamp, only a new socket registers again.
  - refuse also applies in watcher mode: RegisterPlugin fails, registered=false inside the real
    handshake (after GetInfo and validation).
  - hidden_roots=[paths]: paths that do not exist in kubelet's mount namespace, e.g. the
    container's view of kubelet's root when it differs from the host's (the daemon is given a
    symlink to kubelet's root). kubelet dials a watcher endpoint as given (absolute), so an
    endpoint under a hidden root fails to dial, as with real kubelet; an empty endpoint means
    "the socket I found", which kubelet names in its own view.
"""
import json
import os
import shutil
import pathlib
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc

import waits

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[1]

_protos = None


def protos():
    """(deviceplugin_pb2, pluginregistration_pb2), generated once per process with protoc."""
    global _protos
    if _protos is None:
        out = tempfile.mkdtemp(dir="/tmp", prefix="rdpproto")
        src = REPO / "src" / "rpc" / "proto"
        subprocess.run(["protoc", "--python_out=" + out, "-I", str(src),
                        str(src / "deviceplugin.proto"), str(src / "pluginregistration.proto")],
                       check=True)
        sys.path.insert(0, out)
        import deviceplugin_pb2  # noqa: E402
        import pluginregistration_pb2  # noqa: E402
        _protos = (deviceplugin_pb2, pluginregistration_pb2)
    return _protos


DP = "/v1beta1.DevicePlugin/"
REG = "/pluginregistration.Registration/"


def stub(channel, method, req_cls, resp_cls, stream=False):
    mk = channel.unary_stream if stream else channel.unary_unary
    return mk(method, request_serializer=req_cls.SerializeToString,
              response_deserializer=resp_cls.FromString)


def dial(path, authority="localhost", timeout=10, options=()):
    """A channel to a unix socket, ready (like kubelet's blocking dial), or an exception."""
    opts = list(options)
    if authority is not None:
        opts.append(("grpc.default_authority", authority))
    ch = grpc.insecure_channel("unix:" + str(path), options=opts)
    grpc.channel_ready_future(ch).result(timeout=timeout)
    return ch


def grpc_service(service, methods):
    """A generic handler of service from {method: (fn, request class, response class)}; a
    response class in a list ([cls]) makes a server-streaming method."""
    hs = {}
    for name, (fn, req, resp) in methods.items():
        mk = grpc.unary_unary_rpc_method_handler
        if isinstance(resp, list):
            mk, resp = grpc.unary_stream_rpc_method_handler, resp[0]
        hs[name] = mk(fn, request_deserializer=req.FromString,
                      response_serializer=resp.SerializeToString)
    return grpc.method_handlers_generic_handler(service, hs)


def serve_unix(path, handlers, workers=4):
    """A started grpc.server of handlers (one, or a tuple) on the unix socket path; an old
    socket there is replaced."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers))
    server.add_generic_rpc_handlers(handlers if isinstance(handlers, tuple) else (handlers,))
    if os.path.lexists(path):
        os.unlink(path)
    server.add_insecure_port("unix:" + str(path))
    server.start()
    return server


def plugin_registration(get_info, notify):
    """The plugin side of pluginregistration.Registration, served on a plugin's socket in
    plugins_registry: get_info(InfoRequest, context) -> PluginInfo,
    notify(RegistrationStatus, context) -> RegistrationStatusResponse."""
    _, rpb = protos()
    return grpc_service("pluginregistration.Registration", {
        "GetInfo": (get_info, rpb.InfoRequest, rpb.PluginInfo),
        "NotifyRegistrationStatus": (notify, rpb.RegistrationStatus,
                                     rpb.RegistrationStatusResponse)})


class DevicePluginClient:
    """The plugin's v1beta1.DevicePlugin, as kubelet's endpoint uses it."""

    def __init__(self, path, authority="localhost", timeout=10):
        pb, _ = protos()
        self.pb = pb
        self.path = str(path)
        self.channel = dial(path, authority, timeout)
        c = self.channel
        self._options = stub(c, DP + "GetDevicePluginOptions", pb.Empty, pb.DevicePluginOptions)
        self._law = stub(c, DP + "ListAndWatch", pb.Empty, pb.ListAndWatchResponse, stream=True)
        self._alloc = stub(c, DP + "Allocate", pb.AllocateRequest, pb.AllocateResponse)
        self._pref = stub(c, DP + "GetPreferredAllocation", pb.PreferredAllocationRequest,
                          pb.PreferredAllocationResponse)
        self._prestart = stub(c, DP + "PreStartContainer", pb.PreStartContainerRequest,
                              pb.PreStartContainerResponse)
        self.snapshots = []      # every ListAndWatchResponse received, in order
        self.stream_error = None  # set when the stream ended
        self.cond = threading.Condition()
        self._stream = None
        self._thread = None

    def options(self, timeout=30):
        return self._options(self.pb.Empty(), timeout=timeout)

    def allocate(self, *containers, timeout=30):
        req = self.pb.AllocateRequest(container_requests=[
            self.pb.ContainerAllocateRequest(devices_ids=list(ids)) for ids in containers])
        return self._alloc(req, timeout=timeout)

    def preferred(self, available, must, size, timeout=30):
        req = self.pb.PreferredAllocationRequest(container_requests=[
            self.pb.ContainerPreferredAllocationRequest(
                available_deviceIDs=list(available), must_include_deviceIDs=list(must),
                allocation_size=size)])
        return self._pref(req, timeout=timeout)

    def prestart(self, ids, timeout=30):
        return self._prestart(self.pb.PreStartContainerRequest(devices_ids=list(ids)),
                              timeout=timeout)

    def watch(self, notify=None):
        """Opens ListAndWatch (no deadline, never cancelled, as kubelet) and records snapshots
        in a thread; notify() is called after each one."""
        self._stream = self._law(self.pb.Empty())

        def run():
            try:
                for m in self._stream:
                    with self.cond:
                        self.snapshots.append(m)
                        self.cond.notify_all()
                    if notify:
                        notify()
                err = "stream ended"
            except grpc.RpcError as e:
                err = "%s: %s" % (e.code(), e.details())
            except Exception as e:  # noqa: BLE001 - recorded for the test to see
                err = repr(e)
            with self.cond:
                self.stream_error = err
                self.cond.notify_all()
            if notify:
                notify()

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def latest(self):
        with self.cond:
            return self.snapshots[-1] if self.snapshots else None

    def wait_snapshot(self, pred, timeout=60):
        """Waits for a snapshot satisfying pred (the latest one is checked); returns it."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                if self.snapshots and pred(self.snapshots[-1]):
                    return self.snapshots[-1]
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no matching snapshot on %s; last: %r, stream: %r" % (
                        self.path, summary(self.snapshots[-1]) if self.snapshots else None,
                        self.stream_error))
                self.cond.wait(min(left, 0.5))

    def close(self):
        if self._stream is not None:
            self._stream.cancel()
        self.channel.close()


def summary(snap):
    """(units, healthy units, sorted set of NUMA node lists) of a ListAndWatchResponse."""
    if snap is None:
        return None
    healthy = sum(1 for d in snap.devices if d.health == "Healthy")
    topo = sorted({tuple(n.ID for n in d.topology.nodes) if d.HasField("topology") else None
                   for d in snap.devices}, key=repr)
    return (len(snap.devices), healthy, topo)


class Registration:
    """One accepted registration: the request and the device-plugin connection kubelet keeps."""

    def __init__(self, resource, endpoint, client, options, mode, info=None):
        self.resource = resource
        self.endpoint = endpoint
        self.client = client
        self.options = options
        self.mode = mode
        self.info = info
        self.time = time.monotonic()


class PluginWatcher:
    """kubelet's plugin manager (pkg/kubelet/pluginmanager), what both kubelet stand-ins share
    (FakeKubelet's plugin-watcher mode, dra_kubelet.DRAKubelet): _scan_registry() polls
    registry_dir for sockets (not starting with '.'); a new one, or one with a changed inode or
    mtime, gets the handshake of operation_generator.go: dial (no :authority override),
    GetInfo (1 s deadline), the handler's validation and registration, then
    NotifyRegistrationStatus (5 s deadline). A handshake that fails before the plugin is in
    the actual state of world returns "retry" and, with retry, is tried again with exponential
    backoff (0.5 s doubling, at most 122 s), as the reconciler does; a socket that vanishes or
    is replaced deregisters what it registered.

    The stand-in has registry_dir, rpb (pluginregistration_pb2), cond, errors, notified
    [(socket, registered, error)], dial_timeout, calls _watch_reset() at start and when it
    stops, and defines:
      _handle_plugin(path, info) -> (error or None, "retry" or None, registration or None):
          the handler's ValidatePlugin and RegisterPlugin;
      _add_plugin(registration): records it (called under cond, after the notification);
      _forget_socket(path): drops what the socket at path registered."""

    def _watch_reset(self):
        self._seen = {}   # socket path -> (inode, mtime_ns)
        self._retry = {}  # socket path -> (next attempt time, backoff seconds, key)

    def _scan_registry(self, retry):
        """One pass of the reconciler over registry_dir."""
        try:
            entries = sorted(os.listdir(self.registry_dir))
        except FileNotFoundError:
            entries = []
        present = set()
        for e in entries:
            if e.startswith("."):
                continue
            p = self.registry_dir / e
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            if not stat.S_ISSOCK(st.st_mode):
                continue
            present.add(str(p))
            key = (st.st_ino, st.st_mtime_ns)
            r = self._retry.get(str(p))
            if self._seen.get(str(p)) == key:
                if r is None or r[2] != key or time.monotonic() < r[0]:
                    continue
            else:
                if self._seen.get(str(p)) is not None:
                    self._forget_socket(str(p))  # a new socket at the same path
                r = None
                self._retry.pop(str(p), None)
            self._seen[str(p)] = key
            if self._handshake(p) == "retry" and retry:
                backoff = min(r[1] * 2, 122.0) if r else 0.5
                self._retry[str(p)] = (time.monotonic() + backoff, backoff, key)
            else:
                self._retry.pop(str(p), None)
        for p in list(self._seen):
            if p not in present:
                del self._seen[p]
                self._retry.pop(p, None)
                self._forget_socket(p)

    def _watch_error(self, text):
        with self.cond:
            self.errors.append(text)
            self.cond.notify_all()

    def _handshake(self, path):
        """Registers the plugin at socket path; returns "retry" or None."""
        rpb = self.rpb
        try:
            # No :authority override, like operation_generator.go (grpcio's default).
            ch = dial(path, authority=None, timeout=self.dial_timeout)
        except Exception as e:  # noqa: BLE001
            self._watch_error("dial %s: %r" % (path, e))
            return "retry"
        try:
            try:
                info = stub(ch, REG + "GetInfo", rpb.InfoRequest, rpb.PluginInfo)(
                    rpb.InfoRequest(), timeout=1)
            except grpc.RpcError as e:
                self._watch_error("RegisterPlugin error -- failed to get plugin info using RPC "
                                  "GetInfo at socket %s, err: %s" % (path, e.details()))
                return "retry"
            err, outcome, reg = self._handle_plugin(path, info)
            notify = stub(ch, REG + "NotifyRegistrationStatus", rpb.RegistrationStatus,
                          rpb.RegistrationStatusResponse)
            try:
                notify(rpb.RegistrationStatus(plugin_registered=err is None, error=err or ""),
                       timeout=5)
            except grpc.RpcError as e:  # kubelet keeps a registered plugin all the same
                self._watch_error("notify %s: %s" % (path, e.details()))
            with self.cond:
                self.notified.append((str(path), err is None, err))
                if err:
                    self.errors.append(err)
                if reg is not None:
                    self._add_plugin(reg)
                self.cond.notify_all()
            return outcome
        finally:
            ch.close()


class FakeKubelet(PluginWatcher):
    def __init__(self, root, mode="kubelet-sock", checkpoint=True, dial_timeout=10,
                 watcher_retry=False, hidden_roots=()):
        pb, rpb = protos()
        self.pb, self.rpb = pb, rpb
        self.root = pathlib.Path(root)
        self.mode = mode
        self.plugin_dir = self.root / "device-plugins"
        self.registry_dir = self.root / "plugins_registry"
        self.kubelet_sock = self.plugin_dir / "kubelet.sock"
        self.checkpoint = self.plugin_dir / "kubelet_internal_checkpoint"
        self.plugin_dir.mkdir(parents=True, exist_ok=True, mode=0o750)
        # kubelet-sock mode stands for a kubelet without the plugin watcher's directory:
        # `--registration auto` (the default) takes the plugin watcher wherever
        # plugins_registry exists, as k8s-rdma-shared-dev-plugin does.
        if mode != "kubelet-sock":
            self.registry_dir.mkdir(parents=True, exist_ok=True, mode=0o750)
        if checkpoint and not self.checkpoint.exists():
            self.checkpoint.write_text('{"Data":{"PodDeviceEntries":null},"Checksum":1}\n')
        self.dial_timeout = dial_timeout
        self.cond = threading.Condition()
        self.requests = []       # every RegisterRequest received (kubelet-sock mode)
        self.registrations = []  # every accepted Registration, in order
        self.current = {}        # resource name -> latest Registration
        self.errors = []         # registrations kubelet refused (text)
        self.notified = []       # (socket, registered, error) sent in watcher mode
        self.generation = 0      # bumped by every (re)start
        self.refuse = 0          # refuse this many Register calls (UNKNOWN), as a sick kubelet
        self.register_delay = 0  # seconds a Register waits before dialing the plugin (a slow
                                 # kubelet, to open race windows deterministically)
        self._server = None
        self._live = False       # between start() and stop()
        self._watcher = None
        self._stop_watcher = threading.Event()
        self.watcher_retry = watcher_retry
        self._watch_reset()
        self.hidden_roots = [str(h).rstrip("/") + "/" for h in hidden_roots]
        self.dials = []          # every device-plugin endpoint kubelet dialled (its view)
        self.in_use = {}         # admit(): resource -> device IDs allocated to containers
        self.preferred_calls = []  # admit(): (resource, available, must, size, answer)

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self):
        with self.cond:
            self.generation += 1
            self._live = True
        if self.mode == "kubelet-sock":
            self._start_server()
        else:
            self._stop_watcher.clear()
            self._watcher = threading.Thread(target=self._watch_registry, daemon=True)
            self._watcher.start()
        return self

    def _start_server(self):
        self._server = serve_unix(self.kubelet_sock, grpc_service("v1beta1.Registration", {
            "Register": (self._register, self.pb.RegisterRequest, self.pb.Empty)}), workers=8)

    def stop(self):
        """kubelet goes away: its server stops, every plugin connection is closed."""
        with self.cond:
            self._live = False
        if self._server is not None:
            self._server.stop(None).wait(10)
            self._server = None
        if self._watcher is not None:
            self._stop_watcher.set()
            self._watcher.join(10)
            self._watcher = None
        with self.cond:
            regs = list(self.current.values())
            self.current = {}
            self._watch_reset()
        for r in regs:
            r.client.close()

    def close(self):
        self.stop()

    def restart(self):
        """As a real kubelet restart: stop, wipe the sockets of device-plugins, start."""
        self.stop()
        self.cleanup_plugin_dir()
        self.start()

    def cleanup_plugin_dir(self):
        """kubelet's CleanupPluginDirectory: unlink every socket, keep everything else."""
        for e in os.listdir(self.plugin_dir):
            p = self.plugin_dir / e
            try:
                if stat.S_ISSOCK(os.lstat(p).st_mode):
                    os.unlink(p)
            except FileNotFoundError:
                pass

    # -- kubelet-sock mode ---------------------------------------------------------------------
    def _register(self, req, context):
        with self.cond:
            gen = self.generation
            self.requests.append(req)
            self.cond.notify_all()
            refuse = self.refuse > 0
            if refuse:
                self.refuse -= 1
        if refuse:
            return self._refuse(context, "fake kubelet refuses this registration")
        if req.version != "v1beta1":
            return self._refuse(context, 'requested API version "%s" is not supported by '
                                'kubelet' % req.version)
        name = req.resource_name
        if name.count("/") != 1 or name.startswith("kubernetes.io/") or not all(name.split("/")):
            return self._refuse(context, 'the ResourceName "%s" is invalid' % name)
        path = self.plugin_dir / req.endpoint
        if self.register_delay:
            time.sleep(self.register_delay)
        try:
            reg = self._connect(name, path, "kubelet-sock")
        except Exception as e:  # noqa: BLE001 - kubelet answers any failure with the text
            with self.cond:
                stale = gen != self.generation or not self._live
            if stale:  # this kubelet is gone: its calls fail, nothing to record
                context.abort(grpc.StatusCode.UNAVAILABLE, "kubelet is shutting down")
            return self._refuse(context, "failed to dial device plugin: %r" % (e,))
        if not self._accept(reg, gen):
            context.abort(grpc.StatusCode.UNAVAILABLE, "kubelet is shutting down")
        return self.pb.Empty()

    def _refuse(self, context, msg):
        with self.cond:
            self.errors.append(msg)
            self.cond.notify_all()
        context.abort(grpc.StatusCode.UNKNOWN, msg)

    def _visible(self, path):
        """Raises as a dial in kubelet's mount namespace would for a path it cannot see."""
        p = str(path)
        with self.cond:
            self.dials.append(p)
        for h in self.hidden_roots:
            if p.startswith(h):
                raise FileNotFoundError(
                    "dial unix %s: connect: no such file or directory (not in kubelet's "
                    "mount namespace)" % p)

    def _connect(self, name, path, mode, info=None):
        self._visible(path)
        client = DevicePluginClient(path, timeout=self.dial_timeout)
        try:
            opts = client.options(timeout=self.dial_timeout)
            reg = Registration(name, str(path), client, opts, mode, info)
            client.watch(notify=self._notify)
        except Exception:
            client.close()
            raise
        return reg

    def _accept(self, reg, gen=None):
        """Records reg as the resource's endpoint; a registration that completes after its
        kubelet was stopped is dropped (False), as the dead kubelet's state is."""
        with self.cond:
            if gen is not None and (gen != self.generation or not self._live):
                stale = True
            else:
                stale = False
        if stale:
            reg.client.close()
            return False
        with self.cond:
            old = self.current.get(reg.resource)
            self.current[reg.resource] = reg
            self.registrations.append(reg)
            self.cond.notify_all()
        if old is not None:
            old.client.close()
        return True

    def _notify(self):
        with self.cond:
            self.cond.notify_all()

    # -- plugin-watcher mode: PluginWatcher's scan and handshake, a device-plugin handler --------
    def _watch_registry(self):
        while not self._stop_watcher.is_set():
            self._scan_registry(self.watcher_retry)
            with self.cond:
                self.cond.notify_all()
            self._stop_watcher.wait(0.2)

    def _handle_plugin(self, path, info):
        """kubelet's device-plugin handler: ValidatePlugin, then RegisterPlugin (connect the
        device plugin, GetDevicePluginOptions, ListAndWatch)."""
        err = None
        if info.type != "DevicePlugin":
            err = "no handler registered for plugin type: %s" % info.type
        elif "v1beta1" not in info.supported_versions:
            err = "none of the versions %s is supported" % list(info.supported_versions)
        elif info.name.count("/") != 1:
            err = 'the ResourceName "%s" is invalid' % info.name
        if err is not None:
            if info.type != "DevicePlugin":
                err = "RegisterPlugin error -- %s at socket %s" % (err, path)
            else:
                err = "RegisterPlugin error -- plugin validation failed with err: " + err
            return err, "retry", None  # not in the actual state of world: the reconciler retries
        endpoint = info.endpoint or str(path)
        with self.cond:
            refuse = self.refuse > 0
            if refuse:
                self.refuse -= 1
        try:
            if refuse:
                raise RuntimeError("fake kubelet refuses this registration")
            reg = self._connect(info.name, endpoint, "plugins-registry", info=(str(path), info))
        except Exception as e:  # noqa: BLE001
            return ("RegisterPlugin error -- plugin registration failed with err: %s" % (e,),
                    None, None)
        return None, None, reg

    def _add_plugin(self, reg):
        self._accept(reg)

    def _forget_socket(self, path):
        with self.cond:
            for name, reg in list(self.current.items()):
                if reg.info is not None and reg.info[0] == path:
                    del self.current[name]
                    reg.client.close()
            self.cond.notify_all()

    # -- what tests ask --------------------------------------------------------------------------
    def wait(self, pred, timeout=60, what="condition"):
        """Waits until pred() (called under the lock) is true; returns its value."""
        return waits.wait_until(self.cond, pred, timeout, lambda: (
            "kubelet: timed out waiting for %s; current=%r errors=%r" % (
                what, self.describe(), self.errors[-5:])))

    def describe(self):
        return {n: summary(r.client.latest()) for n, r in self.current.items()}

    def wait_registered(self, resource, units=None, healthy=None, after=0, timeout=60):
        """Waits for a registration of resource (the n-th or later, n = after + 1), current,
        whose stream is open and carries a snapshot of `units` units (`healthy` of them
        healthy); returns it."""

        def ok():
            regs = [r for r in self.registrations[after:] if r.resource == resource]
            cur = self.current.get(resource)
            if not regs or cur is None or cur is not regs[-1]:
                return None
            s = cur.client.latest()
            if s is None or cur.client.stream_error is not None:
                return None
            n, h, _ = summary(s)
            if units is not None and n != units:
                return None
            if healthy is not None and h != healthy:
                return None
            return cur

        return self.wait(ok, timeout, "registration of %s (%s units)" % (resource, units))

    def capacity(self):
        """{resource: (capacity, allocatable)} from the latest snapshots, as kubelet counts."""
        with self.cond:
            out = {}
            for n, r in sorted(self.current.items()):
                s = r.client.latest()
                if s is None:
                    continue
                total, healthy, _ = summary(s)
                out[n] = (total, healthy)
            return out


    # -- device manager: what kubelet does to admit a container -----------------------------
    def admit(self, resource, needed, reuse=(), numa=None, timeout=30):
        """kubelet's devicemanager devicesToAllocate, then Allocate, for one container asking
        for `needed` units of resource (pkg/kubelet/cm/devicemanager/manager.go):
          - reuse: devices the pod already holds (an init container's): allocated first, and
            passed to the plugin as must_include_deviceIDs;
          - available = healthy devices of the latest snapshot minus those in use
            (self.in_use[resource]) and the reused ones;
          - numa: the Topology Manager's hint (NUMA node IDs) or None (no hint): available
            devices split into aligned (TopologyInfo names a node of the hint), unaligned and
            no-affinity (no TopologyInfo; all of them without a hint);
          - when the remaining need is below the aligned count, the plugin is asked to prefer
            among aligned ∪ allocated, else all aligned ones are taken first and the plugin
            is asked among available ∪ allocated; then no-affinity, then unaligned;
          - GetPreferredAllocation is called only when the plugin's options advertise it, with
            allocation_size = the whole request (reused ones included); the answer is
            intersected with the candidates (a Go set: kubelet takes any of them).
        Returns (ids, AllocateResponse); the IDs are then in use."""
        reg = self.current[resource]
        snap = reg.client.latest()
        with self.cond:
            used = self.in_use.setdefault(resource, set())
        reuse = list(reuse)
        allocated = list(reuse)
        healthy = [d.ID for d in snap.devices if d.health == "Healthy"]
        available = sorted(set(healthy) - used - set(reuse))
        if len(available) < needed - len(allocated):
            raise RuntimeError("requested number of devices unavailable for %s. Requested: "
                               "%d, Available: %d" % (resource, needed - len(allocated),
                                                      len(available)))

        def take(ids):  # allocateRemainingFrom
            for i in sorted(ids):
                if len(allocated) >= needed:
                    break
                if i not in allocated:
                    allocated.append(i)
            return len(allocated) >= needed

        def prefer(candidates):
            if not reg.options.get_preferred_allocation_available:
                return []
            cands = sorted(set(candidates) | set(allocated))
            must = list(allocated)
            resp = reg.client.preferred(cands, must, needed, timeout=timeout)
            pref = list(resp.container_responses[0].deviceIDs)
            self.preferred_calls.append((resource, cands, must, needed, pref))
            return pref

        if len(allocated) < needed:
            by_id = {d.ID: d for d in snap.devices}
            aligned, unaligned, noaff = [], [], []
            for i in available:
                nodes = {n.ID for n in by_id[i].topology.nodes} if by_id[i].HasField(
                    "topology") else set()
                if numa is None or not nodes:
                    noaff.append(i)
                elif nodes & set(numa):
                    aligned.append(i)
                else:
                    unaligned.append(i)
            if needed - len(allocated) < len(aligned):
                if not take(set(prefer(aligned)) & set(aligned)):
                    take(aligned)
            elif not take(aligned):
                if not take(set(prefer(available)) & set(available)):
                    if not take(noaff):
                        take(unaligned)
        resp = reg.client.allocate(allocated, timeout=timeout)
        with self.cond:
            used.update(allocated)
        return allocated, resp

    def release(self, resource, ids):
        with self.cond:
            self.in_use.setdefault(resource, set()).difference_update(ids)


# ------------------------------------------------------------------------------------------------
class Process:
    """A child process (a daemon of ours), its stderr log collected line by line."""

    def __init__(self, args, env=None):
        self.args = list(args)
        self.lines = []
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     errors="replace", env=env)
        self._t = threading.Thread(target=self._read, daemon=True)
        self._t.start()

    def _read(self):
        for line in self.proc.stderr:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    @property
    def pid(self):
        return self.proc.pid

    def log(self):
        with self.cond:
            return "\n".join(self.lines)

    def count(self, *needles):
        with self.cond:
            return sum(1 for ln in self.lines if all(n in ln for n in needles))

    def wait_log(self, *needles, timeout=60, start=0):
        """Waits for a log line (index >= start) containing every needle; returns it."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for ln in self.lines[start:]:
                    if all(n in ln for n in needles):
                        return ln
                if self.proc.poll() is not None and self._t.is_alive() is False:
                    raise AssertionError("rdma-dp exited (%s) before logging %r:\n%s" % (
                        self.proc.returncode, needles, "\n".join(self.lines[-40:])))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("no log line with %r:\n%s" % (
                        needles, "\n".join(self.lines[-40:])))
                self.cond.wait(min(left, 0.5))

    def mark(self):
        """Index of the next log line, for wait_log(start=...)."""
        with self.cond:
            return len(self.lines)

    def signal(self, sig):
        self.proc.send_signal(sig)

    def stop(self, timeout=60):
        """SIGTERM and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise
        self._t.join(10)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


class Daemon(Process):
    """`rdma-dp serve` as a child process."""

    def __init__(self, binary, *, config, sysfs, dev, kubelet_root, registration=None,
                 verbose=False, extra=(), wrapper=()):
        """wrapper: a command the daemon runs under (valgrind ...), its pid being the
        daemon's (valgrind runs the guest in its own process)."""
        args = [*map(str, wrapper), str(binary), "serve", "--config-file", str(config),
                "--sysfs-root", str(sysfs), "--dev-root", str(dev), "--kubelet-root-dir",
                str(kubelet_root)]
        if registration:
            args += ["--registration", registration]
        if verbose:
            args.append("-v")
        args += list(extra)
        super().__init__(args)


def raw_connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(path))
    return s


def proc_status(pid):
    """{field: value} of /proc/<pid>/status, plus "fds": the number of open descriptors."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            k, _, v = ln.partition(":")
            out[k] = v.strip()
    out["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    return out


def rss_kib(pid):
    """Resident memory (VmRSS) of a process in KiB."""
    return int(proc_status(pid)["VmRSS"].split()[0])


def sanitized():
    return os.environ.get("RDP_SANITIZED", "").lower() in ("1", "on", "true", "yes")


# -- raw HTTP/2 peers (hyper-h2, Debian python3-h2) ----------------------------------------------
# grpcio hides the wire: these play a kubelet that is not ours, frame by frame, and show exactly
# what rdma-dp sends back (headers, trailers, END_STREAM placement, GOAWAY).

def grpc_msg(b):
    """A Length-Prefixed-Message, uncompressed."""
    return b"\0" + len(b).to_bytes(4, "big") + b


def request_headers(path, authority="localhost", extra=()):
    """Request HEADERS in grpc-go's order (createHeaderFields)."""
    return [(":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", authority), ("content-type", "application/grpc"),
            ("user-agent", "grpc-go/1.33.0"), ("te", "trailers"), *extra]


class RawClient:
    """An HTTP/2 client connection on a unix socket, driven by hand. Every event is kept in
    self.events; DATA is acknowledged (WINDOW_UPDATE) as it is read unless ack=False."""

    def __init__(self, path, rcvbuf=None, settings=None, timeout=10):
        import h2.config
        import h2.connection
        import h2.settings
        self.h2 = __import__("h2.events").events
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if rcvbuf:
            self.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.s.settimeout(timeout)
        self.s.connect(str(path))
        self.c = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8"))
        if settings:
            self.c.local_settings = h2.settings.Settings(client=True, initial_values=settings)
        self.c.initiate_connection()
        self.flush()
        self.events = []
        self.data = {}  # stream id -> bytes received
        self.eof = False

    def flush(self):
        out = self.c.data_to_send()
        if out:
            self.s.sendall(out)

    def send(self, sid, path, body=None, end=True, authority="localhost", extra=(),
             split=False):
        """HEADERS (+ DATA with body, END_STREAM if end). split: flush between the two."""
        self.c.send_headers(sid, request_headers(path, authority, extra),
                            end_stream=end and body is None)
        if split:
            self.flush()
            time.sleep(0.05)
        if body is not None:
            self.c.send_data(sid, grpc_msg(body), end_stream=end)
        self.flush()

    def pump(self, until=None, timeout=10, chunk=65536, delay=0, ack=True, ping=False):
        """Reads and handles frames until until(self) is true, EOF or timeout. delay: sleep
        between reads of chunk bytes (a slow reader). ping: a BDP ping after each DATA."""
        deadline = time.monotonic() + timeout
        while not (until and until(self)) and not self.eof and time.monotonic() < deadline:
            if delay:
                time.sleep(delay)
            self.s.settimeout(max(0.01, min(1.0, deadline - time.monotonic())))
            try:
                b = self.s.recv(chunk)
            except socket.timeout:
                continue
            except ConnectionResetError:
                b = b""
            if not b:
                self.eof = True
                break
            for e in self.c.receive_data(b):
                self.events.append(e)
                if isinstance(e, self.h2.DataReceived):
                    self.data[e.stream_id] = self.data.get(e.stream_id, b"") + e.data
                    if ack:
                        self.c.acknowledge_received_data(e.flow_controlled_length,
                                                         e.stream_id)
                    if ping:
                        self.c.ping(bytes([2, 4, 16, 16, 9, 14, 7, 7]))
            self.flush()
        return self

    def of(self, sid, cls):
        return [e for e in self.events if isinstance(e, cls) and
                getattr(e, "stream_id", sid) == sid]

    def ended(self, sid):
        return bool(self.of(sid, self.h2.StreamEnded) or self.of(sid, self.h2.StreamReset))

    def response(self, sid, timeout=10):
        """Waits for the end of stream sid: (headers, [message bytes], trailers or None)."""
        self.pump(lambda c: c.ended(sid), timeout)
        assert self.ended(sid), "stream %d did not end: %r" % (sid, self.events)
        hs = self.of(sid, self.h2.ResponseReceived)
        ts = self.of(sid, self.h2.TrailersReceived)
        return (hs[0].headers if hs else None, messages(self.data.get(sid, b"")),
                ts[0].headers if ts else None)

    def close(self):
        try:
            self.c.close_connection()
            self.flush()
        except Exception:  # noqa: BLE001
            pass
        self.s.close()


def messages(buf):
    """Splits Length-Prefixed-Messages; asserts nothing is left over."""
    out = []
    while buf:
        assert len(buf) >= 5 and buf[0] == 0, buf[:16]
        n = int.from_bytes(buf[1:5], "big")
        assert len(buf) >= 5 + n, "truncated message"
        out.append(buf[5:5 + n])
        buf = buf[5 + n:]
    return out


# ------------------------------------------------------------------------------------------------
class TestEnv:
    """What a daemon test needs, one for every test file: a short temp dir (unix socket paths
    stay far below 107 bytes) with a kubelet root, the fake kubelet in it, config files,
    private copies of fixture nodes, `rdma-dp serve` daemons on fixture nodes; close() runs
    the closers, stops the daemons (SIGTERM, then SIGKILL) and the kubelet, and removes the
    directory.

    mode, kubelet_opts: the FakeKubelet started at once; kubelet=False: none until
    start_kubelet() (a test that starts it late, or with options)."""

    def __init__(self, binary, fixtures, mode="kubelet-sock", prefix="rdpt", kubelet=True,
                 **kubelet_opts):
        self.binary = binary
        self.fixtures = pathlib.Path(fixtures) if fixtures else None
        self.dir = pathlib.Path(tempfile.mkdtemp(dir="/tmp", prefix=prefix))
        self.root = self.dir / "k"
        self.root.mkdir()
        self.kubelet = None
        self.daemons = []
        self.closers = []  # called first at close(): servers a test started, ...
        if kubelet:
            self.start_kubelet(mode, **kubelet_opts)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def start_kubelet(self, mode="kubelet-sock", **opts):
        """A FakeKubelet on the root, started; close() stops it."""
        self.kubelet = FakeKubelet(self.root, mode=mode, **opts).start()
        return self.kubelet

    def config(self, obj, name="config.json", periodic=300):
        """Writes a config file and returns its path: a list of resources as
        {"periodicUpdateInterval": periodic, "configList": obj}, a dict as indented JSON, a
        str as it is."""
        p = self.dir / name
        if isinstance(obj, str):
            p.write_text(obj)
        elif isinstance(obj, list):
            p.write_text(json.dumps({"periodicUpdateInterval": periodic, "configList": obj}))
        else:
            p.write_text(json.dumps(obj, indent=2) + "\n")
        return p

    def node_dir(self, node):
        """A fixture node's directory: a name under fixtures, or a node directory."""
        return pathlib.Path(node) if os.sep in str(node) else self.fixtures / node

    node = node_dir  # (DraEnv's node is the node's name)

    def copy(self, node):
        """A private copy of a fixture node (<dir>/<name>), to edit or break."""
        sys.path.insert(0, str(REPO / "tests" / "fixtures"))
        import sysfsgen  # noqa: E402
        return sysfsgen.copy_node(self.node_dir(node), self.dir / pathlib.Path(node).name)

    def daemon(self, config, node="seed000", registration=None, verbose=True, extra=(),
               sysfs=None, dev=None, kubelet_root=None, wrapper=(), binary=None):
        """`rdma-dp serve` on a fixture node (node(); sysfs, dev override its trees) with
        the kubelet root (or kubelet_root, e.g. another view of it); wrapper, binary: see
        Daemon (valgrind runs another build of the binary)."""
        n = self.node_dir(node)
        d = Daemon(binary or self.binary, config=config, sysfs=sysfs or n / "sys", dev=dev or n / "dev",
                   kubelet_root=kubelet_root or self.root, registration=registration,
                   verbose=verbose, extra=extra, wrapper=wrapper)
        self.daemons.append(d)
        return d

    def stop_daemons(self, timeout=60):
        for d in self.daemons:
            if d.proc.poll() is None:
                try:
                    d.stop(timeout)
                except Exception:  # noqa: BLE001
                    d.kill()

    def close(self):
        for c in self.closers:
            c()
        self.stop_daemons()
        if self.kubelet is not None:
            self.kubelet.close()
        shutil.rmtree(self.dir, ignore_errors=True)
