/* SPDX-License-Identifier: MIT */
/* PLACEHOLDER: being written; replaced by the real command. */
#include <stdio.h>

#include "cli.h"

int cmd_serve(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "rdma-dp: serve: not built yet\n");
	return 1;
}
