"""Nesting of slices on each track, vectorised: depth, direct parent and self time.

The parent of a slice is the slice that contains it and began last before it (start order: start, then the
longer first). Spans on one track are not always properly nested: Kineto writes µs with ns decimals, so
siblings that touch may overlap by a rounding error, and a torch.profiler trace's spans cross (the first
``ProfilerStep#0`` opens before the Python frame of the training function that holds the later steps;
``Optimizer.step#...`` opens inside the short Python call that enters it). A span that starts inside another
and ends after it (by more than `ROUNDING_NS`) is not its child: it hangs from the first span around both.
Found with pointer jumping over "the previous slice that could hold me" (numpy; rounds ~ nesting depth).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuron_prof.model import Trace
from neuron_prof.model.order import deal_by_track, in_start_order, row_dtype, start_order
from neuron_prof.model.windows import HasPages, row_windows

ROUNDING_NS = 2
"""Slack for timestamps rounded to ns (µs with three decimals, start and duration each rounded): a child that
ends up to this much after its parent is still inside it, and a sibling that begins this little before the
previous one ends is not inside it (unless it is that short itself)."""

TRANSPARENT_SPANS = ("PythonSubclass", "PythonDispatchMode")
"""Spans PyTorch opens around the Python part of a tensor subclass's op or a dispatch mode (the emulated
device, DTensor, neuron-prof's deep fallback mode...): bookkeeping of the op that encloses them, not ops of
their own. Their self time is the parent's, and they are skipped when naming the op a moment belongs to.
Whether an op inside them (aten::mm under PythonDispatchMode under aten::mm) is the same call as the op
around them is op accounting's rule (`_ops`), not nesting's."""


@dataclass(frozen=True, eq=False)
class Nesting:
    """Per-row results for `rows` (same order as `rows`)."""

    rows: np.ndarray
    depth: np.ndarray
    """1 for a top-level slice."""
    parent: np.ndarray
    """Slice row of the direct parent, -1 for top level."""
    parent_pos: np.ndarray
    """Position in `rows` of the direct parent, -1 for top level."""
    self_ns: np.ndarray
    transparent: np.ndarray
    """True for bookkeeping spans (TRANSPARENT_SPANS): self time 0, given to the enclosing slice."""


def nesting(trace: Trace, rows: np.ndarray, empty: Callable[[int, Any], np.ndarray] = np.empty,
            pages: HasPages | None = None) -> Nesting:
    """Depth, parent and self time of slice rows `rows` (nesting is computed within each track); rows, depths,
    parents and positions in `row_dtype` (int32 for a table under 2^31 rows).

    Computed a window of `ROW_WINDOW` rows in start order at a time (`row_windows`): a window carries the open
    slices of the one before (the last slice and its ancestors, the only ones that can hold a later slice of the
    track: `_parents`), so no temporary spans every row beyond the results and the start order. The results are
    made by `empty(n, dtype)` (`Context.empty`: a mapped file for a big cached trace) and `pages` (the trace by
    default) hands back the pages read and written after each window."""
    sl = trace.slices
    dt = row_dtype(len(sl))
    rows = np.asarray(rows, dtype=dt)
    n = len(rows)
    order = _start_order(trace, rows)
    pages = pages if pages is not None else trace
    depth = empty(n, dt)
    parent_pos = empty(n, dt)
    self_ns = empty(n, np.int64)
    transparent = empty(n, np.bool_)
    see_through = trace.name_ids(*TRANSPARENT_SPANS)
    # the open slices carried into the next window: positions in `rows`, starts, ends, track
    st_pos, st_ts, st_end, st_track = np.zeros(0, dt), np.zeros(0, np.int64), np.zeros(0, np.int64), -1
    for a, z in row_windows(pages, n):
        pos = order[a:z]
        r = rows[pos]
        ts, dur, tr = sl.ts_ns[r], sl.dur_ns[r], sl.track[r]
        k = len(st_pos) if int(tr[0]) == st_track else 0  # the carried slices hold only slices of their track
        ts_w, end_w = np.concatenate((st_ts[:k], ts)), np.concatenate((st_end[:k], ts + dur))
        tr_w = np.concatenate((np.full(k, st_track, dtype=tr.dtype), tr))
        par = _parents(ts_w, end_w, tr_w)  # positions in the window, the carried slices first
        dep = _depths(par)
        pos_w = np.concatenate((st_pos[:k], pos))
        up = par[k:]
        has = up >= 0
        ppos = np.where(has, pos_w[np.maximum(up, 0)], dt(-1)).astype(dt, copy=False)
        parent_pos[pos] = ppos
        depth[pos] = dep[k:]
        self_ns[pos] = dur
        transparent[pos] = np.isin(sl.name[r], see_through)
        np.subtract.at(self_ns, ppos[has], dur[has])  # my duration minus my direct children's
        chain = [len(par) - 1]  # the last slice and its ancestors, outermost first
        while par[chain[-1]] >= 0:
            chain.append(int(par[chain[-1]]))
        chain.reverse()
        st_pos, st_ts, st_end, st_track = pos_w[chain], ts_w[chain], end_w[chain], int(tr_w[-1])
    del order
    np.maximum(self_ns, 0, out=self_ns)
    see = np.flatnonzero(transparent)
    if len(see):  # deepest first, so a chain of them ends in the first real op above
        see = see[parent_pos[see] >= 0]
        for level in range(int(depth[see].max(initial=1)), 1, -1):
            sel = see[depth[see] == level]
            np.add.at(self_ns, parent_pos[sel], self_ns[sel])
            self_ns[sel] = 0
    parent = empty(n, dt)
    for a, z in row_windows(pages, n):
        pp = parent_pos[a:z]
        parent[a:z] = np.where(pp >= 0, rows[np.maximum(pp, 0)], dt(-1))
    return Nesting(rows=rows, depth=depth, parent=parent, parent_pos=parent_pos, self_ns=self_ns,
                   transparent=transparent)


def _start_order(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Positions in `rows` in start order (`start_order`: by track, start, longer first), in `rows`' dtype;
    grouped by track a window of rows at a time, then sorted one track at a time, and not at all for a track
    whose rows already come in start order (a loader's usual order): the temporaries span a window or one
    track's rows, not all."""
    sl = trace.slices
    by_track = np.empty(len(rows), dtype=rows.dtype)
    for _, a, z in deal_by_track(sl.track, rows, len(rows), len(trace.tracks), by_track, trace):
        p = by_track[a:z]
        if in_start_order(lambda i, j: (sl.ts_ns[rows[p[i:j]]], sl.dur_ns[rows[p[i:j]]]), len(p)):  # noqa: B023
            continue
        r = rows[p]
        by_track[a:z] = p[start_order(sl.ts_ns[r], sl.dur_ns[r], np.zeros(len(r), np.int8))]
        trace.drop_pages()
    return by_track


