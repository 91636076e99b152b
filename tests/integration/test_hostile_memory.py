# SPDX-License-Identifier: MIT
"""Bounded memory for any peer: `rdma-dp serve` on the dgx-h100 node (4 resources, 4 sockets)
under a stream of maximal hostile requests on every socket at once must keep its peak resident
memory (VmHWM) under 8 MiB, and answer a normal Allocate afterwards.

The peers are hostile.py's (its docstring lists them: oversized and over-the-limit requests,
raw peers streaming into a 4 GiB message or never reading, silent ones), per socket and all
concurrently, bounded in count and time; unix sockets only. make bench reports the same
figure.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402
from hostile import HostileLoad, vmhwm_kib  # noqa: E402  (the load, shared with make bench)
from test_serve import CONFIGS, env  # noqa: E402,F401

LIMIT_KIB = 8 * 1024
RESOURCES = ["rdma/compute_ib", "rdma/storage_roce", "rdma/compute_ib_numa0",
             "rdma/compute_ib_numa1"]

pytestmark = pytest.mark.skipif(
    K.sanitized(), reason="ASan's shadow memory and quarantine make VmHWM meaningless")


def test_peak_rss_under_hostile_requests(env):
    kl = env.start_kubelet()
    d = env.daemon(CONFIGS / "dgx.json", node="dgx-h100", verbose=False)
    for res in RESOURCES:
        kl.wait_registered(res, units=63, healthy=63)
    pb, _ = K.protos()
    paths = [kl.plugin_dir / (r.split("/")[1] + ".sock") for r in RESOURCES]
    before = vmhwm_kib(d.proc.pid)

    with HostileLoad(paths, pb) as h:
        h.run()
        peak = vmhwm_kib(d.proc.pid)
        print(f"\nVmHWM before {before} KiB, under hostile requests {peak} KiB, "
              f"VmRSS after {K.rss_kib(d.proc.pid)} KiB")
        assert not h.errors, h.errors[:5]
        assert peak < LIMIT_KIB, f"peak RSS {peak} KiB (limit {LIMIT_KIB} KiB)"
    # still serving: a normal Allocate on every socket
    for p in paths:
        c = K.DevicePluginClient(p)
        try:
            resp = c.allocate(["0"])
            assert len(resp.container_responses) == 1
            assert resp.container_responses[0].devices
        finally:
            c.close()
    assert d.proc.poll() is None
