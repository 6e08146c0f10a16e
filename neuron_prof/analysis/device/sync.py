"""Sync points: the host waiting for the device (``sync`` track probes, CUDA/HIP synchronize calls, and on
Trainium the host ops whose work copied device memory back: a Neuron Explorer ``dmem_buf_copyout``)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from neuron_prof.analysis.context import Context, severity_for
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.analysis.intervals import covered_before, merge
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.registry import register
from neuron_prof.analysis.sites.callsites import Site, sites_of
from neuron_prof.analysis.sites.host import enclosing_ops
from neuron_prof.model import Arg, Trace, TrackKind
from neuron_prof.model.order import searchsorted, sorted_unique

RUNTIME_SYNC_NAMES = (
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "hipStreamSynchronize",
    "hipDeviceSynchronize",
    "hipEventSynchronize",
)
"""Host runtime calls that block until the device catches up (Kineto cuda_runtime/cuda_sync rows)."""
COPY_TO_HOST = "dmem_buf_copyout"
"""Neuron Explorer's device-to-host copy (schema enum MemoryBandwidthDirection: device_to_host)."""


def copy_to_host_rows(ctx: Context) -> np.ndarray:
    """Host thread slices with a launch flow to a ``dmem_buf_copyout``: the op that read device memory back
    (the host waits for the device to finish the work the value depends on)."""
    fl = ctx.trace.flows
    ids = ctx.trace.name_ids(COPY_TO_HOST)
    if not len(fl) or not len(ids):
        return np.zeros(0, dtype=np.int64)
    hit = np.isin(ctx.trace.slices.name[fl.dst], ids)
    return np.intersect1d(sorted_unique(fl.src[hit]), ctx.rows(TrackKind.THREAD), assume_unique=True)


@register(Kind.SYNC_POINT)
def sync_point(trace: Trace, ctx: Context) -> list[Finding]:
    """One finding per call site (or waiting op) where the host waited for the device."""
    sl = trace.slices
    probe = ctx.rows(TrackKind.SYNC)
    runtime = ctx.name_rows(ctx.rows(TrackKind.THREAD), RUNTIME_SYNC_NAMES)
    if len(probe) and len(runtime):
        # a probe's sync slice already covers the runtime call it made: count the wait once
        s, e = merge(sl.ts_ns[probe], sl.dur_ns[probe])
        k = searchsorted(s, sl.ts_ns[runtime], side="right") - 1
        inside = (k >= 0) & (sl.ts_ns[runtime] < e[np.maximum(k, 0)])
        runtime = runtime[~inside]
    copies = copy_to_host_rows(ctx)
    if len(copies):  # a wait a probe or a fallback already saw is theirs: the copy is evidence, not a new wait
        seen = _covered(ctx, TrackKind.SYNC, copies) + _covered(ctx, TrackKind.FALLBACK, copies)
        copies = copies[seen == 0]
    # a copy a CPU fallback makes is the fallback's cost (cpu_fallback), not a sync point of its own
    probe = probe[_covered(ctx, TrackKind.FALLBACK, probe) < sl.dur_ns[probe]] if len(probe) else probe
    sites = sites_of(ctx)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    kinds: dict[tuple[str, str], str] = {}
    where: dict[tuple[str, str], Site] = {}
    for r, site in zip(probe.tolist(), sites.of_rows(probe.tolist()), strict=True):
        a = ctx.slice_args(int(r))
        if not site.call_site and not site.stack:  # a probe that saw no user frame: the host op at that moment
            site = sites.at(int(sl.ts_ns[r]) + int(sl.dur_ns[r]) // 2)
        key = (site.call_site or site.function, trace.slice_name(int(r)))
        groups[key].append(int(r))
        kinds[key] = str(a.get(Arg.SYNC_KIND, "") or "")
        where.setdefault(key, site)
    for rows, kind in ((runtime, "synchronize"), (copies, "copy to host")):
        for r, site in zip(rows.tolist(), sites.of_rows(rows.tolist()), strict=True):
            ops = enclosing_ops(ctx, int(r))
            key = (site.call_site or site.function, ops[-1] if ops else trace.slice_name(int(r)))
            groups[key].append(int(r))
            kinds.setdefault(key, kind)
            where.setdefault(key, site)
    out = []
    for (key_site, what), rs in groups.items():
        at = where[(key_site, what)].call_site
        idx = np.asarray(rs, dtype=np.int64)
        ts = sl.ts_ns[idx]
        # time the wait spent compiling is first_call_compile's cost: count it once
        dur = sl.dur_ns[idx] - _covered(ctx, TrackKind.COMPILE, idx)
        cost = int(dur.sum())
        share = ctx.share(cost)
        split = ctx.step_split(ts, dur)
        per = ""
        if split.get("steady_count"):
            per = f", {split['steady_count'] / split['steady_steps']:.1f} per steady step"
        times = f"{len(rs)} time{'s' if len(rs) != 1 else ''}"
        title = f"Sync point: {what} waited {fmt_ns(cost)} ({times}{per})"
        advice = (
            f"{what} blocks the host until the device has finished all queued work, so the host cannot run "
            "ahead. Keep values on the device (accumulate losses/metrics in tensors) and read them every "
            "N steps; avoid .item(), .cpu(), .tolist() and printing device tensors inside the step loop; "
            "use non_blocking=True copies."
        )
        ev = {
            "what": what,
            "sync_kind": kinds.get((key_site, what), ""),
            "wait_ns": cost,
            "max_wait_ns": int(dur.max()),
            "rows": rs[:200],
            **split,
            **where[(key_site, what)].evidence(),
        }
        out.append(
            Finding(
                kind=Kind.SYNC_POINT,
                severity=severity_for(share),
                title=title,
                cost_ns=cost,
                share=share,
                count=len(rs),
                call_site=at,
                module=where[(key_site, what)].module,
                advice=advice,
                evidence=ev,
                ts_ns=int(ts.min()),
            )
        )
    return out


def _covered(ctx: Context, kind: str, rows: np.ndarray) -> np.ndarray:
    """Per slice of `rows`: how much of it the slices on `kind` tracks cover."""
    other = ctx.rows(kind)
    sl = ctx.trace.slices
    if not len(other) or not len(rows):
        return np.zeros(len(rows), dtype=np.int64)
    s, e = merge(sl.ts_ns[other], sl.dur_ns[other])
    return covered_before(s, e, sl.end_at(rows)) - covered_before(s, e, sl.ts_ns[rows])
