"""Compile findings: first-call compile stalls and torch.compile recompiles (shape churn: `_churn`).

Reads the ``compile`` track (schema: one slice per compile; args compile_kind, signature, cache,
call_site, module, compile_id, recompile_reason) and the flows from the host op that paid for each compile.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.analysis._context import Context, severity_for
from neuron_prof.analysis._finding import Finding
from neuron_prof.analysis._fmt import fmt_ns
from neuron_prof.analysis._host import call_site_up
from neuron_prof.analysis._intervals import union_ns
from neuron_prof.analysis._registry import register
from neuron_prof.analysis._shapes import parse_reason, shapes_of
from neuron_prof.model import Arg, Trace, TrackKind

CACHE_DIR_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
_CID = re.compile(r"^\[?(\d+)/(\d+)")


@dataclass
class _Compile:
    row: int
    name: str
    ts: int
    dur: int
    kind: str
    cache: str
    signature: Any
    call_site: str
    module: str
    frame: str = ""
    attempt: int = 0
    reason: str = ""
    args: dict[str, Any] = field(default_factory=dict)


def compiles(trace: Trace, ctx: Context) -> list[_Compile]:
    """Every compile slice with its parsed args, in time order (parsed once per context)."""
    return ctx.memo("compiles", lambda: _parse_compiles(trace, ctx))  # type: ignore[no-any-return]


def _parse_compiles(trace: Trace, ctx: Context) -> list[_Compile]:
    out = []
    sl = trace.slices
    rows = ctx.rows(TrackKind.COMPILE)
    # probes link a compile to the host op that paid for it (flow host op -> compile slice)
    fl = trace.flows
    linked = np.isin(fl.dst, rows)
    host_of = dict(zip(fl.dst[linked].tolist(), fl.src[linked].tolist(), strict=True))
    for r in rows[np.argsort(sl.ts_ns[rows], kind="stable")]:
        a = ctx.slice_args(int(r))
        cid = str(a.get(Arg.COMPILE_ID, "") or "")
        m = _CID.match(cid)
        kind = str(a.get(Arg.COMPILE_KIND, "") or ("torch.compile" if m else "eager"))
        c = _Compile(
            row=int(r),
            name=trace.slice_name(int(r)),
            ts=int(sl.ts_ns[r]),
            dur=int(sl.dur_ns[r]),
            kind=kind,
            cache=str(a.get(Arg.CACHE, "miss") or "miss"),
            signature=a.get(Arg.SHAPES) or a.get(Arg.SIGNATURE, ""),
            call_site=ctx.call_site(a),
            module=ctx.module(a),
            reason=str(a.get(Arg.RECOMPILE_REASON, "") or ""),
            args=a,
        )
        if m:
            c.frame, c.attempt = m.group(1), int(m.group(2))
        src = host_of.get(int(r))
        if src is not None:
            _from_host_op(ctx, c, int(src))
        out.append(c)
    return out


def _from_host_op(ctx: Context, c: _Compile, src: int) -> None:
    """Fill what the compile slice lacks from its host op: shapes ("Input Dims") and the user's call site."""
    if not shapes_of(c.signature):
        dims = ctx.slice_args(src).get("Input Dims")
        if isinstance(dims, list) and dims:
            c.signature = dims
    if not c.call_site:
        c.call_site = call_site_up(ctx, src)[0]


def _top_site(items: list[_Compile]) -> str:
    cost: Counter[str] = Counter()
    for c in items:
        if c.call_site:
            cost[c.call_site] += c.dur
    return cost.most_common(1)[0][0] if cost else ""


