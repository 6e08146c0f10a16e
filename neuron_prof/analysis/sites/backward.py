"""Backward ops -> the forward op that created them (autograd), for the call-site rules (`_sites`).

Autograd runs a node's backward (``LinalgQrBackward0`` inside ``autograd::engine::evaluate_function:
LinalgQrBackward0``) on its own thread, under the ``loss.backward()`` line: a line where the user can change
nothing. The forward op that created the node carries the user's line, and Kineto links the two:

1. a ``fwdbwd`` flow from the forward op to the backward span (torch.profiler writes one per node whose
   forward op is in the same trace: `generateForwardBackwardLink` in torch/csrc/autograd/profiler_kineto.cpp);
2. failing that, the autograd sequence number: the backward span's ``Sequence number`` is its forward op's,
   and its ``Fwd thread id`` is non-zero (forward ops write 0). As Kineto does, among the forward ops with
   that number in the process, the one that started last (before the backward span) is the creator.

A node that no forward op makes (``AccumulateGrad``, a leaf's gradient accumulator, where DDP's reducer hooks
launch their all-reduces) carries no sequence number in a trace whose other nodes do: its forward is
`NO_FORWARD`, and `_sites` charges it to the ``backward()`` call that started the pass.

Every host slice nested in a backward span is in that node's backward. Vectorised over the host nesting.
The user's own code that runs in a backward (a custom `autograd.Function.backward`, a hook) keeps its own
lines: that is `_sites`' rule, which reads `root` for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from neuron_prof.analysis.context import Context, as_int
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.analysis.steps.evaluation import FWD_KEY, SEQ_KEY, doc_numbers
from neuron_prof.model import KinetoCat
from neuron_prof.model.schema import AUTOGRAD_EVALUATE

EVALUATE = AUTOGRAD_EVALUATE
FWDBWD = "fwdbwd"
SEQ = "Sequence number"
FWD_TID = "Fwd thread id"
_NODE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*Backward\d*$")

NOT_BACKWARD = -1
UNKNOWN_FORWARD = -2
NO_FORWARD = -3


@dataclass(frozen=True, eq=False)
class Backward:
    """Per host slice (aligned with `host_nesting(ctx).rows`)."""

    forward: np.ndarray
    """The forward op's slice row; NOT_BACKWARD in the forward; UNKNOWN_FORWARD in a backward whose forward
    op is not in the trace (it ran before the window, or the trace has neither flows nor sequence numbers);
    NO_FORWARD in a node no forward op makes (no sequence number where the others have one: AccumulateGrad)."""
    node: np.ndarray
    """String id of the innermost backward span the slice runs in (its evaluate_function or node span; read it
    with `node_name`); 0 in the forward."""
    forward_op: np.ndarray
    """String id of the user's forward call that made the node (the outermost host op around `forward`)."""
    root: np.ndarray
    """Position (in the host rows) of the outermost backward span the slice runs in; -1 in the forward."""


def node_name(name: str) -> str:
    """The autograd node a backward span runs: "LinalgQrBackward0" for itself or its evaluate_function."""
    return name[len(EVALUATE):] if name.startswith(EVALUATE) else name


def backward_of(ctx: Context) -> Backward:
    """Which host slices run in the backward of which forward op (computed once per context)."""
    return ctx.memo("backward", lambda: _build(ctx))  # type: ignore[no-any-return]


def _roots(ctx: Context, rows: np.ndarray) -> np.ndarray:
    """Positions (into `rows`) of the backward spans: evaluate_function spans and autograd node spans."""
    tr = ctx.trace
    names = tr.slices.name[rows]
    uniq = np.unique(names)
    want = [int(i) for i in uniq if (lambda s: s.startswith(EVALUATE) or bool(_NODE.match(s)))(tr.s(int(i)))]
    return np.flatnonzero(np.isin(names, np.asarray(want, dtype=names.dtype)))


def _by_sequence(ctx: Context, rows: np.ndarray, in_bwd: np.ndarray, todo: np.ndarray) -> dict[int, int]:
    """Backward span position -> forward row, by autograd sequence number (rule 2 of the module docstring);
    NO_FORWARD for a span without a sequence number in a trace that records them."""
    tr = ctx.trace
    sl = tr.slices
    seq = doc_numbers(ctx.trace, SEQ_KEY)
    if not seq:
        return {}
    todo_docs = sl.args[rows[todo]]
    out: dict[int, int] = {int(p): NO_FORWARD for p, d in zip(todo.tolist(), todo_docs.tolist(), strict=True)
                           if seq.get(int(d), -1) < 0}
    fwd_tid = doc_numbers(ctx.trace, FWD_KEY)
    proc_of_track = np.array([t.process for t in tr.tracks] or [0], dtype=np.int64)
    docs = sl.args[rows]
    cand: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for i in np.flatnonzero(np.isin(docs, np.fromiter(seq.keys(), dtype=np.int64)) & ~in_bwd).tolist():
        d = int(docs[i])
        if fwd_tid.get(d, 0) > 0 or seq[d] < 0:
            continue
        r = int(rows[i])
        cand.setdefault((int(proc_of_track[sl.track[r]]), seq[d]), []).append((int(sl.ts_ns[r]), r))
    for p in todo.tolist():
        if p in out:
            continue
        r = int(rows[p])
        a = ctx.slice_args(r)
        s = as_int(a.get(SEQ), -1)
        if s < 0 or as_int(a.get(FWD_TID), 0) <= 0:
            continue
        got = [c for c in cand.get((int(proc_of_track[sl.track[r]]), s), []) if c[0] <= int(sl.ts_ns[r])]
        if got:
            out[p] = max(got)[1]
    return out


