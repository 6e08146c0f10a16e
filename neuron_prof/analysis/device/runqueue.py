"""Host run-queue wait: time the profiled thread was ready to run but waited for a CPU other processes held.

Capture stores the thread's cumulative Linux schedstat counters at start, each step boundary and stop
(``Meta.RUNQUEUE``, see neuron_prof/capture/_runqueue.py) and the load average at start and stop
(``Meta.LOADAVG``). Between two samples only the total wait is known, not where it fell: a stretch of time gets
the interval's wait in proportion to its share of the interval's wall time (wait spread evenly). A busy machine
stretches every host stretch of the program this way; the analyses that charge host time to the program
(device_idle, profiler_overhead) take this wait out of their cost, and a job's late arrivals at collectives leave
out what the late rank's extra wait can explain (`collectives.host_wait`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.analysis.intervals import covered_before
from neuron_prof.model import Meta

MATERIAL = 0.05
"""Wait worth a line of its own (summary) or a clause in a finding's title: 5% of the time it is compared with."""


@dataclass(frozen=True)
class RunQueue:
    ts_ns: np.ndarray
    """Sample times (Unix ns), increasing."""
    wait_ns: np.ndarray
    """Cumulative run-queue wait at each sample."""
    loadavg: tuple[float | None, float | None]
    """1-minute load average at start and stop."""

    @property
    def total_ns(self) -> int:
        return int(self.wait_ns[-1] - self.wait_ns[0])

    def within(self, lo: np.ndarray, hi: np.ndarray) -> int:
        """The wait that falls into the disjoint sorted windows [lo, hi): per sample interval, its wait times the
        windows' share of its wall time (time outside the sampled span gets none)."""
        if not len(lo):
            return 0
        span = np.diff(self.ts_ns)
        wait = np.minimum(np.maximum(np.diff(self.wait_ns), 0), span)  # never more than the interval itself
        cov = covered_before(np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64), self.ts_ns)
        inside = np.diff(cov)
        ok = span > 0
        return int((wait[ok] * (inside[ok] / span[ok])).sum())

    def shifted(self, shift_ns: int) -> RunQueue:
        """The same samples on a clock `shift_ns` ahead (a rank's samples on a job's aligned clock)."""
        return RunQueue(self.ts_ns + shift_ns, self.wait_ns, self.loadavg)

    def load_text(self) -> str:
        """ "load average 1.9→4.2" (what is known of it)."""
        a, b = self.loadavg
        if a is None and b is None:
            return "load average unknown"
        if a is None or b is None or f"{a:.1f}" == f"{b:.1f}":
            return f"load average {a if a is not None else b:.1f}"
        return f"load average {a:.1f}→{b:.1f}"


def runqueue(ctx: Context) -> RunQueue | None:
    """The trace's run-queue samples, or None when capture took fewer than two (not Linux, not a capture)."""

    def build() -> RunQueue | None:
        raw = ctx.trace.metadata.get(Meta.RUNQUEUE)
        try:
            arr = np.asarray(raw, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            return None
        if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 3:
            return None
        arr = arr[np.argsort(arr[:, 0], kind="stable")]
        la = ctx.trace.metadata.get(Meta.LOADAVG)
        loads: list[float | None] = [None, None]
        if isinstance(la, list) and la:
            for i, row in ((0, la[0]), (1, la[-1])):
                if isinstance(row, (list, tuple)) and len(row) >= 2 and isinstance(row[1], (int, float)):
                    loads[i] = float(row[1])
        return RunQueue(arr[:, 0], arr[:, 2], (loads[0], loads[1]))

    return ctx.memo("runqueue", build)  # type: ignore[no-any-return]


def waited_text(rq: RunQueue, ns: int) -> str:
    """The clause a finding adds: "the host waited 80 ms for a CPU: other processes on this machine, load ..."."""
    return f"the host waited {fmt_ns(ns)} for a CPU: other processes on this machine, {rq.load_text()}"


def region_wait(ctx: Context) -> int:
    """The run-queue wait inside the profiled region (0 without samples)."""
    rq = runqueue(ctx)
    if rq is None:
        return 0
    lo, hi = ctx.window
    return rq.within(np.array([lo]), np.array([hi]))
