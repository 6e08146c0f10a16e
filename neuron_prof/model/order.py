"""The one sort of slices the loaders (binding flows), the analysis (nesting) and the exporters (the .pftrace
layout) need, in one pass over every slice (`start_order`) or a window of rows at a time (`deal_by_key`/`deal_by_track`, then
`in_start_order` per track); the integer type of row numbers; the distinct values of an integer column
(`sorted_unique`) and the distinct rows of an integer table (`unique_rows`); a binary search that never converts
the array searched (`searchsorted`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from neuron_prof.model import windows
from neuron_prof.model.second_core import both


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


def sorted_unique(a: ArrayLike) -> np.ndarray:
    """``np.unique(a)`` (the distinct values, ascending, of `a` flattened) by sorting a copy for integer and bool
    values. numpy 2.3+ answers a plain ``np.unique`` with a hash table, slower than a sort at every size measured
    here and 70x slower at 3M distinct values (3.0 s against 0.04 s): rows, positions, documents and flow ends
    of a big trace are mostly distinct. Other types go to ``np.unique`` (its rule for NaNs)."""
    s = np.array(a).ravel()  # a copy: an ndarray even of a memory-mapped column
    if s.dtype.kind not in "iub":
        return np.unique(s)
    s.sort()
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def unique_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(keys, axis=0, return_index=True, return_inverse=True)`` for a 2-D integer table: its distinct
    rows in lexicographic order (the first column most significant), the first row of each, and each row's index
    into them (1-D). numpy sorts the rows as records, 10x slower than one sort of a number per row: the columns are
    packed into one int64 when their ranges allow it (a training trace's keys are small ids and flags), else sorted
    by ``np.lexsort``."""
    n = len(keys)
    if not n:
        return keys[:0].copy(), np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    lo, hi = keys.min(axis=0).tolist(), keys.max(axis=0).tolist()
    radix = [int(b) - int(a) + 1 for a, b in zip(lo, hi)]
    if np.prod(radix, dtype=object) < 2**63:  # exact in Python ints: the packed key never wraps
        packed = np.zeros(n, dtype=np.int64)
        for j, r in enumerate(radix):
            packed *= r
            packed += keys[:, j] - np.int64(lo[j])
        order = np.argsort(packed, kind="stable")
        s = packed[order]
    else:
        order = np.lexsort(keys.T[::-1])
        s = keys[order]
    new = np.empty(n, dtype=bool)  # where a row differs from the one sorted before it
    new[0] = True
    differs = s[1:] != s[:-1]
    new[1:] = differs.any(axis=1) if differs.ndim == 2 else differs
    first = order[new]
    inverse = np.empty(n, dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return keys[first], first, inverse


def searchsorted(a: ArrayLike, v: ArrayLike, side: Literal["left", "right"] = "left") -> Any:
    """``np.searchsorted(a, v, side)``, the same answer, without converting `a`. numpy converts the whole of `a` to
    the common type of `a` and `v` at every call: an int32 row array (`row_dtype`) searched for a Python int or
    an int64 is copied to int64 first, 9 ms at 5M rows against 20 µs, and a mapped column is read whole for it.
    Integer needles are brought to `a`'s integer type here; those beyond its range sort before or after every
    item (0 or len(a)); numpy answers those beyond int64 through float64, which can tie with the last item. Other
    needles (floats) go to numpy as they are."""
    arr = a if isinstance(a, np.ndarray) else np.asarray(a)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        return _search(arr, v, side)
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        info = np.iinfo(arr.dtype)
        if v > info.max:
            return np.intp(len(arr))
        if v < info.min:
            return np.intp(0)
        return np.searchsorted(arr, arr.dtype.type(v), side)
    x = np.asarray(v)
    if x.dtype.kind not in "iu" or np.result_type(arr.dtype, x.dtype) == arr.dtype:
        return _search(arr, x, side)
    if x.ndim == 0:
        return searchsorted(arr, x.item(), side)
    info = np.iinfo(arr.dtype)
    over = x > info.max
    under = x < info.min if x.dtype.kind == "i" else np.zeros(x.shape, dtype=bool)
    out = _search(arr, np.where(over | under, 0, x).astype(arr.dtype), side)
    out[over] = len(arr)
    out[under] = 0
    return out


def deal_by_key(key_of: Callable[[int, int], np.ndarray], n: int, nkeys: int, out: np.ndarray,
                pages: windows.HasPages) -> list[tuple[int, int, int]]:
    """Positions 0..n grouped by key into `out` (ascending key, position order within a key: a stable sort by key;
    a position whose key is negative is left out), the keys of positions [a, z) being ``key_of(a, z)`` (below
    `nkeys`); made a window of positions at a time (`windows.row_windows`, `pages` handing back the pages read),
    each window's positions dealt to their key's place. Returns (key, a, z) of each key's positions in `out`."""
    counts = np.zeros(max(nkeys, 1), dtype=np.int64)
    for a, z in windows.row_windows(pages, n):
        keys = key_of(a, z)
        counts += np.bincount(keys[keys >= 0], minlength=len(counts))
    at = np.r_[0, np.cumsum(counts)[:-1]]  # where each key's positions go next
    groups = [(k, int(at[k]), int(at[k] + c)) for k, c in enumerate(counts.tolist()) if c]
    for a, z in windows.row_windows(pages, n):
        key = key_of(a, z)
        keep = np.flatnonzero(key >= 0)
        o = keep[np.argsort(key[keep], kind="stable")]
        t = key[o]
        cuts = np.flatnonzero(np.diff(t)) + 1
        for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(t)].tolist(), strict=True):
            if hi > lo:
                g = int(t[lo])
                out[at[g]:at[g] + hi - lo] = o[lo:hi] + a
                at[g] += hi - lo
    return groups


