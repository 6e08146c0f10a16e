"""The one emulated runtime per process: config, device clocks, memory, NEFF cache, op tracking."""

from __future__ import annotations

import threading
import time
from typing import Any

from neuron_prof.emulator._compile_cache import CompileCache
from neuron_prof.emulator._config import EmulatorConfig
from neuron_prof.emulator._groundtruth import GroundTruth
from neuron_prof.emulator._memory import DeviceMemory, ExtMemory
from neuron_prof.emulator._timing import Activity, DeviceClock, HardwareClock


class _Local(threading.local):
    in_graph: bool = False
    """True while a torch.compile graph runs: its ops pay no eager compile and no per-op device record."""
    graph_ns: int = 0
    """Device ns accumulated by the ops of the running graph."""


class Runtime:
    """State of the emulated Neuron runtime (process-global, created once by enable())."""

    def __init__(self, cfg: EmulatorConfig) -> None:
        self.cfg = cfg
        self.gt = GroundTruth(cfg.ground_truth, cfg.max_ground_truth_events)
        self.activity = Activity(cfg.max_device_events)
        self.clocks = [DeviceClock(i, self.activity, cfg.blocking_execution) for i in range(cfg.num_devices)]
        self.hw_clock = HardwareClock(cfg.device_clock_offset_ns, cfg.device_clock_drift_ppm)
        """The device's own clock, which its device profile records (`_runtime_capture`)."""
        self.capture: Any = None
        """The runtime's capture while torch.profiler runs with a Neuron config (`_runtime_capture.Capture`)."""
        self.last_capture: Any = None
        """The last capture written (``NeuronProfiler.export_trace`` puts trace.json and the mapping there)."""
        self.memory: list[DeviceMemory | ExtMemory] = [
            DeviceMemory(i, cfg.memory_capacity_bytes, cfg.reserve_granularity_bytes)
            for i in range(cfg.num_devices)
        ]
        self.cache = CompileCache(cfg.cache_dir, cfg.disk_load_ms, self.gt)
        self.fallback_names: set[str] = set()
        self.executed_names: set[str] = set()
        self.warned_f64: set[str] = set()
        self.current_device = 0
        self.local = _Local()

    def sync_all(self) -> int:
        """Wait for every device; returns the ns waited."""
        return sum(c.wait() for c in self.clocks)


RUNTIME: Runtime | None = None


def sync_point(dev: int, reason: str) -> int:
    """The host waits for device `dev` (or every device when dev < 0); returns ns waited."""
    rt = RUNTIME
    if rt is None:
        return 0
    t0 = time.time_ns()
    waited = rt.sync_all() if dev < 0 else rt.clocks[dev].wait()
    rt.gt.add("sync", reason, t0, time.time_ns(), max(dev, 0), detail=waited)
    return waited
