"""The .pftrace writer: every file passes pftrace_check with no errors, and what trace_processor's rules rebuild
from it (slices, nesting, args, flows, counters) equals the model. Numbers are computed from the perfetto
package's protos and the checker's replay, never from our loader; round trips go through the loader too."""

from __future__ import annotations

import collections
import importlib.util
import subprocess
import sys

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import DebugAnnotation, TrackEvent
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as TraceProto

from neuron_prof.exporters import _pftrace_wire as w
from neuron_prof.exporters._pftrace_args import ArgsEncoder
from neuron_prof.exporters._pftrace_layout import _assign_lanes, _tracks_with_overlaps, slice_order
from neuron_prof.exporters.perfetto import write_pftrace
from neuron_prof.loaders.pftrace.reader import load_pftrace
from neuron_prof.model import ProcessKind, TraceBuilder, TrackKind
from neuron_prof.model.schema import META_KEY
from tests.conftest import PFTRACE_CHECK

T0 = 1_790_857_026_123_456_789



def _load_checker():  # type: ignore[no-untyped-def]
    """The vendored .pftrace checker (tests/pftrace_check.py) as a module."""
    spec = importlib.util.spec_from_file_location("pftrace_check", PFTRACE_CHECK)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


checker = _load_checker()


def canon(args):  # type: ignore[no-untyped-def]
    """Args as comparable text. The checker reports an empty list/dict (kept as legacy JSON) as its text."""
    def fix(v):  # type: ignore[no-untyped-def]
        if v in ("[]", "{}"):
            return orjson.loads(v)
        if isinstance(v, dict):
            return {k: fix(x) for k, x in v.items()}
        if isinstance(v, list):
            return [fix(x) for x in v]
        return v
    return orjson.dumps(fix(args), option=orjson.OPT_SORT_KEYS)


def check(path):  # type: ignore[no-untyped-def]
    """The checker's verdict and the slices it rebuilt (as trace_processor would), asserting no errors."""
    res, slices, tracks = checker.validate(str(path), canonical=True, verbose=False)
    assert res["errors"] == {}, res["errors"]
    return res, slices, tracks


def rich_trace():  # type: ignore[no-untyped-def]
    """Nesting, partial overlaps, ties, zero-length slices, odd pids/tids, all arg types, flows, counters."""
    b = TraceBuilder()
    host = b.process(4242, "python3", rank=0)
    main = b.thread_track(4242, 4242, "python3 main")
    bwd = b.thread_track(4242, 1 << 40, "autograd")  # tid over 32 bits: remapped
    spans = b.thread_track("Spans", "PyTorch Profiler", "PyTorch Profiler")  # string pid and tid
    gpu = b.process(0, "GPU 0", kind=ProcessKind.DEVICE)
    s7 = b.track(gpu, "stream 7", TrackKind.DEVICE, tid=7)
    q0 = b.track(gpu, "neuron:0 device", TrackKind.DEVICE)
    comp = b.track(host, "compile", TrackKind.COMPILE)
    fb = b.track(host, "fallback", TrackKind.FALLBACK)
    mem = b.track(host, "neuron:0 allocated", TrackKind.MEMORY, unit="bytes")
    ctr = b.track(host, "queue depth", TrackKind.COUNTER)
    args = {"Input Dims": [[64, 1024], [1024, 1024], []], "Input type": ["float", "float", "Scalar"],
            "External id": 7, "neg": -5, "big": (1 << 64) - 1, "f": 2.5, "ok": True, "none": None, "empty": {},
            "nested": {"a": {"b": [1, 2.0, "x", None, False]}}, "uni": "héllo ✓", "": "empty key"}
    a = b.add_slice(main, T0, 1000, "ProfilerStep#1", "user_annotation")
    m = b.add_slice(main, T0 + 10, 500, "aten::mm", "cpu_op", args)
    b.add_slice(main, T0 + 10, 500, "aten::mm (same interval)", "cpu_op")
    b.add_slice(main, T0 + 20, 0, "zero at start", "cpu_op")
    b.add_slice(main, T0 + 510, 0, "zero at end", "cpu_op")
    b.add_slice(main, T0 + 510, 100, "touching sibling", "cpu_op")
    b.add_slice(main, T0 + 900, 300, "outlives parent", "cpu_op", {"External id": 8})  # partial overlap
    b.add_slice(main, T0 + 950, 100, "inside the overlap", "cpu_op")
    b.add_slice(main, T0 + 1100, 50, "", "")  # empty name and category
    launch = b.add_slice(main, T0 + 100, 20, "cudaLaunchKernel", "cuda_runtime", {"correlation": 99})
    k1 = b.add_slice(s7, T0 + 150, 400, "kernel A", "kernel", {"correlation": 99, "grid": [1, 1, 1]})
    k2 = b.add_slice(s7, T0 + 300, 400, "kernel B (overlaps A)", "kernel")
    b.add_slice(s7, T0 + 320, 600, "kernel C (overlaps both)", "kernel")
    bw = b.add_slice(bwd, T0 + 2000, 100, "MmBackward0", "cpu_op")
    b.add_slice(spans, T0, 5, "span", "Trace")
    b.add_slice(q0, T0 + 400, 40, "neuron exec", "neuron_prof.device", {"seq": 3})
    b.add_slice(comp, T0 + 30, 60, "aten::mm [64,1024]", "neuron_prof.compile", {"cache": "miss"})
    b.add_slice(fb, T0 + 95, 3, "aten::nonzero", "neuron_prof.fallback", {"copy_bytes": 4096})
    b.add_instant(main, T0 + 15, "[memory]", "cpu_instant_event", {"Bytes": 4096})
    b.add_instant(q0, T0 + 401, "marker", "")
    for i, v in enumerate([0, 1 << 20, 3 << 20, 1 << 20]):
        b.add_counter(mem, T0 + i * 100, float(v))
    b.add_counter(ctr, T0 + 5, 0.5)
    b.add_counter(ctr, T0 + 6, -2.0)
    b.add_flow(launch, k1, 99, "ac2g", "ac2g")
    b.add_flow(m, bw, 12, "fwdbwd", "fwdbwd")
    b.add_flow(k2, a, 13, "odd", "backwards in time")  # destination starts before the source
    b.add_flow(k1, b.add_slice(q0, T0 + 600, 10, "merged-rank flow target"), (0x7FFF << 48) | 5, "x", "merged id")
    b.metadata.update({"rank": 0, "backend": "cpu", "wall_ns": [T0, T0 + 3000]})
    b.findings.append({"kind": "sync_point", "severity": "warning", "title": "3 syncs cost 1.2 ms",
                       "cost_ns": 1_200_000, "share": 0.1, "count": 3, "advice": "avoid .item()",
                       "evidence": {"rows": [1, 2]}, "ts_ns": T0 + 50, "rank": 0})
    return b.build()


