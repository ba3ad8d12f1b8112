#!/usr/bin/env python3
"""Counts test cases in the gtest XML files Bazel leaves under bazel-testlogs.

usage: count_tests.py <testlogs dir> [<marker file>]
Only files newer than the marker (when given) count, so a second `bazel test` run counts
the tests it re-ran, not the cached results of the first. Prints "passed failed skipped".
A test binary that crashed before writing XML gets an XML from Bazel with an <error>; that
counts as a failed case. A case gtest did not run (DISABLED_, status="notrun") or skipped
(GTEST_SKIP) counts as skipped, never as passed. A file that cannot be parsed is named on
stderr and counts as one failed case.
"""
import os
import sys
import xml.etree.ElementTree as ET


def count(root_dir, marker=None):
    since = os.path.getmtime(marker) if marker else None
    passed = failed = skipped = 0
    for dirpath, _, filenames in os.walk(root_dir, followlinks=True):
        if "test.xml" not in filenames:
            continue
        path = os.path.join(dirpath, "test.xml")
        if since is not None and os.path.getmtime(path) < since:
            continue
        try:
            tree = ET.parse(path)
        except ET.ParseError as error:
            # A truncated XML is a test that died mid-write.
            print("count_tests: cannot parse %s: %s (counted as one failed case)" % (path, error),
                  file=sys.stderr)
            failed += 1
            continue
        for case in tree.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif (case.get("status") == "notrun"
                  or case.get("result") in ("skipped", "suppressed")
                  or case.find("skipped") is not None):
                skipped += 1
            else:
                passed += 1
    return passed, failed, skipped


if __name__ == "__main__":
    p, f, s = count(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
    print(p, f, s)
