"""User programs (tests/userland) against their tags: every expected finding at its exact line (issue 14).

Each program runs in a process of its own (forked from one that imported torch already, tests/userland/_fork.py)
on the emulated neuron device through `neuron_prof.profile()` (here)
and through `neuron-prof run` (tests/test_userland_run.py, which also has half the programs' CPU runs), and,
when its CPU run has something to check (CPU tags, CLEAN), on the CPU through one of the two (alternating,
so both are covered). A file's runs start when its first test asks for one, two at a time (USERLAND_JOBS),
and each test reads its run's result (tests/userland/_suite.py). Tag grammar and matching rules:
tests/userland/README.md. `python -m bench accuracy` prints the same comparison as numbers, over all
four ways.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.userland import _harness as h
from tests.userland import _suite as s

pytestmark = pytest.mark.slow  # subprocess runs of real programs, like the other multi-process tests

PROGRAMS = s.PROGRAMS


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[s.Runs]:
    yield from s.module_runs(request, tmp_path_factory)


@pytest.mark.parametrize("case", s.case_params("profile"))
def test_findings_at_exact_lines(case: tuple[h.Program, str], runs: s.Runs) -> None:
    """Every `# EXPECT` of the run's device is found at its exact line; CLEAN programs: nothing above info
    (but the load-dependent kinds, `h.LOAD_DEPENDENT`, which `bench accuracy` measures)."""
    s.check_findings(case, runs)


@pytest.mark.parametrize("prog", s.program_params())
def test_tags_are_true(prog: h.Program, runs: s.Runs) -> None:
    """The test set itself: each neuron tag names a line where the emulator really fell back, waited, demoted
    float64 or compiled (its own log, which the profiler never reads); CLEAN programs have no fallback or
    float64 at all."""
    out = runs.result(prog, "profile-neuron")
    known = h.known_failure(prog, out)
    if known:
        raise h.KnownFailure(f"{prog.name} does not run on the emulated device ({known})")
    assert out.ok and out.truth is not None, f"the profile-neuron run failed: {out.error}"
    bad = h.check_truth(prog, out.truth)
    assert not bad, "\n".join(bad)


def test_the_set_covers_what_issue_14_asks() -> None:
    """At least 16 programs, 4 of them CLEAN, one per shape the issue names, every tag well formed; every
    case runs in one of the two files."""
    assert len(PROGRAMS) >= 16
    assert sum(p.clean for p in PROGRAMS) >= 4
    assert any(p.ranks == 2 for p in PROGRAMS)
    assert any(p.profiles_itself for p in PROGRAMS)
    kinds = {t.kind for p in PROGRAMS for t in p.tags if t.required}
    assert {"cpu_fallback", "sync_point", "dtype_demotion", "first_call_compile", "shape_churn",
            "recompile"} <= kinds
    for p in PROGRAMS:
        assert p.clean or p.expected("neuron") or p.expected("cpu"), f"{p.name}: no EXPECT tag and not CLEAN"
    assert len(s.case_params("profile")) + len(s.case_params("run")) == len(s.CASES)
