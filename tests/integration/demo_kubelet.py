#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Demo driver: runs `rdma-dp serve` on a fixture node against the fake kubelet and prints
what `kubectl describe node` would show and what a pod asking for one unit would get.

    demo_kubelet.py RDMA_DP CONFIG SYSFS_ROOT DEV_ROOT [--metrics]

--metrics: the daemon also serves its metrics endpoint (on a free loopback port), and the demo
ends with an excerpt of GET /metrics (the README quotes it).
"""
import http.client
import os
import re
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402


# What the README quotes of GET /metrics: one HCA's port, and one resource of the plugin.
METRICS_EXCERPT = re.compile(
    r'^rdma_dp_(port_info|state_id|rate_bytes_per_second|port_data_(transmitted|received)_bytes'
    r'_total|symbol_error_total|local_ack_timeout_errors_total)\{device="mlx5_0"'
    r'|^rdma_dp_pma_saturated\{device="mlx5_0",port="1",counter="symbol_error"'
    r'|^rdma_dp_(resource_(units|healthy_units|usable_devices|registered)|allocate_requests_total'
    r'|registrations_total)\{resource="rdma/compute_ib_numa0"\}'
    r'|^rdma_dp_rescans_total\{cause="start"\}|^# TYPE rdma_dp_(port_data_transmitted_bytes_total'
    r'|resource_units|allocate_requests_total) ')


def print_metrics(d):
    port = re.search(r"address=127\.0\.0\.1:(\d+)", d.wait_log("event=metrics-serving")).group(1)
    c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
    c.request("GET", "/metrics")
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    print()
    print("== GET /metrics (serve --metrics-address), %s: an excerpt" %
          r.getheader("Content-Type"))
    for ln in body.splitlines():
        if METRICS_EXCERPT.search(ln):
            print(ln)


def main():
    args = sys.argv[1:]
    with_metrics = "--metrics" in args
    args = [a for a in args if a != "--metrics"]
    if len(args) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    binary, config, sysfs, dev = args
    import json
    resources = ["%s/%s" % (r.get("resourcePrefix", "rdma"), r["resourceName"])
                 for r in json.load(open(config))["configList"]]
    tmp = tempfile.mkdtemp(dir="/tmp", prefix="rdpdemo")
    kl = K.FakeKubelet(os.path.join(tmp, "kubelet")).start()
    d = K.Daemon(binary, config=config, sysfs=sysfs, dev=dev, kubelet_root=kl.root,
                 extra=("--metrics-address", "127.0.0.1:0") if with_metrics else ())
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
        if with_metrics:
            print_metrics(d)
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
