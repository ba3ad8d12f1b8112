#!/usr/bin/env python3
"""count_tests.py on crafted gtest XML: every kind of case lands in its own count.

Run by .ci/run; ends with "count_tests: N passed, N failed".
"""
import os
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import count_tests  # noqa: E402

GTEST_XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" failures="1" disabled="1" errors="0" name="AllTests">
  <testsuite name="Suite" tests="5" failures="1" disabled="1" skipped="1" errors="0">
    <testcase name="Passes" status="run" result="completed" time="0" classname="Suite" />
    <testcase name="Fails" status="run" result="completed" time="0" classname="Suite">
      <failure message="a.cc:1&#x0A;Expected: 1" type=""><![CDATA[a.cc:1
Expected: 1]]></failure>
    </testcase>
    <testcase name="DISABLED_NotRun" status="notrun" result="suppressed" time="0" classname="Suite" />
    <testcase name="Skips" status="run" result="skipped" time="0" classname="Suite">
      <skipped message="no GPU" />
    </testcase>
    <testcase name="AlsoPasses" status="run" result="completed" time="0" classname="Suite" />
  </testsuite>
</testsuites>
"""

# What Bazel writes for a test binary that crashed before writing its own XML.
BAZEL_CRASH_XML = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites>
<testsuite name="tests/x_test" tests="1" failures="0" errors="1">
<testcase name="tests/x_test" status="run" duration="0" time="0"><error message="exited with error code 134"></error></testcase>
</testsuite>
</testsuites>
"""


class CountTestsTest(unittest.TestCase):
    def write(self, root, name, text):
        folder = os.path.join(root, name)
        os.makedirs(folder)
        with open(os.path.join(folder, "test.xml"), "w") as f:
            f.write(text)

    def test_each_kind_of_case_in_its_own_count(self):
        with tempfile.TemporaryDirectory() as root:
            self.write(root, "a", GTEST_XML)
            self.assertEqual(count_tests.count(root), (2, 1, 2))

    def test_a_crash_counts_as_a_failure(self):
        with tempfile.TemporaryDirectory() as root:
            self.write(root, "crash", BAZEL_CRASH_XML)
            self.assertEqual(count_tests.count(root), (0, 1, 0))

    def test_an_unparsable_file_fails_loudly(self):
        with tempfile.TemporaryDirectory() as root:
            self.write(root, "cut", GTEST_XML[:200])
            stderr = sys.stderr
            with tempfile.TemporaryFile("w+") as captured:
                sys.stderr = captured
                try:
                    counts = count_tests.count(root)
                finally:
                    sys.stderr = stderr
                captured.seek(0)
                message = captured.read()
            self.assertEqual(counts, (0, 1, 0))
            self.assertIn("cannot parse", message)
            self.assertIn(os.path.join(root, "cut", "test.xml"), message)

    def test_only_files_newer_than_the_marker_count(self):
        with tempfile.TemporaryDirectory() as root:
            self.write(root, "old", GTEST_XML)
            old = os.path.join(root, "old", "test.xml")
            os.utime(old, (time.time() - 100, time.time() - 100))
            marker = os.path.join(root, "marker")
            open(marker, "w").close()
            os.utime(marker, (time.time() - 50, time.time() - 50))
            self.write(root, "new", BAZEL_CRASH_XML)
            self.assertEqual(count_tests.count(root, marker), (0, 1, 0))


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=2).result
    failed = len(result.failures) + len(result.errors)
    print("count_tests: %d passed, %d failed" % (result.testsRun - failed, failed))
    sys.exit(1 if failed else 0)
