/* SPDX-License-Identifier: MIT */
#include "dra-status.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "alloc.h"
#include "event.h"
#include "fileio.h"
#include "kube-worker.h"
#include "log.h"
#include "macro.h"

#define NAME_MAX_LEN 253

/* A small sysfs file's first line, trimmed; "" when absent or not plain ASCII. */
static void read_line(const char *path, char *buf, size_t size)
{
	_cleanup_free_ char *s = NULL;
	size_t len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	buf[0] = '\0';
	if (fd < 0)
		return;
	if (rdp_read_file_fd(fd, 4096, &s, &len) < 0) {
		close(fd);
		return;
	}
	close(fd);
	len = strcspn(s, "\n");
	if (len >= size)
		return;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] >= 0x7f)
			return;
	memcpy(buf, s, len);
	buf[len] = '\0';
}

static unsigned prefix_len(const unsigned char *m, size_t n)
{
	unsigned bits = 0;

	for (size_t i = 0; i < n; i++)
		for (int b = 7; b >= 0; b--)
			if (m[i] & (1u << b))
				bits++;
	return bits;
}

/* netdev's addresses in CIDR form, when it is the live netdev sysfs names. */
static int add_ips(const struct rdp_dra_status_ctx *ctx, const char *netdev, json_t *ips)
{
	char path[512], idx[32];
	unsigned live;

	if (!ctx->ifa)
		return 0;
	snprintf(path, sizeof(path), "%s/class/net/%s/ifindex", ctx->sysfs_root, netdev);
	read_line(path, idx, sizeof(idx));
	live = if_nametoindex(netdev);
	if (!idx[0] || live == 0 || strtoul(idx, NULL, 10) != live)
		return 0;
	for (const struct ifaddrs *a = ctx->ifa; a; a = a->ifa_next) {
		char addr[INET6_ADDRSTRLEN], cidr[INET6_ADDRSTRLEN + 8];
		unsigned plen;

		if (!a->ifa_addr || !a->ifa_name || strcmp(a->ifa_name, netdev) != 0 ||
		    json_array_size(ips) >= RDP_DRA_STATUS_MAX_IPS)
			continue;
		if (a->ifa_addr->sa_family == AF_INET) {
			const struct sockaddr_in *in = (const void *)a->ifa_addr;
			const struct sockaddr_in *m = (const void *)a->ifa_netmask;

			inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
			plen = m ? prefix_len((const void *)&m->sin_addr, 4) : 32;
		} else if (a->ifa_addr->sa_family == AF_INET6) {
			const struct sockaddr_in6 *in = (const void *)a->ifa_addr;
			const struct sockaddr_in6 *m = (const void *)a->ifa_netmask;

			inet_ntop(AF_INET6, &in->sin6_addr, addr, sizeof(addr));
			plen = m ? prefix_len((const void *)&m->sin6_addr, 16) : 128;
		} else {
			continue;
		}
		snprintf(cidr, sizeof(cidr), "%s/%u", addr, plen);
		if (json_array_append_new(ips, json_string(cidr)) < 0)
			return -ENOMEM;
	}
	return 0;
}

