"""Collectives probe: every torch.distributed collective in the block, measured around the Python call.

gloo and torch-neuronx's Python ProcessGroup emit no ``record_param_comms``, so bytes, group, ranks and host
start/end are measured here, by wrapping the ``torch.distributed`` functions for the length of the capture
(calls bound before start(), e.g. ``from torch.distributed import all_reduce``, are not seen). In
contribute() each record is joined, by order and name, with Kineto's ``c10d::<op>`` op and its
``gloo:<op>`` / ``nccl:<op>`` work span (flows link them); collectives Kineto saw that no wrapper did (DDP's
C++ reducer) are added from ``record_param_comms`` when it carries sizes.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from neuron_prof.backends.probes._common import dtype_bytes, probe_track, site_args, step_of
from neuron_prof.backends.probes._hostops import tensor_bytes
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.model import Arg, Cat, KinetoCat, TrackKind
from neuron_prof.model.callsite import Site, live_site

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder


def _nbytes(t: Any) -> int:
    if t is None:
        return 0
    if isinstance(t, (list, tuple)):
        return sum(_nbytes(x) for x in t)
    try:
        return int(t.numel()) * int(t.element_size())
    except Exception:  # noqa: BLE001  (not a tensor)
        return 0


def _dtype(t: Any) -> str:
    if isinstance(t, (list, tuple)):
        return _dtype(t[0]) if t else ""
    d = getattr(t, "dtype", None)
    return str(d).removeprefix("torch.") if d is not None else ""


# op -> (bytes_in(args), bytes_out(args), tensor for dtype, busbw factor(n)); args are bound by name.
_ALLRED = lambda n: 2 * (n - 1) / n  # noqa: E731
_GATHERLIKE = lambda n: (n - 1) / n  # noqa: E731
_ONE = lambda n: 1.0  # noqa: E731
_OPS: dict[str, tuple[Callable[[dict[str, Any]], int], Callable[[dict[str, Any]], int], str,
                      Callable[[int], float]]] = {
    "all_reduce": (lambda a: _nbytes(a["tensor"]), lambda a: _nbytes(a["tensor"]), "tensor", _ALLRED),
    "all_reduce_coalesced": (lambda a: _nbytes(a["tensors"]), lambda a: _nbytes(a["tensors"]), "tensors", _ALLRED),
    "all_gather": (lambda a: _nbytes(a["tensor"]), lambda a: _nbytes(a["tensor_list"]), "tensor", _GATHERLIKE),
    "all_gather_into_tensor": (lambda a: _nbytes(a["input_tensor"]), lambda a: _nbytes(a["output_tensor"]),
                               "input_tensor", _GATHERLIKE),
    "all_gather_single": (lambda a: _nbytes(a["input_tensor"]), lambda a: _nbytes(a["output_tensor"]),
                          "input_tensor", _GATHERLIKE),
    "reduce_scatter_single": (lambda a: _nbytes(a["input"]), lambda a: _nbytes(a["output"]), "output", _GATHERLIKE),
    "reduce_scatter": (lambda a: _nbytes(a["input_list"]), lambda a: _nbytes(a["output"]), "output", _GATHERLIKE),
    "reduce_scatter_tensor": (lambda a: _nbytes(a["input"]), lambda a: _nbytes(a["output"]), "output", _GATHERLIKE),
    "broadcast": (lambda a: _nbytes(a["tensor"]), lambda a: _nbytes(a["tensor"]), "tensor", _ONE),
    "reduce": (lambda a: _nbytes(a["tensor"]), lambda a: _nbytes(a["tensor"]), "tensor", _ONE),
    "all_to_all": (lambda a: _nbytes(a["input_tensor_list"]), lambda a: _nbytes(a["output_tensor_list"]),
                   "input_tensor_list", _GATHERLIKE),
    "all_to_all_single": (lambda a: _nbytes(a["input"]), lambda a: _nbytes(a["output"]), "input", _GATHERLIKE),
    "gather": (lambda a: _nbytes(a["tensor"]), lambda a: _nbytes(a.get("gather_list")), "tensor", _ONE),
    "scatter": (lambda a: _nbytes(a.get("scatter_list")), lambda a: _nbytes(a["tensor"]), "tensor", _ONE),
    "barrier": (lambda a: 0, lambda a: 0, "", _ONE),
    "send": (lambda a: _nbytes(a["tensor"]), lambda a: 0, "tensor", _ONE),
    "recv": (lambda a: 0, lambda a: _nbytes(a["tensor"]), "tensor", _ONE),
    "isend": (lambda a: _nbytes(a["tensor"]), lambda a: 0, "tensor", _ONE),
    "irecv": (lambda a: 0, lambda a: _nbytes(a["tensor"]), "tensor", _ONE),
}
# Kineto's names for the same op: c10d::allreduce_, gloo:all_reduce, nccl:all_reduce, record_param_comms "allreduce".
_C10D = {"all_reduce": "allreduce_", "all_gather_single": "_allgather_base_",
         "reduce_scatter_single": "_reduce_scatter_base_", "all_gather": "allgather_", "all_gather_into_tensor": "_allgather_base_",
         "reduce_scatter": "reduce_scatter_", "reduce_scatter_tensor": "_reduce_scatter_base_",
         "broadcast": "broadcast_", "reduce": "reduce_", "all_to_all": "alltoall_",
         "all_to_all_single": "alltoall_base_", "gather": "gather_", "scatter": "scatter_", "barrier": "barrier",
         "send": "send", "recv": "recv_", "isend": "send", "irecv": "recv_", "all_reduce_coalesced":
         "allreduce_coalesced_"}


def norm_op(name: str) -> str:
    """Comparable op key: "all_reduce", "allreduce_", "gloo:all_reduce", "AllReduce" -> "allreduce"."""
    n = name.rsplit(":", 1)[-1].lower().replace("_", "")
    return {"allgatherbase": "allgatherintotensor", "reducescatterbase": "reducescattertensor",
            "alltoallbase": "alltoallsingle",
            "allgathersingle": "allgatherintotensor", "reducescattersingle": "reducescattertensor", "isend": "send", "irecv": "recv"}.get(n, n)


@dataclass
class CollectiveRecord:
    op: str
    start_ns: int
    end_ns: int
    bytes_in: int
    bytes_out: int
    dtype: str
    group: str
    ranks: list[int]
    world_size: int
    seq: int
    site: Site
    async_op: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class CollectivesProbe(Probe):
    """Wraps torch.distributed collectives during the capture; one record per call."""

    name = "collectives"

    def __init__(self, ops: Sequence[str] = tuple(_OPS)) -> None:
        super().__init__()
        self.ops = tuple(ops)
        self.records: list[CollectiveRecord] = []
        self._saved: list[tuple[Any, str, Any]] = []
        self._local = threading.local()
        self._seq: dict[str, int] = {}
        self._lock = threading.Lock()
        self.failures: list[str] = []

    # ---- hooks ------------------------------------------------------------------------------
    def start(self, ctx: CaptureContext) -> None:
        import torch.distributed as dist

        if not dist.is_available():
            return
        import torch.distributed.distributed_c10d as c10d

        for op in self.ops:
            orig = getattr(c10d, op, None)
            if orig is None or getattr(orig, "__neuron_prof_wrapped__", False):
                continue
            wrapped = self._wrap(op, orig)
            for mod in (dist, c10d):
                if getattr(mod, op, None) is orig:
                    self._saved.append((mod, op, orig))
                    setattr(mod, op, wrapped)

    def stop(self, ctx: CaptureContext) -> None:
        for mod, op, orig in reversed(self._saved):
            setattr(mod, op, orig)
        self._saved.clear()

    def _wrap(self, op: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        import inspect

        sig = inspect.signature(orig)
        probe = self

        @functools.wraps(orig)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            local = probe._local
            if getattr(local, "depth", 0):  # a collective called by a wrapped collective: count the outer one
                return orig(*args, **kwargs)
            t_in = time.perf_counter_ns()
            local.depth = 1
            try:
                pre = probe._before(op, sig, args, kwargs)
            except Exception as e:  # noqa: BLE001  (never stop the user's collective; reported in contribute)
                pre = None
                probe.failures.append(f"{op}: {type(e).__name__}: {e}")
            t0 = time.time_ns()
            t_call = time.perf_counter_ns()
            try:
                return orig(*args, **kwargs)
            finally:
                t_ret = time.perf_counter_ns()
                t1 = time.time_ns()
                local.depth = 0
                if pre is not None:
                    try:
                        probe._after(op, pre, t0, t1)
                    except Exception:  # noqa: BLE001
                        pass
                probe.overhead_ns += (t_call - t_in) + (time.perf_counter_ns() - t_ret)

        wrapper.__neuron_prof_wrapped__ = True  # type: ignore[attr-defined]
        return wrapper

    def _before(self, op: str, sig: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        import torch.distributed as dist

        bound = sig.bind_partial(*args, **kwargs).arguments
        f_in, f_out, dkey, _ = _OPS[op]
        group = bound.get("group")
        g = group if group is not None else dist.group.WORLD
        try:
            ranks = list(dist.get_process_group_ranks(g))
        except Exception:  # noqa: BLE001
            ranks = []
        gname = _group_name(dist, g)
        return {"bytes_in": f_in(bound), "bytes_out": f_out(bound), "dtype": _dtype(bound.get(dkey)) if dkey else "",
                "group": gname, "ranks": ranks, "world_size": len(ranks) or dist.get_world_size(g),
                "async_op": bool(bound.get("async_op", False)), "site": live_site(3)}

    def _after(self, op: str, pre: dict[str, Any], t0: int, t1: int) -> None:
        with self._lock:
            seq = self._seq.get(pre["group"], 0)
            self._seq[pre["group"]] = seq + 1
            self.records.append(CollectiveRecord(op=op, start_ns=t0, end_ns=t1, seq=seq, **pre))

    # ---- trace --------------------------------------------------------------------------------
    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        if self.failures:
            ctx.errors.append({"probe": self.name, "phase": "record",
                               "error": f"{len(self.failures)} calls not measured; first: {self.failures[0]}"})
        kineto = _kineto_collectives(view)
        if not self.records and not len(kineto["rpc"]) and not len(kineto["c10d"]):
            return
        track = probe_track(builder, ctx, TrackKind.COLLECTIVE)
        used: set[int] = set()
        kernels = _device_kernels(view)
        rec: CollectiveRecord | None
        for rec in sorted(self.records, key=lambda r: r.start_ns):
            links = [(kind, _take(kineto[kind], rec, used, view)) for kind in ("c10d", "work")]
            links.append(("device", _take_kernel(kernels, rec, view)))
            for kind, k in links:
                if kind == "work" and k is not None:  # the real span of the collective on the backend's worker
                    rec.extra.update({Arg.WORK_TS: int(view.ts[k]), Arg.WORK_DUR: int(view.dur[k])})
                if kind == "device" and k is not None:
                    rec.extra.update({Arg.DEVICE_TS: int(view.ts[k]), Arg.DEVICE_DUR: int(view.dur[k])})
            row = self._add(builder, ctx, track, rec)
            for kind, k in links:
                if k is not None:
                    builder.add_flow(row, int(k), cat=Cat.COLLECTIVE, name=kind)
        # collectives Kineto saw but no Python wrapper did (e.g. DDP's C++ reducer under NCCL)
        seq: dict[str, int] = {}
        for r in kineto["rpc"]:
            if int(r) in used or _inside_any(view, int(r), self.records):
                continue
            rec = _record_from_rpc(view, int(r))
            if rec is not None:
                rec.seq = seq.get(rec.group, 0)
                seq[rec.group] = rec.seq + 1
                k = _take_kernel(kernels, rec, view)
                if k is not None:
                    rec.extra.update({Arg.DEVICE_TS: int(view.ts[k]), Arg.DEVICE_DUR: int(view.dur[k])})
                row = self._add(builder, ctx, track, rec)
                builder.add_flow(row, int(r), cat=Cat.COLLECTIVE, name="record_param_comms")
                if k is not None:
                    builder.add_flow(row, int(k), cat=Cat.COLLECTIVE, name="device")
        # ... and under gloo, which writes no record_param_comms: the c10d op and its work span's sizes
        group = next((r.group for r in self.records if r.group), "0")
        world = next((r.world_size for r in self.records if r.world_size), 0) or _world_size()
        for c in kineto["c10d"]:
            c = int(c)
            if c in used or _inside_any(view, c, self.records) or _holds(view, c, kineto["rpc"]):
                continue
            w = _work_of(view, c, kineto["work"], used)
            rec = _record_from_c10d(view, c, w, group, world)
            if rec is None:
                continue
            rec.seq = seq.get(rec.group, 0)
            seq[rec.group] = rec.seq + 1
            if w is not None:
                used.add(w)
                rec.extra.update({Arg.WORK_TS: int(view.ts[w]), Arg.WORK_DUR: int(view.dur[w])})
            row = self._add(builder, ctx, track, rec)
            builder.add_flow(row, c, cat=Cat.COLLECTIVE, name="c10d")
            if w is not None:
                builder.add_flow(row, w, cat=Cat.COLLECTIVE, name="work")

    def _add(self, builder: TraceBuilder, ctx: CaptureContext, track: int, rec: CollectiveRecord) -> int:
        dur = max(rec.end_ns - rec.start_ns, 1)
        # bandwidth over the device span when the backend gives one (NCCL kernels), else the host span
        bw_dur = max(int(rec.extra.get(Arg.DEVICE_DUR) or dur), 1)
        size = rec.bytes_out if norm_op(rec.op) in ("allgather", "allgatherintotensor", "gather") else max(rec.bytes_in,
                                                                                                    rec.bytes_out)
        algbw = size / bw_dur  # bytes/ns == GB/s
        n = max(rec.world_size, 1)
        factor = _OPS.get(rec.op, (None, None, None, _ONE))[3](n) if n > 1 else 1.0
        args = {Arg.BYTES_IN: rec.bytes_in, Arg.BYTES_OUT: rec.bytes_out, Arg.DTYPE: rec.dtype, Arg.GROUP: rec.group,
                Arg.RANKS: rec.ranks, Arg.WORLD_SIZE: rec.world_size, Arg.SEQ: rec.seq,
                Arg.ALGBW: float(f"{algbw:.6g}"), Arg.BUSBW: float(f"{algbw * factor:.6g}"),
                Arg.STEP: step_of(rec.start_ns, ctx), "async_op": rec.async_op, **site_args(rec.site), **rec.extra}
        return builder.add_slice(track, rec.start_ns, dur, rec.op, Cat.COLLECTIVE,
                                 {k: v for k, v in args.items() if v not in (None, "")})


def _group_name(dist: Any, g: Any) -> str:
    """A group's name, the same on every rank ("0" for the default group)."""
    try:
        return str(g.group_name or "0")
    except Exception:  # noqa: BLE001  (Python ProcessGroups, e.g. torch-neuronx's, raise "name not set")
        pass
    c10d = dist.distributed_c10d
    try:
        return str(c10d._get_process_group_name(g))
    except Exception:  # noqa: BLE001
        pass
    names = getattr(getattr(c10d, "_world", None), "pg_names", {}) or {}
    return str(names.get(g, "0"))


