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
from neuron_prof.analysis._intervals import union_ns
from neuron_prof.analysis._registry import register
from neuron_prof.analysis._sites import sites_of
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
    backward: str = ""
    """The autograd node when the compile happened in the backward of the op at `call_site`
    (`Site.backward`)."""


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
    sites = sites_of(ctx)
    for r in rows[np.argsort(sl.ts_ns[rows], kind="stable")]:
        a = ctx.slice_args(int(r))
        site = sites.of_row(int(r))
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
            call_site=site.call_site,
            module=site.module or ctx.module(a),
            reason=str(a.get(Arg.RECOMPILE_REASON, "") or ""),
            args=a,
            backward=site.backward,
        )
        if m:
            c.frame, c.attempt = m.group(1), int(m.group(2))
        src = host_of.get(int(r))
        if src is not None:
            _from_host_op(ctx, c, int(src))
        out.append(c)
    return out


def _from_host_op(ctx: Context, c: _Compile, src: int) -> None:
    """Fill what the compile slice lacks from its host op: shapes ("Input Dims")."""
    if not shapes_of(c.signature):
        a = ctx.slice_args(src)
        dims = a.get("Input Dims")
        conc = a.get("Concrete Inputs")
        if isinstance(dims, list) and any(isinstance(d, list) and d for d in dims):
            c.signature = dims
        elif isinstance(conc, list) and any(conc):  # scalar arguments only (arange, full...): their values
            c.signature = "(" + ", ".join(str(x) for x in conc if x != "") + ")"
        elif isinstance(dims, list) and dims:
            c.signature = dims


def _top_site(items: list[_Compile]) -> str:
    cost: Counter[str] = Counter()
    for c in items:
        if c.call_site:
            cost[c.call_site] += c.dur
    return cost.most_common(1)[0][0] if cost else ""


def signature_text(sig: Any) -> str:
    """A compile signature in one line: text as it is, shape lists as "[8, 128], [128, 64]"."""
    if isinstance(sig, str):
        return sig
    shapes = shapes_of(sig)
    if shapes:
        return ", ".join(f"[{', '.join(str(d) for d in sh)}]" for sh in shapes)
    return str(sig)


@dataclass
class CompileGroup:
    """The compiles of one (op or graph, signature, call site)."""

    name: str
    signature: str
    call_site: str
    module: str
    kind: str
    rows: list[int] = field(default_factory=list)
    total_ns: int = 0
    max_ns: int = 0
    first_ts: int = 0
    backward: str = ""
    """The autograd node when these compiles happened in the backward of the op at `call_site`."""

    def to_dict(self) -> dict[str, Any]:
        d = {"op": self.name, "signature": self.signature, "call_site": self.call_site, "module": self.module,
             "count": len(self.rows), "total_ns": self.total_ns, "max_ns": self.max_ns}
        return {**d, "in_backward": self.backward} if self.backward else d


def compile_groups(trace: Trace, ctx: Context, items: list[_Compile] | None = None) -> list[CompileGroup]:
    """Compiles grouped by (op or graph, signature, call site), most total time first (the compile view's
    rows and the findings' evidence: one grouping)."""
    groups: dict[tuple[str, str, str], CompileGroup] = {}
    for c in compiles(trace, ctx) if items is None else items:
        site = c.call_site or c.args.get("function", "") or ""
        key = (c.name, signature_text(c.signature), site)
        g = groups.get(key)
        if g is None:
            g = groups[key] = CompileGroup(c.name, key[1], c.call_site, c.module, c.kind, first_ts=c.ts,
                                           backward=c.backward)
        g.rows.append(c.row)
        g.total_ns += c.dur
        g.max_ns = max(g.max_ns, c.dur)
    return sorted(groups.values(), key=lambda g: -g.total_ns)


def first_compiles(trace: Trace, ctx: Context) -> tuple[list[_Compile], list[_Compile]]:
    """(cold, new-shape) first-call compiles (cache misses of eager ops and first graphs): a statement's
    first compile fills a cold cache; a later one of the same (op, call site, module) compiles a new shape."""

    def split() -> tuple[list[_Compile], list[_Compile]]:
        # eager ops, first graphs of each frame (and their backward), NEFF compiles placed on graph spans;
        # compiles of a frame's later attempts are recompiles (see `recompile`)
        first = [c for c in compiles(trace, ctx) if c.cache == "miss" and c.attempt == 0]
        # a statement compiling several shapes in one step handles several tensors (each parameter in an
        # optimizer's loop); a shape new in a later step is churn. Without steps, every first compile is cold.
        # Position: how many steps have started by then (0 before the first: setup code).
        st = ctx.steps
        pos = np.searchsorted(st.start_ns, np.array([c.ts for c in first], dtype=np.int64), side="right") \
            if len(st) else np.zeros(len(first), dtype=np.int64)
        first_pos: dict[tuple[str, str, str], int] = {}
        cold, new = [], []
        for c, k in zip(first, pos.tolist(), strict=True):  # time order
            # a compiled graph is named per graph (model_forward_2): the statement that runs it is the key
            what = c.name if c.kind == "eager" else c.kind
            key = (what, c.call_site or c.args.get("function", "") or "", c.module)
            (new if len(st) and k > first_pos.setdefault(key, k) else cold).append(c)
        return cold, new

    return ctx.memo("first_compiles", split)  # type: ignore[no-any-return]