def _build(ctx: Context) -> Backward:
    tr = ctx.trace
    sl = tr.slices
    n = host_nesting(ctx)
    rows = n.rows
    m = len(rows)
    dt = rows.dtype  # rows and positions: `row_dtype`; string ids: the name column's
    forward = np.full(m, NOT_BACKWARD, dtype=dt)
    node = np.zeros(m, dtype=sl.name.dtype)
    fop = np.zeros(m, dtype=sl.name.dtype)
    roots = _roots(ctx, rows)
    if not len(roots):
        return Backward(forward, node, fop, np.full(m, -1, dtype=dt))
    pos_parent = n.parent_pos  # rows ascend: a parent's position in them
    # each root's forward row: a fwdbwd flow to it, else one to the root just inside/around it, else by seq nr
    root_fwd = np.full(len(roots), NOT_BACKWARD, dtype=np.int64)
    fl = tr.flows
    cat = tr.strings.get(FWDBWD)
    if cat is not None and len(fl):
        fm = fl.cat == cat
        src_of = dict(zip(fl.dst[fm].tolist(), fl.src[fm].tolist()))
        root_fwd = np.array([src_of.get(int(rows[p]), NOT_BACKWARD) for p in roots], dtype=np.int64)
    is_root = np.zeros(m, dtype=bool)
    is_root[roots] = True
    at = {int(p): k for k, p in enumerate(roots.tolist())}
    for k, p in enumerate(roots.tolist()):  # an evaluate_function span and its node span are one backward
        q = int(pos_parent[p])
        if q >= 0 and is_root[q]:
            kq = at[q]
            if root_fwd[kq] < 0 <= root_fwd[k]:
                root_fwd[kq] = root_fwd[k]
            elif root_fwd[k] < 0 <= root_fwd[kq]:
                root_fwd[k] = root_fwd[kq]
    todo = np.flatnonzero(root_fwd < 0)
    if len(todo):
        in_bwd = _inherit(is_root.astype(np.int8), pos_parent, n.depth, 0) > 0
        for k, r in _by_sequence(ctx, rows, in_bwd, roots[todo]).items():
            root_fwd[at[k]] = r
    forward[roots] = np.where((root_fwd >= 0) | (root_fwd == NO_FORWARD), root_fwd, UNKNOWN_FORWARD)
    node[roots] = sl.name[rows[roots]]
    forward = _inherit(forward, pos_parent, n.depth, NOT_BACKWARD)
    node = _inherit(node, pos_parent, n.depth, 0)
    outer = roots[(pos_parent[roots] < 0) | ~is_root[np.maximum(pos_parent[roots], 0)]]
    root = np.full(m, -1, dtype=dt)
    root[outer] = outer
    root = _inherit(root, pos_parent, n.depth, -1)
    fwd_rows = np.unique(forward[forward >= 0])
    if len(fwd_rows):
        outer = {r: _outer_op(ctx, r, rows, pos_parent) for r in fwd_rows.tolist()}
        fop[forward >= 0] = [outer[int(r)] for r in forward[forward >= 0].tolist()]
    return Backward(forward, node, fop, root)


def _inherit(v: np.ndarray, pos_parent: np.ndarray, depth: np.ndarray, empty: int) -> np.ndarray:
    """`v` where set (!= empty), else the nearest enclosing slice's value, level by level down the nesting."""
    v = v.copy()
    for level in range(2, int(depth.max(initial=1)) + 1):
        here = np.flatnonzero((depth == level) & (v == empty) & (pos_parent >= 0))
        if len(here):
            v[here] = v[pos_parent[here]]
    return v


def _outer_op(ctx: Context, row: int, rows: np.ndarray, pos_parent: np.ndarray) -> int:
    """String id of the outermost cpu_op around host slice `row` (itself included): the user's call."""
    sl = ctx.trace.slices
    cpu = ctx.trace.strings.get(KinetoCat.CPU_OP)
    p = int(np.searchsorted(rows, row))
    best = int(sl.name[row])
    for _ in range(256):
        if p < 0 or p >= len(rows):
            break
        r = int(rows[p])
        if cpu is not None and int(sl.cat[r]) == cpu:
            best = int(sl.name[r])
        p = int(pos_parent[p])
    return best