def deal_by_track(track: np.ndarray, rows: np.ndarray | None, n: int, ntracks: int, out: np.ndarray,
                  pages: windows.HasPages) -> list[tuple[int, int, int]]:
    """`deal_by_key` by track: the track of position i being ``track[rows[i]]`` (``track[i]`` when `rows` is
    None)."""
    return deal_by_key(lambda a, z: track[a:z] if rows is None else track[rows[a:z]], n, ntracks, out, pages)


def in_start_order(span: Callable[[int, int], tuple[np.ndarray, np.ndarray]], n: int) -> bool:
    """Whether n slices of one track, read `windows.ROW_WINDOW` at a time as (starts, durations) by
    ``span(a, z)``, already come in `start_order`: each starts after the one before, or with it and no longer
    (what a stable `start_order` would leave where it is). Pages are the caller's to hand back."""
    last_t = last_d = None
    step = windows.ROW_WINDOW  # read at each call: a test cuts a small trace into many windows
    for a in range(0, n, step):
        t, d = span(a, min(a + step, n))
        if last_t is not None:
            t, d = np.r_[last_t, t], np.r_[last_d, d]
        if not bool(((t[1:] > t[:-1]) | ((t[1:] == t[:-1]) & (d[1:] <= d[:-1]))).all()):
            return False
        last_t, last_d = t[-1:], d[-1:]
    return True


SPLIT_NEEDLES = 1 << 18
"""Needles from which `searchsorted` searches in two parts at once (`second_core.both`: numpy's search runs
without the GIL), a `SEARCH_CHUNK` of them at a time (bounded temporaries)."""
SEARCH_CHUNK = 1 << 20


def _search(arr: np.ndarray, v: Any, side: Literal["left", "right"]) -> Any:
    """``np.searchsorted(arr, v, side)``, a 1-D `v` of `SPLIT_NEEDLES` or more searched half by the helper thread
    when numpy searches `arr` as it is (numpy would convert the whole of `arr` for each chunk: an int array searched
    for floats goes to numpy in one call, one conversion, as before)."""
    x = v if isinstance(v, np.ndarray) else np.asarray(v)
    n = len(x) if x.ndim == 1 else 0
    if (n < SPLIT_NEEDLES or arr.dtype.kind not in "iuf" or x.dtype.kind not in "iuf"
            or np.result_type(arr.dtype, x.dtype) != arr.dtype):
        return np.searchsorted(arr, x, side)
    out = np.empty(n, dtype=np.intp)

    def part(a: int, z: int) -> None:
        for k in range(a, z, SEARCH_CHUNK):
            e = min(k + SEARCH_CHUNK, z)
            out[k:e] = np.searchsorted(arr, x[k:e], side)

    h = n // 2
    both(lambda: part(h, n), lambda: part(0, h))
    return out
