"""The fast path of the Chrome JSON loader: a chunk of `traceEvents` decoded by msgspec into typed structs
that hold only the fields the model keeps, with each event's `args` left as its raw JSON text.

orjson builds a dict per event and a Python object per value (args included), and the loader then
re-serialises every args dict for the args store. Here msgspec skips the keys nobody reads without building
them, and the args text goes to the store after a vectorised whitespace squeeze, byte for byte what
`orjson.dumps(orjson.loads(text))` gives. What this path cannot do exactly, it refuses (returns None) and
the chunk goes the orjson way, with all its repairs and warnings:

- anything msgspec rejects for these types (a name that is not a string, a null ts, NaN, invalid UTF-8, a
  control character inside a string, a cut inside a string: the caller widens it);
- a phase other than complete (X), flow (s/t/f) and instant (i/I/R) events;
- args that are not an object and not empty (null, false, 0, "", [] and {} mean "no args");
- a pid, tid or id outside int64.

Known difference: an integer beyond 64 bits in `bind_id` or `id2` (kept as any JSON value) stays an int here
where orjson would give a float.

Args whose text orjson would write differently (a float, an exponent, an escape, "-0", an integer beyond
18 digits) are re-serialised through orjson, a few at a time.
"""

from __future__ import annotations

import math
from operator import attrgetter
from typing import Annotated, Any

import msgspec
import numpy as np
import orjson

from neuron_prof.loaders.json._values import dump_all
from neuron_prof.model.order import searchsorted

_NO_ARGS = msgspec.Raw(b"")
UNSET = msgspec.UNSET


Int = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]
"""int64: beyond it the chunk goes the orjson way (which reads integers beyond 64 bits as floats)."""


class Ev(msgspec.Struct):
    """One event, only the fields the model stores (see EventColumns)."""

    ph: str = ""
    ts: float = math.nan
    dur: float = math.nan
    pid: Int | str = 0
    tid: Int | str = 0
    name: str = ""
    cat: str = ""
    args: msgspec.Raw = _NO_ARGS
    id: Int | str | None = None
    id2: Any = None
    bp: Any = None
    np_slice: Any = -1
    bind_id: Any = UNSET
    flow_in: Any = None
    flow_out: Any = None


_DECODER = msgspec.json.Decoder(list[Ev])
FAST_PHASES = frozenset(("X", "s", "t", "f", "i", "I", "R"))
X_GET = attrgetter("ts", "dur", "pid", "tid", "name", "cat")
I_GET = attrgetter("ts", "pid", "tid", "name", "cat")
F_GET = attrgetter("ts", "pid", "tid", "id", "cat", "name", "ph")
_WS = np.zeros(256, dtype=bool)
_WS[[32, 9, 10, 13]] = True
_DIGIT = np.zeros(256, dtype=bool)
_DIGIT[48:58] = True
_FLOATISH = np.zeros(256, dtype=bool)
_FLOATISH[[ord("."), ord("e"), ord("E")]] = True


class TypedChunk(list):  # type: ignore[type-arg]
    """A chunk of decoded events (a list of `Ev`), as `JsonEventReader.chunks()` yields on the fast path,
    with every event's args as the store will keep them: `has` (per event), `blob` and `lens` (per event
    with args, in order)."""

    phs: list[str]
    has: np.ndarray
    blob: np.ndarray
    lens: np.ndarray

    def take_args(self, pos: np.ndarray) -> tuple[np.ndarray, bytes, np.ndarray]:
        """(has, store bytes, lengths) of the events at increasing positions `pos` of the chunk."""
        has = self.has[pos]
        if len(pos) == len(self):
            return has, self.blob.tobytes(), self.lens
        sel = np.zeros(len(self), dtype=bool)
        sel[pos] = True
        docs = sel[self.has]
        return has, self.blob[np.repeat(docs, self.lens)].tobytes(), self.lens[docs]


def decode_chunk(doc: bytes | bytearray) -> TypedChunk | None:
    """`doc` (a JSON array of events) decoded, or None when the orjson path must take it (module docstring)."""
    try:
        evs = _DECODER.decode(doc)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    phs = [e.ph for e in evs]
    if not FAST_PHASES.issuperset(phs):
        return None
    try:
        has, blob, lens = raw_args([e.args for e in evs])
    except NotExact:
        return None
    chunk = TypedChunk(evs)
    chunk.phs = phs
    chunk.has, chunk.blob, chunk.lens = has, np.frombuffer(blob, dtype=np.uint8), lens
    return chunk


