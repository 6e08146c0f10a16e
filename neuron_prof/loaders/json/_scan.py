"""The compiled path of the Chrome JSON loader: a piece of `traceEvents` scanned once in C (`_jscan.c`)
into the columns the model stores, then added to `EventColumns` with the same rules, warnings and
interning order as the msgspec path (`_json_typed`), so the Trace is the same byte for byte.

The scanner reads pieces made only of X, flow (s/t/f) and instant (i/I/R) events whose fields have the
types the msgspec path accepts; names, cats and string pids/tids come back once per piece, numbers parsed in
C, args objects as their text without whitespace. It refuses anything else and the piece goes the msgspec
way (`scan_chunk` returns None) or, for another phase, straight the orjson way (returns False). Args whose
text orjson would write differently (an escape, a float it writes another way, "-0", 19+ digit integers)
are re-serialised through orjson, as on the msgspec path.

Without the extension (no C compiler at install), or with NEURON_PROF_JSON_SCANNER=0, `scan_chunk` always
returns None: `ingest_path()` says which path runs.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import filterfalse
from typing import Any, Literal, TypeAlias

import msgspec
import numpy as np
import orjson

from neuron_prof.loaders.json._values import MAX_ABS_US, dump_all
from neuron_prof.model.order import searchsorted

EventColumns: TypeAlias = Any
"""_events.EventColumns, which imports this module: named loosely here so the two import one way only."""

try:
    from neuron_prof.loaders.json import _jscan  # type: ignore[attr-defined]  # the C extension: no stub
    _MISSING = ""
except ImportError as e:  # not built: no C compiler when the package was installed
    _jscan = None
    _MISSING = str(e)

ENABLED = _jscan is not None and os.environ.get("NEURON_PROF_JSON_SCANNER", "1") != "0"
"""Whether the compiled scanner is used (tests and `bench ingest` switch it off to compare)."""
_PHASE = 2
_F_ID2, _F_BIND_ID, _F_FLOW_IN, _F_FLOW_OUT = 9, 12, 13, 14
_decode = msgspec.json.decode


def scan_enabled() -> bool:
    """Whether pieces go to the compiled scanner in this process."""
    return ENABLED


def ingest_path() -> str:
    """Which path reads Chrome JSON events in this process, in words."""
    if ENABLED:
        return "compiled scanner (neuron_prof.loaders.json._jscan)"
    if _jscan is not None:
        return "Python (msgspec + orjson): the compiled scanner is switched off (NEURON_PROF_JSON_SCANNER=0)"
    return f"Python (msgspec + orjson): the compiled scanner is not built ({_MISSING}); reinstall with a C compiler"


class ScannedChunk:
    """One scanned piece: per-event columns (ph codes X=0, s/t/f=1-3, i/I/R=4-6), the piece's strings,
    (pid, tid) pairs and flow keys as local ids with their orders of first use per group of events (X,
    flows, instants), and per group the args as the store keeps them."""

    def __init__(self, r: tuple[Any, ...], raw: bytes | bytearray | mmap.mmap) -> None:
        (self.n, ph, ts, dur, track, name, cat, has, alen, fkey, bp, hint, blob_x, redo, sparse,
         self.strings, pairs, fkeys, orders, blob_f, blob_i) = r
        self.ph = np.frombuffer(ph, np.uint8)
        self.ts = np.frombuffer(ts, np.float64)
        self.dur = np.frombuffer(dur, np.float64)
        self.track = np.frombuffer(track, np.int32)
        self.name = np.frombuffer(name, np.int32)
        self.cat = np.frombuffer(cat, np.int32)
        self.fkey = np.frombuffer(fkey, np.int32)
        self.bp = np.frombuffer(bp, np.uint8).astype(bool)
        self.hint = np.frombuffer(hint, np.int64)
        self.pairs = np.frombuffer(pairs, np.int64).reshape(-1, 4)
        self.fkeys = np.frombuffer(fkeys, np.int64).reshape(-1, 4)
        self.sparse = np.frombuffer(sparse, np.int64).reshape(-1, 4)
        self.orders = [[np.frombuffer(o, np.int32) for o in g] for g in orders]
        self.raw = raw
        self.has = np.frombuffer(has, np.uint8).astype(bool)
        self.alen = np.frombuffer(alen, np.int64)
        group = np.where(self.ph == 0, 0, np.where(self.ph <= 3, 1, 2))
        self.pos = [np.flatnonzero(group == g) for g in range(3)]
        redo_a = np.frombuffer(redo, np.int64).reshape(-1, 3)
        self.args = [self._group_args(g, b, redo_a[group[redo_a[:, 0]] == g] if len(redo_a) else redo_a)
                     for g, b in enumerate((blob_x, blob_f, blob_i))]

    def __len__(self) -> int:
        return self.n  # type: ignore[no-any-return]

    def _group_args(self, g: int, blob: bytes, redo: np.ndarray) -> tuple[np.ndarray, bytes, np.ndarray]:
        """(has, blob, lens) of the events of group g; args orjson writes differently are loaded and written
        by orjson and spliced in (see _json_typed.raw_args)."""
        pos = self.pos[g]
        has = self.has[pos]
        lens = self.alen[pos]
        if not len(redo):
            return has, blob, lens[has]  # bytes, as the store's pieces are joined best (see EventColumns.args_later)
        raw = self.raw
        vals = orjson.loads(b"[" + b",".join([raw[s:e] for s, e in redo[:, 1:].tolist()]) + b"]")
        rblob, rlens = dump_all(vals)
        at = searchsorted(pos, redo[:, 0])
        lens = lens.copy()
        lens[at] = rlens
        is_redo = np.zeros(len(pos), dtype=bool)
        is_redo[at] = True
        sq = lens[has]
        out = np.empty(int(sq.sum()), dtype=np.uint8)
        from_orjson = np.repeat(is_redo[has], sq)
        out[~from_orjson] = np.frombuffer(blob, np.uint8)
        out[from_orjson] = np.frombuffer(rblob, dtype=np.uint8)
        return has, out.tobytes(), sq

    def take_args(self, pos: np.ndarray) -> tuple[np.ndarray, bytes, np.ndarray]:
        """(has, store bytes, lengths) of the events at increasing positions `pos`, all of one group."""
        g = 0 if self.ph[pos[0]] == 0 else 1 if self.ph[pos[0]] <= 3 else 2
        has, blob, lens = self.args[g]
        if len(pos) == len(self.pos[g]):
            return has, blob, lens
        sel = np.zeros(len(has), dtype=bool)
        sel[searchsorted(self.pos[g], pos)] = True
        docs = sel[has]
        return has[sel], np.frombuffer(blob, np.uint8)[np.repeat(docs, lens)].tobytes(), lens[docs]

    def obj(self, kind: int, v: int) -> Any:
        """A pid, tid or flow id written as (kind, value): None, an int, or a string of the piece."""
        return None if kind == 0 else v if kind == 1 else self.strings[v]


class Ahead:
    """Scans the next pieces in threads while the caller turns the current one into columns (the scan runs
    without the GIL). The pieces are cut exactly as the reader cuts them (`cut(pos)` -> (hi, next piece's
    start; None after the last) or None for a last piece it cannot cut); a piece the reader takes otherwise
    (widened after damage) drops what was scanned ahead, and the reader goes on as if there were no threads.
    Pieces of a file still being read are scanned ahead once their bytes are there (`cut` returns False until
    then)."""

    def __init__(self, cut: Callable[[int], tuple[int, int | None] | None | Literal[False]], threads: int) -> None:
        self.cut = cut
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="neuron-prof-scan")
        self.depth = 2 * threads
        self.raw: bytes | bytearray | mmap.mmap | None = None
        self.ahead: dict[int, tuple[int, Future[Any]]] = {}
        self.frontier: int | None = None

    def scan(self, raw: bytes | bytearray | mmap.mmap, lo: int, hi: int, nxt: int) -> Any:
        """_jscan.scan(raw, lo, hi), scanned ahead if it was; `nxt`: where the piece after it starts."""
        got = self.ahead.pop(lo, None) if raw is self.raw else None
        if got is not None and got[0] == hi:
            r = got[1].result()
        else:
            self._drop()
            self.raw, self.frontier = raw, nxt
            r = _jscan.scan(raw, lo, hi)
        while len(self.ahead) < self.depth and self.frontier is not None:
            c = self.cut(self.frontier)
            if c is None:
                self.frontier = None
                break
            if c is False:  # not read yet
                break
            self.ahead[self.frontier] = (c[0], self.pool.submit(_jscan.scan, raw, self.frontier, c[0]))
            self.frontier = c[1]
        return r

    def _drop(self) -> None:
        for _, f in self.ahead.values():
            f.cancel()
        self.ahead = {}

    def close(self) -> None:
        self._drop()
        self.pool.shutdown(wait=True)
        self.raw = None


def scan_chunk(raw: bytes | bytearray | mmap.mmap, lo: int, hi: int, ahead: Ahead | None = None,
               nxt: int = 0) -> ScannedChunk | None | bool:
    """raw[lo:hi] (array elements) scanned: a ScannedChunk, None (try the msgspec path) or False (a phase
    the fast paths do not read: parse it with orjson). With `ahead`, the next pieces are scanned in threads."""
    if not ENABLED:
        return None
    r = _jscan.scan(raw, lo, hi) if ahead is None else ahead.scan(raw, lo, hi, nxt)
    if type(r) is int:
        return False if r == _PHASE else None
    try:
        sc = ScannedChunk(r, raw)
    except (orjson.JSONDecodeError, orjson.JSONEncodeError, TypeError):
        return None  # args orjson cannot take back (numbers beyond 64 bits): the Python path's repairs
    if len(sc.sparse):
        sp = sc.sparse
        id2 = sp[sp[:, 1] == _F_ID2, 0]
        flows = id2[(sc.ph[id2] >= 1) & (sc.ph[id2] <= 3)]
        if len(flows) and (sc.fkeys[sc.fkey[flows], 2] == 0).any():
            return None  # a flow whose id is its id2 (Chrome's scoped ids): the msgspec path
    return sc


def _first_order(local: np.ndarray) -> np.ndarray:
    """The distinct values of `local`, in order of first appearance."""
    u, first = np.unique(local, return_index=True)
    return u[np.argsort(first, kind="stable")]  # type: ignore[no-any-return]


class _Group:
    """The events of one group (X, flows or instants) of a piece that are kept (a usable ts)."""

    def __init__(self, ev: EventColumns, sc: ScannedChunk, g: int) -> None:
        self.ev, self.sc, self.g = ev, sc, g
        pos = sc.pos[g]
        ts = sc.ts[pos]
        self.ok = np.abs(ts) <= MAX_ABS_US  # False for NaN
        self.all = bool(self.ok.all())
        self.pos, self.ts = (pos, ts) if self.all else (pos[self.ok], ts[self.ok])

    def skipped(self) -> None:
        if not self.all:
            self.ev.warn["events without a usable ts skipped"] += int((~self.ok).sum())

    def order(self, k: int, local: np.ndarray) -> np.ndarray:
        """Local ids of column k (track, name, cat, flow key) in order of first use by the kept events."""
        return self.sc.orders[self.g][k] if self.all else _first_order(local)

    def strs(self, k: int, col: np.ndarray) -> np.ndarray:
        """The trace's string ids of a name or cat column (interned in order of first use, as `sids`)."""
        local = col[self.pos]
        order = self.order(k, local)
        strings = self.sc.strings
        lut = np.zeros(len(strings), np.int32)
        lut[order] = self.ev.sids([strings[i] for i in order.tolist()])
        return lut[local]  # type: ignore[no-any-return]

    def tracks(self) -> np.ndarray:
        sc = self.sc
        local = sc.track[self.pos]
        order = self.order(0, local)
        keys = sc.pairs[order].tolist()
        lut = np.zeros(len(sc.pairs), np.int32)
        lut[order] = self.ev._tracks([sc.obj(k[0], k[1]) for k in keys], [sc.obj(k[2], k[3]) for k in keys])
        return lut[local]  # type: ignore[no-any-return]


