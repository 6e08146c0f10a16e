"""Late arrivals a busy host explains: the late rank's extra run-queue wait, shared among its late arrivals.

    late = with_host_waits(late, {0: rq0, 1: rq1})     # run-queue samples on the job's aligned clock

A rank that was ready to run but waited for a CPU other processes held arrives late for no reason of its own.
Capture samples each rank's cumulative run-queue wait at start, each step boundary and stop; where inside a
sample interval the wait fell is not known (a preempted rank loses a scheduler slice of milliseconds just before a
collective, not a little everywhere). So the rule is what the wait *can* explain: in each of the late rank's sample
intervals, its wait beyond the least any other rank waited over the same time is shared among its late arrivals
there, in proportion to their spreads, up to each spread (`LateArrivals.host_wait`). A spread counts only for what
is left (`LateArrivals.significant`): a rank late by more than its extra wait stays a straggler, and ranks that
waited alike explain nothing.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from neuron_prof.analysis.collectives.stragglers import LateArrivals
from neuron_prof.analysis.device.runqueue import RunQueue
from neuron_prof.model.order import searchsorted, sorted_unique


def with_host_waits(late: LateArrivals | None, waits: dict[int, RunQueue]) -> LateArrivals | None:
    """`late` with what the late rank's extra run-queue wait explains of each spread (`LateArrivals.explained`);
    as it was unless every rank has samples."""
    if late is None or not late.ranks or any(r not in waits for r in late.ranks):
        return late
    spread = late.spread.astype(np.float64)
    last = np.argmax(late.start, axis=1)
    explained = np.zeros(len(spread))
    for j, r in enumerate(late.ranks):
        rq = waits[r]
        mine = np.flatnonzero((last == j) & (spread > 0))
        if not len(mine) or len(rq.ts_ns) < 2:
            continue
        # the sample interval of each late arrival (arrivals outside the sampled span: none)
        iv = searchsorted(rq.ts_ns, late.start[mine, j], side="right") - 1
        inside = (iv >= 0) & (iv < len(rq.ts_ns) - 1)
        for i in sorted_unique(iv[inside]):
            lo, hi = rq.ts_ns[i : i + 1], rq.ts_ns[i + 1 : i + 2]  # the interval, as `RunQueue.within`'s window
            own = rq.within(lo, hi)
            others = min(waits[o].within(lo, hi) for o in late.ranks if o != r)
            ks = mine[inside & (iv == i)]
            share = min(1.0, max(own - others, 0) / float(spread[ks].sum()))
            explained[ks] = spread[ks] * share
    return replace(late, explained=explained.astype(np.int64))
