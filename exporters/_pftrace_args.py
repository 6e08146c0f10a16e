"""Event args -> TrackEvent.debug_annotations bytes, mostly without parsing them.

Documents of one kind (a Kineto cpu_op, a kernel) differ only in their digits: ids, sizes, counts. A chunk's
documents are grouped by their text with every digit masked to "0" (a *template*). A template is tokenised once
(`_parse`); per chunk, the digits of each group are gathered from the args blob as one matrix, each variable
number or string becomes a column of values (numpy), and the group's annotation bytes are the template's bytes
(laid out once per combination of varint lengths) with those columns written in. Groups that are small, or whose
variable digits the fast path does not decode exactly (digits in keys, exponents, floats of > 15 digits, ints of
> 18), are parsed with orjson and encoded key by key (`_encode_dicts`: a column of ints, floats or strings at a
time; nested values once per distinct value).

Annotation names and string values are interned: their iids are global to the writer, and `take_new_interned`
hands out the entries not yet written. New strings get their iids in the order `_encode_dicts` alone would give
them (so the output does not depend on which path a group takes).
"""

from __future__ import annotations

import re
import struct
from operator import itemgetter
from typing import Any

import numpy as np
import orjson

from neuron_prof.model import ArgsStore
from neuron_prof.exporters import _pftrace_wire as w

