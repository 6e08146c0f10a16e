"""The one sort of slices both the loaders (binding flows) and analysis (nesting) need, and the integer type of
row numbers."""

from __future__ import annotations

import numpy as np


def start_order(ts: np.ndarray, dur: np.ndarray, track: np.ndarray) -> np.ndarray:
    """The order of slices by track, then start, then longer first (a parent before its children), equal ones
    in table order: ``np.lexsort((-dur, ts, track))``, sorted 3-4x faster. Slices come nearly in start order
    per track, which numpy's stable sort takes in one pass; the few that start together on a track are then
    put longer first."""
    o = np.argsort(ts, kind="stable")
    o = o[np.argsort(track[o], kind="stable")]
    t, k = ts[o], track[o]
    tie = (t[1:] == t[:-1]) & (k[1:] == k[:-1])
    if tie.any():
        idx = np.flatnonzero(np.r_[tie, False] | np.r_[False, tie])  # the runs that start together
        run = np.cumsum(np.r_[True, ~tie])[idx]
        o[idx] = o[idx][np.lexsort((-dur[o[idx]], run))]
    return o  # type: ignore[no-any-return]


ROWS_INT32 = 2**31 - 1
"""Most rows a table may have for its row numbers and positions to be held as int32 (half the memory of int64:
a 70M-event trace's per-row arrays); a bigger trace keeps them int64 (`row_dtype`)."""


def row_dtype(n: int) -> type[np.signedinteger]:
    """The integer type for row numbers and positions (and -1 for none) into a table of `n` rows: int32 while
    `n` <= ROWS_INT32, else int64."""
    return np.int32 if n <= ROWS_INT32 else np.int64
