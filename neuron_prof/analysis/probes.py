"""Probe errors and profiler overhead, from the trace's metadata (capture records them, never raises)."""

from __future__ import annotations

from collections import defaultdict

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.analysis.registry import register
from neuron_prof.analysis.device.runqueue import MATERIAL, region_wait, runqueue, waited_text
from neuron_prof.model import Meta, Trace

OVERHEAD_WARNING = 0.20
"""Profilers cost some percent; past a fifth of the run, timings mislead enough to say so loudly."""


@register(Kind.PROBE_ERROR)
def probe_error(trace: Trace, ctx: Context) -> list[Finding]:
    """One finding per probe that failed during capture: its data is missing from the trace."""
    errs = trace.metadata.get(Meta.PROBE_ERRORS) or []
    by_probe: dict[str, list[str]] = defaultdict(list)
    for e in errs if isinstance(errs, list) else []:
        if isinstance(e, dict):
            by_probe[str(e.get("probe", "?"))].append(str(e.get("error", "")))
        else:
            by_probe["?"].append(str(e))
    return [
        Finding(
            kind=Kind.PROBE_ERROR,
            severity="warning",
            title=f"Probe {probe} failed {len(msgs)} time{'s' if len(msgs) != 1 else ''}: {msgs[0][:120]}",
            cost_ns=0,
            share=0.0,
            count=len(msgs),
            advice=(
                f"The {probe} data is missing or partial in this trace; the program itself ran on. "
                "Report the error with the neuron-prof and torch versions."
            ),
            evidence={"probe": probe, "errors": msgs[:20]},
        )
        for probe, msgs in by_probe.items()
    ]


@register(Kind.PROFILER_OVERHEAD)
def profiler_overhead(trace: Trace, ctx: Context) -> list[Finding]:
    """Time the profiler itself added (capture measures it), so users can discount it.

    Capture measures it in wall time (its hooks and step marks), which a busy machine stretches: the part of the
    region's host run-queue wait that falls to it (its share of the region's wall time; `_runqueue`) is other
    processes' time, not the profiler's, and is left out of the cost."""
    measured = trace.metadata.get(Meta.OVERHEAD_NS)
    if not isinstance(measured, (int, float)) or measured <= 0:
        return []
    measured = int(measured)
    starved = int(measured * ctx.share(region_wait(ctx)))
    ns = measured - starved
    share = ctx.share(ns)
    title = f"Profiler overhead: {fmt_ns(ns)} ({share:.1%} of the profiled time)"
    rq = runqueue(ctx)
    if rq is not None and starved and starved >= MATERIAL * measured:
        title += f"; measured {fmt_ns(measured)}, of which {waited_text(rq, starved)} (not counted)"
    return [
        Finding(
            kind=Kind.PROFILER_OVERHEAD,
            severity="warning" if share >= OVERHEAD_WARNING else "info",
            title=title,
            cost_ns=ns,
            share=share,
            count=1,
            advice=(
                "Timings include this overhead. Profile fewer steps or turn off deep options "
                "(record_shapes, with_stack, profile_memory) for timing-sensitive runs."
            ),
            evidence={"overhead_ns": ns, "measured_ns": measured, "runqueue_wait_ns": starved},
        )
    ]


LAUNCH_ENV = "NEURON_LAUNCH_BLOCKING"


def launch_mode(trace: Trace) -> str | None:
    """``NEURON_LAUNCH_BLOCKING`` as the capture recorded it (the compile-cache or the runtime-profile metadata)."""
    for key in ("compile_cache", "runtime_profile"):
        md = trace.metadata.get(key)
        if isinstance(md, dict) and md.get(LAUNCH_ENV) is not None:
            return str(md[LAUNCH_ENV])
    return None


@register(Kind.LAUNCH_BLOCKING)
def launch_blocking(trace: Trace, ctx: Context) -> list[Finding]:
    """Under ``NEURON_LAUNCH_BLOCKING=1`` every op is synchronous: its host time includes its device time (issue 21,
    docs/trainium.md), so op tables and sync points read differently."""
    if launch_mode(trace) != "1":
        return []
    return [Finding(
        kind=Kind.LAUNCH_BLOCKING, severity="info",
        title="NEURON_LAUNCH_BLOCKING=1: every op waited for the device, so host op times include device time",
        cost_ns=0, share=0.0, count=1,
        advice=("Host op times here are host + device time and sync points wait for nothing. For the asynchronous "
                "timeline users get by default in the docs, profile with NEURON_LAUNCH_BLOCKING=0 (or unset on "
                "builds whose default is asynchronous)."),
        evidence={LAUNCH_ENV: "1"})]
