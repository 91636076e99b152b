"""A second node for the e2e cluster: the real-kernel stage's QEMU guest (TCG) running
containerd, runc and kubelet as node `rdp-guest`, with real soft-RoCE devices
(tests/e2e/README.md, "The guest node").

The guest is scripts/real-kernel's kernel and initramfs (prepare.sh) with
scripts/real-cluster/guest-node.sh as its runner; it sees the host's / read-only through an
overlay, so the same kubelet, containerd, runc, images and checkout. Its only network is QEMU
user networking with restrict=on and two rules, both on 127.0.0.1 of the host:
  * guestfwd 10.0.2.100:6443 -> the host's kube-apiserver (127.0.0.1:6443), one `busybox nc`
    per connection; the guest's kubeconfig names the server certificate's DNS name
    (tls-server-name), since 10.0.2.100 is not in it;
  * hostfwd 127.0.0.1:KUBELET_PORT -> the guest's kubelet (the same port), for logs, exec and
    port-forward. kubelet refuses a loopback node IP, so it runs with --cloud-provider=external
    and the test plays the cloud provider: it sets the node's InternalIP to 127.0.0.1 (the
    API server then dials 127.0.0.1:KUBELET_PORT, the node's daemon endpoint) and removes the
    node.cloudprovider.kubernetes.io/uninitialized taint.
The node's client certificate (system:node:rdp-guest) comes from the cluster's CA. The guest's
writable 9p export is <work>/guest (etc/, pki/, logs/); it powers off when `stop` appears there.
"""
import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import cluster as cl

REPO = pathlib.Path(__file__).resolve().parents[2]
NAME = "rdp-guest"
KUBELET_PORT = 10350
API_GUEST = "10.0.2.100"
UNINIT_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"


