"""The columnar index of a trace: exact round trip, invalidated when the file changes; kept in the user's
cache folder (never beside the trace), never larger than the trace, within a size budget."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import orjson
import pytest

from neuron_prof.loaders import _cache, load
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
    (where / "head").write_bytes(b"garbage")
    assert _cache.load_cached(src) is None
    where2 = _cache.save_cached(src, _trace())
    (where2 / "slices.ts_ns").write_bytes(b"short")  # a column cut short: mapping it fails
    assert _cache.load_cached(src) is None


# ---- where the index goes: the user's cache folder, never beside the trace --------------------------
@pytest.fixture
def default_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The defaults a user has: no NEURON_PROF_CACHE_DIR (conftest sets one for the session), a private
    XDG_CACHE_HOME. Returns the folder indexes must go to."""
    monkeypatch.delenv("NEURON_PROF_CACHE_DIR", raising=False)
    monkeypatch.delenv("NEURON_PROF_CACHE_MAX_BYTES", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path / "xdg" / "neuron-prof"


def _kineto_file(path: Path, n: int = 20_000) -> Path:
    """A real Kineto-style JSON file above MIN_SIZE (its index is a fraction of it)."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": f"aten::op{k % 50}", "pid": 1, "tid": 1, "ts": k * 10.0,
           "dur": 5.0, "args": {"External id": k, "Sequence number": k}} for k in range(n)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps({"traceEvents": ev, "baseTimeNanoseconds": 1_700_000_000_000_000_000}))
    assert path.stat().st_size > _cache.MIN_SIZE
    return path


def test_index_goes_to_the_user_cache_folder_not_beside_the_trace(tmp_path: Path, default_location: Path) -> None:
    src = _kineto_file(tmp_path / "traces" / "t.json")
    first = load(src)
    # THEN the index is in $XDG_CACHE_HOME/neuron-prof and the trace's folder holds only the trace
    assert sorted(p.name for p in src.parent.iterdir()) == ["t.json"]
    idx = _cache.index_path(src)
    assert idx is not None and idx.parent == default_location and idx.is_dir()
    assert idx.stat().st_size < src.stat().st_size
    # and the second load comes from it: the JSON parser is not called again
    import neuron_prof.loaders.json.reader as kj

    def no_parse(*a: object, **k: object) -> None:
        raise AssertionError("parsed again")

    with pytest.MonkeyPatch.context() as m:
        m.setattr(kj, "load_kineto_json", no_parse)
        again = load(src)
    assert np.array_equal(again.slices.ts_ns, first.slices.ts_ns) and len(again.slices) == 20_000


def test_without_xdg_the_index_goes_to_home_cache(tmp_path: Path, default_location: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "t.json"
    src.write_bytes(b"x" * (_cache.MIN_SIZE + 10))
    for xdg in (None, "relative/cache"):  # unset, or relative (invalid per the XDG spec)
        if xdg is None:
            monkeypatch.delenv("XDG_CACHE_HOME")
        else:
            monkeypatch.setenv("XDG_CACHE_HOME", xdg)
        where = _cache.save_cached(src, _trace())
        assert where is not None and where.parent == tmp_path / "home" / ".cache" / "neuron-prof"
    # NEURON_PROF_CACHE_DIR still wins
    monkeypatch.setenv("NEURON_PROF_CACHE_DIR", str(tmp_path / "mine"))
    assert _cache.save_cached(src, _trace()).parent == tmp_path / "mine"  # type: ignore[union-attr]
    assert not (tmp_path / ".t.json.nprof").exists()


def test_an_index_from_the_old_place_beside_the_trace_is_not_needed_or_read(tmp_path: Path,
                                                                          default_location: Path) -> None:
    src = _kineto_file(tmp_path / "t.json", n=15_000)
    # GIVEN a valid index an older release wrote beside the trace, holding a different trace
    old = src.with_name(f".{src.name}.nprof")
    old.mkdir()
    from neuron_prof.loaders import coldir
    coldir.write_trace(old, _trace(), _cache._key(src))
    assert _cache.load_cached(src) is None
    tr = load(src)  # parsed from the file, not taken from the old index
    assert len(tr.slices) == 15_000
    assert _cache.load_cached(src) is not None and _cache.index_path(src).parent == default_location  # type: ignore[union-attr]


def test_an_index_larger_than_its_trace_is_not_written(tmp_path: Path, default_location: Path) -> None:
    b = TraceBuilder()
    t = b.thread_track(1, 1)
    for k in range(200_000):  # ~9 MB of columns
        b.add_slice(t, k, 1, f"op{k % 9}", "cpu_op")
    tr = b.build()
    src = tmp_path / "t.json.gz"  # a compressed trace: a few MB for that many events
    src.write_bytes(b"\x1f\x8b" + b"x" * (_cache.MIN_SIZE + 10))
    assert _cache.save_cached(src, tr) is None  # not even a temporary folder of that size is written
    assert not default_location.exists() or not any(default_location.iterdir())
    # the same trace from a file larger than its columns is indexed
    big = tmp_path / "t.json"
    big.write_bytes(b"x" * 12_000_000)
    where = _cache.save_cached(big, tr)
    from neuron_prof.loaders import coldir
    assert where is not None and 0 < coldir.folder_bytes(where) < big.stat().st_size


def test_the_cache_folder_keeps_the_most_recently_used_within_its_budget(tmp_path: Path, default_location: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    srcs = []
    for i in range(4):
        s = tmp_path / f"t{i}.json"
        s.write_bytes(b"x" * (_cache.MIN_SIZE + 10))
        srcs.append(s)
    one = _cache.save_cached(srcs[0], _trace())
    assert one is not None
    from neuron_prof.loaders import coldir
    size = coldir.folder_bytes(one)
    monkeypatch.setenv("NEURON_PROF_CACHE_MAX_BYTES", str(3 * size + size // 2))  # room for three
    paths = [one]
    for i, s in enumerate(srcs[1:3], start=1):
        p = _cache.save_cached(s, _trace())
        assert p is not None
        os.utime(p, (1_000_000 + i, 1_000_000 + i))
        paths.append(p)
    os.utime(one, (1_000_000, 1_000_000))  # t0 written first...
    assert _cache.load_cached(srcs[0]) is not None  # ...but used last: now the most recent
    stale = default_location / ".nprof-dead.tmp"  # a writer that died mid-write, long ago
    stale.write_bytes(b"partial")
    os.utime(stale, (1_000_000, 1_000_000))
    # WHEN a fourth index is written THEN the least recently used one (t1) goes, and the stale temp file
    p3 = _cache.save_cached(srcs[3], _trace())
    assert p3 is not None
    left = sorted(default_location.iterdir())
    assert left == sorted([paths[0], paths[2], p3])
    assert _cache.load_cached(srcs[1]) is None and _cache.load_cached(srcs[0]) is not None
    # an index that alone exceeds the budget is not written (nothing else is evicted for it)
    monkeypatch.setenv("NEURON_PROF_CACHE_MAX_BYTES", str(size // 2))
    assert _cache.save_cached(srcs[1], _trace()) is None and sorted(default_location.iterdir()) == left


def test_an_unusable_cache_folder_costs_nothing_but_the_index(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A file where the cache folder should be (or no home at all): the trace loads every time, no index."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("mine")
    monkeypatch.setenv("NEURON_PROF_CACHE_DIR", str(blocker / "neuron-prof"))
    src = _kineto_file(tmp_path / "t.json")
    assert _cache.save_cached(src, load(src)) is None
    assert len(load(src).slices) == 20_000 and blocker.read_text() == "mine"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(_cache._TMP_PREFIX)]
    # a budget that is not a number is the default; a negative one is none
    for value, budget in (("lots", _cache.MAX_BYTES), ("-5", 0), ("1024", 1024)):
        monkeypatch.setenv("NEURON_PROF_CACHE_MAX_BYTES", value)
        assert _cache.max_bytes() == budget