def _parents(ts: np.ndarray, end: np.ndarray, track: np.ndarray) -> np.ndarray:
    """Per slice in start order (by track, start, longer first): the position of the nearest earlier slice
    of its track that holds it (-1: none). Candidate j holds i when ``end[j] >= end[i] - ROUNDING_NS`` and
    ``end[j] > ts[i]`` (a slice that ends where i starts is done: back-to-back ops). Each slice starts from the
    one before it and, while the candidate does not hold it, jumps to the candidate's own candidate: every slice
    skipped that way ends before the candidate does, or by the candidate's start, so it cannot hold this one
    either."""
    n = len(ts)
    idt: type[np.signedinteger[Any]] = np.int32 if n < 2**31 else np.int64  # positions: half the memory
    cand = np.arange(-1, n - 1, dtype=idt)
    need = np.maximum(end - ROUNDING_NS, ts + 1)  # j holds i when end[j] >= need[i]
    if n:
        first = np.r_[True, track[1:] != track[:-1]]
        cand[first] = -1  # the first slice of each track
        cand[_top_level(end, need, first)] = -1
    active = np.flatnonzero(cand >= 0).astype(idt)
    need_a = need[active]  # carried along with `active`
    while len(active):
        miss = end[cand[active]] < need_a
        active, need_a = active[miss], need_a[miss]
        up = cand[cand[active]]
        cand[active] = up
        live = up >= 0
        active, need_a = active[live], need_a[live]
    return cand


def _top_level(end: np.ndarray, need: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Where no earlier slice of the track ends late enough to hold the slice (`_parents`' order and `need`):
    its parent is none, known without a walk. A run of top-level kernels would otherwise walk back one
    sibling a pass. Found by a running maximum of the end per track, packed with the track's number into one
    integer (all False when the two do not fit in 63 bits)."""
    base = int(end.min())
    bits = (int(end.max()) - base).bit_length()
    if (int(first.sum()) - 1).bit_length() + bits > 62:
        return np.zeros(len(end), dtype=bool)
    run = np.cumsum(first, dtype=np.int64)  # one int64 column reused in place: a big trace's host rows
    run -= 1
    run <<= bits
    run += end  # may wrap past 2^63: the next line brings it back (int64 arithmetic is modular)
    run -= base  # (track << bits) | (end - base), end - base fitting in `bits`
    np.maximum.accumulate(run, out=run)  # per track: the latest end so far (tracks come in order)
    run &= (1 << bits) - 1
    run += base
    out = np.empty(len(end), dtype=bool)
    out[0] = False
    np.less(run[:-1], need[1:], out=out[1:])  # the latest end before each slice
    out &= ~first
    return out


def _depths(parent: np.ndarray) -> np.ndarray:
    """1 + the number of ancestors, following `parent` (positions, -1 for none)."""
    depth = np.ones(len(parent), dtype=parent.dtype)
    up = parent.copy()
    live = np.flatnonzero(up >= 0)
    while len(live):
        depth[live] += 1
        up[live] = parent[up[live]]
        live = live[up[live] >= 0]
    return depth
