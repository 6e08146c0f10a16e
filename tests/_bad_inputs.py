"""Damaged and hostile trace files, one per kind, with what loading each must give (used by the bad-input,
never-hangs and exporter reliability tests)."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

from tests._builders import foreign_trace
from tests._builders import kineto_event as _x
from tests._builders import kineto_text as _kt

HOSTILE = "a\x00b\x1b[31mred\x1b[0m\n[bold]x\x07\u2028y"
"""Control characters, terminal escapes, Rich markup and a line separator in one name."""


def _pftrace_beyond_int64() -> bytes:
    """A valid Perfetto trace whose one slice starts past 2**63 ns (uint64 on the wire)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackDescriptor, TrackEvent

    t = Trace()
    p = t.packet.add()
    p.track_descriptor.CopyFrom(TrackDescriptor(uuid=7, name="t"))
    p.trusted_packet_sequence_id = 1
    for ts, typ in ((2**64 - 5_000, TrackEvent.TYPE_SLICE_BEGIN), (2**64 - 1_000, TrackEvent.TYPE_SLICE_END)):
        q = t.packet.add()
        q.timestamp = ts
        q.trusted_packet_sequence_id = 1
        q.track_event.type = typ
        q.track_event.track_uuid = 7
        if typ == TrackEvent.TYPE_SLICE_BEGIN:
            q.track_event.name = "late"
    return t.SerializeToString()


def bad_inputs() -> dict[str, tuple[str, bytes, str, str]]:
    """kind -> (file name, content, "error" or "ok", words the error / a warning must hold ("" = no warning))."""
    good = _kt([_x(i) for i in range(60)])
    gz = gzip.compress(_kt([_x(i) for i in range(3000)]).encode())
    rnd = random.Random(0)
    return {
        "truncated_json": ("t.json", good[: good.index('"op40"') + 3].encode(), "ok", "truncated"),
        "truncated_gzip": ("t.json.gz", gz[: len(gz) // 2], "ok", "gzip stream truncated"),
        "not_gzip": ("t.json.gz", b"\x1f\x8b" + rnd.randbytes(200), "error", "not a valid gzip file"),
        "invalid_utf8": ("t.json", _kt([_x(0), _x(1, name="BAD")]).encode().replace(b"BAD", b"B\xff\xfeD"), "ok",
                         "invalid UTF-8"),
        "control_chars": ("t.json", _kt([_x(0, name=HOSTILE, dur=5000.0), _x(1)]).encode(), "ok", ""),
        "nan_infinity": ("t.json", _kt([_x(0), _x(1)]).replace('"ts": 10.0', '"ts": NaN').replace(
            '"dur": 5.0, "args": {"External id": 0}', '"dur": Infinity, "args": {"External id": 0}').encode(), "ok",
                         "NaN"),
        "ids_beyond_int64": ("t.json", _kt([_x(0, pid=2**70, tid=-(2**65)), _x(1, args={"n": 2**80}),
                                            {"ph": "s", "id": 2**70, "pid": 1, "tid": 1, "ts": 0.0, "name": "f"}
                                            ]).encode(), "ok", ""),
        "wrong_types": ("t.json", _kt([_x(0, ts="soon"), _x(1, dur=None), _x(2, name=["l", 1], cat={"d": 1}),
                                       _x(3, args=[1, 2]), _x(4, pid=1.0, tid=True)]).encode(), "ok", "dur"),
        "missing_keys": ("t.json", _kt([_x(0), {"ph": "X", "ts": 1.0, "dur": 2.0}, {"ph": "X", "name": "no ts"},
                                        {"name": "no ph", "ts": 1}]).encode(), "ok", "phase"),
        "negative_durations": ("t.json", _kt([_x(0, dur=-3.0), _x(1)]).encode(), "ok", "negative dur"),
        "overlapping_unsorted": ("t.json", _kt([_x(5, ts=50.0, dur=30.0), _x(1, ts=10.0, dur=100.0),
                                                _x(2, ts=60.0, dur=100.0)]).encode(), "ok", ""),
        "empty_file": ("t.json", b"", "error", "empty file"),
        "whitespace_only": ("t.json", b"  \n\t ", "error", "only whitespace"),
        "json_not_a_trace": ("t.json", b'{"foo": 1, "bar": [1, 2]}', "error", "without traceEvents"),
        "json_list_of_numbers": ("t.json", b"[1, 2, 3]", "error", "none of the 3 entries"),
        "json_scalar": ("t.json", b'"just a string"', "error", "not JSON"),
        "huge_single_string": ("t.json", _kt([_x(0), _x(1, name="},{" * 3_000_000), _x(2)]).encode(), "ok", ""),
        "deeply_nested_args": ("t.json", _kt([_x(0), _x(1), _x(2)]).replace(
            '{"External id": 1}', '{"deep": ' + "[" * 100_000 + "]" * 100_000 + "}").encode(), "ok", "depth"),
        "deeply_nested_document": ("t.json", b"[" * 200_000 + b"]" * 200_000, "error", "depth"),
        "unknown_phases": ("t.json", _kt([_x(0), {"ph": "Z", "ts": 1.0}, {"ph": 7, "ts": 2.0}]).encode(), "ok",
                           "unknown phase"),
        "string_pids_tids": ("t.json", _kt([_x(0, pid="Spans", tid="PyTorch Profiler"), _x(1, pid="", tid="")]
                                           ).encode(), "ok", ""),
        "unmatched_begin_end": ("t.json", _kt([_x(0, ts=100.0), {"ph": "B", "name": "open", "pid": 1, "tid": 1,
                                                                  "ts": 10.0}, {"ph": "E", "pid": 1, "tid": 2,
                                                                                "ts": 5.0}]).encode(), "ok",
                                "without"),
        "binary_garbage_json": ("t.json", b"\x00\x01\x02garbage" + rnd.randbytes(300), "error", "not JSON"),
        "garbage_pftrace": ("t.pftrace", random.Random(1).randbytes(4096), "error", "not a Perfetto trace"),
        "text_named_pftrace": ("t.pftrace", b"hello, this is not a trace\n", "error", "not a Perfetto trace"),
        "varint_overflow_pftrace": ("t.pftrace", b"\x0a\xff\xff\xff\x0f", "error", "not a Perfetto trace"),
        "empty_pftrace": ("t.pftrace", b"", "error", "empty file"),
        "json_named_pftrace": ("t.pftrace", good.encode(), "ok", ""),
        "invalid_utf8_pftrace": ("t.pftrace", foreign_trace().replace(b"cpu_op", b"\x80pu_op", 1), "ok", ""),
        "pftrace_ts_beyond_int64": ("t.pftrace", _pftrace_beyond_int64(), "ok", "beyond int64"),
        "garbage_unknown_suffix": ("t.bin", random.Random(3).randbytes(512), "error", "not a Perfetto trace"),
        "script_unknown_suffix": ("t.py", b"import torch\nprint(torch.ones(2) * 2)  # \xc3\xa9\n", "error",
                                  "not a trace: text that is neither JSON nor a Perfetto protobuf"),
    }


KINDS = bad_inputs()


def write_kind(root: Path, kind: str) -> Path:
    name, data, _, _ = KINDS[kind]
    d = root / kind
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data)
    return d / name
