"""Event arguments stored columnar: one bytes blob of orjson documents plus an offsets array.

A million events with a dict each would cost hundreds of MB of Python objects; here each costs its
JSON bytes plus 8 bytes of offset, and a dict is only built when someone asks for it.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterable, Iterator, Sequence
from functools import cache
from typing import Any

import numpy as np
import orjson

from neuron_prof.model.order import searchsorted
from neuron_prof.model.second_core import both

_OPTS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def dumps_args(args: dict[str, Any]) -> bytes:
    """Serialise one args dict the way the store keeps it (tolerates numpy values and non-str keys)."""
    try:
        return orjson.dumps(args, option=_OPTS)
    except (TypeError, orjson.JSONEncodeError):
        return orjson.dumps({str(k): _safe(v) for k, v in args.items()}, option=_OPTS)


def _safe(v: Any) -> Any:
    try:
        orjson.dumps(v, option=_OPTS)
        return v
    except (TypeError, orjson.JSONEncodeError):
        return repr(v)


def drop_mapped(a: Any) -> None:
    """Hand the resident pages of the mapped file under array `a` (a memory-mapped column) back to the kernel;
    nothing for an array in memory."""
    base = getattr(a, "base", None)
    if isinstance(base, mmap.mmap) and len(base):
        base.madvise(mmap.MADV_DONTNEED)


try:
    from neuron_prof.model import _bytefind  # type: ignore[attr-defined]  # the C extension: no stub
except ImportError:  # not built: no C compiler when the package was installed
    _bytefind = None

SCAN_BLOCK = 1 << 22
"""Bytes `positions` compares at a time: its masks and candidates stay a few MB whatever the window."""


def positions(data: np.ndarray, text: bytes) -> np.ndarray:
    """Where `text` occurs in `data` (uint8; int64 positions, ascending, not overlapping: where a ``find`` loop that
    steps past each hit finds them). In C (`_bytefind`: memmem, 2-3x the numpy path's speed) where it is built,
    else `positions_numpy`."""
    if _bytefind is not None and text and data.flags.c_contiguous:
        if len(data) < SPLIT_BYTES:
            return np.frombuffer(_bytefind.find_all(data, text), dtype=np.int64)
        return _positions_halves(data, text)
    return positions_numpy(data, text)


SPLIT_BYTES = 1 << 23
"""Bytes from which `positions` searches the two halves of `data` at once, one in a helper thread (the C search
runs without the GIL): the second core reads the other half."""


def _positions_halves(data: np.ndarray, text: bytes) -> np.ndarray:
    """`positions` by the C search over each half of `data` at once. The first half's search reads up to
    ``len(text) - 1`` bytes past the middle (an occurrence that starts before it, wherever it ends); the second's
    answer is a sequential search's unless its first hit overlaps the first half's last one (a text that
    overlaps itself, across the middle): then the second half is searched again from the end of that hit."""
    assert _bytefind is not None
    tl, mid = len(text), len(data) // 2
    first, found = both(lambda: _bytefind.find_all(data[:mid + tl - 1], text),
                        lambda: _bytefind.find_all(data[mid:], text))
    second = np.frombuffer(found, dtype=np.int64) + mid
    head = np.frombuffer(first, dtype=np.int64)
    if len(head) and len(second) and second[0] < head[-1] + tl:
        end = int(head[-1]) + tl
        second = np.frombuffer(_bytefind.find_all(data[end:], text), dtype=np.int64) + end
    return np.concatenate([head, second])


def positions_numpy(data: np.ndarray, text: bytes) -> np.ndarray:
    """`positions` without the C extension. Vectorised: the positions of the text's rarest byte (in a sample of
    `data`) found by one numpy comparison, then kept where the rest of the text matches too, 8 bytes a
    comparison; a Python step only where two occurrences overlap (a text like ``b"xx"``)."""
    n = len(text)
    if len(data) < n or not n:
        return np.zeros(0, dtype=np.int64)
    want = np.frombuffer(text, dtype=np.uint8)
    k = int(np.argmin(np.bincount(data[:1 << 20], minlength=256)[want]))
    starts = len(data) - n + 1  # where an occurrence may start; the anchors found a block at a time (bounded)
    at = np.concatenate([np.flatnonzero(data[b + k:min(b + SCAN_BLOCK, starts) + k] == want[k]) + b
                         for b in range(0, starts, SCAN_BLOCK)])
    if n >= 8:  # the bytes at each position read as one little-endian word: 8 bytes compared at once
        words = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
        for j in sorted({*range(0, n - 7, 8), n - 8}):
            at = at[words[at + j] == int.from_bytes(text[j:j + 8], "little")]
    else:
        for j in range(n):
            at = at[data[at + j] == want[j]] if j != k else at
    if len(at) > 1 and bool((np.diff(at) < n).any()):  # overlapping ones: the first of each, as a find loop keeps
        keep, nxt = [], 0
        for p in at.tolist():
            if p >= nxt:
                keep.append(p)
                nxt = p + n
        at = np.asarray(keep, dtype=np.int64)
    return at.astype(np.int64, copy=False)


@cache
def number_pattern(key: bytes) -> re.Pattern[bytes]:
    """The integer value of JSON key `key` (with its quotes) in an args document: group 1."""
    return re.compile(re.escape(key) + rb"\s*:\s*(-?\d+)")


NUMBER_WIDTH = 16
"""Bytes after a key that `_ints_after` reads with numpy; a value spread wider goes to the regex. Under 19: every
number read whole fits an int64."""
_UNDECIDED = np.iinfo(np.int64).min
"""`_ints_after`'s value where the bytes it read do not decide (not OK, and this value)."""
_OK, _FAIL = 4, 5
"""`_ints_after`'s states of a position decided: its number read; no number there."""
_SPACE = np.zeros(256, dtype=bool)
_SPACE[list(b" \t\n\r\f\v")] = True  # the regex's \s of bytes


