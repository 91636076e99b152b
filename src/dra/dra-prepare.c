/* SPDX-License-Identifier: MIT */
#include "dra-prepare.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "cdi.h"
#include "dra-cdi.h"
#include "dra-checkpoint.h"
#include "dra-claims.h"
#include "dra-instance.h"
#include "dra-driver.h"
#include "dra-params.h"
#include "dra-share.h"
#include "dra-slices.h"
#include "dra-status.h"
#include "dra.pb-c.h"
#include "grpc.h"
#include "kube-worker.h"
#include "log.h"
#include "macro.h"
#include "methods.h"
#include "pb.h"

/* The generated names, shortened. */
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesRequest PrepareReq;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse PrepareResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourcesResponse__ClaimsEntry PrepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodePrepareResourceResponse PrepareOne;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesRequest UnprepareReq;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse UnprepareResp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourcesResponse__ClaimsEntry UnprepareEntry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__NodeUnprepareResourceResponse UnprepareOne;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Device PbDevice;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1__Claim PbClaim;
#define PB(x) k8s__io__kubelet__pkg__apis__dra__v1__##x

/* A request message's unpack budget: 256 claims of three short strings fit with room. */
#define UNPACK_BUDGET (1u << 20)

struct pcall;

/* One claim of a call. */
struct pclaim {
	struct pcall *call;
	char *uid, *namespace, *name;
	bool done;
	bool cancelled;        /* unprepared while its API read ran */
	char *error;           /* the claim's error for kubelet, NULL when it succeeded */
	struct rdp_dra_ckpt_claim answer; /* the devices to answer with */
	struct rdp_kube_job job;
	bool job_queued;
	struct pclaim *inflight_next;
};

/* One NodePrepareResources call waiting for its claims. */
struct pcall {
	struct rdp_dra_prepare *p;
	struct rdp_grpc_call *call; /* NULL once kubelet went away */
	uint64_t id;
	struct pclaim *claims;
	size_t n_claims, outstanding;
	struct pcall *next;
};

struct rdp_dra_prepare {
	char *driver, *pool, *cdi_dir, *plugin_dir;
	char *hook_path; /* the memlock hook (oci-hook.h); NULL: none */
	uint64_t memlock;
	struct rdp_kube_worker *worker;
	unsigned budget_ms;
	bool verbose;
	const struct rdp_dra_inventory *inv;
	int plugin_dirfd;
	int lock_fd;               /* serialize.lock (dra-instance.h) */
	struct rdp_dra_checkpoint ckpt;
	struct rdp_dra_status *status; /* NULL: no status.devices writes */
	struct pcall *calls;       /* waiting for the API server */
	struct pclaim *inflight;   /* their claims being read */
};

static int save(struct rdp_dra_prepare *p)
{
	int k = rdp_dra_checkpoint_save_at(p->plugin_dirfd, &p->ckpt);

	if (k < 0)
		rdp_log(RDP_LOG_ERROR, "checkpoint-write-failed", "dir=%s error=%s",
			rdp_log_q(p->plugin_dir), rdp_log_errno(k));
	return k;
}

/*
 * A step that reads or writes the checkpoint or the specs: under the lock between instances
 * (dra-instance.h), with the checkpoint as the other instance may have left it. Synchronous
 * only: no API call runs between begin and end.
 */
static void shared_begin(struct rdp_dra_prepare *p)
{
	struct rdp_dra_checkpoint fresh = {0};
	char *err = NULL;
	int k = rdp_dra_lock_take(p->lock_fd);

	if (k < 0)
		rdp_log(RDP_LOG_ERROR, "lock-failed", "dir=%s error=%s", rdp_log_q(p->plugin_dir),
			rdp_log_errno(k));
	k = rdp_dra_checkpoint_load_at(p->plugin_dirfd, &fresh, &err);
	if (k < 0) {
		/* ours stays; the next save replaces the file */
		rdp_log(RDP_LOG_ERROR, "checkpoint-reload-failed", "dir=%s error=%s msg=%s",
			rdp_log_q(p->plugin_dir), rdp_log_errno(k), rdp_log_q(err ? err : ""));
		rdp_free(err);
		rdp_dra_checkpoint_done(&fresh);
		return;
	}
	rdp_dra_checkpoint_done(&p->ckpt);
	p->ckpt = fresh;
}

static void shared_end(struct rdp_dra_prepare *p)
{
	rdp_dra_lock_release(p->lock_fd);
}

