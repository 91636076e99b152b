#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes the binary seed corpora of tests/fuzz (stdlib only, deterministic).

    gen-corpus.py [DIR]     DIR defaults to the directory of this script

h2-server/   what a grpc-go client sends: preface, SETTINGS, HEADERS (HPACK literals without
             indexing, no Huffman) and DATA carrying gRPC messages; plus near misses.
grpc-frame/  byte 0 = max size pick, byte 1 = chunk seed, then length-prefixed messages.
protobuf/    byte 0 = message type (see fuzz-protobuf.c), then the packed message.

The text corpora (config/, sysfs-parsers/) are plain files, edited by hand.
"""
import os
import struct
import sys

# ---- HTTP/2 ----
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = \
    0, 1, 2, 3, 4, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS, PADDED = 0x1, 0x1, 0x4, 0x8


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream & 0x7fffffff) + payload


def hpack_int(value, prefix_bits, first=0):
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first | value])
    out = [first | limit]
    value -= limit
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


def hpack_literal(name, value):
    """Literal header field without indexing, new name (RFC 7541 6.2.2), no Huffman."""
    name, value = name.encode(), value.encode()
    return b"\x00" + hpack_int(len(name), 7) + name + hpack_int(len(value), 7) + value


def request_headers(path, extra=()):
    hdrs = [(":method", "POST"), (":scheme", "http"), (":path", path),
            (":authority", "localhost"), ("content-type", "application/grpc"),
            ("te", "trailers"), ("user-agent", "grpc-go/1.58.3")] + list(extra)
    return b"".join(hpack_literal(n, v) for n, v in hdrs)


def grpc_msg(body, flag=0):
    return bytes([flag]) + struct.pack(">I", len(body)) + body


def settings(*pairs):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


# what grpc-go's client sends first
HELLO = PREFACE + settings((2, 0), (4, 4194304), (6, 16384)) + \
    frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 4128769)) + frame(SETTINGS, ACK, 0)


def unary(stream, path, body, extra=()):
    return frame(HEADERS, END_HEADERS, stream, request_headers(path, extra)) + \
        frame(DATA, END_STREAM, stream, grpc_msg(body))


def h2_seeds():
    s = {}
    s["unary-echo"] = HELLO + unary(1, "/t.T/Echo", b"hello")
    s["unary-fail"] = HELLO + unary(1, "/t.T/Echo", b"fail me")
    s["unary-empty"] = HELLO + unary(1, "/t.T/Echo", b"")
    s["unary-timeout"] = HELLO + unary(1, "/t.T/Echo", b"hi", [("grpc-timeout", "100m")])
    s["unimplemented"] = HELLO + unary(1, "/t.T/Nope", b"x")
    s["none"] = HELLO + unary(1, "/t.T/None", b"")
    s["two-streams"] = HELLO + unary(1, "/t.T/Echo", b"a") + unary(3, "/t.T/Echo", b"b")
    s["streaming"] = HELLO + unary(1, "/t.T/Watch", b"w") + \
        frame(RST_STREAM, 0, 1, struct.pack(">I", 8))
    s["hold-then-goaway"] = HELLO + unary(1, "/t.T/Hold", b"h") + \
        frame(GOAWAY, 0, 0, struct.pack(">II", 0, 0))
    s["hold-then-rst"] = HELLO + unary(1, "/t.T/Hold", b"h") + \
        frame(RST_STREAM, 0, 1, struct.pack(">I", 8))
    # split message: prefix and body in separate DATA frames, then an empty END_STREAM DATA
    msg = grpc_msg(b"split message body")
    s["split-data"] = HELLO + frame(HEADERS, END_HEADERS, 1, request_headers("/t.T/Echo")) + \
        frame(DATA, 0, 1, msg[:3]) + frame(DATA, 0, 1, msg[3:]) + frame(DATA, END_STREAM, 1)
    # two messages on a unary method (cardinality error)
    s["two-messages"] = HELLO + frame(HEADERS, END_HEADERS, 1, request_headers("/t.T/Echo")) + \
        frame(DATA, END_STREAM, 1, grpc_msg(b"a") + grpc_msg(b"b"))
    s["compressed-flag"] = HELLO + frame(HEADERS, END_HEADERS, 1, request_headers("/t.T/Echo")) + \
        frame(DATA, END_STREAM, 1, grpc_msg(b"z", flag=1))
    s["too-big"] = HELLO + frame(HEADERS, END_HEADERS, 1, request_headers("/t.T/Echo")) + \
        frame(DATA, END_STREAM, 1, b"\x00" + struct.pack(">I", 100000) + b"x" * 100)
    hb = request_headers("/t.T/Echo")
    s["continuation"] = HELLO + frame(HEADERS, 0, 1, hb[:20]) + \
        frame(CONTINUATION, END_HEADERS, 1, hb[20:]) + frame(DATA, END_STREAM, 1, grpc_msg(b"c"))
    s["padded-data"] = HELLO + frame(HEADERS, END_HEADERS, 1, hb) + \
        frame(DATA, END_STREAM | PADDED, 1, b"\x04" + grpc_msg(b"p") + b"\x00" * 4)
    s["ping-priority-window"] = HELLO + frame(PING, 0, 0, b"12345678") + \
        frame(PRIORITY, 0, 1, struct.pack(">IB", 0, 15)) + \
        frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 1000)) + unary(1, "/t.T/Echo", b"x")
    s["bad-content-type"] = HELLO + frame(HEADERS, END_HEADERS | END_STREAM, 1, b"".join(
        hpack_literal(n, v) for n, v in [(":method", "POST"), (":scheme", "http"),
                                         (":path", "/t.T/Echo"), (":authority", "x"),
                                         ("content-type", "text/plain")]))
    s["get-method"] = HELLO + frame(HEADERS, END_HEADERS | END_STREAM, 1, b"".join(
        hpack_literal(n, v) for n, v in [(":method", "GET"), (":scheme", "http"),
                                         (":path", "/"), (":authority", "x")]))
    s["small-window"] = PREFACE + settings((4, 1), (5, 16384)) + frame(SETTINGS, ACK, 0) + \
        unary(1, "/t.T/Echo", b"a longer message than the window")
    s["preface-only"] = PREFACE + settings()
    s["http1"] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    return s


# ---- gRPC framing ----
def frame_seeds():
    s = {}
    s["three"] = b"\x04\x07" + grpc_msg(b"hello") + grpc_msg(b"") + grpc_msg(b"world!")
    s["partial"] = b"\x04\x01" + grpc_msg(b"hello")[:7]
    s["too-big"] = b"\x02\x03" + grpc_msg(b"0123456789abcdef0123")
    s["compressed"] = b"\x04\x09" + grpc_msg(b"x", flag=1)
    s["percent"] = b"\x00\x00" + b"bad%0Athing 100%25 %E2%9C%93 %zz %4"
    s["timeout-m"] = b"\x00\x00" + b"100m"
    s["timeout-n"] = b"\x00\x00" + b"99999999n"
    s["timeout-H"] = b"\x00\x00" + b"99999999H"
    s["timeout-u"] = b"\x00\x00" + b"1u"
    return s


# ---- protobuf ----
def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def pb_bytes(field, data):
    return varint(field << 3 | 2) + varint(len(data)) + data


def pb_str(field, s):
    return pb_bytes(field, s.encode())


def pb_varint(field, v):
    return varint(field << 3) + varint(v)


EMPTY, ALLOCATE, PREFERRED, PRESTART, REGISTER, INFO, STATUS = range(7)


def pb_seeds():
    s = {}
    s["empty"] = bytes([EMPTY])
    s["empty-unknown-field"] = bytes([EMPTY]) + pb_str(7, "x")
    s["allocate"] = bytes([ALLOCATE]) + pb_bytes(1, pb_str(1, "0") + pb_str(1, "3"))
    s["allocate-two"] = bytes([ALLOCATE]) + pb_bytes(1, pb_str(1, "1")) + pb_bytes(1, pb_str(1, "2"))
    s["allocate-unknown-id"] = bytes([ALLOCATE]) + pb_bytes(1, pb_str(1, "99"))
    s["allocate-dup"] = bytes([ALLOCATE]) + pb_bytes(1, pb_str(1, "1") + pb_str(1, "1"))
    s["allocate-none"] = bytes([ALLOCATE]) + pb_bytes(1, b"")
    s["preferred"] = bytes([PREFERRED]) + pb_bytes(1, pb_str(1, "0") + pb_str(1, "1") +
                                                  pb_str(1, "2") + pb_str(2, "2") +
                                                  pb_varint(3, 2))
    s["preferred-negative"] = bytes([PREFERRED]) + pb_bytes(1, pb_str(1, "0") +
                                                           pb_varint(3, (1 << 64) - 1))
    s["prestart"] = bytes([PRESTART]) + pb_str(1, "0") + pb_str(1, "1")
    s["register"] = bytes([REGISTER]) + pb_str(1, "v1beta1") + pb_str(2, "rdma-a.sock") + \
        pb_str(3, "rdma/hca_shared_devices_a") + pb_bytes(4, pb_varint(1, 0) + pb_varint(2, 1))
    s["info"] = bytes([INFO])
    s["status-ok"] = bytes([STATUS]) + pb_varint(1, 1)
    s["status-error"] = bytes([STATUS]) + pb_varint(1, 0) + pb_str(2, "version not supported")
    s["truncated"] = bytes([ALLOCATE]) + pb_bytes(1, pb_str(1, "0"))[:-1]
    return s


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for sub, seeds in (("h2-server", h2_seeds()), ("grpc-frame", frame_seeds()),
                       ("protobuf", pb_seeds())):
        d = os.path.join(base, sub)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
