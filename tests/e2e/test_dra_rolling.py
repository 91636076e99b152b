"""A rolling update of rdma-dp's DRA driver on the real cluster (issue 21, point 7): deploy/dra's
DaemonSet (maxSurge 1, maxUnavailable 0, POD_UID from the downward API) restarted with
`kubectl rollout restart` while a pod with a prepared claim runs and another pod is being
created. The real kubelet (1.33+ keeps several instances of one driver, calls the newest
connected one, wipes the pool only 30 s after the last one left) and the real DaemonSet
controller decide; the test watches:

  * the node's ResourceSlices through a kubectl watch for the whole rollout: no DELETED event,
    the same slice objects before and after (no window without the pool);
  * two driver pods side by side at some point, each with its own registration socket
    (<driver>-<pod uid>-reg.sock) in the node's plugins_registry;
  * the pod created during the rollout: its claim prepared (spec and checkpoint entry);
  * the old pod's claim, prepared by the old instance: unprepared by the new one after.

The deployment is test_dra.py's module fixture (its overlay, the dgx-h100 fixture node).
"""
import json
import re
import subprocess
import threading
import time

import cluster as cl
from test_dra import (DRIVER, apply, checkpoint, container_id, delete_pod, dra,  # noqa: F401
                      driver_pods, example, pod_claim, published, run_one_nic_pod, slices,
                      spec_file, with_image)