def _kineto_collectives(view: HostView) -> dict[str, np.ndarray]:
    """Rows of Kineto's c10d:: ops, gloo:/nccl: work spans and record_param_comms, in time order."""
    ops = view.cat_rows(KinetoCat.CPU_OP)
    ann = view.cat_rows(KinetoCat.USER_ANNOTATION)
    return {"c10d": view.name_rows(lambda s: s.startswith("c10d::"), ops),
            "work": view.name_rows(lambda s: s.startswith(("gloo:", "nccl:")), ann),
            "rpc": view.name_rows(lambda s: s == "record_param_comms", ops)}


def _take(rows: np.ndarray, rec: CollectiveRecord, used: set[int], view: HostView) -> int | None:
    """First unused row of the same op that starts within the record's host span (work: after its start)."""
    key = norm_op(_C10D.get(rec.op, rec.op))
    for r in rows:
        r = int(r)
        if r in used or view.ts[r] < rec.start_ns - 50_000:
            continue
        if view.ts[r] > rec.end_ns + 50_000:
            break
        if norm_op(view.name_of(r)) in (key, norm_op(rec.op)):
            used.add(r)
            return r
    return None


def _device_kernels(view: HostView) -> dict[str, list[int]]:
    """NCCL device kernels by op key, in time order (Kineto puts "Collective name" in their args)."""
    rows = view.cat_rows(KinetoCat.KERNEL)
    rows = view.name_rows(lambda s: s.lower().startswith("nccl"), rows)
    out: dict[str, list[int]] = {}
    for r in rows:
        name = view.args(int(r)).get("Collective name") or view.name_of(int(r)).split("_")[1]
        out.setdefault(norm_op(str(name)), []).append(int(r))
    return out


