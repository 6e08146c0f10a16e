"""Evaluation passes: the model run without autograd (``torch.no_grad()``, ``torch.inference_mode()``) between
training steps.

A training forward builds autograd's graph: the ops of the model's call carry an autograd ``Sequence number``
(torch.profiler writes one per op that records a node). An evaluation under ``no_grad``/``inference_mode``
builds none. So an evaluation pass is a run of calls of a top-level module (an outermost ``nn.Module: ...``
span) in which no op carries a sequence number, of a module that other calls on the same thread train (some of
its calls there do).
The pass spans its first call's start until training resumes (the next call that builds a graph; the end of
the trace after the last): the evaluation loop's own lines after its last call are in it. Its line is the
user's call of the model (the span's ``call_site``, the evaluation loop's own line).

Step accounting reads them: an evaluation inside a step window is not that training step's time (warm-up is
chosen from training time), a step window that evaluation fills is an evaluation step (`steps.phases`), and
compiles in an evaluation are its own phase, after warm-up.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from neuron_prof.model import KinetoCat, Trace, TrackKind
from neuron_prof.model.order import row_dtype, searchsorted, sorted_unique
from neuron_prof.model.windows import row_windows

MODULE_SPAN = "nn.Module: "
SEQ_TEXT = b'"Sequence number"'
FWD_TEXT = b'"Fwd thread id"'


SCAN_WINDOW = 1 << 25
"""Bytes of the args blob `forward_op_numbers` scans at a time (a window is copied once: its memory stays bounded)."""


def forward_op_numbers(trace: Trace) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The ops that build autograd's graph, one window of the args blob at a time (a document's keys lie in one
    window): (their args documents, ascending; their sequence numbers). A forward op has a sequence number and
    no forward thread (``Fwd thread id`` 0 or absent); only these are kept, not every op's numbers
    (`ArgsStore.key_int_windows`: no Python per hit)."""
    for (sd, sv), (fd, fv) in trace.args.key_int_windows([SEQ_TEXT, FWD_TEXT], SCAN_WINDOW):
        keep = (sv >= 0) & (value_at(fd, fv, sd, 0) <= 0)
        yield sd[keep], sv[keep]


def value_at(docs: np.ndarray, vals: np.ndarray, want: np.ndarray, default: int) -> np.ndarray:
    """Per document index of `want`: its value in (`docs`, ascending; `vals`) (`ArgsStore.key_ints`), else
    `default`."""
    i = np.minimum(searchsorted(docs, want), max(len(docs) - 1, 0))
    hit = docs[i] == want if len(docs) else np.zeros(len(want), dtype=bool)
    return np.where(hit, vals[i] if len(docs) else 0, default)


@dataclass(frozen=True)
class EvalPass:
    """One evaluation pass (Unix ns) and the line that called the model in it ("" when not recorded)."""

    start_ns: int
    end_ns: int
    call_site: str
    calls: int


