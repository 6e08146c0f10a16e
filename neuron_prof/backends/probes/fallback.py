"""CPU-fallback probe: one event per fallen-back call, reconstructed from a names-only report.

A backend such as torch-neuronx says only *which* op names fell back (deduplicated, no counts, times or call
sites). Per-call events are rebuilt by joining those names with the profiler's own op spans:

* every top-level Kineto op whose name matches a reported name (formats mixed: ``aten::x.overload``, bare
  names, fused ``a|b``) is a candidate;
* evidence that a call really ran on the host: copy ops nested inside it (real boxed CPU fallback:
  ``aten::_to_cpu``/``aten::copy_``) or device-to-host DMA the device timeline shows issued from inside it;
  when some calls of a name have evidence, only those count, otherwise every call does;
* shapes, dtypes and input bytes come from ``Input Dims``/``Input type``, call site and module from the
  ``Call stack`` (or enclosing python spans).

`DeepFallbackProbe` is the opt-in dispatch-level mode for backends that report nothing: a TorchDispatchMode
records each op on a non-CPU tensor (~6–10 µs per op) and marks as fallbacks the ops with no kernel for the
device's dispatch key.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from neuron_prof.backends._compat import op_key, split_fused
from neuron_prof.backends.probes._common import probe_track, site_args, step_of
from neuron_prof.backends.probes._hostops import COPY_OPS, SYNC_OPS, shapes_dtypes, tensor_bytes, top_level_same_key
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.model import Arg, Cat, KinetoCat, TrackKind
from neuron_prof.model.callsite import Site, live_site
from neuron_prof.model.order import searchsorted, sorted_unique
from neuron_prof.model.schema import AUTOGRAD_EVALUATE, is_compile_span

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder

UNMATCHED = "fallback_unmatched"
"""Metadata key: reported fallback names with no op span in the trace (e.g. inside a compiled graph)."""


class FallbackProbe(Probe):
    """Per-call CPU-fallback events from a names-only report joined with Kineto's op spans."""

    name = "fallback"

    def __init__(self, report: Callable[[], list[str] | None], clear: Callable[[], Any] | None = None,
                 sync: Callable[[], Any] | None = None, d2h: Callable[[], list[tuple[Any, int]]] | None = None) -> None:
        super().__init__()
        self._report, self._clear, self._sync = report, clear, sync
        self._d2h = d2h
        """(host thread id, host ns) of device-to-host transfers, from the device timeline when there is one."""
        self.names: list[str] = []
        self._before: set[str] = set()
        self.deep: DeepFallbackProbe | None = None
        """When deep mode runs too: its dispatch records give each reconstructed call its exact call site."""

    def start(self, ctx: CaptureContext) -> None:
        # The report is cumulative since the last clear: clear it so it names only this capture's fallbacks.
        if self._clear is not None and ctx.options.get("clear_op_tracking", True):
            self._clear()
        else:
            self._before = set(self._report() or ())

    def stop(self, ctx: CaptureContext) -> None:
        if self._sync is not None:
            self._sync()  # the report is complete only after the device drained
        got = self._report() or []
        self.names = sorted(set(got) - self._before) if self._before else sorted(set(got))

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        events, unmatched = reconstruct(view, self.names, self._d2h() if self._d2h else None)
        if unmatched:
            builder.metadata[UNMATCHED] = unmatched
        if not events:
            return
        track = probe_track(builder, ctx, TrackKind.FALLBACK)
        for row, args in events:
            args[Arg.STEP] = step_of(int(view.ts[row]), ctx)
            last = args.pop("fused_end_row", None)
            dur = int(view.end[last] - view.ts[row]) if last is not None else int(view.dur[row])
            name = args[Arg.REPORTED_AS] if last is not None else view.name_of(row)
            if self.deep is not None:  # the deep recorder saw this same call: one event, never two
                seen = self.deep.claim(name, int(view.ts[row]), int(view.ts[row]) + dur)
                if seen is not None and not args.get(Arg.CALL_SITE):
                    args.update(site_args(seen))
            s = builder.add_slice(track, int(view.ts[row]), dur, name, Cat.FALLBACK,
                                  {k: v for k, v in args.items() if v not in (None, "")})
            builder.add_flow(row, s, cat=Cat.FALLBACK, name="fallback")


