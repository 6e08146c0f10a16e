"""The numbers behind each section of the HTML report, read from a Trace (numpy in, plain data out).

These are views of the trace for drawing (time bins, downsampled series), not diagnoses: diagnoses come
from neuron_prof.analysis as findings. Strings here are raw trace text; the HTML layer escapes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.analysis import Context, graph_compiles
from neuron_prof.model import Arg, Trace, TrackKind
from neuron_prof.model.order import searchsorted, sorted_unique

NS_PER_MS = 1e6


def window_ns(trace: Trace) -> tuple[int, int]:
    """The profiled region (start, end), as the analysis sees it: the recorded window, else all events.

    Probes such as a memory poller may record before or after it; plots start at its start and show
    it, and the outliers stay reachable by zooming out."""
    from neuron_prof.analysis import Context

    return Context(trace).window


def origin_ns(trace: Trace) -> int:
    """Time zero of every plot: the start of the profiled region."""
    return window_ns(trace)[0]


# ---- compile waterfall ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Waterfall:
    start_ms: np.ndarray
    dur_ms: np.ndarray
    name: list[str]
    group: list[str]
    """Colour key: "<compile_kind> · <cache>"."""
    detail: list[str]
    """Signature / call site / recompile reason, one line each."""
    total: int
    """All compile slices in the trace (more than drawn when capped)."""
    total_ms: float
    rows: list[str] = field(default_factory=list)
    """The plot's rows, top first: the ops with the most compile time ("aten::mm · 39 compiles, 596.8 ms"; a
    torch.compile frame's graphs and their NEFFs on one row, "forward (frame 0) · 12 compiles, ..."), then one
    row folding every other op."""
    row_of: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Per compile: its row in `rows`."""


def _op_rows(names: list[str], dur_ms: np.ndarray, top: int) -> tuple[list[str], np.ndarray]:
    """Rows of the grouped waterfall: the `top` ops by total compile time, then "N other ops" for the rest."""
    ops, inv = (np.unique(np.array(names, dtype=object), return_inverse=True) if names
                else (np.zeros(0, object), np.zeros(0, int)))
    total = np.bincount(inv, weights=dur_ms, minlength=len(ops)) if len(names) else np.zeros(0)
    count = np.bincount(inv, minlength=len(ops)) if len(names) else np.zeros(0, int)
    order = np.argsort(-total, kind="stable")
    shown = order[:top]
    labels = [f"{ops[k]} · {count[k]} compile{'s' if count[k] != 1 else ''}, {total[k]:,.1f} ms" for k in shown]
    row = np.full(len(ops), len(shown), dtype=np.int64)
    row[shown] = np.arange(len(shown))
    rest = order[top:]
    if len(rest):
        labels.append(f"{len(rest)} other ops · {int(count[rest].sum())} compiles, {total[rest].sum():,.1f} ms")
    return labels, row[inv].astype(np.int64)


def compile_waterfall(trace: Trace, limit: int = 2000, top: int = 20) -> Waterfall:
    """Compile slices in start order (beyond `limit`, the `limit` longest), on one row per op: the `top` ops by
    compile time, the others folded into one row."""
    rows = trace.slices_on(TrackKind.COMPILE)
    total = len(rows)
    total_ms = float(trace.slices.dur_ns[rows].sum()) / NS_PER_MS
    if total > limit:
        rows = rows[np.argsort(-trace.slices.dur_ns[rows], kind="stable")[:limit]]
    rows = rows[np.argsort(trace.slices.ts_ns[rows], kind="stable")]
    t0 = origin_ns(trace)
    # a torch.compile graph's compiles (Dynamo's, its NEFFs, its backward) go on their frame's row
    graph = {r: g for g in graph_compiles(trace, Context(trace)) for r in g.rows} if len(rows) else {}
    names, groups, details = [], [], []
    for r in rows.tolist():
        a = trace.slice_args(r)
        g = graph.get(r)
        names.append(g.frame_label if g else trace.slice_name(r))
        groups.append(" · ".join(str(a[k]) for k in (Arg.COMPILE_KIND, Arg.CACHE) if a.get(k)) or "compile")
        details.append(
            " | ".join(
                ([f"graph {g.compile_id}: {trace.slice_name(r)}"] if g else [])
                + [f"{k}: {a[k]}" for k in (Arg.SIGNATURE, Arg.CALL_SITE, Arg.RECOMPILE_REASON) if a.get(k)]
            )
        )
    dur_ms = trace.slices.dur_ns[rows] / NS_PER_MS
    labels, row_of = _op_rows(names, dur_ms, top)
    return Waterfall(
        start_ms=(trace.slices.ts_ns[rows] - t0) / NS_PER_MS,
        dur_ms=dur_ms,
        name=names,
        group=groups,
        detail=details,
        total=total,
        total_ms=total_ms,
        rows=labels,
        row_of=row_of,
    )


