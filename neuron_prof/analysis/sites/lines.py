"""The bottom-up view by user line: where the time goes, per line of the user's code.

Every cost is charged to the Site `_sites` gives its event (the one attribution path): library frames fold
into the user line that called them, and a backward op is charged to the forward line whose op created its
autograd node (shown as "in backward of line L", with the backward part in its own columns). Per line:

- ``host_ns``: self time of the host ops and Python frames at the line (annotations such as ProfilerStep and
  the profiler's own span are no work of a line); ``host_backward_ns`` the part in backward;
- ``device_ns``: device time of the work the line's host ops launched (`device_ns_by_host_row`: the one place
  that reads device time per host op), ``device_backward_ns`` the part in backward;
- ``compile_ns`` / ``compiles`` / ``signatures``; ``fallback_ns`` / ``fallbacks``; ``sync_ns`` / ``syncs``;
  ``collective_ns`` / ``collectives``: the probe slices charged to the line (these run inside its host ops, so
  they are parts of ``host_ns``, not additions to it);
- ``alloc_bytes``: memory the device (or host, when no device series) allocated while the line ran;
- ``cost_ns``: what the table ranks by, the larger of host and device time (device work overlaps the host).

Lines with no user frame (library or runtime work) are one row, ``call_site == ""``, so the columns add up to
the trace's totals. Pure: numpy arrays, no torch.

    t = line_table(trace, ctx)
    t.rows_of(i)                 # host slice rows charged to line i
    t.to_dicts(20)               # the `lines` of `summary --json`
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuron_prof.analysis.compile.events import signature_text
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.device.rows import device_work_nesting
from neuron_prof.analysis.ops import attribution
from neuron_prof.analysis.sites.callsites import HostSites, sites_of
from neuron_prof.analysis.sites.host import host_nesting, host_tracks
from neuron_prof.analysis.sites.self_time import self_inside_parent, self_outside_backward
from neuron_prof.analysis.sites.source import source_line
from neuron_prof.model import KinetoCat, Trace, TrackKind
from neuron_prof.model.callsite import Site
from neuron_prof.model.order import searchsorted
from neuron_prof.model.windows import row_windows

NOT_WORK_CATS = (KinetoCat.USER_ANNOTATION, KinetoCat.PROFILER_SPAN, KinetoCat.GPU_USER_ANNOTATION)
"""Host slices that mark a region (steps, record_function, the capture) rather than do work of a line."""
MAX_SIGNATURES = 8
_COLS = ("host_ns", "host_backward_ns", "device_ns", "device_backward_ns", "compile_ns", "compiles",
         "fallback_ns", "fallbacks", "sync_ns", "syncs", "collective_ns", "collectives", "alloc_bytes")


@dataclass(frozen=True, eq=False)
class LineTable:
    """One entry per user line (most costly first); columns are numpy arrays (see the module docstring)."""

    call_site: np.ndarray
    """"file.py:LINE" (object array); "" for a line not known: then `function` names it, or nothing does."""
    function: np.ndarray
    """"file.py func" when only the function is known (traces with function entry lines only)."""
    backward_of: list[list[str]]
    """Per line: the autograd nodes of its ops whose backward ran ("LinalgQrBackward0"), most costly first."""
    signatures: list[list[str]]
    """Per line: the compiled signatures ("aten::mm [[8, 16], [16, 4]]"), at most MAX_SIGNATURES."""
    cols: dict[str, np.ndarray]
    host_rows: np.ndarray
    """Host slice rows charged to a line (work rows only), grouped by line: see `rows_of`."""
    host_start: np.ndarray
    host_self_ns: np.ndarray
    """Self time of each of `host_rows` as the line counts it (see `host_ns`)."""

    def __len__(self) -> int:
        return len(self.call_site)

    @property
    def cost_ns(self) -> np.ndarray:
        return np.maximum(self.cols["host_ns"], self.cols["device_ns"])

    def rows_of(self, i: int) -> np.ndarray:
        """Host slice rows charged to line `i` (its ops, forward and backward)."""
        return self.host_rows[self.host_start[i]:self.host_start[i + 1]]

    def self_of(self, i: int) -> np.ndarray:
        """The self time `rows_of(i)` count for the line."""
        return self.host_self_ns[self.host_start[i]:self.host_start[i + 1]]

    def label(self, i: int) -> str:
        """How views name line `i`."""
        return str(self.call_site[i]) or str(self.function[i]) or "(no user line: library or runtime work)"

    def to_dicts(self, n: int | None = None, device_unknown: bool = False) -> list[dict[str, Any]]:
        """The first `n` lines as JSON rows (docs/summary.md: `lines`). `device_unknown`: the device ran
        work no host op is tied to (`ops.attribution`), so ``device_ns``/``device_backward_ns`` are null, not 0."""
        out = []
        cost = self.cost_ns
        for i in range(len(self) if n is None else min(n, len(self))):
            d: dict[str, Any] = {"call_site": str(self.call_site[i])}
            if self.function[i]:
                d["function"] = str(self.function[i])
            d["cost_ns"] = int(cost[i])
            d.update({k: int(v[i]) for k, v in self.cols.items()})
            if device_unknown:
                d["device_ns"] = d["device_backward_ns"] = None
            d["signatures"] = list(self.signatures[i])
            d["backward_of"] = list(self.backward_of[i])
            out.append(d)
        return out


def line_table(trace: Trace, ctx: Context | None = None) -> LineTable:
    """The lines view of `trace` (computed once per context)."""
    ctx = ctx or Context(trace)
    return ctx.memo("line_table", lambda: _build(trace, ctx))  # type: ignore[no-any-return]


TOP_LINES = 30
"""Lines in `summary --json`."""


def lines_json(trace: Trace, ctx: Context | None = None, n: int = TOP_LINES) -> list[dict[str, Any]]:
    """The `lines` of `summary --json`: the `n` costliest lines, each with its source text when the file is
    found (`_source`)."""
    ctx = ctx or Context(trace)
    out = line_table(trace, ctx).to_dicts(n, device_unknown=attribution(ctx).none_linked)
    for d in out:
        if d["call_site"]:
            d["source"] = source_line(d["call_site"], trace.metadata)
    return out


def device_ns_by_host_row(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """(host rows, device ns): device time (self time of the device slices, so nested device slices count
    once) of the work each host slice launched, read from the launch flows host slice -> device slice. The one
    place the lines view and the step breakdown read device time per host op from."""

    def build() -> tuple[np.ndarray, np.ndarray]:
        tr = ctx.trace
        fl = tr.flows
        n = device_work_nesting(ctx)
        if not len(n.rows) or not len(fl):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        host = host_nesting(ctx).rows
        dst, src = _linked(tr, n.rows, host)
        _, first = np.unique(dst, return_index=True)  # one launch per device slice
        dst, src = dst[first], src[first]
        ns = n.self_ns[searchsorted(n.rows, dst)]
        u, inv = np.unique(src, return_inverse=True)
        return u.astype(host.dtype), np.bincount(inv, weights=ns, minlength=len(u)).astype(np.int64)

    return ctx.memo("device_ns_by_host_row", build)  # type: ignore[no-any-return]


def _linked(trace: Trace, dst_rows: np.ndarray, src_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dst, src) of the flows from one of `src_rows` to one of `dst_rows` (both ascending), in flow order; the
    flows read a window at a time (`row_windows`), tested by binary search: no temporary over every flow."""
    fl = trace.flows
    dsts, srcs = [fl.dst[:0]], [fl.src[:0]]
    for a, z in row_windows(trace, len(fl)):
        d, s = fl.dst[a:z], fl.src[a:z]
        ok = _among(d, dst_rows) & _among(s, src_rows)
        dsts.append(d[ok])
        srcs.append(s[ok])
    return np.concatenate(dsts), np.concatenate(srcs)


