"""The torch_neuronx-shaped module: TorchNeuron's public names and return shapes, backed by the emulator.

The Neuron adapter receives either the real `torch_neuronx` or this module and uses only names both have
(shared/design/torch-neuronx-facts.md). Beyond the real API there is one addition, documented as the
emulated runtime's device-activity feed: `profiling.get_device_activity(clear=False)` (see below).
"""

from __future__ import annotations

import dataclasses
import enum
import types
from typing import Any

from neuron_prof.emulator import _state
from neuron_prof.emulator._dynamo_backend import get_dynamo_metrics, reset_dynamo_metrics


def _rt() -> _state.Runtime:
    assert _state.RUNTIME is not None
    return _state.RUNTIME


class ProfileMode(enum.Enum):
    DEVICE = "device"
    RUNTIME = "runtime"
    CPU_UTIL = "cpu_util"
    HOST_MEMORY = "host_memory"


@dataclasses.dataclass
class NeuronConfig:
    """Mirrors torch_neuronx.profiling.NeuronConfig (accepted; the emulator always records activity)."""

    modes: list[ProfileMode] = dataclasses.field(default_factory=lambda: [ProfileMode.DEVICE])
    max_events_per_nc: int = 1_000_000
    capture_enabled_for_nc: list[int] | None = None
    profile_output_dir: str | None = None
    neff_cache_dir: str | None = None


class NeuronProfiler:
    """Mirrors torch_neuronx.profiling.NeuronProfiler: `on_trace_ready=NeuronProfiler(cfg).export_trace`."""

    def __init__(self, config: NeuronConfig | None = None) -> None:
        self.config = config or NeuronConfig()

    def export_trace(self, prof: Any) -> None:
        import os

        out = self.config.profile_output_dir or "."
        os.makedirs(out, exist_ok=True)
        prof.export_chrome_trace(os.path.join(out, f"trace_{os.getpid()}.json"))


def get_device_activity(clear: bool = False) -> dict[str, Any]:
    """Device activity of the emulated runtime, columnar, one row per executed op / graph / copy / collective.

    Keys (numpy int64 arrays unless noted): `name` (list[str]: aten op as "aten::mm" / "aten::add.Tensor",
    graph name, "copy_h2d", "copy_d2h", "<op> (copy to host)", "allreduce"...), `device`, `stream_id`
    (0 compute, 1 DMA, 2 collectives), `kind` (index into `kind_names`: op, graph, copy_h2d, copy_d2h,
    collective), `start_ns`/`end_ns` (Unix ns on the device clock), `nrt_sequence_id` (unique, increasing),
    `seq_nr` (the issuing host op's autograd "Sequence number" as Kineto records it, for forward ops;
    otherwise the thread's counter), `th_id` (native thread id of the issuing host thread = Kineto's tid),
    `host_ns` (Unix ns when the host issued it, inside the issuing aten op's span), plus `dropped` (events
    lost to the ring buffer). The ring keeps the newest max_device_events; clear=True empties it.

    How to read it: snapshot before a capture (note the last nrt_sequence_id) and once after, then keep
    rows above that id; join each row to the innermost host cpu_op named `name` on thread `th_id` whose span
    holds `host_ns` (forward ops also match by `seq_nr`). Graph rows carry the get_dynamo_metrics graph_name.
    """
    return _rt().activity.snapshot(clear)


def _set_metrics_enabled(enabled: bool) -> None:
    """``torch_neuronx.metrics.set_enabled`` / ``_C._neuron_set_metrics_enabled`` (torch-neuronx-facts,
    "Corrections and additions"): runtime metrics are off unless enabled."""
    _rt().cache.metrics_enabled = bool(enabled)


