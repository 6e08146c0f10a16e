"""torch.compile graphs: every compile of one Dynamo graph together, whatever compiled it.

One graph (compile id "F/A": frame F, attempt A; A >= 1 is a recompile) costs several compiles: Dynamo's
frame compile (compile id F/A), the backend's compile of the forward graph into a NEFF (named by the backend,
"model_0_forward_0", at the graph's first run), AOTAutograd's lazy backward compile (compile id F/A, kind
``backward``) and the NEFF of the backward graph. The NEFF compiles carry no compile id: the host op that
paid for them says whose they are (torch-facts: at run time a graph runs inside ``Torch-Compiled Region:
F/A`` around ``CompiledFunction``; its backward, ``CompiledFunctionBackward``, is linked to that forward op
by autograd, `_backward`). The graph's input shapes are ``CompiledFunction``'s "Input Dims".

One rule for every view that lists compiles by graph (the TUI compile view, the report's compile waterfall).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.analysis.compile.events import _Compile, compiles, signature_text
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.intervals import union_ns
from neuron_prof.analysis.sites.backward import backward_of
from neuron_prof.analysis.sites.host import host_nesting, host_stack_at
from neuron_prof.model import Trace
from neuron_prof.model.order import searchsorted

REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")
"""Dynamo's span around one run of compiled graph F/A (torch-facts)."""
GRAPH_OP = "CompiledFunction"
"""AOTAutograd's op inside the region: its "Input Dims" are the graph's inputs (parameters included)."""


@dataclass
class GraphCompiles:
    """The compiles of torch.compile graph `frame`/`attempt`, in time order."""

    frame: str
    attempt: int
    name: str
    """The compiled frame's function (Dynamo's compile slice: "forward"), else "frame F"."""
    call_site: str
    """The user's line that ran the frame (Dynamo's compile's call site)."""
    module: str
    shapes: list[Any]
    """The graph's input shapes ("Input Dims" of CompiledFunction), [] when not recorded."""
    reason: str
    """Dynamo's recompile reason (the guard that failed); "" for a first compile."""
    rows: list[int] = field(default_factory=list)
    total_ns: int = 0
    """Time compiling this graph (overlapping compiles counted once)."""
    max_ns: int = 0
    first_ts: int = 0

    @property
    def compile_id(self) -> str:
        return f"{self.frame}/{self.attempt}"

    @property
    def frame_label(self) -> str:
        """The row every graph of this frame goes under: "forward (frame 0)"."""
        return f"{self.name} (frame {self.frame})"

    @property
    def signature(self) -> str:
        """The input shapes in one line ("[8, 16], [4]"); "" when not recorded."""
        return signature_text(self.shapes) if self.shapes else ""


def graph_of(trace: Trace, ctx: Context) -> dict[int, tuple[str, int]]:
    """Compile slice row -> (frame, attempt) of the torch.compile graph it compiled (eager ops: absent)."""
    return ctx.memo("compile_graph_of", lambda: _graph_of(trace, ctx))  # type: ignore[no-any-return]


def graph_compiles(trace: Trace, ctx: Context) -> list[GraphCompiles]:
    """Every torch.compile graph's compiles, in the order the graphs first compiled."""
    return ctx.memo("graph_compiles", lambda: _graphs(trace, ctx))  # type: ignore[no-any-return]


def _graph_of(trace: Trace, ctx: Context) -> dict[int, tuple[str, int]]:
    out: dict[int, tuple[str, int]] = {}
    todo: list[_Compile] = []
    for c in compiles(trace, ctx):
        if c.frame:
            out[c.row] = (c.frame, c.attempt)
        elif c.kind != "eager":
            todo.append(c)
    if not todo:
        return out
    n = host_nesting(ctx)
    bwd = backward_of(ctx)
    fl = trace.flows
    linked = np.isin(fl.dst, np.array([c.row for c in todo], dtype=np.int64))
    host_of = dict(zip(fl.dst[linked].tolist(), fl.src[linked].tolist(), strict=True))
    for c in todo:
        src = host_of.get(c.row)
        if src is None:  # no flow: the op the host was in when the compile started
            stack = host_stack_at(ctx, c.ts)
            src = stack[-1] if stack else None
        if src is not None:
            key = _region_of(trace, n.rows, n.parent, bwd.forward, int(src))
            if key is not None:
                out[c.row] = key
    return out


def _region_of(trace: Trace, rows: np.ndarray, parent: np.ndarray, forward: np.ndarray,
               row: int) -> tuple[str, int] | None:
    """The graph whose region holds host slice `row`, or holds the forward op of the backward `row` runs in."""
    p = int(searchsorted(rows, row))
    if p < len(rows) and rows[p] == row and forward[p] >= 0:
        row = int(forward[p])
    return _up_to_region(trace, rows, parent, row)


def _up_to_region(trace: Trace, rows: np.ndarray, parent: np.ndarray, row: int) -> tuple[str, int] | None:
    """The graph of the innermost ``Torch-Compiled Region`` span around host slice `row` (itself included)."""
    for _ in range(256):
        m = REGION.match(trace.slice_name(row))
        if m:
            return m.group(1), int(m.group(2))
        p = int(searchsorted(rows, row))
        if p >= len(rows) or rows[p] != row or parent[p] < 0:
            return None
        row = int(parent[p])
    return None


def _region_shapes(trace: Trace, ctx: Context) -> dict[tuple[str, int], list[Any]]:
    """(frame, attempt) -> the input shapes of CompiledFunction in the graph's first region."""
    n = host_nesting(ctx)
    sl = trace.slices
    op = trace.strings.get(GRAPH_OP)
    if op is None:
        return {}
    ops = n.rows[sl.name[n.rows] == op]
    out: dict[tuple[str, int], list[Any]] = {}
    for k in ops[np.argsort(sl.ts_ns[ops], kind="stable")].tolist():
        dims: Any = ctx.slice_args(k).get("Input Dims")
        key = _up_to_region(trace, n.rows, n.parent, k) if isinstance(dims, list) and dims else None
        if key is not None:
            out.setdefault(key, dims)
    return out


def _graphs(trace: Trace, ctx: Context) -> list[GraphCompiles]:
    of = graph_of(trace, ctx)
    if not of:
        return []
    shapes = _region_shapes(trace, ctx)
    by_key: dict[tuple[str, int], list[_Compile]] = {}
    for c in compiles(trace, ctx):  # time order
        if c.row in of:
            by_key.setdefault(of[c.row], []).append(c)
    names = {f: c.name for (f, _), cs in by_key.items() for c in cs if c.frame and c.kind != "backward"}
    out = []
    for (frame, attempt), cs in by_key.items():
        # Dynamo's compile of the frame carries the user's line; else a part compiled in the forward
        lead = next((c for c in cs if c.frame and c.kind != "backward"), None) \
            or next((c for c in cs if c.call_site and not c.backward), None)
        ts = np.array([c.ts for c in cs], dtype=np.int64)
        dur = np.array([c.dur for c in cs], dtype=np.int64)
        out.append(GraphCompiles(
            frame=frame, attempt=attempt, name=names.get(frame, f"frame {frame}"),
            call_site=lead.call_site if lead else "", module=lead.module if lead else "",
            shapes=shapes.get((frame, attempt), []), reason=lead.reason if lead else "",
            rows=[c.row for c in cs], total_ns=union_ns(ts, dur), max_ns=int(dur.max()), first_ts=int(ts.min()),
        ))
    return sorted(out, key=lambda g: g.first_ts)
