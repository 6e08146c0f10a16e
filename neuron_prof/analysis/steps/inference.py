"""Training steps inferred from a trace that marks none (no ``prof.step()``, no ``ProfilerStep#N``).

Signals, most reliable first (each needs two or more iterations, on one host thread):

1. **Optimizer steps.** torch wraps every ``Optimizer.step`` in a record_function named
   ``Optimizer.step#<Class>.step`` (a ``user_annotation`` on the calling thread, with or without
   ``with_stack``; torch 2.13). A training loop calls it once per iteration and nothing else does. Step
   k ends where the k-th optimizer step ends and starts where the one before ended, so an iteration's
   data loading, forward, backward and update fall in one step. The first starts at the first forward
   (outermost module call, ``Optimizer.zero_grad`` or DataLoader fetch on that thread), else at the
   thread's first op.
2. **Repeated outermost module calls** (``nn.Module: <Class>_<n>``, python_function spans written only
   with ``with_stack``): inference loops have no optimizer. Calls are grouped by the period of their
   names ([Model, Loss] is one iteration). Step k runs from group k's first call to group k+1's, so a
   backward after the forward stays in its step; nothing marks where the last ends, so it lasts the
   median step (at least to its last call's end, at most to the region end). A loop over a DataLoader (a
   batch fetch before each group, after the one before, and one after the last) runs from fetch to fetch,
   so an iteration's data loading is in its step and the last ends at the fetch that found no batch.
3. **A user annotation** (``record_function("train_step")``) repeating at top level, grouped the same
   way; the steps are its spans.

An annotation goes before 1 and 2 when its spans hold exactly one of their iterations each (from the first
forward, zero_grad or batch fetch to the update; or all calls of the group) and at least half of each
step's op time: the user drew the iteration's edges, we only guess them. An annotation around a part
(``## optimizer ##``, a forward before long post-processing) is not the iteration.
Top level means inside no op, module call or other annotation (Python frames and a ``ProfilerStep#``
around it are fine); an annotation that occurs on several threads marks concurrent requests (a server),
not a loop, and is not used. Names seen once are setup, not iterations, and are left out.

Limit: two optimizers of the same class stepped once each per iteration (a GAN with two Adams) give two
steps per iteration; different classes are grouped by period.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from neuron_prof.analysis.intervals import merge
from neuron_prof.model import Meta, Trace, TrackKind
from neuron_prof.model.order import searchsorted, sorted_unique
from neuron_prof.model.schema import KinetoCat

OPT_STEP = "Optimizer.step#"
OPT_ZERO_GRAD = "Optimizer.zero_grad#"
MODULE = "nn.Module: "
DATALOADER = "enumerate(DataLoader)#"
TORCH_ANNOTATIONS = ("ProfilerStep#", "Optimizer.", DATALOADER, "nccl:", "gloo:", "DistributedDataParallel.")
"""user_annotation spans torch itself writes: never taken for the user's iteration marks."""
MAX_PERIOD = 64
"""Longest iteration pattern looked for (outermost calls or annotations per iteration)."""
COVER = 0.5
"""Share of an inferred step's op time an annotation must hold (median over steps) to replace it."""


