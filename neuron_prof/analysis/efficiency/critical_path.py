"""The critical path of a step: the chain of dependent host work, device work and collectives that sets its
length, as Holistic Trace Analysis defines its lightweight critical path.

HTA builds a graph of the trace's events and finds its longest path: each host thread is a chain of its ops
in time order, each device queue (stream, NeuronCore queue) a chain of its kernels, and edges join them where
one waited for the other: a launch (host op -> the device work it launched, the launch flows), a
synchronisation (the device work -> the host's wait that ended when it did: ``cudaDeviceSynchronize`` and
kin). Edge weights are the time spent working: a host segment covered by an op (not by a wait), a device
slice's duration; idle gaps and waits weigh 0, so the longest path runs through whatever was actually doing
the work the step waited on. Each segment of the path is host, device or collective (a collective kernel or a
host segment inside a collective).

    cp = critical_path(ctx)                # one entry per step (the whole trace when it has no steps)
    cp[0].host_ns, cp[0].device_ns, cp[0].segments
    on_path(ctx, rows)                     # does any of these slice rows overlap a path segment?
    mark_on_path(ctx, findings)            # evidence.on_critical_path on those whose rows do (ranked first)
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.efficiency.longest_path import longest
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.sites.callsites import sites_of
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.analysis.sites.lines import NOT_WORK_CATS
from neuron_prof.model import Cat, TrackKind
from neuron_prof.model.order import searchsorted, sorted_unique
from neuron_prof.model.windows import row_windows

ON_CRITICAL_PATH = "on_critical_path"
"""The evidence key `mark_on_path` sets."""
MAX_STEPS = 5
"""Steps whose path is worked out (the first after warm-up); a trace without steps has one path, its whole."""
COLLECTIVE_NAME = re.compile(r"(?i)nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast")


_NO_SEGMENTS = np.zeros(0, dtype=np.int64)


@dataclass
class StepPath:
    """The critical path of one step; its segments as columns (a path without steps runs over the whole trace:
    one entry per slice on it would be a Python object per event)."""

    step: int
    start_ns: int
    end_ns: int
    host_ns: int = 0
    device_ns: int = 0
    collective_ns: int = 0
    seg_kind: np.ndarray = field(default_factory=lambda: _NO_SEGMENTS)
    """Each segment's kind code (`KINDS`), in time order."""
    seg_row: np.ndarray = field(default_factory=lambda: _NO_SEGMENTS)
    """Each segment's slice row."""
    seg_start: np.ndarray = field(default_factory=lambda: _NO_SEGMENTS)
    seg_end: np.ndarray = field(default_factory=lambda: _NO_SEGMENTS)

    @property
    def length_ns(self) -> int:
        return self.host_ns + self.device_ns + self.collective_ns

    @property
    def segments(self) -> list[tuple[str, int, int, int]]:
        """(kind, slice row, start ns, end ns) in time order; kind "host", "device" or "collective" (a list:
        for reading a short path, not for a whole trace's)."""
        return [(KINDS[k], r, a, b) for k, r, a, b in zip(self.seg_kind.tolist(), self.seg_row.tolist(),
                                                          self.seg_start.tolist(), self.seg_end.tolist(), strict=True)]

    def to_dict(self, ctx: Context, top: int = 10) -> dict[str, Any]:
        """JSON fields: the step, its span, the path's length and host/device/collective time, and its `top`
        heaviest slices with their kind, time, share of the path and user line (`sites_of`: a device slice's
        is the line that launched it)."""
        heavy: list[tuple[int, str, int]] = []
        if len(self.seg_row):
            rows, first, inv = np.unique(self.seg_row, return_index=True, return_inverse=True)
            ns = np.bincount(inv, weights=self.seg_end - self.seg_start, minlength=len(rows))
            by_first = np.argsort(first, kind="stable")  # rows in the order the path first meets them
            pick = by_first[np.argsort(-ns[by_first], kind="stable")[:top]]
            heavy = [(int(rows[i]), KINDS[int(self.seg_kind[first[i]])], int(ns[i])) for i in pick.tolist()]
        sites = sites_of(ctx).of_rows([r for r, _, _ in heavy])
        n = max(self.length_ns, 1)
        return {"step": self.step, "start_ns": self.start_ns, "end_ns": self.end_ns, "length_ns": self.length_ns,
                "host_ns": self.host_ns, "device_ns": self.device_ns, "collective_ns": self.collective_ns,
                "top": [{"name": ctx.trace.slice_name(r), "kind": k, "ns": ns, "share": round(ns / n, 4),
                         "call_site": site.call_site, "row": r}
                        for (r, k, ns), site in zip(heavy, sites, strict=True)]}


