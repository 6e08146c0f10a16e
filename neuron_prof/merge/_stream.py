"""A merge that holds one rank in memory at a time: memory grows with the largest rank, not the sum.

    m = StreamingMerge(paths, load=load)          # pass 1: each rank loaded, summarised, dropped
    for seg in m.segments():                      # pass 2: each rank loaded again, aligned, analysed
        writer.write(seg)                         #         and handed to a writer, then dropped
    m.findings, m.metadata()                      # what the merged file's header or trailer holds

The plan between the passes (offsets, rows, cross-rank flows, late arrivals) is built from kilobytes per
rank (see _plan.py). Findings are each rank's own findings plus the stragglers, whose causes are read
from the late rank while it is loaded, and the missing and stopped ranks (`rank_coverage`, from pass 1).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from neuron_prof.errors import UsageError
from neuron_prof.merge._concat import rank_trace
from neuron_prof.merge._coverage import rank_coverage
from neuron_prof.merge._plan import (
    CROSS_RANK_FLOW_CAT,
    CROSS_RANK_FLOW_NAME,
    MergePlan,
    RankInfo,
    plan_merge,
    summarize,
)
from neuron_prof.model import Trace

if TYPE_CHECKING:
    from neuron_prof.analysis import Finding
    from neuron_prof.merge._align import Alignment

__all__ = ["FlowEnds", "RankSegment", "StreamingMerge", "first_pass"]

Src = TypeVar("Src")


@dataclass(frozen=True)
class FlowEnds:
    """This rank's ends of flows whose other end lies in another rank's segment."""

    row: np.ndarray
    """Slice rows in the segment's trace."""
    flow_id: np.ndarray
    is_src: np.ndarray
    """True where this end is the flow's source."""
    src_later: np.ndarray
    """True where the flow's source starts after its destination (readers otherwise take the earlier end)."""
    cat: str = CROSS_RANK_FLOW_CAT
    name: str = CROSS_RANK_FLOW_NAME

    def __len__(self) -> int:
        return len(self.row)


@dataclass(frozen=True)
class RankSegment:
    """One rank of the merged trace, ready to write."""

    rank: int
    trace: Trace
    """This rank alone (`rank_trace`): processes "rank R: ...", pids namespaced, clock aligned, its metadata
    (rank set, times shifted), no findings."""
    slice_base: int
    """Merged row of the segment's first slice."""
    flow_ends: FlowEnds


def first_pass(source: Src, index: int, load: Callable[[Src], Trace], rank_of: Callable[[Trace, int], int],
               skew_ns: dict[int, int]) -> RankInfo:
    """Pass 1 for one input: loaded, its rank found, its collectives kept (a task of its own on Dask)."""
    t = load(source)
    r = rank_of(t, index)
    return summarize(t, index, r, int(skew_ns.get(r, 0)))


class StreamingMerge(Generic[Src]):
    """Merge ranks read by `load(source)`, one at a time; each source is loaded twice."""

    def __init__(self, sources: Sequence[Src], *, load: Callable[[Src], Trace], rank_of: Callable[[Trace, int], int],
                 offsets_ns: dict[int, int] | None = None, skew_ns: dict[int, int] | None = None,
                 analyze: bool = True, on_rank: Callable[[str, int], None] | None = None,
                 ranks: Collection[int] | None = None, infos: Sequence[RankInfo] | None = None) -> None:
        """`ranks`: merge only these ranks (every input is still read once, for the clock alignment).
        `infos`: pass 1 done already (`first_pass` of every source, in order; e.g. as Dask tasks)."""
        if not sources:
            raise UsageError("merge needs at least one trace")
        self.sources = list(sources)
        self._load = load
        self._analyze = analyze
        self._on_rank = on_rank or (lambda phase, i: None)
        if infos is None:
            infos = []
            for i, src in enumerate(self.sources):
                self._on_rank("read", i)
                infos.append(first_pass(src, i, load, rank_of, skew_ns or {}))
        infos = list(infos)
        seen = [i.rank for i in infos]
        if len(set(seen)) != len(seen):
            raise UsageError(f"two inputs claim the same rank ({sorted(seen)}); pass one trace per rank")
        if ranks is not None and (missing := sorted(set(ranks) - set(seen))):
            raise UsageError(f"--ranks {','.join(map(str, missing))}: no such rank among the inputs "
                             f"(ranks {','.join(map(str, sorted(seen)))})")
        # ranks in rank order in the merged trace, whatever the order of the inputs
        self.plan: MergePlan = plan_merge(sorted(infos, key=lambda i: i.rank), offsets_ns, keep=ranks)
        self.coverage: list[Finding] = rank_coverage(infos)
        """Ranks of the world with no trace and ranks whose trace ends early (of every input)."""
        self.findings: list[dict[str, Any]] = []
        """Filled by `segments()`: each rank's findings, then the stragglers, most costly first."""

    @property
    def alignment(self) -> Alignment:
        return self.plan.alignment

    def metadata(self) -> dict[str, object]:
        return self.plan.metadata()

    def segments(self) -> Iterator[RankSegment]:
        """Pass 2: each rank loaded again, aligned, analysed (when asked) and yielded; fills `findings`."""
        from neuron_prof.analysis import analyze, dominant_cause, findings_from, sort_findings

        plan, causes = self.plan, {}
        found: list[Finding] = []
        late = plan.late
        late_ranks = set(late.late_ranks()) if late is not None else set()
        for info in plan.infos:
            self._on_rank("write", info.index)
            t = rank_trace(self._load(self.sources[info.index]), info.rank, plan.shift_ns(info.rank))
            if len(t.slices) != info.n_slices:
                raise UsageError(f"{info.metadata.get('source')}: changed while being merged "
                                 f"({info.n_slices:,} slices, now {len(t.slices):,})")
            if self._analyze:
                found.extend(analyze(t))
            if late is not None and info.rank in late_ranks:
                causes[info.rank] = dominant_cause(t, info.rank, late.windows(info.rank))
            yield RankSegment(info.rank, t, plan.slice_base[info.rank], self._flow_ends(info.rank, len(t.slices)))
            del t
        if late is not None and self._analyze:
            found.extend(findings_from(late, causes, plan.wall_ns))
        found.extend(self.coverage)
        self.findings = [f.to_dict() for f in sort_findings(found)]

    def _flow_ends(self, rank: int, n: int) -> FlowEnds:
        plan = self.plan
        lo = plan.slice_base[rank]
        ids = plan.cross_ids
        src_in = (plan.cross_src >= lo) & (plan.cross_src < lo + n)
        dst_in = (plan.cross_dst >= lo) & (plan.cross_dst < lo + n)
        later = plan.cross_src_later
        row = np.concatenate([plan.cross_src[src_in], plan.cross_dst[dst_in]]) - lo
        return FlowEnds(row=row, flow_id=np.concatenate([ids[src_in], ids[dst_in]]),
                        is_src=np.concatenate([np.ones(int(src_in.sum()), bool), np.zeros(int(dst_in.sum()), bool)]),
                        src_later=np.concatenate([later[src_in], later[dst_in]]))
