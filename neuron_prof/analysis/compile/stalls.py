"""Compile findings: first-call compile stalls and torch.compile recompiles (shape churn: `_churn`).

The compile records they read (parsed, grouped, classified) are `_compile_events`'.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

from neuron_prof.analysis.compile.events import (
    CACHE_DIR_ENV,
    CompileClasses,
    _after_warmup,
    _Compile,
    _in_steady,
    _top_site,
    classify_compiles,
    compile_groups,
    compiles,
    in_evaluation,
    launch_modes,
    signature_text,
)
from neuron_prof.analysis.compile.shapes import parse_reason, shapes_of
from neuron_prof.analysis.context import Context, severity_for
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.analysis.intervals import union_ns
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.registry import register
from neuron_prof.model import Trace, TrackKind
from neuron_prof.model.order import searchsorted


def _phases(ctx: Context, items: list[_Compile]) -> tuple[list[list[_Compile]], list[_Compile]]:
    """Compiles after warm-up split into phases and the rest: per step, the compiles grouped by the statement
    that compiled most; a statement that leads such a group in one step only, compiling new shapes of ops
    compiled before, is a phase of its own (a first evaluation on a new batch size, the last smaller batch);
    one leading in several steps recurs (the shapes keep changing: `shape_churn`'s plan is the fix), and a
    group of ops never compiled before is the cold cache (the mean computed once after the loop): both stay
    in the run's finding."""
    st = ctx.steps
    if len(st) < 2 or not items:
        return [], items
    evals: dict[str, list[_Compile]] = defaultdict(list)  # an evaluation's compiles: a phase per calling line
    for c in items:
        p = in_evaluation(ctx, c)
        if p is not None:
            evals[p.call_site].append(c)
    in_eval = {c.row for cs in evals.values() for c in cs}
    items = [c for c in items if c.row not in in_eval]
    if not items:
        return list(evals.values()), []
    pos = st.iteration_at(np.array([c.ts for c in items], dtype=np.int64)) + 1
    by_step: dict[int, list[_Compile]] = defaultdict(list)
    for c, k in zip(items, pos.tolist(), strict=True):
        by_step[int(k)].append(c)
    by_top: dict[str, list[list[_Compile]]] = defaultdict(list)
    for _k, cs in sorted(by_step.items()):
        by_top[_top_site(cs)].append(cs)
    phases: list[list[_Compile]] = list(evals.values())
    rest: list[_Compile] = []
    for top, groups in by_top.items():
        if len(groups) == 1 and top and _novelty(ctx.trace, ctx, groups[0])[0]:
            phases.append(groups[0])
        else:
            rest += [c for g in groups for c in g]
    return phases, sorted(rest, key=lambda c: c.ts)


@register(Kind.FIRST_CALL_COMPILE)
def first_call_compile(trace: Trace, ctx: Context) -> list[Finding]:
    """Host time blocked compiling new signatures: a cold compile cache (each statement's first compile),
    compiles of new shapes (the same statement again: what `shape_churn` plans buckets for), and each phase
    after warm-up that compiled on its own (a first evaluation, a new batch size) as a finding at its line."""
    cc = classify_compiles(trace, ctx)
    first = sorted(cc.cold + cc.variants + cc.new_shapes, key=lambda c: c.ts)
    if not first:
        return []
    phases, recurring = _phases(ctx, _after_warmup(ctx, first))
    in_phase = {c.row for p in phases for c in p}
    out = [_phase_finding(trace, ctx, p, cc) for p in phases]
    main = [c for c in first if c.row not in in_phase]
    if main:
        out.insert(0, _run_finding(trace, ctx, main, cc, recurring))
    return out


def _what(items: list[_Compile]) -> tuple[str, int]:
    n_ops = len({c.name for c in items})
    return (f"{len(items)} compile{'s' if len(items) != 1 else ''} of {n_ops} op{'s' if n_ops != 1 else ''}",
            n_ops)


def _evidence(trace: Trace, ctx: Context, items: list[_Compile], cc: CompileClasses) -> dict[str, Any]:
    ts = np.array([c.ts for c in items], dtype=np.int64)
    dur = np.array([c.dur for c in items], dtype=np.int64)
    rows = {c.row for c in items}
    cold = [c for c in cc.cold + cc.variants if c.row in rows]
    new = [c for c in cc.new_shapes if c.row in rows]
    variants = [c for c in cc.variants if c.row in rows]
    by_op: dict[str, list[_Compile]] = defaultdict(list)
    for c in items:
        by_op[c.name].append(c)
    ops = sorted(by_op.items(), key=lambda kv: -sum(c.dur for c in kv[1]))
    modes, launch = launch_modes(trace, items)
    return {
        "compiles": len(items),
        "cold": {"count": len(cold), "ns": sum(c.dur for c in cold), "after_warmup": len(_in_steady(ctx, cold))},
        "new_shapes": {"count": len(new), "ns": sum(c.dur for c in new)},
        "new_arguments": {"count": len(variants), "ns": sum(c.dur for c in variants)},
        "sites": [g.to_dict() for g in compile_groups(trace, ctx, items)[:50]],
        "ops": [
            {"op": op, "compiles": len(cs), "ns": sum(c.dur for c in cs), "call_site": _top_site(cs),
             "signatures": list(dict.fromkeys(signature_text(c.signature) for c in cs))[:10]}
            for op, cs in ops[:20]
        ],
        "rows": [c.row for c in items[:200]],
        **({"launch_modes": dict(modes), "NEURON_LAUNCH_BLOCKING": launch} if modes else {}),
        **ctx.step_split(ts, dur),
    }


def _run_finding(trace: Trace, ctx: Context, first: list[_Compile], cc: CompileClasses,
                 recurring: list[_Compile]) -> Finding:
    """The run's compiles outside the phases: the cold cache of warm-up, and new shapes that recur."""
    ts = np.array([c.ts for c in first], dtype=np.int64)
    dur = np.array([c.dur for c in first], dtype=np.int64)
    cost = union_ns(ts, dur)
    st = ctx.steps
    rows = {c.row for c in first}
    new = [c for c in cc.new_shapes if c.row in rows]
    steady = _in_steady(ctx, first)
    groups = compile_groups(trace, ctx, first)
    top = groups[0]
    where = top.brief + (f" at {top.call_site}" if top.call_site else "")
    where += f", in the backward ({top.backward})" if top.backward else ""
    what, _ = _what(first)
    if new:
        title = (f"First-call compile stalls: {what} took {fmt_ns(cost)}; {len(new)} of them for new shapes "
                 f"(top: {where})")
    elif steady:
        title = f"First-call compile stalls after warm-up: {what} took {fmt_ns(cost)} (top: {where})"
    else:
        title = f"Cold compile cache: {what} took {fmt_ns(cost)} in warm-up (top: {where})"
    advice = (
        f"A persistent compile cache saves these on the next run ({CACHE_DIR_ENV}=/persistent/dir; the default "
        f"/tmp/neff_cache is lost on reboot); run warm-up steps before measuring."
    )
    if new:
        advice = (f"{len(new)} compiles were for new shapes of statements already compiled: pad inputs to a few "
                  f"bucket sizes (see shape_churn). " + advice)
    modes, launch = launch_modes(trace, first)
    if modes:
        advice += " " + _mode_text(modes, launch)
    # Severity: a cold cache paid in warm-up is expected (info); first compiles after warm-up are not. New
    # shapes are shape_churn's alarm (its bucket plan is the fix), not a second one here: they are not charged
    # (the cost floor still weighs them when no other finding counts them: `_overlap.cost_floor`).
    new_rows = {c.row for c in new}
    charged = sum(c.dur for c in steady if c.row not in new_rows)
    sev = severity_for(ctx.share(charged)) if charged and len(st) > st.warmup else "info"
    # its line: the statement that compiled most in all (`_top_site`), not the one costliest compile's (a cold
    # optimizer update outweighing each of a forward's many new shapes)
    site = _top_site(first) or top.call_site
    module = next((g.module for g in groups if g.call_site == site), top.module)
    return Finding(kind=Kind.FIRST_CALL_COMPILE, severity=sev, title=title, cost_ns=cost, share=ctx.share(cost),
                   count=len(first), call_site=site, module=module, advice=advice,
                   evidence=_evidence(trace, ctx, first, cc), ts_ns=int(ts.min()))


def _novelty(trace: Trace, ctx: Context, items: list[_Compile]) -> tuple[int, int]:
    """(new shapes, new dtypes or static arguments) among `items`, against every compile before them: the same
    op of the same module (outside a module: at the same line) compiled before for other shapes, or for the
    same shapes with other arguments; the rest are ops not run there before (a cold cache)."""
    t0 = min(c.ts for c in items)

    def where(c: _Compile) -> tuple[str, str]:  # the same op of the same module (or, outside one, line)
        return (c.name, c.module or c.call_site)

    earlier = [c for c in compiles(trace, ctx) if c.ts < t0]
    seen_shapes = {(where(c), signature_text(shapes_of(c.signature) or c.signature)) for c in earlier}
    seen_ops = {where(c) for c in earlier}
    n_new = n_var = 0
    for c in items:
        if (where(c), signature_text(shapes_of(c.signature) or c.signature)) in seen_shapes:
            n_var += 1
        elif where(c) in seen_ops:
            n_new += 1
    return n_new, n_var


def _phase_finding(trace: Trace, ctx: Context, items: list[_Compile], cc: CompileClasses) -> Finding:
    """One phase after warm-up that compiled on its own (a first evaluation, a new batch size)."""
    ts = np.array([c.ts for c in items], dtype=np.int64)
    dur = np.array([c.dur for c in items], dtype=np.int64)
    cost = union_ns(ts, dur)
    st = ctx.steps
    k = int(searchsorted(st.start_ns, int(ts.min()), side="right")) - 1
    when = f"step {k}" if k < len(st) and int(ts.min()) < int(st.end_ns[k]) else f"after step {k}"
    top = _top_site(items)
    shapes = sorted({signature_text(c.signature) for c in items if c.call_site == top})[:3]
    ev = in_evaluation(ctx, items[0])
    if ev is not None and ev.call_site:  # an evaluation's cause is its loop's call of the model
        top, when = ev.call_site, f"evaluation, {when}"
    what, _ = _what(items)
    kind = "new shapes" if _novelty(trace, ctx, items)[0] else "ops training never ran"
    title = f"Compiles mid-run at {top} ({when}): {what} for {kind} took {fmt_ns(cost)}"
    advice = (f"This phase ({when}, from {top}) compiled {kind} the training steps never ran"
              f"{' (' + '; '.join(shapes) + ')' if shapes else ''}. Run it once during warm-up, or give it the "
              f"shapes already compiled (split an evaluation set into the training batch size, pad the last "
              f"batch or drop it with drop_last=True); a persistent {CACHE_DIR_ENV} saves it on the next run.")
    share = ctx.share(cost)
    return Finding(kind=Kind.FIRST_CALL_COMPILE, severity=severity_for(share), title=title, cost_ns=cost,
                   share=share, count=len(items), call_site=top,
                   module=next((c.module for c in items if c.call_site == top and c.module), ""),
                   advice=advice, evidence={**_evidence(trace, ctx, items, cc), "phase": when,
                                            **({"evaluation": {"call_site": ev.call_site, "model_calls": ev.calls}}
                                               if ev is not None else {})},
                   ts_ns=int(ts.min()))


def _mode_text(modes: Counter[str], launch: str | None) -> str:
    """The sentence saying which mode ran (torch-neuronx-facts, "Corrections": release builds block, "1",
    unless NEURON_LAUNCH_BLOCKING is set; "0" compiles on a background thread)."""
    env = ("NEURON_LAUNCH_BLOCKING unset: the release default" if launch == "unset" else
           f"NEURON_LAUNCH_BLOCKING={launch}" if launch else "NEURON_LAUNCH_BLOCKING not recorded")
    if set(modes) == {"async"}:
        return (f"Compiles ran asynchronously ({env}) on the runtime's compile thread: the time shown is "
                f"what the host waited for them, charged to each wait (sync, .item(), copy to host) that "
                f"overlapped one.")
    if set(modes) == {"blocking"}:
        return (f"Compiles blocked the host ({env}): each op waited for its own compile; with "
                f"NEURON_LAUNCH_BLOCKING=0 the host runs on while the runtime compiles and pays only where "
                f"it waits.")
    return (f"Both modes ran ({env}): {modes['blocking']} blocking compiles (the op waited) and "
            f"{modes['async']} asynchronous ones (the host paid at its waits).")


def _recompile_limit_hits(trace: Trace, ctx: Context) -> int:
    rows = trace.instants_on(TrackKind.COMPILE)
    names = [trace.s(int(n)).lower() for n in trace.instants.name[rows]]
    return sum("recompile limit" in n or "cache_size_limit" in n or "cache size limit" in n for n in names)


@register(Kind.RECOMPILE)
def recompile(trace: Trace, ctx: Context) -> list[Finding]:
    """torch.compile frames compiled again, with the failed guards that caused it."""
    frames: dict[str, list[_Compile]] = defaultdict(list)
    for c in compiles(trace, ctx):
        if c.frame:
            frames[c.frame].append(c)
    limit_hits = _recompile_limit_hits(trace, ctx)
    out = []  # a signature compiled again because the cache lost it: `_cache_lost`
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
        ints = Counter(g.text for g in guards if g.what == "value")
        shaped = [d for d, _ in dims.most_common() if not any(g.dim == d and g.what == "value" for g in guards)]
        parts = ([f"{shaped[0]} varied"] if shaped else []) + [f"guard {t} failed" for t, _ in ints.most_common(2)]
        if parts:
            title += ": " + "; ".join(parts)
        advice = (
            "Each new shape compiles a new graph (Neuron compiles statically, dynamic=False). Pad inputs "
            "to a few bucket sizes (see shape_churn), or mark the varying dimension with "
            "torch._dynamo.mark_dynamic where the backend supports it."
        ) if shaped or not ints else ""
        if ints:
            names = sorted({g.name for g in guards if g.what == "value"})
            advice += (" " if advice else "") + (
                f"A Python int argument is specialised: each value of {', '.join(names)} compiles a graph of "
                f"its own (guard {ints.most_common(1)[0][0]}). Keep it constant across calls, or pass it as a "
                f"tensor.")
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
            "guards": [{"guard": t, "count": n} for t, n in ints.most_common(10)],
            "recompile_limit_hits": limit_hits,
            "rows": [c.row for c in again[:200]],
            **ctx.step_split(ts, dur),
        }
        out.append(
            Finding(
                kind=Kind.RECOMPILE,
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
