"""Damaged and hostile Chrome/Kineto JSON: a one-line error naming the file, or a best-effort load with a
warning; never a hang, never another exception. Each kind of damage has its own test."""

from __future__ import annotations

import gzip
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.loaders import load
from neuron_prof.loaders.json.reader import load_kineto_json
from neuron_prof.model import Meta, Trace
from tests._builders import KINETO_BASE as BASE
from tests._builders import kineto_event as _x
from tests._builders import kineto_seed_bytes
from tests._builders import kineto_text as _kineto_text


def _write(tmp_path: Path, text: str | bytes, name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def _warnings(tr: Trace) -> str:
    return "\n".join(tr.metadata.get(Meta.WARNINGS, []))


def _one_line_error(exc: pytest.ExceptionInfo[TraceLoadError], path: Path) -> str:
    msg = str(exc.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def test_truncated_json_reads_complete_events(tmp_path: Path) -> None:
    # GIVEN a job killed while writing: the array cut in the middle of event 41
    events = [_x(i) for i in range(60)]
    text = _kineto_text(events)
    cut = text.index('"op40"') + 3
    p = _write(tmp_path, text[:cut])
    # WHEN loaded THEN the 40 complete events are there, with a warning saying what happened
    tr = load(p)
    assert [tr.slice_name(i) for i in range(len(tr.slices))] == [f"op{i}" for i in range(40)]
    assert "truncated" in _warnings(tr)
    assert tr.metadata[Meta.CLOCK] == "unix" and tr.slices.ts_ns[1] == BASE + 10_000


def test_truncated_after_a_complete_event(tmp_path: Path) -> None:
    text = _kineto_text([_x(i) for i in range(10)])
    p = _write(tmp_path, text[: text.index('"op5"') - 10])  # ends right after "op4"'s "},"
    tr = load(p)
    assert len(tr.slices) == 5 and "truncated" in _warnings(tr)


def test_truncated_gzip(tmp_path: Path) -> None:
    text = _kineto_text([_x(i) for i in range(3000)]).encode()
    gz = gzip.compress(text)
    p = _write(tmp_path, gz[: len(gz) // 2], "t.json.gz")
    tr = load(p)
    assert 0 < len(tr.slices) < 3000
    assert [tr.slice_name(i) for i in range(len(tr.slices))] == [f"op{i}" for i in range(len(tr.slices))]
    assert "gzip stream truncated" in _warnings(tr)


def test_gzip_that_is_not_gzip(tmp_path: Path) -> None:
    p = _write(tmp_path, b"\x1f\x8b" + os.urandom(200), "t.json.gz")
    with pytest.raises(TraceFormatError) as e:
        load(p)
    assert "gzip" in _one_line_error(e, p)


def test_invalid_utf8_is_replaced(tmp_path: Path) -> None:
    text = _kineto_text([_x(0), _x(1, name="BAD"), _x(2)]).encode().replace(b"BAD", b"B\xff\xfeD")
    tr = load(_write(tmp_path, text))
    assert [tr.slice_name(i) for i in range(3)] == ["op0", "B??D", "op2"]
    assert "UTF-8" in _warnings(tr)


def test_control_characters_in_names_are_kept_literally(tmp_path: Path) -> None:
    name = "a\x00b\x1b[31mred\x1b[0m\n[bold]x[/bold]\u2028"
    tr = load(_write(tmp_path, _kineto_text([_x(0, name=name, cat="c\tc")])))
    assert tr.slice_name(0) == name and tr.s(tr.slices.cat[0]) == "c\tc"


def test_nan_and_infinity(tmp_path: Path) -> None:
    # GIVEN the non-standard literals Python's json writes
    text = _kineto_text([_x(0), _x(1), _x(2), {"ph": "C", "name": "m", "pid": 1, "ts": 1.0, "args": {"a": 1, "b": 2}}])
    text = text.replace('"ts": 10.0', '"ts": NaN').replace('"dur": 5.0, "args": {"External id": 2}',
                                                             '"dur": Infinity, "args": {"External id": 2}')
    text = text.replace('"b": 2', '"b": -Infinity')
    tr = load(_write(tmp_path, text))
    # THEN the event without a usable ts is dropped, the infinite dur becomes 0, the bad sample is skipped
    assert [tr.slice_name(i) for i in range(len(tr.slices))] == ["op0", "op2"]
    assert tr.slices.dur_ns.tolist() == [5000, 0]
    assert len(tr.counters) == 1
    w = _warnings(tr)
    assert "NaN" in w and "ts" in w and "dur" in w and "counter" in w


def test_ids_beyond_int64(tmp_path: Path) -> None:
    big = 2**70
    text = _kineto_text([_x(0, pid=big, tid=-(2**65)), _x(1, pid=big, tid=-(2**65), args={"n": 2**80}),
                         {"ph": "s", "id": big, "cat": "c", "name": "n", "pid": big, "tid": -(2**65), "ts": 0.0},
                         {"ph": "f", "id": big, "cat": "c", "name": "n", "pid": big, "tid": -(2**65), "ts": 10.0,
                          "bp": "e"}])
    tr = load(_write(tmp_path, text))
    assert len(tr.slices) == 2 and len(tr.flows) == 1
    pid = tr.processes[tr.tracks[int(tr.slices.track[0])].process].pid
    assert str(pid) in (str(big), str(float(big)))  # kept as text (the model keeps pids in int64)
    assert 0 <= int(tr.flows.flow_id[0]) < 2**63
    assert tr.slice_args(1)["n"] in (2**80, float(2**80), str(2**80))


def test_wrong_types(tmp_path: Path) -> None:
    text = _kineto_text([_x(0, ts="soon"), _x(1, dur=None), _x(2, name=["list", 1], cat={"d": 1}),
                         _x(3, args=[1, 2]), _x(4, pid=1.0, tid=True), _x(5, ts="50.5", dur="1")])
    tr = load(_write(tmp_path, text))
    names = [tr.slice_name(i) for i in range(len(tr.slices))]
    assert names == ["op1", '["list",1]', "op3", "op4", "op5"]  # "soon" is not a time
    assert tr.slices.dur_ns[0] == 0
    assert tr.slice_args(2) == {"args": [1, 2]}
    # numeric strings are numbers, as Perfetto reads them
    assert (tr.slices.ts_ns[4], tr.slices.dur_ns[4]) == (BASE + 50_500, 1_000)
    assert tr.tracks[int(tr.slices.track[3])].tid == 1  # true and 1.0 are the same thread as 1
    w = _warnings(tr)
    assert "ts" in w and "dur" in w and "not an object" in w


def test_missing_keys(tmp_path: Path) -> None:
    evs = [{"ph": "X", "ts": 1.0, "dur": 2.0}, {"ph": "X", "name": "no ts", "dur": 1.0}, {"name": "no ph", "ts": 1},
           {"ph": "i", "ts": 3.0}, {"ph": "M", "name": "thread_name", "pid": 1}, {"ph": "f", "ts": 4.0}]
    tr = load(_write(tmp_path, _kineto_text(evs)))
    assert len(tr.slices) == 1 and tr.slice_name(0) == "" and tr.tracks[0].tid == 0
    assert len(tr.instants) == 1
    w = _warnings(tr)
    assert "ts" in w and "phase" in w and "metadata" in w


def test_negative_durations(tmp_path: Path) -> None:
    tr = load(_write(tmp_path, _kineto_text([_x(0, dur=-3.0), _x(1)])))
    assert tr.slices.dur_ns.tolist() == [0, 5000]
    assert "negative dur" in _warnings(tr)


def test_overlapping_and_unsorted_slices_are_kept_as_given(tmp_path: Path) -> None:
    evs = [_x(5, ts=50.0, dur=30.0), _x(1, ts=10.0, dur=100.0), _x(2, ts=60.0, dur=100.0), _x(3, ts=60.0, dur=100.0)]
    tr = load(_write(tmp_path, _kineto_text(evs)))
    assert tr.slices.ts_ns.tolist() == [BASE + t for t in (50_000, 10_000, 60_000, 60_000)]
    assert not _warnings(tr)


def test_empty_file(tmp_path: Path) -> None:
    p = _write(tmp_path, b"")
    with pytest.raises(TraceLoadError) as e:
        load(p)
    assert "empty" in _one_line_error(e, p)
    with pytest.raises(TraceFormatError) as e2:
        load_kineto_json(p)
    assert "empty" in _one_line_error(e2, p)
    p2 = _write(tmp_path, b"  \n\t ", "ws.json")
    with pytest.raises(TraceFormatError) as e3:
        load(p2)
    assert "whitespace" in _one_line_error(e3, p2)


@pytest.mark.parametrize("text, words", [
    ('{"foo": 1, "bar": [1, 2]}', "without traceEvents"),
    ('{"traceEvents": {"ph": "X"}}', "not a list"),
    ("[1, 2, 3]", "none of the 3 entries"),
    ('[{"name": "a"}, {"name": "b"}]', "none of the 2 entries"),
    ('"just a string"', "not JSON"),
    ("{not json at all", "not valid JSON"),
    ('{"schemaVersion": 1, "traceEvents": [{"ph": "X"', "no complete event"),
])
def test_json_that_is_not_a_trace(tmp_path: Path, text: str, words: str) -> None:
    p = _write(tmp_path, text)
    with pytest.raises(TraceFormatError) as e:
        load(p)
    assert words in _one_line_error(e, p)


def test_empty_trace_is_a_trace(tmp_path: Path) -> None:
    tr = load(_write(tmp_path, '{"traceEvents": []}'))
    assert tr.n_events == 0


def test_huge_single_string(tmp_path: Path) -> None:
    # a 30 MB name full of the separators the chunker cuts at: read in bounded time
    name = "},{" * 10_000_000
    t = time.perf_counter()
    tr = load(_write(tmp_path, _kineto_text([_x(0), _x(1, name=name), _x(2)])))
    assert time.perf_counter() - t < 60
    assert len(tr.slices) == 3 and tr.slice_name(1) == name


def test_deeply_nested_args(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    text = _kineto_text([_x(0), _x(1), _x(2)]).replace('{"External id": 1}', '{"deep": ' + deep + "}")
    tr = load(_write(tmp_path, text))
    assert [tr.slice_name(i) for i in range(len(tr.slices))] == ["op0", "op2"]  # the hostile event skipped
    assert "depth" in _warnings(tr) or "nested" in _warnings(tr)
    # nesting orjson reads but cannot write back (> 255 levels) is kept as text, not lost
    nested: Any = 1
    for _ in range(400):
        nested = [nested]
    tr = load(_write(tmp_path, _kineto_text([_x(0, args={"n": nested})]), "n.json"))
    assert len(tr.slices) == 1 and "n" in tr.slice_args(0)


def test_unknown_phases_are_counted(tmp_path: Path) -> None:
    evs = [_x(0), {"ph": "Z", "ts": 1.0}, {"ph": "Z", "ts": 2.0}, {"ph": 7, "ts": 2.0}, {"ph": ["x"], "ts": 1.0},
           {"ph": "P", "ts": 3.0}]
    tr = load(_write(tmp_path, _kineto_text(evs)))
    w = _warnings(tr)
    assert "2 events with an unknown phase skipped (ph=Z)" in w and "ph=7" in w
    assert "ph=P" not in w  # samples are known, just not kept


def test_string_pids_and_tids(tmp_path: Path) -> None:
    evs = [_x(0, pid="Spans", tid="PyTorch Profiler"), _x(1, pid="", tid=""),
           {"ph": "M", "name": "thread_name", "pid": "Spans", "tid": "PyTorch Profiler", "args": {"name": "prof"}}]
    tr = load(_write(tmp_path, _kineto_text(evs)))
    keys = {(tr.processes[t.process].pid, t.tid, t.name) for t in tr.tracks}
    assert keys == {("Spans", "PyTorch Profiler", "prof"), ("", "", "thread ")}


def test_unmatched_begin_end(tmp_path: Path) -> None:
    evs = [_x(0, ts=100.0), {"ph": "B", "name": "open", "pid": 1, "tid": 1, "ts": 10.0},
           {"ph": "E", "pid": 1, "tid": 2, "ts": 5.0}]
    tr = load(_write(tmp_path, _kineto_text(evs)))
    i = [tr.slice_name(k) for k in range(len(tr.slices))].index("open")
    assert tr.slices.ts_ns[i] + tr.slices.dur_ns[i] == BASE + 105_000  # closed where the trace ends
    w = _warnings(tr)
    assert "without an E" in w and "without a matching B" in w


def test_array_form_without_closing_bracket(tmp_path: Path) -> None:
    # Chrome's array format allows the closing bracket to be missing
    text = "[" + ",\n".join(json.dumps(_x(i)) for i in range(5)) + ",\n"
    tr = load(_write(tmp_path, text))
    assert len(tr.slices) == 5


def test_byte_order_mark(tmp_path: Path) -> None:
    tr = load(_write(tmp_path, b"\xef\xbb\xbf" + _kineto_text([_x(0)]).encode()))
    assert len(tr.slices) == 1


def test_damage_in_the_middle_skips_one_event(tmp_path: Path) -> None:
    events = [_x(i) for i in range(30)]
    text = _kineto_text(events).replace('"name": "op12"', '"name": "op12" @#!')
    tr = load(_write(tmp_path, text))
    names = [tr.slice_name(i) for i in range(len(tr.slices))]
    assert names == [f"op{i}" for i in range(30) if i != 12]
    assert "damaged JSON" in _warnings(tr)


def test_binary_garbage(tmp_path: Path) -> None:
    p = _write(tmp_path, b"\x00\x01\x02garbage" + os.urandom(300))
    with pytest.raises(TraceFormatError) as e:
        load_kineto_json(p)
    assert "not JSON" in _one_line_error(e, p)


def test_directory_missing_file_and_permission(tmp_path: Path) -> None:
    for fn in (load, load_kineto_json):
        with pytest.raises(TraceLoadError) as e:
            fn(tmp_path)
        assert "directory" in _one_line_error(e, tmp_path)
        missing = tmp_path / "nope.json"
        with pytest.raises(TraceLoadError) as e:
            fn(missing)
        assert "no such file" in _one_line_error(e, missing)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file anyway: permission denial cannot happen")
def test_permission_denied(tmp_path: Path) -> None:
    p = _write(tmp_path, _kineto_text([_x(0)]))
    p.chmod(0)
    try:
        for fn in (load, load_kineto_json):
            with pytest.raises(TraceLoadError) as e:
                fn(p)
            assert "permission denied" in _one_line_error(e, p)
    finally:
        p.chmod(0o600)


# ---- fuzz: mutated real traces either load or raise TraceLoadError ------------------------------------------
# A small real Kineto trace with metadata, flows, instants and string pids (16 kB once gunzipped).
_SEED_BYTES = kineto_seed_bytes()


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(_SEED_BYTES)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "dup"]))
        i = draw(st.integers(0, max(len(data) - 1, 0)))
        if op == "flip" and data:
            data[i] = draw(st.integers(0, 255))
        elif op == "insert":
            data[i:i] = draw(st.sampled_from([b"},{", b"]", b"[", b'"', b"\\", b"NaN", b"\xff", b"{", b",", b"1e999"]))
        elif op == "delete":
            del data[i:i + draw(st.integers(1, 40))]
        elif op == "truncate":
            del data[i:]
        elif op == "dup":
            data[i:i] = data[max(0, i - 80):i]
    return bytes(data)


@settings(max_examples=200, deadline=2000, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(blob=_mutated())
def test_fuzz_mutated_trace_loads_or_raises_trace_load_error(tmp_path: Path, blob: bytes) -> None:
    for name in ("f.json", "f.json.gz"):
        p = tmp_path / name
        p.write_bytes(gzip.compress(blob) if name.endswith(".gz") else blob)
        try:
            tr = load(p)
        except TraceLoadError as e:
            assert "\n" not in str(e) and str(p) in str(e)
            continue
        assert isinstance(tr, Trace)
        assert len(tr.slices) <= _SEED_BYTES.count(b'"X"') + 20


def test_raw_control_characters_in_strings_are_read(tmp_path) -> None:
    """Kineto writes raw tabs and control bytes into call stacks (JSON forbids them inside strings)."""
    from neuron_prof import load

    p = tmp_path / "ctrl.json"
    p.write_bytes(b'{"traceEvents":[\n\t{"ph":"X","name":"a\x01b\tc","pid":1,"tid":1,"ts":1,"dur":2,"cat":"cpu_op",'
                  b'"args":{"Call stack":"f.py(3): g\nh.py(4): k"}},\n'
                  b'{"ph":"X","name":"ok","pid":1,"tid":1,"ts":5,"dur":1}]}')
    t = load(p)
    assert [t.slice_name(i) for i in range(len(t.slices))] == ["a b c", "ok"]
    assert t.slice_args(0)["Call stack"] == "f.py(3): g h.py(4): k"
    assert any("control characters" in w for w in t.metadata["load_warnings"])


def test_non_ascii_text_before_the_end_of_the_array(tmp_path) -> None:
    """orjson reports error offsets in characters; the reader must turn them into bytes (findings titles
    with "µs" at the end of our own exports lost every finding)."""
    from neuron_prof import load

    p = tmp_path / "mu.json"
    p.write_text('{"traceEvents":[{"ph":"X","name":"wait 5 µs → ok","pid":1,"tid":1,"ts":1,"dur":1},'
                 '{"ph":"X","name":"µµµµµµµµ","pid":1,"tid":1,"ts":3,"dur":1}]}', encoding="utf-8")
    t = load(p)
    assert [t.slice_name(i) for i in range(len(t.slices))] == ["wait 5 µs → ok", "µµµµµµµµ"]
    assert not t.metadata.get("load_warnings")
