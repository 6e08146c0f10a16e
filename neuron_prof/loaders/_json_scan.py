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

import os
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np
import orjson

from neuron_prof.loaders._json_typed import TypedChunk
from neuron_prof.loaders._json_values import dump_all

if TYPE_CHECKING:
    from neuron_prof.loaders._json_events import EventColumns

try:
    from neuron_prof.loaders import _jscan
    _MISSING = ""
except ImportError as e:  # not built: no C compiler when the package was installed
    _jscan = None
    _MISSING = str(e)

ENABLED = _jscan is not None and os.environ.get("NEURON_PROF_JSON_SCANNER", "1") != "0"
"""Whether the compiled scanner is used (tests and `bench ingest` switch it off to compare)."""
MAX_ABS_US = 9.0e15
_PHASE = 2
_F_ID2, _F_BIND_ID, _F_FLOW_IN, _F_FLOW_OUT = 9, 12, 13, 14
_decode = msgspec.json.decode


def ingest_path() -> str:
    """Which path reads Chrome JSON events in this process, in words."""
    if ENABLED:
        return "compiled scanner (neuron_prof.loaders._jscan)"
    if _jscan is not None:
        return "Python (msgspec + orjson): the compiled scanner is switched off (NEURON_PROF_JSON_SCANNER=0)"
    return f"Python (msgspec + orjson): the compiled scanner is not built ({_MISSING}); reinstall with a C compiler"


class ScannedChunk:
    """One scanned piece: per-event columns (ph codes X=0, s/t/f=1-3, i/I/R=4-6), the piece's strings,
    (pid, tid) pairs and flow keys as local ids, and the args as the store keeps them (`has`, `blob`,
    `lens`, as on TypedChunk)."""

    take_args = TypedChunk.take_args

    def __init__(self, r: tuple[Any, ...], raw: bytes | bytearray) -> None:
        (self.n, ph, ts, dur, track, name, cat, has, alen, fkey, bp, hint, blob, redo, sparse,
         self.strings, pairs, fkeys) = r
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
        self.raw = raw
        self.has = np.frombuffer(has, np.uint8).astype(bool)
        lens = np.frombuffer(alen, np.int64)
        self.blob = np.frombuffer(blob, np.uint8)
        redo_a = np.frombuffer(redo, np.int64).reshape(-1, 3)
        if len(redo_a):
            self._redo(redo_a, lens)
        else:
            self.lens = lens[self.has]

    def __len__(self) -> int:
        return self.n  # type: ignore[no-any-return]

    def _redo(self, redo: np.ndarray, lens: np.ndarray) -> None:
        """Args orjson writes differently: loaded and written by orjson, spliced in (see _json_typed)."""
        raw = self.raw
        vals = orjson.loads(b"[" + b",".join([raw[s:e] for s, e in redo[:, 1:].tolist()]) + b"]")
        rblob, rlens = dump_all(vals)
        lens = lens.copy()
        lens[redo[:, 0]] = rlens
        is_redo = np.zeros(self.n, dtype=bool)
        is_redo[redo[:, 0]] = True
        sq = lens[self.has]
        out = np.empty(int(sq.sum()), dtype=np.uint8)
        from_orjson = np.repeat(is_redo[self.has], sq)
        out[~from_orjson] = self.blob
        out[from_orjson] = np.frombuffer(rblob, dtype=np.uint8)
        self.blob, self.lens = out, sq

    def obj(self, kind: int, v: int) -> Any:
        """A pid, tid or flow id written as (kind, value): None, an int, or a string of the piece."""
        return None if kind == 0 else v if kind == 1 else self.strings[v]


def scan_chunk(raw: bytes | bytearray, lo: int, hi: int) -> ScannedChunk | None | bool:
    """raw[lo:hi] (array elements) scanned: a ScannedChunk, None (try the msgspec path) or False (a phase
    the fast paths do not read: parse it with orjson)."""
    if not ENABLED:
        return None
    r = _jscan.scan(raw, lo, hi)
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


def _strs(ev: EventColumns, sc: ScannedChunk, local: np.ndarray) -> np.ndarray:
    """String ids of the trace for local string ids (interned in order of first appearance, as `sids`)."""
    order = _first_order(local)
    lut = np.zeros(len(sc.strings), np.int32)
    lut[order] = ev.sids([sc.strings[k] for k in order.tolist()])
    return lut[local]  # type: ignore[no-any-return]


