"""What the TUI shows, computed once off the UI thread: traces, findings and the per-view tables.

`prepare(sources, progress)` runs in the App's worker: the load and the first pass, which is what the
overview shows (the analysis' totals and findings, `neuron_prof.analysis.overview`, exactly `summary`'s).
Every other view's tables come after the overview is on screen (`TuiData.warm`, in a thread); a view whose
tables are not there yet is not ready (`TuiData.is_ready`) and the app says so until they are. `prepare`
accepts paths (loaded with `neuron_prof.loaders.load`) or ready Traces, so tests and benchmarks can hand in
a built Trace.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from neuron_prof.analysis import Context, Finding, OpTable, cross_rank_findings, find_steps, op_table, sort_findings
from neuron_prof.analysis import LineTable, line_table, nesting, overview, step_breakdown
from neuron_prof.analysis import Family, info_of
from neuron_prof.model import Trace, TrackKind, split_ranks
from neuron_prof.tui import _shape
from neuron_prof.tui._fmt import fmt_bytes
from neuron_prof.tui._lanes import Lane, build_lanes, profiled_region
from neuron_prof.tui._lines import lines_view

Source = str | os.PathLike[str] | Trace
Progress = Callable[[float, str], None]
"""progress(fraction done 0-1, what is happening now)."""

RANK_TABLES = ("ops", "compiles", "fallbacks", "memory", "lanes", "view", "lines")
"""RankData's tables built after the first screen, in this order unless a view waits for one."""
DATA_TABLES = ("collectives", "rank_table")
"""TuiData's cross-rank tables, built after the shown rank's."""
VIEW_NEEDS: dict[str, tuple[str, ...]] = {
    "overview": (),
    "compile": ("compiles",),
    "fallback": ("fallbacks",),
    "ops": ("ops",),
    "timeline": ("lanes", "view"),
    "memory": ("memory",),
    "collectives": ("collectives",),
    "ranks": ("rank_table",),
    "lines": ("lines",),
    "device": (),
}
"""The tables each view shows (RANK_TABLES of the shown rank, or DATA_TABLES); the overview's come first."""


def analyse(trace: Trace, ctx: Context) -> tuple[dict[str, Any], list[Finding], list[str]]:
    """(totals, findings most costly first, warnings): `neuron_prof.analysis.overview` over `ctx`.

    Computed afresh, as `neuron-prof summary` does (its totals and findings come from the same function),
    so both show the same findings. A failing analysis falls back to the findings stored in the file and is
    reported on the overview, not raised: the timeline and tables stay usable.
    """
    try:
        first = overview(trace, ctx)
    except Exception as e:  # noqa: BLE001 - shown to the user
        stored = [Finding.from_dict(d) for d in trace.findings]
        note = f"analysis failed: {type(e).__name__}: {e}" + (
            "; showing the findings stored in the file" if stored else ""
        )
        return {"wall_ns": trace.wall_ns}, stored, [note]
    return first.totals, list(first.findings), []


