#!/bin/sh
# SPDX-License-Identifier: MIT
# The CDI example of docs/cdi.md on a fixture node: the spec `serve --use-cdi` writes and its
# Allocate answer, then the device-spec answer. Usage: sh scripts/demo-cdi.sh BUILD_DIR
# [NODE] [CONFIG] (default seed000 and deploy/overlays/nccl/config.json).
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
case $build in /*) ;; *) build=$here/$build ;; esac
node=$build/fixtures/${2:-seed000}
config=${3:-$here/deploy/overlays/nccl/config.json}
[ -x "$build/rdma-dp" ] || { echo "demo-cdi: $build/rdma-dp not built" >&2; exit 1; }
exec /usr/bin/python3 "$here/tests/integration/demo_cdi.py" "$build/rdma-dp" "$config" \
	"$node/sys" "$node/dev"
