/* SPDX-License-Identifier: MIT */
/*
 * Pure parsers for the two netlink message kinds the host watcher reads (hostwatch.h):
 *
 *   - kernel uevents (NETLINK_KOBJECT_UEVENT): "ACTION@DEVPATH\0KEY=VALUE\0...\0". Messages
 *     from user space (libudev's "libudev\0" header) are refused with -EPROTO; anything else
 *     malformed with -EBADMSG.
 *   - rtnetlink link messages (RTM_NEWLINK / RTM_DELLINK): a buffer of nlmsghdr-framed
 *     messages, each an ifinfomsg followed by rtattrs; IFLA_IFNAME, IFLA_OPERSTATE,
 *     IFLA_CARRIER and IFLA_LINKINFO/IFLA_INFO_KIND are extracted.
 *
 * No I/O, no allocation. Every length is checked against the buffer; unaligned buffers are
 * fine (headers are copied out, never cast in place). Nothing is logged.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Larger uevents are refused (the kernel's own UEVENT_BUFFER_SIZE is 2048). */
#define RDP_UEVENT_MAX 8192

struct rdp_uevent {
	/* All point into the parsed buffer; NULL when the key is absent. */
	const char *action; /* "add", "remove", "change", "move", "bind", "unbind", ... */
	const char *devpath; /* "/devices/pci0000:00/.../infiniband/mlx5_3" */
	const char *subsystem; /* "infiniband", "net", ... */
	const char *devname; /* DEVNAME= ("infiniband/uverbs3"), char/block devices only */
	const char *interface; /* INTERFACE= ("ib0"), net devices only */
};

/*
 * Parses one uevent datagram of len bytes (not necessarily NUL-terminated by the caller: every
 * field must end with a NUL inside buf, as the kernel sends them). ACTION and DEVPATH come from
 * the "ACTION@DEVPATH" header and must be non-empty; a KEY=VALUE of the same name must agree.
 * Returns 0, -EPROTO for a libudev (user space) message, -EBADMSG for anything malformed
 * (out untouched then).
 */
int rdp_uevent_parse(const void *buf, size_t len, struct rdp_uevent *out);

/*
 * True for the uevents that can change what the daemon serves: subsystems infiniband,
 * infiniband_verbs, infiniband_mad and pci, and net devices that are not virtual (a devpath
 * under /devices/virtual/ is a veth, bridge, ... created with every pod).
 */
bool rdp_uevent_relevant(const struct rdp_uevent *u);

struct rdp_rtnl_link {
	uint16_t msg_type; /* RTM_NEWLINK or RTM_DELLINK */
	int ifindex;
	uint16_t dev_type; /* ARPHRD_* */
	uint32_t flags; /* IFF_* (IFF_UP, IFF_RUNNING, IFF_LOWER_UP, ...) */
	uint32_t change; /* ifi_change */
	char ifname[16]; /* IFLA_IFNAME, "" when absent */
	int operstate; /* IFLA_OPERSTATE (IF_OPER_*), -1 when absent */
	int carrier; /* IFLA_CARRIER (0/1), -1 when absent */
	char kind[16]; /* IFLA_LINKINFO/IFLA_INFO_KIND ("veth", "ipoib"), "" when absent */
};

/*
 * Iterates the link messages of an rtnetlink datagram. *offset starts at 0. Returns 1 with
 * *out filled and *offset moved past that message, 0 at the end of the buffer (NLMSG_DONE
 * also ends it), or -EBADMSG when the next message is malformed (lengths that lie, truncated
 * headers or attributes, an over-long or unterminated name); *offset is left at the bad
 * message then. Messages of other types (NLMSG_NOOP, NLMSG_ERROR, RTM_NEWADDR, ...) are skipped.
 */
int rdp_rtnl_link_parse(const void *buf, size_t len, size_t *offset, struct rdp_rtnl_link *out);

/*
 * True when a netdev of this kind and ARPHRD type may carry RDMA traffic: Ethernet (RoCE) or
 * InfiniBand (IPoIB), and not one of the virtual kinds created with pods and bridges (veth,
 * bridge, vxlan, ...). "ipoib" child interfaces and kind-less (physical) netdevs are kept.
 */
bool rdp_rtnl_link_relevant(const struct rdp_rtnl_link *l);
