"""Per-step breakdown: what each step spent its time on, in parts that add up to the step.

For each step (`Context.steps`), the time the slices of each category cover inside the step (their union, so
overlapping slices count once): ``compile_ns``, ``fallback_ns``, ``sync_ns`` (host waits: sync probes and
runtime syncs), ``collective_ns``, ``device_busy_ns`` and ``host_ns`` (host ops running). These overlap one
another (a compile runs inside a host op; the device runs while the host queues more), so ``parts`` splits
the step into exclusive shares, each moment given to the first category that covers it in this order:
compile, fallback, sync, collective, host (host ops doing anything else), device (the device busy while the
host ran no op), idle (neither); ``parts`` sums to ``dur_ns``. Each step's ``phase`` is `phases.step_phases`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from neuron_prof.analysis.collectives.rows import collective_rows
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.device.sync import RUNTIME_SYNC_NAMES
from neuron_prof.analysis.intervals import covered_before, merge, merge_windows, rows_union
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.analysis.steps.phases import compile_rows, step_phases
from neuron_prof.model import Cat, KinetoCat, Trace, TrackKind
from neuron_prof.model.order import sorted_unique
from neuron_prof.model.windows import row_windows

PARTS = ("compile", "fallback", "sync", "collective", "host", "device", "idle")
"""The exclusive parts of a step, in the order a moment is given to them."""
MAX_STEPS = 2000
"""Steps listed at most (the first ones): a long run's JSON stays small."""


def _unions(trace: Trace, ctx: Context) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each category's slices merged into disjoint (starts, ends), one category at a time; the host ops and the
    device's work read a window of rows at a time (`merge_windows`), never as rows over the whole trace."""
    from neuron_prof.analysis.device.idle import device_rows  # _idle registers an analysis: import on use
    from neuron_prof.analysis.ops import HOST_OP_CATS

    sl = trace.slices
    host = host_nesting(ctx).rows
    cat = sl.cat
    cpu = trace.name_ids(KinetoCat.CPU_OP)
    has_ops = any(np.isin(cat[host[a:z]], cpu).any() for a, z in row_windows(trace, len(host)))
    keep, drop = trace.name_ids(*HOST_OP_CATS), trace.name_ids(KinetoCat.USER_ANNOTATION, KinetoCat.PROFILER_SPAN,
                                                                KinetoCat.PYTHON)
    busy = trace.name_ids(Cat.ENGINE_BUSY)

    def spans(rows: np.ndarray, pick: Callable[[np.ndarray], np.ndarray]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for a, z in row_windows(trace, len(rows)):
            r = rows[a:z]
            r = r[pick(cat[r])]
            yield sl.ts_ns[r], sl.dur_ns[r]

    dev = device_rows(ctx)
    return {
        "compile": rows_union(trace, sorted_unique(np.concatenate([ctx.rows(TrackKind.COMPILE), compile_rows(ctx)]))),
        "fallback": rows_union(trace, ctx.rows(TrackKind.FALLBACK)),
        "sync": rows_union(trace, np.concatenate([ctx.rows(TrackKind.SYNC),
                                                  ctx.name_rows(ctx.rows(TrackKind.THREAD), RUNTIME_SYNC_NAMES)])),
        "collective": rows_union(trace, collective_rows(trace, ctx)),
        "host": merge_windows(spans(host, (lambda c: np.isin(c, keep)) if has_ops else (lambda c: ~np.isin(c, drop)))),
        "device": merge_windows(spans(dev, lambda c: ~np.isin(c, busy))),
    }


def step_breakdown(trace: Trace, ctx: Context | None = None) -> list[dict[str, Any]]:
    """One dict per step (the first MAX_STEPS): id, start/dur, warm-up or not, each category's time and the
    exclusive `parts` (see the module docstring). Empty when the trace has no steps."""
    ctx = ctx or Context(trace)
    return ctx.memo("step_breakdown", lambda: _build(trace, ctx))  # type: ignore[no-any-return]


def _build(trace: Trace, ctx: Context) -> list[dict[str, Any]]:
    st = ctx.steps
    if not len(st):
        return []
    k = min(len(st), MAX_STEPS)
    lo, hi = st.start_ns[:k].astype(np.int64), st.end_ns[:k].astype(np.int64)
    dur = hi - lo
    phases = step_phases(ctx)
    merged = _unions(trace, ctx)  # each category's slices merged once; unions of categories merge those

    def cover(s: np.ndarray, e: np.ndarray) -> np.ndarray:
        return covered_before(s, e, hi) - covered_before(s, e, lo) if len(s) else np.zeros(k, dtype=np.int64)

    own = {c: cover(*merged[c]) for c in merged}
    parts: dict[str, np.ndarray] = {}
    prev = np.zeros(k, dtype=np.int64)
    us, ue = np.zeros(0, np.int64), np.zeros(0, np.int64)
    for c in PARTS[:-1]:
        cs, ce = merged[c]
        if len(cs):
            us, ue = merge(np.concatenate([us, cs]), np.concatenate([ue - us, ce - cs]))
        now = cover(us, ue)
        parts[c] = np.maximum(now - prev, 0)
        prev = now
    parts["idle"] = np.maximum(dur - prev, 0)
    out = []
    for i in range(k):
        out.append({
            "step": int(st.ids[i]),
            "start_ns": int(lo[i]),
            "dur_ns": int(dur[i]),
            "warmup": bool(i < st.warmup),
            "phase": phases.phase[i],
            "compile_ns": int(own["compile"][i]),
            "fallback_ns": int(own["fallback"][i]),
            "sync_ns": int(own["sync"][i]),
            "collective_ns": int(own["collective"][i]),
            "device_busy_ns": int(own["device"][i]),
            "host_ns": int(own["host"][i]),
            "parts": {c: int(parts[c][i]) for c in PARTS},
        })
    return out