def model_slices(tr):  # type: ignore[no-untyped-def]
    s = tr.slices
    return sorted((int(s.ts_ns[i]), int(s.dur_ns[i]), tr.slice_name(i), tr.s(s.cat[i]), canon(tr.slice_args(i)))
                  for i in range(len(s)))


def test_rich_trace_passes_checker_and_rebuilds_every_slice(tmp_path):
    tr = rich_trace()
    p = write_pftrace(tr, tmp_path / "t.pftrace")
    res, slices, tracks = check(p)
    assert res["warnings"] == {}
    # what trace_processor's rules rebuild: the slices (instants have dur 0 at the end) of the model, exactly
    rebuilt = sorted((ts, dur, name or "", cat or "", canon(args or {})) for u, ts, dur, name, cat, args, _ in slices
                     if tracks[u][1].name not in (META_KEY, "findings") and not (dur == 0 and name in ("[memory]", "marker")))
    assert rebuilt == model_slices(tr)
    assert res["flows"] == len(tr.flows)


def test_counts_parsed_with_the_perfetto_protos(tmp_path):
    tr = rich_trace()
    p = write_pftrace(tr, tmp_path / "t.pftrace")
    proto = TraceProto()
    proto.ParseFromString(p.read_bytes())
    types = collections.Counter(pk.track_event.type for pk in proto.packet if pk.HasField("track_event"))
    assert types[TrackEvent.TYPE_SLICE_BEGIN] == types[TrackEvent.TYPE_SLICE_END] == len(tr.slices) == 19
    assert types[TrackEvent.TYPE_INSTANT] == len(tr.instants) + 1 + len(tr.findings)  # + metadata instant
    assert types[TrackEvent.TYPE_COUNTER] == len(tr.counters) == 6
    ds = [pk.track_descriptor for pk in proto.packet if pk.HasField("track_descriptor")]
    procs = {d.process.pid: d.process.process_name for d in ds if d.HasField("process")}
    threads = {(d.thread.pid, d.thread.tid): d.thread.thread_name for d in ds if d.HasField("thread")}
    assert procs[4242] == "python3 [rank 0]" and "GPU 0" in procs.values()
    assert all(0 < pid < 2**31 for pid in procs) and all(0 < t < 2**31 for _, t in threads)
    assert len(threads) == 4 and threads[(4242, 4242)] == "python3 main"
    assert {"autograd", "PyTorch Profiler", "stream 7"} <= set(threads.values())
    names = {d.name for d in ds if not d.HasField("thread") and not d.HasField("process")}
    assert {"compile", "CPU fallback", "neuron:0 device", "neuron:0 allocated", "findings", META_KEY} <= names
    counter = next(d for d in ds if d.name == "neuron:0 allocated")
    assert counter.counter.unit == 3
    # every counter descriptor precedes its values in file order (values checked by the checker too)
    first_value = min(i for i, pk in enumerate(proto.packet) if pk.track_event.type == TrackEvent.TYPE_COUNTER)
    last_desc = max(i for i, pk in enumerate(proto.packet) if pk.HasField("track_descriptor"))
    assert last_desc < first_value
    # flow ids: unique per flow, on both endpoints
    ids = collections.Counter(f for pk in proto.packet for f in pk.track_event.flow_ids)
    assert len(ids) == 4 and set(ids.values()) == {2}


