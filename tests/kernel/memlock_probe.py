# SPDX-License-Identifier: MIT
"""Runs inside the container of tests/kernel/test_memlock.py (python3 and rdma-core come from
the guest's /usr, bound read-only): opens an RDMA device with libibverbs (ctypes, no
headers needed) and registers anonymous buffers with ibv_reg_mr, as an RDMA
application does with its communication buffers.

    python3 memlock_probe.py DEVICE SIZE [SIZE...]

Registers one buffer per SIZE, in turn, keeping the earlier ones registered (pinned memory adds
up against RLIMIT_MEMLOCK). Prints, one per line: "uid U", "capeff HEX", "memlock SOFT HARD"
(this process's RLIMIT_MEMLOCK, as /proc/self/limits says), then per SIZE "seconds SIZE S" (how
long ibv_reg_mr took) and "reg_mr SIZE ok" or "reg_mr SIZE errno N NAME: TEXT"; exit 0 when
every registration succeeded, else 1; "open ..." and exit 3 when the device cannot be opened at
all.
"""
import ctypes
import errno
import mmap
import os
import sys
import time


def main():
    dev, sizes = sys.argv[1], [int(x) for x in sys.argv[2:]]
    print("uid", os.getuid())
    for line in open("/proc/self/status"):
        if line.startswith("CapEff:"):
            print("capeff", line.split()[1])
    for line in open("/proc/self/limits"):
        if line.startswith("Max locked memory"):
            print("memlock", *line.split()[3:5])
    sys.stdout.flush()

    ib = ctypes.CDLL("libibverbs.so.1", use_errno=True)
    vp = ctypes.c_void_p
    ib.ibv_get_device_list.restype = ctypes.POINTER(vp)
    ib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
    ib.ibv_get_device_name.restype = ctypes.c_char_p
    ib.ibv_get_device_name.argtypes = [vp]
    ib.ibv_open_device.restype = vp
    ib.ibv_open_device.argtypes = [vp]
    ib.ibv_alloc_pd.restype = vp
    ib.ibv_alloc_pd.argtypes = [vp]
    ib.ibv_reg_mr.restype = vp
    ib.ibv_reg_mr.argtypes = [vp, vp, ctypes.c_size_t, ctypes.c_int]
    ib.ibv_dereg_mr.argtypes = [vp]

    n = ctypes.c_int(0)
    devs = ib.ibv_get_device_list(ctypes.byref(n))
    names = [ib.ibv_get_device_name(devs[i]).decode() for i in range(n.value)] if devs else []
    if dev not in names:
        print("open: no device %s (libibverbs sees %s, errno %d)" % (dev, names,
                                                                      ctypes.get_errno()))
        return 3
    ctx = ib.ibv_open_device(devs[names.index(dev)])
    if not ctx:
        e = ctypes.get_errno()
        print("open: ibv_open_device(%s): errno %d %s" % (dev, e, os.strerror(e)))
        return 3
    pd = ib.ibv_alloc_pd(ctx)
    if not pd:
        e = ctypes.get_errno()
        print("open: ibv_alloc_pd: errno %d %s" % (e, os.strerror(e)))
        return 3
    IBV_ACCESS_LOCAL_WRITE = 1
    bufs, rc = [], 0
    for size in sizes:
        buf = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        bufs.append(buf)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        t = time.monotonic()
        mr = ib.ibv_reg_mr(pd, addr, size, IBV_ACCESS_LOCAL_WRITE)
        print("seconds %d %.2f" % (size, time.monotonic() - t))
        if mr:
            print("reg_mr", size, "ok")
        else:
            e = ctypes.get_errno()
            print("reg_mr %d errno %d %s: %s" % (size, e, errno.errorcode.get(e, "?"),
                                                 os.strerror(e)))
            rc = 1
    sys.stdout.flush()
    os._exit(rc)  # the kernel deregisters and unpins; no teardown of the exported buffers


if __name__ == "__main__":
    sys.exit(main())
