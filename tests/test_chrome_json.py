"""Chrome/Kineto JSON export: Kineto's conventions checked with plain json, and exact round trips."""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from neuron_prof.errors import ExportError
from neuron_prof.exporters import write_trace
from neuron_prof.exporters.chrome_json import write_chrome_json
from neuron_prof.loaders import load
from neuron_prof.model import Cat, Meta, ProcessKind, Trace, TraceBuilder, TrackKind
from neuron_prof.model.schema import META_KEY
from tests._builders import assert_same


def _doc(path: Path) -> dict[str, Any]:
    raw = gzip.open(path).read() if path.name.endswith(".gz") else path.read_bytes()
    return json.loads(raw, parse_float=Decimal)  # type: ignore[no-any-return]


@pytest.mark.parametrize("ext", [".json", ".json.gz"])
def test_real_trace_round_trip(kineto_trace: Path, tmp_path: Path, ext: str) -> None:
    # JSON -> model -> JSON -> model -> JSON -> model: the same trace each time
    a = load(kineto_trace)
    write_chrome_json(a, tmp_path / f"a{ext}")
    b = load(tmp_path / f"a{ext}")
    assert_same(a, b)
    write_chrome_json(b, tmp_path / f"b{ext}")
    c = load(tmp_path / f"b{ext}")
    assert_same(b, c)
    assert b.metadata[Meta.KINETO] == c.metadata[Meta.KINETO]
    # Kineto's keys survive (the base is ours)
    orig = _doc(kineto_trace)
    out = _doc(tmp_path / f"a{ext}")
    for k in orig:
        if k not in ("traceEvents",):
            assert k in out
    if "deviceProperties" in orig:
        assert out["deviceProperties"] == orig["deviceProperties"]


def _probe_trace() -> Trace:
    """A capture-like trace: Kineto threads plus probe tracks without tids, counters, flows, findings."""
    b = TraceBuilder()
    host = b.process(4242, name="python", rank=0)
    main = b.thread_track(4242, 4242, "thread 4242 (python)")
    dev = b.process(0, name="neuron:0", kind=ProcessKind.DEVICE)
    q0 = b.track(dev, "queue 0", TrackKind.DEVICE)
    q1 = b.track(dev, "queue 1", TrackKind.DEVICE)
    comp = b.track(host, "compile", TrackKind.COMPILE)
    fb = b.track(host, "fallback", TrackKind.FALLBACK)
    mem = b.track(dev, "neuron:0 allocated", TrackKind.MEMORY, unit="bytes")
    rss = b.track(host, "rss", TrackKind.COUNTER)
    t0 = 1_790_000_000_123_456_789
    op = b.add_slice(main, t0, 5_000, "aten::mm", "cpu_op", {"Input Dims": [[2, 2], [2, 2]], "name\n": "\x1b[31m"})
    k = b.add_slice(q0, t0 + 6_001, 999, "mm_kernel", Cat.DEVICE, {"seq": 7})
    b.add_slice(q1, t0 + 6_001, 999, "other", Cat.DEVICE)
    c = b.add_slice(comp, t0 - 1_000_000, 900_001, "aten::mm", Cat.COMPILE, {"cache": "miss", "signature": "f32[2,2]"})
    b.add_slice(fb, t0 + 7, 3, 'aten::nonzero "x"', Cat.FALLBACK)
    b.add_instant(main, t0 + 1, "[memory]", "cpu_instant_event", {"Bytes": 16})
    b.add_counter(mem, t0, 1024.0)
    b.add_counter(mem, t0 + 10, 2048.5)
    b.add_counter(rss, t0 + 5, 3.0)
    b.add_flow(op, k, 77, "ac2g", "ac2g")
    b.add_flow(c, op, None, "compile", "first call")
    b.metadata.update({Meta.BACKEND: "cpu", Meta.RANK: 0, Meta.WORLD_SIZE: 2, Meta.CLOCK: "unix",
                       Meta.STEPS: [[0, t0, t0 + 10]], Meta.WALL: [t0 - 10, t0 + 10_000]})
    b.findings.append({"kind": "first_call_compile", "severity": "warning", "title": "aten::mm compiled on first call",
                       "cost_ns": 900_001, "share": 0.9, "count": 1, "evidence": {"rows": [c]}, "ts_ns": t0 - 1_000_000})
    return b.build()


