# SPDX-License-Identifier: MIT
"""Bounded memory for any peer: `rdma-dp serve` on the dgx-h100 node (4 resources, 4 sockets)
under a stream of maximal hostile requests on every socket at once must keep its peak resident
memory (VmHWM) under 8 MiB, and answer a normal Allocate afterwards.

The peers, per socket and all concurrently:
  - Allocate and GetPreferredAllocation requests just under the 256 KiB request limit, full of
    empty IDs (2 bytes each on the wire, 30x that unpacked without a budget);
  - requests over the limit (refused from the length prefix);
  - raw peers announcing a 4 GiB message and streaming DATA into it;
  - raw peers that ask for many maximal Allocate answers and never read;
  - silent peers that connect and send nothing (they hold connection slots).
Bounded in count and time; unix sockets only.
"""
import os
import socket
import struct
import sys
import threading
import time

import grpc
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402
from test_serve import CONFIGS, Env, PREFACE, h2_frame  # noqa: E402

LIMIT_KIB = 8 * 1024
MAX_MSG = 256 * 1024
RESOURCES = ["rdma/compute_ib", "rdma/storage_roce", "rdma/compute_ib_numa0",
             "rdma/compute_ib_numa1"]

pytestmark = pytest.mark.skipif(
    K.sanitized(), reason="ASan's shadow memory and quarantine make VmHWM meaningless")


def vmhwm_kib(pid):
    return int(K.proc_status(pid)["VmHWM"].split()[0])


def hpack_lit(name, value):
    """A literal header field without indexing, new name (RFC 7541 6.2.2), short strings."""
    def s(b):
        assert len(b) < 127
        return bytes([len(b)]) + b
    return b"\x00" + s(name) + s(value)


def request_headers(path):
    return b"".join(hpack_lit(n, v) for n, v in [
        (b":method", b"POST"), (b":scheme", b"http"), (b":path", path),
        (b":authority", b"localhost"), (b"content-type", b"application/grpc"),
        (b"te", b"trailers")])


def empty_ids_request(pb, preferred=False):
    """The largest request under the limit: one container, as many empty IDs as fit."""
    n = (MAX_MSG - 64) // 2
    if preferred:
        return pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=[""] * n,
                                                   allocation_size=1)])
    return pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(
        devices_ids=[""] * n)])


def grpc_errors(path, pb, rounds, kind, errors):
    """Sends `rounds` hostile requests of one kind through grpcio; records unexpected codes."""
    ch = grpc.insecure_channel("unix:" + str(path))
    try:
        alloc = K.stub(ch, K.DP + "Allocate", pb.AllocateRequest, pb.AllocateResponse)
        pref = K.stub(ch, K.DP + "GetPreferredAllocation", pb.PreferredAllocationRequest,
                      pb.PreferredAllocationResponse)
        for i in range(rounds):
            try:
                if kind == "empty-ids":
                    if i % 2:
                        pref(empty_ids_request(pb, True), timeout=30)
                    else:
                        alloc(empty_ids_request(pb), timeout=30)
                else:  # over the limit
                    alloc(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(
                        devices_ids=["x" * 1000] * 300)]), timeout=30)
                errors.append(f"{kind}: answered OK")
            except grpc.RpcError as e:
                if e.code() not in (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                    grpc.StatusCode.UNAVAILABLE):
                    errors.append(f"{kind}: {e.code()} {e.details()}")
    finally:
        ch.close()


def raw_never_reads(path, pb, secs, socks):
    """Opens wide windows and asks for maximal answers (63 containers), never reading."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(2)
    s.connect(str(path))
    socks.append(s)
    req = pb.AllocateRequest(container_requests=[
        pb.ContainerAllocateRequest(devices_ids=[str(i)]) for i in range(63)]).SerializeToString()
    msg = b"\x00" + struct.pack(">I", len(req)) + req
    try:
        s.sendall(PREFACE + h2_frame(4, 0, 0, struct.pack(">HI", 4, 0x7FFFFFFF)) +
                  h2_frame(8, 0, 0, struct.pack(">I", 0x7FFFFFFF - 65535)))
        sid = 1
        end = time.monotonic() + secs
        while time.monotonic() < end and sid < 2000:
            s.sendall(h2_frame(1, 4, sid, request_headers(b"/v1beta1.DevicePlugin/Allocate")) +
                      h2_frame(0, 1, sid, msg))
            sid += 2
    except OSError:
        pass  # backpressure, or closed by the server: both fine


def raw_huge_prefix(path, secs, socks):
    """Announces a 4 GiB message and streams DATA into it within the flow-control window."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(2)
    s.connect(str(path))
    socks.append(s)
    try:
        s.sendall(PREFACE + h2_frame(4, 0, 0, b"") +
                  h2_frame(1, 4, 1, request_headers(b"/v1beta1.DevicePlugin/Allocate")) +
                  h2_frame(0, 0, 1, b"\x00\xff\xff\xff\xff" + b"\x0a" * 16000))
        end = time.monotonic() + secs
        while time.monotonic() < end:
            s.sendall(h2_frame(0, 0, 1, b"\x0a" * 16000))
    except OSError:
        pass


@pytest.fixture
def env(rdma_dp, fixtures_dir):
    e = Env(rdma_dp, fixtures_dir)
    yield e
    e.close()


def test_peak_rss_under_hostile_requests(env):
    kl = env.start_kubelet()
    d = env.daemon(CONFIGS / "dgx.json", node="dgx-h100", verbose=False)
    for res in RESOURCES:
        kl.wait_registered(res, units=63, healthy=63)
    pb, _ = K.protos()
    paths = [kl.plugin_dir / (r.split("/")[1] + ".sock") for r in RESOURCES]
    before = vmhwm_kib(d.proc.pid)

    errors, socks, threads = [], [], []
    for p in paths:
        for _ in range(24):
            socks.append(K.raw_connect(p))  # silent, no preface: with the rest, every slot
        for _ in range(4):
            threads.append(threading.Thread(target=grpc_errors,
                                            args=(p, pb, 4, "empty-ids", errors)))
        threads.append(threading.Thread(target=grpc_errors, args=(p, pb, 4, "over", errors)))
        for _ in range(3):
            threads.append(threading.Thread(target=raw_never_reads, args=(p, pb, 4, socks)))
        threads.append(threading.Thread(target=raw_huge_prefix, args=(p, 4, socks)))
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        peak = vmhwm_kib(d.proc.pid)
        print(f"\nVmHWM before {before} KiB, under hostile requests {peak} KiB, "
              f"VmRSS after {K.rss_kib(d.proc.pid)} KiB")
        assert not errors, errors[:5]
        assert peak < LIMIT_KIB, f"peak RSS {peak} KiB (limit {LIMIT_KIB} KiB)"
    finally:
        for s in socks:
            s.close()
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
