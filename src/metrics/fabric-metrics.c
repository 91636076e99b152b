/* SPDX-License-Identifier: MIT */
/* Fabric metrics: port counters read from sysfs at scrape time. See fabric-metrics.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "fabric-metrics.h"
#include "macro.h"
#include "sysfs.h"

/* ---- the name map ---- */

enum src {
	SRC_COUNTERS, /* ports/<p>/counters (IBA PortCounters / PortCountersExtended, PMA MADs) */
	SRC_EXT, /* ports/<p>/counters_ext (kernels before 4.5) */
	SRC_HW, /* ports/<p>/hw_counters (driver counters: mlx5 Q/CC counters...) */
	N_SRC,
};

static const char *const src_dir[N_SRC] = {"counters", "counters_ext", "hw_counters"};

enum kind {
	K_COUNTER, /* the value as read */
	K_DATA, /* octets / 4: x4 into bytes */
	K_LIFESPAN, /* ms -> seconds, a gauge */
};

struct known {
	unsigned char src;
	unsigned char kind;
	unsigned char width; /* bits of a saturating PMA counter; 0: 64-bit or unknown */
	const char *file;
	const char *metric;
	const char *help;
};

/*
 * file -> metric. counters/ and counters_ext/ names: procfs sysfs/class_infiniband.go (file ->
 * field) and node_exporter collector/infiniband_linux.go (field -> node_infiniband_<x>).
 * Widths: the kernel's PORT_PMA_ATTR (drivers/infiniband/core/sysfs.c); data and packet
 * counters are 32 or 64 bits depending on the HCA (EXT_WIDTH), so no width here.
 * The emission order is this table's.
 */
