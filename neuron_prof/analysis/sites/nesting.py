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

from dataclasses import dataclass
from typing import Any

import numpy as np

from neuron_prof.model import Trace
from neuron_prof.model.order import row_dtype, start_order

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


def nesting(trace: Trace, rows: np.ndarray) -> Nesting:
    """Depth, parent and self time of slice rows `rows` (nesting is computed within each track); rows, depths,
    parents and positions in `row_dtype` (int32 for a table under 2^31 rows)."""
    sl = trace.slices
    dt = row_dtype(len(sl))
    rows = np.asarray(rows, dtype=dt)
    order = start_order(sl.ts_ns[rows], sl.dur_ns[rows], sl.track[rows])
    rows_o = rows[order]  # the columns read again in start order: no copy in table order held beside them
    ts_o, dur_o, tr_o = sl.ts_ns[rows_o], sl.dur_ns[rows_o], sl.track[rows_o]
    end_o = ts_o + dur_o
    n = len(order)
    parent_o = _parents(ts_o, end_o, tr_o).astype(dt, copy=False)
    del ts_o, end_o, tr_o
    depth_o = _depths(parent_o)
    # self time: my duration minus my direct children's
    child_sum = np.bincount(parent_o[parent_o >= 0], weights=dur_o[parent_o >= 0], minlength=n)
    self_o = np.maximum(dur_o - child_sum.astype(np.int64), 0)
    names_o = trace.slices.name[rows_o]
    del rows_o
    transparent = np.isin(names_o, trace.name_ids(*TRANSPARENT_SPANS))
    if transparent.any():  # deepest first, so a chain of them ends in the first real op above
        for level in range(int(depth_o.max()), 1, -1):
            sel = np.flatnonzero(transparent & (depth_o == level) & (parent_o >= 0))
            np.add.at(self_o, parent_o[sel], self_o[sel])
            self_o[sel] = 0
    inv = np.empty(n, dtype=dt)
    inv[order] = np.arange(n, dtype=dt)
    order = order.astype(dt, copy=False)
    parent_pos = np.where(parent_o >= 0, order[np.maximum(parent_o, 0)], dt(-1))[inv]
    parent_rows = np.where(parent_pos >= 0, rows[np.maximum(parent_pos, 0)], dt(-1))
    return Nesting(rows=rows, depth=depth_o[inv], parent=parent_rows, parent_pos=parent_pos, self_ns=self_o[inv],
                   transparent=transparent[inv])


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
