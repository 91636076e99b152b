#!/bin/sh
# Installs the Debian 12 packages the build and the tests need, and only those missing.
#   scripts/install-deps.sh         the build and the tests (make, make check); golang-go and the
#                                   reference CDI library (v0.5.2) build the spec validator of
#                                   tests/tools/cdi-validate (it pulls in ~65 -dev packages);
#                                   prometheus for promtool and a real server scraping the daemon
#                                   (test_metrics_cli.py, test_prometheus.py, test_dashboard.py),
#                                   chromium for the dashboard pictures (scripts/dashboard-
#                                   screenshot.sh, run by test_dashboard.py)
#   scripts/install-deps.sh e2e     only what the real-cluster stage adds (scripts/real-cluster/:
#                                   runc and the CNI plugins for containerd, buildah for the
#                                   images, openssl for the certificates, perftest and the
#                                   rxe provider for the workload image; Go 1.26 is the
#                                   machine's own, /usr/local/go)
#   scripts/install-deps.sh bench   only what `make bench` adds: Go, grpc-go and protoc-gen-go for
#                                   the Go floor and kubelet (bench/), valgrind for callgrind
#   scripts/install-deps.sh kernel  only what the real-kernel stage adds (scripts/real-kernel/:
#                                   QEMU, busybox, the RDMA stack's tools, podman and runc
#                                   (test_memlock.py), which the guest sees through its
#                                   overlay root)
set -eu
if [ "${1:-}" = kernel ]; then
	pkgs="qemu-system-x86 busybox-static kmod rdma-core ibverbs-utils ibverbs-providers
rdmacm-utils perftest iproute2 infiniband-diags util-linux python3-pytest python3-grpcio
python3-protobuf protobuf-compiler xz-utils podman runc"
elif [ "${1:-}" = e2e ]; then
	pkgs="containernetworking-plugins runc buildah busybox-static bash openssl curl util-linux gcc
libc6-dev protobuf-compiler python3-pytest python3-grpcio python3-protobuf ca-certificates
perftest ibverbs-utils ibverbs-providers"
elif [ "${1:-}" = bench ]; then
	pkgs="golang-go golang-google-grpc-dev golang-google-protobuf-dev
golang-github-golang-protobuf-1-5-dev protoc-gen-go protobuf-compiler valgrind binutils"
else
pkgs="build-essential cmake pkg-config libnghttp2-dev libprotobuf-c-dev protobuf-c-compiler
libjansson-dev libhttp-parser-dev libmbedtls-dev protobuf-compiler python3-grpcio python3-protobuf python3-pytest
clang libclang-rt-14-dev
python3-yaml python3-h2 buildah podman runc valgrind busybox-static
golang-go golang-github-container-orchestrated-devices-container-device-interface-dev
prometheus chromium"
fi
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "install-deps${1:+ $1}: installing:$missing"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
