"""The compile records every compile finding and view reads: parsed once per context, grouped, classified.

Reads the ``compile`` track (schema: one slice per compile; args compile_kind, signature, cache,
call_site, module, compile_id, recompile_reason) and the flows from the host op that paid for each compile.
The findings on them are in `_compile` (first-call stalls, recompiles), `_churn` and `_cache_lost`.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.analysis.compile.shapes import shapes_of
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.fmt import brief_shapes
from neuron_prof.analysis.sites.callsites import sites_of
from neuron_prof.analysis.steps.evaluation import EvalPass, pass_at
from neuron_prof.model import Arg, Trace, TrackKind

CACHE_DIR_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
"""Where torch-neuronx keeps compiled NEFFs between runs (the advice of the compile findings)."""
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
    in_order = rows[np.argsort(sl.ts_ns[rows], kind="stable")].tolist()
    for r, site in zip(in_order, sites.of_rows(in_order), strict=True):
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

    @property
    def label(self) -> str:
        """`name [signature]`, or the name alone when the signature is not known."""
        return f"{self.name} [{self.signature}]" if self.signature else self.name

    @property
    def brief(self) -> str:
        """`label` for a title: the signature's first shapes and their count (`brief_shapes`)."""
        return f"{self.name} [{brief_shapes(self.signature)}]" if self.signature else self.name

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


@dataclass
class CompileClasses:
    """Every cache-missing compile, by what it was (one classification for every finding and view)."""

    cold: list[_Compile] = field(default_factory=list)
    """A statement's first compile of an op or graph: a cold cache."""
    new_shapes: list[_Compile] = field(default_factory=list)
    """A statement compiling again, in a later step, for tensor shapes it had not compiled."""
    variants: list[_Compile] = field(default_factory=list)
    """A statement compiling again, in a later step, for shapes it had compiled: another dtype or static
    argument (an optimizer's scalars once its state exists), not new shapes."""
    again: list[_Compile] = field(default_factory=list)
    """A signature compiled before in this trace compiled again: the compile cache no longer held it (cleared
    or evicted). Reported by `recompile`, never as new shapes."""


def _signature_key(c: _Compile) -> tuple[str, str]:
    """What the compile cache keys on: the backend's own signature when it gives one, else op and shapes."""
    sig = c.args.get(Arg.SIGNATURE)
    return (c.name, str(sig) if sig else signature_text(c.signature))


def classify_compiles(trace: Trace, ctx: Context) -> CompileClasses:
    """Cache-missing compiles of eager ops and first graphs, classified (computed once per context)."""

    def split() -> CompileClasses:
        # eager ops, first graphs of each frame (and their backward), NEFF compiles placed on graph spans;
        # compiles of a frame's later attempts are recompiles (see `recompile`)
        first = [c for c in compiles(trace, ctx) if c.cache == "miss" and c.attempt == 0]
        # a statement compiling several shapes in one step handles several tensors (each parameter in an
        # optimizer's loop); a shape new in a later step is churn. Without steps, every first compile is cold.
        # Position: how many steps have started by then (0 before the first: setup code).
        st = ctx.steps
        pos = st.iteration_at(np.array([c.ts for c in first], dtype=np.int64)) + 1 \
            if len(st) else np.zeros(len(first), dtype=np.int64)
        first_pos: dict[tuple[str, str, str], int] = {}
        shapes_seen: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        compiled: set[tuple[str, str]] = set()
        out = CompileClasses()
        for c, k in zip(first, pos.tolist(), strict=True):  # time order
            sig = _signature_key(c)
            if sig in compiled and c.kind == "eager":
                out.again.append(c)
                continue
            compiled.add(sig)
            # a compiled graph is named per graph (model_forward_2): the statement that runs it is the key
            what = c.name if c.kind == "eager" else c.kind
            key = (what, c.call_site or c.args.get("function", "") or "", c.module)
            shapes = signature_text(shapes_of(c.signature) or c.signature)
            later = len(st) and k > first_pos.setdefault(key, k)
            if not later:
                out.cold.append(c)
            elif shapes in shapes_seen[key]:
                out.variants.append(c)
            else:
                out.new_shapes.append(c)
            shapes_seen[key].add(shapes)
        return out

    return ctx.memo("compile_classes", split)  # type: ignore[no-any-return]


MODE_ARG = "mode"
"""Compile event arg the Neuron adapter writes: "blocking" (the op waited) or "async" (the compile thread)."""


def launch_modes(trace: Trace, items: list[_Compile]) -> tuple[Counter[str], str | None]:
    """How many of `items` ran in each NEURON_LAUNCH_BLOCKING mode (their ``mode`` arg), and the variable
    as the capture saw it (``metadata["compile_cache"]``: "1", "0" or "unset"); empty without modes."""
    modes = Counter(str(c.args[MODE_ARG]) for c in items if c.args.get(MODE_ARG) in ("blocking", "async"))
    cc = trace.metadata.get("compile_cache")
    launch = cc.get("NEURON_LAUNCH_BLOCKING") if isinstance(cc, dict) else None
    return modes, str(launch) if launch is not None else None


def eval_passes(ctx: Context) -> list[EvalPass]:
    """The trace's evaluation passes (`steps.evaluation`), computed once per context."""
    return ctx.eval_passes()


def in_evaluation(ctx: Context, c: _Compile) -> EvalPass | None:
    """The evaluation pass a compile happened in, after the first training step; None otherwise."""
    st = ctx.steps
    p = pass_at(eval_passes(ctx), c.ts)
    return p if p is not None and len(st) >= 1 and p.start_ns >= int(st.end_ns[0]) else None


def _after_warmup(ctx: Context, items: list[_Compile]) -> list[_Compile]:
    """The compiles once warm-up is over: in a steady step's iteration, between two, or after the last (an
    evaluation after training), and those of an evaluation pass after the first step (its own phase, whatever
    step's window it falls in); none with fewer than two steps. The tail of the last warm-up iteration (after
    its update) is warm-up, though the next step's window holds it (`Steps.iteration_at`)."""
    st = ctx.steps
    if len(st) < 2 or not items:
        return []
    k = st.iteration_at(np.array([c.ts for c in items], dtype=np.int64))
    return [c for c, i in zip(items, k.tolist(), strict=True)
            if i >= st.warmup or in_evaluation(ctx, c) is not None]


def _in_steady(ctx: Context, items: list[_Compile]) -> list[_Compile]:
    """The compiles that happened in steady (after warm-up) steps; none with fewer than two steps (no
    iteration was seen twice: every first compile is warm-up)."""
    st = ctx.steps
    if len(st) < 2 or not items:
        return []
    k = st.iteration_index(np.array([c.ts for c in items], dtype=np.int64))
    return [c for c, i in zip(items, k, strict=True) if i >= st.warmup]
