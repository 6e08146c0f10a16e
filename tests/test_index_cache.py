"""The columnar index beside a trace: exact round trip, invalidated when the file changes."""

from __future__ import annotations

import os

import numpy as np

from neuron_prof.loaders import _cache
from neuron_prof.model import TraceBuilder, TrackKind


def _trace():
    b = TraceBuilder()
    t = b.thread_track(1, 2, "main ✓")
    m = b.track(0, "mem", TrackKind.MEMORY, unit="bytes")
    for k in range(1000):
        s = b.add_slice(t, k * 100, 50, f"op{k % 7}", "cpu_op", {"k": k} if k % 2 else None)
        if k % 10 == 0:
            b.add_flow(s - 1 if k else s, s, flow_id=k + 1)
    b.add_instant(t, 5, "[memory]", args={"Bytes": 3})
    b.add_counter(m, 7, 2.5)
    b.metadata.update(rank=1, wall_ns=[0, 100_000])
    b.findings.append({"kind": "sync_point"})
    return b.build()


def test_index_round_trip_and_invalidation(tmp_path) -> None:
    src = tmp_path / "t.json"
    src.write_bytes(b"x" * (_cache.MIN_SIZE + 10))
    tr = _trace()
    assert _cache.load_cached(src) is None
    where = _cache.save_cached(src, tr)
    assert where is not None and where.exists()
    got = _cache.load_cached(src)
    assert got is not None
    for tab in ("slices", "instants", "counters", "flows"):
        a, b = getattr(tr, tab), getattr(got, tab)
        for col in a.DTYPES:
            assert np.array_equal(getattr(a, col), getattr(b, col)), (tab, col)
    assert got.strings.as_list() == tr.strings.as_list()
    assert got.tracks == tr.tracks and got.processes == tr.processes
    assert got.slice_args(1) == {"k": 1} and got.metadata["rank"] == 1 and got.findings == tr.findings
    # GIVEN the file changes WHEN loading THEN the index is ignored
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert _cache.load_cached(src) is None


def test_small_files_and_disabled_cache_write_nothing(tmp_path, monkeypatch) -> None:
    src = tmp_path / "small.json"
    src.write_bytes(b"{}")
    assert _cache.save_cached(src, _trace()) is None
    big = tmp_path / "big.json"
    big.write_bytes(b"x" * (_cache.MIN_SIZE + 1))
    monkeypatch.setenv("NEURON_PROF_CACHE", "0")
    assert _cache.save_cached(big, _trace()) is None and _cache.load_cached(big) is None


def test_damaged_index_is_ignored(tmp_path) -> None:
    src = tmp_path / "t.json"
    src.write_bytes(b"x" * (_cache.MIN_SIZE + 10))
    where = _cache.save_cached(src, _trace())
    where.write_bytes(b"garbage")
    assert _cache.load_cached(src) is None
