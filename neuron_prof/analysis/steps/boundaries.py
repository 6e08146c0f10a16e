"""Training steps and the warm-up/steady-state split.

Steps come, first found first, from metadata ``steps`` ([step, start_ns, end_ns] rows, written by
capture when the user calls ``prof.step()``: source "marked"), from Kineto's ``ProfilerStep#N``
annotations ("profiler"), or are inferred from optimizer steps, repeated module calls or a user
annotation ("inferred: ...", see _step_inference). A capture whose ``steps`` is empty had no
``prof.step()``: its one ``ProfilerStep#0`` is the whole region, so inference goes first there; a
foreign trace's ``ProfilerStep#N`` are always kept. The first steps usually pay compiles and cache fills; the
rest show what costs every step. By default the warm-up is the first step (with three or more steps)
and each next step while it takes over 1.5x the median of the steps after it, in training time: an
evaluation pass inside a step's window (`phases`) is left out of its duration. Compile misses alone do
not decide it: with shape churn every step compiles, and that cost must stay visible as steady cost.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from neuron_prof.analysis.steps.evaluation import EvalPass, eval_overlap_ns, evaluation_passes
from neuron_prof.analysis.steps.inference import infer_steps
from neuron_prof.model import Meta, Trace, TrackKind
from neuron_prof.model.order import searchsorted
from neuron_prof.model.windows import row_windows

_STEP_RX = re.compile(r"^ProfilerStep#(\d+)$")


@dataclass(frozen=True, eq=False)
class Steps:
    """Step windows sorted by start. Arrays have one entry per step."""

    ids: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    warmup: int
    """How many leading steps are warm-up."""
    source: str = "none"
    """Where the steps came from: "marked", "profiler", "inferred: optimizer step", "inferred: module
    call", "inferred: user annotation" or "none"."""
    markers: tuple[str, ...] = ()
    """Names of the spans the steps were taken from (empty for "marked")."""
    work_start_ns: np.ndarray | None = None
    """Where each step's own iteration starts when its window begins earlier, with the tail of the iteration
    before (steps inferred from optimizer steps: `Inferred.work_ns`); None: at the window's start."""

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def dur_ns(self) -> np.ndarray:
        return np.asarray(self.end_ns - self.start_ns, dtype=np.int64)

    @property
    def steady(self) -> slice:
        return slice(self.warmup, len(self))

    def step_index(self, ts_ns: np.ndarray) -> np.ndarray:
        """Index (into these arrays) of the step containing each timestamp; -1 outside every step."""
        ts_ns = np.asarray(ts_ns, dtype=np.int64)
        if not len(self):
            return np.full(len(ts_ns), -1, dtype=np.int64)
        k = searchsorted(self.start_ns, ts_ns, side="right") - 1
        ok = (k >= 0) & (ts_ns < self.end_ns[np.maximum(k, 0)])
        return np.asarray(np.where(ok, k, -1), dtype=np.int64)

    def iteration_at(self, ts_ns: np.ndarray) -> np.ndarray:
        """Index of the last step begun at or before each timestamp (-1 before the first): the step whose
        window holds it, or the last before it. A timestamp in a step's window before that step's own
        iteration began belongs to the step before: the tail of that iteration after its update (metrics,
        logging), which an optimizer step's window holds (`work_start_ns`)."""
        ts_ns = np.asarray(ts_ns, dtype=np.int64)
        k = searchsorted(self.start_ns, ts_ns, side="right") - 1
        if self.work_start_ns is None or not len(self):
            return np.asarray(k, dtype=np.int64)
        tail = (k > 0) & (ts_ns < self.work_start_ns[np.maximum(k, 0)])
        return np.asarray(np.where(tail, k - 1, k), dtype=np.int64)

    def iteration_index(self, ts_ns: np.ndarray) -> np.ndarray:
        """`step_index` by iteration: -1 outside every step's window, else `iteration_at` (the tail of an
        iteration after its update, in the next step's window, belongs to its own step)."""
        ts_ns = np.asarray(ts_ns, dtype=np.int64)
        return np.asarray(np.where(self.step_index(ts_ns) >= 0, self.iteration_at(ts_ns), -1), dtype=np.int64)

    def summary(self) -> dict[str, object]:
        """JSON-ready description (used in totals)."""
        d = self.dur_ns
        steady = d[self.steady]
        return {
            "count": len(self),
            "warmup": self.warmup,
            "ids": [int(x) for x in self.ids],
            "warmup_step_ns": int(d[: self.warmup].mean()) if self.warmup else None,
            "steady_step_ns": int(np.median(steady)) if len(steady) else None,
            "steady_step_ns_mean": int(steady.mean()) if len(steady) else None,
            "source": self.source,
            "markers": list(self.markers),
        }


