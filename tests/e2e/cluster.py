"""A real single-node Kubernetes cluster for the e2e tests (tests/e2e/README.md).

The components are the ones scripts/real-cluster/build.sh builds from Go modules: etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, containerd (+ its runc shim, Debian's
runc) and kubelet, all on 127.0.0.1. Nothing of the host is changed but for empty mount-point
directories (removed again) and the cgroups kubelet makes (removed at teardown):

  * containerd and kubelet run in a private mount namespace, the "node", held by one process.
    There /dev is a copy of the host's whose infiniband/ is the fixture node's (harmless c 1:3
    nodes, podman_run.harmless_node), /var/lib/kubelet, /var/run/cdi, /etc/cdi and
    /run/containerd are directories of this run, and /sys/class gains the fixture's
    infiniband/ (the seeds' pods mount /sys/class/infiniband from the host). Tests reach files
    there through /proc/<holder>/root.
  * every process the cluster starts, and every process orphaned below it (containerd's shims,
    the containers), is a child of this Python process (PR_SET_CHILD_SUBREAPER): teardown stops
    them by PID, no name matching.

Certificates come from openssl (one CA); kubeconfigs are written here. Logs are in
<work>/logs/<component>.log.
"""
import contextlib
import ctypes
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
import podman_run  # noqa: E402  (harmless_node)

NODE = "127.0.0.1"
API = "https://127.0.0.1:6443"
PR_SET_CHILD_SUBREAPER = 36
MEMLOCK_SOFT = 64 * 1024
# Directories the node namespace mounts over; created on the host when missing (empty), and
# removed again at teardown if this run created them.
MOUNTPOINTS = ("/var/lib/kubelet", "/var/log/pods", "/var/log/containers", "/var/run/cdi", "/etc/cdi",
               "/run/containerd", "/opt/rdma-dp")

HOLDER_SCRIPT = r"""
set -eu
W="$RDP_WORK"
# /dev: a tmpfs copy of the host's, infiniband/ a bind of the fixture node's dev/infiniband
# (live: a test that unplugs a device there changes what containerd finds).
mount -t tmpfs -o mode=755,size=64m rdp-e2e-dev "$W/ns/dev"
cp -a -x /dev/. "$W/ns/dev/"
rm -rf "$W/ns/dev/infiniband"
mkdir "$W/ns/dev/infiniband"
mount --bind "$W/node/dev/infiniband" "$W/ns/dev/infiniband"
for d in /dev/*/; do
    d="${d%/}"
    if mountpoint -q "$d"; then mount --rbind "$d" "$W/ns/dev/${d#/dev/}"; fi
done
mount --move "$W/ns/dev" /dev
# /sys/class with the fixture's infiniband classes beside the host's own.
mount --bind /sys/class "$W/ns/sysclass"
mount -t tmpfs -o mode=755,size=1m rdp-e2e-sysclass /sys/class
for c in "$W"/ns/sysclass/*; do
    n=${c##*/}
    mkdir "/sys/class/$n"
    mount --bind "$c" "/sys/class/$n"
done
for c in "$W"/node/sys/class/infiniband*; do
    n=${c##*/}
    [ -e "/sys/class/$n" ] || { mkdir "/sys/class/$n"; mount --bind "$c" "/sys/class/$n"; }
done
mount --bind "$W/kubelet" /var/lib/kubelet
mount --bind "$W/pod-logs" /var/log/pods
mount --bind "$W/container-logs" /var/log/containers
mount --bind "$W/cdi" /var/run/cdi
mount --bind "$W/etccdi" /etc/cdi
mount --bind "$W/run-containerd" /run/containerd
mount --bind "$W/opt-rdma-dp" /opt/rdma-dp
echo ready
exec sleep 2147483647
"""


class ClusterError(AssertionError):
    pass


def _subreaper():
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise ClusterError("prctl(PR_SET_CHILD_SUBREAPER): errno %d" % ctypes.get_errno())


