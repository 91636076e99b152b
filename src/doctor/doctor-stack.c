/* SPDX-License-Identifier: MIT */
/*
 * doctor, the stack group: the kernel pieces below every RDMA device a pod can use.
 *
 *   stack.uverbs    ib_uverbs: /sys/module/ib_uverbs, or (built in without parameters, so
 *                   absent from /sys/module) a uverbs device in /sys/class/infiniband_verbs.
 *   stack.rdma_ucm  rdma_ucm: /sys/module/rdma_ucm or /sys/class/misc/rdma_cm, and the
 *                   /dev/infiniband/rdma_cm node rdma-dp hands to every pod.
 *   stack.driver    per RDMA-capable PCI function: the RDMA driver its NIC driver needs
 *                   (mlx5_core -> mlx5_ib, ice -> irdma, bnxt_en -> bnxt_re...); per software
 *                   device (rxe, siw): its module. A registered ibdev proves its driver is
 *                   there (built in when /sys/module does not show it).
 *   stack.netns     ib_core's netns_mode: exclusive hides every ibdev from the network
 *                   namespaces it is not in, pods' included.
 *
 * A module counts as loaded when /sys/module/<name> exists and its initstate (when there is
 * one: built-in modules have none) is "live".
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "doctor.h"
#include "macro.h"
#include "sysfs.h"

#define NO_DEVICE_SYMPTOM                                                                          \
	"pods get no RDMA device: NCCL logs \"NET/IB : No device found.\" then \"Using network "    \
	"Socket\""

/* The RDMA driver module a NIC driver needs; the NIC driver itself when it is both. */
static const struct {
	const char *pci_driver;
	const char *rdma_module;
} rdma_drivers[] = {
	{"mlx5_core", "mlx5_ib"},  {"mlx4_core", "mlx4_ib"},
	{"ice", "irdma"},          {"i40e", "irdma"},
	{"bnxt_en", "bnxt_re"},    {"qede", "qedr"},
	{"cxgb4", "iw_cxgb4"},     {"hns3", "hns_roce_hw_v2"},
	{"mana", "mana_ib"},       {"ionic", "ionic_rdma"},
	{"efa", "efa"},            {"hfi1", "hfi1"},
	{"qib", "ib_qib"},         {"vmw_pvrdma", "vmw_pvrdma"},
	{"erdma", "erdma"},        {"ocrdma", "ocrdma"},
};

static const char *rdma_module_of(const char *pci_driver)
{
	for (size_t i = 0; i < ARRAY_SIZE(rdma_drivers); i++)
		if (strcmp(rdma_drivers[i].pci_driver, pci_driver) == 0)
			return rdma_drivers[i].rdma_module;
	return NULL;
}

enum module_state {
	MODULE_ABSENT,
	MODULE_LIVE, /* initstate "live", or none (built in, shown for its parameters) */
	MODULE_NOT_LIVE, /* initstate "coming" or "going" */
};

static enum module_state module_state(int sys, const char *name, char *initstate, size_t size)
{
	char path[128];

	initstate[0] = '\0';
	snprintf(path, sizeof(path), "module/%s", name);
	if (!rdp_sysfs_exists(sys, path))
		return MODULE_ABSENT;
	snprintf(path, sizeof(path), "module/%s/initstate", name);
	if (rdp_sysfs_read_attr(sys, path, initstate, size) < 0)
		initstate[0] = '\0';
	return !initstate[0] || strcmp(initstate, "live") == 0 ? MODULE_LIVE : MODULE_NOT_LIVE;
}

/* True when the class directory (below sys) has an entry starting with prefix. */
static bool class_has(int sys, const char *dir, const char *prefix)
{
	char **names = NULL;
	size_t n = 0;
	bool found = false;

	if (rdp_sysfs_list_dir(sys, dir, RDP_MAX_DEVICES * 2, &names, &n) < 0)
		return false;
	for (size_t i = 0; i < n && !found; i++)
		found = strncmp(names[i], prefix, strlen(prefix)) == 0;
	rdp_sysfs_names_free(names, n);
	return found;
}