def critical_path(ctx: Context) -> list[StepPath]:
    """The critical path of each step (the first MAX_STEPS after warm-up), or of the whole trace when it has no
    steps."""

    def build() -> list[StepPath]:
        st = ctx.steps
        if len(st):
            first = st.warmup if st.warmup < len(st) else 0
            wins = [(i, int(st.start_ns[i]), int(st.end_ns[i])) for i in range(first, min(len(st), first + MAX_STEPS))]
        else:
            lo, hi = ctx.window
            wins = [(0, int(lo), int(hi))]
        return [_path(ctx, i, s, e) for i, s, e in wins]

    return ctx.memo("critical_path", build)  # type: ignore[no-any-return]


PART_WORDS = {"host": "host", "device": "device queue", "collective": "collectives"}
"""What a segment's kind is called where people read it."""


def path_parts(p: Mapping[str, Any]) -> str:
    """"host 7% · device queue 86% · collectives 7%": the parts a path (`StepPath.to_dict`) has, as shares of
    its length."""
    n = p.get("length_ns") or 0
    return " · ".join(f"{w} {100 * p[f'{k}_ns'] / n:.0f}%" for k, w in PART_WORDS.items() if n and p.get(f"{k}_ns"))


def on_path(ctx: Context, rows: list[int] | np.ndarray) -> bool:
    """Whether any of slice `rows` is on some step's critical path: it overlaps a path segment of its own track
    (a host op around or inside a path segment, a device slice on it), or, for a probe's slice (compile,
    fallback, sync, collective tracks: they run inside host ops), a host segment of the path."""
    return ctx.memo("critical_path_index", lambda: _PathIndex(ctx)).hits(rows)  # type: ignore[no-any-return]


def mark_on_path(ctx: Context, findings: list[Finding]) -> list[Finding]:
    """`findings`, each whose evidence ``rows`` lie on a step's critical path (`on_path`) with
    ``evidence.on_critical_path`` true: `pipeline.sort_findings` ranks them before the rest."""
    out = []
    for f in findings:
        rows = f.evidence.get("rows")
        ok = isinstance(rows, list) and bool(rows) and all(isinstance(r, int) for r in rows)
        hit = ok and on_path(ctx, rows if isinstance(rows, list) else [])
        out.append(replace(f, evidence={**f.evidence, ON_CRITICAL_PATH: True}) if hit else f)
    return out