@register("first_call_compile")
def first_call_compile(trace: Trace, ctx: Context) -> list[Finding]:
    """Host time blocked compiling new signatures: a cold compile cache (each statement's first compile) and
    compiles of new shapes (the same statement again: what `shape_churn` plans buckets for)."""
    cold, new = first_compiles(trace, ctx)
    first = sorted(cold + new, key=lambda c: c.ts)
    if not first:
        return []
    ts = np.array([c.ts for c in first], dtype=np.int64)
    dur = np.array([c.dur for c in first], dtype=np.int64)
    cost = union_ns(ts, dur)
    split = ctx.step_split(ts, dur)
    st = ctx.steps
    steady = _in_steady(ctx, cold)
    cold_ns, new_ns = sum(c.dur for c in cold), sum(c.dur for c in new)
    groups = compile_groups(trace, ctx, first)
    by_op: dict[str, list[_Compile]] = defaultdict(list)
    for c in first:
        by_op[c.name].append(c)
    ops = sorted(by_op.items(), key=lambda kv: -sum(c.dur for c in kv[1]))
    top = groups[0]
    where = f"{top.name} [{top.signature}]" + (f" at {top.call_site}" if top.call_site else "")
    where += f", in the backward ({top.backward})" if top.backward else ""
    n_ops = len(by_op)
    what = f"{len(first)} compile{'s' if len(first) != 1 else ''} of {n_ops} op{'s' if n_ops != 1 else ''}"
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
    # shapes are shape_churn's alarm (its bucket plan is the fix), not a second one here.
    charged = sum(c.dur for c in steady)
    share = ctx.share(cost)
    sev = severity_for(ctx.share(charged)) if charged and len(st) > st.warmup else "info"
    ev: dict[str, Any] = {
        "compiles": len(first),
        "cold": {"count": len(cold), "ns": cold_ns, "after_warmup": len(steady)},
        "new_shapes": {"count": len(new), "ns": new_ns},
        "sites": [g.to_dict() for g in groups[:50]],
        "ops": [
            {"op": op, "compiles": len(cs), "ns": sum(c.dur for c in cs), "call_site": _top_site(cs),
             "signatures": list(dict.fromkeys(signature_text(c.signature) for c in cs))[:10]}
            for op, cs in ops[:20]
        ],
        "rows": [c.row for c in first[:200]],
        **({"launch_modes": dict(modes), "NEURON_LAUNCH_BLOCKING": launch} if modes else {}),
        **split,
    }
    return [
        Finding(
            kind="first_call_compile",
            severity=sev,
            title=title,
            cost_ns=cost,
            share=share,
            count=len(first),
            call_site=top.call_site,
            module=top.module,
            advice=advice,
            evidence=ev,
            ts_ns=int(ts.min()),
        )
    ]


MODE_ARG = "mode"
"""Compile event arg the Neuron adapter writes: "blocking" (the op waited) or "async" (the compile thread)."""


def launch_modes(trace: Trace, items: list[_Compile]) -> tuple[Counter[str], str | None]:
    """How many of `items` ran in each NEURON_LAUNCH_BLOCKING mode (their ``mode`` arg), and the variable
    as the capture saw it (``metadata["compile_cache"]``: "1", "0" or "unset"); empty without modes."""
    modes = Counter(str(c.args[MODE_ARG]) for c in items if c.args.get(MODE_ARG) in ("blocking", "async"))
    cc = trace.metadata.get("compile_cache")
    launch = cc.get("NEURON_LAUNCH_BLOCKING") if isinstance(cc, dict) else None
    return modes, str(launch) if launch is not None else None


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


def _in_steady(ctx: Context, items: list[_Compile]) -> list[_Compile]:
    """The compiles that happened in steady (after warm-up) steps; none with fewer than two steps (no
    iteration was seen twice: every first compile is warm-up)."""
    st = ctx.steps
    if len(st) < 2 or not items:
        return []
    k = st.step_index(np.array([c.ts for c in items], dtype=np.int64))
    return [c for c, i in zip(items, k, strict=True) if i >= st.warmup]


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
