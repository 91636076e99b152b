/* SPDX-License-Identifier: MIT */
/*
 * CDI (Container Device Interface) spec files for `serve --use-cdi`: the names, the JSON and
 * the files in the spec directory (/var/run/cdi).
 *
 * Kind: vendor "rdma-dp.io", one class per resource (rdp_cdi_class()). One file per resource,
 * "<dir>/rdma-dp.io-<class>.json" (JSON is YAML, and the CDI library reads *.json). The files
 * of this daemon are exactly the "rdma-dp.io-*.json" files of the directory; nothing else there
 * is ever touched (rdp_cdi_cleanup_at()).
 *
 * Names follow the rules of the CDI library v0.5.x (the oldest that runtimes in use vendor:
 * containerd 1.7.0-1.7.11, CRI-O 1.27, podman 4.x), which are stricter than later ones:
 *   - vendor: a letter first, [A-Za-z0-9_.-] between, a letter or digit last;
 *   - class: a letter first, [A-Za-z0-9_-] between (no '.': v0.5 rejects it), a letter or digit
 *     last, and at least 2 characters (v0.5.2 indexes name[1:len-1] and panics on a 1-character
 *     vendor or class, which would take the runtime's whole spec refresh down);
 *   - device name: a letter or digit first and last, [A-Za-z0-9_.:-] between ("0000:18:00.0",
 *     "0000:03:00.0-sf2", "rxe0").
 * The spec is cdiVersion "0.5.0" (deviceNodes[].hostPath and device names starting with a digit
 * need it; newer versions are rejected by the runtimes above). No annotations, no
 * additionalGids (0.6.0 / 0.7.0).
 *
 * A spec with no device is not written: the CDI library v0.5.2 accepts one but later releases
 * reject "no devices", and a spec without devices names nothing a container could ask for.
 * rdp_cdi_render() gives NULL for it and rdp_cdi_write_at() with NULL removes the file.
 *
 * Library code: negative errno, no logging. Every input is bounded; one that breaks a rule is
 * -EINVAL, never a crash.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where the container runtimes read CDI specs from by default. */
#define RDP_DEFAULT_CDI_SPEC_DIR "/var/run/cdi"

#define RDP_CDI_VENDOR "rdma-dp.io"
#define RDP_CDI_VERSION "0.5.0"
#define RDP_CDI_DEFAULT_PREFIX "rdma" /* resources of this prefix keep their name as class */
#define RDP_CDI_DEFAULT_DIR "/var/run/cdi"

#define RDP_CDI_CLASS_MAX 256        /* bytes of a class, with the NUL */
#define RDP_CDI_DEVICE_NAME_MAX 256  /* bytes of a device name, with the NUL */
#define RDP_CDI_PATH_MAX 4096        /* bytes of a node path or host path, with the NUL */
#define RDP_CDI_MAX_DEVICES 8192     /* devices of a spec (RDP_MAX_DEVICES) */
#define RDP_CDI_MAX_NODES 1024       /* nodes of one device, or top-level nodes */
#define RDP_CDI_MAX_ENV 256          /* top-level env entries */
#define RDP_CDI_ENV_MAX (1024 * 1024) /* bytes of one "K=V" entry, without the NUL */
/* "rdma-dp.io-" + class + ".json" + NUL */
#define RDP_CDI_FILE_NAME_MAX (sizeof(RDP_CDI_VENDOR) + RDP_CDI_CLASS_MAX + 6)
/* "rdma-dp.io/" + class + "=" + device + NUL */
#define RDP_CDI_QUALIFIED_MAX (sizeof(RDP_CDI_VENDOR) + RDP_CDI_CLASS_MAX + RDP_CDI_DEVICE_NAME_MAX)

bool rdp_cdi_valid_vendor(const char *s);
bool rdp_cdi_valid_class(const char *s);
bool rdp_cdi_valid_device_name(const char *s);

/*
 * The class of resource prefix/name: name itself when prefix is "rdma"
 * ("rdma/hca_shared_devices_a" -> "hca_shared_devices_a"), else the prefix with every '.'
 * turned into '_', "__", and the name ("example.com/x" -> "example_com__x"). -EINVAL when the
 * result is not a valid class (a name with '.', a digit first, '_' or '-' last, too long...),
 * -ENOBUFS when buf is too small (RDP_CDI_CLASS_MAX always does).
 */
int rdp_cdi_class(const char *prefix, const char *name, char *buf, size_t size);

/*
 * The classes of n resources (prefixes[i]/names[i], config order): ret[i] gets the class, or
 * "" with why[i] saying why the resource gets no spec (its name gives no valid class, or an
 * earlier resource has the same class); why[i] is NULL otherwise. The daemon and check-config
 * both decide by it. Pure; returns how many resources got a class.
 */
#define RDP_CDI_NO_VALID_CLASS                                                                    \
	"its name gives no valid CDI class (a letter first, letters, digits, '_' or '-' "         \
	"between, a letter or digit last, at least 2 characters)"
#define RDP_CDI_CLASS_TAKEN "an earlier resource of the config has the same CDI class"
size_t rdp_cdi_classes(const char *const *prefixes, const char *const *names, size_t n,
		       char (*ret)[RDP_CDI_CLASS_MAX], const char **why);