class _PathIndex:
    """The segments of every step's path, per track and the non-device ones together, as sorted columns (the
    segments of one path follow each other in time and do not overlap), so a set of rows is tested at once."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        sl = ctx.trace.slices
        paths = critical_path(ctx)
        device = KINDS.index("device")
        self.paths = [np.column_stack((p.seg_start, p.seg_end))[p.seg_kind != device] for p in paths]
        self.by_track: dict[int, list[np.ndarray]] = {}
        for p in paths:
            track = sl.track[p.seg_row]
            se = np.column_stack((p.seg_start, p.seg_end))
            for t in sorted_unique(track).tolist():
                self.by_track.setdefault(int(t), []).append(se[track == t])
        kinds = (TrackKind.THREAD, TrackKind.DEVICE)  # per track, not per row: a big trace's rows are many
        self.own_track = np.array([t.kind in kinds for t in ctx.trace.tracks] or [False], dtype=bool)

    @staticmethod
    def _overlap(se: np.ndarray, ts: np.ndarray, end: np.ndarray) -> bool:
        """Whether some interval [ts, end) overlaps one of the sorted, disjoint segments `se`."""
        if not len(se) or not len(ts):
            return False
        lo = searchsorted(se[:, 1], ts, "right")  # the first segment that ends after the row starts
        return bool(np.any((lo < len(se)) & (se[np.minimum(lo, len(se) - 1), 0] < end)))

    def hits(self, rows: list[int] | np.ndarray) -> bool:
        sl = self.ctx.trace.slices
        rows = np.asarray(rows, dtype=np.int64)
        rows = rows[(rows >= 0) & (rows < len(sl))]
        if not len(rows):
            return False
        ts, end, track = sl.ts_ns[rows], sl.ts_ns[rows] + sl.dur_ns[rows], sl.track[rows]
        own = self.own_track[track]  # on a host thread or a device queue
        if any(self._overlap(se, ts[~own], end[~own]) for se in self.paths):
            return True
        for t in sorted_unique(track[own]).tolist():
            m = own & (track == t)
            if any(self._overlap(se, ts[m], end[m]) for se in self.by_track.get(int(t), ())):
                return True
        return False


KINDS = ("host", "device", "collective")
"""A path segment's kind, by code."""


def _path(ctx: Context, step: int, s: int, e: int) -> StepPath:
    """The path of window [s, e): its chains (host threads, device queues), launch and sync edges, columnar,
    then `longest_path.longest`."""
    tr = ctx.trace
    sl = tr.slices
    from neuron_prof.analysis.device.idle import device_rows  # registers an analysis: import on use
    from neuron_prof.analysis.device.sync import RUNTIME_SYNC_NAMES

    span = e - s + 1
    hn = host_nesting(ctx)
    host = _host_chains(ctx, hn, s, e, span, tr.name_ids(*RUNTIME_SYNC_NAMES))
    dev = ctx.cat_rows(device_rows(ctx), (Cat.ENGINE_BUSY,), keep=False)
    dev = dev[(sl.ts_ns[dev] < e) & (sl.end_at(dev) > s)]  # ends where asked: no column over every slice
    d_time, d_chain, d_w, d_kind, d_row, d_start = _device_chains(ctx, dev, s, e)
    nh = len(host.time)
    time = np.r_[host.time, d_time]
    chain = np.r_[host.chain, d_chain + (int(host.chain.max()) + 1 if nh else 0)]
    weight = np.r_[host.w, d_w]
    kind = np.r_[host.kind, d_kind]
    row = np.r_[host.row, d_row]
    # launches: the host point where the launching call starts -> the start of the device slice it launched
    fl = tr.flows
    src, dst = np.zeros(0, np.int64), np.zeros(0, np.int64)
    ds_rows = d_row[d_start]  # the device slice of each start node
    order = np.argsort(ds_rows, kind="stable")
    ds_sorted = ds_rows[order]
    if len(fl.src) and len(ds_rows) and nh:
        at = searchsorted(ds_sorted, fl.dst)
        at = np.minimum(at, len(ds_sorted) - 1)
        hit = ds_sorted[at] == fl.dst
        a_rows = fl.src[hit]
        key = host.key_of(sl.track[a_rows], np.maximum(sl.ts_ns[a_rows], s))
        ok = key >= 0
        src = key[ok]
        dst = nh + d_start[order[at[hit]]][ok]
    # syncs: the device work that ended last before the wait did -> the host point where the wait ends
    end_nodes = nh + d_start + 1
    if len(host.wait_ends) and len(end_nodes):
        eo = np.argsort(time[end_nodes], kind="stable")
        et = time[end_nodes][eo]
        k = searchsorted(et, time[host.wait_ends], "right") - 1
        ok = k >= 0
        src = np.r_[src, end_nodes[eo[k[ok]]]]
        dst = np.r_[dst, host.wait_ends[ok]]
    cuts = sorted_unique(time[host.wait_ends]) if len(host.wait_ends) else np.zeros(0, np.int64)
    out = StepPath(step=step, start_ns=s, end_ns=e)
    on = longest(time, chain, weight, src, dst, cuts)
    if not len(on):
        return out
    k_on, w_on = kind[on], (time[on + 1] - time[on])
    out.host_ns, out.device_ns, out.collective_ns = (int(w_on[k_on == c].sum()) for c in range(3))
    out.seg_kind, out.seg_row = k_on.astype(np.int8), row[on].astype(np.int64)
    out.seg_start, out.seg_end = time[on].astype(np.int64), time[on + 1].astype(np.int64)
    return out


