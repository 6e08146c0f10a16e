"""Event args -> TrackEvent.debug_annotations bytes, mostly without parsing them.

Documents of one kind (a Kineto cpu_op, a kernel) differ only in their digits: ids, sizes, counts. A chunk's
documents are grouped by their text with every digit masked to "0" (a *template*). A template is tokenised once
(`_Tmpl`); per chunk, the digits of each group are gathered from the args blob as one matrix, each variable
number or string becomes a column of values (numpy; floats as m / 10**f while that is exact, else orjson per
value), and the group's annotation bytes are the template's bytes (laid out once per combination of varint
lengths) with those columns written in. Small groups, and templates the fast path does not decode exactly (digits
in keys, repeated keys, ints past 18 digits), are parsed with orjson and encoded key by key (`_encode_cols`: a
column of ints, floats or strings at a time; nested values once per distinct value).

Annotation names and string values are interned: their iids are global to the writer, and `take_new_interned`
hands out the entries not yet written. New strings get their iids in the order the column encoder alone would
give them, so the output does not depend on which path a group takes.
"""

from __future__ import annotations

import re
import struct
from itertools import pairwise
from operator import itemgetter
from typing import Any, Protocol

import numpy as np
import orjson

from neuron_prof.exporters import _pftrace_wire as w
from neuron_prof.model.order import unique_rows

_I64_MIN, _I64_MAX, _U64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1
_MASK = bytes.maketrans(b"123456789", b"000000000")
_MIN_ROWS = 24
"""Documents of one template below which orjson + the column encoder is cheaper than the template path."""
_TOK = re.compile(rb'"(?:[^"\\]|\\.)*"|-?[0-9][0-9.eE+-]*|true|false|null', re.DOTALL)
"""The scalar tokens of a JSON text (strings, keys included; numbers; literals), in order."""
_P10 = 10 ** np.arange(17, -1, -1, dtype=np.int64)
_VTAG = {"s": w.A_STRING_IID, "i": w.A_INT, "f": w.A_DOUBLE}
_TYPES = {"s": (str,), "i": (int,), "f": (float,), "l": (bool, type(None))}


class _Unsupported(Exception):
    """A document or group the template path does not encode: it goes through orjson instead."""


class _Tmpl:
    """A compiled template: orjson's parse of one document with each scalar tied to its token in the text.

    tree: [(key, node)], node = ("v", value, tok | None) | ("a", [node]) | ("o", [(key, node)]);
    toks[t] = (kind "s"|"i"|"f", start, end, first digit column, end column, fraction digits, negative, exponent)
    for the tokens holding digits, whose digit byte positions are pos[first: end];
    slots: the strings to intern, in encoding order: (key index, order, table 0 names | 1 values, tok, value)."""

    __slots__ = ("key", "keys", "pos", "slots", "toks", "tree")

    def __init__(self, key: bytes, doc: bytes) -> None:
        self.key = key
        self.toks: list[tuple[str, int, int, int, int, int, bool, bool]] = []
        self.slots: list[tuple[int, int, int, int | None, str]] = []
        pos: list[int] = []
        try:
            d = orjson.loads(doc)
            spans = iter([m.span() for m in _TOK.finditer(doc)])
            if type(d) is not dict:
                raise _Unsupported
            self.tree = [(k, self._node(x, doc, spans, pos, ki, k)) for ki, (k, x) in enumerate(d.items())]
            if next(spans, None) is not None:  # a repeated key (orjson keeps one) or a misread token
                raise _Unsupported
        except (ValueError, StopIteration, RecursionError) as e:  # orjson.JSONDecodeError is a ValueError
            raise _Unsupported from e
        self.keys = tuple(d)
        self.pos = np.asarray(pos, np.int64)

    def _node(self, v: Any, doc: bytes, spans: Any, pos: list[int], ki: int, key: str | None = None) -> tuple:
        if key is not None:  # the key's own token: no digits (they may vary within a group)
            a, b = next(spans)
            if any(48 <= x <= 57 for x in doc[a:b]) or orjson.loads(doc[a:b]) != key:
                raise _Unsupported
        if type(v) is dict or type(v) is list:
            if type(v) is list:
                return "a", [self._node(x, doc, spans, pos, ki) for x in v]
            items = []
            for k, x in v.items():  # type: ignore[union-attr]
                self.slots.append((ki, len(self.slots), 0, None, k))
                items.append((k, self._node(x, doc, spans, pos, ki, k)))
            return "o", items
        a, b = next(spans)
        text = doc[a:b]
        kind = "s" if text[0] == 34 else "l" if text[0] in b"tfn" else "f" if any(c in b".eE" for c in text) else "i"
        if type(v) not in _TYPES[kind] or kind == "s" and orjson.loads(text) != v:
            raise _Unsupported  # the token is not the value it should be: misaligned
        digits = [i for i in range(a, b) if 48 <= doc[i] <= 57]
        tok = None
        if digits:
            e = max(text.find(b"e"), text.find(b"E"))
            frac = ((e if e >= 0 else len(text)) - text.find(b".") - 1) if kind == "f" and b"." in text else 0
            self.toks.append((kind, a, b, len(pos), len(pos) + len(digits), frac, text[0] == 45, e >= 0))
            pos += digits
            tok = len(self.toks) - 1
        if kind == "s":
            self.slots.append((ki, len(self.slots), 1, tok, v))
        return "v", v, tok