@dataclass(frozen=True, eq=False)
class Inferred:
    """Inferred step windows, sorted by start."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    source: str
    """"inferred: optimizer step", "inferred: module call" or "inferred: user annotation"."""
    markers: tuple[str, ...]
    """Names of the spans the steps were found from."""
    work_ns: np.ndarray | None = None
    """Where each iteration's own work starts (its first forward, zero_grad or batch fetch), at or after its
    step's start: before it, an optimizer step's window holds the tail of the iteration before (its metrics
    and logging after the update); None when the window is the iteration."""


@dataclass(frozen=True, eq=False)
class _Spans:
    """Spans of one track, sorted by start (longest first on ties)."""

    ts: np.ndarray
    end: np.ndarray
    name: np.ndarray

    @classmethod
    def of(cls, trace: Trace, rows: np.ndarray) -> _Spans:
        sl = trace.slices
        o = np.lexsort((-sl.dur_ns[rows], sl.ts_ns[rows]))
        r = rows[o]
        return cls(sl.ts_ns[r], sl.end_at(r), sl.name[r])

    def take(self, mask: np.ndarray) -> _Spans:
        return _Spans(self.ts[mask], self.end[mask], self.name[mask])

    def outermost(self) -> _Spans:
        """Spans inside none of the others."""
        if len(self.ts) < 2:
            return self
        reach = np.maximum.accumulate(self.end)
        return self.take(np.r_[True, self.end[1:] > reach[:-1]])

    def repeated(self) -> _Spans:
        """Spans whose name occurs at least twice."""
        _, inv, cnt = np.unique(self.name, return_inverse=True, return_counts=True)
        return self.take(cnt[inv] >= 2)


def infer_steps(trace: Trace) -> Inferred | None:
    """Steps from the most reliable signal present (module docstring), or None when none repeats."""
    ids = _ids(trace)
    host = trace.track_ids(TrackKind.THREAD)
    for kind, fn in (("optimizer step", _optimizer), ("module call", _modules)):
        rows = _rows(trace, ids[kind], host)
        if not len(rows):
            continue
        th = _Thread(trace, _busiest(trace, rows), ids)
        found = fn(th, _Spans.of(trace, rows[trace.slices.track[rows] == th.track]))
        if found is None:
            continue
        start, end, cores, names = found
        return _enclosing_annotation(th, start, end, cores) or Inferred(start, end, f"inferred: {kind}", names,
                                                                       cores[0])
    return _annotations_alone(trace, ids, host)


@dataclass(eq=False)
class _Thread:
    """The host thread a signal was found on."""

    trace: Trace
    track: int
    ids: dict[str, np.ndarray]

    @cached_property
    def busy(self) -> _Busy:
        return _Busy.of(self.trace, self.track)

    @cached_property
    def region_end(self) -> int:
        w = self.trace.metadata.get(Meta.WALL)
        if isinstance(w, (list, tuple)) and len(w) == 2 and all(isinstance(x, int) for x in w) and w[1] > w[0]:
            return int(w[1])
        return self.trace.time_range()[1]


# ---- signals ---------------------------------------------------------------------------------------
Found = tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray], tuple[str, ...]]
"""(step start, step end, (start, end) of each iteration's own work, marker names)."""


def _optimizer(th: _Thread, sp: _Spans) -> Found | None:
    opt = sp.outermost()
    groups = [g for g in periodic_groups(opt.name) if g[2]]  # a partial last group has not ended
    if len(groups) < 2:
        return None
    first = np.array([opt.ts[a] for a, _, _ in groups], dtype=np.int64)
    end = np.array([opt.end[a : b + 1].max() for a, b, _ in groups], dtype=np.int64)
    # an iteration's work starts at its first forward, zero_grad or batch fetch after the update before
    ids = th.ids
    lead = _rows(th.trace, np.r_[ids["module call"], ids["zero_grad"], ids["dataloader"]], np.array([th.track]))
    lead_ts = np.r_[np.sort(th.trace.slices.ts_ns[lead]), np.iinfo(np.int64).max]
    nxt = lead_ts[searchsorted(lead_ts, np.r_[np.iinfo(np.int64).min, end[:-1]], side="left")]
    has = nxt < first
    # the first step starts there too (else at the thread's first op)
    start0 = int(nxt[0]) if has[0] else _first_work(th, int(first[0]))
    start = np.r_[start0, end[:-1]].astype(np.int64)
    # without a lead: every op after the update before (the first iteration: its update)
    no_lead = np.minimum(th.busy.first_from(start, first), first)
    no_lead[0] = first[0]
    return start, end, (np.where(has, nxt, no_lead), end), _names(th.trace, opt.name)


def _modules(th: _Thread, sp: _Spans) -> Found | None:
    calls = sp.outermost().repeated()
    groups = periodic_groups(calls.name)
    if len(groups) < 2:
        return None
    start = np.array([calls.ts[a] for a, _, _ in groups], dtype=np.int64)
    last = np.array([calls.end[a : b + 1].max() for a, b, _ in groups], dtype=np.int64)
    fetched = _fetches(th, start, last)
    if fetched is not None:  # a loop over a DataLoader: each iteration from its batch fetch to the next one
        start, tail = fetched
    else:
        tail = max(int(last[-1]), min(int(start[-1]) + int(np.median(np.diff(start))), th.region_end))
    end = np.r_[start[1:], tail].astype(np.int64)
    return start, end, (start, last), _names(th.trace, calls.name)


def _fetches(th: _Thread, first: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, int] | None:
    """(start of each iteration's batch fetch, start of the fetch that ended the loop, the one that found no
    batch) when the loop is driven by a DataLoader: a fetch on the thread before each iteration's first module
    call and after the previous one's last, and one after the last; None otherwise."""
    rows = _rows(th.trace, th.ids["dataloader"], np.array([th.track]))
    if not len(rows):
        return None
    ts = np.sort(th.trace.slices.ts_ns[rows])
    before = searchsorted(ts, first, side="left") - 1  # the last fetch before each iteration's first call
    after = int(searchsorted(ts, last[-1], side="left"))
    bound = np.r_[np.iinfo(np.int64).min, last[:-1]]
    if before[0] < 0 or after >= len(ts) or not (ts[before] > bound).all():
        return None
    return ts[before].astype(np.int64), int(ts[after])


def _enclosing_annotation(th: _Thread, start: np.ndarray, end: np.ndarray,
                          cores: tuple[np.ndarray, np.ndarray]) -> Inferred | None:
    """The user annotation whose spans each hold one iteration's work and most of its step's ops, if any."""
    ann = _top_annotations(th.trace, th.track, th.ids)
    if ann is None:
        return None
    lo, hi = cores
    step_busy = th.busy.within(start, end)[1:]  # the first step's start is a guess: judge on the others
    best: tuple[float, int] | None = None
    for sid in sorted_unique(ann.name):
        m = ann.name == sid
        a_ts, a_end = ann.ts[m], ann.end[m]
        if len(a_ts) != len(lo) or not (np.all(a_ts <= lo) and np.all(hi <= a_end)):
            continue
        if np.any(a_end[:-1] > lo[1:]):  # a span reaching into the next iteration holds two
            continue
        cover = float(np.median(th.busy.within(a_ts, a_end)[1:] / np.maximum(step_busy, 1)))
        if cover >= COVER and (best is None or cover > best[0]):
            best = (cover, int(sid))
    if best is None:
        return None
    m = ann.name == best[1]
    return Inferred(ann.ts[m], ann.end[m], "inferred: user annotation", (th.trace.strings[best[1]],))


@dataclass(frozen=True, eq=False)
class _Busy:
    """Time a thread spends in ops (the union of its cpu_op spans)."""

    start: np.ndarray
    end: np.ndarray
    before: np.ndarray
    """Busy time before each interval."""

    @classmethod
    def of(cls, trace: Trace, track: int) -> _Busy:
        sl = trace.slices
        cpu = trace.strings.get(KinetoCat.CPU_OP)
        rows = np.flatnonzero((sl.track == track) & (sl.cat == cpu))
        s, e = merge(sl.ts_ns[rows], sl.dur_ns[rows])
        return cls(s, e, np.r_[0, np.cumsum(e - s)[:-1]].astype(np.int64))

    def upto(self, t: np.ndarray) -> np.ndarray:
        """Busy time before each moment in `t`."""
        if not len(self.start):
            return np.zeros(len(t), dtype=np.int64)
        k = np.maximum(searchsorted(self.start, t, side="right") - 1, 0)
        part = np.clip(t - self.start[k], 0, self.end[k] - self.start[k])
        return np.asarray(self.before[k] + part, dtype=np.int64)

    def within(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return np.asarray(self.upto(hi) - self.upto(lo), dtype=np.int64)

    def first_from(self, t: np.ndarray, default: np.ndarray) -> np.ndarray:
        """Start of the first op at or after each moment in `t` (`default` where none)."""
        k = searchsorted(self.start, t)
        got = np.r_[self.start, 0][k]
        return np.asarray(np.where(k < len(self.start), got, default), dtype=np.int64)


def _annotations_alone(trace: Trace, ids: dict[str, np.ndarray], host: np.ndarray) -> Inferred | None:
    rows = _rows(trace, ids["annotation"], host)
    if not len(rows):
        return None
    best: tuple[int, _Spans] | None = None
    for track in sorted_unique(trace.slices.track[rows]):
        ann = _top_annotations(trace, int(track), ids)
        if ann is not None and (best is None or len(ann.ts) > best[0]):
            best = (len(ann.ts), ann)
    if best is None:
        return None
    ann = best[1]
    groups = periodic_groups(ann.name)
    if len(groups) < 2:
        return None
    start = np.array([ann.ts[a] for a, _, _ in groups], dtype=np.int64)
    end = np.array([ann.end[a : b + 1].max() for a, b, _ in groups], dtype=np.int64)
    return Inferred(start, end, "inferred: user annotation", _names(trace, ann.name))


# ---- helpers ---------------------------------------------------------------------------------------
def periodic_groups(names: np.ndarray) -> list[tuple[int, int, bool]]:
    """(first, last, complete) index of each iteration in a sequence of span names.

    The shortest period the sequence repeats with (up to MAX_PERIOD; the last group may be partial),
    else a new iteration at each occurrence of the first name.
    """
    m = len(names)
    for p in range(1, min(m // 2, MAX_PERIOD) + 1):
        if np.array_equal(names[p:], names[:-p]):
            return [(a, min(a + p, m) - 1, a + p <= m) for a in range(0, m, p)]
    if not m:
        return []
    starts = np.flatnonzero(names == names[0])
    ends = np.r_[starts[1:], m] - 1
    return [(int(a), int(b), True) for a, b in zip(starts, ends, strict=True)]


def _top_annotations(trace: Trace, track: int, ids: dict[str, np.ndarray]) -> _Spans | None:
    """The user's annotations at top level of `track` whose names repeat and occur on no other thread."""
    sl = trace.slices
    on = np.flatnonzero(sl.track == track)
    if not np.isin(sl.name[on], ids["annotation"]).any():
        return None
    sp = _Spans.of(trace, on)
    # Python frames and ProfilerStep# may enclose an annotation; ops, module calls, annotations may not
    py = np.isin(sp.name, ids["python"]) & ~np.isin(sp.name, ids["module call"])
    top = sp.take(~py & ~np.isin(sp.name, ids["profiler step"])).outermost()
    ann = top.take(np.isin(top.name, ids["annotation"]))
    other = np.isin(sl.track, trace.track_ids(TrackKind.THREAD)) & (sl.track != track)
    elsewhere = sorted_unique(sl.name[other & np.isin(sl.name, ann.name)])
    ann = ann.take(~np.isin(ann.name, elsewhere)).repeated()
    return ann if len(ann.ts) >= 2 else None


def _first_work(th: _Thread, before: int) -> int:
    """Start of the first span on the thread that is not a Python frame or ProfilerStep# around everything."""
    sl = th.trace.slices
    on = np.flatnonzero(sl.track == th.track)
    wrap = np.isin(sl.name[on], th.ids["python"]) | np.isin(sl.name[on], th.ids["profiler step"])
    ts = sl.ts_ns[on[~wrap]]
    return int(min(ts.min(), before)) if len(ts) else before


def _ids(trace: Trace) -> dict[str, np.ndarray]:
    """String ids of each kind of name the signals look at."""
    strings = trace.strings.as_list()

    def pick(pred: Callable[[str], bool]) -> np.ndarray:
        return np.array([i for i, s in enumerate(strings) if pred(s)], dtype=np.int32)

    sl = trace.slices
    ann_cat, py_cat = trace.strings.get(KinetoCat.USER_ANNOTATION), trace.strings.get(KinetoCat.PYTHON)
    ann = sorted_unique(sl.name[sl.cat == ann_cat]) if ann_cat is not None else np.zeros(0, np.int32)
    py = sorted_unique(sl.name[sl.cat == py_cat]) if py_cat is not None else np.zeros(0, np.int32)
    return {
        "optimizer step": pick(lambda s: s.startswith(OPT_STEP)),
        "module call": pick(lambda s: s.startswith(MODULE)),
        "zero_grad": pick(lambda s: s.startswith(OPT_ZERO_GRAD)),
        "dataloader": pick(lambda s: s.startswith(DATALOADER)),
        "profiler step": pick(lambda s: s.startswith("ProfilerStep#")),
        "annotation": np.array([i for i in ann if not strings[i].startswith(TORCH_ANNOTATIONS)], dtype=np.int32),
        "python": py.astype(np.int32),
    }


def _rows(trace: Trace, sids: np.ndarray, tracks: np.ndarray) -> np.ndarray:
    if not len(sids):
        return np.zeros(0, dtype=np.int64)
    sl = trace.slices
    return np.flatnonzero(np.isin(sl.name, sids) & np.isin(sl.track, tracks))


def _busiest(trace: Trace, rows: np.ndarray) -> int:
    tracks, counts = np.unique(trace.slices.track[rows], return_counts=True)
    return int(tracks[np.argmax(counts)])


def _names(trace: Trace, sids: np.ndarray) -> tuple[str, ...]:
    return tuple(trace.strings[int(s)] for s in dict.fromkeys(sids.tolist()))