def add_scanned(ev: EventColumns, sc: ScannedChunk) -> None:
    """Add a scanned piece to `ev`: X events, then flows, then instants (EventColumns._add_typed_parts)."""
    ev._typed = sc  # type: ignore[assignment]
    try:
        if len(sc.pos[0]):
            _add_x(ev, sc)
        if len(sc.pos[1]):
            _add_flows(ev, sc)
        if len(sc.pos[2]):
            ins = _Group(ev, sc, 2)
            ins.skipped()
            if len(ins.pos):
                ev._i.append((ins.ts, ins.tracks(), ins.strs(1, sc.name), ins.strs(2, sc.cat), ev._args(ins.pos)))
    finally:
        ev._typed = None


def _add_x(ev: EventColumns, sc: ScannedChunk) -> None:
    x = _Group(ev, sc, 0)
    ok = x.ok
    dur = sc.dur[sc.pos[0]]
    ev.fix_durations(dur, ok)
    x.skipped()
    xi = x.pos
    if not len(xi):
        return
    if not x.all:
        dur = dur[ok]
    first_row = ev.n_slices
    ev._s.append((x.ts, dur, x.tracks(), x.strs(1, sc.name), x.strs(2, sc.cat), ev._args(xi)))
    ev.n_slices += len(xi)
    sp = sc.sparse
    if not len(sp) or not (sp[:, 1] == _F_BIND_ID).any():
        return
    raw = sc.raw
    vals: dict[tuple[int, int], Any] = {(i, f): _decode(raw[s:e]) for i, f, s, e in sp.tolist()}
    for i in sp[sp[:, 1] == _F_BIND_ID, 0].tolist():  # flow v2, in event order
        k = int(searchsorted(xi, i))
        if k < len(xi) and xi[k] == i:
            ev.v2.append((first_row + k, vals[(i, _F_BIND_ID)], bool(vals.get((i, _F_FLOW_IN))),
                          bool(vals.get((i, _F_FLOW_OUT)))))


def _add_flows(ev: EventColumns, sc: ScannedChunk) -> None:
    f = _Group(ev, sc, 1)
    f.skipped()
    fi = f.pos
    if not len(fi):
        return
    local = sc.fkey[fi]
    order = f.order(3, local)
    strings = sc.strings
    fk = sc.fkeys[order]
    ids: list[Any] = fk[:, 3].tolist()
    kind = fk[:, 2]
    if not (kind == 1).all():
        ids = [sc.obj(k, v) for k, v in zip(kind.tolist(), ids)]
    keys = list(zip(map(strings.__getitem__, fk[:, 0].tolist()), map(strings.__getitem__, fk[:, 1].tolist()), ids))
    cache = ev._flow_keys
    new = list(filterfalse(cache.__contains__, dict.fromkeys(keys)))
    cache.update(zip(new, range(len(cache), len(cache) + len(new))))
    lut = np.zeros(len(sc.fkeys), np.int64)
    lut[order] = np.fromiter(map(cache.__getitem__, keys), np.int64, len(keys))
    ev._f.append(((sc.ph[fi] - 1).astype(np.int8), lut[local], f.tracks(), f.ts, sc.bp[fi], sc.hint[fi].copy()))