def _tracks(ev: EventColumns, sc: ScannedChunk, local: np.ndarray) -> np.ndarray:
    order = _first_order(local)
    keys = sc.pairs[order].tolist()
    lut = np.zeros(len(sc.pairs), np.int32)
    lut[order] = ev._tracks([sc.obj(k[0], k[1]) for k in keys], [sc.obj(k[2], k[3]) for k in keys])
    return lut[local]  # type: ignore[no-any-return]


def _keep_ts(ev: EventColumns, sc: ScannedChunk, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions with a usable ts, their ts); the others counted as skipped, as EventColumns._keep."""
    ts = sc.ts[pos]
    ok = np.abs(ts) <= MAX_ABS_US  # False for NaN
    if ok.all():
        return pos, ts
    ev.warn["events without a usable ts skipped"] += int((~ok).sum())
    return pos[ok], ts[ok]


def add_scanned(ev: EventColumns, sc: ScannedChunk) -> None:
    """Add a scanned piece to `ev`: X events, then flows, then instants (EventColumns._add_typed_parts)."""
    ev._typed = sc  # type: ignore[assignment]
    try:
        ph = sc.ph
        xi = np.flatnonzero(ph == 0)
        if len(xi):
            _add_x(ev, sc, xi)
        if len(xi) == sc.n:
            return
        fi = np.flatnonzero((ph >= 1) & (ph <= 3))
        if len(fi):
            _add_flows(ev, sc, fi)
        ii = np.flatnonzero(ph >= 4)
        if len(ii):
            ii, ts = _keep_ts(ev, sc, ii)
            if len(ii):
                ev._i.append((ts, _tracks(ev, sc, sc.track[ii]), _strs(ev, sc, sc.name[ii]),
                              _strs(ev, sc, sc.cat[ii]), ev._args(ii)))
    finally:
        ev._typed = None


def _add_x(ev: EventColumns, sc: ScannedChunk, xi: np.ndarray) -> None:
    ts, dur = sc.ts[xi], sc.dur[xi]
    ok = np.abs(ts) <= MAX_ABS_US
    bad_dur = ~(np.abs(dur) <= MAX_ABS_US)
    if bad_dur.any():
        ev.warn["X events without a numeric dur (dur set to 0)"] += int((bad_dur & ok).sum())
        dur[bad_dur] = 0.0
    neg = dur < 0
    if neg.any():
        ev.warn["X events with a negative dur (set to 0)"] += int((neg & ok).sum())
        dur[neg] = 0.0
    if not ok.all():
        ev.warn["events without a usable ts skipped"] += int((~ok).sum())
        xi, ts, dur = xi[ok], ts[ok], dur[ok]
        if not len(xi):
            return
    first_row = ev.n_slices
    ev._s.append((ts, dur, _tracks(ev, sc, sc.track[xi]), _strs(ev, sc, sc.name[xi]), _strs(ev, sc, sc.cat[xi]),
                  ev._args(xi)))
    ev.n_slices += len(xi)
    sp = sc.sparse
    if not len(sp) or not (sp[:, 1] == _F_BIND_ID).any():
        return
    raw = sc.raw
    vals: dict[tuple[int, int], Any] = {(i, f): _decode(raw[s:e]) for i, f, s, e in sp.tolist()}
    for i in sp[sp[:, 1] == _F_BIND_ID, 0].tolist():  # flow v2, in event order
        k = int(np.searchsorted(xi, i))
        if k < len(xi) and xi[k] == i:
            ev.v2.append((first_row + k, vals[(i, _F_BIND_ID)], bool(vals.get((i, _F_FLOW_IN))),
                          bool(vals.get((i, _F_FLOW_OUT)))))


def _add_flows(ev: EventColumns, sc: ScannedChunk, fi: np.ndarray) -> None:
    fi, ts = _keep_ts(ev, sc, fi)
    if not len(fi):
        return
    local = sc.fkey[fi]
    order = _first_order(local)
    strings = sc.strings
    keys = [(strings[c], strings[n], sc.obj(kind, v)) for c, n, kind, v in sc.fkeys[order].tolist()]
    cache = ev._flow_keys
    for k in keys:
        if k not in cache:
            cache[k] = len(cache)
    lut = np.zeros(len(sc.fkeys), np.int64)
    lut[order] = [cache[k] for k in keys]
    ev._f.append(((sc.ph[fi] - 1).astype(np.int8), lut[local], _tracks(ev, sc, sc.track[fi]), ts, sc.bp[fi],
                  sc.hint[fi].copy()))
