"""Shape churn: ops or graphs compiled for many sizes of one dimension, with an exact bucket plan.

Frames (torch.compile): sizes from the failed guards of recompile reasons, calls per graph from
"Torch-Compiled Region: F/k" spans. Eager ops: sizes from their signatures (or the host op's
"Input Dims"), calls from the host op spans. Eager ops whose varying dimension took the same values
(one sequence length feeding many ops) make one finding. Its cost is the compile time bucketing
saves, so it can overlap `recompile` and `first_call_compile`, which say what compiling cost.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import numpy as np

from neuron_prof.analysis.compile.buckets import ShapePlan, choose_plan, min_waste_table, plan_shapes
from neuron_prof.analysis.compile.churn_source import creation_site, frame_creation_site
from neuron_prof.analysis.compile.events import _CID, _Compile, _top_site, compiles
from neuron_prof.analysis.compile.shapes import parse_reason, shapes_of, varying_dims
from neuron_prof.analysis.context import Context, severity_for
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.registry import register
from neuron_prof.analysis.sites.callsites import Site
from neuron_prof.model import Trace, TrackKind
from neuron_prof.model.order import searchsorted

MIN_VALUES = 3
"""Fewer distinct sizes than this is not churn (a last smaller batch is normal)."""


def _frame_sizes(trace: Trace, cs: list[_Compile]) -> tuple[str, dict[int, int]] | None:
    """(dim label, attempt -> size) for the dimension that varied most in a frame's recompile reasons."""
    per_attempt: dict[int, list[Any]] = {}
    for c in cs:
        if c.kind != "backward":
            per_attempt.setdefault(c.attempt, []).extend(
                g for g in parse_reason(c.reason) if g.what == "size"
            )
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
        if s.startswith(prefix) and s[len(prefix) :].isdigit():
            out[int(s[len(prefix) :])] = int(np.count_nonzero(trace.slices.name[host] == sid))
    return out


def _op_call_counts(trace: Trace, ctx: Context, op: str, tensor: int, index: int) -> Counter[int]:
    """Calls of host op `op` per size of (input `tensor`, dim `index`), from Kineto "Input Dims"."""
    base = op.removeprefix("aten::").split(".")[0]
    names = {op, op.removeprefix("aten::"), base, "aten::" + base}
    rows = ctx.name_rows(ctx.rows(TrackKind.THREAD), names)
    counts: Counter[int] = Counter()
    for r in rows[:200_000]:
        dims = ctx.slice_args(int(r)).get("Input Dims")
        if (
            isinstance(dims, list)
            and len(dims) > tensor
            and isinstance(dims[tensor], list)
            and len(dims[tensor]) > index
            and isinstance(dims[tensor][index], int)  # a tensor list's entry is a list of shapes
        ):
            counts[int(dims[tensor][index])] += 1
    return counts


def _op_shape_counts(trace: Trace, ctx: Context, op: str, tensor: int) -> Counter[tuple[int, ...]]:
    """Calls of host op `op` per whole shape of its input `tensor` (every dimension), from "Input Dims"."""
    base = op.removeprefix("aten::").split(".")[0]
    rows = ctx.name_rows(ctx.rows(TrackKind.THREAD), {op, op.removeprefix("aten::"), base, "aten::" + base})
    counts: Counter[tuple[int, ...]] = Counter()
    for r in rows[:200_000]:
        dims = ctx.slice_args(int(r)).get("Input Dims")
        if isinstance(dims, list) and len(dims) > tensor and isinstance(dims[tensor], list) \
                and dims[tensor] and all(isinstance(x, int) for x in dims[tensor]):
            counts[tuple(int(x) for x in dims[tensor])] += 1
    return counts


def _shape_plan(trace: Trace, ctx: Context, op: str, tensor: int, miss: list[_Compile]) -> ShapePlan | None:
    """The plan for every varying dimension of the tensor whose churn this is (the batch dimension too)."""
    counts = _op_shape_counts(trace, ctx, op, tensor)
    if not counts:  # no host op shapes: the compiled signatures, once each
        counts = Counter(sh[tensor] for sh in (shapes_of(c.signature) for c in miss) if len(sh) > tensor)
    return plan_shapes(dict(counts)) if counts else None


