"""NEURON_PROF_MEMORY_LIMIT (issue 35 item 5): a budget the JSON loader keeps to when it chooses to stream a trace,
and what a job's local Dask workers get (their share of the machine, or the user's budget)."""

from __future__ import annotations

from pathlib import Path

import pytest
from distributed.system import MEMORY_LIMIT

from bench.gen_trace import write
from neuron_prof.job._cluster import worker_memory
from neuron_prof.loaders.json.stream import MEMORY_LIMIT_ENV, memory_room, stream_wanted


def test_a_trace_is_streamed_when_it_would_not_fit_the_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(20_000, tmp_path / "trace.json")  # ~6 MB: in memory it needs ~12 MB
    monkeypatch.delenv("NEURON_PROF_STREAM", raising=False)
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    assert not stream_wanted(path)
    free = memory_room()
    with open("/proc/self/status") as f:
        rss = next(int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmRSS:"))
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(rss + (16 << 20)))  # 16 MB above what this process holds
    assert memory_room() <= min(free, 16 << 20) + (8 << 20)
    assert stream_wanted(path)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(rss + (1 << 30)))
    assert not stream_wanted(path)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "lots")  # not a number: no budget
    assert memory_room() > 16 << 20


def test_local_workers_get_their_share_or_the_users_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    assert worker_memory(2) == MEMORY_LIMIT // 2
    assert worker_memory(16) == MEMORY_LIMIT // 16
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "2e9")
    assert worker_memory(2) == worker_memory(16) == 2_000_000_000
