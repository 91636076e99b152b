/* SPDX-License-Identifier: MIT */
/*
 * The slice side of dra-slices.h on what an API server may answer: the input (after byte 0)
 * as JSON, the found slices of rdp_dra_slices_compare() against the desired pool of a fixed
 * three-device inventory (one device with its port down, so tainted), each found slice through
 * rdp_dra_slice_check() and, for an UPDATE, rdp_dra_slice_for_update(); and the input cut at
 * its first NUL into two strings for rdp_dra_quantity_equal(). Byte 0 picks the taint effect
 * (its low two bits).
 *
 * Beyond "no crash, no leak": compare answers 0, -EINVAL or -E2BIG, an action in range and a
 * generation >= 0; the desired pool compared with itself as found is UNCHANGED; check answers
 * 0 or -EINVAL with an error text; the PUT body keeps the desired devices; quantity equality
 * is reflexive and symmetric.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra-slices.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

static struct rdp_host host;
static struct rdp_device devices[3];
static struct rdp_port ports[3];
static struct rdp_dra_inventory inv;

static void setup(void)
{
	if (inv.host)
		return;
	for (size_t i = 0; i < 3; i++) {
		snprintf(devices[i].name, sizeof(devices[i].name), "mlx5_%zu", i);
		snprintf(devices[i].pci_address, sizeof(devices[i].pci_address), "0000:%02zx:00.0",
			 0x18 + i);
		devices[i].numa_node = -1;
		devices[i].usability = RDP_USABLE;
		ports[i] = (struct rdp_port){.num = 1, .state = i == 1 ? RDP_PORT_DOWN : RDP_PORT_ACTIVE,
					     .phys_state = -1, .roce_v2_ipv4_gid_index = -1};
		snprintf(ports[i].state_name, sizeof(ports[i].state_name), "%s",
			 i == 1 ? "DOWN" : "ACTIVE");
		devices[i].ports = &ports[i];
		devices[i].n_ports = 1;
	}
	host.devices = devices;
	host.n_devices = 3;
	if (rdp_dra_inventory_build(&host, &inv) < 0)
		abort();
}

static void quantities(const char *data, size_t size)
{
	char a[96], b[96];
	const char *nul = memchr(data, 0, size);
	size_t na = nul ? (size_t)(nul - data) : size, nb = nul ? size - na - 1 : 0;

	if (na >= sizeof(a) || nb >= sizeof(b))
		return;
	memcpy(a, data, na);
	a[na] = 0;
	memcpy(b, nul ? nul + 1 : "", nb);
	b[nb] = 0;
	CHECK(rdp_dra_quantity_equal(a, a));
	CHECK(rdp_dra_quantity_equal(a, b) == rdp_dra_quantity_equal(b, a));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rdp_dra_node node = {.driver = RDP_DRA_DEFAULT_DRIVER, .node_name = "node-a",
				    .node_uid = "0b7e6c1e-7c39-4a55-9d56-1a2b3c4d5e6f"};
	struct rdp_dra_sync sy;
	json_t *desired = NULL, *found, *self, *s;
	size_t i;
	int r;

	setup();
	if (size < 1)
		return 0;
	quantities((const char *)data + 1, size - 1);
	node.port_down_taint = (enum rdp_dra_taint_effect)(data[0] & 3);
	if (rdp_dra_slices_build(&node, &inv, 2, &desired) < 0)
		abort();
	/* the desired pool, as found, is unchanged */
	self = json_deep_copy(desired);
	json_array_foreach(self, i, s)
		json_object_set_new(json_object_get(s, "metadata"), "name",
				    json_string("node-a-rdma.rdma-dp.io-000-abcde"));
	CHECK(rdp_dra_slices_compare(self, desired, &sy) == 0);
	CHECK(sy.action == RDP_DRA_SYNC_UNCHANGED && sy.generation == 2);
	json_decref(self);

	found = json_loadb((const char *)data + 1, size - 1, JSON_DISABLE_EOF_CHECK, NULL);
	if (json_is_object(found)) {
		json_t *arr = json_array();

		json_array_append(arr, found);
		json_decref(found);
		found = arr;
	}
	r = rdp_dra_slices_compare(found, desired, &sy);
	CHECK(r == 0 || r == -EINVAL || r == -E2BIG);
	if (r == 0) {
		CHECK(sy.action <= RDP_DRA_SYNC_RECREATE && sy.generation >= 0);
		if (sy.action == RDP_DRA_SYNC_UPDATE) {
			json_t *put = rdp_dra_slice_for_update(json_array_get(desired, 0),
							       json_array_get(found, sy.update_index));

			if (put)
				CHECK(json_array_size(json_object_get(json_object_get(put, "spec"),
								      "devices")) == 3);
			json_decref(put);
		}
	}
	json_array_foreach(json_is_array(found) ? found : NULL, i, s) {
		char err[256] = "";

		r = rdp_dra_slice_check(s, err, sizeof(err));
		CHECK(r == 0 || (r == -EINVAL && err[0]));
		if (i >= 8)
			break;
	}
	json_decref(found);
	json_decref(desired);
	return 0;
}