def _take_kernel(kernels: dict[str, list[int]], rec: CollectiveRecord, view: HostView) -> int | None:
    """The first unused NCCL kernel of the record's op that starts after the host call began."""
    q = kernels.get(norm_op(rec.op)) or kernels.get(norm_op(_C10D.get(rec.op, rec.op)))
    while q:
        r = q[0]
        if view.ts[r] >= rec.start_ns - 1000:
            q.pop(0)
            return r
        q.pop(0)  # a kernel launched before this call: belongs to a collective we did not see
    return None


def _inside_any(view: HostView, row: int, records: list[CollectiveRecord]) -> bool:
    t = int(view.ts[row])
    return any(r.start_ns - 50_000 <= t <= r.end_ns + 50_000 for r in records)


_FROM_C10D = {norm_op(v): k for k, v in reversed(list(_C10D.items()))}
"""c10d op key -> the torch.distributed op it runs ("allreduce" -> "all_reduce")."""


def _world_size() -> int:
    try:
        import torch.distributed as dist

        return int(dist.get_world_size()) if dist.is_available() and dist.is_initialized() else 0
    except Exception:  # noqa: BLE001  (the job may be tearing down)
        return 0


def _holds(view: HostView, row: int, rows: np.ndarray) -> bool:
    """Whether one of `rows` lies inside host op `row` (a record_param_comms already gave that collective)."""
    return bool(len(rows)) and bool(np.any((view.track[rows] == view.track[row]) & (view.ts[rows] >= view.ts[row])
                                           & (view.end[rows] <= view.end[row])))


