"""The tag grammar of tests/userland (README.md there) as the harness reads it: `# BENCH-ONLY: reason` keeps a
program out of the test suite (`_suite.CASES`) and in `python -m bench accuracy` (`_harness.programs`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.userland import _harness as h
from tests.userland import _suite as s

BODY = """\
import torch
x = torch.ones(3)
print(x.sum().item())  # EXPECT[cpu]: sync_point
"""


def test_bench_only_tag_gives_its_reason(tmp_path: Path) -> None:
    tagged = tmp_path / "slow_prog.py"
    tagged.write_text('"""A slow one."""\n# BENCH-ONLY: torch.compile of two models, 40 s\n' + BODY)
    plain = tmp_path / "plain_prog.py"
    plain.write_text(BODY)
    prog = h.load_program(tagged)
    assert prog.bench_only == "torch.compile of two models, 40 s"
    assert prog.expected("cpu") == [("sync_point", 5)]  # the tag line is a comment, nothing else changes
    assert h.load_program(plain).bench_only == ""


def test_bench_only_tag_needs_a_reason(tmp_path: Path) -> None:
    bare = tmp_path / "bare.py"
    bare.write_text("# BENCH-ONLY:\n" + BODY)
    with pytest.raises(ValueError, match="needs its reason"):
        h.load_program(bare)


def test_bench_only_programs_run_in_bench_accuracy_not_in_the_suite() -> None:
    """bench/bench_accuracy.py selects programs with `h.programs(glob)`; the suite's cases come from
    `_suite.PROGRAMS`."""
    every = h.programs()
    bench_only = {p.name for p in every if p.bench_only}
    assert bench_only, "no program in tests/userland is tagged BENCH-ONLY"
    in_suite = {p.name for p, _way in s.CASES}
    assert not bench_only & in_suite
    assert in_suite == {p.name for p in every} - bench_only
    assert {p.name for p in s.PROGRAMS} == in_suite
