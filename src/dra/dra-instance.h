/* SPDX-License-Identifier: MIT */
/*
 * Two driver instances side by side on one node (a rolling update, issue 21 point 7), as the
 * reference helper's RollingUpdate(uid) option of k8s.io/dynamic-resource-allocation/
 * kubeletplugin does it, for kubelet 1.33+ (pkg/kubelet/cm/dra/plugin/dra_plugin_manager.go):
 *
 *  - each instance has its own sockets, named after its pod's UID (the downward API):
 *    plugins_registry/<driver>-<uid>-reg.sock and plugins/<driver>/dra-<uid>.sock. kubelet
 *    keeps every registered instance of a driver (one per endpoint: a second registration of
 *    one endpoint is refused) and calls the newest connected one;
 *  - both share the plugin directory: the checkpoint and the CDI specs. Every prepare and
 *    unprepare (and every checkpoint write) runs under an exclusive flock(2) of
 *    plugins/<driver>/serialize.lock, the reference's file, and re-reads the checkpoint first:
 *    a claim prepared by one is known to the other;
 *  - an instance that leaves removes its two sockets (SIGTERM) and never deletes the pool's
 *    slices: kubelet wipes a driver's slices 30 s after its last instance is gone, and not
 *    while another one is connected.
 *
 * Without a UID the names are today's: <driver>-reg.sock and dra.sock.
 *
 * No logging here.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define RDP_DRA_LOCK_FILE "serialize.lock"
/* A pod UID is 36 characters; anything of [0-9A-Za-z-] up to this length is taken. */
#define RDP_DRA_INSTANCE_UID_MAX 64

/* True for a non-empty UID of [0-9A-Za-z-], at most RDP_DRA_INSTANCE_UID_MAX long. */
bool rdp_dra_instance_uid_valid(const char *uid);

/*
 * The file names of an instance's sockets: "<driver>[-<uid>]-reg.sock" (in plugins_registry)
 * and "dra[-<uid>].sock" (in the plugin directory); uid NULL or "": no UID part. Returns 0,
 * -EINVAL for an invalid uid, -ENAMETOOLONG when buf is too small.
 */
int rdp_dra_reg_socket_name(const char *driver, const char *uid, char *buf, size_t len);
int rdp_dra_service_socket_name(const char *uid, char *buf, size_t len);

/*
 * The lock between instances: serialize.lock in the plugin directory, opened (created, 0600)
 * once. take() blocks until no other instance holds it (the holder keeps it only for one
 * synchronous step: no API call runs under it); release() gives it back. A process holds it
 * at most once (flock: a second take() of the same fd is a no-op).
 */
int rdp_dra_lock_open_at(int dirfd); /* the fd, or -errno */
int rdp_dra_lock_take(int fd);       /* 0 or -errno; fd < 0: nothing to lock, 0 */
void rdp_dra_lock_release(int fd);

/*
 * Removes the sockets of instances that are gone: every socket in dir whose name starts with
 * prefix and ends with suffix (they may overlap: "<driver>-" and "-reg.sock" match
 * "<driver>-reg.sock"), other than keep (a file name, may be NULL), on which connect()
 * is refused twice 20 ms apart (no process listens: a pod killed before it could clean up;
 * a live instance between bind and listen is not refused twice). Returns the number removed,
 * or -errno when dir cannot be read.
 */
int rdp_dra_remove_stale_sockets(const char *dir, const char *prefix, const char *suffix,
				 const char *keep);