def kernel_cache():
    return pathlib.Path(os.environ.get("RDP_KERNEL_CACHE") or pathlib.Path(
        os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "rdma-dp" / "kernel")


def missing():
    """Why the guest node cannot run here (None when it can): QEMU and a prepared kernel."""
    if not shutil.which("qemu-system-x86_64"):
        return "no qemu-system-x86_64 (scripts/install-deps.sh kernel)"
    k = kernel_cache()
    if not any(k.glob("linux-image-*/done")):
        return "no guest kernel in %s (make check-kernel, or scripts/real-kernel/prepare.sh, prepares it)" % k
    if not shutil.which("busybox") and not os.path.exists("/bin/busybox"):
        return "no busybox (the API server relay)"
    return None


class GuestNode:
    def __init__(self, c, mem="3G"):
        self.c = c
        self.dir = c.work / "guest"
        self.mem = mem
        self.qemu = None
        self.timings = {}
        self.api_port = 6443   # the host's kube-apiserver

    # ------------------------------------------------------------------ set-up
    def make_pki(self):
        pki = self.dir / "pki"
        pki.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.c.pki / "ca.crt", pki / "ca.crt")
        run = lambda *a: subprocess.run(["openssl"] + list(a), cwd=pki, check=True,  # noqa: E731
                                        capture_output=True)
        run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/O=system:nodes/CN=system:node:%s" % NAME,
            "-keyout", "kubelet.key", "-out", "kubelet.csr")
        (pki / "kubelet.ext").write_text("extendedKeyUsage=clientAuth\n"
                                         "keyUsage=critical,digitalSignature,keyEncipherment\n")
        run("x509", "-req", "-in", "kubelet.csr", "-CA", str(self.c.pki / "ca.crt"),
            "-CAkey", str(self.c.pki / "ca.key"), "-CAcreateserial", "-days", "30",
            "-out", "kubelet.crt", "-extfile", "kubelet.ext")

    def write_configs(self):
        g = "/run/rdp-node"   # the export, in the guest
        etc = self.dir / "etc"
        (etc / "cni").mkdir(parents=True, exist_ok=True)
        (etc / "cni" / "10-rdp-lo.conflist").write_text(json.dumps(
            {"cniVersion": "1.0.0", "name": "rdp-lo", "plugins": [{"type": "loopback"}]}) + "\n")
        (etc / "containerd.toml").write_text("""version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "localhost/rdp-pause:1"
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "%(runc)s"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "%(g)s/etc/cni"
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
""" % {"g": g, "runc": shutil.which("runc") or "/usr/sbin/runc"})
        cfg = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": "0.0.0.0", "port": KUBELET_PORT, "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
            "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
            "cgroupDriver": "cgroupfs",   # cgroup v2 in the guest, no systemd
            "failSwapOn": False,
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": g + "/pki/ca.crt"}},
            "authorization": {"mode": "Webhook"},
            "rotateCertificates": False, "serverTLSBootstrap": False,
            "imageGCHighThresholdPercent": 100,
            "evictionHard": {"nodefs.available": "0%", "nodefs.inodesFree": "0%",
                             "imagefs.available": "0%"},
            "cgroupsPerQOS": True, "enforceNodeAllocatable": ["pods"],
            "resolvConf": "/etc/resolv.conf", "clusterDomain": "cluster.local",
            "syncFrequency": "5s", "nodeStatusUpdateFrequency": "5s",
            "fileCheckFrequency": "5s",
            # TCG is slow: give the runtime time
            "runtimeRequestTimeout": "10m",
        }
        (etc / "kubelet.yaml").write_text(json.dumps(cfg, indent=1) + "\n")
        (etc / "kubelet.conf").write_text(
            "apiVersion: v1\nkind: Config\n"
            "clusters:\n- name: rdp\n  cluster:\n    server: https://%s:6443\n"
            "    tls-server-name: kubernetes\n    certificate-authority: %s/pki/ca.crt\n"
            "users:\n- name: kubelet\n  user:\n    client-certificate: %s/pki/kubelet.crt\n"
            "    client-key: %s/pki/kubelet.key\n"
            "contexts:\n- name: rdp\n  context: {cluster: rdp, user: kubelet}\n"
            "current-context: rdp\n" % (API_GUEST, g, g, g))

    def start(self):
        t0 = time.monotonic()
        if self.dir.exists():
            shutil.rmtree(self.dir)
        (self.dir / "logs").mkdir(parents=True)
        self.make_pki()
        self.write_configs()
        p = subprocess.run(["sh", str(REPO / "scripts" / "real-kernel" / "prepare.sh")],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise cl.ClusterError("scripts/real-kernel/prepare.sh: %s" % p.stderr.strip()[-2000:])
        kdir = pathlib.Path(p.stdout.strip().splitlines()[-1])
        kver = kdir.name[len("linux-image-"):]
        initrd = sorted(kdir.glob("initrd-*.cpio.gz"))[0]
        append = " ".join([
            "console=ttyS0", "panic=-1", "quiet", "loglevel=4",
            "rdp_guest=%s" % (REPO / "scripts" / "real-cluster" / "guest-node.sh"),
            "rdp_modules=%s" % (kdir / "root" / "lib" / "modules" / kver),
            "rdp_bin=%s" % self.c.bin, "rdp_images=%s" % self.c.images])
        accel = ["-accel", "tcg", "-cpu", "max"]
        flags = open("/proc/cpuinfo").read().split()
        if os.access("/dev/kvm", os.W_OK) and ("vmx" in flags or "svm" in flags):  # as run.sh
            accel = ["-accel", "kvm", "-cpu", "host"]
        nic = ("user,model=virtio-net-pci,restrict=on,"
               "hostfwd=tcp:127.0.0.1:%d-:%d,"
               "guestfwd=tcp:%s:6443-cmd:%s nc 127.0.0.1 %d" % (
                   KUBELET_PORT, KUBELET_PORT, API_GUEST, shutil.which("busybox") or "/bin/busybox",
                   self.api_port))
        argv = ["qemu-system-x86_64"] + accel + [
            "-m", self.mem, "-smp", "2", "-nographic", "-no-reboot",
            "-kernel", str(kdir / "root" / "boot" / ("vmlinuz-" + kver)), "-initrd", str(initrd),
            "-append", append,
            "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
            "-virtfs", "local,path=%s,mount_tag=node,security_model=none,multidevs=remap" % self.dir,
            "-nic", nic]
        self.qemu = self.c.start("qemu-guest", argv)
        self.timings["qemu_started"] = time.monotonic() - t0
        cl.wait_for("the guest's containerd and kubelet (%s)" % (self.dir / "logs" / "guest.log"),
                    lambda: self._check() or (self.dir / "up").exists(), 600, 1)
        self.timings["kubelet_started"] = time.monotonic() - t0
        cl.wait_for("node %s registered" % NAME, lambda: self._check() or self.c.kubectl(
            "get", "node", NAME, check=False, timeout=30).returncode == 0, 300, 1)
        self.timings["registered"] = time.monotonic() - t0
        self.initialize()
        cl.wait_for("node %s Ready" % NAME, lambda: self._check() or self.ready(), 300, 1)
        self.timings["ready"] = time.monotonic() - t0
        return self

    def _check(self):
        """Raises ClusterError when the guest has failed or powered off."""
        f = self.dir / "failed"
        if f.exists():
            raise cl.ClusterError("the guest node failed: %s\n%s" % (f.read_text().strip(), self.log_tail()))
        if self.qemu.poll() is not None:
            raise cl.ClusterError("QEMU exited (%s)\n%s\n%s" % (
                self.qemu.returncode, self.c.log_tail("qemu-guest"), self.log_tail()))
        return False

    def log_tail(self, name="guest", lines=30):
        try:
            return "\n".join((self.dir / "logs" / (name + ".log")).read_text(
                errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no %s log)" % name

    def initialize(self):
        """What an external cloud provider does for a new node: its address (127.0.0.1, where
        the hostfwd listens) and the uninitialized taint removed."""
        self.c.kubectl("patch", "node", NAME, "--subresource=status", "--type=merge", "-p", json.dumps(
            {"status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                      {"type": "Hostname", "address": NAME}]}}))
        self.c.kubectl("taint", "node", NAME, UNINIT_TAINT + "-", check=False)

    def ready(self):
        p = self.c.kubectl("get", "node", NAME, "-o", "json", check=False, timeout=30)
        if p.returncode != 0:
            return False
        conds = json.loads(p.stdout)["status"].get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    def stop(self):
        if self.qemu is None:
            return
        with contextlib.suppress(OSError):
            (self.dir / "stop").write_text("")
        try:
            self.qemu.wait(30)
        except subprocess.TimeoutExpired:
            self.qemu.send_signal(signal.SIGKILL)
            self.qemu.wait(10)
        with contextlib.suppress(Exception):
            self.c.kubectl("delete", "node", NAME, "--wait=false", check=False)
        self.qemu = None
