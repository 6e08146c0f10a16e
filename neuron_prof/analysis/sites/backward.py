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

Every host slice nested in a backward span is in that node's backward. Columnar and bounded for a big trace: the
sequence numbers read as columns a window of the args blob at a time (`ArgsStore.key_int_windows`), candidates
matched by one sort per (process, number), the flows' ends by sorted arrays, and the per-slice results written a
window of rows at a time into `Context.empty` arrays (mapped files for a big cached trace), the pages of these and
of the host nesting handed back after each window (`Context.drop_pages`).
The user's own code that runs in a backward (a custom `autograd.Function.backward`, a hook) keeps its own
lines: that is `_sites`' rule, which reads `root` for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.analysis.steps.evaluation import FWD_TEXT, SCAN_WINDOW, SEQ_TEXT, forward_op_numbers, value_at
from neuron_prof.model import KinetoCat, Trace
from neuron_prof.model.order import searchsorted
from neuron_prof.model.schema import AUTOGRAD_EVALUATE
from neuron_prof.model.windows import row_windows

EVALUATE = AUTOGRAD_EVALUATE
FWDBWD = "fwdbwd"
SEQ = "Sequence number"
FWD_TID = "Fwd thread id"
_NODE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*Backward\d*$")

NOT_BACKWARD = -1
UNKNOWN_FORWARD = -2
NO_FORWARD = -3
_MISSING = np.iinfo(np.int64).min
"""No value in a document (`value_at`'s default while a scan looks for it)."""


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


def _build(ctx: Context) -> Backward:
    tr = ctx.trace
    sl = tr.slices
    n = host_nesting(ctx)
    rows, pos_parent = n.rows, n.parent_pos  # rows ascend: a parent's position in them
    m = len(rows)
    dt = rows.dtype  # rows and positions: `row_dtype`; string ids: the name column's
    forward, root = ctx.empty(m, dt), ctx.empty(m, dt)
    node, fop = ctx.empty(m, sl.name.dtype), ctx.empty(m, sl.name.dtype)
    roots = _roots(ctx, rows)
    if not len(roots):
        for a, z in row_windows(ctx, m):
            forward[a:z], root[a:z], node[a:z], fop[a:z] = NOT_BACKWARD, -1, 0, 0
        return Backward(forward, node, fop, root)
    # each root's forward row: a fwdbwd flow to it, else one to the root just inside/around it, else by seq nr
    root_fwd = _flow_sources(tr, rows[roots])
    up = _root_parents(roots, pos_parent)
    _pair(root_fwd, up)
    ctx.drop_pages()  # each step reads columns at random rows: their pages handed back before the next
    _innermost(ctx, root, roots, pos_parent, n.depth)  # `root` holds the innermost root's position for now
    todo = np.flatnonzero(root_fwd < 0)
    if len(todo):
        got = _by_sequence(ctx, rows, root, roots[todo])
        root_fwd[todo] = np.where(got != NOT_BACKWARD, got, root_fwd[todo])
        ctx.drop_pages()
    root_fwd = np.where((root_fwd >= 0) | (root_fwd == NO_FORWARD), root_fwd, UNKNOWN_FORWARD)
    # per root: its name, its forward's user call, the outermost root around it
    names = sl.name[rows[roots]]
    ops = np.zeros(len(roots), dtype=sl.name.dtype)
    has = root_fwd >= 0
    if has.any():
        fwd_rows, inv = np.unique(root_fwd[has], return_inverse=True)
        ops[has] = _outer_ops(ctx, fwd_rows, rows, pos_parent)[inv]
    top = np.where(up >= 0, up, np.arange(len(roots)))
    while True:  # pointer jumping up the chains of roots directly inside roots
        nxt = top[top]
        if np.array_equal(nxt, top):
            break
        top = nxt
    outer = roots[top]
    for a, z in row_windows(ctx, m):  # the pages read and written handed back after each window
        inner = root[a:z].astype(np.int64)
        inside = inner >= 0
        k = np.where(inside, searchsorted(roots, inner), 0)
        forward[a:z] = np.where(inside, root_fwd[k], NOT_BACKWARD)
        node[a:z] = np.where(inside, names[k], 0)
        fop[a:z] = np.where(inside, ops[k], 0)
        root[a:z] = np.where(inside, outer[k], -1)
    return Backward(forward, node, fop, root)


