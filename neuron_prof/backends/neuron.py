"""torch-neuronx adapter, written to the documented API (shared/design/torch-neuronx-facts.md).

The adapter receives a module object: the real ``torch_neuronx`` or a look-alike registered under the
same name in ``sys.modules`` (the emulated device does this). It cannot tell them apart and never tries to;
every API goes through `_compat` (the one door, each accessor marked with its source) because releases
differ. Runtime metrics are switched on for the capture and back off after when they were off. Signals used:

* names-only fallback list (``get_fallback_ops``) → per-call fallback events joined with op spans;
* compilation cache entries → eager first-call compile events (else stalls inferred from the trace);
* Dynamo compilation metrics (+ ``get_dynamo_metrics`` phases) → torch.compile events;
* ``torch.neuron.memory_stats`` (nested or flat) → memory counters, polled;
* the device timeline: the runtime's own capture (`probes.runtime_profile`), processed by neuron-explorer
  after the block, on Trainium and on the emulated device alike (the real package has no activity API): the
  system profile (executions on the device, runtime calls, host/device copies; no HBM reserve) in every session
  the session enables it for, the device profile (engines, collectives, HBM bandwidth, Summary; about 5 GB of
  HBM on Trn2) only in its step window. No second capture when the user set ``NEURON_RT_INSPECT_ENABLE=1``
  (reported). Kineto
  ``privateuse1_driver`` events stay as Kineto wrote them and get launch flows;
* sync points, float64 demotions and collectives measured around the Python calls.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from neuron_prof.backends import _compat
from neuron_prof.backends._adapter import ProbeBackend
from neuron_prof.backends.base import CaptureContext
from neuron_prof.backends.probes.probe import Probe

if TYPE_CHECKING:
    from neuron_prof.backends.probes.runtime_profile import RuntimeProfileProbe

MODULE_NAME = "torch_neuronx"
DEVICE = "neuron"


def find_neuron_module() -> ModuleType | None:
    """The torch_neuronx module of this process: already imported (``import torch`` autoloads it), else importable.

    A look-alike registers itself as ``sys.modules["torch_neuronx"]`` and is found the same way.
    """
    mod = sys.modules.get(MODULE_NAME)
    if mod is not None:
        return mod
    try:
        if importlib.util.find_spec(MODULE_NAME) is None:
            return None
        return importlib.import_module(MODULE_NAME)
    except Exception:  # noqa: BLE001  (a broken install is "not available", not a crash)
        return None


class NeuronBackend(ProbeBackend):
    """Adapter for tensors on a Neuron device."""

    name = "neuron"

    def __init__(self, module: Any | None = None, probes: list[Probe] | None = None) -> None:
        super().__init__(probes)
        self.module = module if module is not None else find_neuron_module()
        self._metrics_were_on = False
        self._metrics_switched = False
        self._runtime: RuntimeProfileProbe | None = None

    def default_probes(self, ctx: CaptureContext) -> list[Probe]:
        from neuron_prof.backends.probes.collectives import CollectivesProbe
        from neuron_prof.backends.probes.compile_cache import CompileCacheProbe
        from neuron_prof.backends.probes.device import KinetoDeviceLinkProbe
        from neuron_prof.backends.probes.dtype import DtypeProbe
        from neuron_prof.backends.probes.fallback import FallbackProbe
        from neuron_prof.backends.probes.memory import KinetoMemoryProbe, MemoryProbe
        from neuron_prof.backends.probes.stalls import StallProbe
        from neuron_prof.backends.probes.sync import SyncProbe

        mod = self.module
        sync = self._sync
        probes: list[Probe] = [NeuronDynamoProbe(mod)]
        sync_probe = SyncProbe(DEVICE)
        if _compat.cache_entries(mod) is not None:
            samples = None
            if _compat.metric_samples(mod, _compat.COMPILATION_TIME) is not None:
                samples = lambda: _compat.metric_samples(mod, _compat.COMPILATION_TIME)  # noqa: E731
            graphs = lambda: [str(r.get("graph_name") or "") for r in _compat.dynamo_metrics(mod) or ()]  # noqa: E731
            probes.append(CompileCacheProbe(lambda: _compat.cache_entries(mod), sync=sync, samples=samples,
                                            graph_names=graphs, waits=lambda: sync_probe.records,
                                            clear_owner=getattr(mod, "_C", None)))
        else:
            probes.append(StallProbe())
        dp = self._runtime
        if _compat.has_fallback_ops(mod):
            probes.append(FallbackProbe(lambda: _compat.fallback_ops(mod), _compat.op_tracking_clearer(mod), sync,
                                        d2h=(lambda: dp.d2h_hosts) if dp is not None else None))
        # host memory from Kineto's allocator events; the device's, polled (its allocator does not report to
        # the profiler) unless a later release does report them
        links = KinetoDeviceLinkProbe(lambda: _compat.profiler_mappings(mod),
                                      lambda on: _compat.set_profiler_mapping(mod, on))
        probes += [links, sync_probe, DtypeProbe(DEVICE), KinetoMemoryProbe(),
                   MemoryProbe(DEVICE, lambda: _compat.device_count(mod, DEVICE), _compat.memory_reader(mod, DEVICE),
                               lambda d: _compat.device_capacity(mod, DEVICE, d)), CollectivesProbe()]
        if self._runtime is not None:
            probes.append(self._runtime)
        return probes

    def start(self, ctx: CaptureContext) -> None:
        """Runtime metrics on for the capture (off by default: cache counters and compile-time samples would stay
        empty), then the probes."""
        try:
            self._metrics_were_on = _compat.metrics_enabled(self.module)
            if not self._metrics_were_on and _compat.set_metrics_enabled(self.module, True):
                self._metrics_switched = True
        except Exception as e:  # noqa: BLE001  (the profiler never breaks the user's program)
            ctx.errors.append({"probe": "metrics", "phase": "start", "error": f"{type(e).__name__}: {e}"})
        super().start(ctx)
        rp = self._runtime
        if rp is not None and rp not in self.probes:
            self.probes.append(rp)  # asked for by the session: probes=[...] does not drop it
        if rp is not None and rp.window is not None and rp.shape is None and not rp.conflict:
            ctx.errors.append({"probe": rp.name, "phase": "start", "error": "device_profile: this torch_neuronx has "
                               "no profiling API (NeuronConfig / NeuronProfiler): no device profile captured"})
        if rp is not None and rp.conflict:
            names = ", ".join(f"{k}={v}" for k, v in sorted(rp.conflict.items()))
            ctx.errors.append({"probe": rp.name, "phase": "start", "error": (
                f"{names}: the Neuron runtime captures on its own (into "
                f"{rp.conflict.get('NEURON_RT_INSPECT_OUTPUT_DIR', './output')}), so neuron-prof started no second "
                "capture (the SDK docs: do not set NEURON_RT_INSPECT_ENABLE=1 while using torch.profiler); process "
                "that folder with neuron-explorer view -d and load it, or unset NEURON_RT_INSPECT_ENABLE")})

    def stop(self, ctx: CaptureContext) -> None:
        """The probes, then metrics back to the state the capture found."""
        super().stop(ctx)
        if self._metrics_switched:
            self._metrics_switched = False
            try:
                _compat.set_metrics_enabled(self.module, False)
            except Exception as e:  # noqa: BLE001
                ctx.errors.append({"probe": "metrics", "phase": "stop", "error": f"{type(e).__name__}: {e}"})

    def deep_fallback_probe(self) -> Probe:
        """Dispatch-level recorder whose fallbacks are the ones torch_neuronx reports (exact per-call sites)."""
        from neuron_prof.backends.probes.fallback import DeepFallbackProbe

        mod = self.module
        report = (lambda: _compat.fallback_ops(mod)) if _compat.has_fallback_ops(mod) else None
        return DeepFallbackProbe(DEVICE, report)

    def _sync(self) -> None:
        _compat.synchronize(self.module, DEVICE)

    def enable_runtime_profile(self, run_dir: Path, device_window: tuple[int, int | None] | None = None,
                               kept: bool = True, host_usage: bool = False) -> None:
        """Capture the runtime's system profile into `run_dir` (and the device profile in `device_window`, steps
        [start, stop); with `host_usage`, ProfileMode CPU_UTIL and HOST_MEMORY too); processed by
        neuron-explorer after the block (`probes.runtime_profile`)."""
        from neuron_prof.backends.probes.runtime_profile import RuntimeProfileProbe, inspect_env

        self._runtime = RuntimeProfileProbe(run_dir, self.module, device_window, kept, host_usage)
        self._runtime.conflict = inspect_env()

    def enable_device_profile(self, output_dir: Path) -> None:
        """The runtime's capture with the device profile from the first step, into `output_dir`."""
        self.enable_runtime_profile(output_dir, (0, None))

    @property
    def runtime_profile(self) -> RuntimeProfileProbe | None:
        return self._runtime

    def cycle_boundaries(self) -> list[int]:
        """Steps after which the session's schedule must end a profiler cycle (the device profile's window)."""
        rp = self._runtime
        return rp.boundaries() if rp is not None and not rp.conflict else []

    def export_trace(self, prof: Any) -> Path | None:
        """Export a profiler cycle for the runtime's capture; the framework trace it wrote (read by the session
        instead of a second export: Kineto saves a result once), else None."""
        rp = self._runtime
        return rp.export_cycle(prof) if rp is not None and rp.configured else None

    def profiler_options(self) -> dict[str, Any]:
        """CPU, and with the runtime's capture the PrivateUse1 activity (when this torch supports it), its
        ``experimental_config`` (a ``NeuronConfig``) and ``with_modules=False``: the docs' supported profiler
        arguments with ``NeuronConfig`` do not include ``with_modules`` (issue 33; torch records module hierarchy
        with it for TorchScript models only)."""
        from torch.profiler import ProfilerActivity

        acts = [ProfilerActivity.CPU]
        rp = self._runtime
        cfg = rp.experimental_config() if rp is not None and not rp.conflict else None
        if cfg is None:
            return {"activities": acts}
        try:
            from torch.profiler import supported_activities

            if ProfilerActivity.PrivateUse1 in supported_activities():
                acts.append(ProfilerActivity.PrivateUse1)
        except Exception:  # noqa: BLE001
            pass
        return {"activities": acts, "experimental_config": cfg, "with_modules": False}


