"""`neuron_prof.model.order`'s numpy replacements: `sorted_unique` is ``np.unique`` of one array by a sort (every dtype,
shape, size and share of distinct values, a memory-mapped column, NaNs left to numpy); `unique_rows` is
``np.unique(axis=0)``; `searchsorted` is ``np.searchsorted`` without converting the array."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.model import order
from neuron_prof.model.order import searchsorted, sorted_unique, unique_rows


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.uint64, np.bool_])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 1000])
def test_it_is_np_unique(dtype: type, n: int) -> None:
    rng = np.random.default_rng(n)
    for high in (1, 2, 7, 10**6):  # all equal, few distinct, mostly distinct
        a = rng.integers(0, high, n).astype(dtype)
        got = sorted_unique(a)
        want = np.unique(a)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(sorted_unique(a.reshape(-1, 1) if n else a), np.unique(a))  # flattened


def test_it_leaves_its_input_and_floats_as_numpy_does(tmp_path: Path) -> None:
    a = np.array([5, -3, 5, 0, -3, 9], dtype=np.int64)
    before = a.copy()
    np.testing.assert_array_equal(sorted_unique(a), [-3, 0, 5, 9])
    np.testing.assert_array_equal(a, before)  # sorted a copy, not the caller's column
    np.testing.assert_array_equal(sorted_unique([3, 1, 3]), [1, 3])
    f = np.array([np.nan, 1.0, np.nan, 0.5])
    np.testing.assert_array_equal(sorted_unique(f), np.unique(f))  # one NaN, numpy's rule
    m = np.memmap(tmp_path / "col", dtype=np.int32, mode="w+", shape=(6,))
    m[:] = [4, 4, 1, 2, 1, 4]
    got = sorted_unique(m)
    assert type(got) is np.ndarray
    np.testing.assert_array_equal(got, [1, 2, 4])
    np.testing.assert_array_equal(m, [4, 4, 1, 2, 1, 4])


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64])
@pytest.mark.parametrize("cols", [1, 2, 6, 20])
def test_unique_rows_is_np_unique_by_rows(dtype: type, cols: int) -> None:
    """Packed into one int64 (small ranges, negatives) or sorted by lexsort (ranges whose product overflows)."""
    rng = np.random.default_rng(cols)
    for n in (0, 1, 2, 50, 3000):
        for high in (1, 3, 10**6):
            k = rng.integers(0, min(high, np.iinfo(dtype).max), (n, cols)).astype(dtype)
            if dtype != np.uint8 and n:
                k[:, 0] -= 2
            if dtype == np.int64 and n > 2:
                k[::2, -1] = rng.choice([-(2**62), 2**62], size=len(k[::2]))  # too wide to pack
            want, want_first, want_inv = np.unique(k, axis=0, return_index=True, return_inverse=True)
            got, first, inv = unique_rows(k)
            assert got.dtype == k.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(first, want_first)  # the first row of each, as numpy's stable sort
            np.testing.assert_array_equal(inv, want_inv.reshape(-1))


@pytest.mark.parametrize("adt", [np.int8, np.uint16, np.int32, np.uint32, np.int64])
def test_searchsorted_is_numpys_without_converting_the_array(adt: type) -> None:
    """Needles of every integer type and shape, inside and beyond the array's range, Python ints, floats and
    bools: the answer, its shape and type are numpy's."""
    rng = np.random.default_rng(7)
    info = np.iinfo(adt)
    for n in (0, 1, 5, 200):
        a = np.sort(rng.integers(info.min, int(info.max) + 1, n, dtype=adt))
        if n > 3:
            a[1], a[0], a[-1] = a[2], info.min, info.max  # a tie and both ends of the range
        scalars = [0, 1, -1, int(info.max), int(info.min), int(info.max) + 1, int(info.min) - 1, 2**63 - 1, -(2**63),
                   *a[:3].tolist()]
        for side in ("left", "right"):
            for v in [s for s in scalars if -(2**63) <= s < 2**63]:
                for needle in (v, np.int64(v)):
                    want, got = np.searchsorted(a, needle, side), searchsorted(a, needle, side)
                    assert got == want and type(got) is type(want)
            for vdt in (np.int64, np.int32, np.int8, np.uint8):
                vi = np.iinfo(vdt)
                x = rng.integers(vi.min, int(vi.max) + 1, 50, dtype=vdt)
                x[:4] = np.array([vi.min, vi.max, 0, 1], dtype=vdt)
                for needle in (x, x[:1].reshape(()), x.reshape(5, 10), x.tolist()):
                    want, got = np.searchsorted(a, needle, side), searchsorted(a, needle, side)
                    np.testing.assert_array_equal(got, want)
                    assert np.shape(got) == np.shape(want) and np.asarray(got).dtype == np.asarray(want).dtype
            for other in (1.5, np.array([0.5, np.nan, -np.inf]), True, np.array([True, False])):
                np.testing.assert_array_equal(searchsorted(a, other, side), np.searchsorted(a, other, side))


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_many_needles_are_searched_in_two_parts_with_numpys_answer(monkeypatch: pytest.MonkeyPatch, side: str,
                                                                   dtype: type) -> None:
    """From SPLIT_NEEDLES needles on, the helper thread searches one half, a chunk at a time: the answer is numpy's
    for needles in any order, ties, and values outside the array, on either side."""
    monkeypatch.setattr(order, "SPLIT_NEEDLES", 64)
    monkeypatch.setattr(order, "SEARCH_CHUNK", 7)
    rng = np.random.default_rng(3)
    a = np.sort(rng.integers(-50, 50, 301)).astype(dtype)
    v = rng.integers(-80, 80, 1001).astype(dtype)
    seen: list[str] = []
    part = np.searchsorted
    monkeypatch.setattr(order.np, "searchsorted",
                        lambda *args: (seen.append(threading.current_thread().name), part(*args))[1])
    got = order.searchsorted(a, v, side)
    monkeypatch.undo()
    np.testing.assert_array_equal(got, np.searchsorted(a, v, side))
    assert got.dtype == np.intp and len(seen) == -(-500 // 7) + -(-501 // 7)  # each half's chunks
    assert any(n.startswith("neuron-prof-helper") for n in seen) and "MainThread" in seen


def test_many_needles_that_would_convert_the_array_go_to_numpy_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    """An int array searched for float needles is converted whole by numpy at each call: searched in chunks, it would
    be converted once per chunk (and twice at once); it goes to numpy in one call."""
    monkeypatch.setattr(order, "SPLIT_NEEDLES", 64)
    monkeypatch.setattr(order, "SEARCH_CHUNK", 7)
    a = np.arange(0, 600, 2, dtype=np.int64)
    v = np.linspace(-5.0, 605.0, 1001)
    calls: list[np.dtype] = []
    part = np.searchsorted
    monkeypatch.setattr(order.np, "searchsorted", lambda arr, *args: (calls.append(arr.dtype), part(arr, *args))[1])
    got = order.searchsorted(a, v)
    monkeypatch.undo()
    np.testing.assert_array_equal(got, np.searchsorted(a, v))
    assert len(calls) == 1


def test_the_helper_thread_searches_alone_and_a_forked_child_makes_its_own() -> None:
    """A part handed to the helper that searches many needles itself runs them there, not behind itself; a
    forked child gets a helper of its own (the parent's thread is not there). Either mistake hangs: each is
    given 60 s."""
    import select

    from neuron_prof.model import second_core

    a = np.arange(0, 4_000_000, 2)
    v = np.arange(order.SPLIT_NEEDLES * 2)[::-1].copy()
    got: list[tuple[np.ndarray, np.ndarray]] = []
    t = threading.Thread(target=lambda: got.append(second_core.both(lambda: order.searchsorted(a, v),
                                                                    lambda: order.searchsorted(a, v[:10]))),
                         daemon=True)
    t.start()
    t.join(60)
    assert got, "the helper waited on itself"
    np.testing.assert_array_equal(got[0][0], np.searchsorted(a, v))
    np.testing.assert_array_equal(got[0][1], np.searchsorted(a, v[:10]))
    if not hasattr(os, "fork"):
        return
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its answer through the pipe, then gone without running the parent's atexit
        ok = bool((order.searchsorted(a, v) == np.searchsorted(a, v)).all())
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    ready, _, _ = select.select([r], [], [], 60)
    answer = os.read(r, 1) if ready else b""
    if not answer:
        os.kill(pid, 9)
    os.waitpid(pid, 0)
    os.close(r)
    assert answer == b"1", "the forked child's search waited on its parent's helper"
