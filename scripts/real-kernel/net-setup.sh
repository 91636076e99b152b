#!/bin/sh
# Inside the guest: the RDMA stack and three soft-RoCE devices, as docs/soft-roce.md shows.
#   rxe0 on vethA (10.77.0.1), rxe1 on vethB (10.77.0.2): both ends in the initial network
#   namespace (6.1's rxe receives only there), policy routing so that traffic between the two
#   addresses crosses the veth instead of lo;  rxe2 on eth0 (QEMU's virtio-net, 10.0.2.15).
set -eux
modprobe -a virtio_net ib_core ib_uverbs ib_umad rdma_ucm rdma_cm ib_cm iw_cm rdma_rxe veth
ip link add vethA type veth peer name vethB
ip addr add 10.77.0.1/24 dev vethA
ip addr add 10.77.0.2/24 dev vethB
ip link set vethA up
ip link set vethB up
i=0; while [ ! -e /sys/class/net/eth0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
for d in all vethA vethB; do
	sysctl -qw net.ipv4.conf.$d.accept_local=1 net.ipv4.conf.$d.rp_filter=0
done
sh "$(dirname "$0")/routes.sh"
rdma link add rxe0 type rxe netdev vethA
rdma link add rxe1 type rxe netdev vethB
rdma link add rxe2 type rxe netdev eth0
# the ports come up with their netdevs (bounded wait)
i=0
while [ $i -lt 50 ]; do
	n=$(grep -l ACTIVE /sys/class/infiniband/rxe*/ports/1/state 2>/dev/null | wc -l)
	[ "$n" -eq 3 ] && break
	sleep 0.1
	i=$((i + 1))
done
rdma link
