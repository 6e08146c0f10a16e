"""Rows of something too big to sort in memory dealt into windows of their sort key, a file per window, for the
streamed loads' ends (`json._bindwin`, `pftrace.stream`): each window is then read back whole (about `per` rows) and sorted alone.

    cut = splitters(sample_keys, n_total, per)      # keys that cut the key space into windows of ~per rows
    with Spill(folder, dtype) as sp:
        sp.add(window_of(keys, cut), records)       # chunk by chunk, in row order: a window keeps that order
        for w in range(len(cut) + 1): recs = sp.take(w)

A key equal to a splitter goes to the window it opens, so equal keys always share one window.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from neuron_prof.model.order import searchsorted, sorted_unique

WINDOW = 1 << 20
"""Rows a streamed load's end holds at a time (slices, flow endpoints or arrows): read at each call, so a test
can force small windows."""
SAMPLE = 1 << 18
"""Keys sampled to choose the splitters."""


def sample_step(n: int) -> int:
    """The stride of a sample of about SAMPLE of `n` rows."""
    return max(1, n // SAMPLE)


def splitters(sample: np.ndarray, n_total: int, per: int) -> np.ndarray:
    """Splitters (sorted, distinct) cutting `sample` (keys of the rows taken at a stride, any order; a
    structured array sorts by its fields in order) into windows of about `per` of `n_total` rows."""
    windows = -(-n_total // max(1, per))
    if windows <= 1 or not len(sample):
        return sample[:0]
    names = sample.dtype.names
    s = sample[np.lexsort([sample[f] for f in reversed(names)])] if names else np.sort(sample)
    cut = s[(np.arange(1, windows) * len(s)) // windows]
    keep = np.r_[True, cut[1:] != cut[:-1]] if len(cut) else np.zeros(0, bool)
    return cut[keep]


def window_of(keys: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """The window of each key: how many splitters are <= it."""
    return searchsorted(cut, keys, "right")


def window_of_pairs(major: np.ndarray, minor: np.ndarray, cut: np.ndarray) -> np.ndarray:
    """`window_of` for keys (major, minor), compared as pairs; `cut` a structured array of fields "a", "b"."""
    ca, cb = cut["a"], cut["b"]
    out = searchsorted(ca, major, "left")
    for a in sorted_unique(ca).tolist():  # a few: the majors the splitters fall in
        lo, hi = searchsorted(ca, a, "left"), searchsorted(ca, a, "right")
        m = np.flatnonzero(major == a)
        out[m] = lo + searchsorted(cb[lo:hi], minor[m], "right")
    return out


class Spill:
    """Records dealt into one file per window, in a temporary folder under `folder`, removed on close; with
    `windows` == 1 (all the records fit in one), held in memory instead."""

    def __init__(self, folder: Path, dtype: Any, windows: int = 2) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=".spill-", dir=folder))
        self.dtype = np.dtype(dtype)
        self.rows: dict[int, int] = {}
        self.held: list[np.ndarray] | None = [] if windows == 1 else None

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def add(self, window: np.ndarray, recs: np.ndarray) -> None:
        """Append `recs` to the files of their windows, each window's in the order given."""
        if not len(recs):
            return
        if self.held is not None:
            self.held.append(recs)
            self.rows[0] = self.rows.get(0, 0) + len(recs)
            return
        lo, hi = int(window.min()), int(window.max())
        if lo == hi:  # all in one window: no sort
            self._write(lo, recs)
            return
        if hi < 1 << 15:  # a radix sort
            window = window.astype(np.int16)
        o = np.argsort(window, kind="stable")
        w = window[o]
        recs = recs[o]
        starts = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
        ends = np.r_[starts[1:], len(w)]
        for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
            self._write(int(w[a]), recs[a:b])

    def _write(self, window: int, recs: np.ndarray) -> None:
        with open(self.dir / str(window), "ab") as f:
            recs.tofile(f)
        self.rows[window] = self.rows.get(window, 0) + len(recs)

    def take(self, window: int) -> np.ndarray:
        """The records of `window` in the order they came (its file is removed)."""
        path = self.dir / str(window)
        if window not in self.rows:
            return np.zeros(0, self.dtype)
        if self.held is not None:
            recs, self.held = np.concatenate(self.held), []
            del self.rows[window]
            return recs
        recs = np.fromfile(path, self.dtype)
        path.unlink()
        del self.rows[window]
        return recs