static int check_uverbs(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	char st[32];
	enum module_state m = module_state(c->sys_fd, "ib_uverbs", st, sizeof(st));

	if (m == MODULE_LIVE)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.uverbs", RDP_CHECK_OK, "", NULL,
				      NULL, "ib_uverbs loaded%s", st[0] ? "" : " (built in)");
	if (m == MODULE_NOT_LIVE)
		return rdp_doctor_add(
			r, RDP_GROUP_STACK, "stack.uverbs", RDP_CHECK_WARN, "",
			"until it is live, no /dev/infiniband/uverbs* device opens",
			"wait for the module to finish loading or unloading, then run doctor again; "
			"check dmesg for ib_uverbs errors",
			"ib_uverbs is %s (initstate), not live", st);
	if (class_has(c->sys_fd, "class/infiniband_verbs", "uverbs"))
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.uverbs", RDP_CHECK_OK, "", NULL,
				      NULL,
				      "ib_uverbs built in: %s/class/infiniband_verbs has uverbs "
				      "devices",
				      c->sysfs_root);
	return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.uverbs", RDP_CHECK_FAIL, "",
			      "no /dev/infiniband/uverbs* char device, so rdma-dp has nothing to "
			      "hand out and " NO_DEVICE_SYMPTOM,
			      "modprobe ib_uverbs, and load it at boot (echo ib_uverbs > "
			      "/etc/modules-load.d/rdma.conf)",
			      "ib_uverbs is not loaded: no %s/module/ib_uverbs and no uverbs device "
			      "in %s/class/infiniband_verbs",
			      c->sysfs_root, c->sysfs_root);
}

static int check_rdma_ucm(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	char st[32];
	enum module_state m = module_state(c->sys_fd, "rdma_ucm", st, sizeof(st));
	bool cls = rdp_sysfs_exists(c->sys_fd, "class/misc/rdma_cm");
	const char *node = c->host && c->host->rdma_cm[0] ? c->host->rdma_cm : NULL;

	if (m == MODULE_ABSENT && !cls)
		return rdp_doctor_add(
			r, RDP_GROUP_STACK, "stack.rdma_ucm", RDP_CHECK_FAIL, "",
			"no /dev/infiniband/rdma_cm: rdma-dp marks every device unusable (a pod "
			"could not use RDMA CM), and librdmacm users (UCX, MPI, NCCL with "
			"NCCL_IB_USE_RDMA_CM... ) fail in rdma_create_event_channel",
			"modprobe rdma_ucm, and load it at boot (echo rdma_ucm > "
			"/etc/modules-load.d/rdma.conf)",
			"rdma_ucm is not loaded: no %s/module/rdma_ucm and no %s/class/misc/rdma_cm",
			c->sysfs_root, c->sysfs_root);
	if (m == MODULE_NOT_LIVE)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.rdma_ucm", RDP_CHECK_WARN, "",
				      "until it is live, /dev/infiniband/rdma_cm does not open",
				      "wait for the module to finish loading or unloading; check "
				      "dmesg for rdma_ucm errors",
				      "rdma_ucm is %s (initstate), not live", st);
	if (!node)
		return rdp_doctor_add(
			r, RDP_GROUP_STACK, "stack.rdma_ucm", RDP_CHECK_FAIL, "",
			"rdma-dp marks every device unusable (no rdma_cm node to hand to pods): "
			"pods requesting an RDMA resource stay Pending",
			"recreate the node (udevadm trigger --subsystem-match=misc, or mknod per "
			"the dev file in /sys/class/misc/rdma_cm) and check the dev root is the "
			"host's /dev",
			"rdma_ucm loaded%s but %s/infiniband/rdma_cm is missing or is not the device "
			"sysfs names",
			m == MODULE_ABSENT ? " (built in)" : "", c->dev_root);
	return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.rdma_ucm", RDP_CHECK_OK, "", NULL, NULL,
			      "rdma_ucm loaded%s, %s present", m == MODULE_ABSENT ? " (built in)" : "",
			      node);
}

/* The ibdev on PCI function bdf, NULL when none. */
static const struct rdp_device *ibdev_of(const struct rdp_host *h, const char *bdf)
{
	for (size_t i = 0; h && i < h->n_devices; i++)
		if (strcmp(h->devices[i].pci_address, bdf) == 0)
			return &h->devices[i];
	return NULL;
}

