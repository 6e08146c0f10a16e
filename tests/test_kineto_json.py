"""The Kineto/Chrome JSON loader against numbers computed independently with plain json/gzip/Decimal."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neuron_prof.loaders import load
from neuron_prof.loaders.json.reader import load_kineto_json, parse_kineto_into
from neuron_prof.model import KinetoCat, Meta, ProcessKind, TraceBuilder, TrackKind


def _read(path: Path) -> Any:
    raw = gzip.open(path).read() if path.name.endswith(".gz") else path.read_bytes()
    # Decimal: exact µs, so the expected ns do not share the loader's float arithmetic
    return json.loads(raw, parse_float=Decimal)


def _ns(ts: Any, base: int) -> int:
    return base + int(Decimal(ts) * 1000)


def _key(v: Any) -> Any:
    return v


def _expected(doc: Any) -> dict[str, Any]:
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    base = int(doc.get("baseTimeNanoseconds", 0)) if isinstance(doc, dict) else 0
    x = [e for e in events if e.get("ph") == "X"]
    inst = [e for e in events if e.get("ph") in ("i", "I")]
    pnames: dict[Any, str] = {}
    tnames: dict[tuple[Any, Any], str] = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            pnames[e["pid"]] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            tnames[(e["pid"], e["tid"])] = e["args"]["name"]
    ends: dict[tuple[Any, Any, Any], Counter[str]] = defaultdict(Counter)
    for e in events:
        if e.get("ph") in ("s", "t", "f"):
            ends[(e.get("cat"), e.get("name"), e.get("id"))][e["ph"]] += 1
    device = {(e["pid"], e["tid"]) for e in x if e.get("cat") in KinetoCat.DEVICE_CATS}
    return {
        "base": base,
        "x": x,
        "slice_ns": sorted(_ns(e["ts"], base) for e in x),
        "dur_ns": sorted(int(Decimal(e["dur"]) * 1000) for e in x),
        "names": Counter(e.get("name", "") for e in x),
        "instants": len(inst),
        "pnames": pnames,
        "tnames": tnames,
        "flow_keys": ends,
        "device": device,
    }


def test_real_trace_counts(kineto_trace: Path) -> None:
    # GIVEN a real trace and the numbers plain json computes from it
    doc = _read(kineto_trace)
    exp = _expected(doc)
    # WHEN it is loaded
    tr = load(kineto_trace)
    # THEN every X event is a slice, with the same names, start times and durations to the ns
    assert len(tr.slices) == len(exp["x"])
    assert Counter(tr.s(i) for i in tr.slices.name) == exp["names"]
    assert sorted(tr.slices.ts_ns.tolist()) == exp["slice_ns"]
    assert sorted(tr.slices.dur_ns.tolist()) == exp["dur_ns"]
    assert len(tr.instants) == exp["instants"]
    assert len(tr.counters) == 0
    # M events name processes and threads (the last name given wins)
    by_pid = {p.pid: p for p in tr.processes}
    for pid, name in exp["pnames"].items():
        assert by_pid[pid].name == name
    thread_names = {(tr.processes[t.process].pid, t.tid): t.name for t in tr.tracks if t.tid is not None}
    for k, name in exp["tnames"].items():
        assert thread_names[k] == name
    # one arrow from the s to each f of its key (these traces have no t and no reused s; MTIA fans out)
    keys = exp["flow_keys"]
    assert all(c["t"] == 0 and c["s"] <= 1 for c in keys.values())
    assert len(tr.flows) == sum(c["f"] for c in keys.values() if c["s"] == 1)
    # threads with kernels/memcpy/mtia events are device tracks in device processes
    dev = {(tr.processes[t.process].pid, t.tid) for t in tr.tracks if t.kind == TrackKind.DEVICE}
    assert dev == exp["device"]
    for t in tr.tracks:
        if t.kind == TrackKind.DEVICE:
            assert tr.processes[t.process].kind == ProcessKind.DEVICE
    # clock and Kineto's own keys
    assert tr.metadata[Meta.CLOCK] == "unix"
    assert tr.metadata[Meta.SOURCE_FORMAT] == "kineto_json"
    kineto = tr.metadata.get(Meta.KINETO, {})
    for k in doc:
        if k not in ("traceEvents", "baseTimeNanoseconds"):
            assert k in kineto
    dist = doc.get("distributedInfo") or {}
    if "rank" in dist:
        assert tr.metadata[Meta.RANK] == dist["rank"]
    assert not tr.metadata.get(Meta.WARNINGS)


def test_real_trace_flows_bind_to_their_slices(kineto_trace: Path) -> None:
    # GIVEN the flow ends of a real trace, read with plain json
    doc = _read(kineto_trace)
    exp = _expected(doc)
    ends: dict[tuple[Any, Any, Any], dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for e in doc["traceEvents"]:
        if e.get("ph") in ("s", "f"):
            ends[(e["cat"], e["name"], e["id"])][e["ph"]].append(e)
    tr = load_kineto_json(kineto_trace)
    pid_of = [tr.processes[t.process].pid for t in tr.tracks]
    # THEN each arrow's source slice is on the s event's thread and contains its ts, and the
    # destination slice is on the f event's thread and contains its ts (Kineto writes "bp": "e")
    checked = 0
    for row in range(len(tr.flows)):
        cat, name, fid = tr.s(tr.flows.cat[row]), tr.s(tr.flows.name[row]), int(tr.flows.flow_id[row])
        pair = ends.get((cat, name, fid))
        if pair is None or set(pair) != {"s", "f"}:
            continue  # an id that was renumbered to stay unique across categories

        def holds(end: int, ev: dict[str, Any]) -> bool:
            tk = tr.tracks[int(tr.slices.track[end])]
            t = _ns(ev["ts"], exp["base"])
            return ((pid_of[int(tr.slices.track[end])], tk.tid) == (ev["pid"], ev["tid"])
                    and int(tr.slices.ts_ns[end]) <= t <= int(tr.slices.ts_ns[end] + tr.slices.dur_ns[end]))

        assert holds(int(tr.flows.src[row]), pair["s"][0])
        assert any(holds(int(tr.flows.dst[row]), ev) for ev in pair["f"])
        checked += 1
    # ids repeated by fan-out or shared across categories are renumbered to stay unique; the rest checked
    assert checked >= 0.9 * sum(1 for c in exp["flow_keys"].values() if c["s"] == 1 and c["f"] >= 1)
    assert len(np.unique(tr.flows.flow_id)) == len(tr.flows)


def test_unix_us_without_base_and_relative_clock(tmp_path: Path) -> None:
    # Unix µs without baseTimeNanoseconds (some real traces) are used as they are
    p = tmp_path / "unix.json"
    p.write_text('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1695835542514261, "dur": 5}]}')
    tr = load_kineto_json(p)
    assert tr.slices.ts_ns.tolist() == [1695835542514261000]
    assert tr.metadata[Meta.CLOCK] == "unix"
    # small µs without a base: relative clock
    p.write_text('[{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 12.5, "dur": 0.25}]')
    tr = load_kineto_json(p)
    assert tr.slices.ts_ns.tolist() == [12500]
    assert tr.slices.dur_ns.tolist() == [250]
    assert tr.metadata[Meta.CLOCK] == "relative"


def test_times_exact_to_the_ns_far_from_base(tmp_path: Path) -> None:
    # float64 µs * 1000 would be off by a ns here; the loader splits whole µs and fraction
    base = 1_790_857_026_000_000_000
    ts = ["5160494368734.818", "8000000000000.001", "0.999", "4203669604595.407"]
    evs = ",".join(f'{{"ph":"X","name":"a","pid":1,"tid":1,"ts":{t},"dur":1.001}}' for t in ts)
    p = tmp_path / "t.json"
    p.write_text(f'{{"baseTimeNanoseconds": {base}, "traceEvents": [{evs}]}}')
    tr = load_kineto_json(p)
    assert tr.slices.ts_ns.tolist() == [base + int(Decimal(t) * 1000) for t in ts]
    assert tr.slices.dur_ns.tolist() == [1001] * 4


def test_phases_pairing_counters_async_flows(tmp_path: Path) -> None:
    # GIVEN every phase Perfetto reads, in one small document
    evs = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "host"}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
        {"ph": "M", "name": "process_sort_index", "pid": 1, "tid": 0, "args": {"sort_index": 3}},
        {"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": 2, "args": {"sort_index": 7}},
        {"ph": "M", "name": "process_labels", "pid": 1, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "B", "name": "outer", "cat": "c", "pid": 1, "tid": 2, "ts": 10, "args": {"a": 1}},
        {"ph": "B", "name": "inner", "pid": 1, "tid": 2, "ts": 11},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 12},
        {"ph": "E", "pid": 1, "tid": 2, "ts": 20, "args": {"b": 2}},
        {"ph": "X", "name": "x", "pid": 1, "tid": 2, "ts": 30, "dur": 5},
        {"ph": "X", "name": "y", "pid": 1, "tid": 3, "ts": 40, "dur": 5},
        {"ph": "X", "name": "z", "pid": 1, "tid": 3, "ts": 50, "dur": 5},
        {"ph": "s", "id": 9, "cat": "c", "name": "n", "pid": 1, "tid": 2, "ts": 31},
        {"ph": "t", "id": 9, "cat": "c", "name": "n", "pid": 1, "tid": 3, "ts": 41},
        {"ph": "f", "id": 9, "cat": "c", "name": "n", "pid": 1, "tid": 3, "ts": 49},  # no bp: next slice
        {"ph": "X", "name": "v2a", "pid": 1, "tid": 4, "ts": 60, "dur": 1, "bind_id": "0x1", "flow_out": True},
        {"ph": "X", "name": "v2b", "pid": 1, "tid": 4, "ts": 70, "dur": 1, "bind_id": "0x1", "flow_in": True},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 1, "args": {"alloc": 5, "reserved": 8.5}},
        {"ph": "C", "name": "mem", "pid": 1, "ts": 2, "args": {"alloc": 6}},
        {"ph": "b", "name": "req", "cat": "a", "id": 1, "pid": 1, "ts": 5},
        {"ph": "n", "name": "mark", "cat": "a", "id": 1, "pid": 1, "ts": 6},
        {"ph": "e", "name": "req", "cat": "a", "id": 1, "pid": 1, "ts": 9},
        {"ph": "i", "name": "[memory]", "cat": "cpu_instant_event", "s": "t", "pid": 1, "tid": 2, "ts": 33,
         "args": {"Bytes": 64, "Total Allocated": 64}},
        {"ph": "I", "name": "inst", "pid": 1, "tid": 2, "ts": 34},
        {"ph": "Q", "name": "what", "pid": 1, "tid": 2, "ts": 35},
    ]
    p = tmp_path / "all.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    tr = load_kineto_json(p)
    names = [tr.s(i) for i in tr.slices.name]
    assert sorted(names) == ["inner", "outer", "req", "v2a", "v2b", "x", "y", "z"]
    outer = names.index("outer")
    assert tr.slices.dur_ns[outer] == 10_000
    assert tr.slice_args(outer) == {"a": 1, "b": 2}  # E's args merge into the slice
    assert tr.slices.dur_ns[names.index("inner")] == 1_000
    # s -> t -> f: two hops, x -> y -> z
    hops = sorted((names[s], names[d]) for s, d in zip(tr.flows.src, tr.flows.dst))
    assert hops == [("v2a", "v2b"), ("x", "y"), ("y", "z")]
    # counters: one track per (pid, name, key)
    ctracks = {tr.tracks[t].name for t in tr.counters.track}
    assert ctracks == {"mem alloc", "mem reserved"}
    assert len(tr.counters) == 3
    # async: a slice on an ASYNC track, the n instant on it
    req = names.index("req")
    assert tr.tracks[int(tr.slices.track[req])].kind == TrackKind.ASYNC
    assert tr.slices.dur_ns[req] == 4_000
    inames = sorted(tr.s(i) for i in tr.instants.name)
    assert inames == ["[memory]", "inst", "mark"]
    # M events
    host = next(p for p in tr.processes if p.pid == 1)
    assert (host.name, host.sort_index, host.labels) == ("host", 3, "CPU")
    main = next(t for t in tr.tracks if t.tid == 2)
    assert (main.name, main.sort_index) == ("main", 7)
    assert any("ph=Q" in w for w in tr.metadata[Meta.WARNINGS])


def test_parse_into_builder_twice_appends() -> None:
    # The capture calls parse_kineto_into once per profiler cycle, then adds probe events
    doc = {"baseTimeNanoseconds": 1_000_000_000_000_000_000, "traceEvents": [
        {"ph": "X", "name": "a", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1.0, "dur": 5, "args": {"k": 1}},
        {"ph": "X", "name": "b", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 2.0, "dur": 1},
        {"ph": "s", "id": 4, "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": 1, "ts": 2.0},
        {"ph": "f", "id": 4, "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": 1, "ts": 1.0, "bp": "e"},
    ]}
    b = TraceBuilder()
    parse_kineto_into(b, doc, "cycle")
    parse_kineto_into(b, doc, "cycle")
    t = b.thread_track(1, 1)
    b.add_slice(b.track(0, "compile", TrackKind.COMPILE), 10, 5, "graph", args={"cache": "miss"})
    tr = b.build()
    assert len(tr.slices) == 5
    assert tr.slices.track[:4].tolist() == [t] * 4
    assert [tr.slice_args(i) for i in range(4)] == [{"k": 1}, {}, {"k": 1}, {}]
    assert tr.slice_args(4) == {"cache": "miss"}
    # the second cycle's arrow points at the second cycle's rows, with its own id
    assert tr.flows.src.tolist() == [1, 3] and tr.flows.dst.tolist() == [0, 2]
    assert len(set(tr.flows.flow_id.tolist())) == 2


def test_real_torch_profiler_run(tmp_path: Path) -> None:
    # GIVEN a real torch.profiler CPU run with shapes and stacks
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_stack=True, profile_memory=True,
                 experimental_config=torch._C._profiler._ExperimentalConfig(verbose=True)) as prof:
        for _ in range(3):
            a = (a @ a).relu() / 64
    out = tmp_path / "torch.json"
    prof.export_chrome_trace(str(out))
    doc = _read(out)
    exp = _expected(doc)
    # WHEN loaded
    tr = load(out)
    # THEN the counts and names match plain json, and shapes and stacks are in the args
    assert len(tr.slices) == len(exp["x"])
    assert len(tr.instants) == exp["instants"]
    assert sorted(tr.slices.ts_ns.tolist()) == exp["slice_ns"]
    mm = [i for i in range(len(tr.slices)) if tr.slice_name(i) == "aten::mm"]
    assert len(mm) == 3
    args = tr.slice_args(mm[0])
    assert args["Input Dims"] == [[64, 64], [64, 64]]
    assert "Call stack" in args or any("Call stack" in tr.slice_args(i) for i in range(len(tr.slices)))
    mem = tr.name_ids("[memory]")
    assert len(mem) == 1 and (tr.instants.name == mem[0]).sum() == sum(
        1 for e in doc["traceEvents"] if e.get("name") == "[memory]")
    assert tr.metadata[Meta.KINETO]["schemaVersion"] == 1


def test_parallel_parse_gives_the_same_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a generated Kineto trace and a copy of it written by our exporter (np_slice hints, own key)
    from bench.gen_trace import write
    from neuron_prof.exporters.chrome_json import write_chrome_json
    from tests._builders import assert_same

    src = write(20_000, tmp_path / "g.json")
    monkeypatch.setenv("NEURON_PROF_JSON_WORKERS", "1")
    seq = load_kineto_json(src)
    write_chrome_json(seq, tmp_path / "own.json")
    seq_own = load_kineto_json(tmp_path / "own.json")
    # WHEN the same files are parsed by 3 processes
    monkeypatch.setenv("NEURON_PROF_JSON_WORKERS", "3")
    par = load_kineto_json(src)
    par_own = load_kineto_json(tmp_path / "own.json")
    # THEN the traces are identical, down to track order, rows and flow ids
    assert_same(seq, par)
    assert_same(seq_own, par_own)
    assert seq.metadata == {**par.metadata}
    # a .json.gz goes through a temporary file to the same result
    import gzip as _gz

    (tmp_path / "g.json.gz").write_bytes(_gz.compress(src.read_bytes()))
    par_gz = load_kineto_json(tmp_path / "g.json.gz")
    assert_same(seq, par_gz)
    assert par_gz.metadata[Meta.SOURCE] == str(tmp_path / "g.json.gz")
    # and a damaged file falls back to the sequential parse, warnings included
    text = src.read_text().replace('"name": "nn.Module: Linear_6"', '"name": "nn.Module: Linear_6" @@', 1)
    (tmp_path / "bad.json").write_text(text)
    bad_par = load_kineto_json(tmp_path / "bad.json")
    monkeypatch.setenv("NEURON_PROF_JSON_WORKERS", "1")
    bad_seq = load_kineto_json(tmp_path / "bad.json")
    assert_same(bad_seq, bad_par)
    assert bad_par.metadata[Meta.WARNINGS] == bad_seq.metadata[Meta.WARNINGS]
    assert len(bad_par.slices) == len(seq.slices) - 1


def test_a_transform_reads_in_this_process_and_sees_every_event(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Capture loads each cycle with a transform inside the user's job: no worker processes, whatever the
    environment asks, and the transform sees every event once."""
    import orjson

    import neuron_prof.loaders.json.reader as kj
    from bench.gen_trace import write

    src = write(20_000, tmp_path / "g.json")
    monkeypatch.setenv("NEURON_PROF_JSON_WORKERS", "3")

    def no_workers(*a: object, **k: object) -> None:
        raise AssertionError("worker processes started")

    monkeypatch.setattr(kj, "_load_parallel", no_workers)
    seen: list[int] = []

    def transform(events: list[object]) -> list[object]:
        seen.append(len(events))
        return events

    got = load_kineto_json(src, transform=transform)
    monkeypatch.setenv("NEURON_PROF_JSON_WORKERS", "1")
    assert sum(seen) == len(orjson.loads(src.read_bytes())["traceEvents"])
    assert got.n_events == load_kineto_json(src).n_events


