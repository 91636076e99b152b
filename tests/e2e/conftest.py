"""The e2e tests' cluster: one per pytest session (tests/e2e/README.md).

Environment (the Makefile's e2e target sets it):
  RDP_K8S_BIN    scripts/real-cluster/build.sh's bin/ (kube-*, kubelet, kubectl, etcd, containerd...)
  RDP_E2E_IMAGES scripts/real-cluster/images.sh's OUTDIR (rdp-pause, rdp-workload, rdma-dp)
  RDP_FIXTURES   a fixture tree (build-check/fixtures)
  RDP_E2E_WORK   an empty directory for this run (state, logs, certificates)
  RDMA_DP        the rdma-dp binary the image was built from
A missing component fails the session: make e2e builds them all, nothing here is optional.
"""
import fcntl
import os
import pathlib
import shutil
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import cluster as cl  # noqa: E402


def _need(var):
    v = os.environ.get(var)
    if not v:
        pytest.fail("%s is not set: run the e2e tests with `make e2e` (tests/e2e/README.md)" % var)
    return pathlib.Path(v)


LOCK = "/tmp/rdma-dp-e2e.lock"


def _lock():
    """One cluster per machine at a time: holds LOCK unless a parent (run.sh) already does
    (its descriptor is inherited); returns the file to keep open, or None."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink("/proc/self/fd/" + fd) == LOCK:
                return None
        except OSError:
            continue
    f = open(LOCK, "a")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


@pytest.fixture(scope="session")
def cluster():
    bindir = _need("RDP_K8S_BIN")
    for b in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet",
              "kubectl", "containerd", "containerd-shim-runc-v2", "ctr", "crictl"):
        if not (bindir / b).is_file():
            pytest.fail("%s missing in %s: run scripts/real-cluster/build.sh" % (b, bindir))
    if os.geteuid() != 0:
        pytest.fail("the e2e cluster needs root (kubelet, containerd, mount namespaces)")
    lock = _lock()  # held until the session ends
    work = _need("RDP_E2E_WORK")
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    c = cl.Cluster(bindir, work, _need("RDP_E2E_IMAGES"), _need("RDP_FIXTURES"))
    try:
        c.up()
    except BaseException:
        c.down()
        raise
    print("\ne2e cluster up: %s; apiserver ready %.1f s, node Ready %.1f s" % (
        ", ".join("%s=%s" % kv for kv in c.versions().items()),
        c.timings["apiserver_ready"], c.timings["node_ready"]))
    yield c
    c.down()
    if lock is not None:
        lock.close()
