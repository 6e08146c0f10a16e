"""dtype demotions: float64 tensors on a device that computes them as float32 (``dtype`` track instants).

Where float64 reaches the device (an arrival: a factory, ``.to(dev)``, ``.double()``, a promotion) is one finding
per line; the instant of a tensor's first use in the profile (arg ``use``) tells where an arrival is first used
(``evidence.first_use``) and, for a tensor that reached the device before the profile began, is the finding: at
its first use, saying it arrived earlier.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.registry import register
from neuron_prof.analysis.sites.callsites import NO_STACK, Site, sites_of
from neuron_prof.model import Arg, Trace, TrackKind


@register(Kind.DTYPE_DEMOTION)
def dtype_demotion(trace: Trace, ctx: Context) -> list[Finding]:
    """One finding per call site where float64 (or int64) was demoted on the device."""
    rows = trace.instants_on(TrackKind.DTYPE)
    if not len(rows):
        return []
    sites = sites_of(ctx)
    uses = [int(r) for r in rows if ctx.instant_args(int(r)).get("use")]
    rows = np.asarray([int(r) for r in rows if not ctx.instant_args(int(r)).get("use")], dtype=np.int64)
    first_use: dict[int, list[str]] = defaultdict(list)  # tensor -> where it was first used
    for r in uses:
        a = ctx.instant_args(r)
        site = sites.of_args(a) or NO_STACK
        if a.get("use") == "first" and a.get("tensor") and site.call_site:
            first_use[int(a["tensor"])].append(site.call_site)
    out = _used_before(trace, ctx, uses, rows)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    ops: dict[tuple[str, str], set[str]] = defaultdict(set)
    shapes: dict[tuple[str, str], set[str]] = defaultdict(set)
    where: dict[tuple[str, str], Site] = {}
    hows: dict[tuple[str, str], set[str]] = defaultdict(set)
    used_at: dict[tuple[str, str], dict[str, None]] = defaultdict(dict)
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
        if a.get("tensor"):
            used_at[key].update(dict.fromkeys(first_use.get(int(a["tensor"]), ())))
        if a.get(Arg.SHAPE) is not None and len(shapes[key]) < 10:
            shapes[key].add(str(a[Arg.SHAPE]))
    for key, rs in groups.items():
        name = key[1]
        at = where[key].call_site
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
                kind=Kind.DTYPE_DEMOTION,
                severity=severity,
                title=title,
                cost_ns=0,
                share=0.0,
                count=len(rs),
                call_site=at,
                module=where[key].module,
                advice=advice,
                evidence={
                    "from": src,
                    "to": dst,
                    "ops": sorted(ops[key]),
                    "shapes": sorted(shapes[key]),
                    "instants": rs[:200],
                    **({"first_use": [{"call_site": c} for c in list(used_at[key])[:10]]} if used_at[key] else {}),
                    **where[key].evidence(),
                },
                ts_ns=int(ts.min()),
            )
        )
    return out


def _used_before(trace: Trace, ctx: Context, uses: list[int], arrivals: np.ndarray) -> list[Finding]:
    """float64 tensors that reached the device before the profile began, one finding per line of first use.

    A tensor first seen in the profile without arriving there came from before it, unless a float64 arrival
    of the profile precedes that use (a promotion's new tensor is first seen at its first use)."""
    f64 = [int(r) for r in arrivals if trace.s(int(trace.instants.name[r])).startswith("float64")]
    first_arrival = int(trace.instants.ts_ns[np.asarray(f64)].min()) if f64 else None
    sites = sites_of(ctx)
    groups: dict[str, list[int]] = defaultdict(list)
    where: dict[str, Site] = {}
    for r in uses:
        a = ctx.instant_args(r)
        if a.get("use") != "before":
            continue
        if first_arrival is not None and int(trace.instants.ts_ns[r]) > first_arrival:
            continue
        site = sites.of_args(a) or NO_STACK
        key = site.call_site or site.function
        groups[key].append(r)
        where.setdefault(key, site)
    out = []
    for key, rs in groups.items():
        args = [ctx.instant_args(r) for r in rs]
        ops = sorted({str(a[Arg.OP]) for a in args if a.get(Arg.OP)})
        shapes = sorted({str(a[Arg.SHAPE]) for a in args if a.get(Arg.SHAPE) is not None})[:10]
        n = len({a.get("tensor") for a in args})
        title = (f"dtype demotion: float64 used on the device ({n} tensor{'s' if n != 1 else ''} of shape "
                 f"{', '.join(shapes) or '?'} that reached the device before the profile began; first use here)")
        advice = ("The device computes float64 as float32: results silently lose precision. The tensor was "
                  "put on the device as float64 before the profiled region (a factory with dtype=torch.float64, "
                  ".to(device) of a float64 tensor, e.g. from numpy, or .double()): create it as float32 there, "
                  "or keep float64 math on the CPU deliberately.")
        ts = trace.instants.ts_ns[np.asarray(rs)]
        out.append(Finding(kind=Kind.DTYPE_DEMOTION, severity="warning", title=title, cost_ns=0, share=0.0, count=n,
                           call_site=where[key].call_site, module=where[key].module, advice=advice,
                           evidence={"from": "float64", "to": "float32", "reached_device": "before the profile",
                                     "ops": ops, "shapes": shapes, "instants": rs[:200], **where[key].evidence()},
                           ts_ns=int(ts.min())))
    return out