def test_parallel_parse_of_counters_and_a_real_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counter tracks ("ph": "C", as our exporter writes memory) and a real NCCL trace parse the same in 3
    processes as in one."""
    from neuron_prof.exporters import write_trace
    from neuron_prof.model import TraceBuilder, TrackKind
    from tests._builders import assert_same
    from tests.conftest import shared_kineto

    b = TraceBuilder()
    th = b.thread_track(1, 1, "main")
    mem = [b.track(b.process(1, "host"), f"mem {d}", TrackKind.MEMORY, unit="bytes") for d in range(3)]
    for k in range(30_000):
        b.add_slice(th, k * 100, 50, f"op{k % 11}", "cpu_op", {"k": k})
        b.add_counter(mem[k % 3], k * 100, float(k))
    src = tmp_path / "counters.json"
    write_trace(b.build(), src)
    real = tmp_path / "nccl.json"
    real.write_bytes(gzip.decompress(shared_kineto("nccl_parser_config_nccl_data.json.gz").read_bytes()))
    for path in (src, real):
        monkeypatch.setenv("NEURON_PROF_JSON_WORKERS", "1")
        seq = load_kineto_json(path)
        monkeypatch.setenv("NEURON_PROF_JSON_WORKERS", "3")
        assert_same(seq, load_kineto_json(path))
    assert len(seq.slices) > 20_000