_I64_MIN, _I64_MAX, _U64_MAX = -(1 << 63), (1 << 63) - 1, (1 << 64) - 1
_MASK = bytes.maketrans(b"123456789", b"000000000")
_MIN_ROWS = 24
"""Documents of one template below which orjson + the column encoder is cheaper than the template path."""
_STR = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_NUM = re.compile(rb"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_WS = re.compile(rb"[ \t\n\r]*")
_P10 = 10 ** np.arange(17, -1, -1, dtype=np.int64)
_VTAG = {"s": w.A_STRING_IID, "i": w.A_INT, "f": w.A_DOUBLE}


class _Unsupported(Exception):
    """A document or group the template path does not encode: it goes through orjson instead."""


class _Tmpl:
    """A compiled template: the document tree, its digit-bearing tokens and the byte positions of their digits.

    tree: [(key, node)], node = ("v", value, tok | None) | ("a", [node]) | ("o", [(key, node)]);
    toks[t] = (kind "s"|"i"|"f", start, end, first digit column, end column, fraction digits, negative, exponent);
    slots: the strings to intern, in encoding order: (key index, order, table 0 names | 1 values, tok, value)."""

    __slots__ = ("key", "keys", "tree", "toks", "pos", "slots")

    def __init__(self, key: bytes, doc: bytes) -> None:
        self.key, self.toks, pos = key, [], []
        try:
            node, i = self._value(doc, 0, pos)
            if node[0] != "o" or _WS.match(doc, i).end() != len(doc) or not _same(_plain(node), orjson.loads(doc)):
                raise _Unsupported
        except (ValueError, IndexError, AttributeError, TypeError, RecursionError) as e:  # orjson.JSONDecodeError is a ValueError
            raise _Unsupported from e
        self.tree = node[1]
        self.keys = tuple(k for k, _ in self.tree)
        self.pos = np.asarray(pos, np.int64)
        self.slots: list[tuple[int, int, int, int | None, str]] = []
        for ki, (_, nd) in enumerate(self.tree):
            self._slots(ki, nd)

    def _slots(self, ki: int, nd: tuple) -> None:
        if nd[0] == "v":
            if isinstance(nd[1], str):
                self.slots.append((ki, len(self.slots), 1, nd[2], nd[1]))
        else:
            for it in nd[1]:
                if nd[0] == "o":
                    self.slots.append((ki, len(self.slots), 0, None, it[0]))
                self._slots(ki, it[1] if nd[0] == "o" else it)

    def _tok(self, doc: bytes, kind: str, a: int, b: int, pos: list[int], frac: int = 0, exp: bool = False) -> int | None:
        digits = [i for i in range(a, b) if 48 <= doc[i] <= 57]
        if not digits:
            return None
        self.toks.append((kind, a, b, len(pos), len(pos) + len(digits), frac, doc[a] == 45, exp))
        pos += digits
        return len(self.toks) - 1

    def _value(self, doc: bytes, i: int, pos: list[int]) -> tuple[tuple, int]:
        i = _WS.match(doc, i).end()
        c = doc[i]
        if c in b"{[":
            items: list[Any] = []
            i = _WS.match(doc, i + 1).end()
            if doc[i] == c + 2:  # "}" / "]"
                return ("o" if c == 123 else "a", items), i + 1
            while True:
                if c == 123:
                    m = _STR.match(doc, i)
                    key = orjson.loads(m.group())  # type: ignore[union-attr]
                    if any(48 <= x <= 57 for x in m.group()) or key in {k for k, _ in items}:  # type: ignore[union-attr]
                        raise _Unsupported  # digits in keys may vary in a group; repeated keys collapse
                    i = _WS.match(doc, m.end()).end()  # type: ignore[union-attr]
                    if doc[i] != 58:
                        raise _Unsupported
                    nd, i = self._value(doc, i + 1, pos)
                    items.append((key, nd))
                else:
                    nd, i = self._value(doc, i, pos)
                    items.append(nd)
                i = _WS.match(doc, i).end()
                if doc[i] == c + 2:
                    return ("o" if c == 123 else "a", items), i + 1
                if doc[i] != 44:
                    raise _Unsupported
                i = _WS.match(doc, i + 1).end()
        if c == 34:
            m = _STR.match(doc, i)
            return ("v", orjson.loads(m.group()), self._tok(doc, "s", i, m.end(), pos)), m.end()  # type: ignore[union-attr]
        for lit, v in ((b"true", True), (b"false", False), (b"null", None)):
            if doc.startswith(lit, i):
                return ("v", v, None), i + len(lit)
        m = _NUM.match(doc, i)
        if m is None:
            raise _Unsupported
        frac, exp = m.group(1), m.group(2)
        t = self._tok(doc, "f" if frac or exp else "i", i, m.end(), pos, len(frac) - 1 if frac else 0, bool(exp))
        return ("v", orjson.loads(m.group()), t), m.end()


def _plain(nd: tuple) -> Any:
    if nd[0] == "v":
        return nd[1]
    return {k: _plain(x) for k, x in nd[1]} if nd[0] == "o" else [_plain(x) for x in nd[1]]


def _same(a: Any, b: Any) -> bool:
    """Equal with the same types, key order and float bits (the template must decode exactly as orjson does)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(x, b[k]) for k, x in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return struct.pack("<d", a) == struct.pack("<d", b) if isinstance(a, float) else a == b


def _digits(d: np.ndarray) -> np.ndarray:
    """Rows of ASCII digits (at most 18) as int64."""
    return (d.astype(np.int64) - 48) @ _P10[18 - d.shape[1]:]


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
        blob, off = store.buffers
        st = off[idx[has]]
        docs = list(map(blob.__getitem__, map(slice, st.tolist(), off[idx[has] + 1].tolist())))
        keys = [d.translate(_MASK) for d in docs]
        kid = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        rows_of = _groups(np.fromiter(map(kid.__getitem__, keys), np.int64, count=len(keys)), len(kid))
        arr = np.frombuffer(blob, np.uint8)
        groups, slow, cands = [], [], []
        for key, rows in zip(kid, rows_of):
            tm = self._tmpl.get(key, False)
            if len(rows) >= _MIN_ROWS and tm is False:
                try:
                    tm = _Tmpl(key, docs[rows[0]])
                except _Unsupported:
                    tm = None
                if len(self._tmpl) < 50_000:
                    self._tmpl[key] = tm
            if len(rows) < _MIN_ROWS or not tm:
                slow.append(rows)
                continue
            try:
                tv = self._prepare(tm, rows, docs, arr[st[rows][:, None] + tm.pos] if len(tm.pos) else None)
            except _Unsupported:
                slow.append(rows)
                continue
            groups.append((tm, rows, tv))
            cands += self._new_strings(tm, rows, tv)
        srows = np.sort(np.concatenate(slow)) if slow else np.zeros(0, np.int64)
        dgroups = self._dict_groups(orjson.loads(b"[" + b",".join([docs[j] for j in srows.tolist()]) + b"]"), srows)
        cands += self._dict_strings(dgroups)
        # groups in order of their key tuple's first row, as the column encoder alone would take them
        first: dict[tuple, int] = {}
        for kt, rows in [(g[0].keys, g[1]) for g in groups] + [(g[0], g[1]) for g in dgroups]:
            first[kt] = min(first.get(kt, n), int(rows[0]))
        rank = {kt: r for r, kt in enumerate(sorted(first, key=first.__getitem__))}
        for c in sorted((rank[kt], *c) for kt, *c in cands):
            (self.value_iid if c[5] else self.name_iid)(c[6])
        parts: list[tuple[np.ndarray, w.Mat | w.Ragged]] = [self._write(*g) for g in groups]
        parts += [(rows, self._encode_cols(keys, cols, len(rows)))
                  for keys, rows, cols in sorted(dgroups, key=lambda g: rank[g[0]])]
        return _assemble(n, [(has[r], p) for r, p in parts])

    def _prepare(self, tm: _Tmpl, rows: np.ndarray, docs: list[bytes], dg: np.ndarray | None) -> dict[int, tuple]:
        """Each digit-bearing token of a group: ("c", value) when constant, else its column(s) of values."""
        d0 = docs[rows[0]]
        var = (dg != dg[0]).any(0) if dg is not None else None
        tv: dict[int, tuple] = {"key": (tm.key, np.where(var, 0, dg[0]).tobytes() if dg is not None else b"")}
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
                    _, first, inv = np.unique(sub, axis=0, return_index=True, return_inverse=True)
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
        return tv

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

    def _write(self, tm: _Tmpl, rows: np.ndarray, tv: dict[int, tuple]) -> tuple[np.ndarray, w.Mat]:
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
        var = [t for t in cols if tv[t][0] != "f"]
        code = np.zeros(len(rows), np.int64)
        for j, t in enumerate(var):
            code = code * 11 + cols[t].lens if j < 18 else code  # more than 18: see below
        if len(var) > 18:
            code = np.unique(np.stack([cols[t].lens for t in var], 1), axis=0, return_inverse=True)[1].reshape(-1)
        if not len(var) or code.min() == code.max():
            order, bounds = np.arange(len(rows)), [0, len(rows)]
        else:
            order = np.argsort(code, kind="stable")
            bounds = [0, *(np.flatnonzero(np.diff(code[order])) + 1).tolist(), len(rows)]
        lays = [self._layout(tm, tv, {t: int(cols[t].lens[order[a]]) for t in var}) for a in bounds[:-1]]
        m = np.empty((len(rows), max(len(lay[0]) for lay in lays)), np.uint8)
        lens = np.empty(len(rows), np.int64)
        single = len(lays) == 1
        for (a, z), (row, offs) in zip(zip(bounds[:-1], bounds[1:]), lays):
            sel = order[a:z]
            m[a:z, : len(row)] = row
            lens[a:z] = len(row)
            for t, o in offs:
                c = cols[t]
                k = int(c.lens[sel[0]])
                m[a:z, o: o + k] = c.m[:, :k] if single else c.m[sel, :k]
        return rows[order], w.Mat(m, lens)

    def _layout(self, tm: _Tmpl, tv: dict[int, tuple], hl: dict[int, int]) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """A group's annotation bytes for one set of hole lengths, zeros in the holes, and each hole's offset."""
        key = (*tv["key"], *hl.items())
        lay = self._layouts.get(key)
        if lay is None:
            out, offs = self._items(w.E_DEBUG_ANNOTATIONS, tm.tree, True, tv, hl)
            lay = (np.frombuffer(out, np.uint8), offs)
            if len(self._layouts) < 100_000:
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
        for keys, g in zip(kid, _groups(np.fromiter(map(kid.__getitem__, key_of), np.int64, count=len(key_of)), len(kid))):
            ds = [dicts[j] for j in g.tolist()]
            out.append((keys, rows[g], [list(map(itemgetter(k), ds)) for k in keys]))
        return out

    def _dict_strings(self, groups: list[tuple[tuple, np.ndarray, list[list]]]) -> list[tuple]:
        """`_new_strings` for parsed documents: names first, then each value's strings in row order."""
        out: list[tuple] = []
        for keys, rows, cols in groups:
            for ki, (k, vals) in enumerate(zip(keys, cols)):
                if str(k) not in self.names:
                    out.append((keys, ki, 0, 0, 0, 0, str(k)))
                for r, v in zip(rows.tolist(), vals):
                    if type(v) is not float and type(v) is not bool and v is not None:
                        found: list[tuple[int, str]] = []
                        self._strings(v, found)
                        out += [(keys, ki, 1, r, t, tab, x) for t, (tab, x) in enumerate(found)
                                if x not in (self.values if tab else self.names)]
        return out

    def _strings(self, v: Any, out: list[tuple[int, str]]) -> None:
        """The (table, string) pairs `value_body(v)` interns, in its order."""
        if type(v) is str:
            out.append((1, v))
        elif type(v) is int:
            if not _I64_MIN <= v <= _U64_MAX:
                out.append((1, str(v)))
        elif type(v) is list:
            for x in v:
                self._strings(x, out)
        elif type(v) is dict:
            for k, x in v.items():
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


def _groups(codes: np.ndarray, k: int) -> list[np.ndarray]:
    """Row numbers of each code 0..k-1, ascending."""
    by = np.argsort(codes, kind="stable")
    b = np.searchsorted(codes[by], np.arange(k + 1)).tolist()
    return [by[b[g]: b[g + 1]] for g in range(k)]


def _assemble(n: int, parts: list[tuple[np.ndarray, w.Mat | w.Ragged]]) -> w.Mat | w.Ragged:
    """One row per event from (rows, bytes of those rows) parts: a matrix unless a few long rows make it sparse."""
    lens = np.zeros(n, np.int64)
    for rows, p in parts:
        lens[rows] = p.lens
    width, total = int(lens.max()), int(lens.sum())
    if n * width <= 4 * total + (1 << 16):
        mat = np.empty((n, width), np.uint8)
        for rows, p in parts:
            pm = w.padded(p) if isinstance(p, w.Ragged) else p
            if isinstance(pm, w.Mat):
                mat[rows, : pm.m.shape[1]] = pm.m
            else:
                mat[rows] = _fill(pm, width)
        return w.Mat(mat, lens)
    out = np.empty(total, np.uint8)
    start = np.zeros(n, np.int64)
    np.cumsum(lens[:-1], out=start[1:])
    for rows, p in parts:
        if isinstance(p, w.Mat):
            used = np.arange(p.m.shape[1]) < p.lens[:, None]
            out[(start[rows][:, None] + np.arange(p.m.shape[1]))[used]] = p.m[used]
        elif len(p.data):
            out[np.repeat(start[rows] - p.starts(), p.lens) + np.arange(len(p.data))] = p.data
    return w.Ragged(out, lens)


def _fill(r: w.Ragged, width: int) -> np.ndarray:
    sub = np.zeros((len(r), width), np.uint8)
    sub[np.arange(width) < r.lens[:, None]] = r.data
    return sub
