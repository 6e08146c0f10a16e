"""Protobuf wire encoding for the .pftrace writer: scalar helpers and vectorised "ragged" columns.

A Ragged is one byte string per row, stored as (flat uint8 data, int64 lengths). Packets for a chunk of
events are built column-wise (one varint column for all timestamps, one for all track uuids, ...) and
`interleave` concatenates the columns row by row, so no Python code runs per event. Field tags come
from ../shared/design/perfetto-facts.md and are checked by parsing the output with the perfetto protos.
"""

from __future__ import annotations

import numpy as np

from neuron_prof.model.order import searchsorted

# ---- field tags (field << 3 | wire type), as varint bytes -------------------------------------------
# TracePacket
T_PACKET = b"\x0a"  # Trace.packet
P_TIMESTAMP = b"\x40"
P_SEQ_ID = b"\x50"
P_TRACK_EVENT = b"\x5a"
P_INTERNED = b"\x62"
P_SEQ_FLAGS = b"\x68"
P_TRACK_DESCRIPTOR = b"\xe2\x03"
# TrackEvent
E_CATEGORY_IIDS = b"\x18"
E_DEBUG_ANNOTATIONS = b"\x22"
E_TYPE = b"\x48"
E_NAME_IID = b"\x50"
E_TRACK_UUID = b"\x58"
E_NAME = b"\xba\x01"
E_COUNTER_VALUE = b"\xf0\x01"
E_DOUBLE_COUNTER_VALUE = b"\xe1\x02"
E_FLOW_IDS = b"\xf9\x02"  # fixed64
# DebugAnnotation
A_NAME_IID = b"\x08"
A_BOOL = b"\x10"
A_UINT = b"\x18"
A_INT = b"\x20"
A_DOUBLE = b"\x29"
A_LEGACY_JSON = b"\x4a"
A_NAME = b"\x52"
A_DICT_ENTRIES = b"\x5a"
A_ARRAY_VALUES = b"\x62"
A_STRING = b"\x32"
A_STRING_IID = b"\x88\x01"
# InternedData and its entries ({iid = 1, name|str = 2})
I_CATEGORIES = b"\x0a"
I_NAMES = b"\x12"
I_ANNOTATION_NAMES = b"\x1a"
I_STRING_VALUES = b"\xea\x01"

TYPE_BEGIN, TYPE_END, TYPE_INSTANT, TYPE_COUNTER = 1, 2, 3, 4
SEQ_CLEARED_AND_NEEDS, SEQ_NEEDS = 3, 2

_U64 = (1 << 64) - 1


# ---- scalar encoding (descriptors, interned data, metadata: a few hundred packets) -------------------
def varint(n: int) -> bytes:
    """Unsigned varint; negative ints are written as 64-bit two's complement (10 bytes), as protobuf does."""
    n &= _U64
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def fld(tag: bytes, body: bytes) -> bytes:
    """A length-delimited field (message, string or bytes)."""
    return tag + varint(len(body)) + body


def fint(tag: bytes, n: int) -> bytes:
    return tag + varint(n)


def fstr(tag: bytes, s: str) -> bytes:
    return fld(tag, s.encode("utf-8", "surrogatepass"))


# ---- ragged columns --------------------------------------------------------------------------------
class Ragged:
    """One byte string per row: `data` (uint8) holds the rows back to back, `lens` their lengths."""

    __slots__ = ("data", "lens")

    def __init__(self, data: np.ndarray, lens: np.ndarray) -> None:
        self.data = data
        self.lens = lens

    def __len__(self) -> int:
        return len(self.lens)

    @classmethod
    def from_list(cls, rows: list[bytes]) -> Ragged:
        lens = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        return cls(np.frombuffer(b"".join(rows), dtype=np.uint8), lens)

    @classmethod
    def empty(cls, n: int) -> Ragged:
        return cls(np.zeros(0, np.uint8), np.zeros(n, np.int64))

    def starts(self) -> np.ndarray:
        s = np.zeros(len(self.lens), np.int64)
        np.cumsum(self.lens[:-1], out=s[1:])
        return s

    def take(self, idx: np.ndarray) -> Ragged:
        """Rows `idx`, in that order."""
        lens = self.lens[idx]
        src = self.starts()[idx]
        dst = np.zeros(len(lens), np.int64)
        np.cumsum(lens[:-1], out=dst[1:])
        total = int(lens.sum())
        pos = np.repeat(src - dst, lens) + np.arange(total, dtype=np.int64)
        return Ragged(self.data[pos], lens)