def reconstruct(view: HostView, names: list[str], d2h_hosts: list[tuple[Any, int]] | None = None,
                silent: bool = True) -> tuple[list[tuple[int, dict[str, Any]]], list[str]]:
    """(row, args) per fallen-back call, and the reported names no op span matched.

    With device-to-host transfer points (`d2h_hosts`), top-level ops that forced one but are not in the report
    are also returned, marked ``silent`` (backends send some ops to the CPU without recording them).
    """
    keys: dict[str, str] = {}
    fused: list[tuple[str, list[str]]] = []
    for n in names:
        parts = split_fused(n)
        if len(parts) > 1:
            fused.append((n, parts))
        elif parts:
            keys.setdefault(parts[0], n)
    ops = view.cat_rows(KinetoCat.CPU_OP)
    if not len(ops):
        return [], sorted(names)
    ops = ops[~_while_compiling(view, ops)]  # torch.compile tracing on fake tensors: no call of the program's
    cand = top_level_same_key(view, view.name_rows(lambda s: op_key(s) in keys, ops))
    cand = _drop_enclosed(view, cand)  # sub-ops of a fallen-back op ran on host tensors anyway
    copies = view.name_rows(lambda s: op_key(s) in COPY_OPS, ops)
    d2h = _d2h_rows(view, d2h_hosts or []) & set(ops.tolist())
    evidence: dict[int, int] = {}  # row -> copy bytes when it has evidence
    for r in cand:
        r = int(r)
        nested = _direct_copies(view, r, copies, ops)
        if len(nested) or r in d2h:
            evidence[r] = sum(tensor_bytes(view.args(int(c)), first_only=True) for c in _outermost(view, nested))
    with_ev = {op_key(view.name_of(r)) for r in evidence}
    out: list[tuple[int, dict[str, Any]]] = []
    matched: set[str] = set()
    for r in cand:
        r = int(r)
        k = op_key(view.name_of(r))
        if k in with_ev and r not in evidence:
            continue  # this name has calls with host-copy evidence; this one had none: it ran on CPU tensors
        matched.add(keys[k])
        out.append((r, _event_args(view, r, evidence.get(r), reported=keys[k])))
    for name, parts in fused:
        for first, last in _sequences(view, ops, parts):
            matched.add(name)
            a = _event_args(view, first, None, reported=name)
            a["fused_end_row"] = last
            out.append((first, a))
    seen = {r for r, _ in out}
    if silent:
        # from the trace's structure: a device op holding its own copy to the host, host compute and a copy back
        for r, how in structural_fallbacks(view, ops, copies).items():
            if r not in seen:
                seen.add(r)
                out.append((r, {**_event_args(view, r, None, reported=""), Arg.SILENT: True, Arg.FOUND_BY: how}))
    if silent and d2h:
        for r in sorted(d2h):
            k = op_key(view.name_of(r))
            if r in seen or k in COPY_OPS or k in SYNC_OPS or k in keys:
                continue
            out.append((r, {**_event_args(view, r, None, reported=""), Arg.SILENT: True,
                            Arg.FOUND_BY: "a device-to-host transfer issued from inside it (device timeline)"}))
    out.sort(key=lambda e: int(view.ts[e[0]]))
    return out, sorted(set(names) - matched)


BOXED = "its span holds aten::_to_cpu (the boxed CPU fallback's copy to the host), the host kernel and a copy back"
PYTHON = "its span holds a copy to the host, the same op run on the host, and a copy back (a Python fallback)"


