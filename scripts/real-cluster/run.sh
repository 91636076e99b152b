#!/bin/sh
# The e2e stage (make e2e, part of make check): builds the real Kubernetes components from Go
# modules (build.sh; cached per machine), the pods' images (images.sh), then runs tests/e2e
# with pytest against a real single-node cluster on 127.0.0.1 (tests/e2e/cluster.py). Prints
# the versions and the time each step took; the JUnit file is OUT/e2e-junit.xml.
#
#   sh scripts/real-cluster/run.sh BUILD_DIR OUT [K8S_VERSION]
#
# BUILD_DIR holds the rdma-dp binary (static) and fixtures/ (build-check). Needs root.
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BUILD_DIR OUT [K8S_VERSION]" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
K8S_VERSION=${3:-${K8S_VERSION:-1.37.2}}
export RDP_K8S_CACHE=${RDP_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdma-dp/k8s}
[ "$(id -u)" -eq 0 ] || { echo "e2e: needs root (kubelet, containerd, mount namespaces)" >&2; exit 3; }
t0=$(date +%s)
sh "$repo/scripts/install-deps.sh" e2e
sh "$here/build.sh" "$K8S_VERSION"
t1=$(date +%s)
sh "$here/images.sh" "$build/rdma-dp" "$out/images"
t2=$(date +%s)
rm -f "$out/e2e-junit.xml"
rc=0
cd "$build"
# One cluster per machine at a time (fixed ports on 127.0.0.1, kubelet's cgroups): a second
# run waits here for the first.
exec 9>/tmp/rdma-dp-e2e.lock
flock 9
RDP_K8S_BIN=$RDP_K8S_CACHE/v$K8S_VERSION/bin RDP_E2E_IMAGES=$out/images RDP_E2E_WORK=$out/work \
RDP_FIXTURES=$build/fixtures RDMA_DP=$build/rdma-dp RDP_BUILD=$build \
	/usr/bin/python3 -m pytest -p no:cacheprovider -q -rs -o junit_logging=system-out --junitxml="$out/e2e-junit.xml" \
	"$repo/tests/e2e" || rc=$?
t3=$(date +%s)
echo "e2e: components $((t1 - t0)) s, images $((t2 - t1)) s, tests $((t3 - t2)) s (logs: $out/work/logs)"
exit $rc
