/* SPDX-License-Identifier: MIT */
/*
 * rdma-dp hook: the OCI createRuntime hook the CDI specs of `serve --use-cdi` and `dra` name
 * (oci-hook.h). The runtime runs it on the host with the container's OCI state on stdin; it
 * sets RLIMIT_MEMLOCK (soft and hard) of the state's pid, runc's init, which later execs the
 * container's process: the limit survives the exec and the switch to the container's user.
 *
 * Every failure is fatal for the container's start, with one line on stderr (the runtime
 * shows it): an ABI other than ours (an old or new binary at the hook path), an unreadable
 * or malformed state, a limit the kernel refuses (raising a hard limit needs CAP_SYS_RESOURCE,
 * which the runtime's root has). A pod that asked for RDMA devices should not start with a
 * memlock limit that makes ibv_reg_mr fail later.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "cli-opt.h"
#include "cli.h"
#include "fileio.h"
#include "macro.h"
#include "memlock.h"
#include "oci-hook.h"

static const char *const cmd = "hook";

static const struct cli_cmd hook_cmd = {
	.name = "hook",
	.about = "The OCI createRuntime hook of rdma-dp's CDI specs; container runtimes run it, "
		 "people do not. Reads the container's OCI state (JSON) on stdin and sets "
		 "RLIMIT_MEMLOCK (soft and hard) of its process to VALUE.",
	.epilog = "Exit status: 0 when the limit is set, 1 when not (one line on stderr says "
		  "why), 2 on a usage error.",
};

/* Reads all of stdin, at most RDP_OCI_STATE_MAX + 1 bytes (one more: too long). */
static int read_state(char **ret, size_t *ret_len)
{
	size_t cap = RDP_OCI_STATE_MAX + 1, n = 0;
	_cleanup_free_ char *buf = rdp_malloc(cap);

	if (!buf)
		return -ENOMEM;
	while (n < cap) {
		ssize_t k = read(STDIN_FILENO, buf + n, cap - n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			break;
		n += (size_t)k;
	}
	*ret = TAKE_PTR(buf);
	*ret_len = n;
	return 0;
}

int cmd_hook(int argc, char **argv)
{
	const char *abi = NULL, *memlock = NULL;
	const struct cli_opt opts[] = {
		{"abi", 0, required_argument, "N",
		 "the hook ABI the spec was written for (this binary: " RDP_OCI_HOOK_ABI
		 "); any other is refused",
		 .str = &abi},
		{"memlock", 0, required_argument, "VALUE",
		 "\"unlimited\", bytes, or a number with Ki/Mi/Gi/Ti", .str = &memlock},
		{},
	};
	_cleanup_free_ char *buf = NULL;
	struct cli_parser p;
	struct rdp_oci_state st;
	struct rlimit rl;
	char err[512];
	uint64_t v;
	size_t len = 0;
	int c, r;

	cli_parser_init(&p, &hook_cmd, opts, argc, argv);
	while ((c = cli_next(&p)) > 0)
		;
	if (c < 0)
		return p.exit;
	if (!abi || !memlock) {
		fprintf(stderr, "rdma-dp %s: --abi and --memlock are required (the CDI spec passes "
			"them)\n", cmd);
		return 2;
	}
	/* The ABI first: a newer spec may spell the other arguments differently. */
	if (strcmp(abi, RDP_OCI_HOOK_ABI) != 0) {
		char self[256];
		ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);

		self[k > 0 ? k : 0] = '\0';
		fprintf(stderr,
			"rdma-dp %s: the CDI spec asks for hook ABI %s, but this binary (%s, rdma-dp "
			"%s) speaks ABI %s: the hook binary on this node is not the one of the "
			"running rdma-dp; let the DaemonSet install its own (or delete the node's "
			"rdma-dp pod to reinstall it)\n",
			cmd, abi, k > 0 ? self : "?", RDP_VERSION, RDP_OCI_HOOK_ABI);
		return 1;
	}
	r = rdp_memlock_parse(memlock, &v);
	if (r < 0 || v == RDP_MEMLOCK_LEAVE) {
		fprintf(stderr, "rdma-dp %s: --memlock '%s' is not \"unlimited\", a number of bytes "
			"or a number with Ki, Mi, Gi or Ti (and not 0)\n", cmd, memlock);
		return 2;
	}
	r = read_state(&buf, &len);
	if (r < 0) {
		fprintf(stderr, "rdma-dp %s: reading the OCI state on stdin: %s\n", cmd,
			strerror(-r));
		return 1;
	}
	r = rdp_oci_state_parse(buf, len, &st, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "rdma-dp %s: %s\n", cmd, r == -ENOMEM ? strerror(-r) : err);
		return 1;
	}
	rl.rlim_cur = rl.rlim_max = v == RDP_MEMLOCK_UNLIMITED ? RLIM_INFINITY : (rlim_t)v;
	if (prlimit((pid_t)st.pid, RLIMIT_MEMLOCK, &rl, NULL) < 0) {
		int e = errno;

		fprintf(stderr, "rdma-dp %s: container %s: setting RLIMIT_MEMLOCK of pid %lld to %s: "
			"%s%s\n", cmd, st.id, st.pid, memlock, strerror(e),
			e == EPERM ? " (raising a hard limit needs CAP_SYS_RESOURCE: the runtime "
				     "runs hooks as root on a normal node; set \"memlock\" to at "
				     "most the runtime's own limit, or 0 to leave it alone)"
				   : "");
		return 1;
	}
	return 0;
}

