"""Probe errors and profiler overhead, from the trace's metadata (capture records them, never raises)."""

from __future__ import annotations

from collections import defaultdict

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.device.runqueue import MATERIAL, region_wait, runqueue, waited_text
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.ops import attribution
from neuron_prof.analysis.registry import register
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
    processes' time, not the profiler's, and is left out of the cost. Where the wait fell is not known, only its
    total: the overhead is a warning only when it would pass `OVERHEAD_WARNING` even if all of the region's wait
    had fallen in the profiler's own time (else the machine's load may be the cost: nothing the user can act
    on)."""
    measured = trace.metadata.get(Meta.OVERHEAD_NS)
    if not isinstance(measured, (int, float)) or measured <= 0:
        return []
    measured = int(measured)
    wait = region_wait(ctx)
    starved = int(measured * ctx.share(wait))
    ns = measured - starved
    share = ctx.share(ns)
    beyond_load = ctx.share(max(measured - wait, 0))
    title = f"Profiler overhead: {fmt_ns(ns)} ({share:.1%} of the profiled time)"
    rq = runqueue(ctx)
    if rq is not None and starved and starved >= MATERIAL * measured:
        title += f"; measured {fmt_ns(measured)}, of which {waited_text(rq, starved)} (not counted)"
    return [
        Finding(
            kind=Kind.PROFILER_OVERHEAD,
            severity="warning" if min(share, beyond_load) >= OVERHEAD_WARNING else "info",
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


EXPLORER_KEY = "neuron_explorer"
"""Metadata the Neuron Explorer loader fills (its ``executions`` per NEFF come from a device profile)."""


@register(Kind.DEVICE_UNATTRIBUTED)
def device_unattributed(trace: Trace, ctx: Context) -> list[Finding]:
    """The device ran NEFFs but no execution is tied to the host op that launched it: the framework mapping was
    empty, as torch-neuronx documents it under ``NEURON_LAUNCH_BLOCKING=1``, the release builds' default (issue
    33, docs/trainium.md). Says what is still shown and how to get device time per op and per line."""
    att = attribution(ctx)
    mode = launch_mode(trace)
    if not att.none_linked or mode == "0":
        return []
    why = {"1": "NEURON_LAUNCH_BLOCKING=1 was set", "unset": "NEURON_LAUNCH_BLOCKING was unset, and release builds "
           "then default to 1"}.get(mode or "", "NEURON_LAUNCH_BLOCKING was not recorded")
    ex = trace.metadata.get(EXPLORER_KEY)
    per_neff = ex.get("executions") if isinstance(ex, dict) and isinstance(ex.get("executions"), dict) else {}
    return [Finding(
        kind=Kind.DEVICE_UNATTRIBUTED, severity="info",
        title=(f"Device time per op and per line is not known: none of the {att.executions} NEFF executions "
               f"({fmt_ns(att.device_ns)}) is tied to the op that launched it"),
        cost_ns=0, share=0.0, count=att.executions,
        advice=(f"The framework mapping (runtime execution -> framework op) was empty: torch-neuronx documents it as "
                f"incompatible with NEURON_LAUNCH_BLOCKING=1, and {why}. Shown instead: host ops (with every op "
                "blocking, their times include device time), the runtime's launches (nrt_execute), the device "
                "executions and their total, and per NEFF where a device profile was captured. For device time "
                "per op and per line of your code, profile with NEURON_LAUNCH_BLOCKING=0."),
        evidence={"executions": att.executions, "device_ns": att.device_ns, LAUNCH_ENV: mode,
                  **({"executions_per_neff": dict(sorted(per_neff.items(),
                                                         key=lambda kv: -int(kv[1].get("time_ns") or 0))[:10])}
                     if per_neff else {})})]
