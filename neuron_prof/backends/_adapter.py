"""ProbeBackend: a Backend made of probes, each guarded so one failure never stops the others.

Adapters (cpu, cuda, neuron) subclass it, pick their probes and profiler options. Options the user
passed to ``profile(...)`` are read from ``ctx.options``:

* ``probes``: names to keep (default: the adapter's defaults), e.g. ``["compile", "collectives"]``;
* ``deep_fallback``: True to add the dispatch-level fallback recorder (costs ~6–10 µs per op).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from neuron_prof.backends.base import CaptureContext
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.backends.probes.view import HostView
from neuron_prof.model import Meta

if TYPE_CHECKING:
    from neuron_prof.model import TraceBuilder

PROBE_OVERHEAD = Meta.PROBE_OVERHEAD
"""Metadata key: {probe name: ns} spent by each probe in the user's program (hooks while it ran + start/stop)."""
PROBE_HOOKS = Meta.PROBE_HOOKS
"""Metadata key: {probe name: ns} spent inside hooks while the user's code ran (wrappers, sampler thread)."""


class ProbeBackend:
    """Base adapter: runs its probes through start/stop/contribute and accounts for their cost."""

    name = "cpu"

    def __init__(self, probes: Sequence[Probe] | None = None) -> None:
        self._explicit = probes is not None
        self.probes: list[Probe] = list(probes) if probes is not None else []
        self._phase_ns: dict[str, int] = {}

    # ---- what subclasses override ---------------------------------------------------------
    def default_probes(self, ctx: CaptureContext) -> list[Probe]:
        """Probes this adapter runs when the user did not choose."""
        from neuron_prof.backends.probes.compile import CompileProbe

        return [CompileProbe()]

    def profiler_options(self) -> dict[str, Any]:
        from torch.profiler import ProfilerActivity

        return {"activities": [ProfilerActivity.CPU]}

    def deep_fallback_probe(self) -> Probe:
        """The opt-in dispatch-level fallback recorder (fallbacks judged from the dispatch table)."""
        from neuron_prof.backends.probes.fallback import DeepFallbackProbe

        return DeepFallbackProbe(self.name)

    # ---- the Backend protocol ---------------------------------------------------------------
    def start(self, ctx: CaptureContext) -> None:
        if not self._explicit:
            self.probes = self._select(ctx)
        for p in self.probes:
            self._guard(p, "start", ctx, p.start, ctx)

    def stop(self, ctx: CaptureContext) -> None:
        for p in reversed(self.probes):
            self._guard(p, "stop", ctx, p.stop, ctx)

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext) -> None:
        view = HostView(builder)
        for p in self.probes:
            self._guard(p, "contribute", ctx, p.contribute, builder, ctx, view)
        self._account(builder, ctx)

    # ---- helpers ----------------------------------------------------------------------------
    def probe(self, name: str) -> Probe | None:
        """The running probe called `name`, if any."""
        return next((p for p in self.probes if p.name == name), None)

    def _select(self, ctx: CaptureContext) -> list[Probe]:
        probes = self.default_probes(ctx)
        if ctx.options.get("deep_fallback"):
            deep = self.deep_fallback_probe()
            for p in probes:  # the reconstructing probe takes call sites from it instead of doubling events
                if p.name == "fallback" and hasattr(p, "deep"):
                    p.deep = deep
            probes.append(deep)
        wanted = ctx.options.get("probes")
        if wanted is not None:
            keep = set(wanted)
            probes = [p for p in probes if p.name in keep]
        return probes

    def _guard(self, probe: Probe, phase: str, ctx: CaptureContext, fn: Callable[..., None], *args: Any) -> None:
        t0 = time.perf_counter_ns()
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001  (a failing probe is recorded, never raised into user code)
            ctx.errors.append({"probe": probe.name, "phase": phase, "error": f"{type(e).__name__}: {e}"})
        finally:
            if phase != "contribute":  # start/stop run inside the profiled region's wall time
                self._phase_ns[probe.name] = self._phase_ns.get(probe.name, 0) + time.perf_counter_ns() - t0

    def _account(self, builder: TraceBuilder, ctx: CaptureContext) -> None:
        for p in self.probes:
            if getattr(p, "hook_errors", 0):
                ctx.errors.append({"probe": p.name, "phase": "hook",
                                   "error": f"{p.hook_errors} failure(s) inside hooks in the user's calls (ignored)"})
        per = {p.name: p.overhead_ns + self._phase_ns.get(p.name, 0) for p in self.probes}
        builder.metadata[PROBE_OVERHEAD] = per
        builder.metadata[PROBE_HOOKS] = {p.name: p.overhead_ns for p in self.probes}
        builder.metadata[Meta.BACKEND] = self.name
        prev = builder.metadata.get(Meta.OVERHEAD_NS)
        base = int(prev) if isinstance(prev, (int, float)) else 0
        builder.metadata[Meta.OVERHEAD_NS] = base + sum(per.values())
        builder.metadata[Meta.PROBE_ERRORS] = list(ctx.errors)
