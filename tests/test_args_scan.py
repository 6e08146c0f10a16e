"""The args blob's vectorised scans (`ArgsStore.key_ints`, `ArgsStore.find_all`) find what the regex and a
``find`` loop find, document by document, on the forms a JSON writer may give: spaces and newlines around the
colon, signs, numbers longer than the bytes read at once or than an int64 holds, a key whose value is no number,
the key's text inside a string, windows that cut the blob anywhere; by the compiled search (`_bytefind`) and by
the numpy path alike."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

import neuron_prof.model._args as args_mod
from neuron_prof.model import ArgsStore, number_pattern

KEY = b'"k"'
LONG = b'"Sequence number"'  # 8 bytes and more: compared a word at a time
SHAPES = [b'%s:1', b'%s: -23', b'%s :  \n 456789', b'%s:-', b'%s:"x"', b'%s', b'%s:' + b" " * 20 + b"7",
          b'%s:123456789012345678', b'%s:1234567890123456789', b'%s:-000', b'%s\t:\t9', b'"s":"a\\%s\\":5"',
          b'%s:-9e3', b'%s:' + b"1" * 15, b'%s:' + b"2" * 16, b'%s:null']
FORMS = [f % k for k in (KEY, LONG) for f in SHAPES] + [b'"kk":4', b'"x":0', b'"Sequence numbers":3']


def _store(seed: int) -> tuple[bytes, np.ndarray]:
    rng = random.Random(seed)
    docs = [b"{" + b",".join(rng.choice(FORMS) for _ in range(rng.randint(0, 4))) + b"}"
            for _ in range(rng.randint(1, 40))]
    return b"".join(docs), np.r_[0, np.cumsum([len(d) for d in docs])].astype(np.int64)


def _regex(blob: bytes, off: np.ndarray, key: bytes) -> dict[int, int]:
    out = {}
    for d in range(len(off) - 1):
        m = number_pattern(key).search(blob, int(off[d]), int(off[d + 1]))
        if m:
            out[d] = int(m.group(1))
    return out


@pytest.fixture(params=["compiled", "numpy"])
def search(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The text search `positions` uses: the C extension (where built: `make test`'s install builds it), or the
    numpy path."""
    if request.param == "numpy":
        monkeypatch.setattr(args_mod, "_bytefind", None)
    return str(request.param)


def test_the_compiled_search_is_built() -> None:
    assert args_mod._bytefind is not None, "neuron_prof/model/_bytefind.c was not built (pip install -e .)"


@pytest.mark.parametrize("seed", range(40))
def test_key_ints_read_what_the_regex_reads(seed: int, search: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(args_mod, "SCAN_BLOCK", 1 + seed % 5)  # a window's bytes compared in blocks this small
    blob, off = _store(seed)
    want = [_regex(blob, off, KEY), _regex(blob, off, LONG)]
    for window in (1, 9, 64, 1 << 25):  # a document a window, a few, all of them
        got = ArgsStore(blob, off).key_ints([KEY, LONG, b'"none"'], window)
        assert all((np.diff(docs) > 0).all() for docs, _ in got)
        assert [dict(zip(d.tolist(), v.tolist(), strict=True)) for d, v in got] == [*want, {}]


def test_key_ints_of_an_empty_store_and_a_number_past_an_int64() -> None:
    assert [len(a) for a in ArgsStore.empty().key_ints([KEY])[0]] == [0, 0]
    huge = b'{"k":123456789012345678901}'
    with pytest.raises(OverflowError):  # as the regex's integer does not fit the column
        ArgsStore(huge, np.array([0, len(huge)])).key_ints([KEY])


@pytest.mark.parametrize("seed", range(10))
def test_find_all_finds_what_a_find_loop_finds(seed: int, search: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(args_mod, "SCAN_BLOCK", [1, 2, 3, 8, 1 << 22][seed % 5])
    blob, off = _store(seed)
    blob = blob + b"xxxxx" + blob  # a text that overlaps itself: each find steps past the last
    texts = (KEY, b"xx", b"1", b"11", b'":', LONG, b'"Sequence number":1')

    def scan(text: bytes) -> list[int]:
        out, at = [], blob.find(text)
        while at >= 0:
            out.append(at)
            at = blob.find(text, at + len(text))
        return out

    want = np.array([p for t in texts for p in scan(t)], dtype=np.int64)
    for window in (1, 2, 7, 1 << 25):
        assert np.array_equal(ArgsStore(blob, off).find_all(texts, window), want)
    assert re.search(rb"xx", blob)


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_integer_reader_is_the_numpy_one(seed: int) -> None:
    """`_ints_after` in C gives the numpy path's (ok, value) at every position of random JSON-ish bytes: spaces,
    colons, signs, digit runs past the bytes read, positions near and at the end of the buffer."""
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b" \t\n:::---0123456789012345678901234567890123456789x\"{}", dtype=np.uint8)
    data = alphabet[rng.integers(0, len(alphabet), 5000)]
    at = np.r_[rng.integers(0, len(data), 3000), len(data) - 3, len(data) - 1, len(data)].astype(np.int64)
    want = args_mod._ints_after_numpy(data, at)
    got = args_mod._ints_after(data, at)
    assert args_mod._bytefind is not None
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert want[0].any() and (want[1] == args_mod._UNDECIDED).any() and (~want[0] & (want[1] == 0)).any()


@pytest.mark.parametrize("seed", range(8))
def test_the_search_in_two_halves_is_a_find_loop(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`positions` over halves searched at once (any size here) finds what one ``find`` loop finds, also for a
    text that overlaps itself across the middle (``xx`` in a run of x, ``aba`` in ``ababa``)."""
    monkeypatch.setattr(args_mod, "SPLIT_BYTES", 1)
    rng = random.Random(seed)
    for n in (0, 1, 2, 3, 7, 50, 301):
        data = bytes(rng.choice(b"abxxx") for _ in range(n))
        for text in (b"x", b"xx", b"xxx", b"aba", b"ab", b"xxxxxxxxxx"):
            want, at = [], data.find(text)
            while at >= 0:
                want.append(at)
                at = data.find(text, at + len(text))
            got = args_mod.positions(np.frombuffer(data, dtype=np.uint8), text)
            assert got.tolist() == want, (data, text)
