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


COMPILING = """\
import torch
model = torch.nn.Linear(4, 2)
for step in range(3):
    model(torch.randn(8, 4))
model.eval()
model(torch.randn(50, 4))  # EXPECT: first_call_compile
"""


def test_exact_lines_leave_out_the_cold_cache_of_warmup(tmp_path: Path) -> None:
    """A cold-cache finding confined to warm-up names its costliest compile's line, which no tag may name: it is
    no exact-line matter; the same finding after warm-up at an untagged line is a wrong line."""
    path = tmp_path / "compiles.py"
    path.write_text(COMPILING)
    prog = h.load_program(path)

    def finding(line: int, after_warmup: bool) -> dict[str, object]:
        return {"kind": "first_call_compile", "severity": "warning", "call_site": f"compiles.py:{line}",
                "after_warmup": after_warmup, "evidence": {}}

    warm = h.score(prog, h.Outcome(prog.name, "run-neuron", True, findings=[finding(4, False), finding(6, True)]))
    assert (warm.found, warm.in_file, warm.exact, warm.alarms) == (1, 1, 1, 1)
    late = h.score(prog, h.Outcome(prog.name, "run-neuron", True, findings=[finding(4, True), finding(6, True)]))
    assert (late.found, late.in_file, late.exact, late.alarms) == (1, 2, 1, 2)
