"""Totals: wall time, device busy share, compile/fallback/sync/collective time, steps and top ops.

Self time is computed per track from nesting (`_nesting`), vectorised, then summed per name.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.analysis._collectives import collective_rows
from neuron_prof.analysis._context import Context
from neuron_prof.analysis._host import host_nesting
from neuron_prof.analysis._nesting import TRANSPARENT_SPANS
from neuron_prof.analysis._idle import device_label, device_rows
from neuron_prof.analysis._intervals import merge, union_ns
from neuron_prof.analysis._sync import RUNTIME_SYNC_NAMES
from neuron_prof.model import Arg, KinetoCat, Trace, TrackKind

TOP_N = 15


def _by_name(trace: Trace, rows: np.ndarray, self_ns: np.ndarray | None, top: int) -> list[dict[str, Any]]:
    """Top names by self time (or total time when `self_ns` is None)."""
    if not len(rows):
        return []
    sl = trace.slices
    names = sl.name[rows]
    dur = sl.dur_ns[rows]
    key = dur if self_ns is None else self_ns
    uniq, inv = np.unique(names, return_inverse=True)
    k_sum = np.bincount(inv, weights=key)
    t_sum = np.bincount(inv, weights=dur)
    cnt = np.bincount(inv)
    order = np.argsort(-k_sum, kind="stable")[:top]
    out = []
    for i in order:
        d = {"name": trace.s(int(uniq[i])), "count": int(cnt[i]), "total_ns": int(t_sum[i])}
        if self_ns is not None:
            d["self_ns"] = int(k_sum[i])
        out.append(d)
    return out


def _per_steady_step(ctx: Context, parts: dict[str, np.ndarray]) -> dict[str, int] | None:
    """Mean time per steady step of each category (slices starting inside steady steps)."""
    st = ctx.steps
    n = len(st) - st.warmup
    if n <= 0:
        return None
    sl = ctx.trace.slices
    out = {"step_ns": int(st.dur_ns[st.steady].mean())}
    for key, rows in parts.items():
        k = st.step_index(sl.ts_ns[rows])
        out[key] = int(sl.dur_ns[rows][k >= st.warmup].sum() / n)
    return out


def compute_totals(trace: Trace, ctx: Context) -> dict[str, Any]:
    """The `totals` object of `summary --json` (README documents every key)."""
    sl = trace.slices
    wall = ctx.wall_ns
    dev = device_rows(ctx)
    devices = []
    proc = np.array([t.process for t in trace.tracks] or [0], dtype=np.int64)
    for p in np.unique(proc[sl.track[dev]]) if len(dev) else []:
        rs = dev[proc[sl.track[dev]] == p]
        busy = union_ns(sl.ts_ns[rs], sl.dur_ns[rs])
        devices.append(
            {
                "name": device_label(trace, int(p)),
                "busy_ns": busy,
                "busy_share": ctx.share(busy),
                "events": int(len(rs)),
            }
        )
    dev_busy = union_ns(sl.ts_ns[dev], sl.dur_ns[dev]) if len(dev) else 0
    comp = ctx.rows(TrackKind.COMPILE)
    misses = sum(1 for r in comp if str(ctx.slice_args(int(r)).get(Arg.CACHE, "miss") or "miss") == "miss")
    fb = ctx.rows(TrackKind.FALLBACK)
    sync = np.concatenate(
        [ctx.rows(TrackKind.SYNC), ctx.name_rows(ctx.rows(TrackKind.THREAD), RUNTIME_SYNC_NAMES)]
    )
    coll = collective_rows(trace, ctx)
    n = host_nesting(ctx)
    cpu = ctx.cat_rows(n.rows, (KinetoCat.CPU_OP,))
    if len(cpu):
        keep = np.isin(
            n.rows, ctx.cat_rows(n.rows, (KinetoCat.CPU_OP, KinetoCat.CUDA_RUNTIME, KinetoCat.CUDA_DRIVER))
        )
    else:
        keep = np.ones(len(n.rows), dtype=bool)
    keep &= ~n.transparent  # their time is the parent's
    host_s, host_e = merge(sl.ts_ns[n.rows], sl.dur_ns[n.rows])
    return {
        "wall_ns": wall,
        "start_ns": ctx.window[0],
        "end_ns": ctx.window[1],
        "events": {
            "slices": len(sl),
            "instants": len(trace.instants),
            "counters": len(trace.counters),
            "flows": len(trace.flows),
        },
        "rank": trace.rank,
        "steps": ctx.steps.summary(),
        "host_busy_ns": int((host_e - host_s).sum()),
        "device_busy_ns": dev_busy,
        "device_busy_share": ctx.share(dev_busy) if len(dev) else None,
        "devices": devices,
        "compile_ns": union_ns(sl.ts_ns[comp], sl.dur_ns[comp]),
        "compile_count": int(len(comp)),
        "compile_miss_count": int(misses),
        "fallback_ns": int(sl.dur_ns[fb].sum()),
        "fallback_count": int(len(fb)),
        "sync_ns": int(sl.dur_ns[sync].sum()),
        "sync_count": int(len(sync)),
        "collective_ns": union_ns(sl.ts_ns[coll], sl.dur_ns[coll]),
        "collective_count": int(len(coll)),
        "steady_per_step": _per_steady_step(
            ctx,
            {
                "device_busy_ns": dev,
                "compile_ns": comp,
                "fallback_ns": fb,
                "sync_ns": sync,
                "collective_ns": coll,
            },
        ),
        "top_ops": _by_name(trace, n.rows[keep], n.self_ns[keep], TOP_N),
        "top_device_ops": _by_name(trace, dev, None, TOP_N),
    }
