"""`recompile` of a signature (op, shapes, dtypes) compiled a second time: the compile cache lost it (cleared,
evicted), never new shapes. When the capture saw the program clear the cache (`EventName.CACHE_CLEARED` on the
compile track), the finding is at that call's line.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from neuron_prof.analysis.compile.events import (
    CACHE_DIR_ENV,
    _Compile,
    _signature_key,
    _top_site,
    classify_compiles,
    compile_groups,
)
from neuron_prof.analysis.context import Context, severity_for
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.analysis.intervals import union_ns
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.registry import register
from neuron_prof.model import Arg, Trace, TrackKind
from neuron_prof.model.order import searchsorted
from neuron_prof.model.schema import EventName


@register("compile_cache_lost")
def compile_cache_lost(trace: Trace, ctx: Context) -> list[Finding]:
    """One `recompile` finding for the signatures compiled again (`CompileClasses.again`)."""
    again = classify_compiles(trace, ctx).again
    return [_again_finding(trace, ctx, again)] if again else []


def _cache_clears(trace: Trace, ctx: Context) -> list[tuple[int, dict[str, Any]]]:
    """(ts, args) of each clear of the compile cache the capture saw the program make, in time order."""
    want = trace.strings.get(EventName.CACHE_CLEARED)
    if want is None:
        return []
    rows = trace.instants_on(TrackKind.COMPILE)
    rows = rows[trace.instants.name[rows] == want]
    out = [(int(trace.instants.ts_ns[r]), ctx.instant_args(int(r))) for r in rows]
    return sorted(out, key=lambda c: c[0])


def _again_finding(trace: Trace, ctx: Context, again: list[_Compile]) -> Finding:
    """Signatures compiled a second time: the cache lost them (cleared, evicted, another process's cache). When
    the capture saw the program clear the cache before them, the finding names that call's line."""
    ts = np.array([c.ts for c in again], dtype=np.int64)
    dur = np.array([c.dur for c in again], dtype=np.int64)
    cost = union_ns(ts, dur)
    groups = compile_groups(trace, ctx, again)
    top = _top_site(again)
    n_sig = len({_signature_key(c) for c in again})
    clears = _cache_clears(trace, ctx)
    # each compile's cause: the last clear before it; the finding names the clear behind most compile time
    by_clear: dict[int, int] = defaultdict(int)
    for c in again:
        k = int(searchsorted(np.array([t for t, _ in clears], dtype=np.int64), c.ts, side="right")) - 1
        if k >= 0:
            by_clear[k] += c.dur
    cause = clears[max(by_clear, key=lambda k: by_clear[k])][1] if by_clear else None
    clear_site = str(cause.get(Arg.CALL_SITE) or "") if cause else ""
    what = f"{len(again)} compiles, {fmt_ns(cost)}"
    if cause is not None:
        call = str(cause.get("call") or "clearing the compile cache")
        where = f" at {clear_site}" if clear_site else ""
        title = (f"{n_sig} signature{'s' if n_sig != 1 else ''} compiled again after {call}{where} ({what}, "
                 f"top at {top or groups[0].name}): a cache miss, not new shapes")
        advice = (f"{call}{where} emptied the compile cache ({int(cause.get('entries') or 0)} compiled "
                  "kernels); the same ops, shapes and dtypes were compiled again after it. Remove the call: the "
                  "cache is what makes later steps fast. These are not new shapes: padding does not remove them.")
    else:
        title = (f"{n_sig} signature{'s' if n_sig != 1 else ''} compiled again ({what}, top at "
                 f"{top or groups[0].name}): the compile cache no longer held them")
        advice = ("The same op, shapes and dtypes were compiled earlier in this run: the compile cache lost them "
                  "(evicted, cleared with torch_neuronx._C._clear_compilation_cache() outside the profiled "
                  f"code, or a new process without a persistent cache). Keep the cache (set {CACHE_DIR_ENV} to a "
                  "persistent folder). These are not new shapes: padding does not remove them.")
    share = ctx.share(cost)
    ev = {"signatures": n_sig, "compiles": len(again), "cache": "miss of a signature compiled before",
          "cause": "cleared" if cause is not None else "evicted or cleared unseen",
          **({"cleared": [{"call_site": a.get(Arg.CALL_SITE, ""), "call": a.get("call", ""),
                           "entries": a.get("entries"), "ts_ns": t, "step": a.get(Arg.STEP)}
                          for t, a in clears][:20]} if clears else {}),
          "sites": [g.to_dict() for g in groups[:50]], "rows": [c.row for c in again[:200]],
          **ctx.step_split(ts, dur)}
    return Finding(kind=Kind.RECOMPILE, severity=severity_for(share, "warning"), title=title, cost_ns=cost,
                   share=share, count=len(again), call_site=clear_site or top,
                   module=next((c.module for c in again if c.call_site == top and c.module), "")
                   if not clear_site else "", advice=advice, evidence=ev, ts_ns=int(ts.min()))
