"""Compile findings: first-call compile stalls, torch.compile recompiles and shape churn with a bucket plan.

Reads the ``compile`` track (schema: one slice per compile; args compile_kind, signature, cache,
call_site, module, compile_id, recompile_reason). Costs of `recompile` and `shape_churn` can overlap:
one says what recompiling cost, the other what bucketing would save.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.analysis._buckets import choose_plan, min_waste_table
from neuron_prof.analysis._context import Context, severity_for
from neuron_prof.analysis._finding import Finding
from neuron_prof.analysis._fmt import fmt_ns
from neuron_prof.analysis._intervals import union_ns
from neuron_prof.analysis._registry import register
from neuron_prof.analysis._shapes import parse_reason, shapes_of, varying_dims
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
    for r in rows[np.argsort(sl.ts_ns[rows], kind="stable")]:
        a = ctx.slice_args(int(r))
        cid = str(a.get(Arg.COMPILE_ID, "") or "")
        m = _CID.match(cid)
        kind = str(a.get(Arg.COMPILE_KIND, "") or ("torch.compile" if m else "eager"))
        c = _Compile(row=int(r), name=trace.slice_name(int(r)), ts=int(sl.ts_ns[r]), dur=int(sl.dur_ns[r]),
                     kind=kind, cache=str(a.get(Arg.CACHE, "miss") or "miss"),
                     signature=a.get(Arg.SHAPES) or a.get(Arg.SIGNATURE, ""), call_site=ctx.call_site(a),
                     module=ctx.module(a), reason=str(a.get(Arg.RECOMPILE_REASON, "") or ""), args=a)
        if m:
            c.frame, c.attempt = m.group(1), int(m.group(2))
        out.append(c)
    return out


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
        "ops": [{"op": op, "compiles": len(cs), "ns": sum(c.dur for c in cs), "call_site": _top_site(cs),
                 "signatures": [str(c.signature) for c in cs[:5]]} for op, cs in ops[:20]],
        "rows": [c.row for c in first[:200]], **split,
    }
    steady = split.get("steady_ns", 0)
    advice = (f"Run warm-up steps before measuring and keep the compile cache between runs "
              f"({CACHE_DIR_ENV}=/persistent/dir; the default /tmp/neff_cache is lost on reboot). "
              f"Fewer distinct shapes mean fewer compiles: pad inputs to a few bucket sizes.")
    if steady:
        advice = (f"{split['steady_count']} compiles still happen after warm-up: new shapes keep appearing "
                  f"(see shape_churn). " + advice)
    top = ops[0][0]
    n_ops = len(by_op)
    title = (f"First-call compile stalls: {len(first)} compiles of {n_ops} op{'s' if n_ops != 1 else ''} "
             f"blocked the host {fmt_ns(cost)} (top: {top})")
    share = ctx.share(cost)
    return [Finding(kind="first_call_compile", severity=severity_for(share, "warning" if steady else "info"),
                    title=title, cost_ns=cost, share=share, count=len(first), call_site=_top_site(first),
                    module=next((c.module for c in first if c.module), ""), advice=advice, evidence=ev,
                    ts_ns=int(ts.min()))]


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
        advice = ("Each new shape compiles a new graph (Neuron compiles statically, dynamic=False). Pad inputs "
                  "to a few bucket sizes (see shape_churn), or mark the varying dimension with "
                  "torch._dynamo.mark_dynamic where the backend supports it.")
        if limit_hits:
            advice += (" The recompile limit was hit, so later calls silently ran eagerly: raise "
                       "torch._dynamo.config.recompile_limit or, better, stop the churn.")
        share = ctx.share(cost)
        ev = {"frame": frame, "compiles": len({c.attempt for c in cs}), "recompiles": n_re,
              "reasons": [{"reason": r, "count": n} for r, n in reasons.most_common(10)],
              "dims": dict(dims), "recompile_limit_hits": limit_hits, "rows": [c.row for c in again[:200]],
              **ctx.step_split(ts, dur)}
        out.append(Finding(kind="recompile", severity=severity_for(share, "warning" if n_re >= 3 else "info"),
                           title=title, cost_ns=cost, share=share, count=n_re,
                           call_site=_top_site(cs), module=next((c.module for c in cs if c.module), ""),
                           advice=advice, evidence=ev, ts_ns=int(ts.min())))
    return out


def _frame_sizes(trace: Trace, cs: list[_Compile]) -> tuple[str, dict[int, int]] | None:
    """(dim label, attempt -> size) for the dimension that varied most in a frame's recompile reasons."""
    per_attempt: dict[int, list[Any]] = {}
    for c in cs:
        if c.kind != "backward":
            per_attempt.setdefault(c.attempt, []).extend(g for g in parse_reason(c.reason) if g.what == "size")
    dims = Counter(g.dim for gs in per_attempt.values() for g in gs)
    if not dims:
        return None
    dim = dims.most_common(1)[0][0]
    sizes: dict[int, int] = {}
    for att, gs in per_attempt.items():
        for g in gs:
            if g.dim == dim:
                sizes[att] = int(g.actual)
                m = _CID.match(g.frame_compile) if g.frame_compile else None
                if m and int(m.group(2)) not in sizes:
                    sizes[int(m.group(2))] = int(g.expected)
    if 0 not in sizes:
        first = next((g for a in sorted(per_attempt) for g in per_attempt[a] if g.dim == dim), None)
        if first is not None:
            sizes[0] = int(first.expected)
    return dim, sizes


