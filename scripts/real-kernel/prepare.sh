#!/bin/sh
# Fetches Debian's kernel (never installed on the host) and builds the stage's initramfs, both
# cached under $RDP_KERNEL_CACHE (default ${XDG_CACHE_HOME:-$HOME/.cache}/rdma-dp/kernel) so a
# second run reuses them. Prints the cache folder's kernel directory on its last line.
#   prepare.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=${RDP_KERNEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdma-dp/kernel}
mkdir -p "$cache"

# The package linux-image-amd64 depends on: linux-image-6.1.0-N-amd64.
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n 1)
if [ -z "$pkg" ]; then
	# No apt lists (a fresh container): the newest one already in the cache, else update.
	pkg=$(ls -1 "$cache" 2>/dev/null | grep '^linux-image-.*-amd64$' | sort -V | tail -n 1 || true)
	if [ -z "$pkg" ]; then
		apt-get update -qq >&2
		pkg=$(apt-cache depends linux-image-amd64 |
			sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-amd64\)$/\1/p' | head -n 1)
	fi
fi
[ -n "$pkg" ] || { echo "prepare: cannot find Debian's kernel package (apt-cache depends linux-image-amd64)" >&2; exit 1; }
kver=${pkg#linux-image-}
dir=$cache/$pkg
if [ ! -f "$dir/done" ]; then
	rm -rf "$dir" && mkdir -p "$dir/dl"
	echo "prepare: apt-get download $pkg" >&2
	(cd "$dir/dl" && apt-get download "$pkg" >&2) ||
		{ apt-get update -qq >&2 && (cd "$dir/dl" && apt-get download "$pkg" >&2); }
	dpkg -x "$dir"/dl/*.deb "$dir/root"
	rm -rf "$dir/dl"
	depmod -b "$dir/root" "$kver"
	touch "$dir/done"
fi

# The initramfs: busybox-static, our /init, the modules that mount the 9p root.
init_sum=$(cat "$here/init" "$0" /bin/busybox | md5sum | cut -c1-12)
initrd=$dir/initrd-$init_sum.cpio.gz
if [ ! -f "$initrd" ]; then
	rm -f "$dir"/initrd-*.cpio.gz
	t=$(mktemp -d)
	trap 'rm -rf "$t"' EXIT
	mkdir -p "$t/bin" "$t/lib/modules" "$t/proc" "$t/sys" "$t/dev" "$t/mnt" "$t/newroot"
	cp /bin/busybox "$t/bin/busybox"
	for a in sh mount umount mkdir insmod switch_root poweroff sleep cat echo ls mknod; do
		ln -s busybox "$t/bin/$a"
	done
	: >"$t/lib/modules/order"
	for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
		netfs fscache 9pnet 9pnet_virtio 9p overlay; do
		f=$(modinfo -b "$dir/root" -k "$kver" -n "$m" 2>/dev/null) || continue
		case $f in /*) ;; *) continue ;; esac # built in
		b=$(basename "$f")
		case $b in
		*.ko.xz) xz -dc "$f" >"$t/lib/modules/${b%.xz}" ;;
		*.ko.zst) zstd -qdc "$f" >"$t/lib/modules/${b%.zst}" ;;
		*) cp "$f" "$t/lib/modules/$b" ;;
		esac
		echo "${b%.*[xz]*}" | sed 's/\.ko.*$//' >>"$t/lib/modules/order"
	done
	cp "$here/init" "$t/init"
	chmod 755 "$t/init"
	(cd "$t" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$initrd.tmp"
	mv "$initrd.tmp" "$initrd"
fi
echo "$dir"