def _ints_after(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per position of `at` in `data` (bytes): (whether ``\\s*:\\s*(-?\\d+)`` matches there; its integer), read a
    byte column at a time (a vector over the positions, no Python per position) for at most `NUMBER_WIDTH` bytes
    (a byte past the end reads as 0). A position those bytes do not decide (spaces or digits run past them) is
    not OK and its value is `_UNDECIDED`. In C (`_bytefind.ints_after`, the same state machine a position at a
    time) where it is built, else `_ints_after_numpy`."""
    if _bytefind is not None and data.flags.c_contiguous:
        ok, val = np.empty(len(at), dtype=bool), np.empty(len(at), dtype=np.int64)
        _bytefind.ints_after(data, np.ascontiguousarray(at, dtype=np.int64), NUMBER_WIDTH, _UNDECIDED, ok, val)
        return ok, val
    return _ints_after_numpy(data, at)


def _ints_after_numpy(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_ints_after` without the C extension: a byte column at a time over every position."""
    n = len(at)
    state = np.zeros(n, dtype=np.int8)  # 0: before the colon, 1: after it, 2: after a sign, 3: in digits; 4, 5: done
    val = np.zeros(n, dtype=np.int64)
    neg = np.zeros(n, dtype=bool)
    last = len(data) - 1
    for j in range(NUMBER_WIDTH):
        live = np.flatnonzero(state < _OK)
        if not len(live):
            break
        ix = at[live] + j
        c = np.where(ix <= last, data[np.minimum(ix, last)], 0)
        d = c - np.uint8(ord("0"))  # a digit's value; wraps to above 9 for any other byte
        digit = d <= 9
        space = _SPACE[c]
        st = state[live]
        new = np.full(len(live), _FAIL, dtype=np.int8)
        new[(st <= 1) & space] = st[(st <= 1) & space]  # spaces around the colon
        new[(st == 0) & (c == ord(":"))] = 1
        sign = (st == 1) & (c == ord("-"))
        new[sign] = 2
        neg[live[sign]] = True
        go = (st >= 1) & digit  # a digit after the colon, the sign or a digit
        new[go] = 3
        new[(st == 3) & ~digit] = _OK
        g = live[go]
        val[g] = val[g] * 10 + d[go]
        state[live] = new
    ok = state == _OK
    val = np.where(neg, -val, val)
    return ok, np.where(ok, val, np.where(state == _FAIL, 0, _UNDECIDED))


class ArgsStore:
    """Immutable store of argument dicts addressed by index (``-1`` means no args)."""

    __slots__ = ("_blob", "_offsets", "_at")

    def __init__(self, blob: bytes, offsets: np.ndarray) -> None:
        self._blob = blob
        self._offsets = offsets
        self._at = offsets.view(np.ndarray)  # read one document at a time: no np.memmap.__getitem__ per read

    @classmethod
    def empty(cls) -> ArgsStore:
        return cls(b"", np.zeros(1, dtype=np.int64))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def get(self, i: int) -> dict[str, Any]:
        """The args dict at index `i`; ``{}`` for ``-1``."""
        if i < 0:
            return {}
        o = self._at
        return orjson.loads(self._blob[o[i]: o[i + 1]])  # type: ignore[no-any-return]

    def raw(self, i: int) -> bytes:
        """The args at `i` as JSON bytes (``b"{}"`` for ``-1``)."""
        if i < 0:
            return b"{}"
        o = self._at
        return self._blob[o[i]: o[i + 1]]

    @property
    def buffers(self) -> tuple[bytes, np.ndarray]:
        """The raw storage (blob, offsets): document i is blob[offsets[i]:offsets[i+1]]. Read only.

        Exporters slice it directly: ``raw()`` costs ~1 µs a call in numpy scalar indexing.
        """
        return self._blob, self._offsets

    def json_array(self, idx: np.ndarray) -> bytes:
        """The documents at `idx` (no -1) as one JSON array: one orjson call then parses a whole chunk."""
        off = self._offsets
        blob = self._blob
        return b"[" + b",".join([blob[a:z] for a, z in zip(off[idx].tolist(), off[idx + 1].tolist())]) + b"]"

    def json_runs(self, idx: np.ndarray) -> bytes | None:
        """The documents at `idx` (no -1) back to back, one newline between runs that lie apart in the blob,
        for msgspec's ``decode_lines``; a run is one slice of the blob, not a slice per document (157k
        ``[memory]`` documents lie in a few hundred runs). None unless every document starts with ``{`` and
        ends with ``}``: then "}{" is where two meet, which no JSON value holds, so none reads into the next."""
        if not len(idx):
            return b""
        off, blob = self._offsets, self._blob
        starts, ends = off[idx], off[idx + 1]
        raw = np.frombuffer(blob, dtype=np.uint8)
        if (ends <= starts).any() or (raw[starts] != ord("{")).any() or (raw[ends - 1] != ord("}")).any():
            return None
        cut = np.flatnonzero(starts[1:] != ends[:-1]) + 1
        a = starts[np.r_[0, cut]].tolist()
        z = ends[np.r_[cut - 1, len(idx) - 1]].tolist()
        return b"\n".join([blob[x:y] for x, y in zip(a, z, strict=True)])

    def find_all(self, texts: Iterable[bytes], window: int = 1 << 25) -> np.ndarray:
        """Where each of `texts` occurs in the blob (int64 byte positions, ascending per text; a text's
        occurrences do not overlap), read `window` bytes at a time: a memory-mapped blob's pages are handed back
        after each window (`drop_pages`), and the positions are packed, not a Python int each (`positions`: a
        C-speed search, no Python per hit)."""
        texts = [t for t in texts if t]
        blob, n = self._blob, len(self._blob)
        found: list[list[np.ndarray]] = [[] for _ in texts]
        nxt = [0] * len(texts)  # per text: where the next occurrence may start (past the last one found)
        for a in range(0, n, window):
            z = min(a + window, n)
            for k, text in enumerate(texts):
                lo = max(a, nxt[k])
                hi = min(z + len(text) - 1, n)  # one that starts in [lo, z), wherever it ends
                if lo >= z:
                    continue
                at = positions(np.frombuffer(blob, dtype=np.uint8, count=hi - lo, offset=lo), text) + lo
                if len(at):
                    found[k].append(at)
                    nxt[k] = int(at[-1]) + len(text)
            self.drop_pages()
        parts = [p for f in found for p in f]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def key_ints(self, keys: Sequence[bytes], window: int = 1 << 25) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per key (a JSON key with its quotes: ``b'"Sequence number"'``): (the indices of the documents where it
        holds an integer, ascending; that integer, of its first hit in each), as `number_pattern` reads them,
        over the whole blob (`key_int_windows`, joined)."""
        parts = list(self.key_int_windows(keys, window))
        z = np.zeros(0, dtype=np.int64)
        return [(np.concatenate([p[k][0] for p in parts]) if parts else z,
                 np.concatenate([p[k][1] for p in parts]) if parts else z) for k in range(len(keys))]

    def key_int_windows(self, keys: Sequence[bytes],
                        window: int = 1 << 25) -> Iterator[list[tuple[np.ndarray, np.ndarray]]]:
        """`key_ints` of one window of documents at a time: windows of about `window` bytes that end at
        document boundaries (a document's keys all lie in one window), each copied once for every key and its
        pages handed back (`drop_pages`); the keys are found by a C-speed search and the digits parsed with numpy
        (`_ints_after`): no Python per hit."""
        blob, off = self._blob, self._offsets
        n = len(off) - 1
        d0 = 0
        while len(blob) and d0 < n:
            d1 = min(int(searchsorted(off, int(off[d0]) + window, side="left")), n)
            d1 = max(d1, d0 + 1)
            o0 = int(off[d0])
            data = np.frombuffer(blob, dtype=np.uint8, count=int(off[d1]) - o0, offset=o0)  # no copy
            found: list[tuple[np.ndarray, np.ndarray]] = []
            for key in keys:
                at = positions(data, key)
                if not len(at):
                    found.append((np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)))
                    continue
                ok, val = _ints_after(data, at + len(key))
                for i in np.flatnonzero(~ok & (val == _UNDECIDED)).tolist():  # past the bytes read: the regex
                    m = number_pattern(key).match(blob, o0 + int(at[i]), int(off[d1]))
                    if m:
                        ok[i], val[i] = True, int(m.group(1))
                doc = searchsorted(off[d0:d1 + 1] - o0, at[ok], side="right") - 1 + d0
                doc, first = np.unique(doc, return_index=True)  # positions ascend: each document's first hit
                found.append((doc.astype(np.int64, copy=False), val[ok][first].astype(np.int64, copy=False)))
            d0 = d1
            self.drop_pages()  # the window's pages: read once, not held
            yield found

    def drop_pages(self) -> None:
        """Hand the pages read so far of a memory-mapped blob (the column cache's) back to the kernel: they stay
        in the page cache and come back on the next read, but a pass over every document no longer keeps the
        whole file in this process's resident memory. Nothing for a blob in memory."""
        if isinstance(self._blob, mmap.mmap) and len(self._blob):
            self._blob.madvise(mmap.MADV_DONTNEED)
        drop_mapped(self._offsets)  # the offsets too: 8 B a document, read by every pass over rows' args

    @property
    def nbytes(self) -> int:
        return len(self._blob) + self._offsets.nbytes

    @classmethod
    def concat(cls, stores: list[ArgsStore]) -> tuple[ArgsStore, list[int]]:
        """One store holding all of `stores`; returns it and each store's index offset."""
        bases, offs, blob_base = [], [np.zeros(1, dtype=np.int64)], 0
        n = 0
        for st in stores:
            bases.append(n)
            offs.append(st._offsets[1:] + blob_base)
            blob_base += len(st._blob)
            n += len(st)
        return cls(b"".join(st._blob for st in stores), np.concatenate(offs)), bases


class ArgsBuilder:
    """Appends args and hands out indices; ``build()`` returns the ArgsStore."""

    __slots__ = ("_parts", "_lengths")

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._lengths: list[int] = []

    def add(self, args: dict[str, Any] | None) -> int:
        if not args:
            return -1
        b = dumps_args(args)
        self._parts.append(b)
        self._lengths.append(len(b))
        return len(self._parts) - 1

    def add_raw(self, raw: bytes) -> int:
        """Add args already serialised as a JSON object."""
        self._parts.append(raw)
        self._lengths.append(len(raw))
        return len(self._parts) - 1

    def __len__(self) -> int:
        return len(self._parts)

    def get(self, i: int) -> dict[str, Any]:
        """The args added at index `i` (``{}`` for ``-1``): lets probes read events already in a builder."""
        if i < 0:
            return {}
        return orjson.loads(self._parts[i])  # type: ignore[no-any-return]

    def build(self) -> ArgsStore:
        offsets = np.zeros(len(self._lengths) + 1, dtype=np.int64)
        if self._lengths:
            np.cumsum(np.asarray(self._lengths, dtype=np.int64), out=offsets[1:])
        return ArgsStore(b"".join(self._parts), offsets)
