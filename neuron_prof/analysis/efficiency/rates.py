"""Achieved rates and share of peak per user line and per op, and the trace's whole (the ``efficiency`` object
of `summary --json` totals, the efficiency fields of its ``lines``).

Per line or op: ``flops`` and ``bytes`` (`work.row_work`; a line sums the calls no counted call encloses), its
device time ``device_ns`` (the line table's, for a line; the device work launched inside the op's calls, for an
op), achieved ``tflops`` (FLOP/s / 1e12) and ``gb_per_s`` over that device time, arithmetic ``intensity``
(FLOPs per byte) and, when the device's peak is known (`peaks`), ``mfu``: the time the work would take at the
peak for each call's precision over the time it took (a share, 0..1), and ``mbu`` the same for bytes at the
memory bandwidth. A trace with no device time has FLOPs and bytes only.

    lines = line_efficiency(ctx)        # aligned with line_table(ctx)
    ops = op_efficiency(ctx)            # one entry per op key, most FLOPs first
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.efficiency.peaks import Peak, device_name, trace_peak
from neuron_prof.analysis.efficiency.work import RowWork, row_work
from neuron_prof.analysis.ops import op_key
from neuron_prof.analysis.sites.lines import line_table
from neuron_prof.model.order import searchsorted

TOP_OPS = 20
"""Ops in the ``efficiency`` totals."""
TOP_PATHS = 5
"""Steps whose critical path the ``efficiency`` totals show (the first ones)."""


@dataclass(frozen=True, eq=False)
class Efficiency:
    """Columns per entry (a line or an op): see the module docstring."""

    flops: np.ndarray
    bytes: np.ndarray
    device_ns: np.ndarray
    ideal_ns: np.ndarray
    """Time the FLOPs take at the device's peak for their precisions (0 when the peak is not known)."""
    peak: Peak | None

    def __len__(self) -> int:
        return len(self.flops)

    def columns(self) -> dict[str, np.ndarray]:
        """``tflops``, ``mfu`` and ``intensity`` per entry as float columns, NaN where `row` leaves the field out
        (no device time measured, no known peak, no bytes): a table shows those blank, not 0."""
        f, b, d = self.flops.astype(float), self.bytes.astype(float), self.device_ns.astype(float)
        timed = (d > 0) & ((f > 0) | (b > 0))
        safe = np.where(timed, d, 1.0)
        nan = np.full(len(f), np.nan)
        return {"tflops": np.where(timed, f / safe / 1e3, nan),
                "mfu": np.where(timed, self.ideal_ns / safe, nan) if self.peak is not None else nan,
                "intensity": np.where(b > 0, f / np.where(b > 0, b, 1.0), nan)}

    def row(self, i: int) -> dict[str, Any]:
        """Entry `i` as JSON fields (rates only where there is device time; shares only with a known peak)."""
        f, b, d = int(self.flops[i]), int(self.bytes[i]), int(self.device_ns[i])
        out: dict[str, Any] = {"flops": f, "bytes": b}
        if b:
            out["intensity"] = round(f / b, 3)
        if d > 0 and (f or b):
            out["tflops"] = round(f / d / 1e3, 6)
            out["gb_per_s"] = round(b / d, 3)
            if self.peak is not None:
                out["mfu"] = round(float(self.ideal_ns[i]) / d, 6)
                out["mbu"] = round(b / (self.peak.bytes_per_s * d * 1e-9), 6)
        return out


def _ideal_ns(w: RowWork, peak: Peak | None) -> np.ndarray:
    if peak is None or not len(w):
        return np.zeros(len(w))
    rate = np.array([peak.of(p) for p in w.precisions], dtype=float)[w.precision]  # per precision, not call
    return w.flops / rate * 1e9


def line_efficiency(ctx: Context) -> Efficiency:
    """Efficiency of each line of `line_table(ctx)`, same order."""

    def build() -> Efficiency:
        t = line_table(ctx.trace, ctx)
        w = row_work(ctx)
        peak = trace_peak(ctx.trace)
        ideal = _ideal_ns(w, peak)
        m = len(t)
        line_of_row = np.repeat(np.arange(m), np.diff(t.host_start)) if m else np.zeros(0, np.int64)
        o = np.argsort(t.host_rows, kind="stable")
        hr = t.host_rows[o]
        keep = np.flatnonzero(w.outer)
        pos = searchsorted(hr, w.rows[keep])
        pos = np.minimum(pos, max(len(hr) - 1, 0))
        hit = (hr[pos] == w.rows[keep]) if len(hr) else np.zeros(len(keep), dtype=bool)
        li = line_of_row[o][pos[hit]] if len(hr) else np.zeros(0, np.int64)
        k = keep[hit]

        def per_line(v: np.ndarray) -> np.ndarray:
            return np.bincount(li, weights=v[k], minlength=m)

        return Efficiency(flops=per_line(w.flops).astype(np.int64), bytes=per_line(w.bytes).astype(np.int64),
                          device_ns=t.cols["device_ns"].copy(), ideal_ns=per_line(ideal), peak=peak)

    return ctx.memo("efficiency_lines", build)  # type: ignore[no-any-return]


