"""Nesting of slices on each track, vectorised: depth, direct parent and self time.

Slices on one track are assumed properly nested (Kineto and our probes write them so). Depth is
counted from starts and ends with numpy; the parent of a slice is the last earlier slice one level up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neuron_prof.model import Trace

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
    self_ns: np.ndarray
    transparent: np.ndarray
    """True for bookkeeping spans (TRANSPARENT_SPANS): self time 0, given to the enclosing slice."""


def nesting(trace: Trace, rows: np.ndarray) -> Nesting:
    """Depth, parent and self time of slice rows `rows` (nesting is computed within each track)."""
    rows = np.asarray(rows, dtype=np.int64)
    sl = trace.slices
    ts, dur, track = sl.ts_ns[rows], sl.dur_ns[rows], sl.track[rows]
    # start order per track: by track, then start, then longer first (a parent before its children)
    order = np.lexsort((-dur, ts, track))
    ts_o, dur_o, tr_o = ts[order], dur[order], track[order]
    end_o = ts_o + dur_o
    n = len(order)
    depth_o = np.zeros(n, dtype=np.int64)
    parent_o = np.full(n, -1, dtype=np.int64)
    bounds = np.flatnonzero(np.diff(tr_o)) + 1
    for a, b in zip(np.r_[0, bounds], np.r_[bounds, n], strict=True):
        if b <= a:
            continue
        t, e = ts_o[a:b], end_o[a:b]
        idx = np.arange(b - a)
        # slices finished by my start, counting an end exactly at my start as finished (back-to-back ops)
        ended = np.searchsorted(np.sort(e), t, side="right")
        # ...except zero-length slices that start with me but sort after me: they are not before me
        grp_end = np.searchsorted(t, t, side="right")
        zero_ts = np.sort(t[dur_o[a:b] == 0])
        zeros_in_grp = np.searchsorted(zero_ts, t, side="right") - np.searchsorted(zero_ts, t, side="left")
        ended -= np.minimum(zeros_in_grp, grp_end - idx)
        d = np.maximum(idx + 1 - ended, 1)
        depth_o[a:b] = d
        par = np.full(b - a, -1, dtype=np.int64)
        for level in range(2, int(d.max()) + 1):
            here = np.flatnonzero(d == level)
            up = np.flatnonzero(d == level - 1)
            if len(up) == 0:
                continue
            k = np.searchsorted(up, here) - 1
            ok = k >= 0
            par[here[ok]] = up[k[ok]] + a
        parent_o[a:b] = par
    # self time: my duration minus my direct children's
    child_sum = np.bincount(parent_o[parent_o >= 0], weights=dur_o[parent_o >= 0], minlength=n)
    self_o = np.maximum(dur_o - child_sum.astype(np.int64), 0)
    names_o = trace.slices.name[rows][order]
    transparent = np.isin(names_o, trace.name_ids(*TRANSPARENT_SPANS))
    if transparent.any():  # deepest first, so a chain of them ends in the first real op above
        for level in range(int(depth_o.max()), 1, -1):
            sel = np.flatnonzero(transparent & (depth_o == level) & (parent_o >= 0))
            np.add.at(self_o, parent_o[sel], self_o[sel])
            self_o[sel] = 0
    inv = np.empty(n, dtype=np.int64)
    inv[order] = np.arange(n)
    parent_rows = np.where(parent_o >= 0, rows[order][np.maximum(parent_o, 0)], -1)
    return Nesting(rows=rows, depth=depth_o[inv], parent=parent_rows[inv], self_ns=self_o[inv],
                   transparent=transparent[inv])
