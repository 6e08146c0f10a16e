"""FLOPs, bytes and device time of every counted host op call of a trace, columnar (computed once per context).

A call is counted when its op has a counting rule (`counts.op_work`) and its shapes were recorded
(``record_shapes``). Ops nest (``aten::linear`` holds ``aten::addmm``; ``aten::conv2d`` holds
``aten::convolution`` ... ``aten::mkldnn_convolution``): each call has its own FLOPs for the per-op view, and
`outer` marks the calls no counted call encloses, the ones whose sums make a line's or the trace's FLOPs
without counting a multiply twice. A call's device time is that of the device work launched inside it (the
launch flows, `device_ns_by_host_row`).

    w = row_work(ctx)
    w.rows, w.flops, w.bytes, w.precision, w.outer, w.device_ns
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Any

import msgspec
import numpy as np

from neuron_prof.analysis.context import ABSENT, Context
from neuron_prof.analysis.efficiency.counts import kind_of, op_work
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.analysis.sites.lines import device_ns_by_host_row
from neuron_prof.model import KinetoCat
from neuron_prof.model.order import searchsorted, sorted_unique
from neuron_prof.model.windows import row_windows

SHAPE_KEYS = ("Input Dims", "Input type", "Concrete Inputs")
"""The Kineto args a count reads."""
_STEP = 1 << 16
"""Ops whose args are decoded at a time."""
COUNTS_HELD = 1 << 16
"""Distinct (op, shapes, types, concrete inputs) whose count `row_work` keeps (then it starts again): a trace's
steps repeat the same calls, so each distinct call is counted once, not each row."""


@dataclass(frozen=True, eq=False)
class RowWork:
    """Per counted host op call (ascending slice rows)."""

    rows: np.ndarray
    flops: np.ndarray
    bytes: np.ndarray
    precision: np.ndarray
    """Peak-table precision of the call: its index in `precisions` (int16: no Python object per call)."""
    outer: np.ndarray
    """bool: no counted call encloses this one (sum these, not all, for a line or the trace)."""
    device_ns: np.ndarray
    """Device time of the work launched inside the call."""
    precisions: tuple[str, ...] = ()
    """The precisions `precision` indexes ("fp32", "bf16", ...)."""

    def __len__(self) -> int:
        return len(self.rows)


def row_work(ctx: Context) -> RowWork:
    """The counted calls of `ctx.trace` (module docstring)."""
    return ctx.memo("efficiency_row_work", lambda: _build(ctx))  # type: ignore[no-any-return]


def _build(ctx: Context) -> RowWork:
    tr = ctx.trace
    sl = tr.slices
    n = host_nesting(ctx)
    rows = n.rows
    cpu = tr.name_ids(KinetoCat.CPU_OP)
    known = np.zeros(len(tr.strings), dtype=bool)  # by name id: whether the op has a counting rule
    asked = np.zeros(len(tr.strings), dtype=bool)
    codes: dict[str, int] = {}
    counts = _Counts()
    got: list[tuple[np.ndarray, ...]] = []
    for a, z in row_windows(tr, len(rows)):  # no temporary over every host row (big traces)
        name = sl.name[rows[a:z]]
        op = np.isin(sl.cat[rows[a:z]], cpu)
        new = sorted_unique(name[op])
        new = new[~asked[new]]
        known[new] = [kind_of(tr.s(int(i))) is not None for i in new.tolist()]
        asked[new] = True
        cand = np.flatnonzero(op & known[name]) + a
        del name, op
        for k0 in range(0, len(cand), _STEP):  # a bounded number of args at a time
            got.append(_counted(ctx, cand[k0:k0 + _STEP], counts, codes))
    cand, flops, nbytes, prec = (np.concatenate([g[i] for g in got]) if got else
                                 np.zeros(0, dtype=dt) for i, dt in enumerate((np.int64, np.int64, np.int64, np.int16)))
    del got
    outer = ~_enclosed(n.parent_pos, cand)
    return RowWork(rows=rows[cand], flops=flops, bytes=nbytes, precision=prec, outer=outer,
                   device_ns=_device_inside(ctx, rows[cand]), precisions=tuple(codes))


class _Counts:
    """Each distinct call's count, kept by `_counted` across chunks: its key's slot, and per slot (FLOPs, bytes,
    precision) or None for a call not counted."""

    def __init__(self) -> None:
        self.slot: dict[tuple[int, Any, Any, Any], int] = {}
        self.work: list[tuple[int, int, str] | None] = []

    def clear(self) -> None:
        self.slot.clear()
        self.work.clear()

    def add(self, key: tuple[int, Any, Any, Any], w: tuple[int, int, str] | None) -> int:
        self.slot[key] = len(self.work)
        self.work.append(w)
        return len(self.work) - 1


def _counted(ctx: Context, part: np.ndarray, counts: _Counts, codes: dict[str, int]) -> tuple[np.ndarray, ...]:
    """(positions, FLOPs, bytes, precision codes) of the calls at nesting positions `part` that are counted;
    `counts` keeps each distinct call's count (`COUNTS_HELD`), `codes` the precisions' codes (numbered in the
    order the counted calls come). The calls are looked up in C (``map`` over the keys), each new one counted once."""
    tr = ctx.trace
    sl = tr.slices
    rows = host_nesting(ctx).rows[part]
    if len(counts.work) >= COUNTS_HELD:
        counts.clear()  # start again: the distinct calls held stay bounded
    keys = list(zip(sl.name[rows].tolist(), *ctx.pick_columns(sl.args[rows], SHAPE_KEYS, raw=True), strict=True))
    slot = np.fromiter(map(counts.slot.get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
    for j in np.flatnonzero(slot < 0).tolist():
        nid, d, t, c = key = keys[j]
        s = counts.slot.get(key)
        if s is None:
            w = None if d is ABSENT else op_work(tr.s(nid), _decode(d), _decode(t), None if c is ABSENT else _decode(c))
            if len(counts.slot) >= COUNTS_HELD:
                counts.slot.clear()  # the lookups start again; the slots given in this chunk stay valid
            s = counts.add(key, w)
        slot[j] = s
    work = [w or (0, 0, "") for w in counts.work]  # per slot: (FLOPs, bytes, precision); "" for not counted
    ok = np.array([w is not None for w in counts.work], dtype=bool)[slot]
    slot = slot[ok]
    _, first = np.unique(slot, return_index=True)
    for s in slot[np.sort(first)].tolist():  # the precisions numbered in the order their calls come
        codes.setdefault(work[s][2], len(codes))
    flops = np.array([w[0] for w in work], dtype=np.int64)[slot]
    nbytes = np.array([w[1] for w in work], dtype=np.int64)[slot]
    prec = np.array([codes.get(w[2], 0) for w in work], dtype=np.int16)[slot]
    return part[ok], flops, nbytes, prec


def _decode(text: Any) -> Any:
    """A picked value's JSON text decoded (ABSENT stays ABSENT; text that is no JSON counts as absent)."""
    if text is ABSENT:
        return ABSENT
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return ABSENT


