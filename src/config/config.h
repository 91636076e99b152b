/* SPDX-License-Identifier: MIT */
/*
 * config.json, as k8s-rdma-shared-dev-plugin reads it, validated strictly: unknown keys,
 * wrong types, duplicate keys, empty lists, out-of-range numbers and invalid names are errors
 * reported with file:line:column and the JSON path (and a did-you-mean for near misses).
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "device.h"
#include "diag.h"

#define RDP_CONFIG_MAX_BYTES (1024 * 1024)
#define RDP_CONFIG_MAX_RESOURCES 256
#define RDP_CONFIG_MAX_LIST 4096 /* entries in one selector list */
#define RDP_DEFAULT_PERIODIC_UPDATE_INTERVAL 60
#define RDP_DEFAULT_RESOURCE_PREFIX "rdma"
#define RDP_DEFAULT_CONFIG_FILE "/k8s-rdma-shared-dev-plugin/config.json" /* the Go plugin's */
/* One week: longer is a typo (milliseconds?) more likely than a wish. */
#define RDP_CONFIG_MAX_PERIODIC_UPDATE_INTERVAL (7 * 24 * 3600)
/*
 * Units per resource. kubelet takes ListAndWatch responses of at most 4 MiB; a unit costs
 * ~25 bytes there (ID, health, NUMA), so 100000 units (~2.5 MB) still fit with room to spare.
 */
#define RDP_CONFIG_MAX_RDMA_HCA_MAX 100000
#define RDP_CONFIG_MAX_NUMA_NODE 1023 /* the kernel's MAX_NUMNODES is at most 1024 */
#define RDP_CONFIG_MAX_VF_INDEX 65535 /* TotalVFs is a 16-bit PCI field */
#define RDP_CONFIG_MAX_VF_RANGES 64   /* "#0-3,5" parts in one pfNames entry */
#define RDP_RESOURCE_NAME_MAX 63      /* Kubernetes qualified-name part */
#define RDP_RESOURCE_PREFIX_MAX 253   /* DNS subdomain */
#define RDP_ENV_MAX_VARS 64           /* entries of one resource's "env" */
#define RDP_ENV_NAME_MAX 128          /* bytes of a variable name in "env" */
#define RDP_ENV_VALUE_MAX 4096        /* bytes of a value in "env" */

/* One pfNames entry: "ens1f0" or "ens1f0#0-3,5" (VF indexes, as the SR-IOV plugin). */
struct rdp_pf_selector {
	char name[RDP_IFNAME_MAX];
	/* VF index ranges; n_ranges == 0: the PF's name alone (matches the PF and all its VFs). */
	struct {
		unsigned int lo, hi;
	} *ranges;
	size_t n_ranges;
};

/* A list of strings as written in the config, with the position of each for messages. */
struct rdp_strlist {
	char **v;
	size_t n;
};

struct rdp_selectors {
	/* Each list is empty when the key is absent (an empty list in the file is an error). */
	struct rdp_strlist vendors;     /* lower-cased hex, "15b3" */
	struct rdp_strlist device_ids;  /* "deviceIDs", and "devices" inside selectors (alias) */
	struct rdp_strlist drivers;
	struct rdp_strlist if_names;
	struct rdp_strlist link_types;  /* as written; matching is by canonical link layer */
	struct rdp_strlist root_devices;/* PCI addresses of the physical function */
	struct rdp_pf_selector *pf_names;
	size_t n_pf_names;
	int *numa_nodes;
	size_t n_numa_nodes;
};

/*
 * "mode": how the devices of a resource reach pods.
 *  - shared (the default, k8s-rdma-shared-dev-plugin's only mode): rdmaHcaMax interchangeable
 *    units; a pod given any of them gets every device of the pool;
 *  - exclusive: one unit per usable device (PF, VF or SF), named by its PCI address; a pod
 *    gets exactly the devices of its units, and kubelet's Topology Manager and
 *    GetPreferredAllocation place them. rdmaHcaMax is an error there.
 */
enum rdp_resource_mode {
	RDP_MODE_SHARED = 0,
	RDP_MODE_EXCLUSIVE,
};

/* "shared", "exclusive". */
const char *rdp_resource_mode_name(enum rdp_resource_mode m);

