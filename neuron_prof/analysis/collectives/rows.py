"""Collectives: time per collective op, bandwidth, exposed (not overlapped) time and slow outliers.

Sources, first found wins: the ``collective`` track (probes); device kernels of NCCL/RCCL (Kineto
args "Collective name", "In msg nelems", "dtype"); host ``gloo:*`` annotations.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np

from neuron_prof.analysis.collectives.source import KERNEL, collective_rows
from neuron_prof.analysis.context import ABSENT, Context
from neuron_prof.analysis.device.rows import device_rows
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.analysis.intervals import merge, rows_union, union_ns
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.registry import register
from neuron_prof.analysis.sites.callsites import sites_of
from neuron_prof.model import Arg, Trace
from neuron_prof.model.order import sorted_unique

WARNING_EXPOSED = 0.15
CRITICAL_EXPOSED = 0.40
SLOW_FACTOR = 3.0
"""A call slower than 3x the median of its op and size is an outlier (a late peer or a slow link)."""

_DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "double": 8,
    "float64": 8,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "byte": 1,
    "char": 1,
    "bool": 1,
    "uint8": 1,
    "int8": 1,
    "short": 2,
    "int16": 2,
}


def op_key(name: str, args: dict[str, Any]) -> str:
    """Normalised collective name: "allreduce", "allgather", "broadcast", ..."""
    cn = args.get("Collective name")
    if isinstance(cn, str) and cn:
        return cn.lower().replace("_", "")
    m = KERNEL.match(name)
    base = m.group(1) if m else name.split(":")[-1]
    return base.lower().replace("_", "").replace("c10d::", "")


def message_bytes(args: dict[str, Any]) -> int:
    """Bytes moved by one call, 0 when the trace does not say."""
    for key in (Arg.BYTES_IN, Arg.BYTES_OUT):
        v = args.get(key)
        if isinstance(v, (int, float)) and v > 0:
            return int(v)
    n = args.get("In msg nelems")
    if isinstance(n, (int, float)) and n > 0:
        return int(n) * _DTYPE_BYTES.get(str(args.get("dtype", "")).lower(), 4)
    return 0


_READ = ("Collective name", Arg.BYTES_IN, Arg.BYTES_OUT, "In msg nelems", "dtype", Arg.BUSBW)
"""The args keys `op_key`, `message_bytes` and the bus bandwidth read."""


def collective_args(ctx: Context, rows: np.ndarray, extra: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
    """Per collective row of `rows`: the args `op_key`, `message_bytes` and the bus bandwidth read, and the `extra`
    keys a caller shows (the keys the document has), read as columns a window at a time (`Context.iter_pick_args`):
    no document parsed whole, and a big trace's blob is not brought in by one sparse read per call."""
    keys = tuple(dict.fromkeys((*_READ, *extra)))
    for vals in ctx.iter_pick_args(ctx.trace.slices.args[rows], keys):
        yield {k: v for k, v in zip(keys, vals, strict=True) if v is not ABSENT}


def _exposed(ts: np.ndarray, dur: np.ndarray, s_c: np.ndarray, e_c: np.ndarray) -> int:
    """Time of the collectives not overlapped by compute (union(all) - union(compute)); compute given as its
    union (`merge`: sorted disjoint starts and ends), merged once for every op, not once per op."""
    s_all, e_all = merge(np.r_[ts, s_c], np.r_[dur, e_c - s_c])  # the same union as of every compute slice
    return int((e_all - s_all).sum() - (e_c - s_c).sum())


