"""The calls of one side of the op table (host or device), a window of nesting rows at a time.

`ops` decides what a call is (its module docstring: keys, re-dispatches, self time, wrappers); this module
applies those rules over a big trace's rows without a temporary over every row: each pass reads a window of
`ROW_WINDOW` rows (`row_windows`), and what it carries across windows is small (the bookkeeping and Python
slices calls look through, the few re-dispatched copies, per-key sums) or the result itself (one packed integer
per call, sorted in place, then written straight into the table's final order by `SideCalls.fill`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from neuron_prof.analysis.sites.nesting import Nesting
from neuron_prof.model import Trace, windows
from neuron_prof.model.order import searchsorted
from neuron_prof.model.windows import row_windows


@dataclass(frozen=True, eq=False)
class SideNames:
    """How one side names its rows: the key of each name id, wrappers by name id, and the rows counted under
    another name than their own."""

    lut: np.ndarray
    """Key index by name id less `lo`."""
    lo: int
    """The smallest name id (0 unless one is negative)."""
    key_names: np.ndarray
    """Key strings by key index, ascending (object array)."""
    wrapper: np.ndarray | None
    """bool by name id less `lo`: a wrapper; None: none on this side."""
    renamed: np.ndarray
    """Positions in the nesting's rows (ascending) counted under another name (a NEFF execution: its op's)."""
    renamed_to: np.ndarray
    """Their name ids."""

    def names_at(self, trace: Trace, rows: np.ndarray, p: np.ndarray) -> np.ndarray:
        """The name ids rows ``rows[p]`` count under."""
        nm = trace.slices.name[rows[p]]
        if len(self.renamed) and len(p):
            at = np.minimum(searchsorted(self.renamed, p), len(self.renamed) - 1)
            hit = self.renamed[at] == p
            if hit.any():
                nm = np.where(hit, self.renamed_to[at], nm).astype(nm.dtype, copy=False)
        return nm  # type: ignore[no-any-return]

    def keys_at(self, trace: Trace, rows: np.ndarray, p: np.ndarray) -> np.ndarray:
        """Key index of rows ``rows[p]``."""
        return self.lut[self.names_at(trace, rows, p) - self.lo]  # type: ignore[no-any-return]


def side_names(trace: Trace, rows: np.ndarray, renamed: np.ndarray, renamed_to: np.ndarray,
               key_of: Callable[[str], str], wrappers: Callable[[np.ndarray], np.ndarray] | None) -> SideNames:
    """`SideNames` of `rows`: `key_of` and `wrappers` (a bool per name id given) applied once per distinct name
    id, found a window of rows at a time."""
    none = SideNames(np.zeros(1, np.int32), 0, np.zeros(0, object), None, renamed, renamed_to)
    ids = np.zeros(0, np.int64)
    for a, z in row_windows(trace, len(rows)):
        nm = none.names_at(trace, rows, np.arange(a, z))
        lo = int(nm.min())
        ids = np.union1d(ids, np.flatnonzero(np.bincount(nm - lo)) + lo)
    keys = np.array([key_of(trace.s(int(i))) for i in ids.tolist()], dtype=object)
    key_names, kinv = np.unique(keys, return_inverse=True)
    lo = min(int(ids[0]), 0) if len(ids) else 0
    lut = np.zeros(int(ids[-1]) - lo + 1 if len(ids) else 1, dtype=np.int32)  # key indices: under 2^31
    lut[ids - lo] = kinv.reshape(-1)
    wrapper = None
    if wrappers is not None:
        wrapper = np.zeros(len(lut), dtype=bool)
        ok = ids[ids >= 0]
        wrapper[ok - lo] = wrappers(ok)
    return SideNames(lut, lo, key_names, wrapper, renamed, renamed_to)


@dataclass(frozen=True, eq=False)
class SideCalls:
    """Per key with calls on one side (ascending key): the table's columns; `fill` writes the calls."""

    name: np.ndarray
    is_op: np.ndarray
    is_wrapper: np.ndarray
    calls: np.ndarray
    total_ns: np.ndarray
    self_ns: np.ndarray
    longest: np.ndarray
    rows: np.ndarray
    """The nesting's rows (the calls' positions index them)."""
    order: np.ndarray
    """The calls by key, longest first, then in row order: positions, packed above their key and duration when
    `pos_bits`, else positions with their keys in `keys`."""
    pos_bits: int
    key_shift: int
    keys: np.ndarray | None
    self_at: Callable[[np.ndarray], np.ndarray]
    """Self time a call at these positions counts (`_SelfTime`)."""
    present: np.ndarray
    """Key index of each entry."""

    def __len__(self) -> int:
        return len(self.name)

    def fill(self, entry_start: np.ndarray, call_row: np.ndarray, call_self: np.ndarray) -> None:
        """Write each call's row and self time where the table holds it: entry i's calls, longest first, from
        ``entry_start[i]`` on; a window of calls at a time."""
        first = np.r_[0, np.cumsum(self.calls)[:-1]].astype(np.int64)  # each entry's first call in `order`
        entry = np.zeros(int(self.present[-1]) + 1 if len(self.present) else 1, dtype=np.int64)
        entry[self.present] = np.arange(len(self.present))
        size = windows.ROW_WINDOW
        for a in range(0, len(self.order), size):
            z = min(a + size, len(self.order))
            v = self.order[a:z]
            if self.pos_bits:
                pos, k = v & ((1 << self.pos_bits) - 1), v >> self.key_shift
            else:
                assert self.keys is not None
                pos, k = v, self.keys[a:z]
            e = entry[k]
            dest = entry_start[e] + (np.arange(a, z) - first[e])
            call_row[dest] = self.rows[pos]
            call_self[dest] = self.self_at(pos)


