"""Memory peak: the highest point of each memory counter, what was allocating before it and what ran at it.

Reads ``memory`` counter tracks (bytes); Kineto ``[memory]`` instants ("Total Allocated") when a
loader kept them as instants.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, repeat
from operator import is_not
from typing import Any

import numpy as np

from neuron_prof.analysis.context import ABSENT, Context
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.fmt import fmt_bytes
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.registry import register
from neuron_prof.analysis.sites.callsites import sites_of
from neuron_prof.model import Meta, Trace, TrackKind
from neuron_prof.model.order import unique_rows

NEAR_CAPACITY = 0.90
_DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 9: "xla", 12: "xpu", 13: "mps", 19: "mtia", 20: "privateuse1"}
"""c10::DeviceType numbers that Kineto writes in [memory] events' "Device Type"."""


def memory_series(trace: Trace, ctx: Context) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, ts, bytes) per memory series (read once per context: the lines view reads them too)."""
    return ctx.memo("memory_series", lambda: _read_series(trace, ctx))  # type: ignore[no-any-return]


def _read_series(trace: Trace, ctx: Context) -> list[tuple[str, np.ndarray, np.ndarray]]:
    out = []
    c = trace.counters
    for t in trace.track_ids(TrackKind.MEMORY):
        m = c.track == t
        if m.any():
            o = np.argsort(c.ts_ns[m], kind="stable")
            out.append((trace.tracks[int(t)].name, c.ts_ns[m][o], c.value[m][o]))
    if out:
        return out
    mem = trace.strings.get("[memory]")
    if mem is None:
        return out
    rows = np.flatnonzero(trace.instants.name == mem)
    # columns, not a loop per event: a long run holds hundreds of thousands of [memory] instants
    cols = ctx.pick_columns(trace.instants.args[rows], ("Total Allocated", "Device Type", "Device Id"))
    totals, dts, devs = cols
    kept = np.fromiter(map(is_not, totals, repeat(ABSENT)), dtype=bool, count=len(totals))
    if not kept.all():
        totals, dts, devs = (list(compress(c, kept)) for c in (totals, dts, devs))
        rows = rows[kept]
    code, names = _int_codes(dts, devs) or _codes(dts, devs)
    # series in the order their first event comes, one per name (two keys may get the same name)
    group = {n: i for i, n in reversed(list(enumerate(names)))}
    by_name = np.asarray([group[n] for n in names], dtype=np.int64)[code]
    try:
        values = np.fromiter(totals, dtype=np.float64, count=len(totals))
    except (TypeError, ValueError):
        values = np.fromiter(map(float, totals), dtype=np.float64, count=len(totals))
    ts_all = trace.instants.ts_ns[rows].astype(np.int64)
    for g in sorted(set(group.values())):
        m = by_name == g
        ts = ts_all[m]
        o = np.argsort(ts, kind="stable")
        out.append((names[g], ts[o], values[m][o]))
    return out


def _codes(dts: Sequence[Any], devs: Sequence[Any]) -> tuple[np.ndarray, list[str]]:
    """A code per event for each distinct (Device Type, Device Id), numbered in the order of their first event,
    and each code's series name. With the types: 1, 1.0 and True are distinct keys."""
    ids: list[Any]
    keys: list[Any]
    try:  # C loops, no bytecode per event
        ids = list(zip(map(type, dts), dts, map(type, devs), devs, strict=True))
        keys = list(dict.fromkeys(ids))
        names = [_series_name(k[1], k[3]) for k in keys]
    except TypeError:  # a list or dict there (unhashable): keyed by the name it gets
        ids = list(map(_series_name, dts, devs))
        keys = names = list(dict.fromkeys(ids))
    codes = {k: i for i, k in enumerate(keys)}
    return np.fromiter(map(codes.__getitem__, ids), dtype=np.int64, count=len(ids)), names


