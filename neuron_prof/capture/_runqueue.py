"""Host run-queue samples: how long the profiled thread waited for a CPU while other processes ran.

Linux keeps three cumulative counters per thread in ``/proc/<pid>/task/<tid>/schedstat`` (kernel docs,
Documentation/scheduler/sched-stats.rst): time spent on the CPU (ns), time spent waiting on a run queue (ns),
and the number of timeslices run. A sample is one ``pread`` of that small file through a descriptor opened at
session start (about 1 µs of CPU; no device sync). Samples are taken at session start, at each step boundary
and at stop, and stored as ``Meta.RUNQUEUE`` ``[[ts_ns, on_cpu_ns, runqueue_wait_ns], ...]``; ``/proc/loadavg``
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
        self._on_error = on_error
        self._fd: int | None = None
        try:
            self._fd = os.open(f"/proc/{os.getpid()}/task/{tid}/schedstat", os.O_RDONLY)
        except FileNotFoundError:  # not Linux, or no schedstat in this kernel: nothing to sample
            self.close()
        except OSError as e:
            on_error(e)

    def sample(self) -> None:
        """One cumulative sample, now. A failure is reported once and ends the sampling."""
        if self._fd is None:
            return
        try:
            ts = time.time_ns()
            fields = os.pread(self._fd, 64, 0).split()
            self.samples.append([ts, int(fields[0]), int(fields[1])])
        except (OSError, ValueError, IndexError) as e:
            self._on_error(e)
            self.close()

    def load(self) -> None:
        """Note the machine's 1-minute load average, now."""
        la = _loadavg()
        if la is not None:
            self.loadavg.append([time.time_ns(), la])

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
