"""The gRPC layer on the wire: Python grpcio (the same HTTP/2 + gRPC rules as kubelet's
grpc-go) and hand-made hostile peers against tests/tools/grpc-test-server, which serves
raw-bytes methods through src/rpc/grpc.c, src/rpc/h2.c and src/base/event.c.

After every hostile peer the server must still answer a normal call.
"""
import os
import pathlib
import shutil
import socket
import struct
import subprocess
import tempfile
import time

import grpc
import pytest

from conftest import REPO

MAX = 4 << 20


def _server_binary():
    build = os.environ.get("RDP_BUILD")
    cands = [pathlib.Path(build) / "grpc-test-server"] if build else []
    cands.append(REPO / "build" / "grpc-test-server")
    for c in cands:
        if c.exists():
            return c
    pytest.fail(f"grpc-test-server not found (looked at {', '.join(map(str, cands))})")


@pytest.fixture(scope="module")
def server():
    d = tempfile.mkdtemp(prefix="rdp-grpc-")
    sock = os.path.join(d, "t.sock")
    p = subprocess.Popen([str(_server_binary()), sock], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        yield sock
    finally:
        p.terminate()
        try:
            rc = p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        err = p.stderr.read()
        shutil.rmtree(d, ignore_errors=True)
        assert rc == 0, f"server exited {rc}: {err}"
        assert "ERROR: AddressSanitizer" not in err and "runtime error" not in err, err
        assert not os.path.exists(sock)


def channel(sock, **opts):
    return grpc.insecure_channel("unix:" + sock, options=list(opts.items()))


def call(sock, method, req, timeout=10, **opts):
    with channel(sock, **opts) as ch:
        return ch.unary_unary("/test.Test/" + method)(req, timeout=timeout)


def rpc_error(fn, *a, **kw):
    with pytest.raises(grpc.RpcError) as ei:
        fn(*a, **kw)
    return ei.value


def assert_healthy(sock):
    assert call(sock, "Echo", b"still here") == b"still here"


def stats(sock):
    out = call(sock, "Stats", b"").decode()
    return {k: int(v) for k, v in (kv.split("=") for kv in out.split())}


def wait_for(pred, what, timeout=20):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


# --- grpcio client --------------------------------------------------------------------------

def test_unary_echo(server):
    assert call(server, "Echo", b"hello") == b"hello"
    assert call(server, "Echo", b"") == b""
    assert call(server, "Echo", bytes(range(256)) * 100) == bytes(range(256)) * 100


@pytest.mark.parametrize("authority", ["localhost", "/var/lib/kubelet/device-plugins/x.sock",
                                       "%2Fvar%2Flib%2Fkubelet%2Fplugins_registry%2Fx.sock"])
def test_authority_values_of_old_kubelets(server, authority):
    assert call(server, "Echo", b"a", **{"grpc.default_authority": authority}) == b"a"


def test_server_streaming(server):
    with channel(server) as ch:
        got = list(ch.unary_stream("/test.Test/Stream")(b"50", timeout=30))
    assert got == [b"msg-%d" % i for i in range(50)]


def test_server_streaming_zero_messages(server):
    with channel(server) as ch:
        assert list(ch.unary_stream("/test.Test/Stream")(b"0", timeout=30)) == []


@pytest.mark.parametrize("text", ["plain", "100% sure", "caf\u00e9 \u2603", "two\nlines\r\n",
                                  "tab\there", "%41 is not A", ""])
def test_error_status_and_percent_encoded_message(server, text):
    e = rpc_error(call, server, "Echo", b"fail:3:" + text.encode())
    assert e.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.details() == text


@pytest.mark.parametrize("code", [1, 2, 4, 5, 8, 9, 12, 13, 14])
def test_status_codes(server, code):
    e = rpc_error(call, server, "Echo", b"fail:%d:x" % code)
    assert e.code().value[0] == code


def test_unknown_method_and_service(server):
    with channel(server) as ch:
        e = rpc_error(ch.unary_unary("/test.Test/Nope"), b"x", timeout=10)
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "Nope" in e.details()
        e = rpc_error(ch.unary_unary("/other.Svc/Echo"), b"x", timeout=10)
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED
        e = rpc_error(lambda: list(ch.unary_stream("/test.Test/Nope")(b"", timeout=10)))
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED
    assert_healthy(server)


def test_message_size_limit(server):
    assert len(call(server, "Echo", b"x" * MAX, timeout=30)) == MAX
    e = rpc_error(call, server, "Echo", b"x" * (MAX + 1), timeout=30)
    assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in e.details()
    # response side: the server refuses to send more than the limit
    e = rpc_error(call, server, "Echo", b"big:%d" % (MAX + 1), timeout=30)
    assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert len(call(server, "Echo", b"big:%d" % MAX, timeout=30)) == MAX
    assert_healthy(server)


def test_many_concurrent_streams_one_connection(server):
    with channel(server) as ch:
        echo = ch.unary_unary("/test.Test/Echo")
        futs = [echo.future(b"m%d" % i, timeout=60) for i in range(300)]
        assert [f.result() for f in futs] == [b"m%d" % i for i in range(300)]
        streams = [ch.unary_stream("/test.Test/Stream")(b"20", timeout=60) for _ in range(20)]
        for s in streams:
            assert list(s) == [b"msg-%d" % i for i in range(20)]


def test_many_connections(server):
    chans = [channel(server) for _ in range(40)]
    try:
        futs = [ch.unary_unary("/test.Test/Echo").future(b"c%d" % i, timeout=60)
                for i, ch in enumerate(chans)]
        assert [f.result() for f in futs] == [b"c%d" % i for i in range(40)]
    finally:
        for ch in chans:
            ch.close()
    wait_for(lambda: stats(server)["conns"] <= 1, "connections to be closed")


def test_cancel_streaming_call(server):
    before = stats(server)
    with channel(server) as ch:
        s = ch.unary_stream("/test.Test/Watch")(b"")
        assert next(s) == b"hello"
        wait_for(lambda: stats(server)["open"] == before["open"] + 1, "the stream to open")
        s.cancel()
        wait_for(lambda: stats(server)["closes"] == before["closes"] + 1,
                 "the close callback after RST_STREAM(CANCEL)")
    assert stats(server)["open"] == before["open"]


def test_connection_close_ends_streams(server):
    before = stats(server)
    ch = channel(server)
    streams = [ch.unary_stream("/test.Test/Watch")(b"") for _ in range(5)]
    for s in streams:
        assert next(s) == b"hello"
    ch.close()  # GOAWAY + close, as kubelet does
    wait_for(lambda: stats(server)["closes"] == before["closes"] + 5, "5 close callbacks")
    assert stats(server)["open"] == before["open"]


def test_client_deadline(server):
    before = stats(server)
    e = rpc_error(call, server, "Slow", b"5000", timeout=0.3)
    assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    wait_for(lambda: stats(server)["closes"] == before["closes"] + 1, "the close callback")
    assert call(server, "Slow", b"1") == b"done"


# --- raw HTTP/2 peers -----------------------------------------------------------------------

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = \
    0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 1, 4, 1


def frame(ftype, flags, sid, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", sid) + payload


def hpack_int(n, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if n < limit:
        return bytes([first | n])
    out = [first | limit]
    n -= limit
    while n >= 128:
        out.append(n % 128 + 128)
        n //= 128
    out.append(n)
    return bytes(out)


def hpack(headers):
    """Literal header fields without indexing, new names, no Huffman."""
    out = b""
    for k, v in headers:
        k, v = k.encode(), v.encode() if isinstance(v, str) else v
        out += b"\x00" + hpack_int(len(k), 7) + k + hpack_int(len(v), 7) + v
    return out


def grpc_msg(b):
    return b"\x00" + struct.pack(">I", len(b)) + b


def request_headers(path="/test.Test/Echo", authority="localhost", extra=()):
    return [(":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", authority), ("content-type", "application/grpc"),
            ("te", "trailers"), *extra]


def raw_connect(sock, rcvbuf=None):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(20)
    s.connect(sock)
    return s


def read_frames(s, until=None, timeout=20):
    """Reads frames until EOF, until(frames) is true, or the timeout."""
    buf, frames = b"", []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        s.settimeout(max(0.05, end - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return frames, True
        buf += chunk
        while len(buf) >= 9:
            ln = struct.unpack(">I", b"\0" + buf[:3])[0]
            if len(buf) < 9 + ln:
                break
            ftype, flags = buf[3], buf[4]
            sid = struct.unpack(">I", buf[5:9])[0] & 0x7FFFFFFF
            frames.append((ftype, flags, sid, buf[9:9 + ln]))
            buf = buf[9 + ln:]
        if until and until(frames):
            return frames, False
    return frames, False


def stream_ended(sid):
    def pred(frames):
        return any(f[2] == sid and (f[0] == RST_STREAM or
                                     (f[0] == HEADERS and f[1] & END_STREAM)) for f in frames)
    return pred


def test_server_sends_settings_first(server):
    with raw_connect(server) as s:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0))
        frames, _ = read_frames(s, until=lambda f: len(f) >= 1)
        assert frames and frames[0][0] == SETTINGS and not frames[0][1] & ACK
        # MAX_CONCURRENT_STREAMS (3) is advertised and is not 1
        payload = frames[0][3]
        settings = {struct.unpack(">H", payload[i:i + 2])[0]:
                    struct.unpack(">I", payload[i + 2:i + 6])[0]
                    for i in range(0, len(payload), 6)}
        assert settings.get(3, 0) > 1


def test_raw_request_with_slash_authority(server):
    with raw_connect(server) as s:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                  frame(HEADERS, END_HEADERS, 1,
                        hpack(request_headers(authority="/var/lib/kubelet/x.sock"))) +
                  frame(DATA, END_STREAM, 1, grpc_msg(b"raw")))
        frames, _ = read_frames(s, until=stream_ended(1))
    mine = [f for f in frames if f[2] == 1]
    assert not any(f[0] == RST_STREAM for f in mine)
    data = b"".join(f[3] for f in mine if f[0] == DATA)
    assert data == grpc_msg(b"raw")
    # DATA never carries END_STREAM; the last frame is the trailers HEADERS
    assert not any(f[0] == DATA and f[1] & END_STREAM for f in mine)
    assert mine[-1][0] == HEADERS and mine[-1][1] & END_STREAM


def test_message_split_across_and_packed_in_frames(server):
    body = grpc_msg(b"x" * 1000)
    with raw_connect(server) as s:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                  frame(HEADERS, END_HEADERS, 1, hpack(request_headers())))
        for i in range(0, len(body), 7):
            s.sendall(frame(DATA, 0, 1, body[i:i + 7]))
        s.sendall(frame(DATA, END_STREAM, 1))
        frames, _ = read_frames(s, until=stream_ended(1))
    assert b"".join(f[3] for f in frames if f[2] == 1 and f[0] == DATA) == body


def test_two_messages_on_unary_is_an_error(server):
    with raw_connect(server) as s:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                  frame(HEADERS, END_HEADERS, 1, hpack(request_headers())) +
                  frame(DATA, END_STREAM, 1, grpc_msg(b"a") + grpc_msg(b"b")))
        frames, _ = read_frames(s, until=stream_ended(1))
    mine = [f for f in frames if f[2] == 1]
    assert not any(f[0] == DATA and f[3] for f in mine)  # no response message
    assert any(f[0] == HEADERS and f[1] & END_STREAM for f in mine)
    assert_healthy(server)


