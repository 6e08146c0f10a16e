"""Host-side helpers shared by analyses: the nesting of host slices and "what was the host doing at t"."""

from __future__ import annotations

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.sites.nesting import TRANSPARENT_SPANS, Nesting, nesting
from neuron_prof.model import KinetoCat, TrackKind
from neuron_prof.model.order import row_dtype, searchsorted, sorted_unique
from neuron_prof.model.windows import row_windows


def host_nesting(ctx: Context) -> Nesting:
    """Nesting of every slice on host thread tracks (computed once per context)."""
    return ctx.memo("host_nesting",  # type: ignore[no-any-return]
                    lambda: nesting(ctx.trace, ctx.rows(TrackKind.THREAD), ctx.empty, ctx))


def slice_depths(ctx: Context, top: int = 1) -> np.ndarray:
    """The nesting depth of every slice on its track (`top` for a top-level one), in `row_dtype`, in `ctx.empty`
    (a mapped file for a big cached trace): the host threads' from `host_nesting` (computed once, shared with the
    analyses), the other tracks' nested here; the same as `nesting` over every row, as nesting stays within a
    track. Written a window of rows at a time."""
    sl = ctx.trace.slices
    n = len(sl)
    dt = row_dtype(n)
    depth = ctx.empty(n, dt)
    on_host = ctx.empty(n, np.bool_)
    host = host_nesting(ctx)
    for a, z in row_windows(ctx, n):
        on_host[a:z] = False
    for a, z in row_windows(ctx, len(host.rows)):
        r = host.rows[a:z]
        on_host[r] = True
        depth[r] = host.depth[a:z] - (1 - top)
    rest = np.concatenate([np.flatnonzero(~on_host[a:z]).astype(dt) + dt(a) for a, z in row_windows(ctx, n)]
                          or [np.zeros(0, dt)])
    del on_host
    if len(rest):
        other = nesting(ctx.trace, rest, ctx.empty, ctx)
        for a, z in row_windows(ctx, len(rest)):
            depth[rest[a:z]] = other.depth[a:z] - (1 - top)
    return depth


def host_tracks(ctx: Context) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per host track (ascending track id): (its rows sorted by start, stable; their starts); the rows in
    `row_dtype` (as `host_nesting`'s). Computed once per context."""

    def build() -> list[tuple[np.ndarray, np.ndarray]]:
        rows = host_nesting(ctx).rows
        sl = ctx.trace.slices
        tracks = sl.track[rows]
        out = []
        for t in sorted_unique(tracks):
            mine = rows[tracks == t]
            ts = sl.ts_ns[mine]
            o = np.argsort(ts, kind="stable")
            out.append((mine[o], ts[o]))
        return out

    return ctx.memo("host_per_track", build)  # type: ignore[no-any-return]


def _parent(ctx: Context, row: int) -> int:
    n = host_nesting(ctx)
    i = int(searchsorted(n.rows, row))  # n.rows is ascending (rows on host tracks in table order)
    return int(n.parent[i]) if i < len(n.rows) and n.rows[i] == row else -1


def host_stacks_at(ctx: Context, t: int) -> list[list[int]]:
    """Per host thread running something at `t`: its slice rows covering `t`, outermost first (bookkeeping
    spans left out).

    Per thread: the last slice started by `t`, then up through its parents until one still runs at `t`
    (slices nest), so a lookup costs a binary search and the nesting depth, not a scan.
    """
    ts_ns, dur_ns = ctx.trace.slices.ts_ns, ctx.trace.slices.dur_ns  # not end_ns: a sum over every row a call
    skip = set(ctx.trace.name_ids(*TRANSPARENT_SPANS).tolist())
    names = ctx.trace.slices.name
    out: list[list[int]] = []
    for rows, ts in host_tracks(ctx):
        k = int(searchsorted(ts, t, side="right")) - 1
        r = int(rows[k]) if k >= 0 else -1
        while r >= 0 and int(ts_ns[r]) + int(dur_ns[r]) <= t:
            r = _parent(ctx, r)
        chain = []
        while r >= 0:
            chain.append(r)
            r = _parent(ctx, r)
        if chain:
            out.append([r for r in chain[::-1] if int(names[r]) not in skip])
    return out


def host_stack_at(ctx: Context, t: int, max_len: int = 12) -> list[int]:
    """Host slice rows covering time `t` on the thread with the deepest such stack, outermost first."""
    best: list[int] = []
    for chain in host_stacks_at(ctx, t):
        if len(chain) > len(best):
            best = chain
    return best[-max_len:]


def enclosing_ops(ctx: Context, row: int) -> list[str]:
    """Names of the host ops around slice `row` (itself included), outermost first: what the user's call was
    (aten::linalg_svdvals around aten::_linalg_svd). A probe slice starts from the host op its flow comes from."""
    trace = ctx.trace
    fl = trace.flows
    src = fl.src[fl.dst == row]
    r = int(src[0]) if len(src) else row
    n = host_nesting(ctx)
    cpu_op = trace.strings.get(KinetoCat.CPU_OP)
    out: list[str] = []
    for _ in range(64):
        i = int(searchsorted(n.rows, r))
        if i >= len(n.rows) or n.rows[i] != r:
            break
        if cpu_op is not None and int(trace.slices.cat[r]) == cpu_op and not n.transparent[i]:
            out.append(trace.slice_name(r))
        r = int(n.parent[i])
    return out[::-1]
