"""Device-profile rows on the host clock: the device profile's clock (a counter since the device started) is
hours apart from the host's Unix ns and drifts; rows are placed through the executions both profiles saw
(ExecutionInfo relative to Metadata.first_hw_timestamp, nc_exec_running in SystemProfileEvents)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.cli import main
from neuron_prof.loaders import load
from neuron_prof.loaders.explorer._clock import from_executions, pair, parse_first_ts
from neuron_prof.loaders.explorer.reader import EXPLORER_KEY
from neuron_prof.model import Meta, TrackKind
from tests.fakes.explorer_profile import T0, TID, write_profile
from tests.fakes.explorer_schema import documented, evolve

HOURS = 7 * 3600 * 1_000_000_000


def _ops(n: int) -> list[tuple[str, int, int]]:
    return [(f"aten::mm#{k}", T0 + 1_000_000 + k * 2_000_000, TID) for k in range(n)]


def _engine_rows(tr) -> np.ndarray:
    ids = [i for i, t in enumerate(tr.tracks) if t.kind == TrackKind.DEVICE and t.name.endswith(" engine")]
    return np.flatnonzero(np.isin(tr.slices.track, ids))


@pytest.mark.parametrize("device_t0,drift", [(HOURS, 0.0), (HOURS, 3e-4), (5_000_000, -2e-4)])
def test_device_rows_land_inside_their_executions(tmp_path: Path, device_t0: int, drift: float) -> None:
    w = write_profile(tmp_path / "p", device_t0=device_t0, drift=drift)
    tr = load(tmp_path / "p")
    assert tr.metadata[Meta.CLOCK] == "unix"
    ex = tr.metadata[EXPLORER_KEY]
    assert ex["device_clock"] == {"anchored_by": "executions", "executions_paired": 3, "logical_core": 0}
    rows = _engine_rows(tr)
    got = sorted(zip(tr.slices.ts_ns[rows].tolist(), tr.slices.dur_ns[rows].tolist()))
    want = sorted((a, d) for _, a, d in w.busy)
    assert len(got) == len(want)
    for (a, d), (a2, d2) in zip(got, want):  # within the rounding of the drift, a few ns
        assert abs(a - a2) <= 2 and abs(d - d2) <= 2
    for a, d in got:  # every device row inside an nc_exec_running
        assert any(s <= a and a + d <= e for s, e in w.exec_host)
    cc = tr.slices_on(TrackKind.COLLECTIVE)
    s, e = w.exec_host[-1]
    assert all(s <= int(tr.slices.ts_ns[r]) and int(tr.slices.ts_ns[r] + tr.slices.dur_ns[r]) <= e for r in cc)
    assert abs(ex["errors"][0]["ts_ns"] - w.errors[0]["ts_ns"]) <= 2
    assert tuple(tr.metadata[Meta.WALL]) == (T0, T0 + 10_000_000)


def test_one_small_device_clock_row_keeps_the_trace_on_unix_time(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: device-clock ActiveTime rows (small numbers) beside host-clock events turned the whole
    trace 'relative' and device busy time to about 0. They are placed now; the busy share is the engines'."""
    write_profile(tmp_path / "p", device_t0=1_000)
    assert main(["summary", str(tmp_path / "p"), "--json"]) == 0
    t = json.loads(capsys.readouterr().out)["totals"]
    assert t["start_ns"] >= T0 and t["wall_ns"] == 10_000_000
    assert t["device_busy_ns"] > 4_000_000  # the three executions (and the engines inside them)


def test_a_device_profile_window_is_found_among_the_executions(tmp_path: Path) -> None:
    """Device profile of executions 3..5 of 8 (started after warm-up): paired with those, not the first."""
    w = write_profile(tmp_path / "p", ops=_ops(8), window=(3, 6), device_t0=HOURS, drift=1e-4)
    tr = load(tmp_path / "p")
    assert tr.metadata[EXPLORER_KEY]["device_clock"]["executions_paired"] == 3
    rows = _engine_rows(tr)
    inside = [next(k for k, (s, e) in enumerate(w.exec_host) if s <= a and a + d <= e)
              for a, d in zip(tr.slices.ts_ns[rows].tolist(), tr.slices.dur_ns[rows].tolist())]
    assert sorted(set(inside)) == [3, 4]  # tensor in 3 and 4 (5 is the collectives' execution), vector in 3, 4
    assert not any("may be misplaced" in m or "equally well" in m for m in tr.metadata.get(Meta.WARNINGS, []))