/* clang-format off */
#define C(file, w, metric, help) { SRC_COUNTERS, K_COUNTER, w, file, "rdma_dp_" metric, help }
#define D(src, file, metric, help) { src, K_DATA, 0, file, "rdma_dp_" metric, help }
#define E(file, metric, help) { SRC_EXT, K_COUNTER, 0, file, "rdma_dp_" metric, help }
#define H(file, metric, help) { SRC_HW, K_COUNTER, 0, file, "rdma_dp_" metric, help }
/* clang-format on */
static const struct known known[] = {
	D(SRC_COUNTERS, "port_xmit_data", "port_data_transmitted_bytes_total",
	  "Bytes sent on the port (counters/port_xmit_data x 4)."),
	D(SRC_COUNTERS, "port_rcv_data", "port_data_received_bytes_total",
	  "Bytes received on the port (counters/port_rcv_data x 4)."),
	C("port_xmit_packets", 0, "port_packets_transmitted_total",
	  "Packets sent on all virtual lanes of the port, errors included."),
	C("port_rcv_packets", 0, "port_packets_received_total",
	  "Packets received on all virtual lanes of the port, errors included."),
	C("unicast_xmit_packets", 0, "unicast_packets_transmitted_total",
	  "Unicast packets sent, errors included."),
	C("unicast_rcv_packets", 0, "unicast_packets_received_total",
	  "Unicast packets received, errors included."),
	C("multicast_xmit_packets", 0, "multicast_packets_transmitted_total",
	  "Multicast packets sent, errors included."),
	C("multicast_rcv_packets", 0, "multicast_packets_received_total",
	  "Multicast packets received, errors included."),
	C("port_xmit_wait", 32, "port_transmit_wait_total",
	  "Ticks with data to send but no credit to send it (congestion); "
	  "32-bit, saturates at 2^32-1."),
	C("symbol_error", 16, "symbol_error_total",
	  "Minor link errors on a physical lane; 16-bit, saturates at 2^16-1."),
	C("link_error_recovery", 8, "link_error_recovery_total",
	  "Successful link error recoveries; 8-bit, saturates at 2^8-1."),
	C("link_downed", 8, "link_downed_total",
	  "Failed link error recoveries that took the link down; 8-bit, saturates at 2^8-1."),
	C("port_rcv_errors", 16, "port_errors_received_total",
	  "Received packets with an error; 16-bit, saturates at 2^16-1."),
	C("port_rcv_remote_physical_errors", 16, "port_receive_remote_physical_errors_total",
	  "Received packets marked bad (EBP) upstream; 16-bit, saturates at 2^16-1."),
	C("port_rcv_switch_relay_errors", 16, "port_receive_switch_relay_errors_total",
	  "Received packets a switch could not forward; 16-bit, saturates at 2^16-1."),
	C("port_xmit_discards", 16, "port_discards_transmitted_total",
	  "Outbound packets dropped (port down or congested); 16-bit, saturates at 2^16-1."),
	C("port_rcv_discards", 0, "port_discards_received_total",
	  "Inbound packets dropped (port down or congested)."),
	C("port_xmit_constraint_errors", 8, "port_constraint_errors_transmitted_total",
	  "Outbound packets dropped by partition/filter checks; 8-bit, saturates at 2^8-1."),
	C("port_rcv_constraint_errors", 8, "port_constraint_errors_received_total",
	  "Inbound packets dropped by partition/filter checks; 8-bit, saturates at 2^8-1."),
	C("local_link_integrity_errors", 4, "local_link_integrity_errors_total",
	  "Times local physical errors passed their threshold; 4-bit, saturates at 2^4-1."),
	C("excessive_buffer_overrun_errors", 4, "excessive_buffer_overrun_errors_total",
	  "Runs of flow control periods with buffer overruns; 4-bit, saturates at 2^4-1."),
	C("VL15_dropped", 16, "vl15_dropped_total",
	  "Incoming VL15 (subnet management) packets dropped; 16-bit, saturates at 2^16-1."),

	D(SRC_EXT, "port_xmit_data_64", "legacy_data_transmitted_bytes_total",
	  "Bytes sent (counters_ext/port_xmit_data_64 x 4, kernels before 4.5)."),
	D(SRC_EXT, "port_rcv_data_64", "legacy_data_received_bytes_total",
	  "Bytes received (counters_ext/port_rcv_data_64 x 4, kernels before 4.5)."),
	E("port_xmit_packets_64", "legacy_packets_transmitted_total",
	  "Packets sent (counters_ext, kernels before 4.5)."),
	E("port_rcv_packets_64", "legacy_packets_received_total",
	  "Packets received (counters_ext, kernels before 4.5)."),
	E("port_unicast_xmit_packets", "legacy_unicast_packets_transmitted_total",
	  "Unicast packets sent (counters_ext, kernels before 4.5)."),
	E("port_unicast_rcv_packets", "legacy_unicast_packets_received_total",
	  "Unicast packets received (counters_ext, kernels before 4.5)."),
	E("port_multicast_xmit_packets", "legacy_multicast_packets_transmitted_total",
	  "Multicast packets sent (counters_ext, kernels before 4.5)."),
	E("port_multicast_rcv_packets", "legacy_multicast_packets_received_total",
	  "Multicast packets received (counters_ext, kernels before 4.5)."),

	H("rx_write_requests", "rx_write_requests_total", "RDMA WRITE requests received."),
	H("rx_read_requests", "rx_read_requests_total", "RDMA READ requests received."),
	H("rx_atomic_requests", "rx_atomic_requests_total", "Atomic requests received."),
	H("rx_dct_connect", "rx_dct_connect_requests_total",
	  "Connection requests received by DC targets."),
	H("out_of_buffer", "out_of_buffer_drops_total",
	  "Packets dropped because no receive WQE was posted."),
	H("out_of_sequence", "out_of_sequence_packets_received_total",
	  "Out-of-sequence packets received (loss upstream)."),
	H("duplicate_request", "duplicate_requests_packets_total",
	  "Duplicate requests received (already executed)."),
	H("rnr_nak_retry_err", "rnr_nak_retry_packets_received_total",
	  "RNR NAKs received, retry limit not yet exceeded."),
	H("packet_seq_err", "packet_sequence_errors_total",
	  "NAK sequence errors received, retry limit not yet exceeded."),
	H("implied_nak_seq_err", "implied_nak_seq_errors_total",
	  "Implied NAK sequence errors (an ACK with a PSN beyond the expected one)."),
	H("local_ack_timeout_err", "local_ack_timeout_errors_total",
	  "ACK timer expiries on the sender, retries not yet exhausted."),
	H("req_cqe_error", "req_cqes_errors_total", "Requester completions with an error."),
	H("resp_cqe_error", "resp_cqes_errors_total", "Responder completions with an error."),
	H("req_cqe_flush_error", "req_cqes_flush_errors_total",
	  "Requester completions flushed with an error."),
	H("resp_cqe_flush_error", "resp_cqes_flush_errors_total",
	  "Responder completions flushed with an error."),
	H("resp_local_length_error", "resp_local_length_errors_total",
	  "Responder local length errors."),
	H("req_remote_invalid_request", "req_remote_invalid_request_errors_total",
	  "Requester remote invalid request errors."),
	H("req_remote_access_errors", "req_remote_access_errors_total",
	  "Requester remote access errors."),
	H("resp_remote_access_errors", "resp_remote_access_errors_total",
	  "Responder remote access errors."),
	H("req_transport_retries_exceeded", "req_transport_retries_exceeded_errors_total",
	  "Requester transport retries exceeded (the QP went to error; NCCL status 12)."),
	H("req_rnr_retries_exceeded", "req_rnr_retries_exceeded_errors_total",
	  "Requester RNR NAK retries exceeded (the QP went to error)."),
	H("roce_adp_retrans", "roce_adp_retransmits_total", "RoCE adaptive retransmissions."),
	H("roce_adp_retrans_to", "roce_adp_retransmits_timeout_total",
	  "RoCE adaptive retransmission timeouts."),
	H("roce_slow_restart", "roce_slow_restart_used_total", "Times RoCE slow restart was used."),
	H("roce_slow_restart_cnps", "roce_slow_restart_cnps_total",
	  "CNPs generated by RoCE slow restart."),
	H("roce_slow_restart_trans", "roce_slow_restart_total",
	  "Transitions into the RoCE slow restart state."),
	H("rp_cnp_ignored", "rp_cnp_ignored_packets_received_total",
	  "CNPs received and ignored by the reaction point (check ECN/congestion control)."),
	H("rp_cnp_handled", "rp_cnp_packets_handled_total",
	  "CNPs handled by the reaction point (it slowed down)."),
	H("np_ecn_marked_roce_packets", "np_ecn_marked_roce_packets_received_total",
	  "ECN-marked (congestion experienced) RoCEv2 packets received."),
	H("np_cnp_sent", "np_cnp_packets_sent_total", "CNPs sent by the notification point."),
	H("rx_icrc_encapsulated", "rx_icrc_encapsulated_errors_total",
	  "RoCE packets received with an ICRC error."),
	{SRC_HW, K_LIFESPAN, 0, "lifespan", "rdma_dp_lifespan_seconds",
	 "How long hw_counters values are cached before the device is asked again."},
};
#undef C
#undef D
#undef E
#undef H
#define N_KNOWN ARRAY_SIZE(known)