def _among(v: np.ndarray, sorted_rows: np.ndarray) -> np.ndarray:
    """``np.isin(v, sorted_rows)`` for an ascending `sorted_rows`, by binary search."""
    if not len(sorted_rows):
        return np.zeros(len(v), dtype=bool)
    at = np.minimum(searchsorted(sorted_rows, v), len(sorted_rows) - 1)
    return sorted_rows[at] == v  # type: ignore[no-any-return]


def _key(s: Site) -> tuple[str, str]:
    return (s.call_site, "" if s.call_site else s.function)


def _build(trace: Trace, ctx: Context) -> LineTable:
    sl = trace.slices
    sites = sites_of(ctx)
    hs = sites.host_sites()
    n = host_nesting(ctx)
    keys: dict[tuple[str, str], int] = {}

    def line_of(s: Site) -> int:
        k = _key(s)
        i = keys.get(k)
        if i is None:
            i = keys[k] = len(keys)
        return i

    site_line = np.array([line_of(s) for s in hs.sites] or [0], dtype=np.int32)  # line ids: under 2^31
    site_bwd = np.array([bool(s.backward) for s in hs.sites] or [False])
    # a Python frame no user line called (a library thread's run loop) is waiting, not work of a line
    site_idle = np.array([not (s.call_site or s.function) for s in hs.sites] or [True])
    not_work, py = trace.name_ids(*NOT_WORK_CATS), trace.name_ids(KinetoCat.PYTHON)
    acc: dict[str, list[np.ndarray]] = {c: [] for c in _COLS}
    nodes: dict[int, dict[str, int]] = {}
    sigs: dict[int, dict[str, None]] = {}

    def add_vec(col: str, lines: np.ndarray, v: np.ndarray) -> None:  # summed per line now: no row-long parts kept
        if len(lines):
            acc[col].append(np.bincount(lines, weights=np.asarray(v, dtype=np.int64)).astype(np.int64))

    def work_of(a: int, z: int) -> np.ndarray:  # host positions [a, z) that are work of a line
        cat = sl.cat[hs.rows[a:z]]
        return ~np.isin(cat, not_work) & ~n.transparent[a:z] & ~(np.isin(cat, py) & site_idle[hs.site[a:z]])

    row_bwd = ctx.empty(len(hs.rows), np.bool_)  # one byte per host row, in a mapped file for a big cached trace
    for a, z in row_windows(ctx, len(hs.rows)):
        row_bwd[a:z] = site_bwd[hs.site[a:z]]
    self_ns = self_outside_backward(ctx, row_bwd, self_inside_parent(ctx))
    del row_bwd
    for a, z in row_windows(ctx, len(hs.rows)):  # a window of host rows at a time: no column over all
        w = np.flatnonzero(work_of(a, z)) + a
        site = hs.site[w]
        add_vec("host_ns", site_line[site], self_ns[w])
        wb = site_bwd[site]
        add_vec("host_backward_ns", site_line[site[wb]], self_ns[w[wb]])
    site_ns = _self_ns_by_site(ctx, hs) if site_bwd.any() else np.zeros(0, np.int64)
    for i in np.flatnonzero(site_bwd).tolist():  # which autograd nodes each line's backward ran
        s = hs.sites[i]
        d = nodes.setdefault(int(site_line[i]), {})
        d[s.backward] = d.get(s.backward, 0) + int(site_ns[i])
    hrows, dns = device_ns_by_host_row(ctx)
    for a, z in row_windows(ctx, len(hrows)):
        site = hs.site[searchsorted(hs.rows, hrows[a:z])]
        add_vec("device_ns", site_line[site], dns[a:z])
        b = site_bwd[site]
        add_vec("device_backward_ns", site_line[site[b]], dns[a:z][b])
    for kind, col, cnt in ((TrackKind.COMPILE, "compile_ns", "compiles"), (TrackKind.FALLBACK, "fallback_ns",
                           "fallbacks"), (TrackKind.SYNC, "sync_ns", "syncs"),
                           (TrackKind.COLLECTIVE, "collective_ns", "collectives")):
        probe = ctx.rows(kind)
        if kind == TrackKind.SYNC:  # and the runtime's own waits (cudaDeviceSynchronize...), as totals count them
            from neuron_prof.analysis.device.sync import RUNTIME_SYNC_NAMES

            probe = np.concatenate([probe, ctx.name_rows(ctx.rows(TrackKind.THREAD), RUNTIME_SYNC_NAMES)])
        lis = []
        for r in probe.tolist():
            s = sites.of_row(r)
            if kind == TrackKind.SYNC and not s.call_site and not s.stack:
                s = sites.at(int(sl.ts_ns[r]) + int(sl.dur_ns[r]) // 2)
            li = line_of(s)
            lis.append(li)
            if kind == TrackKind.COMPILE:
                d2 = sigs.setdefault(li, {})
                if len(d2) < MAX_SIGNATURES:
                    d2[_signature(ctx, r)] = None
        add_vec(col, np.asarray(lis, dtype=np.int64), sl.dur_ns[probe])
        add_vec(cnt, np.asarray(lis, dtype=np.int64), np.ones(len(probe), dtype=np.int64))
    ctx.drop_pages()  # the columns and shared arrays read so far: not held through the rest
    apos, abytes = _allocations(trace, ctx)
    if len(apos):
        hit = apos >= 0
        add_vec("alloc_bytes", site_line[hs.site[apos[hit]]], abytes[hit])
    m = len(keys)
    cols = {}
    for c, parts in acc.items():
        cols[c] = np.zeros(m, np.int64)
        for p in parts:
            cols[c][:len(p)] += p
    names = list(keys)
    cost = np.maximum(cols["host_ns"], cols["device_ns"])
    busy = sum((cols[c] for c in _COLS if c != "host_backward_ns"), np.zeros(m, np.int64))
    order = np.lexsort((np.arange(m), -busy, -cost))
    order = order[busy[order] > 0] if m else order
    # host rows per line, in the table's order
    rank = np.full(max(m, 1), -1, dtype=np.int32)  # line ids: under 2^31
    rank[order] = np.arange(len(order))
    host_rows, host_self, start = _group_by_line(ctx, hs, rank[site_line], work_of, self_ns, len(order))
    del self_ns
    return LineTable(
        call_site=np.array([names[i][0] for i in order], dtype=object),
        function=np.array([names[i][1] for i in order], dtype=object),
        backward_of=[_by_count(nodes.get(int(i), {})) for i in order],
        signatures=[list(sigs.get(int(i), {})) for i in order],
        cols={c: v[order] for c, v in cols.items()},
        host_rows=host_rows,  # `row_dtype`, as the nesting's rows
        host_start=start,
        host_self_ns=host_self,
    )


def _group_by_line(ctx: Context, hs: HostSites, site_rank: np.ndarray, work_of: Callable[[int, int], np.ndarray],
                   self_ns: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(host rows, their self time, start of each line's run): the work rows of the `m` lines ranked (`site_rank`
    per site id: the line's rank in the table, -1 for none shown) grouped by rank, ascending within a line. A
    counting sort a window of host rows at a time: the results written where they go (`Context.empty`), no sort
    over every row."""
    counts = np.zeros(m, np.int64)
    for a, z in row_windows(ctx, len(hs.rows)):
        rl = site_rank[hs.site[a:z][work_of(a, z)]]
        counts += np.bincount(rl[rl >= 0], minlength=m)[:m]
    start = np.zeros(m + 1, np.int64)
    np.cumsum(counts, out=start[1:])
    total = int(start[-1])
    host_rows = ctx.empty(total, hs.rows.dtype)
    host_self = ctx.empty(total, np.int64)
    cursor = start[:-1].copy()  # where each line's next row goes
    for a, z in row_windows(ctx, len(hs.rows)):
        w = np.flatnonzero(work_of(a, z)) + a
        rl = site_rank[hs.site[w]]
        keep = rl >= 0
        w, rl = w[keep], rl[keep]
        o = np.argsort(rl, kind="stable")
        w, rl = w[o], rl[o]
        first = searchsorted(rl, rl)  # the first of each one's line in this window
        at = cursor[rl] + (np.arange(len(rl)) - first)
        host_rows[at] = hs.rows[w]
        host_self[at] = self_ns[w]
        cursor += np.bincount(rl, minlength=m)[:m]
    return host_rows, host_self, start


def _self_ns_by_site(ctx: Context, hs: HostSites) -> np.ndarray:
    """The nesting's self time summed per site id of `hs`, a window of host rows at a time (`row_windows`)."""
    self_ns = host_nesting(ctx).self_ns
    out = np.zeros(len(hs.sites), np.int64)
    for a, z in row_windows(ctx.trace, len(hs.rows)):  # each window's sums are exact in float64 (under 2^53 ns)
        out += np.bincount(hs.site[a:z], weights=self_ns[a:z], minlength=len(out)).astype(np.int64)
    return out


def _by_count(counts: dict[str, int]) -> list[str]:
    """The keys of `counts`, largest count first (ties in insertion order)."""
    return sorted(counts, key=lambda k: -counts[k])


def _signature(ctx: Context, row: int) -> str:
    from neuron_prof.model import Arg

    a = ctx.slice_args(row)
    sig = a.get(Arg.SHAPES) or a.get(Arg.SIGNATURE, "")
    text = signature_text(sig) if sig else ""
    name = ctx.trace.slice_name(row)
    return f"{name} [{text}]" if text else name


def _allocations(trace: Trace, ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """(host row position or -1, bytes) per growth of an `allocated` memory series (device series when any):
    the innermost host slice running then, on the thread running a backward op when one is (the thread that
    called ``backward()`` only waits then), else on the thread with the deepest stack (`Sites.stack_at`'s
    rule, vectorised)."""
    from neuron_prof.analysis.device.memory import memory_series  # it registers an analysis: import on use
    from neuron_prof.analysis.sites.backward import NOT_BACKWARD, backward_of

    series = [s for s in memory_series(trace, ctx) if s[0].endswith("allocated")]
    dev = [s for s in series if not s[0].startswith("host")]
    ts_all, grow_all = [], []
    for _, ts, v in dev or series:
        d = np.diff(v)
        up = d > 0
        ts_all.append(ts[1:][up])
        grow_all.append(d[up])
    if not ts_all:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    t, grow = np.concatenate(ts_all).astype(np.int64), np.concatenate(grow_all).astype(np.int64)
    n = host_nesting(ctx)
    sl = trace.slices
    rows = n.rows
    pos_parent = n.parent_pos
    fwd = backward_of(ctx).forward

    def end_at(p: np.ndarray) -> np.ndarray:  # read at the few positions asked: no column over every host row
        r = rows[p]
        return sl.ts_ns[r] + sl.dur_ns[r]

    levels = int(n.depth.max(initial=1)) + 1
    best = np.full(len(t), -1, dtype=np.int64)
    for a, z in row_windows(ctx, len(t)):  # a window of growths at a time: no temporaries over all of them
        tw, bw = t[a:z], best[a:z]
        score = np.full(z - a, -1, dtype=np.int64)
        for trows, start in host_tracks(ctx):  # each track's rows by start, shared: no per-track sort here
            k = searchsorted(start, tw, side="right") - 1
            pos = np.where(k >= 0, searchsorted(rows, trows[np.maximum(k, 0)]), -1)  # host positions
            del k
            ctx.drop_pages()  # the track's starts read for this search: not held through its walk
            # up from the last slice started until one still runs
            for _ in range(levels):
                done = (pos < 0) | (end_at(np.maximum(pos, 0)) > tw)
                if done.all():
                    break
                pos = np.where(done, pos, pos_parent[np.maximum(pos, 0)])
            at = np.maximum(pos, 0)
            ok = (pos >= 0) & (end_at(at) > tw)
            sc = np.where(ok, (fwd[at] != NOT_BACKWARD) * (1 << 20) + n.depth[at], -1)
            better = sc > score
            bw[better], score[better] = pos[better], sc[better]
    return best, grow
