/* SPDX-License-Identifier: MIT */
/* Sub-commands of rdma-dp; each parses its own options (cli-opt.h) and returns an exit code. */
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
/*
 * k8s-rdma-shared-dp: argv[0] is the Go plugin's name (cmd-shared-dp.c); argv is the whole
 * command line, its flags in Go's syntax.
 */
int cmd_shared_dp(int argc, char **argv);

