/* SPDX-License-Identifier: MIT */
/*
 * doctor, the plugin group: rdma-dp itself, between the node and kubelet.
 *
 *   plugin.config    the config: valid, its diagnostics (the pools' warnings included).
 *   plugin.sockets   per resource the running daemon publishes (status.json, status.h):
 *                    its socket present and answering GetDevicePluginOptions, the call
 *                    kubelet makes first (status-probe.h, shared with `rdma-dp health`);
 *                    resources of the config the daemon does not serve.
 *   plugin.units     per resource of the config: the units kubelet is told (by the daemon's
 *                    code, dp-service.h, on this node's devices) and how many are Healthy.
 *   plugin.unusable  devices a pool selects that a pod could not use, with the reason.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "diag.h"
#include "doctor.h"
#include "dp-service.h"
#include "macro.h"
#include "status-probe.h"

#define PROBE_TIMEOUT_MS 2000

static const char *first_diag(const struct rdp_diags *d, enum rdp_diag_level level)
{
	for (size_t i = 0; d && i < d->n; i++)
		if (d->v[i].level == level)
			return d->v[i].text;
	return "";
}

static int check_config(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	const struct rdp_diags *d = c->config_diags;
	char fix[512];

	if (!c->config_path)
		return rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.config", RDP_CHECK_SKIP, "",
				      NULL, NULL,
				      "no config read (give --config-file): the config's checks "
				      "skip");
	snprintf(fix, sizeof(fix), "fix what rdma-dp check-config -c %s says", c->config_path);
	if (!c->config)
		return rdp_doctor_add(
			r, RDP_GROUP_PLUGIN, "plugin.config", RDP_CHECK_FAIL, c->config_path,
			"rdma-dp serve refuses it: a running daemon keeps its last valid config, a "
			"starting one serves nothing (pods stay Pending with \"Insufficient "
			"rdma/...\")",
			fix, "invalid, %zu error%s: %s", d ? d->n_errors : 0,
			d && d->n_errors == 1 ? "" : "s", first_diag(d, RDP_DIAG_ERROR));
	if (d && d->n_warnings)
		return rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.config", RDP_CHECK_WARN,
				      c->config_path,
				      "the daemon serves it, perhaps not as meant", fix,
				      "valid, %zu resource%s, %zu warning%s: %s",
				      c->config->n_resources, c->config->n_resources == 1 ? "" : "s",
				      d->n_warnings, d->n_warnings == 1 ? "" : "s",
				      first_diag(d, RDP_DIAG_WARNING));
	return rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.config", RDP_CHECK_OK, c->config_path,
			      NULL, NULL, "valid, %zu resource%s", c->config->n_resources,
			      c->config->n_resources == 1 ? "" : "s");
}

/* The daemon's status of resource name, or NULL (no daemon, or it does not serve it). */
static const struct rdp_status_resource *status_find(const struct rdp_status *st,
						     const char *name)
{
	for (size_t i = 0; st && i < st->n_resources; i++)
		if (strcmp(st->resources[i].name, name) == 0)
			return &st->resources[i];
	return NULL;
}

