"""Bind Chrome JSON flow events to slices, the way Perfetto's importer does, vectorised per track.

* v1 (`s`/`t`/`f` with an `id`): the flow is keyed by (cat, name, id). `s` and `t` bind to the deepest
  slice open at their ts on their thread; `f` binds to the next slice starting at or after its ts, or,
  with `"bp": "e"` (what Kineto writes), to the deepest slice open at its ts. A chain s -> t... -> f gives
  one arrow per hop; several `f` after one `s` each get an arrow from it (Kineto gives every device event of
  one launch the launch's correlation id: MTIA traces have up to 9). Files neuron-prof wrote carry the slice row (`np_slice`) on each end, used when it
  checks out, so slices that start together still get their own arrows after a round trip.
* v2 (`bind_id` with `flow_out`/`flow_in` on the slices): each flow_out slice links to the next
  flow_in slice with the same bind_id in time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from neuron_prof.model.order import row_dtype, searchsorted, start_order

_WALK_BACK = 256
"""Slices stepped over, per unmatched endpoint, looking for an enclosing one (bounded: never hangs)."""


class SliceIndex:
    """Slices sorted by (track, start, longest first) for 'which slice is open at t' queries. Holds the order
    (`row_dtype`: int32 under 2^31 rows) and where each track's run begins; the start and end times of a track
    are read from the columns when it is asked about (a big trace's columns are memory-mapped: a sorted copy
    of them would be 16 B a slice held through the binding)."""

    def __init__(self, ts: np.ndarray, dur: np.ndarray, track: np.ndarray) -> None:
        self.order = start_order(ts, dur, track).astype(row_dtype(len(ts)), copy=False)
        self._ts, self._dur = ts, dur
        tk = track[self.order]
        first = np.flatnonzero(np.r_[True, tk[1:] != tk[:-1]]) if len(tk) else np.zeros(0, np.int64)
        self.tracks = tk[first]
        self.lo = first
        self.hi = np.r_[first[1:], len(tk)].astype(np.int64)
        self.n_rows = len(ts)

    def _segment(self, tr: Any) -> tuple[int, int, np.ndarray, np.ndarray]:
        """[lo, hi) of track `tr` in the order, and its slices' starts and ends in that order."""
        k = int(searchsorted(self.tracks, tr))
        if k >= len(self.tracks) or self.tracks[k] != tr:
            return 0, 0, np.zeros(0, np.int64), np.zeros(0, np.int64)
        lo, hi = int(self.lo[k]), int(self.hi[k])
        rows = self.order[lo:hi]
        ts = self._ts[rows]
        return lo, hi, ts, ts + self._dur[rows]

    def enclosing(self, track: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Row of the deepest slice on `track` with start <= t <= end, or -1."""
        out = np.full(len(t), -1, dtype=np.int64)
        for tr, q in _groups(track):
            lo, hi, ts, end = self._segment(tr)
            if lo == hi:
                continue
            pos = searchsorted(ts, t[q], "right") - 1  # within the track's run
            ok = (pos >= 0) & (end[np.maximum(pos, 0)] >= t[q])
            out[q[ok]] = self.order[lo + pos[ok]]
            for k in np.flatnonzero(~ok & (pos >= 0)):
                tq, c = t[q[k]], int(pos[k]) - 1
                stop = max(0, c - _WALK_BACK)
                while c >= stop:
                    if end[c] >= tq:
                        out[q[k]] = self.order[lo + c]
                        break
                    c -= 1
        return out

    def next_start(self, track: np.ndarray, t: np.ndarray) -> np.ndarray:
        """Row of the first slice on `track` starting at or after t, or -1."""
        out = np.full(len(t), -1, dtype=np.int64)
        for tr, q in _groups(track):
            lo, hi, ts, _ = self._segment(tr)
            pos = searchsorted(ts, t[q], "left")
            ok = pos < hi - lo
            out[q[ok]] = self.order[lo + pos[ok]]
        return out

    def hint_ok(self, hint: np.ndarray, track: np.ndarray, t: np.ndarray, ts: np.ndarray, dur: np.ndarray,
                s_track: np.ndarray) -> np.ndarray:
        """Which row hints name a slice on the endpoint's track that contains its ts."""
        return hint_ok(hint, track, t, ts, dur, s_track)


def hint_ok(hint: np.ndarray, track: np.ndarray, t: np.ndarray, ts: np.ndarray, dur: np.ndarray,
            s_track: np.ndarray) -> np.ndarray:
    """Which row hints name a slice (of the columns `ts`, `dur`, `s_track`) on the endpoint's track that
    contains its ts."""
    ok = (hint >= 0) & (hint < len(ts))
    if ok.any():
        w = np.flatnonzero(ok)
        h = hint[w]
        ok[w] = (s_track[h] == track[w]) & (ts[h] <= t[w]) & (ts[h] + dur[h] >= t[w])
    return ok


def _groups(keys: np.ndarray) -> list[tuple[Any, np.ndarray]]:
    """(key, indices) per distinct key."""
    if not len(keys):
        return []
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    starts = np.flatnonzero(np.r_[True, sk[1:] != sk[:-1]])
    ends = np.r_[starts[1:], len(sk)]
    return [(sk[a], order[a:b]) for a, b in zip(starts, ends)]


@dataclass
class Flows:
    src: np.ndarray
    dst: np.ndarray
    key: np.ndarray
    """index into the keys list given to bind_v1 (-1 for v2 flows)"""


def bind_v1(ph: np.ndarray, key: np.ndarray, track: np.ndarray, t: np.ndarray, bp_e: np.ndarray,
            hint: np.ndarray, ts: np.ndarray, dur: np.ndarray, s_track: np.ndarray,
            index: SliceIndex) -> tuple[Flows, int]:
    """Arrows (slice rows) from v1 endpoints; returns them and the number of endpoints left unbound."""
    if len(ph) == 0:
        return Flows(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)), 0
    row = end_rows(ph, track, t, bp_e, index)
    good_hint = index.hint_ok(hint, track, t, ts, dur, s_track)
    row[good_hint] = hint[good_hint]
    _, simple, chains = pair_ends(ph, key, t, row)
    s, d, fk = (np.concatenate([a, b]) for a, b in zip(
        (simple.src, simple.dst, simple.key), (chains.src, chains.dst, chains.key), strict=True))
    ok = (s >= 0) & (d >= 0)
    return Flows(s[ok], d[ok], fk[ok]), int((~ok).sum())


