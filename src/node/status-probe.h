/* SPDX-License-Identifier: MIT */
/*
 * Reading what a running `rdma-dp serve` publishes (status.h) and asking each of its sockets
 * the call kubelet makes first (/v1beta1.DevicePlugin/GetDevicePluginOptions), all at once on
 * one event loop: what `rdma-dp health` (the liveness probe) and `rdma-dp doctor`
 * (plugin.sockets) both need. An answer proves the daemon's loop runs; a socket that is gone,
 * refuses, or stays silent past the deadline fails with a one-line reason.
 *
 * Library code: returns negative errno, never logs.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "registration.h"
#include "status.h"

/*
 * The daemon's status under <kubelet_root>: from the socket directory of mode
 * (device-plugins or plugins_registry), or in auto mode the newer of the two status files (a
 * daemon that changed mode leaves no file behind it, but one killed in one mode and started
 * in the other would). *ret and *ret_dir (its state directory) are allocated. On error, err
 * (errlen bytes) says why in one line: -ENOENT (no status file in either place: "no
 * status.json in ...: rdma-dp serve has not published what it serves ..."), -EINVAL/-E2BIG (a
 * file that is not a status), another negative errno on I/O errors; -ENOMEM.
 */
int rdp_status_load(const char *kubelet_root, enum rdp_registration_mode mode,
		    struct rdp_status **ret, char **ret_dir, char *err, size_t errlen);

enum rdp_probe_state {
	RDP_PROBE_NOT_SERVING, /* the status says the daemon does not listen yet: not probed */
	RDP_PROBE_OK, /* answered with DevicePluginOptions */
	RDP_PROBE_FAILED, /* gone, refused, an error, a bad answer or no answer: reason says */
};

struct rdp_probe {
	enum rdp_probe_state state;
	char reason[256]; /* RDP_PROBE_FAILED: "the socket the daemon serves is gone", ... */
};

/*
 * Probes every serving socket of st, each call bounded by timeout_ms. *ret gets an array
 * parallel to st->resources (allocated, rdp_free()). Returns 0, or -ENOMEM, or another
 * negative errno when the event loop cannot run.
 */
int rdp_status_probe(const struct rdp_status *st, unsigned long timeout_ms,
		     struct rdp_probe **ret);
