#!/bin/sh
# Policy routing for rxe0 <-> rxe1 in one namespace (idempotent: run again after an admin
# `ip link set vethA up`, which drops the table routes).
ip route replace 10.77.0.2 dev vethA table 100
ip route replace 10.77.0.1 dev vethB table 101
ip rule show | grep -q 'lookup 100' || ip rule add pref 100 iif lo to 10.77.0.2 lookup 100
ip rule show | grep -q 'lookup 101' || ip rule add pref 101 iif lo to 10.77.0.1 lookup 101
ip rule show | grep -q '^200:' || ip rule add pref 200 lookup local
ip rule show | grep -q '^0:' && ip rule del pref 0
exit 0