def end_rows(ph: np.ndarray, track: np.ndarray, t: np.ndarray, bp_e: np.ndarray, index: SliceIndex) -> np.ndarray:
    """The slice row each endpoint binds to in `index` (-1: none), hints aside: `s`, `t` and an `f` with
    `"bp": "e"` the deepest slice open at t, another `f` the next slice starting at or after t."""
    row = np.full(len(ph), -1, dtype=np.int64)
    enc = (ph != 2) | bp_e
    if enc.any():
        w = np.flatnonzero(enc)
        row[w] = index.enclosing(track[w], t[w])
    if (~enc).any():
        w = np.flatnonzero(~enc)
        row[w] = index.next_start(track[w], t[w])
    return row


def pair_ends(ph: np.ndarray, key: np.ndarray, t: np.ndarray, row: np.ndarray) -> tuple[np.ndarray, Flows, Flows]:
    """Arrows from endpoints bound to rows (-1: unbound, kept: the caller counts them): (the positions of the
    `f` of simple keys, their arrows in that order, the arrows of chains and reused ids in (key, t, position)
    order). `key` dense ids (0..)."""
    # The usual case: a key with one s, no t and one or more f -> an arrow from the s to each f, whatever
    # the clocks say (Kineto gives every device event of one launch the launch's correlation id).
    nk = int(key.max()) + 1 if len(key) else 0
    cnt = [np.bincount(key[ph == p], minlength=nk) for p in (0, 1, 2)]
    simple = (cnt[0] == 1) & (cnt[2] >= 1) & (cnt[1] == 0)
    is_simple = simple[key]
    s_idx = np.flatnonzero(is_simple & (ph == 0))
    f_idx = np.flatnonzero(is_simple & (ph == 2))
    s_of_key = np.full(nk, -1, dtype=np.int64)
    s_of_key[key[s_idx]] = row[s_idx]
    first = Flows(s_of_key[key[f_idx]], row[f_idx], key[f_idx].astype(np.int64))
    # Chains and reused ids: walk each key's endpoints in time order.
    rest = np.flatnonzero(~is_simple)
    cs: list[int] = []
    cd: list[int] = []
    ck: list[int] = []
    if len(rest):
        order = rest[np.lexsort((rest, t[rest], key[rest]))]
        prev_key, prev_row = -1, -1
        for k, p, r in zip(key[order].tolist(), ph[order].tolist(), row[order].tolist(), strict=True):
            if k != prev_key:
                prev_key, prev_row = k, -2  # -2: no open chain
            if p == 0:
                prev_row = r
            elif prev_row != -2:
                cs.append(prev_row)
                cd.append(r)
                ck.append(k)
                if p == 1:  # a step: the next hop starts here; after an f, further f fan out from the source
                    prev_row = r
    chains = Flows(np.array(cs, dtype=np.int64), np.array(cd, dtype=np.int64), np.array(ck, dtype=np.int64))
    return f_idx, first, chains


def bind_v2(v2: list[tuple[int, Any, bool, bool]], ts: np.ndarray) -> Flows:
    """Arrows from slices carrying bind_id + flow_out to the next slice with the same bind_id + flow_in."""
    by_id: dict[Any, list[tuple[int, bool, bool]]] = {}
    for row, bid, fin, fout in v2:
        try:
            by_id.setdefault(bid, []).append((row, fin, fout))
        except TypeError:
            by_id.setdefault(str(bid), []).append((row, fin, fout))
    src: list[int] = []
    dst: list[int] = []
    for ends in by_id.values():
        ends.sort(key=lambda e: (int(ts[e[0]]), e[0]))
        prev = -1
        for row, fin, fout in ends:
            if fin and prev >= 0 and prev != row:
                src.append(prev)
                dst.append(row)
            if fout:
                prev = row
    n = len(src)
    return Flows(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.full(n, -1, dtype=np.int64))


def unique_ids(wanted: np.ndarray, taken: np.ndarray) -> np.ndarray:
    """Flow ids: `wanted` where it is a non-negative id not used before (in `taken` or earlier in `wanted`),
    else fresh ids above every id in use."""
    out = wanted.astype(np.int64, copy=True)
    bad = out < 0
    if len(out):
        _, first = np.unique(out, return_index=True)
        dup = np.ones(len(out), dtype=bool)
        dup[first] = False
        bad |= dup
        if len(taken):
            bad |= np.isin(out, taken)
    if bad.any():
        top = max(int(out.max(initial=0)), int(taken.max(initial=0)))
        out[bad] = top + 1 + np.arange(int(bad.sum()), dtype=np.int64)
    return out
