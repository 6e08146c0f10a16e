"""What the TUI shows, computed once off the UI thread: traces, findings and the per-view tables.

`prepare(sources, progress)` runs in the App's worker: the load and the first pass, which is what the
overview shows (the analysis' totals and findings, `neuron_prof.analysis.overview`, exactly `summary`'s).
The first pass over a trace file is kept beside its column cache (`neuron_prof.loaders.kept`, also written by
`summary` and `check`): a later open of the unchanged file draws the overview from it without the first pass.
Every other view's tables come after the overview is on screen (`TuiData.warm`, in a thread); a view whose
tables are not there yet is not ready (`TuiData.is_ready`) and the app says so until they are. `prepare`
accepts paths (loaded with `neuron_prof.loaders.load`) or ready Traces, so tests and benchmarks can hand in
a built Trace.

A view's tables are declared by its screen (`ViewScreen.TABLES`): a `RankTable` (built per rank, from its
trace and analysis) or a `CrossTable` (over every loaded rank), each a name and a function that builds it.
Which tables exist, in which order they are built, and which a view waits for come from the view registry
(`neuron_prof.tui.views`), handed in by the app; nothing here names a view.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

import numpy as np

from neuron_prof.analysis import (
    Context,
    Family,
    Finding,
    LineTable,
    OpTable,
    Report,
    cross_rank_findings,
    info_of,
    line_table,
    op_table,
    overview,
    slice_depths,
    sort_findings,
    step_breakdown,
)
from neuron_prof.analysis.efficiency.critical_path import critical_path
from neuron_prof.analysis.fmt import fmt_bytes
from neuron_prof.history import trend_of
from neuron_prof.loaders import kept
from neuron_prof.model import Trace, TrackKind, split_ranks
from neuron_prof.tui._lanes import profiled_region
from neuron_prof.tui._shape import step_times

Source = str | os.PathLike[str] | Trace
Progress = Callable[[float, str], None]
"""progress(fraction done 0-1, what is happening now)."""
T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class RankTable(Generic[T]):
    """A table a view shows for the shown rank, built in the background after the first screen.

    `name` is how the table is called in `TuiData.failed`, the timings and the app's `before_table` hook
    (one name per table across the views); `build` makes it from a rank's trace and analysis."""

    name: str
    build: Callable[[RankData], T]
    first: bool = False
    """Built before the other views' tables (the ops table is; the rest go in the order of their views)."""

    def of(self, data: TuiData) -> T:
        """This table of the shown rank (built now if the background has not built it yet)."""
        return data.rank.table(self)


@dataclass(frozen=True, eq=False)
class CrossTable(Generic[T]):
    """A table over every loaded rank (the collectives, the rank table), built after the shown rank's tables."""

    name: str
    build: Callable[[Sequence[RankData]], T]
    first = False

    def of(self, data: TuiData) -> T:
        """The table (built now if the background has not built it yet)."""
        return data.table(self)


