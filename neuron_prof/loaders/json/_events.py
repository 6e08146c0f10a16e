"""Chrome/Kineto event dicts -> columns. One pass per chunk with list comprehensions and numpy, no
per-event Python objects kept: each chunk's dicts die as soon as its columns exist.

`EventColumns.add(events)` takes a chunk (any JSON values); `finish(base_ns)` converts times and returns
the slice/instant/counter columns and the raw flow endpoints (bound to slices by `_json_flows`).
Times stay float µs until `finish`, because `baseTimeNanoseconds` may come after `traceEvents`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np

from neuron_prof.loaders.json._scan import ScannedChunk, add_scanned
from neuron_prof.loaders.json._typed import F_GET, I_GET, UNSET, X_GET, TypedChunk
from neuron_prof.loaders.json._values import (
    MAX_ABS_US,
    all_objects,
    as_str,
    dump_all,
    dump_each,
    floats,
    join_later,
    norm_id,
    us_to_ns,
)
from neuron_prof.model import StringTable

_X_KEYS = ("ts", "dur", "pid", "tid", "name", "cat", "args")
_I_KEYS = ("ts", "pid", "tid", "name", "cat", "args")
_F_KEYS = ("ts", "pid", "tid", "id", "cat", "name", "ph")
_X_GET, _I_GET, _F_GET = itemgetter(*_X_KEYS), itemgetter(*_I_KEYS), itemgetter(*_F_KEYS)
_DEFAULTS = {"pid": 0, "tid": 0, "name": "", "cat": ""}

PH_FLOW = {"s": 0, "t": 1, "f": 2}
PH_INSTANT = ("i", "I", "R")
PH_ASYNC = ("b", "e", "n")
PH_IGNORED = ("P", "O", "N", "D", "T", "p", "(", ")", "S", "F")
"""Phases we read past without a warning (samples, object snapshots, legacy async steps)."""


@dataclass
class Columns:
    """Finished columns (times in Unix ns), ready to become tables."""

    s_ts: np.ndarray
    s_dur: np.ndarray
    s_track: np.ndarray
    s_name: np.ndarray
    s_cat: np.ndarray
    s_args: np.ndarray
    i_ts: np.ndarray
    i_track: np.ndarray
    i_name: np.ndarray
    i_cat: np.ndarray
    i_args: np.ndarray
    c_ts: np.ndarray
    c_track: np.ndarray
    c_value: np.ndarray
    args_blob: bytes
    args_lengths: np.ndarray


class EventColumns:
    """Accumulates events chunk by chunk (see the module docstring).

    Args:
        strings: the trace's string table (names and cats are interned into it).
        thread_track: (pid, tid) -> track index, creating the track.
        counter_track: (pid, counter name) -> track index, creating the track.
        meta: called with each metadata (M) event.
        args_base: index the first args this object adds will have in the trace's ArgsStore.
    """

    def __init__(self, strings: StringTable, thread_track: Callable[[Any, Any], int],
                 counter_track: Callable[[Any, str], int], meta: Callable[[dict[str, Any]], None],
                 args_base: int = 0) -> None:
        self.strings = strings
        self._thread_track = thread_track
        self._counter_track = counter_track
        self._meta = meta
        self.args_base = args_base
        self.warn: Counter[str] = Counter()
        self.entries = 0
        self.n_meta = 0
        self._str_ids: dict[Any, int] = {}
        self._track_ids: dict[Any, int] = {}
        self._n_args = 0
        # chunk lists of columns
        self._s: list[tuple[np.ndarray, ...]] = []
        self._i: list[tuple[np.ndarray, ...]] = []
        self._c_ts: list[float] = []
        self._c_track: list[int] = []
        self._c_val: list[float] = []
        self._blobs: list[bytes] = []
        self._lens: list[np.ndarray] = []
        self.n_slices = 0
        # events paired at the end
        self._f: list[tuple[np.ndarray, ...]] = []  # flow ends: (ph, key id, track, ts_us, bp_e, hint row)
        self._flow_keys: dict[Any, int] = {}  # (cat, name, id) -> key id
        self.v2: list[tuple[int, Any, bool, bool]] = []  # (slice row, bind_id, flow_in, flow_out)
        self.begin_end: list[tuple[Any, ...]] = []  # (ts_us, order, ph, track, name, cat, args)
        self.asyncs: list[tuple[Any, ...]] = []  # (ts_us, order, ph, pid, cat, id, name, args)
        self._typed: TypedChunk | None = None  # the typed chunk being added (args columns index it)

    # ---- interning -----------------------------------------------------------------------------------
    def sids(self, vals: tuple[Any, ...] | list[Any]) -> np.ndarray:
        cache = self._str_ids
        try:
            return np.fromiter(map(cache.__getitem__, vals), dtype=np.int32, count=len(vals))
        except KeyError:
            pass
        except TypeError:  # an unhashable name (a list or object): use its text
            return self.sids([v if type(v) is str else as_str(v) for v in vals])
        try:
            new = [v for v in dict.fromkeys(vals) if v not in cache]
        except TypeError:
            return self.sids([v if type(v) is str else as_str(v) for v in vals])
        intern = self.strings.intern
        for v in new:
            cache[v] = intern(as_str(v))
        return np.fromiter(map(cache.__getitem__, vals), dtype=np.int32, count=len(vals))

    def sid(self, v: Any) -> int:
        return self.strings.intern(as_str(v))

    def _tracks(self, pids: tuple[Any, ...] | list[Any], tids: tuple[Any, ...] | list[Any]) -> np.ndarray:
        cache = self._track_ids
        keys = list(zip(pids, tids))
        try:
            return np.fromiter(map(cache.__getitem__, keys), dtype=np.int32, count=len(keys))
        except KeyError:
            pass
        except TypeError:  # unhashable pid/tid (a list): its text
            return self._tracks([p if type(p) in (int, str) else norm_id(p) for p in pids],
                                [t if type(t) in (int, str) else norm_id(t) for t in tids])
        try:
            new = [k for k in dict.fromkeys(keys) if k not in cache]
        except TypeError:
            return self._tracks([p if type(p) in (int, str) else norm_id(p) for p in pids],
                                [t if type(t) in (int, str) else norm_id(t) for t in tids])
        for k in new:
            cache[k] = self._thread_track(norm_id(k[0]), norm_id(k[1]))
        return np.fromiter(map(cache.__getitem__, keys), dtype=np.int32, count=len(keys))

    def track_of(self, pid: Any, tid: Any) -> int:
        return int(self._tracks([pid], [tid])[0])

    # ---- args ----------------------------------------------------------------------------------------
    def _args(self, args: list[Any] | tuple[Any, ...] | np.ndarray) -> np.ndarray:
        """Serialise one chunk's args (or, on the typed path, take the args of these positions of the chunk);
        returns their ArgsStore indices (-1 for none)."""
        if isinstance(args, np.ndarray):
            assert self._typed is not None
            has, blob, lens = self._typed.take_args(args)
            dicts: list[Any] = []
        else:
            has = np.fromiter(map(bool, args), dtype=bool, count=len(args))
            dicts = [a for a in args if a]
            blob, lens = dump_all(dicts)
        idx = np.full(len(args), -1, dtype=np.int64)
        k = len(lens)
        idx[has] = np.arange(self.args_base + self._n_args, self.args_base + self._n_args + k, dtype=np.int64)
        self._n_args += k
        self._blobs.append(blob)
        self._lens.append(lens)
        # the typed paths (msgspec, the compiled scanner) take objects only: dicts are checked here
        if dicts and not all_objects(blob, lens):
            self.warn["args that are not an object kept under the key 'args'"] += 1
            self._blobs[-1], self._lens[-1] = dump_each([a if isinstance(a, dict) else {"args": a} for a in dicts])
        return idx

    # ---- chunks ----------------------------------------------------------------------------------------
    def add(self, events: list[Any]) -> None:
        """Take one chunk of traceEvents entries (dicts, or a TypedChunk from the fast path)."""
        self.entries += len(events)
        if type(events) is TypedChunk:
            self._add_typed(events)
            return
        if type(events) is ScannedChunk:
            add_scanned(self, events)
            return
        try:
            xs = [e for e in events if e.get("ph") == "X"]
        except AttributeError:  # entries that are not objects
            good = [e for e in events if isinstance(e, dict)]
            self.warn["entries of traceEvents that are not objects skipped"] += len(events) - len(good)
            events = good
            xs = [e for e in events if e.get("ph") == "X"]
        if xs:
            self._add_x(xs)
        if len(xs) == len(events):
            return
        rest = [e for e in events if e.get("ph") != "X"]
        phs = [e.get("ph") for e in rest]
        try:
            kinds = set(phs)
        except TypeError:  # an unhashable "ph"
            phs = [p if isinstance(p, str) else as_str(p) for p in phs]
            kinds = set(phs)
        flows = kinds & PH_FLOW.keys()
        if flows:
            self._add_flows(rest if kinds <= flows else [e for e, p in zip(rest, phs) if p in flows])
        for ph in [p for p in dict.fromkeys(phs) if p not in flows]:  # first seen first: no set order (hash seed)
            evs = rest if len(kinds) == 1 else [e for e, p in zip(rest, phs) if p == ph]
            if ph in PH_INSTANT:
                self._add_instants(evs)
            elif ph == "M":
                for e in evs:
                    self._meta(e)
            elif ph == "C":
                self._add_counters(evs)
            elif ph in ("B", "E"):
                self._add_be(evs, ph)
            elif ph in PH_ASYNC:
                self._add_async(evs, ph)
            elif ph not in PH_IGNORED:
                self.warn[f"events with an unknown phase skipped (ph={as_str(ph)[:20]})"] += len(evs)

    def _add_typed(self, evs: TypedChunk) -> None:
        """A chunk of X, flow and instant events decoded by msgspec (see _json_typed)."""
        self._typed = evs
        try:
            self._add_typed_parts(evs)
        finally:
            self._typed = None

    def _add_typed_parts(self, evs: TypedChunk) -> None:
        phs = evs.phs
        xi = [i for i, p in enumerate(phs) if p == "X"]
        if xi:
            xs = evs if len(xi) == len(evs) else [evs[i] for i in xi]
            self._add_x(xs, [*zip(*map(X_GET, xs))] + [np.array(xi, dtype=np.int64)])
        if len(xi) == len(evs):
            return
        fl = [e for e, p in zip(evs, phs) if p in PH_FLOW]
        if fl:
            self._add_flows(fl, typed=True)
        ii = [i for i, p in enumerate(phs) if p in PH_INSTANT]
        if ii:
            ins = [evs[i] for i in ii]
            self._add_instants(ins, [*zip(*map(I_GET, ins))] + [np.array(ii, dtype=np.int64)])

    @staticmethod
    def _cols(evs: list[dict[str, Any]], get: itemgetter, keys: tuple[str, ...]) -> list[tuple[Any, ...]]:
        """Columns of `keys` (the fast path needs every key in every event; else defaults)."""
        try:
            return list(zip(*map(get, evs)))
        except KeyError:
            return [tuple(e.get(k, _DEFAULTS.get(k)) for e in evs) for k in keys]

    def _keep(self, ok: np.ndarray, cols: list[Any]) -> list[Any]:
        """Rows where `ok`, in every column (lists or arrays); counts the others as skipped."""
        self.warn["events without a usable ts skipped"] += int((~ok).sum())
        keep = np.flatnonzero(ok)
        return [c[keep] if isinstance(c, np.ndarray) else [c[i] for i in keep] for c in cols]

    def fix_durations(self, dur: np.ndarray, kept: np.ndarray) -> None:
        """X events' durations made usable in place: not a number (or out of range) and negative ones set to 0,
        each counted in a warning for the events `kept` (those with a usable ts). Both parse paths use it."""
        bad = ~(np.abs(dur) <= MAX_ABS_US)
        if bad.any():
            self.warn["X events without a numeric dur (dur set to 0)"] += int((bad & kept).sum())
            dur[bad] = 0.0
        neg = dur < 0
        if neg.any():
            self.warn["X events with a negative dur (set to 0)"] += int((neg & kept).sum())
            dur[neg] = 0.0

    def _add_x(self, xs: list[Any], cols: list[Any] | None = None) -> None:
        typed = cols is not None
        ts, dur, pid, tid, name, cat, args = cols if cols is not None else self._cols(xs, _X_GET, _X_KEYS)
        ts_a, dur_a = floats(ts), floats(dur)
        ok = np.abs(ts_a) <= MAX_ABS_US  # False for NaN
        self.fix_durations(dur_a, ok)
        if not ok.all():
            xs, ts_a, dur_a, pid, tid, name, cat, args = self._keep(ok, [xs, ts_a, dur_a, pid, tid, name, cat, args])
            if not xs:
                return
        first_row = self.n_slices
        self._s.append((ts_a, dur_a, self._tracks(pid, tid), self.sids(name), self.sids(cat), self._args(args)))
        self.n_slices += len(xs)
        if typed:
            for i in [i for i, e in enumerate(xs) if e.bind_id is not UNSET]:  # flow v2
                e = xs[i]
                self.v2.append((first_row + i, e.bind_id, bool(e.flow_in), bool(e.flow_out)))
            return
        for i in [i for i, e in enumerate(xs) if "bind_id" in e]:  # flow v2
            e = xs[i]
            self.v2.append((first_row + i, e.get("bind_id"), bool(e.get("flow_in")), bool(e.get("flow_out"))))

    def add_slices_us(self, rows: list[tuple[Any, ...]]) -> None:
        """Slices made by pairing (B/E, async): rows of (ts_us, dur_us, track, name, cat, args)."""
        if not rows:
            return
        ts, dur, track, name, cat, args = zip(*rows)
        self._s.append((np.array(ts, dtype=np.float64), np.array(dur, dtype=np.float64),
                        np.array(track, dtype=np.int32), self.sids(name), self.sids(cat), self._args(list(args))))
        self.n_slices += len(rows)

    def _add_instants(self, evs: list[Any], cols: list[Any] | None = None) -> None:
        ts, pid, tid, name, cat, args = cols if cols is not None else self._cols(evs, _I_GET, _I_KEYS)
        ts_a = floats(ts)
        ok = np.abs(ts_a) <= MAX_ABS_US
        if not ok.all():
            ts_a, pid, tid, name, cat, args = self._keep(ok, [ts_a, pid, tid, name, cat, args])
            if not len(ts_a):
                return
        self._i.append((ts_a, self._tracks(pid, tid), self.sids(name), self.sids(cat), self._args(args)))

    def add_instants_us(self, rows: list[tuple[Any, ...]]) -> None:
        """Instants made by pairing (async n): rows of (ts_us, track, name, cat, args)."""
        if not rows:
            return
        ts, track, name, cat, args = zip(*rows)
        self._i.append((np.array(ts, dtype=np.float64), np.array(track, dtype=np.int32), self.sids(name),
                        self.sids(cat), self._args(list(args))))

    def _add_flows(self, evs: list[Any], typed: bool = False) -> None:
        ids: tuple[Any, ...] | list[Any]
        if typed:
            ts, pid, tid, ids, cat, name, ph = zip(*map(F_GET, evs))
            bp = np.fromiter((e.bp == "e" for e in evs), dtype=bool, count=len(evs))
            hint = [e.np_slice for e in evs]
            if None in ids:
                ids = [i if i is not None else e.id2 for i, e in zip(ids, evs)]
        else:
            ts, pid, tid, ids, cat, name, ph = self._cols(evs, _F_GET, _F_KEYS)
            bp = np.fromiter((e.get("bp") == "e" for e in evs), dtype=bool, count=len(evs))
            hint = [e.get("np_slice", -1) for e in evs]
            if None in ids:  # id2 (Chrome's scoped ids) when there is no id
                ids = [i if i is not None else e.get("id2") for i, e in zip(ids, evs)]
        ts_a = floats(ts)
        ok = np.abs(ts_a) <= MAX_ABS_US
        if not ok.all():
            ts_a, bp, pid, tid, ids, cat, name, ph, hint = self._keep(ok, [ts_a, bp, pid, tid, ids, cat, name, ph, hint])
            if not len(ts_a):
                return
        keys = list(zip(cat, name, ids))
        cache = self._flow_keys
        try:
            new = [k for k in dict.fromkeys(keys) if k not in cache]
        except TypeError:  # unhashable ids or names: their text
            keys = [(as_str(c), as_str(n), i if type(i) in (int, str) else as_str(i)) for c, n, i in keys]
            new = [k for k in dict.fromkeys(keys) if k not in cache]
        for k in new:
            cache[k] = len(cache)
        kid = np.fromiter(map(cache.__getitem__, keys), dtype=np.int64, count=len(keys))
        try:
            hint_a = np.array(hint, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            hint_a = np.array([h if type(h) is int and 0 <= h < 2**62 else -1 for h in hint], dtype=np.int64)
        self._f.append((np.array([PH_FLOW[p] for p in ph], dtype=np.int8), kid, self._tracks(pid, tid), ts_a, bp,
                        hint_a))

    def _add_counters(self, evs: list[dict[str, Any]]) -> None:
        for e in evs:
            ts: Any = e.get("ts")
            args = e.get("args")
            if type(ts) not in (int, float) or not abs(ts) <= MAX_ABS_US:
                self.warn["events without a usable ts skipped"] += 1
                continue
            if not isinstance(args, dict):
                self.warn["counter (C) events without args skipped"] += 1
                continue
            name = as_str(e.get("name"))
            pid = norm_id(e.get("pid", 0))
            for key, v in args.items():
                if type(v) not in (int, float) or v != v or abs(v) == float("inf"):
                    self.warn["counter values that are not finite numbers skipped"] += 1
                    continue
                self._c_ts.append(float(ts))
                self._c_track.append(self._counter_track(pid, f"{name} {key}" if key else name))
                self._c_val.append(float(v))

    def _add_be(self, evs: list[dict[str, Any]], ph: str) -> None:
        for e in evs:
            ts: Any = e.get("ts")
            if type(ts) not in (int, float) or not abs(ts) <= MAX_ABS_US:
                self.warn["events without a usable ts skipped"] += 1
                continue
            self.begin_end.append((float(ts), len(self.begin_end), ph, self.track_of(e.get("pid", 0), e.get("tid", 0)),
                                   e.get("name"), e.get("cat", ""), e.get("args")))

    def _add_async(self, evs: list[dict[str, Any]], ph: str) -> None:
        for e in evs:
            ts: Any = e.get("ts")
            if type(ts) not in (int, float) or not abs(ts) <= MAX_ABS_US:
                self.warn["events without a usable ts skipped"] += 1
                continue
            fid = e.get("id", e.get("id2"))
            try:
                hash(fid)
            except TypeError:
                fid = as_str(fid)
            self.asyncs.append((float(ts), len(self.asyncs), ph, norm_id(e.get("pid", 0)), as_str(e.get("cat")),
                                fid, e.get("name"), e.get("args")))

    # ---- finish --------------------------------------------------------------------------------------
    @property
    def n_flow_ends(self) -> int:
        return sum(len(f[0]) for f in self._f)

    def flow_ends(self) -> tuple[list[np.ndarray], list[Any]]:
        """Flow endpoints as columns [ph, key id, track, ts_us, bp_e, hint row] and the keys by id."""
        f = self._f
        cols = [np.concatenate([c[i] for c in f]) for i in range(6)]
        keys = [None] * len(self._flow_keys)
        for k, i in self._flow_keys.items():
            keys[i] = k
        self._f, self._flow_keys = [], {}
        return cols, keys

    # ---- parts parsed elsewhere (another process) ----------------------------------------------------
    def state(self) -> dict[str, Any]:
        """Everything accumulated, as plain arrays and lists (picklable), for `merge` in another process.
        Track ids are those the `thread_track`/`counter_track` callbacks gave; string ids index `strings`."""
        def cat(parts: list[tuple[np.ndarray, ...]], n: int) -> list[np.ndarray]:
            return [np.concatenate([p[i] for p in parts]) for i in range(n)] if parts else []

        f, keys = self.flow_ends() if self._f else ([], [])
        return {"s": cat(self._s, 6), "i": cat(self._i, 5),
                "c": (np.array(self._c_ts, np.float64), np.array(self._c_track, np.int32),
                      np.array(self._c_val, np.float64)),
                "blobs": self._blobs, "lens": np.concatenate(self._lens) if self._lens else np.zeros(0, np.int64),
                "n_args": self._n_args, "n_slices": self.n_slices, "f": f, "keys": keys, "v2": self.v2,
                "be": self.begin_end, "as": self.asyncs, "warn": dict(self.warn), "entries": self.entries,
                "n_meta": self.n_meta, "strings": self.strings.as_list()}

    def merge(self, st: dict[str, Any], tmap: np.ndarray, cmap: np.ndarray) -> None:
        """Append a part's `state()`, its thread tracks mapped by `tmap` and counter tracks by `cmap`."""
        gmap = self.sids(st["strings"])
        row0, args0 = self.n_slices, self.args_base + self._n_args

        def args(a: np.ndarray) -> np.ndarray:
            return np.where(a >= 0, a + args0, -1)

        if st["s"]:
            ts, dur, tr, name, cat, a = st["s"]
            self._s.append((ts, dur, tmap[tr], gmap[name], gmap[cat], args(a)))
        if st["i"]:
            ts, tr, name, cat, a = st["i"]
            self._i.append((ts, tmap[tr], gmap[name], gmap[cat], args(a)))
        c_ts, c_tr, c_val = st["c"]
        self._c_ts.extend(c_ts.tolist())
        self._c_track.extend(cmap[c_tr].tolist())
        self._c_val.extend(c_val.tolist())
        self._blobs += st["blobs"]  # not joined: the streamed load writes them as they are
        self._lens.append(st["lens"])
        self._n_args += st["n_args"]
        self.n_slices += st["n_slices"]
        if st["f"]:
            cache = self._flow_keys
            for k in st["keys"]:
                if k not in cache:
                    cache[k] = len(cache)
            kmap = np.array([cache[k] for k in st["keys"]], dtype=np.int64)
            ph, kid, tr, ts, bp, hint = st["f"]
            self._f.append((ph, kmap[kid], tmap[tr], ts, bp, hint))
        self.v2.extend((row + row0, *rest) for row, *rest in st["v2"])
        n = len(self.begin_end)
        self.begin_end.extend((r[0], r[1] + n, r[2], int(tmap[r[3]]), *r[4:]) for r in st["be"])
        n = len(self.asyncs)
        self.asyncs.extend((r[0], r[1] + n, *r[2:]) for r in st["as"])
        self.warn.update(st["warn"])
        self.entries += st["entries"]
        self.n_meta += st["n_meta"]

    def args_later(self) -> Callable[[], bytes]:
        """The args store's bytes, joined by a thread while the caller goes on (`join_later`); `finish` then
        leaves them out (b"")."""
        blobs, self._blobs = self._blobs, []
        return join_later(blobs)

    def finish(self, base_ns: int) -> Columns:
        """Columns with Unix-ns times (`base_ns` + µs converted without float rounding of the base)."""
        def cat(parts: list[tuple[np.ndarray, ...]], i: int, dtype: Any) -> np.ndarray:
            return np.concatenate([p[i] for p in parts]).astype(dtype, copy=False) if parts else np.zeros(0, dtype)

        s, ins = self._s, self._i
        cols = Columns(
            s_ts=us_to_ns(cat(s, 0, np.float64), base_ns), s_dur=us_to_ns(cat(s, 1, np.float64), 0),
            s_track=cat(s, 2, np.int32), s_name=cat(s, 3, np.int32), s_cat=cat(s, 4, np.int32),
            s_args=cat(s, 5, np.int64),
            i_ts=us_to_ns(cat(ins, 0, np.float64), base_ns), i_track=cat(ins, 1, np.int32),
            i_name=cat(ins, 2, np.int32), i_cat=cat(ins, 3, np.int32), i_args=cat(ins, 4, np.int64),
            c_ts=us_to_ns(np.array(self._c_ts, dtype=np.float64), base_ns),
            c_track=np.array(self._c_track, dtype=np.int32), c_value=np.array(self._c_val, dtype=np.float64),
            args_blob=b"".join(self._blobs),
            args_lengths=np.concatenate(self._lens) if self._lens else np.zeros(0, np.int64))
        self._s, self._i, self._blobs, self._lens = [], [], [], []
        return cols