@dataclass(frozen=True, eq=False)
class FoundSteps:
    """Step windows sorted by start, and where they came from."""

    ids: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    source: str
    markers: tuple[str, ...] = ()
    work_start_ns: np.ndarray | None = None


def find_steps(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, start_ns, end_ns) of the trace's steps, sorted by start (see locate_steps)."""
    f = locate_steps(trace)
    return f.ids, f.start_ns, f.end_ns


def locate_steps(trace: Trace) -> FoundSteps:
    """The trace's steps from the first source that has them (module docstring)."""
    meta = trace.metadata.get(Meta.STEPS)
    if isinstance(meta, (list, tuple)) and meta:
        try:
            arr = np.asarray([[int(r[0]), int(r[1]), int(r[2])] for r in meta], dtype=np.int64)
            o = np.argsort(arr[:, 1], kind="stable")
            return FoundSteps(arr[o, 0], arr[o, 1], arr[o, 2], "marked")
        except (TypeError, ValueError, IndexError):
            pass
    ids, start, end = _profiler_steps(trace)
    profiler = FoundSteps(ids, start, end, "profiler", ("ProfilerStep#",)) if len(ids) else None
    # capture writes `steps` always: empty means no prof.step(), and ProfilerStep#0 is just the region
    if profiler is not None and not (isinstance(meta, (list, tuple)) and len(ids) == 1):
        return profiler
    inferred = infer_steps(trace)
    if inferred is not None:
        n = len(inferred.start_ns)
        return FoundSteps(np.arange(n, dtype=np.int64), inferred.start_ns, inferred.end_ns, inferred.source,
                          inferred.markers, inferred.work_ns)
    z = np.zeros(0, dtype=np.int64)
    return profiler or FoundSteps(z, z, z, "none")


def _profiler_steps(trace: Trace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ProfilerStep#N annotations on host threads (Kineto writes a GPU copy too: ignore device tracks)."""
    step_of_sid = {
        sid: int(m.group(1)) for sid in range(len(trace.strings)) if (m := _STEP_RX.match(trace.strings[sid]))
    }
    z = np.zeros(0, dtype=np.int64)
    if not step_of_sid:
        return z, z, z
    threads = trace.track_ids(TrackKind.THREAD)
    sids = np.fromiter(step_of_sid, dtype=np.int32)
    sl = trace.slices
    rows = np.concatenate([np.flatnonzero(np.isin(sl.track[a:b], threads) & np.isin(sl.name[a:b], sids)) + a
                           for a, b in row_windows(trace, len(sl))] or [z])  # a window of rows at a time
    if not len(rows):
        return z, z, z
    num = np.array([step_of_sid[int(n)] for n in trace.slices.name[rows]], dtype=np.int64)
    uniq, inv = np.unique(num, return_inverse=True)
    start = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
    end = np.full(len(uniq), np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(start, inv, trace.slices.ts_ns[rows])
    np.maximum.at(end, inv, trace.slices.end_at(rows))
    o = np.argsort(start, kind="stable")
    return uniq[o], start[o], end[o]


SLOW_FACTOR = 1.5


def make_steps(trace: Trace, warmup_steps: int | None = None,
               passes: Callable[[], list[EvalPass]] | None = None) -> Steps:
    """Steps with the warm-up given by `warmup_steps` or chosen from step durations (module docstring);
    `passes`: the trace's evaluation passes when asked (`Context.eval_passes`: computed once for every reader),
    by default computed here."""
    found = locate_steps(trace)
    ids, start, end = found.ids, found.start_ns, found.end_ns
    n = len(ids)
    dur = end - start
    if warmup_steps is None and n >= 2:  # warm-up is chosen from training time: an evaluation is not a step's
        dur = dur - eval_overlap_ns(passes() if passes else evaluation_passes(trace), start, end)
    if warmup_steps is not None:
        w = max(0, min(int(warmup_steps), n))
    elif n >= 3:
        w = 1
        while w < n - 1 and dur[w] > SLOW_FACTOR * float(np.median(dur[w + 1 :])):
            w += 1
    elif n == 2:
        w = 1 if dur[0] > SLOW_FACTOR * dur[1] else 0
    else:
        w = 0
    return Steps(ids=ids, start_ns=start, end_ns=end, warmup=w, source=found.source, markers=found.markers,
                 work_start_ns=found.work_start_ns)
