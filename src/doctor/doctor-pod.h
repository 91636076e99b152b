/* SPDX-License-Identifier: MIT */
/*
 * The pod group of `rdma-dp doctor` (rdp_doctor_pod() in doctor.h): the workload's side, read
 * from a process of the container under the proc root (ctx->pid, 0 = "self"):
 * /proc/<pid>/{limits,status,environ,mountinfo,net/dev} and, for a pid, its filesystem
 * through /proc/<pid>/root (sys/class/infiniband, dev/infiniband, dev/shm), so a debug
 * container sharing the target's process namespace sees what the target sees. For "self"
 * the sysfs and dev roots of the context are the container's.
 *
 * Which devices the container "sees": the entries of its /sys/class/infiniband whose
 * /dev/infiniband/uverbsN exists (libibverbs lists no other: NCCL never sees them). The
 * devices it was given: those named by rdma-dp's RDMA_DEVICE_<RESOURCE> variables, or, when
 * there are none (another plugin), those with a uverbs node.
 *
 * Here are also the pure parsers the checks use, for the unit tests and the fuzz target:
 * NCCL's list syntax (NCCL_IB_HCA, NCCL_SOCKET_IFNAME) and the procfs formats. All are
 * bounded and accept any bytes.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* NCCL's MAX_IB_DEVS: NCCL_IB_HCA keeps at most this many entries (parseStringList). */
#define RDP_NCCL_IB_MAX_ENTRIES 32
/* NCCL's MAX_IFS: NCCL_SOCKET_IFNAME keeps at most this many entries. */
#define RDP_NCCL_IF_MAX_ENTRIES 16
/* struct netIf's prefix[64]: a longer name overflows NCCL's buffer. */
#define RDP_NCCL_NAME_MAX 64

struct rdp_nccl_entry {
	char name[RDP_NCCL_NAME_MAX]; /* the prefix (exact name with '=') */
	int port; /* -1: any port (none given, or empty as in "=mlx5_0::0:0") */
	bool bad_name; /* longer than 63 bytes: NCCL overruns its buffer; cut here */
	bool bad_port; /* a port that is not a number >= 1: NCCL reads atoi(), no port matches */
};

struct rdp_nccl_list {
	bool exclude; /* leading '^' */
	bool exact; /* '=' after the optional '^' */
	struct rdp_nccl_entry v[RDP_NCCL_IB_MAX_ENTRIES];
	size_t n;
	size_t n_dropped; /* entries beyond max: NCCL ignores them */
};

/*
 * Parses a value the way NCCL does (init.cc + parseStringList): optional '^', then optional
 * '=', then entries name[:port[:rail[:plane]]] separated by ','; empty entries are skipped;
 * rail and plane are read past. At most max entries (<= RDP_NCCL_IB_MAX_ENTRIES) are kept,
 * the rest counted in n_dropped. s may be NULL (an empty list).
 */
void rdp_nccl_list_parse(const char *s, size_t max, struct rdp_nccl_list *ret);

/* Whether entry e of a list (exact: the list's '=') names device/interface name and port
 * (port -1: any, as NCCL's matchPort); without '=' a prefix match: "mlx5_1" names
 * "mlx5_10". */
bool rdp_nccl_entry_matches(const struct rdp_nccl_entry *e, bool exact, const char *name,
			    int port);

/* Whether NCCL selects (name, port) with the list: some entry matches, XOR '^'. An empty
 * list matches everything (NCCL's matchIfList): unset or "" selects all, "^" alone none. */
bool rdp_nccl_list_selects(const struct rdp_nccl_list *l, const char *name, int port);

/* RLIM_INFINITY as the parsers below return it. */
#define RDP_RLIM_UNLIMITED UINT64_MAX

/*
 * "Max locked memory" of /proc/<pid>/limits (buf[0..len), any bytes): the soft and hard
 * limits in bytes, RDP_RLIM_UNLIMITED for "unlimited". 0, -ENOENT (no such line), -EBADMSG.
 */
int rdp_proc_limits_memlock(const char *buf, size_t len, uint64_t *ret_soft,
			    uint64_t *ret_hard);

/* The "CapEff:" mask of /proc/<pid>/status. 0, -ENOENT, -EBADMSG. */
int rdp_proc_status_capeff(const char *buf, size_t len, uint64_t *ret);
#define RDP_CAP_IPC_LOCK 14

/* The mount of /proc/<pid>/mountinfo that holds a path. */
struct rdp_mount {
	char mount_point[256]; /* unescaped (\040 -> ' '); "" when none */
	char fstype[32];
	uint64_t size; /* tmpfs size= (bytes); 0: no size= option */
};

/*
 * The mount holding path (absolute, e.g. "/dev/shm"): the entry with the longest mount point
 * that is path or one of its parent directories; among equal mount points the last (the one
 * on top). 0, -ENOENT (no entry, not even "/"). Lines that do not parse are skipped.
 */
int rdp_mountinfo_find(const char *buf, size_t len, const char *path, struct rdp_mount *ret);

/*
 * The value of name in an environ block buf[0..len) ("K=V\0K=V\0..."; the last entry may
 * lack its NUL), written to val (NUL-terminated, cut to size). Like getenv: the first
 * entry. Returns the value's full length, or -ENOENT.
 */
int rdp_environ_get(const char *buf, size_t len, const char *name, char *val, size_t size);

/*
 * Calls cb (may be NULL) for each entry whose name starts with prefix ("RDMA_DEVICE_": the
 * device lists rdma-dp set), and returns how many there were.
 */
size_t rdp_environ_each_prefix(const char *buf, size_t len, const char *prefix,
			       void (*cb)(const char *name, size_t name_len, const char *value,
					  size_t value_len, void *userdata),
			       void *userdata);

/*
 * The interface names of /proc/<pid>/net/dev (two header lines, then "  name: counters"),
 * at most max, into names (each RDP_NCCL_NAME_MAX bytes; longer names cut). Returns the
 * number found (lines beyond max are counted too, not stored).
 */
size_t rdp_proc_net_dev_names(const char *buf, size_t len, char (*names)[RDP_NCCL_NAME_MAX],
			      size_t max);
