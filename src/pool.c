/* SPDX-License-Identifier: MIT */
/* PLACEHOLDER until pools land: keeps the tree linking. */
#include "pool.h"

#include <errno.h>

int rdp_pools_build(const struct rdp_config *c, const struct rdp_host *h, struct rdp_pools **ret,
		    struct rdp_diags *diags)
{
	(void)c;
	(void)h;
	(void)ret;
	(void)diags;
	return -ENOSYS;
}

struct rdp_pools *rdp_pools_free(struct rdp_pools *p)
{
	(void)p;
	return NULL;
}
