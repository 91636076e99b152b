#!/bin/sh
# The real-kernel stage (make check-kernel): Debian's kernel under QEMU with soft-RoCE devices,
# the tests of tests/kernel run inside it against the real /sys and /dev.
#   run.sh BUILD_DIR [RESULTS_DIR]
# BUILD_DIR holds the rdma-dp under test; RESULTS_DIR (default BUILD_DIR/kernel) gets the
# guest's JUnit file (kernel-junit.xml), its log and the sysfs dump. Environment:
#   RDP_KERNEL_CACHE   where the kernel and the initramfs are kept (default
#                      ${XDG_CACHE_HOME:-$HOME/.cache}/rdma-dp/kernel)
#   RDP_KERNEL_LIMIT   seconds the whole boot may take (default 900): a hung guest fails
#   RDP_KERNEL_K       a pytest -k expression, to run part of the tests
#   RDP_KERNEL_MEM     guest memory (default 2G)
#   RDP_KERNEL_DUMP=1  also dump the real sysfs trees and rdma-core's view (tests/kernel/dumps/)
# Fails, saying why, when QEMU cannot start or the guest brings no results back.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR [RESULTS_DIR]}" && pwd)
res=${2:-$build/kernel}
mkdir -p "$res" && res=$(cd "$res" && pwd)
limit=${RDP_KERNEL_LIMIT:-900}
start=$(date +%s)

sh "$here/install-deps.sh"
[ -x "$build/rdma-dp" ] || { echo "check-kernel: FAILED: no rdma-dp in $build"; exit 1; }
kdir=$(sh "$here/prepare.sh" | tail -n 1)
kver=${kdir##*/linux-image-}
initrd=$(ls -1 "$kdir"/initrd-*.cpio.gz | head -n 1)

accel="tcg -cpu max"
if grep -qwE 'vmx|svm' /proc/cpuinfo && [ -w /dev/kvm ]; then
	accel="kvm -cpu host"
fi
rm -rf "$res"
mkdir -p "$res"
echo "check-kernel: Debian kernel $kver (${kdir##*/}), accelerator ${accel%% *}, limit ${limit} s"
echo "check-kernel: guest runs tests/kernel against $build/rdma-dp; results in $res"
append="console=ttyS0 panic=-1 quiet loglevel=4 rdp_guest=$here/guest.sh rdp_repo=$repo"
append="$append rdp_build=$build rdp_modules=$kdir/root/lib/modules/$kver"
append="$append rdp_pytest_limit=$((limit - 60))"
[ "${RDP_KERNEL_DUMP:-0}" = 1 ] && append="$append rdp_dump=1"
[ -n "${RDP_KERNEL_K:-}" ] && append="$append rdp_k=$RDP_KERNEL_K"
set +e
# shellcheck disable=SC2086
timeout -k 10 "$limit" qemu-system-x86_64 -accel $accel -m "${RDP_KERNEL_MEM:-2G}" -smp 2 \
	-nographic -no-reboot -kernel "$kdir/root/boot/vmlinuz-$kver" -initrd "$initrd" \
	-append "$append" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-virtfs local,path="$res",mount_tag=results,security_model=none,multidevs=remap \
	-nic user,model=virtio-net-pci,restrict=on </dev/null >"$res/console.log" 2>&1
qrc=$?
set -e
took=$(($(date +%s) - start))
if [ $qrc -eq 124 ] || [ $qrc -eq 137 ]; then
	tail -n 30 "$res/console.log"
	[ -f "$res/guest.log" ] && tail -n 40 "$res/guest.log"
	echo "check-kernel: FAILED: the guest did not power off within $limit s (killed)"
	exit 1
fi
if [ ! -f "$res/rc" ]; then
	tail -n 40 "$res/console.log"
	[ -f "$res/guest.log" ] && tail -n 40 "$res/guest.log"
	echo "check-kernel: FAILED: QEMU exited ($qrc) without results from the guest (console: $res/console.log)"
	exit 1
fi
grep -E '^(rdp-guest|[0-9]+ (passed|failed)|FAILED|ERROR|SKIPPED)|passed|failed' "$res/guest.log" | tail -n 40
if [ -f "$res/figures.json" ]; then
	echo "check-kernel: event to kubelet (s), measured in the guest:"
	sed -n 's/^ *"event \(.*\)": \(.*\),\{0,1\}$/  \1: \2/p' "$res/figures.json" | tr -d ','
fi
rc=$(cat "$res/rc")
echo "check-kernel: kernel $kver, ${accel%% *}, $took s wall (QEMU exit $qrc), pytest exit $rc"
[ "$rc" = 0 ] || { echo "check-kernel: FAILED (guest log: $res/guest.log)"; exit 1; }