static json_t *device_entry(const struct rdp_dra_status_ctx *ctx, const char *pool,
			    const char *share_id, const struct rdp_dra_dev *dd,
			    const struct rdp_device *d)
{
	json_t *e, *data, *ports, *cond, *net = NULL;
	const char *uverbs = "";
	int k = 0;

	for (size_t i = 0; i < d->n_char_devices; i++)
		if (strstr(d->char_devices[i], "/uverbs")) {
			uverbs = d->char_devices[i];
			break;
		}
	ports = json_array();
	for (size_t i = 0; ports && i < d->n_ports; i++) {
		const struct rdp_port *p = &d->ports[i];
		json_t *o = json_pack("{s:I, s:s, s:s}", "port", (json_int_t)p->num, "state",
				      p->state_name[0] ? p->state_name : "UNKNOWN", "linkLayer",
				      rdp_link_layer_name(p->link_layer));

		if (o && p->rate[0])
			k |= json_object_set_new(o, "rate", json_string(p->rate));
		if (o && p->roce_v2_ipv4_gid_index >= 0)
			k |= json_object_set_new(o, "roceV2IPv4GIDIndex",
						 json_integer(p->roce_v2_ipv4_gid_index));
		if (!o || json_array_append_new(ports, o) < 0)
			k = -1;
	}
	data = json_pack("{s:s, s:s, s:o*}", "ibdev", d->name, "uverbs", uverbs, "ports", ports);
	if (data && d->pci_address[0])
		k |= json_object_set_new(data, "pciAddress", json_string(d->pci_address));
	if (data && d->node_guid[0])
		k |= json_object_set_new(data, "nodeGUID", json_string(d->node_guid));
	cond = json_pack("[{s:s, s:s, s:s, s:s, s:s}]", "type", "Ready", "status", "True",
			 "reason", "Prepared", "message", "prepared by the node's driver",
			 "lastTransitionTime", ctx->now);
	if (d->n_netdevs) {
		char path[512], mac[160];
		json_t *ips = json_array();

		snprintf(path, sizeof(path), "%s/class/net/%s/address", ctx->sysfs_root,
			 d->netdevs[0]);
		read_line(path, mac, sizeof(mac));
		if (strlen(mac) > 128)
			mac[0] = '\0';
		if (!ips || add_ips(ctx, d->netdevs[0], ips) < 0)
			k = -1;
		net = json_pack("{s:s}", "interfaceName", d->netdevs[0]);
		if (net && json_array_size(ips))
			k |= json_object_set(net, "ips", ips);
		if (net && mac[0])
			k |= json_object_set_new(net, "hardwareAddress", json_string(mac));
		json_decref(ips);
		if (!net)
			k = -1;
	}
	e = json_pack("{s:s, s:s, s:s, s:o*, s:o*, s:o*}", "driver", ctx->driver, "pool", pool,
		      "device", dd->name, "conditions", cond, "data", data, "networkData", net);
	/* a share (consumable capacity): the list-map key has its shareID, as the result's */
	if (e && share_id)
		k |= json_object_set_new(e, "shareID", json_string(share_id));
	if (!e || !cond || !data || k) {
		json_decref(e);
		return NULL;
	}
	return e;
}

static bool str_eq(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

int rdp_dra_status_body(const struct rdp_dra_status_ctx *ctx, const char *ns, const char *name,
			const char *uid, const struct rdp_dra_inventory *inv,
			const struct rdp_dra_result *results, size_t n, char **ret_json)
{
	json_t *root = NULL, *devs = json_array(), *status;
	const struct rdp_dra_dev **seen = NULL;
	const char **seen_share = NULL;
	size_t n_seen = 0;
	int k = -ENOMEM;

	*ret_json = NULL;
	if (!ns || !name || !uid || !*ns || !*name || !*uid) {
		k = -EINVAL;
		goto out;
	}
	if (!devs || (n && (!(seen = rdp_calloc(n, sizeof(*seen))) ||
			    !(seen_share = rdp_calloc(n, sizeof(*seen_share))))))
		goto out;
	for (size_t i = 0; i < n; i++) {
		const struct rdp_dra_dev *d = rdp_dra_inventory_find(inv, results[i].device);
		bool dup = false;
		json_t *e;

		if (!d || !results[i].pool) {
			k = -EINVAL;
			goto out;
		}
		for (size_t j = 0; j < n_seen && !dup; j++)
			dup = seen[j] == d && str_eq(seen_share[j], results[i].share_id);
		if (dup)
			continue;
		seen_share[n_seen] = results[i].share_id;
		seen[n_seen++] = d;
		e = device_entry(ctx, results[i].pool, results[i].share_id, d,
				 rdp_dra_dev_device(inv, d));
		if (!e || json_array_append_new(devs, e) < 0)
			goto out;
	}
	status = n_seen ? json_pack("{s:O}", "devices", devs) : json_object();
	root = json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:o*}", "apiVersion", "resource.k8s.io/v1",
			 "kind", "ResourceClaim", "metadata", "name", name, "namespace", ns,
			 "uid", uid, "status", status);
	if (!root)
		goto out;
	*ret_json = json_dumps(root, JSON_COMPACT);
	k = *ret_json ? 0 : -ENOMEM;
out:
	rdp_free(seen);
	rdp_free(seen_share);
	json_decref(devs);
	json_decref(root);
	return k;
}

/* A DNS subdomain (namespace: a label; a claim name: a subdomain). */
static bool dns_name(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > NAME_MAX_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		      s[i] == '.'))
			return false;
	return true;
}

