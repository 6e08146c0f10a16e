"""Host run-queue samples (Linux schedstat of the profiled thread): taken at start, each step and stop, cumulative."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from neuron_prof.capture._runqueue import RunQueueSampler

pytestmark = pytest.mark.skipif(not Path("/proc/thread-self/schedstat").exists(), reason="Linux schedstat only")


def _sample_thread(work: str) -> tuple[list[list[int]], list[BaseException], int]:
    """Two samples of a real thread around 60 ms of `work` ("busy": a loop on the CPU; "sleep": blocked), and the
    CPU time the thread itself measured between them (CLOCK_THREAD_CPUTIME_ID)."""
    errors: list[BaseException] = []
    out: list[list[int]] = []
    cpu: list[int] = []

    # The kernel brings a running thread's count up to date at each tick and context switch, so a count read while
    # running may lag by up to a tick: a short sleep before each sample makes it current.
    def run() -> None:
        s = RunQueueSampler(threading.get_native_id(), errors.append)
        time.sleep(0.001)
        s.sample()
        cpu.append(time.thread_time_ns())
        if work == "busy":
            cpu0 = time.thread_time_ns()
            while time.thread_time_ns() - cpu0 < 60_000_000:  # 60 ms of this thread's own CPU time
                pass
        else:
            time.sleep(0.06)
        cpu.append(time.thread_time_ns())
        time.sleep(0.001)
        s.sample()
        s.close()
        out.extend(s.samples)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out, errors, cpu[1] - cpu[0]


def test_samples_grow_with_the_threads_cpu_time_not_with_sleep() -> None:
    busy, e1, busy_thread_cpu = _sample_thread("busy")
    idle, e2, _ = _sample_thread("sleep")
    assert not e1 and not e2
    assert len(busy) == len(idle) == 2
    for (t0, cpu0, wait0), (t1, cpu1, wait1) in (busy, idle):
        assert t1 > t0 and cpu1 >= cpu0 and wait1 >= wait0  # cumulative counters
    busy_cpu = busy[1][1] - busy[0][1]
    idle_cpu = idle[1][1] - idle[0][1]
    # the first field is the thread's CPU time: what the thread measured itself, plus the sampling around it
    assert busy_thread_cpu >= 60_000_000
    assert busy_thread_cpu <= busy_cpu < busy_thread_cpu + 5_000_000
    wall = busy[1][0] - busy[0][0]
    assert busy[1][2] - busy[0][2] <= wall - busy_thread_cpu + 5_000_000  # the second: waiting, not running
    assert idle_cpu < 20_000_000  # a sleeping thread is not on a CPU


def test_a_failing_sample_is_recorded_and_ends_sampling() -> None:
    errors: list[BaseException] = []
    s = RunQueueSampler(threading.get_native_id(), errors.append)
    s.sample()
    import os

    assert s.fd is not None
    os.close(s.fd)  # the descriptor goes away under the sampler (as a failing read would)
    s.sample()
    s.sample()
    assert len(s.samples) == 1 and len(errors) == 1 and isinstance(errors[0], OSError)


def test_no_schedstat_file_means_no_samples_and_no_error() -> None:
    errors: list[BaseException] = []
    s = RunQueueSampler(2**31 - 7, errors.append)  # no such thread in this process
    s.sample()
    assert s.samples == [] and errors == []