def test_connection_header_is_a_protocol_error(server):
    with raw_connect(server) as s:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                  frame(HEADERS, END_HEADERS | END_STREAM, 1,
                        hpack(request_headers(extra=[("connection", "close")]))))
        frames, _ = read_frames(s, until=stream_ended(1))
    rst = [f for f in frames if f[0] == RST_STREAM and f[2] == 1]
    assert rst and struct.unpack(">I", rst[0][3])[0] == 1  # PROTOCOL_ERROR
    assert_healthy(server)


def test_server_enforces_grpc_timeout(server):
    before = stats(server)
    with raw_connect(server) as s:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                  frame(HEADERS, END_HEADERS, 1,
                        hpack(request_headers(path="/test.Test/Slow",
                                              extra=[("grpc-timeout", "100m")]))) +
                  frame(DATA, END_STREAM, 1, grpc_msg(b"60000")))
        frames, _ = read_frames(s, until=stream_ended(1), timeout=30)
    mine = [f for f in frames if f[2] == 1]
    assert mine and mine[-1][0] == HEADERS and mine[-1][1] & END_STREAM
    assert not any(f[0] == DATA and f[3] for f in mine)
    wait_for(lambda: stats(server)["closes"] == before["closes"] + 1, "the close callback")


def assert_connection_dropped(s):
    frames, eof = read_frames(s, until=lambda f: any(x[0] == GOAWAY for x in f))
    assert eof or any(f[0] == GOAWAY for f in frames)