def _work_of(view: HostView, row: int, work: np.ndarray, used: set[int]) -> int | None:
    """The backend's work span (``gloo:all_reduce``) of c10d op `row`: the first unused one of the same op that
    starts after it."""
    key = norm_op(view.name_of(row))
    for w in work.tolist():
        if w not in used and view.ts[w] >= view.ts[row] - 50_000 and norm_op(view.name_of(w)) == key:
            return int(w)
    return None


def _record_from_c10d(view: HostView, row: int, work: int | None, group: str, world: int) -> CollectiveRecord | None:
    """A collective no wrapper saw (DDP's C++ reducer under gloo), from its ``c10d::`` op; its size from the
    work span's ``Input Dims``/``Input type`` (the c10d op lists a TensorList without dtypes)."""
    op = _FROM_C10D.get(norm_op(view.name_of(row)))
    if op is None:
        return None
    size = tensor_bytes(view.args(work)) if work is not None else 0
    t = view.args(work).get("Input type") if work is not None else None
    dtype = str(t[0]) if isinstance(t, list) and t else ""
    return CollectiveRecord(op=op, start_ns=int(view.ts[row]), end_ns=int(view.end[row]), bytes_in=size,
                            bytes_out=size, dtype=dtype, group=group, ranks=[], world_size=world or 1, seq=-1,
                            site=view.site(row, view.args(row)), extra={"source": "c10d"})