def _intern(table: dict[str, int], new: list[tuple[int, str]], s: str) -> int:
    i = table[s] = len(table) + 1
    new.append((i, s))
    return i


def _digits(d: np.ndarray) -> np.ndarray:
    """Rows of ASCII digits (at most 18) as int64."""
    return (d.astype(np.int64) - 48) @ _P10[18 - d.shape[1]:]


class Docs(Protocol):
    """Where documents are read: an `ArgsStore`, or a chunk's documents copied out of one."""

    @property
    def buffers(self) -> tuple[bytes, np.ndarray]: ...


class ArgsEncoder:
    """Encodes args dicts to DebugAnnotation fields; owns the annotation-name and string-value iids."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.values: dict[str, int] = {}
        self._new_names: list[tuple[int, str]] = []
        self._new_values: list[tuple[int, str]] = []
        self._nested: dict[bytes, bytes] = {}
        self._tmpl: dict[bytes, _Tmpl | None] = {}
        self._layouts: dict[tuple, tuple[np.ndarray, list[tuple[int, int]]]] = {}

    # ---- interning -----------------------------------------------------------------------------
    def name_iid(self, s: str) -> int:
        return self.names.get(s) or _intern(self.names, self._new_names, s)

    def value_iid(self, s: str) -> int:
        return self.values.get(s) or _intern(self.values, self._new_values, s)

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
    def encode(self, store: Docs, idx: np.ndarray) -> w.Mat | w.Ragged:
        """Debug-annotation bytes for each args index in `idx` (-1: none), one row per event."""
        n = len(idx)
        has = np.flatnonzero(idx >= 0)
        if not len(has):
            return w.Ragged.empty(n)
        blob, off = store.buffers
        st = off[idx[has]]
        docs = list(map(blob.__getitem__, map(slice, st.tolist(), off[idx[has] + 1].tolist())))
        keys = [d.translate(_MASK) for d in docs]
        kid = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        rows_of = w.row_groups(np.fromiter(map(kid.__getitem__, keys), np.int64, count=len(keys)), len(kid))
        arr = np.frombuffer(blob, np.uint8)
        groups, slow, cands = [], [], []
        for key, rows in zip(kid, rows_of):
            tm = self._template(key, docs[rows[0]]) if len(rows) >= _MIN_ROWS else None
            try:
                if tm is None:
                    raise _Unsupported
                tv, lkey = self._prepare(tm, rows, docs, arr[st[rows][:, None] + tm.pos])
            except _Unsupported:
                slow.append(rows)
                continue
            groups.append((tm, rows, tv, lkey))
            cands += self._new_strings(tm, rows, tv)
        srows = np.sort(np.concatenate(slow)) if slow else np.zeros(0, np.int64)
        dgroups = self._dict_groups(orjson.loads(b"[" + b",".join([docs[j] for j in srows.tolist()]) + b"]"), srows)
        cands += self._dict_strings(dgroups)
        # groups in order of their key tuple's first row, as the column encoder alone would take them
        first: dict[tuple, int] = {}
        for kt, rows in [(g[0].keys, g[1]) for g in groups] + [g[:2] for g in dgroups]:
            first[kt] = min(first.get(kt, n), int(rows[0]))
        rank = {kt: r for r, kt in enumerate(sorted(first, key=first.__getitem__))}
        for c in sorted((rank[kt], *c) for kt, *c in cands):
            (self.value_iid if c[5] else self.name_iid)(c[6])
        parts: list[tuple[np.ndarray, w.Mat | w.Ragged]] = [self._write(*g) for g in groups]
        parts += [(rows, self._encode_cols(keys, cols, len(rows)))
                  for keys, rows, cols in sorted(dgroups, key=lambda g: rank[g[0]])]
        return w.assemble(n, [(has[r], p) for r, p in parts])

    def _template(self, key: bytes, doc: bytes) -> _Tmpl | None:
        """The compiled template of masked text `key` (None: the template path does not take it)."""
        tm = self._tmpl.get(key)
        if tm is None and key not in self._tmpl:
            try:
                tm = _Tmpl(key, doc)
            except _Unsupported:
                tm = None
            if len(self._tmpl) < 10_000:  # a few KB each
                self._tmpl[key] = tm
        return tm

    def _prepare(self, tm: _Tmpl, rows: np.ndarray, docs: list[bytes], dg: np.ndarray) -> tuple[dict, tuple]:
        """Each digit-bearing token of a group (digits `dg`): ("c", value) when constant, else its column(s) of
        values; and the key of the group's layouts (the template and its constant digits)."""
        d0 = docs[rows[0]]
        var = (dg != dg[0]).any(0)
        tv: dict[int, tuple] = {}
        for t, (kind, a, b, c0, c1, frac, neg, exp) in enumerate(tm.toks):
            vc = np.flatnonzero(var[c0:c1]) + c0
            if not len(vc):
                v = orjson.loads(d0[a:b])
                if type(v) is int and not _I64_MIN <= v <= _U64_MAX:
                    raise _Unsupported  # would intern str(v) outside the string order
                tv[t] = ("c", v)
            elif kind == "i" and c1 - c0 > 18:
                raise _Unsupported  # may leave int64
            elif kind == "s":
                sub = dg[:, vc]
                if len(vc) <= 18:
                    _, first, inv = np.unique(_digits(sub), return_index=True, return_inverse=True)
                else:
                    _, first, inv = unique_rows(sub)
                tv[t] = ("s", [orjson.loads(docs[j][a:b]) for j in rows[first].tolist()], inv.reshape(-1), first)
            elif kind == "i":
                x = _digits(dg[:, c0:c1])
                tv[t] = (kind, -x if neg else x)
            else:  # m / 10**frac is exact (correctly rounded) while both are exact doubles; orjson parses the rest
                if exp or c1 - c0 > 18 or frac > 22:
                    x, slow = np.zeros(len(rows)), np.arange(len(rows))
                else:
                    m = _digits(dg[:, c0:c1])
                    x, slow = m / 10.0 ** frac, np.flatnonzero(m > 1 << 53)
                    x = -x if neg else x
                if len(slow):
                    x[slow] = [orjson.loads(docs[j][a:b]) for j in rows[slow].tolist()]
                tv[t] = (kind, x)
        if sum(x[0] in "is" for x in tv.values()) > 18:
            raise _Unsupported  # layouts are told apart by an int64 code of the varint lengths
        return tv, (tm.key, np.where(var, 0, dg[0]).tobytes())

    def _new_strings(self, tm: _Tmpl, rows: np.ndarray, tv: dict[int, tuple]) -> list[tuple]:
        """(key tuple, key index, phase, first row, order, table, string) of each string not interned yet."""
        out = [(tm.keys, ki, 0, 0, 0, 0, k) for ki, k in enumerate(tm.keys) if k not in self.names]
        r0 = int(rows[0])
        for ki, order, table, tok, s in tm.slots:
            tab = self.values if table else self.names
            x = tv[tok] if tok is not None else ("c", s)
            if x[0] == "c":
                if x[1] not in tab:
                    out.append((tm.keys, ki, 1, r0, order, table, x[1]))
            else:
                out += [(tm.keys, ki, 1, int(rows[f]), order, table, v) for v, f in zip(x[1], x[3].tolist())
                        if v not in tab]
        return out

    def _write(self, tm: _Tmpl, rows: np.ndarray, tv: dict[int, tuple], lkey: tuple) -> tuple[np.ndarray, w.Mat]:
        """The group's annotation rows as a matrix (rows sorted by their layout)."""
        cols: dict[int, w.Mat] = {}
        for t, x in tv.items():
            if x[0] == "s":
                ids = np.array([self.values[s] for s in x[1]], np.int64)[x[2]]
                cols[t] = w.varint_mat(ids)
            elif x[0] == "i":
                cols[t] = w.varint_mat(x[1])
            elif x[0] == "f":
                cols[t] = w.fixed64_mat(x[1].astype(np.float64), b"")
        var = [t for t in cols if tv[t][0] != "f"]  # at most 18 (`_prepare`): the code fits an int64
        code = np.zeros(len(rows), np.int64)
        for t in var:
            code = code * 11 + cols[t].lens
        if not len(var) or code.min() == code.max():
            order, bounds = np.arange(len(rows)), [0, len(rows)]
        else:
            order = np.argsort(code, kind="stable")
            bounds = [0, *(np.flatnonzero(np.diff(code[order])) + 1).tolist(), len(rows)]
        lays = [self._layout(tm, tv, {t: int(cols[t].lens[order[a]]) for t in var}, lkey) for a in bounds[:-1]]
        m = np.empty((len(rows), max(len(lay[0]) for lay in lays)), np.uint8)
        lens = np.empty(len(rows), np.int64)
        for (a, z), (row, offs) in zip(pairwise(bounds), lays):
            sel = order[a:z] if len(lays) > 1 else slice(None)
            m[a:z, : len(row)] = row
            lens[a:z] = len(row)
            for t, o in offs:
                k = int(cols[t].lens[order[a]])
                m[a:z, o: o + k] = cols[t].m[sel, :k]
        return rows[order], w.Mat(m, lens)

    def _layout(self, tm: _Tmpl, tv: dict[int, tuple], hl: dict[int, int], lkey: tuple) -> tuple[np.ndarray, list]:
        """A group's annotation bytes for one set of hole lengths, zeros in the holes, and each hole's offset."""
        key = (*lkey, *hl.items())
        lay = self._layouts.get(key)
        if lay is None:
            out, offs = self._items(w.E_DEBUG_ANNOTATIONS, tm.tree, True, tv, hl)
            lay = (np.frombuffer(out, np.uint8), offs)
            if len(self._layouts) < 20_000:  # a few hundred bytes each
                self._layouts[key] = lay
        return lay

    def _items(self, tag: bytes, items: list, keyed: bool, tv: dict, hl: dict) -> tuple[bytes, list[tuple[int, int]]]:
        out, offs = bytearray(), []
        for it in items:
            head = w.A_NAME_IID + w.varint(self.name_iid(it[0])) if keyed else b""
            b, o = self._body(it[1] if keyed else it, tv, hl)
            out += tag + w.varint(len(head) + len(b)) + head
            offs += [(t, x + len(out)) for t, x in o]
            out += b
        return bytes(out), offs

    def _body(self, nd: tuple, tv: dict, hl: dict) -> tuple[bytes, list[tuple[int, int]]]:
        if nd[0] != "v":
            if not nd[1]:
                return w.fld(w.A_LEGACY_JSON, b"[]" if nd[0] == "a" else b"{}"), []
            return self._items(w.A_ARRAY_VALUES if nd[0] == "a" else w.A_DICT_ENTRIES, nd[1], nd[0] == "o", tv, hl)
        t = nd[2]
        if t is None or tv[t][0] == "c":
            return self.value_body(nd[1] if t is None else tv[t][1]), []
        tag = _VTAG[tv[t][0]]
        return tag + bytes(hl.get(t, 8)), [(t, len(tag))]

    # ---- parsed documents (small groups, templates the fast path does not take) ------------------------
    def _dict_groups(self, dicts: list[Any], rows: np.ndarray) -> list[tuple[tuple, np.ndarray, list[list]]]:
        """Parsed documents (chunk rows `rows`) grouped by key tuple: (keys, rows, one list of values per key)."""
        key_of = list(map(tuple, dicts))
        kid = {k: i for i, k in enumerate(dict.fromkeys(key_of))}
        out = []
        codes = np.fromiter(map(kid.__getitem__, key_of), np.int64, count=len(key_of))
        for keys, g in zip(kid, w.row_groups(codes, len(kid))):
            ds = [dicts[j] for j in g.tolist()]
            out.append((keys, rows[g], [list(map(itemgetter(k), ds)) for k in keys]))
        return out

    def _dict_strings(self, groups: list[tuple[tuple, np.ndarray, list[list]]]) -> list[tuple]:
        """`_new_strings` for parsed documents: names first, then each value's strings in row order."""
        out: list[tuple] = []
        nest = self._nested
        for keys, rows, cols in groups:
            for ki, (k, vals) in enumerate(zip(keys, cols)):
                if str(k) not in self.names:
                    out.append((keys, ki, 0, 0, 0, 0, str(k)))
                for r, v in zip(rows.tolist(), vals):
                    t = type(v)
                    if (t is str and v in self.values or t is float or t is bool or v is None
                            or t is int and _I64_MIN <= v <= _U64_MAX or t in (list, dict) and orjson.dumps(v) in nest):
                        continue  # nothing new (a cached nested value had its strings interned)
                    found: list[tuple[int, str]] = []
                    self._strings(v, found)
                    out += [(keys, ki, 1, r, j, tab, x) for j, (tab, x) in enumerate(found)
                            if x not in (self.values if tab else self.names)]
        return out

    def _strings(self, v: Any, out: list[tuple[int, str]]) -> None:
        """The (table, string) pairs `value_body(v)` interns, in its order."""
        if type(v) is str or type(v) is int and not _I64_MIN <= v <= _U64_MAX:
            out.append((1, str(v)))
        for k, x in v.items() if type(v) is dict else enumerate(v) if type(v) is list else ():
            if type(v) is dict:
                out.append((0, str(k)))
            self._strings(x, out)

    def _encode_cols(self, keys: tuple, cols: list[list], m: int) -> w.Ragged:
        """`m` rows of one key tuple, each key a column (see `_column`)."""
        segs: list[w.Seg] = []
        for k, vals in zip(keys, cols):
            segs += self._column(k, vals, m)
        return w.interleave(segs, m) if segs else w.Ragged.empty(m)

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
        cache = self._nested
        keys = list(map(orjson.dumps, vals))
        bodies = list(map(cache.get, keys))
        if None in bodies:
            body_of = self.value_body
            bodies = [b if b is not None else body_of(v) for b, v in zip(bodies, vals)]
        return w.Ragged.from_list(bodies)  # type: ignore[arg-type]