class NotExact(Exception):
    """Args this path cannot store exactly as the orjson path would: the chunk must go that way."""


def raw_args(raws: list[msgspec.Raw]) -> tuple[np.ndarray, bytes, np.ndarray]:
    """(which events have args, the args store's bytes for those, their lengths), as `dump_all` of the parsed
    args would give. Raises NotExact for args that are neither an object nor empty."""
    n = len(raws)
    lens = np.fromiter(map(len, raws), dtype=np.int64, count=n)
    b = np.frombuffer(b"".join(raws), dtype=np.uint8)
    starts = np.cumsum(lens) - lens
    present = lens > 0
    obj = present.copy()
    obj[present] = b[starts[present]] == ord("{")
    other = present & ~obj
    for i in np.flatnonzero(other).tolist():  # null, false, 0, "", [] are no args; anything else is not ours
        if orjson.loads(bytes(raws[i])):
            raise NotExact
    if not obj.any():
        return obj, b"", np.zeros(0, np.int64)
    redo = _needs_orjson(b, lens, starts) & obj
    blank = redo | other
    if blank.any():  # squeezed to nothing (their quotes could be escaped); orjson writes the redone ones
        b = b.copy()
        b[np.repeat(blank, lens)] = 32
    blob, sq = _squeeze(b, starts, lens)
    if redo.any():
        try:
            vals = orjson.loads(b"[" + b",".join([raws[i] for i in np.flatnonzero(redo).tolist()]) + b"]")
            rblob, rlens = dump_all(vals)
        except (orjson.JSONDecodeError, orjson.JSONEncodeError, TypeError):
            raise NotExact from None
        sq[redo] = rlens
        out = np.empty(int(sq.sum()), dtype=np.uint8)
        from_orjson = np.repeat(redo, sq)
        out[~from_orjson] = np.frombuffer(blob, dtype=np.uint8)
        out[from_orjson] = np.frombuffer(rblob, dtype=np.uint8)
        blob = out.tobytes()
    out_lens = sq[obj]
    empty = out_lens == 2  # "{}": an empty dict is no args
    if empty.any():
        obj[np.flatnonzero(obj)[empty]] = False
        blob = np.frombuffer(blob, dtype=np.uint8)[np.repeat(~empty, out_lens)].tobytes()
        out_lens = out_lens[~empty]
    return obj, blob, out_lens


_CLASSES = bytes(b"0"[0] if 48 <= c < 58 else b"."[0] if c in b".eE" else c if c in b"\\-" else 32
                 for c in range(256))
"""Byte classes for the orjson check: digits -> '0', '.eE' -> '.', backslash and '-' as they are, the rest ' '."""


def _needs_orjson(b: np.ndarray, lens: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per event: whether its args text may differ from orjson's own writing beyond whitespace (a digit then
    '.', 'e' or 'E'; a backslash; "-0"; 19 digits in a row). Conservative: a match inside a string counts."""
    n = len(lens)
    redo = np.zeros(n, dtype=bool)
    tr = b.tobytes().translate(_CLASSES)
    if b"0." not in tr and b"\\" not in tr and b"-0" not in tr and b"0" * 19 not in tr:
        return redo
    t = np.frombuffer(tr, dtype=np.uint8)
    z = t == 48
    hit = t == 92
    hit[:-1] |= z[:-1] & (t[1:] == 46)
    hit[:-1] |= (t[:-1] == 45) & z[1:]
    at = np.flatnonzero(hit).tolist()
    k = tr.find(b"0" * 19)
    while k >= 0:
        at.append(k)
        k = tr.find(b"0" * 19, k + 1)
    if at:
        redo[searchsorted(starts, np.array(at, dtype=np.int64), side="right") - 1] = True
    return redo


def _squeeze(b: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Whitespace outside strings removed from documents without backslashes, and the new lengths.
    Inside a JSON string no byte is <= 32 but the space (msgspec rejects control characters there)."""
    inside = np.logical_xor.accumulate(b == 34)  # quote parity: within a string, or its closing quote
    drop = (b <= 32) & ~inside
    gone = np.flatnonzero(drop)
    if not len(gone):
        return b.tobytes(), lens
    new_starts = starts - searchsorted(gone, starts)  # kept bytes before each document
    kept = len(b) - len(gone)
    return b[~drop].tobytes(), np.diff(new_starts, append=kept)
