"""The loader's msgspec path (typed chunks, args kept as text: neuron_prof/loaders/json/_typed.py) gives
byte for byte the Trace the orjson path gives, on every real trace and on the odd events real files hold."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.loaders.json import _read as _json_read
from neuron_prof.loaders.json import _scan as _json_scan
from neuron_prof.loaders.json import _typed as _json_typed
from neuron_prof.loaders.json.reader import load_kineto_json
from tests._builders import assert_same
from tests._json_odd import ODD_ARGS
from tests._json_odd import ev as _ev

KINETO = Path(__file__).resolve().parents[2] / "shared" / "traces" / "kineto"


def _args_bytes(tr) -> list[bytes]:  # type: ignore[no-untyped-def]
    return [tr.args.raw(i) for i in range(len(tr.args))]


def _both(path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int = 2000) -> tuple[object, object, int]:
    """(orjson path, fast path, chunks the fast path took) with small chunks, so that every file has many."""
    monkeypatch.setenv("NEURON_PROF_CACHE", "0")
    monkeypatch.setenv("NEURON_PROF_JSON_WORKERS", "1")
    monkeypatch.setattr(_json_read, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(_json_scan, "ENABLED", False)  # the compiled scanner: tests/test_json_scan.py
    monkeypatch.setattr(_json_read, "decode_chunk", lambda doc: None)
    slow = load_kineto_json(path)
    taken = []

    def counted(doc: bytes) -> object:
        c = _json_typed.decode_chunk(doc)
        taken.append(c is not None)
        return c

    monkeypatch.setattr(_json_read, "decode_chunk", counted)
    fast = load_kineto_json(path)
    return slow, fast, sum(taken)


def _check(slow, fast) -> None:  # type: ignore[no-untyped-def]
    assert_same(slow, fast)
    assert _args_bytes(slow) == _args_bytes(fast)
    assert np.array_equal(slow.slices.args, fast.slices.args)
    assert np.array_equal(slow.instants.args, fast.instants.args)
    assert slow.metadata.get("warnings") == fast.metadata.get("warnings")


@pytest.mark.parametrize("name", sorted(p.name for p in KINETO.glob("*.json*")))
def test_real_traces_same_either_way(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    slow, fast, taken = _both(KINETO / name, monkeypatch)
    _check(slow, fast)
    if slow.n_events > 200:
        assert taken > 0  # the fast path ran


def _write(path: Path, events: list[object], indent: int | None) -> None:
    path.write_text(json.dumps({"traceEvents": events, "baseTimeNanoseconds": 1_000_000_000_000}, indent=indent,
                               ensure_ascii=False))


@pytest.mark.parametrize("indent", [None, 2])
def test_odd_events_same_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indent: int | None) -> None:
    events: list[object] = []
    for k in range(40):
        for a in ODD_ARGS:
            events.append(_ev(ts=10.0 + k, args=a) if a is not None else _ev(ts=10.0 + k))
        events += [
            {"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": 11.0 + k, "args": {"Bytes": 64}},
            {"ph": "s", "id": k, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 2, "ts": 10.0 + k},
            {"ph": "f", "id": k, "bp": "e", "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 3, "ts": 10.2 + k},
            _ev(ts=10.2 + k, tid=3, name="kernel", cat="kernel", args={"correlation": k, "blocks per SM": 1.32}),
            {"ph": "s", "id2": {"local": "0x1"}, "cat": "c", "name": "n", "pid": 1, "tid": 2, "ts": 10.1 + k},
            _ev(ts=12.0 + k, bind_id=k, flow_out=True, name="v2"),
            _ev(ts=12.5 + k, pid="host", tid="stream 7"), _ev(ts=12.6 + k, pid=2**63 - 1, tid=-(2**63)),
            _ev(ts=13.0 + k, dur=-1), _ev(ts=13.0 + k, dur="x"), _ev(ts=1e30),
        ]
        if k % 7 == 0:  # chunks the fast path must refuse
            events += [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}},
                       {"ph": "C", "name": "mem", "pid": 1, "ts": 10.0 + k, "args": {"v": 1}},
                       _ev(ts=14.0 + k, name=["not", "a", "string"]), _ev(ts=None),
                       _ev(ts=14.0 + k, args=[1, 2]), _ev(ts="15.5"), {"ph": "?", "ts": 1}]
        if k in (3, 4):  # orjson reads an integer beyond 64 bits as a float, hence another track name
            events += [_ev(ts=14.0 + k, pid=10**20), _ev(ts=14.1 + k, tid=2**64 - 1)]
    p = tmp_path / "odd.json"
    _write(p, events, indent)
    slow, fast, taken = _both(p, monkeypatch, chunk=600)
    _check(slow, fast)
    assert taken > 20
    assert len(slow.slices) > 500 and len(slow.flows) == 40 and len(slow.instants) == 40


def test_raw_args_match_orjson() -> None:
    """The args text the store keeps: what orjson writes for the parsed args, or no args."""
    import msgspec
    import orjson

    raws = [msgspec.Raw(json.dumps(a, indent=k % 3 or None, ensure_ascii=bool(k % 2)).encode())
            for k, a in enumerate(ODD_ARGS * 3)] + [msgspec.Raw(b"")]
    has, blob, lens = _json_typed.raw_args(raws)
    want = [orjson.dumps(orjson.loads(bytes(r))) for r in raws[:-1] if orjson.loads(bytes(r))]
    assert has.tolist() == [bool(r) and bool(orjson.loads(bytes(r))) for r in raws]
    o = np.concatenate(([0], np.cumsum(lens)))
    assert [blob[o[i]:o[i + 1]] for i in range(len(lens))] == want
