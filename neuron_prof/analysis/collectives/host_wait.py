"""Late arrivals a busy host explains: each rank's run-queue wait on its way to every collective.

    late = with_host_waits(late, {0: rq0, 1: rq1})     # run-queue samples on the job's aligned clock

A rank that was ready to run but waited for a CPU other processes held arrives late for no reason of its own.
Each rank's wait between its previous collective's exit and its arrival (`RunQueue.at`: spread evenly between
the capture's samples) goes into `LateArrivals.waited`; a spread counts only for what the last rank's extra wait
leaves of it (`LateArrivals.significant`), so stragglers and collective spreads follow the program, not the load.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from neuron_prof.analysis.collectives.stragglers import LateArrivals
from neuron_prof.analysis.device.runqueue import RunQueue


def arrival_windows(late: LateArrivals) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi), each (n_matched, n_ranks): from each rank's exit of the previous collective (before the first,
    twice its spread before the first arrival) to its arrival."""
    hi = late.start
    lo = np.empty_like(hi)
    if len(hi):
        lo[0] = hi[0].min() - 2 * late.spread[0]
        lo[1:] = late.end[:-1]
    return np.minimum(lo, hi), hi


def with_host_waits(late: LateArrivals | None, waits: dict[int, RunQueue]) -> LateArrivals | None:
    """`late` with every rank's run-queue wait before each arrival; as it was unless every rank has samples."""
    if late is None or not late.ranks or any(r not in waits for r in late.ranks):
        return late
    lo, hi = arrival_windows(late)
    waited = np.stack([waits[r].at(hi[:, j]) - waits[r].at(lo[:, j]) for j, r in enumerate(late.ranks)], axis=1)
    return replace(late, waited=np.maximum(waited, 0).astype(np.int64))