def test_garbage_bytes(server):
    with raw_connect(server) as s:
        s.sendall(bytes((i * 37 + 11) % 256 for i in range(4096)))
        assert_connection_dropped(s)
    assert_healthy(server)


def test_http1_request(server):
    with raw_connect(server) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        assert_connection_dropped(s)
    assert_healthy(server)


def test_truncated_frame(server):
    with raw_connect(server) as s:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                  frame(HEADERS, END_HEADERS, 1, hpack(request_headers()))[:12])
        s.shutdown(socket.SHUT_WR)
        frames, eof = read_frames(s)
        assert eof
    assert_healthy(server)


def test_header_list_over_the_limit(server):
    with raw_connect(server) as s:
        extra = [("x-pad-%d" % i, "v" * 1000) for i in range(20)]  # ~20 KiB > 16 KiB
        block = hpack(request_headers(extra=extra))
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                  frame(HEADERS, 0, 1, block[:16000]) +
                  frame(CONTINUATION, END_HEADERS, 1, block[16000:]) +
                  frame(DATA, END_STREAM, 1, grpc_msg(b"x")))
        frames, _ = read_frames(s, until=stream_ended(1))
        assert any(f[0] == RST_STREAM and f[2] == 1 for f in frames)
        # the connection itself still works
        s.sendall(frame(HEADERS, END_HEADERS, 3, hpack(request_headers())) +
                  frame(DATA, END_STREAM, 3, grpc_msg(b"ok")))
        frames, _ = read_frames(s, until=stream_ended(3))
        assert b"".join(f[3] for f in frames if f[2] == 3 and f[0] == DATA) == grpc_msg(b"ok")
    assert_healthy(server)


