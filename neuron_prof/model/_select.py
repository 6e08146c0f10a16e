"""Part of a trace: some of its processes with their tracks and events (e.g. one rank of a merged trace).

    ranks = split_ranks(merged)        # {rank: Trace}, empty when the trace holds fewer than two ranks

Strings and args are shared with the whole trace, not copied; events and tracks are re-indexed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neuron_prof.model._trace import Trace, Track
from neuron_prof.model.schema import Meta

__all__ = ["select_processes", "split_ranks"]


def select_processes(trace: Trace, processes: Sequence[int]) -> Trace:
    """The processes at these indices (in this order), their tracks and events, and the flows between them."""
    pmap = np.full(len(trace.processes), -1, np.int64)
    pmap[np.asarray(processes, np.int64)] = np.arange(len(processes))
    keep = [i for i, t in enumerate(trace.tracks) if pmap[t.process] >= 0]
    tmap = np.full(len(trace.tracks) + 1, -1, np.int64)  # + 1: the -1 of an absent track maps to -1
    tmap[np.asarray(keep, np.int64)] = np.arange(len(keep))
    tracks = tuple(Track(process=int(pmap[t.process]), name=t.name, kind=t.kind, tid=t.tid,
                         sort_index=t.sort_index, unit=t.unit) for t in (trace.tracks[i] for i in keep))

    def part(table):  # type: ignore[no-untyped-def]
        rows = np.flatnonzero(tmap[table.track] >= 0)
        out = table.take(rows)
        cols = {k: getattr(out, k) for k in table.DTYPES}
        cols["track"] = tmap[out.track].astype(np.int32)
        return type(table)(**cols), rows

    slices, srows = part(trace.slices)
    instants, _ = part(trace.instants)
    counters, _ = part(trace.counters)
    smap = np.full(len(trace.slices), -1, np.int64)
    smap[srows] = np.arange(len(srows))
    f = trace.flows
    fk = np.flatnonzero((smap[f.src] >= 0) & (smap[f.dst] >= 0)) if len(f) else np.zeros(0, np.int64)
    flows = f.take(fk)
    flows = type(flows)(smap[flows.src], smap[flows.dst], flows.flow_id, flows.cat, flows.name)
    return trace.replace(processes=tuple(trace.processes[i] for i in processes), tracks=tracks, slices=slices,
                         instants=instants, counters=counters, flows=flows, metadata=dict(trace.metadata))


def split_ranks(trace: Trace) -> dict[int, Trace]:
    """One Trace per rank of a trace that holds several (a `neuron-prof merge` result), in rank order.

    Each part's metadata names its rank, and it keeps the findings about that rank. Processes without a
    rank go with the lowest rank. Empty when the trace holds fewer than two ranks."""
    ranks = sorted({p.rank for p in trace.processes if p.rank is not None})
    if len(ranks) < 2:
        return {}
    out: dict[int, Trace] = {}
    for r in ranks:
        procs = [i for i, p in enumerate(trace.processes) if p.rank == r or (p.rank is None and r == ranks[0])]
        part = select_processes(trace, procs)
        part.metadata[Meta.RANK] = r
        out[r] = part.replace(findings=tuple(f for f in trace.findings if f.get("rank") == r))
    return out
