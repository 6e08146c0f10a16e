"""Device idle gaps: stretches with no device work between busy periods, and what the host did meanwhile.

The cost is the idle time not spent in compiles (the compile track and torch.compile's phase spans),
fallbacks, syncs or collectives (those findings count
that time already), so the ranking does not count one stall twice; nor issuing ops (dispatch, reported apart).
Nor the time the host waited for a CPU that other processes on the machine held (Linux run-queue wait, from the
schedstat samples capture takes at start, each step boundary and stop): that wait is known per sample interval
only, so the unexplained part of the gaps gets the interval's wait in proportion to its share of the interval's
wall time (`_runqueue.RunQueue.within`). The severity follows the cost that remains.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.analysis.collectives.source import collective_rows
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.device.gap_host import PROBE_KINDS, gap_host
from neuron_prof.analysis.device.rows import device_rows
from neuron_prof.analysis.device.runqueue import MATERIAL, runqueue, waited_text
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.analysis.intervals import difference, intersect_ns, merge
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.registry import register
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.analysis.steps.phases import compile_rows
from neuron_prof.model import KinetoCat, Trace, TrackKind
from neuron_prof.model.order import searchsorted, sorted_unique

MIN_GAP_NS = 100_000
"""Gaps shorter than 100 µs are launch latency, not a diagnosis."""
WARNING_IDLE = 0.25
CRITICAL_IDLE = 0.50

_PROBE_KINDS = PROBE_KINDS


def device_label(trace: Trace, process: int) -> str:
    """ "GPU 2" (Kineto's label) rather than the host program's name that Kineto repeats on devices."""
    p = trace.processes[process]
    return p.labels or p.name




def dispatch_rows(ctx: Context) -> np.ndarray:
    """Host ops that issued device work: the innermost cpu_op around each launch a flow links to a device
    slice (the op itself on neuron; the op around cudaLaunchKernel on CUDA). Computed once."""

    def build() -> np.ndarray:
        fl = ctx.trace.flows
        dev = ctx.rows(TrackKind.DEVICE)
        host = ctx.rows(TrackKind.THREAD)
        src = sorted_unique(fl.src[np.isin(fl.dst, dev) & np.isin(fl.src, host)])
        if not len(src):
            return src.astype(np.int64)
        n = host_nesting(ctx)
        cpu_op = ctx.trace.strings.get(KinetoCat.CPU_OP)
        cat = ctx.trace.slices.cat
        out = []
        for r in src.tolist():
            for _ in range(8):
                if r < 0 or (cpu_op is not None and int(cat[r]) == cpu_op):
                    break
                i = int(searchsorted(n.rows, r))
                r = int(n.parent[i]) if i < len(n.rows) and n.rows[i] == r else -1
            if r >= 0:
                out.append(r)
        return sorted_unique(np.asarray(out, dtype=np.int64))

    return ctx.memo("dispatch_rows", build)  # type: ignore[no-any-return]


def _host_during(ctx: Context, lo: np.ndarray, hi: np.ndarray) -> dict[str, int]:
    """Time in the idle windows the host spent compiling, falling back, waiting, in collectives, in ops."""
    sl = ctx.trace.slices
    out = {}
    for kind in _PROBE_KINDS:
        rows = ctx.rows(kind)
        if len(rows):
            out[kind] = intersect_ns(sl.ts_ns[rows], sl.dur_ns[rows], lo, hi)
    host = ctx.rows(TrackKind.THREAD)
    ops = ctx.cat_rows(
        host, (KinetoCat.CPU_OP, KinetoCat.PYTHON, KinetoCat.CUDA_RUNTIME, KinetoCat.CUDA_DRIVER)
    )
    if len(ops):
        out["host_ops"] = intersect_ns(sl.ts_ns[ops], sl.dur_ns[ops], lo, hi)
    return out


@register(Kind.DEVICE_IDLE)
def device_idle(trace: Trace, ctx: Context) -> list[Finding]:
    """One finding per device: total idle time in gaps >= MIN_GAP_NS, the largest gaps and host activity."""
    rows = device_rows(ctx)
    if len(rows) < 2:
        return []
    sl = trace.slices
    proc = np.array([t.process for t in trace.tracks], dtype=np.int64)[sl.track[rows]]
    out = []
    for p in sorted_unique(proc):
        rs = rows[proc == p]
        s, e = merge(sl.ts_ns[rs], sl.dur_ns[rs])
        if len(s) < 2:
            continue
        gap_lo, gap_hi = e[:-1], s[1:]
        g = gap_hi - gap_lo
        big = np.flatnonzero(g >= MIN_GAP_NS)
        if not len(big):
            continue
        idle = int(g[big].sum())
        busy = int((e - s).sum())
        # idle time the host spent in compiles, fallbacks, syncs or collectives is those findings' cost;
        # this finding costs the rest (Python overhead, data loading, ... or nothing recorded)
        # compiles: the compile track and torch.compile's own phase spans (`steps.phases.compile_rows`), so host
        # time inside Dynamo/Inductor/a NEFF compile is never "not explained"; collectives: the collective
        # finding's own rows (`collective_rows`: gloo's spans where no collective track was recorded)
        probe = sorted_unique(np.concatenate([ctx.rows(k) for k in _PROBE_KINDS]
                                         + [compile_rows(ctx), collective_rows(trace, ctx)]))
        explained = (
            intersect_ns(sl.ts_ns[probe], sl.dur_ns[probe], gap_lo[big], gap_hi[big]) if len(probe) else 0
        )
        # host ops issuing device work in the gaps: eager dispatch, the price of running op by op (a host-bound
        # step), reported but not charged as if the host had been busy with something else
        both = np.concatenate([probe, dispatch_rows(ctx)])
        issued = (intersect_ns(sl.ts_ns[both], sl.dur_ns[both], gap_lo[big], gap_hi[big]) if len(both) else 0
                  ) - explained
        unexplained = idle - explained - issued
        # the host's run-queue wait in the unexplained part of the gaps: other processes' time, not the program's
        rq = runqueue(ctx)
        starved = 0
        if rq is not None:
            bs, be = merge(sl.ts_ns[both], sl.dur_ns[both])
            starved = min(rq.within(*difference(gap_lo[big], gap_hi[big], bs, be)), unexplained)
        cost = unexplained - starved
        share = ctx.share(cost)
        top = big[np.argsort(-g[big], kind="stable")[:10]]
        gaps: list[dict[str, Any]] = []
        for i in top:
            lo, hi = int(gap_lo[i]), int(gap_hi[i])
            gaps.append({"start_ns": lo, "dur_ns": hi - lo, "host": gap_host(ctx, lo, hi)})
        first = gaps[0]
        doing = str(first["host"]["what"])
        name = device_label(trace, int(p))
        title = (
            f"Device idle: {name} sat idle {fmt_ns(idle)} in {len(big)} gaps >= "
            f"{MIN_GAP_NS // 1000} µs (largest {fmt_ns(int(first['dur_ns']))}; host: {doing})"
        )
        if issued:
            title += f"; {fmt_ns(issued)} of it issuing ops (dispatch)"
        if explained or issued:
            title += f"; {fmt_ns(unexplained)} not explained by compiles, fallbacks, syncs, collectives or dispatch"
        if rq is not None and starved and starved >= MATERIAL * unexplained:
            title += f"; {'of that, ' if explained or issued else ''}{waited_text(rq, starved)} (not counted)"
        # the line where the host spent the most of these gaps
        by_site: dict[str, int] = {}
        for gp in gaps:
            if gp["host"]["call_site"]:
                by_site[gp["host"]["call_site"]] = by_site.get(gp["host"]["call_site"], 0) + int(gp["dur_ns"])
        site = max(by_site, key=lambda k: by_site[k]) if by_site else ""
        advice = (
            "The device waited for the host. Look at what the host did in the largest gaps: compiles "
            "(warm up, cache), CPU fallbacks, sync points (.item()), data loading (DataLoader workers, "
            "pin_memory, prefetch) or Python overhead (torch.compile the step, larger batches)."
        )
        if issued > cost:
            advice = ("The host could not issue ops as fast as the device ran them (eager dispatch of many small "
                      "ops): torch.compile the step, use larger batches, or fuse small ops. " + advice)
        sev = "critical" if share >= CRITICAL_IDLE else "warning" if share >= WARNING_IDLE else "info"
        during = _host_during(ctx, gap_lo[big], gap_hi[big])
        ev = {
            "device": name,
            "gaps": int(len(big)),
            "idle_ns": idle,
            "explained_ns": explained,
            "dispatch_ns": issued,
            "runqueue_wait_ns": starved,
            "loadavg": list(rq.loadavg) if rq is not None else None,
            "busy_ns": busy,
            "active_span_ns": int(e[-1] - s[0]),
            "largest": gaps,
            "host_during_idle_ns": during,
            **ctx.step_split(gap_lo[big], g[big]),
        }
        out.append(
            Finding(
                kind=Kind.DEVICE_IDLE,
                severity=sev,
                title=title,
                cost_ns=cost,
                share=share,
                count=int(len(big)),
                call_site=site,
                advice=advice,
                evidence=ev,
                ts_ns=int(first["start_ns"]),
            )
        )
    return out
