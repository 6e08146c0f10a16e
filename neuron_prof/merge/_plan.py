"""The first pass of a merge: what each rank contributes, kept small, and the plan computed from it.

A rank's `RankInfo` holds its collectives (every source), slice count, time range and a few metadata
fields: kilobytes whatever the rank's size. `plan_merge` turns the infos into the clock offsets, the global
slice rows of each rank, the cross-rank flows and the late arrivals, so that the second pass can write
each rank on its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.analysis import (
    LateArrivals,
    RankCollectives,
    collectives_by_source,
    find_steps,
    late_arrivals,
    match,
    pick_source,
)
from neuron_prof.merge._align import Alignment, RankOffset, estimate_offsets
from neuron_prof.merge._concat import rank_trace, shift_steps
from neuron_prof.model import Meta, Trace

CROSS_RANK_FLOW_BASE = 0x7FFF << 48
"""Flow ids of the links between the same collective on different ranks start here."""
CROSS_RANK_FLOW_CAT = "neuron_prof.collective"
CROSS_RANK_FLOW_NAME = "same collective"


@dataclass
class RankInfo:
    """What the merge keeps of one rank between its two passes."""

    index: int
    """Position among the inputs."""
    rank: int
    skew_ns: int
    n_slices: int
    time_range: tuple[int, int]
    """(first start, last end) with the skew applied, before alignment."""
    collectives: dict[str, dict[int, RankCollectives]]
    """Per source, {rank: collectives} (rows are this rank's own slice rows; times skewed)."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The fields the merged metadata is built from: source, wall, world size, steps, how the capture ended."""
    steps: tuple[int, int | None] = (0, None)
    """(steps found, id of the last one or None): marked, from the profiler or inferred, as the analyses
    find them (missing and stopped ranks, `rank_coverage`)."""


def summarize(trace: Trace, index: int, rank: int, skew_ns: int = 0) -> RankInfo:
    """Pass 1 for one rank."""
    t = rank_trace(trace, rank, skew_ns)
    md = trace.metadata
    keep = {k: md[k] for k in (Meta.WALL, Meta.WORLD_SIZE, Meta.STEPS, "capture_exit", Meta.EXIT_SITE, Meta.HOST_NAME,
                               Meta.BOOT_ID, Meta.CLOCK) if md.get(k) is not None}
    keep[Meta.SOURCE] = str(md.get(Meta.SOURCE, f"input {index}"))
    ids = find_steps(trace)[0]
    info = RankInfo(index=index, rank=rank, skew_ns=skew_ns, n_slices=len(t.slices), time_range=t.time_range(),
                    collectives=collectives_by_source(t), metadata=keep,
                    steps=(len(ids), int(ids[-1]) if len(ids) else None))
    t.drop_pages()  # a trace from the column cache: the pages read stay no longer than the pass (the next rank's)
    return info


def host_clock(info: RankInfo) -> str:
    """The machine whose Unix clock `info`'s times are on ("" when unknown, not Unix, or shifted by a skew): its
    kernel's boot id where the capture recorded one (containers of one machine share it, whatever their host
    names; machines that share a name do not), else its host name (traces from before the boot id)."""
    md = info.metadata
    if md.get(Meta.CLOCK) != "unix" or info.skew_ns:
        return ""
    boot = str(md.get(Meta.BOOT_ID) or "")
    return f"kernel boot {boot[:13]}" if boot else str(md.get(Meta.HOST_NAME) or "")


@dataclass
class MergePlan:
    """Everything the second pass needs, computed from the ranks' infos."""

    infos: list[RankInfo]
    alignment: Alignment
    source: str | None
    """The collective source every rank was matched on."""
    slice_base: dict[int, int]
    """rank -> merged row of its first slice (ranks in rank order)."""
    cross_src: np.ndarray
    """Merged slice rows of the cross-rank flows' sources (the reference rank's collective) ..."""
    cross_dst: np.ndarray
    """... and of their destinations (the same collective on another rank); ids CROSS_RANK_FLOW_BASE + i."""
    cross_src_later: np.ndarray
    """Per cross-rank flow: its source starts after its destination (aligned clocks)."""
    late: LateArrivals | None
    """Late arrivals at the matched collectives (None when the matches are not trusted or too few)."""

    def shift_ns(self, rank: int) -> int:
        """What to add to every timestamp of `rank`'s input: the testing skew, then the clock offset."""
        info = next(i for i in self.infos if i.rank == rank)
        return info.skew_ns + self.alignment.offsets[rank].offset_ns

    @property
    def cross_ids(self) -> np.ndarray:
        return CROSS_RANK_FLOW_BASE + np.arange(len(self.cross_src), dtype=np.int64)

    @property
    def time_range(self) -> tuple[int, int]:
        """(first start, last end) of the merged trace."""
        spans = [(i.time_range[0] + self.alignment.offsets[i.rank].offset_ns,
                  i.time_range[1] + self.alignment.offsets[i.rank].offset_ns)
                 for i in self.infos if i.time_range != (0, 0)]
        return (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else (0, 0)

    def metadata(self) -> dict[str, object]:
        """The merged trace's metadata: ranks, world size, alignment, sources, wall range, steps."""
        infos = self.infos
        ranks = [i.rank for i in infos]
        meta: dict[str, object] = {
            "ranks": sorted(ranks),
            Meta.WORLD_SIZE: max([len(ranks)] + [int(i.metadata.get(Meta.WORLD_SIZE) or 0) for i in infos]),
            "alignment": self.alignment.to_dict(), "collective_source": self.source,
            "merged_from": [str(i.metadata[Meta.SOURCE]) for i in infos],
            "aligned_with_ranks": sorted(self.alignment.offsets),
            Meta.SOURCE_FORMAT: "merge",
        }
        walls = [i.metadata.get(Meta.WALL) for i in infos]
        if all(isinstance(w, (list, tuple)) and len(w) == 2 for w in walls):
            offs = [self.shift_ns(i.rank) for i in infos]
            meta[Meta.WALL] = [min(int(w[0]) + o for w, o in zip(walls, offs)),  # type: ignore[index]
                               max(int(w[1]) + o for w, o in zip(walls, offs))]  # type: ignore[index]
        # steps: the first rank's that has them (all ranks step together), on the merged clock
        with_steps = next((i for i in infos if i.metadata.get(Meta.STEPS)), None)
        if with_steps is not None:
            meta[Meta.STEPS] = shift_steps(with_steps.metadata[Meta.STEPS], self.shift_ns(with_steps.rank))
        return meta

    @property
    def wall_ns(self) -> int:
        w = self.metadata().get(Meta.WALL)
        if isinstance(w, list) and w[1] > w[0]:
            return int(w[1] - w[0])
        lo, hi = self.time_range
        return hi - lo


def plan_merge(infos: list[RankInfo], offsets_ns: dict[int, int] | None = None,
               keep: Collection[int] | None = None) -> MergePlan:
    """Offsets (user offsets win), global rows, cross-rank flows and late arrivals from the ranks' infos.

    `keep`: the ranks to merge (default all). Clocks and late arrivals come from every rank's collectives
    all the same; rows and flows are those of the kept ranks."""
    found: dict[str, dict[int, RankCollectives]] = {}
    for info in infos:
        for source, per in info.collectives.items():
            found.setdefault(source, {}).update(per)
    per_rank = pick_source(found, len(infos))
    alignment = estimate_offsets(per_rank, offsets_ns, {i.rank: host_clock(i) for i in infos})
    for info in infos:
        alignment.offsets.setdefault(info.rank, RankOffset(
            info.rank, int((offsets_ns or {}).get(info.rank, 0)), "recorded", 0, None,
            "no collectives found on this rank"))
    aligned = {r: dataclasses.replace(c, start_ns=c.start_ns + alignment.offsets[r].offset_ns,
                                      end_ns=c.end_ns + alignment.offsets[r].offset_ns)
               for r, c in per_rank.items()}
    trusted = not any(o.method == "recorded" and o.matched > 0 for o in alignment.offsets.values())
    late = late_arrivals(aligned) if trusted else None
    if keep is not None:
        infos = [i for i in infos if i.rank in set(keep)]
        aligned = {r: c for r, c in aligned.items() if r in set(keep)}
    base, row = {}, 0
    for info in infos:
        base[info.rank] = row
        row += info.n_slices
    # Link each matched collective across ranks: reference rank -> every other rank.
    order, mat = match(aligned)
    src, dst, later = [], [], []
    for j in range(1, len(order)):
        ref, other = aligned[order[0]], aligned[order[j]]
        src.append(base[order[0]] + ref.row[mat[:, 0]])
        dst.append(base[order[j]] + other.row[mat[:, j]])
        later.append(ref.start_ns[mat[:, 0]] > other.start_ns[mat[:, j]])
    return MergePlan(
        infos=infos, alignment=alignment, source=next(iter(per_rank.values())).source if per_rank else None,
        slice_base=base,
        cross_src=np.concatenate(src).astype(np.int64) if src else np.zeros(0, np.int64),
        cross_dst=np.concatenate(dst).astype(np.int64) if dst else np.zeros(0, np.int64),
        cross_src_later=np.concatenate(later) if later else np.zeros(0, bool),
        late=late)