static int check_function(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r,
			  const struct rdp_device *d, const char *bdf, const char *pci_driver,
			  const char *module, size_t *n)
{
	bool vf, any = c->host && c->host->n_devices > 0;
	char subject[RDP_IBDEV_NAME_MAX + RDP_PCI_ADDR_MAX + 4], path[128], st[32], fix[192];
	enum module_state m = module_state(c->sys_fd, module, st, sizeof(st));

	snprintf(path, sizeof(path), "bus/pci/devices/%s/physfn", bdf);
	vf = rdp_sysfs_exists(c->sys_fd, path);
	if (d)
		snprintf(subject, sizeof(subject), "%s (%s)", d->name, bdf);
	else
		snprintf(subject, sizeof(subject), "%s", bdf);
	if (!d && vf && m == MODULE_LIVE)
		return 0; /* a VF without RDMA: not an HCA of its own to speak of */
	(*n)++;
	if (d && m != MODULE_NOT_LIVE)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.driver", RDP_CHECK_OK, subject,
				      NULL, NULL, "%s -> %s %s", pci_driver, module,
				      m == MODULE_ABSENT ? "built in (its RDMA device is registered)"
							 : "loaded");
	if (m == MODULE_NOT_LIVE)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.driver", RDP_CHECK_WARN, subject,
				      "its RDMA device may vanish or not appear",
				      "wait for the module to settle; check dmesg",
				      "%s -> %s is %s (initstate), not live", pci_driver, module, st);
	if (m == MODULE_LIVE)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.driver", RDP_CHECK_OK, subject,
				      NULL, NULL,
				      "%s -> %s loaded; no RDMA device on this function (a bond's "
				      "slave under RoCE LAG, or RoCE disabled on it)",
				      pci_driver, module);
	/* no RDMA driver and no ibdev: a NIC that carries no RDMA */
	snprintf(fix, sizeof(fix),
		 "modprobe %s, and load it at boot (/etc/modules-load.d/rdma.conf); with "
		 "MLNX_OFED: /etc/init.d/openibd restart",
		 module);
	return rdp_doctor_add(
		r, RDP_GROUP_STACK, "stack.driver", any ? RDP_CHECK_WARN : RDP_CHECK_FAIL, subject,
		any ? "this NIC has no RDMA device: pods get none of it (fine for an Ethernet-only "
		      "NIC)"
		    : NO_DEVICE_SYMPTOM,
		fix, "bound to %s but %s is not loaded: no RDMA device on it", pci_driver, module);
}

/* An RDMA device without a PCI function: rxe (it has a `parent` netdev) or siw (iWARP). */
static int check_soft(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r,
		      const struct rdp_device *d)
{
	char path[RDP_IBDEV_NAME_MAX + 64], nt[32] = "", st[32];
	const char *module;
	enum module_state m;

	snprintf(path, sizeof(path), "class/infiniband/%s/parent", d->name);
	if (rdp_sysfs_exists(c->sys_fd, path)) {
		module = "rdma_rxe";
	} else {
		snprintf(path, sizeof(path), "class/infiniband/%s/node_type", d->name);
		(void)rdp_sysfs_read_attr(c->sys_fd, path, nt, sizeof(nt));
		module = nt[0] == '4' ? "siw" : NULL;
	}
	if (!module)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.driver", RDP_CHECK_OK, d->name,
				      NULL, NULL,
				      "no PCI function; its driver is loaded (the device is "
				      "registered)");
	m = module_state(c->sys_fd, module, st, sizeof(st));
	if (m == MODULE_NOT_LIVE)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.driver", RDP_CHECK_WARN, d->name,
				      "the device may vanish", "check dmesg",
				      "%s is %s (initstate), not live", module, st);
	return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.driver", RDP_CHECK_OK, d->name, NULL,
			      NULL, "software RDMA: %s %s", module,
			      m == MODULE_ABSENT ? "built in (the device is registered)"
						 : "loaded");
}

/* The driver bound to PCI function bdf, in buf; NULL when none. */
static const char *pci_driver(int sys, const char *bdf, char *buf, size_t size)
{
	char path[RDP_PCI_ADDR_MAX + 32];

	snprintf(path, sizeof(path), "bus/pci/devices/%s/driver", bdf);
	if (rdp_sysfs_read_link(sys, path, buf, size) < 0)
		return NULL;
	return rdp_path_basename(buf);
}

/*
 * The RDMA devices in the host's order (mlx5_0, mlx5_1...), then the RDMA-capable PCI
 * functions without one (bus/pci/devices order).
 */
