"""Op accounting: calls, self time and total time per op, host and device apart, and the calls themselves.

The one place that decides what a call of an op is. `summary` (totals `top_ops`, `top_device_ops`), `diff`,
the HTML report and the TUI ops view and its drill-in all read this table, so they show the same numbers.

    t = op_table(trace, ctx)
    i = t.find("aten::mm")                  # the host op; t.find("aten::mm", "device") for device work
    t.calls[i], t.self_ns[i], t.total_ns[i]
    rows, self_ns = t.call_rows(i)          # each call's outer slice row and self time, longest first

Rules:
- **Key**: `op_key(name)`. ``ProfilerStep#12`` is ``ProfilerStep#*`` (one row for all steps; its calls
  are the steps). An overload is dropped: ``aten::add.Tensor`` is ``aten::add`` (torch.profiler writes host
  ops without one; probes and other tools may write it; either way it is one op).
- **Rows**: host ops are the slices on host thread tracks, device ops the device work (`_idle.device_rows`);
  a Neuron NEFF execution (``nc_exec_running``) counts under the host op whose launch flow reaches it
  (directly, or through the runtime call that holds the execution).
  Dispatcher bookkeeping spans (`_nesting.TRANSPARENT_SPANS`) are no ops: their time is the enclosing op's.
  Kineto's span of the whole capture (``PyTorch Profiler (0)``) is the profiling window, not a call; an
  engine's busy intervals (Neuron Explorer's ActiveTime) are utilisation, not device ops.
- **One call**: a slice whose nearest enclosing op on the same track (looking through Python frames and
  bookkeeping spans) has the same key is that op re-dispatched (the emulated device's ``aten::sort``
  holding the CPU kernel ``aten::sort`` of its fallback; ``aten::mm`` under ``PythonDispatchMode`` under
  ``aten::mm``): part of the outer call, not a call of its own, if the outer slice holds it whole.
- **Times of a call**: total is the outer slice's duration; self is the self time (nesting: duration less
  direct children) of the outer slice plus that of its re-dispatched copies, so no time counts twice.
- `is_op` marks what summary and diff rank as host ops: categories cpu_op and CUDA runtime/driver calls
  when the trace has cpu_op slices, else every host slice (Python frames and annotations are listed for the
  TUI but are not ops there). Device work is always an op.
- **Wrappers** (`is_wrapper`): a Python frame of library code (torch, the standard library: `threading.py:
  run`, `torch/_compile.py: inner`, `<built-in method run_backward ...>`, nn.Module spans; the capture's
  `user_files` decide, else `file_kind`) and torch.compile's phase spans (`... (dynamo_timed)`,
  `entire_frame_compile`, `backend_compile`, `inductor_compile`) hold ops and lines; their own self time is
  what the profiler saw nothing inside (hidden library frames, waiting for another thread: `run_backward`
  waits for the autograd thread), so it counts as 0: they keep their calls and total time and never rank
  above the ops and lines they contain. Not ops for summary and diff either.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.device.rows import device_work_nesting
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.analysis.sites.nesting import Nesting
from neuron_prof.model import KinetoCat, Trace
from neuron_prof.model.callsite import MODULE_PREFIX, USER, file_kind, parse_frame, user_files_of
from neuron_prof.model.schema import is_compile_span

HOST_OP_CATS = (KinetoCat.CPU_OP, KinetoCat.CUDA_RUNTIME, KinetoCat.CUDA_DRIVER)
"""Categories of host slices that are ops (when the trace has cpu_op slices at all)."""

_NUMBERED = re.compile(r"^(ProfilerStep#)\d+$")
_OVERLOAD = re.compile(r"^([A-Za-z_]\w*::[A-Za-z_]\w*)\.[A-Za-z_]\w*$")


def op_key(name: str) -> str:
    """The name an op is counted under: step numbers collapsed ("ProfilerStep#*"), overloads dropped."""
    m = _NUMBERED.match(name)
    if m:
        return f"{m.group(1)}*"
    m = _OVERLOAD.match(name)
    return m.group(1) if m else name


@dataclass(frozen=True, eq=False)
class OpTable:
    """One entry per (where, op key), most self time first; the calls of entry i are
    ``call_row[start[i]:start[i + 1]]`` (outer slice rows, longest first)."""

    name: np.ndarray
    """Op key (object array of str)."""
    where: np.ndarray
    """"host" or "device" (object array)."""
    is_op: np.ndarray
    """bool: ranked as an op by summary and diff (see the module docstring)."""
    is_wrapper: np.ndarray
    """bool: a library frame or compile phase holding ops and lines; no self time of its own."""
    calls: np.ndarray
    total_ns: np.ndarray
    self_ns: np.ndarray
    longest: np.ndarray
    """Slice row of the longest call (where a timeline jump lands)."""
    start: np.ndarray
    """Offsets into call_row / call_self_ns, len(self) + 1 entries."""
    call_row: np.ndarray
    call_self_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.name)

    def find(self, name: str, where: str = "host") -> int:
        """Index of op `name` (any spelling with the same op_key) on `where`; -1 when absent."""
        hit = np.flatnonzero((self.name == op_key(name)) & (self.where == where))
        return int(hit[0]) if len(hit) else -1

    def call_rows(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(outer slice rows, self ns) of every call of entry `i`, longest first."""
        a, b = int(self.start[i]), int(self.start[i + 1])
        return self.call_row[a:b], self.call_self_ns[a:b]

    def top(self, where: str, n: int, by: str = "self_ns") -> list[dict[str, Any]]:
        """The `n` ops on `where` (only `is_op` ones) with the most `by`, as summary JSON rows."""
        idx = np.flatnonzero((self.where == where) & self.is_op)
        col = getattr(self, by)
        idx = idx[np.argsort(-col[idx], kind="stable")][:n]
        out = []
        for i in idx.tolist():
            d: dict[str, Any] = {
                "name": str(self.name[i]),
                "count": int(self.calls[i]),
                "total_ns": int(self.total_ns[i]),
            }
            if where == "host":
                d["self_ns"] = int(self.self_ns[i])
            out.append(d)
        return out


