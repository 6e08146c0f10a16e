"""The args blob's vectorised scans (`ArgsStore.key_ints`, `ArgsStore.find_all`) find what the regex and a
``find`` loop find, document by document, on the forms a JSON writer may give: spaces and newlines around the
colon, signs, numbers longer than the bytes read at once or than an int64 holds, a key whose value is no number,
the key's text inside a string, windows that cut the blob anywhere."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from neuron_prof.model import ArgsStore, number_pattern

KEY = b'"k"'
FORMS = [b'"k":1', b'"k": -23', b'"k" :  \n 456789', b'"k":-', b'"k":"x"', b'"k"', b'"k":' + b" " * 20 + b"7",
         b'"k":123456789012345678', b'"k":1234567890123456789', b'"k":-000',
         b'"k"\t:\t9', b'"s":"a\\"k\\":5"', b'"k":-9e3', b'"k":' + b"1" * 15, b'"k":' + b"2" * 16, b'"k":null',
         b'"kk":4', b'"x":0']


def _store(seed: int) -> tuple[bytes, np.ndarray]:
    rng = random.Random(seed)
    docs = [b"{" + b",".join(rng.choice(FORMS) for _ in range(rng.randint(0, 4))) + b"}"
            for _ in range(rng.randint(1, 40))]
    return b"".join(docs), np.r_[0, np.cumsum([len(d) for d in docs])].astype(np.int64)


def _regex(blob: bytes, off: np.ndarray) -> dict[int, int]:
    out = {}
    for d in range(len(off) - 1):
        m = number_pattern(KEY).search(blob, int(off[d]), int(off[d + 1]))
        if m:
            out[d] = int(m.group(1))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_key_ints_read_what_the_regex_reads(seed: int) -> None:
    blob, off = _store(seed)
    want = _regex(blob, off)
    for window in (1, 9, 64, 1 << 25):  # a document a window, a few, all of them
        docs, vals = ArgsStore(blob, off).key_ints([KEY, b'"none"'], window)[0]
        assert (np.diff(docs) > 0).all()
        assert dict(zip(docs.tolist(), vals.tolist(), strict=True)) == want


def test_key_ints_of_an_empty_store_and_a_number_past_an_int64() -> None:
    assert [len(a) for a in ArgsStore.empty().key_ints([KEY])[0]] == [0, 0]
    huge = b'{"k":123456789012345678901}'
    with pytest.raises(OverflowError):  # as the regex's integer does not fit the column
        ArgsStore(huge, np.array([0, len(huge)])).key_ints([KEY])


@pytest.mark.parametrize("seed", range(10))
def test_find_all_finds_what_a_find_loop_finds(seed: int) -> None:
    blob, off = _store(seed)
    blob = blob + b"xxxxx" + blob  # a text that overlaps itself: each find steps past the last
    texts = (KEY, b"xx", b"1", b"11", b'":')

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