def _roots(ctx: Context, rows: np.ndarray) -> np.ndarray:
    """Positions (into `rows`, ascending) of the backward spans: evaluate_function spans and autograd node spans,
    found a window of rows at a time."""
    tr = ctx.trace
    want = np.asarray([i for i in range(len(tr.strings))
                       if tr.strings[i].startswith(EVALUATE) or _NODE.match(tr.strings[i])], dtype=np.int64)
    if not len(want):
        return np.zeros(0, dtype=np.int64)
    parts = [np.flatnonzero(np.isin(tr.slices.name[rows[a:z]], want)) + a for a, z in row_windows(ctx, len(rows))]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _flow_sources(tr: Trace, dst_rows: np.ndarray) -> np.ndarray:
    """Per row of `dst_rows`: the source row of the fwdbwd flow that ends on it (the last such flow in the table),
    NOT_BACKWARD where none; the flows read a window at a time, matched by sorted arrays."""
    out = np.full(len(dst_rows), NOT_BACKWARD, dtype=np.int64)
    fl = tr.flows
    cat = tr.strings.get(FWDBWD)
    if cat is None or not len(fl):
        return out
    dst_p, src_p = [], []
    for a, z in row_windows(tr, len(fl)):
        fm = fl.cat[a:z] == cat
        dst_p.append(fl.dst[a:z][fm].astype(np.int64))
        src_p.append(fl.src[a:z][fm].astype(np.int64))
    dst, src = np.concatenate(dst_p), np.concatenate(src_p)
    if not len(dst):
        return out
    o = np.argsort(dst, kind="stable")
    dst, src = dst[o], src[o]
    last = np.r_[dst[1:] != dst[:-1], True]  # of flows to one span, the last in the table
    dst, src = dst[last], src[last]
    i = np.minimum(searchsorted(dst, dst_rows), len(dst) - 1)
    return np.where(dst[i] == dst_rows, src[i], out)


def _root_parents(roots: np.ndarray, pos_parent: np.ndarray) -> np.ndarray:
    """Per root: the index (in `roots`) of its parent when that is a root too (a node span inside its
    evaluate_function), else -1."""
    q = pos_parent[roots].astype(np.int64)
    k = np.minimum(searchsorted(roots, q), len(roots) - 1)
    return np.where((q >= 0) & (roots[k] == q), k, -1)


def _pair(root_fwd: np.ndarray, up: np.ndarray) -> None:
    """An evaluate_function span and its node span are one backward: where one of a root and its root parent has
    a forward row, the other takes it (in place). In root order, one pair after the other; the pairs of a parent
    with one root child and no root parent, whose child has none inside (the common case) are independent of
    the others and of each other: done at once."""
    child = np.flatnonzero(up >= 0)
    if not len(child):
        return
    kids = np.bincount(up[child], minlength=len(up))
    par = up[child]
    simple = (kids[par] == 1) & (up[par] < 0) & (kids[child] == 0)
    c, q = child[simple], par[simple]
    fc, fq = root_fwd[c], root_fwd[q]
    lift, drop = (fq < 0) & (fc >= 0), (fc < 0) & (fq >= 0)
    root_fwd[q[lift]] = fc[lift]
    root_fwd[c[drop]] = fq[drop]
    for k, kq in zip(child[~simple].tolist(), par[~simple].tolist(), strict=True):
        if root_fwd[kq] < 0 <= root_fwd[k]:
            root_fwd[kq] = root_fwd[k]
        elif root_fwd[k] < 0 <= root_fwd[kq]:
            root_fwd[k] = root_fwd[kq]


def _innermost(ctx: Context, inner: np.ndarray, roots: np.ndarray, pos_parent: np.ndarray, depth: np.ndarray) -> None:
    """Writes into `inner` the position of the innermost root each host slice runs in (itself for a root; -1
    outside), level by level down the nesting, a window of rows at a time."""
    m = len(inner)
    top = 1
    for a, z in row_windows(ctx, m):
        inner[a:z] = -1
        top = max(top, int(depth[a:z].max(initial=1)))
    inner[roots] = roots
    for level in range(max(2, int(depth[roots].min()) + 1), top + 1):  # above the first roots: nothing to inherit
        for a, z in row_windows(ctx, m):
            here = np.flatnonzero((depth[a:z] == level) & (inner[a:z] < 0) & (pos_parent[a:z] >= 0)) + a
            if len(here):
                inner[here] = inner[pos_parent[here]]


def _by_sequence(ctx: Context, rows: np.ndarray, inner: np.ndarray, todo: np.ndarray) -> np.ndarray:
    """Per backward span position of `todo` (ascending): its forward row by autograd sequence number (rule 2 of
    the module docstring); NO_FORWARD for a span without one in a trace that records them; NOT_BACKWARD where
    neither. The numbers are columns of the args blob read a window at a time (`key_int_windows`): first the
    spans' own, then, for those to match, the forward ops' with one of their numbers."""
    tr = ctx.trace
    sl = tr.slices
    out = np.full(len(todo), NOT_BACKWARD, dtype=np.int64)
    docs = sl.args[rows[todo]].astype(np.int64)
    o = np.argsort(docs, kind="stable")
    sdocs = docs[o]
    seq, fwd = np.full(len(todo), _MISSING), np.zeros(len(todo), dtype=np.int64)
    any_seq = False
    for (sd, sv), (fd, fv) in tr.args.key_int_windows([SEQ_TEXT, FWD_TEXT], SCAN_WINDOW):
        if not len(sd) and not len(fd):
            continue
        any_seq = any_seq or bool(len(sd))
        lo = min(int(sd[0]) if len(sd) else int(fd[0]), int(fd[0]) if len(fd) else int(sd[0]))
        hi = max(int(sd[-1]) if len(sd) else int(fd[-1]), int(fd[-1]) if len(fd) else int(sd[-1]))
        i0, i1 = searchsorted(sdocs, lo, "left"), searchsorted(sdocs, hi, "right")
        if i1 > i0:
            w = o[i0:i1]
            s = value_at(sd, sv, sdocs[i0:i1], _MISSING)
            seq[w] = np.where(s != _MISSING, s, seq[w])
            f = value_at(fd, fv, sdocs[i0:i1], _MISSING)
            fwd[w] = np.where(f != _MISSING, f, fwd[w])
    if not any_seq:
        return out
    out[seq < 0] = NO_FORWARD
    ask = np.flatnonzero((seq >= 0) & (fwd > 0))
    if len(ask):
        out[ask] = _match(ctx, rows, inner, todo[ask], seq[ask])
    return out


