#!/bin/sh
# Builds the rdma-dp container image (Containerfile: FROM scratch, the static binary under two
# names and its licence notice) with buildah, into an OCI archive; with a third argument also
# the network-operator variant (Containerfile.netop: the same plus Debian's busybox-static for
# network-operator's driver-wait init container). `make image`, `make image-netop` and
# tests/integration/test_image.py and test_netop.py call it.
#
#   scripts/build-image.sh BINARY OUT.tar [NETOP_OUT.tar]
#
# Tags: localhost/rdma-dp:VERSION and localhost/rdma-dp:VERSION-netop (README: Image).
# BINARY must be statically linked (a sanitizer build is not). buildah runs with the vfs
# storage driver in a private, temporary storage root, so nothing is left in
# /var/lib/containers and no container runtime is needed (the Containerfiles have no RUN).
# The build is reproducible: --timestamp 0 gives every file and the image config a fixed date.
# Prints the sizes it measured.
set -eu
[ $# -eq 2 ] || [ $# -eq 3 ] || { echo "usage: $0 BINARY OUT.tar [NETOP_OUT.tar]" >&2; exit 2; }
bin=$1
out=$2
netop_out=${3:-}
src=$(cd "$(dirname "$0")/.." && pwd)
busybox=/bin/busybox

command -v buildah >/dev/null || { echo "build-image: buildah not found (apt-get install buildah)" >&2; exit 3; }
[ -x "$bin" ] || { echo "build-image: $bin: not an executable" >&2; exit 2; }
if readelf -l "$bin" 2>/dev/null | grep -q 'Requesting program interpreter'; then
	echo "build-image: $bin is dynamically linked; the image is FROM scratch and needs the static build (make)" >&2
	exit 2
fi
if [ -n "$netop_out" ]; then
	[ -f /usr/share/doc/busybox-static/copyright ] && [ -x "$busybox" ] ||
		{ echo "build-image: busybox-static not installed (apt-get install busybox-static)" >&2; exit 3; }
	if readelf -l "$busybox" 2>/dev/null | grep -q 'Requesting program interpreter'; then
		echo "build-image: $busybox is dynamically linked (the busybox package, not busybox-static)" >&2
		exit 2
	fi
fi
version=$("$bin" --version | awk '{print $2}')

tmp=$(mktemp -d /tmp/rdma-dp-image.XXXXXX)
trap 'buildah --root "$tmp/root" --runroot "$tmp/runroot" --storage-driver vfs rmi -a -f >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
ctx=$tmp/ctx
root=$ctx/rootfs
doc=$root/usr/share/doc/rdma-dp
mkdir -p "$doc/licenses" "$root/bin"
strip -o "$root/rdma-dp" "$bin"
# The Go plugin's command: a second name for the same file (costs a directory entry).
ln "$root/rdma-dp" "$root/bin/k8s-rdma-shared-dp"
cp "$src/NOTICE" "$doc/NOTICE"
cp /usr/share/common-licenses/LGPL-2.1 "$doc/licenses/LGPL-2.1"
cp /usr/share/common-licenses/Apache-2.0 "$doc/licenses/Apache-2.0"
for p in libc6:libc6 libnghttp2-14:nghttp2 libprotobuf-c1:protobuf-c libjansson4:jansson \
	libmbedtls-dev:mbedtls; do
	cp "/usr/share/doc/${p%%:*}/copyright" "$doc/licenses/${p#*:}.copyright"
done

# Bytes of the regular files under a tree, a hard-linked file once (what a layer stores).
content() { find "$1" -type f -printf '%i %s\n' | sort -u | awk '{s += $2} END {print s + 0}'; }

b="buildah --root $tmp/root --runroot $tmp/runroot --storage-driver vfs"
tag=localhost/rdma-dp:$version
$b bud --quiet --timestamp 0 --format oci -f "$src/Containerfile" -t "$tag" "$ctx" >/dev/null
rm -f "$out"
$b push --quiet "$tag" "oci-archive:$out:$tag"

files=$(content "$root")
echo "image: $out ($tag)"
echo "image: stripped binary $(stat -c %s "$root/rdma-dp") bytes (also /bin/k8s-rdma-shared-dp, a hard link); image content $files bytes uncompressed; archive $(stat -c %s "$out") bytes"

[ -n "$netop_out" ] || exit 0
nctx=$tmp/netop
nroot=$nctx/rootfs
mkdir -p "$nroot/bin" "$nroot/sbin" "$nroot/usr/share/doc/rdma-dp/licenses"
cp "$busybox" "$nroot/bin/busybox"
for a in bin/sh bin/grep bin/sleep sbin/lsmod; do
	ln "$nroot/bin/busybox" "$nroot/$a"
done
cp /usr/share/doc/busybox-static/copyright "$nroot/usr/share/doc/rdma-dp/licenses/busybox.copyright"
cp /usr/share/common-licenses/GPL-2 "$nroot/usr/share/doc/rdma-dp/licenses/GPL-2"
ntag=$tag-netop
$b bud --quiet --timestamp 0 --format oci --pull=never --build-arg "BASE=$tag" \
	-f "$src/Containerfile.netop" -t "$ntag" "$nctx" >/dev/null
rm -f "$netop_out"
$b push --quiet "$ntag" "oci-archive:$netop_out:$ntag"
nfiles=$(content "$nroot")
echo "image: $netop_out ($ntag)"
echo "image: netop variant adds $nfiles bytes uncompressed (busybox-static $(stat -c %s "$busybox") bytes, 4 hard links, its licences); image content $((files + nfiles)) bytes uncompressed; archive $(stat -c %s "$netop_out") bytes"
