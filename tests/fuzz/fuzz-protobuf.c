/* SPDX-License-Identifier: MIT */
/*
 * protobuf-c decoding of every request message the daemon receives, with the project's
 * allocator: byte 0 picks the message type, the rest is the packed message. A message that
 * unpacks is packed again and that unpacked; every unpack is freed.
 *
 * AllocateRequest and PreferredAllocationRequest also go through dp-service's answers
 * (rdp_dp_allocate, rdp_dp_preferred_allocation) over two small fixed states, a shared one and
 * an exclusive one (units by PCI address, one unhealthy, one without PCI: prefer.c's path),
 * which is what a kubelet request reaches in the daemon.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "alloc.h"
#include "deviceplugin.pb-c.h"
#include "dp-service.h"
#include "pluginregistration.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ProtobufCMessageDescriptor *const types[] = {
	&v1beta1__empty__descriptor,
	&v1beta1__allocate_request__descriptor,
	&v1beta1__preferred_allocation_request__descriptor,
	&v1beta1__pre_start_container_request__descriptor,
	&v1beta1__register_request__descriptor,
	&pluginregistration__info_request__descriptor,
	&pluginregistration__registration_status__descriptor,
};

static void roundtrip(const ProtobufCMessageDescriptor *d, const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = rdp_malloc(n);
	ProtobufCMessage *again;

	if (!buf)
		abort();
	if (protobuf_c_message_pack(m, buf) != n)
		abort();
	again = protobuf_c_message_unpack(d, rdp_protobuf_allocator(), n, buf);
	/*
	 * No check that it unpacks again, or to the same size: protobuf-c 1.4 accepts an
	 * unknown field of number 0 written as an overlong varint tag ("80 00"), keeps it, packs
	 * it back as "00" and refuses that. Known fields alone always round-trip.
	 */
	if (again)
		protobuf_c_message_free_unpacked(again, rdp_protobuf_allocator());
	rdp_free(buf);
}

static char devices[] = "mlx5_0,mlx5_1";
static char s0[] = "/dev/infiniband/rdma_cm", s1[] = "/dev/infiniband/uverbs0";
static char s2[] = "/dev/infiniband/uverbs1", s3[] = "/dev/infiniband/uverbs2";
static char *specs[] = { s0, s1, s2, s3 };
static const struct rdp_dp_state shared_state = {
	.units = 4, .healthy = true, .numa_node = 1, .n_devices = 2, .n_usable = 2,
	.n_active = 1, .devices = devices, .specs = specs, .n_specs = 2,
	.rdma_cm_spec = 0,
};
static char rp[] = "0000:3a:00.0", f0[] = "0000:3b:00.0", f2[] = "0000:3b:00.2";
static char *chain0[] = { rp, f0 }, *chain2[] = { rp, f2 };
static size_t u0_specs[] = { 1 }, u1_specs[] = { 2 }, u2_specs[] = { 3 };
static struct rdp_dp_unit units[] = {
	{ .id = "0000:3b:00.0", .device = "mlx5_0", .healthy = true, .numa_node = 0,
	  .specs = u0_specs, .n_specs = 1,
	  .place = { .kind = RDP_TOPO_NIC, .pcie_root = "pci0000:3a", .chain = chain0,
		     .n_chain = 2, .numa_node = 0 } },
	{ .id = "0000:3b:00.2", .device = "mlx5_1", .healthy = false, .numa_node = 0,
	  .specs = u1_specs, .n_specs = 1,
	  .place = { .kind = RDP_TOPO_NIC, .pcie_root = "pci0000:3a", .chain = chain2,
		     .n_chain = 2, .numa_node = 0 } },
	{ .id = "rxe0", .device = "rxe0", .healthy = true, .numa_node = -1,
	  .specs = u2_specs, .n_specs = 1,
	  .place = { .kind = RDP_TOPO_NIC, .is_virtual = true, .numa_node = -1 } },
};
static const struct rdp_dp_state exclusive_state = {
	.mode = RDP_MODE_EXCLUSIVE, .units = 3, .healthy = true, .numa_node = -1,
	.n_devices = 3, .n_usable = 3, .n_active = 2, .devices = devices, .specs = specs,
	.n_specs = 4, .unit_v = units, .n_unit_v = 3, .rdma_cm_spec = 0,
};

static void answer_one(const struct rdp_dp_state *st, int type, const uint8_t *req, size_t len)
{
	uint8_t *out = NULL;
	size_t out_len = 0;
	char *err = NULL;
	int r;

	if (type == 1)
		r = rdp_dp_allocate(st, req, len, &out, &out_len, &err);
	else
		r = rdp_dp_preferred_allocation(st, req, len, &out, &out_len, &err);
	if (r == 0) {
		const ProtobufCMessageDescriptor *d = type == 1 ?
			&v1beta1__allocate_response__descriptor :
			&v1beta1__preferred_allocation_response__descriptor;
		ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, out_len, out);

		if (!m)
			abort(); /* our answers parse */
		protobuf_c_message_free_unpacked(m, NULL);
		if (err)
			abort();
	} else if (r == -EINVAL || r == -E2BIG || r == -ENOBUFS) {
		if (!err || out)
			abort(); /* an error says which */
	} else if (r != -EBADMSG && r != -ENOMEM) {
		abort();
	}
	rdp_free(out);
	rdp_free(err);
}

static void answer(int type, const uint8_t *req, size_t len)
{
	answer_one(&shared_state, type, req, len);
	answer_one(&exclusive_state, type, req, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const ProtobufCMessageDescriptor *d;
	ProtobufCMessage *m;
	int type;

	if (size < 1 || size > 1 << 16)
		return 0;
	type = data[0] % (int)(sizeof(types) / sizeof(types[0]));
	d = types[type];
	m = protobuf_c_message_unpack(d, rdp_protobuf_allocator(), size - 1, data + 1);
	if (m) {
		if (m->descriptor != d)
			abort();
		roundtrip(d, m);
		protobuf_c_message_free_unpacked(m, rdp_protobuf_allocator());
	}
	if (type == 1 || type == 2)
		answer(type, data + 1, size - 1);
	return 0;
}
