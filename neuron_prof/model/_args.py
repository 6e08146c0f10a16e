"""Event arguments stored columnar: one bytes blob of orjson documents plus an offsets array.

A million events with a dict each would cost hundreds of MB of Python objects; here each costs its
JSON bytes plus 8 bytes of offset, and a dict is only built when someone asks for it.
"""

from __future__ import annotations

import mmap
from array import array
from collections.abc import Iterable
from typing import Any

import numpy as np
import orjson

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


class ArgsStore:
    """Immutable store of argument dicts addressed by index (``-1`` means no args)."""

    __slots__ = ("_blob", "_offsets")

    def __init__(self, blob: bytes, offsets: np.ndarray) -> None:
        self._blob = blob
        self._offsets = offsets

    @classmethod
    def empty(cls) -> ArgsStore:
        return cls(b"", np.zeros(1, dtype=np.int64))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def get(self, i: int) -> dict[str, Any]:
        """The args dict at index `i`; ``{}`` for ``-1``."""
        if i < 0:
            return {}
        o = self._offsets
        return orjson.loads(self._blob[o[i]: o[i + 1]])  # type: ignore[no-any-return]

    def raw(self, i: int) -> bytes:
        """The args at `i` as JSON bytes (``b"{}"`` for ``-1``)."""
        if i < 0:
            return b"{}"
        o = self._offsets
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
        after each window (`drop_pages`), and the positions are packed, not a Python int each."""
        texts = [t for t in texts if t]
        blob, n = self._blob, len(self._blob)
        found: list[array[int]] = [array("q") for _ in texts]
        for a in range(0, n, window):
            z = min(a + window, n)
            for text, hits in zip(texts, found, strict=True):
                lo = max(a, hits[-1] + len(text)) if hits else a  # past the last one found (it may cross a)
                at = blob.find(text, lo, min(z + len(text) - 1, n))  # one that starts in [a, z)
                while at >= 0:
                    hits.append(at)
                    at = blob.find(text, at + len(text), min(z + len(text) - 1, n))
            self.drop_pages()
        return np.concatenate([np.frombuffer(h, dtype=np.int64) for h in found]) if found else np.zeros(0, np.int64)

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