def test_round_trip_restores_the_model(tmp_path):
    tr = rich_trace()
    back = load_pftrace(write_pftrace(tr, tmp_path / "t.pftrace"))
    assert back.processes == tr.processes
    assert back.tracks == tr.tracks
    assert model_slices(back) == model_slices(tr)
    per_track = collections.Counter(back.slices.track.tolist())
    assert per_track == collections.Counter(tr.slices.track.tolist())  # lanes folded back
    inst = lambda t: sorted((int(t.instants.ts_ns[i]), int(t.instants.track[i]), t.s(t.instants.name[i]),  # noqa: E731
                             canon(t.instant_args(i))) for i in range(len(t.instants)))
    assert inst(back) == inst(tr)
    ctr = lambda t: sorted(zip(t.counters.ts_ns.tolist(), t.counters.track.tolist(), t.counters.value.tolist()))  # noqa: E731
    assert ctr(back) == ctr(tr)

    def flows(t):  # type: ignore[no-untyped-def]
        key = lambda i: (int(t.slices.ts_ns[i]), t.slice_name(i))  # noqa: E731
        f = t.flows
        return sorted((key(f.src[i]), key(f.dst[i]), int(f.flow_id[i]), t.s(f.cat[i]), t.s(f.name[i]))
                      for i in range(len(f)))
    assert flows(back) == flows(tr)
    assert back.findings == tr.findings
    assert {k: v for k, v in back.metadata.items() if k not in ("source", "source_format")} == tr.metadata
    assert back.metadata["source_format"] == "pftrace"


def test_small_chunks_intern_across_chunks(tmp_path):
    tr = rich_trace()
    p = write_pftrace(tr, tmp_path / "t.pftrace", chunk=3)
    res, _, _ = check(p)
    assert res["warnings"] == {}
    back = load_pftrace(p)
    assert model_slices(back) == model_slices(tr)
    assert len(back.flows) == len(tr.flows)


def test_checker_cli_accepts_the_file(tmp_path):
    p = write_pftrace(rich_trace(), tmp_path / "t.pftrace")
    r = subprocess.run([sys.executable, str(PFTRACE_CHECK), str(p)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "errors: {}" in r.stdout


def test_empty_trace(tmp_path):
    tr = TraceBuilder().build()
    p = write_pftrace(tr, tmp_path / "e.pftrace")
    check(p)
    back = load_pftrace(p)
    assert len(back.slices) == len(back.instants) == len(back.counters) == 0


def test_unwritable_path_is_an_export_error(tmp_path):
    from neuron_prof.errors import ExportError

    with pytest.raises(ExportError, match="cannot write"):
        write_pftrace(rich_trace(), tmp_path / "missing" / "t.pftrace")


# ---- encoder pieces against the perfetto protos -----------------------------------------------------------
@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=1, max_size=50))
@settings(max_examples=60, deadline=None)
def test_varints_match_protobuf(values):
    mat = w.varint_mat(np.array(values, np.int64), w.A_INT)
    rows = w.interleave([w.Const(w.A_NAME_IID + b"\x01", len(values)), mat], len(values))
    start = 0
    for v, n in zip(values, rows.lens.tolist()):
        a = DebugAnnotation(name_iid=1, int_value=v)
        assert rows.data[start: start + n].tobytes() == a.SerializeToString()
        start += n


