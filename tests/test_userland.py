"""User programs (tests/userland) against their tags: every expected finding at its exact line (issue 14).

Each program runs as a real subprocess on the emulated neuron device through `neuron-prof run` and through
`neuron_prof.profile()`, and, when its CPU run has something to check (CPU tags, CLEAN), on the CPU through one
of the two (alternating, so both are covered). All runs
start when the first test asks for one, two at a time (USERLAND_JOBS), and each test reads its run's result.
Tag grammar and matching rules: tests/userland/README.md. `python -m bench accuracy` prints the same
comparison as numbers, over all four ways.
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from tests.userland import _harness as h

pytestmark = pytest.mark.slow  # subprocess runs of real programs, like the other multi-process tests

PROGRAMS = h.programs()


def _cpu_way(i: int) -> str:
    return "run-cpu" if i % 2 == 0 else "profile-cpu"


def _ways(i: int, prog: h.Program) -> tuple[str, ...]:
    """`profile-neuron` for every program (its run also holds the emulator's own log for `test_tags_are_true`);
    `run-neuron` for every other program and for those whose way of running matters to `run` (they profile
    themselves, or are multi-rank); a CPU way where the CPU run has something to check (CPU tags or a CLEAN
    program's no-alarm promise). Both capture ways reach findings through the one attribution path; the
    full matrix, every program four ways, is `python -m bench accuracy` (and this keeps the suite inside its
    10 minutes)."""
    run = ("run-neuron",) if i % 2 == 1 or prog.profiles_itself or prog.ranks > 1 else ()
    cpu = (_cpu_way(i),) if prog.clean or prog.expected("cpu") else ()
    return ("profile-neuron", *run, *cpu)


CASES = [(p, way) for i, p in enumerate(PROGRAMS) for way in _ways(i, p)]


def _param(prog: h.Program, way: str) -> Any:
    device = way.split("-", 1)[1]
    marks = []
    if device in prog.xfail:
        marks.append(pytest.mark.xfail(raises=h.KnownFailure, strict=True,
                                       reason=f"{prog.name} cannot run on the emulated {device} device: "
                                              f"{prog.xfail[device]}"))
    return pytest.param((prog, way), marks=marks, id=f"{prog.stem}-{way}")


class Runs:
    """Every run the selected tests need, started at once on a small pool; results by (program, way)."""

    def __init__(self, keys: list[tuple[h.Program, str]], workdir: str, jobs: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=jobs)
        self.futures: dict[tuple[str, str], Future[h.Outcome]] = {}
        for prog, way in h.longest_first(keys):
            key = (prog.name, way)
            if key not in self.futures:
                self.futures[key] = self.pool.submit(h.run_program, prog, way, workdir, timeout=240,
                                                     truth=way == "profile-neuron")

    def result(self, prog: h.Program, way: str) -> h.Outcome:
        return self.futures[(prog.name, way)].result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    keys: list[tuple[h.Program, str]] = []
    for item in request.session.items:
        cs = getattr(item, "callspec", None)
        if getattr(item, "module", None) is not request.module or cs is None:
            continue
        if "case" in cs.params:
            keys.append(cs.params["case"])
        elif "prog" in cs.params:
            keys.append((cs.params["prog"], "profile-neuron"))
    r = Runs(keys, str(tmp_path_factory.mktemp("userland")), int(os.environ.get("USERLAND_JOBS", "2")))
    yield r
    r.close()


@pytest.mark.parametrize("case", [_param(p, w) for p, w in CASES])
def test_findings_at_exact_lines(case: tuple[h.Program, str], runs: Runs) -> None:
    """Every `# EXPECT` of the run's device is found at its exact line; CLEAN programs: nothing above info
    (but the load-dependent kinds, `h.LOAD_DEPENDENT`, which `bench accuracy` measures)."""
    prog, way = case
    out = runs.result(prog, way)
    known = h.known_failure(prog, out)
    if known:
        raise h.KnownFailure(f"{prog.name} ({way}) failed as its XFAIL tag says: {known}")
    assert out.ok, out.error
    s = h.score(prog, out)
    alarms = [a for a in s.clean_alarms if a.split("@", 1)[0] not in h.LOAD_DEPENDENT]
    assert not s.misses and not alarms, h.describe(prog, out)


@pytest.mark.parametrize("prog", [
    pytest.param(p, id=p.stem, marks=[pytest.mark.xfail(raises=h.KnownFailure, strict=True,
                                                        reason=f"XFAIL[neuron]: {p.xfail['neuron']}")]
                 if "neuron" in p.xfail else []) for p in PROGRAMS])
def test_tags_are_true(prog: h.Program, runs: Runs) -> None:
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
    """At least 16 programs, 4 of them CLEAN, one per shape the issue names, every tag well formed."""
    assert len(PROGRAMS) >= 16
    assert sum(p.clean for p in PROGRAMS) >= 4
    assert any(p.ranks == 2 for p in PROGRAMS)
    assert any(p.profiles_itself for p in PROGRAMS)
    kinds = {t.kind for p in PROGRAMS for t in p.tags if t.required}
    assert {"cpu_fallback", "sync_point", "dtype_demotion", "first_call_compile", "shape_churn",
            "recompile"} <= kinds
    for p in PROGRAMS:
        assert p.clean or p.expected("neuron") or p.expected("cpu"), f"{p.name}: no EXPECT tag and not CLEAN"