/*
 * "envFromDevices": variables computed per allocation from the devices a container gets
 * (workload-env.h). Bits of rdp_resource.env_from.
 */
enum {
	RDP_ENV_NCCL_IB_HCA = 1u << 0,     /* "=mlx5_0:1,mlx5_3:1": ports that carry traffic */
	RDP_ENV_UCX_NET_DEVICES = 1u << 1, /* "mlx5_0:1,mlx5_3:1": the same ports */
};
#define RDP_ENV_FROM_ALL (RDP_ENV_NCCL_IB_HCA | RDP_ENV_UCX_NET_DEVICES)
/* The variable name of one RDP_ENV_* bit ("NCCL_IB_HCA"); NULL for anything else. */
const char *rdp_env_from_name(unsigned int bit);

/* "RDMA_DEVICE_" + the longest full resource name (prefix "/" name) + NUL. */
#define RDP_ENV_RESOURCE_VAR_MAX (12 + RDP_RESOURCE_PREFIX_MAX + 1 + RDP_RESOURCE_NAME_MAX + 1)
/*
 * Writes "RDMA_DEVICE_<RESOURCE>" for full_name ("rdma/hca_shared_devices_a" ->
 * "RDMA_DEVICE_RDMA_HCA_SHARED_DEVICES_A"). Returns its length, -EINVAL for an empty name,
 * -ENOBUFS when it does not fit in size bytes.
 */
int rdp_env_resource_var(const char *full_name, char *buf, size_t size);

/*
 * One entry of "env": a constant variable every container given the resource gets.
 * name matches [A-Za-z_][A-Za-z0-9_]* (at most RDP_ENV_NAME_MAX bytes), value has no NUL,
 * '\n' or '\r' (at most RDP_ENV_VALUE_MAX bytes); line:col is where the name is in the file.
 */
struct rdp_env_var {
	char *name;
	char *value;
	unsigned int line, col;
};

struct rdp_resource {
	char *name;          /* resourceName: [A-Za-z0-9_]+ */
	char *prefix;        /* resourcePrefix, default "rdma" */
	char *full_name;     /* prefix + "/" + name: "rdma/hca_shared_devices_a" */
	enum rdp_resource_mode mode;
	unsigned int rdma_hca_max; /* shared mode; 0 in exclusive mode */
	struct rdp_selectors sel;
	bool legacy_devices; /* selection came from the top-level "devices" (= ifNames) */
	struct rdp_env_var *env; /* "env", in file order; none (NULL, 0) when absent */
	size_t n_env;
	unsigned int env_from; /* "envFromDevices": RDP_ENV_NCCL_IB_HCA | ...; 0 when absent */
	/*
	 * "memlock": RLIMIT_MEMLOCK the CDI spec's hook gives the containers (memlock.h);
	 * RDP_MEMLOCK_UNLIMITED when absent, RDP_MEMLOCK_LEAVE (0): no hook.
	 */
	uint64_t memlock;
	/*
	 * "reportTopology" (shared only): the pool's NUMA node goes to kubelet as TopologyInfo
	 * when all its devices share one. Off by default, as k8s-rdma-shared-dev-plugin: with it,
	 * kubelet's Topology Manager (restricted, single-numa-node) may refuse a pod whose CPUs
	 * or other devices sit on the other node.
	 */
	bool report_topology;
	unsigned int line;   /* where the entry starts in the file, for messages */
};

struct rdp_config {
	char *path;                            /* as given */
	unsigned int periodic_update_interval; /* seconds, 0 = disabled */
	struct rdp_resource *resources;
	size_t n_resources;
};

/*
 * Parses and validates. Errors and warnings go to diags (which may be non-empty already).
 * Returns 0 and a config, or -EINVAL when any error was found (no config), -ENOENT/-EACCES/...
 * when the file cannot be read (with a diag saying so), -EFBIG above RDP_CONFIG_MAX_BYTES.
 */
int rdp_config_load_file(const char *path, struct rdp_config **ret, struct rdp_diags *diags);
int rdp_config_parse(const char *text, size_t len, const char *filename, struct rdp_config **ret,
		     struct rdp_diags *diags);
struct rdp_config *rdp_config_free(struct rdp_config *c);
