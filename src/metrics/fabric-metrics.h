/* SPDX-License-Identifier: MIT */
/*
 * Fabric metrics: every RDMA port's state, rate, counters/, counters_ext/ and hw_counters/ files,
 * read from sysfs at collection time and written as Prometheus families (metrics-text.h).
 *
 * Two steps, for the daemon's split between its event loop and a scrape thread:
 *   - rdp_fabric_targets_from_host() on the loop: a plain copy of what the labels need from
 *     the host model (every ibdev, usable or not, every port), no I/O.
 *   - rdp_fabric_collect() anywhere (a thread): opens the sysfs root, reads the files, writes
 *     the families. Reads nothing but below the root; never logs.
 *
 * Names follow node_exporter's infiniband collector under the rdma_dp_ prefix (its
 * node_infiniband_<x> suffixes verbatim where it has the counter; the table in
 * fabric-metrics.c says file -> name). port_{xmit,rcv}_data (and the legacy *_data_64) are
 * multiplied by 4 into bytes. A file no table row names is exported generically:
 * rdma_dp_pma_total{device,port,counter="<file>"} for counters/ (counter=
 * "counters_ext/<file>" for counters_ext/), rdma_dp_hw_stat_total{...} for hw_counters/.
 * rdma_dp_pma_saturated{device,port,counter} is 1 when a PMA counter of known width
 * (4, 8, 16 or 32 bits) reads 2^w-1: it saturates there and counts no more.
 * (The design's rdma_dp_port_counter_total, rdma_dp_hw_counter_total and
 * rdma_dp_counter_saturated fail `promtool check metrics`: "metric name should not include
 * type 'counter'"; hence these names.)
 *
 * Bounds: a value file of at most RDP_FABRIC_VALUE_MAX bytes, at most RDP_FABRIC_MAX_FILES
 * files per directory (the rest ignored and counted). A file that cannot be read or parsed
 * ("N/A (no PMA)", EIO, not a decimal u64) gives no sample and is counted in the stats.
 * Order: device, port (the model's order), families one after the other (each family's
 * samples contiguous across all ports), known counters in table order, unknown ones by name.
 *
 * netdev label: for a one-port device, its first netdev (rdp_device.netdevs is sorted, so
 * the name sorting first when the device has several, e.g. a PF with VLANs). For a device of
 * several ports (mlx4 VPI) the model keeps netdevs per device, not per port, and the sorted
 * names need not follow the ports (mlx4: ens1d1 is port 2, ib0 port 1): netdev is "" there.
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "metrics-text.h"

#define RDP_FABRIC_VALUE_MAX 64 /* bytes of one value file */
#define RDP_FABRIC_MAX_FILES 256 /* files read per counters directory */
#define RDP_FABRIC_ERRORS_KEPT 8 /* read errors described in rdp_fabric_stats */

struct rdp_fabric_device {
	char name[RDP_IBDEV_NAME_MAX];
	char fw_ver[64];
	char hca_type[64];
};

struct rdp_fabric_port {
	size_t device; /* index in rdp_fabric_targets.devices */
	unsigned int num;
	char num_str[12]; /* the port label */
	char link_layer[16]; /* "InfiniBand", "Ethernet", "" unknown */
	char netdev[RDP_IFNAME_MAX]; /* see the rule above; "" none */
	char pci_address[RDP_PCI_ADDR_MAX]; /* "" for virtual devices */
	char numa_node[12]; /* "-1" unknown, as sysfs says */
};

struct rdp_fabric_targets {
	unsigned int refs; /* rdp_fabric_targets_ref/unref: the loop's thread only */
	char *sysfs_root;
	struct rdp_fabric_device *devices; /* the model's order (by name) */
	size_t n_devices;
	struct rdp_fabric_port *ports; /* by device, then port number */
	size_t n_ports;
};

/* Copies the labels of every device and port of h. 0 or -ENOMEM. Free with ..._free(). */
int rdp_fabric_targets_from_host(const struct rdp_host *h, const char *sysfs_root,
				 struct rdp_fabric_targets **ret);
/*
 * Keeps only the devices named (and their ports), in the targets' order. -ENOENT with
 * *missing (may be NULL) pointing at the first name that is no device of t; -ENOMEM.
 */
int rdp_fabric_targets_keep(struct rdp_fabric_targets *t, const char *const *names, size_t n,
			    const char **missing);
/* Accepts NULL; returns NULL. Frees whatever the reference count says. */
struct rdp_fabric_targets *rdp_fabric_targets_free(struct rdp_fabric_targets *t);
/*
 * References, for the daemon: it keeps the targets of its last model and a scrape holds its
 * own until its collection ends, across a rescan meanwhile. Counted on the loop's thread only
 * (the collecting thread never touches the count). Both accept NULL; unref returns NULL.
 */
struct rdp_fabric_targets *rdp_fabric_targets_ref(struct rdp_fabric_targets *t);
struct rdp_fabric_targets *rdp_fabric_targets_unref(struct rdp_fabric_targets *t);

struct rdp_fabric_stats {
	unsigned long files_read; /* value files read and parsed */
	unsigned long read_errors; /* files (or port dirs) that could not be read or parsed */
	unsigned long files_ignored; /* past RDP_FABRIC_MAX_FILES in a directory */
	uint64_t usec; /* wall time of the collection */
	/* the first RDP_FABRIC_ERRORS_KEPT read errors: "mlx5_0/1: counters/symbol_error: ..." */
	char errors[RDP_FABRIC_ERRORS_KEPT][160];
	size_t n_errors; /* entries of errors[] used */
};

/*
 * Reads every target port now and appends the fabric families to out (which may already hold
 * text; no family here repeats a name given to out before: -EEXIST then). st (may be NULL) is
 * filled. Returns 0 (read errors are only counted), -ENOENT/... when the sysfs root cannot be
 * opened, -ENOMEM, or out's error (-E2BIG...).
 */
int rdp_fabric_collect(const struct rdp_fabric_targets *t, struct rdp_mtext *out,
		       struct rdp_fabric_stats *st);
