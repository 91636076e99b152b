/* SPDX-License-Identifier: MIT */
/* PLACEHOLDER until the config parser lands: keeps the tree linking. */
#include "config.h"

#include <errno.h>

int rdp_config_load_file(const char *path, struct rdp_config **ret, struct rdp_diags *diags)
{
	(void)path;
	(void)ret;
	(void)diags;
	return -ENOSYS;
}

int rdp_config_parse(const char *text, size_t len, const char *filename, struct rdp_config **ret,
		     struct rdp_diags *diags)
{
	(void)text;
	(void)len;
	(void)filename;
	(void)ret;
	(void)diags;
	return -ENOSYS;
}

struct rdp_config *rdp_config_free(struct rdp_config *c)
{
	(void)c;
	return NULL;
}
