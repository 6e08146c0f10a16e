"""The trace model: builder, columns, strings, args store, immutability."""

from __future__ import annotations

import numpy as np
import pytest

from neuron_prof.model import ProcessKind, StringTable, TraceBuilder, TrackKind


def _small_trace():
    b = TraceBuilder()
    main = b.thread_track(pid=100, tid=7, thread_name="main")
    dev_proc = b.process("neuron:0", name="neuron:0", kind=ProcessKind.DEVICE)
    dev = b.track(dev_proc, "neuron:0 device", TrackKind.DEVICE)
    mem = b.track(dev_proc, "neuron:0 allocated", TrackKind.MEMORY, unit="bytes")
    op = b.add_slice(main, 1_000, 500, "aten::mm", "cpu_op", {"Input Dims": [[2, 3], [3, 4]]})
    k = b.add_slice(dev, 1_200, 900, "aten::mm", "neuron_prof.device", {"seq": 1})
    b.add_flow(op, k, flow_id=42, cat="ac2g")
    b.add_instant(main, 1_100, "[memory]", "cpu_instant_event", {"Bytes": 96})
    b.add_counter(mem, 1_100, 96.0)
    b.add_counter(mem, 2_000, 0.0)
    return b.build()


def test_builder_makes_typed_read_only_columns() -> None:
    t = _small_trace()
    assert t.slices.ts_ns.dtype == np.int64 and t.slices.name.dtype == np.int32
    assert list(t.slices.ts_ns) == [1_000, 1_200] and list(t.slices.dur_ns) == [500, 900]
    with pytest.raises(ValueError):
        t.slices.ts_ns[0] = 5
    assert t.n_events == 2 + 1 + 2
    assert t.time_range() == (1_000, 2_100)


def test_names_are_interned_once() -> None:
    t = _small_trace()
    assert t.slices.name[0] == t.slices.name[1]
    assert t.slice_name(1) == "aten::mm"
    assert t.strings[0] == ""


def test_args_round_trip_and_absent_args_are_empty() -> None:
    t = _small_trace()
    assert t.slice_args(0) == {"Input Dims": [[2, 3], [3, 4]]}
    assert t.instant_args(0) == {"Bytes": 96}
    b = TraceBuilder()
    tr = b.thread_track(1, 1)
    b.add_slice(tr, 0, 1, "x")
    assert b.build().slice_args(0) == {}


def test_tracks_by_kind_and_flows() -> None:
    t = _small_trace()
    assert [t.tracks[i].name for i in t.track_ids(TrackKind.DEVICE)] == ["neuron:0 device"]
    assert list(t.slices_on(TrackKind.THREAD)) == [0]
    assert t.tracks[t.find_track(TrackKind.MEMORY)].is_counter
    assert (int(t.flows.src[0]), int(t.flows.dst[0]), int(t.flows.flow_id[0])) == (0, 1, 42)
    assert t.processes[1].kind == ProcessKind.DEVICE


def test_same_thread_is_one_track_and_names_fill_in_later() -> None:
    b = TraceBuilder()
    a = b.thread_track(1, 5)
    b.process(1, name="python3")
    c = b.thread_track(1, 5, thread_name="worker")
    assert a == c and b.tracks[a].name == "worker" and b.processes[0].name == "python3"


def test_args_tolerate_numpy_values_and_int_keys() -> None:
    b = TraceBuilder()
    tr = b.thread_track(1, 1)
    b.add_slice(tr, 0, 1, "x", args={"n": np.int64(3), 7: "seven", "obj": object()})
    got = b.build().slice_args(0)
    assert got["n"] == 3 and got["7"] == "seven" and got["obj"].startswith("<object")


def test_string_table() -> None:
    s = StringTable(["a", "b", "a"])
    assert len(s) == 3 and s.get("b") == 2 and s.get("zz") is None and "a" in s


def test_replace_shares_columns() -> None:
    t = _small_trace()
    t2 = t.replace(findings=({"kind": "sync_point"},))
    assert t2.slices is t.slices and t2.findings[0]["kind"] == "sync_point" and t.findings == ()