class _SelfTime:
    """A call's self time: its own (0 for a wrapper, `ops`' rule) plus that of its re-dispatched copies."""

    def __init__(self, trace: Trace, nest: Nesting, names: SideNames, to: np.ndarray, ns: np.ndarray) -> None:
        self.trace, self.nest, self.names = trace, nest, names
        self.to, self.ns = to, ns
        """Positions (ascending) that re-dispatched copies give self time to, and how much."""

    def own(self, p: np.ndarray) -> np.ndarray:
        ns = self.nest.self_ns[p].astype(np.int64)
        if self.names.wrapper is not None:
            ns[self.names.wrapper[self.trace.slices.name[self.nest.rows[p]] - self.names.lo]] = 0
        return ns

    def __call__(self, p: np.ndarray) -> np.ndarray:
        ns = self.own(p)
        if len(self.to) and len(p):
            at = np.minimum(searchsorted(self.to, p), len(self.to) - 1)
            hit = self.to[at] == p
            ns[hit] += self.ns[at[hit]]
        return ns


def side_calls(trace: Trace, nest: Nesting, names: SideNames, op_cats: np.ndarray | None,
               look_through: np.ndarray, no_call: np.ndarray) -> SideCalls | None:
    """The calls of `nest`'s rows grouped by key (`ops`' rules). `op_cats`: categories of the rows that make a key
    an op (None: every row); `look_through`: categories calls look through for their enclosing op (Python
    frames), besides the nesting's bookkeeping spans; `no_call`: categories of rows that are no calls (the
    profiler's span of the capture)."""
    sl = trace.slices
    rows = nest.rows
    n = len(rows)
    if not n:
        return None

    def skipped(a: int, z: int) -> np.ndarray:
        return nest.transparent[a:z] | np.isin(sl.cat[rows[a:z]], look_through)

    # the rows calls look through, each with its nearest ancestor they do not (pointer jumping over them alone)
    skip = np.concatenate([np.flatnonzero(skipped(a, z)) + a for a, z in row_windows(trace, n)])
    up = nest.parent_pos[skip.astype(np.int64)].astype(np.int64)
    while len(skip):
        at = np.minimum(searchsorted(skip, up), len(skip) - 1)
        hop = (up >= 0) & (skip[at] == up)
        if not hop.any():
            break
        up[hop] = up[at[hop]]
    # re-dispatches: the nearest enclosing op has the same key and holds the row whole
    found: list[tuple[np.ndarray, np.ndarray]] = []
    for a, z in row_windows(trace, n):
        par = nest.parent_pos[a:z].astype(np.int64)
        p = np.flatnonzero(~skipped(a, z) & (par >= 0))
        anc = par[p]
        p += a
        if len(skip):
            at = np.minimum(searchsorted(skip, anc), len(skip) - 1)
            anc = np.where(skip[at] == anc, up[at], anc)
        ok = anc >= 0
        p, anc = p[ok], anc[ok]
        ok = names.keys_at(trace, rows, p) == names.keys_at(trace, rows, anc)  # few rows: ends read for these
        p, anc = p[ok], anc[ok]
        ok = sl.end_at(rows[p]) <= sl.end_at(rows[anc])
        found.append((p[ok], anc[ok]))
    del skip, up
    copies = np.concatenate([f[0] for f in found])
    root = np.concatenate([f[1] for f in found])
    del found
    while len(copies):  # a copy of a copy: up to the outer call
        at = np.minimum(searchsorted(copies, root), len(copies) - 1)
        hop = copies[at] == root
        if not hop.any():
            break
        root[hop] = root[at[hop]]

    def member(p: np.ndarray) -> np.ndarray:
        return ~nest.transparent[p] & ~np.isin(sl.cat[rows[p]], no_call)

    gives = member(copies)
    to, inv = np.unique(root[gives], return_inverse=True)
    extra = np.zeros(len(to), np.int64)
    self_time = _SelfTime(trace, nest, names, to, extra)
    np.add.at(extra, inv.reshape(-1), self_time.own(copies[gives]))
    del root, gives, inv

    def calls_in(a: int, z: int) -> np.ndarray:
        call = member(np.arange(a, z))
        call[copies[searchsorted(copies, a):searchsorted(copies, z)] - a] = False
        return np.flatnonzero(call) + a

    nk = len(names.key_names)
    counts, total, own = np.zeros(nk, np.int64), np.zeros(nk, np.int64), np.zeros(nk, np.int64)
    wrapped, op = np.zeros(nk, bool), np.zeros(nk, bool)
    dmin = dmax = 0
    for a, z in row_windows(trace, n):
        ci = calls_in(a, z)
        if not len(ci):
            continue
        k = names.keys_at(trace, rows, ci)
        r = rows[ci]
        dur = sl.dur_ns[r]
        dmin, dmax = min(dmin, int(dur.min())), max(dmax, int(dur.max()))
        counts += np.bincount(k, minlength=nk)
        total += np.bincount(k, weights=dur, minlength=nk).astype(np.int64)  # a window's sum: exact in float64
        own += np.bincount(k, weights=self_time(ci), minlength=nk).astype(np.int64)
        if names.wrapper is not None:
            wrapped |= np.bincount(k, weights=names.wrapper[sl.name[r] - names.lo], minlength=nk) > 0
        is_op = np.isin(sl.cat[r], op_cats) if op_cats is not None else np.ones(len(ci), bool)
        op |= np.bincount(k, weights=is_op, minlength=nk) > 0
    order, keys, pos_bits, key_shift = _sorted_calls(trace, nest, names, calls_in, int(counts.sum()), dmin, dmax)
    present = np.flatnonzero(counts)
    first = np.r_[0, np.cumsum(counts[present])[:-1]].astype(np.int64)
    head = order[first] & ((1 << pos_bits) - 1) if pos_bits else order[first]
    return SideCalls(
        name=names.key_names[present], is_op=op[present] & ~wrapped[present], is_wrapper=wrapped[present],
        calls=counts[present], total_ns=total[present], self_ns=own[present],
        longest=rows[head].astype(np.int64), rows=rows, order=order, pos_bits=pos_bits, key_shift=key_shift,
        keys=keys, self_at=self_time, present=present)


