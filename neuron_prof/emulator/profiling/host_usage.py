"""The emulated runtime's ``CPU_UTIL`` and ``HOST_MEMORY`` capture modes: host CPU utilisation per core and host
memory in use, sampled while a capture runs, written as ``cpu_util.pb`` / ``host_mem.pb`` (the emulator's own
NumPy contents under the documented names) and turned into the ``CpuUsage`` / ``HostMemUsage`` tables by the
stand-in ``neuron-explorer``.

Sources: neuron-explorer-facts "Capture" (CPU_UTIL → ``cpu_util.pb``; HOST_MEMORY → ``host_mem.pb``), aws-neuron-sdk
profile-artifacts.rst (a system profile's optional ``cpu_util.pb``, ``host_mem.pb``), schema 7.4.0 (``CpuUsage``:
``timestamp`` [ns], ``util_percent`` [%], ``cpu_id``, ``instance_id``; ``HostMemUsage``: ``timestamp`` [ns],
``used_bytes``, ``used_percent``, ``instance_id``). Read from ``/proc/stat`` and ``/proc/meminfo`` (none off Linux).
"""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

CPU_MODE, MEM_MODE = "CPU_UTIL", "HOST_MEMORY"
CPU_FILE, MEM_FILE = "cpu_util.pb", "host_mem.pb"
SAMPLE_EVERY_S = 0.1
"""One sample per 100 ms of capture, and one at its stop."""


def _cpu_times() -> dict[str, tuple[int, int]]:
    """``/proc/stat``: cpu id ("all", "0", "1"...) -> (busy jiffies, total jiffies)."""
    out: dict[str, tuple[int, int]] = {}
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        if not line.startswith("cpu"):
            continue
        name, *vals = line.split()
        v = [int(x) for x in vals[:8]]
        idle = v[3] + (v[4] if len(v) > 4 else 0)
        out["all" if name == "cpu" else name[3:]] = (sum(v) - idle, sum(v))
    return out


def _memory() -> tuple[int, float] | None:
    """``/proc/meminfo``: (bytes in use = MemTotal - MemAvailable, percent of MemTotal)."""
    try:
        info = {k: int(v.split()[0]) * 1024 for k, v in
                (line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)}
    except (OSError, ValueError):
        return None
    total, avail = info.get("MemTotal"), info.get("MemAvailable")
    if not total or avail is None:
        return None
    return total - avail, 100.0 * (total - avail) / total


class HostSampler:
    """Samples the asked modes on a daemon thread from `start` to `stop`."""

    def __init__(self, modes: frozenset[str]) -> None:
        self.cpu, self.mem = CPU_MODE in modes, MEM_MODE in modes
        self.cpu_rows: list[tuple[int, str, float]] = []
        self.mem_rows: list[tuple[int, int, float]] = []
        self._last = _cpu_times() if self.cpu else {}
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self.cpu or self.mem

    def start(self) -> None:
        if not self.active:
            return
        self._sample()
        self._thread = threading.Thread(target=self._run, name="neuron-emulated-host-usage", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(SAMPLE_EVERY_S):
            self._sample()

    def _sample(self) -> None:
        now = time.time_ns()
        if self.cpu:
            cur = _cpu_times()
            for k, (busy, total) in cur.items():
                b0, t0 = self._last.get(k, (0, 0))
                if total > t0:
                    self.cpu_rows.append((now, k, 100.0 * (busy - b0) / (total - t0)))
            self._last = cur
        if self.mem:
            m = _memory()
            if m is not None:
                self.mem_rows.append((now, m[0], m[1]))

    def stop(self, folder: Path) -> None:
        """End sampling (one last sample) and write the files of the asked modes into `folder`."""
        if not self.active:
            return
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        self._sample()
        if self.cpu:
            _npz(folder / CPU_FILE, timestamp=np.asarray([r[0] for r in self.cpu_rows], dtype=np.int64),
                 cpu_id=np.asarray([r[1] for r in self.cpu_rows], dtype=str),
                 util_percent=np.asarray([r[2] for r in self.cpu_rows], dtype=np.float64))
        if self.mem:
            _npz(folder / MEM_FILE, timestamp=np.asarray([r[0] for r in self.mem_rows], dtype=np.int64),
                 used_bytes=np.asarray([r[1] for r in self.mem_rows], dtype=np.int64),
                 used_percent=np.asarray([r[2] for r in self.mem_rows], dtype=np.float64))


def tables(cap: Path, instance: str) -> dict[str, dict[str, list[Any]]]:
    """The ``CpuUsage`` / ``HostMemUsage`` columns of a capture folder's files (the stand-in explorer's)."""
    out: dict[str, dict[str, list[Any]]] = {}
    for name, table, cols in ((CPU_FILE, "CpuUsage", ("timestamp", "cpu_id", "util_percent")),
                              (MEM_FILE, "HostMemUsage", ("timestamp", "used_bytes", "used_percent"))):
        f = cap / name
        if not f.is_file():
            continue
        with np.load(f, allow_pickle=False) as z:
            got = {c: z[c].tolist() for c in cols}
        got["instance_id"] = [instance] * len(got["timestamp"])
        out[table] = got
    return out


def _npz(path: Path, **arrays: Any) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    path.write_bytes(buf.getvalue())
