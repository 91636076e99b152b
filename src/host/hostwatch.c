/* SPDX-License-Identifier: MIT */
/*
 * The host watcher (hostwatch.h): one inotify fd (dev root + its infiniband/), one uevent
 * socket, one rtnetlink socket, one coalescing timer and one retry timer for a missing dev root.
 */
#include "hostwatch.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <linux/if.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <unistd.h>

#include "macro.h"
#include "netlink.h"
#include "sysfs.h"

#define IB_DIR "infiniband"
/* Bounded work per wakeup: the rest waits for the next iteration (epoll is level-triggered). */
#define MAX_MSGS_PER_WAKEUP 64
#define MAX_INOTIFY_READS 8
/* Receive buffers: enough for a driver reload's burst; beyond it ENOBUFS says "rescan". */
#define UEVENT_RCVBUF (256 * 1024)
#define RTNL_RCVBUF (256 * 1024)
#define RTNL_BUF 32768

#define ROOT_MASK                                                                                  \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF |     \
	 IN_ONLYDIR)
#define IB_MASK (ROOT_MASK | IN_ATTRIB)
#define LINK_FLAGS (IFF_UP | IFF_RUNNING | IFF_LOWER_UP)

/* The coalescing state: idle, or a callback due when the timer fires. */
enum pending_state { PENDING_IDLE, PENDING_ARMED };

struct link_state {
	int ifindex;
	char ifname[16];
	uint32_t flags; /* & LINK_FLAGS */
	int operstate;
	int carrier;
};

struct source {
	enum rdp_hostwatch_state state;
	int error;
	uint64_t received;
};

struct rdp_hostwatch {
	struct rdp_event *e;
	char *dev_root;
	char *ib_path;
	uint64_t coalesce_usec, min_interval_usec;
	rdp_hostwatch_cb cb;
	void *userdata;

	struct source src[RDP_HOSTWATCH_SOURCE_MAX];

	int inotify_fd, wd_root, wd_ib;
	int uevent_fd, rtnl_fd;
	struct rdp_event_source *inotify_src, *uevent_src, *rtnl_src, *timer_src, *retry_src;

	enum pending_state pending;
	char reason[RDP_HOSTWATCH_REASON_MAX];
	unsigned int n_events;
	unsigned int flags; /* RDP_HOSTWATCH_LOST_EVENTS */
	uint64_t last_fire;

	struct link_state *links;
	size_t n_links, cap_links;

	uint8_t *rtnl_buf; /* RTNL_BUF bytes */

	/* rdp_hostwatch_set_netdevs(): served netdevs, relevant whatever their kind. */
	char (*netdevs)[IFNAMSIZ];
	size_t n_netdevs;
};

