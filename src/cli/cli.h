/* SPDX-License-Identifier: MIT */
/* Sub-commands of rdma-dp; each parses its own options (getopt_long) and returns an exit code. */
#pragma once

int cmd_discover(int argc, char **argv);
int cmd_check_config(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_health(int argc, char **argv);
int cmd_topo(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_kube_get(int argc, char **argv);
int cmd_dra(int argc, char **argv);
int cmd_hook(int argc, char **argv);
int cmd_install_hook(int argc, char **argv);

/* Prints "rdma-dp <version>" to stdout; for every sub-command's --version. */
void cli_print_version(void);
