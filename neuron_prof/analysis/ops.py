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
from neuron_prof.analysis.op_calls import SideCalls, side_calls, side_names
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.model import KinetoCat, Trace
from neuron_prof.model.callsite import MODULE_PREFIX, USER, file_kind, parse_frame, user_files_of
from neuron_prof.model.order import searchsorted
from neuron_prof.model.schema import is_compile_span
from neuron_prof.model.windows import row_windows

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
        pos = np.minimum(searchsorted(dst, cur), len(dst) - 1)
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


def _launched(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions in device `rows`, name ids): the executions (`EXECUTION_NAMES`) among `rows`, named after the
    cpu_op that launched them (`launching_ops`), so device time is counted per op as on CUDA, where kernels carry
    the op's work; found a window of rows at a time."""
    ids = trace.name_ids(*EXECUTION_NAMES)
    m = np.concatenate([np.flatnonzero(np.isin(trace.slices.name[rows[a:z]], ids)) + a
                        for a, z in row_windows(trace, len(rows))] or [np.zeros(0, np.int64)])
    if not len(m):
        return m, trace.slices.name[:0]
    op = launching_ops(trace, rows[m])
    ok = op >= 0
    return m[ok], trace.slices.name[op[ok]]


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


def _sides(trace: Trace, ctx: Context) -> list[tuple[str, SideCalls]]:
    """The host and device calls (`op_calls.side_calls`), of the sides with rows."""
    sl = trace.slices
    host = host_nesting(ctx)
    cpu = trace.name_ids(KinetoCat.CPU_OP)
    has_ops = any(np.isin(sl.cat[host.rows[a:z]], cpu).any() for a, z in row_windows(trace, len(host.rows)))
    python, span = trace.name_ids(KinetoCat.PYTHON), trace.name_ids(KinetoCat.PROFILER_SPAN)
    none = np.zeros(0, np.int64)
    hn = side_names(trace, host.rows, none, sl.name[:0], op_key, lambda ids: _wrapper_names(trace, ids))
    out = [("host", side_calls(trace, host, hn, trace.name_ids(*HOST_OP_CATS) if has_ops else None, python, span))]
    del hn
    dev = device_work_nesting(ctx)
    dn = side_names(trace, dev.rows, *_launched(trace, dev.rows), op_key, None)
    out.append(("device", side_calls(trace, dev, dn, None, python, span)))
    return [(w, s) for w, s in out if s is not None]


def _build(trace: Trace, ctx: Context) -> OpTable:
    where_sides = _sides(trace, ctx)
    sides = [p for _, p in where_sides]
    cols = ("name", "is_op", "is_wrapper", "calls", "total_ns", "self_ns", "longest")
    if sides:
        c = {k: np.concatenate([getattr(p, k) for p in sides]) for k in cols}
        c["where"] = np.concatenate([np.full(len(p), w, dtype=object) for w, p in where_sides])
    else:
        c = {k: np.zeros(0, dtype=object if k in ("name", "where") else np.int64) for k in (*cols, "where")}
        c["is_op"] = c["is_op"].astype(bool)
        c["is_wrapper"] = c["is_wrapper"].astype(bool)
    # most self time first (wrappers after everything they contain; then host before device, then by name),
    # each op's calls written at their place (no copy of the calls in another order)
    order = np.lexsort((c["name"].astype(str), c["where"].astype(str) == "device", -c["self_ns"],
                        c["is_wrapper"].astype(bool)))
    cnt = c["calls"][order]
    start = np.r_[0, np.cumsum(cnt)].astype(np.int64)
    entry_start = np.empty(len(order), np.int64)
    entry_start[order] = start[:-1]
    total = int(start[-1])
    call_row = np.empty(total, dtype=sides[0].rows.dtype if sides else np.int64)  # `row_dtype`, as the nesting's
    call_self = np.empty(total, dtype=np.int64)
    at = 0
    for p in sides:
        p.fill(entry_start[at:at + len(p)], call_row, call_self)
        at += len(p)
    return OpTable(
        name=c["name"][order],
        where=c["where"][order],
        is_op=c["is_op"][order].astype(bool),
        is_wrapper=c["is_wrapper"][order].astype(bool),
        calls=c["calls"][order].astype(np.int64),
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
