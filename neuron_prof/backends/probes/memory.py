"""Memory probe: counter tracks per device (allocated, reserved) and the peak, marked with what was running.

Devices whose allocator does not report to the profiler (torch-neuronx) are polled by a sampler thread
(``memory_interval_ms`` option, default `DEFAULT_INTERVAL_MS`, longer when a sample costs more than `MAX_SHARE` of the interval: the
sampler holds the GIL while it reads) through the adapter's `read` callable; nested and flat
``memory_stats()`` shapes are both read (`_compat.memory_current`). The peak instant names the innermost
host op running at the peak sample and its call site.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from neuron_prof.backends.probes._common import site_args
from neuron_prof.backends.probes._hostops import ThreadOps
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.model import Arg, Cat, ProcessKind, TrackKind
from neuron_prof.model.schema import EventName

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder

DEFAULT_INTERVAL_MS = 20.0
"""Between samples by default. A sample costs its thread 60-200 us of CPU while a capture of the emulated device
runs (its ``memory_stats()`` read; 5 us outside a capture), so 20 ms keeps even the first samples, before
`MAX_SHARE` can stretch the interval, near 0.5% of the steps (issue 32: a polling probe under 1% of a step)."""
MAX_SHARE = 0.005
"""The sampler's CPU time at most this share of the time between samples (issue 32: a polling probe costs
under 1% of a step)."""
DEVICE_MEMORY = "device_memory_bytes"
"""Metadata key: the device's memory capacity in bytes (the largest, with several devices)."""
Reader = Callable[[int], "tuple[int | None, ...] | None"]
"""device index -> (allocated, reserved[, peak allocated]) bytes, or None when unreadable."""


class MemoryProbe(Probe):
    """Samples (allocated, reserved) of each device on a background thread while the capture runs."""

    name = "memory"

    def __init__(self, device_type: str, devices: Callable[[], int], read: Reader,
                 capacity: Callable[[int], int | None] | None = None) -> None:
        super().__init__()
        self.device_type, self._devices, self._read = device_type, devices, read
        self._capacity = capacity
        self.capacities: dict[int, int] = {}
        """Device index -> memory capacity in bytes, when the backend says."""
        self.samples: list[tuple[int, int, int | None, int | None]] = []  # (ts, device, allocated, reserved)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._n = 0
        self._peak0: dict[int, int] = {}
        self._peak1: dict[int, int] = {}

    def start(self, ctx: CaptureContext) -> None:
        self._n = max(int(self._devices()), 0)
        if not self._n:
            return
        interval = float(ctx.options.get("memory_interval_ms", DEFAULT_INTERVAL_MS)) / 1e3
        if self._capacity is not None:
            for d in range(self._n):
                cap = self._capacity(d)
                if cap:
                    self.capacities[d] = int(cap)
        self._peak0 = self._peaks()
        self._sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, args=(interval,), name="neuron-prof-memory", daemon=True)
        self._thread.start()

    def _loop(self, interval: float) -> None:
        wait = interval
        while not self._stop.wait(wait):
            # CPU time of this thread: wall time would count the waits for the GIL the user's code holds
            t0 = time.thread_time_ns()
            self._sample()
            cost = time.thread_time_ns() - t0
            self.overhead_ns += cost
            # the sampler holds the GIL while it reads: never more than MAX_SHARE of the time (a slow reader, or
            # the profiler's Python tracer recording this thread's calls, stretches the interval instead)
            wait = max(interval, cost / 1e9 / MAX_SHARE)

    def _sample(self) -> None:
        now = time.time_ns()
        for d in range(self._n):
            try:  # a failed or malformed read drops one sample, not the capture (this runs in a thread)
                got = self._read(d)
                if got is not None and got[0] is not None:  # no allocated figure: no sample
                    self.samples.append((now, d, int(got[0]), int(got[1]) if len(got) > 1 and got[1] is not None
                                         else None))
            except Exception:  # noqa: BLE001
                continue

    def stop(self, ctx: CaptureContext) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=2.0)
            self._thread = None
            self._sample()
            self._peak1 = self._peaks()

    def _peaks(self) -> dict[int, int]:
        out = {}
        for d in range(self._n):
            try:
                got = self._read(d)
                if got is not None and len(got) > 2 and got[2] is not None:
                    out[d] = int(got[2])
            except Exception:  # noqa: BLE001
                continue
        return out

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        if self.capacities:  # the memory_peak finding's "near capacity" test
            builder.metadata[DEVICE_MEMORY] = max(self.capacities.values())
        if not self.samples:
            return
        # devices whose allocator reported every allocation to the profiler already have exact counters
        have = {builder.tracks[t].name for t in set(builder.c_track)}
        self.samples = [smp for smp in self.samples if f"{self.device_type}:{smp[1]} allocated" not in have]
        if not self.samples:
            return
        tracks: dict[tuple[int, str], int] = {}
        peak: dict[int, tuple[int, int]] = {}
        for ts, d, alloc, res in self.samples:
            for label, v in (("allocated", alloc), ("reserved", res)):
                if v is None:
                    continue
                key = (d, label)
                if key not in tracks:
                    pid = f"{self.device_type}:{d}"
                    p = builder.process(pid, name=pid, kind=ProcessKind.DEVICE, sort_index=1000 + d)
                    tracks[key] = builder.track(p, f"{pid} {label}", TrackKind.MEMORY, unit="bytes")
                builder.add_counter(tracks[key], ts, float(v))
            if alloc is not None and alloc > peak.get(d, (-1, 0))[0]:
                peak[d] = (alloc, ts)
        ops = ThreadOps(view) if len(view) else None
        for d, (value, ts) in peak.items():
            args: dict[str, Any] = {Arg.BYTES: value, Arg.DEVICE: f"{self.device_type}:{d}"}
            reported = self._peak1.get(d)
            if reported is not None and reported > self._peak0.get(d, -1) and reported > value:
                # the allocator's own peak rose during the capture above every sample: its value is exact,
                # its time is the nearest sample's
                args.update(bytes=reported, sampled_bytes=value, approx_time=True)
            if ops is not None:
                r = ops.innermost(ctx.main_tid, ts, named=True) if ctx.main_tid else ops.any_thread(ts)
                if r >= 0:
                    args.update({Arg.OP: view.name_of(r), **site_args(view.site(r))})
            builder.add_instant(tracks[(d, "allocated")], ts, EventName.MEMORY_PEAK, Cat.MEMORY, args)


