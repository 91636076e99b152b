/* SPDX-License-Identifier: MIT */
/*
 * The port-state poll (portpoll.h): an array of kept-open attribute files and one timer.
 */
#include "portpoll.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "macro.h"
#include "sysfs.h"

struct polled {
	int fd; /* -1: not read (failed once) */
	int expect; /* the model's number */
	unsigned int port;
	bool phys; /* phys_state, else state */
	char dev[RDP_IBDEV_NAME_MAX];
};

struct rdp_portpoll {
	struct rdp_event *e;
	int root;
	uint64_t interval_usec;
	rdp_portpoll_cb cb;
	void *userdata;
	struct rdp_event_source *timer;
	struct polled *v;
	size_t n;
	uint64_t ticks, reads;
};

static void close_all(struct rdp_portpoll *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].fd >= 0)
			close(p->v[i].fd);
	rdp_free(p->v);
	p->v = NULL;
	p->n = 0;
}

struct rdp_portpoll *rdp_portpoll_free(struct rdp_portpoll *p)
{
	if (!p)
		return NULL;
	rdp_event_source_free(p->timer);
	close_all(p);
	if (p->root >= 0)
		close(p->root);
	rdp_free(p);
	return NULL;
}

/* Reads one file; returns 1 (and the reason) when it differs from the model, else 0. */
static int check(struct rdp_portpoll *p, struct polled *f, char *reason, size_t size)
{
	char buf[64];
	char name[32];
	ssize_t n;
	int num;

	p->reads++;
	n = pread(f->fd, buf, sizeof(buf) - 1, 0);
	if (n < 0 && errno == EINTR)
		n = pread(f->fd, buf, sizeof(buf) - 1, 0);
	if (n == 0)
		return 0; /* empty: a file being rewritten in place (sysfs never reads empty) */
	if (n < 0) {
		close(f->fd);
		f->fd = -1;
		snprintf(reason, size, "port:%.32s/%u unreadable", f->dev, f->port);
		return 1;
	}
	buf[n] = '\0';
	if (buf[n - 1] == '\n')
		buf[n - 1] = '\0';
	if (rdp_parse_state(buf, &num, name, sizeof(name)) < 0)
		num = -1;
	if (num == f->expect)
		return 0;
	/* Reported once: the rescan it triggers sets the new expectation. */
	f->expect = num;
	snprintf(reason, size, "port:%.32s/%u %s %.24s", f->dev, f->port,
		 f->phys ? "phys_state" : "state", buf);
	return 1;
}

unsigned int rdp_portpoll_tick(struct rdp_portpoll *p)
{
	char reason[RDP_PORTPOLL_REASON_MAX] = "";
	char r[RDP_PORTPOLL_REASON_MAX];
	unsigned int changes = 0;

	if (!p)
		return 0;
	p->ticks++;
	for (size_t i = 0; i < p->n; i++) {
		if (p->v[i].fd < 0 || !check(p, &p->v[i], r, sizeof(r)))
			continue;
		if (changes++ == 0)
			memcpy(reason, r, sizeof(reason));
	}
	if (changes)
		p->cb(reason, changes, p->userdata); /* may call rdp_portpoll_set() */
	return changes;
}

static int on_timer(struct rdp_event_source *s, void *userdata)
{
	struct rdp_portpoll *p = userdata;

	/* Re-armed first: the callback may free nothing here but may re-set the ports. */
	(void)rdp_event_source_set_timer(s, p->interval_usec);
	(void)rdp_portpoll_tick(p);
	return 0;
}

int rdp_portpoll_new(struct rdp_event *e, const char *sysfs_root, uint64_t interval_usec,
		     rdp_portpoll_cb cb, void *userdata, struct rdp_portpoll **ret)
{
	struct rdp_portpoll *p;
	int r;

	if (!e || !sysfs_root || !cb || !ret)
		return -EINVAL;
	p = rdp_calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->e = e;
	p->root = -1;
	p->cb = cb;
	p->userdata = userdata;
	p->interval_usec = interval_usec ? interval_usec : RDP_PORTPOLL_INTERVAL_USEC;
	r = rdp_sysfs_open_root(sysfs_root, &p->root);
	if (r >= 0)
		r = rdp_event_add_timer(e, 0, on_timer, p, &p->timer);
	if (r < 0) {
		rdp_portpoll_free(p);
		return r;
	}
	*ret = p;
	return 0;
}

static void add(struct rdp_portpoll *p, const struct rdp_device *d, const struct rdp_port *pt,
		bool phys)
{
	char path[RDP_IBDEV_NAME_MAX + 64];
	struct polled *f = &p->v[p->n];
	char buf[64];
	int fd;

	snprintf(path, sizeof(path), "class/infiniband/%s/ports/%u/%s", d->name, pt->num,
		 phys ? "phys_state" : "state");

	/* Non-blocking: a FIFO planted in a (fixture) tree must not hang the loop. */
	fd = rdp_sysfs_open(p->root, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return;
	/* A file that cannot be read now is left out: polling it would rescan at every tick. */
	if (pread(fd, buf, sizeof(buf), 0) <= 0) {
		close(fd);
		return;
	}
	*f = (struct polled){.fd = fd, .expect = phys ? pt->phys_state : pt->state,
			     .port = pt->num, .phys = phys};
	snprintf(f->dev, sizeof(f->dev), "%s", d->name);
	p->n++;
}

int rdp_portpoll_set(struct rdp_portpoll *p, const struct rdp_host *h, const bool *watch)
{
	size_t want = 0;

	if (!p)
		return -EINVAL;
	close_all(p);
	if (!h)
		goto arm;
	for (size_t i = 0; i < h->n_devices; i++)
		if (!watch || watch[i])
			want += 2 * h->devices[i].n_ports;
	if (want) {
		p->v = rdp_calloc(want, sizeof(*p->v));
		if (!p->v)
			return -ENOMEM;
	}
	for (size_t i = 0; i < h->n_devices; i++) {
		const struct rdp_device *d = &h->devices[i];

		if (watch && !watch[i])
			continue;
		for (size_t j = 0; j < d->n_ports; j++) {
			add(p, d, &d->ports[j], false);
			/* Only what the model holds: the daemon's leaves phys_state out. */
			if (d->ports[j].phys_state >= 0)
				add(p, d, &d->ports[j], true);
		}
	}
arm:
	(void)rdp_event_source_set_timer(p->timer, p->n ? p->interval_usec : 0);
	return 0;
}

size_t rdp_portpoll_files(const struct rdp_portpoll *p)
{
	return p ? p->n : 0;
}

uint64_t rdp_portpoll_ticks(const struct rdp_portpoll *p)
{
	return p ? p->ticks : 0;
}

uint64_t rdp_portpoll_reads(const struct rdp_portpoll *p)
{
	return p ? p->reads : 0;
}