def _region_counts(trace: Trace, ctx: Context, frame: str) -> dict[int, int]:
    """Calls per compiled graph of a frame, from Dynamo's "Torch-Compiled Region: F/k" spans."""
    prefix = f"Torch-Compiled Region: {frame}/"
    out: dict[int, int] = {}
    host = ctx.rows(TrackKind.THREAD)
    for sid in range(len(trace.strings)):
        s = trace.strings[sid]
        if s.startswith(prefix) and s[len(prefix):].isdigit():
            out[int(s[len(prefix):])] = int(np.count_nonzero(trace.slices.name[host] == sid))
    return out


def _op_call_counts(trace: Trace, ctx: Context, op: str, tensor: int, index: int) -> Counter[int]:
    """Calls of host op `op` per size of (input `tensor`, dim `index`), from Kineto "Input Dims"."""
    names = {op, op.removeprefix("aten::"), "aten::" + op.removeprefix("aten::")}
    rows = ctx.name_rows(ctx.rows(TrackKind.THREAD), names)
    counts: Counter[int] = Counter()
    for r in rows[:200_000]:
        dims = ctx.slice_args(int(r)).get("Input Dims")
        if isinstance(dims, list) and len(dims) > tensor and isinstance(dims[tensor], list) \
                and len(dims[tensor]) > index:
            counts[int(dims[tensor][index])] += 1
    return counts


def _churn_finding(ctx: Context, subject: str, what: str, dim: str, sizes: list[int], counts: list[int],
                   cs: list[_Compile]) -> Finding:
    plan = choose_plan(sizes, counts)
    table = min_waste_table(sizes, counts, 8)
    compile_ns = sum(c.dur for c in cs if c.cache == "miss")
    n = plan.compiles_before
    saved = int(compile_ns * max(n - plan.k, 0) / n) if n else 0
    share = ctx.share(saved)
    distinct = sorted(set(sizes))
    title = f"Shape churn in {what} {subject}: {dim} took {n} values; {plan.describe()}"
    advice = (f"Pad {dim} up to the buckets {list(plan.buckets)} (e.g. with torch.nn.functional.pad or a "
              f"collate_fn) so only {plan.k} signature{'s' if plan.k != 1 else ''} compile; this costs "
              f"{plan.waste_share:.0%} extra padded elements.")
    ev = {"subject": subject, "dimension": dim, "values": distinct[:200], "counts": sorted([int(s), int(c)] for s, c in zip(sizes, counts, strict=True)),
          "plan": plan.to_dict(), "plans": [p.to_dict() for p in table],
          "compile_ns": compile_ns, "rows": [c.row for c in cs[:200]]}
    return Finding(kind="shape_churn", severity=severity_for(share, "warning"), title=title, cost_ns=saved,
                   share=share, count=n, call_site=_top_site(cs), module=next((c.module for c in cs if c.module), ""),
                   advice=advice, evidence=ev, ts_ns=min(c.ts for c in cs))


@register("shape_churn")
def shape_churn(trace: Trace, ctx: Context) -> list[Finding]:
    """Ops or frames compiled for 3+ sizes of one dimension, with the exact bucket plan."""
    out = []
    all_c = compiles(trace, ctx)
    frames: dict[str, list[_Compile]] = defaultdict(list)
    eager: dict[str, list[_Compile]] = defaultdict(list)
    for c in all_c:
        (frames[c.frame] if c.frame else eager[c.name]).append(c)
    for frame, cs in frames.items():
        found = _frame_sizes(trace, cs)
        if not found:
            continue
        dim, by_att = found
        if len(set(by_att.values())) < 3:
            continue
        calls = _region_counts(trace, ctx, frame)
        sizes = list(by_att.values())
        counts = [max(calls.get(a, 1), 1) for a in by_att]
        name = next((c.name for c in cs if c.attempt == 0), cs[0].name)
        out.append(_churn_finding(ctx, f"{name} (frame {frame})", "graph", dim, sizes, counts, cs))
    for op, cs in eager.items():
        miss = [c for c in cs if c.cache == "miss"]
        sigs = [shapes_of(c.signature) for c in miss]
        uniq = list(dict.fromkeys(s for s in sigs if s))
        if len(uniq) < 3:
            continue
        vd = varying_dims(uniq)
        if not vd or len(set(vd[0].values)) < 3:
            continue
        v = vd[0]
        calls = _op_call_counts(trace, ctx, op, v.tensor, v.index)
        vals = sorted(set(v.values))
        counts = [max(calls.get(x, 1), 1) for x in vals]
        out.append(_churn_finding(ctx, op, "op", v.label, vals, counts, miss))
    return out
