/* SPDX-License-Identifier: MIT */
#include "methods.h"

#include <string.h>

const struct rdp_method_info rdp_methods[RDP_METHOD_N] = {
	[RDP_METHOD_DP_OPTIONS] = {RDP_DP_SERVICE "GetDevicePluginOptions",
				   "GetDevicePluginOptions", RDP_SERVICE_DEVICE_PLUGIN, false},
	[RDP_METHOD_DP_LIST_AND_WATCH] = {RDP_DP_SERVICE "ListAndWatch", "ListAndWatch",
					  RDP_SERVICE_DEVICE_PLUGIN, true},
	[RDP_METHOD_DP_PREFERRED] = {RDP_DP_SERVICE "GetPreferredAllocation",
				     "GetPreferredAllocation", RDP_SERVICE_DEVICE_PLUGIN, false},
	[RDP_METHOD_DP_ALLOCATE] = {RDP_DP_SERVICE "Allocate", "Allocate",
				    RDP_SERVICE_DEVICE_PLUGIN, false},
	[RDP_METHOD_DP_PRE_START] = {RDP_DP_SERVICE "PreStartContainer", "PreStartContainer",
				     RDP_SERVICE_DEVICE_PLUGIN, false},
	[RDP_METHOD_WATCHER_GET_INFO] = {RDP_WATCHER_SERVICE "GetInfo", "GetInfo",
					 RDP_SERVICE_WATCHER, false},
	[RDP_METHOD_WATCHER_NOTIFY] = {RDP_WATCHER_SERVICE "NotifyRegistrationStatus",
				       "NotifyRegistrationStatus", RDP_SERVICE_WATCHER, false},
	[RDP_METHOD_REGISTER] = {"/v1beta1.Registration/Register", "Register",
				 RDP_SERVICE_KUBELET, false},
	[RDP_METHOD_DRA_PREPARE] = {RDP_DRA_V1_SERVICE "NodePrepareResources",
				    "NodePrepareResources", RDP_SERVICE_DRA, false},
	[RDP_METHOD_DRA_UNPREPARE] = {RDP_DRA_V1_SERVICE "NodeUnprepareResources",
				      "NodeUnprepareResources", RDP_SERVICE_DRA, false},
	[RDP_METHOD_DRA_V1BETA1_PREPARE] = {RDP_DRA_V1BETA1_SERVICE "NodePrepareResources",
					    "NodePrepareResources", RDP_SERVICE_DRA, false},
	[RDP_METHOD_DRA_V1BETA1_UNPREPARE] = {RDP_DRA_V1BETA1_SERVICE "NodeUnprepareResources",
					      "NodeUnprepareResources", RDP_SERVICE_DRA, false},
	[RDP_METHOD_DRA_HEALTH_V1_WATCH] = {RDP_DRA_HEALTH_V1_SERVICE "NodeWatchResources",
					    "NodeWatchResources", RDP_SERVICE_DRA, true},
	[RDP_METHOD_DRA_HEALTH_V1ALPHA1_WATCH] = {RDP_DRA_HEALTH_V1ALPHA1_SERVICE
						  "NodeWatchResources",
						  "NodeWatchResources", RDP_SERVICE_DRA, true},
};

enum rdp_method rdp_method_lookup(const char *path)
{
	for (int m = 0; m < RDP_METHOD_N; m++)
		if (strcmp(path, rdp_methods[m].path) == 0)
			return (enum rdp_method)m;
	return RDP_METHOD_UNKNOWN;
}

const char *rdp_method_path(enum rdp_method m)
{
	return (unsigned)m < RDP_METHOD_N ? rdp_methods[m].path : "";
}

const char *rdp_method_name(enum rdp_method m)
{
	return (unsigned)m < RDP_METHOD_N ? rdp_methods[m].name : "unknown";
}
