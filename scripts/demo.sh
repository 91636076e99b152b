#!/bin/sh
# SPDX-License-Identifier: MIT
# make demo: what rdma-dp sees and serves on the bundled DGX H100-like fixture node, on a
# machine without RDMA hardware. Usage: sh scripts/demo.sh BUILD_DIR
set -eu
build=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)
case $build in /*) ;; *) build=$here/$build ;; esac
bin=$build/rdma-dp
node=$build/fixtures/dgx-h100
config=$here/tests/fixtures/configs/dgx.json
py=/usr/bin/python3

[ -x "$bin" ] || { echo "demo: $bin not built" >&2; exit 1; }
[ -d "$node/sys" ] || { echo "demo: fixture node $node missing (build first)" >&2; exit 1; }

echo "### rdma-dp discover --sysfs-root $node/sys --dev-root $node/dev"
"$bin" discover --sysfs-root "$node/sys" --dev-root "$node/dev"
echo
echo "### rdma-dp check-config -c tests/fixtures/configs/dgx.json"
"$bin" check-config -c "$config" --sysfs-root "$node/sys" --dev-root "$node/dev"
echo
echo "### rdma-dp serve --metrics-address 127.0.0.1:0, with a fake kubelet (tests/integration/kubelet.py)"
# The driver stops the daemon (SIGTERM) and removes its temp kubelet root itself.
"$py" "$here/tests/integration/demo_kubelet.py" "$bin" "$config" "$node/sys" "$node/dev" --metrics
echo
echo "### exclusive NICs (docs/exclusive.md): which NIC sits next to which GPU"
echo "### rdma-dp topo --sysfs-root $node/sys --dev-root $node/dev"
"$bin" topo --sysfs-root "$node/sys" --dev-root "$node/dev"
echo
xconfig=$here/deploy/overlays/exclusive/config.json
echo "### rdma-dp check-config -c deploy/overlays/exclusive/config.json (the units)"
"$bin" check-config -c "$xconfig" --sysfs-root "$node/sys" --dev-root "$node/dev" |
	sed -n '/^  units:/,/^$/p'
echo "### rdma-dp serve with deploy/overlays/exclusive/config.json, with a fake kubelet"
exec "$py" "$here/tests/integration/demo_kubelet.py" "$bin" "$xconfig" "$node/sys" "$node/dev"
