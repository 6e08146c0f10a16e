"""A large plain JSON file is read by a thread while the scanner starts on its front
(neuron_prof/loaders/json/fill.py): the Trace is the one a plain read gives, for whole, cut and damaged
files, wherever the reading thread happens to be."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from neuron_prof.loaders.json import _scan as _json_scan
from neuron_prof.loaders.json import fill as _json_fill
from neuron_prof.loaders.json import reader as kineto_json
from neuron_prof.loaders.json.fill import Fill
from neuron_prof.loaders.json.reader import load_kineto_json
from tests._json_odd import assert_identical

pytestmark = pytest.mark.skipif(_json_scan._jscan is None, reason="the compiled scanner is not built")


@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    from bench.gen_trace import main as gen_main

    p = tmp_path_factory.mktemp("fill") / "gen.json"
    gen_main(["4000", str(p)])
    return p.read_bytes()


class _SlowFile:
    """A file whose reads come slowly, so that the reader works on a buffer still being filled."""

    def __init__(self, f: Any) -> None:
        self.f = f

    def __getattr__(self, name: str) -> Any:
        return getattr(self.f, name)

    def readinto(self, view: memoryview) -> int:
        time.sleep(0.0005)
        return self.f.readinto(view)  # type: ignore[no-any-return]

    def __enter__(self) -> _SlowFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()


def _read_at_once_and_filled(p: Path, monkeypatch: pytest.MonkeyPatch, step: int) -> tuple[object, object]:
    monkeypatch.setenv("NEURON_PROF_CACHE", "0")
    monkeypatch.setenv("NEURON_PROF_JSON_WORKERS", "1")
    monkeypatch.setattr(kineto_json, "FILL_MIN", 1 << 62)
    whole = load_kineto_json(p)
    calls = []
    real = Fill.need

    def need(self: Fill, k: int) -> int:
        calls.append(k)
        return real(self, k)

    monkeypatch.setattr(kineto_json, "FILL_MIN", 0)
    monkeypatch.setattr(_json_fill, "_STEP", step)
    monkeypatch.setattr(Fill, "need", need)
    monkeypatch.setattr(_json_fill, "open", lambda *a: _SlowFile(open(*a)), raising=False)
    filled = load_kineto_json(p)
    assert calls  # the reader did wait on the reading thread
    return whole, filled


@pytest.mark.parametrize("step", [4093, 65_536])
def test_filled_same_as_read_at_once(gen: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    p = tmp_path / "t.json"
    p.write_bytes(gen)
    monkeypatch.setattr("neuron_prof.loaders.json._read.CHUNK_BYTES", 20_000)
    whole, filled = _read_at_once_and_filled(p, monkeypatch, step)
    assert_identical(whole, filled)


@pytest.mark.parametrize("where", [0.4, 0.97])
def test_filled_cut_or_damaged_same(gen: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: float) -> None:
    at = int(len(gen) * where)
    monkeypatch.setattr("neuron_prof.loaders.json._read.CHUNK_BYTES", 20_000)
    cut = tmp_path / "cut.json"
    cut.write_bytes(gen[:at])
    whole, filled = _read_at_once_and_filled(cut, monkeypatch, 4096)
    assert_identical(whole, filled)
    assert filled.metadata["partial"]["bytes_read"] == at
    bad = tmp_path / "bad.json"
    bad.write_bytes(gen[:at] + b'\xff"x": [}}' + gen[at + 40:])
    whole, filled = _read_at_once_and_filled(bad, monkeypatch, 4096)
    assert_identical(whole, filled)


def test_file_shorter_than_announced(tmp_path: Path) -> None:
    """A file that shrank between stat and read: what it holds, no zeros after it."""
    p = tmp_path / "f.json"
    p.write_bytes(b"x" * 100_000)
    f = Fill(p, 150_000)
    assert f.need(10**9) == 100_000
    assert f.raw == b"x" * 100_000


def test_trace_events_after_the_first_megabyte(gen: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Top-level keys before traceEvents larger than the head the reader looks at first."""
    p = tmp_path / "late.json"
    p.write_bytes(b'{"note": "' + b"n" * 1_500_000 + b'", ' + gen.lstrip()[1:])
    monkeypatch.setattr("neuron_prof.loaders.json._read.CHUNK_BYTES", 50_000)
    whole, filled = _read_at_once_and_filled(p, monkeypatch, 65_536)
    assert_identical(whole, filled)
    assert filled.metadata["kineto"]["note"] == "n" * 1_500_000


def _gz_cases(gen: bytes) -> dict[str, bytes]:
    import gzip

    whole = gzip.compress(gen, 6)
    half = len(gen) // 2
    two = gzip.compress(gen[:half], 6) + gzip.compress(gen[half:], 6)  # the trailer tells the last member only
    bad = bytearray(whole)
    bad[len(bad) // 2:len(bad) // 2 + 64] = b"\x00" * 64
    return {"whole": whole, "cut": whole[:int(len(whole) * 0.7)], "damaged": bytes(bad), "members": two}


@pytest.mark.parametrize("case", ["whole", "cut", "damaged", "members"])
def test_gzip_gunzipped_by_a_thread_same(gen: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         case: str) -> None:
    """.json.gz gunzipped step by step beside the scan: the same Trace, warnings and `partial` as at once."""
    p = tmp_path / "t.json.gz"
    p.write_bytes(_gz_cases(gen)[case])
    monkeypatch.setattr("neuron_prof.loaders.json._read.CHUNK_BYTES", 20_000)
    if case == "members":  # the trailer announces only the last member: more comes than the buffer holds
        assert _json_fill.gzip_size(p, p.stat().st_size) < len(gen)
    else:  # a cut file's trailer is whatever bytes it ends with: say the size, so that it is read by a thread
        monkeypatch.setattr(kineto_json, "gzip_size", lambda path, size: len(gen))
    monkeypatch.setattr(_json_fill, "GZ_BLOCK", 8192)  # the damage after some whole blocks, in both reads
    whole, filled = _read_at_once_and_filled(p, monkeypatch, 0)
    assert_identical(whole, filled)
    if case in ("cut", "damaged"):
        assert "gzip" in filled.metadata["partial"]["problems"][0]


@pytest.mark.parametrize("case", ["whole", "cut", "members"])
def test_gzip_same_with_isal_and_zlib(gen: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """isal's inflate (used when installed) and zlib's (the fallback) give the same Trace and warnings, in small
    steps so that members and the cut end fall inside and between steps."""
    import zlib

    isal_zlib = pytest.importorskip("isal.isal_zlib")
    p = tmp_path / "t.json.gz"
    p.write_bytes(_gz_cases(gen)[case])
    monkeypatch.setenv("NEURON_PROF_CACHE", "0")
    monkeypatch.setattr(_json_fill, "GZ_BLOCK", 5000)
    monkeypatch.setattr(_json_fill, "GZ_STEP", 70_000)
    monkeypatch.setattr(_json_fill, "INFLATE", zlib)
    with_zlib = load_kineto_json(p)
    monkeypatch.setattr(_json_fill, "INFLATE", isal_zlib)
    with_isal = load_kineto_json(p)
    assert_identical(with_zlib, with_isal)
    assert with_isal.metadata.get("partial") == with_zlib.metadata.get("partial")
    assert (case == "cut") == ("partial" in with_isal.metadata)