int rdp_hostwatch_set_netdevs(struct rdp_hostwatch *w, const char *const *names, size_t n)
{
	char(*v)[IFNAMSIZ] = NULL;

	if (!w)
		return 0;
	if (n && !names)
		return -EINVAL;
	if (n) {
		v = rdp_calloc(n, sizeof(*v));
		if (!v)
			return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		snprintf(v[i], sizeof(v[i]), "%s", names[i] ? names[i] : "");
	rdp_free(w->netdevs);
	w->netdevs = v;
	w->n_netdevs = n;
	return 0;
}

static bool served_netdev(const struct rdp_hostwatch *w, const char *name)
{
	for (size_t i = 0; name && name[0] && i < w->n_netdevs; i++)
		if (strcmp(w->netdevs[i], name) == 0)
			return true;
	return false;
}

/* A link message that may change what is served: see rdp_hostwatch_set_netdevs(). */
static bool link_relevant(const struct rdp_hostwatch *w, const struct rdp_rtnl_link *l,
			  const char *known_name)
{
	return rdp_rtnl_link_relevant(l) || served_netdev(w, l->ifname) ||
	       served_netdev(w, known_name);
}

const char *rdp_hostwatch_source_name(enum rdp_hostwatch_source s)
{
	switch (s) {
	case RDP_HOSTWATCH_DEV:
		return "dev";
	case RDP_HOSTWATCH_UEVENT:
		return "uevent";
	case RDP_HOSTWATCH_RTNL:
		return "rtnl";
	case RDP_HOSTWATCH_SOURCE_MAX:
		break;
	}
	return "?";
}

enum rdp_hostwatch_state rdp_hostwatch_source_state(const struct rdp_hostwatch *w,
						    enum rdp_hostwatch_source s, int *error)
{
	if (error)
		*error = 0;
	if (!w || s < 0 || s >= RDP_HOSTWATCH_SOURCE_MAX)
		return RDP_HOSTWATCH_OFF;
	if (error)
		*error = w->src[s].error;
	return w->src[s].state;
}

uint64_t rdp_hostwatch_source_received(const struct rdp_hostwatch *w,
				       enum rdp_hostwatch_source s)
{
	if (!w || s < 0 || s >= RDP_HOSTWATCH_SOURCE_MAX)
		return 0;
	return w->src[s].received;
}

static void source_set(struct rdp_hostwatch *w, enum rdp_hostwatch_source s,
		       enum rdp_hostwatch_state st, int error)
{
	w->src[s].state = st;
	w->src[s].error = st == RDP_HOSTWATCH_UNAVAILABLE ? error : 0;
}

/* Coalescing. */

static void changed(struct rdp_hostwatch *w, const char *fmt, ...) _printf_(2, 3);

static void changed(struct rdp_hostwatch *w, const char *fmt, ...)
{
	uint64_t now, due;
	va_list ap;

	if (w->n_events < UINT32_MAX)
		w->n_events++;
	if (w->pending == PENDING_ARMED)
		return;
	va_start(ap, fmt);
	vsnprintf(w->reason, sizeof(w->reason), fmt, ap);
	va_end(ap);
	now = rdp_now_usec();
	due = now + w->coalesce_usec;
	if (w->last_fire && w->last_fire + w->min_interval_usec > due)
		due = w->last_fire + w->min_interval_usec;
	w->pending = PENDING_ARMED;
	/* 0 would disarm: at least 1 us. */
	if (rdp_event_source_set_timer(w->timer_src, due > now ? due - now : 1) < 0) {
		/* Cannot happen with a live timer; never lose the change: retry at next event. */
		w->pending = PENDING_IDLE;
	}
}

/* Events were lost (overflow, truncation): the next callback asks for a full rescan. */
static void lost(struct rdp_hostwatch *w, const char *why)
{
	w->flags |= RDP_HOSTWATCH_LOST_EVENTS;
	changed(w, "%s", why);
}

static int on_timer(struct rdp_event_source *s, void *userdata)
{
	struct rdp_hostwatch *w = userdata;
	char reason[RDP_HOSTWATCH_REASON_MAX];
	unsigned int n = w->n_events, flags = w->flags;
	rdp_hostwatch_cb cb = w->cb;
	void *ud = w->userdata;

	if (w->pending != PENDING_ARMED)
		return 0;
	memcpy(reason, w->reason, sizeof(reason));
	w->pending = PENDING_IDLE;
	w->n_events = 0;
	w->flags = 0;
	w->last_fire = rdp_now_usec();
	cb(reason, n, flags, ud); /* may free w */
	return 0;
}

/* dev: inotify. */

static void watch_ib(struct rdp_hostwatch *w)
{
	int wd = inotify_add_watch(w->inotify_fd, w->ib_path, IB_MASK);

	/* Missing (not yet re-created): the root's watch tells when it comes. */
	w->wd_ib = wd >= 0 ? wd : -1;
}

static int watch_root(struct rdp_hostwatch *w)
{
	int wd = inotify_add_watch(w->inotify_fd, w->dev_root, ROOT_MASK);

	if (wd < 0) {
		int r = -errno;

		w->wd_root = -1;
		source_set(w, RDP_HOSTWATCH_DEV, RDP_HOSTWATCH_UNAVAILABLE, r);
		return r;
	}
	w->wd_root = wd;
	source_set(w, RDP_HOSTWATCH_DEV, RDP_HOSTWATCH_ACTIVE, 0);
	watch_ib(w);
	return 0;
}

static void root_gone(struct rdp_hostwatch *w)
{
	if (w->wd_ib >= 0)
		(void)inotify_rm_watch(w->inotify_fd, w->wd_ib);
	w->wd_root = w->wd_ib = -1;
	source_set(w, RDP_HOSTWATCH_DEV, RDP_HOSTWATCH_UNAVAILABLE, -ENOENT);
	(void)rdp_event_source_set_timer(w->retry_src, RDP_HOSTWATCH_RETRY_USEC);
	changed(w, "dev-root-removed");
}

static int on_retry(struct rdp_event_source *s, void *userdata)
{
	struct rdp_hostwatch *w = userdata;

	if (w->wd_root >= 0)
		return 0;
	if (watch_root(w) < 0) {
		(void)rdp_event_source_set_timer(s, RDP_HOSTWATCH_RETRY_USEC);
		return 0;
	}
	changed(w, "dev-root-back");
	return 0;
}

static void inotify_event(struct rdp_hostwatch *w, const struct inotify_event *ev)
{
	const char *name = ev->len ? ev->name : "";

	if (ev->mask & IN_Q_OVERFLOW) {
		/* Lost events: make sure both watches are there, and rescan. */
		if (w->wd_root >= 0 && w->wd_ib < 0)
			watch_ib(w);
		lost(w, "inotify-overflow");
		return;
	}
	if (ev->wd >= 0 && ev->wd == w->wd_root) {
		if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
			root_gone(w);
			return;
		}
		if (strcmp(name, IB_DIR) != 0)
			return;
		if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
			watch_ib(w);
			changed(w, "dev-infiniband-created");
		} else if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
			if (w->wd_ib >= 0)
				(void)inotify_rm_watch(w->inotify_fd, w->wd_ib);
			w->wd_ib = -1;
			changed(w, "dev-infiniband-removed");
		}
		return;
	}
	if (ev->wd >= 0 && ev->wd == w->wd_ib) {
		if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) {
			/* The parent's IN_DELETE usually said it first; a bind mount's never does. */
			w->wd_ib = -1;
			changed(w, "dev-infiniband-removed");
			return;
		}
		changed(w, "dev:%s%s%.40s", rdp_inotify_verb(ev->mask), name[0] ? " " : "", name);
	}
	/* Anything else: an old watch's IN_IGNORED after a re-create. */
}

