"""Interval arithmetic on numpy arrays: unions, gaps and overlaps (all ns)."""

from __future__ import annotations

import numpy as np


def merge(ts: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of [ts, ts+dur) intervals as sorted, disjoint (start, end) arrays."""
    ts = np.asarray(ts, dtype=np.int64)
    if len(ts) == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    end = ts + np.asarray(dur, dtype=np.int64)
    o = np.argsort(ts, kind="stable")
    s, e = ts[o], end[o]
    run_end = np.maximum.accumulate(e)
    # a new block starts where an interval begins after everything before it has ended
    new = np.r_[True, s[1:] > run_end[:-1]]
    starts = s[new]
    block = np.cumsum(new) - 1
    ends = np.zeros(len(starts), dtype=np.int64)
    np.maximum.at(ends, block, e)
    return starts, ends


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
    return np.maximum(np.minimum(ts + dur, hi) - np.maximum(ts, lo), 0)
