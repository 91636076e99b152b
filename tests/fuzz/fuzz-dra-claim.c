/* SPDX-License-Identifier: MIT */
/*
 * rdp_dra_claim_parse() (dra-claims.h) on arbitrary bytes, against a fixed inventory of three
 * devices (two offered, one unusable) and the UID the seeds carry; byte 0 picks whether an
 * allocation fails on the way (every 8th value: the (byte/8)-th allocation).
 *
 * Beyond "no crash, no leak": 0 or a documented errno; an error text exactly when an error
 * other than -ENOMEM is returned; on success every result has our pool, an offered device
 * and a base request name (no '/'), and the claim's UID is the one asked for; on failure
 * nothing is left in the claim.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "dra-claims.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

#define UID "6f1c2a8e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"

static struct rdp_host host;
static struct rdp_device devices[3];
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
		devices[i].usability = i == 2 ? RDP_UNUSABLE_NO_UVERBS : RDP_USABLE;
	}
	host.devices = devices;
	host.n_devices = 3;
	if (rdp_dra_inventory_build(&host, &inv) < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct rdp_dra_claim_ctx ctx = {
		.driver = RDP_DRA_DEFAULT_DRIVER, .uid = UID, .pool = "node-a", .inv = &inv};
	struct rdp_dra_claim c = {0};
	char *err = NULL;
	int r;

	setup();
	if (size < 1)
		return 0;
	if (data[0] % 8 == 7)
		rdp_alloc_fail_at(data[0] / 8 + 1);
	r = rdp_dra_claim_parse((const char *)data + 1, size - 1, &ctx, &c, &err);
	rdp_alloc_fail_at(0);
	CHECK(r == 0 || r == -EBADMSG || r == -ESTALE || r == -ENOMSG || r == -E2BIG ||
	      r == -ENODEV || r == -ENOMEM);
	if (r == 0) {
		CHECK(!err);
		CHECK(c.uid && strcmp(c.uid, UID) == 0 && c.namespace && c.name);
		CHECK(c.n_results <= RDP_DRA_CLAIM_MAX_RESULTS);
		for (size_t i = 0; i < c.n_results; i++) {
			CHECK(strcmp(c.results[i].pool, "node-a") == 0);
			CHECK(rdp_dra_inventory_find(&inv, c.results[i].device));
			CHECK(c.results[i].request[0] && !strchr(c.results[i].request, '/'));
		}
	} else {
		CHECK(r == -ENOMEM || (err && err[0]));
		CHECK(!c.uid && !c.results && c.n_results == 0);
	}
	rdp_free(err);
	rdp_dra_claim_done(&c);
	return 0;
}