/* The CDI IDs and requests of a claim's devices, from the parse (results in order). */
static int answer_from_results(const char *uid, const struct rdp_dra_claim *c,
			       struct rdp_dra_ckpt_claim *a)
{
	a->devices = rdp_calloc(c->n_results ? c->n_results : 1, sizeof(*a->devices));
	if (!a->devices)
		return -ENOMEM;
	for (size_t i = 0; i < c->n_results; i++) {
		struct rdp_dra_ckpt_device *d = &a->devices[a->n_devices++];
		char id[RDP_CDI_DEVICE_NAME_MAX + 128], name[RDP_CDI_DEVICE_NAME_MAX];
		int k = rdp_dra_share_cdi_name(c->results[i].device, c->results[i].share_id, name,
					       sizeof(name));

		if (k >= 0)
			k = rdp_cdi_claim_device_id(uid, name, id, sizeof(id));
		if (k < 0)
			return k;
		d->request = rdp_strdup(c->results[i].request);
		d->pool = rdp_strdup(c->results[i].pool);
		d->device = rdp_strdup(c->results[i].device);
		d->admin_access = c->results[i].admin_access;
		d->has_memlock = c->results[i].has_memlock;
		d->memlock = c->results[i].memlock;
		if (c->results[i].share_id) {
			d->share_id = rdp_strdup(c->results[i].share_id);
			if (!d->share_id)
				return -ENOMEM;
		}
		d->cdi_ids = rdp_calloc(2, sizeof(*d->cdi_ids));
		if (d->cdi_ids)
			d->cdi_ids[d->n_cdi_ids++] = rdp_strdup(id);
		if (!d->request || !d->pool || !d->device || !d->cdi_ids || !d->cdi_ids[0])
			return -ENOMEM;
		/* the request's variables, once per request (dra-cdi.h) */
		if (!rdp_cdi_claim_first_of_request(c->results, i))
			continue;
		k = rdp_cdi_claim_request_id(uid, c->results[i].request, id, sizeof(id));
		if (k < 0)
			return k;
		d->cdi_ids[d->n_cdi_ids] = rdp_strdup(id);
		if (!d->cdi_ids[d->n_cdi_ids++])
			return -ENOMEM;
	}
	return 0;
}

/* A claim prepared before per-request CDI devices: no device has more than its own ID. */
static bool claim_env_layout(const struct rdp_dra_ckpt_claim *c)
{
	for (size_t i = 0; i < c->n_devices; i++)
		if (c->devices[i].n_cdi_ids > 1)
			return false;
	return true;
}

/* The claim's results again, from what the checkpoint recorded. */
static int results_from_ckpt(const struct rdp_dra_ckpt_claim *c, struct rdp_dra_result **ret)
{
	struct rdp_dra_result *r = rdp_calloc(c->n_devices ? c->n_devices : 1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < c->n_devices; i++)
		r[i] = (struct rdp_dra_result){.request = c->devices[i].request,
					       .pool = c->devices[i].pool,
					       .device = c->devices[i].device,
					       .admin_access = c->devices[i].admin_access,
					       .share_id = c->devices[i].share_id,
					       .has_memlock = c->devices[i].has_memlock,
					       .memlock = c->devices[i].memlock};
	*ret = r;
	return 0;
}

/* Renders and writes the claim's spec. 0, or the claim's error in *err (allocated). */
static int write_spec(struct rdp_dra_prepare *p, const char *uid,
		      const struct rdp_dra_result *results, size_t n, bool claim_env, char **err)
{
	_cleanup_free_ char *json = NULL;
	unsigned int omitted = 0;
	int dirfd, k;

	k = rdp_cdi_claim_spec_render_env(p->inv, uid, results, n, NULL, p->hook_path, p->memlock,
					  claim_env, &json, &omitted);
	if (k < 0) {
		*err = rdp_asprintf("cannot render the claim's CDI spec: %s (a device is no longer "
				    "usable on this node?)", strerror(-k));
		return k;
	}
	/* Opened for each claim: a reboot may have removed /var/run/cdi itself. */
	dirfd = rdp_cdi_open_dir(p->cdi_dir, true);
	if (dirfd < 0) {
		*err = rdp_asprintf("cannot open the CDI spec directory %s: %s", p->cdi_dir,
				    strerror(-dirfd));
		return dirfd;
	}
	k = rdp_cdi_claim_spec_write_at(dirfd, uid, json);
	close(dirfd);
	if (k < 0) {
		*err = rdp_asprintf("cannot write the claim's CDI spec in %s: %s", p->cdi_dir,
				    strerror(-k));
		return k;
	}
	if (k == 0)
		rdp_log(RDP_LOG_INFO, "cdi-spec-written", "claim=%s dir=%s", uid,
			rdp_log_q(p->cdi_dir));
	return 0;
}

