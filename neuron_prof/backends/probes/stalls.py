"""First-call stalls found in the trace itself, for backends that report no compile events.

A signature (op name, input shapes, input dtypes) whose first call is far slower than its later calls
stalled on something one-off (a compile, a lazy init). One compile event per such signature, cache
"miss", ``inferred: true``; its duration is the first call's excess over the median of the later calls.
Only innermost stalls are kept (the op around a stalled op is slow for the same reason).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from neuron_prof.backends.probes._common import probe_track, site_args, step_of
from neuron_prof.backends.probes._hostops import shapes_dtypes
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.model import Arg, Cat, KinetoCat, TrackKind
from neuron_prof.model.order import sorted_unique

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder


class StallProbe(Probe):
    """Infers first-call compile stalls from op durations."""

    name = "stalls"

    def __init__(self, ratio: float = 10.0, min_excess_ns: int = 1_000_000) -> None:
        super().__init__()
        self.ratio = ratio
        self.min_excess_ns = min_excess_ns

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        found = find_stalls(view, self.ratio, self.min_excess_ns)
        if not found:
            return
        track = probe_track(builder, ctx, TrackKind.COMPILE)
        for row, excess, later, sig in found:
            builder.add_slice(track, int(view.ts[row]), excess, view.name_of(row), Cat.COMPILE, {
                Arg.COMPILE_KIND: "eager", Arg.CACHE: "miss", Arg.SIGNATURE: sig, **site_args(view.site(row)),
                Arg.INFERRED: True, "first_call_ns": int(view.dur[row]), "later_median_ns": later,
                Arg.STEP: step_of(int(view.ts[row]), ctx)})


def find_stalls(view: HostView, ratio: float = 10.0, min_excess_ns: int = 1_000_000) -> list[tuple[int, int, int, str]]:
    """(row, excess ns, later median ns, signature) of each stalled first call, innermost only."""
    ops = view.cat_rows(KinetoCat.CPU_OP)
    if len(ops) < 2:
        return []
    names = view.name[ops]
    out: list[tuple[int, int, int, str]] = []
    for nid in sorted_unique(names):
        rows = ops[names == nid]
        if len(rows) < 2:
            continue
        durs = view.dur[rows]
        if durs.max() < min_excess_ns:  # cheap reject before parsing any args
            continue
        groups: dict[str, list[int]] = {}
        for r in rows:
            groups.setdefault(_sig(view.args(int(r))), []).append(int(r))
        for sig, rs in groups.items():
            if len(rs) < 2:
                continue
            first, later = rs[0], np.asarray([view.dur[r] for r in rs[1:]])
            med = int(np.median(later))
            excess = int(view.dur[first]) - med
            if excess >= min_excess_ns and view.dur[first] > ratio * max(med, 1):
                out.append((first, excess, med, f"{view.name_of(first)}{sig}"))
    return _innermost(view, out)


def _sig(a: dict[str, Any]) -> str:
    shapes, dtypes = shapes_dtypes(a)
    return f"({shapes}; {dtypes})"


def _innermost(view: HostView, found: list[tuple[int, int, int, str]]) -> list[tuple[int, int, int, str]]:
    rows = [f[0] for f in found]
    keep = []
    for f in found:
        r = f[0]
        inner = any(o != r and view.track[o] == view.track[r] and view.ts[o] >= view.ts[r] and view.end[o] <= view.end[r]
                    for o in rows)
        if not inner:
            keep.append(f)
    return sorted(keep, key=lambda f: int(view.ts[f[0]]))
