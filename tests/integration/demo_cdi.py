#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The CDI example of docs/cdi.md, reproducible on a fixture node: runs `rdma-dp serve
--use-cdi` against the fake kubelet, prints the spec file each resource got and the answer
to Allocate of unit "0" (shared) or of the first unit (exclusive), then the same answer in
device-spec mode. The output is deterministic (no temp paths, no times): the docs quote it and
tests/integration/test_demo.py checks the quotes.

    demo_cdi.py RDMA_DP CONFIG SYSFS_ROOT DEV_ROOT
"""
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402
from google.protobuf import json_format  # noqa: E402


def answer(kl, resource):
    reg = kl.wait_registered(resource, timeout=60)
    snap = reg.client.wait_snapshot(lambda s: len(s.devices) > 0, timeout=60)
    unit = snap.devices[0].ID
    resp = reg.client.allocate([unit])
    return unit, json.dumps(json_format.MessageToDict(resp, preserving_proto_field_name=True),
                            indent=2, sort_keys=True)


def serve(binary, config, sysfs, dev, cdi):
    tmp = tempfile.mkdtemp(dir="/tmp", prefix="rdpcdi")
    spec_dir = os.path.join(tmp, "cdi")
    kl = K.FakeKubelet(os.path.join(tmp, "kubelet")).start()
    extra = ["--use-cdi", "--cdi-spec-dir", spec_dir] if cdi else []
    d = K.Daemon(binary, config=config, sysfs=sysfs, dev=dev, kubelet_root=kl.root, extra=extra)
    out = []
    try:
        resources = ["%s/%s" % (r.get("resourcePrefix", "rdma"), r["resourceName"])
                     for r in json.load(open(config))["configList"]]
        for r in resources:
            unit, text = answer(kl, r)
            if cdi:
                name = "rdma-dp.io-%s.json" % r.split("/", 1)[1]
                out.append("$ cat /var/run/cdi/%s" % name)
                out.append(open(os.path.join(spec_dir, name)).read().rstrip("\n"))
            out.append("# Allocate %s, unit \"%s\"%s:" % (r, unit,
                                                         " (CDI mode)" if cdi else
                                                         " (device-spec mode)"))
            out.append(text)
    finally:
        code = d.stop()
        kl.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    if code != 0:
        raise SystemExit("rdma-dp serve exited %d" % code)
    return out


def main():
    if len(sys.argv) != 5:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    binary, config, sysfs, dev = sys.argv[1:]
    print("\n".join(serve(binary, config, sysfs, dev, True) +
                    serve(binary, config, sysfs, dev, False)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