/* "rdma-dp.io-<class>.json". -EINVAL for an invalid class, -ENOBUFS when buf is too small. */
int rdp_cdi_file_name(const char *class, char *buf, size_t size);

/* "rdma-dp.io/<class>=<device>", what Allocate's cdi_devices name. -EINVAL, -ENOBUFS. */
int rdp_cdi_qualified_name(const char *class, const char *device, char *buf, size_t size);

/* A device node: path in the container, and the host's node (NULL: the same path). */
struct rdp_cdi_node {
	const char *path;      /* absolute */
	const char *host_path; /* absolute, or NULL */
};

struct rdp_cdi_device {
	const char *name; /* rdp_cdi_valid_device_name(): the unit ID */
	const struct rdp_cdi_node *nodes; /* nodes or env: the CDI library rejects empty edits */
	size_t n_nodes;
	/*
	 * A memlock hook of the device's own (the DRA driver's per-request memlock): with
	 * own_memlock, the spec's hook_path and memlock not 0, the device's containerEdits.hooks
	 * gets the hook that sets memlock (the spec's own memlock is then usually 0).
	 */
	bool own_memlock;
	uint64_t memlock;
	const char *const *env; /* the device's containerEdits.env, "K=V" as the top-level one */
	size_t n_env;
};

/* One resource's spec. The renderer borrows everything; nothing is copied or freed. */
struct rdp_cdi_spec {
	const char *class;
	const struct rdp_cdi_device *devices; /* unique names, in the order to write them */
	size_t n_devices;
	const struct rdp_cdi_node *nodes; /* top-level containerEdits.deviceNodes (rdma_cm) */
	size_t n_nodes;
	const char *const *env; /* top-level containerEdits.env, "K=V", K [A-Za-z_][A-Za-z0-9_]* */
	size_t n_env;
	/*
	 * The memlock hook (oci-hook.h): with hook_path (absolute, on the host) and memlock not
	 * 0 (RDP_MEMLOCK_LEAVE), top-level containerEdits.hooks gets one createRuntime hook
	 * {hookName, path, args} that sets the container's RLIMIT_MEMLOCK to memlock.
	 */
	const char *hook_path;
	uint64_t memlock;
};

/*
 * The spec file's bytes: cdiVersion, kind, devices (each with containerEdits {env, deviceNodes
 * of {path, hostPath, permissions "rw"}}, each left out when empty), then the top-level containerEdits {env, deviceNodes,
 * hooks} (left out when all are empty, each left out when empty); keys in that order, indent 2,
 * UTF-8 as is, a trailing newline. The same spec always gives the same bytes.
 * Returns 0 with *ret_json (rdp_free() it), or 0 with *ret_json = NULL when the spec has no
 * device (no file: see above). -EINVAL when a rule is broken (a name, a path not absolute or
 * too long, a device without nodes and env, two devices of one name, an env entry without "K=" or
 * not UTF-8, a bound exceeded), -ENOMEM.
 */
int rdp_cdi_render(const struct rdp_cdi_spec *s, char **ret_json);

/*
 * Opens the spec directory for the *_at() calls below (O_RDONLY|O_DIRECTORY|O_CLOEXEC: it is
 * fsync'd), creating it (0755, not its parents) when create is set. Returns the fd or -errno.
 */
int rdp_cdi_open_dir(const char *path, bool create);

/*
 * Makes <dirfd>/rdma-dp.io-<class>.json hold exactly json (from rdp_cdi_render()), mode 0644:
 * a temporary file ".rdma-dp.io-<class>.XXXXXX.tmp" in the same directory (never read by CDI,
 * which only reads *.json and *.yaml), write all, fsync, fchmod 0644, renameat over the file,
 * fsync the directory. A reader sees the old file or the new one, never a part.
 * json NULL (a spec without devices) removes the file instead (rdp_cdi_remove_at()).
 * Returns 0 when the file was written (or removed), 1 when it already held exactly these bytes
 * with mode 0644 (or was already absent): nothing was done; negative errno on failure, with
 * the temporary file removed and the old file, if any, unchanged.
 */
int rdp_cdi_write_at(int dirfd, const char *class, const char *json);

/* Removes <dirfd>/rdma-dp.io-<class>.json and fsyncs the directory: 0; 1 when absent. */
int rdp_cdi_remove_at(int dirfd, const char *class);

/*
 * The class prefix of the DRA driver's per-claim specs ("claim_<uid>", dra-cdi.h): files
 * "rdma-dp.io-claim_*" belong to `rdma-dp dra` and rdp_cdi_cleanup_at() never touches them.
 */
#define RDP_CDI_CLAIM_CLASS_PREFIX "claim_"

/*
 * Removes every "rdma-dp.io-*.json" of the directory (not a directory itself) whose class is
 * not among keep[0..n_keep) and every leftover temporary file of ours
 * (".rdma-dp.io-*.tmp"), calling removed(name, ud) for each (name: the file name in the
 * directory; removed may be NULL). Nothing else is touched; in particular not the DRA
 * driver's per-claim specs "rdma-dp.io-claim_*.json" and their temporary files. Returns how many were removed;
 * when a removal fails it goes on with the others and returns the first negative errno.
 */
int rdp_cdi_cleanup_at(int dirfd, const char *const *keep, size_t n_keep,
		       void (*removed)(const char *name, void *ud), void *ud);
