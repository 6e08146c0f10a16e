"""The torch-neuronx adapter against a fake torch_neuronx with exactly the documented shapes.

The workload is real: CPU ops (custom ops that behave like a device backend) under a real torch.profiler.
Expected counts, bytes and times are computed from the workload itself, not from the adapter.
"""

from __future__ import annotations

from datetime import UTC

import pytest
import torch

import tests.fakes.fake_neuronx as fk
from neuron_prof.backends import get_backend
from neuron_prof.backends._compat import key_ops, memory_current, op_key, split_fused, timestamp_us
from neuron_prof.backends.neuron import NeuronBackend
from neuron_prof.model import Arg, Meta, TrackKind
from tests.fakes.kineto import profile_with


@pytest.fixture()
def fake() -> fk.FakeNeuronx:
    fk.install_ops()
    fk.FAKE = fk.FakeNeuronx()
    yield fk.FAKE
    fk.FAKE = None


def test_name_formats_normalise() -> None:
    assert op_key("aten::add.Tensor") == op_key("add") == op_key("aten::add") == "add"
    assert op_key("npfake::host_op.default") == "host_op"
    assert split_fused("mul|pow|aten::mm") == ["mul", "pow", "mm"]


def test_memory_stats_nested_and_flat() -> None:
    nested = fk.FakeNeuronx()
    nested.alloc(100)
    flat = fk.FakeNeuronx(flat_memory=True)
    flat.alloc(100)
    assert memory_current(nested.memory_stats()) == memory_current(flat.memory_stats()) == (100, 200, 100, 200)


def _workload(fake: fk.FakeNeuronx) -> dict[str, int]:
    ops = torch.ops.npfake
    a, b = torch.randn(64, 32), torch.randn(16, 8)
    for _ in range(3):
        ops.compiled(a)          # compiles once (40 ms), then cache hits
        ops.compiled(b)          # second signature: compiles once
        ops.host_op(a)           # falls back to the host every time
        fake.alloc(a.numel() * 4)
        torch.topk(b, 2)         # with the next op: a fused "topk|mul" that fell back
        torch.mul(b, 3.0)
    torch.sort(b)                # a CPU sort: not a fallback (no report for it)
    fake.fallback.add("topk|aten::mul")
    return {"host_op_calls": 3, "host_op_copy_bytes": a.numel() * 4 + a.numel() * 8, "compiles": 2}


def test_fallback_per_call_events_from_names_only_report(fake: fk.FakeNeuronx) -> None:
    expect: dict[str, int] = {}
    backend = NeuronBackend(fake.module)
    b, ctx = profile_with(backend, lambda: expect.update(_workload(fake)))
    trace = b.build()
    assert ctx.errors == []
    rows = trace.slices_on(TrackKind.FALLBACK)
    assert trace.tracks[trace.find_track(TrackKind.FALLBACK)].name == "CPU fallback"
    names = [trace.slice_name(int(r)) for r in rows]
    assert names.count("npfake::host_op") == expect["host_op_calls"]
    assert names.count("topk|aten::mul") == 3
    assert "aten::sort" not in names and "aten::mul" not in names
    host = [trace.slice_args(int(r)) for r in rows if trace.slice_name(int(r)) == "npfake::host_op"]
    assert all(h[Arg.COPY_BYTES] == expect["host_op_copy_bytes"] for h in host)
    assert all(h[Arg.SHAPES][0] == [64, 32] and h[Arg.DTYPES][0] == "float" for h in host)
    assert all("test_backend_neuron.py:" in h[Arg.CALL_SITE] for h in host)
    # each event spans exactly its op's host time
    ops = [i for i in range(len(trace.slices)) if trace.slice_name(i) == "npfake::host_op"
           and trace.tracks[int(trace.slices.track[i])].kind == TrackKind.THREAD]
    assert sorted(trace.slices.dur_ns[ops].tolist()) == sorted(trace.slices.dur_ns[
        [int(r) for r in rows if trace.slice_name(int(r)) == "npfake::host_op"]].tolist())