def _children(pid):
    """PIDs whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(")") + 2:].split()
        if int(fields[1]) == pid:
            out.append(int(d))
    return out


def wait_for(what, fn, timeout, interval=0.25):
    """fn() until it returns something true; ClusterError naming `what` after timeout s."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except ClusterError:
            raise  # a component died: no use waiting
        except Exception as e:  # noqa: BLE001 (the last failure is the one reported)
            last = e
        if time.monotonic() > deadline:
            raise ClusterError("timed out after %.0f s waiting for %s%s" %
                               (timeout, what, " (last error: %s)" % last if last else ""))
        time.sleep(interval)


class Cluster:
    """bindir: build.sh's bin/; work: an empty directory of this run; images: images.sh's
    OUTDIR; fixtures: a fixture tree (build-*/fixtures); node: the fixture node to serve."""

    def __init__(self, bindir, work, images, fixtures, node="seed000"):
        self.bin = pathlib.Path(bindir)
        self.work = pathlib.Path(work)
        self.images = pathlib.Path(images)
        self.fixtures = pathlib.Path(fixtures)
        self.node_fixture = node
        self.procs = {}          # name -> Popen
        self.holder = None
        self.created_dirs = []
        self.pki = self.work / "pki"
        self.kc = self.work / "kubeconfig"
        self.logs = self.work / "logs"
        self.timings = {}

    # ---------------------------------------------------------------- set-up
    def versions(self):
        out = {}
        for name, argv in (("kubernetes", ["kubelet", "--version"]), ("etcd", ["etcd", "--version"]),
                           ("containerd", ["containerd", "--version"]), ("crictl", ["crictl", "--version"])):
            p = subprocess.run([str(self.bin / argv[0])] + argv[1:], capture_output=True, text=True)
            out[name] = (p.stdout or p.stderr).splitlines()[0].strip() if (p.stdout or p.stderr) else "?"
        p = subprocess.run(["runc", "--version"], capture_output=True, text=True)
        out["runc"] = p.stdout.splitlines()[0].strip() if p.stdout else "?"
        return out

    def _openssl(self, *args):
        p = subprocess.run(["openssl"] + list(args), cwd=self.pki, capture_output=True, text=True)
        if p.returncode != 0:
            raise ClusterError("openssl %s: %s" % (" ".join(args[:2]), p.stderr.strip()))

    def make_pki(self):
        self.pki.mkdir(parents=True, exist_ok=True)
        self._openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
                      "-subj", "/CN=rdp-e2e-ca", "-keyout", "ca.key", "-out", "ca.crt",
                      "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        leaves = {
            "apiserver": ("/CN=kube-apiserver", "serverAuth",
                          # 10.0.2.100: the address of the API server relay inside the guest
                          # node's QEMU user network (guest.py), for in-cluster clients there
                          "IP:127.0.0.1,IP:10.0.0.1,IP:10.0.2.100,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
                          "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"),
            "admin": ("/O=system:masters/CN=rdp-e2e-admin", "clientAuth", None),
            "kubelet": ("/O=system:nodes/CN=system:node:%s" % NODE, "clientAuth", None),
            "kcm": ("/CN=system:kube-controller-manager", "clientAuth", None),
            "scheduler": ("/CN=system:kube-scheduler", "clientAuth", None),
            "apiserver-kubelet-client": ("/O=system:masters/CN=kube-apiserver-kubelet-client",
                                         "clientAuth", None),
        }
        for name, (subj, eku, san) in leaves.items():
            self._openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", subj,
                          "-keyout", name + ".key", "-out", name + ".csr")
            ext = self.pki / (name + ".ext")
            lines = ["extendedKeyUsage=" + eku, "keyUsage=critical,digitalSignature,keyEncipherment"]
            if san:
                lines.append("subjectAltName=" + san)
            ext.write_text("\n".join(lines) + "\n")
            self._openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                          "-CAcreateserial", "-days", "30", "-out", name + ".crt", "-extfile", ext.name)
        self._openssl("genrsa", "-out", "sa.key", "2048")
        self._openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub")
        self.kc.mkdir(parents=True, exist_ok=True)
        for user in ("admin", "kubelet", "kcm", "scheduler"):
            (self.kc / (user + ".conf")).write_text(
                "apiVersion: v1\nkind: Config\n"
                "clusters:\n- name: rdp\n  cluster:\n    server: %s\n    certificate-authority: %s\n"
                "users:\n- name: %s\n  user:\n    client-certificate: %s\n    client-key: %s\n"
                "contexts:\n- name: rdp\n  context: {cluster: rdp, user: %s}\n"
                "current-context: rdp\n" % (API, self.pki / "ca.crt", user, self.pki / (user + ".crt"),
                                            self.pki / (user + ".key"), user))

    def write_configs(self, kubelet_extra=None):
        etc = self.work / "etc"
        (etc / "cni").mkdir(parents=True, exist_ok=True)
        # hostNetwork pods only: a loopback network makes the runtime's network ready.
        (etc / "cni" / "10-rdp-lo.conflist").write_text(json.dumps(
            {"cniVersion": "1.0.0", "name": "rdp-lo", "plugins": [{"type": "loopback"}]}) + "\n")
        (etc / "containerd.toml").write_text("""version = 3
root = "%(w)s/containerd"
state = "%(w)s/run"
[grpc]
  address = "%(w)s/run/containerd.sock"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "localhost/rdp-pause:1"
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  restrict_oom_score_adj = %(restrict)s
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "%(runc)s"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "%(w)s/etc/cni"
[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
""" % {"w": self.work, "runc": shutil.which("runc") or "/usr/sbin/runc",
            "restrict": "false" if _has_cap(24) else "true"})
        cfg = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": NODE, "port": 10250, "readOnlyPort": 0,
            "healthzBindAddress": NODE, "healthzPort": 10248,
            "containerRuntimeEndpoint": "unix://%s/run/containerd.sock" % self.work,
            "cgroupDriver": "systemd" if _cgroup_v2() and os.path.exists("/run/systemd/system") else "cgroupfs",
            "failSwapOn": False,
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(self.pki / "ca.crt")}},
            "authorization": {"mode": "Webhook"},
            "rotateCertificates": False, "serverTLSBootstrap": False,
            "imageGCHighThresholdPercent": 100,
            "evictionHard": {"nodefs.available": "0%", "nodefs.inodesFree": "0%",
                             "imagefs.available": "0%"},
            "cgroupsPerQOS": True, "enforceNodeAllocatable": ["pods"],
            "resolvConf": "/etc/resolv.conf", "clusterDomain": "cluster.local",
            "syncFrequency": "5s", "nodeStatusUpdateFrequency": "5s",
            "fileCheckFrequency": "5s",
        }
        if not _cgroup_v2():
            cfg["failCgroupV1"] = False   # kubelet >= 1.35 refuses cgroup v1 without it
        if not _has_cap(24):
            cfg["oomScoreAdj"] = 0        # -999 needs CAP_SYS_RESOURCE
        cfg.update(kubelet_extra or {})
        (etc / "kubelet.yaml").write_text(json.dumps(cfg, indent=1) + "\n")

    def make_node(self):
        """The fixture node, harmless: <work>/node/{sys,dev}."""
        dest = self.work / "node"
        podman_run.harmless_node(self.fixtures, self.node_fixture, dest)
        return dest

    def start_holder(self):
        for d in ("ns/dev", "ns/sysclass", "kubelet", "pod-logs", "container-logs", "cdi", "etccdi", "run-containerd", "opt-rdma-dp", "run",
                  "containerd", "data"):
            (self.work / d).mkdir(parents=True, exist_ok=True)
        for m in MOUNTPOINTS:
            if not os.path.exists(m):
                os.makedirs(m)
                self.created_dirs.append(m)
        env = dict(os.environ, RDP_WORK=str(self.work))
        self.holder = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", HOLDER_SCRIPT],
            stdout=subprocess.PIPE, stderr=open(self.logs / "holder.log", "w"), env=env,
            start_new_session=True, text=True)
        line = self.holder.stdout.readline().strip()
        if line != "ready":
            self.holder.wait(5)
            raise ClusterError("the node namespace could not be set up: %s" %
                               (self.logs / "holder.log").read_text().strip())

    def node_path(self, path):
        """A path inside the node namespace, as seen from here. Symbolic links on the way are
        resolved inside that namespace (/var/run -> /run: an absolute link followed through
        /proc/<pid>/root would land in this namespace's /run)."""
        root = pathlib.Path("/proc/%d/root" % self.holder.pid)
        todo = [p for p in str(path).split("/") if p]
        done = []
        for _ in range(64):
            if not todo:
                break
            part = todo.pop(0)
            cur = root.joinpath(*done, part)
            if os.path.islink(cur):
                target = os.readlink(cur)
                todo = [p for p in target.split("/") if p] + todo
                if target.startswith("/"):
                    done = []
            elif part == "..":
                done = done[:-1]
            elif part != ".":
                done.append(part)
        return root.joinpath(*done, *todo)

    # ---------------------------------------------------------------- processes
    def start(self, name, argv, in_node=False, env=None):
        if name in self.procs and self.procs[name].poll() is None:
            raise ClusterError("%s is already running" % name)
        argv = [str(a) for a in argv]
        if in_node:
            argv = ["nsenter", "-t", str(self.holder.pid), "-m", "--"] + argv
        log = open(self.logs / (name + ".log"), "a")
        log.write("==== %s start: %s\n" % (time.strftime("%H:%M:%S"), " ".join(argv)))
        log.flush()
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            env=dict(os.environ, **(env or {})))
        return self.procs[name]

    def stop(self, name, sig=signal.SIGTERM, timeout=20):
        p = self.procs.get(name)
        if p is None or p.poll() is not None:
            return
        p.send_signal(sig)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)

    def running(self, name):
        p = self.procs.get(name)
        return p is not None and p.poll() is None

    def check_running(self, name):
        if not self.running(name):
            raise ClusterError("%s exited (%s); its log: %s" % (
                name, self.procs[name].returncode, self.log_tail(name)))

    def log_tail(self, name, lines=25):
        try:
            return "\n".join((self.logs / (name + ".log")).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    # ---------------------------------------------------------------- components
    def start_etcd(self):
        self.start("etcd", [self.bin / "etcd", "--name", "rdp", "--data-dir", self.work / "data" / "etcd",
                            "--listen-client-urls", "http://127.0.0.1:2379",
                            "--advertise-client-urls", "http://127.0.0.1:2379",
                            "--listen-peer-urls", "http://127.0.0.1:2380",
                            "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
                            "--initial-cluster", "rdp=http://127.0.0.1:2380",
                            "--listen-metrics-urls", "http://127.0.0.1:2381",
                            "--unsafe-no-fsync", "--log-level", "warn"])

    def start_apiserver(self):
        p = self.pki
        self.start("kube-apiserver", [
            self.bin / "kube-apiserver", "--etcd-servers=http://127.0.0.1:2379",
            "--bind-address=127.0.0.1", "--secure-port=6443",
            # The kubernetes Service's endpoint would be this address, and a loopback one is
            # refused there: no reconciler (pods reach the API server at 127.0.0.1:6443, by
            # KUBERNETES_SERVICE_HOST/PORT in their spec; there is no kube-proxy).
            "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
            "--tls-cert-file=%s" % (p / "apiserver.crt"), "--tls-private-key-file=%s" % (p / "apiserver.key"),
            "--client-ca-file=%s" % (p / "ca.crt"),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file=%s" % (p / "sa.pub"),
            "--service-account-signing-key-file=%s" % (p / "sa.key"),
            "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction", "--allow-privileged=true",
            "--kubelet-client-certificate=%s" % (p / "apiserver-kubelet-client.crt"),
            "--kubelet-client-key=%s" % (p / "apiserver-kubelet-client.key"),
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            "--profiling=false", "--v=1"])

    def start_kcm(self):
        k = self.kc / "kcm.conf"
        self.start("kube-controller-manager", [
            self.bin / "kube-controller-manager", "--kubeconfig=%s" % k,
            "--authentication-kubeconfig=%s" % k, "--authorization-kubeconfig=%s" % k,
            "--bind-address=127.0.0.1", "--secure-port=10257", "--leader-elect=false",
            "--use-service-account-credentials=true", "--root-ca-file=%s" % (self.pki / "ca.crt"),
            "--service-account-private-key-file=%s" % (self.pki / "sa.key"),
            "--cluster-signing-cert-file=%s" % (self.pki / "ca.crt"),
            "--cluster-signing-key-file=%s" % (self.pki / "ca.key"),
            "--controllers=*", "--concurrent-gc-syncs=5", "--v=1"])

    def start_scheduler(self):
        k = self.kc / "scheduler.conf"
        self.start("kube-scheduler", [
            self.bin / "kube-scheduler", "--kubeconfig=%s" % k, "--authentication-kubeconfig=%s" % k,
            "--authorization-kubeconfig=%s" % k, "--bind-address=127.0.0.1", "--secure-port=10259",
            "--leader-elect=false", "--v=1"])

    def start_containerd(self):
        env = {"PATH": "%s:%s" % (self.bin, os.environ.get("PATH", "/usr/bin:/bin"))}
        # Containers inherit the runtime's RLIMIT_MEMLOCK: a soft limit of 64 KiB (the kernel's
        # default, what many nodes' runtimes have) under this machine's hard one, so that the
        # memlock hook's raise is seen even where raising the hard limit is not permitted.
        self.start("containerd", ["prlimit", "--memlock=%d:%s" % (MEMLOCK_SOFT, _memlock_hard()), "--",
                                  self.bin / "containerd", "--config", self.work / "etc" / "containerd.toml"],
                   in_node=True, env=env)

    def start_kubelet(self):
        self.start("kubelet", [self.bin / "kubelet", "--config=%s" % (self.work / "etc" / "kubelet.yaml"),
                               "--kubeconfig=%s" % (self.kc / "kubelet.conf"),
                               "--hostname-override=%s" % NODE, "--v=2"], in_node=True)

    def ctr(self, *args, check=True):
        p = subprocess.run(["nsenter", "-t", str(self.holder.pid), "-m", "--", str(self.bin / "ctr"),
                            "-a", str(self.work / "run" / "containerd.sock"), "-n", "k8s.io"] + list(args),
                           capture_output=True, text=True, timeout=300)
        if check and p.returncode != 0:
            raise ClusterError("ctr %s: %s" % (" ".join(args), p.stderr.strip()))
        return p

    def crictl(self, *args, check=True):
        p = subprocess.run([str(self.bin / "crictl"), "-r", "unix://%s/run/containerd.sock" % self.work,
                            "-t", "30s"] + list(args), capture_output=True, text=True, timeout=120)
        if check and p.returncode != 0:
            raise ClusterError("crictl %s: %s" % (" ".join(args), p.stderr.strip()))
        return p

    # ---------------------------------------------------------------- the API
    def kubectl(self, *args, input=None, check=True, timeout=120):
        p = subprocess.run([str(self.bin / "kubectl"), "--kubeconfig", str(self.kc / "admin.conf")] +
                           [str(a) for a in args], input=input, capture_output=True, text=True,
                           timeout=timeout)
        if check and p.returncode != 0:
            raise ClusterError("kubectl %s: %s" % (" ".join(map(str, args)), p.stderr.strip()))
        return p

    def get(self, *args):
        """kubectl get ... -o json, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apiserver_ready(self):
        p = self.kubectl("get", "--raw", "/readyz", check=False, timeout=15)
        return p.returncode == 0 and p.stdout.strip() == "ok"

    def node(self):
        return self.get("node", NODE)

    def node_ready(self, since=None):
        """The node's Ready condition is True (and, with since, a kubelet heartbeat at or after
        since: the Ready of a kubelet that has just restarted, not its predecessor's)."""
        p = self.kubectl("get", "node", NODE, "-o", "json", check=False, timeout=15)
        if p.returncode != 0:
            return False
        conds = json.loads(p.stdout)["status"].get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" and
                   (since is None or c.get("lastHeartbeatTime", "") >= since) for c in conds)

    def wait_pod(self, ns, name, phase="Running", timeout=120):
        def ok():
            pod = self.get("pod", "-n", ns, name)
            st = pod.get("status", {})
            if st.get("phase") == phase:
                if phase != "Running":
                    return pod
                cs = st.get("containerStatuses", [])
                if cs and all(c.get("ready") or c.get("state", {}).get("running") for c in cs):
                    return pod
            return None
        try:
            return wait_for("pod %s/%s %s" % (ns, name, phase), ok, timeout)
        except ClusterError as e:
            raise ClusterError("%s\n%s" % (e, self.kubectl("describe", "pod", "-n", ns, name,
                                                            check=False).stdout[-3000:]))

    # ---------------------------------------------------------------- whole cluster
    def up(self):
        t0 = time.monotonic()
        _subreaper()
        for d in (self.work, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        self.make_pki()
        self.write_configs()
        self.make_node()
        self.start_holder()
        self.start_etcd()
        self.start_apiserver()
        wait_for("kube-apiserver /readyz", lambda: self.check_running("kube-apiserver") or self.apiserver_ready(),
                 180, 0.5)
        self.timings["apiserver_ready"] = time.monotonic() - t0
        self.start_kcm()
        self.start_scheduler()
        self.start_containerd()
        wait_for("containerd", lambda: self.check_running("containerd") or
                 self.crictl("info", check=False).returncode == 0, 60, 0.25)
        for img in ("rdp-pause.tar", "rdp-workload.tar", "rdma-dp.tar"):
            self.ctr("images", "import", str(self.images / img))
        self.start_kubelet()
        wait_for("node %s Ready" % NODE, lambda: self.check_running("kubelet") or self.node_ready(),
                 180, 0.5)
        self.timings["node_ready"] = time.monotonic() - t0
        wait_for("the default ServiceAccount", lambda: self.kubectl(
            "get", "sa", "default", "-n", "default", check=False).returncode == 0, 60, 0.5)
        return self

    def reconfigure_kubelet(self, **extra):
        """kubelet restarted with extra KubeletConfiguration fields (the rest as up() wrote
        them); the CPU and memory managers' state files go, as a policy change requires."""
        self.stop("kubelet")
        self.write_configs(kubelet_extra=extra)
        for f in ("cpu_manager_state", "memory_manager_state"):
            with contextlib.suppress(FileNotFoundError):
                (self.work / "kubelet" / f).unlink()
        since = utcnow()
        self.start_kubelet()
        wait_for("node Ready, reported by the new kubelet", lambda: self.check_running("kubelet") or
                 self.node_ready(since), 120, 0.5)

    def restart_kubelet(self, wait_ready=True):
        self.stop("kubelet")
        since = utcnow()
        self.start_kubelet()
        if wait_ready:
            wait_for("node Ready, reported by the restarted kubelet", lambda: self.check_running("kubelet") or
                     self.node_ready(since), 120, 0.5)

    def down(self):
        """Stops everything this cluster started, by PID; removes kubelet's cgroups."""
        if self.holder is not None and self.running("containerd"):
            with contextlib.suppress(Exception):
                self.stop("kubelet")
                self.crictl("rmp", "-a", "-f", check=False)
        for name in ("kubelet", "containerd", "kube-scheduler", "kube-controller-manager",
                     "kube-apiserver", "etcd"):
            with contextlib.suppress(Exception):
                self.stop(name)
        # Orphans (shims, containers) were reparented to us: end them by PID.
        for _ in range(50):
            kids = [k for k in _children(os.getpid()) if self.holder is None or k != self.holder.pid]
            kids = [k for k in kids if not any(p.pid == k and p.poll() is not None
                                               for p in self.procs.values())]
            if not kids:
                break
            for k in kids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(k, signal.SIGKILL)
            for k in kids:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(k, os.WNOHANG)
            time.sleep(0.1)
        if self.holder is not None:
            with contextlib.suppress(ProcessLookupError):
                self.holder.kill()
            self.holder.wait(10)
        _remove_cgroups("kubepods")
        for m in reversed(self.created_dirs):
            with contextlib.suppress(OSError):
                os.rmdir(m)
        self.created_dirs = []


def utcnow():
    """Now, as the API server writes times (RFC 3339, seconds, UTC): comparable as strings."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _has_cap(bit):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    return False


def _memlock_hard():
    import resource
    hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)[1]
    return "unlimited" if hard == resource.RLIM_INFINITY else str(hard)


def has_cap_sys_resource():
    return _has_cap(24)


def _cgroup_v2():
    return subprocess.run(["stat", "-fc", "%T", "/sys/fs/cgroup"], capture_output=True,
                       text=True).stdout.strip() == "cgroup2fs"


def _remove_cgroups(name):
    """rmdir <hierarchy>/name and everything below it, deepest first, in every hierarchy."""
    roots = []
    base = "/sys/fs/cgroup"
    if _cgroup_v2():
        roots.append(os.path.join(base, name))
    else:
        for h in os.listdir(base):
            roots.append(os.path.join(base, h, name))
    for r in roots:
        if not os.path.isdir(r):
            continue
        for d, _dirs, _files in sorted(os.walk(r), key=lambda t: -t[0].count("/")):
            with contextlib.suppress(OSError):
                os.rmdir(d)


# -------------------------------------------------------------------- kubelet's gRPC APIs
_pr = None


def podresources_pb2():
    """The pod-resources messages (podresources.proto), generated once per process."""
    global _pr
    if _pr is None:
        import tempfile
        out = tempfile.mkdtemp(dir="/tmp", prefix="rdpe2eproto")
        subprocess.run(["protoc", "--python_out=" + out, "-I", str(HERE), str(HERE / "podresources.proto")],
                       check=True)
        sys.path.insert(0, out)
        import podresources_pb2 as m  # noqa: E402
        _pr = m
    return _pr


def podresources(c, method, req=None):
    """Calls kubelet's pod-resources API (List, Get, GetAllocatableResources) of cluster c."""
    import grpc
    import kubelet as kl
    pr = podresources_pb2()
    kinds = {"List": (pr.ListPodResourcesRequest, pr.ListPodResourcesResponse),
             "Get": (pr.GetPodResourcesRequest, pr.GetPodResourcesResponse),
             "GetAllocatableResources": (pr.AllocatableResourcesRequest, pr.AllocatableResourcesResponse)}
    req_cls, resp_cls = kinds[method]
    ch = grpc.insecure_channel("unix:" + str(c.node_path("/var/lib/kubelet/pod-resources/kubelet.sock")))
    try:
        return kl.stub(ch, "/v1.PodResourcesLister/" + method, req_cls, resp_cls)(
            req if req is not None else req_cls(), timeout=10)
    finally:
        ch.close()


def container_devices(c, ns, pod):
    """{container: {resource: sorted device IDs}} of a pod, from pod-resources Get."""
    pr = podresources_pb2()
    r = podresources(c, "Get", pr.GetPodResourcesRequest(pod_name=pod, pod_namespace=ns))
    out = {}
    for ct in r.pod_resources.containers:
        held = out.setdefault(ct.name, {})
        for d in ct.devices:  # one entry per resource and NUMA node
            held[d.resource_name] = sorted(held.get(d.resource_name, []) + list(d.device_ids))
    return out


def plugin_allocate(c, socket, ids):
    """Calls Allocate on a device plugin's socket (its path on the node), as kubelet does;
    returns the ContainerAllocateResponse for one container holding ids."""
    import grpc
    import kubelet as kl
    dp, _ = kl.protos()
    ch = grpc.insecure_channel("unix:" + str(c.node_path(socket)))
    try:
        resp = kl.stub(ch, kl.DP + "Allocate", dp.AllocateRequest, dp.AllocateResponse)(
            dp.AllocateRequest(container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)]),
            timeout=10)
    finally:
        ch.close()
    return resp.container_responses[0]


def swap_node(c, fixture):
    """Makes the served fixture node another one, in place: the directories the node
    namespace and the plugin's hostPath hold stay, their contents change."""
    tmp = c.work / ("node-" + fixture)
    if tmp.exists():
        shutil.rmtree(tmp)
    podman_run.harmless_node(c.fixtures, fixture, tmp)
    node = c.work / "node"
    for sub in ("sys", "dev/infiniband"):
        for e in list((node / sub).iterdir()):
            if e.is_dir() and not e.is_symlink():
                shutil.rmtree(e)
            else:
                e.unlink()
        for e in (tmp / sub).iterdir():
            os.rename(e, node / sub / e.name)
    shutil.rmtree(tmp)
    c.node_fixture = fixture


def restart_apiserver(c, down_s=0):
    """Stops kube-apiserver, waits down_s seconds, starts it again and waits for /readyz."""
    c.stop("kube-apiserver")
    time.sleep(down_s)
    c.start_apiserver()
    wait_for("kube-apiserver /readyz after restart",
             lambda: c.check_running("kube-apiserver") or c.apiserver_ready(), 180, 0.5)
