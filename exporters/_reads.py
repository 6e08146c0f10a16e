"""Reading a big trace for the writers (`.pftrace`, Chrome JSON): a chunk's columns and args documents a table
window or a blob span at a time with the mapped pages let go after each, whole-trace arrays in mapped files for a
trace from the column cache, the flow ids on each slice found per chunk (issue 35: a writer's memory does not grow
with the trace beyond a few narrow per-slice arrays)."""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from neuron_prof.exporters import _pftrace_wire as w
from neuron_prof.model import Trace, windows
from neuron_prof.model.order import searchsorted

if TYPE_CHECKING:
    from neuron_prof.analysis.spill import Spill

__all__ = ["ARGS_SPAN", "FlowIds", "Pages", "doc_list", "docs", "gather", "spill_of"]


def gather(trace: Trace, cols: tuple[np.ndarray, ...], rows: np.ndarray) -> list[np.ndarray]:
    """`col[rows]` of each column, read a `ROW_WINDOW` of the table at a time with the mapped pages let go after
    each when `rows` lie further apart: the rows of a track scattered over the table would otherwise bring whole
    columns in (each read maps the pages around it too)."""
    step = windows.ROW_WINDOW
    if not len(rows) or int(rows.max()) - int(rows.min()) < step:
        return [c[rows] for c in cols]
    p = np.argsort(rows, kind="stable")
    rs = rows[p]
    cuts = searchsorted(rs, np.arange(int(rs[0]) + step, int(rs[-1]) + 1, step)).tolist()
    out = [np.empty(len(rows), c.dtype) for c in cols]
    for a, z in pairwise([0, *cuts, len(rs)]):
        for o, c in zip(out, cols):
            o[p[a:z]] = c[rs[a:z]]
        trace.drop_pages()
    return out


ARGS_SPAN = 1 << 24
"""Bytes of the args blob a chunk's documents are copied from at a time (the pages then let go)."""


class _Docs:
    """A chunk's documents copied out of the args blob (`ArgsStore.buffers`' layout)."""

    def __init__(self, blob: bytes, offsets: np.ndarray) -> None:
        self.buffers = (blob, offsets)


def doc_list(trace: Trace, ids: np.ndarray) -> list[bytes]:
    """The documents of args indices `ids` (no -1), in that order, copied out of the trace's blob a span of
    `ARGS_SPAN` bytes at a time with the blob's pages let go after each (documents scattered over the blob would
    bring it all in)."""
    blob, off = trace.args.buffers
    st, en = gather(trace, (off[:-1], off[1:]), ids) if len(ids) else (np.zeros(0, np.int64),) * 2
    p = np.argsort(st, kind="stable")
    sp, ep = st[p], en[p]
    got: list[bytes] = []
    while len(got) < len(p):
        a = len(got)
        z = max(int(searchsorted(sp, int(sp[a]) + ARGS_SPAN, side="left")), a + 1)
        got += map(blob.__getitem__, map(slice, sp[a:z].tolist(), ep[a:z].tolist()))
        if z < len(p):
            trace.args.drop_pages()
    inv = np.empty(len(p), np.int64)
    inv[p] = np.arange(len(p))
    return list(map(got.__getitem__, inv.tolist()))


def docs(trace: Trace, idx: np.ndarray) -> tuple[_Docs, np.ndarray]:
    """The documents of args indices `idx` (-1: none) copied out of the trace's blob (`doc_list`), and `idx` into
    that copy."""
    has = np.flatnonzero(idx >= 0)
    got = doc_list(trace, idx[has])
    local = np.zeros(len(got) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, got), np.int64, len(got)), out=local[1:])
    out = np.full(len(idx), -1, np.int64)
    out[has] = np.arange(len(got))
    return _Docs(b"".join(got), local), out


def spill_of(trace: Trace) -> Spill | None:
    """Where the writer's whole-trace arrays go for a trace opened from the column cache: mapped files next to its
    columns when it is big (their pages let go after each window). None for a trace in memory (the profiler's),
    which then does not load the analyses."""
    if not isinstance(trace.slices.ts_ns, np.memmap):
        return None
    from neuron_prof.analysis.spill import Spill

    return Spill(trace)


class FlowIds:
    """The flow ids on each slice: every flow end's slice row and id, sorted by row (a mapped file for a big
    cached trace)."""

    def __init__(self, row: np.ndarray, fid: np.ndarray) -> None:
        self.row = row
        self.fid = fid

    def take(self, rows: np.ndarray) -> w.Ragged:
        """The `flow_ids` fields of slices `rows`, in that order (a slice's ends in the order sorted)."""
        lo = searchsorted(self.row, rows, side="left")
        cnt = searchsorted(self.row, rows, side="right") - lo
        at = np.zeros(len(rows), np.int64)
        np.cumsum(cnt[:-1], out=at[1:])
        mat = w.fixed64_mat(self.fid[np.repeat(lo - at, cnt) + np.arange(int(cnt.sum()))], w.E_FLOW_IDS)
        return w.Ragged(mat.m.reshape(-1), cnt.astype(np.int64) * mat.m.shape[1])


class Pages:
    """Hands the trace's mapped pages back to the kernel after each chunk (a chunk's args alone are megabytes of
    the blob), and the spilled arrays' and the heap's free pages after each `ROW_WINDOW` events: the writer's
    memory does not grow with the trace."""

    def __init__(self, trace: Trace, spill: Spill | None) -> None:
        self.t = trace
        self.spill = spill
        self.rows = 0

    def done(self, n: int) -> None:
        self.t.drop_pages()
        self.rows += n
        if self.rows >= windows.ROW_WINDOW and self.spill is not None:
            self.rows = 0
            self.spill.drop_pages()