# ---- device utilisation ----------------------------------------------------------------------------
def busy_before(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """For each time in `t`: busy time (ns) of the disjoint sorted intervals before it."""
    if not len(starts):
        return np.zeros(len(t), dtype=np.float64)
    lens = (ends - starts).astype(np.float64)
    cum = np.r_[0.0, np.cumsum(lens)]
    k = searchsorted(starts, t, side="right")  # intervals that began at or before t
    last = np.maximum(k - 1, 0)
    partial = np.clip(t - starts[last], 0, lens[last])
    return np.where(k > 0, cum[last] + partial, 0.0)


@dataclass(frozen=True)
class Utilisation:
    t_ms: np.ndarray
    """Bin centres."""
    busy: dict[str, np.ndarray]
    """Device name -> busy fraction (0-1) per bin: any of its queues running something."""
    mean_busy: dict[str, float]
    process_of: dict[str, int]
    """Device name -> index into Trace.processes."""
    bin_ms: float
    n_tracks: int
    queues: dict[str, int] = field(default_factory=dict)
    """Device name -> how many of its queues (streams) ran something."""


def device_utilisation(trace: Trace, bins: int = 300) -> Utilisation:
    """Busy fraction per time bin of each device (process holding device tracks)."""
    from neuron_prof.analysis import Context, device_label, device_rows
    from neuron_prof.analysis import merge_intervals as merge

    t0, t1 = window_ns(trace)
    dev = trace.track_ids(TrackKind.DEVICE)
    rows = device_rows(Context(trace))  # device work, without GPU copies of user annotations
    n = max(1, min(bins, len(rows) or 1))
    edges = np.linspace(t0, t1, n + 1) if t1 > t0 else np.array([t0, t0 + 1], dtype=np.float64)
    width = float(edges[1] - edges[0])
    busy: dict[str, np.ndarray] = {}
    mean: dict[str, float] = {}
    process_of: dict[str, int] = {}
    procs = sorted({trace.tracks[int(i)].process for i in dev})
    # "GPU 0" (Kineto's device label), not the host program's name Kineto repeats on device processes
    names = _unique_names([device_label(trace, p) for p in procs])
    queues: dict[str, int] = {}
    for p, name in zip(procs, names, strict=True):
        tracks = [int(i) for i in dev if trace.tracks[int(i)].process == p]
        r = rows[np.isin(trace.slices.track[rows], tracks)]
        if not len(r):
            continue
        s, e = merge(trace.slices.ts_ns[r], trace.slices.dur_ns[r])
        cum = busy_before(s, e, edges)
        busy[name] = np.clip(np.diff(cum) / width, 0.0, 1.0)
        mean[name] = float((e - s).sum()) / max(t1 - t0, 1)
        process_of[name] = p
        queues[name] = len(sorted_unique(trace.slices.track[r]))
    return Utilisation(
        t_ms=((edges[:-1] + edges[1:]) / 2 - t0) / NS_PER_MS,
        busy=busy,
        mean_busy=mean,
        process_of=process_of,
        bin_ms=width / NS_PER_MS,
        n_tracks=len(dev),
        queues=queues,
    )


def _unique_names(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else f"{n} ({seen[n]})")
    return out


# ---- memory -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Series:
    name: str
    t_ms: np.ndarray
    value: np.ndarray
    peak: float
    n_samples: int


def downsample_minmax(v: np.ndarray, max_points: int) -> np.ndarray:
    """Indices (sorted) keeping each bucket's first minimum and maximum, so peaks survive."""
    n = len(v)
    if n <= max_points:
        return np.arange(n)
    nb = max(1, max_points // 2)
    idx = np.arange(n)
    bucket = idx * nb // n
    first = np.r_[True, bucket[1:] != bucket[:-1]]
    lo = np.lexsort((idx, v, bucket))
    hi = np.lexsort((idx, -v, bucket))
    # after sorting by bucket, each bucket's first element is its min (lo) / max (hi)
    return sorted_unique(np.r_[lo[first], hi[first]])


def memory_series(trace: Trace, max_points: int = 4000, max_series: int = 16) -> tuple[list[Series], int]:
    """Memory counter tracks (bytes) as downsampled series, largest peak first; and how many exist."""
    c = trace.counters
    tracks = [
        i
        for i, t in enumerate(trace.tracks)
        if t.kind == TrackKind.MEMORY or (t.kind == TrackKind.COUNTER and t.unit == "bytes")
    ]
    t0 = origin_ns(trace)
    out: list[Series] = []
    if tracks and len(c):
        order = np.lexsort((c.ts_ns, c.track))
        tr = c.track[order]
        for i in tracks:
            lo, hi = searchsorted(tr, [i, i + 1])
            if hi <= lo:
                continue
            sel = order[lo:hi]
            v = c.value[sel]
            keep = downsample_minmax(v, max_points)
            t = trace.tracks[i]
            pname = trace.processes[t.process].name
            # "neuron:0 allocated" names its device already: no "neuron:0 · neuron:0 allocated"
            prefix = len(trace.processes) > 1 and not t.name.startswith(pname)
            out.append(
                Series(
                    name=f"{pname} · {t.name}" if prefix else t.name,
                    t_ms=(c.ts_ns[sel][keep] - t0) / NS_PER_MS,
                    value=v[keep],
                    peak=float(np.nanmax(v)) if len(v) else 0.0,
                    n_samples=int(hi - lo),
                )
            )
    out.sort(key=lambda s: -s.peak)
    return out[:max_series], len(out)


# ---- collectives ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Collectives:
    source: str
    """Where they were found: "collective probe", "NCCL/RCCL kernel" or "gloo annotation"."""
    op: list[str]
    rank: np.ndarray
    start_ms: np.ndarray
    dur_ms: np.ndarray
    nbytes: np.ndarray
    """float, NaN where the trace carries no size."""
    gbps: np.ndarray
    """Algorithm bandwidth: message bytes / duration (GB/s); NaN without a size or duration."""
    per_op: list[dict[str, Any]] = field(default_factory=list)


def collectives(trace: Trace) -> Collectives:
    """Every collective (the rows the collective findings use) with its bandwidth; per-op totals."""
    from neuron_prof.analysis import Context, collective_args, collective_rows, message_bytes
    from neuron_prof.analysis import collective_key as op_key

    ctx = Context(trace)
    rows = collective_rows(trace, ctx)
    rows = rows[np.argsort(trace.slices.ts_ns[rows], kind="stable")]
    t0 = origin_ns(trace)
    if not len(rows):
        z = np.zeros(0)
        return Collectives(source="", op=[], rank=z.astype(np.int64), start_ms=z, dur_ms=z, nbytes=z, gbps=z)
    ops, nb, ranks = [], [], []
    default_rank = trace.rank if trace.rank is not None else 0
    sl = trace.slices
    for nid, track, a in zip(sl.name[rows].tolist(), sl.track[rows].tolist(), collective_args(ctx, rows), strict=True):
        ops.append(op_key(trace.s(nid), a))
        b = message_bytes(a)
        nb.append(float(b) if b > 0 else np.nan)
        p = trace.processes[trace.tracks[track].process]
        ranks.append(p.rank if p.rank is not None else default_rank)
    kind = trace.tracks[int(trace.slices.track[rows[0]])].kind
    source = {TrackKind.COLLECTIVE: "collective probe", TrackKind.DEVICE: "NCCL/RCCL kernel"}.get(
        kind, "gloo annotation"
    )
    nbytes = np.asarray(nb, dtype=np.float64)
    dur = trace.slices.dur_ns[rows].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        gbps = np.where(dur > 0, nbytes / dur, np.nan)  # bytes per ns == GB/s
    per_op: list[dict[str, Any]] = []
    op_arr = np.array(ops, dtype=object)
    for op in sorted(set(ops)):
        m = op_arr == op
        g = gbps[m]
        per_op.append(
            {
                "op": op,
                "count": int(m.sum()),
                "total_ms": float(dur[m].sum()) / NS_PER_MS,
                "bytes": float(np.nansum(nbytes[m])),
                "median_gbps": float(np.nanmedian(g)) if np.isfinite(g).any() else float("nan"),
            }
        )
    per_op.sort(key=lambda d: -d["total_ms"])
    return Collectives(
        source=source,
        op=ops,
        rank=np.asarray(ranks, dtype=np.int64),
        start_ms=(trace.slices.ts_ns[rows] - t0) / NS_PER_MS,
        dur_ms=dur / NS_PER_MS,
        nbytes=nbytes,
        gbps=gbps,
        per_op=per_op,
    )


# ---- overview --------------------------------------------------------------------------------------------
def overview(trace: Trace) -> list[tuple[str, str]]:
    """(label, value) rows describing the trace."""
    md = trace.metadata
    rows = [
        ("source", str(md.get("source", "")) or "(in memory)"),
        ("format", str(md.get("source_format", "")) or "?"),
        ("profiled wall time", f"{trace.wall_ns / NS_PER_MS:,.3f} ms"),
        (
            "events",
            f"{len(trace.slices):,} slices, {len(trace.instants):,} instants, "
            f"{len(trace.counters):,} counter samples, {len(trace.flows):,} flows",
        ),
        ("processes / tracks", f"{len(trace.processes):,} / {len(trace.tracks):,}"),
    ]
    for key, label in (("backend", "backend"), ("rank", "rank"), ("world_size", "world size")):
        if md.get(key) is not None:
            rows.append((label, str(md[key])))
    t0, _ = trace.time_range()
    if md.get("clock") == "unix" or t0 > 10**18:
        import datetime as _dt

        rows.append(
            ("start (UTC)", _dt.datetime.fromtimestamp(t0 / 1e9, _dt.UTC).isoformat(timespec="milliseconds"))
        )
    return rows
