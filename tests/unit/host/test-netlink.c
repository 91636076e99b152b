/* SPDX-License-Identifier: MIT */
/*
 * netlink.h: uevents as the kernel sends them (and as libudev re-broadcasts them), rtnetlink
 * link messages built byte by byte as the kernel lays them out (nlmsghdr, ifinfomsg, rtattrs,
 * a nested IFLA_LINKINFO), then the same broken: truncated attributes, lengths that lie,
 * unterminated names, every prefix of a valid message, an unaligned buffer.
 */
#include <errno.h>
#include <linux/if.h>
#include <linux/if_arp.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdint.h>
#include <string.h>

#include "netlink.h"
#include "test.h"

/* A message builder: the kernel's layout, 4-byte aligned. */
struct nb {
	uint8_t b[4096] __attribute__((aligned(4)));
	size_t n;
};

static size_t nb_put(struct nb *m, const void *p, size_t len)
{
	size_t off = m->n;

	memcpy(m->b + m->n, p, len);
	m->n += len;
	while (m->n % 4)
		m->b[m->n++] = 0;
	return off;
}

static size_t nb_msg(struct nb *m, uint16_t type)
{
	struct nlmsghdr h = {.nlmsg_type = type, .nlmsg_seq = 0, .nlmsg_pid = 0};

	return nb_put(m, &h, sizeof(h));
}

static void nb_msg_end(struct nb *m, size_t off)
{
	uint32_t len = (uint32_t)(m->n - off);

	memcpy(m->b + off, &len, sizeof(len)); /* nlmsg_len is the first field */
}

static void nb_ifi(struct nb *m, int index, uint16_t type, uint32_t flags, uint32_t change)
{
	struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC, .ifi_type = type, .ifi_index = index,
				.ifi_flags = flags, .ifi_change = change};

	nb_put(m, &ifi, sizeof(ifi));
}

static size_t nb_attr(struct nb *m, uint16_t type, const void *p, size_t len)
{
	struct rtattr a = {.rta_len = (unsigned short)(sizeof(a) + len), .rta_type = type};
	size_t off = m->n;

	memcpy(m->b + m->n, &a, sizeof(a));
	m->n += sizeof(a);
	if (len)
		memcpy(m->b + m->n, p, len);
	m->n += len;
	while (m->n % 4)
		m->b[m->n++] = 0;
	return off;
}

static size_t nb_nest(struct nb *m, uint16_t type)
{
	return nb_attr(m, type | NLA_F_NESTED, NULL, 0);
}

static void nb_nest_end(struct nb *m, size_t off)
{
	unsigned short len = (unsigned short)(m->n - off);

	memcpy(m->b + off, &len, sizeof(len));
}

/* RTM_NEWLINK for ib0 as the kernel sends it when the port comes up. */
static void build_ib0(struct nb *m, uint16_t type, const char *kind)
{
	uint8_t oper = IF_OPER_UP, carrier = 1;
	uint32_t mtu = 2044;
	size_t h = nb_msg(m, type);

	nb_ifi(m, 7, ARPHRD_INFINIBAND, IFF_UP | IFF_BROADCAST | IFF_RUNNING | IFF_LOWER_UP, 0);
	nb_attr(m, IFLA_IFNAME, "ib0", 4);
	nb_attr(m, IFLA_MTU, &mtu, sizeof(mtu));
	nb_attr(m, IFLA_OPERSTATE, &oper, 1);
	nb_attr(m, IFLA_CARRIER, &carrier, 1);
	if (kind) {
		size_t li = nb_nest(m, IFLA_LINKINFO);

		nb_attr(m, IFLA_INFO_KIND, kind, strlen(kind) + 1);
		nb_nest_end(m, li);
	}
	nb_msg_end(m, h);
}