static int check_sockets(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	static const char pending[] =
		"kubelet is not told about the resource: pods requesting it stay Pending "
		"(\"Insufficient <resource>\")";
	struct rdp_status *st = NULL;
	struct rdp_probe *pr = NULL;
	_cleanup_free_ char *dir = NULL;
	char err[512] = "";
	struct stat sb;
	int k;

	if (!c->kubelet_root)
		return rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.sockets", RDP_CHECK_SKIP, "",
				      NULL, NULL, "no kubelet root directory given");
	if (stat(c->kubelet_root, &sb) < 0 || !S_ISDIR(sb.st_mode))
		return rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.sockets", RDP_CHECK_SKIP, "",
				      NULL, NULL,
				      "kubelet's root directory %s is not here (run doctor where it "
				      "is mounted, or give --kubelet-root-dir)",
				      c->kubelet_root);
	k = rdp_status_load(c->kubelet_root, RDP_REGISTRATION_AUTO, &st, &dir, err, sizeof(err));
	if (k == -ENOMEM)
		return k;
	if (k < 0)
		return rdp_doctor_add(
			r, RDP_GROUP_PLUGIN, "plugin.sockets", RDP_CHECK_FAIL, "",
			"kubelet has no rdma-dp resource: pods requesting one stay Pending "
			"(\"Insufficient rdma/...\")",
			"start rdma-dp serve (kubectl -n <namespace> get pods -l "
			"name=rdma-dp -o wide; read its log)",
			"%s%s", k == -ENOENT ? "no rdma-dp daemon is running: " : "", err);
	k = rdp_status_probe(st, PROBE_TIMEOUT_MS, &pr);
	if (k == -ENOMEM)
		goto out;
	if (k < 0) {
		k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.sockets", RDP_CHECK_SKIP, "", NULL,
				   NULL, "cannot probe the daemon's sockets: %s", strerror(-k));
		goto out;
	}
	if (st->n_resources == 0)
		k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.sockets", RDP_CHECK_WARN, "",
				   "no resource is offered to kubelet",
				   "give the daemon a config with resources (configList)",
				   "the daemon (pid %lld) serves no resource", st->pid);
	for (size_t i = 0; i < st->n_resources && k >= 0; i++) {
		const struct rdp_status_resource *res = &st->resources[i];

		if (pr[i].state == RDP_PROBE_OK)
			k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.sockets", RDP_CHECK_OK,
					   res->name, NULL, NULL,
					   "%s answers GetDevicePluginOptions (daemon pid %lld)",
					   res->socket, st->pid);
		else if (pr[i].state == RDP_PROBE_NOT_SERVING)
			k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.sockets", RDP_CHECK_WARN,
					   res->name, pending,
					   "check that kubelet's device-plugins directory is mounted "
					   "into the daemon's pod, and read the daemon's log",
					   "not serving yet: the daemon waits for %s or retries its "
					   "listen",
					   res->socket);
		else
			k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.sockets", RDP_CHECK_FAIL,
					   res->name, pending,
					   "restart the rdma-dp pod (kubectl delete pod) and read its "
					   "log; rdma-dp health probes the same",
					   "%s: %s (daemon pid %lld)", res->socket, pr[i].reason,
					   st->pid);
	}
	for (size_t i = 0; c->config && i < c->config->n_resources && k >= 0; i++) {
		const char *name = c->config->resources[i].full_name;

		if (!status_find(st, name))
			k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.sockets", RDP_CHECK_WARN,
					   name, pending,
					   "wait for the daemon to apply the config (it follows the "
					   "file within seconds), or check it reads the same file",
					   "in %s but not served by the daemon (pid %lld): a config it "
					   "has not applied, or another file",
					   c->config_path, st->pid);
	}
out:
	rdp_free(pr);
	rdp_status_free(st);
	return k < 0 ? k : 0;
}

/* The failing stack check that makes devices unusable, or NULL (see rdp_doctor_find). */
static const char *stack_cause(const struct rdp_doctor_report *r)
{
	if (rdp_doctor_find(r, "stack.uverbs", RDP_CHECK_FAIL, NULL))
		return "stack.uverbs";
	if (rdp_doctor_find(r, "stack.rdma_ucm", RDP_CHECK_FAIL, NULL))
		return "stack.rdma_ucm";
	return NULL;
}

/* The failing stack check that explains a device's unusability, or NULL. */
static const char *unusable_cause(const struct rdp_doctor_report *r, enum rdp_usability u)
{
	switch (u) {
	case RDP_UNUSABLE_NO_UVERBS:
	case RDP_UNUSABLE_UVERBS_NODE:
		return rdp_doctor_find(r, "stack.uverbs", RDP_CHECK_FAIL, NULL) ? "stack.uverbs"
										: NULL;
	case RDP_UNUSABLE_NO_RDMA_CM:
		return rdp_doctor_find(r, "stack.rdma_ucm", RDP_CHECK_FAIL, NULL)
			       ? "stack.rdma_ucm"
			       : NULL;
	default:
		return NULL;
	}
}