static int check_drivers(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	char **names = NULL, link[RDP_SYSFS_PATH_MAX];
	size_t n = 0, n_checked = 0;
	const char *drv, *module;
	int k = 0;

	for (size_t i = 0; c->host && i < c->host->n_devices && k >= 0; i++) {
		const struct rdp_device *d = &c->host->devices[i];

		if (!d->pci_address[0]) {
			n_checked++;
			k = check_soft(c, r, d);
		} else if ((drv = pci_driver(c->sys_fd, d->pci_address, link, sizeof(link))) &&
			   (module = rdma_module_of(drv))) {
			k = check_function(c, r, d, d->pci_address, drv, module, &n_checked);
		} else {
			n_checked++;
			k = rdp_doctor_add(r, RDP_GROUP_STACK, "stack.driver", RDP_CHECK_OK,
					   d->name, NULL, NULL,
					   "%s%s: its RDMA driver is loaded (the device is "
					   "registered)",
					   drv ? "PCI driver " : "no PCI driver bound", drv ? drv : "");
		}
	}
	if (k < 0)
		return k;
	k = rdp_sysfs_list_dir(c->sys_fd, "bus/pci/devices", RDP_TOPO_MAX_PCI, &names, &n);
	if (k == -ENOMEM)
		return k;
	if (k < 0 && k != -ENOENT)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.driver", RDP_CHECK_SKIP, "", NULL,
				      NULL, "cannot list %s/bus/pci/devices: %s", c->sysfs_root,
				      strerror(-k));
	k = 0;
	for (size_t i = 0; i < n && k >= 0; i++) {
		if (!rdp_is_pci_address(names[i]) || ibdev_of(c->host, names[i]))
			continue;
		drv = pci_driver(c->sys_fd, names[i], link, sizeof(link));
		module = drv ? rdma_module_of(drv) : NULL;
		if (module)
			k = check_function(c, r, NULL, names[i], drv, module, &n_checked);
	}
	rdp_sysfs_names_free(names, n);
	if (k >= 0 && n_checked == 0)
		k = rdp_doctor_add(r, RDP_GROUP_STACK, "stack.driver", RDP_CHECK_SKIP, "", NULL,
				   NULL,
				   "no RDMA-capable NIC: no PCI function bound to a driver with RDMA "
				   "(mlx5_core, mlx4_core, ice, bnxt_en, ...) and no software RDMA "
				   "device");
	return k < 0 ? k : 0;
}

/* Whether any pool of the config is a shared resource with devices on this node. */
static bool shared_pools(const struct rdp_doctor_ctx *c, const char **name)
{
	for (size_t i = 0; c->pools && i < c->pools->n; i++)
		if (c->pools->v[i].res->mode == RDP_MODE_SHARED && c->pools->v[i].n_devices) {
			*name = c->pools->v[i].res->full_name;
			return true;
		}
	return false;
}

static int check_netns(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	static const char hidden[] =
		"an RDMA device is visible only in the network namespace it belongs to (the "
		"host's): a pod in its own netns sees no /sys/class/infiniband entry, and NCCL "
		"logs \"NET/IB : No device found.\" then \"Using network Socket\"";
	char v[16];
	const char *res = NULL;
	int k = rdp_sysfs_read_attr(c->sys_fd, "module/ib_core/parameters/netns_mode", v,
				    sizeof(v));

	if (k < 0)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.netns", RDP_CHECK_SKIP, "", NULL,
				      NULL, "cannot read %s/module/ib_core/parameters/netns_mode: %s%s",
				      c->sysfs_root, strerror(-k),
				      k == -ENOENT ? " (ib_core not loaded)" : "");
	if (strcmp(v, "Y") == 0 || strcmp(v, "1") == 0)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.netns", RDP_CHECK_OK, "", NULL,
				      NULL,
				      "RDMA netns mode shared: every network namespace sees every "
				      "RDMA device");
	if (strcmp(v, "N") != 0 && strcmp(v, "0") != 0)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.netns", RDP_CHECK_SKIP, "", NULL,
				      NULL, "ib_core netns_mode reads '%s', neither Y nor N", v);
	if (shared_pools(c, &res))
		return rdp_doctor_add(
			r, RDP_GROUP_STACK, "stack.netns", RDP_CHECK_WARN, "", hidden,
			"rdma system set netns shared (at boot: options ib_core netns_mode=1 in "
			"/etc/modprobe.d/ib_core.conf), or serve the devices as exclusive resources "
			"with the RDMA CNI moving each into its pod's netns",
			"RDMA netns mode exclusive, and %s is a shared resource: its pods get the "
			"char devices of ibdevs they cannot see",
			res);
	if (c->config)
		return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.netns", RDP_CHECK_OK, "", NULL,
				      NULL,
				      "RDMA netns mode exclusive, no shared resource: each device "
				      "must be moved into its pod's netns (the RDMA CNI does)");
	return rdp_doctor_add(r, RDP_GROUP_STACK, "stack.netns", RDP_CHECK_WARN, "", hidden,
			      "with shared resources: rdma system set netns shared (at boot: "
			      "options ib_core netns_mode=1); with exclusive ones: the RDMA CNI "
			      "must move each device into its pod's netns",
			      "RDMA netns mode exclusive (no config read to tell whether its "
			      "resources are shared)");
}

int rdp_doctor_stack(const struct rdp_doctor_ctx *c, struct rdp_doctor_report *r)
{
	int k;

	k = check_uverbs(c, r);
	if (k >= 0)
		k = check_rdma_ucm(c, r);
	if (k >= 0)
		k = check_drivers(c, r);
	if (k >= 0)
		k = check_netns(c, r);
	return k < 0 ? k : 0;
}
