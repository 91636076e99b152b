/* SPDX-License-Identifier: MIT */
/*
 * Selectors: pure matching of a resource's selectors against one device of the model, OR
 * within a key, AND across keys, with an optional explanation per key for check-config
 * ("deviceIDs: 1021 not in [101d]"). No I/O, no allocation.
 *
 * Semantics per key:
 *   vendors, deviceIDs, drivers  the device's PCI function (a device without one, such as
 *                                rxe, matches none)
 *   ifNames      any of the device's netdevs
 *   linkTypes    any port whose link layer is the canonical one of an entry
 *   pfNames      a VF: its PF's netdev, and its VF index in the entry's ranges if any;
 *                a PF (or any non-VF): one of its own netdevs, for entries without ranges
 *   rootDevices  the PCI address of the physical function (the PF's for a VF)
 *   numaNodes    the device's NUMA node (-1, unknown, matches none)
 */
#pragma once
#include <stdbool.h>

#include "config.h"
#include "device.h"

enum rdp_sel_key {
	RDP_SEL_VENDORS,
	RDP_SEL_DEVICE_IDS,
	RDP_SEL_DRIVERS,
	RDP_SEL_IF_NAMES,
	RDP_SEL_LINK_TYPES,
	RDP_SEL_PF_NAMES,
	RDP_SEL_ROOT_DEVICES,
	RDP_SEL_NUMA_NODES,
	RDP_SEL_KEY_MAX,
};

/* The config key: "vendors", "deviceIDs", "drivers", "ifNames", "linkTypes", "pfNames",
 * "rootDevices", "numaNodes". NULL out of range. */
const char *rdp_sel_key_name(enum rdp_sel_key k);

enum rdp_sel_result {
	RDP_SEL_UNUSED = 0, /* the key is not in the selectors */
	RDP_SEL_MATCH,
	RDP_SEL_NO_MATCH,
};

/* "unused", "match", "no-match": stable, for JSON output. */
const char *rdp_sel_result_name(enum rdp_sel_result r);

#define RDP_SEL_TEXT_MAX 256

struct rdp_sel_explain {
	enum rdp_sel_result result[RDP_SEL_KEY_MAX];
	/* "deviceIDs: 1021 not in [101d]"; "" for unused keys. Long lists are cut with "...". */
	char text[RDP_SEL_KEY_MAX][RDP_SEL_TEXT_MAX];
};

/*
 * True when d matches every key present in s. A selectors with no key matches nothing (the
 * config parser never produces one). When ret is not NULL every key is evaluated and
 * explained; otherwise evaluation stops at the first key that fails.
 */
bool rdp_selectors_match(const struct rdp_selectors *s, const struct rdp_device *d,
			 struct rdp_sel_explain *ret);
/* True when no key is set. */
bool rdp_selectors_empty(const struct rdp_selectors *s);

/*
 * The link layer a linkTypes entry names, case-insensitively: "infiniband"/"ib", and
 * "ether"/"ethernet"/"eth". RDP_LINK_UNKNOWN for anything else.
 */
enum rdp_link_layer rdp_link_type_parse(const char *s);

/* Writes a pfNames entry as in the config ("ens3f0#0-1,5") into buf. Returns buf. */
char *rdp_pf_selector_format(const struct rdp_pf_selector *p, char *buf, size_t size);