/*
 * plugin.units: what kubelet was told (the daemon's status) against what this node and the
 * config give; a difference fails (the daemon serves another config, or has not seen a
 * change). The reasons a pool has no Healthy unit are other checks' to fail (plugin.unusable,
 * port.state, stack.*): here they are warnings that point there.
 */
static int check_units(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	struct rdp_status *status = NULL;
	struct stat sb;
	int k = 0;

	if (!c->config || !c->pools || !c->host)
		return rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.units", RDP_CHECK_SKIP, "", NULL,
				      NULL, "no valid config: no resource to count units of");
	if (c->pools->n == 0)
		return rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.units", RDP_CHECK_SKIP, "", NULL,
				      NULL, "the config has no resource");
	if (c->kubelet_root && stat(c->kubelet_root, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		char err[256];
		_cleanup_free_ char *dir = NULL;

		/* No daemon: plugin.sockets says so; units are then judged from the node. */
		k = rdp_status_load(c->kubelet_root, RDP_REGISTRATION_AUTO, &status, &dir, err,
				    sizeof(err));
		if (k == -ENOMEM)
			return k;
		k = 0;
	}
	for (size_t i = 0; i < c->pools->n && k >= 0; i++) {
		const struct rdp_pool *p = &c->pools->v[i];
		const char *name = p->res->full_name;
		struct rdp_dp_state st = {.numa_node = -1};
		const struct rdp_status_resource *t;
		size_t healthy;
		char symptom[RDP_DOCTOR_TEXT_MAX], fix[512];

		k = rdp_dp_state_build(c->host, p, &st);
		if (k < 0)
			break;
		healthy = rdp_dp_state_healthy_units(&st);
		snprintf(symptom, sizeof(symptom),
			 "pods requesting %s stay Pending: \"Insufficient %s\"", name, name);
		snprintf(fix, sizeof(fix),
			 "see what each selector matches: rdma-dp check-config -c %s",
			 c->config_path ? c->config_path : "<config>");
		/* What the daemon told kubelet (units -1: a daemon that did not say). */
		t = status_find(status, name);
		if (t && t->units < 0)
			t = NULL;
		if (t && (t->units != (long long)st.units || t->healthy != (long long)healthy))
			k = rdp_doctor_add(
				r, RDP_GROUP_PLUGIN, "plugin.units", RDP_CHECK_FAIL, name,
				"kubelet schedules by what the daemon told it: pods land where the "
				"devices are not as told, or stay Pending (\"Insufficient ...\")",
				"read the daemon's log (config-rejected, device-unusable, updated) and "
				"compare its config with this one (rdma-dp check-config)",
				"the daemon (pid %lld) told kubelet %lld unit%s, %lld Healthy; this node "
				"and %s give %u, %zu Healthy",
				status->pid, t->units, t->units == 1 ? "" : "s", t->healthy,
				c->config_path ? c->config_path : "the config", st.units, healthy);
		else if (p->n_devices == 0)
			k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.units", RDP_CHECK_WARN, name,
					   symptom, fix,
					   "0 units: its selectors match no device of this node (fine "
					   "where the resource is meant for other nodes)");
		else if (st.n_usable == 0)
			k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.units", RDP_CHECK_WARN, name,
					   symptom,
					   "make the devices usable (see plugin.unusable)",
					   "%u unit%s%s: none of its %zu device%s is usable (explained "
					   "by %s: fix that first)",
					   st.units, st.units == 1 ? "" : "s",
					   st.units ? ", all Unhealthy (Allocate fails)" : "",
					   p->n_devices, p->n_devices == 1 ? "" : "s",
					   stack_cause(r) ? stack_cause(r) : "plugin.unusable");
		else if (healthy == 0)
			k = rdp_doctor_add(
				r, RDP_GROUP_PLUGIN, "plugin.units", RDP_CHECK_WARN, name,
				symptom, "bring a port up (see port.state)",
				"%u unit%s, all Unhealthy: no device of the pool has an active port "
				"(explained by port.state: fix that first)",
				st.units, st.units == 1 ? "" : "s");
		else if (healthy < st.units && st.mode == RDP_MODE_EXCLUSIVE)
			k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.units", RDP_CHECK_WARN, name,
					   "kubelet allocates only the Healthy units: fewer pods fit",
					   "bring the ports up (see port.state)",
					   "%u units (one per usable device), %zu Healthy", st.units,
					   healthy);
		else
			k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.units", RDP_CHECK_OK, name,
					   NULL, NULL, "%u unit%s %s, all Healthy (%zu device%s)%s",
					   st.units, st.units == 1 ? "" : "s",
					   st.mode == RDP_MODE_EXCLUSIVE ? "(one per device)"
									 : "(rdmaHcaMax)",
					   p->n_devices, p->n_devices == 1 ? "" : "s",
					   t ? ", as the daemon told kubelet" : "");
		rdp_dp_state_done(&st);
	}
	rdp_status_free(status);
	return k < 0 ? k : 0;
}

