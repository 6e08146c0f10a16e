"""dtype demotions: float64 tensors on a device that computes them as float32 (``dtype`` track instants)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from neuron_prof.analysis._context import Context
from neuron_prof.analysis._finding import Finding
from neuron_prof.analysis._registry import register
from neuron_prof.analysis._sites import NO_STACK, Site, sites_of
from neuron_prof.model import Arg, Trace, TrackKind


@register("dtype_demotion")
def dtype_demotion(trace: Trace, ctx: Context) -> list[Finding]:
    """One finding per call site where float64 (or int64) was demoted on the device."""
    rows = trace.instants_on(TrackKind.DTYPE)
    if not len(rows):
        return []
    sites = sites_of(ctx)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    ops: dict[tuple[str, str], set[str]] = defaultdict(set)
    shapes: dict[tuple[str, str], set[str]] = defaultdict(set)
    where: dict[tuple[str, str], Site] = {}
    hows: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in rows:
        a = ctx.instant_args(int(r))
        name = trace.s(int(trace.instants.name[r]))
        site = sites.of_args(a) or NO_STACK
        key = (site.call_site or site.function, name)
        groups[key].append(int(r))
        where.setdefault(key, site)
        if a.get(Arg.OP):
            ops[key].add(str(a[Arg.OP]))
        if a.get("how"):
            hows[key].add(str(a["how"]))
        if a.get(Arg.SHAPE) is not None and len(shapes[key]) < 10:
            shapes[key].add(str(a[Arg.SHAPE]))
    out = []
    for key, rs in groups.items():
        name = key[1]
        site = where[key].call_site
        src = name.split("->")[0].strip() or "float64"
        dst = name.split("->")[-1].strip() if "->" in name else "float32"
        times = f"{len(rs)} time{'s' if len(rs) != 1 else ''}"
        how = sorted(hows[key])
        title = f"dtype demotion: {name} ({', '.join(how) or 'reached the device'}, {times})"
        if src == "int64":
            # integer indices and labels are int64 by default: worth knowing, not an alarm
            severity = "info"
            advice = (
                "The device may compute int64 as int32: values beyond +-2**31 would wrap. Indices and labels "
                "are fine; for large counts or ids keep the math on the CPU or use int32 deliberately."
            )
        else:
            severity = "warning"
            advice = (
                f"The device computes {src} as {dst}: results silently lose precision. Create the tensor as "
                f"{dst} (torch.set_default_dtype(torch.float32), .float(), dtype=torch.float32 in factories) "
                f"or keep {src} math on the CPU deliberately."
            )
        ts = trace.instants.ts_ns[np.asarray(rs)]
        out.append(
            Finding(
                kind="dtype_demotion",
                severity=severity,
                title=title,
                cost_ns=0,
                share=0.0,
                count=len(rs),
                call_site=site,
                module=where[key].module,
                advice=advice,
                evidence={
                    "from": src,
                    "to": dst,
                    "ops": sorted(ops[key]),
                    "shapes": sorted(shapes[key]),
                    "instants": rs[:200],
                    **where[key].evidence(),
                },
                ts_ns=int(ts.min()),
            )
        )
    return out