def evaluation_passes(trace: Trace) -> list[EvalPass]:
    """The evaluation passes of the trace, in time order (module docstring)."""
    sl = trace.slices
    threads = trace.track_ids(TrackKind.THREAD)
    mod_ids = [i for i in range(len(trace.strings)) if trace.strings[i].startswith(MODULE_SPAN)]
    if not len(threads) or not mod_ids:
        return []
    parts_m: list[np.ndarray] = []
    last = np.iinfo(np.int64).min  # the last host end (set: a module span is a host row)
    for a, z in row_windows(trace, len(sl)):  # host rows found a window at a time: no column over every row
        host = np.isin(sl.track[a:z], threads)
        if host.any():
            parts_m.append(np.flatnonzero(host & np.isin(sl.name[a:z], mod_ids)) + a)
            last = max(last, int((sl.ts_ns[a:z][host] + sl.dur_ns[a:z][host]).max()))
    mods = np.concatenate(parts_m) if parts_m else np.zeros(0, np.int64)
    if not len(mods):
        return []
    cpu = trace.strings.get(KinetoCat.CPU_OP)
    graph_docs = _graph_docs(trace)
    ops_ts, ops_track = _graph_ops(trace, threads, cpu, graph_docs)
    # the outer module calls, columnar (no Python object per call): start, end, name, builds a graph, row, track
    # (narrow types: a big trace has millions of module calls, often none inside another)
    parts: list[tuple[np.ndarray, ...]] = []
    for t in sorted_unique(sl.track[mods]).tolist():
        m = mods[sl.track[mods] == t]
        m = m[np.argsort(sl.ts_ns[m], kind="stable")]
        ms, me = sl.ts_ns[m], sl.ts_ns[m] + sl.dur_ns[m]  # columns read once per track, never per row
        outer = me > np.concatenate(([-1], np.maximum.accumulate(me)[:-1]))  # not inside an earlier span
        m, ms, me = m[outer], ms[outer], me[outer]
        del outer
        ots = np.sort(ops_ts[ops_track == t])
        graph = searchsorted(ots, me, side="right") - searchsorted(ots, ms, side="left") > 0
        del ots
        parts.append((ms, me, sl.name[m].astype(np.int32), graph, m.astype(row_dtype(len(sl))),
                      np.full(len(m), t, np.int32)))
        del m, ms, me, graph
        trace.drop_pages()  # the columns' pages this track's calls read
    del mods, ops_ts, ops_track
    cs, ce, cn, cg, cr, ct = (np.concatenate(c) for c in zip(*parts, strict=True))
    del parts
    # trained on the same thread: module spans on another thread (a backward thread's) are no evaluation
    pair = ct.astype(np.int64) * (int(cn.max(initial=0)) + 1) + cn
    keep = np.isin(pair, pair[cg])
    del pair
    if not keep.all():
        cs, ce, cn, cg, cr, ct = cs[keep], ce[keep], cn[keep], cg[keep], cr[keep], ct[keep]
    del keep
    o = np.lexsort((ct, cr, cg, cn, ce, cs))  # in time order (then as the tuples compare)
    del ce, cn, ct
    cs, cg, cr = cs[o], cg[o], cr[o]
    del o
    out: list[EvalPass] = []
    first = np.flatnonzero(~cg & np.r_[True, cg[:-1]])  # where a run of calls that build no graph begins
    ends = np.flatnonzero(cg)
    for a in first.tolist():  # the pass lasts until training resumes: its loop's own lines after the last call
        k = int(searchsorted(ends, a))
        z = int(ends[k]) if k < len(ends) else len(cg)
        site = str(trace.slice_args(int(cr[a])).get("call_site") or "")
        out.append(EvalPass(int(cs[a]), int(cs[z]) - 1 if z < len(cg) else last, site, z - a))
    return out


def _graph_docs(trace: Trace) -> np.ndarray:
    """The args documents (ascending) of the ops that build autograd's graph (`forward_op_numbers`)."""
    parts = [docs for docs, _ in forward_op_numbers(trace)]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _graph_ops(trace: Trace, threads: np.ndarray, cpu: int | None,
               graph_docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, track) of the host ops that build autograd's graph (a CPU op whose args document is one of
    `graph_docs`, ascending), read a window of rows at a time."""
    sl = trace.slices
    ts: list[np.ndarray] = []
    tracks: list[np.ndarray] = []
    if cpu is None or not len(graph_docs):
        return np.zeros(0, np.int64), np.zeros(0, np.int32)
    for a, z in row_windows(trace, len(sl)):
        doc = sl.args[a:z]
        i = np.minimum(searchsorted(graph_docs, doc), len(graph_docs) - 1)
        m = (graph_docs[i] == doc) & (sl.cat[a:z] == cpu) & np.isin(sl.track[a:z], threads)
        ts.append(sl.ts_ns[a:z][m])
        tracks.append(sl.track[a:z][m])
    return np.concatenate(ts), np.concatenate(tracks)


def eval_overlap_ns(passes: list[EvalPass], start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per window [start, end): the time evaluation passes take inside it."""
    out = np.zeros(len(start), dtype=np.int64)
    for p in passes:
        out += np.maximum(np.minimum(end, p.end_ns) - np.maximum(start, p.start_ns), 0)
    return out


def pass_at(passes: list[EvalPass], ts_ns: int) -> EvalPass | None:
    """The evaluation pass running at `ts_ns`, None outside them."""
    return next((p for p in passes if p.start_ns <= ts_ns <= p.end_ns), None)
