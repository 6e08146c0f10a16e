"""torch-neuronx adapter, written to the documented API (shared/design/torch-neuronx-facts.md).

The adapter receives a module object: the real ``torch_neuronx`` or a look-alike registered under the
same name in ``sys.modules`` (the emulated device does this). It cannot tell them apart and never tries to;
every API goes through `_compat` (the one door, each accessor marked with its source) because releases
differ. Runtime metrics are switched on for the capture and back off after when they were off. Signals used:

* names-only fallback list (``get_fallback_ops``) → per-call fallback events joined with op spans;
* compilation cache entries → eager first-call compile events (else stalls inferred from the trace);
* Dynamo compilation metrics (+ ``get_dynamo_metrics`` phases) → torch.compile events;
* ``torch.neuron.memory_stats`` (nested or flat) → memory counters, polled;
* the device timeline (device tracks, engine busy time, device collectives, HBM): only from the runtime's
  device profile, opt-in (``profile(device_profile=...)``): ``NeuronConfig`` / ``NeuronProfiler``, processed by
  neuron-explorer after the block (`probes.device_profile`), on Trainium and on the emulated device alike (the
  real package has no activity API). The PrivateUse1 profiler activity is asked for only then: on hardware it
  starts the runtime's capture (files, ~5 GB HBM). Kineto ``privateuse1_driver`` events stay as Kineto wrote
  them and get launch flows;
* sync points, float64 demotions and collectives measured around the Python calls.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from neuron_prof.backends import _compat
from neuron_prof.backends._adapter import ProbeBackend
from neuron_prof.backends.base import CaptureContext
from neuron_prof.backends.probes._probe import Probe

if TYPE_CHECKING:
    from neuron_prof.backends.probes.device_profile import DeviceProfileProbe

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
        self._device_profile: DeviceProfileProbe | None = None

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
                                            graph_names=graphs, waits=lambda: sync_probe.records))
        else:
            probes.append(StallProbe())
        dp = self._device_profile
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
        if self._device_profile is not None:
            probes.append(self._device_profile)
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
        if self._device_profile is not None and self._device_profile not in self.probes:
            self.probes.append(self._device_profile)  # asked for by name: probes=[...] does not drop it

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

    def enable_device_profile(self, output_dir: Path) -> None:
        """Capture the runtime's device profile into `output_dir` (``profile(device_profile=...)``): opt-in,
        since asking for the PrivateUse1 activity starts the runtime's capture, which writes files and, in
        DEVICE mode, reserves ~5 GB of HBM on Trn2 (torch-neuronx-facts, "Corrections")."""
        from neuron_prof.backends.probes.device_profile import DeviceProfileProbe

        self._device_profile = DeviceProfileProbe(output_dir)

    def export_trace(self, prof: Any) -> Path | None:
        """Export a profiler cycle through NeuronProfiler when a device profile is on; the trace.json it wrote
        (read by the session instead of a second export: Kineto saves a result once), else None."""
        dp = self._device_profile
        return dp.export_cycle(prof) if dp is not None else None

    def profiler_options(self) -> dict[str, Any]:
        """CPU only by default. With a device profile: PrivateUse1 too (when this torch supports it) and
        ``experimental_config=NeuronConfig(profile_output_dir=...)``."""
        from torch.profiler import ProfilerActivity

        acts = [ProfilerActivity.CPU]
        dp = self._device_profile
        if dp is None:
            return {"activities": acts}
        dp.output_dir.mkdir(parents=True, exist_ok=True)
        cfg = _compat.neuron_config(self.module, str(dp.output_dir))
        if cfg is None:
            self._device_profile = None
            raise RuntimeError("device_profile: this torch_neuronx has no profiling.NeuronConfig; no device "
                               "profile captured")
        dp.export = _compat.neuron_profiler_export(self.module, cfg)
        try:
            from torch.profiler import supported_activities

            if ProfilerActivity.PrivateUse1 in supported_activities():
                acts.append(ProfilerActivity.PrivateUse1)
        except Exception:  # noqa: BLE001
            pass
        return {"activities": acts, "experimental_config": cfg}


from neuron_prof.backends.probes.compile import CompileProbe  # noqa: E402


class NeuronDynamoProbe(CompileProbe):
    """torch.compile events with torch_neuronx's own phases (``get_dynamo_metrics``) joined by time."""

    def __init__(self, module: Any) -> None:
        super().__init__()
        self.module = module
        self._n_before = 0

    def start(self, ctx: CaptureContext) -> None:
        super().start(ctx)
        self._n_before = len(_compat.dynamo_metrics(self.module) or ())

    def stop(self, ctx: CaptureContext) -> None:
        super().stop(ctx)
        recs = (_compat.dynamo_metrics(self.module) or [])[self._n_before:]
        for r in recs:
            ts = _compat.timestamp_us(r.get("timestamp"))
            for m in self.records:
                start = getattr(m, "start_time_us", None) or 0
                dur = getattr(m, "duration_us", None) or 0
                if ts is not None and start <= ts <= start + dur + 1000:
                    cid = str(getattr(m, "compile_id", ""))
                    self.extra_phases[cid] = {k.removesuffix("_us"): int(v) * 1000 for k, v in r.items()
                                              if k.startswith("torch_neuronx_") and isinstance(v, (int, float))}
                    break