static void test_rtnl_ib0(void)
{
	struct nb m = {0};
	struct rdp_rtnl_link l;
	size_t off = 0;

	build_ib0(&m, RTM_NEWLINK, NULL);
	EXPECT_EQ(rdp_rtnl_link_parse(m.b, m.n, &off, &l), 1);
	EXPECT_EQ(l.msg_type, RTM_NEWLINK);
	EXPECT_EQ(l.ifindex, 7);
	EXPECT_EQ(l.dev_type, ARPHRD_INFINIBAND);
	EXPECT_STREQ(l.ifname, "ib0");
	EXPECT_EQ(l.operstate, IF_OPER_UP);
	EXPECT_EQ(l.carrier, 1);
	EXPECT_TRUE(l.flags & IFF_LOWER_UP);
	EXPECT_STREQ(l.kind, "");
	EXPECT_TRUE(rdp_rtnl_link_relevant(&l));
	EXPECT_EQ(off, m.n);
	EXPECT_EQ(rdp_rtnl_link_parse(m.b, m.n, &off, &l), 0);
}

static void test_rtnl_several(void)
{
	struct nb m = {0};
	struct rdp_rtnl_link l;
	size_t off = 0, h;
	uint8_t oper = IF_OPER_DOWN;

	/* an address message first: skipped */
	h = nb_msg(&m, RTM_NEWADDR);
	nb_put(&m, "\x0a\x40\x00\x00\x07\x00\x00\x00", 8);
	nb_msg_end(&m, h);
	build_ib0(&m, RTM_NEWLINK, "ipoib");
	h = nb_msg(&m, NLMSG_NOOP);
	nb_msg_end(&m, h);
	/* eth2 (RoCE) going down: no carrier attribute */
	h = nb_msg(&m, RTM_NEWLINK);
	nb_ifi(&m, 9, ARPHRD_ETHER, IFF_UP | IFF_BROADCAST, 0);
	nb_attr(&m, IFLA_IFNAME, "eth2", 5);
	nb_attr(&m, IFLA_OPERSTATE, &oper, 1);
	nb_msg_end(&m, h);
	build_ib0(&m, RTM_DELLINK, "veth");
	h = nb_msg(&m, NLMSG_DONE);
	nb_msg_end(&m, h);
	build_ib0(&m, RTM_NEWLINK, NULL); /* after DONE: not read */

	EXPECT_EQ(rdp_rtnl_link_parse(m.b, m.n, &off, &l), 1);
	EXPECT_STREQ(l.kind, "ipoib");
	EXPECT_TRUE(rdp_rtnl_link_relevant(&l));
	EXPECT_EQ(rdp_rtnl_link_parse(m.b, m.n, &off, &l), 1);
	EXPECT_STREQ(l.ifname, "eth2");
	EXPECT_EQ(l.ifindex, 9);
	EXPECT_EQ(l.operstate, IF_OPER_DOWN);
	EXPECT_EQ(l.carrier, -1);
	EXPECT_TRUE(!(l.flags & IFF_LOWER_UP));
	EXPECT_TRUE(rdp_rtnl_link_relevant(&l));
	EXPECT_EQ(rdp_rtnl_link_parse(m.b, m.n, &off, &l), 1);
	EXPECT_EQ(l.msg_type, RTM_DELLINK);
	EXPECT_STREQ(l.kind, "veth");
	EXPECT_TRUE(!rdp_rtnl_link_relevant(&l));
	EXPECT_EQ(rdp_rtnl_link_parse(m.b, m.n, &off, &l), 0);
	EXPECT_EQ(off, m.n);
}

static void test_rtnl_relevant(void)
{
	struct rdp_rtnl_link l = {.dev_type = ARPHRD_LOOPBACK};

	EXPECT_TRUE(!rdp_rtnl_link_relevant(&l));
	l.dev_type = ARPHRD_ETHER;
	EXPECT_TRUE(rdp_rtnl_link_relevant(&l));
	strcpy(l.kind, "bridge");
	EXPECT_TRUE(!rdp_rtnl_link_relevant(&l));
	strcpy(l.kind, "bond");
	EXPECT_TRUE(rdp_rtnl_link_relevant(&l)); /* RoCE LAG */
	EXPECT_TRUE(!rdp_rtnl_link_relevant(NULL));
}

