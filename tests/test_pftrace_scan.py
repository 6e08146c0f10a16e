"""The compiled .pftrace walk (`_pfscan.c`) gives the very Trace the Python (upb) path gives: our exporter's
files from the real traces, a merged multi-rank file, cut files, and hand-built packets with what our writer
never writes; damaged bytes give TraceFormatError, never anything else."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import DebugAnnotation, TracePacket, TrackDescriptor, TrackEvent
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as TraceProto

import neuron_prof
from neuron_prof.errors import TraceFormatError
from neuron_prof.exporters import write_trace
from neuron_prof.loaders.pftrace import _scan as _pftrace_scan
from neuron_prof.loaders.pftrace.reader import load_pftrace
from neuron_prof.merge import merge_traces
from neuron_prof.model import Meta, Trace
from tests._builders import FOREIGN_T0, foreign_trace
from tests._json_odd import assert_identical
from tests._merge_ranks import SKEW, rank_with
from tests.conftest import kineto_traces, pftrace_check, shared_kineto

pytestmark = pytest.mark.skipif(_pftrace_scan._pfscan is None, reason="the compiled scanner is not built")
B, E, I, C = TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END, TrackEvent.TYPE_INSTANT, TrackEvent.TYPE_COUNTER  # noqa: E741


def both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Trace, Trace]:
    """(the Python path's Trace as without the extension, the compiled walk's), checked identical."""
    ext = _pftrace_scan._pfscan
    monkeypatch.setattr(_pftrace_scan, "ENABLED", False)
    monkeypatch.setattr(_pftrace_scan, "_pfscan", None)
    slow = load_pftrace(path)
    monkeypatch.setattr(_pftrace_scan, "ENABLED", True)
    monkeypatch.setattr(_pftrace_scan, "_pfscan", ext)
    fast = load_pftrace(path)
    assert_identical(slow, fast)
    assert slow.processes == fast.processes and slow.tracks == fast.tracks
    return slow, fast


def test_switched_off_by_the_environment() -> None:
    code = "from neuron_prof.loaders.pftrace import _scan as s; print(s.ENABLED, s._pfscan is not None)"
    for env, want in (("0", "False True"), ("1", "True True")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "NEURON_PROF_PFTRACE_SCANNER": env})
        assert out.stdout.split() == want.split()


def test_field_numbers_are_perfetto_s() -> None:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    for key, number in _pftrace_scan._pfscan.FIELDS.items():
        msg, field = key.split(".")
        assert getattr(pb, msg).DESCRIPTOR.fields_by_name[field].number == number, key


@pytest.mark.parametrize("src", kineto_traces() or [pytest.param(None, marks=pytest.mark.skip("no ../shared"))],
                         ids=lambda p: p.name if p else "none")
def test_exported_real_traces_same_either_way(src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = neuron_prof.load(src)
    p = write_trace(t, tmp_path / "t.pftrace")
    calls = {"packet": 0, "frag": 0}
    for hook in calls:
        def counted(self: Any, *a: Any, _f: Any = getattr(_pftrace_scan.Hooks, hook), _k: str = hook) -> Any:  # noqa: B008
            calls[_k] += 1
            return _f(self, *a)
        monkeypatch.setattr(_pftrace_scan.Hooks, hook, counted)
    slow, fast = both(p, monkeypatch)
    assert fast.n_events == t.n_events
    # the hot path stays in C: no packet read whole by Python; Python decodes an annotation only the first
    # time a sequence uses its name or string, or a nested value's bytes: far fewer than the events
    assert calls["packet"] == 0 and (fast.n_events < 1000 or calls["frag"] < fast.n_events // 4), calls


def test_merged_ranks_and_cut_files_same_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a merged file of two real ranks and three generated ones (cross-rank flows, one metadata per rank)
    real = [neuron_prof.load(shared_kineto(f"trace_filter_sampled_rank-{r}.json.gz")) for r in (0, 1)]
    for r, t in enumerate(real):
        t.metadata[Meta.RANK] = r
    gen = [rank_with(r, skew=s) for r, s in ((2, -SKEW), (3, 0), (4, SKEW))]
    merged, _ = merge_traces(real + gen)
    p = write_trace(merged, tmp_path / "merged.pftrace")
    assert pftrace_check(p).returncode == 0
    slow, fast = both(p, monkeypatch)
    assert len(fast.processes) >= 5 and len(fast.flows) > 0
    # AND the same file cut inside a packet at a few places: the whole packets before the cut, said partial
    data = p.read_bytes()
    for cut in (len(data) - 3, len(data) // 3):
        p.write_bytes(data[:cut])
        slow, fast = both(p, monkeypatch)
        assert fast.metadata[Meta.PARTIAL]["truncated"] and fast.n_events <= merged.n_events
    assert fast.n_events < merged.n_events // 2


# ---- hand-built packets: what our writer does not write -----------------------------------------------------
def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def _f(num: int, v: int | bytes, wt: int | None = None) -> bytes:
    """One field: an int as a varint (or 8 bytes with wt=1), bytes length-delimited."""
    if isinstance(v, bytes):
        return _varint(num << 3 | 2) + _varint(len(v)) + v
    if wt == 1:
        return _varint(num << 3 | 1) + (v & ((1 << 64) - 1)).to_bytes(8, "little")
    return _varint(num << 3) + _varint(v)


def _packets(*bodies: bytes) -> bytes:
    return b"".join(_f(1, b) for b in bodies)


def _odd_packets() -> bytes:
    """Sequence 7 goes on from foreign_trace(): cleared without flags, names and categories as text, counters,
    terminating flows, annotations of every kind, repeated fields, unknown fields and kinds; sequence 0x205 (file
    section 2) with flows; a timestamp past int64."""
    tr = TraceProto()

    def pkt(sid: int = 7, **kw: Any) -> TracePacket:
        p = tr.packet.add(trusted_packet_sequence_id=sid, **kw)
        return p

    p = pkt(incremental_state_cleared=True, timestamp=FOREIGN_T0 + 200)
    p.interned_data.event_names.add(iid=1, name="outer after clearing")
    p.interned_data.event_categories.add(iid=1, name="cat2")
    p.interned_data.debug_annotation_names.add(iid=1, name="n1")
    p.interned_data.debug_annotation_names.add(iid=2, name="neuron_prof")
    p.interned_data.debug_annotation_string_values.add(iid=1, str=b"v\xff\"1")
    annots = [DebugAnnotation(name_iid=1, int_value=-5), DebugAnnotation(name_iid=1, uint_value=(1 << 64) - 1),
              DebugAnnotation(name_iid=1, bool_value=True), DebugAnnotation(name_iid=1, double_value=1e16),
              DebugAnnotation(name_iid=1, double_value=0.1), DebugAnnotation(name_iid=1, double_value=float("nan")),
              DebugAnnotation(name_iid=1, string_value_iid=1), DebugAnnotation(name_iid=1, string_value_iid=9),
              DebugAnnotation(name="plain", string_value="a\tb\u00e9"), DebugAnnotation(name_iid=5, int_value=1),
              DebugAnnotation(name_iid=1, legacy_json_value='{"j": [1, 2]}'),
              DebugAnnotation(name_iid=1, pointer_value=77), DebugAnnotation(name_iid=2, int_value=3)]
    nested = DebugAnnotation(name_iid=1)
    nested.dict_entries.add(name="k", double_value=2.5)
    nested.dict_entries.add(name="l").array_values.add(bool_value=False)
    annots.append(nested)
    te = pkt(timestamp=FOREIGN_T0 + 210, sequence_flags=2).track_event
    te.MergeFrom(TrackEvent(type=B, track_uuid=11, name_iid=1, category_iids=[1, 5], flow_ids=[900, 901],
                            terminating_flow_ids=[555]))
    te.debug_annotations.extend(annots)
    pkt(timestamp=FOREIGN_T0 + 220, sequence_flags=2).track_event.MergeFrom(
        TrackEvent(type=E, track_uuid=11, terminating_flow_ids=[900], category_iids=[1]))
    for name in ("outer again", "renamed in place"):  # iid 1 used, then given another name in the same state
        p = pkt(timestamp=FOREIGN_T0 + 225, sequence_flags=2)
        if name != "outer again":
            p.interned_data.event_names.add(iid=1, name=name)
        p.track_event.MergeFrom(TrackEvent(type=I, track_uuid=11, name_iid=1))
    pkt(timestamp=FOREIGN_T0 + 230, sequence_flags=1).track_event.MergeFrom(  # cleared: iid 1 means nothing now
        TrackEvent(type=I, track_uuid=11, name_iid=1, categories=["by name", "second"]))
    for k, kw in enumerate(({"counter_value": -(1 << 62)}, {"double_counter_value": -2.25}, {})):
        pkt(timestamp=FOREIGN_T0 + 240 + k).track_event.MergeFrom(TrackEvent(type=C, track_uuid=13, **kw))
    pkt(timestamp=FOREIGN_T0 + 250).track_event.MergeFrom(TrackEvent(type=I, track_uuid=77, name="no track"))
    pkt(timestamp=FOREIGN_T0 + 251).track_event.MergeFrom(TrackEvent(type=TrackEvent.TYPE_STATE, track_uuid=11))
    pkt(timestamp=FOREIGN_T0 + 252).track_descriptor.MergeFrom(TrackDescriptor(uuid=15, name="late", parent_uuid=10))
    pkt(timestamp=FOREIGN_T0 + 253).previous_packet_dropped = 1  # no data: skipped
    for k, sid in enumerate((0x205, 0x205)):
        pkt(sid, timestamp=FOREIGN_T0 + 260 + k * 5, sequence_flags=3 - 2 * k).track_event.MergeFrom(
            TrackEvent(type=B if k == 0 else E, track_uuid=15, name=f"s{k}", flow_ids=[900 + k]))
    pkt(timestamp=(1 << 64) - 5).track_event.MergeFrom(TrackEvent(type=I, track_uuid=11, name="negative time"))
    raw = tr.SerializeToString()
    te_base = _f(9, I) + _f(11, 11)
    # wire-level: name_iid then name (the oneof keeps the last), packed categories, unknown fields,
    # counter then double counter, a type outside the enum, flows packed, track_event given twice (merged)
    raw += _packets(
        _f(10, 7) + _f(13, 2) + _f(8, FOREIGN_T0 + 300) + _f(999, 1) + _f(11, te_base + _f(10, 3) + _f(23, b"last")
                                                                             + _f(3, _varint(1) + _varint(4))
                                                                             + _f(2000, b"??")),
        _f(10, 7) + _f(8, FOREIGN_T0 + 301) + _f(11, _f(9, C) + _f(11, 13) + _f(30, 5) + _f(44, 0x4004000000000000, 1)),
        _f(10, 7) + _f(8, FOREIGN_T0 + 302) + _f(11, _f(9, 9) + _f(11, 11) + _f(23, b"bad type")),
        _f(10, 7) + _f(8, FOREIGN_T0 + 303) + _f(11, te_base + _f(23, b"packed flows")
                                                 + _f(47, (7).to_bytes(8, "little") + (8).to_bytes(8, "little"))),
        _f(10, 7) + _f(8, FOREIGN_T0 + 304) + _f(11, te_base) + _f(11, _f(23, b"merged") + _f(47, 8, 1)),
        _f(10, 7) + _f(8, FOREIGN_T0 + 305) + _f(11, _f(9, E) + _f(11, 11)) + _f(12, _f(2, _f(1, 3) + _f(2, b"x"))))
    return foreign_trace() + raw


def test_hand_built_packets_same_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "odd.pftrace"
    p.write_bytes(_odd_packets())  # odd on purpose (lone flow ends, unknown fields): not for the checker
    slow, t = both(p, monkeypatch)
    names = [t.s(int(i)) for i in t.instants.name]
    assert {"no track", "negative time", "marker", "last", "packed flows", "merged"} <= set(names)
    assert names[names.index("outer after clearing"):][:2] == ["outer after clearing", "renamed in place"]
    assert t.counters.value.tolist()[-4:] == [float(-(1 << 62)), -2.25, 0.0, 2.5]
    after = next(i for i in range(len(t.slices)) if t.slice_name(i) == "outer after clearing")
    args = t.slice_args(after)
    assert args["n1"] == {"k": 2.5, "l": [False]} and args["neuron_prof"] == 3 and args["iid 5"] == 1
    assert t.s(int(t.slices.cat[after])) == "cat2"
    assert any("beyond int64" in w for w in t.metadata[Meta.WARNINGS])
    assert len(t.flows) >= 2


def test_unknown_wire_type_and_damage_are_format_errors(tmp_path: Path) -> None:
    p = tmp_path / "bad.pftrace"
    for body in (_f(8, 1) + b"\x0f", _f(11, b"\x4f\x00"), _f(11, _f(9, I) + _f(4, b"\x0b"))):  # wire types 7, 7, 3
        p.write_bytes(_packets(_f(10, 7) + _f(11, _f(9, I)), body))
        with pytest.raises(TraceFormatError, match="protobuf decoding failed"):
            load_pftrace(p)


def test_damaged_files_give_a_trace_or_a_format_error(tmp_path: Path) -> None:
    data = _odd_packets()
    rng = random.Random(24)
    p = tmp_path / "fuzz.pftrace"
    outcomes = {"trace": 0, "error": 0}
    for k in range(400):
        buf = bytearray(data)
        if k % 2:
            buf = buf[: rng.randrange(1, len(buf))]
        for _ in range(rng.randrange(0 if k % 2 else 1, 4)):
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        p.write_bytes(bytes(buf))
        try:
            load_pftrace(p)
            outcomes["trace"] += 1
        except TraceFormatError as e:
            assert "\n" not in str(e)
            outcomes["error"] += 1
    assert outcomes["trace"] > 50 and outcomes["error"] > 20, outcomes
