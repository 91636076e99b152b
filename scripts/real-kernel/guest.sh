#!/bin/sh
# The guest's PID 1 after switch_root (Debian's own tools, seen through the overlay root):
# mounts what a system has, loads the RDMA stack, creates rxe0/rxe1 on a veth pair and rxe2 on
# the virtio NIC (net-setup.sh), runs the kernel tests under pytest with a JUnit file, writes
# everything to the results export, and powers off. Never returns.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=0755 tmpfs /run
# /tmp stays the overlay root's (the host's, writable on the tmpfs upper layer): a
# checkout or build under the host's /tmp (a CI clone) must stay visible to the tests.
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
mkdir -p /run/rdp-results
R=/run/rdp-results
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results $R; then
	echo "rdp-guest: FAILED: cannot mount the results export"
	poweroff -f
fi
here=$(dirname "$rdp_guest")
exec >"$R/guest.log" 2>&1
echo "rdp-guest: kernel $(uname -r), up $(cut -d' ' -f1 /proc/uptime) s"
ulimit -l unlimited
hostname rdp-guest
ip link set lo up
rc=1
if sh "$here/net-setup.sh" >"$R/setup.log" 2>&1; then
	echo "rdp-guest: devices ready at $(cut -d' ' -f1 /proc/uptime) s"
	# the real trees (tests/kernel/dumps/ keeps a copy): RDP_KERNEL_DUMP=1, about 40 s under TCG
	[ "${rdp_dump:-0}" = 1 ] && /usr/bin/python3 "$here/dump-sysfs.py" >"$R/sysfs-dump.txt" 2>&1
	[ "${rdp_dump:-0}" = 1 ] && for c in "ibv_devinfo -v" "rdma -j link" "rdma -j dev" "ibstat" "rdma res"; do echo "\$ $c"; $c; done >"$R/tools.txt" 2>&1
	[ "${rdp_dump:-0}" = 1 ] && echo "rdp-guest: dumps taken at $(cut -d" " -f1 /proc/uptime) s"
	cd "$rdp_repo" || exit 1
	RDMA_DP=$rdp_build/rdma-dp RDP_BUILD=$rdp_build RDP_RESULTS=$R \
		timeout -k 5 "${rdp_pytest_limit:-420}" \
		/usr/bin/python3 -m pytest -p no:cacheprovider -q -rs --junitxml="$R/kernel-junit.xml" \
		-o junit_family=xunit1 ${rdp_k:+-k "$rdp_k"} tests/kernel
	rc=$?
else
	echo "rdp-guest: device setup failed:"
	cat "$R/setup.log"
fi
echo "rdp-guest: pytest rc=$rc, up $(cut -d' ' -f1 /proc/uptime) s"
echo "$rc" >"$R/rc"
sync
poweroff -f
