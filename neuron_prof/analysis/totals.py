"""Totals: wall time, device busy share, compile/fallback/sync/collective time, steps and top ops.

Top ops come from op accounting (`_ops.op_table`), the table the diff, report and TUI read too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.analysis.collectives.source import collective_rows
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.device.idle import device_label, device_rows
from neuron_prof.analysis.device.profile import explorer_totals
from neuron_prof.analysis.device.runqueue import MATERIAL, region_wait, runqueue
from neuron_prof.analysis.device.sync import RUNTIME_SYNC_NAMES
from neuron_prof.analysis.intervals import intersect_ns, rows_union, rows_union_ns
from neuron_prof.analysis.ops import op_table
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.analysis.steps.breakdown import PARTS, step_breakdown
from neuron_prof.analysis.steps.phases import cache_states, step_phases
from neuron_prof.model import Meta, Trace, TrackKind
from neuron_prof.model.order import sorted_unique

TOP_N = 15


def _per_steady_step(ctx: Context, parts: dict[str, np.ndarray]) -> dict[str, Any] | None:
    """Mean time per steady step (`steps.phases`: no warm-up, no compile) of each category: the time its slices
    cover inside the steady steps (overlapping collectives, or one running past its step, never make a category
    longer than the step); ``parts``: the step breakdown's exclusive parts, whose sum is ``step_ns``."""
    st = ctx.steps
    steady = step_phases(ctx).steady
    n = len(steady)
    if n <= 0:
        return None
    sl = ctx.trace.slices
    lo, hi = st.start_ns[steady], st.end_ns[steady]
    total = int(st.dur_ns[steady].sum())
    out: dict[str, Any] = {"step_ns": total // n, "steps": n}
    for key, rows in parts.items():
        out[key] = int(intersect_ns(sl.ts_ns[rows], sl.dur_ns[rows], lo, hi) / n)
    bd = step_breakdown(ctx.trace, ctx)
    listed = [int(i) for i in steady if i < len(bd)]
    if len(listed) == n:  # every steady step is in the breakdown (it lists the first MAX_STEPS)
        sums = {c: sum(bd[i]["parts"][c] for i in listed) for c in PARTS}
        # shares of the steps' total, rounded so that they add up to step_ns exactly
        shares = {c: sums[c] // n for c in PARTS}
        shares["idle"] += out["step_ns"] - sum(shares.values())
        out["parts"] = shares
    return out


def compute_totals(trace: Trace, ctx: Context) -> dict[str, Any]:
    """The `totals` object of `summary --json` (docs/summary.md documents every key)."""
    sl = trace.slices
    wall = ctx.wall_ns
    dev = device_rows(ctx)
    devices = []
    proc = np.array([t.process for t in trace.tracks] or [0], dtype=np.int64)
    for p in sorted_unique(proc[sl.track[dev]]) if len(dev) else []:
        rs = dev[proc[sl.track[dev]] == p]
        busy = rows_union_ns(trace, rs)
        devices.append(
            {
                "name": device_label(trace, int(p)),
                "busy_ns": busy,
                "busy_share": ctx.share(busy),
                "events": int(len(rs)),
            }
        )
    dev_busy = rows_union_ns(trace, dev) if len(dev) else 0
    comp = ctx.rows(TrackKind.COMPILE)
    misses = cache_states(ctx, comp).count("miss")
    fb = ctx.rows(TrackKind.FALLBACK)
    sync = np.concatenate(
        [ctx.rows(TrackKind.SYNC), ctx.name_rows(ctx.rows(TrackKind.THREAD), RUNTIME_SYNC_NAMES)]
    )
    coll = collective_rows(trace, ctx)
    n = host_nesting(ctx)
    ops = op_table(trace, ctx)
    host_s, host_e = rows_union(trace, n.rows)
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
        "capture_exit": trace.metadata.get("capture_exit"),
        "capture_reduced": trace.metadata.get(Meta.CAPTURE_REDUCED),
        "steps": {**ctx.steps.summary(), **step_phases(ctx).summary(ctx.steps.dur_ns)},
        "host_busy_ns": int((host_e - host_s).sum()),
        "device_busy_ns": dev_busy,
        "device_busy_share": ctx.share(dev_busy) if len(dev) else None,
        "devices": devices,
        "compile_ns": rows_union_ns(trace, comp),
        "compile_count": int(len(comp)),
        "compile_miss_count": int(misses),
        "fallback_ns": int(sl.dur_ns[fb].sum()),
        "fallback_count": int(len(fb)),
        "sync_ns": int(sl.dur_ns[sync].sum()),
        "sync_count": int(len(sync)),
        "collective_ns": rows_union_ns(trace, coll),
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
        "top_ops": ops.top("host", TOP_N, by="self_ns"),
        "top_device_ops": ops.top("device", TOP_N, by="total_ns"),
        "neuron_explorer": explorer_totals(trace, ctx),
        "host_runqueue": _runqueue_totals(ctx),
    }


def _runqueue_totals(ctx: Context) -> dict[str, Any] | None:
    """The host's run-queue wait in the region (other processes held the CPUs), or None without samples."""
    rq = runqueue(ctx)
    if rq is None:
        return None
    wait = region_wait(ctx)
    return {"wait_ns": wait, "share": ctx.share(wait), "material": ctx.share(wait) >= MATERIAL,
            "loadavg": list(rq.loadavg), "load_text": rq.load_text()}
