/* SPDX-License-Identifier: MIT */
/*
 * One daemon per node: an flock()ed lock file in the daemon's state directory
 * (<socket dir>/.rdma-dp/lock, see status.h for why a directory).
 *
 * Two daemons on one node (a DaemonSet update with maxSurge, a manual run beside the pod)
 * unlink each other's live sockets and register in turns. The first one to take the lock
 * serves; the other waits, retrying rdp_lock_try() from a timer (it never blocks: the caller's
 * event loop keeps running), and takes over when the holder exits: the kernel releases an
 * flock when its last descriptor closes, on exit, on SIGKILL and on a crash alike.
 *
 * The holder writes its pid into the file after locking ("<pid>\n"), so a waiter can say whom
 * it waits for (a pid in the holder's pid namespace: another pod's pid means nothing here).
 * After taking the flock, rdp_lock_try() checks that the path still names the inode it locked
 * (else it starts over): so a holder that stops may remove its file (rdp_lock_release(l,
 * true), unlink before unlock) without a waiter ending up holding an unlinked file. A lock
 * file unlinked or replaced by someone else while held is noticed (rdp_lock_check()): the
 * path no longer names the locked inode, and a waiter could lock the new file.
 *
 * States: UNLOCKED -> (rdp_lock_try succeeds) -> HELD -> (rdp_lock_release or free) ->
 * UNLOCKED. Library code: returns negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <sys/types.h>

#define RDP_LOCK_FILE "lock"

enum rdp_lock_state {
	RDP_LOCK_UNLOCKED,
	RDP_LOCK_HELD,
};

struct rdp_lock;

/* A lock on <dir>/lock, not taken yet. Returns 0 or -ENOMEM. */
int rdp_lock_new(const char *dir, struct rdp_lock **ret);

/*
 * Tries to take the lock once, without blocking. Creates dir (mode 0750, not its parents) and
 * the file when missing. Returns:
 *   0            held now (or already held by us); our pid is in the file;
 *   -EWOULDBLOCK another process holds it; *holder (when not NULL) gets the pid it wrote, or 0
 *                when it wrote none yet;
 *   -ENOENT      dir's parent (the socket directory) does not exist yet;
 *   -ESTALE      the file was replaced under us again and again;
 *   other negative errno on other failures.
 */
int rdp_lock_try(struct rdp_lock *l, pid_t *holder);

/*
 * Held, and the path still names the locked file? 1 yes, 0 when not held or when the file was
 * unlinked or replaced (then the lock protects nothing: release it and try again), or -errno.
 */
int rdp_lock_check(struct rdp_lock *l);

enum rdp_lock_state rdp_lock_state(const struct rdp_lock *l);
const char *rdp_lock_path(const struct rdp_lock *l);

/*
 * Releases the lock (closes the file). remove: unlink the file first, when it is still ours (a
 * daemon that stops cleanly leaves nothing behind; the caller may rmdir the directory).
 */
void rdp_lock_release(struct rdp_lock *l, bool remove);

struct rdp_lock *rdp_lock_free(struct rdp_lock *l);
