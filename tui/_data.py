"""What the TUI shows, computed once off the UI thread: traces, findings and the per-view tables.

`prepare(sources, progress)` runs in the App's worker. It accepts paths (loaded with
`neuron_prof.loaders.load`) or ready Traces, so tests and benchmarks can hand in a built Trace.
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
from neuron_prof.analysis import LineTable, line_table, nesting, step_breakdown
from neuron_prof.model import Trace, split_ranks
from neuron_prof.tui import _shape
from neuron_prof.tui._fmt import fmt_bytes
from neuron_prof.tui._lanes import Lane, build_lanes, profiled_region
from neuron_prof.tui._lines import lines_view

Source = str | os.PathLike[str] | Trace
Progress = Callable[[float, str], None]
"""progress(fraction done 0-1, what is happening now)."""


def analyse(trace: Trace) -> tuple[dict[str, Any], list[Finding], list[str]]:
    """(totals, findings most costly first, warnings) from neuron_prof.analysis.

    Computed afresh, as `neuron-prof summary` does, so both show the same findings. A failing analysis
    falls back to the findings stored in the file and is reported on the overview, not raised: the
    timeline and tables stay usable.
    """
    from neuron_prof.analysis import report

    try:
        rep = report(trace)
    except Exception as e:  # noqa: BLE001 - shown to the user
        stored = [Finding.from_dict(d) for d in trace.findings]
        note = f"analysis failed: {type(e).__name__}: {e}" + (
            "; showing the findings stored in the file" if stored else ""
        )
        return {"wall_ns": trace.wall_ns}, stored, [note]
    return rep.totals, list(rep.findings), []


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

    @cached_property
    def depth(self) -> np.ndarray:
        """Nesting depth of every slice on its track (0: top level)."""
        # the analysis counts depth from 1 (top level); lanes count from 0
        d: np.ndarray = nesting(self.trace, np.arange(len(self.trace.slices), dtype=np.int64)).depth - 1
        return d

    def warm(self, cancelled: Callable[[], bool] = lambda: False) -> None:
        """Compute every view's table now (a background worker calls this after the first screen)."""
        for name in ("lanes", "ops", "compiles", "fallbacks", "memory", "lines"):
            if cancelled():
                return
            getattr(self, name)

    @cached_property
    def context(self) -> Context:
        """One analysis context for the views' tables (call sites and compiles are worked out once)."""
        return Context(self.trace)

    @cached_property
    def compiles(self) -> _shape.Table:
        return _shape.compile_table(self.trace, self.context)

    @cached_property
    def fallbacks(self) -> _shape.Table:
        return _shape.fallback_table(self.trace, self.findings, self.context)

    @cached_property
    def op_accounting(self) -> OpTable:
        """The analysis' op accounting (calls, self and total time per op, and each op's calls)."""
        return op_table(self.trace)

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

    @property
    def rank(self) -> RankData:
        return self.ranks[self.current]

    @cached_property
    def collectives(self) -> _shape.Table:
        return _shape.collective_table([r.trace for r in self.ranks])

    @cached_property
    def rank_table(self) -> _shape.Table:
        return _shape.rank_table([(r.trace, r.totals) for r in self.ranks])

    def warm(self, cancelled: Callable[[], bool] = lambda: False) -> None:
        """Compute the shown rank's views, then the cross-rank tables."""
        self.rank.warm(cancelled)
        if not cancelled():
            _ = self.collectives, self.rank_table


def _rank(trace: Trace, source: str, cross: Sequence[Finding] = ()) -> RankData:
    totals, found, warnings = analyse(trace)
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
        t = time.perf_counter()
        trace = src if isinstance(src, Trace) else load(src)
        timings[f"load {i}"] = time.perf_counter() - t
        report((i + 0.6) / n, f"analysing {os.path.basename(name)}")
        t = time.perf_counter()
        source = str(trace.metadata.get("source", name))
        parts = split_ranks(trace)
        if parts:  # a merged trace: one entry per rank, each with its own views and the stragglers about it
            cross = cross_rank_findings(trace)
            del trace
            new = [_rank(part, source, [f for f in cross if f.rank == r]) for r, part in parts.items()]
        else:
            new = [_rank(trace, source)]
        # the overview is what a user sees first; the other views' tables are warmed after it shows
        for rank in new:
            _ = rank.steps
        ranks += new
        timings[f"analyse {i}"] = time.perf_counter() - t
    # several ranks: order by rank number when every trace has one
    if all(r.trace.rank is not None for r in ranks):
        ranks.sort(key=lambda r: r.trace.rank)  # type: ignore[arg-type, return-value]
    report(1.0, "ready")
    return TuiData(ranks=ranks, timings=timings)


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
        kind = {
            "first_call_compile": "compile",
            "recompile": "compile",
            "shape_churn": "compile",
            "cpu_fallback": "fallback",
            "sync_point": "sync",
            "collective": "collective",
            "memory_peak": "memory",
            "dtype_demotion": "dtype",
        }.get(f.kind)
        if kind is not None:
            track = rank.trace.find_track(kind)
    return f.ts_ns, track