def test_huge_headers_block(server):
    with raw_connect(server) as s:
        block = hpack(request_headers(extra=[("x-huge", "h" * (1 << 20))]))
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, 0, 1, block[:16384]))
        try:
            for i in range(16384, len(block), 16384):
                last = i + 16384 >= len(block)
                s.sendall(frame(CONTINUATION, END_HEADERS if last else 0, 1,
                                block[i:i + 16384]))
        except (BrokenPipeError, ConnectionResetError):
            pass
        frames, eof = read_frames(s, until=lambda f: any(x[0] in (GOAWAY, RST_STREAM)
                                                         for x in f))
        assert eof or any(f[0] in (GOAWAY, RST_STREAM) for f in frames)
    assert_healthy(server)


def test_client_that_never_reads(server):
    before = stats(server)["conns"]
    s = raw_connect(server, rcvbuf=4096)
    try:
        # open the windows wide, then ask for far more than the output limit
        s.sendall(PREFACE + frame(SETTINGS, 0, 0, struct.pack(">HI", 4, 0x7FFFFFFF)) +
                  frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF - 65535)))
        sid = 1
        for _ in range(30):
            s.sendall(frame(HEADERS, END_HEADERS, sid, hpack(request_headers())) +
                      frame(DATA, END_STREAM, sid, grpc_msg(b"big:1000000")))
            sid += 2
        for _ in range(3):
            s.sendall(frame(HEADERS, END_HEADERS, sid,
                            hpack(request_headers(path="/test.Test/Watch"))) +
                      frame(DATA, END_STREAM, sid, grpc_msg(b"")))
            sid += 2
        # meanwhile everybody else is served
        assert_healthy(server)
        assert list(channel(server).unary_stream("/test.Test/Stream")(b"3", timeout=30)) == \
            [b"msg-0", b"msg-1", b"msg-2"]
    finally:
        s.close()
    wait_for(lambda: stats(server)["conns"] <= before, "the stuck connection to be dropped")
    assert_healthy(server)


