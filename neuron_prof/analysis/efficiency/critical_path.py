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
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.analysis.sites.lines import NOT_WORK_CATS
from neuron_prof.model import Cat, TrackKind

MAX_STEPS = 5
"""Steps whose path is worked out (the first after warm-up): a graph per step, in Python."""
MAX_NODES = 200_000
COLLECTIVE_NAME = re.compile(r"(?i)nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast")


@dataclass
class StepPath:
    """The critical path of one step."""

    step: int
    start_ns: int
    end_ns: int
    host_ns: int = 0
    device_ns: int = 0
    collective_ns: int = 0
    segments: list[tuple[str, int, int, int]] = field(default_factory=list)
    """(kind, slice row, start ns, end ns) in time order; kind "host", "device" or "collective"."""

    @property
    def length_ns(self) -> int:
        return self.host_ns + self.device_ns + self.collective_ns

    def to_dict(self, trace: Any, top: int = 10) -> dict[str, Any]:
        by_row: dict[int, list[Any]] = {}
        for kind, row, s, e in self.segments:
            by_row.setdefault(row, [kind, 0])[1] += e - s
        heavy = sorted(by_row.items(), key=lambda kv: -kv[1][1])[:top]
        return {"step": self.step, "start_ns": self.start_ns, "end_ns": self.end_ns, "length_ns": self.length_ns,
                "host_ns": self.host_ns, "device_ns": self.device_ns, "collective_ns": self.collective_ns,
                "top": [{"name": trace.slice_name(r), "kind": k, "ns": ns, "row": r} for r, (k, ns) in heavy]}


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


def on_path(ctx: Context, rows: list[int] | np.ndarray) -> bool:
    """Whether any of slice `rows` is on some step's critical path: it overlaps a path segment of its own track
    (a host op around or inside a path segment, a device slice on it), or, for a probe's slice (compile,
    fallback, sync, collective tracks: they run inside host ops), a host segment of the path."""
    sl = ctx.trace.slices
    rows = np.asarray(rows, dtype=np.int64)
    rows = rows[(rows >= 0) & (rows < len(sl))]
    if not len(rows):
        return False
    ts, end, track = sl.ts_ns[rows], sl.end_ns[rows], sl.track[rows]
    own = np.isin(rows, np.r_[ctx.rows(TrackKind.THREAD), ctx.rows(TrackKind.DEVICE)])
    for p in critical_path(ctx):
        for kind, row, s, e in p.segments:
            hit = (ts < e) & (end > s)
            if np.any(hit & own & (track == sl.track[row])) or (kind != "device" and np.any(hit & ~own)):
                return True
    return False


class _Graph:
    def __init__(self) -> None:
        self.out: dict[int, list[tuple[int, int, str, int]]] = defaultdict(list)
        self.n = 0
        self.time: list[int] = []

    def node(self, t: int) -> int:
        self.time.append(t)
        self.n += 1
        return self.n - 1

    def edge(self, a: int, b: int, w: int = 0, kind: str = "", row: int = -1) -> None:
        self.out[a].append((b, w, kind, row))


