"""Seconds each test file took in the last full run, so `make test` can start the longest files first.

    python tests/file_seconds.py build/test-reports/main.xml    # rewrite tests/file_seconds.txt from a run

pytest-xdist's `--dist loadfile` hands out whole files in collection order; tests/conftest.py orders the
files by the seconds recorded here, longest first (and `make test` turns off xdist's own reordering, by test
count), so a long file never starts last while the other worker idles. A file not listed counts as
NEW_FILE_SECONDS (a new test should cost under 5 s). The seconds are wall time with two workers on 2 cores,
fixtures included: only their order matters. The command also prints the two workers' predicted finish.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

SECONDS = Path(__file__).with_name("file_seconds.txt")
NEW_FILE_SECONDS = 5.0


def read(path: Path = SECONDS) -> dict[str, float]:
    """{file name: seconds} from `path` ("seconds  name" per line, # comments); empty when it is absent."""
    out: dict[str, float] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            secs, name = line.split()
            out[name] = float(secs)
    return out


def from_junit(reports: list[Path]) -> dict[str, float]:
    """{file name: summed test time} from JUnit XML reports (classname "tests.test_x" or
    "tests.test_x.Cls")."""
    out: dict[str, float] = defaultdict(float)
    for report in reports:
        for case in ET.parse(report).getroot().iter("testcase"):
            parts = (case.get("classname") or "").split(".")
            if len(parts) >= 2:
                out[parts[1] + ".py"] += float(case.get("time") or 0)
    return dict(out)


def longest_first(names: list[str], seconds: dict[str, float]) -> list[str]:
    """`names` by recorded seconds, longest first (unlisted: NEW_FILE_SECONDS); ties keep their order."""
    return sorted(names, key=lambda n: -seconds.get(n, NEW_FILE_SECONDS))


def finish(seconds: dict[str, float], workers: int = 2) -> list[float]:
    """Each worker's busy time when files go, longest first, to whichever worker is free first."""
    load = [0.0] * workers
    for name in longest_first(list(seconds), seconds):
        load[load.index(min(load))] += seconds[name]
    return load


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    seconds = from_junit([Path(a) for a in argv])
    lines = [f"{seconds[n]:8.1f}  {n}" for n in longest_first(list(seconds), seconds)]
    head = "# seconds per test file in a run of `make test` (tests/file_seconds.py: only the order matters)"
    SECONDS.write_text("\n".join([head, *lines]) + "\n")
    print(f"{len(seconds)} files, {sum(seconds.values()):.0f} s in all; workers finish at "
          + ", ".join(f"{w:.0f} s" for w in finish(seconds)) + f" (wrote {SECONDS})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
