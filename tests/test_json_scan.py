"""The compiled scanner (neuron_prof/loaders/json/_jscan.c, _json_scan.py) gives the very Trace the Python path
gives (msgspec + orjson: what runs when the extension is not built): same string table, columns, args bytes,
flows, metadata and warnings, on every real trace, generated traces, odd events, and damaged files."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import pytest

from neuron_prof.loaders.json import _read as _json_read
from neuron_prof.loaders.json import _scan as _json_scan
from neuron_prof.loaders.json.reader import load_kineto_json
from tests._json_odd import ODD_ARGS, assert_identical
from tests._json_odd import ev as _ev

KINETO = Path(__file__).resolve().parents[2] / "shared" / "traces" / "kineto"
pytestmark = pytest.mark.skipif(_json_scan._jscan is None, reason="the compiled scanner is not built")


def both(path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int | None = 3000) -> tuple[Any, Any, int]:
    """(Python path, compiled path, pieces the scanner took), with small pieces so that every file has many."""
    monkeypatch.setenv("NEURON_PROF_CACHE", "0")
    monkeypatch.setenv("NEURON_PROF_JSON_WORKERS", "1")
    if chunk is not None:
        monkeypatch.setattr(_json_read, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(_json_scan, "ENABLED", False)
    slow = load_kineto_json(path)
    monkeypatch.setattr(_json_scan, "ENABLED", True)
    taken = []

    def counted(*args: Any) -> object:
        got = _json_scan.scan_chunk(*args)
        taken.append(isinstance(got, _json_scan.ScannedChunk))
        return got

    monkeypatch.setattr(_json_read, "scan_chunk", counted)
    fast = load_kineto_json(path)
    return slow, fast, sum(taken)


@pytest.mark.parametrize("name", sorted(p.name for p in KINETO.glob("*.json*")))
def test_real_traces_identical(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    slow, fast, taken = both(KINETO / name, monkeypatch)
    assert_identical(slow, fast)
    if slow.n_events > 200:
        assert taken > 0  # the scanner ran


def test_generated_trace_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Kineto-like GPU training trace (bench/gen_trace.py) in pieces of 200 kB, and gzipped."""
    from bench.gen_trace import main as gen

    p = tmp_path / "gen.json"
    gen(["6000", str(p)])
    slow, fast, taken = both(p, monkeypatch, chunk=200_000)
    assert_identical(slow, fast)
    assert taken >= 1 and len(fast.flows) > 500
    gz = tmp_path / "gen.json.gz"
    gz.write_bytes(gzip.compress(p.read_bytes(), 1))
    slow, fast, taken = both(gz, monkeypatch, chunk=20_000)
    assert_identical(slow, fast)
    assert taken > 20


def _numbers(rng: random.Random) -> list[str]:
    """Number literals as traces write them: integers, decimals with trailing zeros, exponents, -0."""
    out = ["0", "-0", "0.0", "-0.0", "1.0", "1.50", "10.5", "1e5", "1E-7", "2.5e+3", "0.0001", "0.00001",
           "123456789012345.5", "1234567890123456.5", "99999999999999999", "999999999999999999",
           "9223372036854775807", "-9223372036854775808", "18446744073709551615", "0.1234567890123451"]
    for _ in range(300):
        k = rng.randrange(5)
        if k == 0:
            out.append(str(rng.randrange(-10**rng.randrange(1, 19), 10**rng.randrange(1, 19))))
        elif k == 1:
            out.append(repr(rng.uniform(-1e6, 1e6)))
        elif k == 2:
            out.append(f"{rng.uniform(0, 1000):.{rng.randrange(0, 8)}f}")
        elif k == 3:
            out.append(repr(rng.random() * 10 ** rng.randrange(-8, 20)))
        else:
            out.append(f"{rng.randrange(1, 10)}.{rng.randrange(0, 10**6):06d}e{rng.randrange(-20, 20)}")
    return out


TS_EDGE = ["40257678620673.558", "80307554181721.740", "9007199254740993", "9007199254740993.0", "0.30000000000000004",
           "123456789.123456789", "1.5", "-0.0", "-0", "0", "9999999999999999999", "18446744073709551616.5", "1e-7",
           "0.000000000000000000001", "5160494368050.000", "00.5"]
"""ts and dur literals around the scanner's exact fast path (19 digits, 53 bits; the first two round wrongly
when the digits are rounded to a double before the division); "00.5" is not JSON."""


