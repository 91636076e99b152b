/* SPDX-License-Identifier: MIT */
/*
 * uevent and rtnetlink link parsers (netlink.h). Headers are memcpy'd out of the buffer, so a
 * buffer at any alignment is read without undefined behaviour; every length is compared with
 * what is left before it is used.
 */
#include "netlink.h"

#include <errno.h>
#include <linux/if_arp.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>

/* uevents */

static const char LIBUDEV_MAGIC[] = "libudev";

/* Stores v in *slot; a repeated key must repeat the same value. */
static int set_key(const char **slot, const char *v)
{
	if (!*slot) {
		*slot = v;
		return 0;
	}
	return strcmp(*slot, v) == 0 ? 0 : -EBADMSG;
}

int rdp_uevent_parse(const void *buf, size_t len, struct rdp_uevent *out)
{
	const char *p = buf, *end, *at, *nul;
	struct rdp_uevent u = {0};

	if (!buf || !out || len == 0 || len > RDP_UEVENT_MAX)
		return -EBADMSG;
	end = p + len;
	if (len >= sizeof(LIBUDEV_MAGIC) && memcmp(p, LIBUDEV_MAGIC, sizeof(LIBUDEV_MAGIC)) == 0)
		return -EPROTO;
	/* The header: "ACTION@DEVPATH\0" */
	nul = memchr(p, '\0', len);
	if (!nul)
		return -EBADMSG;
	at = memchr(p, '@', (size_t)(nul - p));
	if (!at || at == p || at + 1 == nul || at[1] != '/')
		return -EBADMSG;
	/* ACTION= and DEVPATH= must be there too (the kernel always sends them) and agree. */
	for (const char *q = nul + 1; q < end;) {
		const char *e = memchr(q, '\0', (size_t)(end - q)), *eq;
		int r = 0;

		if (!e)
			return -EBADMSG; /* last field not terminated */
		if (e == q) { /* empty field: padding at the end only */
			q++;
			continue;
		}
		eq = memchr(q, '=', (size_t)(e - q));
		if (!eq || eq == q)
			return -EBADMSG;
#define KEY(k) ((size_t)(eq - q) == sizeof(k) - 1 && memcmp(q, k, sizeof(k) - 1) == 0)
		if (KEY("ACTION"))
			r = set_key(&u.action, eq + 1);
		else if (KEY("DEVPATH"))
			r = set_key(&u.devpath, eq + 1);
		else if (KEY("SUBSYSTEM"))
			r = set_key(&u.subsystem, eq + 1);
		else if (KEY("DEVNAME"))
			r = set_key(&u.devname, eq + 1);
		else if (KEY("INTERFACE"))
			r = set_key(&u.interface, eq + 1);
#undef KEY
		if (r < 0)
			return r;
		q = e + 1;
	}
	/* The header must agree with ACTION= and DEVPATH= when both are present. */
	if (u.action && (strlen(u.action) != (size_t)(at - p) ||
			 memcmp(u.action, p, (size_t)(at - p)) != 0))
		return -EBADMSG;
	if (u.devpath && strcmp(u.devpath, at + 1) != 0)
		return -EBADMSG;
	if (!u.action || !u.devpath || !u.action[0] || !u.devpath[0])
		return -EBADMSG;
	if (u.subsystem && !u.subsystem[0])
		return -EBADMSG;
	*out = u;
	return 0;
}

static bool streq(const char *a, const char *b)
{
	return a && strcmp(a, b) == 0;
}

bool rdp_uevent_relevant(const struct rdp_uevent *u)
{
	if (!u || !u->subsystem)
		return false;
	if (streq(u->subsystem, "infiniband") || streq(u->subsystem, "infiniband_verbs") ||
	    streq(u->subsystem, "infiniband_mad") || streq(u->subsystem, "pci"))
		return true;
	if (streq(u->subsystem, "net"))
		return u->devpath && strncmp(u->devpath, "/devices/virtual/", 17) != 0;
	return false;
}

/* rtnetlink */

#define ALIGN4(n) (((n) + 3u) & ~(size_t)3u)

/* Copies a NUL-terminated string attribute of at most dstsz-1 characters. */
static int attr_string(const uint8_t *payload, size_t plen, char *dst, size_t dstsz)
{
	const uint8_t *nul = memchr(payload, '\0', plen);
	size_t n;

	if (!nul)
		return -EBADMSG;
	n = (size_t)(nul - payload);
	if (n >= dstsz)
		return -EBADMSG;
	memcpy(dst, payload, n);
	dst[n] = '\0';
	return 0;
}

/*
 * Walks the rtattrs in [p, p+len), calling fn on each (type without the flag bits). The last
 * attribute may lack its alignment padding; any other length mismatch is -EBADMSG.
 */
