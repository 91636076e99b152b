#!/bin/sh
# Installs the Debian 12 packages the build and the tests need, and only those missing.
set -eu
pkgs="build-essential cmake pkg-config libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler
libjansson-dev protobuf-compiler python3-grpcio python3-protobuf python3-pytest
clang libclang-rt-14-dev
python3-yaml buildah podman runc"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps: installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