def _plan_text(sp: ShapePlan) -> str:
    """'dim 0 to [16] (the last smaller batch), dim 1 to [40]'."""
    return ", ".join(f"dim {i} to {list(p.buckets)}" + (" (the last smaller batch: pad it or drop it with "
                                                        "DataLoader(drop_last=True))" if last else "")
                     for i, p, last in sp.dims)


def _churn_finding(
    ctx: Context,
    subject: str,
    what: str,
    dim: str,
    sizes: list[int],
    counts: list[int],
    cs: list[_Compile],
    ops: list[dict[str, Any]] | None = None,
    created: Site | None = None,
    shape_plan: ShapePlan | None = None,
) -> Finding:
    plan = choose_plan(sizes, counts)
    table = min_waste_table(sizes, counts, 8)
    compile_ns = sum(c.dur for c in cs if c.cache == "miss")
    n = plan.compiles_before
    # every op (or graph) compiles once per size; bucketing leaves k of the n
    saved = int(compile_ns * max(n - plan.k, 0) / n) if n else 0
    share = ctx.share(saved)
    distinct = sorted(set(sizes))
    title = f"Shape churn in {what} {subject}: {dim} took {n} values; {plan.describe()}"
    advice = (
        f"Pad {dim} up to the buckets {list(plan.buckets)} (e.g. with torch.nn.functional.pad or a "
        f"collate_fn) so only {plan.k} signature{'s' if plan.k != 1 else ''} compile; this costs "
        f"{plan.waste_share:.0%} extra padded elements."
    )
    ev = {
        "subject": subject,
        "dimension": dim,
        "values": distinct[:200],
        "counts": sorted([int(s), int(c)] for s, c in zip(sizes, counts, strict=True)),
        "plan": plan.to_dict(),
        "plans": [p.to_dict() for p in table],
        "compile_ns": compile_ns,
        "rows": [c.row for c in cs[:200]],
    }
    if ops:
        ev["ops"] = ops[:50]
    site = created if created is not None and created.call_site else None
    if shape_plan is not None:
        ev["shape_plan"] = shape_plan.to_dict()
        if len(shape_plan.dims) > 1 or any(last for _, _, last in shape_plan.dims):
            made = f"the tensor made at {site.call_site}" if site is not None else f"{subject}'s input"
            title += (f"; every varying dimension: {shape_plan.shapes_before} shapes -> "
                      f"{shape_plan.shapes_after}, +{shape_plan.waste_share:.0%} padded")
            advice = (f"Pad {made}: {_plan_text(shape_plan)}, so only {shape_plan.shapes_after} shape"
                      f"{'s' if shape_plan.shapes_after != 1 else ''} compile (+{shape_plan.waste_share:.0%} "
                      f"padded elements; e.g. torch.nn.functional.pad or a collate_fn).")
    if site is not None:
        ev["created_at"] = site.call_site
        ev.update(site.evidence())
    ev["compiled_at"] = sorted({c.call_site for c in cs if c.call_site})[:20]
    return Finding(
        kind=Kind.SHAPE_CHURN,
        severity=severity_for(share, "warning"),
        title=title,
        cost_ns=saved,
        share=share,
        count=n,
        call_site=site.call_site if site is not None else _top_site(cs),
        module=next((c.module for c in cs if c.module), ""),
        advice=advice,
        evidence=ev,
        ts_ns=min(c.ts for c in cs),
    )


