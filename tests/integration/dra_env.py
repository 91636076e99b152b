# SPDX-License-Identifier: MIT
"""What an end-to-end `rdma-dp dra` test needs: a short temp dir with a kubelet root, the fake
apiserver (node "node-a" with a uid, a token file, its CA), the DRA kubelet stand-in, the
driver as a child process, and allocated ResourceClaims.

    env = DraEnv(rdma_dp, fixtures_dir, wipe_delay=2)
    d = env.driver("<fixture node>")            # rdma-dp dra ... (flags: dra_args below)
    env.kubelet.wait_registered(DRIVER)
    env.api.wait(lambda: env.api.slices("node-a"))
    c = env.claim("c1", [("nic", "node-a", "pci-0000-18-00-0")])
    resp = env.kubelet.prepare([c])
    env.close()

Run with Debian's /usr/bin/python3.
"""
import datetime
import shutil
import uuid

import dra_kubelet
import fake_apiserver
import kubelet as kl

DRIVER = "rdma.rdma-dp.io"
NODE = "node-a"


def dra_args(binary, *, node, kubelet_root, api_server, token_file, ca_file, cdi_dir, sysfs,
             dev, extra=()):
    """The command line of `rdma-dp dra` (the one place that knows its flags)."""
    return [str(binary), "dra", "--node-name", node, "--kubelet-root-dir", str(kubelet_root),
            "--api-server", api_server, "--token-file", str(token_file), "--ca-file",
            str(ca_file), "--cdi-spec-dir", str(cdi_dir), "--sysfs-root", str(sysfs),
            "--dev-root", str(dev), *map(str, extra)]


def _now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_claim(name, ns="default", devices=(), driver=DRIVER, uid=None, node=NODE,
               pod=None, allocated=True, device_class="rdma-nic"):
    """A resource.k8s.io/v1 ResourceClaim as the scheduler leaves it: spec.devices.requests
    (one `exactly` request per distinct request name, count = its devices),
    status.allocation.devices.results [{request, driver, pool, device}], a nodeSelector for
    the node, and status.reservedFor the pod. devices: [(request, pool, device)] or
    [(request, pool, device, driver)] to mix drivers (e.g. a GPU and a NIC).
    pod: (name, uid) or None for a generated one. allocated=False: no status."""
    uid = uid or str(uuid.uuid4())
    pod = pod or ("pod-" + name, str(uuid.uuid4()))
    results, counts = [], {}
    for d in devices:
        req, pool, dev = d[:3]
        drv = d[3] if len(d) > 3 else driver
        results.append({"request": req, "driver": drv, "pool": pool, "device": dev})
        counts[req] = counts.get(req, 0) + 1
    claim = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "uid": uid, "creationTimestamp": _now(),
                     "finalizers": ["resource.kubernetes.io/delete-protection"]},
        "spec": {"devices": {"requests": [
            {"name": r, "exactly": {"deviceClassName": device_class,
                                    "allocationMode": "ExactCount", "count": n}}
            for r, n in counts.items()]}},
        "status": {},
    }
    if allocated:
        claim["status"] = {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
                "allocationTimestamp": _now()},
            "reservedFor": [{"resource": "pods", "name": pod[0], "uid": pod[1]}]}
    return claim


class DraDaemon(kl.Process):
    """`rdma-dp dra` as a child process: kubelet.Process's log helpers (wait_log, mark, count,
    stop, kill, signal) over any argv."""


class DraEnv(kl.TestEnv):
    """kubelet.TestEnv's directory and daemon handling, with the fake apiserver, a CDI dir and
    the DRA kubelet stand-in in place of the device-plugin kubelet."""

    def __init__(self, binary, fixtures, node=NODE, wipe_delay=dra_kubelet.WIPE_DELAY,
                 start_kubelet=True, prefix="rdpdra", node_uid=None):
        super().__init__(binary, fixtures, prefix=prefix, kubelet=False)
        self.node = node
        self.cdi_dir = self.dir / "cdi"
        self.cdi_dir.mkdir()
        self.api = fake_apiserver.FakeAPIServer(node=node, node_uid=node_uid,
                                                workdir=self.dir / "api").start()
        self.kubelet = dra_kubelet.DRAKubelet(self.root, node=node, api=self.api,
                                              wipe_delay=wipe_delay)
        if start_kubelet:
            self.kubelet.start()

    @property
    def node_uid(self):
        return self.api.node_uid(self.node)

    @property
    def checkpoint(self):
        return self.root / "plugins" / DRIVER / "checkpoint.json"

    def args(self, fixture, extra=()):
        n = self.node_dir(fixture)
        return dra_args(self.binary, node=self.node, kubelet_root=self.root,
                        api_server=self.api.base_url, token_file=self.api.token_file,
                        ca_file=self.api.ca_path, cdi_dir=self.cdi_dir, sysfs=n / "sys",
                        dev=n / "dev", extra=extra)

    def driver(self, fixture, extra=(), verbose=True, wrapper=()):
        """Starts `rdma-dp dra` on a fixture node (a name under fixtures or a directory)."""
        a = [*map(str, wrapper), *self.args(fixture, extra=(("-v",) if verbose else ()) +
                                           tuple(extra))]
        d = DraDaemon(a)
        self.daemons.append(d)
        return d

    def claim(self, name, devices, ns="default", **kw):
        """make_claim(...) stored in the fake apiserver; returns the stored claim."""
        kw.setdefault("node", self.node)
        return self.api.put_claim(make_claim(name, ns, devices, **kw))

    def cdi_specs(self):
        return sorted(p.name for p in self.cdi_dir.iterdir())

    def close(self):
        self.stop_daemons(30)
        self.kubelet.close()
        self.api.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
