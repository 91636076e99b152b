#!/usr/bin/python3
"""Every RDMA-related sysfs attribute and /dev/infiniband node, one "path: value" line each (a
compact record of what the real kernel shows; tests/kernel/dumps/ keeps one). GID slots are
listed only where in use (a port has 1024, most of them zero, whose gid_attrs fail with EINVAL).
"""
import os
import stat

TOPS = ["/sys/class/infiniband", "/sys/class/infiniband_verbs", "/sys/class/infiniband_mad",
        "/sys/class/infiniband_cm", "/sys/class/misc/rdma_cm"]
SKIP = {"subsystem", "power", "driver", "device", "uevent_helper"}
ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"


def read(p):
    try:
        with open(p, errors="replace") as f:
            return f.read(400).rstrip("\n").replace("\n", "|")
    except OSError as e:
        return "<%s>" % os.strerror(e.errno)


def walk(p, depth, out):
    if depth > 7:
        return
    try:
        names = sorted(os.listdir(p))
    except OSError as e:
        out.append("%s/: <%s>" % (p, os.strerror(e.errno)))
        return
    for n in names:
        q = os.path.join(p, n)
        if os.path.islink(q):
            out.append("%s -> %s" % (q, os.readlink(q)))
            if n in SKIP or depth > 0:
                continue
        if n in SKIP:
            continue
        if os.path.isdir(q):
            walk(q, depth + 1, out)
            continue
        st = os.stat(q)
        if not st.st_mode & stat.S_IRUSR:
            out.append("%s: (mode %o)" % (q, st.st_mode & 0o777))
            continue
        if "/gids/" in q or "/gid_attrs/" in q:
            v = read(q)
            if v == ZERO or v.startswith("<"):
                continue
            out.append("%s: %s" % (q, v))
            continue
        out.append("%s: %s" % (q, read(q)))


def main():
    out = []
    for top in TOPS:
        if not os.path.exists(top):
            out.append("%s: (absent)" % top)
            continue
        walk(top, 0, out)
    for n in sorted(os.listdir("/dev/infiniband")):
        st = os.stat("/dev/infiniband/" + n)
        out.append("/dev/infiniband/%s: %s %d:%d mode %o" % (
            n, "char" if stat.S_ISCHR(st.st_mode) else "other", os.major(st.st_rdev),
            os.minor(st.st_rdev), st.st_mode & 0o777))
    print("\n".join(out))


if __name__ == "__main__":
    main()