def structural_fallbacks(view: HostView, ops: np.ndarray, copies: np.ndarray) -> dict[int, str]:
    """Ops that ran on the host whatever the backend reports, from their spans' structure -> how it was found.

    The boxed CPU fallback copies its device operands with ``aten::_to_cpu`` inside the op's span; a Python
    fallback copies them (``.cpu()`` / ``aten::_to_copy``), runs the same op on the host tensors and copies the
    results back. The fallen-back op is the innermost namespaced op around that copy (``aten::_linalg_svd``
    under ``aten::linalg_svdvals``)."""
    if not len(copies):
        return {}
    parent = _Parents(view, view.name_rows(lambda s: "::" in s, ops))
    out: dict[int, str] = {}
    for c in copies:
        c = int(c)
        r = parent.of(c)
        if r < 0 or r in out or op_key(view.name_of(r)) in COPY_OPS:
            continue
        if op_key(view.name_of(c)) == "_to_cpu":
            out[parent.outermost_same(r)] = BOXED
            continue
        # a copy, then the same op on the host, then a copy back: each directly inside r
        key = op_key(view.name_of(r))
        inner = [int(x) for x in parent.children(r)]
        again = [x for x in inner if view.ts[x] >= view.end[c] and op_key(view.name_of(x)) == key]
        if again and any(op_key(view.name_of(x)) in COPY_OPS and view.ts[x] >= view.end[again[0]] for x in inner):
            out[parent.outermost_same(r)] = PYTHON
    return out


class _Parents:
    """The innermost namespaced op around a host op, per thread track (sorted starts, bounded look-back)."""

    def __init__(self, view: HostView, named: np.ndarray) -> None:
        self.view = view
        self.by_track: dict[int, np.ndarray] = {}
        for t in sorted_unique(view.track[named]):
            rows = named[view.track[named] == t]
            self.by_track[int(t)] = rows[np.argsort(view.ts[rows], kind="stable")]

    def of(self, row: int) -> int:
        v = self.view
        rows = self.by_track.get(int(v.track[row]))
        if rows is None:
            return -1
        i = int(searchsorted(v.ts[rows], v.ts[row], side="right")) - 1
        for j in range(i, max(i - 512, -1), -1):
            r = int(rows[j])
            if r != row and v.end[r] >= v.end[row] and (v.ts[r] < v.ts[row] or v.end[r] > v.end[row] or r < row):
                return r
        return -1

    def outermost_same(self, row: int) -> int:
        """`row`, or the outermost op of the same key it is nested in (a dispatch mode's or backend's outer
        span of the same call: the row the names-only report matches)."""
        key = op_key(self.view.name_of(row))
        p = self.of(row)
        while p >= 0 and op_key(self.view.name_of(p)) == key:
            row, p = p, self.of(p)
        return row

    def children(self, row: int) -> list[int]:
        v = self.view
        rows = self.by_track.get(int(v.track[row]), np.empty(0, dtype=np.int64))
        a = int(searchsorted(v.ts[rows], v.ts[row], side="left"))
        b = int(searchsorted(v.ts[rows], v.end[row], side="right"))
        return [int(r) for r in rows[a:b] if int(r) != row and self.of(int(r)) == row]


def _while_compiling(view: HostView, rows: np.ndarray) -> np.ndarray:
    """Per row: nested in a span of torch.compile compiling (`is_compile_span`) on its thread, where Dynamo
    and AOTAutograd run the model on fake tensors (their copies and host ops are no fallbacks)."""
    spans = view.name_rows(is_compile_span, rows)
    out = np.zeros(len(rows), dtype=bool)
    for t in sorted_unique(view.track[spans]):
        outer = _drop_enclosed(view, spans[view.track[spans] == t])
        starts, ends = view.ts[outer], view.end[outer]
        on = np.flatnonzero(view.track[rows] == t)
        k = searchsorted(starts, view.ts[rows[on]], side="right") - 1
        inside = (k >= 0) & (view.end[rows[on]] <= ends[np.maximum(k, 0)])
        out[on] = inside & ~np.isin(rows[on], outer)
    return out