def test_odd_events_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The msgspec path's odd events, numbers of every shape in args, ts and dur, escapes, unicode, v2
    flows, string ids, and pieces the scanner must refuse (M/C events, wrong types, id2 flows)."""
    rng = random.Random(24)
    nums = _numbers(rng)
    parts: list[str] = []
    for k in range(40):
        for a in ODD_ARGS:
            e = _ev(ts=10.0 + k, args=a) if a is not None else _ev(ts=10.0 + k)
            parts.append(json.dumps(e, ensure_ascii=bool(k % 2), indent=None if k % 3 else 1))
        n = nums[k * 7:k * 7 + 7]
        parts += [
            '{"ph": "X", "name": "n\\u00e9\\"q\\\\", "cat": "c\\/d", "pid": 1, "tid": 2, "ts": %s, "dur": %s, '
            '"args": {"a": [%s], "s": "x\\ty", "\\u0041": {"b": %s}}}' % (n[0].lstrip("-"), n[1], ", ".join(n[2:6]), n[6]),
            '{"ph": "X", "name": "µs 🚀", "pid": "host", "tid": "stream 7", "ts": 1e1, "dur": 5E-1, "args": null}',
            '{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": 2, "ts": %d.5, "args": {"Bytes": %s}}'
            % (11 + k, n[0]),
            '{"ph": "s", "id": "0x%x", "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 2, "ts": %d}' % (k, 10 + k),
            '{"ph": "f", "id": "0x%x", "bp": "e", "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 3, "ts": %d.2}'
            % (k, 10 + k),
            '{"ph": "t", "id": %d, "cat": "c", "name": "n", "pid": 1, "tid": 3, "ts": %d.3, "np_slice": 2}' % (k, 10 + k),
            # one flow key spelled two ways in one piece (an escape in the name)
            '{"ph": "s", "id": %d, "cat": "w", "name": "n", "pid": 1, "tid": 2, "ts": %d}' % (900 + k, 10 + k),
            '{"ph": "f", "id": %d, "cat": "w", "name": "\\u006e", "pid": 1, "tid": 3, "ts": %d.4}' % (900 + k, 10 + k),
            # an escaped "e" binds the flow to the slice around it, not the next one
            '{"ph": "X", "name": "around", "pid": 1, "tid": 7, "ts": %d, "dur": 1}' % (50 + k),
            '{"ph": "X", "name": "next", "pid": 1, "tid": 7, "ts": %d, "dur": 1}' % (52 + k),
            '{"ph": "s", "id": "e%d", "cat": "c", "name": "n", "pid": 1, "tid": 2, "ts": %d}' % (k, 10 + k),
            '{"ph": "f", "id": "e%d", "bp": "\\u0065", "cat": "c", "name": "n", "pid": 1, "tid": 7, "ts": %d.5}'
            % (k, 50 + k),
            '{"ph": "X", "name": "v2", "pid": 1, "tid": 2, "ts": %d, "dur": 1, "bind_id": "b%d", "flow_in": true}'
            % (20 + k, k),
            '{"ph": "X", "name": "v2", "pid": 1, "tid": 4, "ts": %d, "dur": 1, "bind_id": "b%d", "flow_out": 1}'
            % (19 + k, k),
            '{"ph": "R", "name": "mark", "pid": 3, "tid": 3, "ts": %d, "args": {}}' % (10 + k),
            '{"ph": "X", "name": "nodur", "pid": 1, "tid": 2, "ts": %d, "args": []}' % (10 + k),
            '{"ph": "X", "name": "bad", "pid": 1, "tid": 2, "ts": 1e30, "dur": -3}',
            '{"ph": "X", "name": "t", "pid": 1, "tid": 9, "ts": %s, "dur": %s}' % (TS_EDGE[k % len(TS_EDGE)],
                                                                             TS_EDGE[(k + 5) % len(TS_EDGE)]),
            # new strings whose first use in the piece is not their first use among X events, nor as a name
            '{"ph": "i", "name": "z%d", "cat": "y%d", "pid": 5, "tid": %d, "ts": 3}' % (k, k, k),
            '{"ph": "X", "name": "y%d", "cat": "x%d", "pid": 6, "tid": %d, "ts": 3, "dur": 1}' % (k, k, k),
            '{"ph": "X", "name": "z%d", "cat": "z%d", "pid": 5, "tid": %d, "ts": 3, "dur": 1}' % (k, k, k),
        ]
        if k % 9 == 4:
            parts.append('{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}}')
        if k % 11 == 5:
            parts.append('{"ph": "s", "id2": {"local": "0x1"}, "cat": "c", "name": "n", "pid": 1, "tid": 2, "ts": 3}')
        if k % 13 == 6:
            parts.append('{"ph": "X", "name": "n", "ts": "15.5", "dur": 1, "args": {"big": 1234567890123456789012}}')
    p = tmp_path / "odd.json"
    p.write_text('{"traceEvents": [\n' + ",\n".join(parts) + '\n], "baseTimeNanoseconds": 1000000000000}')
    slow, fast, taken = both(p, monkeypatch, chunk=700)
    assert_identical(slow, fast)
    assert taken > 40
    assert len(fast.flows) >= 40


@pytest.mark.parametrize("cats", [("ac2g",), ("a", "b")])
def test_flow_chains_in_order_of_first_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           cats: tuple[str, ...]) -> None:
    """Chains (s -> t -> f) come out key by key in the order their keys are first used in the file, on both
    paths, with one (cat, name) in the piece or several."""
    ids = [9, 4, 7, 1]
    evs: list[dict[str, Any]] = [_ev(ts=100.0 * k + 10 * j, dur=5.0) for k in range(len(ids)) for j in range(3)]
    for k, i in enumerate(ids):
        cat = cats[k % len(cats)]
        evs += [{"ph": ph, "id": i, "cat": cat, "name": cat, "pid": 1, "tid": 2, "ts": 100.0 * k + 10 * j + 1,
                 **({"bp": "e"} if ph == "f" else {})} for j, ph in enumerate("stf")]
    evs += [_ev(ts=1000.0 + k, tid=3) for k in range(60)]  # the last piece is not scanned: the flows are before
    p = tmp_path / "chains.json"
    p.write_text(json.dumps({"traceEvents": evs}))
    slow, fast, taken = both(p, monkeypatch, chunk=len(json.dumps(evs[:24])))
    assert taken >= 1
    assert_identical(slow, fast)
    want = [(3 * k + j, 3 * k + j + 1) for k in range(len(ids)) for j in range(2)]
    assert list(zip(fast.flows.src.tolist(), fast.flows.dst.tolist())) == want



@pytest.mark.parametrize("cut", [0.5, 0.93])
def test_truncated_and_damaged_identical(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cut: float) -> None:
    """A file cut short, and one with damage in the middle: the same events read, the same warnings."""
    from bench.gen_trace import main as gen

    p = tmp_path / "gen.json"
    gen(["3000", str(p)])
    raw = p.read_bytes()
    short = tmp_path / "short.json"
    short.write_bytes(raw[:int(len(raw) * cut)])
    slow, fast, _ = both(short, monkeypatch)
    assert_identical(slow, fast)
    assert fast.metadata["partial"]["truncated"]
    at = int(len(raw) * cut)
    bad = tmp_path / "bad.json"
    bad.write_bytes(raw[:at] + b"\x00garbage{{" + raw[at + 50:])
    slow, fast, _ = both(bad, monkeypatch)
    assert_identical(slow, fast)
    assert any("damaged" in w for w in fast.metadata["load_warnings"])


def test_ingest_path_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _json_scan.ingest_path().startswith("compiled")
    monkeypatch.setattr(_json_scan, "ENABLED", False)
    assert "switched off" in _json_scan.ingest_path()
    monkeypatch.setattr(_json_scan, "_jscan", None)
    monkeypatch.setattr(_json_scan, "_MISSING", "No module named 'neuron_prof.loaders.json._jscan'")
    assert "not built" in _json_scan.ingest_path()
    assert _json_scan.scan_chunk(b'{"ph": "X", "ts": 1}', 0, 20) is None


def test_pieces_scanned_ahead_in_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scanner runs in threads ahead of the reader, and each piece is scanned once (what was scanned ahead
    is used, not scanned again)."""
    import threading

    from bench.gen_trace import main as gen

    p = tmp_path / "gen.json"
    gen(["3000", str(p)])
    calls: list[str] = []
    real = _json_scan._jscan

    class Counting:
        @staticmethod
        def scan(raw: bytes, lo: int, hi: int) -> object:
            calls.append(threading.current_thread().name)
            return real.scan(raw, lo, hi)

    monkeypatch.setattr(_json_read, "THREADS", 2)
    monkeypatch.setattr(_json_scan, "_jscan", Counting)
    slow, fast, taken = both(p, monkeypatch, chunk=5000)
    assert_identical(slow, fast)
    assert taken > 50
    assert sum(n.startswith("neuron-prof-scan") for n in calls) >= taken - 2
    assert len(calls) <= taken + 6  # pieces with other phases, and the last few scanned ahead of the end