def test_compile_cache_entries_become_placed_compile_events(fake: fk.FakeNeuronx) -> None:
    backend = NeuronBackend(fake.module)
    b, ctx = profile_with(backend, lambda: _workload(fake))
    trace = b.build()
    rows = trace.slices_on(TrackKind.COMPILE)
    args = [trace.slice_args(int(r)) for r in rows]
    assert len(rows) == 2
    assert {a[Arg.SIGNATURE] for a in args} == {e["cache_key"] for e in fake.entries}
    assert all(a[Arg.COMPILE_KIND] == "eager" and a[Arg.CACHE] == "miss" for a in args)
    assert (trace.slices.dur_ns[rows] == 40_000_000).all()
    # placed on the two slow first calls (each blocked >= 40 ms), not on the cache hits
    assert all(a["host_op_ns"] >= 40_000_000 for a in args)
    assert all("test_backend_neuron.py:" in a[Arg.CALL_SITE] for a in args)
    assert len(trace.flows) >= 2


def test_cache_keys_are_not_parsed_past_the_op_name(fake: fk.FakeNeuronx) -> None:
    """The key starts with the op name; its suffix is undocumented (facts, corrections): any suffix places."""
    real = fake.module._C._get_compilation_cache_entries
    suffixes = iter(["[f32:64x32]", "/v2:9"])
    renamed: dict[str, str] = {}

    def entries() -> list[dict]:
        out = real()
        for e in out:
            k = e["cache_key"]
            if k not in renamed:
                renamed[k] = k.rsplit("_", 1)[0] + next(suffixes)
            e["cache_key"] = renamed[k]
        return out

    fake.module._C._get_compilation_cache_entries = entries
    b, _ = profile_with(NeuronBackend(fake.module), lambda: _workload(fake))
    trace = b.build()
    rows = trace.slices_on(TrackKind.COMPILE)
    assert sorted(trace.slice_args(int(r))[Arg.SIGNATURE] for r in rows) == sorted(renamed.values())
    assert [trace.slice_name(int(r)) for r in rows] == ["npfake::compiled"] * 2
    assert all(trace.slice_args(int(r))["host_op_ns"] >= 40_000_000 for r in rows)
    assert "compile_cache_unplaced" not in b.metadata


def test_key_ops_match_whole_names_only() -> None:
    known = {"add", "addmm", "mm", "mul", "pow"}
    assert key_ops("aten::addmm_9f3a", known) == ["addmm"]
    assert key_ops("aten::add[f32]", known) == ["add"] and key_ops("add", known) == ["add"]
    assert key_ops("aten::addbmm:1", known) == []  # "add" inside a longer name is not add
    assert key_ops("mul|pow|aten::mm#4", known) == ["mul", "pow", "mm"]
    assert key_ops("SyncTensorsGraph.42", known) == []