static void on_dev_event(const struct inotify_event *ev, void *userdata)
{
	struct rdp_hostwatch *w = userdata;

	w->src[RDP_HOSTWATCH_DEV].received++;
	inotify_event(w, ev);
}

static int on_inotify(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct rdp_hostwatch *w = userdata;

	rdp_inotify_drain(fd, MAX_INOTIFY_READS, on_dev_event, w);
	return 0;
}

/* Netlink sockets. */

static int netlink_open(int protocol, uint32_t groups, int rcvbuf)
{
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = groups};
	_cleanup_close_ int fd = -1;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, protocol);
	if (fd < 0)
		return -errno;
	/* Bounded (the kernel doubles it, and caps it at net.core.rmem_max). */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	return TAKE_FD(fd);
}

/*
 * Receives one datagram from the kernel. Returns its length, 0 when it is to be skipped (sent
 * by user space), -EAGAIN when none is left, -ENOBUFS on overflow, -EMSGSIZE when truncated.
 */
static ssize_t netlink_recv(int fd, void *buf, size_t size)
{
	struct sockaddr_nl sa = {0};
	struct iovec iov = {.iov_base = buf, .iov_len = size};
	struct msghdr mh = {.msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = &iov,
			    .msg_iovlen = 1};
	ssize_t n;

	n = recvmsg(fd, &mh, MSG_DONTWAIT);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	if (mh.msg_namelen != sizeof(sa) || sa.nl_family != AF_NETLINK || sa.nl_pid != 0)
		return 0;
	if (mh.msg_flags & MSG_TRUNC)
		return -EMSGSIZE;
	return n;
}

static int on_uevent(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct rdp_hostwatch *w = userdata;
	char buf[RDP_UEVENT_MAX];

	for (int i = 0; i < MAX_MSGS_PER_WAKEUP; i++) {
		struct rdp_uevent u;
		ssize_t n = netlink_recv(fd, buf, sizeof(buf));
		const char *name;

		if (n == -EAGAIN)
			break;
		if (n == -ENOBUFS) {
			lost(w, "uevent-overflow");
			continue;
		}
		if (n == -EMSGSIZE) {
			lost(w, "uevent-truncated");
			continue;
		}
		if (n < 0)
			break; /* unexpected: try again at the next wakeup */
		if (n == 0)
			continue;
		w->src[RDP_HOSTWATCH_UEVENT].received++;
		if (rdp_uevent_parse(buf, (size_t)n, &u) < 0 || !rdp_uevent_relevant(&u))
			continue;
		name = u.interface ? u.interface : u.devname ? u.devname : rdp_path_basename(u.devpath);
		changed(w, "uevent:%.20s %.12s %.40s", u.subsystem, u.action, name);
	}
	return 0;
}