static void expect_bad(const void *buf, size_t len, const char *what)
{
	struct rdp_rtnl_link l;
	size_t off = 0;
	int r = rdp_rtnl_link_parse(buf, len, &off, &l);

	if (r != -EBADMSG)
		fprintf(stderr, "case %s: r=%d\n", what, r);
	EXPECT_EQ(r, -EBADMSG);
	EXPECT_EQ(off, 0);
}

static void test_rtnl_malformed(void)
{
	struct nb m;
	struct rdp_rtnl_link l;
	size_t off, h;
	uint32_t len;

	/* nlmsg_len larger than the datagram */
	memset(&m, 0, sizeof(m));
	build_ib0(&m, RTM_NEWLINK, NULL);
	len = (uint32_t)m.n + 4;
	memcpy(m.b, &len, 4);
	expect_bad(m.b, m.n, "nlmsg_len too long");
	/* nlmsg_len smaller than the header */
	len = 8;
	memcpy(m.b, &len, 4);
	expect_bad(m.b, m.n, "nlmsg_len < header");
	/* nlmsg_len covers the header but not the ifinfomsg */
	len = sizeof(struct nlmsghdr) + 4;
	memcpy(m.b, &len, 4);
	expect_bad(m.b, m.n, "no ifinfomsg");
	/* fewer bytes than a header */
	expect_bad(m.b, 10, "short header");

	/* an attribute longer than what is left */
	memset(&m, 0, sizeof(m));
	h = nb_msg(&m, RTM_NEWLINK);
	nb_ifi(&m, 3, ARPHRD_ETHER, 0, 0);
	nb_attr(&m, IFLA_IFNAME, "eth0", 5);
	nb_msg_end(&m, h);
	{
		unsigned short alen = 40;

		memcpy(m.b + sizeof(struct nlmsghdr) + sizeof(struct ifinfomsg), &alen, 2);
	}
	expect_bad(m.b, m.n, "rta_len too long");
	/* rta_len below the attribute header: would never advance */
	{
		unsigned short alen = 2;

		memcpy(m.b + sizeof(struct nlmsghdr) + sizeof(struct ifinfomsg), &alen, 2);
	}
	expect_bad(m.b, m.n, "rta_len < 4");
	/* attribute header cut: 2 bytes of attributes */
	memset(&m, 0, sizeof(m));
	h = nb_msg(&m, RTM_NEWLINK);
	nb_ifi(&m, 3, ARPHRD_ETHER, 0, 0);
	nb_msg_end(&m, h);
	len = (uint32_t)m.n + 2;
	memcpy(m.b, &len, 4);
	expect_bad(m.b, m.n + 2, "cut rtattr header");

	/* an unterminated name */
	memset(&m, 0, sizeof(m));
	h = nb_msg(&m, RTM_NEWLINK);
	nb_ifi(&m, 3, ARPHRD_ETHER, 0, 0);
	nb_attr(&m, IFLA_IFNAME, "eth0", 4);
	nb_msg_end(&m, h);
	expect_bad(m.b, m.n, "unterminated ifname");
	/* a name of 16 characters (IFNAMSIZ includes the NUL) */
	memset(&m, 0, sizeof(m));
	h = nb_msg(&m, RTM_NEWLINK);
	nb_ifi(&m, 3, ARPHRD_ETHER, 0, 0);
	nb_attr(&m, IFLA_IFNAME, "abcdefghijklmnop", 17);
	nb_msg_end(&m, h);
	expect_bad(m.b, m.n, "ifname too long");
	/* an empty operstate */
	memset(&m, 0, sizeof(m));
	h = nb_msg(&m, RTM_NEWLINK);
	nb_ifi(&m, 3, ARPHRD_ETHER, 0, 0);
	nb_attr(&m, IFLA_OPERSTATE, NULL, 0);
	nb_msg_end(&m, h);
	expect_bad(m.b, m.n, "empty operstate");
	/* a broken nested kind */
	memset(&m, 0, sizeof(m));
	h = nb_msg(&m, RTM_NEWLINK);
	nb_ifi(&m, 3, ARPHRD_ETHER, 0, 0);
	{
		size_t li = nb_nest(&m, IFLA_LINKINFO);

		nb_attr(&m, IFLA_INFO_KIND, "vethvethvethvethveth", 21);
		nb_nest_end(&m, li);
	}
	nb_msg_end(&m, h);
	expect_bad(m.b, m.n, "kind too long");
	/* ifindex 0 */
	memset(&m, 0, sizeof(m));
	h = nb_msg(&m, RTM_NEWLINK);
	nb_ifi(&m, 0, ARPHRD_ETHER, 0, 0);
	nb_msg_end(&m, h);
	expect_bad(m.b, m.n, "ifindex 0");

	/* a good message, then a bad one: the first is delivered, the error stops at the second */
	memset(&m, 0, sizeof(m));
	build_ib0(&m, RTM_NEWLINK, NULL);
	{
		size_t first = m.n;

		h = nb_msg(&m, RTM_NEWLINK);
		nb_ifi(&m, 3, ARPHRD_ETHER, 0, 0);
		nb_attr(&m, IFLA_IFNAME, "eth0", 4);
		nb_msg_end(&m, h);
		off = 0;
		EXPECT_EQ(rdp_rtnl_link_parse(m.b, m.n, &off, &l), 1);
		EXPECT_EQ(off, first);
		EXPECT_EQ(rdp_rtnl_link_parse(m.b, m.n, &off, &l), -EBADMSG);
		EXPECT_EQ(off, first);
	}
	/* a skipped message, then a cut header: -EBADMSG, the offset at the cut (fuzzer seed) */
	memset(&m, 0, sizeof(m));
	h = nb_msg(&m, RTM_NEWADDR);
	nb_put(&m, "\x0a\x40\x00\x00\x07\x00\x00\x00", 8);
	nb_msg_end(&m, h);
	{
		size_t cut = m.n;

		nb_put(&m, "\x08\x00\x03\x00", 4);
		off = 0;
		EXPECT_EQ(rdp_rtnl_link_parse(m.b, cut + 3, &off, &l), -EBADMSG);
		EXPECT_EQ(off, cut);
	}
	/* bad arguments */
	off = 0;
	EXPECT_EQ(rdp_rtnl_link_parse(NULL, 4, &off, &l), -EBADMSG);
	EXPECT_EQ(rdp_rtnl_link_parse(NULL, 0, &off, &l), 0);
}