_DEVICE_TYPES = {0: "host", 1: "cuda", 20: "neuron"}
"""Kineto's ``Device Type`` in ``[memory]`` events (c10::DeviceType): 0 CPU, 1 CUDA, 20 PrivateUse1 (neuron)."""


class KinetoMemoryProbe(Probe):
    """Counters from the allocator events Kineto recorded (``[memory]`` instants, ``profile_memory=True``):
    "host allocated"/"host reserved" and "cuda:N allocated"/"cuda:N reserved", plus each one's peak."""

    name = "kineto_memory"

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        mid = builder.strings.get("[memory]")
        if mid is None:
            return
        rows = [i for i, n in enumerate(builder.i_name) if n == mid]
        series: dict[tuple[str, str], list[tuple[int, float]]] = {}
        for i in rows:
            k = builder.i_args[i]
            if k < 0:
                continue
            a = builder.args.get(k)
            dt = int(a.get("Device Type", 0) or 0)
            dev = _DEVICE_TYPES.get(dt, f"device{dt}")
            if dev != "host":
                dev = f"{dev}:{int(a.get('Device Id', 0) or 0)}"
            ts = builder.i_ts[i]
            for label, key in (("allocated", "Total Allocated"), ("reserved", "Total Reserved")):
                v = a.get(key)
                if isinstance(v, (int, float)):
                    series.setdefault((dev, label), []).append((ts, float(v)))
        host = builder.process(ctx.host_pid)
        for (dev, label), pts in sorted(series.items()):
            if dev == "host":
                track = builder.track(host, f"host {label}", TrackKind.MEMORY, unit="bytes")
            else:
                p = builder.process(dev, name=dev, kind=ProcessKind.DEVICE)
                track = builder.track(p, f"{dev} {label}", TrackKind.MEMORY, unit="bytes")
            pts.sort()
            for ts, v in pts:
                builder.add_counter(track, ts, v)
            if label == "allocated":
                ts, v = max(pts, key=lambda p: p[1])
                args: dict[str, Any] = {Arg.BYTES: int(v), Arg.DEVICE: dev}
                ops = ThreadOps(view) if len(view) else None
                r = ops.innermost(ctx.main_tid, ts, named=True) if ops is not None and ctx.main_tid else -1
                if r < 0 and ops is not None:
                    r = ops.any_thread(ts)
                if r >= 0:
                    args.update({Arg.OP: view.name_of(r), **site_args(view.site(r))})
                builder.add_instant(track, ts, EventName.MEMORY_PEAK, Cat.MEMORY, args)
