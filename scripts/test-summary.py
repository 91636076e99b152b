#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What one ctest run of a build directory ran, by kind, read from its own records:
Testing/Temporary/LastTest.log (every test's output) and the pytest JUnit file. Prints how
many tests of each kind ran, passed, failed and were skipped, every skip with its reason, and
closes with one line "<label>: N passed, N failed, N skipped".

    test-summary.py BUILD_DIR LABEL
"""
import collections
import os
import re
import sys
import xml.etree.ElementTree as ET


def ctest_blocks(path):
    """(name, output, passed) per test of the last ctest run."""
    if not os.path.exists(path):
        return
    text = open(path, errors="replace").read()
    for m in re.finditer(r"^\d+/\d+ Test: (\S+)\n(.*?)^Test (Passed|Failed|Not Run)[^\n]*$",
                         text, re.S | re.M):
        yield m.group(1), m.group(2), m.group(3) == "Passed"


def main():
    build, label = sys.argv[1], sys.argv[2]
    kinds = collections.OrderedDict()
    checks = collections.Counter()
    inputs = 0
    for name, out, ok in ctest_blocks(os.path.join(build, "Testing/Temporary/LastTest.log")):
        kind = name.split("/")[0] if "/" in name else name
        if kind == "pytest":
            continue  # counted from its JUnit file, test by test
        k = kinds.setdefault(kind, collections.Counter())
        k["passed" if ok else "failed"] += 1
        m = re.search(r": (\d+) passed, (\d+) failed", out)
        if m:
            checks[kind] += int(m.group(1))
        m = re.search(r": (\d+) inputs run", out)
        if m:
            inputs += int(m.group(1))
    skips = []
    for fname, kind in (("pytest-junit.xml", "integration (pytest)"),
                        ("kernel-junit.xml", "kernel (QEMU guest)"),
                        ("e2e-junit.xml", "e2e (real cluster)")):
        junit = os.path.join(build, fname)
        if not os.path.exists(junit):
            continue
        k = kinds.setdefault(kind, collections.Counter())
        for case in ET.parse(junit).getroot().iter("testcase"):
            name = "%s::%s" % (case.get("classname", "").split(".")[-1], case.get("name"))
            if case.find("skipped") is not None:
                k["skipped"] += 1
                skips.append((name, case.find("skipped").get("message", "")))
            elif case.find("failure") is not None or case.find("error") is not None:
                k["failed"] += 1
            else:
                k["passed"] += 1
    total = collections.Counter()
    print("== %s: tests by kind ==" % label)
    for kind, k in kinds.items():
        extra = ""
        if checks.get(kind):
            extra = " (%d checks)" % checks[kind]
        if kind == "fuzz" and inputs:
            extra = " (corpus replay: %d inputs)" % inputs
        print("  %-22s %4d passed, %d failed, %d skipped%s" % (
            kind, k["passed"], k["failed"], k["skipped"], extra))
        total.update(k)
    for name, why in skips:
        print("  skipped: %s: %s" % (name, why))
    print("%s: %d passed, %d failed, %d skipped" % (
        label, total["passed"], total["failed"], total["skipped"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