def _match(ctx: Context, rows: np.ndarray, inner: np.ndarray, pos: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """Per backward span position of `pos` and its sequence number: the forward op (sequence number `seq`, no
    forward thread, not inside a backward span) of the same process that started last by the span's start (the
    later row on a tie), NOT_BACKWARD where none."""
    tr = ctx.trace
    sl = tr.slices
    want = np.unique(seq)
    cd, cs = [], []  # the documents of the forward ops with one of these numbers, and the numbers
    for docs, nums in forward_op_numbers(tr):
        keep = np.isin(nums, want)
        cd.append(docs[keep])
        cs.append(nums[keep])
    cdocs, cseq = np.concatenate(cd), np.concatenate(cs)
    out = np.full(len(pos), NOT_BACKWARD, dtype=np.int64)
    if not len(cdocs):
        return out
    cp, cv = [], []  # their host rows outside any backward span, as positions, and their numbers
    for a, z in row_windows(ctx, len(rows)):
        d = sl.args[rows[a:z]]
        i = np.minimum(searchsorted(cdocs, d), len(cdocs) - 1)
        hit = np.flatnonzero((cdocs[i] == d) & (inner[a:z] < 0))
        cp.append(hit + a)
        cv.append(cseq[i[hit]])
    crow, cval = rows[np.concatenate(cp)].astype(np.int64), np.concatenate(cv)
    del cp, cv, cd, cs
    qrow = rows[pos].astype(np.int64)
    proc = np.array([t.process for t in tr.tracks] or [0], dtype=np.int64)
    u, inv = np.unique(np.concatenate([cval, seq]), return_inverse=True)
    key = proc[sl.track[np.concatenate([crow, qrow])]] * len(u) + inv
    ts = sl.ts_ns[np.concatenate([crow, qrow])].astype(np.int64)
    is_q = np.r_[np.zeros(len(crow), bool), np.ones(len(qrow), bool)]
    row = np.r_[crow, np.zeros(len(qrow), np.int64)]
    order = np.lexsort((row, is_q, ts, key))  # by key, then start (a candidate before a span starting with it)
    at = np.arange(len(order))
    last = np.maximum.accumulate(np.where(is_q[order], -1, at))  # the latest candidate so far in that order
    qs = np.flatnonzero(is_q[order])
    c = last[qs]
    ok = (c >= 0) & (key[order[np.maximum(c, 0)]] == key[order[qs]])
    res = np.full(len(qs), NOT_BACKWARD, dtype=np.int64)
    res[ok] = row[order[c[ok]]]
    out[order[qs] - len(crow)] = res
    return out


def _outer_ops(ctx: Context, fwd_rows: np.ndarray, rows: np.ndarray, pos_parent: np.ndarray) -> np.ndarray:
    """Per host slice row of `fwd_rows` (ascending): string id of the outermost cpu_op around it (itself included;
    its own name where none), the user's call; up the nesting for those in a window of slice rows at a time (the
    pages of the columns read at them and their parents handed back after each)."""
    sl = ctx.trace.slices
    cpu = ctx.trace.strings.get(KinetoCat.CPU_OP)
    best = np.zeros(len(fwd_rows), dtype=sl.name.dtype)
    for lo, hi in row_windows(ctx, len(sl)):
        a, z = searchsorted(fwd_rows, (lo, hi))
        if a == z:
            continue
        got = sl.name[fwd_rows[a:z]].copy()
        p = searchsorted(rows, fwd_rows[a:z]).astype(np.int64)
        for _ in range(256):
            live = np.flatnonzero((p >= 0) & (p < len(rows)))
            if not len(live):
                break
            r = rows[p[live]]
            if cpu is not None:
                is_cpu = sl.cat[r] == cpu
                got[live[is_cpu]] = sl.name[r[is_cpu]]
            p[live] = pos_parent[p[live]]
        best[a:z] = got
    return best
