"""Host run-queue samples: how long the profiled thread waited for a CPU while other processes ran.

Linux keeps three cumulative counters per thread in ``/proc/<pid>/task/<tid>/schedstat`` (kernel docs,
Documentation/scheduler/sched-stats.rst): time spent on the CPU (ns), time spent waiting on a run queue (ns),
and the number of timeslices run. A sample is one ``pread`` of that small file through a descriptor opened at
session start (about 1 µs of CPU; no device sync). Samples are taken at session start, at each step boundary
and at stop (a step's is its raw read, `at_steps`, parsed by `flush()`: no Python call inside the step), stored
as ``Meta.RUNQUEUE`` ``[[ts_ns, on_cpu_ns, runqueue_wait_ns], ...]``; ``/proc/loadavg``
at start and stop as ``Meta.LOADAVG``. Where the file does not exist (not Linux) nothing is stored; any other
failure is recorded as a probe error, never raised.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable

PROBE = "host_runqueue"
"""Probe name in ``probe_errors`` when a sample fails."""


def _loadavg() -> float | None:
    """The 1-minute load average (``/proc/loadavg``), or None where there is none."""
    try:
        with open("/proc/loadavg", "rb") as f:
            return float(f.read(64).split()[0])
    except (OSError, ValueError, IndexError):
        return None


class RunQueueSampler:
    """Cumulative schedstat samples of one thread of this process (see the module docstring)."""

    def __init__(self, tid: int, on_error: Callable[[BaseException], None]) -> None:
        self.samples: list[list[int]] = []
        self.loadavg: list[list[float | int]] = []
        self.at_steps: list[tuple[int, bytes]] = []
        """(ts_ns, raw schedstat) read by the session's step() itself through `fd` (one ``os.pread``: no Python
        call on the step's hot path), parsed into `samples` by `flush()`."""
        self._on_error = on_error
        self.fd: int | None = None
        """The open schedstat descriptor; None once closed or where there is none."""
        try:
            self.fd = os.open(f"/proc/{os.getpid()}/task/{tid}/schedstat", os.O_RDONLY)
        except FileNotFoundError:  # not Linux, or no schedstat in this kernel: nothing to sample
            self.close()
        except OSError as e:
            on_error(e)

    def sample(self) -> None:
        """One cumulative sample, now. A failure is reported once and ends the sampling."""
        if self.fd is None:
            return
        try:
            ts = time.time_ns()
            self.samples.append(_parse(ts, os.pread(self.fd, 64, 0)))
        except (OSError, ValueError, IndexError) as e:
            self._on_error(e)
            self.close()

    def load(self) -> None:
        """Note the machine's 1-minute load average, now."""
        la = _loadavg()
        if la is not None:
            self.loadavg.append([time.time_ns(), la])

    def flush(self) -> None:
        """The steps' raw reads join `samples`, in time order (the first that does not parse is reported, it and
        the rest dropped)."""
        if not self.at_steps:
            return
        raw, self.at_steps = self.at_steps, []
        parsed: list[list[int]] = []
        for ts, data in raw:
            try:
                parsed.append(_parse(ts, data))
            except (ValueError, IndexError) as e:
                self._on_error(e)
                break
        self.samples = sorted(self.samples + parsed)

    def close(self) -> None:
        """Close the descriptor (sampling ends); `flush()`."""
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
        self.flush()


def _parse(ts: int, data: bytes) -> list[int]:
    """[ts_ns, on_cpu_ns, runqueue_wait_ns] from one schedstat read."""
    fields = data.split()
    return [ts, int(fields[0]), int(fields[1])]
