"""What tests/test_userland.py and tests/test_userland_run.py share: which ways each program runs, the runs
themselves (a module's runs start when its first test asks for one, USERLAND_JOBS at a time), and the checks.

The runs are split over two test files, the `profile()` ways and the `neuron-prof run` ways, so that
pytest-xdist (`--dist loadfile`) can give them to its two workers: one file of every run took a worker
~275 s of a `make test`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from tests.userland import _harness as h

PROGRAMS = [p for p in h.programs() if not p.bench_only]
"""The programs the suite runs: every one but those tagged `# BENCH-ONLY: reason`, which only `python -m bench
accuracy` runs (the suite's time budget)."""


FORK = os.environ.get("USERLAND_FORK", "1") != "0"
"""Each run's process is forked from one that imported torch already (_fork.py), ~1 s of CPU less per process
than starting from scratch (USERLAND_FORK=0, as `bench accuracy` runs them)."""


def _cpu_way(i: int) -> str:
    return "run-cpu" if i % 2 == 0 else "profile-cpu"


def _ways(i: int, prog: h.Program) -> tuple[str, ...]:
    """`profile-neuron` for every program (its run also holds the emulator's own log for `test_tags_are_true`);
    `run-neuron` for every fourth program and for those whose way of running matters to `run` (they profile
    themselves, or are multi-rank); a CPU way where the CPU run has something to check (CPU tags or a CLEAN
    program's no-alarm promise). Both capture ways reach findings through the one attribution path; the
    full matrix, every program four ways, is `python -m bench accuracy` (and this keeps the suite inside its
    10 minutes: a run is about 3 to 5 s of CPU, forked, FORK)."""
    run = ("run-neuron",) if i % 4 == 1 or prog.profiles_itself or prog.ranks > 1 else ()
    cpu = (_cpu_way(i),) if prog.clean or prog.expected("cpu") else ()
    return ("profile-neuron", *run, *cpu)


CASES = [(p, way) for i, p in enumerate(PROGRAMS) for way in _ways(i, p)]


def case_params(api: str) -> list[Any]:
    """pytest params of the cases whose way starts with `api` ("profile" or "run"), xfail where a program's
    XFAIL tag says that device cannot run it."""
    out = []
    for prog, way in CASES:
        if not way.startswith(api + "-"):
            continue
        device = way.split("-", 1)[1]
        marks = []
        if device in prog.xfail:
            marks.append(pytest.mark.xfail(raises=h.KnownFailure, strict=True,
                                           reason=f"{prog.name} cannot run on the emulated {device} device: "
                                                  f"{prog.xfail[device]}"))
        out.append(pytest.param((prog, way), marks=marks, id=f"{prog.stem}-{way}"))
    return out


def program_params() -> list[Any]:
    """pytest params of every program (test_tags_are_true), xfail where it cannot run on the emulated
    device."""
    return [pytest.param(p, id=p.stem, marks=[pytest.mark.xfail(raises=h.KnownFailure, strict=True,
                                                                reason=f"XFAIL[neuron]: {p.xfail['neuron']}")]
                         if "neuron" in p.xfail else []) for p in PROGRAMS]


class Runs:
    """Every run the selected tests need, started at once on a small pool; results by (program, way)."""

    def __init__(self, keys: list[tuple[h.Program, str]], workdir: str, jobs: int) -> None:
        self.pool = ThreadPoolExecutor(max_workers=jobs)
        self.futures: dict[tuple[str, str], Future[h.Outcome]] = {}
        for prog, way in h.longest_first(keys):
            key = (prog.name, way)
            if key not in self.futures:
                self.futures[key] = self.pool.submit(h.run_program, prog, way, workdir, timeout=240,
                                                     truth=way == "profile-neuron", fork=FORK)

    def result(self, prog: h.Program, way: str) -> h.Outcome:
        return self.futures[(prog.name, way)].result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def module_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runs]:
    """The body of a module fixture: the runs its selected tests need (parameter `case`: that run;
    `prog`: its profile-neuron run)."""
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


def check_findings(case: tuple[h.Program, str], runs: Runs) -> None:
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