@dataclass
class _HostChains:
    """Host thread points in window, by track then time: the chain edge from each to the next is working time
    when an op (not a wait, not bookkeeping) runs there."""

    time: np.ndarray
    chain: np.ndarray
    w: np.ndarray
    kind: np.ndarray
    row: np.ndarray
    """The innermost working op over the edge from each point (-1: none)."""
    wait_ends: np.ndarray
    """Points where a wait for the device ends (sync edges arrive there)."""
    keys: np.ndarray
    """(track rank) * span + (time - start) of each point, ascending."""
    tracks: np.ndarray
    """Host track ids by rank."""
    start: int
    span: int

    def key_of(self, track: np.ndarray, t: np.ndarray) -> np.ndarray:
        """The point of each (track, time), -1 where there is none."""
        rank = searchsorted(self.tracks, track)
        rank = np.minimum(rank, max(len(self.tracks) - 1, 0))
        key = rank * self.span + (np.asarray(t, np.int64) - self.start)
        at = np.minimum(searchsorted(self.keys, key), max(len(self.keys) - 1, 0))
        ok = (self.tracks[rank] == track) & (self.keys[at] == key) if len(self.keys) else np.zeros(len(key), bool)
        return np.where(ok, at, -1)


def _host_chains(ctx: Context, hn: Any, s: int, e: int, span: int, wait_names: np.ndarray) -> _HostChains:
    tr = ctx.trace
    sl = tr.slices
    hr = hn.rows
    pos = _overlapping(ctx, hr, s, e)  # positions in hn.rows
    rows = hr[pos]
    a, b = np.maximum(sl.ts_ns[rows], s), np.minimum(sl.end_at(rows), e)
    tracks, trk = np.unique(sl.track[rows], return_inverse=True)
    empty = np.zeros(0, np.int64)
    if not len(rows):
        return _HostChains(empty, empty, empty, empty, empty, empty, empty, tracks.astype(np.int64), s, span)
    if len(tracks) * span >= 1 << 62:
        raise OverflowError("window too long for the point keys")
    keys = np.sort(np.r_[trk * span + (a - s), trk * span + (b - s)])
    keys = keys[np.r_[True, keys[1:] != keys[:-1]]]  # np.unique hashes: slower than a sort here
    chain, time = keys // span, keys % span + s
    last = np.r_[chain[1:] != chain[:-1], True]
    # the innermost working op over each point: the op that started last by then, up through its parents
    # until one still runs and does work (ops nest)
    not_work = tr.name_ids(*NOT_WORK_CATS)
    so = np.lexsort((-(b - a), a, trk))
    skey = (trk * span + (a - s))[so]
    at = searchsorted(skey, keys, "right") - 1
    cand = np.where(at >= 0, pos[so][np.maximum(at, 0)], -1)
    cand = np.where((at >= 0) & (sl.track[hr[np.maximum(cand, 0)]] == tracks[chain]), cand, -1)
    par = hn.parent_pos
    for _ in range(int(hn.depth.max()) + 2 if len(hn.depth) else 1):
        ok = cand >= 0
        c0 = np.maximum(cand, 0)
        r0 = hr[c0]  # read at the candidates alone: no column over every host row
        bad = ok & ~((sl.end_at(r0) > time) & ~np.isin(sl.cat[r0], not_work) & ~hn.transparent[c0])
        if not bad.any():
            break
        cand = np.where(bad, par[c0], cand)
    label = np.where(cand >= 0, hr[np.maximum(cand, 0)], -1)
    # waits: the points a wait covers
    wait = np.isin(sl.name[rows], wait_names)
    wk = trk[wait]
    ia = searchsorted(keys, wk * span + (a[wait] - s))
    ib = searchsorted(keys, wk * span + (b[wait] - s))
    cover = np.zeros(len(keys) + 1, np.int64)
    np.add.at(cover, ia, 1)
    np.add.at(cover, ib, -1)
    waiting = np.cumsum(cover)[:-1] > 0
    nxt = np.r_[time[1:], time[-1]]
    busy = (label >= 0) & ~waiting & ~last
    w = np.where(busy, nxt - time, 0)
    # a host edge inside a collective (its probe's slice) is the collective's
    coll = ctx.rows(TrackKind.COLLECTIVE)
    coll = coll[(sl.ts_ns[coll] < e) & (sl.ts_ns[coll] + sl.dur_ns[coll] > s)]
    mid = (time + nxt) // 2
    inside = (searchsorted(np.sort(sl.ts_ns[coll]), mid, "right")
              - searchsorted(np.sort(sl.ts_ns[coll] + sl.dur_ns[coll]), mid, "right")) > 0
    kind = np.where(inside, 2, 0)
    return _HostChains(time=time, chain=chain, w=w, kind=kind, row=label, wait_ends=ib, keys=keys,
                       tracks=tracks.astype(np.int64), start=s, span=span)