/*
 * Two results of two claims may use one device at once: an admin-access result on either
 * side holds nothing (the scheduler gives a device in use to an admin claim, monitoring, and
 * the device stays free for workload claims while an admin claim has it); two shares
 * (consumable capacity: both with a share ID, different ones) are what the scheduler counted
 * against the device's capacity.
 */
static bool coexist(const struct rdp_dra_ckpt_device *o, const struct rdp_dra_result *r)
{
	if (o->admin_access || r->admin_access)
		return true;
	return o->share_id && r->share_id && strcmp(o->share_id, r->share_id) != 0;
}

/* Another claim that holds one of these devices (coexist() says when not), or NULL. */
static const struct rdp_dra_ckpt_claim *holder(const struct rdp_dra_prepare *p, const char *uid,
					       const struct rdp_dra_claim *c, const char **dev)
{
	for (size_t i = 0; i < p->ckpt.n_claims; i++) {
		const struct rdp_dra_ckpt_claim *o = &p->ckpt.claims[i];

		if (strcmp(o->uid, uid) == 0)
			continue;
		for (size_t j = 0; j < o->n_devices; j++)
			for (size_t k = 0; k < c->n_results; k++)
				if (!coexist(&o->devices[j], &c->results[k]) &&
				    strcmp(o->devices[j].device, c->results[k].device) == 0) {
					*dev = c->results[k].device;
					return o;
				}
	}
	return NULL;
}

static void claim_fail(struct pclaim *cl, char *error)
{
	cl->error = error ? error : rdp_strdup("out of memory");
	cl->done = true;
}

/* Puts entry in the checkpoint and saves it; on failure the claim fails with why. */
static int record(struct rdp_dra_prepare *p, struct pclaim *cl,
		  const struct rdp_dra_ckpt_claim *entry)
{
	int k = rdp_dra_checkpoint_put(&p->ckpt, entry);

	if (k >= 0)
		k = save(p);
	if (k < 0)
		claim_fail(cl, rdp_asprintf("cannot record the claim in the checkpoint: %s",
					    strerror(-k)));
	return k;
}

/* Queues the claim's status.devices (never waited for: the answer goes now). */
static void status_set(struct rdp_dra_prepare *p, const struct pclaim *cl,
		       const struct rdp_dra_result *results, size_t n)
{
	int k;

	if (!p->status || n == 0)
		return;
	k = rdp_dra_status_set(p->status, cl->namespace, cl->name, cl->uid, p->inv, results, n);
	if (k < 0)
		rdp_log(RDP_LOG_WARNING, "claim-status-failed", "claim=%s/%s uid=%s error=%s",
			cl->namespace, cl->name, cl->uid, rdp_log_errno(k));
}

/* Prepares a claim whose object came back from the API server. */
static void prepare_claim(struct rdp_dra_prepare *p, struct pclaim *cl, const char *body,
			  size_t len)
{
	struct rdp_dra_claim c = {0};
	struct rdp_dra_claim_ctx ctx = {.driver = p->driver, .uid = cl->uid, .pool = p->pool,
					.inv = p->inv};
	struct rdp_dra_ckpt_claim entry = {0};
	const struct rdp_dra_ckpt_claim *other;
	const char *dev = NULL;
	char *err = NULL;
	int k;

	k = rdp_dra_claim_parse(body, len, &ctx, &c, &err);
	if (k < 0) {
		claim_fail(cl, err ? err : rdp_asprintf("%s", strerror(-k)));
		goto out;
	}
	/* Our opaque parameters (memlock per request): a bad one fails the claim, named. */
	k = rdp_dra_params_apply(body, len, p->driver, &c, &err);
	if (k < 0) {
		claim_fail(cl, err ? err : rdp_asprintf("%s", strerror(-k)));
		goto out;
	}
	other = holder(p, cl->uid, &c, &dev);
	if (other) {
		claim_fail(cl, rdp_asprintf("device %s is prepared for another claim, %s/%s (%s)",
					    dev, other->namespace, other->name, other->uid));
		goto out;
	}
	entry.uid = cl->uid;
	entry.namespace = cl->namespace;
	entry.name = cl->name;
	entry.state = RDP_DRA_PREPARE_STARTED;
	entry.cdi_spec = (char *)"";
	k = answer_from_results(cl->uid, &c, &cl->answer);
	if (k < 0) {
		claim_fail(cl, rdp_asprintf("%s", strerror(-k)));
		goto out;
	}
	entry.devices = cl->answer.devices;
	entry.n_devices = cl->answer.n_devices;
	/* Recorded before the spec exists: a crash now leaves a record Unprepare cleans up. */
	if ((!rdp_dra_checkpoint_find(&p->ckpt, cl->uid) ||
	     rdp_dra_checkpoint_find(&p->ckpt, cl->uid)->state != RDP_DRA_PREPARED) &&
	    record(p, cl, &entry) < 0)
		goto out;
	k = write_spec(p, cl->uid, c.results, c.n_results, false, &err);
	if (k < 0) {
		claim_fail(cl, err);
		goto out;
	}
	{
		char path[RDP_CDI_PATH_MAX];
		char fname[RDP_CDI_CLASS_MAX + 64];

		if (rdp_cdi_claim_file_name(cl->uid, fname, sizeof(fname)) < 0)
			fname[0] = '\0';
		snprintf(path, sizeof(path), "%s/%s", p->cdi_dir, fname);
		entry.state = RDP_DRA_PREPARED;
		entry.cdi_spec = c.n_results ? path : (char *)"";
		if (record(p, cl, &entry) < 0)
			goto out;
	}
	cl->done = true;
	rdp_log(RDP_LOG_INFO, "claim-prepared", "claim=%s/%s uid=%s devices=%zu", cl->namespace,
		cl->name, cl->uid, c.n_results);
	status_set(p, cl, c.results, c.n_results);
out:
	rdp_dra_claim_done(&c);
}