/* ---- targets ---- */

struct rdp_fabric_targets *rdp_fabric_targets_free(struct rdp_fabric_targets *t)
{
	if (!t)
		return NULL;
	rdp_free(t->sysfs_root);
	rdp_free(t->devices);
	rdp_free(t->ports);
	rdp_free(t);
	return NULL;
}

static const char *link_layer_label(enum rdp_link_layer l)
{
	return l == RDP_LINK_INFINIBAND ? "InfiniBand" : l == RDP_LINK_ETHER ? "Ethernet" : "";
}

struct rdp_fabric_targets *rdp_fabric_targets_ref(struct rdp_fabric_targets *t)
{
	if (t)
		t->refs++;
	return t;
}

struct rdp_fabric_targets *rdp_fabric_targets_unref(struct rdp_fabric_targets *t)
{
	if (t && --t->refs == 0)
		rdp_fabric_targets_free(t);
	return NULL;
}

int rdp_fabric_targets_keep(struct rdp_fabric_targets *t, const char *const *names, size_t n,
			    const char **missing)
{
	size_t nd = 0, np = 0;
	size_t *map;

	for (size_t j = 0; j < n; j++) {
		size_t i;

		for (i = 0; i < t->n_devices && strcmp(t->devices[i].name, names[j]) != 0; i++)
			;
		if (i == t->n_devices) {
			if (missing)
				*missing = names[j];
			return -ENOENT;
		}
	}
	map = rdp_calloc(t->n_devices ? t->n_devices : 1, sizeof(*map));
	if (!map)
		return -ENOMEM;
	for (size_t i = 0; i < t->n_devices; i++) {
		bool keep = false;

		for (size_t j = 0; j < n && !keep; j++)
			keep = strcmp(t->devices[i].name, names[j]) == 0;
		map[i] = keep ? nd : SIZE_MAX;
		if (keep)
			t->devices[nd++] = t->devices[i];
	}
	for (size_t i = 0; i < t->n_ports; i++) {
		if (map[t->ports[i].device] == SIZE_MAX)
			continue;
		t->ports[np] = t->ports[i];
		t->ports[np++].device = map[t->ports[i].device];
	}
	t->n_devices = nd;
	t->n_ports = np;
	rdp_free(map);
	return 0;
}