@register(Kind.SHAPE_CHURN)
def shape_churn(trace: Trace, ctx: Context) -> list[Finding]:
    """Ops or frames compiled for 3+ sizes of one dimension, with the exact bucket plan."""
    out = []
    all_c = compiles(trace, ctx)
    frames: dict[str, list[_Compile]] = defaultdict(list)
    # eager ops: one statement at a time (the same op at two lines or in two modules is two tensors)
    eager: dict[tuple[str, str, str], list[_Compile]] = defaultdict(list)
    for c in all_c:
        if c.frame:
            frames[c.frame].append(c)
        else:
            eager[(c.name, c.call_site or str(c.args.get("function", "")), c.module)].append(c)
    for frame, cs in frames.items():
        found = _frame_sizes(trace, cs)
        if not found:
            continue
        dim, by_att = found
        if len(set(by_att.values())) < MIN_VALUES:
            continue
        calls = _region_counts(trace, ctx, frame)
        sizes = list(by_att.values())
        counts = [max(calls.get(a, 1), 1) for a in by_att]
        name = next((c.name for c in cs if c.attempt == 0), cs[0].name)
        created = frame_creation_site(ctx, cs, dim, by_att)
        out.append(_churn_finding(ctx, f"{name} (frame {frame})", "graph", dim, sizes, counts, cs, created=created))
    eager_found, keys = _eager_churn(trace, ctx, eager)
    # a graph and the eager ops around it that took the same sizes: one cause (the input that varies)
    keys += [(("ratio", *(round(v / f.evidence["values"][0], 6) for v in f.evidence["values"])),) for f in out]
    findings = eager_found + out
    return [_merge(ctx, [findings[i] for i in members]) for members in _connected(keys)]


def _eager_churn(trace: Trace, ctx: Context, eager: dict[tuple[str, str, str], list[_Compile]]
                 ) -> tuple[list[Finding], list[tuple[tuple[Any, ...], ...]]]:
    """One finding per set of values that ops' varying dimensions took, and each one's merge keys."""
    groups: dict[tuple[int, ...], list[dict[str, Any]]] = defaultdict(list)
    for (op, _site, _module), cs in eager.items():
        for miss in _lineages(ctx, [c for c in cs if c.cache == "miss"]):
            uniq = list(dict.fromkeys(s for s in (shapes_of(c.signature) for c in miss) if s))
            if len(uniq) < MIN_VALUES:
                continue
            vd = varying_dims(uniq)
            if not vd or len(set(vd[0].values)) < MIN_VALUES:
                continue
            vals = tuple(sorted(set(vd[0].values)))
            groups[vals].append({"op": op, "dim": vd[0], "miss": miss, "ns": sum(c.dur for c in miss)})
    found: list[Finding] = []
    keys: list[tuple[tuple[Any, ...], ...]] = []
    for vals, items in groups.items():
        items.sort(key=lambda d: -d["ns"])
        top = items[0]
        calls = _op_call_counts(trace, ctx, top["op"], top["dim"].tensor, top["dim"].index)
        counts = [max(calls.get(x, 1), 1) for x in vals]
        subject = top["op"] if len(items) == 1 else f"{top['op']} and {len(items) - 1} more ops"
        ops = [
            {"op": d["op"], "dimension": d["dim"].label, "compiles": len(d["miss"]), "ns": d["ns"]}
            for d in items
        ]
        f = _churn_finding(
            ctx,
            subject,
            "op" if len(items) == 1 else "ops",
            top["dim"].label,
            list(vals),
            counts,
            [c for d in items for c in d["miss"]],
            ops=ops,
            created=creation_site(ctx, items),
            shape_plan=_shape_plan(trace, ctx, top["op"], top["dim"].tensor, top["miss"]),
        )
        seen = _first_seen_key(ctx, items, vals)
        if seen[0] == "steps" and len(seen) == 2:
            continue  # every size came in one step: distinct tensors (parameters), not sizes changing in time
        found.append(f)
        # same cause: new values in the same steps, or values in the same proportions (T and B*T)
        keys.append((seen, ("ratio", *(round(v / vals[0], 6) for v in vals))))
    return found, keys


def _lineages(ctx: Context, cs: list[_Compile]) -> list[list[_Compile]]:
    """A statement's compiles split by tensor: shapes compiled in the same step are different tensors (the
    weights and activations one backward line multiplies); a shape new in a later step continues the tensor
    whose last shape it differs from least (same ranks, fewest dimensions changed)."""
    st = ctx.steps
    if not len(st) or not cs:
        return [cs]  # no steps: nothing tells one tensor from another
    pos = searchsorted(st.start_ns, np.array([c.ts for c in cs], dtype=np.int64), side="right")
    lines: list[list[_Compile]] = []
    shapes: list[tuple[tuple[int, ...], ...]] = []
    taken: dict[int, set[int]] = defaultdict(set)  # step position -> lineages given a shape in that step
    for c, k in zip(cs, pos.tolist(), strict=True):
        sh = shapes_of(c.signature)
        best, best_d = -1, None
        for i, prev in enumerate(shapes):
            if i in taken[k] or [len(x) for x in prev] != [len(x) for x in sh]:
                continue
            d = sum(a != b for x, y in zip(prev, sh, strict=True) for a, b in zip(x, y, strict=True))
            if best_d is None or d < best_d:
                best, best_d = i, d
        if best < 0:
            best = len(lines)
            lines.append([])
            shapes.append(sh)
        lines[best].append(c)
        shapes[best] = sh
        taken[k].add(best)
    return lines