def test_probe_tracks_findings_and_kineto_conventions(tmp_path: Path) -> None:
    tr = _probe_trace()
    out = tmp_path / "t.json"
    write_trace(tr, out)
    doc = _doc(out)
    # Kineto's top level
    for k in ("schemaVersion", "deviceProperties", "baseTimeNanoseconds", "displayTimeUnit", "traceEvents",
              "distributedInfo", META_KEY):
        assert k in doc
    base = int(doc["baseTimeNanoseconds"])
    assert base % 1_000_000_000 == 0
    evs = doc["traceEvents"]
    by_ph = Counter(e["ph"] for e in evs)
    assert by_ph["X"] == len(tr.slices) and by_ph["C"] == len(tr.counters)
    assert by_ph["i"] == len(tr.instants) + len(tr.findings)  # findings also as instants
    assert by_ph["s"] == by_ph["f"] == len(tr.flows)
    # X: original pid/tid for threads, µs relative to the base with 3 decimals, exact
    xs = [e for e in evs if e["ph"] == "X"]
    assert [base + int(e["ts"] * 1000) for e in xs] == tr.slices.ts_ns.tolist()
    assert [int(e["dur"] * 1000) for e in xs] == tr.slices.dur_ns.tolist()
    assert xs[0]["pid"] == 4242 and xs[0]["tid"] == 4242 and xs[0]["cat"] == "cpu_op"
    assert xs[0]["args"] == {"Input Dims": [[2, 2], [2, 2]], "name\n": "\x1b[31m"}
    # probe tracks: a stable synthetic int tid each, distinct in their process, named by thread_name
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    for e in xs:
        assert (e["pid"], e["tid"]) in names
    dev_tids = {e["tid"] for e in xs if e["pid"] == 0}
    assert len(dev_tids) == 2 and all(isinstance(t, int) and 0 < t < 2**31 for t in dev_tids)
    assert {names[(0, t)] for t in dev_tids} == {"queue 0", "queue 1"}
    assert "findings" in names.values()
    again = tmp_path / "again.json"
    write_chrome_json(tr, again)
    assert {e["tid"] for e in _doc(again)["traceEvents"] if e["ph"] == "X" and e["pid"] == 0} == dev_tids
    # processes named, labels/sort indices kept
    pnames = {e["pid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "process_name"}
    assert pnames == {4242: "python", 0: "neuron:0"}
    # flows: s on the source slice's thread at its start, f with bp "e" on the destination's
    s = [e for e in evs if e["ph"] == "s"]
    f = [e for e in evs if e["ph"] == "f"]
    assert all(e["bp"] == "e" for e in f)
    assert s[0]["id"] == f[0]["id"] == 77 and s[0]["cat"] == "ac2g"
    assert (s[0]["pid"], s[0]["tid"]) == (4242, 4242) and f[0]["pid"] == 0
    # counters: "<name> <key>", as Perfetto names C tracks
    cs = [e for e in evs if e["ph"] == "C"]
    assert {(e["name"], tuple(e["args"])) for e in cs} == {("neuron:0", ("allocated",)), ("rss", ("value",))}
    # findings in the top-level key and as instants
    assert doc[META_KEY]["findings"][0]["kind"] == "first_call_compile"
    fi = [e for e in evs if e["ph"] == "i" and e.get("cat") == Cat.FINDING]
    assert len(fi) == 1 and fi[0]["name"] == "aten::mm compiled on first call"
    # and it all comes back
    back = load(out)
    assert_same(tr, back)
    assert back.tracks[back.find_track(TrackKind.MEMORY)].unit == "bytes"
    assert back.find_track(TrackKind.FINDINGS) is None  # the findings instants were ours, not the model's


def test_gzip_and_relative_clock(tmp_path: Path) -> None:
    b = TraceBuilder()
    t = b.thread_track("Spans", "PyTorch Profiler", "PyTorch Profiler")
    b.add_slice(t, 12_345, 1, "step", "Trace")
    b.add_slice(t, 1, 0, "zero", "Trace")
    b.metadata[Meta.CLOCK] = "relative"
    tr = b.build()
    out = tmp_path / "r.json.gz"
    write_chrome_json(tr, out)
    doc = json.loads(gzip.open(out).read())
    assert "baseTimeNanoseconds" not in doc  # no Unix base to claim
    assert [e["ts"] for e in doc["traceEvents"] if e["ph"] == "X"] == [12.345, 0.001]
    back = load(out)
    assert back.metadata[Meta.CLOCK] == "relative"
    assert_same(tr, back)


def test_empty_trace_with_findings_only(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.findings.append({"kind": "probe_error", "title": "probe failed"})
    tr = b.build()
    write_chrome_json(tr, tmp_path / "e.json")
    back = load(tmp_path / "e.json")
    assert back.findings == tr.findings
    assert len(back.processes) == 0 and len(back.tracks) == 0 and len(back.instants) == 0


def test_unwritable_path_raises_export_error(tmp_path: Path) -> None:
    tr = _probe_trace()
    with pytest.raises(ExportError) as e:
        write_chrome_json(tr, tmp_path / "no" / "such" / "dir" / "t.json")
    assert "t.json" in str(e.value) and "\n" not in str(e.value)
    # a failed export leaves nothing behind, and an existing file is untouched
    good = tmp_path / "good.json"
    good.write_text("keep")
    if os.geteuid() != 0:
        tmp_path.chmod(0o500)
        try:
            with pytest.raises(ExportError):
                write_chrome_json(tr, good)
        finally:
            tmp_path.chmod(0o700)
        assert good.read_text() == "keep"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_generated_trace_exports_every_event(tmp_path: Path) -> None:
    from bench.gen_trace import write

    src = write(3_000, tmp_path / "g.json")
    doc = json.loads(src.read_bytes())
    tr = load(src)
    write_chrome_json(tr, tmp_path / "o.json")
    out = json.loads((tmp_path / "o.json").read_bytes())
    count = Counter(e["ph"] for e in doc["traceEvents"])
    got = Counter(e["ph"] for e in out["traceEvents"])
    for ph in ("X", "i", "s", "f"):
        assert got[ph] == count[ph], ph
    assert_same(tr, load(tmp_path / "o.json"))


def test_damaged_own_key_still_loads(tmp_path: Path) -> None:
    # GIVEN our file whose neuron_prof block someone mangled
    tr = _probe_trace()
    write_chrome_json(tr, tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_bytes())
    for bad in ({"tracks": "x", "processes": 5, "metadata": [1], "findings": 7},
                {"tracks": [{"pid": [1], "tid": {"a": 1}, "kind": 3, "name": None, "orig_tid": {"x": 1}}, 5],
                 "processes": [{"pid": None}], "findings": ["x", {"kind": "k"}]},
                "not even an object"):
        doc[META_KEY] = bad
        (tmp_path / "bad.json").write_bytes(json.dumps(doc).encode())
        # THEN the events still load, as from any Chrome JSON
        back = load(tmp_path / "bad.json")
        assert len(back.slices) == len(tr.slices) and len(back.counters) == len(tr.counters)
