"""Python-tracer pruning: a cycle's trace keeps the Python work that findings read, not every call.

torch.profiler's Python tracer records every Python call (``with_stack``): an ``import transformers`` inside
the profiled block is ~2M ``str.startswith`` calls that launch no op. Run on each cycle's read-back, before it
joins the session's builder (columnar, numpy over the slice columns of the host threads):

* kept: every python_function slice that holds an op (cpu_op, annotation, kernel launch...: any other slice
  of its thread), and nn.Module spans: the frames leading to the ops, with their exact lines;
* an op-free Python call whose parent holds ops (an import, a tokenizer loop's call) stays as ONE slice, the
  outermost frame, with its ``call_site``; what ran inside it is dropped. Consecutive such calls of one
  function under one parent (a loop calling it) become one slice over the whole run (``python_calls``
  in its args says how many);
* the user's own frames inside that work, called straight from the user's code, stay down to `user_depth`
  levels below it (what a user's ``preprocess()`` called);
* builtins (``<built-in method ...>``) that launched no op are dropped, unless they took `KEEP_BUILTIN_NS`
  or more (a sleep, a blocking read, a lock wait, a tokenizer's native call): host time a finding may name
  (a straggler's cause, a gap's) stays at its own line.

An op's exact stack is its ``Call stack`` argument (written by `_sites` from the event tree, not from these
slices), so every op keeps its line. Host time inside a dropped call counts as self time of the call kept
around it, at that call's line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from neuron_prof.capture._cap import kept_flows
from neuron_prof.model import ArgsStore, KinetoCat, SliceTable, Trace, TrackKind
from neuron_prof.model.callsite import MODULE_PREFIX, USER, file_kind, parse_frame
from neuron_prof.model.order import sorted_unique

USER_DEPTH = 2
"""Levels of the user's own frames kept inside op-free Python work (below its outermost call)."""
RUN_CALLS = "python_calls"
"""Slice arg of a kept op-free call that stands for a run of calls: how many it stands for."""
_BUILTIN = "<built-in "
KEEP_BUILTIN_NS = 100_000
"""A builtin that launched no op is kept when it took at least this long (100 us)."""


@dataclass
class PruneStats:
    """What pruning removed, over every cycle."""

    python_slices: int = 0
    """python_function slices read back."""
    dropped: int = 0
    """Of them, dropped (inside op-free work, or builtins without an op)."""
    merged: int = 0
    """Of them, folded into the slice of their run (consecutive calls of one function)."""

    def add(self, other: PruneStats) -> None:
        self.python_slices += other.python_slices
        self.dropped += other.dropped
        self.merged += other.merged

    def as_dict(self) -> dict[str, int]:
        return {"python_slices": self.python_slices, "dropped": self.dropped, "merged": self.merged}


def prune_python(trace: Trace, user_files: set[str] | None = None, user_depth: int = USER_DEPTH
                 ) -> tuple[Trace, PruneStats]:
    """`trace` with its op-free Python work folded (see the module doc); `user_files`: the user's files as the
    frames name them (else judged by path)."""
    from neuron_prof.analysis.sites.nesting import nesting  # capture reads the model as analysis does

    sl = trace.slices
    py_id = trace.strings.get(KinetoCat.PYTHON)
    stats = PruneStats()
    if py_id is None or not len(sl):
        return trace, stats
    rows = trace.slices_on(TrackKind.THREAD)
    nest = nesting(trace, rows)
    par = nest.parent_pos
    names = sl.name[rows]
    is_py = sl.cat[rows] == py_id
    stats.python_slices = int(is_py.sum())
    has_op = _ancestors(par, np.flatnonzero(~is_py), len(rows)) | ~is_py
    module, builtin, user = _name_kinds(trace, names[is_py], user_files)
    is_module = np.zeros(len(rows), bool)
    is_builtin = np.zeros(len(rows), bool)
    is_user = np.zeros(len(rows), bool)
    is_module[is_py], is_builtin[is_py], is_user[is_py] = module, builtin, user
    free = is_py & ~has_op & ~is_module  # op-free Python work
    parent_free = np.zeros(len(rows), bool)
    parent_free[par >= 0] = free[par[par >= 0]]
    root = free & ~parent_free & (~is_builtin | (sl.dur_ns[rows] >= KEEP_BUILTIN_NS))
    levels = _levels(nest.depth)
    keep = ~free | root
    rel = np.where(root, 0, -1)  # levels below the root, for user frames called straight from kept user frames
    for lv in levels:
        c = lv[free[lv] & parent_free[lv] & is_user[lv]]
        p = par[c]
        ok = keep[p] & (rel[p] >= 0) & (rel[p] < user_depth) & (is_user[p] | root[p])
        keep[c[ok]] = True
        rel[c[ok]] = rel[p[ok]] + 1
    dur = sl.dur_ns[rows].copy()
    count = _merge_runs(rows, par, names, sl, keep, free, dur)
    for lv in levels:  # a frame whose parent was folded away goes with it
        c = lv[keep[lv] & free[lv] & (par[lv] >= 0)]
        keep[c[~keep[par[c]]]] = False
    drop = rows[~keep]
    stats.merged = int((count[keep] - 1).clip(min=0).sum())
    stats.dropped = len(drop) - stats.merged
    if not len(drop) and not (count > 1).any():
        return trace, stats
    return _rebuilt(trace, rows, keep, dur, count), stats


