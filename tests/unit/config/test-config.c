/* SPDX-License-Identifier: MIT */
/* config.c and config-pos.c: valid configs, every class of error with its position. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "config-pos.h"
#include "config.h"
#include "memlock.h"
#include "test.h"

static int parse(const char *text, struct rdp_config **ret, struct rdp_diags *d)
{
	return rdp_config_parse(text, strlen(text), "c.json", ret, d);
}

/* All diagnostics joined by newlines, for EXPECT_CONTAINS. */
static char *joined(const struct rdp_diags *d)
{
	static char buf[16384];
	size_t n = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < d->n && n < sizeof(buf) - 1; i++) {
		snprintf(buf + n, sizeof(buf) - n, "%s\n", d->v[i].text);
		n = strlen(buf);
	}
	return buf;
}

#define RES(sel) "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1, " sel "}]}"

static const struct {
	const char *text;
	const char *expect; /* a substring of the diagnostics, with position */
} errors[] = {
	/* syntax, from the scanner */
	{ "", "c.json:1:1: error: the file is empty" },
	{ "{ periodicUpdateInterval: 300 }", "c.json:1:3: error: keys must be quoted: \"periodicUpdateInterval\"" },
	{ "{\"a\": hca_x}", "c.json:1:7: error: strings must be quoted: \"hca_x\"" },
	{ "{\"rootDevices\": [0000:81:00.0]}", "c.json:1:18: error: strings must be quoted: \"0000:81:00.0\"" },
	{ "{\"a\": [1, 2,]}", "c.json:1:12: error: trailing comma before ']'" },
	{ "{\"a\": 1,}", "c.json:1:8: error: trailing comma before '}'" },
	{ "{\n  // x\n}", "c.json:2:3: error: comments are not allowed in JSON" },
	{ "{'a': 1}", "c.json:1:2: error: strings must use double quotes" },
	{ "{\"a\": 1\n \"b\": 2}", "c.json:2:2: error: expected ',' or '}' after the value of \"a\", found '\"' (missing comma?)" },
	{ "{\"a\": True}", "c.json:1:7: error: JSON literals are lower-case: write true, not True" },
	{ "{\"a\": \"x\n\"}", "c.json:1:7: error: unterminated string" },
	{ "{\"a\": 1} x", "c.json:1:10: error: unexpected 'x' after the end of the JSON document" },
	{ "{\"a\": \"\\q\"}", "c.json:1:8: error: invalid escape" },
	{ "{\"a\": 1,\n \"a\": 2}", "c.json:2:2: error: duplicate key \"a\"" },
	{ "{\"a\": 1,\n \"a\": 2}", "c.json:1:2: note: first defined here" },
	{ "{\"x\": {\"a\": 1, \"a\": 2}}", "c.json:1:16: error: x: duplicate key \"a\"" },
	/* columns count characters, not bytes */
	{ "{\"é\": 1, \"é\": 2}", "c.json:1:10: error: duplicate key \"é\"" },
	/* jansson's own checks still apply */
	{ "{\"a\": 99999999999999999999}", "c.json:1:" },
	/* structure */
	{ "[]", "c.json:1:1: error: the top level must be an object" },
	{ "{}", "c.json:1:1: error: missing \"configList\"" },
	{ "{\"configList\": []}", "c.json:1:16: error: configList: empty" },
	{ "{\"configList\": {}}", "c.json:1:16: error: configList: must be a list of resources" },
	{ "{\"configlist\": []}", "c.json:1:2: error: unknown key \"configlist\" (did you mean \"configList\"?)" },
	{ "{\"configList\": [1]}", "error: configList[0]: must be an object" },
	{ "{\"selectors\": {}, \"configList\": [1]}", "c.json:1:2: error: unknown key \"selectors\" here: resource keys go inside" },
	/* periodicUpdateInterval */
	{ "{\"periodicUpdateInterval\": -1, \"configList\": []}", "c.json:1:28: error: periodicUpdateInterval: must be at least 0, not -1" },
	{ "{\"periodicUpdateInterval\": 604801, \"configList\": []}", "must be at most 604800" },
	{ "{\"periodicUpdateInterval\": \"60\", \"configList\": []}", "must be a number, not a string: write 60 without quotes" },
	{ "{\"periodicUpdateInterval\": 1.5, \"configList\": []}", "must be an integer, not 1.5" },
	{ "{\"periodicUpdateInterval\": null, \"configList\": []}", "must be an integer, not null" },
	/* resources */
	{ "{\"configList\": [{\"rdmaHcaMax\": 1, \"selectors\": {\"ifNames\": [\"ib0\"]}}]}", "c.json:1:17: error: configList[0]: missing \"resourceName\"" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"selectors\": {\"ifNames\": [\"ib0\"]}}]}", "configList[0]: missing \"rdmaHcaMax\"" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1}]}", "configList[0]: no \"selectors\"" },
	{ RES("\"selectors\": {}"), "configList[0].selectors: no selector" },
	{ RES("\"selectors\": []"), "configList[0].selectors: must be an object" },
	{ RES("\"selectors\": {\"ifNames\": [\"ib0\"]}, \"devices\": [\"ib1\"]"), "configList[0].devices: \"devices\" and \"selectors\" together" },
	{ RES("\"devices\": []"), "configList[0].devices: empty list" },
	{ RES("\"vendors\": [\"15b3\"], \"selectors\": {\"ifNames\": [\"ib0\"]}"), "configList[0]: unknown key \"vendors\" here: selector keys go inside \"selectors\"" },
	{ RES("\"resourcename\": \"b\", \"selectors\": {\"ifNames\": [\"ib0\"]}"), "configList[0]: unknown key \"resourcename\" (did you mean \"resourceName\"?)" },
	{ RES("\"foo\": 1, \"selectors\": {\"ifNames\": [\"ib0\"]}"), "unknown key \"foo\" (known keys: resourceName, resourcePrefix, rdmaHcaMax, mode, selectors, devices, env, envFromDevices, memlock, reportTopology)" },
	{ "{\"configList\": [{\"resourceName\": \"a-b\", \"rdmaHcaMax\": 1, \"selectors\": {\"ifNames\": [\"ib0\"]}}]}", "configList[0].resourceName: \"a-b\": a resource name may contain only letters, digits and '_'" },
	{ "{\"configList\": [{\"resourceName\": \"_a\", \"rdmaHcaMax\": 1, \"selectors\": {\"ifNames\": [\"ib0\"]}}]}", "must start and end with a letter or digit" },
	{ "{\"configList\": [{\"resourceName\": \"\", \"rdmaHcaMax\": 1, \"selectors\": {\"ifNames\": [\"ib0\"]}}]}", "empty resource name" },
	{ "{\"configList\": [{\"resourceName\": 5, \"rdmaHcaMax\": 1, \"selectors\": {\"ifNames\": [\"ib0\"]}}]}", "configList[0].resourceName: must be a string, not an integer" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1, \"selectors\": {\"ifNames\": [\"ib0\"]}},\n"
	  " {\"resourceName\": \"a\", \"rdmaHcaMax\": 1, \"selectors\": {\"ifNames\": [\"ib1\"]}}]}",
	  "c.json:2:19: error: configList[1].resourceName: \"a\" is already the name of the resource at line 1" },
	{ RES("\"resourcePrefix\": \"RDMA\", \"selectors\": {\"ifNames\": [\"ib0\"]}"), "configList[0].resourcePrefix: \"RDMA\" is not a valid resource prefix" },
	{ RES("\"resourcePrefix\": \"a..b\", \"selectors\": {\"ifNames\": [\"ib0\"]}"), "is not a valid resource prefix" },
	{ RES("\"resourcePrefix\": \"-a\", \"selectors\": {\"ifNames\": [\"ib0\"]}"), "is not a valid resource prefix" },
	{ RES("\"resourcePrefix\": \"kubernetes.io\", \"selectors\": {\"ifNames\": [\"ib0\"]}"), "reserved" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": -1, \"selectors\": {\"ifNames\": [\"ib0\"]}}]}", "configList[0].rdmaHcaMax: must be at least 0, not -1" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 100001, \"selectors\": {\"ifNames\": [\"ib0\"]}}]}", "must be at most 100000, not 100001: kubelet's 4 MiB message limit" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": \"5\", \"selectors\": {\"ifNames\": [\"ib0\"]}}]}", "must be a number, not a string: write 5 without quotes" },
	/* selectors */
	{ RES("\"selectors\": {\"devics\": [\"101d\"]}"), "c.json:1:70: error: configList[0].selectors: unknown key \"devics\" (did you mean \"devices\"?)" },
	{ RES("\"selectors\": {\"deviceIds\": [\"101d\"]}"), "(did you mean \"deviceIDs\"?)" },
	{ RES("\"selectors\": {\"ifnames\": [\"ib0\"]}"), "(did you mean \"ifNames\"?)" },
	{ RES("\"selectors\": {\"vendor\": [\"15b3\"]}"), "(did you mean \"vendors\"?)" },
	{ RES("\"selectors\": {\"linkType\": [\"ib\"]}"), "(did you mean \"linkTypes\"?)" },
	{ RES("\"selectors\": {\"ifNames\": []}"), "configList[0].selectors.ifNames: empty list" },
	{ RES("\"selectors\": {\"ifNames\": \"ib0\"}"), "must be a list of interface names: write [\"ib0\"]" },
	{ RES("\"selectors\": {\"ifNames\": [\"\"]}"), "configList[0].selectors.ifNames[0]: empty string" },
	{ RES("\"selectors\": {\"ifNames\": [null]}"), "ifNames[0]: must be a string, not null" },
	{ RES("\"selectors\": {\"ifNames\": [\"a/b\"]}"), "\"a/b\" is not an interface name" },
	{ RES("\"selectors\": {\"ifNames\": [\"eth0:1\"]}"), "is not an interface name" },
	{ RES("\"selectors\": {\"ifNames\": [\"a b\"]}"), "is not an interface name" },
	{ RES("\"selectors\": {\"ifNames\": [\"..\"]}"), "is not an interface name" },
	{ RES("\"selectors\": {\"ifNames\": [\"ibp0s0f0np0abcde\"]}"), "is longer than 15 characters" },
	{ RES("\"selectors\": {\"vendors\": [\"15b\"]}"), "vendors[0]: \"15b\" is not a PCI ID: expected 4 hex digits" },
	{ RES("\"selectors\": {\"vendors\": [\"15b3x\"]}"), "is not a PCI ID" },
	{ RES("\"selectors\": {\"vendors\": [\"0x\"]}"), "is not a PCI ID" },
	{ RES("\"selectors\": {\"vendors\": [\"Mellanox\"]}"), "\"Mellanox\" is not a PCI vendor ID: Mellanox devices have \"15b3\"" },
	{ RES("\"selectors\": {\"deviceIDs\": [1017]}"), "deviceIDs[0]: must be a string: write \"1017\"" },
	{ RES("\"selectors\": {\"deviceIDs\": [\"101d\"], \"devices\": [\"1017\"]}"), "both \"deviceIDs\" and its alias \"devices\"" },
	{ RES("\"selectors\": {\"drivers\": [\"mlx5 core\"]}"), "is not a driver name" },
	{ RES("\"selectors\": {\"linkTypes\": [\"roce\"]}"), "\"roce\" is not a link type: RoCE and iWARP devices have link type \"ether\"" },
	{ RES("\"selectors\": {\"linkTypes\": [\"infiniban\"]}"), "did you mean \"infiniband\"?" },
	{ RES("\"selectors\": {\"linkTypes\": [\"token-ring\"]}"), "\"token-ring\" is not a link type" },
	{ RES("\"selectors\": {\"rootDevices\": [\"81:00\"]}"), "\"81:00\" is not a PCI address" },
	{ RES("\"selectors\": {\"rootDevices\": [\"0000:81:20.0\"]}"), "is not a PCI address" },
	{ RES("\"selectors\": {\"rootDevices\": [\"0000:81:00.8\"]}"), "is not a PCI address" },
	{ RES("\"selectors\": {\"rootDevices\": [\"000:81:00.0\"]}"), "is not a PCI address" },
	{ RES("\"selectors\": {\"rootDevices\": [\"0000:81:00.0.1\"]}"), "is not a PCI address" },
	{ RES("\"selectors\": {\"pfNames\": [\"#0-3\"]}"), "has no interface name before '#'" },
	{ RES("\"selectors\": {\"pfNames\": [\"ens3f0#\"]}"), "expected VF indexes after '#'" },
	{ RES("\"selectors\": {\"pfNames\": [\"ens3f0#3-1\"]}"), "the VF range 3-1 is reversed" },
	{ RES("\"selectors\": {\"pfNames\": [\"ens3f0#a\"]}"), "expected VF indexes and ranges after '#'" },
	{ RES("\"selectors\": {\"pfNames\": [\"ens3f0#1,\"]}"), "expected VF indexes and ranges after '#'" },
	{ RES("\"selectors\": {\"pfNames\": [\"ens3f0#1-\"]}"), "expected VF indexes and ranges after '#'" },
	{ RES("\"selectors\": {\"pfNames\": [\"ens3f0#-1\"]}"), "expected VF indexes and ranges after '#'" },
	{ RES("\"selectors\": {\"pfNames\": [\"ens3f0#70000\"]}"), "VF index out of range" },
	{ RES("\"selectors\": {\"pfNames\": [\"a/b#1\"]}"), "is not an interface name" },
	{ RES("\"selectors\": {\"numaNodes\": [-1]}"), "numaNodes[0]: must be at least 0, not -1" },
	{ RES("\"selectors\": {\"numaNodes\": [1024]}"), "must be at most 1023" },
	{ RES("\"selectors\": {\"numaNodes\": [\"0\"]}"), "numaNodes[0]: must be a number, not a string" },
	/* "mode" */
	{ RES("\"mode\": \"exclusive\", \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "c.json:1:39: error: configList[0].rdmaHcaMax: has no meaning for an exclusive resource" },
	{ RES("\"mode\": \"exlusive\", \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "\"exlusive\" is not a mode: expected \"shared\" (every pod gets every device of the pool, the default) or \"exclusive\" (each pod gets devices of its own); did you mean \"exclusive\"?" },
	{ RES("\"mode\": \"dedicated\", \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "did you mean \"exclusive\"?" },
	{ RES("\"mode\": true, \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "configList[0].mode: must be a string, \"shared\" or \"exclusive\", not true" },
	{ RES("\"exclusive\": true, \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "unknown key \"exclusive\": write \"mode\": \"exclusive\" to give each pod its own devices" },
	{ RES("\"sharingMode\": \"exclusive\", \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "unknown key \"sharingMode\": write \"mode\": \"shared\" (the default) or \"mode\": \"exclusive\"" },
	{ RES("\"mode\": \"Exclusive\", \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "did you mean \"exclusive\"?" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"mode\": \"shared\", \"selectors\": {\"vendors\": [\"15b3\"]}}]}",
	  "missing \"rdmaHcaMax\"" },
	/* memlock and reportTopology */
	{ RES("\"memlock\": \"Unlimited\", \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "configList[0].memlock: \"Unlimited\" is not a memlock limit: expected \"unlimited\" (the default), a size in bytes or with Ki, Mi, Gi or Ti (\"64Gi\"), or 0 to leave the container's limit alone; did you mean \"unlimited\"?" },
	{ RES("\"memlock\": \"1GB\", \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "(binary units only, no fraction: \"512Mi\", \"1Gi\")" },
	{ RES("\"memlock\": -1, \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "configList[0].memlock: must not be negative" },
	{ RES("\"memlock\": true, \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "configList[0].memlock: must be a string or an integer, not true" },
	{ RES("\"memlock\": \"99999999999Ti\", \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "is too large" },
	{ RES("\"memlok\": \"1Gi\", \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "unknown key \"memlok\" (did you mean \"memlock\"?)" },
	{ RES("\"ulimit\": \"1Gi\", \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "unknown key \"ulimit\": the locked-memory limit of the containers goes in \"memlock\"" },
	{ RES("\"reportTopology\": \"yes\", \"selectors\": {\"vendors\": [\"15b3\"]}"),
	  "configList[0].reportTopology: must be true or false, not a string" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"mode\": \"exclusive\", \"reportTopology\": true, \"selectors\": {\"vendors\": [\"15b3\"]}}]}",
	  "reportTopology: has no meaning for an exclusive resource" },
};

static void test_errors(void)
{
	for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
		struct rdp_diags d = {};
		struct rdp_config *c = (struct rdp_config *)0x1;
		int r = parse(errors[i].text, &c, &d);

		EXPECT_EQ(r, -EINVAL);
		EXPECT_TRUE(c == (struct rdp_config *)0x1); /* untouched on failure */
		EXPECT_TRUE(d.n_errors > 0);
		EXPECT_CONTAINS(joined(&d), errors[i].expect);
		rdp_diags_done(&d);
	}
}

/* Valid texts and the warnings or notes they carry. */
static const struct {
	const char *text;
	const char *expect; /* NULL: no diagnostic at all */
} valid[] = {
	{ RES("\"selectors\": {\"ifNames\": [\"ib0\"]}"), NULL },
	{ RES("\"selectors\": {\"devices\": [\"101d\"]}"), "c.json:1:70: warning: configList[0].selectors.devices: \"devices\" is read as \"deviceIDs\"" },
	{ RES("\"devices\": [\"ib0\"]"), "warning: configList[0].devices: \"devices\" is deprecated" },
	{ RES("\"selectors\": {\"vendors\": [\"0x15B3\"]}"), "warning: configList[0].selectors.vendors[0]: \"0x15B3\" read as \"15b3\"" },
	{ RES("\"selectors\": {\"rootDevices\": [\"81:00.0\"]}"), "note: configList[0].selectors.rootDevices[0]: \"81:00.0\" read as \"0000:81:00.0\" (PCI domain 0000)" },
	{ RES("\"selectors\": {\"rootDevices\": [\"0000:AF:00.1\"]}"), "read as \"0000:af:00.1\"" },
	{ RES("\"selectors\": {\"ifNames\": [\"ib*\"]}"), "wildcards are not supported" },
	{ RES("\"resourcePrefix\": \"\", \"selectors\": {\"ifNames\": [\"ib0\"]}"), "resourcePrefix: empty: the default \"rdma\" is used" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 0, \"selectors\": {\"ifNames\": [\"ib0\"]}}]}", "rdmaHcaMax: 0: the resource is advertised with no units" },
	{ "{\"periodicUpdateInterval\": 0, \"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1, \"selectors\": {\"ifNames\": [\"ib0\"]}}]}", "note: periodicUpdateInterval: 0 turns periodic rescans off" },
	{ RES("\"selectors\": {\"pfNames\": [\"ens3f0\"]}"), "does not know \"pfNames\"" },
	{ "\xef\xbb\xbf" RES("\"selectors\": {\"ifNames\": [\"ib0\"]}"), NULL },
};

static void test_valid(void)
{
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		struct rdp_diags d = {};
		struct rdp_config *c = NULL;
		int r = parse(valid[i].text, &c, &d);

		EXPECT_EQ(r, 0);
		EXPECT_TRUE(c != NULL);
		EXPECT_EQ(d.n_errors, 0);
		if (valid[i].expect)
			EXPECT_CONTAINS(joined(&d), valid[i].expect);
		else
			EXPECT_EQ(d.n, 0);
		if (r < 0)
			fprintf(stderr, "case %zu: %s", i, joined(&d));
		rdp_config_free(c);
		rdp_diags_done(&d);
	}
}

static void test_values(void)
{
	const char *text =
		"{\"configList\": [{\"resourceName\": \"a\", \"resourcePrefix\": \"example.com\",\n"
		" \"rdmaHcaMax\": 7, \"selectors\": {\"vendors\": [\"15B3\", \"8086\"],\n"
		" \"deviceIDs\": [\"0x101D\"], \"drivers\": [\"mlx5_core\"], \"ifNames\": [\"ib0\"],\n"
		" \"linkTypes\": [\"ETH\", \"ib\"], \"pfNames\": [\"ens3f0\", \"ens3f1#0-3,5\"],\n"
		" \"rootDevices\": [\"3b:00.0\"], \"numaNodes\": [1, 0]}},\n"
		" {\"resourceName\": \"b\", \"rdmaHcaMax\": 100000, \"devices\": [\"ib1\", \"ib2\"]}]}";
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;
	const struct rdp_resource *r0, *r1;

	EXPECT_EQ(parse(text, &c, &d), 0);
	if (!c)
		return;
	EXPECT_STREQ(c->path, "c.json");
	EXPECT_EQ(c->periodic_update_interval, RDP_DEFAULT_PERIODIC_UPDATE_INTERVAL);
	EXPECT_EQ(c->n_resources, 2);
	r0 = &c->resources[0];
	r1 = &c->resources[1];
	EXPECT_STREQ(r0->full_name, "example.com/a");
	EXPECT_EQ(r0->rdma_hca_max, 7);
	EXPECT_EQ(r0->line, 1);
	EXPECT_EQ(r0->sel.vendors.n, 2);
	EXPECT_STREQ(r0->sel.vendors.v[0], "15b3");
	EXPECT_STREQ(r0->sel.vendors.v[1], "8086");
	EXPECT_STREQ(r0->sel.device_ids.v[0], "101d");
	EXPECT_STREQ(r0->sel.drivers.v[0], "mlx5_core");
	EXPECT_STREQ(r0->sel.if_names.v[0], "ib0");
	EXPECT_STREQ(r0->sel.link_types.v[0], "ETH");
	EXPECT_EQ(r0->sel.n_pf_names, 2);
	EXPECT_STREQ(r0->sel.pf_names[0].name, "ens3f0");
	EXPECT_EQ(r0->sel.pf_names[0].n_ranges, 0);
	EXPECT_STREQ(r0->sel.pf_names[1].name, "ens3f1");
	EXPECT_EQ(r0->sel.pf_names[1].n_ranges, 2);
	EXPECT_EQ(r0->sel.pf_names[1].ranges[0].lo, 0);
	EXPECT_EQ(r0->sel.pf_names[1].ranges[0].hi, 3);
	EXPECT_EQ(r0->sel.pf_names[1].ranges[1].lo, 5);
	EXPECT_EQ(r0->sel.pf_names[1].ranges[1].hi, 5);
	EXPECT_STREQ(r0->sel.root_devices.v[0], "0000:3b:00.0");
	EXPECT_EQ(r0->sel.n_numa_nodes, 2);
	EXPECT_EQ(r0->sel.numa_nodes[0], 1);
	EXPECT_TRUE(!r0->legacy_devices);
	EXPECT_STREQ(r1->full_name, "rdma/b");
	EXPECT_EQ(r1->line, 6);
	EXPECT_TRUE(r1->legacy_devices);
	EXPECT_EQ(r1->sel.if_names.n, 2);
	EXPECT_STREQ(r1->sel.if_names.v[1], "ib2");
	EXPECT_EQ(r1->rdma_hca_max, 100000);
	EXPECT_EQ(r0->mode, RDP_MODE_SHARED);
	EXPECT_EQ(r1->mode, RDP_MODE_SHARED);
	rdp_config_free(c);
	rdp_diags_done(&d);
}

static void test_mode(void)
{
	const char *text =
		"{\"configList\": [{\"resourceName\": \"vfs\", \"mode\": \"exclusive\",\n"
		" \"selectors\": {\"vendors\": [\"15b3\"], \"deviceIDs\": [\"101e\"]}},\n"
		" {\"resourceName\": \"s\", \"mode\": \"shared\", \"rdmaHcaMax\": 3,\n"
		"  \"selectors\": {\"vendors\": [\"15b3\"]}}]}";
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;

	EXPECT_EQ(parse(text, &c, &d), 0);
	EXPECT_EQ(d.n, 1);
	EXPECT_EQ(d.n_errors, 0);
	EXPECT_CONTAINS(joined(&d), "c.json:1:41: note: configList[0].mode: "
				    "k8s-rdma-shared-dev-plugin does not know \"mode\"");
	if (!c)
		return;
	EXPECT_EQ(c->resources[0].mode, RDP_MODE_EXCLUSIVE);
	EXPECT_EQ(c->resources[0].rdma_hca_max, 0);
	EXPECT_EQ(c->resources[1].mode, RDP_MODE_SHARED);
	EXPECT_EQ(c->resources[1].rdma_hca_max, 3);
	EXPECT_STREQ(rdp_resource_mode_name(RDP_MODE_EXCLUSIVE), "exclusive");
	EXPECT_STREQ(rdp_resource_mode_name(RDP_MODE_SHARED), "shared");
	rdp_config_free(c);
	rdp_diags_done(&d);
}

static void test_memlock_topology(void)
{
	const char *text =
		"{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 3,\n"
		"  \"selectors\": {\"vendors\": [\"15b3\"]}},\n"
		" {\"resourceName\": \"b\", \"rdmaHcaMax\": 3, \"memlock\": \"64Gi\",\n"
		"  \"reportTopology\": true, \"selectors\": {\"vendors\": [\"15b3\"]}},\n"
		" {\"resourceName\": \"c\", \"rdmaHcaMax\": 3, \"memlock\": 0,\n"
		"  \"reportTopology\": false, \"selectors\": {\"vendors\": [\"15b3\"]}},\n"
		" {\"resourceName\": \"d\", \"mode\": \"exclusive\", \"memlock\": 1048576,\n"
		"  \"selectors\": {\"vendors\": [\"15b3\"]}}]}";
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;

	EXPECT_EQ(parse(text, &c, &d), 0);
	EXPECT_EQ(d.n_errors, 0);
	EXPECT_CONTAINS(joined(&d), "configList[1].memlock: k8s-rdma-shared-dev-plugin does not "
				    "know \"memlock\"");
	if (!c)
		return;
	/* default: unlimited, no topology for a shared pool */
	EXPECT_TRUE(c->resources[0].memlock == RDP_MEMLOCK_UNLIMITED);
	EXPECT_TRUE(!c->resources[0].report_topology);
	EXPECT_TRUE(c->resources[1].memlock == 64ULL << 30);
	EXPECT_TRUE(c->resources[1].report_topology);
	EXPECT_TRUE(c->resources[2].memlock == RDP_MEMLOCK_LEAVE);
	EXPECT_TRUE(!c->resources[2].report_topology);
	EXPECT_TRUE(c->resources[3].memlock == 1048576);
	rdp_config_free(c);
	rdp_diags_done(&d);
}

/* Every error in a file is reported, not only the first. */
static void test_all_errors(void)
{
	const char *text = "{\"periodicUpdateInterval\": -1,\n"
			   " \"configList\": [{\"resourceName\": \"a-b\", \"rdmaHcaMax\": -2,\n"
			   "  \"selectors\": {\"devics\": [\"101d\"], \"vendors\": [\"xyz\"]}}]}";
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;

	EXPECT_EQ(parse(text, &c, &d), -EINVAL);
	EXPECT_EQ(d.n_errors, 5);
	EXPECT_CONTAINS(joined(&d), "c.json:1:28: error: periodicUpdateInterval");
	EXPECT_CONTAINS(joined(&d), "c.json:2:34: error: configList[0].resourceName");
	EXPECT_CONTAINS(joined(&d), "c.json:2:55: error: configList[0].rdmaHcaMax");
	EXPECT_CONTAINS(joined(&d), "c.json:3:17: error: configList[0].selectors: unknown key \"devics\"");
	EXPECT_CONTAINS(joined(&d), "c.json:3:49: error: configList[0].selectors.vendors[0]");
	rdp_diags_done(&d);
}

static void test_unquoted(void)
{
	const char *text = "{ periodicUpdateInterval: 300, configList: [ { resourceName: "
			   "hca_shared_devices_a, rdmaHcaMax: 200, selectors: { vendors: [15b3] } } ] }";
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;

	EXPECT_EQ(parse(text, &c, &d), -EINVAL);
	EXPECT_EQ(d.n_errors, 1);
	EXPECT_CONTAINS(joined(&d), "c.json:1:3: error: keys must be quoted: \"periodicUpdateInterval\"");
	EXPECT_CONTAINS(joined(&d), "note: 8 keys and strings have no quotes");
	rdp_diags_done(&d);
}

static void test_index(void)
{
	const char *text = "{\n  \"a\": [1, {\"b c\": \"x\"}],\n\t\"d\": {\"e\": true}\n}";
	struct rdp_json_index *idx = NULL;
	struct rdp_json_pos k, v;
	char buf[64];

	EXPECT_EQ(rdp_json_index_build(text, strlen(text), &idx, NULL), 0);
	EXPECT_TRUE(rdp_json_index_find(idx, "", &k, &v));
	EXPECT_EQ(v.line, 1);
	EXPECT_EQ(v.col, 1);
	EXPECT_TRUE(rdp_json_index_find(idx, "a", &k, &v));
	EXPECT_EQ(k.line, 2);
	EXPECT_EQ(k.col, 3);
	EXPECT_EQ(v.col, 8);
	EXPECT_TRUE(rdp_json_index_find(idx, "a[1][\"b c\"]", &k, &v));
	EXPECT_EQ(k.col, 13);
	EXPECT_EQ(v.col, 20);
	EXPECT_TRUE(rdp_json_index_find(idx, "d.e", &k, &v));
	EXPECT_EQ(k.line, 3);
	EXPECT_EQ(k.col, 8);
	EXPECT_TRUE(!rdp_json_index_find(idx, "d.f", &k, &v));
	EXPECT_TRUE(!rdp_json_index_find(idx, "a[2]", &k, &v));
	EXPECT_STREQ(rdp_json_path_key(buf, sizeof(buf), "", "a"), "a");
	EXPECT_STREQ(rdp_json_path_key(buf, sizeof(buf), "x", "a.b"), "x[\"a.b\"]");
	EXPECT_STREQ(rdp_json_path_index(buf, sizeof(buf), "x", 3), "x[3]");
	rdp_json_index_free(idx);

	/* Deep nesting is refused, not a stack overflow. */
	{
		char deep[200];

		memset(deep, '[', sizeof(deep));
		idx = NULL;
		EXPECT_EQ(rdp_json_index_build(deep, sizeof(deep), &idx, NULL), -EINVAL);
		EXPECT_TRUE(idx == NULL);
	}
}

static char *read_fixture(const char *name, size_t *ret_len)
{
	const char *src = getenv("RDP_SRCDIR");
	char path[4096];
	FILE *f;
	char *buf;
	size_t n;

	snprintf(path, sizeof(path), "%s/tests/fixtures/configs/%s", src ? src : ".", name);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	buf = malloc(1 << 16);
	n = buf ? fread(buf, 1, (1 << 16) - 1, f) : 0;
	fclose(f);
	if (buf)
		buf[n] = '\0';
	*ret_len = n;
	return buf;
}

static void test_seeds(void)
{
	static const char *const files[] = {
		"seed000.json", "seed001.json", "seed001-selectors.json", "dgx.json",
		"sriov-vfs.json", "legacy-devices.json",
	};
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;
	size_t len;
	char *t;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		t = read_fixture(files[i], &len);
		EXPECT_TRUE(t != NULL);
		if (!t)
			continue;
		c = NULL;
		EXPECT_EQ(rdp_config_parse(t, len, files[i], &c, &d), 0);
		EXPECT_EQ(d.n_errors, 0);
		rdp_config_free(c);
		rdp_diags_done(&d);
		free(t);
	}

	t = read_fixture("seed000.json", &len);
	if (t && rdp_config_parse(t, len, "seed000.json", &c, &d) == 0) {
		EXPECT_EQ(c->periodic_update_interval, 300);
		EXPECT_STREQ(c->resources[0].full_name, "rdma/hca_shared_devices_a");
		EXPECT_EQ(c->resources[0].rdma_hca_max, 200);
		EXPECT_STREQ(c->resources[0].sel.device_ids.v[0], "101d");
		EXPECT_STREQ(c->resources[0].sel.link_types.v[0], "infiniband");
		rdp_config_free(c);
	}
	rdp_diags_done(&d);
	free(t);

	t = read_fixture("seed-unquoted.json", &len);
	c = NULL;
	if (t) {
		EXPECT_EQ(rdp_config_parse(t, len, "u.json", &c, &d), -EINVAL);
		EXPECT_CONTAINS(joined(&d), "u.json:1:3: error: keys must be quoted");
	}
	rdp_diags_done(&d);
	free(t);
}

static void test_load_file(void)
{
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;

	EXPECT_EQ(rdp_config_load_file("/nonexistent/config.json", &c, &d), -ENOENT);
	EXPECT_CONTAINS(joined(&d), "/nonexistent/config.json: error: cannot read: No such file");
	rdp_diags_done(&d);
	EXPECT_EQ(rdp_config_load_file("/", &c, &d), -EISDIR);
	rdp_diags_done(&d);
	EXPECT_TRUE(c == NULL);
}

static void test_too_big(void)
{
	size_t n = RDP_CONFIG_MAX_BYTES + 1;
	char *t = malloc(n);
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;

	if (!t)
		return;
	memset(t, ' ', n);
	EXPECT_EQ(rdp_config_parse(t, n, "big.json", &c, &d), -EFBIG);
	EXPECT_CONTAINS(joined(&d), "big.json: error: larger than");
	rdp_diags_done(&d);
	free(t);
}

/* Failing each allocation in turn: -ENOMEM (or a clean result), never a leak or a crash. */
/* "env" and "envFromDevices": every error with its position, the warnings, the values. */
#define ENVRES(x) RES("\"selectors\": {\"vendors\": [\"15b3\"]}, " x)

static const struct {
	const char *text;
	const char *expect;
} env_errors[] = {
	{ ENVRES("\"env\": [\"A=1\"]"), "c.json:1:99: error: configList[0].env: must be an object of names and values such as {\"NCCL_IB_TC\": \"106\"}, not a list" },
	{ ENVRES("\"env\": \"A=1\""), "c.json:1:99: error: configList[0].env: must be an object of names and values such as {\"NCCL_IB_TC\": \"106\"}, not a string" },
	{ ENVRES("\"env\": {\"NCCL_IB_TIMEOUT\": 22}"), "c.json:1:119: error: configList[0].env.NCCL_IB_TIMEOUT: must be a string: write \"22\"" },
	{ ENVRES("\"env\": {\"X\": 1.5}"), "c.json:1:105: error: configList[0].env.X: must be a string: write \"1.5\"" },
	{ ENVRES("\"env\": {\"X\": true}"), "c.json:1:105: error: configList[0].env.X: must be a string: write \"true\"" },
	{ ENVRES("\"env\": {\"X\": null}"), "c.json:1:105: error: configList[0].env.X: must be a string, not null" },
	{ ENVRES("\"env\": {\"1X\": \"1\"}"), "c.json:1:100: error: configList[0].env.1X: \"1X\" is not a variable name: it must start with a letter or '_' and contain only letters, digits and '_'" },
	{ ENVRES("\"env\": {\"A-B\": \"1\"}"), "c.json:1:100: error: configList[0].env[\"A-B\"]: \"A-B\" is not a variable name" },
	{ ENVRES("\"env\": {\"\": \"1\"}"), "error: configList[0].env[\"\"]: empty variable name" },
	{ ENVRES("\"env\": {\"RDMA_DEVICE_X\": \"1\"}"), "c.json:1:100: error: configList[0].env.RDMA_DEVICE_X: \"RDMA_DEVICE_X\": names starting with RDMA_DEVICE_ are rdma-dp's own" },
	{ ENVRES("\"env\": {\"X\": \"a\\nb\"}"), "c.json:1:105: error: configList[0].env.X: contains a line break: a value must be one line" },
	{ ENVRES("\"env\": {\"X\": \"a\\rb\"}"), "contains a line break" },
	{ ENVRES("\"env\": {\"X\": \"a\\u0000b\"}"), "error: \\u0000 is not allowed" },
	{ ENVRES("\"envFromDevices\": [\"NCCL_IB_HCA\"],\n \"env\": {\"NCCL_IB_HCA\": \"=mlx5_0\"}"), "c.json:2:10: error: configList[0].env.NCCL_IB_HCA: \"NCCL_IB_HCA\" is also in \"envFromDevices\", which computes it from the devices a container gets: remove one of them" },
	{ ENVRES("\"env\": {\"UCX_NET_DEVICES\": \"mlx5_0:1\"}, \"envFromDevices\": [\"UCX_NET_DEVICES\"]"), "c.json:1:100: error: configList[0].env.UCX_NET_DEVICES: \"UCX_NET_DEVICES\" is also in \"envFromDevices\"" },
	{ ENVRES("\"envFromDevices\": \"NCCL_IB_HCA\""), "c.json:1:110: error: configList[0].envFromDevices: must be a list of variable names: write [\"NCCL_IB_HCA\"]" },
	{ ENVRES("\"envFromDevices\": {}"), "c.json:1:110: error: configList[0].envFromDevices: must be a list of variable names (\"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"), not an object" },
	{ ENVRES("\"envFromDevices\": []"), "c.json:1:110: error: configList[0].envFromDevices: empty list: it computes nothing; remove the key or add \"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"" },
	{ ENVRES("\"envFromDevices\": [1]"), "c.json:1:111: error: configList[0].envFromDevices[0]: must be a string (\"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"), not an integer" },
	{ ENVRES("\"envFromDevices\": [\"NCCL_IB_HCAS\"]"), "c.json:1:111: error: configList[0].envFromDevices[0]: \"NCCL_IB_HCAS\" is not a variable rdma-dp computes: expected one of \"NCCL_IB_HCA\", \"UCX_NET_DEVICES\" (did you mean \"NCCL_IB_HCA\"?)" },
	{ ENVRES("\"envFromDevices\": [\"ucx_net_devices\"]"), "(did you mean \"UCX_NET_DEVICES\"?)" },
	{ ENVRES("\"envFromDevices\": [\"NCCL_SOCKET_IFNAME\"]"), "\"NCCL_SOCKET_IFNAME\" is not a variable rdma-dp computes: expected one of \"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"; constant variables go in \"env\"" },
	{ ENVRES("\"envFromDevices\": [\"NCCL_IB_GID_INDEX\"]"), "c.json:1:111: error: configList[0].envFromDevices[0]: \"NCCL_IB_GID_INDEX\" cannot be computed: Allocate runs before the pod has an address, and NCCL >= 2.21 picks the GID itself" },
	{ ENVRES("\"envFromDevices\": [\"RDMA_DEVICE_RDMA_A\"]"), "\"RDMA_DEVICE_RDMA_A\": RDMA_DEVICE_<RESOURCE> is always set, without asking" },
	{ ENVRES("\"envFromDevices\": [\"NCCL_IB_HCA\", \"NCCL_IB_HCA\"]"), "c.json:1:126: error: configList[0].envFromDevices[1]: \"NCCL_IB_HCA\" is listed twice" },
	/* keys other plugins or a first guess use */
	{ ENVRES("\"envs\": {}"), "c.json:1:92: error: configList[0]: unknown key \"envs\": constant variables go in \"env\": {\"NAME\": \"value\"}" },
	{ ENVRES("\"environment\": {}"), "unknown key \"environment\": constant variables go in \"env\"" },
	{ ENVRES("\"extraEnv\": {}"), "unknown key \"extraEnv\": constant variables go in \"env\"" },
	{ ENVRES("\"ncclEnv\": true"), "unknown key \"ncclEnv\": variables computed from the devices go in \"envFromDevices\": [\"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"]" },
	{ ENVRES("\"setNcclEnv\": true"), "unknown key \"setNcclEnv\": variables computed from the devices go in \"envFromDevices\"" },
	{ ENVRES("\"envFromDevice\": []"), "unknown key \"envFromDevice\": variables computed from the devices go in \"envFromDevices\"" },
	{ RES("\"selectors\": {\"vendors\": [\"15b3\"], \"env\": {}}"), "configList[0].selectors: unknown key \"env\"" },
};

static void test_env_errors(void)
{
	char name[200], big[RDP_ENV_VALUE_MAX + 64], many[64 * 20 + 200];
	size_t n;

	for (size_t i = 0; i < sizeof(env_errors) / sizeof(env_errors[0]); i++) {
		struct rdp_diags d = {};
		struct rdp_config *c = NULL;

		EXPECT_EQ(parse(env_errors[i].text, &c, &d), -EINVAL);
		EXPECT_TRUE(c == NULL);
		EXPECT_CONTAINS(joined(&d), env_errors[i].expect);
		rdp_config_free(c);
		rdp_diags_done(&d);
	}

	/* bounds: name 128 bytes, value 4096 bytes, 64 entries */
	for (int pass = 0; pass < 6; pass++) {
		struct rdp_diags d = {};
		struct rdp_config *c = NULL;
		char *text;
		int want = pass % 2 ? -EINVAL : 0;

		if (pass < 2) {
			memset(name, 'N', sizeof(name));
			name[RDP_ENV_NAME_MAX + pass] = '\0';
			text = rdp_asprintf(ENVRES("\"env\": {\"%s\": \"1\"}"), name);
		} else if (pass < 4) {
			memset(big, 'v', sizeof(big));
			big[RDP_ENV_VALUE_MAX + pass - 2] = '\0';
			text = rdp_asprintf(ENVRES("\"env\": {\"V\": \"%s\"}"), big);
		} else {
			n = (size_t)snprintf(many, sizeof(many), "{");
			for (int k = 0; k < RDP_ENV_MAX_VARS + pass - 4; k++)
				n += (size_t)snprintf(many + n, sizeof(many) - n, "%s\"V%d\": \"1\"",
						      k ? ", " : "", k);
			snprintf(many + n, sizeof(many) - n, "}");
			text = rdp_asprintf(ENVRES("\"env\": %s"), many);
		}
		EXPECT_EQ(parse(text, &c, &d), want);
		if (pass == 1)
			EXPECT_CONTAINS(joined(&d), "c.json:1:100: error: configList[0].env.NNNN");
		if (pass == 1)
			EXPECT_CONTAINS(joined(&d), ": variable name too long (129 bytes, at most 128)");
		if (pass == 3)
			EXPECT_CONTAINS(joined(&d), "c.json:1:105: error: configList[0].env.V: value "
						    "too long (4097 bytes, at most 4096)");
		if (pass == 5)
			EXPECT_CONTAINS(joined(&d), "c.json:1:99: error: configList[0].env: too many "
						    "variables (65, at most 64)");
		if (c && pass == 4)
			EXPECT_EQ(c->resources[0].n_env, RDP_ENV_MAX_VARS);
		rdp_config_free(c);
		rdp_diags_done(&d);
		rdp_free(text);
	}
}

static void test_env_values(void)
{
	const char *text =
		"{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1,\n"
		"  \"selectors\": {\"vendors\": [\"15b3\"]},\n"
		"  \"envFromDevices\": [\"UCX_NET_DEVICES\", \"NCCL_IB_HCA\"],\n"
		"  \"env\": {\"NCCL_IB_TC\": \"106\", \"_x\": \"\", \"NCCL_IB_ADDR_RANGE\": \"10.0.0.0/16\"}},\n"
		" {\"resourceName\": \"b\", \"mode\": \"exclusive\", \"selectors\": {\"vendors\": [\"15b3\"]}}]}";
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;
	const struct rdp_resource *r0;

	EXPECT_EQ(parse(text, &c, &d), 0);
	EXPECT_EQ(d.n_warnings, 0);
	EXPECT_CONTAINS(joined(&d), "c.json:3:3: note: configList[0].envFromDevices: "
				    "k8s-rdma-shared-dev-plugin does not know \"envFromDevices\" and "
				    "ignores it: there containers get no such variables");
	EXPECT_CONTAINS(joined(&d), "c.json:4:3: note: configList[0].env: k8s-rdma-shared-dev-plugin "
				    "does not know \"env\" and ignores it");
	if (!c)
		return;
	r0 = &c->resources[0];
	EXPECT_EQ(r0->env_from, RDP_ENV_NCCL_IB_HCA | RDP_ENV_UCX_NET_DEVICES);
	EXPECT_EQ(r0->n_env, 3);
	if (r0->n_env == 3) {
		EXPECT_STREQ(r0->env[0].name, "NCCL_IB_TC");
		EXPECT_STREQ(r0->env[0].value, "106");
		EXPECT_EQ(r0->env[0].line, 4);
		EXPECT_EQ(r0->env[0].col, 11);
		EXPECT_STREQ(r0->env[1].name, "_x");
		EXPECT_STREQ(r0->env[1].value, "");
		EXPECT_STREQ(r0->env[2].value, "10.0.0.0/16");
	}
	EXPECT_EQ(c->resources[1].env_from, 0);
	EXPECT_EQ(c->resources[1].n_env, 0);
	EXPECT_TRUE(c->resources[1].env == NULL);
	EXPECT_STREQ(rdp_env_from_name(RDP_ENV_NCCL_IB_HCA), "NCCL_IB_HCA");
	EXPECT_STREQ(rdp_env_from_name(RDP_ENV_UCX_NET_DEVICES), "UCX_NET_DEVICES");
	EXPECT_TRUE(rdp_env_from_name(4) == NULL);
	rdp_config_free(c);
	rdp_diags_done(&d);
}

/* Valid, with a warning: each text and the warning it gives, position included. */
static const struct {
	const char *text;
	const char *expect;
} env_warnings[] = {
	{ ENVRES("\"env\": {\"NCCL_IB_GID_INDEX\": \"3\"}"), "c.json:1:100: warning: configList[0].env.NCCL_IB_GID_INDEX: one GID index for every HCA and every pod, fixed before the pod has an address: NCCL >= 2.21 picks the GID itself; to steer it, set NCCL_IB_ADDR_RANGE, NCCL_IB_ADDR_FAMILY or NCCL_IB_ROCE_VERSION_NUM instead" },
	{ ENVRES("\"env\": {\"NCCL_IB_HCA\": \"mlx5_1\"}"), "c.json:1:115: warning: configList[0].env.NCCL_IB_HCA: \"mlx5_1\" without a leading '=' matches prefixes (mlx5_1 also selects mlx5_10..mlx5_19): write \"=mlx5_1\", or let \"envFromDevices\": [\"NCCL_IB_HCA\"] compute it from the devices a container gets" },
	{ ENVRES("\"env\": {\"NCCL_IB_HCA\": \"^mlx5_1\"}"), "write \"^=mlx5_1\"" },
	{ ENVRES("\"env\": {\"NCCL_IB_TIMOUT\": \"22\"}"), "c.json:1:100: warning: configList[0].env.NCCL_IB_TIMOUT: \"NCCL_IB_TIMOUT\" is not a variable NCCL or UCX is known to read (did you mean \"NCCL_IB_TIMEOUT\"?)" },
	{ ENVRES("\"env\": {}"), "c.json:1:99: warning: configList[0].env: empty: it sets nothing; remove the key" },
	/* two resources giving a container the same variable */
	{ "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1, \"envFromDevices\": [\"NCCL_IB_HCA\"],\n"
	  " \"selectors\": {\"vendors\": [\"15b3\"]}},\n"
	  " {\"resourceName\": \"b\", \"rdmaHcaMax\": 1, \"selectors\": {\"vendors\": [\"15b3\"]},\n"
	  "  \"envFromDevices\": [\"NCCL_IB_HCA\"]}]}",
	  "c.json:4:3: warning: configList[1].envFromDevices: \"NCCL_IB_HCA\" is also computed by rdma/a (line 1): a container that gets both sees one of them (kubelet keeps the first it meets); put the NICs a job uses in one resource" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1, \"env\": {\"NCCL_IB_TC\": \"106\"},\n"
	  " \"selectors\": {\"vendors\": [\"15b3\"]}},\n"
	  " {\"resourceName\": \"b\", \"rdmaHcaMax\": 1, \"selectors\": {\"vendors\": [\"15b3\"]},\n"
	  "  \"env\": {\"NCCL_IB_TC\": \"104\"}}]}",
	  "c.json:4:11: warning: configList[1].env.NCCL_IB_TC: \"NCCL_IB_TC\" is also set by rdma/a (line 1), to \"106\": a container that gets both sees one of them (kubelet keeps the first it meets)" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1, \"envFromDevices\": [\"UCX_NET_DEVICES\"],\n"
	  " \"selectors\": {\"vendors\": [\"15b3\"]}},\n"
	  " {\"resourceName\": \"b\", \"rdmaHcaMax\": 1, \"selectors\": {\"vendors\": [\"15b3\"]},\n"
	  "  \"env\": {\"UCX_NET_DEVICES\": \"mlx5_0:1\"}}]}",
	  "c.json:4:11: warning: configList[1].env.UCX_NET_DEVICES: \"UCX_NET_DEVICES\" is also computed by rdma/a (line 1)" },
	{ "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1, \"env\": {\"NCCL_IB_HCA\": \"=mlx5_0\"},\n"
	  " \"selectors\": {\"vendors\": [\"15b3\"]}},\n"
	  " {\"resourceName\": \"b\", \"rdmaHcaMax\": 1, \"selectors\": {\"vendors\": [\"15b3\"]},\n"
	  "  \"envFromDevices\": [\"NCCL_IB_HCA\"]}]}",
	  "c.json:4:3: warning: configList[1].envFromDevices: \"NCCL_IB_HCA\" is also set by rdma/a (line 1), to \"=mlx5_0\"" },
	/* RDMA_DEVICE_<RESOURCE> of two resources */
	{ "{\"configList\": [{\"resourceName\": \"b_c\", \"rdmaHcaMax\": 1, \"selectors\": {\"vendors\": [\"15b3\"]}},\n"
	  " {\"resourceName\": \"c\", \"resourcePrefix\": \"rdma-b\", \"rdmaHcaMax\": 1, \"selectors\": {\"vendors\": [\"15b3\"]}}]}",
	  "c.json:2:19: warning: configList[1].resourceName: rdma-b/c and rdma/b_c (line 1) both list their devices in RDMA_DEVICE_RDMA_B_C" },
};

static void test_env_warnings(void)
{
	static const char *const same =
		"{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1, \"env\": {\"NCCL_IB_TC\": \"106\"},\n"
		" \"selectors\": {\"vendors\": [\"15b3\"]}},\n"
		" {\"resourceName\": \"b\", \"rdmaHcaMax\": 1, \"selectors\": {\"vendors\": [\"15b3\"]},\n"
		"  \"env\": {\"NCCL_IB_TC\": \"106\", \"NCCL_IB_HCA\": \"=mlx5_0\", \"UCX_NET_DEVICES\": \"mlx5_0:1\"}}]}";
	struct rdp_diags d = {};
	struct rdp_config *c = NULL;

	for (size_t i = 0; i < sizeof(env_warnings) / sizeof(env_warnings[0]); i++) {
		EXPECT_EQ(parse(env_warnings[i].text, &c, &d), 0);
		EXPECT_EQ(d.n_errors, 0);
		EXPECT_EQ(d.n_warnings, 1);
		EXPECT_CONTAINS(joined(&d), env_warnings[i].expect);
		rdp_config_free(c);
		c = NULL;
		rdp_diags_done(&d);
	}
	/* the same value in both: no warning; a well-formed NCCL_IB_HCA: none either */
	EXPECT_EQ(parse(same, &c, &d), 0);
	EXPECT_EQ(d.n_warnings, 0);
	rdp_config_free(c);
	rdp_diags_done(&d);
}

static void test_failmalloc(void)
{
	size_t len;
	char *t = read_fixture("seed001-selectors.json", &len);
	const char *bad = RES("\"selectors\": {\"devics\": [\"101d\"], \"vendors\": [\"0x15B3\"]}");
	unsigned long total;

	if (!t)
		return;
	for (int pass = 0; pass < 2; pass++) {
		const char *text = pass ? bad : t;
		size_t tlen = pass ? strlen(bad) : len;
		struct rdp_diags d = {};
		struct rdp_config *c = NULL;
		int want = pass ? -EINVAL : 0;

		rdp_alloc_fail_at(0);
		EXPECT_EQ(rdp_config_parse(text, tlen, "f.json", &c, &d), want);
		total = rdp_alloc_count();
		rdp_config_free(c);
		rdp_diags_done(&d);
		EXPECT_TRUE(total > 10);
		for (unsigned long i = 1; i <= total; i++) {
			int r;

			c = NULL;
			rdp_alloc_fail_at(i);
			r = rdp_config_parse(text, tlen, "f.json", &c, &d);
			rdp_alloc_fail_at(0);
			EXPECT_TRUE(r == -ENOMEM || r == want);
			if (r != -ENOMEM && r != want)
				fprintf(stderr, "pass %d alloc %lu: %d %s\n", pass, i, r, joined(&d));
			if (r == 0)
				EXPECT_TRUE(c != NULL);
			else
				EXPECT_TRUE(c == NULL);
			rdp_config_free(c);
			rdp_diags_done(&d);
		}
	}
	free(t);
}

/*
 * Found by fuzz-config (tests/fuzz/corpus/config/regress-newline-in-key.json): a key with an
 * escaped newline or a raw control byte was quoted as is, and a diagnostic spanned lines.
 */
static void test_one_line_diags(void)
{
	static const char *const texts[] = {
		/* a syntax error quoting the key */
		"{\"a\\nb\" 1}",
		/* unknown keys */
		"{\"configList\\n\": [], \"x\\r\\u001b[2J\": 1}",
		/* invalid values */
		("{\"configList\": [{\"resourceName\": \"a\\nb\", \"rdmaHcaMax\": 1,"
		 " \"selectors\": {\"vendors\": [\"15b3\\n\"]}}]}"),
	};

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct rdp_diags d = {};
		struct rdp_config *c = NULL;

		EXPECT_EQ(parse(texts[i], &c, &d), -EINVAL);
		EXPECT_TRUE(d.n > 0);
		for (size_t j = 0; j < d.n; j++) {
			EXPECT_TRUE(strchr(d.v[j].text, '\n') == NULL);
			EXPECT_TRUE(strchr(d.v[j].text, '\r') == NULL);
			EXPECT_TRUE(strchr(d.v[j].text, 0x1b) == NULL);
		}
		rdp_config_free(c);
		rdp_diags_done(&d);
	}
}

int main(void)
{
	test_errors();
	test_one_line_diags();
	test_valid();
	test_values();
	test_mode();
	test_memlock_topology();
	test_env_errors();
	test_env_values();
	test_env_warnings();
	test_all_errors();
	test_unquoted();
	test_index();
	test_seeds();
	test_load_file();
	test_too_big();
	test_failmalloc();
	return test_summary("test-config");
}
