"""Flow v1 endpoints bound to slices and paired in windows, for the streamed load's end: what the in-memory
path does over all slices and endpoints at once (`_flows.bind_v1`, `unique_ids`), exact, with about `spill.WINDOW`
rows in memory at a time; the endpoints, the slices' order and the arrows go through files (`_spill`).

    ends = EndColumns(ph, code, track, ts_us, bp_e, hint, base)      # mapped columns, one row per endpoint
    rows = bound_rows(tmp, ends, s_ts, s_dur, s_track)               # slice row per endpoint (-1: none)
    unbound = emit_arrows(tmp, ends, rows, out)                      # arrows in bind_v1's order, to `out`
    assign_ids(tmp, want, taken, top, put)                           # unique_ids, window by window

Slices are dealt into windows of (track, start) cut by splitters from a sample, each window's order made
alone (`start_order`, through `SliceIndex`) with the last slices of the order before it in front (the walk
back over open slices reaches no further); an endpoint goes to the window of its (track, t). An `f` bound to
the next start finds it in a later window when none follows in its own. Pairs are made in windows of the key
code (all endpoints of a key share one), simple arrows put back in endpoint order, chains in key order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neuron_prof.loaders import spill
from neuron_prof.loaders.json._flows import _WALK_BACK, SliceIndex, end_rows, hint_ok, pair_ends
from neuron_prof.loaders.json._values import us_to_ns
from neuron_prof.loaders.spill import Spill, sample_step, splitters, window_of, window_of_pairs
from neuron_prof.model import drop_mapped
from neuron_prof.model.reserve import mapped_zeros

_CARRY = _WALK_BACK + 2
"""Slices of the order carried into the next window: every one `SliceIndex.enclosing` may step back to."""
_KEY = np.dtype([("a", np.int64), ("b", np.int64)])
_SLICE = np.dtype([("ts", np.int64), ("dur", np.int64), ("row", np.int64), ("track", np.int32)])
_END = np.dtype([("t", np.int64), ("pos", np.int64), ("track", np.int32), ("enc", np.bool_)])
_PAIR = np.dtype([("code", np.int64), ("t", np.int64), ("pos", np.int64), ("row", np.int64), ("ph", np.int8)])
_ARROW = np.dtype([("pos", np.int64), ("src", np.int64), ("dst", np.int64), ("code", np.int64)])


@dataclass
class EndColumns:
    """Flow v1 endpoints as (mapped) columns: phase (0 s, 1 t, 2 f), key code, track, µs, bp == "e", row hint."""

    ph: np.ndarray
    code: np.ndarray
    track: np.ndarray
    ts_us: np.ndarray
    bp_e: np.ndarray
    hint: np.ndarray
    base: int

    def t(self, a: int, b: int) -> np.ndarray:
        return us_to_ns(np.asarray(self.ts_us[a:b]), self.base)

    def drop(self) -> None:
        for c in (self.ph, self.code, self.track, self.ts_us, self.bp_e, self.hint):
            drop_mapped(c)


def bound_rows(tmp: Path, ends: EndColumns, s_ts: np.ndarray, s_dur: np.ndarray, s_track: np.ndarray) -> np.ndarray:
    """The slice row each endpoint binds to (-1: none), as `_flows.bind_v1` binds it, in a file under `tmp`."""
    WINDOW = spill.WINDOW
    n, m = len(s_ts), len(ends.ph)
    mm = mapped_zeros(tmp / "f_row", m, np.int64)  # its blocks reserved: a full disk is an OSError, not a SIGBUS
    out = mm[:m]  # every endpoint is in one window: each row is written there
    step = sample_step(n)
    sample = np.empty(len(range(0, n, step)), _KEY)
    sample["a"], sample["b"] = s_track[::step], s_ts[::step]
    cut = splitters(sample, n, WINDOW)
    del sample
    with Spill(tmp, _SLICE, len(cut) + 1) as sl, Spill(tmp, _END, len(cut) + 1) as en:
        for a in range(0, n, WINDOW):
            r = np.empty(min(WINDOW, n - a), _SLICE)
            r["ts"], r["dur"], r["track"] = s_ts[a:a + WINDOW], s_dur[a:a + WINDOW], s_track[a:a + WINDOW]
            r["row"] = np.arange(a, a + len(r))
            sl.add(window_of_pairs(r["track"], r["ts"], cut), r)
            _drop(s_ts, s_dur, s_track)
        for a in range(0, m, WINDOW):
            e = np.empty(min(WINDOW, m - a), _END)
            e["t"], e["track"], e["pos"] = ends.t(a, a + WINDOW), ends.track[a:a + WINDOW], np.arange(a, a + len(e))
            e["enc"] = (ends.ph[a:a + WINDOW] != 2) | ends.bp_e[a:a + WINDOW]
            en.add(window_of_pairs(e["track"], e["t"], cut), e)
            ends.drop()
        carry = np.zeros(0, _SLICE)
        later = np.zeros(0, _END)  # an `f` whose next start lies past its window
        for w in range(len(cut) + 1):
            s = sl.take(w)
            both = np.concatenate([carry, s])
            index = SliceIndex(both["ts"], both["dur"], both["track"])
            if len(s) and len(later):
                first = both[index.order[len(carry)]]  # the carried slices come first: their keys are smaller
                hit = later["track"] == first["track"]
                out[later["pos"][hit]] = first["row"]
                later = later[:0]
            e = en.take(w)
            if len(e):
                local = end_rows(np.where(e["enc"], 0, 2), e["track"], e["t"], np.zeros(len(e), bool), index)
                hit = local >= 0
                got = np.full(len(e), -1, np.int64)
                got[hit] = both["row"][local[hit]]
                out[e["pos"]] = got
                later = np.concatenate([later, e[~e["enc"] & (local < 0)]])
            carry = both[index.order[-_CARRY:]] if len(both) else carry
            del s, both, index, e
            drop_mapped(mm)  # a shared map: its dirty pages stay in the page cache, no flush needed
    for a in range(0, m, WINDOW):
        h = np.asarray(ends.hint[a:a + WINDOW])
        h = np.where((h >= 0) & (h < 2**62), h, -1)  # rows of this file, as ours are
        if (h >= 0).any():
            ok = hint_ok(h, np.asarray(ends.track[a:a + WINDOW]), ends.t(a, a + WINDOW), s_ts, s_dur, s_track)
            out[a:a + WINDOW][ok] = h[ok]
            _drop(s_ts, s_dur, s_track)
    ends.drop()
    drop_mapped(mm)
    return out


def emit_arrows(tmp: Path, ends: EndColumns, rows: np.ndarray,
                put: Callable[[np.ndarray, np.ndarray, np.ndarray], None]) -> int:
    """`put(src, dst, code)` the arrows `bind_v1` makes, in its order, a window at a time; returns the number of
    endpoints left unbound."""
    WINDOW = spill.WINDOW
    m = len(ends.ph)
    step = sample_step(m)
    cut = splitters(np.asarray(ends.code[::step]), m, WINDOW)
    unbound = 0
    with Spill(tmp, _PAIR, len(cut) + 1) as pairs, Spill(tmp, _ARROW, -(-m // WINDOW)) as simple, \
            Spill(tmp, _ARROW, len(cut) + 1) as chains:
        for a in range(0, m, WINDOW):
            p = np.empty(min(WINDOW, m - a), _PAIR)
            p["code"], p["t"], p["pos"] = ends.code[a:a + WINDOW], ends.t(a, a + WINDOW), np.arange(a, a + len(p))
            p["row"], p["ph"] = rows[a:a + WINDOW], ends.ph[a:a + WINDOW]
            pairs.add(window_of(p["code"], cut), p)
            ends.drop()
            drop_mapped(rows.base)
        for w in range(len(cut) + 1):
            p = pairs.take(w)
            if not len(p):
                continue
            uniq, key = np.unique(p["code"], return_inverse=True)
            f_idx, first, rest = pair_ends(p["ph"], key.reshape(-1), p["t"], p["row"])
            arrows = np.empty(len(f_idx), _ARROW)
            arrows["pos"], arrows["src"], arrows["dst"] = p["pos"][f_idx], first.src, first.dst
            arrows["code"] = uniq[first.key]
            simple.add(arrows["pos"] // WINDOW, arrows)
            arrows = np.empty(len(rest.src), _ARROW)
            arrows["pos"], arrows["src"], arrows["dst"], arrows["code"] = 0, rest.src, rest.dst, uniq[rest.key]
            chains.add(np.full(len(arrows), w), arrows)
        for w in range(-(-m // WINDOW)):
            s = simple.take(w)
            unbound += _put(s[np.argsort(s["pos"])], put)
        for w in range(len(cut) + 1):
            unbound += _put(chains.take(w), put)
    return unbound


def _put(arrows: np.ndarray, put: Callable[[np.ndarray, np.ndarray, np.ndarray], None]) -> int:
    """The bound arrows of `arrows` to `put`; returns how many were not bound."""
    ok = (arrows["src"] >= 0) & (arrows["dst"] >= 0)
    if ok.any():
        a = arrows[ok]
        put(a["src"], a["dst"], a["code"])
    return int(len(ok) - np.count_nonzero(ok))


def assign_ids(tmp: Path, want: np.ndarray, taken: np.ndarray, put: Callable[[np.ndarray], None]) -> None:
    """`put` the flow ids `_flows.unique_ids(want, taken)` gives, in order, a window at a time (`want` mapped)."""
    WINDOW = spill.WINDOW
    n = len(want)
    top = max(int(taken.max(initial=0)), 0)
    step = sample_step(n)
    cut = splitters(np.asarray(want[::step]), n, WINDOW)
    rec = np.dtype([("want", np.int64), ("pos", np.int64)])
    with Spill(tmp, rec, len(cut) + 1) as by_id, Spill(tmp, np.int64, -(-n // WINDOW)) as bad:
        for a in range(0, n, WINDOW):
            v = np.asarray(want[a:a + WINDOW])
            top = max(top, int(v.max(initial=0)))
            r = np.empty(len(v), rec)
            r["want"], r["pos"] = v, np.arange(a, a + len(v))
            r = r[v >= 0]
            by_id.add(window_of(r["want"], cut), r)
            drop_mapped(want)
        for w in range(len(cut) + 1):
            r = by_id.take(w)
            dup = np.ones(len(r), bool)
            dup[np.unique(r["want"], return_index=True)[1]] = False  # the first of each id keeps it
            if len(taken):
                dup |= np.isin(r["want"], taken)
            pos = r["pos"][dup]
            bad.add(pos // WINDOW, pos)
        fresh = top + 1
        for w in range(-(-n // WINDOW)):
            a = w * WINDOW
            v = np.array(want[a:a + WINDOW], np.int64)
            no = v < 0
            no[bad.take(w) - a] = True
            k = int(np.count_nonzero(no))
            v[no] = fresh + np.arange(k, dtype=np.int64)
            fresh += k
            put(v)
            drop_mapped(want)


def _drop(*cols: np.ndarray) -> None:
    for c in cols:
        drop_mapped(c)