def _int_codes(dts: Sequence[Any], devs: Sequence[Any]) -> tuple[np.ndarray, list[str]] | None:
    """`_codes` in numpy when every Device Type and Device Id is an int (what Kineto writes); None otherwise."""
    if set(map(type, dts)) != {int} or set(map(type, devs)) != {int}:
        return None
    try:
        a = np.fromiter(dts, dtype=np.int64, count=len(dts))
        b = np.fromiter(devs, dtype=np.int64, count=len(devs))
    except OverflowError:
        return None
    pairs, first, inverse = unique_rows(np.stack((a, b), axis=1))
    order = np.argsort(first, kind="stable")  # numbered by first appearance
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    names = [_series_name(int(pairs[k, 0]), int(pairs[k, 1])) for k in order]
    return rank[inverse], names


def _series_name(dt: Any, dev: Any) -> str:
    """The name of the series of one (Device Type, Device Id): "cuda:0 allocated", "?" where absent."""
    dt = "?" if dt is ABSENT else dt
    dev = "?" if dev is ABSENT else dev
    return f"{_DEVICE_TYPES.get(dt, dt) if isinstance(dt, int) else dt}:{dev} allocated"


def _capacity(trace: Trace) -> int | None:
    kin = trace.metadata.get(Meta.KINETO)
    props = kin.get("deviceProperties") if isinstance(kin, dict) else None
    if isinstance(props, list):
        mems = [int(p.get("totalGlobalMem", 0)) for p in props if isinstance(p, dict)]
        if any(mems):
            return max(mems)
    cap = trace.metadata.get("device_memory_bytes")
    return int(cap) if isinstance(cap, (int, float)) and cap > 0 else None


@register(Kind.MEMORY_PEAK)
def memory_peak(trace: Trace, ctx: Context) -> list[Finding]:
    """One finding per memory series: the peak, the biggest allocations leading to it, the ops at it."""
    cap = _capacity(trace)
    out = []
    for name, ts, v in memory_series(trace, ctx):
        if not len(v) or v.max() <= 0:
            continue
        i = int(np.argmax(v))
        peak, t_peak = float(v[i]), int(ts[i])
        # the climb to the peak: from the last minimum before it
        lo = int(np.argmin(v[: i + 1]))
        delta = np.diff(v[lo : i + 1])
        grows = np.argsort(-delta)[:5]
        allocs: list[dict[str, Any]] = []
        for j in grows:
            if delta[j] <= 0:
                continue
            t = int(ts[lo + j + 1])
            stack = sites_of(ctx).stack_at(t)
            op = trace.slice_name(stack[-1]) if stack else ""
            at = sites_of(ctx).at(t)
            alloc = {"bytes": int(delta[j]), "ts_ns": t, "op": op, "call_site": at.call_site}
            allocs.append({**alloc, "in_backward": at.backward} if at.backward else alloc)
        stack_at = sites_of(ctx).stack_at(t_peak)
        at_peak = [trace.slice_name(r) for r in stack_at]
        where = sites_of(ctx).at(t_peak)
        # the device's capacity is no bound for a host series
        frac = peak / cap if cap and not name.startswith("host") else None
        sev = "warning" if frac is not None and frac >= NEAR_CAPACITY else "info"
        title = f"Memory peak: {name} reached {fmt_bytes(peak)}"
        if frac is not None:
            title += f" ({frac:.0%} of {fmt_bytes(cap or 0)})"
        if where.call_site:
            title += f" at {where.call_site}"
        if where.module:
            title += f" in {where.module}"
        advice = (
            "To lower the peak: smaller micro-batches with gradient accumulation, activation checkpointing "
            "(torch.utils.checkpoint) on the largest blocks, bf16 activations, and freeing tensors held "
            "across steps (losses kept for logging, cached outputs)."
        )
        site = where.call_site or next((str(a["call_site"]) for a in allocs if a["call_site"]), "")
        ev = {
            "series": name,
            "peak_bytes": int(peak),
            "capacity_bytes": cap,
            "peak_share": frac,
            "start_bytes": int(v[0]),
            "end_bytes": int(v[-1]),
            "largest_allocations": allocs,
            "ops_at_peak": at_peak,
            **where.evidence(),
        }
        out.append(
            Finding(
                kind=Kind.MEMORY_PEAK,
                severity=sev,
                title=title,
                cost_ns=0,
                share=0.0,
                count=1,
                call_site=site,
                module=where.module,
                advice=advice,
                evidence=ev,
                ts_ns=t_peak,
            )
        )
    return out