/*
 * rdma-dp install-hook --to PATH: the DaemonSet's init container copies this binary (the
 * image is FROM scratch: no shell, no cp) to the host path the CDI specs name as their hook,
 * atomically (a temporary file in the same directory, fsync, rename: a runtime starting a
 * container meanwhile runs the old binary or the new one), mode 0755. A file that already
 * holds these bytes with that mode is left alone.
 */
#define INSTALL_MAX (256 * 1024 * 1024)

static const struct cli_cmd install_cmd = {
	.name = "install-hook",
	.about = "Copy this rdma-dp binary to PATH (atomically, mode 0755), where the CDI specs of "
		 "'serve --use-cdi' and 'dra' name it as their memlock hook (--memlock-hook, "
		 "default " RDP_OCI_HOOK_DEFAULT_PATH " on the host). For the DaemonSet's init "
		 "container.",
};

int cmd_install_hook(int argc, char **argv)
{
	const char *to = NULL, *base;
	const struct cli_opt opts[] = {
		{"to", 0, required_argument, "PATH", "the destination (its directory must exist)",
		 .str = &to},
		{},
	};
	_cleanup_free_ char *self = NULL, *old = NULL, *dir = NULL;
	_cleanup_close_ int fd = -1, dfd = -1;
	struct cli_parser p;
	size_t n = 0, n_old = 0;
	struct stat st;
	int c, r;

	cli_parser_init(&p, &install_cmd, opts, argc, argv);
	while ((c = cli_next(&p)) > 0)
		;
	if (c < 0)
		return p.exit;
	if (!to || to[0] != '/') {
		fprintf(stderr, "rdma-dp install-hook: --to PATH (absolute) is required, and "
			"nothing else\n");
		return 2;
	}
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	r = fd < 0 ? -errno : rdp_read_file_fd(fd, INSTALL_MAX, &self, &n);
	if (r < 0) {
		fprintf(stderr, "rdma-dp install-hook: reading /proc/self/exe: %s\n", strerror(-r));
		return 1;
	}
	dir = rdp_strdup(to);
	if (!dir) {
		fprintf(stderr, "rdma-dp install-hook: %s\n", strerror(ENOMEM));
		return 1;
	}
	base = strrchr(to, '/') + 1;
	dir[base - to - 1 > 0 ? base - to - 1 : 1] = '\0';
	if (!*base) {
		fprintf(stderr, "rdma-dp install-hook: --to '%s' names a directory\n", to);
		return 2;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		fprintf(stderr, "rdma-dp install-hook: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	/* Already there? */
	{
		_cleanup_close_ int ofd = openat(dfd, base, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

		if (ofd >= 0 && fstat(ofd, &st) == 0 && S_ISREG(st.st_mode) &&
		    (st.st_mode & 07777) == 0755 && (size_t)st.st_size == n &&
		    rdp_read_file_fd(ofd, INSTALL_MAX, &old, &n_old) == 0 && n_old == n &&
		    memcmp(old, self, n) == 0) {
			printf("rdma-dp install-hook: %s is this binary (rdma-dp %s), unchanged\n", to,
			       RDP_VERSION);
			return 0;
		}
	}
	r = rdp_replace_file_at(dfd, base, ".rdma-dp-", ".tmp", self, n, 0755);
	if (r < 0) {
		fprintf(stderr, "rdma-dp install-hook: writing %s: %s\n", to, strerror(-r));
		return 1;
	}
	printf("rdma-dp install-hook: installed rdma-dp %s at %s (hook ABI %s)\n", RDP_VERSION, to,
	       RDP_OCI_HOOK_ABI);
	return 0;
}