def _record_from_rpc(view: HostView, row: int) -> CollectiveRecord | None:
    a = view.args(row)
    name = str(a.get("Collective name") or "")
    if not name:
        return None
    esize = dtype_bytes(str(a.get("dtype", "")).lower())
    n_in, n_out = a.get("In msg nelems"), a.get("Out msg nelems")
    ranks_s = str(a.get("Process Group Ranks", "[]"))
    try:
        ranks = [int(x) for x in ranks_s.strip("[]").split(",") if x.strip()]
    except ValueError:
        ranks = []
    site = view.site(row, a)
    op = {"allreduce": "all_reduce", "allgather": "all_gather", "reduce_scatter": "reduce_scatter",
          "broadcast": "broadcast", "all_to_all": "all_to_all", "alltoall": "all_to_all"}.get(name, name)
    return CollectiveRecord(op=op, start_ns=int(view.ts[row]), end_ns=int(view.end[row]),
                            bytes_in=int(n_in or 0) * esize, bytes_out=int(n_out or 0) * esize,
                            dtype=str(a.get("dtype", "")), group=str(a.get("Process Group Name", "")), ranks=ranks,
                            world_size=int(a.get("Group size") or len(ranks) or 1), seq=-1, site=site,
                            extra={"source": "record_param_comms"})
