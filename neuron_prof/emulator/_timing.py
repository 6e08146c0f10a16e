"""The device's timing: a roofline cost per op, a device clock that runs apart from the host, and the
activity buffer the runtime publishes.

The host issues work and goes on; each device keeps `free_at_ns`, the Unix ns when its queue drains. An op
issued at host time h starts at max(h, free_at) and lasts its modelled duration. A sync point sleeps the host
until free_at. Device durations come from the model, never from the CPU time the emulation itself takes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from neuron_prof.emulator._config import EmulatorConfig

STREAM_COMPUTE = 0
STREAM_DMA = 1
STREAM_COLLECTIVE = 2

KIND_OP, KIND_GRAPH, KIND_COPY_H2D, KIND_COPY_D2H, KIND_COLLECTIVE = 0, 1, 2, 3, 4
KIND_NAMES = ("op", "graph", "copy_h2d", "copy_d2h", "collective")

_MATMUL = {"mm", "addmm", "_addmm_activation", "bmm", "baddbmm"}
_LOWP = (torch.bfloat16, torch.float16)


def _nbytes(ts: Sequence[torch.Tensor]) -> int:
    n = 0
    for t in ts:
        n += t.numel() * t.element_size()
    return n


def op_cost(
    base: str, ins: Sequence[torch.Tensor], outs: Sequence[torch.Tensor]
) -> tuple[float, int, bool, bool]:
    """(FLOPs, bytes moved, runs on the matrix engine, low precision) of one aten op, from its operands."""
    nbytes = _nbytes(ins) + _nbytes(outs)
    lowp = bool(ins) and ins[-1].dtype in _LOWP
    try:
        if base in _MATMUL and len(ins) >= 2 and ins[-1].dim() >= 2:
            a, b = ins[-2], ins[-1]
            batch = a.shape[0] if a.dim() == 3 else 1
            return 2.0 * batch * a.shape[-2] * a.shape[-1] * b.shape[-1], nbytes, True, lowp
        if base.startswith("_scaled_dot_product") and len(ins) >= 3 and ins[1].dim() >= 2:
            q, k = ins[0], ins[1]
            f = 4.0 * q.numel() * k.shape[-2]
            return (f * 2.5 if base.endswith("backward") else f), nbytes, True, lowp
        if base.startswith("convolution") and len(ins) >= 2 and outs:
            w = ins[1] if base == "convolution" else ins[2]
            per_out = w.numel() // max(1, w.shape[0])
            return (
                2.0 * outs[0].numel() * per_out * (2 if base.endswith("backward") else 1),
                nbytes,
                True,
                lowp,
            )
    except (IndexError, RuntimeError):
        pass
    elems = 1
    for t in outs:
        if t.numel() > elems:
            elems = t.numel()
    if not outs:
        for t in ins:
            if t.numel() > elems:
                elems = t.numel()
    return float(elems), nbytes, False, lowp


def device_duration_ns(
    cfg: EmulatorConfig, flops: float, nbytes: int, matrix: bool, lowp: bool, launch_us: float | None = None
) -> int:
    """Roofline duration: launch + max(compute time, memory time), scaled."""
    peak = (cfg.peak_flops_bf16 if lowp else cfg.peak_flops_fp32) if matrix else cfg.peak_flops_vector
    body_s = max(flops / peak, nbytes / cfg.hbm_bytes_per_s)
    launch = cfg.op_launch_us if launch_us is None else launch_us
    return int(cfg.device_time_scale * (launch * 1e3 + body_s * 1e9))


def copy_duration_ns(cfg: EmulatorConfig, nbytes: int) -> int:
    return int(cfg.device_time_scale * (2e3 + nbytes / cfg.host_link_bytes_per_s * 1e9))


class Activity:
    """Ring buffer of device activity, as the runtime records it for its capture (see _runtime_capture).

    Each event is appended as one tuple (the cheapest thing to append on the per-op path); snapshot() hands
    them out as columns.
    """

    COLUMNS = (
        "device",
        "stream_id",
        "kind",
        "start_ns",
        "end_ns",
        "nrt_sequence_id",
        "seq_nr",
        "th_id",
        "host_ns",
    )

    def __init__(self, max_events: int) -> None:
        self.max_events = max_events
        self.rows: list[tuple[str, int, int, int, int, int, int, int, int, int]] = []
        self._next_seq = 1
        self.queue: Any = None
        """Launch mode (`EmulatorConfig.host_cost`): the device extension, whose queue takes every submission
        and records the ops it launches itself; `pull` moves its rows here."""
        self.on_launch: Callable[[str, int, int, int, int, int], None] | None = None
        """Called for each op the queue launched (name, host start and end, device start and end, NEFF cache
        entry), as pulled."""
        self.dropped = 0
        self.lock = threading.Lock()
        self.cc: dict[int, tuple[int, int]] = {}
        """nrt_sequence_id of a collective -> (bytes, ranks): what the runtime's CcOp rows report."""
        self.work: dict[int, tuple[float, int]] = {}
        """nrt_sequence_id of an op -> (FLOPs, bytes moved): what the device profile's counters report."""

    def append(
        self,
        name: str,
        device: int,
        stream: int,
        kind: int,
        start: int,
        end: int,
        seq_nr: int,
        th_id: int,
        host_ns: int,
    ) -> int:
        """Caller holds self.lock. Returns the nrt_sequence_id given to the event."""
        seq = self._next_seq
        self._next_seq = seq + 1
        rows = self.rows
        rows.append((name, device, stream, kind, start, end, seq, seq_nr, th_id, host_ns))
        if len(rows) > self.max_events + (self.max_events >> 3):
            self._trim()
        return seq

    @property
    def next_seq(self) -> int:
        """The nrt_sequence_id the next event gets."""
        return self._next_seq if self.queue is None else int(self.queue.queue_state()[1])

    def pull(self) -> None:
        """Caller holds self.lock. Launch mode: move the rows the extension's queue recorded into this buffer."""
        if self.queue is None:
            return
        rows, dropped = self.queue.queue_drain()
        self.dropped += dropped
        out, work, hook = self.rows, self.work, self.on_launch
        for name, stream, kind, start, end, seq, seq_nr, tid, host, host_end, flops, nbytes, launched, entry in rows:
            out.append((name, 0, stream, kind, start, end, seq, seq_nr, tid, host))
            if flops >= 0:
                work[seq] = (flops, nbytes)
            if launched and hook is not None:
                hook(name, host, host_end, start, end, entry)
        if len(out) > self.max_events + (self.max_events >> 3):
            self._trim()

    def drain(self) -> None:
        """`pull` under the lock (ground truth reads it before it answers)."""
        with self.lock:
            self.pull()

    def _trim(self) -> None:
        drop = len(self.rows) - self.max_events
        if drop > 0:
            self.dropped += drop
            del self.rows[:drop]
            first = self.rows[0][6] if self.rows else self._next_seq
            self.cc = {k: v for k, v in self.cc.items() if k >= first}
            self.work = {k: v for k, v in self.work.items() if k >= first}

    def snapshot(self, clear: bool = False) -> dict[str, Any]:
        """Columns as numpy int64 arrays plus `name` (list[str]), `kind_names` and `dropped`."""
        import numpy as np

        with self.lock:
            self.pull()
            self._trim()
            rows = self.rows
            if clear:
                self.rows = []
        n = len(rows)
        table = np.array([r[1:] for r in rows], dtype=np.int64).reshape(n, len(self.COLUMNS))
        out: dict[str, Any] = {c: np.ascontiguousarray(table[:, i]) for i, c in enumerate(self.COLUMNS)}
        out["name"] = [r[0] for r in rows]
        out["kind_names"] = KIND_NAMES
        out["dropped"] = self.dropped
        out["cc"] = dict(self.cc)
        out["work"] = dict(self.work)
        return out


