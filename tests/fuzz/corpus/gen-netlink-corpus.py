#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpus of fuzz-netlink (stdlib only, deterministic).

    gen-netlink-corpus.py [DIR]     DIR defaults to netlink/ beside this script

Byte 0 picks the parser (0: uevent, 1: rtnetlink link messages), the rest is the datagram as
the kernel sends it: uevents "ACTION@DEVPATH\\0KEY=VALUE\\0..." (and libudev's re-broadcast),
rtnetlink nlmsghdr + ifinfomsg + rtattrs (IFLA_IFNAME 3, IFLA_OPERSTATE 16, IFLA_CARRIER 33,
IFLA_LINKINFO 18 / IFLA_INFO_KIND 1), plus near misses.
"""
import os
import struct
import sys

RTM_NEWLINK, RTM_DELLINK, RTM_NEWADDR, NLMSG_DONE = 16, 17, 20, 3
IFLA_IFNAME, IFLA_MTU, IFLA_OPERSTATE, IFLA_LINKINFO, IFLA_CARRIER = 3, 4, 16, 18, 33
IFLA_INFO_KIND = 1
ARPHRD_ETHER, ARPHRD_INFINIBAND = 1, 32
IFF_UP, IFF_BROADCAST, IFF_RUNNING, IFF_LOWER_UP = 0x1, 0x2, 0x40, 0x10000


def pad(b):
    return b + b"\0" * (-len(b) % 4)


def attr(t, payload):
    return pad(struct.pack("=HH", 4 + len(payload), t) + payload)


def msg(t, body, seq=0):
    return pad(struct.pack("=IHHII", 16 + len(body), t, 0, seq, 0) + body)


def ifi(index, dev_type, flags, change=0):
    return struct.pack("=BxHiII", 0, dev_type, index, flags, change)


def link(t, index, name, dev_type=ARPHRD_INFINIBAND, flags=IFF_UP | IFF_BROADCAST | IFF_RUNNING |
         IFF_LOWER_UP, oper=6, carrier=1, kind=None):
    body = ifi(index, dev_type, flags) + attr(IFLA_IFNAME, name.encode() + b"\0")
    body += attr(IFLA_MTU, struct.pack("=I", 2044))
    if oper is not None:
        body += attr(IFLA_OPERSTATE, bytes([oper]))
    if carrier is not None:
        body += attr(IFLA_CARRIER, bytes([carrier]))
    if kind:
        body += attr(IFLA_LINKINFO | 0x8000, attr(IFLA_INFO_KIND, kind.encode() + b"\0"))
    return msg(t, body)


def uevent(action, devpath, **keys):
    out = f"{action}@{devpath}\0ACTION={action}\0DEVPATH={devpath}\0"
    for k, v in keys.items():
        out += f"{k}={v}\0"
    return out.encode()


PCI = "/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
SEEDS = {
    "uevent-uverbs-add": b"\0" + uevent("add", PCI + "/infiniband_verbs/uverbs3",
                                         SUBSYSTEM="infiniband_verbs", MAJOR=231, MINOR=195,
                                         DEVNAME="infiniband/uverbs3", SEQNUM=4242),
    "uevent-ib-remove": b"\0" + uevent("remove", PCI + "/infiniband/mlx5_3",
                                        SUBSYSTEM="infiniband", NAME="mlx5_3", SEQNUM=4243),
    "uevent-umad-add": b"\0" + uevent("add", PCI + "/infiniband_mad/umad3",
                                       SUBSYSTEM="infiniband_mad", MAJOR=231, MINOR=3,
                                       DEVNAME="infiniband/umad3", SEQNUM=4244),
    "uevent-net-move": b"\0" + uevent("move", PCI + "/net/ib0", SUBSYSTEM="net",
                                       DEVPATH_OLD=PCI + "/net/ib9", INTERFACE="ib0",
                                       IFINDEX=7, SEQNUM=9),
    "uevent-veth": b"\0" + uevent("add", "/devices/virtual/net/veth1a2b", SUBSYSTEM="net",
                                   INTERFACE="veth1a2b", IFINDEX=42, SEQNUM=10),
    "uevent-pci-unbind": b"\0" + uevent("unbind", PCI, SUBSYSTEM="pci", DRIVER="mlx5_core",
                                         PCI_SLOT_NAME="0000:01:00.0", SEQNUM=11),
    "uevent-no-subsystem": b"\0" + uevent("change", "/devices/virtual/foo", SEQNUM=12),
    "uevent-unterminated": b"\0" + uevent("add", PCI, SUBSYSTEM="pci")[:-1],
    "uevent-libudev": b"\0libudev\0\xfe\xed\xca\xfe\x28\x00\x00\x00" +
                      b"ACTION=add\0SUBSYSTEM=infiniband\0",
    "uevent-action-mismatch": b"\0add@/devices/x\0ACTION=remove\0DEVPATH=/devices/x\0",
    "rtnl-ib0-up": b"\1" + link(RTM_NEWLINK, 7, "ib0"),
    "rtnl-ib0-down": b"\1" + link(RTM_NEWLINK, 7, "ib0", flags=IFF_UP | IFF_BROADCAST, oper=2,
                                  carrier=0),
    "rtnl-several": b"\1" + msg(RTM_NEWADDR, bytes([10, 64, 0, 0, 7, 0, 0, 0])) +
                    link(RTM_NEWLINK, 7, "ib0.8001", kind="ipoib") +
                    link(RTM_NEWLINK, 9, "eth2", dev_type=ARPHRD_ETHER, carrier=None) +
                    link(RTM_DELLINK, 12, "veth0", dev_type=ARPHRD_ETHER, kind="veth") +
                    msg(NLMSG_DONE, struct.pack("=i", 0)),
    "rtnl-len-lies": b"\1" + struct.pack("=I", 4000) + link(RTM_NEWLINK, 7, "ib0")[4:],
    "rtnl-attr-truncated": b"\1" + link(RTM_NEWLINK, 7, "ib0")[:40],
    # found by the fuzzer: a skipped message, then a cut header (the offset stops there)
    "rtnl-skipped-then-cut": b"\1" + msg(0x7069, bytes(24)) + b"\x08\x00\x03",
    "rtnl-name-unterminated": b"\1" + msg(RTM_NEWLINK, ifi(3, ARPHRD_ETHER, 0) +
                                          attr(IFLA_IFNAME, b"eth0")),
}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "netlink")
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(SEEDS.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