def _drop_enclosed(view: HostView, rows: np.ndarray) -> np.ndarray:
    keep = []
    open_until: dict[int, int] = {}
    for r in rows:
        r = int(r)
        t = int(view.track[r])
        if open_until.get(t, -1) >= view.end[r]:
            continue
        open_until[t] = int(view.end[r])
        keep.append(r)
    return np.asarray(keep, dtype=np.int64)


def _sequences(view: HostView, ops: np.ndarray, parts: list[str]) -> list[tuple[int, int]]:
    """(first row, last row) of each run of consecutive outermost ops whose keys are `parts`, in order."""
    outer = _drop_enclosed(view, ops)
    out: list[tuple[int, int]] = []
    for t in sorted_unique(view.track[outer]):
        rows = outer[view.track[outer] == t]
        ks = [op_key(view.name_of(int(r))) for r in rows]
        n = len(parts)
        i = 0
        while i + n <= len(ks):
            if ks[i:i + n] == parts:
                out.append((int(rows[i]), int(rows[i + n - 1])))
                i += n
            else:
                i += 1
    return out


def _event_args(view: HostView, row: int, copy_bytes: int | None, reported: str) -> dict[str, Any]:
    a = view.args(row)
    shapes, dtypes = shapes_dtypes(a)
    in_bytes = tensor_bytes(a)
    return {Arg.SHAPES: shapes, Arg.DTYPES: dtypes, **site_args(view.site(row, a)),
            Arg.COPY_BYTES: copy_bytes if copy_bytes else in_bytes, Arg.INPUT_BYTES: in_bytes,
            Arg.REPORTED_AS: reported}


def _nested(view: HostView, row: int, rows: np.ndarray) -> np.ndarray:
    if not len(rows):
        return rows
    m = (view.track[rows] == view.track[row]) & (view.ts[rows] >= view.ts[row]) & (view.end[rows] <= view.end[row])
    return rows[m & (rows != row)]


def _direct_copies(view: HostView, row: int, copies: np.ndarray, ops: np.ndarray) -> np.ndarray:
    """Copy ops called by `row` itself: not those inside its CPU kernel's own sub-ops (sort's internal copy_)."""
    nested = _nested(view, row, copies)
    if not len(nested):
        return nested
    inner = _nested(view, row, ops)
    inner = inner[~np.isin(inner, copies)]
    keep = [c for c in nested if not np.any((view.ts[inner] <= view.ts[c]) & (view.end[inner] >= view.end[c]))]
    return np.asarray(keep, dtype=np.int64)


def _outermost(view: HostView, rows: np.ndarray) -> list[int]:
    out: list[int] = []
    last_end = -1
    for r in rows[np.argsort(view.ts[rows], kind="stable")]:
        if view.ts[r] >= last_end:
            out.append(int(r))
            last_end = int(view.end[r])
    return out


def _d2h_rows(view: HostView, hosts: list[tuple[Any, int]]) -> set[int]:
    """Top-level host ops that issued a device-to-host transfer."""
    if not hosts:
        return set()
    from neuron_prof.backends.probes._hostops import ThreadOps

    ops = ThreadOps(view)
    out: set[int] = set()
    for tid, t in hosts:
        r = ops.innermost(tid, t)
        # a transfer issued inside a copy op (aten::to -> aten::_to_copy -> ...) or a dispatcher span
        # ("PythonSubclass") belongs to the op around it; not to autograd's span around a backward node: a
        # copy there is the node's own code (a `.cpu()` in a backward() the user wrote), a host read
        while r >= 0 and (op_key(view.name_of(r)) in COPY_OPS or "::" not in view.name_of(r)):
            parent = ops.innermost(tid, int(view.ts[r]) - 1)
            if parent < 0 or view.end[parent] < view.end[r] or _autograd_span(view, ops, tid, parent):
                break
            r = parent
        if r >= 0:
            out.add(r)
    return out