class HardwareClock:
    """The device's own time counter: it started at device boot (hours before the host's Unix time of the
    run) and runs `drift_ppm` fast. The runtime's device profile records this clock; its system profile
    records host time, aligned through sync points (neuron-explorer-facts, "Processing")."""

    def __init__(self, offset_ns: int, drift_ppm: float, host_origin_ns: int | None = None) -> None:
        self.offset_ns = int(offset_ns)
        self.rate = 1.0 + drift_ppm * 1e-6
        self.origin = time.time_ns() if host_origin_ns is None else host_origin_ns

    def at(self, host_ns: Any) -> Any:
        """Device-clock ns at host Unix ns `host_ns` (an int or an int64 array)."""
        import numpy as np

        d = (np.asarray(host_ns, dtype=np.int64) - self.origin).astype(np.float64) * self.rate
        out = self.offset_ns + np.rint(d).astype(np.int64)
        return int(out) if np.ndim(out) == 0 else out


class DeviceClock:
    """One device's queue: when it is free, and how the host waits for it."""

    def __init__(self, index: int, activity: Activity, blocking: bool = False) -> None:
        self.index = index
        self._free_at_ns = 0
        self.activity = activity
        self.blocking = blocking
        """Every submitted op is synchronous: the host waits for it (``NEURON_LAUNCH_BLOCKING=1``)."""

    def submit(
        self,
        name: str,
        dur_ns: int,
        stream: int = STREAM_COMPUTE,
        kind: int = KIND_OP,
        seq_nr: int = -1,
        host_ns: int | None = None,
        not_before: int = 0,
        work: tuple[float, int] | None = None,
    ) -> tuple[int, int, int]:
        """Queue `dur_ns` of work issued now, starting no earlier than `not_before` (its NEFF is still
        compiling), doing `work` (FLOPs, bytes); returns (start_ns, end_ns, nrt_sequence_id)."""
        now = time.time_ns() if host_ns is None else host_ns
        tid = threading.get_native_id()
        queue = self.activity.queue
        if queue is not None:  # launch mode: the extension's queue orders these with the ops it launches
            flops, nbytes = work if work is not None else (-1.0, 0)
            start, end, seq = queue.queue_submit(name, dur_ns, stream, kind, seq_nr, tid, now, not_before, flops,
                                                 nbytes)
        else:
            with self.activity.lock:
                start = max(self._free_at_ns, now, not_before)
                end = start + dur_ns
                self._free_at_ns = end
                seq = self.activity.append(name, self.index, stream, kind, start, end, seq_nr, tid, now)
                if work is not None:
                    self.activity.work[seq] = work
        if self.blocking:
            self.wait()
        return start, end, seq

    @property
    def free_at_ns(self) -> int:
        """The Unix ns when this device's queue drains."""
        queue = self.activity.queue
        return self._free_at_ns if queue is None else int(queue.queue_state()[0])

    def wait(self) -> int:
        """Block the host until the device has drained its queue; returns the ns the host waited."""
        target = self.free_at_ns
        now = time.time_ns()
        if target <= now:
            return 0
        start = now
        while now < target:
            time.sleep((target - now) / 1e9)
            now = time.time_ns()
        return now - start