static void test_rtnl_prefixes_and_alignment(void)
{
	struct nb m = {0};
	struct rdp_rtnl_link l;
	uint8_t raw[4096 + 1];
	size_t off;

	build_ib0(&m, RTM_NEWLINK, "ipoib");
	/* every proper prefix is refused, never read past */
	for (size_t n = 1; n < m.n; n++) {
		uint8_t *copy = malloc(n);

		memcpy(copy, m.b, n);
		off = 0;
		EXPECT_EQ(rdp_rtnl_link_parse(copy, n, &off, &l), -EBADMSG);
		free(copy);
	}
	/* the last message may lack its padding: a 1-byte name pads to 4 */
	{
		struct nb p = {0};
		size_t h = nb_msg(&p, RTM_NEWLINK);
		uint32_t len;

		nb_ifi(&p, 4, ARPHRD_ETHER, 0, 0);
		nb_attr(&p, IFLA_IFNAME, "e", 2); /* rta_len 6, padded to 8 */
		p.n -= 2; /* no padding at the very end */
		len = (uint32_t)(p.n - h);
		memcpy(p.b + h, &len, 4);
		off = 0;
		EXPECT_EQ(rdp_rtnl_link_parse(p.b, p.n, &off, &l), 1);
		EXPECT_STREQ(l.ifname, "e");
		EXPECT_EQ(off, p.n);
	}
	/* an unaligned buffer */
	memcpy(raw + 1, m.b, m.n);
	off = 0;
	EXPECT_EQ(rdp_rtnl_link_parse(raw + 1, m.n, &off, &l), 1);
	EXPECT_STREQ(l.ifname, "ib0");
	EXPECT_STREQ(l.kind, "ipoib");
}