def _enclosed(parent_pos: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Per nesting position of `cand` (ascending): some strict ancestor is in `cand`. Each call walks up its
    parents until one is in `cand` or past the root: work and memory over the calls, not over every host row."""
    hit = np.zeros(len(cand), dtype=bool)
    todo = np.arange(len(cand))
    up = parent_pos[cand].astype(np.int64) if len(cand) else np.zeros(0, np.int64)
    while len(todo):
        live = up >= 0
        todo, up = todo[live], up[live]
        if not len(todo):
            break
        i = np.minimum(searchsorted(cand, up), len(cand) - 1)
        found = cand[i] == up
        hit[todo[found]] = True
        todo, up = todo[~found], up[~found]
        up = parent_pos[up].astype(np.int64)
    return hit


def _device_inside(ctx: Context, rows: np.ndarray) -> np.ndarray:
    """Device time of the work launched by host slices inside each of `rows` (on the same track), the rows
    themselves included."""
    out = np.zeros(len(rows), dtype=np.int64)
    hrows, dns = device_ns_by_host_row(ctx)
    if not len(hrows) or not len(rows):
        return out
    sl = ctx.trace.slices
    htrack, rtrack = sl.track[hrows], sl.track[rows]
    for t in sorted_unique(rtrack).tolist():
        on = htrack == t
        if not on.any():
            continue
        ts = sl.ts_ns[hrows[on]]
        o = np.argsort(ts, kind="stable")
        ts, cum = ts[o], np.r_[0, np.cumsum(dns[on][o])]
        mine = np.flatnonzero(rtrack == t)
        lo = searchsorted(ts, sl.ts_ns[rows[mine]], "left")
        hi = searchsorted(ts, sl.end_at(rows[mine]), "right")  # ends where asked, not of every slice
        out[mine] = cum[hi] - cum[lo]
    return out
