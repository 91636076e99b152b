#!/bin/sh
# What the real-kernel stage needs on the host (the guest sees the same installed tools through
# its overlay root), installed with apt-get when missing.
set -eu
pkgs="qemu-system-x86 busybox-static kmod rdma-core ibverbs-utils ibverbs-providers
rdmacm-utils perftest iproute2 infiniband-diags util-linux python3-pytest python3-grpcio
python3-protobuf protobuf-compiler xz-utils"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "check-kernel: installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