/* uevents */

#define UV_PATH "/devices/pci0000:00/0000:00:01.0/0000:01:00.0/infiniband_verbs/uverbs3"
static const char uverbs_add[] = "add@" UV_PATH "\0"
				 "ACTION=add\0"
				 "DEVPATH=" UV_PATH "\0"
				 "SUBSYSTEM=infiniband_verbs\0"
				 "MAJOR=231\0"
				 "MINOR=195\0"
				 "DEVNAME=infiniband/uverbs3\0"
				 "SEQNUM=4242";

static void test_uevent_kernel(void)
{
	struct rdp_uevent u;

	/* sizeof includes the final NUL, as the kernel's length does */
	EXPECT_EQ(rdp_uevent_parse(uverbs_add, sizeof(uverbs_add), &u), 0);
	EXPECT_STREQ(u.action, "add");
	EXPECT_STREQ(u.devpath, UV_PATH);
	EXPECT_STREQ(u.subsystem, "infiniband_verbs");
	EXPECT_STREQ(u.devname, "infiniband/uverbs3");
	EXPECT_TRUE(u.interface == NULL);
	EXPECT_TRUE(rdp_uevent_relevant(&u));
}

static void test_uevent_net(void)
{
	static const char ib0[] = "move@/devices/pci0000:00/0000:00:01.0/0000:01:00.0/net/ib0\0"
				  "ACTION=move\0"
				  "DEVPATH=/devices/pci0000:00/0000:00:01.0/0000:01:00.0/net/ib0\0"
				  "SUBSYSTEM=net\0"
				  "DEVPATH_OLD=/devices/pci0000:00/0000:00:01.0/0000:01:00.0/net/ib9\0"
				  "INTERFACE=ib0\0"
				  "IFINDEX=7\0"
				  "SEQNUM=9";
	static const char veth[] = "add@/devices/virtual/net/veth1a2b\0"
				   "ACTION=add\0"
				   "DEVPATH=/devices/virtual/net/veth1a2b\0"
				   "SUBSYSTEM=net\0"
				   "INTERFACE=veth1a2b\0"
				   "IFINDEX=42\0"
				   "SEQNUM=10";
	static const char usb[] = "add@/devices/pci0000:00/usb1/1-1\0"
				  "ACTION=add\0"
				  "DEVPATH=/devices/pci0000:00/usb1/1-1\0"
				  "SUBSYSTEM=usb\0";
	struct rdp_uevent u;

	EXPECT_EQ(rdp_uevent_parse(ib0, sizeof(ib0), &u), 0);
	EXPECT_STREQ(u.action, "move");
	EXPECT_STREQ(u.interface, "ib0");
	EXPECT_TRUE(rdp_uevent_relevant(&u));
	EXPECT_EQ(rdp_uevent_parse(veth, sizeof(veth), &u), 0);
	EXPECT_STREQ(u.interface, "veth1a2b");
	EXPECT_TRUE(!rdp_uevent_relevant(&u));
	EXPECT_EQ(rdp_uevent_parse(usb, sizeof(usb), &u), 0);
	EXPECT_TRUE(!rdp_uevent_relevant(&u));
}