def _sorted_calls(trace: Trace, nest: Nesting, names: SideNames, calls_in: Callable[[int, int], np.ndarray],
                  m: int, dmin: int, dmax: int) -> tuple[np.ndarray, np.ndarray | None, int, int]:
    """(order, keys, pos_bits, key_shift) of `SideCalls`: the `m` calls by key, longest first, then in row
    order; one int64 per call packing (key, duration, position), sorted in place, when the three fit in 63 bits,
    else positions and keys by `np.lexsort`."""
    sl, rows = trace.slices, nest.rows
    n = len(rows)
    ib, db = max(n - 1, 1).bit_length(), dmax.bit_length()
    if dmin >= 0 and max(len(names.key_names) - 1, 1).bit_length() + db + ib <= 63:
        packed = np.empty(m, np.int64)
        at = 0
        for a, z in row_windows(trace, n):
            ci = calls_in(a, z)
            v = names.keys_at(trace, rows, ci).astype(np.int64)
            v <<= db
            v += (1 << db) - 1 - sl.dur_ns[rows[ci]]
            v <<= ib
            v |= ci
            packed[at:at + len(v)] = v
            at += len(v)
        packed.sort()
        return packed, None, ib, db + ib
    ci = np.concatenate([calls_in(a, z) for a, z in row_windows(trace, n)] or [np.zeros(0, np.int64)])
    k = names.keys_at(trace, rows, ci)
    o = np.lexsort((ci, -sl.dur_ns[rows[ci]], k))
    return ci[o], k[o], 0, 0
