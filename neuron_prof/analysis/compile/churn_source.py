"""Where churn's varying tensor is made: the user's statement that creates each new shape.

For eager ops, the first host op before each new value's first compile whose tensors hold that shape; for a
compiled frame, the first host op after the frame's previous compile with a tensor of the new size. The
statement found most often wins (`_first_maker`). Only ops the user's code made count (`_made_by_user`): a
tensor a library module makes inside itself (nn.MultiheadAttention's reshapes) is no origin to pad.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from neuron_prof.analysis.compile.events import _Compile
from neuron_prof.analysis.compile.shapes import shapes_of
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.sites.callsites import NO_STACK, Site, sites_of
from neuron_prof.model import KinetoCat, TrackKind
from neuron_prof.model.callsite import USER, file_kind, parse_frame
from neuron_prof.model.order import searchsorted


def creation_site(ctx: Context, items: list[dict[str, Any]]) -> Site:
    """Where the varying tensor is made: for each new value, the first host op before the first compile that
    saw it whose tensors include that compile's varying shape (a factory's size argument counts); the most
    frequent such statement."""
    firsts: dict[int, tuple[_Compile, tuple[int, ...]]] = {}
    for d in items:
        t, i = d["dim"].tensor, d["dim"].index
        for c in d["miss"]:
            sh = shapes_of(c.signature)
            if len(sh) > t and len(sh[t]) > i and (sh[t][i] not in firsts or c.ts < firsts[sh[t][i]][0].ts):
                firsts[sh[t][i]] = (c, sh[t])
    starts = sorted(c.ts for c, _ in firsts.values())
    searches, loose = [], []
    for v, (c, shape) in firsts.items():
        k = starts.index(c.ts)
        lo = max(starts[k - 1] if k else 0, _step_start(ctx, c.ts))
        searches.append((lo, c.ts, lambda shapes, want=list(shape): want in shapes))
        loose.append((lo, c.ts, lambda shapes, v=v: any(v in sh for sh in shapes)))
    # the exact shape first; when only a library made it (a module's reshape), the user's tensor with the size
    got = _first_maker(ctx, searches)
    return got if got.call_site else _first_maker(ctx, loose)


def frame_creation_site(ctx: Context, cs: list[_Compile], dim: str, sizes: dict[int, int]) -> Site:
    """Where a compiled frame's varying input is made: for each new size, the first host op after the previous
    compile of the frame (or the step's start) with a tensor of that size in that dimension."""
    m = re.search(r"(?:dim|index) (\d+)$", dim)
    if m is None:
        return NO_STACK
    index = int(m.group(1))
    starts = {c.attempt: c.ts for c in sorted(cs, key=lambda c: c.ts) if c.kind != "backward"}
    searches = []
    prev = 0
    for att in sorted(starts):
        t, value = starts[att], sizes.get(att)
        lo, prev = max(prev, _step_start(ctx, t)), t
        if value is not None:
            searches.append((lo, t, lambda shapes, v=value: any(len(sh) > index and sh[index] == v for sh in shapes)))
    return _first_maker(ctx, searches)


def _first_maker(ctx: Context, searches: list[tuple[int, int, Any]]) -> Site:
    """The statement most often making a tensor that a search's test accepts: per (start, end, test), the first
    host op in [start, end] whose tensors (`_shapes`) pass the test."""
    ops = _host_ops(ctx)
    ts = ctx.trace.slices.ts_ns[ops]
    sites = sites_of(ctx)
    votes: Counter[str] = Counter()
    found: dict[str, Site] = {}
    for lo, hi, test in searches:
        a, b = searchsorted(ts, lo, side="left"), searchsorted(ts, hi, side="right")
        for r in ops[a:b][:5000]:
            args = ctx.slice_args(int(r))
            if test(_shapes(args)):
                if not _made_by_user(args, sites.user_files):
                    continue  # a library module reshaped it (nn.MultiheadAttention): not where the user pads
                site = sites.of_row(int(r))
                if site.call_site:
                    votes[site.call_site] += 1
                    found[site.call_site] = site
                break
    return found[votes.most_common(1)[0][0]] if votes else NO_STACK


def _made_by_user(args: dict[str, Any], user_files: frozenset[str] | None) -> bool:
    """Whether the user's code made this op's tensors itself: the innermost entry of its ``Call stack`` is a
    frame of the user's files, not a library's (a module span, torch's own code). An op without a stack (nested
    in another) counts: its outer op was found first if it held the shape."""
    stack = args.get("Call stack")
    if not isinstance(stack, str) or not stack:
        return True
    inner = stack.split(";", 1)[0]
    f = parse_frame(inner)
    if f is None:
        return False  # "nn.Module: MultiheadAttention_0": inside a module's own code
    return f[0] in user_files if user_files is not None else file_kind(f[0]) == USER


def _shapes(args: dict[str, Any]) -> list[list[int]]:
    """The tensor shapes an op's args show: "Input Dims" and size arguments in "Concrete Inputs"."""
    out = [d for d in args.get("Input Dims") or [] if isinstance(d, list) and all(isinstance(x, int) for x in d)]
    for x in args.get("Concrete Inputs") or []:
        if isinstance(x, str) and x.startswith("[") and x.endswith("]"):
            try:
                out.append([int(v) for v in x[1:-1].split(",") if v.strip()])
            except ValueError:
                continue
    return out


def _host_ops(ctx: Context) -> np.ndarray:
    """Host cpu_op rows in time order (computed once)."""

    def build() -> np.ndarray:
        rows = ctx.cat_rows(ctx.rows(TrackKind.THREAD), (KinetoCat.CPU_OP,))
        return rows[np.argsort(ctx.trace.slices.ts_ns[rows], kind="stable")]

    return ctx.memo("churn_host_ops", build)  # type: ignore[no-any-return]


def _step_start(ctx: Context, t: int) -> int:
    st = ctx.steps
    k = st.step_index(np.array([t], dtype=np.int64))[0] if len(st) else -1
    return int(st.start_ns[k]) if k >= 0 else 0