@given(st.lists(st.tuples(st.sampled_from(["const", "varint", "ragged", "long"]), st.integers(0, 2**32)),
                min_size=1, max_size=8), st.integers(0, 40))
@settings(max_examples=80, deadline=None)
def test_interleave_is_row_by_row_concatenation(kinds, n):
    """Both the one-mask matrix path and the index path (a few very long rows) give each row's bytes in order."""
    segs, rows = [], []
    for kind, seed in kinds:
        rng = np.random.default_rng(seed)
        if kind == "const":
            b = rng.integers(0, 256, seed % 4, dtype=np.uint8).tobytes()
            segs.append(w.Const(b, n))
            rows.append([b] * n)
        elif kind == "varint":
            v = rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64) >> rng.integers(0, 64, n)
            mat = w.varint_mat(v, b"\x20", rng.random(n) < 0.8)
            segs.append(mat)
            rows.append([mat.m[i, :k].tobytes() for i, k in enumerate(mat.lens.tolist())])
        else:
            top = 5000 if kind == "long" and seed % 2 else 12
            r = [rng.integers(0, 256, rng.integers(0, top if i == 0 else 12), dtype=np.uint8).tobytes()
                 for i in range(n)]
            segs.append(w.Ragged.from_list(r))
            rows.append(r)
    out = w.interleave(segs, n)
    want = [b"".join(col[i] for col in rows) for i in range(n)]
    assert out.lens.tolist() == [len(x) for x in want] and out.data.tobytes() == b"".join(want)


def test_annotations_parse_back_as_protos():
    enc = ArgsEncoder()
    args = {"i": 3, "neg": -1, "u": 2**64 - 1, "d": 0.25, "s": "x", "b": False, "l": [1, [2, "y"]], "m": {"k": 1.5}}
    te = TrackEvent()
    te.ParseFromString(enc.annotations(args))
    names = {v: k for k, v in enc.names.items()}
    values = {v: k for k, v in enc.values.items()}
    got = {names[a.name_iid]: a for a in te.debug_annotations}
    assert got["i"].int_value == 3 and got["neg"].int_value == -1 and got["u"].uint_value == 2**64 - 1
    assert got["d"].double_value == 0.25 and values[got["s"].string_value_iid] == "x"
    assert got["b"].HasField("bool_value") and not got["b"].bool_value
    assert got["l"].array_values[0].int_value == 1
    assert values[got["l"].array_values[1].array_values[1].string_value_iid] == "y"
    assert names[got["m"].dict_entries[0].name_iid] == "k" and got["m"].dict_entries[0].double_value == 1.5


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 25)), min_size=1, max_size=40))
@settings(max_examples=150, deadline=None)
def test_overlap_test_agrees_with_a_stack_walk(spans):
    ts = np.array([s for s, _ in spans], np.int64)
    dur = np.array([d for _, d in spans], np.int64)
    track = np.zeros(len(spans), np.int32)
    o = slice_order(ts, dur, track)
    needs_lanes = max(_assign_lanes(ts[o].tolist(), (ts[o] + dur[o]).tolist())) > 0
    assert bool(len(_tracks_with_overlaps(ts[o], dur[o], track[o]))) == needs_lanes


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(0, 30)), min_size=1, max_size=60))
@settings(max_examples=40, deadline=None)
def test_random_slices_survive_trace_processor_rules(tmp_path_factory, spans):
    b = TraceBuilder()
    tracks = [b.thread_track(1, 1 + t, f"t{t}") for t in range(4)]
    for i, (t, s, d) in enumerate(spans):
        b.add_slice(tracks[t], T0 + s, d, f"s{i}", "c")
    tr = b.build()
    p = write_pftrace(tr, tmp_path_factory.mktemp("h") / "r.pftrace", chunk=7)
    _, slices, tracks_d = check(p)
    got = sorted((ts, dur, name) for u, ts, dur, name, *_ in slices if tracks_d[u][1].name != META_KEY)
    assert got == sorted((T0 + s, d, f"s{i}") for i, (t, s, d) in enumerate(spans))
    back = load_pftrace(p)
    assert sorted(zip(back.slices.track.tolist(), back.slices.ts_ns.tolist(), back.slices.dur_ns.tolist())) == \
        sorted((t, T0 + s, d) for t, s, d in spans)


# ---- real traces (through the Kineto JSON loader) ------------------------------------------------------------
def _json_events(path):  # type: ignore[no-untyped-def]
    import gzip
    import json

    op = gzip.open if str(path).endswith(".gz") else open
    with op(path, "rt") as f:
        d = json.load(f)
    return d["traceEvents"] if isinstance(d, dict) else d