class SliceWatch:
    """`kubectl get resourceslices --watch --output-watch-events -o json`: every event of this
    driver's slices, (type, name), from start() to stop()."""

    def __init__(self, c):
        self.c = c
        self.events = []
        self.proc = None
        self.t = None

    def start(self):
        self.proc = subprocess.Popen(
            [str(self.c.bin / "kubectl"), "--kubeconfig", str(self.c.kc / "admin.conf"), "get",
             "resourceslices", "--watch", "--output-watch-events", "-o", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        # the watch starts with ADDED for what exists: wait for those
        cl.wait_for("the slice watch's first events", lambda: self.events, 30, 0.2)
        return self

    def _read(self):
        dec = json.JSONDecoder()
        buf = ""
        for line in self.proc.stdout:
            buf += line
            while True:
                s = buf.lstrip()
                if not s:
                    buf = ""
                    break
                try:
                    ev, end = dec.raw_decode(s)
                except ValueError:
                    break
                buf = s[end:]
                obj = ev.get("object") or {}
                if (obj.get("spec") or {}).get("driver") == DRIVER:
                    self.events.append((ev.get("type"), obj["metadata"]["name"]))

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.t.join(10)
        return self.events


def reg_sockets(c):
    d = c.node_path("/var/lib/kubelet/plugins_registry")
    return sorted(p.name for p in d.iterdir() if p.name.startswith(DRIVER + "-"))


def test_rollout_restart_without_a_gap(dra):
    c = dra
    old_pods = driver_pods(c)
    assert len(old_pods) == 1
    old_uid = old_pods[0]["metadata"]["uid"]
    assert reg_sockets(c) == ["%s-%s-reg.sock" % (DRIVER, old_uid)]
    ds = c.get("daemonset", "-n", "kube-system", "rdma-dp-dra")
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] == 1
    # a pod with a claim, prepared by the old instance
    uid_a, _, cid_a = run_one_nic_pod(c, "rdma-roll-a")
    names = sorted(s["metadata"]["name"] for s in published(c))
    watch = SliceWatch(c).start()
    seen_two = []

    def observe():
        pods = driver_pods(c)
        if len(pods) >= 2 and not seen_two:
            seen_two.append(([p["metadata"]["uid"] for p in pods], reg_sockets(c)))
        return pods

    t0 = time.monotonic()
    c.kubectl("rollout", "restart", "daemonset/rdma-dp-dra", "-n", "kube-system")
    # the surge: the new pod beside the old one; a workload pod created meanwhile
    cl.wait_for("a second rdma-dp-dra pod", lambda: len(observe()) >= 2, 120, 0.2)
    docs = with_image(example("one-nic.yaml"))
    pod = next(d for d in docs if d["kind"] == "Pod")
    pod["metadata"]["name"] = "rdma-roll-b"
    apply(c, docs)
    def old_gone():
        return old_uid not in [p["metadata"]["uid"] for p in observe()] and len(driver_pods(c)) == 1
    try:
        cl.wait_for("the old rdma-dp-dra pod gone", old_gone, 90, 0.5)
    except cl.ClusterError as e:
        # Seen once in a full make e2e (2026-12-03): the surge pod Running and Ready for
        # minutes, the old one never deleted, kube-controller-manager's DaemonSet controller
        # having logged "read version ... is not as new as written version" when the
        # DaemonSet was created. What this test checks is rdma-dp's side of the overlap, so
        # the DaemonSet is touched (an annotation: no new rollout) to have the controller
        # sync it again, and the state it found is printed.
        pods = [(p["metadata"]["name"], p["metadata"]["uid"] == old_uid,
                 [(x["type"], x["status"]) for x in p.get("status", {}).get("conditions", [])])
                for p in driver_pods(c)]
        print("\n%s; DaemonSet status %s; pods %s: annotating the DaemonSet" % (
            e, json.dumps(c.get("daemonset", "-n", "kube-system", "rdma-dp-dra").get("status")), pods))
        c.kubectl("annotate", "daemonset", "-n", "kube-system", "rdma-dp-dra", "--overwrite",
                  "rdma-dp.io/e2e-resync=%d" % time.time())
        cl.wait_for("the old rdma-dp-dra pod gone (after the resync)", old_gone, 150, 0.5)
    c.kubectl("rollout", "status", "daemonset/rdma-dp-dra", "-n", "kube-system", "--timeout=180s",
              timeout=200)
    c.wait_pod("default", "rdma-roll-b", timeout=180)
    elapsed = time.monotonic() - t0
    new_uid = driver_pods(c)[0]["metadata"]["uid"]
    assert new_uid != old_uid
    # both registered at once, each under its own name
    assert seen_two, "never saw two driver pods"
    uids, socks = seen_two[0]
    assert old_uid in uids and new_uid in uids
    cl.wait_for("only the new registration socket left",
                lambda: reg_sockets(c) == ["%s-%s-reg.sock" % (DRIVER, new_uid)], 60, 0.5)
    # the pod created during the rollout: its claim prepared
    claim_b = pod_claim(c, "rdma-roll-b", "nic")
    uid_b = claim_b["metadata"]["uid"]
    assert spec_file(c, uid_b).exists() and checkpoint(c)[uid_b]["state"] == "prepared"
    # the old pod's claim is still prepared, its container untouched
    assert checkpoint(c)[uid_a]["state"] == "prepared" and container_id(c, "rdma-roll-a") == cid_a
    # kubelet's wipe would come 30 s after the last instance left: wait past it
    time.sleep(35)
    events = watch.stop()
    print("\nrollout restart: %.1f s; slice events during it: %r" % (elapsed, events))
    assert not [e for e in events if e[0] == "DELETED"], events
    assert sorted(s["metadata"]["name"] for s in slices(c)) == names
    # the old pod's claim is unprepared by the new instance
    delete_pod(c, "rdma-roll-a")
    cl.wait_for("rdma-roll-a's claim unprepared", lambda: not spec_file(c, uid_a).exists(), 60)
    assert uid_a not in checkpoint(c)
    new_pod = driver_pods(c)[0]["metadata"]["name"]
    log = c.kubectl("logs", "-n", "kube-system", new_pod, check=False).stdout
    assert re.search(r"event=claim-unprepared .*%s" % uid_a, log), log[-3000:]
    assert "event=rolling-update uid=%s" % new_uid in log, log[-3000:]
    delete_pod(c, "rdma-roll-b")
    cl.wait_for("rdma-roll-b's claim unprepared", lambda: not spec_file(c, uid_b).exists(), 60)