int rdp_dra_status_path(const char *driver, const char *ns, const char *name, char *buf,
			size_t size)
{
	int n;

	if (!dns_name(driver) || !dns_name(ns) || !dns_name(name))
		return -EINVAL;
	n = snprintf(buf, size,
		     "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s/status"
		     "?fieldManager=%s&force=true",
		     ns, name, driver);
	return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

/* -- the queue (wiring: logs) -------------------------------------------------------------- */

struct entry {
	char *ns, *name, *uid;
	char *body;
	bool clear;
	unsigned tries;
	bool logged; /* its failure was logged */
	uint64_t not_before; /* rdp_now_usec() */
	uint64_t backoff;
	struct entry *next;
};

struct rdp_dra_status {
	char *driver, *sysfs_root;
	struct rdp_event *event;
	struct rdp_kube_worker *worker;
	struct rdp_event_source *timer;
	struct entry *head; /* FIFO */
	struct entry *running; /* its write is on the worker (still listed) */
	struct rdp_kube_job job;
};

static void entry_free(struct entry *e)
{
	if (!e)
		return;
	rdp_free(e->ns);
	rdp_free(e->name);
	rdp_free(e->uid);
	rdp_free(e->body);
	rdp_free(e);
}

static void unlink_entry(struct rdp_dra_status *s, struct entry *e)
{
	for (struct entry **pp = &s->head; *pp; pp = &(*pp)->next)
		if (*pp == e) {
			*pp = e->next;
			e->next = NULL;
			return;
		}
}

static void append(struct rdp_dra_status *s, struct entry *e)
{
	struct entry **pp = &s->head;

	while (*pp)
		pp = &(*pp)->next;
	e->next = NULL;
	*pp = e;
}

static void pump(struct rdp_dra_status *s);

static void on_written(struct rdp_kube_job *job, void *userdata)
{
	struct rdp_dra_status *s = userdata;
	struct entry *e = s->running;
	int st = job->resp.status;
	const char *msg;
	bool retry;

	s->running = NULL;
	if (job->result == -ECANCELED || !e) {
		rdp_kube_job_done(job);
		return;
	}
	e->tries++;
	msg = job->json ? rdp_kube_status_message(job->json) : NULL;
	if (job->result >= 0 && st >= 200 && st < 300) {
		rdp_log(e->logged ? RDP_LOG_WARNING : RDP_LOG_INFO, "claim-status-written",
			"claim=%s/%s uid=%s %s tries=%u", e->ns, e->name, e->uid,
			e->clear ? "cleared=1" : "ready=1", e->tries);
		unlink_entry(s, e);
		entry_free(e);
	} else if (job->result >= 0 && (st == 404 || st == 409)) {
		rdp_log(RDP_LOG_INFO, "claim-status-skipped", "claim=%s/%s uid=%s status=%d msg=%s",
			e->ns, e->name, e->uid, st,
			rdp_log_q(st == 404 ? "the claim is gone" : "the claim was replaced"));
		unlink_entry(s, e);
		entry_free(e);
	} else {
		retry = job->result < 0 || st == 403 || rdp_kube_retryable(0, st);
		retry = retry && e->tries < RDP_DRA_STATUS_MAX_TRIES;
		if (!e->logged || !retry)
			rdp_log(RDP_LOG_WARNING, "claim-status-failed",
				"claim=%s/%s uid=%s status=%d error=%s tries=%u retry=%d", e->ns,
				e->name, e->uid, job->result < 0 ? 0 : st,
				rdp_log_q(job->result < 0 ? (job->error[0] ? job->error
									   : strerror(-job->result))
							  : msg ? msg : "HTTP error"),
				e->tries, retry);
		e->logged = true;
		unlink_entry(s, e);
		if (retry) {
			e->not_before = rdp_now_usec() +
					rdp_backoff_next(&e->backoff, 1000000ULL, 60000000ULL);
			append(s, e);
		} else {
			entry_free(e);
		}
	}
	rdp_kube_job_done(job);
	pump(s);
}

static int on_timer(struct rdp_event_source *src, void *userdata)
{
	(void)src;
	pump(userdata);
	return 0;
}

/* Starts the next write that is due; otherwise arms the timer for the earliest. */
static void pump(struct rdp_dra_status *s)
{
	uint64_t now = rdp_now_usec(), next = 0;
	struct entry *e;
	int k;

	if (s->running)
		return;
	for (e = s->head; e; e = e->next) {
		if (e->not_before <= now)
			break;
		if (!next || e->not_before < next)
			next = e->not_before;
	}
	if (!e) {
		if (next && s->timer)
			(void)rdp_event_source_set_timer(s->timer, next - now);
		return;
	}
	s->job = (struct rdp_kube_job){0};
	s->job.method = RDP_KUBE_APPLY;
	s->job.body = e->body;
	s->job.parse_json = true;
	s->job.policy = (struct rdp_kube_retry){.max_attempts = 3};
	k = rdp_dra_status_path(s->driver, e->ns, e->name, s->job.path, sizeof(s->job.path));
	if (k >= 0)
		k = rdp_kube_worker_submit(s->worker, &s->job, RDP_DRA_STATUS_BUDGET_MS, on_written,
					   s);
	if (k < 0) {
		rdp_log(RDP_LOG_WARNING, "claim-status-failed", "claim=%s/%s uid=%s error=%s",
			e->ns, e->name, e->uid, rdp_log_errno(k));
		unlink_entry(s, e);
		entry_free(e);
		if (k != -ESHUTDOWN)
			pump(s);
		return;
	}
	s->running = e;
}

static int queue(struct rdp_dra_status *s, const char *ns, const char *name, const char *uid,
		 char *body, bool clear)
{
	struct entry *e;

	/* A newer state replaces a queued one (not the one being written). */
	for (e = s->head; e; e = e->next)
		if (e != s->running && strcmp(e->uid, uid) == 0) {
			rdp_free(e->body);
			e->body = body;
			e->clear = clear;
			e->tries = 0;
			e->backoff = 0;
			e->not_before = 0;
			pump(s);
			return 0;
		}
	e = rdp_calloc(1, sizeof(*e));
	if (!e) {
		rdp_free(body);
		return -ENOMEM;
	}
	e->ns = rdp_strdup(ns);
	e->name = rdp_strdup(name);
	e->uid = rdp_strdup(uid);
	e->body = body;
	e->clear = clear;
	if (!e->ns || !e->name || !e->uid) {
		entry_free(e);
		return -ENOMEM;
	}
	append(s, e);
	pump(s);
	return 0;
}

int rdp_dra_status_set(struct rdp_dra_status *s, const char *ns, const char *name,
		       const char *uid, const struct rdp_dra_inventory *inv,
		       const struct rdp_dra_result *results, size_t n)
{
	struct ifaddrs *ifa = NULL;
	char now[32];
	time_t t = time(NULL);
	struct tm tm;
	char *body = NULL;
	int k;

	gmtime_r(&t, &tm);
	strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (getifaddrs(&ifa) < 0)
		ifa = NULL;
	{
		struct rdp_dra_status_ctx ctx = {.driver = s->driver, .sysfs_root = s->sysfs_root,
						 .now = now, .ifa = ifa};

		k = rdp_dra_status_body(&ctx, ns, name, uid, inv, results, n, &body);
	}
	if (ifa)
		freeifaddrs(ifa);
	if (k < 0)
		return k;
	return queue(s, ns, name, uid, body, n == 0);
}

int rdp_dra_status_clear(struct rdp_dra_status *s, const char *ns, const char *name,
			 const char *uid)
{
	struct rdp_dra_status_ctx ctx = {.driver = s->driver, .sysfs_root = s->sysfs_root,
					 .now = ""};
	char *body = NULL;
	int k = rdp_dra_status_body(&ctx, ns, name, uid, NULL, NULL, 0, &body);

	if (k < 0)
		return k;
	return queue(s, ns, name, uid, body, true);
}

size_t rdp_dra_status_pending(const struct rdp_dra_status *s)
{
	size_t n = 0;

	for (const struct entry *e = s ? s->head : NULL; e; e = e->next)
		n++;
	return n;
}

int rdp_dra_status_new(struct rdp_event *e, const struct rdp_kube_config *cfg, const char *driver,
		       const char *sysfs_root, struct rdp_dra_status **ret, char **ret_error)
{
	struct rdp_dra_status *s = rdp_calloc(1, sizeof(*s));
	int k;

	if (!s)
		return -ENOMEM;
	s->event = e;
	s->driver = rdp_strdup(driver);
	s->sysfs_root = rdp_strdup(sysfs_root);
	if (!s->driver || !s->sysfs_root) {
		rdp_dra_status_free(s);
		return -ENOMEM;
	}
	k = rdp_kube_worker_new(e, cfg, &s->worker, ret_error);
	if (k >= 0)
		k = rdp_event_add_timer(e, 0, on_timer, s, &s->timer);
	if (k < 0) {
		rdp_dra_status_free(s);
		return k;
	}
	*ret = s;
	return 0;
}

struct rdp_dra_status *rdp_dra_status_free(struct rdp_dra_status *s)
{
	if (!s)
		return NULL;
	/* The worker first: the running write's callback runs (-ECANCELED) before the list
	 * goes. */
	s->worker = rdp_kube_worker_free(s->worker);
	s->running = NULL;
	while (s->head) {
		struct entry *e = s->head;

		s->head = e->next;
		entry_free(e);
	}
	rdp_kube_job_done(&s->job);
	rdp_event_source_free(s->timer);
	rdp_free(s->driver);
	rdp_free(s->sysfs_root);
	rdp_free(s);
	return NULL;
}
