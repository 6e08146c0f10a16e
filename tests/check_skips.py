"""Fail when a test run skipped more than tests/skips_allowed.txt allows.

    python tests/check_skips.py build/test-reports/*.xml     # the JUnit XML files pytest wrote

Prints every skip with its reason; exit 1 when a skip matches no allowance line (by the start of its
reason) or more distinct tests skip for a line than its count (the same test skipped in several reports, one
per Python, counts once), 2 when no report was given or one cannot be read.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ALLOWANCE = Path(__file__).with_name("skips_allowed.txt")


def allowance(path: Path = ALLOWANCE) -> list[tuple[int, str, str]]:
    """(count, capability, reason prefix) per non-comment line of the allowance file."""
    rows = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            count, capability, reason = (part.strip() for part in line.split("|", 2))
            rows.append((int(count), capability, reason))
    return rows


def skipped(reports: list[Path]) -> list[tuple[str, str]]:
    """(test id, reason) of every skipped test in the JUnit XML reports."""
    out = []
    for report in reports:
        for case in ET.parse(report).getroot().iter("testcase"):
            for skip in case.iter("skipped"):
                if skip.get("type") == "pytest.xfail":
                    continue
                reason = skip.get("message", "").removeprefix("Skipped: ")
                out.append((f"{case.get('classname')}::{case.get('name')}", reason))
    return out


def verdict(skips: list[tuple[str, str]], allowed: list[tuple[int, str, str]]) -> list[str]:
    """The problems: skips no line allows, and lines whose count is exceeded (empty when all is well)."""
    used: dict[str, set[str]] = defaultdict(set)
    problems = []
    for test, reason in skips:
        line = next((a for a in allowed if reason.startswith(a[2])), None)
        if line is None:
            problems.append(f"{test}: skipped ({reason}), which {ALLOWANCE.name} does not allow")
        else:
            used[line[2]].add(test)
    for count, capability, reason in allowed:
        if len(used[reason]) > count:
            problems.append(f"{len(used[reason])} tests skipped for '{reason}' ({capability}); {count} allowed")
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        skips = skipped([Path(a) for a in args])
    except (OSError, ET.ParseError) as e:
        print(f"check_skips: cannot read a report: {e}", file=sys.stderr)
        return 2
    for test, reason in skips:
        print(f"skipped {test}: {reason}")
    problems = verdict(skips, allowance())
    for p in problems:
        print(f"check_skips: {p}", file=sys.stderr)
    print(f"check_skips: {len(skips)} skipped, {'FAILED' if problems else 'all allowed'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