def build_module(device_module: types.ModuleType) -> types.ModuleType:
    """Assemble the module published as torch_neuronx."""
    from neuron_prof.emulator._device import _index

    rt = _rt
    C = types.ModuleType("torch_neuronx._C")
    fns_c: dict[str, Any] = dict(
        _get_compilation_cache_entries=lambda: rt().cache.entries(),
        _get_compilation_cache_stats=lambda: rt().cache.stats(),
        _get_all_cache_keys=lambda: rt().cache.all_keys(),
        _clear_compilation_cache=lambda: rt().cache.clear(),
        _clear_compilation_memory_cache=lambda: rt().cache.clear(memory_only=True),
        _get_fallback_ops=device_module.get_fallback_ops,
        _get_executed_ops=device_module.get_executed_ops,
        _clear_op_tracking=device_module.clear_op_tracking,
        _get_memory_stats=lambda device_index: rt().memory[device_index].stats(),
        _reset_peak_memory_stats=lambda device_index: rt().memory[device_index].reset_peak(),
        _reset_accumulated_memory_stats=lambda device_index: rt().memory[device_index].reset_accumulated(),
        _neuron_counter_names=lambda: [k for k, v in rt().cache.counters.items() if v],
        _neuron_counter_value=lambda name: rt().cache.counters.get(name),
        _neuron_metric_names=lambda: [k for k, v in rt().cache.samples.items() if v],
        _neuron_metric_data=lambda name: rt().cache.metric_data(name),
        _neuron_metrics_enabled=lambda: rt().cache.metrics_enabled,
        _neuron_set_metrics_enabled=_set_metrics_enabled,
        _neuron_synchronize=lambda device_index=-1: device_module.synchronize(
            None if device_index < 0 else device_index
        ),
        _neuron_getDeviceCount=device_module.device_count,
        _neuron_getCurrentDevice=device_module.current_device,
        _get_logical_neuron_cores=lambda: "2",
        _get_platform_target=lambda: "trn2",
        _get_instance_type=lambda: "trn2.48xlarge",
    )
    for k, v in fns_c.items():
        setattr(C, k, v)

    profiling = types.ModuleType("torch_neuronx.profiling")
    for k, v in dict(
        ProfileMode=ProfileMode,
        NeuronConfig=NeuronConfig,
        NeuronProfiler=NeuronProfiler,
        get_device_activity=get_device_activity,
    ).items():
        setattr(profiling, k, v)

    metrics = types.ModuleType("torch_neuronx.metrics")
    metrics.set_enabled = _set_metrics_enabled  # type: ignore[attr-defined]

    m = types.ModuleType("torch_neuronx")
    m.__version__ = "0.1.0"  # type: ignore[attr-defined]
    m.metrics = metrics  # type: ignore[attr-defined]
    m._C = C  # type: ignore[attr-defined]
    m.profiling = profiling  # type: ignore[attr-defined]
    m.NeuronProfiler = NeuronProfiler  # type: ignore[attr-defined]
    m.neuron = device_module  # type: ignore[attr-defined]
    names = (
        "synchronize",
        "memory_stats",
        "memory_allocated",
        "max_memory_allocated",
        "memory_reserved",
        "max_memory_reserved",
        "reset_peak_memory_stats",
        "reset_accumulated_memory_stats",
        "memory_summary",
        "empty_cache",
        "device_count",
        "current_device",
        "set_device",
        "get_device_properties",
        "get_fallback_ops",
        "get_executed_ops",
        "clear_op_tracking",
    )
    for n in names:
        setattr(m, n, getattr(device_module, n))
    m.get_dynamo_metrics = get_dynamo_metrics  # type: ignore[attr-defined]
    m.reset_dynamo_metrics = reset_dynamo_metrics  # type: ignore[attr-defined]
    m.is_neuron_runtime_initialized = lambda: True  # type: ignore[attr-defined]
    m._get_device_index = lambda device=None, optional=False, allow_cpu=False: (  # type: ignore[attr-defined]
        None if device is None and optional else _index(device)
    )
    # torch.neuron.get_dynamo_metrics exists in the real device module too.
    device_module.get_dynamo_metrics = get_dynamo_metrics  # type: ignore[attr-defined]
    device_module.reset_dynamo_metrics = reset_dynamo_metrics  # type: ignore[attr-defined]
    return m