def _connected(keys: list[tuple[tuple[Any, ...], ...]]) -> list[list[int]]:
    """Indices grouped so that items sharing any key end up together (union-find)."""
    parent = list(range(len(keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[tuple[Any, ...], int] = {}
    for i, ks in enumerate(keys):
        for k in ks:
            if k in owner:
                parent[root(i)] = root(owner[k])
            else:
                owner[k] = i
    comps: dict[int, list[int]] = defaultdict(list)
    for i in range(len(keys)):
        comps[root(i)].append(i)
    return list(comps.values())


def _first_seen_key(ctx: Context, items: list[dict[str, Any]], vals: tuple[int, ...]) -> tuple[Any, ...]:
    """The steps in which new values of the dimension first appeared: one input shape changing per step
    shows up as several dimensions (T, B*T, ...) that all gain a value in the same steps."""
    first: dict[int, int] = {}
    for d in items:
        t, i = d["dim"].tensor, d["dim"].index
        for c in d["miss"]:
            sh = shapes_of(c.signature)
            if len(sh) > t and len(sh[t]) > i:
                v = sh[t][i]
                first[v] = min(first.get(v, c.ts), c.ts)
    steps = ctx.steps.step_index(np.fromiter(first.values(), dtype=np.int64, count=len(first)))
    if not len(steps) or (steps < 0).any():
        return ("values", vals)
    return ("steps", *sorted(set(steps.tolist())))


def _merge(ctx: Context, fs: list[Finding]) -> Finding:
    """One finding for churn with one cause: the costliest dimension's plan, the others as `related`."""
    if len(fs) == 1:
        return fs[0]
    fs = sorted(fs, key=lambda f: -f.cost_ns)
    main = fs[0]
    cost = sum(f.cost_ns for f in fs)
    # the line that makes the varying tensor, whichever of them found it
    created = next((f for f in fs if f.evidence.get("created_at")), main)
    n_ops = sum(len(f.evidence.get("ops", [])) or 1 for f in fs)
    ev = dict(main.evidence)
    for k in ("created_at", "stack", "site_unknown", "function"):
        ev.pop(k, None)
        if k in created.evidence:
            ev[k] = created.evidence[k]
    ev["related"] = [
        {k: f.evidence[k] for k in ("subject", "dimension", "values", "plan", "ops") if k in f.evidence}
        for f in fs[1:]
    ]
    ev["rows"] = sorted({r for f in fs for r in f.evidence["rows"]})[:200]
    plan = main.evidence["plan"]
    title = (
        f"Shape churn: {n_ops} ops recompiled as {main.evidence['dimension']} of {main.evidence['subject']} "
        f"took {plan['compiles_before']} values (and {len(fs) - 1} related dimension"
        f"{'s' if len(fs) > 2 else ''}); {plan['compiles_before']} compiles -> {plan['k']} "
        f"bucket{'s' if plan['k'] != 1 else ''} "
        f"{plan['buckets']}, +{plan['waste_share']:.0%} padded"
    )
    sp = ev.get("shape_plan")
    if sp and (len(sp["dims"]) > 1 or any(d["last_batch"] for d in sp["dims"])):
        title += f"; every varying dimension: {sp['shapes_before']} shapes -> {sp['shapes_after']}, " \
                 f"+{sp['waste_share']:.0%} padded"
    share = ctx.share(cost)
    return Finding(
        kind=Kind.SHAPE_CHURN,
        severity=severity_for(share, "warning"),
        title=title,
        cost_ns=cost,
        share=share,
        count=main.count,
        call_site=created.call_site,
        module=created.module,
        advice=main.advice + " The related dimensions change with it (see evidence.related).",
        evidence=ev,
        ts_ns=min(f.ts_ns or 0 for f in fs),
    )