def _model_rows(t):  # type: ignore[no-untyped-def]
    s = t.slices
    return sorted((int(s.track[i]), int(s.ts_ns[i]), int(s.dur_ns[i]), t.slice_name(i), t.s(s.cat[i]),
                   canon(t.slice_args(i))) for i in range(len(s)))


def test_real_kineto_trace_to_pftrace_and_back(kineto_trace, tmp_path):
    import neuron_prof

    tr = neuron_prof.load(kineto_trace)
    p = write_pftrace(tr, tmp_path / "real.pftrace")
    res, slices, tracks = check(p)
    n_x = sum(1 for e in _json_events(kineto_trace) if e.get("ph") == "X")
    proto = TraceProto()
    proto.ParseFromString(p.read_bytes())
    begins = sum(1 for pk in proto.packet if pk.track_event.type == TrackEvent.TYPE_SLICE_BEGIN)
    assert begins == len(tr.slices) == n_x
    flow_ids = collections.Counter(f for pk in proto.packet for f in pk.track_event.flow_ids)
    assert len(flow_ids) == len(tr.flows) and all(v == 2 for v in flow_ids.values())
    back = load_pftrace(p)
    assert back.processes == tr.processes and back.tracks == tr.tracks
    assert _model_rows(back) == _model_rows(tr)
    assert len(back.instants) == len(tr.instants) and len(back.counters) == len(tr.counters)
    assert sorted(back.counters.value.tolist()) == sorted(tr.counters.value.tolist())
    assert len(back.flows) == len(tr.flows)
    assert sorted(back.flows.flow_id.tolist()) == sorted(tr.flows.flow_id.tolist())


def test_real_torch_profiler_run(tmp_path):
    import torch
    from torch.profiler import ProfilerActivity, profile

    import neuron_prof

    x = torch.randn(32, 64)
    lin = torch.nn.Linear(64, 16)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True) as prof:
        for _ in range(3):
            y = lin(x @ torch.randn(64, 64)).relu().sum()
            y.backward()
    js = tmp_path / "torch.json"
    prof.export_chrome_trace(str(js))
    tr = neuron_prof.load(js)
    p = write_pftrace(tr, tmp_path / "torch.pftrace")
    res, slices, tracks = check(p)
    events = _json_events(js)
    n_x = sum(1 for e in events if e.get("ph") == "X")
    proto = TraceProto()
    proto.ParseFromString(p.read_bytes())
    te = [pk.track_event for pk in proto.packet if pk.HasField("track_event")]
    assert sum(1 for e in te if e.type == TrackEvent.TYPE_SLICE_BEGIN) == n_x == len(tr.slices) > 50
    assert sum(1 for e in te if e.type == TrackEvent.TYPE_SLICE_END) == n_x
    # names as the checker resolved them through the interned tables, against the JSON's own names
    got = collections.Counter(name for u, ts, dur, name, *_ in slices if dur or name)
    want = collections.Counter(e["name"] for e in events if e.get("ph") == "X")
    assert all(got[n] >= c for n, c in want.items())
    mm = [a for u, ts, dur, name, cat, a, _ in slices if name == "aten::mm"]
    assert mm and all(a and a.get("Input Dims") for a in mm)
    threads = [d for _, d, _ in tracks.values() if d.HasField("thread")]
    assert threads and all(d.thread.thread_name for d in threads)
    back = load_pftrace(p)
    assert _model_rows(back) == _model_rows(tr)


def test_slices_and_instants_on_a_counter_track_move_to_a_lane(tmp_path):
    b = TraceBuilder()
    p = b.process(1, "p")
    mem = b.track(p, "neuron:0 allocated", TrackKind.MEMORY, unit="bytes")
    b.add_counter(mem, T0, 10.0)
    b.add_slice(mem, T0 + 5, 10, "alloc burst")
    b.add_instant(mem, T0 + 7, "oom warning")
    tr = b.build()
    f = write_pftrace(tr, tmp_path / "c.pftrace")
    res, slices, tracks = check(f)
    assert res["warnings"] == {}
    assert sorted(n for _, _, _, n, *_ in slices if n != "neuron_prof metadata") == ["alloc burst", "oom warning"]
    back = load_pftrace(f)
    assert back.tracks == tr.tracks and len(back.slices) == len(back.instants) == len(back.counters) == 1
    assert back.slices.track[0] == back.instants.track[0] == back.counters.track[0] == mem
