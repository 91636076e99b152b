/* SPDX-License-Identifier: MIT */
/*
 * The config file watcher (confwatch.h): the path resolved by hand into (directory, name)
 * pairs, one inotify watch per distinct directory, one timer for both the quiet period and the
 * poll while something is missing.
 */
#include "confwatch.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

#define WATCH_MASK                                                                                 \
	(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_MODIFY | IN_CLOSE_WRITE |        \
	 IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
#define SELF_EVENTS (IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED)
#define MAX_HOPS 32
#define MAX_INOTIFY_READS 8

struct pair {
	char *dir;
	char *name;
	int wd;
};

struct pairs {
	struct pair v[RDP_CONFWATCH_MAX_WATCHES];
	unsigned int n;
};

struct rdp_confwatch {
	struct rdp_event *e;
	char *path; /* absolute */
	uint64_t settle_usec, poll_usec;
	rdp_confwatch_cb cb;
	void *userdata;
	int fd;
	struct rdp_event_source *io_src, *timer_src;
	enum rdp_confwatch_state state;
	int error; /* why MISSING */
	struct pairs watched;
	char reason[RDP_CONFWATCH_REASON_MAX];
	unsigned int n_events;
	uint64_t first_event;
};

const char *rdp_confwatch_state_name(enum rdp_confwatch_state s)
{
	switch (s) {
	case RDP_CONFWATCH_WATCHING:
		return "watching";
	case RDP_CONFWATCH_SETTLING:
		return "settling";
	case RDP_CONFWATCH_MISSING:
		return "missing";
	}
	return "?";
}

enum rdp_confwatch_state rdp_confwatch_state(const struct rdp_confwatch *w, int *error)
{
	if (error)
		*error = w && w->state == RDP_CONFWATCH_MISSING ? w->error : 0;
	return w ? w->state : RDP_CONFWATCH_MISSING;
}

unsigned int rdp_confwatch_n_watches(const struct rdp_confwatch *w)
{
	return w ? w->watched.n : 0;
}

static void pairs_clear(struct pairs *p)
{
	for (unsigned int i = 0; i < p->n; i++) {
		rdp_free(p->v[i].dir);
		rdp_free(p->v[i].name);
	}
	p->n = 0;
}

static int pair_add(struct pairs *p, const char *dir, const char *name)
{
	struct pair *x;

	if (p->n >= RDP_CONFWATCH_MAX_WATCHES)
		return -ELOOP;
	x = &p->v[p->n];
	x->dir = rdp_strdup(dir[0] ? dir : "/");
	x->name = rdp_strdup(name);
	x->wd = -1;
	if (!x->dir || !x->name) {
		rdp_free(x->dir);
		rdp_free(x->name);
		return -ENOMEM;
	}
	p->n++;
	return 0;
}

/*
 * Resolves path (absolute) one component at a time, as the kernel would, recording the
 * directory and name of every symlink met and of the final component. Returns 0 when the walk
 * reached the final component inside an existing directory (the file itself may be missing),
 * else the negative errno that stopped it (-ENOENT for a missing directory, -ELOOP, ...):
 * the pairs recorded so far end with the missing name in its parent. -ENOMEM is fatal.
 */
static int resolve(const char *path, struct pairs *out)
{
	char cur[PATH_MAX] = ""; /* "" is "/"; never ends with '/' */
	char rest[PATH_MAX], cand[PATH_MAX], target[PATH_MAX];
	char comp[NAME_MAX + 1];
	unsigned int hops = 0;
	const char *p;

	if (snprintf(rest, sizeof(rest), "%s", path) >= (int)sizeof(rest))
		return -ENAMETOOLONG;
	p = rest;
	for (;;) {
		const char *e, *q;
		size_t clen, curlen = strlen(cur);
		struct stat st;
		bool last;
		ssize_t n;
		int r;

		while (*p == '/')
			p++;
		if (!*p)
			return -EISDIR; /* "dir/": no file name */
		e = strchr(p, '/');
		if (!e)
			e = p + strlen(p);
		clen = (size_t)(e - p);
		if (clen > NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(comp, p, clen);
		comp[clen] = '\0';
		for (q = e; *q == '/'; q++)
			;
		last = !*q;
		p = e;
		if (strcmp(comp, ".") == 0)
			continue;
		if (strcmp(comp, "..") == 0) {
			/* cur holds no symlinks: cutting its last component is what ".." means. */
			char *slash = strrchr(cur, '/');

			if (slash)
				*slash = '\0';
			continue;
		}
		if (curlen + 1 + clen >= sizeof(cand))
			return -ENAMETOOLONG;
		memcpy(cand, cur, curlen);
		cand[curlen] = '/';
		memcpy(cand + curlen + 1, comp, clen + 1);
		if (lstat(cand, &st) < 0) {
			int err = -errno;

			r = pair_add(out, cur, comp);
			if (r < 0)
				return r;
			return last && err == -ENOENT ? 0 : err;
		}
		if (S_ISLNK(st.st_mode)) {
			r = pair_add(out, cur, comp);
			if (r < 0)
				return r;
			if (++hops > MAX_HOPS)
				return -ELOOP;
			n = readlink(cand, target, sizeof(target) - 1);
			if (n < 0)
				return -errno; /* replaced meanwhile: the watch will say so */
			target[n] = '\0';
			/* rest becomes target + what was left after the link (p points into rest). */
			{
				char tail[PATH_MAX];
				size_t tlen = (size_t)n, plen = strlen(p);

				if (tlen + plen >= sizeof(rest))
					return -ENAMETOOLONG;
				memcpy(tail, p, plen + 1);
				memcpy(rest, target, tlen);
				memcpy(rest + tlen, tail, plen + 1);
			}
			p = rest;
			if (target[0] == '/')
				cur[0] = '\0';
			continue;
		}
		if (last)
			return pair_add(out, cur, comp);
		if (!S_ISDIR(st.st_mode)) {
			r = pair_add(out, cur, comp);
			return r < 0 ? r : -ENOTDIR;
		}
		memcpy(cur, cand, strlen(cand) + 1);
	}
}

static bool wd_in(const struct pairs *p, int wd)
{
	for (unsigned int i = 0; i < p->n; i++)
		if (p->v[i].wd == wd)
			return true;
	return false;
}

/*
 * Resolves the path again and moves the watches to the new chain: new watches are added
 * before old ones are removed, so no event falls in between. Sets state to WATCHING or
 * MISSING (arming the poll). Returns 0 or -ENOMEM.
 */
static int rebuild(struct rdp_confwatch *w)
{
	struct pairs np = {0};
	int r, k;

	r = resolve(w->path, &np);
	if (r == -ENOMEM) {
		pairs_clear(&np);
		goto missing;
	}
	for (unsigned int i = 0; i < np.n; i++) {
		int wd = inotify_add_watch(w->fd, np.v[i].dir, WATCH_MASK);

		if (wd < 0) {
			if (r == 0)
				r = -errno;
			continue;
		}
		np.v[i].wd = wd;
	}
	for (unsigned int i = 0; i < w->watched.n; i++) {
		int wd = w->watched.v[i].wd;

		if (wd >= 0 && !wd_in(&np, wd)) {
			(void)inotify_rm_watch(w->fd, wd);
			/* Once per wd: mark the other pairs of that directory done too. */
			for (unsigned int j = i + 1; j < w->watched.n; j++)
				if (w->watched.v[j].wd == wd)
					w->watched.v[j].wd = -1;
		}
	}
	pairs_clear(&w->watched);
	w->watched = np;
	if (r == 0) {
		w->state = RDP_CONFWATCH_WATCHING;
		w->error = 0;
		return 0;
	}
missing:
	w->state = RDP_CONFWATCH_MISSING;
	w->error = r;
	k = rdp_event_source_set_timer(w->timer_src, w->poll_usec);
	(void)k;
	return r == -ENOMEM ? r : 0;
}

static void changed(struct rdp_confwatch *w, const char *what, const char *name)
{
	uint64_t now = rdp_now_usec(), due;

	if (w->n_events < UINT32_MAX)
		w->n_events++;
	if (w->state != RDP_CONFWATCH_SETTLING) {
		snprintf(w->reason, sizeof(w->reason), "%.60s%s%s", name, name[0] ? " " : "", what);
		w->first_event = now;
		w->state = RDP_CONFWATCH_SETTLING;
	}
	/* Quiet for settle_usec, but never later than MAX_DELAY after the first event. */
	due = now + w->settle_usec;
	if (due > w->first_event + RDP_CONFWATCH_MAX_DELAY_USEC)
		due = w->first_event + RDP_CONFWATCH_MAX_DELAY_USEC;
	(void)rdp_event_source_set_timer(w->timer_src, due > now ? due - now : 1);
}

static void handle_event(struct rdp_confwatch *w, const struct inotify_event *ev)
{
	const char *name = ev->len ? ev->name : "";

	if (ev->mask & IN_Q_OVERFLOW) {
		changed(w, "inotify-overflow", "");
		return;
	}
	if (!wd_in(&w->watched, ev->wd))
		return; /* a watch removed by rebuild() saying goodbye */
	if (!name[0]) {
		if (ev->mask & SELF_EVENTS)
			changed(w, rdp_inotify_verb(ev->mask), "");
		return;
	}
	for (unsigned int i = 0; i < w->watched.n; i++) {
		if (w->watched.v[i].wd == ev->wd && strcmp(w->watched.v[i].name, name) == 0) {
			changed(w, rdp_inotify_verb(ev->mask), name);
			return;
		}
	}
}

static void on_event(const struct inotify_event *ev, void *userdata)
{
	handle_event(userdata, ev);
}

static int on_io(struct rdp_event_source *s, int fd, uint32_t revents, void *userdata)
{
	rdp_inotify_drain(fd, MAX_INOTIFY_READS, on_event, userdata);
	return 0;
}

static int on_timer(struct rdp_event_source *s, void *userdata)
{
	struct rdp_confwatch *w = userdata;
	char reason[RDP_CONFWATCH_REASON_MAX];
	unsigned int n;

	switch (w->state) {
	case RDP_CONFWATCH_WATCHING:
		return 0;
	case RDP_CONFWATCH_MISSING:
		(void)rebuild(w);
		if (w->state == RDP_CONFWATCH_MISSING)
			return 0; /* rebuild() armed the next poll */
		snprintf(reason, sizeof(reason), "dir-back");
		n = 1;
		break;
	case RDP_CONFWATCH_SETTLING:
	default:
		memcpy(reason, w->reason, sizeof(reason));
		n = w->n_events;
		/* Watch the new chain first: a change after the daemon's read is then seen. */
		(void)rebuild(w);
		break;
	}
	w->n_events = 0;
	w->cb(reason, n, w->userdata); /* may free w */
	return 0;
}

struct rdp_confwatch *rdp_confwatch_free(struct rdp_confwatch *w)
{
	if (!w)
		return NULL;
	rdp_event_source_free(w->io_src);
	rdp_event_source_free(w->timer_src);
	if (w->fd >= 0)
		close(w->fd);
	pairs_clear(&w->watched);
	rdp_free(w->path);
	rdp_free(w);
	return NULL;
}

int rdp_confwatch_new(struct rdp_event *e, const char *path, const struct rdp_confwatch_options *o,
		      rdp_confwatch_cb cb, void *userdata, struct rdp_confwatch **ret)
{
	struct rdp_confwatch *w;
	int r;

	if (!e || !path || !path[0] || !cb || !ret)
		return -EINVAL;
	w = rdp_calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->e = e;
	w->cb = cb;
	w->userdata = userdata;
	w->fd = -1;
	w->settle_usec = o && o->settle_usec ? o->settle_usec : RDP_CONFWATCH_SETTLE_USEC;
	w->poll_usec = o && o->poll_usec ? o->poll_usec : RDP_CONFWATCH_POLL_USEC;
	if (path[0] == '/') {
		w->path = rdp_strdup(path);
	} else {
		char cwd[PATH_MAX];

		if (!getcwd(cwd, sizeof(cwd))) {
			r = -errno;
			goto fail;
		}
		w->path = rdp_asprintf("%s/%s", cwd, path);
	}
	if (!w->path) {
		r = -ENOMEM;
		goto fail;
	}
	w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (w->fd < 0) {
		r = -errno;
		goto fail;
	}
	r = rdp_event_add_io(e, w->fd, EPOLLIN, on_io, w, &w->io_src);
	if (r < 0)
		goto fail;
	r = rdp_event_add_timer(e, 0, on_timer, w, &w->timer_src);
	if (r < 0)
		goto fail;
	r = rebuild(w);
	if (r < 0)
		goto fail;
	*ret = w;
	return 0;
fail:
	rdp_confwatch_free(w);
	return r;
}