def test_without_executions_first_ts_places_the_device_profile(tmp_path: Path) -> None:
    """No ExecutionInfo: Metadata.first_ts (Unix time, human-readable) is first_hw_timestamp's instant."""
    folder = tmp_path / "p"
    w = write_profile(folder, device_t0=HOURS, schema=evolve(documented(), drop={"ExecutionInfo": []}))
    (folder / "ExecutionInfo.parquet").unlink()
    import pyarrow as pa
    import pyarrow.parquet as pq

    meta = pq.read_table(folder / "Metadata.parquet")
    first_hw = meta.column("first_hw_timestamp")[0].as_py()
    host_first = w.exec_host[0][0] - 100_000  # the device profile started 100 µs before its first execution
    secs, ns = divmod(host_first, 1_000_000_000)
    import datetime as dt

    stamp = dt.datetime.fromtimestamp(secs, dt.UTC).strftime("%Y-%m-%d %H:%M:%S") + f".{ns:09d} +0000 UTC"
    meta = meta.set_column(meta.column_names.index("first_ts"), "first_ts", pa.array([stamp]))
    pq.write_table(meta, folder / "Metadata.parquet")
    tr = load(folder)
    assert tr.metadata[EXPLORER_KEY]["device_clock"]["anchored_by"] == "first_ts"
    assert first_hw == HOURS + (host_first - T0)
    rows = _engine_rows(tr)
    assert sorted(tr.slices.ts_ns[rows].tolist()) == sorted(a for _, a, _ in w.busy)


def test_unanchored_device_rows_are_said_not_guessed(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    write_profile(folder, device_t0=HOURS)
    (folder / "ExecutionInfo.parquet").unlink()  # and first_ts is the epoch placeholder
    tr = load(folder)
    assert tr.metadata[EXPLORER_KEY]["device_clock"]["anchored_by"] == "none"
    assert any("nothing places them on the host clock" in m for m in tr.metadata[Meta.WARNINGS])
    assert len(_engine_rows(tr)) == 0 and tr.metadata[Meta.CLOCK] == "unix"  # host timeline intact


def test_pairing_with_a_host_ring_buffer_that_lost_the_start() -> None:
    rng = np.random.default_rng(3)
    d = rng.integers(50_000, 900_000, 40)
    g = rng.integers(10_000, 300_000, 40)
    hs = np.cumsum(d + g) - d - g + 10**18
    he = hs + d
    ds, de = (hs - hs[0]) * 2 + 77, (he - hs[0]) * 2 + 77  # device clock ticks twice as fast (a drift of 100%)
    o, n, tied = pair(ds, de, hs[12:], he[12:])  # the host kept only the last 28
    assert (o, n, tied) == (-12, 28, False)
    c = from_executions(ds, de, hs[12:], he[12:])
    assert c is not None and c.pair_offset == -12
    assert abs(int(c.to_host(np.array([(ds[20] + de[20]) // 2]))[0]) - (hs[20] + he[20]) // 2) <= 1


def test_first_ts_formats() -> None:
    assert parse_first_ts("2025-12-18 15:35:56.592459482 +0000 UTC") == 1_766_072_156_592_459_482
    assert parse_first_ts("1970-01-01 00:00:00+00:00") == 0
    assert parse_first_ts("1766072156592459482") == 1_766_072_156_592_459_482
    assert parse_first_ts("yesterday") is None


def test_a_device_only_profile_beside_host_ops_is_not_mixed_in_unplaced(tmp_path: Path) -> None:
    """A capture's trace.json (host ops, Unix ns) with a device profile processed without the system profile:
    nothing pairs its executions and first_ts is the epoch placeholder, so its rows are left out, said once;
    the host ops keep the trace on Unix time."""
    from neuron_prof.loaders.explorer.reader import add_explorer
    from neuron_prof.model import TraceBuilder

    folder = tmp_path / "p"
    write_profile(folder, device_t0=HOURS)
    for f in folder.glob("SystemProfileEvents*.parquet"):
        f.unlink()
    b = TraceBuilder()
    b.add_slice(b.thread_track(1, 1), T0 + 1_000_000, 500_000, "aten::mm", "cpu_op")
    warnings, _ = add_explorer(b, folder)
    tr = b.build()
    assert len(_engine_rows(tr)) == 0 and len(tr.slices_on(TrackKind.COLLECTIVE)) == 0
    assert int(tr.slices.ts_ns.min()) >= T0
    assert sum("nothing places them on the host clock" in w for w in warnings) == 1