class Const:
    """The same bytes on every row."""

    __slots__ = ("b", "n")

    def __init__(self, b: bytes, n: int) -> None:
        self.b = b
        self.n = n

    @property
    def lens(self) -> np.ndarray:
        return np.full(self.n, len(self.b), np.int64)


class Mat:
    """Row i is m[i, :lens[i]] (varints and fixed-width fields, a few bytes each)."""

    __slots__ = ("m", "lens")

    def __init__(self, m: np.ndarray, lens: np.ndarray) -> None:
        self.m = m
        self.lens = lens


Seg = Ragged | Const | Mat


def varint_mat(values: np.ndarray, prefix: bytes = b"", present: np.ndarray | None = None) -> Mat:
    """`prefix` + varint(v) per row (v as uint64: negative int64 gives 10 bytes, like protobuf).

    Rows where `present` is False are empty (an absent optional field). Built transposed (one contiguous row per
    byte position, only as many as the largest value needs); `m` is a view of that.
    """
    v = np.ascontiguousarray(values).astype(np.int64, copy=False).view(np.uint64)
    n, p = len(v), len(prefix)
    wd = max(1, (int(v.max()).bit_length() + 6) // 7) if n else 1
    mt = np.empty((p + wd, n), np.uint8)
    if p:
        mt[:p] = np.frombuffer(prefix, np.uint8)[:, None]
    nb = np.ones(n, np.int64)
    for k in range(wd):
        np.bitwise_and(v, np.uint64(0x7F), out=mt[p + k], casting="unsafe")
        if k + 1 < wd:
            v = v >> np.uint64(7)
            more = v != 0
            mt[p + k] |= more.view(np.uint8) << np.uint8(7)
            nb += more
    lens = nb + p
    if present is not None:
        lens = np.where(present, lens, 0)
    return Mat(mt.T, lens)


def fixed64_mat(values: np.ndarray, prefix: bytes) -> Mat:
    """`prefix` + 8 little-endian bytes per row (int64/uint64 or float64 values)."""
    a = np.ascontiguousarray(values)
    raw = a.astype(a.dtype.newbyteorder("<"), copy=False).view(np.uint8).reshape(len(a), 8)
    p = len(prefix)
    m = np.empty((len(a), p + 8), np.uint8)
    if p:
        m[:, :p] = np.frombuffer(prefix, np.uint8)
    m[:, p:] = raw
    return Mat(m, np.full(len(a), p + 8, np.int64))


def _width(s: Seg, n: int) -> int:
    if isinstance(s, Const):
        return len(s.b)
    if isinstance(s, Mat):
        return int(s.m.shape[1])
    return int(s.lens.max()) if n else 0


def interleave(segs: list[Seg], n: int) -> Ragged:
    """Row i of the result is row i of every segment, concatenated in order.

    Lays the segments side by side in one (n x total width) byte matrix and compresses it row-major through one
    mask (column j is used where its offset in its segment < the row's length there): no per-byte index arrays.
    Ragged segments with a few very long rows (which would make the matrix mostly padding) go through index
    arithmetic instead.
    """
    widths = [_width(s, n) for s in segs]
    width = sum(widths)
    dt = np.int16 if width < 1 << 15 else np.int64
    lens = np.empty((n, len(segs)), dt)
    for j, s in enumerate(segs):
        lens[:, j] = len(s.b) if isinstance(s, Const) else s.lens
    total = lens.sum(1, dtype=np.int64)
    if n * width > 3 * int(total.sum()) + (1 << 16):
        return _interleave_indexed(segs, n)
    m = np.empty((n, width), np.uint8)
    c = 0
    for j, (s, wd) in enumerate(zip(segs, widths)):
        if not wd:
            continue
        if isinstance(s, Const):
            m[:, c: c + wd] = np.frombuffer(s.b, np.uint8)
        elif isinstance(s, Mat):
            m[:, c: c + wd] = s.m
        else:  # row-major fill: exactly the ragged rows in order
            m[:, c: c + wd][np.arange(wd, dtype=dt) < lens[:, j: j + 1]] = s.data
        c += wd
    offset = np.concatenate([np.arange(wd, dtype=dt) for wd in widths]) if segs else np.zeros(0, dt)
    return Ragged(m[offset < np.repeat(lens, widths, axis=1)], total)


def _interleave_indexed(segs: list[Seg], n: int) -> Ragged:
    lens_list = [s.lens for s in segs]
    total_lens = np.zeros(n, np.int64)
    for ln in lens_list:
        total_lens += ln
    starts = np.zeros(n, np.int64)
    if n:
        np.cumsum(total_lens[:-1], out=starts[1:])
    out = np.empty(int(total_lens.sum()), np.uint8)
    off = starts.copy()
    for s, ln in zip(segs, lens_list):
        if isinstance(s, Const):
            if s.b:
                idx = off[:, None] + np.arange(len(s.b), dtype=np.int64)
                out[idx] = np.frombuffer(s.b, np.uint8)
        elif isinstance(s, Mat):
            w = s.m.shape[1]
            mask = np.arange(w, dtype=np.int64) < ln[:, None]
            out[(off[:, None] + np.arange(w, dtype=np.int64))[mask]] = s.m[mask]
        else:
            tot = len(s.data)
            if tot:
                src = s.starts()
                out[np.repeat(off - src, ln) + np.arange(tot, dtype=np.int64)] = s.data
        off += ln
    return Ragged(out, total_lens)


def padded(r: Ragged, width: int | None = None) -> Mat | Ragged:
    """The rows of `r` left-aligned in a matrix (cheap to interleave), unless a few long rows make it sparse;
    always a matrix of `width` columns when `width` is given."""
    n = len(r)
    wd = int(r.lens.max()) if n else 0
    if width is None and n * wd > 4 * len(r.data) + (1 << 16):
        return r
    m = np.zeros((n, width or wd), np.uint8)
    m[np.arange(width or wd) < r.lens[:, None]] = r.data
    return Mat(m, r.lens)


def row_groups(codes: np.ndarray, k: int) -> list[np.ndarray]:
    """Row numbers of each code 0..k-1, ascending."""
    by = np.argsort(codes, kind="stable")
    b = searchsorted(codes[by], np.arange(k + 1)).tolist()
    return [by[b[g]: b[g + 1]] for g in range(k)]


def assemble(n: int, parts: list[tuple[np.ndarray, Mat | Ragged]]) -> Mat | Ragged:
    """n rows from parts (rows, those rows' bytes) that cover some rows once (the others are empty): a matrix,
    unless a few long rows would make it mostly padding."""
    lens = np.zeros(n, np.int64)
    for rows, p in parts:
        lens[rows] = p.lens
    width, total = int(lens.max()) if n else 0, int(lens.sum())
    if n * width <= 4 * total + (1 << 16):
        mat = np.empty((n, width), np.uint8)
        for rows, p in parts:
            pm = padded(p) if isinstance(p, Ragged) else p
            if isinstance(pm, Mat):
                mat[rows, : pm.m.shape[1]] = pm.m
            else:
                mat[rows] = padded(pm, width).m  # type: ignore[union-attr]
        return Mat(mat, lens)
    out = np.empty(total, np.uint8)
    start = np.zeros(n, np.int64)
    np.cumsum(lens[:-1], out=start[1:])
    for rows, p in parts:
        if isinstance(p, Mat):
            used = np.arange(p.m.shape[1]) < p.lens[:, None]
            out[(start[rows][:, None] + np.arange(p.m.shape[1]))[used]] = p.m[used]
        elif len(p.data):
            out[np.repeat(start[rows] - p.starts(), p.lens) + np.arange(len(p.data))] = p.data
    return Ragged(out, lens)