int rdp_fabric_targets_from_host(const struct rdp_host *h, const char *sysfs_root,
				 struct rdp_fabric_targets **ret)
{
	struct rdp_fabric_targets *t;
	size_t n_ports = 0, k = 0;

	for (size_t i = 0; i < h->n_devices; i++)
		n_ports += h->devices[i].n_ports;
	t = rdp_calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->refs = 1;
	t->sysfs_root = rdp_strdup(sysfs_root);
	t->devices = rdp_calloc(h->n_devices ? h->n_devices : 1, sizeof(*t->devices));
	t->ports = rdp_calloc(n_ports ? n_ports : 1, sizeof(*t->ports));
	if (!t->sysfs_root || !t->devices || !t->ports) {
		rdp_fabric_targets_free(t);
		return -ENOMEM;
	}
	t->n_devices = h->n_devices;
	t->n_ports = n_ports;
	for (size_t i = 0; i < h->n_devices; i++) {
		const struct rdp_device *d = &h->devices[i];
		struct rdp_fabric_device *fd = &t->devices[i];

		snprintf(fd->name, sizeof(fd->name), "%s", d->name);
		snprintf(fd->fw_ver, sizeof(fd->fw_ver), "%s", d->fw_ver);
		snprintf(fd->hca_type, sizeof(fd->hca_type), "%s", d->hca_type);
		for (size_t j = 0; j < d->n_ports; j++) {
			struct rdp_fabric_port *p = &t->ports[k++];

			p->device = i;
			p->num = d->ports[j].num;
			snprintf(p->num_str, sizeof(p->num_str), "%u", p->num);
			snprintf(p->link_layer, sizeof(p->link_layer), "%s",
				 link_layer_label(d->ports[j].link_layer));
			if (d->n_ports == 1 && d->n_netdevs > 0)
				snprintf(p->netdev, sizeof(p->netdev), "%s", d->netdevs[0]);
			snprintf(p->pci_address, sizeof(p->pci_address), "%s", d->pci_address);
			snprintf(p->numa_node, sizeof(p->numa_node), "%d",
				 d->numa_node >= 0 ? d->numa_node : -1);
		}
	}
	*ret = t;
	return 0;
}

/* ---- collection ---- */

struct port_vals {
	int state, phys; /* -1: unread */
	bool have_rate;
	uint64_t rate; /* bytes/s */
};

