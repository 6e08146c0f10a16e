"""tests/file_seconds.py: per-file seconds from a JUnit report, and the longest-first order of `make test`."""

from __future__ import annotations

from pathlib import Path

from tests import file_seconds as fs

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_a" name="t1" time="2.5"/>
<testcase classname="tests.test_a" name="t2" time="1.0"/>
<testcase classname="tests.test_b.TestCls" name="t" time="9.0"/>
<testcase classname="tests.test_c" name="t" time="0.5"/>
</testsuite></testsuites>"""


def test_seconds_per_file_and_longest_first(tmp_path: Path) -> None:
    (tmp_path / "main.xml").write_text(REPORT)
    seconds = fs.from_junit([tmp_path / "main.xml"])
    assert seconds == {"test_a.py": 3.5, "test_b.py": 9.0, "test_c.py": 0.5}
    (tmp_path / "s.txt").write_text("# comment\n" + "".join(f"{s}  {n}\n" for n, s in seconds.items()))
    assert fs.read(tmp_path / "s.txt") == seconds and fs.read(tmp_path / "absent.txt") == {}
    # a file not listed counts as a new test file's 5 s: after b, before a and c
    assert fs.longest_first(["test_c.py", "test_new.py", "test_a.py", "test_b.py"], seconds) == [
        "test_b.py", "test_new.py", "test_a.py", "test_c.py"]
    assert fs.finish(seconds) == [9.0, 4.0]

