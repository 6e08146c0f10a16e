"""The args encoder's template path (documents grouped by their digit-masked text) against its column path
(every document parsed with orjson): the same bytes for every row and the same interned strings in the same
order, chunk after chunk, on documents made to break it (digits in keys and strings, escapes, whitespace,
repeated keys, exponents, 17-digit floats, ints past int64, nested values, empty containers)."""

from __future__ import annotations

import json
import random

import numpy as np
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_prof.exporters import _pftrace_args as A
from neuron_prof.exporters import _pftrace_wire as w
from neuron_prof.model import ArgsBuilder


def _value(rnd: random.Random, kind: str, i: int):  # type: ignore[no-untyped-def]
    if kind == "int":
        return rnd.choice([i, -i, 7, rnd.randint(100, 999), rnd.randint(0, 10 ** rnd.randint(1, 18)),
                           (1 << 63) + i, (1 << 64) + i, 10 ** 20 + i, 0])
    if kind == "float":
        k = rnd.randint(0, 9)
        return rnd.choice([i / 7, float(i), -0.0, 0.5, rnd.uniform(0, 10 ** k), 1e-7 * i, 1e300, rnd.random()])
    if kind == "str":
        return rnd.choice([f"step_{i}", f"s{i % 3}", "const", "é✓ \"q\" \\ \n", f"x{i}\u00e9", "", "123"])
    if kind == "nested":
        return rnd.choice([[[i, 1024], [1024, 1], []], ["float", "float", "Scalar"], ["", str(i % 4)],
                           {"a": i % 5, "b": [1.5, None, True], "c": f"n{i % 2}"}, [], {}, [None], [[]]])
    return rnd.choice([True, False, None, [], {}])


def _text(rnd: random.Random, doc: dict, raw_float: str | None) -> bytes:
    """One of several spellings of the same document (compact, spaced, ASCII-escaped, odd float forms)."""
    form = rnd.random()
    if form < 0.5:
        try:
            b = orjson.dumps(doc)
        except TypeError:  # an int past 64 bits
            b = json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
    elif form < 0.7:
        b = json.dumps(doc).encode()
    else:
        b = json.dumps(doc, ensure_ascii=True, separators=(",", ":")).encode()
    if raw_float is not None:  # "f" is spelled exactly as given (exponents, trailing zeros, 17 digits)
        b = b[:-1] + (b"," if len(doc) else b"") + b'"f":' + raw_float.encode() + b"}"
    return b


def _store(seed: int, n: int):  # type: ignore[no-untyped-def]
    rnd = random.Random(seed)
    kinds = ["int", "float", "str", "nested", "lit"]
    shapes = []
    for _ in range(rnd.randint(1, 5)):
        keys = rnd.sample(["External id", "grid", "name", "Input Dims", "arg0", "arg1", "x", "y", "é"],
                          rnd.randint(0, 5))
        shapes.append([(k, rnd.choice(kinds)) for k in keys])
    b = ArgsBuilder()
    for i in range(n):
        shape = shapes[rnd.randrange(len(shapes))] if rnd.random() < 0.97 else shapes[0]
        doc = {k: _value(rnd, kind, i) for k, kind in shape}
        raw = None
        if rnd.random() < 0.15:
            digits = "".join(rnd.choice("0123456789") for _ in range(rnd.randint(1, 17)))
            raw = rnd.choice([f"{i}.{digits}", f"-{i % 9}.{digits}", f"{rnd.randint(1, 999)}e-{i % 30}", "4.0",
                              f"1.{digits}E+{i % 5}", f"{i}", f"-{i}"])
        if rnd.random() < 0.01:
            b.add_raw(b'{"dup":1,"dup":%d}' % i)
        else:
            b.add_raw(_text(rnd, doc, raw))
    return b.build()


def _rows(r: w.Mat | w.Ragged) -> list[bytes]:
    if isinstance(r, w.Mat):
        return [r.m[i, :n].tobytes() for i, n in enumerate(r.lens.tolist())]
    return [r.data[a: a + n].tobytes() for a, n in zip(r.starts().tolist(), r.lens.tolist())]


@given(st.integers(0, 2**32), st.integers(1, 600), st.sampled_from([1, 7, 64, 300, 1000]))
@settings(max_examples=60, deadline=None)
def test_template_path_matches_the_column_path(seed, n, chunk):
    store = _store(seed, n)
    rnd = np.random.default_rng(seed)
    idx = np.where(rnd.random(n + 20) < 0.1, -1, rnd.integers(0, n, n + 20))
    if seed % 2:
        idx[: n] = np.arange(n)  # store order too (long runs of one template)
    fast, ref = A.ArgsEncoder(), A.ArgsEncoder()
    saved = A._MIN_ROWS
    for a in range(0, len(idx), chunk):
        part = idx[a: a + chunk]
        A._MIN_ROWS = 2
        try:
            got = _rows(fast.encode(store, part))
        finally:
            A._MIN_ROWS = saved
        A._MIN_ROWS = 1 << 40
        try:
            want = _rows(ref.encode(store, part))
        finally:
            A._MIN_ROWS = saved
        assert fast.take_new_interned() == ref.take_new_interned()
        assert got == want


def test_the_template_path_is_taken():
    """Kineto-like documents: every group goes the template path and nothing is parsed with orjson."""
    b = ArgsBuilder()
    for i in range(1000, 1500):  # one template: same digit counts
        b.add_raw(b'{"External id":%d,"Input Dims":[[%d,1024],[]],"blocks per SM":%.6f,"name":"op_%d","ok":true}'
                  % (i, i * 3, i / 7, i % 4))
    store = b.build()
    enc = A.ArgsEncoder()
    calls = []
    enc._dict_groups = lambda dicts, rows: calls.append(len(dicts)) or []  # type: ignore[method-assign]
    enc.encode(store, np.arange(500))
    assert calls == [0]


def test_float_digits_decode_like_orjson():
    """m / 10**f is the correctly rounded value while m < 2**53; longer mantissas are parsed one by one."""
    rnd = random.Random(5)
    vals = [f"{rnd.randint(0, 10**6)}.{rnd.randint(0, 10**9):09d}" for _ in range(3000)]
    vals += [f"0.{rnd.randint(0, 10**16):016d}" for _ in range(3000)]  # 17 digits: some past 2**53
    b = ArgsBuilder()
    for v in vals:
        b.add_raw(b'{"v":' + v.encode() + b"}")
    store = b.build()
    enc = A.ArgsEncoder()
    r = enc.encode(store, np.arange(len(vals)))
    got = [struct_unpack(x[-8:]) for x in _rows(r)]
    assert got == [orjson.loads(v) for v in vals]


def struct_unpack(b: bytes) -> float:
    return float(np.frombuffer(b, "<f8")[0])


@pytest.mark.parametrize("doc", [b'{"a":1,"a":2}', b'{"k0":1}', b'{"x":1e5}', b'{"x":123456789012345678901}',
                                 b'{ "a" : [ 1 , { "b" : "c2" } ] }', b"{}"])
def test_odd_documents_encode_as_orjson_reads_them(doc):
    b = ArgsBuilder()
    for _ in range(40):
        b.add_raw(doc)
    store = b.build()
    fast, ref = A.ArgsEncoder(), A.ArgsEncoder()
    got = _rows(fast.encode(store, np.arange(40)))
    saved, A._MIN_ROWS = A._MIN_ROWS, 1 << 40
    try:
        want = _rows(ref.encode(store, np.arange(40)))
    finally:
        A._MIN_ROWS = saved
    assert got == want and fast.take_new_interned() == ref.take_new_interned()