@register("first_call_compile")
def first_call_compile(trace: Trace, ctx: Context) -> list[Finding]:
    """Host time blocked compiling new signatures (eager ops and first graphs), cache misses only."""
    # eager ops, first graphs of each frame (and their backward), NEFF compiles placed on graph spans;
    # compiles of a frame's later attempts are recompiles (see `recompile`)
    first = [c for c in compiles(trace, ctx) if c.cache == "miss" and c.attempt == 0]
    if not first:
        return []
    ts = np.array([c.ts for c in first], dtype=np.int64)
    dur = np.array([c.dur for c in first], dtype=np.int64)
    cost = union_ns(ts, dur)
    by_op: dict[str, list[_Compile]] = defaultdict(list)
    for c in first:
        by_op[c.name].append(c)
    ops = sorted(by_op.items(), key=lambda kv: -sum(c.dur for c in kv[1]))
    split = ctx.step_split(ts, dur)
    ev: dict[str, Any] = {
        "compiles": len(first),
        "ops": [
            {
                "op": op,
                "compiles": len(cs),
                "ns": sum(c.dur for c in cs),
                "call_site": _top_site(cs),
                "signatures": [str(c.signature) for c in cs[:5]],
            }
            for op, cs in ops[:20]
        ],
        "rows": [c.row for c in first[:200]],
        **split,
    }
    steady = split.get("steady_ns", 0)
    advice = (
        f"Run warm-up steps before measuring and keep the compile cache between runs "
        f"({CACHE_DIR_ENV}=/persistent/dir; the default /tmp/neff_cache is lost on reboot). "
        f"Fewer distinct shapes mean fewer compiles: pad inputs to a few bucket sizes."
    )
    if steady:
        advice = (
            f"{split['steady_count']} compiles still happen after warm-up: new shapes keep appearing "
            f"(see shape_churn). " + advice
        )
    top = ops[0][0]
    n_ops = len(by_op)
    title = (
        f"First-call compile stalls: {len(first)} compile{'s' if len(first) != 1 else ''} of {n_ops} "
        f"op{'s' if n_ops != 1 else ''} "
        f"blocked the host {fmt_ns(cost)} (top: {top})"
    )
    share = ctx.share(cost)
    return [
        Finding(
            kind="first_call_compile",
            severity=severity_for(share, "warning" if steady else "info"),
            title=title,
            cost_ns=cost,
            share=share,
            count=len(first),
            call_site=_top_site(first),
            module=next((c.module for c in first if c.module), ""),
            advice=advice,
            evidence=ev,
            ts_ns=int(ts.min()),
        )
    ]


def _recompile_limit_hits(trace: Trace, ctx: Context) -> int:
    rows = trace.instants_on(TrackKind.COMPILE)
    names = [trace.s(int(n)).lower() for n in trace.instants.name[rows]]
    return sum("recompile limit" in n or "cache_size_limit" in n or "cache size limit" in n for n in names)


@register("recompile")
def recompile(trace: Trace, ctx: Context) -> list[Finding]:
    """torch.compile frames compiled again, with the failed guards that caused it."""
    frames: dict[str, list[_Compile]] = defaultdict(list)
    for c in compiles(trace, ctx):
        if c.frame:
            frames[c.frame].append(c)
    limit_hits = _recompile_limit_hits(trace, ctx)
    out = []
    for frame, cs in frames.items():
        again = [c for c in cs if c.attempt >= 1]
        n_re = len({c.attempt for c in again if c.kind != "backward"} or {c.attempt for c in again})
        if n_re == 0:
            continue
        ts = np.array([c.ts for c in again], dtype=np.int64)
        dur = np.array([c.dur for c in again], dtype=np.int64)
        cost = union_ns(ts, dur)
        guards = [g for c in again for g in parse_reason(c.reason)]
        dims = Counter(g.dim for g in guards)
        reasons = Counter(c.reason.strip() for c in again if c.reason.strip())
        name = next((c.name for c in cs if c.attempt == 0), cs[0].name)
        title = f"{name} (frame {frame}) recompiled {n_re} time{'s' if n_re != 1 else ''} ({fmt_ns(cost)})"
        if dims:
            title += f": {dims.most_common(1)[0][0]} varied"
        advice = (
            "Each new shape compiles a new graph (Neuron compiles statically, dynamic=False). Pad inputs "
            "to a few bucket sizes (see shape_churn), or mark the varying dimension with "
            "torch._dynamo.mark_dynamic where the backend supports it."
        )
        if limit_hits:
            advice += (
                " The recompile limit was hit, so later calls silently ran eagerly: raise "
                "torch._dynamo.config.recompile_limit or, better, stop the churn."
            )
        share = ctx.share(cost)
        ev = {
            "frame": frame,
            "compiles": len({c.attempt for c in cs}),
            "recompiles": n_re,
            "reasons": [{"reason": r, "count": n} for r, n in reasons.most_common(10)],
            "dims": dict(dims),
            "recompile_limit_hits": limit_hits,
            "rows": [c.row for c in again[:200]],
            **ctx.step_split(ts, dur),
        }
        out.append(
            Finding(
                kind="recompile",
                severity=severity_for(share, "warning" if n_re >= 3 else "info"),
                title=title,
                cost_ns=cost,
                share=share,
                count=n_re,
                call_site=_top_site(cs),
                module=next((c.module for c in cs if c.module), ""),
                advice=advice,
                evidence=ev,
                ts_ns=int(ts.min()),
            )
        )
    return out