def test_dynamo_timestamps_in_every_documented_format(monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    from datetime import datetime

    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+05:30: a string read as UTC would be 5.5 h off
    time.tzset()
    try:
        want = int(datetime(2026, 12, 1, 6, 30, 0, 250000, tzinfo=UTC).timestamp() * 1e6)
        assert timestamp_us("20261201_120000_250000") == want  # local time, the documented string
        assert timestamp_us(want / 1e6) == timestamp_us(want // 1000) == timestamp_us(want) == want
        assert timestamp_us(want * 1000) == timestamp_us(str(want * 1000)) == want
        assert timestamp_us("yesterday") is None and timestamp_us(None) is None and timestamp_us(True) is None
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_metrics_on_for_the_capture_then_restored(fake: fk.FakeNeuronx, monkeypatch: pytest.MonkeyPatch) -> None:
    """Metrics are off by default; ``torch_neuronx.metrics.set_enabled`` switches them (facts, corrections)."""
    import types

    state = {"on": False}
    seen: list[bool] = []
    metrics = types.ModuleType("torch_neuronx.metrics")
    metrics.set_enabled = lambda on: state.update(on=bool(on))  # type: ignore[attr-defined]
    fake.module.metrics = metrics
    monkeypatch.delenv("TORCH_NEURONX_METRICS_ENABLED", raising=False)
    profile_with(NeuronBackend(fake.module), lambda: seen.append(state["on"]))
    assert seen == [True] and state["on"] is False
    # already on as the process started: left on, not switched
    monkeypatch.setenv("TORCH_NEURONX_METRICS_ENABLED", "1")
    state["on"] = True
    seen.clear()
    profile_with(NeuronBackend(fake.module), lambda: seen.append(state["on"]))
    assert seen == [True] and state["on"] is True


def test_disk_cache_entries_are_marked(fake: fk.FakeNeuronx) -> None:
    x = torch.randn(5)

    def work() -> None:
        fake.compile_if_new("npfake::compiled", x, from_disk=True)
        torch.ops.npfake.compiled(x)

    b, _ = profile_with(NeuronBackend(fake.module), work)
    trace = b.build()
    rows = trace.slices_on(TrackKind.COMPILE)
    assert [trace.slice_args(int(r))[Arg.CACHE] for r in rows] == ["disk"]


def test_without_cache_api_stalls_are_inferred(fake: fk.FakeNeuronx) -> None:
    fk.FAKE = nofake = fk.FakeNeuronx(with_cache=False)
    b, _ = profile_with(NeuronBackend(nofake.module), lambda: _workload(nofake))
    trace = b.build()
    rows = trace.slices_on(TrackKind.COMPILE)
    args = [trace.slice_args(int(r)) for r in rows]
    assert len(rows) == 2 and all(a["inferred"] for a in args)
    # each stall is the 40 ms compile of a first call, within that call (no upper bound in ms: a loaded
    # machine stretches the sleep, not the rule)
    stalls = {int(r) for r in rows}  # named after their op too
    calls = [r for r in range(len(trace.slices.ts_ns)) if trace.slice_name(r) == "npfake::compiled" and r not in stalls]
    for r in rows:
        ts, end = int(trace.slices.ts_ns[r]), int(trace.slices.end_ns[r])
        host = [c for c in calls if int(trace.slices.ts_ns[c]) <= ts and end <= int(trace.slices.end_ns[c])]
        assert end - ts >= 38_000_000 and host, (ts, end, [(int(trace.slices.ts_ns[c]), int(trace.slices.end_ns[c]))
                                                          for c in calls])
    assert len({int(trace.slices.ts_ns[r]) for r in rows}) == 2  # one per signature, not the same call twice


def test_memory_counters_and_peak(fake: fk.FakeNeuronx) -> None:
    fake.flat_memory = True
    b, _ = profile_with(NeuronBackend(fake.module), lambda: _workload(fake), options={"memory_interval_ms": 1})
    trace = b.build()
    names = {trace.tracks[i].name for i in trace.track_ids(TrackKind.MEMORY)}
    assert names == {"neuron:0 allocated", "neuron:0 reserved"}
    alloc = trace.find_track(TrackKind.MEMORY, "neuron:0 allocated")
    vals = trace.counters.value[trace.counters.track == alloc]
    assert vals.max() == fake.peak == 3 * 64 * 32 * 4
    peak = [i for i in trace.instants_on(TrackKind.MEMORY)]
    assert len(peak) == 1 and trace.instant_args(int(peak[0]))["bytes"] == fake.peak


def test_dynamo_metrics_phases_join_torch_compile(fake: fk.FakeNeuronx) -> None:
    import time
    from datetime import datetime

    def work() -> None:
        torch._dynamo.reset()
        f = torch.compile(lambda x: x + 1, backend="eager", dynamic=False)
        f(torch.ones(3))
        from torch._dynamo.utils import get_compilation_metrics

        m = list(get_compilation_metrics())[-1]
        # the documented shape: a local-time string "%Y%m%d_%H%M%S_%f" (torch-neuronx-facts, corrections)
        stamp = datetime.fromtimestamp((m.start_time_us + 10) / 1e6).strftime("%Y%m%d_%H%M%S_%f")
        fake.dynamo.append({"graph_id": 0, "graph_name": "g0", "model_name": "m", "has_collectives": False,
                            "graph_node_count": 3, "timestamp": stamp,
                            "torch_neuronx_fx_passes_us": 11, "torch_neuronx_lower_us": 22,
                            "torch_neuronx_compile_us": 33})
        time.sleep(0.001)

    import torch._dynamo  # imported before the capture: its import is not what we test

    b, _ = profile_with(NeuronBackend(fake.module), work, with_stack=False)
    trace = b.build()
    rows = trace.slices_on(TrackKind.COMPILE)
    phases = trace.slice_args(int(rows[0]))[Arg.PHASES]
    assert phases["torch_neuronx_lower"] == 22_000 and phases["torch_neuronx_compile"] == 33_000
    torch._dynamo.reset()


def test_found_through_sys_modules(fake: fk.FakeNeuronx, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "torch_neuronx", fake.module)
    b = get_backend()
    assert b.name == "neuron" and b.module is fake.module  # type: ignore[attr-defined]


def test_broken_api_is_recorded(fake: fk.FakeNeuronx) -> None:
    def boom() -> list[str]:
        raise RuntimeError("runtime not initialised")

    fake.module.get_fallback_ops = boom
    b, ctx = profile_with(NeuronBackend(fake.module), lambda: _workload(fake))
    assert any(e["probe"] == "fallback" and "not initialised" in e["error"] for e in ctx.errors)
    assert b.metadata[Meta.PROBE_ERRORS] == ctx.errors
    assert b.build().slices_on(TrackKind.COMPILE).size == 2  # the other probes still worked


def test_privateuse1_driver_events_join_host_ops_through_the_framework_mapping(fake: fk.FakeNeuronx) -> None:
    """Neuron 2.33 docs: framework events of category privateuse1_driver carry ``nrt_sequence_id``; the runtime's
    framework mapping (``_C._get_profiler_mappings``, the ``framework_mapping_*.json`` document) names the
    autograd ``seq_nr`` that submitted each one: equal to the op's Kineto "Sequence number", or one above it
    (peek() after the op made its autograd node). No External id on the driver events: the docs promise none."""
    import os

    from neuron_prof.backends import CaptureContext
    from neuron_prof.loaders.json.reader import parse_kineto_into
    from neuron_prof.model import TraceBuilder

    pid = os.getpid()
    base = 1_700_000_000_000_000_000
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": pid, "tid": 7, "ts": 10.0, "dur": 5.0,
           "args": {"Sequence number": 40, "External id": 41}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": pid, "tid": 7, "ts": 20.0, "dur": 5.0,
           "args": {"Sequence number": 41, "External id": 42}},
          {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": pid, "tid": 7, "ts": 30.0, "dur": 5.0,
           "args": {"Sequence number": 42, "External id": 43}},
          {"ph": "X", "cat": "privateuse1_driver", "name": "nrt_execute mm", "pid": 1, "tid": 3, "ts": 16.0,
           "dur": 3.0, "args": {"nrt_sequence_id": 9}},
          {"ph": "X", "cat": "privateuse1_driver", "name": "nrt_execute add", "pid": 1, "tid": 3, "ts": 27.0,
           "dur": 3.0, "args": {"nrt_sequence_id": 10}},
          {"ph": "X", "cat": "privateuse1_driver", "name": "nrt_execute unknown", "pid": 1, "tid": 3, "ts": 40.0,
           "dur": 3.0, "args": {"nrt_sequence_id": 77}}]
    mapping = {"version": 1, "data": [
        {"nrta_seq_id": 9, "framework_op_exec_ids": [{"seq_nr": 41, "th_id": 1, "stream_id": 0}]},  # one above
        {"nrta_seq_id": 10, "framework_op_exec_ids": [{"seq_nr": 41, "th_id": 1, "stream_id": 0}]}]}  # equal
    enabled: list[bool] = []
    fake.module._C._get_profiler_mappings = lambda: mapping
    fake.module._C._set_profiler_mapping_enabled = enabled.append
    b = TraceBuilder()
    parse_kineto_into(b, {"traceEvents": ev, "baseTimeNanoseconds": base}, "synthetic")
    ctx = CaptureContext(host_pid=pid)
    backend = NeuronBackend(fake.module)
    backend.start(ctx)
    backend.stop(ctx)
    n0 = len(b.f_src)
    backend.contribute(b, ctx)
    trace = b.build()
    pairs = {(trace.slice_name(int(s)), trace.slice_name(int(d))) for s, d in
             zip(trace.flows.src[n0:], trace.flows.dst[n0:])}
    assert pairs == {("aten::mm", "nrt_execute mm"), ("aten::add", "nrt_execute add")}
    assert enabled == [True, False]  # switched on for the capture only