typedef int (*attr_fn)(uint16_t type, const uint8_t *payload, size_t plen, void *ud);

static int walk_attrs(const uint8_t *p, size_t len, attr_fn fn, void *ud)
{
	size_t off = 0;

	while (off < len) {
		struct rtattr rta;
		size_t left = len - off;
		int r;

		if (left < sizeof(rta))
			return -EBADMSG;
		memcpy(&rta, p + off, sizeof(rta));
		if (rta.rta_len < sizeof(rta) || rta.rta_len > left)
			return -EBADMSG;
		r = fn(rta.rta_type & NLA_TYPE_MASK, p + off + sizeof(rta),
		       rta.rta_len - sizeof(rta), ud);
		if (r < 0)
			return r;
		off += ALIGN4(rta.rta_len);
	}
	return 0;
}

static int linkinfo_attr(uint16_t type, const uint8_t *payload, size_t plen, void *ud)
{
	struct rdp_rtnl_link *l = ud;

	if (type == IFLA_INFO_KIND)
		return attr_string(payload, plen, l->kind, sizeof(l->kind));
	return 0;
}

static int link_attr(uint16_t type, const uint8_t *payload, size_t plen, void *ud)
{
	struct rdp_rtnl_link *l = ud;

	switch (type) {
	case IFLA_IFNAME:
		if (attr_string(payload, plen, l->ifname, sizeof(l->ifname)) < 0 || !l->ifname[0])
			return -EBADMSG;
		return 0;
	case IFLA_OPERSTATE:
		if (plen < 1)
			return -EBADMSG;
		l->operstate = payload[0];
		return 0;
	case IFLA_CARRIER:
		if (plen < 1)
			return -EBADMSG;
		l->carrier = payload[0] ? 1 : 0;
		return 0;
	case IFLA_LINKINFO:
		return walk_attrs(payload, plen, linkinfo_attr, l);
	default:
		return 0;
	}
}

int rdp_rtnl_link_parse(const void *buf, size_t len, size_t *offset, struct rdp_rtnl_link *out)
{
	const uint8_t *p = buf;

	if (!offset || !out || (!buf && len))
		return -EBADMSG;
	while (*offset < len) {
		struct nlmsghdr h;
		struct ifinfomsg ifi;
		struct rdp_rtnl_link l;
		size_t left = len - *offset, next;
		const uint8_t *m = p + *offset;
		int r;

		if (left < sizeof(h))
			return -EBADMSG;
		memcpy(&h, m, sizeof(h));
		if (h.nlmsg_len < sizeof(h) || h.nlmsg_len > left)
			return -EBADMSG;
		next = ALIGN4(h.nlmsg_len);
		if (next > left)
			next = left;
		if (h.nlmsg_type == NLMSG_DONE) {
			*offset = len;
			return 0;
		}
		if (h.nlmsg_type != RTM_NEWLINK && h.nlmsg_type != RTM_DELLINK) {
			*offset += next;
			continue;
		}
		if (h.nlmsg_len < sizeof(h) + sizeof(ifi))
			return -EBADMSG;
		memcpy(&ifi, m + sizeof(h), sizeof(ifi));
		if (ifi.ifi_index <= 0)
			return -EBADMSG;
		memset(&l, 0, sizeof(l));
		l.msg_type = h.nlmsg_type;
		l.ifindex = ifi.ifi_index;
		l.dev_type = ifi.ifi_type;
		l.flags = ifi.ifi_flags;
		l.change = ifi.ifi_change;
		l.operstate = -1;
		l.carrier = -1;
		/* NLMSG_ALIGN(sizeof(ifinfomsg)) == sizeof(ifinfomsg) == 16 */
		r = walk_attrs(m + sizeof(h) + sizeof(ifi), h.nlmsg_len - sizeof(h) - sizeof(ifi),
			       link_attr, &l);
		if (r < 0)
			return r;
		*offset += next;
		*out = l;
		return 1;
	}
	return 0;
}

bool rdp_rtnl_link_relevant(const struct rdp_rtnl_link *l)
{
	static const char *const virtual_kinds[] = {
		"veth", "bridge", "vxlan", "geneve", "dummy", "tun", "wireguard", "ipip",
		"gre", "gretap", "ip6tnl", "sit", "vti", "nlmon", "ifb", "vcan", "macvtap",
	};

	if (!l)
		return false;
	if (l->dev_type != ARPHRD_ETHER && l->dev_type != ARPHRD_INFINIBAND)
		return false;
	for (size_t i = 0; i < sizeof(virtual_kinds) / sizeof(virtual_kinds[0]); i++)
		if (strcmp(l->kind, virtual_kinds[i]) == 0)
			return false;
	return true;
}