def _nearest_kept(parent: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """For each node, itself when not skipped, else its nearest ancestor that is not (-1: none); by
    pointer jumping, so a chain of 100 Python frames costs 7 passes, not 100."""
    n = len(parent)
    g = np.where(skip, parent, np.arange(n, dtype=parent.dtype))
    while True:
        valid = g >= 0
        hop = np.zeros(n, dtype=bool)
        hop[valid] = skip[g[valid]]
        if not hop.any():
            return g
        g[hop] = g[g[hop]]


def _unique_ids(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(v, return_inverse=True)`` of string ids (small non-negative ints), by marking them: no sort."""
    if not len(v) or int(v.min()) < 0:
        return np.unique(v, return_inverse=True)  # type: ignore[no-any-return]
    seen = np.zeros(int(v.max()) + 1, dtype=bool)
    seen[v] = True
    return np.flatnonzero(seen).astype(v.dtype), (np.cumsum(seen) - 1)[v]


def _by_key_longest_first(k: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """``np.lexsort((np.arange(len(k)), -dur, k))``: by key, then longest first, then in order; one sort of
    a packed (key, duration, position) integer when the three fit in 63 bits."""
    n = len(k)
    if not n or int(k.min()) < 0 or int(dur.min()) < 0:
        return np.lexsort((np.arange(n), -dur, k))
    db, ib = int(dur.max()).bit_length(), (n - 1).bit_length()
    if int(k.max()).bit_length() + db + ib > 63:
        return np.lexsort((np.arange(n), -dur, k))
    packed = k.astype(np.int64)  # built and sorted in place: one int64 per call beside one temporary
    packed <<= db + ib
    low = dur.astype(np.int64)
    np.subtract((1 << db) - 1, low, out=low)
    low <<= ib
    packed |= low
    del low
    packed |= np.arange(n, dtype=np.int64)
    packed.sort()
    packed &= (1 << ib) - 1
    return packed


def _key_index(trace: Trace, names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(key index per row, key strings): op_key applied once per distinct name id, not per row."""
    ids, inv = _unique_ids(names) if not len(names) or int(names.min()) < 0 else (_ids_in(names), None)
    keys = np.array([op_key(trace.s(int(i))) for i in ids], dtype=object)
    uniq, kinv = np.unique(keys, return_inverse=True)
    if inv is not None:
        return kinv[inv].astype(np.int64), uniq
    lut = np.zeros(int(ids[-1]) + 1 if len(ids) else 1, dtype=np.int32)  # key index by name id: no per-row int64
    lut[ids] = kinv
    return lut[names], uniq


def _ids_in(v: np.ndarray) -> np.ndarray:
    """The distinct values of `v` (small non-negative ints: string ids), ascending, by marking them."""
    seen = np.zeros(int(v.max()) + 1, dtype=bool)
    seen[v] = True
    return np.flatnonzero(seen).astype(v.dtype)


EXECUTION_NAMES = ("nc_exec_running",)
"""Device slices that name no op: a NEFF execution on a NeuronCore (Neuron Explorer's hardware event)."""


def launching_ops(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """For each device slice of `rows`, the cpu_op whose launch flow reaches it, directly or through the runtime
    call that holds it (op -> nrt_execute -> nc_exec_running); -1 where none."""
    sl, fl = trace.slices, trace.flows
    out = np.full(len(rows), -1, dtype=np.int64)
    if not len(fl) or not len(rows):
        return out
    o = np.argsort(fl.dst, kind="stable")
    dst, src = fl.dst[o], fl.src[o]
    cpu = trace.name_ids(KinetoCat.CPU_OP)
    cur, todo = np.asarray(rows, dtype=np.int64), np.ones(len(rows), dtype=bool)
    for _ in range(2):
        pos = np.minimum(np.searchsorted(dst, cur), len(dst) - 1)
        hit = todo & (dst[pos] == cur)
        cur = np.where(hit, src[pos], cur)
        ok = hit & np.isin(sl.cat[cur], cpu)
        out[ok] = cur[ok]
        todo = hit & ~ok
    return out


@dataclass(frozen=True)
class Attribution:
    """How many of the trace's NEFF executions (`EXECUTION_NAMES` on device tracks) a host op's launch flow
    reaches (`launching_ops`), and their device time."""

    executions: int
    linked: int
    device_ns: int

    @property
    def none_linked(self) -> bool:
        """Executions there, none tied to the op that launched it: device time per op or line is unknown, not 0."""
        return self.executions > 0 and self.linked == 0


def attribution(ctx: Context) -> Attribution:
    """The trace's `Attribution` (once per context)."""
    from neuron_prof.model import TrackKind

    def build() -> Attribution:
        tr = ctx.trace
        ids = tr.name_ids(*EXECUTION_NAMES)
        rows = ctx.rows(TrackKind.DEVICE)
        rows = rows[np.isin(tr.slices.name[rows], ids)] if len(ids) else rows[:0]
        linked = int((launching_ops(tr, rows) >= 0).sum()) if len(rows) else 0
        return Attribution(len(rows), linked, int(tr.slices.dur_ns[rows].sum()))

    return ctx.memo("attribution", build)  # type: ignore[no-any-return]


def _launched_names(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Name ids of device `rows`, an execution (`EXECUTION_NAMES`) named after the cpu_op that launched it
    (`launching_ops`), so device time is counted per op as on CUDA, where kernels carry the op's work."""
    names = trace.slices.name[rows].copy()
    m = np.flatnonzero(np.isin(names, trace.name_ids(*EXECUTION_NAMES)))
    if not len(m):
        return names
    op = launching_ops(trace, rows[m])
    ok = op >= 0
    names[m[ok]] = trace.slices.name[op[ok]]
    return names


def _wrapper_names(trace: Trace, name_ids: np.ndarray) -> np.ndarray:
    """Per distinct name id: a wrapper (module docstring), decided once per name."""
    user = user_files_of(trace.metadata)
    out = np.zeros(len(name_ids), dtype=bool)
    for i, nid in enumerate(name_ids.tolist()):
        name = trace.s(int(nid))
        if is_compile_span(name) or name.startswith(("<built-in ", MODULE_PREFIX)):
            out[i] = True
            continue
        f = parse_frame(name)
        if f is not None:
            out[i] = f[0] not in user if user is not None else file_kind(f[0]) != USER
    return out


def _side(trace: Trace, nest: Nesting, op_cat: np.ndarray, where: str) -> dict[str, np.ndarray] | None:
    """Calls grouped by key for one side (host or device). `op_cat`: per nesting row, counts as an op."""
    sl = trace.slices
    rows = nest.rows  # ascending (host and device rows come in table order)
    n = len(rows)
    if not n:
        return None
    names = _launched_names(trace, rows) if where == "device" else sl.name[rows]
    key, key_names = _key_index(trace, names)
    del names
    skip = nest.transparent | np.isin(sl.cat[rows], trace.name_ids(KinetoCat.PYTHON))
    par = nest.parent_pos
    has = par >= 0
    kept = _nearest_kept(par, skip)
    anc = np.where(has, kept[np.maximum(par, 0)], -1)
    # a re-dispatch: its nearest enclosing op (same track: nesting is per track) has the same key and holds it
    # whole (same-name runtime calls that overlap without nesting, as on MTIA, are calls of their own)
    del kept, has
    cand = np.flatnonzero(~skip & (anc >= 0))  # the ends compared only where the keys match: few rows
    cand = cand[key[anc[cand]] == key[cand]]
    up = anc[cand]
    cand = cand[sl.ts_ns[rows[cand]] + sl.dur_ns[rows[cand]] <= sl.ts_ns[rows[up]] + sl.dur_ns[rows[up]]]
    redispatch = np.zeros(n, dtype=bool)
    redispatch[cand] = True
    root = np.arange(n, dtype=par.dtype)
    root[cand] = anc[cand]
    del anc, cand, up  # whole-column temporaries of a big trace: gone before the next ones
    while True:
        nxt = root[root]
        if np.array_equal(nxt, root):
            break
        root = nxt
    member = ~nest.transparent & ~np.isin(sl.cat[rows], trace.name_ids(KinetoCat.PROFILER_SPAN))
    call = member & ~redispatch
    if where == "host":
        host_names = sl.name[rows]
        uniq_names = _ids_in(host_names) if n and int(host_names.min()) >= 0 else np.unique(host_names)
        is_wrapper_name = np.zeros(int(uniq_names[-1]) + 1 if len(uniq_names) else 1, dtype=bool)
        is_wrapper_name[uniq_names] = _wrapper_names(trace, uniq_names)  # by name id, not per row
        wrapper = is_wrapper_name[np.maximum(host_names, 0)] & (host_names >= 0)
        del host_names
    else:
        wrapper = np.zeros(n, dtype=bool)
    own_self = nest.self_ns[member]
    own_self[wrapper[member]] = 0
    call_self_all = np.bincount(root[member], weights=own_self, minlength=n)
    del root, member, own_self, skip, redispatch
    ci = np.flatnonzero(call).astype(par.dtype, copy=False)  # positions: `row_dtype`, half of int64
    del call
    call_self = call_self_all[ci].astype(np.int64)  # only the calls' (the whole column in float64 dropped)
    del call_self_all
    dur = sl.dur_ns[rows[ci]]
    k = key[ci]
    del key
    # group by key, longest call first within a key
    o = _by_key_longest_first(k, dur)
    ci = ci[o]  # one at a time: one new array beside the old ones, not four
    dur = dur[o]
    k = k[o]
    call_self = call_self[o]
    del o
    uk, first, counts = np.unique(k, return_index=True, return_counts=True)
    is_wrapper = np.bincount(k, weights=wrapper[ci], minlength=len(key_names))[uk] > 0
    is_op = (np.bincount(k, weights=op_cat[ci], minlength=len(key_names))[uk] > 0) & ~is_wrapper
    def per_op(v: np.ndarray) -> np.ndarray:
        return np.add.reduceat(v, first).astype(np.int64) if len(ci) else np.zeros(0, np.int64)

    return {
        "name": key_names[uk],
        "where": np.full(len(uk), where, dtype=object),
        "is_op": is_op,
        "is_wrapper": is_wrapper,
        "calls": counts.astype(np.int64),
        "total_ns": per_op(dur),
        "self_ns": per_op(call_self),
        "longest": rows[ci[first]].astype(np.int64),
        "call_row": rows[ci],  # `row_dtype`, as the nesting's rows
        "call_self_ns": call_self,
        "counts": counts,
    }


def _build(trace: Trace, ctx: Context) -> OpTable:
    sl = trace.slices
    host = host_nesting(ctx)
    cats = sl.cat[host.rows]
    if np.isin(cats, trace.name_ids(KinetoCat.CPU_OP)).any():
        host_op = np.isin(cats, trace.name_ids(*HOST_OP_CATS))
    else:
        host_op = np.ones(len(host.rows), dtype=bool)
    del cats
    dev = device_work_nesting(ctx)
    parts = [
        p
        for p in (
            _side(trace, host, host_op, "host"),
            _side(trace, dev, np.ones(len(dev.rows), dtype=bool), "device"),
        )
        if p is not None
    ]
    cols = ("name", "where", "is_op", "is_wrapper", "calls", "total_ns", "self_ns", "longest", "counts")
    if parts:
        c = {k: np.concatenate([p[k] for p in parts]) for k in cols}
        call_row = np.concatenate([p.pop("call_row") for p in parts])  # popped: one copy of the calls at a time
        call_self = np.concatenate([p.pop("call_self_ns") for p in parts])
    else:
        c = {k: np.zeros(0, dtype=object if k in ("name", "where") else np.int64) for k in cols}
        c["is_op"] = c["is_op"].astype(bool)
        c["is_wrapper"] = c["is_wrapper"].astype(bool)
        call_row = call_self = np.zeros(0, dtype=np.int64)
    # most self time first (wrappers after everything they contain; then host before device, then by name),
    # carrying each op's calls along
    order = np.lexsort((c["name"].astype(str), c["where"].astype(str) == "device", -c["self_ns"],
                        c["is_wrapper"].astype(bool)))
    starts = np.r_[0, np.cumsum(c["counts"])][:-1]
    cnt = c["counts"][order]
    start = np.r_[0, np.cumsum(cnt)].astype(np.int64)
    take = np.repeat(starts[order] - start[:-1], cnt)
    take += np.arange(start[-1])
    call_row, call_self = call_row[take], call_self[take]
    del take
    return OpTable(
        name=c["name"][order],
        where=c["where"][order],
        is_op=c["is_op"][order].astype(bool),
        is_wrapper=c["is_wrapper"][order].astype(bool),
        calls=c["calls"][order],
        total_ns=c["total_ns"][order],
        self_ns=c["self_ns"][order],
        longest=c["longest"][order],
        start=start,
        call_row=call_row,
        call_self_ns=call_self,
    )


def op_table(trace: Trace, ctx: Context | None = None) -> OpTable:
    """Every op of `trace` (host and device apart) with calls, self and total time, and its calls (see the
    module docstring for the rules). Computed once per context."""
    ctx = ctx or Context(trace)
    return ctx.memo("op_table", lambda: _build(trace, ctx))  # type: ignore[no-any-return]
