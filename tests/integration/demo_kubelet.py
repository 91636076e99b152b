#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Demo driver: runs `rdma-dp serve` on a fixture node against the fake kubelet and prints
what `kubectl describe node` would show and what a pod asking for one unit would get.

    demo_kubelet.py RDMA_DP CONFIG SYSFS_ROOT DEV_ROOT
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402


def main():
    if len(sys.argv) != 5:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    binary, config, sysfs, dev = sys.argv[1:]
    import json
    resources = ["%s/%s" % (r.get("resourcePrefix", "rdma"), r["resourceName"])
                 for r in json.load(open(config))["configList"]]
    tmp = tempfile.mkdtemp(dir="/tmp", prefix="rdpdemo")
    kl = K.FakeKubelet(os.path.join(tmp, "kubelet")).start()
    d = K.Daemon(binary, config=config, sysfs=sysfs, dev=dev, kubelet_root=kl.root)
    rc = 1
    try:
        regs = {r: kl.wait_registered(r, timeout=60) for r in resources}
        for r, reg in regs.items():
            reg.client.wait_snapshot(lambda s: True, timeout=60)
        print("== rdma-dp serve: daemon log (stderr, key=value)")
        for ln in d.log().splitlines():
            print("   " + ln)
        print()
        print("== what `kubectl describe node` would show (from kubelet's ListAndWatch streams)")
        cap = kl.capacity()
        w = max(len(r) for r in cap) + 2
        for title, idx in (("Capacity:", 0), ("Allocatable:", 1)):
            print(title)
            for r in sorted(cap):
                print("  %-*s %d" % (w, r + ":", cap[r][idx]))
        print()
        print("== topology kubelet's Topology Manager sees (NUMA nodes per unit)")
        for r in sorted(regs):
            _, _, topo = K.summary(regs[r].client.latest())
            print("  %-*s %s" % (w, r + ":", ", ".join(
                "none" if t is None else "NUMA " + ",".join(map(str, t)) for t in topo)))
        print()
        shared = sorted(r for r in regs
                        if not regs[r].options.get_preferred_allocation_available)
        exclusive = sorted(r for r in regs
                           if regs[r].options.get_preferred_allocation_available)
        if shared:
            print("== Allocate: char devices a container gets for 1 unit (DeviceSpecs, "
                  "host path = container path)")
            shown = "rdma/compute_ib_numa0" if "rdma/compute_ib_numa0" in shared else shared[0]
            for r in shared:
                resp = regs[r].client.allocate(["0"])
                devs = resp.container_responses[0].devices
                print("  %-*s %d devices" % (w, r + ":", len(devs)))
                if r == shown:
                    detail = devs
            print()
            print("== a pod with `resources.limits: {%s: 1}` gets:" % shown)
            for s in detail:
                print("  %s  (permissions %s)" % (s.host_path, s.permissions))
        for r in exclusive:
            print()
            print("== %s is exclusive: kubelet admits pods as its device manager does "
                  "(Topology Manager hint, then GetPreferredAllocation)" % r)
            for pod, n, numa in (("train-0", 4, None), ("infer-0", 1, {1}),
                                 ("infer-1", 1, {1}), ("infer-2", 2, {1})):
                ids, resp = kl.admit(r, n, numa=numa)
                devs = sorted(s.host_path for s in resp.container_responses[0].devices)
                print("  pod %-8s %d NIC%s, NUMA hint %-5s -> %s" % (
                    pod, n, "s" if n > 1 else " ",
                    "none" if numa is None else ",".join(map(str, sorted(numa))),
                    " ".join(ids)))
                print("  %-12s devices: %s" % ("", " ".join(devs)))
            _, _, must, size, pref = kl.preferred_calls[0]
            print("  (train-0: GetPreferredAllocation(size %d) answered %s: one socket's "
                  "NICs)" % (size, " ".join(pref)))
        rc = 0
    finally:
        code = d.stop()
        kl.stop()
        shutil.rmtree(tmp, ignore_errors=True)
        print()
        print("== daemon stopped with SIGTERM: exit %d, its sockets removed" % code)
        if code != 0:
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
