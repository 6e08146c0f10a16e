"""Event args -> TrackEvent.debug_annotations bytes, column by column.

Args dicts of one chunk are parsed with one orjson call and grouped by their key tuple; within a group each
key is a column, and a column of ints, floats, bools or strings is encoded with numpy in one go. Nested
values (lists, dicts) become `array_values` / `dict_entries` and are encoded once per distinct value
(Kineto repeats the same shapes and type lists on most ops). Annotation names and string values are
interned: their iids are global to the writer, and `take_new_interned` hands out the entries not yet written.
"""

from __future__ import annotations

import struct
from operator import itemgetter
from typing import Any

import numpy as np
import orjson

from neuron_prof.model import ArgsStore
from neuron_prof.exporters import _pftrace_wire as w

_I64_MIN, _I64_MAX, _U64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1


class ArgsEncoder:
    """Encodes args dicts to DebugAnnotation fields; owns the annotation-name and string-value iids."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.values: dict[str, int] = {}
        self._new_names: list[tuple[int, str]] = []
        self._new_values: list[tuple[int, str]] = []
        self._nested: dict[bytes, bytes] = {}

    # ---- interning -----------------------------------------------------------------------------
    def name_iid(self, s: str) -> int:
        i = self.names.get(s)
        if i is None:
            i = self.names[s] = len(self.names) + 1
            self._new_names.append((i, s))
        return i

    def value_iid(self, s: str) -> int:
        i = self.values.get(s)
        if i is None:
            i = self.values[s] = len(self.values) + 1
            self._new_values.append((i, s))
        return i

    def take_new_interned(self) -> bytes:
        """InternedData fields for the names/values created since the last call."""
        out = [w.fld(w.I_ANNOTATION_NAMES, w.fint(b"\x08", i) + w.fstr(b"\x12", s)) for i, s in self._new_names]
        out += [w.fld(w.I_STRING_VALUES, w.fint(b"\x08", i) + w.fstr(b"\x12", s)) for i, s in self._new_values]
        self._new_names.clear()
        self._new_values.clear()
        return b"".join(out)

    # ---- one value (scalar path: metadata, findings, nested values) -------------------------------
    def value_body(self, v: Any) -> bytes:
        """The value fields of a DebugAnnotation (everything but its name)."""
        t = type(v)
        if t is str:
            return w.A_STRING_IID + w.varint(self.value_iid(v))
        if t is bool:
            return w.A_BOOL + (b"\x01" if v else b"\x00")
        if t is int:
            if _I64_MIN <= v <= _I64_MAX:
                return w.A_INT + w.varint(v)
            if 0 <= v <= _U64_MAX:
                return w.A_UINT + w.varint(v)
            return w.A_STRING_IID + w.varint(self.value_iid(str(v)))
        if t is float:
            return w.A_DOUBLE + struct.pack("<d", v)
        if v is None:
            return b""
        if t in (list, tuple, dict):
            if not v:  # no empty array/dict in DebugAnnotation: keep it as JSON so it survives a round trip
                return w.fld(w.A_LEGACY_JSON, b"[]" if t is not dict else b"{}")
            key = orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY)
            b = self._nested.get(key)
            if b is None:
                if t is dict:
                    b = b"".join(w.fld(w.A_DICT_ENTRIES, w.A_NAME_IID + w.varint(self.name_iid(str(k)))
                                       + self.value_body(x)) for k, x in v.items())
                else:
                    b = b"".join(w.fld(w.A_ARRAY_VALUES, self.value_body(x)) for x in v)
                if len(self._nested) < 200_000:
                    self._nested[key] = b
            return b
        if isinstance(v, (int, np.integer)):
            return self.value_body(int(v))
        if isinstance(v, (float, np.floating)):
            return self.value_body(float(v))
        return w.A_STRING_IID + w.varint(self.value_iid(str(v)))

    def annotations(self, args: dict[str, Any]) -> bytes:
        """All DebugAnnotation fields for one args dict."""
        return b"".join(w.fld(w.E_DEBUG_ANNOTATIONS, w.A_NAME_IID + w.varint(self.name_iid(str(k)))
                              + self.value_body(v)) for k, v in args.items())

    # ---- a chunk of events ------------------------------------------------------------------------
    def encode(self, store: ArgsStore, idx: np.ndarray) -> w.Mat | w.Ragged:
        """Debug-annotation bytes for each args index in `idx` (-1: none), one row per event."""
        n = len(idx)
        has = np.flatnonzero(idx >= 0)
        if not len(has):
            return w.Ragged.empty(n)
        dicts = orjson.loads(_json_array(store, idx[has]))
        # group rows by their key tuple with C-level maps (a Python loop per event costs ~1 us here)
        key_of = list(map(tuple, dicts))
        kid = {k: i for i, k in enumerate(dict.fromkeys(key_of))}
        codes = np.fromiter(map(kid.__getitem__, key_of), np.int64, count=len(key_of))
        by_code = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[by_code], np.arange(len(kid) + 1))
        parts: list[tuple[np.ndarray, w.Ragged]] = []
        for keys, g in kid.items():
            rows = by_code[bounds[g]: bounds[g + 1]]
            ds = [dicts[j] for j in rows.tolist()]
            m = len(ds)
            segs: list[w.Seg] = []
            for k in keys:
                segs += self._column(k, list(map(itemgetter(k), ds)), m)
            parts.append((has[rows], w.interleave(segs, m) if segs else w.Ragged.empty(m)))
        lens = np.zeros(n, np.int64)
        for rows_g, r in parts:
            lens[rows_g] = r.lens
        width = int(lens.max())
        total = int(lens.sum())
        if n * width <= 4 * total + (1 << 16):  # rows side by side in a matrix: cheap to interleave later
            mat = np.zeros((n, width), np.uint8)
            for rows_g, r in parts:
                pm = w.padded(r)
                if isinstance(pm, w.Mat):
                    mat[rows_g, : pm.m.shape[1]] = pm.m
                else:
                    sub = np.zeros((len(rows_g), width), np.uint8)
                    sub[np.arange(width) < r.lens[:, None]] = r.data
                    mat[rows_g] = sub
            return w.Mat(mat, lens)
        rows_all = np.concatenate([p[0] for p in parts])
        data = np.concatenate([p[1].data for p in parts])
        lens_g = np.concatenate([p[1].lens for p in parts])
        src = np.zeros(len(lens_g), np.int64)
        np.cumsum(lens_g[:-1], out=src[1:])
        src_by_row = np.zeros(n, np.int64)
        src_by_row[rows_all] = src
        return _gather(data, src_by_row, lens)

    def _column(self, key: str, vals: list[Any], m: int) -> list[w.Seg]:
        """One annotation per row for `key`: 0x22 len [name_iid] [value], as three segments."""
        name = w.A_NAME_IID + w.varint(self.name_iid(str(key)))
        types = set(map(type, vals))
        body: w.Seg | None = None
        if len(types) == 1:
            t = next(iter(types))
            try:
                if t is int:
                    body = w.varint_mat(np.array(vals, dtype=np.int64), w.A_INT)
                elif t is float:
                    body = w.fixed64_mat(np.array(vals, dtype=np.float64), w.A_DOUBLE)
                elif t is str:
                    ids = list(map(self.values.get, vals))
                    if None in ids:
                        ids = [i if i is not None else self.value_iid(v) for i, v in zip(ids, vals)]
                    body = w.varint_mat(np.array(ids, dtype=np.int64), w.A_STRING_IID)
                elif t is bool:
                    body = w.varint_mat(np.array(vals, dtype=np.int64), w.A_BOOL)
                elif t is list or t is dict:
                    body = self._nested_column(vals)
            except OverflowError:
                body = None
        if body is None:
            body = w.Ragged.from_list([self.value_body(v) for v in vals])
        return [w.varint_mat(body.lens + len(name), w.E_DEBUG_ANNOTATIONS), w.Const(name, m), body]

    def _nested_column(self, vals: list[Any]) -> w.Ragged:
        """Lists/dicts: encoded once per distinct value (keyed by their JSON text)."""
        dumps = orjson.dumps
        cache = self._nested
        keys = list(map(dumps, vals))
        bodies = list(map(cache.get, keys))
        if None in bodies:
            body_of = self.value_body
            bodies = [b if b is not None else body_of(v) for b, v in zip(bodies, vals)]
        return w.Ragged.from_list(bodies)  # type: ignore[arg-type]


def _json_array(store: ArgsStore, idx: np.ndarray) -> bytes:
    """The args documents at `idx` as one JSON array (one orjson call parses a whole chunk)."""
    return store.json_array(idx)


def _gather(data: np.ndarray, src: np.ndarray, lens: np.ndarray) -> w.Ragged:
    """Rows data[src[i]: src[i]+lens[i]] back to back."""
    dst = np.zeros(len(lens), np.int64)
    if len(lens):
        np.cumsum(lens[:-1], out=dst[1:])
    total = int(lens.sum())
    pos = np.repeat(src - dst, lens) + np.arange(total, dtype=np.int64)
    return w.Ragged(data[pos], lens)