def _ancestors(par: np.ndarray, start: np.ndarray, n: int) -> np.ndarray:
    """Positions that are an ancestor of a position in `start` (pointer walk up, each position once)."""
    mark = np.zeros(n, bool)
    front = sorted_unique(par[start])
    front = front[front >= 0]
    while len(front):
        front = front[~mark[front]]
        mark[front] = True
        front = sorted_unique(par[front])
        front = front[front >= 0]
    return mark


def _name_kinds(trace: Trace, names: np.ndarray, user_files: set[str] | None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(nn.Module span, builtin, frame of the user's file) per name (one look per distinct name)."""
    u, inv = np.unique(names, return_inverse=True)
    kinds = np.zeros((len(u), 3), bool)
    for i, nid in enumerate(u.tolist()):
        s = trace.s(int(nid))
        if s.startswith(MODULE_PREFIX):
            kinds[i, 0] = True
        elif s.startswith(_BUILTIN):
            kinds[i, 1] = True
        else:
            f = parse_frame(s)
            kinds[i, 2] = f is not None and (f[0] in user_files if user_files else file_kind(f[0]) == USER)
    k = kinds[inv.reshape(-1)]
    return k[:, 0], k[:, 1], k[:, 2]


def _levels(depth: np.ndarray) -> list[np.ndarray]:
    """Positions grouped by depth, shallowest first."""
    if not len(depth):
        return []
    o = np.argsort(depth, kind="stable")
    cut = np.flatnonzero(np.diff(depth[o])) + 1
    return np.split(o, cut)


def _merge_runs(rows: np.ndarray, par: np.ndarray, names: np.ndarray, sl: SliceTable, keep: np.ndarray,
                free: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Fold each run of consecutive kept op-free calls of one function under one parent into its first call:
    `dur` stretched over the run, the others un-kept. Returns the number of calls each position stands for."""
    count = np.ones(len(rows), np.int64)
    k = np.flatnonzero(keep)
    ts, trk = sl.ts_ns[rows], sl.track[rows]
    k = k[np.lexsort((ts[k], par[k], trk[k]))]  # siblings next to each other, in time order
    same = (par[k[1:]] == par[k[:-1]]) & (trk[k[1:]] == trk[k[:-1]]) & (names[k[1:]] == names[k[:-1]])
    same &= free[k[1:]] & free[k[:-1]]
    if not same.any():
        return count
    start = np.r_[True, ~same]
    run = np.cumsum(start) - 1
    first = k[start]
    end = ts[k] + dur[k]
    last_end = np.maximum.reduceat(end, np.flatnonzero(start))
    dur[first] = last_end - ts[first]
    count[first] = np.bincount(run)
    keep[k[~start]] = False
    return count


def _rebuilt(trace: Trace, rows: np.ndarray, keep: np.ndarray, dur: np.ndarray, count: np.ndarray) -> Trace:
    """The trace without the un-kept host slices; runs stretched, their counts in their args; args compacted to
    the slices and instants that remain; flows between remaining slices re-indexed."""
    sl = trace.slices
    n = len(sl)
    alive = np.ones(n, bool)
    alive[rows[~keep]] = False
    new_dur = sl.dur_ns.copy()
    new_dur[rows] = dur
    cnt = np.ones(n, np.int64)
    cnt[rows] = count
    idx = np.flatnonzero(alive)
    out = sl.take(idx)
    ins = trace.instants
    args, arg_idx = _compact_args(trace.args, np.r_[out.args, ins.args],
                                  np.r_[cnt[idx], np.ones(len(ins), np.int64)])
    out = type(out)(ts_ns=out.ts_ns, dur_ns=new_dur[idx], track=out.track, name=out.name, cat=out.cat,
                    args=arg_idx[:len(idx)])
    ins = type(ins)(ts_ns=ins.ts_ns, track=ins.track, name=ins.name, cat=ins.cat, args=arg_idx[len(idx):])
    return trace.replace(slices=out, instants=ins, flows=kept_flows(trace, idx), args=args)


def _compact_args(store: ArgsStore, idx: np.ndarray, count: np.ndarray) -> tuple[ArgsStore, np.ndarray]:
    """A store holding only the documents at `idx` (-1: none), a run's count added to its first call's."""
    import orjson

    blob, off = store.buffers
    parts: list[bytes] = []
    new = np.full(len(idx), -1, np.int64)
    has = np.flatnonzero((idx >= 0) | (count > 1))
    a_idx = np.maximum(idx[has], 0)
    for j, a, lo, hi, c in zip(has.tolist(), idx[has].tolist(), off[a_idx].tolist(), off[a_idx + 1].tolist(),
                               count[has].tolist(), strict=True):
        raw = blob[lo:hi] if a >= 0 else b"{}"
        if c > 1:
            d = orjson.loads(raw)
            d[RUN_CALLS] = c
            raw = orjson.dumps(d)
        new[j] = len(parts)
        parts.append(raw)
    lengths = np.fromiter((len(p) for p in parts), np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return ArgsStore(b"".join(parts), offsets), new