static void test_uevent_bad(void)
{
	/* libudev's re-broadcast: magic, then a binary header */
	static const char udev[] = "libudev\0\xfe\xed\xca\xfe\x28\x00\x00\x00"
				   "ACTION=add\0SUBSYSTEM=infiniband\0";
	static const char no_subsys[] = "remove@/devices/virtual/foo\0"
					"ACTION=remove\0DEVPATH=/devices/virtual/foo\0SEQNUM=1";
	static const char no_at[] = "add/devices/x\0ACTION=add\0DEVPATH=/devices/x";
	static const char mismatch[] = "add@/devices/x\0ACTION=remove\0DEVPATH=/devices/x";
	static const char path_mismatch[] = "add@/devices/x\0ACTION=add\0DEVPATH=/devices/y";
	static const char no_eq[] = "add@/devices/x\0ACTION=add\0DEVPATH=/devices/x\0JUNK";
	static const char no_action[] = "add@/devices/x\0DEVPATH=/devices/x";
	static const char dup[] = "add@/devices/x\0ACTION=add\0DEVPATH=/devices/x\0"
				  "SUBSYSTEM=pci\0SUBSYSTEM=net";
	static const char empty_subsys[] = "add@/devices/x\0ACTION=add\0DEVPATH=/devices/x\0"
					   "SUBSYSTEM=";
	struct rdp_uevent u, canary;
	char big[RDP_UEVENT_MAX + 1];

	memset(&canary, 0x5a, sizeof(canary));
	u = canary;
	EXPECT_EQ(rdp_uevent_parse(udev, sizeof(udev), &u), -EPROTO);
	EXPECT_TRUE(memcmp(&u, &canary, sizeof(u)) == 0);
	/* missing SUBSYSTEM parses, and is not relevant */
	EXPECT_EQ(rdp_uevent_parse(no_subsys, sizeof(no_subsys), &u), 0);
	EXPECT_TRUE(u.subsystem == NULL);
	EXPECT_TRUE(!rdp_uevent_relevant(&u));
	/* no NUL at the end: the last field is cut */
	u = canary;
	EXPECT_EQ(rdp_uevent_parse(uverbs_add, sizeof(uverbs_add) - 1, &u), -EBADMSG);
	EXPECT_TRUE(memcmp(&u, &canary, sizeof(u)) == 0);
	EXPECT_EQ(rdp_uevent_parse(no_at, sizeof(no_at), &u), -EBADMSG);
	EXPECT_EQ(rdp_uevent_parse(mismatch, sizeof(mismatch), &u), -EBADMSG);
	EXPECT_EQ(rdp_uevent_parse(path_mismatch, sizeof(path_mismatch), &u), -EBADMSG);
	EXPECT_EQ(rdp_uevent_parse(no_eq, sizeof(no_eq), &u), -EBADMSG);
	EXPECT_EQ(rdp_uevent_parse(no_action, sizeof(no_action), &u), -EBADMSG);
	EXPECT_EQ(rdp_uevent_parse(dup, sizeof(dup), &u), -EBADMSG);
	EXPECT_EQ(rdp_uevent_parse(empty_subsys, sizeof(empty_subsys), &u), -EBADMSG);
	EXPECT_EQ(rdp_uevent_parse("", 0, &u), -EBADMSG);
	EXPECT_EQ(rdp_uevent_parse(NULL, 10, &u), -EBADMSG);
	EXPECT_EQ(rdp_uevent_parse("@", 2, &u), -EBADMSG);
	memset(big, 'a', sizeof(big));
	EXPECT_EQ(rdp_uevent_parse(big, sizeof(big), &u), -EBADMSG);
	/* every prefix: no crash, no read past (exact-size copies) */
	for (size_t n = 0; n < sizeof(uverbs_add); n++) {
		char *copy = malloc(n ? n : 1);

		memcpy(copy, uverbs_add, n);
		(void)rdp_uevent_parse(copy, n, &u);
		free(copy);
	}
}

int main(void)
{
	test_rtnl_ib0();
	test_rtnl_several();
	test_rtnl_relevant();
	test_rtnl_malformed();
	test_rtnl_prefixes_and_alignment();
	test_uevent_kernel();
	test_uevent_net();
	test_uevent_bad();
	return test_summary("test-netlink");
}
