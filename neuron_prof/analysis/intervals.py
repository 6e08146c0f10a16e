"""Interval arithmetic on numpy arrays: unions, gaps and overlaps (all ns)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from neuron_prof.model import Trace
from neuron_prof.model.order import searchsorted, sorted_unique
from neuron_prof.model.windows import row_windows


def merge(ts: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [ts, ts+dur) intervals as sorted, disjoint (start, end) arrays. Two arrays of the inputs' length
    at a time beside them (a big trace's host rows): starts and ends in start order, the running end in place."""
    ts = np.asarray(ts, dtype=np.int64)
    if len(ts) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    dur = np.asarray(dur, dtype=np.int64)
    o = np.argsort(ts, kind="stable")
    s, e = ts[o], dur[o]
    del o
    e += s
    if int(dur.min()) < 0:  # an interval may end before it starts: each block's end is its own intervals' max
        run_end = np.maximum.accumulate(e)
        new = np.r_[True, s[1:] > run_end[:-1]]
        del run_end
        block = np.cumsum(new) - 1
        ends = np.zeros(int(block[-1]) + 1, dtype=np.int64)
        np.maximum.at(ends, block, e)
        return s[new], ends
    np.maximum.accumulate(e, out=e)  # the running end: at a block's last interval, the block's end
    # a new block starts where an interval begins after everything before it has ended
    first = np.flatnonzero(s[1:] > e[:-1]) + 1
    return s[np.r_[0, first]], e[np.r_[first - 1, len(e) - 1]]


def merge_windows(windows: Iterable[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """`merge` of the intervals of all `windows` ((ts, dur) pairs), each window merged on its own first: the
    temporaries are a window's, and what is kept is its union (nested host ops collapse into their outer one).
    The same union as one `merge` of them all: a window's union covers what its intervals cover, so a later
    interval meets its union exactly where it meets them. A window with an interval that ends before it starts
    is kept as it is (`merge` of such intervals is not a union of covered time)."""
    ss: list[np.ndarray] = []
    ds: list[np.ndarray] = []
    last: tuple[np.ndarray, np.ndarray] | None = None  # the only window's union, when it is one
    for ts, dur in windows:
        if len(ts) and int(np.min(dur)) >= 0:
            last = merge(ts, dur)
            ss.append(last[0])
            ds.append(last[1] - last[0])
        elif len(ts):
            last = None
            ss.append(np.asarray(ts, dtype=np.int64))
            ds.append(np.asarray(dur, dtype=np.int64))
    if len(ss) == 1 and last is not None:
        return last  # one window: its union is the union (not merged twice)
    if not ss:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    return merge(np.concatenate(ss), np.concatenate(ds))


def rows_union(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`merge` of the slices at `rows` of `trace`, read a window of rows at a time (`merge_windows`; a cached
    trace's pages handed back after each window)."""
    sl = trace.slices
    return merge_windows((sl.ts_ns[rows[a:z]], sl.dur_ns[rows[a:z]]) for a, z in row_windows(trace, len(rows)))


def rows_union_ns(trace: Trace, rows: np.ndarray) -> int:
    """Total time the slices at `rows` cover (overlaps counted once), read a window of rows at a time."""
    s, e = rows_union(trace, rows)
    return int((e - s).sum())


def union_ns(ts: np.ndarray, dur: np.ndarray) -> int:
    """Total length covered by the intervals (overlaps counted once)."""
    s, e = merge(ts, dur)
    return int((e - s).sum())


def clip_union_ns(ts: np.ndarray, dur: np.ndarray, lo: int, hi: int) -> int:
    """Covered length inside [lo, hi)."""
    s, e = merge(ts, dur)
    s, e = np.maximum(s, lo), np.minimum(e, hi)
    return int(np.maximum(e - s, 0).sum())


def overlap_ns(ts: np.ndarray, dur: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Per interval: how much of it lies inside [lo, hi)."""
    ts = np.asarray(ts, dtype=np.int64)
    return np.asarray(np.maximum(np.minimum(ts + dur, hi) - np.maximum(ts, lo), 0), dtype=np.int64)


def covered_before(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For disjoint sorted intervals: how much of them lies before each time in `t`."""
    t = np.asarray(t, dtype=np.int64)
    if not len(starts):
        return np.zeros(len(t), dtype=np.int64)
    cum = np.r_[0, np.cumsum(ends - starts)]
    k = searchsorted(starts, t, side="right")  # intervals starting at or before t
    full = cum[np.maximum(k - 1, 0)]
    last = np.where(k > 0, np.minimum(t, ends[np.maximum(k - 1, 0)]) - starts[np.maximum(k - 1, 0)], 0)
    return np.asarray(np.where(k > 0, full + np.maximum(last, 0), 0), dtype=np.int64)


def intersect_ns(a_ts: np.ndarray, a_dur: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> int:
    """Total time the union of intervals `a` covers inside the disjoint windows [lo, hi)."""
    s, e = merge(a_ts, a_dur)
    return int((covered_before(s, e, hi) - covered_before(s, e, lo)).sum())


def difference(lo: np.ndarray, hi: np.ndarray, s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The parts of the disjoint sorted windows [lo, hi) that the disjoint sorted intervals [s, e) leave uncovered,
    as sorted, disjoint (start, end) arrays."""
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    if not len(lo) or not len(s):
        return lo.copy(), hi.copy()
    b = sorted_unique(np.concatenate([lo, hi, np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64)]))
    a, z = b[:-1], b[1:]  # every endpoint is a boundary: each piece lies wholly inside or outside both sets

    def inside(st: np.ndarray, en: np.ndarray) -> np.ndarray:
        k = searchsorted(st, a, side="right") - 1
        return np.asarray((k >= 0) & (a < en[np.maximum(k, 0)]))

    keep = inside(lo, hi) & ~inside(np.asarray(s, dtype=np.int64), np.asarray(e, dtype=np.int64))
    a, z = a[keep], z[keep]
    if not len(a):
        return a, z
    new = np.r_[True, a[1:] != z[:-1]]  # pieces that touch join
    return a[new], z[np.r_[new[1:], True]]