def _autograd_span(view: HostView, ops: Any, tid: Any, r: int) -> bool:
    """`r` is autograd's span around a backward node ("autograd::engine::evaluate_function: XBackward") or the
    node's own span inside it ("XBackward"): the node's code, not an op."""
    name = view.name_of(r)
    if name.startswith(AUTOGRAD_EVALUATE):
        return True
    outer = ops.innermost(tid, int(view.ts[r]) - 1)
    return outer >= 0 and view.name_of(outer) == AUTOGRAD_EVALUATE + name


class DeepFallbackProbe(Probe):
    """Opt-in dispatch-level recorder: every op on a non-CPU tensor, fallbacks marked from the dispatch table."""

    name = "deep_fallback"

    def __init__(self, device_type: str, report: Callable[[], list[str] | None] | None = None) -> None:
        super().__init__()
        self.device_type = device_type
        self._report = report
        self._mode: Any = None
        self.records: list[tuple[str, int, int, list[Any], list[str], Site]] = []
        self.ops_seen = 0
        self._claimed: set[int] = set()

    def claim(self, name: str, t0: int, t1: int) -> Site | None:
        """Site of the unclaimed record of op `name` inside [t0, t1] (the same call seen by the
        reconstructing probe); the record is then not emitted again. None when none matches."""
        key = op_key(name)
        for i, (n, a, b, _, _, site) in enumerate(self.records):
            if i not in self._claimed and a >= t0 and b <= t1 and op_key(n) == key:
                self._claimed.add(i)
                return site
        return None

    def start(self, ctx: CaptureContext) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        probe = self

        class _Recorder(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                kwargs = kwargs or {}
                t0 = time.time_ns()
                out = func(*args, **kwargs)
                t1 = time.time_ns()
                try:  # runs inside every op of the user's program: a failure here must not reach it
                    probe._record(func, args, t0, t1)
                except Exception:  # noqa: BLE001
                    probe.hook_errors += 1
                probe.overhead_ns += time.time_ns() - t1
                return out

        self._mode = _Recorder()
        self._mode.__enter__()

    def _record(self, func: Any, args: Any, t0: int, t1: int) -> None:
        import torch
        from torch._subclasses.fake_tensor import is_fake

        ts = [a for a in args if isinstance(a, torch.Tensor)]
        if not ts or all(t.device.type == "cpu" for t in ts):
            return
        if any(t.device.type == "meta" or is_fake(t) for t in ts):
            return  # torch.compile tracing (FakeTensorMode): no data, no call of the program's on the device
        self.ops_seen += 1
        self.records.append((str(func._schema.name), t0, t1, [list(t.shape) for t in ts],
                             [str(t.dtype).removeprefix("torch.") for t in ts], live_site(3)))

    def stop(self, ctx: CaptureContext) -> None:
        if self._mode is not None:
            self._mode.__exit__(None, None, None)
            self._mode = None

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        reported = {k for n in (self._report() or []) for k in split_fused(n)} if self._report else None
        fell = {name for name, *_ in self.records if _is_fallback(name, self.device_type, reported)}
        track = probe_track(builder, ctx, TrackKind.FALLBACK)
        for i, (name, t0, t1, shapes, dtypes, site) in enumerate(self.records):
            if name in fell and i not in self._claimed:
                builder.add_slice(track, t0, t1 - t0, name, Cat.FALLBACK,
                                  {Arg.SHAPES: shapes, Arg.DTYPES: dtypes, **site_args(site), Arg.DEEP: True,
                                   Arg.STEP: step_of(t0, ctx)})
        builder.metadata["deep_fallback"] = {"ops_recorded": self.ops_seen, "overhead_ns": self.overhead_ns,
                                             "overhead_ns_per_op": self.overhead_ns // max(self.ops_seen, 1)}


def _is_fallback(name: str, device_type: str, reported: set[str] | None) -> bool:
    if reported is not None:
        return op_key(name) in reported
    import torch

    key = {"cuda": "CUDA", "neuron": "PrivateUse1", "privateuseone": "PrivateUse1"}.get(device_type, "PrivateUse1")
    try:
        if torch._C._dispatch_has_kernel_for_dispatch_key(name, key):
            return False
        return not torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd")
    except Exception:  # noqa: BLE001
        return False