/* rtnetlink: the last known state of each relevant netdev. */

static struct link_state *link_find(struct rdp_hostwatch *w, int ifindex)
{
	for (size_t i = 0; i < w->n_links; i++)
		if (w->links[i].ifindex == ifindex)
			return &w->links[i];
	return NULL;
}

static void link_event(struct rdp_hostwatch *w, const struct rdp_rtnl_link *l)
{
	struct link_state *st = link_find(w, l->ifindex);
	const char *name = l->ifname[0] ? l->ifname : st ? st->ifname : "?";
	uint32_t flags = l->flags & LINK_FLAGS;

	if (l->msg_type == RTM_DELLINK) {
		if (st) {
			*st = w->links[--w->n_links];
			changed(w, "link:%s removed", name);
		} else if (link_relevant(w, l, NULL)) {
			changed(w, "link:%s removed", name);
		}
		return;
	}
	if (!link_relevant(w, l, st ? st->ifname : NULL))
		return;
	if (!st) {
		if (w->n_links == w->cap_links && w->cap_links < RDP_HOSTWATCH_MAX_LINKS) {
			size_t cap = w->cap_links ? w->cap_links * 2 : 16;
			struct link_state *v;

			if (cap > RDP_HOSTWATCH_MAX_LINKS)
				cap = RDP_HOSTWATCH_MAX_LINKS;
			v = rdp_reallocarray(w->links, cap, sizeof(*v));
			if (v) {
				w->links = v;
				w->cap_links = cap;
			}
		}
		if (w->n_links < w->cap_links) {
			st = &w->links[w->n_links++];
			*st = (struct link_state){.ifindex = l->ifindex, .flags = flags,
						  .operstate = l->operstate, .carrier = l->carrier};
			snprintf(st->ifname, sizeof(st->ifname), "%s", l->ifname);
		}
		/* Full table or no memory: not remembered, still reported. */
		changed(w, "link:%s new", name);
		return;
	}
	if (l->ifname[0] && strcmp(l->ifname, st->ifname) != 0) {
		changed(w, "link:%s renamed from %s", l->ifname, st->ifname);
		snprintf(st->ifname, sizeof(st->ifname), "%s", l->ifname);
	}
	if (flags != st->flags) {
		changed(w, "link:%s %s", name,
			(flags & IFF_LOWER_UP) ? "up"
			: (flags & IFF_UP)     ? "no-carrier"
					       : "down");
		st->flags = flags;
	}
	if (l->operstate >= 0 && l->operstate != st->operstate) {
		changed(w, "link:%s operstate %d", name, l->operstate);
		st->operstate = l->operstate;
	}
	if (l->carrier >= 0 && l->carrier != st->carrier) {
		changed(w, "link:%s carrier %d", name, l->carrier);
		st->carrier = l->carrier;
	}
}

static int on_rtnl(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata)
{
	struct rdp_hostwatch *w = userdata;

	for (int i = 0; i < MAX_MSGS_PER_WAKEUP; i++) {
		ssize_t n = netlink_recv(fd, w->rtnl_buf, RTNL_BUF);
		struct rdp_rtnl_link l;
		size_t off = 0;
		int r;

		if (n == -EAGAIN)
			break;
		if (n == -ENOBUFS) {
			lost(w, "rtnl-overflow");
			continue;
		}
		if (n == -EMSGSIZE) {
			lost(w, "rtnl-truncated");
			continue;
		}
		if (n < 0)
			break;
		if (n == 0)
			continue;
		w->src[RDP_HOSTWATCH_RTNL].received++;
		while ((r = rdp_rtnl_link_parse(w->rtnl_buf, (size_t)n, &off, &l)) > 0)
			link_event(w, &l);
	}
	return 0;
}

/* Life cycle. */

struct rdp_hostwatch *rdp_hostwatch_free(struct rdp_hostwatch *w)
{
	if (!w)
		return NULL;
	rdp_event_source_free(w->inotify_src);
	rdp_event_source_free(w->uevent_src);
	rdp_event_source_free(w->rtnl_src);
	rdp_event_source_free(w->timer_src);
	rdp_event_source_free(w->retry_src);
	if (w->inotify_fd >= 0)
		close(w->inotify_fd);
	if (w->uevent_fd >= 0)
		close(w->uevent_fd);
	if (w->rtnl_fd >= 0)
		close(w->rtnl_fd);
	rdp_free(w->links);
	rdp_free(w->rtnl_buf);
	rdp_free(w->netdevs);
	rdp_free(w->dev_root);
	rdp_free(w->ib_path);
	rdp_free(w);
	return NULL;
}