@dataclass(frozen=True, eq=False)
class OpEfficiency(Efficiency):
    name: np.ndarray
    """Op key (`ops.op_key`) per entry."""
    calls: np.ndarray
    """Counted calls (shapes recorded)."""


def op_efficiency(ctx: Context) -> OpEfficiency:
    """Efficiency per op key over every counted call of it (nested ones too: ``aten::addmm`` inside
    ``aten::linear`` counts for both ops), most FLOPs first, then most bytes."""

    def build() -> OpEfficiency:
        tr = ctx.trace
        w = row_work(ctx)
        peak = trace_peak(tr)
        ideal = _ideal_ns(w, peak)
        # op keys per distinct name, then per row by index: no Python object per call
        ids, at = np.unique(tr.slices.name[w.rows], return_inverse=True)
        keys = np.array([op_key(tr.s(int(i))) for i in ids.tolist()], dtype=object)
        uk, inv = np.unique(keys, return_inverse=True) if len(keys) else (keys, np.zeros(0, np.int64))
        inv = inv[at] if len(keys) else inv

        def per_op(v: np.ndarray) -> np.ndarray:
            return np.bincount(inv, weights=v, minlength=len(uk))

        fl, by = per_op(w.flops).astype(np.int64), per_op(w.bytes).astype(np.int64)
        order = np.lexsort((uk.astype(str), -by, -fl)) if len(uk) else np.zeros(0, np.int64)
        return OpEfficiency(flops=fl[order], bytes=by[order], device_ns=per_op(w.device_ns).astype(np.int64)[order],
                            ideal_ns=per_op(ideal)[order], peak=peak, name=uk[order],
                            calls=np.bincount(inv, minlength=len(uk))[order])

    return ctx.memo("efficiency_ops", build)  # type: ignore[no-any-return]


def add_line_efficiency(lines: list[dict[str, Any]], ctx: Context) -> list[dict[str, Any]]:
    """`lines` (the first rows of `lines_json`, in the line table's order) with each line's efficiency fields."""
    e = line_efficiency(ctx)
    for i, d in enumerate(lines[:len(e)]):
        d.update(e.row(i))
    return lines


def efficiency_totals(ctx: Context, explorer_summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``efficiency`` object of the totals: the device and its peak (with the table row's source), the
    trace's FLOPs, bytes, rates and MFU over the counted calls' device time, the ops with the most FLOPs and,
    for a Neuron Explorer profile with a Summary MFU, both MFUs and their difference (or, in ``ours_unknown``, why
    ours is not known: never a 0 for want of counted ops); and the critical path of the
    first steps (`critical_path`: its host, device and collective time and its heaviest slices)."""
    w = row_work(ctx)
    peak = trace_peak(ctx.trace)
    o = w.outer
    whole = Efficiency(flops=np.array([int(w.flops[o].sum())]), bytes=np.array([int(w.bytes[o].sum())]),
                       device_ns=np.array([int(w.device_ns[o].sum())]),
                       ideal_ns=np.array([float(_ideal_ns(w, peak)[o].sum())]), peak=peak)
    out: dict[str, Any] = {"device": device_name(ctx.trace), "peak": peak.to_dict() if peak else None,
                           "counted_calls": int(o.sum()), **whole.row(0), "device_ns": int(whole.device_ns[0])}
    ops = op_efficiency(ctx)
    out["ops"] = [{"name": str(ops.name[i]), "calls": int(ops.calls[i]), "device_ns": int(ops.device_ns[i]),
                   **ops.row(i)} for i in range(min(TOP_OPS, len(ops)))]
    from neuron_prof.analysis.efficiency.critical_path import critical_path

    out["critical_path"] = [p.to_dict(ctx, 5) for p in critical_path(ctx)[:TOP_PATHS]]
    sm = explorer_summary or {}
    theirs = sm.get("mfu_estimated_percent")
    if isinstance(theirs, (int, float)):
        cmp: dict[str, Any] = {"explorer_mfu_percent": float(theirs)}
        span = sm.get("total_time")
        span = float(span) if isinstance(span, (int, float)) else 0.0
        why = ("no op with recorded shapes to count (capture with record_shapes=True)" if not whole.flops[0]
               else "the device's peak is not known" if peak is None
               else "" if span > 0 else "the profile has no total_time")
        if why:
            cmp["ours_unknown"] = why
        else:
            # the same definition as the profile's: model FLOPs over peak x the profile's whole time
            ours = 100.0 * float(whole.ideal_ns[0]) / (span * 1e9)
            cmp["ours_mfu_percent"] = round(ours, 4)
            cmp["difference_points"] = round(float(theirs) - ours, 4)
        out["explorer"] = cmp
    return out
