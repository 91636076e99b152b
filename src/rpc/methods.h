/* SPDX-License-Identifier: MIT */
/*
 * Every gRPC method rdma-dp serves or calls, in one table: kubelet's v1beta1.DevicePlugin
 * (served on each resource's socket), pluginregistration.Registration (served on a
 * plugins_registry socket), v1beta1.Registration/Register (called on kubelet.sock) and the
 * DRA driver's DRAPlugin, v1 and v1beta1 (served on dra.sock; one message set,
 * src/rpc/proto/dra.proto, serves both) and DRAResourceHealth, v1 and v1alpha1 (dra.sock too;
 * src/rpc/proto/drahealth.proto). The
 * services, the sockets' server tables, the health probe and the tests all take their paths
 * from here.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#define RDP_DP_SERVICE "/v1beta1.DevicePlugin/"
#define RDP_WATCHER_SERVICE "/pluginregistration.Registration/"
#define RDP_DRA_V1_SERVICE "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define RDP_DRA_V1BETA1_SERVICE "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"
#define RDP_DRA_HEALTH_V1_SERVICE "/v1.DRAResourceHealth/"
#define RDP_DRA_HEALTH_V1ALPHA1_SERVICE "/v1alpha1.DRAResourceHealth/"

enum rdp_method {
	/* v1beta1.DevicePlugin, in the order of kubelet's api.proto */
	RDP_METHOD_DP_OPTIONS,
	RDP_METHOD_DP_LIST_AND_WATCH,
	RDP_METHOD_DP_PREFERRED,
	RDP_METHOD_DP_ALLOCATE,
	RDP_METHOD_DP_PRE_START,
	/* pluginregistration.Registration */
	RDP_METHOD_WATCHER_GET_INFO,
	RDP_METHOD_WATCHER_NOTIFY,
	/* v1beta1.Registration, called on kubelet.sock */
	RDP_METHOD_REGISTER,
	/* DRAPlugin, served on dra.sock: v1 (kubelet 1.34+), then v1beta1 (1.32+) */
	RDP_METHOD_DRA_PREPARE,
	RDP_METHOD_DRA_UNPREPARE,
	RDP_METHOD_DRA_V1BETA1_PREPARE,
	RDP_METHOD_DRA_V1BETA1_UNPREPARE,
	/* DRAResourceHealth (server-streaming), served on dra.sock: v1 (kubelet 1.37), then
	 * v1alpha1 (1.34+ with ResourceHealthStatus; on by default since 1.36); one message set,
	 * src/rpc/proto/drahealth.proto */
	RDP_METHOD_DRA_HEALTH_V1_WATCH,
	RDP_METHOD_DRA_HEALTH_V1ALPHA1_WATCH,
	RDP_METHOD_N,
	RDP_METHOD_UNKNOWN = RDP_METHOD_N,
};

enum rdp_method_service {
	RDP_SERVICE_DEVICE_PLUGIN,
	RDP_SERVICE_WATCHER,
	RDP_SERVICE_KUBELET, /* served by kubelet, called by us */
	RDP_SERVICE_DRA, /* DRAPlugin v1 and v1beta1, DRAResourceHealth v1 and v1alpha1, served
			  * on the DRA driver's dra.sock */
};

struct rdp_method_info {
	const char *path; /* "/v1beta1.DevicePlugin/Allocate" */
	const char *name; /* "Allocate", for logs */
	enum rdp_method_service service;
	bool server_streaming;
};

extern const struct rdp_method_info rdp_methods[RDP_METHOD_N];

/* The method of a request path; RDP_METHOD_UNKNOWN when none. */
enum rdp_method rdp_method_lookup(const char *path);
/* Shorthands for the path and the log name of m. */
const char *rdp_method_path(enum rdp_method m);
const char *rdp_method_name(enum rdp_method m);