struct unknown {
	size_t port;
	unsigned char src;
	uint64_t v;
	char name[NAME_MAX + 1];
};

struct collect {
	const struct rdp_fabric_targets *t;
	struct rdp_fabric_stats *st;
	struct port_vals *pv; /* n_ports */
	uint64_t *vals; /* n_ports * N_KNOWN */
	unsigned char *have; /* n_ports * N_KNOWN */
	struct unknown *unk;
	size_t n_unk, cap_unk;
	char (*board_id)[RDP_FABRIC_VALUE_MAX + 1]; /* n_devices */
};

_printf_(3, 4) static void note_error(struct collect *c, size_t port, const char *fmt, ...)
{
	struct rdp_fabric_stats *st = c->st;
	const struct rdp_fabric_port *p = &c->t->ports[port];
	va_list ap;
	int n;

	st->read_errors++;
	if (st->n_errors >= RDP_FABRIC_ERRORS_KEPT)
		return;
	n = snprintf(st->errors[st->n_errors], sizeof(st->errors[0]),
		     "%s/%s: ", c->t->devices[p->device].name, p->num_str);
	if (n < 0 || (size_t)n >= sizeof(st->errors[0]))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(st->errors[st->n_errors] + n, sizeof(st->errors[0]) - (size_t)n, fmt, ap);
	va_end(ap);
	st->n_errors++;
}

/*
 * Reads the value file name of dirfd into buf (RDP_FABRIC_VALUE_MAX + 1 bytes), without its
 * trailing newline. Its length, or -errno, -EFBIG when longer than RDP_FABRIC_VALUE_MAX.
 */
static int read_value(int dirfd, const char *name, char *buf)
{
	_cleanup_close_ int fd = -1;
	ssize_t n;

	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, RDP_FABRIC_VALUE_MAX + 1);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n > RDP_FABRIC_VALUE_MAX)
		return -EFBIG;
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return (int)n;
}

static int find_known(unsigned char src, const char *name)
{
	for (size_t k = 0; k < N_KNOWN; k++)
		if (known[k].src == src && strcmp(known[k].file, name) == 0)
			return (int)k;
	return -1;
}

static int add_unknown(struct collect *c, size_t port, unsigned char src, const char *name,
		       uint64_t v)
{
	struct unknown *u;

	if (c->n_unk == c->cap_unk) {
		size_t cap = c->cap_unk ? c->cap_unk * 2 : 16;
		struct unknown *nu = rdp_reallocarray(c->unk, cap, sizeof(*nu));

		if (!nu)
			return -ENOMEM;
		c->unk = nu;
		c->cap_unk = cap;
	}
	u = &c->unk[c->n_unk++];
	u->port = port;
	u->src = src;
	u->v = v;
	snprintf(u->name, sizeof(u->name), "%s", name);
	return 0;
}

static const char *value_error(int r)
{
	return r == -EINVAL ? "not a decimal number" : r == -ERANGE ? "out of range" : strerror(-r);
}