def test_connection_limit(server):
    socks = []
    try:
        dropped = 0
        for _ in range(80):
            s = raw_connect(server)
            socks.append(s)
            try:
                s.sendall(PREFACE + frame(SETTINGS, 0, 0))
            except (BrokenPipeError, ConnectionResetError):
                # already closed for being over the limit
                dropped += 1
                s.close()
        # connections over the limit are closed at once; the others stay usable
        for s in socks:
            if s.fileno() < 0:
                continue
            s.settimeout(0.2)
            try:
                data = s.recv(65536)
                while data:
                    data = s.recv(65536)
                dropped += 1
            except socket.timeout:
                pass
            except ConnectionResetError:
                dropped += 1
        assert dropped >= 80 - 64
    finally:
        for s in socks:
            s.close()
    wait_for(lambda: stats(server)["conns"] <= 1, "connections to be closed")
    assert_healthy(server)


def test_ping_is_acked(server):
    with raw_connect(server) as s:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) + frame(PING, 0, 0, b"\x02\x04\x10\x10\x09\x0e\x07\x07"))
        frames, _ = read_frames(s, until=lambda f: any(x[0] == PING for x in f))
        acks = [f for f in frames if f[0] == PING]
        assert acks and acks[0][1] & ACK and acks[0][3] == b"\x02\x04\x10\x10\x09\x0e\x07\x07"


# --- connection timeouts (a server started with short ones) ------------------------------

@pytest.fixture
def short_timeouts():
    d = tempfile.mkdtemp(prefix="rdp-grpc-")
    sock = os.path.join(d, "t.sock")
    # 4 MiB requests, 500 ms handshake timeout, 1500 ms idle timeout
    p = subprocess.Popen([str(_server_binary()), sock, str(MAX), "500", "1500"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        yield sock
    finally:
        p.terminate()
        rc = p.wait(timeout=20)
        err = p.stderr.read()
        shutil.rmtree(d, ignore_errors=True)
        assert rc == 0, f"server exited {rc}: {err}"
        assert "ERROR: AddressSanitizer" not in err and "runtime error" not in err, err


def closed_within(s, secs):
    """True when the server closes s (EOF or reset) within secs, reading whatever it sends."""
    s.settimeout(0.2)
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            if s.recv(65536) == b"":
                return True
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


def test_handshake_timeout_frees_the_slot(short_timeouts):
    silent = [raw_connect(short_timeouts) for _ in range(40)]  # more than the 32 slots
    try:
        t0 = time.monotonic()
        for s in silent:
            assert closed_within(s, 5), "a peer without a preface kept its connection"
        assert time.monotonic() - t0 < 5
    finally:
        for s in silent:
            s.close()
    wait_for(lambda: stats(short_timeouts)["conns"] <= 1, "slots to be freed")
    assert_healthy(short_timeouts)


def test_idle_timeout(short_timeouts):
    # a handshaken connection with no stream and no bytes is closed after the idle timeout
    with raw_connect(short_timeouts) as s:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0))
        t0 = time.monotonic()
        assert closed_within(s, 6)
        assert time.monotonic() - t0 >= 1.0
    # a half-sent request holds no slot for ever either
    with raw_connect(short_timeouts) as s:
        s.sendall(PREFACE + frame(SETTINGS, 0, 0) +
                  frame(HEADERS, END_HEADERS, 1, hpack(request_headers())) +
                  frame(DATA, 0, 1, b"\x00\x00\x00\x01\x00"))
        assert closed_within(s, 6)
    # an open server-streaming call with nothing to write is exempt (kubelet's ListAndWatch)
    with channel(short_timeouts) as ch:
        it = ch.unary_stream("/test.Test/Watch")(b"")
        assert next(it) == b"hello"
        time.sleep(4)
        assert stats(short_timeouts)["open"] >= 1
        assert call(short_timeouts, "Echo", b"x") == b"x"
        it.cancel()
    assert_healthy(short_timeouts)


def test_oversized_request_of_the_daemon_default():
    """The default limits (the daemon's) refuse a request over 256 KiB."""
    d = tempfile.mkdtemp(prefix="rdp-grpc-")
    sock = os.path.join(d, "t.sock")
    p = subprocess.Popen([str(_server_binary()), sock, str(256 << 10)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        assert len(call(sock, "Echo", b"x" * (256 << 10))) == 256 << 10
        e = rpc_error(call, sock, "Echo", b"x" * ((256 << 10) + 1))
        assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert e.details() == "grpc: received message larger than max (%d vs. %d)" % (
            (256 << 10) + 1, 256 << 10)
        assert_healthy(sock)
    finally:
        p.terminate()
        assert p.wait(timeout=20) == 0
        shutil.rmtree(d, ignore_errors=True)
