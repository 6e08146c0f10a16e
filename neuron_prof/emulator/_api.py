"""The torch_neuronx-shaped module: TorchNeuron's public names and return shapes, backed by the emulator.

The Neuron adapter receives either the real `torch_neuronx` or this module and uses only names both have
(shared/design/torch-neuronx-facts.md). The device timeline reaches it as on Trainium: the runtime's capture
(`_runtime_capture`) processed by ``neuron-explorer`` (the stand-in `neuron_explorer`). The profiling API has the
SDK docs' shape (``NeuronConfig``, ``NeuronProfiler(cfg).export_trace``); the April source's context manager is
not emulated: that package needs torch ~=2.10 and Python < 3.11, so it cannot run beside neuron-prof (issue 33).
"""

from __future__ import annotations

import enum
import os
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from torch._C._profiler import _ExperimentalConfig

from neuron_prof.emulator import _state
from neuron_prof.emulator._dynamo_backend import get_dynamo_metrics, reset_dynamo_metrics
from neuron_prof.emulator._runtime_capture import INSTANCE_ID


def _rt() -> _state.Runtime:
    assert _state.RUNTIME is not None
    return _state.RUNTIME


class ProfileMode(enum.Enum):
    DEVICE = "device"
    RUNTIME = "runtime"
    CPU_UTIL = "cpu_util"
    HOST_MEMORY = "host_memory"


class NeuronConfig(_ExperimentalConfig):  # torch.profiler's experimental_config must be one
    """torch_neuronx.profiling.NeuronConfig (docs: modes default to [DEVICE, RUNTIME], output ./output)."""

    def __init__(self, modes: list[ProfileMode] | None = None, max_events_per_nc: int = 1_000_000,
                 capture_enabled_for_nc: str | None = None, profile_output_dir: str = "./output",
                 neff_cache_dir: str | None = None, precache_node_info: bool = True) -> None:
        super().__init__()
        self.modes = list(modes) if modes is not None else [ProfileMode.DEVICE, ProfileMode.RUNTIME]
        self.max_events_per_nc = max_events_per_nc
        self.capture_enabled_for_nc = capture_enabled_for_nc
        self.profile_output_dir = profile_output_dir
        self.neff_cache_dir = neff_cache_dir
        self.precache_node_info = precache_node_info


class NeuronProfiler:
    """torch_neuronx.profiling.NeuronProfiler (docs): ``on_trace_ready=NeuronProfiler(cfg).export_trace`` writes
    torch.profiler's trace.json and ``framework_mapping_<ts>.json`` into the capture folder the runtime wrote for
    the cycle (``<profile_output_dir>/<instance-id>_pid_<pid>/<timestamp>/``, `_runtime_capture`)."""

    def __init__(self, config: NeuronConfig | None = None) -> None:
        self.config = config or NeuronConfig()

    def export_trace(self, prof: Any) -> None:
        cap = _rt().last_capture
        if cap is None or cap.folder is None or cap.folder.parent.parent != Path(self.config.profile_output_dir):
            folder = Path(self.config.profile_output_dir) / f"{INSTANCE_ID}_pid_{os.getpid()}" / time.strftime(
                "%Y%m%d_%H%M%S")  # no runtime capture for this cycle: the framework trace alone
            folder.mkdir(parents=True, exist_ok=True)
            prof.export_chrome_trace(str(folder / "trace.json"))
            return
        prof.export_chrome_trace(str(cap.folder / "trace.json"))
        write_mapping(cap.folder, cap.folder.name, cap.first_seq, cap.last_seq)


def write_mapping(folder: Path, stamp: str, first_seq: int, last_seq: int) -> None:
    """``framework_mapping_<ts>.json`` (torch-neuronx-facts, "Profiler" and "Corrections"): each runtime execution
    of the capture with the op that submitted it (autograd seq_nr, the thread as a small per-thread counter like
    RecordFunction's ``th_id``, stream). Empty (``"data": []``) under ``NEURON_LAUNCH_BLOCKING=1``, which the SDK
    documents as incompatible with framework mapping (`EmulatorConfig.blocking_execution`; issue 33)."""
    if _rt().cfg.blocking_execution:
        (folder / f"framework_mapping_{stamp}.json").write_bytes(orjson.dumps({"version": 1, "data": []}))
        return
    act = _rt().activity.snapshot()
    seq = act["nrt_sequence_id"]
    th: dict[int, int] = {}
    data = []
    for i in np.flatnonzero((seq >= first_seq) & (seq < last_seq)).tolist():
        t = th.setdefault(int(act["th_id"][i]), len(th) + 1)
        data.append({"nrta_seq_id": int(seq[i]), "framework_op_exec_ids": [
            {"seq_nr": int(act["seq_nr"][i]), "th_id": t, "stream_id": int(act["stream_id"][i])}]})
    (folder / f"framework_mapping_{stamp}.json").write_bytes(orjson.dumps({"version": 1, "data": data}))


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
        _neuron_counter_names=lambda: [k for k, v in rt().cache.fresh().counters.items() if v],
        _neuron_counter_value=lambda name: rt().cache.fresh().counters.get(name),
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
    for k, v in dict(ProfileMode=ProfileMode, NeuronConfig=NeuronConfig, NeuronProfiler=NeuronProfiler).items():
        setattr(profiling, k, v)

    metrics = types.ModuleType("torch_neuronx.metrics")
    metrics.set_enabled = _set_metrics_enabled  # type: ignore[attr-defined]

    m = types.ModuleType("torch_neuronx")
    m.__version__ = "0.1.0"  # type: ignore[attr-defined]
    m.metrics = metrics  # type: ignore[attr-defined]
    m._C = C  # type: ignore[attr-defined]
    m.profiling = profiling  # type: ignore[attr-defined]
    m.NeuronProfiler = profiling.NeuronProfiler  # type: ignore[attr-defined]
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