def _path(ctx: Context, step: int, s: int, e: int) -> StepPath:
    tr = ctx.trace
    sl = tr.slices
    end_ns = sl.end_ns  # a property that adds two columns: once, not once per row (1M slices took minutes)
    g = _Graph()
    src, sink = g.node(s), g.node(e)
    host_point: dict[tuple[int, int], int] = {}  # (track, time) -> node
    sync_ends: list[tuple[int, int]] = []  # (time, node)
    from neuron_prof.analysis.device.idle import device_rows  # registers an analysis: import on use
    from neuron_prof.analysis.device.sync import RUNTIME_SYNC_NAMES

    n = host_nesting(ctx)
    hr = n.rows
    inwin = (sl.ts_ns[hr] < e) & (end_ns[hr] > s)
    rows, depth = hr[inwin], n.depth[inwin]
    work = ~np.isin(sl.cat[rows], tr.name_ids(*NOT_WORK_CATS)) & ~n.transparent[inwin]
    wait = np.isin(sl.name[rows], tr.name_ids(*RUNTIME_SYNC_NAMES))
    coll_rows = ctx.rows(TrackKind.COLLECTIVE)
    coll_rows = coll_rows[(sl.ts_ns[coll_rows] < e) & (end_ns[coll_rows] > s)]
    cs, ce = sl.ts_ns[coll_rows], end_ns[coll_rows]
    for t in np.unique(sl.track[rows]).tolist():
        on = np.flatnonzero(sl.track[rows] == t)
        r = rows[on]
        a, b = np.maximum(sl.ts_ns[r], s), np.minimum(end_ns[r], e)
        pts = np.unique(np.r_[a, b])
        label = np.full(len(pts) - 1, -1, dtype=np.int64)
        waiting = np.zeros(len(pts) - 1, dtype=bool)
        for j in np.argsort(depth[on], kind="stable").tolist():  # innermost last: it wins
            lo, hi = np.searchsorted(pts, a[j]), np.searchsorted(pts, b[j])
            if work[on[j]]:
                label[lo:hi] = r[j]
            if wait[on[j]]:
                waiting[lo:hi] = True
        nodes = [g.node(int(p)) for p in pts.tolist()]
        host_point.update({(t, int(p)): nd for p, nd in zip(pts.tolist(), nodes)})
        g.edge(src, nodes[0])
        g.edge(nodes[-1], sink)
        for k in range(len(pts) - 1):
            busy = label[k] >= 0 and not waiting[k]
            mid = (int(pts[k]) + int(pts[k + 1])) // 2
            kind = "collective" if len(cs) and np.any((cs <= mid) & (ce > mid)) else "host"
            g.edge(nodes[k], nodes[k + 1], int(pts[k + 1] - pts[k]) if busy else 0, kind, int(label[k]))
        for j in np.flatnonzero(wait[on]).tolist():
            sync_ends.append((int(b[j]), host_point[(t, int(b[j]))]))
    dev = ctx.cat_rows(device_rows(ctx), (Cat.ENGINE_BUSY,), keep=False)
    dev = dev[(sl.ts_ns[dev] < e) & (end_ns[dev] > s)]
    dev_start: dict[int, int] = {}
    dev_ends: list[tuple[int, int]] = []
    for t in np.unique(sl.track[dev]).tolist():
        r = dev[sl.track[dev] == t]
        r = r[np.argsort(sl.ts_ns[r], kind="stable")]
        prev = src
        last_end = -1
        for row in r.tolist():
            a, b = max(int(sl.ts_ns[row]), s), min(int(end_ns[row]), e)
            if b <= last_end:  # nested in the previous slice: its time is the outer one's
                continue
            a = max(a, last_end)
            na, nb = g.node(a), g.node(b)
            kind = "collective" if COLLECTIVE_NAME.search(tr.slice_name(row)) else "device"
            g.edge(prev, na)
            g.edge(na, nb, b - a, kind, row)
            dev_start[row], prev, last_end = na, nb, b
            dev_ends.append((b, nb))
        g.edge(prev, sink)
    fl = tr.flows
    for a_row, d_row in zip(fl.src.tolist(), fl.dst.tolist()):
        nd = dev_start.get(d_row)
        hp = host_point.get((int(sl.track[a_row]), max(int(sl.ts_ns[a_row]), s))) if nd is not None else None
        if hp is not None and nd is not None:
            g.edge(hp, nd)
    if dev_ends and sync_ends:
        dev_ends.sort()
        ends = [t for t, _ in dev_ends]
        for t, nd in sync_ends:  # the device work that ended last before the wait did
            k = int(np.searchsorted(ends, t, "right")) - 1
            if k >= 0:
                g.edge(dev_ends[k][1], nd)
    return _longest(g, src, sink, StepPath(step=step, start_ns=s, end_ns=e))


def _longest(g: _Graph, src: int, sink: int, out: StepPath) -> StepPath:
    """Longest path src -> sink (Kahn's order; the graph is acyclic: every edge goes forward in time)."""
    if g.n > MAX_NODES:
        return out
    indeg = [0] * g.n
    for es in g.out.values():
        for b, *_ in es:
            indeg[b] += 1
    dist = [-1] * g.n
    back: list[tuple[int, int, str, int] | None] = [None] * g.n
    dist[src] = 0
    todo = [i for i in range(g.n) if indeg[i] == 0]
    while todo:
        a = todo.pop()
        for b, w, kind, row in g.out.get(a, ()):
            if dist[a] >= 0 and dist[a] + w > dist[b]:
                dist[b] = dist[a] + w
                back[b] = (a, w, kind, row)
            indeg[b] -= 1
            if indeg[b] == 0:
                todo.append(b)
    segs = []
    cur = sink
    while back[cur] is not None:
        a, w, kind, row = back[cur]  # type: ignore[misc]
        if w > 0:
            segs.append((kind, row, g.time[a], g.time[cur]))
            if kind == "host":
                out.host_ns += w
            elif kind == "device":
                out.device_ns += w
            else:
                out.collective_ns += w
        cur = a
    out.segments = segs[::-1]
    return out
