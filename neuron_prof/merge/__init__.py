"""Merge per-rank traces onto one timeline (`neuron-prof merge`).

    merged, alignment = merge_traces([load(p) for p in paths])

Each rank becomes its own process group ("rank R: ..."). Clocks are aligned from the collectives
(see _align.py), user offsets override, and the same collective on different ranks is linked by flows.
`skew_ns` shifts a rank's clock *before* alignment: an artificial offset for testing the alignment.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from neuron_prof.analysis._collective_match import extract_collectives, match
from neuron_prof.errors import UsageError
from neuron_prof.merge._align import Alignment, RankOffset, estimate_offsets
from neuron_prof.merge._concat import add_flows, concat_ranks
from neuron_prof.model import Meta, Trace

__all__ = ["Alignment", "RankOffset", "merge_traces", "rank_of"]

_RANK_IN_NAME = re.compile(r"rank[-_.]?(\d+)", re.IGNORECASE)
CROSS_RANK_FLOW_BASE = 0x7FFF << 48


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


def _shift_by_rank(trace: Trace, offsets: dict[int, int]) -> Trace:
    track_rank = np.array([trace.processes[t.process].rank or 0 for t in trace.tracks], dtype=np.int64)
    lut = np.zeros(int(track_rank.max(initial=0)) + 1, dtype=np.int64)
    for r, off in offsets.items():
        if 0 <= r < len(lut):
            lut[r] = off
    per_track = lut[track_rank] if len(track_rank) else np.zeros(0, dtype=np.int64)
    s, i, c = trace.slices, trace.instants, trace.counters
    return trace.replace(
        slices=s.__class__(s.ts_ns + per_track[s.track], s.dur_ns, s.track, s.name, s.cat, s.args),
        instants=i.__class__(i.ts_ns + per_track[i.track], i.track, i.name, i.cat, i.args),
        counters=c.__class__(c.ts_ns + per_track[c.track], c.track, c.value))


def merge_traces(traces: list[Trace], *, offsets_ns: dict[int, int] | None = None,
                 skew_ns: dict[int, int] | None = None) -> tuple[Trace, Alignment]:
    """Merge one trace per rank. Returns the merged Trace and the clock alignment that was applied."""
    if not traces:
        raise UsageError("merge needs at least one trace")
    ranks = [rank_of(t, i) for i, t in enumerate(traces)]
    if len(set(ranks)) != len(ranks):
        raise UsageError(f"two inputs claim the same rank ({sorted(ranks)}); pass one trace per rank")
    skew = skew_ns or {}
    merged, _ = concat_ranks(traces, ranks, [int(skew.get(r, 0)) for r in ranks])
    per_rank = extract_collectives(merged)
    alignment = estimate_offsets(per_rank, offsets_ns)
    for r in ranks:
        alignment.offsets.setdefault(r, RankOffset(r, int((offsets_ns or {}).get(r, 0)), "recorded", 0, None,
                                                   "no collectives found on this rank"))
    merged = _shift_by_rank(merged, {r: o.offset_ns for r, o in alignment.offsets.items()})
    # Link each matched collective across ranks: reference rank -> every other rank.
    per_rank = extract_collectives(merged)
    order, mat = match(per_rank)
    src, dst = [], []
    for j in range(1, len(order)):
        src.append(per_rank[order[0]].row[mat[:, 0]])
        dst.append(per_rank[order[j]].row[mat[:, j]])
    if src:
        merged = add_flows(merged, np.concatenate(src), np.concatenate(dst), CROSS_RANK_FLOW_BASE,
                           "neuron_prof.collective", "same collective")
    starts = [t.metadata.get(Meta.WALL) for t in traces]
    meta: dict[str, object] = {
        "ranks": sorted(ranks), Meta.WORLD_SIZE: max(
            [len(ranks)] + [int(t.metadata.get(Meta.WORLD_SIZE) or 0) for t in traces]),
        "alignment": alignment.to_dict(), "collective_source": next(iter(per_rank.values())).source
        if per_rank else None,
        "merged_from": [str(t.metadata.get(Meta.SOURCE, f"input {i}")) for i, t in enumerate(traces)],
        Meta.SOURCE_FORMAT: "merge",
    }
    if all(isinstance(w, (list, tuple)) and len(w) == 2 for w in starts):
        offs = [alignment.offsets[r].offset_ns + int(skew.get(r, 0)) for r in ranks]
        meta[Meta.WALL] = [min(int(w[0]) + o for w, o in zip(starts, offs)),  # type: ignore[index]
                           max(int(w[1]) + o for w, o in zip(starts, offs))]  # type: ignore[index]
    steps = next((t.metadata.get(Meta.STEPS) for t in traces if t.metadata.get(Meta.STEPS)), None)
    if steps:
        meta[Meta.STEPS] = steps
    return merged.replace(metadata=meta), alignment
