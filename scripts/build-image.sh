#!/bin/sh
# Builds the rdma-dp container image (Containerfile: FROM scratch, the static binary and its
# licence notice) with buildah, into an OCI archive. `make image` and tests/integration/
# test_image.py call it.
#
#   scripts/build-image.sh BINARY OUT.tar
#
# BINARY must be statically linked (a sanitizer build is not). buildah runs with the vfs
# storage driver in a private, temporary storage root, so nothing is left in
# /var/lib/containers and no container runtime is needed (the Containerfile has no RUN).
# The build is reproducible: --timestamp 0 gives every file and the image config a fixed date.
# Prints the sizes it measured.
set -eu
[ $# -eq 2 ] || { echo "usage: $0 BINARY OUT.tar" >&2; exit 2; }
bin=$1
out=$2
src=$(cd "$(dirname "$0")/.." && pwd)

command -v buildah >/dev/null || { echo "build-image: buildah not found (apt-get install buildah)" >&2; exit 3; }
[ -x "$bin" ] || { echo "build-image: $bin: not an executable" >&2; exit 2; }
if readelf -l "$bin" 2>/dev/null | grep -q 'Requesting program interpreter'; then
	echo "build-image: $bin is dynamically linked; the image is FROM scratch and needs the static build (make)" >&2
	exit 2
fi
version=$("$bin" --version | awk '{print $2}')

tmp=$(mktemp -d /tmp/rdma-dp-image.XXXXXX)
trap 'buildah --root "$tmp/root" --runroot "$tmp/runroot" --storage-driver vfs rmi -a -f >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
ctx=$tmp/ctx
mkdir -p "$ctx/licenses"
strip -o "$ctx/rdma-dp" "$bin"
cp "$src/NOTICE" "$ctx/NOTICE"
cp /usr/share/common-licenses/LGPL-2.1 "$ctx/licenses/LGPL-2.1"
cp /usr/share/common-licenses/Apache-2.0 "$ctx/licenses/Apache-2.0"
for p in libc6:libc6 libnghttp2-14:nghttp2 libprotobuf-c1:protobuf-c libjansson4:jansson \
	libmbedtls-dev:mbedtls; do
	cp "/usr/share/doc/${p%%:*}/copyright" "$ctx/licenses/${p#*:}.copyright"
done

b="buildah --root $tmp/root --runroot $tmp/runroot --storage-driver vfs"
$b bud --quiet --timestamp 0 --format oci -f "$src/Containerfile" -t "localhost/rdma-dp:$version" "$ctx" >/dev/null
rm -f "$out"
$b push --quiet "localhost/rdma-dp:$version" "oci-archive:$out:localhost/rdma-dp:$version"

files=$(du -cb "$ctx/rdma-dp" "$ctx/NOTICE" "$ctx/licenses" | tail -1 | cut -f1)
echo "image: $out (localhost/rdma-dp:$version)"
echo "image: stripped binary $(stat -c %s "$ctx/rdma-dp") bytes; image content $files bytes uncompressed; archive $(stat -c %s "$out") bytes"