static const char *unusable_fix(enum rdp_usability u)
{
	switch (u) {
	case RDP_UNUSABLE_NO_UVERBS:
		return "modprobe ib_uverbs (see stack.uverbs)";
	case RDP_UNUSABLE_UVERBS_NODE:
		return "recreate its /dev/infiniband node (udevadm trigger "
		       "--subsystem-match=infiniband_verbs) and check the dev root is the host's "
		       "/dev";
	case RDP_UNUSABLE_NO_RDMA_CM:
		return "modprobe rdma_ucm and check /dev/infiniband/rdma_cm (see stack.rdma_ucm)";
	default:
		return "see what rdma-dp discover says under PROBLEMS";
	}
}

/* The first resource whose pool has device index i; NULL when none. */
static const char *selected_by(const struct rdp_pools *pools, size_t i)
{
	for (size_t p = 0; pools && p < pools->n; p++)
		for (size_t j = 0; j < pools->v[p].n_devices; j++)
			if (pools->v[p].devices[j] == i)
				return pools->v[p].res->full_name;
	return NULL;
}

static int check_unusable(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	const char *cause;
	size_t n_checked = 0, n_bad = 0;
	int k = 0;

	if (!c->host)
		return rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.unusable", RDP_CHECK_SKIP, "",
				      NULL, NULL, "no RDMA devices read");
	for (size_t i = 0; i < c->host->n_devices && k >= 0; i++) {
		const struct rdp_device *d = &c->host->devices[i];
		const char *res = c->pools ? selected_by(c->pools, i) : NULL;

		if (c->pools && !res)
			continue;
		n_checked++;
		if (rdp_device_is_usable(d))
			continue;
		n_bad++;
		cause = unusable_cause(r, d->usability);
		k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.unusable",
				   cause ? RDP_CHECK_WARN : RDP_CHECK_FAIL, d->name,
				   "rdma-dp gives no unit for it (exclusive) or marks the "
				   "resource's units Unhealthy when none is usable (shared); a pod "
				   "given it anyway logs \"Call to ibv_open_device failed\" or "
				   "\"NET/IB : No device found.\"",
				   unusable_fix(d->usability), "%s%s%s%s%s%s%s", res ? "selected by " : "",
				   res ? res : "", res ? ", unusable: " : "unusable: ",
				   d->unusable_reason, cause ? " (explained by " : "",
				   cause ? cause : "", cause ? " above: fix that first)" : "");
	}
	if (k >= 0 && n_bad == 0)
		k = rdp_doctor_add(r, RDP_GROUP_PLUGIN, "plugin.unusable", RDP_CHECK_OK, "", NULL,
				   NULL, "%s: %zu device%s, all usable",
				   c->pools ? "devices selected by a resource"
					    : "no config, every RDMA device",
				   n_checked, n_checked == 1 ? "" : "s");
	return k < 0 ? k : 0;
}

int rdp_doctor_plugin(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	int k;

	k = check_config(c, r);
	if (k >= 0)
		k = check_sockets(c, r);
	if (k >= 0)
		k = check_units(c, r);
	if (k >= 0)
		k = check_unusable(c, r);
	return k < 0 ? k : 0;
}