@dataclass
class RankData:
    """One loaded trace (one rank) and what its views show."""

    trace: Trace
    source: str
    findings: list[Finding]
    warnings: list[str]
    totals: dict[str, Any]
    """The analysis' totals (summary --json "totals")."""
    origin: int
    """Start of the profiled region (ns): times are shown relative to it."""
    span: tuple[int, int]
    """The profiled region (Unix ns, `_lanes.profiled_region`): the timeline's whole extent."""
    context: Context
    """The analysis context the totals and findings were computed over; the views' tables share it (call
    sites, compiles and nesting are worked out once)."""

    @cached_property
    def depth(self) -> np.ndarray:
        """Nesting depth of every slice on its track (0: top level)."""
        # the analysis counts depth from 1 (top level); lanes count from 0
        d: np.ndarray = nesting(self.trace, np.arange(len(self.trace.slices), dtype=np.int64)).depth - 1
        return d

    @cached_property
    def compiles(self) -> _shape.Table:
        return _shape.compile_table(self.trace, self.context)

    @cached_property
    def fallbacks(self) -> _shape.Table:
        return _shape.fallback_table(self.trace, self.findings, self.context)

    @cached_property
    def op_accounting(self) -> OpTable:
        """The analysis' op accounting (calls, self and total time per op, and each op's calls): the one the
        totals were computed from, over the same context."""
        return op_table(self.trace, self.context)

    @cached_property
    def ops(self) -> _shape.Table:
        return _shape.op_view(self.trace, self.op_accounting)

    @cached_property
    def line_table(self) -> LineTable:
        """The analysis' lines view (every user line's costs, backward charged to its forward line)."""
        return line_table(self.trace, self.context)

    @cached_property
    def lines(self) -> _shape.Table:
        return lines_view(self.line_table)

    @cached_property
    def step_parts(self) -> list[dict[str, Any]]:
        """The analysis' per-step breakdown (`summary --json` step_breakdown)."""
        return step_breakdown(self.trace, self.context)

    @cached_property
    def steps(self) -> np.ndarray:
        return _shape.step_times(self.trace)

    @cached_property
    def lanes(self) -> list[Lane]:
        return build_lanes(self.trace, self.depth, self.origin, region=self.span)

    @cached_property
    def view(self) -> tuple[int, int]:
        """The timeline's first window: the profiled steps (the whole region when no steps are found)."""
        _, start, end = find_steps(self.trace)
        lo, hi = self.span
        if len(start):
            a, b = max(int(start.min()), lo), min(int(end.max()), hi)
            if b > a:
                return a, b
        return lo, hi

    @cached_property
    def memory(self) -> list[tuple[int, np.ndarray, np.ndarray]]:
        return _shape.memory_series(self.trace)

    def calls(self, op: int) -> _shape.Table:
        """Every call of entry `op` of the op table (the ops view's "op" column), longest first."""
        return _shape.calls_table(self.trace, self.op_accounting, op)

    @property
    def rank_label(self) -> str:
        r = self.trace.rank
        return f"rank {r}" if r is not None else os.path.basename(self.source) or "trace"


@dataclass
class TuiData:
    """Every loaded rank, in the order given; `current` is the one the views show."""

    ranks: list[RankData]
    current: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    failed: dict[tuple[int, str], str] = field(default_factory=dict)
    """(rank index, table) -> why the table could not be built (shown by the view that needs it)."""

    @property
    def rank(self) -> RankData:
        return self.ranks[self.current]

    @cached_property
    def collectives(self) -> _shape.Table:
        return _shape.collective_table([r.trace for r in self.ranks])

    @cached_property
    def rank_table(self) -> _shape.Table:
        return _shape.rank_table([(r.trace, r.totals) for r in self.ranks])

    def _holder(self, name: str, rank: int) -> Any:
        return self if name in DATA_TABLES else self.ranks[rank]

    def _built(self, name: str, rank: int) -> bool:
        # a cached_property is in the instance's __dict__ once computed (set after it is whole)
        return name in vars(self._holder(name, rank)) or (rank, name) in self.failed

    def is_ready(self, view: str) -> bool:
        """Whether every table `view` shows is built for the shown rank (a failed one never is: `failure`)."""
        return bool(self.ranks) and all(
            n in vars(self._holder(n, self.current)) for n in VIEW_NEEDS.get(view, ())
        )

    def failure(self, view: str) -> str | None:
        """Why a table of `view` could not be built, for the shown rank (None: none failed)."""
        return next((self.failed[(self.current, n)] for n in VIEW_NEEDS.get(view, ())
                     if (self.current, n) in self.failed), None)

    def warm(
        self,
        cancelled: Callable[[], bool] = lambda: False,
        wanted: Callable[[], str | None] = lambda: None,
        built: Callable[[str], None] = lambda name: None,
        before: Callable[[str], None] = lambda name: None,
    ) -> None:
        """Build the shown rank's tables, then the cross-rank ones (in a thread, after the first screen).

        Each table in RANK_TABLES order, except that the tables of the view `wanted()` names (the one the
        user is waiting for) go first; `built(name)` after each. `before(name)` runs first (the app's
        `before_table` hook). A table that raises is recorded in `failed`, not raised: its view says so and
        the other views still fill in.
        """
        rank = self.current
        order = [*RANK_TABLES, *DATA_TABLES]
        while not cancelled():
            todo = [n for n in order if not self._built(n, rank)]
            if not todo:
                return
            view = wanted()
            first = [n for n in VIEW_NEEDS.get(view or "", ()) if n in todo]
            name = (first or todo)[0]
            t = time.perf_counter()
            try:
                before(name)
                getattr(self._holder(name, rank), name)
            except Exception as e:  # noqa: BLE001 - shown by the view that needs the table
                self.failed[(rank, name)] = f"{name} could not be computed: {type(e).__name__}: {e}"
            self.timings[f"table {name}"] = time.perf_counter() - t
            built(name)