ViewTable = RankTable[Any] | CrossTable[Any]
"""A table a view declares (`ViewScreen.TABLES`)."""


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
    tables: dict[str, Any] = field(default_factory=dict, repr=False)
    """The views' tables of this rank built so far, by name (`RankTable`)."""

    @cached_property
    def depth(self) -> np.ndarray:
        """Nesting depth of every slice on its track (0: top level), in `row_dtype`: for a big cached trace in a
        mapped file (`Context.empty`) whose pages go back after it is built."""
        ctx = self.context

        # lanes count depth from 0; the host threads' come from the analyses' host nesting (`slice_depths`)
        return ctx.memo("tui_depth", lambda: slice_depths(ctx, top=0))  # type: ignore[no-any-return]

    @cached_property
    def op_accounting(self) -> OpTable:
        """The analysis' op accounting (calls, self and total time per op, and each op's calls): the one the
        totals were computed from, over the same context."""
        return op_table(self.trace, self.context)

    @cached_property
    def line_table(self) -> LineTable:
        """The analysis' lines view (every user line's costs, backward charged to its forward line)."""
        return line_table(self.trace, self.context)

    @cached_property
    def step_parts(self) -> list[dict[str, Any]]:
        """The analysis' per-step breakdown (`summary --json` step_breakdown)."""
        return step_breakdown(self.trace, self.context)

    @cached_property
    def critical_paths(self) -> list[dict[str, Any]]:
        """The critical path of the first steps after warm-up (`summary --json` efficiency.critical_path)."""
        return [p.to_dict(self.context, 3) for p in critical_path(self.context)]

    @cached_property
    def steps(self) -> np.ndarray:
        """Each profiled step's duration (ns), in time order: the overview's first screen."""
        return step_times(self.trace)

    @cached_property
    def history(self) -> list[dict[str, Any]]:
        """The run history's runs of the script this trace ran, oldest first (`history.trend_of`): the
        overview's step-time trend. Empty for a trace not in the history, or one not from a file."""
        return trend_of(Path(self.source)) if os.path.isfile(self.source) else []

    def table(self, spec: RankTable[T]) -> T:
        """`spec`'s table of this rank, built now if the background has not built it yet."""
        if spec.name not in self.tables:
            # stored once whole: the background's readiness check reads `tables`
            self.tables[spec.name] = spec.build(self)
        return cast(T, self.tables[spec.name])

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

    tables: dict[str, Any] = field(default_factory=dict, repr=False)
    """The cross-rank tables built so far, by name (`CrossTable`)."""

    @property
    def rank(self) -> RankData:
        return self.ranks[self.current]

    def table(self, spec: CrossTable[T]) -> T:
        """`spec`'s table over every rank, built now if the background has not built it yet."""
        if spec.name not in self.tables:
            self.tables[spec.name] = spec.build(self.ranks)
        return cast(T, self.tables[spec.name])

    def _store(self, spec: ViewTable, rank: int) -> dict[str, Any]:
        return self.tables if isinstance(spec, CrossTable) else self.ranks[rank].tables

    def _built(self, spec: ViewTable, rank: int) -> bool:
        return spec.name in self._store(spec, rank) or (rank, spec.name) in self.failed

    def is_ready(self, tables: Sequence[ViewTable]) -> bool:
        """Whether every one of a view's `tables` is built for the shown rank (a failed one never is: `failure`)."""
        return bool(self.ranks) and all(t.name in self._store(t, self.current) for t in tables)

    def failure(self, tables: Sequence[ViewTable]) -> str | None:
        """Why one of a view's `tables` could not be built, for the shown rank (None: none failed)."""
        return next((self.failed[(self.current, t.name)] for t in tables
                     if (self.current, t.name) in self.failed), None)

    def warm(
        self,
        order: Sequence[ViewTable],
        cancelled: Callable[[], bool] = lambda: False,
        wanted: Callable[[], Sequence[ViewTable]] = lambda: (),
        built: Callable[[str], None] = lambda name: None,
        before: Callable[[str], None] = lambda name: None,
    ) -> None:
        """Build the shown rank's tables and the cross-rank ones (in a thread, after the first screen).

        Each table in `order` (the views', `neuron_prof.tui.views.Views.tables`), except that the tables
        `wanted()` returns (those of the view the user is waiting for) go first; `built(name)` after each.
        `before(name)` runs first (the app's `before_table` hook). A table that raises is recorded in
        `failed`, not raised: its view says so and the other views still fill in. After each table, the pages of
        a cached trace's columns and mapped arrays it read go back to the kernel (`Context.drop_pages`): a view's
        table is an aggregate, a window, or arrays in mapped files, not the trace held in memory.
        """
        rank = self.current
        while not cancelled():
            todo = [t for t in order if not self._built(t, rank)]
            if not todo:
                return
            first = [t for t in wanted() if t in todo]
            spec = (first or todo)[0]
            start = time.perf_counter()
            try:
                before(spec.name)
                if isinstance(spec, CrossTable):
                    self.table(spec)
                else:
                    self.ranks[rank].table(spec)
            except Exception as e:  # noqa: BLE001 - shown by the view that needs the table
                self.failed[(rank, spec.name)] = f"{spec.name} could not be computed: {type(e).__name__}: {e}"
            for r in self.ranks if isinstance(spec, CrossTable) else [self.ranks[rank]]:
                r.context.drop_pages()  # a cached trace's pages this table read: not held while the user reads
            self.timings[f"table {spec.name}"] = time.perf_counter() - start
            built(spec.name)


def _rank(trace: Trace, source: str, cross: Sequence[Finding] = (), path: Path | None = None) -> RankData:
    """One rank's first screen: the overview kept for trace file `path` (`neuron_prof.loaders.kept`) when
    there is one, else the first pass (`analyse`), kept for the next open."""
    ctx = Context(trace)
    doc = kept.read_json(path, kept.OVERVIEW) if path is not None else None
    steps: list[dict[str, Any]] | None = None
    warnings: list[str] = []
    if doc is not None:
        first = Report.from_dict(doc)
        totals, found, steps = first.totals, first.findings, first.steps
    else:
        totals, found, warnings = analyse(trace, ctx)
    whole = not warnings and Report(totals, found).whole
    if cross:
        found = sort_findings([*found, *cross])
    warnings = [*map(str, trace.metadata.get("load_warnings") or []), *warnings]
    span = profiled_region(trace)
    rank = RankData(trace=trace, source=source, findings=found, warnings=warnings, totals=totals, origin=span[0],
                    span=span, context=ctx)
    if steps is not None:
        rank.step_parts = steps
    elif path is not None and whole:
        # kept only when every analysis ran (a failure is said on this screen, and tried again next time)
        kept.write_json(path, kept.OVERVIEW, Report(totals, found, steps=rank.step_parts).to_dict())
    return rank


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
            new = [_rank(trace, source, path=None if isinstance(src, Trace) else Path(src))]
        # the overview is what a user sees first (step times and, on a tall screen, the step mix);
        # the other views' tables are built after it shows
        for rank in new:
            _ = rank.steps, rank.step_parts, rank.history
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
