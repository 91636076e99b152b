#!/bin/sh
# The guest's PID 1 after switch_root (scripts/real-kernel/init, rdp_guest= names this file): a
# second node, `rdp-guest`, for the host's control plane (tests/e2e/guest.py starts it). Real
# soft-RoCE devices (scripts/real-kernel/net-setup.sh: rxe0 on vethA, rxe1 on vethB, rxe2 on
# the virtio NIC), containerd, runc and kubelet on cgroup v2, the e2e images imported. The
# 9p export tagged `node` (the host's GuestNode work directory) holds the configuration the host
# wrote (etc/, pki/) and gets the logs (logs/); the guest powers off once the host creates
# `stop` there, or when kubelet or containerd exits. Never returns.
# Kernel command line (reaching this script as variables): rdp_guest (this file), rdp_bin
# (build.sh's bin/), rdp_images (images.sh's OUTDIR).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mkdir -p /dev/pts /dev/shm
mount -t devpts -o gid=5,mode=620,ptmxmode=666 devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup
N=/run/rdp-node
repo=$(cd "$(dirname "$rdp_guest")/../.." && pwd)
mkdir -p $N
if ! mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 node $N; then
	echo "rdp-guest-node: FAILED: cannot mount the node export"
	poweroff -f
fi
mkdir -p $N/logs
exec >"$N/logs/guest.log" 2>&1
up() { cut -d' ' -f1 /proc/uptime; }
say() { echo "rdp-guest-node: $* (up $(up) s)"; }
fail() {
	say "FAILED: $*"
	echo "$*" >$N/failed
	sync
	poweroff -f
}
say "kernel $(uname -r)"
ulimit -l unlimited
ulimit -n 1048576
hostname rdp-guest
ip link set lo up
sh "$repo/scripts/real-kernel/net-setup.sh" >"$N/logs/net-setup.log" 2>&1 || fail "device setup (logs/net-setup.log)"
say "devices: $(ls /sys/class/infiniband | tr '\n' ' ')"
printf '127.0.0.1 localhost\n10.0.2.15 rdp-guest\n' >/etc/hosts
# kubelet's cgroups below the root, with every controller the kernel has
for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
	echo "+$c" >/sys/fs/cgroup/cgroup.subtree_control || say "controller $c not enabled"
done
# The overlay root's upper layer is a tmpfs, and overlayfs cannot be an upper layer itself:
# containerd's snapshots and kubelet's state on tmpfs of their own.
for d in /var/lib/containerd /var/lib/kubelet /var/log/pods /var/log/containers /var/run/cdi /etc/cdi; do
	mkdir -p $d && mount -t tmpfs -o mode=0755 tmpfs $d
done
mount --make-rshared /
export PATH="$rdp_bin:$PATH"
containerd --config $N/etc/containerd.toml >$N/logs/containerd.log 2>&1 &
ctrd=$!
i=0
until ctr -a /run/containerd/containerd.sock version >/dev/null 2>&1; do
	kill -0 $ctrd 2>/dev/null || fail "containerd exited (logs/containerd.log)"
	i=$((i + 1))
	[ $i -lt 600 ] || fail "containerd not answering after 60 s"
	sleep 0.1
done
say "containerd up"
for img in rdp-pause rdp-workload rdma-dp; do
	ctr -a /run/containerd/containerd.sock -n k8s.io images import "$rdp_images/$img.tar" >>$N/logs/import.log 2>&1 ||
		fail "ctr images import $img.tar (logs/import.log)"
done
say "images imported"
kubelet --config=$N/etc/kubelet.yaml --kubeconfig=$N/etc/kubelet.conf --hostname-override=rdp-guest \
	--cloud-provider=external --v=2 >$N/logs/kubelet.log 2>&1 &
kl=$!
say "kubelet started"
# the stand-in for nvidia.com/gpu (the seeds' pods ask for one GPU), as on the host node
/usr/bin/python3 "$repo/tests/e2e/gpu_plugin.py" >$N/logs/gpu-plugin.log 2>&1 &
echo up >$N/up
while [ ! -e $N/stop ]; do
	kill -0 $kl 2>/dev/null || { say "kubelet exited"; break; }
	kill -0 $ctrd 2>/dev/null || { say "containerd exited"; break; }
	sleep 1
done
say "stopping"
kill $kl 2>/dev/null
sleep 1
sync
poweroff -f