def _overlapping(ctx: Context, rows: np.ndarray, s: int, e: int) -> np.ndarray:
    """Positions in `rows` (ascending) of the slices that overlap [s, e), a window of rows at a time
    (`row_windows`): no start or end column over every host row."""
    sl = ctx.trace.slices
    parts = [np.zeros(0, np.int64)]
    for a, z in row_windows(ctx.trace, len(rows)):
        r = rows[a:z]
        ts = sl.ts_ns[r]
        parts.append(np.flatnonzero((ts < e) & (ts + sl.dur_ns[r] > s)) + a)
    return np.concatenate(parts)


def _device_chains(ctx: Context, dev: np.ndarray, s: int, e: int) -> tuple[np.ndarray, ...]:
    """Per device queue, its slices in time order as (start, end) node pairs: a slice nested in the one before
    adds nothing, one that overlaps it starts where it ends. Returns time, chain, weight, kind, row per node and
    the start node of each slice."""
    tr = ctx.trace
    sl = tr.slices
    o = np.lexsort((sl.ts_ns[dev], sl.track[dev]))
    r = dev[o]
    trk = np.unique(sl.track[r], return_inverse=True)[1]
    a, b = np.maximum(sl.ts_ns[r], s) - s, np.minimum(sl.ts_ns[r] + sl.dur_ns[r], e) - s
    span = e - s + 1
    acc = np.maximum.accumulate(b + trk * span) if len(r) else b
    first = np.r_[True, trk[1:] != trk[:-1]] if len(r) else np.zeros(0, bool)
    prev = np.where(first, -1, np.r_[-1, acc[:-1]] - trk * span)
    keep = b > prev
    r, trk, b = r[keep], trk[keep], b[keep]
    a = np.maximum(a[keep], prev[keep])
    n = len(r)
    time = np.empty(2 * n, np.int64)
    time[0::2], time[1::2] = a + s, b + s
    w = np.zeros(2 * n, np.int64)
    w[0::2] = b - a
    names, inv = np.unique(sl.name[r], return_inverse=True)
    coll = np.array([bool(COLLECTIVE_NAME.search(tr.s(int(i)))) for i in names.tolist()], dtype=bool)
    kind = np.zeros(2 * n, np.int64)
    kind[0::2] = np.where(coll[inv], 2, 1) if n else 0
    row = np.repeat(r, 2)
    return time, np.repeat(trk, 2), w, kind, row, np.arange(0, 2 * n, 2, dtype=np.int64)