from neuron_prof.backends.probes.compile import CompileProbe  # noqa: E402


class NeuronDynamoProbe(CompileProbe):
    """torch.compile events with torch_neuronx's own phases (``get_dynamo_metrics``) joined by time."""

    def __init__(self, module: Any) -> None:
        super().__init__()
        self.module = module
        self._since_us = 0

    def start(self, ctx: CaptureContext) -> None:
        super().start(ctx)
        # get_dynamo_metrics() synchronizes the device: read once, at stop (records since now, by timestamp)
        self._since_us = time.time_ns() // 1000 - 1_000_000  # its strings are local time to the µs; 1 s of slack

    def stop(self, ctx: CaptureContext) -> None:
        super().stop(ctx)
        for r in _compat.dynamo_metrics(self.module) or []:
            ts = _compat.timestamp_us(r.get("timestamp"))
            if ts is not None and ts < self._since_us:
                continue
            for m in self.records:
                start = getattr(m, "start_time_us", None) or 0
                dur = getattr(m, "duration_us", None) or 0
                if ts is not None and start <= ts <= start + dur + 1000:
                    cid = str(getattr(m, "compile_id", ""))
                    self.extra_phases[cid] = {k.removesuffix("_us"): int(v) * 1000 for k, v in r.items()
                                              if k.startswith("torch_neuronx_") and isinstance(v, (int, float))}
                    break

