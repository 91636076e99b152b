#!/bin/sh
# The images the e2e cluster's pods run, as OCI archives in OUTDIR, for `ctr images import`
# (no registry is reachable from the test machines):
#   rdp-pause.tar     localhost/rdp-pause:1     the sandbox image (pause.c, ours), USER 65535
#   rdp-workload.tar  localhost/rdp-workload:1  stands in for the seeds' nvcr.io/nvidia/hpc-benchmarks:
#                     Debian's bash (the seeds' command is /bin/bash -c) with its libraries and
#                     busybox-static for sleep, ls, cat, grep and the rest; perftest's
#                     ib_write_bw/ib_read_lat and rdma-core's ibv_devinfo with their libraries,
#                     and the soft-RoCE provider (librxe, /etc/libibverbs.d/rxe.driver), for the
#                     traffic between pods on the guest node (tests/e2e/test_guest_node.py)
#   rdma-dp.tar       localhost/rdma-dp:VERSION  scripts/build-image.sh, as `make image` builds it
#
#   sh scripts/real-cluster/images.sh RDMA_DP_BINARY OUTDIR
#
# buildah runs with the vfs driver in a temporary storage root (nothing kept in
# /var/lib/containers); --timestamp 0, so the same inputs give the same archives.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 RDMA_DP_BINARY OUTDIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
out=$2
mkdir -p "$out"
for c in buildah gcc ldd ib_write_bw ibv_devinfo; do
	command -v $c >/dev/null || { echo "images: $c not found (scripts/install-deps.sh e2e)" >&2; exit 3; }
done
[ -x /bin/busybox ] || { echo "images: /bin/busybox missing (apt-get install busybox-static)" >&2; exit 3; }
tmp=$(mktemp -d /tmp/rdp-e2e-images.XXXXXX)
b="buildah --root $tmp/root --runroot $tmp/runroot --storage-driver vfs"
trap '$b rmi -a -f >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT

# commit NAME ROOTFS [buildah config options...]: one layer FROM scratch -> $out/NAME.tar
commit() {
	name=$1 rootfs=$2
	shift 2
	c=$($b from scratch)
	$b copy --quiet "$c" "$rootfs/." /
	$b config "$@" "$c"
	$b commit --quiet --timestamp 0 --format oci "$c" "localhost/$name" >/dev/null
	$b rm "$c" >/dev/null
	rm -f "$out/${name%%:*}.tar"
	$b push --quiet "localhost/$name" "oci-archive:$out/${name%%:*}.tar:localhost/$name"
	echo "images: $out/${name%%:*}.tar (localhost/$name, $(stat -c %s "$out/${name%%:*}.tar") bytes)"
}

# The sandbox image.
mkdir -p "$tmp/pause"
gcc -static -Os -Wall -Wextra -Werror -o "$tmp/pause/pause" "$here/pause.c"
strip "$tmp/pause/pause"
commit rdp-pause:1 "$tmp/pause" --entrypoint '["/pause"]' --user 65535:65535

# The workload image: bash with the libraries ldd names, busybox's applets beside it.
w=$tmp/workload
mkdir -p "$w/bin" "$w/tmp"
chmod 1777 "$w/tmp"
copy_with_libs() {
	for f in "$@"; do
		mkdir -p "$w$(dirname "$f")"
		cp -L "$f" "$w$f"
		ldd "$f" 2>/dev/null | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}' |
		while read -r lib; do
			mkdir -p "$w$(dirname "$lib")"
			[ -e "$w$lib" ] || cp -L "$lib" "$w$lib"
		done
	done
}
copy_with_libs /bin/bash
# RDMA traffic: the tools, their libraries, the rxe provider libibverbs loads by name
prov=$(ls -d /usr/lib/*-linux-gnu/libibverbs 2>/dev/null | head -n 1)
[ -f "$prov/librxe-rdmav34.so" ] || { echo "images: no rxe provider (apt-get install ibverbs-providers)" >&2; exit 3; }
copy_with_libs "$(command -v ib_write_bw)" "$(command -v ib_read_lat)" "$(command -v ibv_devinfo)" \
	"$(command -v ibv_devices)" "$prov/librxe-rdmav34.so"
mkdir -p "$w/etc/libibverbs.d"
cp /etc/libibverbs.d/rxe.driver "$w/etc/libibverbs.d/"
cp /bin/busybox "$w/bin/busybox"
for a in sh sleep ls cat grep env echo id mkdir rm stat head tail sed awk wc sort test true false \
	hostname ps kill ulimit taskset; do
	[ -e "$w/bin/$a" ] || ln "$w/bin/busybox" "$w/bin/$a"
done
commit rdp-workload:1 "$w" --env PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin --cmd '["/bin/sh"]'

sh "$here/../build-image.sh" "$bin" "$out/rdma-dp.tar" >/dev/null
echo "images: $out/rdma-dp.tar (localhost/rdma-dp:$("$bin" --version | awk '{print $2}'))"