def _rank(trace: Trace, source: str, cross: Sequence[Finding] = ()) -> RankData:
    ctx = Context(trace)
    totals, found, warnings = analyse(trace, ctx)
    if cross:
        found = sort_findings([*found, *cross])
    warnings = [*map(str, trace.metadata.get("load_warnings") or []), *warnings]
    span = profiled_region(trace)
    return RankData(
        trace=trace,
        source=source,
        findings=found,
        warnings=warnings,
        totals=totals,
        origin=span[0],
        span=span,
        context=ctx,
    )


def _size(path: str | os.PathLike[str]) -> str:
    try:
        return f" ({fmt_bytes(os.path.getsize(path))})"
    except OSError:
        return ""  # the loader says what is wrong with the file


def prepare(
    sources: Sequence[Source], progress: Progress | None = None, cancelled: Callable[[], bool] = lambda: False
) -> TuiData:
    """Load every source and compute what the first screens need. Raises TraceLoadError on a bad file."""
    from neuron_prof.loaders import load

    report: Progress = progress or (lambda f, s: None)
    timings: dict[str, float] = {}
    ranks: list[RankData] = []
    n = max(len(sources), 1)
    for i, src in enumerate(sources):
        if cancelled():
            break
        name = "trace" if isinstance(src, Trace) else os.fspath(src)
        size = "" if isinstance(src, Trace) else _size(src)
        report(i / n, f"loading {os.path.basename(name)}{size}")
        t, cpu = time.perf_counter(), time.thread_time()
        trace = src if isinstance(src, Trace) else load(src)
        timings[f"load {i}"] = time.perf_counter() - t
        timings[f"load {i} cpu"] = time.thread_time() - cpu  # this thread's: a parallel parse's workers apart
        report((i + 0.6) / n, f"analysing {os.path.basename(name)}")
        t, cpu = time.perf_counter(), time.thread_time()
        source = str(trace.metadata.get("source", name))
        parts = split_ranks(trace)
        if parts:  # a merged trace: one entry per rank, each with its own views and the stragglers about it
            cross = cross_rank_findings(trace)
            del trace
            new = [_rank(part, source, [f for f in cross if f.rank == r]) for r, part in parts.items()]
        else:
            new = [_rank(trace, source)]
        # the overview is what a user sees first (step times and, on a tall screen, the step mix);
        # the other views' tables are built after it shows
        for rank in new:
            _ = rank.steps, rank.step_parts
        ranks += new
        timings[f"analyse {i}"] = time.perf_counter() - t
        timings[f"analyse {i} cpu"] = time.thread_time() - cpu
    # several ranks: order by rank number when every trace has one
    if all(r.trace.rank is not None for r in ranks):
        ranks.sort(key=lambda r: r.trace.rank)  # type: ignore[arg-type, return-value]
    report(1.0, "ready")
    return TuiData(ranks=ranks, timings=timings)


FAMILY_TRACK = {Family.COMPILE: TrackKind.COMPILE, Family.FALLBACK: TrackKind.FALLBACK, Family.SYNC: TrackKind.SYNC,
                Family.COLLECTIVES: TrackKind.COLLECTIVE, Family.MEMORY: TrackKind.MEMORY, Family.DTYPE: TrackKind.DTYPE}
"""The track where a finding of each family is looked at when its evidence names no event."""


def finding_target(f: Finding, rank: RankData) -> tuple[int | None, int | None]:
    """(time, track) on the timeline where a finding is best looked at."""
    ev: dict[str, Any] = f.evidence or {}
    track = None
    rows = ev.get("slices") or ev.get("rows") or ev.get("slice_rows")
    if isinstance(rows, list) and rows and isinstance(rows[0], int) and 0 <= rows[0] < len(rank.trace.slices):
        track = int(rank.trace.slices.track[rows[0]])
        if f.ts_ns is None:
            return int(rank.trace.slices.ts_ns[rows[0]]), track
    if track is None:
        info = info_of(f.kind)
        kind = FAMILY_TRACK.get(info.family) if info is not None else None
        if kind is not None:
            track = rank.trace.find_track(kind)
    return f.ts_ns, track