static int open_uevent(struct rdp_hostwatch *w)
{
	int fd = netlink_open(NETLINK_KOBJECT_UEVENT, 1, UEVENT_RCVBUF), r;

	if (fd < 0) {
		source_set(w, RDP_HOSTWATCH_UEVENT, RDP_HOSTWATCH_UNAVAILABLE, fd);
		return 0;
	}
	w->uevent_fd = fd;
	r = rdp_event_add_io(w->e, fd, EPOLLIN, on_uevent, w, &w->uevent_src);
	if (r < 0)
		return r;
	source_set(w, RDP_HOSTWATCH_UEVENT, RDP_HOSTWATCH_ACTIVE, 0);
	return 0;
}

static int open_rtnl(struct rdp_hostwatch *w)
{
	int fd, r;

	w->rtnl_buf = rdp_malloc(RTNL_BUF);
	if (!w->rtnl_buf)
		return -ENOMEM;
	fd = netlink_open(NETLINK_ROUTE, RTMGRP_LINK, RTNL_RCVBUF);
	if (fd < 0) {
		source_set(w, RDP_HOSTWATCH_RTNL, RDP_HOSTWATCH_UNAVAILABLE, fd);
		return 0;
	}
	w->rtnl_fd = fd;
	r = rdp_event_add_io(w->e, fd, EPOLLIN, on_rtnl, w, &w->rtnl_src);
	if (r < 0)
		return r;
	source_set(w, RDP_HOSTWATCH_RTNL, RDP_HOSTWATCH_ACTIVE, 0);
	return 0;
}

int rdp_hostwatch_new(struct rdp_event *e, const struct rdp_hostwatch_options *o,
		      rdp_hostwatch_cb cb, void *userdata, struct rdp_hostwatch **ret)
{
	struct rdp_hostwatch *w;
	int r;

	if (!e || !o || !o->dev_root || !o->dev_root[0] || !cb || !ret)
		return -EINVAL;
	w = rdp_calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->e = e;
	w->cb = cb;
	w->userdata = userdata;
	w->coalesce_usec = o->coalesce_usec ? o->coalesce_usec : RDP_HOSTWATCH_COALESCE_USEC;
	w->min_interval_usec =
		o->min_interval_usec ? o->min_interval_usec : RDP_HOSTWATCH_MIN_INTERVAL_USEC;
	w->inotify_fd = w->uevent_fd = w->rtnl_fd = -1;
	w->wd_root = w->wd_ib = -1;
	w->dev_root = rdp_strdup(o->dev_root);
	w->ib_path = rdp_asprintf("%s/%s", o->dev_root, IB_DIR);
	if (!w->dev_root || !w->ib_path) {
		r = -ENOMEM;
		goto fail;
	}
	r = rdp_event_add_timer(e, 0, on_timer, w, &w->timer_src);
	if (r < 0)
		goto fail;
	r = rdp_event_add_timer(e, 0, on_retry, w, &w->retry_src);
	if (r < 0)
		goto fail;

	w->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->inotify_fd < 0) {
		r = -errno;
		goto fail;
	}
	r = rdp_event_add_io(e, w->inotify_fd, EPOLLIN, on_inotify, w, &w->inotify_src);
	if (r < 0)
		goto fail;
	if (watch_root(w) < 0)
		(void)rdp_event_source_set_timer(w->retry_src, RDP_HOSTWATCH_RETRY_USEC);

	if (!o->no_uevent) {
		r = open_uevent(w);
		if (r < 0)
			goto fail;
	}
	if (!o->no_rtnl) {
		r = open_rtnl(w);
		if (r < 0)
			goto fail;
	}
	*ret = w;
	return 0;
fail:
	rdp_hostwatch_free(w);
	return r;
}

bool rdp_hostwatch_dev_settled(const struct rdp_hostwatch *w)
{
	struct pollfd p;

	if (!w || w->inotify_fd < 0 || w->wd_root < 0 || w->wd_ib < 0 ||
	    w->pending == PENDING_ARMED)
		return false;
	p = (struct pollfd){.fd = w->inotify_fd, .events = POLLIN};
	return poll(&p, 1, 0) == 0;
}
