"""What the host did while a device sat idle, in the user's terms.

For one gap [lo, hi) the answer is, in this order of preference:

1. probe work that blocked the host for much of the gap (a compile, a CPU fallback, a sync point or a
   collective), at its line;
2. a Python call the user's code made that fills much of the gap (a python span capture marked with the line
   that made it; not the script's <module> or a main() around the whole run): data loading
   (``torch.utils.data``), a function, a module, a builtin, at that line;
3. probe work that touched the gap, however little;
4. many short host ops: dispatch overhead (N ops, mean time each), at the line of the first;
5. Python between two ops: the ops before and after the gap and their lines.

Library frames (torch internals) are never named as the work: a span of theirs is described by the call
the user's code made into them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.analysis.intervals import overlap_ns
from neuron_prof.analysis.sites.callsites import sites_of
from neuron_prof.model import Arg, KinetoCat, TrackKind
from neuron_prof.model.callsite import MODULE_PREFIX, parse_frame
from neuron_prof.model.order import searchsorted

PROBE_KINDS = (TrackKind.COMPILE, TrackKind.FALLBACK, TrackKind.SYNC, TrackKind.COLLECTIVE)
_PROBE_WORDS = {TrackKind.COMPILE: "compile of", TrackKind.FALLBACK: "CPU fallback of",
                TrackKind.SYNC: "sync point", TrackKind.COLLECTIVE: "collective"}
DISPATCH_MIN_OPS = 5


def call_label(span_name: str) -> str:
    """A python span as the call the user wrote: "Linear_0 module", "preprocess()", ".append()", "data loading"."""
    if span_name.startswith(MODULE_PREFIX):
        return f"{span_name[len(MODULE_PREFIX):]} module"
    if span_name.startswith("<built-in method "):
        return "." + span_name[17:].split(" ", 1)[0] + "()"
    if span_name.startswith("<built-in function "):
        return span_name[19:].rstrip(">") + "()"
    f = parse_frame(span_name)
    if f is None:
        return span_name
    if f[0].startswith("torch/utils/data/"):
        return "data loading (DataLoader)"
    return f"{f[2]}()"


def _probe_work(ctx: Context, lo: int, hi: int) -> list[dict[str, Any]]:
    trace = ctx.trace
    sl = trace.slices
    out: list[dict[str, Any]] = []
    for kind in PROBE_KINDS:
        rows = ctx.rows(kind)
        if not len(rows):
            continue
        ov = overlap_ns(sl.ts_ns[rows], sl.dur_ns[rows], lo, hi)
        for i in np.argsort(-ov)[:2]:
            if ov[i] > 0:
                r = int(rows[i])
                out.append({"what": f"{_PROBE_WORDS[kind]} {trace.slice_name(r)}", "row": r,
                            "overlap_ns": int(ov[i]), "call_site": sites_of(ctx).of_row(r).call_site})
    return sorted(out, key=lambda d: -int(d["overlap_ns"]))


def _host_rows(ctx: Context, cats: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rows, starts, ends) of host slices of these categories, by start (computed once per context)."""

    def build() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = ctx.cat_rows(ctx.rows(TrackKind.THREAD), cats)
        sl = ctx.trace.slices
        rows = rows[np.argsort(sl.ts_ns[rows], kind="stable")]
        return rows, sl.ts_ns[rows], sl.end_at(rows)

    return ctx.memo(f"gap_host:{','.join(cats)}", build)  # type: ignore[no-any-return]


def _user_calls(ctx: Context, lo: int, hi: int) -> list[dict[str, Any]]:
    """Python calls the user's code made overlapping [lo, hi), the one that best fills the gap first: most
    overlap times the share of the call inside the gap, so a preprocess() inside the gap comes before the
    script's <module> or a main() around the whole run (which overlap as much)."""
    rows, ts, end = _host_rows(ctx, (KinetoCat.PYTHON,))
    k = int(searchsorted(ts, hi, side="left"))
    cand = np.flatnonzero(end[:k] > lo)
    ov = (np.minimum(end[cand], hi) - np.maximum(ts[cand], lo)).astype(np.float64)
    fit = ov * ov / np.maximum(end[cand] - ts[cand], 1)
    out = []
    for j in np.argsort(-fit, kind="stable")[:200]:
        i = cand[j]
        r = int(rows[i])
        site = ctx.slice_args(r).get(Arg.CALL_SITE)
        if isinstance(site, str) and site:
            out.append({"what": call_label(ctx.trace.slice_name(r)), "row": r, "call_site": site,
                        "overlap_ns": int(ov[j])})
    return out


def _fit(ctx: Context, call: dict[str, Any]) -> float:
    """How well a call fills the gap: its overlap times the share of the call that lies in the gap."""
    ov = int(call["overlap_ns"])
    return ov * ov / max(int(ctx.trace.slices.dur_ns[call["row"]]), 1)


def gap_host(ctx: Context, lo: int, hi: int) -> dict[str, Any]:
    """What the host did in [lo, hi): {"what": text, "call_site": "file:LINE" or "", "parts": [...]}."""
    gap = hi - lo
    probe = _probe_work(ctx, lo, hi)
    calls = _user_calls(ctx, lo, hi)
    call = calls[0] if calls and _fit(ctx, calls[0]) >= 0.3 * gap else None
    if probe and (call is None or probe[0]["overlap_ns"] >= 0.3 * gap):
        return {"what": str(probe[0]["what"]), "call_site": probe[0]["call_site"], "parts": probe[:3]}
    if call is not None:
        return {"what": f"Python: {call['what']} ({fmt_ns(int(call['overlap_ns']))})",
                "call_site": call["call_site"], "parts": calls[:3]}
    rows, ts, end = _host_rows(ctx, (KinetoCat.CPU_OP,))
    a, b = int(searchsorted(ts, lo, side="left")), int(searchsorted(ts, hi, side="left"))
    sites = sites_of(ctx)
    inside = rows[a:b]
    inside = inside[end[a:b] <= hi] if len(inside) else inside
    if len(inside) >= DISPATCH_MIN_OPS:
        busy = int(ctx.trace.slices.dur_ns[inside].sum())
        first = sites.of_row(int(inside[0]))
        return {"what": f"dispatch overhead: {len(inside)} host ops, {fmt_ns(busy / len(inside))} each",
                "call_site": first.call_site, "parts": [{"ops": int(len(inside)), "op_ns": busy}]}
    before = rows[:a][end[:a] <= lo + 1][-1:] if a else rows[:0]
    after = rows[b:b + 1] if b < len(rows) else rows[:0]
    parts = []
    for label, rs in (("before", before), ("after", after)):
        if len(rs):
            r = int(rs[0])
            parts.append({"at": label, "op": ctx.trace.slice_name(r), "call_site": sites.of_row(r).call_site})
    if not parts:
        return {"what": "nothing recorded", "call_site": "", "parts": []}
    lines = " and ".join(f"{p['op']} ({p['call_site'] or 'no line'})" for p in parts)
    return {"what": f"Python between {lines}", "call_site": "", "parts": parts}
