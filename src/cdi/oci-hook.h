/* SPDX-License-Identifier: MIT */
/*
 * The memlock OCI hook: what the CDI specs of rdma-dp put into containerEdits.hooks and what
 * `rdma-dp hook` reads back.
 *
 * Stage: createRuntime. runc (1.1.5, measured with podman 4.3.1 here) runs createRuntime (and
 * the deprecated prestart) hooks in the runtime's namespaces once the container's process
 * exists (the state's "pid" is runc's init, a host pid), before pivot_root and before it
 * execs the user's process; a limit set on that process survives the exec and the switch to
 * a non-root user. createContainer runs inside the container's pid namespace (the state's pid
 * is 1 there while /proc is still the host's); runc runs it before pivot_root, so the hook
 * works there too (tests/kernel/test_memlock.py), but the runtime spec promises the runtime's
 * namespace to createRuntime only. startContainer runs inside the container after the
 * capabilities were dropped, where the hook path would have to exist and could not raise a
 * hard limit (measured: the start fails). One caveat, measured: when the OCI spec itself carries an
 * RLIMIT_MEMLOCK (podman/docker --ulimit memlock=..., CRI-O default_ulimits), runc applies it
 * after the create hooks and the spec's value wins. Kubernetes' runtimes put no memlock into
 * the spec by default (containerd: RLIMIT_NOFILE only; CRI-O: default_ulimits empty), so the
 * container inherits the runtime's limit, which the hook replaces.
 *
 * The hook's arguments: {"rdma-dp", "hook", "--abi", RDP_OCI_HOOK_ABI, "--memlock", VALUE}.
 * A binary of another ABI refuses with a message on stderr and the container fails to start;
 * a binary without the sub-command ("unknown command") or no binary at the path fails the
 * start too: never silently.
 *
 * The OCI state (runtime-spec state.md) on the hook's stdin: a JSON object with "ociVersion",
 * "id", "status", "pid", "bundle" and optional "annotations". Read bounded
 * (RDP_OCI_STATE_MAX bytes), strict: one object, no duplicate key, the types above, a status
 * of "creating" or "created", a pid > 0. Unknown keys are allowed (later runtime-spec
 * versions add some). Pure; never logs.
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

#define RDP_OCI_HOOK_ABI "1"
#define RDP_OCI_HOOK_STAGE "createRuntime"
/* Where the DaemonSet installs the binary on the host (deploy/), and `serve`'s default. */
#define RDP_OCI_HOOK_DEFAULT_PATH "/opt/rdma-dp/bin/rdma-dp"
#define RDP_OCI_HOOK_ARGS_MAX 6
#define RDP_OCI_STATE_MAX (1024 * 1024) /* bytes: annotations can be large (256 KiB in k8s) */
#define RDP_OCI_ID_MAX 1024

struct rdp_oci_state {
	long long pid;
	char id[RDP_OCI_ID_MAX];
	char status[16]; /* "creating" or "created" */
};

/*
 * Parses the state in buf[0..len). 0 with *ret; -EINVAL with a one-line reason in err
 * (errlen bytes) for anything else; -EFBIG above RDP_OCI_STATE_MAX; -ENOMEM.
 */
int rdp_oci_state_parse(const char *buf, size_t len, struct rdp_oci_state *ret, char *err,
			size_t errlen);

/*
 * The hook's argv for memlock (not 0) into args[RDP_OCI_HOOK_ARGS_MAX]; value_buf
 * (RDP_MEMLOCK_STR_MAX bytes) holds the value's text. Returns how many arguments, -EINVAL.
 */
int rdp_oci_hook_args(uint64_t memlock, const char **args, char *value_buf, size_t value_size);