/* Reads every regular file of port directory src. 0, or -ENOMEM. */
static int read_dir(struct collect *c, size_t port, int portfd, unsigned char src)
{
	char dents[8192] __attribute__((aligned(8)));
	char val[RDP_FABRIC_VALUE_MAX + 1];
	_cleanup_close_ int fd = -1;
	size_t files = 0;

	fd = openat(portfd, src_dir[src], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			note_error(c, port, "%s: %s", src_dir[src], strerror(errno));
		return 0;
	}
	for (;;) {
		ssize_t n = getdents64(fd, dents, sizeof(dents));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			note_error(c, port, "%s: %s", src_dir[src], strerror(errno));
			return 0;
		}
		if (n == 0)
			return 0;
		for (ssize_t off = 0; off < n;) {
			const struct dirent64 *de = (const struct dirent64 *)(dents + off);
			const char *name = de->d_name;
			uint64_t v;
			int k, r;

			off += de->d_reclen;
			if (name[0] == '.' &&
			    (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
				continue;
			if (de->d_type != DT_REG && de->d_type != DT_UNKNOWN)
				continue;
			if (++files > RDP_FABRIC_MAX_FILES) {
				c->st->files_ignored++;
				continue;
			}
			r = read_value(fd, name, val);
			if (r >= 0)
				r = rdp_parse_counter(val, &v);
			if (r < 0) {
				note_error(c, port, "%s/%s: %s", src_dir[src], name,
					   value_error(r));
				continue;
			}
			c->st->files_read++;
			k = find_known(src, name);
			if (k >= 0) {
				c->vals[port * N_KNOWN + (size_t)k] = v;
				c->have[port * N_KNOWN + (size_t)k] = 1;
			} else if (add_unknown(c, port, src, name, v) < 0) {
				return -ENOMEM;
			}
		}
	}
}

static void read_port(struct collect *c, size_t i, int portfd)
{
	struct port_vals *pv = &c->pv[i];
	char val[RDP_FABRIC_VALUE_MAX + 1], name[32];
	struct rdp_rate rate;
	int r;

	r = read_value(portfd, "state", val);
	if (r >= 0)
		r = rdp_parse_state(val, &pv->state, name, sizeof(name));
	if (r < 0)
		note_error(c, i, "state: %s", strerror(-r));
	else
		c->st->files_read++;
	r = read_value(portfd, "phys_state", val);
	if (r >= 0)
		r = rdp_parse_state(val, &pv->phys, name, sizeof(name));
	if (r < 0)
		note_error(c, i, "phys_state: %s", strerror(-r));
	else
		c->st->files_read++;
	r = read_value(portfd, "rate", val);
	if (r >= 0)
		r = rdp_parse_rate(val, &rate);
	if (r < 0) {
		note_error(c, i, "rate: %s", strerror(-r));
	} else {
		c->st->files_read++;
		pv->have_rate = true;
		pv->rate = (uint64_t)rate.mbps * 125000;
	}
}

static int read_all(struct collect *c, int root)
{
	const struct rdp_fabric_targets *t = c->t;
	char path[RDP_SYSFS_PATH_MAX];
	size_t i = 0;
	int r;

	for (size_t d = 0; d < t->n_devices; d++) {
		_cleanup_close_ int devfd = -1;
		char val[RDP_FABRIC_VALUE_MAX + 1];

		snprintf(path, sizeof(path), "class/infiniband/%s", t->devices[d].name);
		devfd = rdp_sysfs_open(root, path, O_RDONLY | O_DIRECTORY);
		if (devfd >= 0 && read_value(devfd, "board_id", val) >= 0)
			snprintf(c->board_id[d], sizeof(c->board_id[d]), "%s", val);
		for (; i < t->n_ports && t->ports[i].device == d; i++) {
			_cleanup_close_ int portfd = -1;

			if (devfd < 0) {
				note_error(c, i, "%s", strerror(-devfd));
				continue;
			}
			snprintf(path, sizeof(path), "ports/%u", t->ports[i].num);
			portfd = openat(devfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (portfd < 0) {
				note_error(c, i, "%s", strerror(errno));
				continue;
			}
			read_port(c, i, portfd);
			for (unsigned char s = 0; s < N_SRC; s++) {
				r = read_dir(c, i, portfd, s);
				if (r < 0)
					return r;
			}
		}
	}
	return 0;
}

static int cmp_unknown(const void *a, const void *b)
{
	const struct unknown *x = a, *y = b;

	if (x->src != y->src)
		return x->src < y->src ? -1 : 1;
	if (x->port != y->port)
		return x->port < y->port ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* ---- emission ---- */

#define PORT_LABELS(c, i)                                                                          \
	{                                                                                          \
		"device", (c)->t->devices[(c)->t->ports[i].device].name, "port",                   \
			(c)->t->ports[i].num_str, NULL                                             \
	}

static int emit_unknown(struct collect *c, struct rdp_mtext *out, unsigned char src,
			const char *family, const char *help)
{
	char label[NAME_MAX + 16];
	int r = rdp_mtext_family(out, family, "counter", help);

	for (size_t u = 0; u < c->n_unk && r == 0; u++) {
		const struct unknown *x = &c->unk[u];

		if (x->src != src && !(src == SRC_COUNTERS && x->src == SRC_EXT))
			continue;
		snprintf(label, sizeof(label), "%s%s", x->src == SRC_EXT ? "counters_ext/" : "",
			 x->name);
		const char *l[] = {"device",  c->t->devices[c->t->ports[x->port].device].name,
				   "port",    c->t->ports[x->port].num_str,
				   "counter", label,
				   NULL};
		r = rdp_mtext_sample_u64(out, NULL, l, x->v);
	}
	return r;
}

static int emit_known(struct collect *c, struct rdp_mtext *out, size_t k)
{
	const struct known *e = &known[k];
	int r = rdp_mtext_family(out, e->metric, e->kind == K_LIFESPAN ? "gauge" : "counter",
				 e->help);

	for (size_t i = 0; i < c->t->n_ports && r == 0; i++) {
		const char *l[] = PORT_LABELS(c, i);
		uint64_t v = c->vals[i * N_KNOWN + k];

		if (!c->have[i * N_KNOWN + k])
			continue;
		if (e->kind == K_LIFESPAN)
			r = rdp_mtext_sample_double(out, NULL, l, (double)v / 1000.0);
		else if (e->kind == K_DATA && v > UINT64_MAX / 4)
			r = rdp_mtext_sample_double(out, NULL, l, (double)v * 4.0);
		else
			r = rdp_mtext_sample_u64(out, NULL, l, e->kind == K_DATA ? v * 4 : v);
	}
	return r;
}

static int emit(struct collect *c, struct rdp_mtext *out)
{
	const struct rdp_fabric_targets *t = c->t;
	int r;

	r = rdp_mtext_family(out, "rdma_dp_info", "gauge",
			     "RDMA device identity from sysfs; the value is always 1.");
	for (size_t d = 0; d < t->n_devices && r == 0; d++) {
		const char *l[] = {"device",	   t->devices[d].name,	   "board_id",
				   c->board_id[d], "firmware_version",	   t->devices[d].fw_ver,
				   "hca_type",	   t->devices[d].hca_type, NULL};
		r = rdp_mtext_sample_u64(out, NULL, l, 1);
	}
	r = r
		    ?: rdp_mtext_family(
			       out, "rdma_dp_port_info", "gauge",
			       "Port facts for joins (netdev, PCI address, NUMA node); always 1.");
	for (size_t i = 0; i < t->n_ports && r == 0; i++) {
		const struct rdp_fabric_port *p = &t->ports[i];
		const char *l[] = {"device",	  t->devices[p->device].name,
				   "port",	  p->num_str,
				   "link_layer",  p->link_layer,
				   "netdev",	  p->netdev,
				   "pci_address", p->pci_address,
				   "numa_node",	  p->numa_node,
				   NULL};
		r = rdp_mtext_sample_u64(out, NULL, l, 1);
	}
	r = r
		    ?: rdp_mtext_family(out, "rdma_dp_state_id", "gauge",
					"Logical port state (1 down, 2 init, 3 armed, 4 active, "
					"5 active defer).");
	for (size_t i = 0; i < t->n_ports && r == 0; i++) {
		const char *l[] = PORT_LABELS(c, i);

		if (c->pv[i].state >= 0)
			r = rdp_mtext_sample_u64(out, NULL, l, (uint64_t)c->pv[i].state);
	}
	r = r
		    ?: rdp_mtext_family(out, "rdma_dp_physical_state_id", "gauge",
					"Physical port state (1 sleep, 2 polling, 3 disabled, "
					"4 training, 5 link up, 6 error recovery, 7 phy test).");
	for (size_t i = 0; i < t->n_ports && r == 0; i++) {
		const char *l[] = PORT_LABELS(c, i);

		if (c->pv[i].phys >= 0)
			r = rdp_mtext_sample_u64(out, NULL, l, (uint64_t)c->pv[i].phys);
	}
	r = r
		    ?: rdp_mtext_family(
			       out, "rdma_dp_rate_bytes_per_second", "gauge",
			       "Port signalling rate in bytes per second (Gb/s x 125000000).");
	for (size_t i = 0; i < t->n_ports && r == 0; i++) {
		const char *l[] = PORT_LABELS(c, i);

		if (c->pv[i].have_rate)
			r = rdp_mtext_sample_u64(out, NULL, l, c->pv[i].rate);
	}
	for (size_t k = 0; k < N_KNOWN && r == 0; k++) {
		if (known[k].src != SRC_HW)
			r = emit_known(c, out, k);
	}
	r = r
		    ?: emit_unknown(
			       c, out, SRC_COUNTERS, "rdma_dp_pma_total",
			       "A counters/ (or counters_ext/) file without a name of its own.");
	for (size_t k = 0; k < N_KNOWN && r == 0; k++) {
		if (known[k].src == SRC_HW)
			r = emit_known(c, out, k);
	}
	r = r
		    ?: emit_unknown(c, out, SRC_HW, "rdma_dp_hw_stat_total",
				    "A hw_counters/ file without a name of its own.");
	r = r
		    ?: rdp_mtext_family(
			       out, "rdma_dp_pma_saturated", "gauge",
			       "1 when a PMA counter of 4 to 32 bits reads 2^w-1: it stopped "
			       "counting until cleared (perfquery -R).");
	for (size_t k = 0; k < N_KNOWN && r == 0; k++) {
		if (!known[k].width)
			continue;
		for (size_t i = 0; i < t->n_ports && r == 0; i++) {
			const char *l[] = {"device",  t->devices[t->ports[i].device].name,
					   "port",    t->ports[i].num_str,
					   "counter", known[k].file,
					   NULL};
			uint64_t max = (UINT64_C(1) << known[k].width) - 1;

			if (c->have[i * N_KNOWN + k])
				r = rdp_mtext_sample_u64(out, NULL, l,
							 c->vals[i * N_KNOWN + k] >= max);
		}
	}
	return r;
}

static uint64_t now_usec(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

int rdp_fabric_collect(const struct rdp_fabric_targets *t, struct rdp_mtext *out,
		       struct rdp_fabric_stats *st)
{
	struct rdp_fabric_stats dummy;
	struct collect c = {.t = t};
	_cleanup_close_ int root = -1;
	uint64_t start = now_usec();
	size_t np = t->n_ports ? t->n_ports : 1;
	int r;

	if (!st)
		st = &dummy;
	memset(st, 0, sizeof(*st));
	c.st = st;
	r = rdp_sysfs_open_root(t->sysfs_root, &root);
	if (r < 0)
		return r;
	c.pv = rdp_calloc(np, sizeof(*c.pv));
	c.vals = rdp_calloc(np * N_KNOWN, sizeof(*c.vals));
	c.have = rdp_calloc(np * N_KNOWN, sizeof(*c.have));
	c.board_id = rdp_calloc(t->n_devices ? t->n_devices : 1, sizeof(*c.board_id));
	if (!c.pv || !c.vals || !c.have || !c.board_id) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < t->n_ports; i++)
		c.pv[i].state = c.pv[i].phys = -1;
	r = read_all(&c, root);
	if (r < 0)
		goto out;
	if (c.n_unk > 1)
		qsort(c.unk, c.n_unk, sizeof(*c.unk), cmp_unknown);
	r = emit(&c, out);
out:
	rdp_free(c.pv);
	rdp_free(c.vals);
	rdp_free(c.have);
	rdp_free(c.board_id);
	rdp_free(c.unk);
	st->usec = now_usec() - start;
	return r;
}
