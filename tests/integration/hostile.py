# SPDX-License-Identifier: MIT
"""Hostile peers for `rdma-dp serve`: the load of test_hostile_memory.py, shared with make bench
(bench/bench.py reports the daemon's VmHWM under it). Unix sockets only; bounded in count and
time.

The peers, per socket and all concurrently (hostile_load):
  - Allocate and GetPreferredAllocation requests just under the 256 KiB request limit, full of
    empty IDs (2 bytes each on the wire, 30x that unpacked without a budget);
  - requests over the limit (refused from the length prefix);
  - raw peers announcing a 4 GiB message and streaming DATA into it;
  - raw peers that ask for many maximal Allocate answers and never read;
  - silent peers that connect and send nothing (they hold connection slots).
"""
import os
import socket
import struct
import sys
import threading
import time

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubelet as K  # noqa: E402

MAX_MSG = 256 * 1024
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def h2_frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


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


class HostileLoad:
    """Every kind of hostile peer on every socket of `paths` at once:

        with HostileLoad(paths, pb) as h:
            h.run()           # starts the peers and joins them (bounded: a few seconds)
            peak = vmhwm_kib(pid)
        # leaving the block closes the silent and raw peers' sockets
        h.errors: unexpected answers (an oversized request answered OK, an odd status code)
    """

    def __init__(self, paths, pb, silent=24, empty_ids=4, rounds=4, never_reads=3, secs=4):
        self.paths, self.pb = list(paths), pb
        self.silent, self.empty_ids, self.rounds = silent, empty_ids, rounds
        self.never_reads, self.secs = never_reads, secs
        self.errors, self.socks, self.threads = [], [], []

    def __enter__(self):
        return self

    def run(self, join_timeout=120):
        pb = self.pb
        for p in self.paths:
            for _ in range(self.silent):
                self.socks.append(K.raw_connect(p))  # silent, no preface: with the rest, every slot
            for _ in range(self.empty_ids):
                self.threads.append(threading.Thread(
                    target=grpc_errors, args=(p, pb, self.rounds, "empty-ids", self.errors)))
            self.threads.append(threading.Thread(
                target=grpc_errors, args=(p, pb, self.rounds, "over", self.errors)))
            for _ in range(self.never_reads):
                self.threads.append(threading.Thread(
                    target=raw_never_reads, args=(p, pb, self.secs, self.socks)))
            self.threads.append(threading.Thread(target=raw_huge_prefix,
                                                 args=(p, self.secs, self.socks)))
        for t in self.threads:
            t.start()
        for t in self.threads:
            t.join(join_timeout)

    def close(self):
        for s in self.socks:
            s.close()
        self.socks = []

    def __exit__(self, *exc):
        self.close()
        return False
