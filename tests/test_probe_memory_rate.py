"""The memory probe's polling costs under 1% of the time it runs (issue 32): a sample that costs more than
`MAX_SHARE` of the default interval stretches the interval instead of taking the GIL from the user's steps."""

from __future__ import annotations

import time

from neuron_prof.backends.base import CaptureContext
from neuron_prof.backends.probes.memory import MAX_SHARE, MemoryProbe


def _costly_read(cpu_ns: int):  # type: ignore[no-untyped-def]
    """A device reader that spends `cpu_ns` of this thread's CPU per read (a slow runtime call)."""

    def read(d: int) -> tuple[int, int]:
        t0 = time.thread_time_ns()
        while time.thread_time_ns() - t0 < cpu_ns:
            pass
        return (1 << 20, 2 << 20)

    return read


def test_a_costly_sample_stretches_the_interval_under_one_percent() -> None:
    probe = MemoryProbe("emu", lambda: 1, _costly_read(2_000_000))  # 2 ms of CPU per read, default interval
    t0 = time.perf_counter_ns()
    probe.start(CaptureContext(options={}))
    time.sleep(1.5)
    probe.stop(CaptureContext(options={}))
    elapsed = time.perf_counter_ns() - t0
    # CPU time of the sampler over wall time: other processes' load only lengthens the wall time
    assert probe.samples and probe.overhead_ns / elapsed < min(2 * MAX_SHARE, 0.01), (probe.overhead_ns, elapsed)


def test_a_cheap_sample_keeps_the_default_rate() -> None:
    probe = MemoryProbe("emu", lambda: 1, lambda d: (1 << 20, 2 << 20))
    probe.start(CaptureContext(options={"memory_interval_ms": 5.0}))
    time.sleep(0.5)
    probe.stop(CaptureContext(options={}))
    assert len(probe.samples) >= 20  # ~100 at 5 ms on an idle machine; a loaded one still samples dozens