static void pclaim_clear(struct pclaim *cl)
{
	rdp_free(cl->uid);
	rdp_free(cl->namespace);
	rdp_free(cl->name);
	rdp_free(cl->error);
	rdp_dra_ckpt_claim_done(&cl->answer);
	rdp_kube_job_done(&cl->job);
}

static void pcall_free(struct pcall *c)
{
	for (size_t i = 0; i < c->n_claims; i++)
		pclaim_clear(&c->claims[i]);
	rdp_free(c->claims);
	rdp_free(c);
}

/* Every claim of the call is done: answer kubelet (if it still listens) and free the call. */
static void pcall_reply(struct pcall *c)
{
	size_t n = c->n_claims, n_dev = 0;
	_cleanup_free_ PrepareEntry *entries = rdp_calloc(n ? n : 1, sizeof(*entries));
	_cleanup_free_ PrepareEntry **eptr = rdp_calloc(n ? n : 1, sizeof(*eptr));
	_cleanup_free_ PrepareOne *ones = rdp_calloc(n ? n : 1, sizeof(*ones));
	_cleanup_free_ PbDevice *devs = NULL;
	_cleanup_free_ PbDevice **dptr = NULL;
	_cleanup_free_ char **reqs = NULL;
	PrepareResp resp = K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__INIT;
	size_t di = 0, failed = 0;

	for (size_t i = 0; i < n; i++)
		n_dev += c->claims[i].error ? 0 : c->claims[i].answer.n_devices;
	devs = rdp_calloc(n_dev ? n_dev : 1, sizeof(*devs));
	dptr = rdp_calloc(n_dev ? n_dev : 1, sizeof(*dptr));
	reqs = rdp_calloc(n_dev ? n_dev : 1, sizeof(*reqs));
	if (!entries || !eptr || !ones || !devs || !dptr || !reqs) {
		if (c->call)
			rdp_grpc_call_fail(c->call, RDP_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		pcall_free(c);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct pclaim *cl = &c->claims[i];
		PrepareOne *o = &ones[i];

		*o = (PrepareOne)K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCE_RESPONSE__INIT;
		entries[i] = (PrepareEntry)
			K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_PREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT;
		entries[i].key = cl->uid;
		entries[i].value = o;
		eptr[i] = &entries[i];
		if (cl->error) {
			o->error = cl->error;
			failed++;
			rdp_log(RDP_LOG_WARNING, "claim-prepare-failed", "claim=%s/%s uid=%s error=%s",
				cl->namespace, cl->name, cl->uid, rdp_log_q(cl->error));
			continue;
		}
		o->devices = &dptr[di];
		for (size_t j = 0; j < cl->answer.n_devices; j++) {
			const struct rdp_dra_ckpt_device *d = &cl->answer.devices[j];
			PbDevice *pd = &devs[di];

			*pd = (PbDevice)K8S__IO__KUBELET__PKG__APIS__DRA__V1__DEVICE__INIT;
			reqs[di] = d->request;
			pd->n_request_names = 1;
			pd->request_names = &reqs[di];
			pd->pool_name = d->pool;
			pd->device_name = d->device;
			pd->n_cdi_device_ids = d->n_cdi_ids;
			pd->cdi_device_ids = d->cdi_ids;
			if (d->share_id)
				pd->share_id = d->share_id;
			dptr[di++] = pd;
			o->n_devices++;
		}
	}
	resp.n_claims = n;
	resp.claims = eptr;
	if (c->call) {
		rdp_grpc_call_reply_pb(c->call, &resp.base);
		rdp_log(RDP_LOG_INFO, "prepared", "call=%llu claims=%zu failed=%zu",
			(unsigned long long)c->id, n, failed);
	}
	pcall_free(c);
}

static void unlink_call(struct rdp_dra_prepare *p, struct pcall *c)
{
	for (struct pcall **pp = &p->calls; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			return;
		}
}

static void unlink_inflight(struct rdp_dra_prepare *p, struct pclaim *cl)
{
	for (struct pclaim **pp = &p->inflight; *pp; pp = &(*pp)->inflight_next)
		if (*pp == cl) {
			*pp = cl->inflight_next;
			return;
		}
}

static void maybe_finish(struct pcall *c)
{
	if (c->outstanding == 0) {
		unlink_call(c->p, c);
		pcall_reply(c);
	}
}

static void on_claim_read(struct rdp_kube_job *job, void *userdata)
{
	struct pclaim *cl = userdata;
	struct pcall *c = cl->call;
	struct rdp_dra_prepare *p = c->p;
	const char *msg;

	cl->job_queued = false;
	unlink_inflight(p, cl);
	if (cl->cancelled) {
		claim_fail(cl, rdp_strdup("unprepared while it was being prepared"));
	} else if (job->result < 0) {
		claim_fail(cl, rdp_asprintf("cannot read the ResourceClaim %s/%s from the API "
					    "server: %s", cl->namespace, cl->name,
					    job->error[0] ? job->error : strerror(-job->result)));
	} else if (job->resp.status != 200) {
		msg = job->json ? rdp_kube_status_message(job->json) : NULL;
		claim_fail(cl, rdp_asprintf("reading the ResourceClaim %s/%s: HTTP %d%s%s",
					    cl->namespace, cl->name, job->resp.status,
					    msg ? ": " : "", msg ? msg : ""));
	} else {
		shared_begin(p);
		prepare_claim(p, cl, job->resp.body, job->resp.body_len);
		shared_end(p);
	}
	rdp_kube_job_done(job);
	c->outstanding--;
	maybe_finish(c);
}

static void on_call_gone(struct rdp_grpc_call *call, void *userdata)
{
	struct pcall *c = userdata;

	(void)call;
	c->call = NULL; /* the claims finish (they are recorded); nobody is answered */
	rdp_log(RDP_LOG_WARNING, "prepare-abandoned", "call=%llu msg=%s",
		(unsigned long long)c->id,
		rdp_log_q("kubelet went away before the answer; it calls again"));
}

/* A prepared claim from the checkpoint: its spec again, and its recorded answer. */
static void prepare_again(struct rdp_dra_prepare *p, struct pclaim *cl,
			  const struct rdp_dra_ckpt_claim *ck)
{
	_cleanup_free_ struct rdp_dra_result *results = NULL;
	char *err = NULL;
	int k = results_from_ckpt(ck, &results);

	if (k >= 0 && ck->n_devices)
		k = write_spec(p, cl->uid, results, ck->n_devices, claim_env_layout(ck), &err);
	if (k < 0) {
		claim_fail(cl, err ? err : rdp_asprintf("%s", strerror(-k)));
		return;
	}
	/* The answer: a copy of what was recorded. */
	k = rdp_dra_ckpt_claim_copy(ck, &cl->answer);
	if (k < 0) {
		claim_fail(cl, rdp_asprintf("%s", strerror(-k)));
		return;
	}
	cl->done = true;
	rdp_log(RDP_LOG_INFO, "claim-prepared", "claim=%s/%s uid=%s devices=%zu from=checkpoint",
		cl->namespace, cl->name, cl->uid, ck->n_devices);
	status_set(p, cl, results, ck->n_devices);
}

static bool claim_fields_ok(const PbClaim *pc)
{
	return pc && pc->uid && pc->name && pc->namespace_ && *pc->uid && *pc->name &&
	       strlen(pc->uid) < RDP_DRA_UID_MAX && strlen(pc->name) <= 253 &&
	       strlen(pc->namespace_) <= 63;
}

static void do_prepare(struct rdp_dra_prepare *p, struct rdp_grpc_call *call, const uint8_t *req,
		       size_t len)
{
	_cleanup_(rdp_pb_arena_done) struct rdp_pb_arena a = RDP_PB_ARENA_INIT(UNPACK_BUDGET);
	PrepareReq *m = PB(node_prepare_resources_request__unpack)(rdp_pb_arena_allocator(&a), len,
								    req);
	struct pcall *c;

	if (!m) {
		rdp_grpc_call_fail(call, RDP_GRPC_INVALID_ARGUMENT,
				   "cannot parse NodePrepareResourcesRequest");
		return;
	}
	if (m->n_claims > RDP_DRA_MAX_CALL_CLAIMS) {
		rdp_grpc_call_fail(call, RDP_GRPC_INVALID_ARGUMENT, "too many claims in one call");
		return;
	}
	c = rdp_calloc(1, sizeof(*c));
	if (c)
		c->claims = rdp_calloc(m->n_claims ? m->n_claims : 1, sizeof(*c->claims));
	if (!c || !c->claims) {
		rdp_free(c);
		rdp_grpc_call_fail(call, RDP_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	c->p = p;
	c->call = call;
	c->id = rdp_grpc_call_id(call);
	c->n_claims = m->n_claims;
	shared_begin(p);
	for (size_t i = 0; i < m->n_claims; i++) {
		struct pclaim *cl = &c->claims[i];
		const PbClaim *pc = m->claims[i];
		const struct rdp_dra_ckpt_claim *ck;

		cl->call = c;
		if (!claim_fields_ok(pc)) {
			cl->uid = rdp_strdup(pc && pc->uid ? pc->uid : "");
			cl->namespace = rdp_strdup("");
			cl->name = rdp_strdup("");
			claim_fail(cl, rdp_strdup("the claim needs a namespace, a name and a UID"));
			continue;
		}
		cl->uid = rdp_strdup(pc->uid);
		cl->namespace = rdp_strdup(pc->namespace_);
		cl->name = rdp_strdup(pc->name);
		if (!cl->uid || !cl->namespace || !cl->name) {
			claim_fail(cl, NULL);
			continue;
		}
		if (!rdp_cdi_claim_uid_valid(cl->uid)) {
			claim_fail(cl, rdp_asprintf("claim UID %s cannot name a CDI device", cl->uid));
			continue;
		}
		ck = rdp_dra_checkpoint_find(&p->ckpt, cl->uid);
		if (ck && ck->state == RDP_DRA_PREPARED) {
			prepare_again(p, cl, ck);
			continue;
		}
		snprintf(cl->job.path, sizeof(cl->job.path),
			 "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s", cl->namespace,
			 cl->name);
		cl->job.method = RDP_KUBE_GET;
		cl->job.parse_json = true;
		cl->job.policy = (struct rdp_kube_retry){0};
		if (rdp_kube_worker_submit(p->worker, &cl->job, p->budget_ms, on_claim_read, cl) <
		    0) {
			claim_fail(cl, rdp_strdup("the driver is stopping"));
			continue;
		}
		cl->job_queued = true;
		cl->inflight_next = p->inflight;
		p->inflight = cl;
		c->outstanding++;
	}
	shared_end(p);
	if (c->outstanding == 0) {
		pcall_reply(c);
		return;
	}
	rdp_grpc_call_set_close_cb(call, on_call_gone, c);
	c->next = p->calls;
	p->calls = c;
}

static void do_unprepare(struct rdp_dra_prepare *p, struct rdp_grpc_call *call, const uint8_t *req,
			 size_t len)
{
	_cleanup_(rdp_pb_arena_done) struct rdp_pb_arena a = RDP_PB_ARENA_INIT(UNPACK_BUDGET);
	UnprepareReq *m = PB(node_unprepare_resources_request__unpack)(rdp_pb_arena_allocator(&a),
									len, req);
	_cleanup_free_ UnprepareEntry *entries = NULL;
	_cleanup_free_ UnprepareEntry **eptr = NULL;
	_cleanup_free_ UnprepareOne *ones = NULL;
	_cleanup_free_ char **errors = NULL;
	UnprepareResp resp = K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__INIT;
	size_t n, failed = 0;
	int dirfd;

	if (!m) {
		rdp_grpc_call_fail(call, RDP_GRPC_INVALID_ARGUMENT,
				   "cannot parse NodeUnprepareResourcesRequest");
		return;
	}
	n = m->n_claims;
	if (n > RDP_DRA_MAX_CALL_CLAIMS) {
		rdp_grpc_call_fail(call, RDP_GRPC_INVALID_ARGUMENT, "too many claims in one call");
		return;
	}
	entries = rdp_calloc(n ? n : 1, sizeof(*entries));
	eptr = rdp_calloc(n ? n : 1, sizeof(*eptr));
	ones = rdp_calloc(n ? n : 1, sizeof(*ones));
	errors = rdp_calloc(n ? n : 1, sizeof(*errors));
	if (!entries || !eptr || !ones || !errors) {
		rdp_grpc_call_fail(call, RDP_GRPC_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	dirfd = rdp_cdi_open_dir(p->cdi_dir, false);
	shared_begin(p);
	for (size_t i = 0; i < n; i++) {
		const PbClaim *pc = m->claims[i];
		const char *uid = pc && pc->uid ? pc->uid : "";
		bool known = rdp_dra_checkpoint_find(&p->ckpt, uid) != NULL;
		int k = 0;

		ones[i] = (UnprepareOne)
			K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCE_RESPONSE__INIT;
		entries[i] = (UnprepareEntry)
			K8S__IO__KUBELET__PKG__APIS__DRA__V1__NODE_UNPREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY__INIT;
		entries[i].key = (char *)uid;
		entries[i].value = &ones[i];
		eptr[i] = &entries[i];
		/* A prepare of this claim still reading the API server writes nothing. */
		for (struct pclaim *cl = p->inflight; cl; cl = cl->inflight_next)
			if (strcmp(cl->uid, uid) == 0)
				cl->cancelled = true;
		if (!*uid || !rdp_cdi_claim_uid_valid(uid)) {
			if (!*uid)
				errors[i] = rdp_strdup("the claim has no UID");
			/* an invalid UID never had a spec or an entry: nothing to undo */
			if (errors[i]) {
				ones[i].error = errors[i];
				failed++;
			}
			continue;
		}
		if (dirfd >= 0)
			k = rdp_cdi_claim_spec_remove_at(dirfd, uid);
		else if (dirfd != -ENOENT)
			k = dirfd;
		if (k < 0) {
			errors[i] = rdp_asprintf("cannot remove the claim's CDI spec from %s: %s",
						 p->cdi_dir, strerror(-k));
		} else if (known) {
			if (p->status && pc->namespace_ && pc->name &&
			    rdp_dra_checkpoint_find(&p->ckpt, uid)->n_devices &&
			    rdp_dra_status_clear(p->status, pc->namespace_, pc->name, uid) < 0)
				rdp_log(RDP_LOG_WARNING, "claim-status-failed", "uid=%s error=%s", uid,
					rdp_log_q("cannot queue the removal of its status.devices"));
			rdp_dra_checkpoint_remove(&p->ckpt, uid);
			k = save(p);
			if (k < 0)
				errors[i] = rdp_asprintf("cannot update the checkpoint: %s",
							 strerror(-k));
		}
		if (errors[i]) {
			ones[i].error = errors[i];
			failed++;
			rdp_log(RDP_LOG_WARNING, "claim-unprepare-failed", "uid=%s error=%s", uid,
				rdp_log_q(errors[i]));
		} else {
			rdp_log(RDP_LOG_INFO, "claim-unprepared", "claim=%s/%s uid=%s known=%d",
				pc->namespace_ ? pc->namespace_ : "", pc->name ? pc->name : "", uid,
				known);
		}
	}
	shared_end(p);
	if (dirfd >= 0)
		close(dirfd);
	resp.n_claims = n;
	resp.claims = eptr;
	rdp_grpc_call_reply_pb(call, &resp.base);
	rdp_log(RDP_LOG_INFO, "unprepared", "call=%llu claims=%zu failed=%zu",
		(unsigned long long)rdp_grpc_call_id(call), n, failed);
	for (size_t i = 0; i < n; i++)
		rdp_free(errors[i]);
}

void rdp_dra_prepare_dispatch(struct rdp_dra_prepare *p, struct rdp_grpc_call *call,
			      const uint8_t *req, size_t len)
{
	enum rdp_method m = rdp_method_lookup(rdp_grpc_call_path(call));

	if (p->verbose)
		rdp_log(RDP_LOG_DEBUG, "call", "method=%s call=%llu",
			rdp_grpc_call_path(call), (unsigned long long)rdp_grpc_call_id(call));
	switch (m) {
	case RDP_METHOD_DRA_PREPARE:
	case RDP_METHOD_DRA_V1BETA1_PREPARE:
		do_prepare(p, call, req, len);
		return;
	case RDP_METHOD_DRA_UNPREPARE:
	case RDP_METHOD_DRA_V1BETA1_UNPREPARE:
		do_unprepare(p, call, req, len);
		return;
	default:
		rdp_grpc_call_fail(call, RDP_GRPC_UNIMPLEMENTED, "unknown method");
	}
}

int rdp_dra_prepare_new(const struct rdp_dra_prepare_options *o,
			const struct rdp_dra_inventory *inv, struct rdp_dra_prepare **ret)
{
	struct rdp_dra_prepare *p = rdp_calloc(1, sizeof(*p));
	char *slash, *err = NULL;
	int k;

	if (!p)
		return -ENOMEM;
	p->plugin_dirfd = -1;
	p->lock_fd = -1;
	p->driver = rdp_strdup(o->driver);
	p->pool = rdp_strdup(o->pool);
	p->cdi_dir = rdp_strdup(o->cdi_spec_dir);
	p->memlock = o->memlock;
	if (o->memlock_hook) {
		p->hook_path = rdp_strdup(o->memlock_hook);
		if (!p->hook_path) {
			rdp_free(p->cdi_dir);
			p->cdi_dir = NULL; /* reported below as a failed allocation */
		}
	}
	p->plugin_dir = rdp_strdup(o->checkpoint_path);
	if (!p->driver || !p->pool || !p->cdi_dir || !p->plugin_dir) {
		rdp_dra_prepare_free(p);
		return -ENOMEM;
	}
	slash = strrchr(p->plugin_dir, '/');
	if (slash && slash != p->plugin_dir)
		*slash = '\0';
	p->worker = o->worker;
	p->budget_ms = o->budget_ms;
	p->verbose = o->verbose;
	p->inv = inv;
	p->status = o->status;
	p->plugin_dirfd = open(p->plugin_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (p->plugin_dirfd < 0) {
		k = -errno;
		rdp_dra_prepare_free(p);
		return k;
	}
	p->lock_fd = rdp_dra_lock_open_at(p->plugin_dirfd);
	if (p->lock_fd < 0) {
		k = p->lock_fd;
		rdp_dra_prepare_free(p);
		return k;
	}
	/* Under the lock: another instance may be writing it (dra-instance.h). */
	(void)rdp_dra_lock_take(p->lock_fd);
	k = rdp_dra_checkpoint_load_at(p->plugin_dirfd, &p->ckpt, &err);
	if (k == -EBADMSG || k == -E2BIG) {
		rdp_log(RDP_LOG_ERROR, "checkpoint-corrupt", "dir=%s error=%s msg=%s",
			rdp_log_q(p->plugin_dir), rdp_log_q(err ? err : strerror(-k)),
			rdp_log_q("set aside as " RDP_DRA_CKPT_CORRUPT "; starting with no claims: "
				  "kubelet prepares its claims again"));
		(void)rdp_dra_checkpoint_set_aside_at(p->plugin_dirfd);
		k = 0;
	}
	rdp_dra_lock_release(p->lock_fd);
	rdp_free(err);
	if (k < 0) {
		rdp_dra_prepare_free(p);
		return k;
	}
	rdp_log(RDP_LOG_INFO, "checkpoint-loaded", "dir=%s claims=%zu", rdp_log_q(p->plugin_dir),
		p->ckpt.n_claims);
	*ret = p;
	return 0;
}

struct rdp_dra_prepare *rdp_dra_prepare_free(struct rdp_dra_prepare *p)
{
	if (!p)
		return NULL;
	/* The workers are freed first (their jobs' callbacks have run): no claim is in flight;
	 * a call still listed is answered UNAVAILABLE. */
	while (p->calls) {
		struct pcall *c = p->calls;

		p->calls = c->next;
		if (c->call)
			rdp_grpc_call_fail(c->call, RDP_GRPC_UNAVAILABLE, "the driver is stopping");
		pcall_free(c);
	}
	rdp_dra_checkpoint_done(&p->ckpt);
	if (p->plugin_dirfd >= 0)
		close(p->plugin_dirfd);
	if (p->lock_fd >= 0)
		close(p->lock_fd);
	rdp_free(p->driver);
	rdp_free(p->pool);
	rdp_free(p->cdi_dir);
	rdp_free(p->hook_path);
	rdp_free(p->plugin_dir);
	rdp_free(p);
	return NULL;
}

void rdp_dra_prepare_set_inventory(struct rdp_dra_prepare *p, const struct rdp_dra_inventory *inv)
{
	p->inv = inv;
}

size_t rdp_dra_prepare_claims(const struct rdp_dra_prepare *p)
{
	return p->ckpt.n_claims;
}