@register(Kind.COLLECTIVE)
def collective(trace: Trace, ctx: Context) -> list[Finding]:
    """One finding per collective op: count, time, exposed time, bandwidth, slow outliers."""
    rows = collective_rows(trace, ctx)
    if not len(rows):
        return []
    sl = trace.slices
    dev = device_rows(ctx)
    compute = dev[~np.isin(dev, rows)]  # setdiff1d sorts and uniques: ~1 s at 1M rows
    groups: dict[str, list[tuple[int, int]]] = defaultdict(list)
    busbw: dict[str, list[float]] = defaultdict(list)
    names = sl.name[rows].tolist()
    for r, nid, a in zip(rows.tolist(), names, collective_args(ctx, rows), strict=True):
        key = op_key(trace.s(nid), a)
        groups[key].append((r, message_bytes(a)))
        if isinstance(a.get(Arg.BUSBW), (int, float)):
            busbw[key].append(float(a[Arg.BUSBW]))
    out = []
    s_c, e_c = rows_union(trace, compute)
    for op, items in groups.items():
        idx = np.array([r for r, _ in items], dtype=np.int64)
        nbytes = np.array([b for _, b in items], dtype=np.int64)
        ts, dur = sl.ts_ns[idx], sl.dur_ns[idx]
        total = int(dur.sum())
        # overlapping calls (several threads or streams) count once
        exposed = (
            _exposed(ts, dur, s_c, e_c) if len(compute) else union_ns(ts, dur)
        )
        # slow outliers per message size
        slow: list[dict[str, Any]] = []
        excess = 0
        for b in sorted_unique(nbytes):
            m = nbytes == b
            med = float(np.median(dur[m]))
            bad = np.flatnonzero(m & (dur > SLOW_FACTOR * max(med, 1.0)))
            excess += int((dur[bad] - med).sum())
            slow += [
                {"row": int(idx[i]), "dur_ns": int(dur[i]), "median_ns": int(med), "bytes": int(b)}
                for i in bad[np.argsort(-dur[bad])][:5]
            ]
        # where the user's code called it: the line with the most time, and every line in evidence
        sites = sites_of(ctx)
        at: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        first: dict[str, Any] = {}
        for i, s_ in enumerate(sites.of_rows(idx.tolist())):
            key_site = s_.call_site or s_.function
            at[key_site][0] += 1
            at[key_site][1] += int(dur[i])
            first.setdefault(key_site, s_)
        top_site = max(at, key=lambda k: at[k][1])
        with np.errstate(divide="ignore", invalid="ignore"):
            bw = np.where((nbytes > 0) & (dur > 0), nbytes / np.maximum(dur, 1), np.nan)  # bytes/ns == GB/s
        algbw = float(np.nanmedian(bw)) if np.isfinite(bw).any() else None
        share = ctx.share(exposed)
        sev = "critical" if share >= CRITICAL_EXPOSED else "warning" if share >= WARNING_EXPOSED else "info"
        if sev == "info" and ctx.share(excess) >= 0.02:
            sev = "warning"
        title = f"Collective {op}: {len(items)} calls, {fmt_ns(total)} ({fmt_ns(exposed)} not overlapped)"
        if algbw is not None:
            title += f", median {algbw:.2f} GB/s"
        if slow:
            title += f", {len(slow)} slow outlier{'s' if len(slow) != 1 else ''}"
        advice = (
            "Overlap communication with compute (DDP bucketing, gradient_as_bucket_view, FSDP prefetch), "
            "send fewer, larger messages, and check the slow calls: a late peer (see straggler) or a slow "
            "link shows as a call far above the median for its size."
        )
        ev = {
            "op": op,
            "calls": len(items),
            "total_ns": total,
            "exposed_ns": exposed,
            "median_ns": int(np.median(dur)),
            "max_ns": int(dur.max()),
            "bytes_median": int(np.median(nbytes)) if nbytes.any() else 0,
            "algbw_gbps_median": algbw,
            "busbw_gbps_median": float(np.median(busbw[op])) if busbw[op] else None,
            "slow": slow,
            "slow_excess_ns": excess,
            "rows": [int(r) for r in idx[:200]],
            "sites": [{"call_site": k, "calls": v[0], "total_ns": v[1]}
                      for k, v in sorted(at.items(), key=lambda kv: -kv[1][1])[:20] if k],
            **ctx.step_split(ts, dur),
            **first[top_site].evidence(),
        }
        out.append(
            Finding(
                kind=Kind.COLLECTIVE,
                severity=sev,
                title=title,
                cost_ns=exposed,
                share=share,
                count=len(items),
                call_site=first[top_site].call_site,
                module=first[top_site].module,
                advice=advice,
                evidence=ev,
                ts_ns=int(ts.min()),
                rank=trace.rank,
            )
        )
    return out
