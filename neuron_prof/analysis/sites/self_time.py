"""Host self time where nesting alone gets it wrong, for the lines view (`lines`): a span that outlives the span it
started in, and the forward's slices while autograd's thread runs the backward. Both read the host rows a window
at a time (`row_windows`): no column over every host row beside the results."""

from __future__ import annotations

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.intervals import covered_before, merge, merge_windows
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.model import SliceTable
from neuron_prof.model.order import searchsorted, sorted_unique
from neuron_prof.model.windows import row_windows

MAX_IMPROPER = 500
"""Improperly nested host slices whose self time is recomputed (the longest first)."""


def self_inside_parent(ctx: Context) -> np.ndarray:
    """Host self time per host row, with the slices that outlive the slice they started in counted right: a
    Python frame opened inside one ProfilerStep and closed after the last (`train()` around a profiler's steps)
    is not nested in them, and nesting (which assumes proper nesting) would give it their time as its own.
    Such a slice's self time is its duration less the time the slices of its thread that start inside it
    cover (for a properly nested slice, exactly its children's)."""
    n = host_nesting(ctx)
    sl = ctx.trace.slices
    rows = n.rows
    out = ctx.empty(len(rows), np.int64)  # a mapped file for a big cached trace (`Context.empty`)
    found = [np.zeros(0, np.int64)]
    for a, z in row_windows(ctx, len(rows)):  # a window of host rows at a time: no column over all
        out[a:z] = n.self_ns[a:z]
        pp = n.parent_pos[a:z]
        longer = sl.end_at(rows[a:z]) > sl.end_at(rows[np.maximum(pp, 0)])
        found.append(np.flatnonzero((pp >= 0) & longer) + a)
    bad = np.concatenate(found)
    if not len(bad):
        return out
    rb = rows[bad]
    bad = bad[np.argsort(sl.ts_ns[rb] - sl.end_at(rb), kind="stable")][:MAX_IMPROPER]  # the longest first
    tracks = sl.track[rows]

    def ts(p: np.ndarray | int) -> np.ndarray:  # host positions -> starts, ends: read where asked
        return sl.ts_ns[rows[p]]

    def end(p: np.ndarray | int) -> np.ndarray:
        return sl.end_at(rows[p])

    by_track: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for q in bad.tolist():
        tr = int(tracks[q])
        if tr not in by_track:
            on = np.flatnonzero(tracks == tr).astype(rows.dtype, copy=False)
            starts = ts(on)
            o = np.argsort(starts, kind="stable")
            on = on[o]
            starts.sort(kind="stable")  # the same values as starts[o]
            by_track[tr] = (on, starts)
            del o
        on, starts = by_track[tr]
        tq, eq = int(ts(q)), int(end(q))
        lo, hi = searchsorted(starts, tq, "left"), searchsorted(starts, eq, "right")
        inside = on[lo:hi]
        inside = inside[inside != q]
        ti = ts(inside)
        s, e = merge(ti, np.minimum(end(inside), eq) - ti)
        out[q] = max(eq - tq - int((e - s).sum()), 0)
    return out


def self_outside_backward(ctx: Context, row_bwd: np.ndarray, self_ns: np.ndarray) -> np.ndarray:
    """Host self time per host row, less, for slices of the forward, the time the backward ran on another
    thread meanwhile: the thread that called ``backward()`` waits for autograd's thread then, and that time
    is the backward ops' (charged to their forward lines), not the ``backward()`` line's as well."""
    n = host_nesting(ctx)
    sl = ctx.trace.slices
    out = ctx.empty(len(self_ns), np.int64)
    for a, z in row_windows(ctx, len(out)):
        out[a:z] = self_ns[a:z]
    if not row_bwd.any() or not len(n.rows):
        return out

    def backward_rows(a: int, z: int) -> np.ndarray:
        return n.rows[a:z][row_bwd[a:z]]

    tracks = sorted_unique(np.concatenate([sorted_unique(sl.track[backward_rows(a, z)])
                                           for a, z in row_windows(ctx, len(n.rows))]))
    for tr in tracks.tolist():  # backward time on each autograd thread, outside the slices of that thread
        s, e = merge_windows(_on_track(sl, backward_rows(a, z), tr) for a, z in row_windows(ctx, len(n.rows)))

        def cover(a: int, z: int, s: np.ndarray = s, e: np.ndarray = e,
                  tr: int = tr) -> tuple[np.ndarray, np.ndarray]:
            """Host rows [a, z): the backward time of thread `tr` inside each (0 for the backward's own rows),
            and which are on another thread."""
            r = n.rows[a:z]
            other = sl.track[r] != tr
            cov = covered_before(s, e, sl.end_at(r)) - covered_before(s, e, sl.ts_ns[r])
            return np.where(other & ~row_bwd[a:z], cov, 0), other

        child = ctx.empty(len(n.rows), np.int64)  # what each row's children on other threads cover
        for a, z in row_windows(ctx, len(n.rows)):
            child[a:z] = 0
        for a, z in row_windows(ctx, len(n.rows)):  # a window of host rows at a time: no column over all
            cov, other = cover(a, z)
            pp = n.parent_pos[a:z]
            has = (pp >= 0) & other
            np.add.at(child, pp[has], cov[has])
        for a, z in row_windows(ctx, len(n.rows)):
            out[a:z] -= np.clip(cover(a, z)[0] - child[a:z], 0, None)
        del child
    for a, z in row_windows(ctx, len(out)):
        np.maximum(out[a:z], 0, out=out[a:z])
    return out


def _on_track(sl: SliceTable, rows: np.ndarray, track: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, durations) of the slices at `rows` that lie on `track`."""
    on = rows[sl.track[rows] == track]
    return sl.ts_ns[on], sl.dur_ns[on]
