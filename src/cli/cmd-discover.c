/* SPDX-License-Identifier: MIT */
/* PLACEHOLDER: being written; replaced by the real command. */
#include <stdio.h>

#include "cli.h"

int cmd_discover(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "rdma-dp: discover: not built yet\n");
	return 1;
}
