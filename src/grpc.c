/* SPDX-License-Identifier: MIT */
/* PLACEHOLDER until the gRPC layer lands: keeps the tree linking. */
#include "grpc.h"

#include <errno.h>

void rdp_grpc_limits_default(struct rdp_grpc_limits *l) { (void)l; }
int rdp_grpc_server_new(struct rdp_event *e, const char *path, const struct rdp_grpc_method *methods,
			size_t n_methods, const struct rdp_grpc_limits *limits, void *userdata,
			struct rdp_grpc_server **ret) { return -ENOSYS; }
struct rdp_grpc_server *rdp_grpc_server_free(struct rdp_grpc_server *s) { return NULL; }
bool rdp_grpc_server_socket_present(const struct rdp_grpc_server *s) { return false; }
const char *rdp_grpc_server_path(const struct rdp_grpc_server *s) { return ""; }
size_t rdp_grpc_server_connections(const struct rdp_grpc_server *s) { return 0; }
int rdp_grpc_call_reply(struct rdp_grpc_call *c, const uint8_t *msg, size_t len) { return -ENOSYS; }
int rdp_grpc_call_reply_pb(struct rdp_grpc_call *c, const struct ProtobufCMessage *msg) { return -ENOSYS; }
int rdp_grpc_call_send(struct rdp_grpc_call *c, const uint8_t *msg, size_t len) { return -ENOSYS; }
int rdp_grpc_call_send_pb(struct rdp_grpc_call *c, const struct ProtobufCMessage *msg) { return -ENOSYS; }
int rdp_grpc_call_fail(struct rdp_grpc_call *c, enum rdp_grpc_code code, const char *message) { return -ENOSYS; }
void rdp_grpc_call_set_close_cb(struct rdp_grpc_call *c,
				void (*cb)(struct rdp_grpc_call *c, void *userdata), void *userdata) { }
const char *rdp_grpc_call_path(const struct rdp_grpc_call *c) { return ""; }
uint64_t rdp_grpc_call_id(const struct rdp_grpc_call *c) { return 0; }
int rdp_grpc_unary_call(struct rdp_event *e, const char *path, const char *method,
			const uint8_t *req, size_t len, uint64_t timeout_usec, rdp_grpc_client_cb cb,
			void *userdata, struct rdp_grpc_client_call **ret) { return -ENOSYS; }
struct rdp_grpc_client_call *rdp_grpc_client_call_cancel(struct rdp_grpc_client_call *c) { return NULL; }
const char *rdp_grpc_code_name(enum rdp_grpc_code code) { return "?"; }
