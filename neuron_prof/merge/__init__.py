"""Merge per-rank traces onto one timeline (`neuron-prof merge`).

    merged, alignment = merge_traces([load(p) for p in paths])       # all ranks in memory
    m = StreamingMerge(paths, load=load, rank_of=rank_of)             # one rank in memory at a time
    m = StreamingMerge(paths, load=load, rank_of=rank_of, ranks={0, 5})  # only ranks 0 and 5, clocks from all
    write_merged(m, "merged.pftrace")                                 # (neuron_prof.exporters.merged)

Each rank becomes its own process group ("rank R: ..."). Clocks are aligned from the collectives
(see _align.py), user offsets override, and the same collective on different ranks is linked by flows.
`skew_ns` shifts a rank's clock *before* alignment: an artificial offset for testing the alignment.
Both ways share one plan (_plan.py), so they give the same merged events.
"""

from __future__ import annotations

import re
from pathlib import Path

from neuron_prof.merge._align import Alignment, RankOffset
from neuron_prof.merge._concat import add_flows, concat_ranks, rank_trace
from neuron_prof.merge._coverage import rank_coverage, world_size
from neuron_prof.merge._plan import (
    CROSS_RANK_FLOW_BASE,
    CROSS_RANK_FLOW_CAT,
    CROSS_RANK_FLOW_NAME,
    MergePlan,
    RankInfo,
    plan_merge,
    summarize,
)
from neuron_prof.merge._stream import FlowEnds, RankSegment, StreamingMerge, first_pass
from neuron_prof.model import Meta, Trace

__all__ = ["CROSS_RANK_FLOW_BASE", "Alignment", "FlowEnds", "MergePlan", "RankInfo", "RankOffset", "RankSegment",
           "StreamingMerge", "first_pass", "merge_traces", "plan_merge", "rank_coverage", "rank_of", "rank_trace",
           "summarize", "world_size"]

_RANK_IN_NAME = re.compile(r"rank[-_.]?(\d+)", re.IGNORECASE)


def rank_of(trace: Trace, fallback: int) -> int:
    """The rank a trace belongs to: its metadata, Kineto's distributedInfo, its file name, else `fallback`."""
    if trace.rank is not None:
        return trace.rank
    info = trace.metadata.get(Meta.KINETO, {}).get("distributedInfo") if isinstance(
        trace.metadata.get(Meta.KINETO), dict) else None
    if isinstance(info, dict) and isinstance(info.get("rank"), int):
        return int(info["rank"])
    m = _RANK_IN_NAME.search(Path(str(trace.metadata.get(Meta.SOURCE, ""))).name)
    return int(m.group(1)) if m else fallback


def merge_traces(traces: list[Trace], *, offsets_ns: dict[int, int] | None = None,
                 skew_ns: dict[int, int] | None = None) -> tuple[Trace, Alignment]:
    """Merge one trace per rank, all in memory. Returns the merged Trace (no findings: see
    `neuron_prof.analysis.annotate`) and the clock alignment that was applied."""
    m = StreamingMerge(traces, load=lambda t: t, rank_of=rank_of, offsets_ns=offsets_ns, skew_ns=skew_ns,
                       analyze=False)
    segs = list(m.segments())
    merged = concat_ranks([s.trace for s in segs])
    plan = m.plan
    merged = add_flows(merged, plan.cross_src, plan.cross_dst, CROSS_RANK_FLOW_BASE, CROSS_RANK_FLOW_CAT,
                       CROSS_RANK_FLOW_NAME)
    return merged.replace(metadata=m.metadata()), m.alignment
