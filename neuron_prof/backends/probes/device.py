"""Device timeline probe: device executions as slices on per-device/per-queue tracks, each with a flow from
the host op that launched it.

Sources, whichever the backend gives:
* a runtime activity feed (columnar: ``name, device, stream_id, kind, start_ns, end_ns, nrt_sequence_id,
  seq_nr, th_id, host_ns``), read once after the capture; rows outside the captured window are dropped;
* device events Kineto already put in the trace (``privateuse1_driver``, CUDA ``kernel``/``gpu_memcpy``):
  those only get flows here (see `link_kineto_device`), never a second copy.

The launching host op is the innermost cpu_op on thread ``th_id`` running at ``host_ns``; without ``host_ns``
the op with the same autograd ``Sequence number`` on that thread (the framework-mapping join).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from neuron_prof.backends.probes._hostops import ThreadOps
from neuron_prof.backends.probes._probe import Probe
from neuron_prof.loaders.framework_mapping import mapping_links, parse_mapping
from neuron_prof.model import Arg, Cat, ProcessKind, TrackKind

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes._view import HostView
    from neuron_prof.model import TraceBuilder

STREAM_LABELS = {0: "device", 1: "DMA", 2: "collectives"}
D2H_KINDS = ("copy_d2h",)


def device_track(builder: TraceBuilder, device_type: str, device: int, stream: int) -> int:
    """Track "neuron:0 device" (stream 0) / "neuron:0 DMA" ... in the device's own process."""
    pid = f"{device_type}:{device}"
    p = builder.process(pid, name=pid, kind=ProcessKind.DEVICE, sort_index=1000 + device)
    label = STREAM_LABELS.get(stream, f"queue {stream}")
    return builder.track(p, f"{pid} {label}", TrackKind.DEVICE, sort_index=stream)


class DeviceActivityProbe(Probe):
    """Reads a runtime's device activity feed after the capture and writes the device timeline."""

    name = "device"

    def __init__(self, read: Callable[[], dict[str, Any] | None], device_type: str = "neuron",
                 sync: Callable[[], Any] | None = None) -> None:
        super().__init__()
        self._read, self._sync, self.device_type = read, sync, device_type
        self.activity: dict[str, Any] | None = None
        self._start_seq = 0
        self.d2h_hosts: list[tuple[Any, int]] = []
        """(th_id, host_ns) of device-to-host transfers: evidence for the fallback probe."""

    def start(self, ctx: CaptureContext) -> None:
        snap = self._read() or {}
        seq = snap.get("nrt_sequence_id")
        self._start_seq = int(np.max(seq)) + 1 if seq is not None and len(seq) else 0

    def stop(self, ctx: CaptureContext) -> None:
        if self._sync is not None:
            self._sync()
        act = self._read()
        if not act or "start_ns" not in act:
            self.activity = None
            return
        seq = np.asarray(act.get("nrt_sequence_id", np.zeros(len(act["start_ns"]))), dtype=np.int64)
        keep = seq >= self._start_seq
        self.activity = {k: (np.asarray(v)[keep] if isinstance(v, np.ndarray) else
                             [x for x, k2 in zip(v, keep) if k2] if k == "name" else v) for k, v in act.items()}
        kinds = self.activity.get("kind_names") or ()
        kind = self.activity.get("kind")
        host = self.activity.get("host_ns")
        if kind is not None and host is not None and kinds:
            d2h = [i for i, n in enumerate(kinds) if n in D2H_KINDS]
            m = np.isin(kind, d2h)
            self.d2h_hosts = list(zip(self.activity["th_id"][m].tolist(), host[m].tolist()))

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        a = self.activity
        if not a or not len(a["start_ns"]):
            return
        builder.metadata.setdefault("device_activity", {})[self.device_type] = {
            "events": int(len(a["start_ns"])), "dropped_by_runtime": int(a.get("dropped") or 0)}
        ops = ThreadOps(view)
        kinds = a.get("kind_names") or ()
        n = len(a["start_ns"])
        host_ns = a.get("host_ns")
        seqnr_index = _seqnr_index(view) if host_ns is None else None
        for i in range(n):
            dev, stream = int(a["device"][i]), int(a["stream_id"][i])
            track = device_track(builder, self.device_type, dev, stream)
            k = int(a["kind"][i]) if "kind" in a else -1
            args = {Arg.SEQ: int(a["nrt_sequence_id"][i]) if "nrt_sequence_id" in a else i, Arg.STREAM: stream,
                    "kind": kinds[k] if 0 <= k < len(kinds) else k}
            start, end = int(a["start_ns"][i]), int(a["end_ns"][i])
            s = builder.add_slice(track, start, max(end - start, 0), a["name"][i], Cat.DEVICE, args)
            tid = int(a["th_id"][i]) if "th_id" in a else None
            if host_ns is not None:
                h = ops.innermost(tid, int(host_ns[i])) if tid is not None else ops.any_thread(int(host_ns[i]))
            else:
                h = seqnr_index.get((tid, int(a["seq_nr"][i])), -1) if seqnr_index is not None else -1
            if h >= 0:
                builder.add_flow(h, s, cat=Cat.DEVICE, name="launch")


def _seqnr_index(view: HostView) -> dict[tuple[Any, int], int]:
    """(tid, autograd Sequence number) -> cpu_op row (the framework_mapping join)."""
    from neuron_prof.model import KinetoCat

    out: dict[tuple[Any, int], int] = {}
    tracks = view.builder.tracks
    for r in view.cat_rows(KinetoCat.CPU_OP):
        sn = view.args(int(r)).get("Sequence number")
        if isinstance(sn, int):
            out.setdefault((tracks[int(view.track[r])].tid, sn), int(r))
    return out


class KinetoDeviceLinkProbe(Probe):
    """Launch flows for device events Kineto itself recorded (``privateuse1_driver``, kernels) that have none.

    A ``privateuse1_driver`` event carries ``nrt_sequence_id`` (Neuron 2.33 docs): with the runtime's framework
    mapping (`mapping`, torch-neuronx-facts "Corrections") it is joined to the host op by autograd sequence
    number (`framework_mapping.host_op_for`). Otherwise, as Kineto links CUDA work: by ``correlation`` with a
    runtime call, else by an ``External id`` shared with a cpu_op (which the Neuron docs do not promise).
    """

    name = "device_links"

    def __init__(self, mapping: Callable[[], Any] | None = None,
                 enable_mapping: Callable[[bool], bool] | None = None) -> None:
        super().__init__()
        self._mapping, self._enable = mapping, enable_mapping
        self._enabled = False
        self.index: dict[int, list[tuple[int, int | None, int | None]]] = {}

    def start(self, ctx: CaptureContext) -> None:
        if self._enable is not None:
            self._enabled = bool(self._enable(True))

    def stop(self, ctx: CaptureContext) -> None:
        try:
            self.index = parse_mapping(self._mapping()) if self._mapping is not None else {}
        finally:
            if self._enabled and self._enable is not None:
                self._enabled = False
                self._enable(False)

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        from neuron_prof.model import KinetoCat

        dev = view.cat_rows(*KinetoCat.DEVICE_CATS)
        if not len(dev):
            return
        linked = set(builder.f_dst)
        missing = [int(r) for r in dev if int(r) not in linked]
        if not missing:
            return
        if self.index:
            missing = self._by_mapping(builder, view, missing)
        ext: dict[Any, int] = {}
        for r in view.cat_rows(KinetoCat.CPU_OP):
            e = view.args(int(r)).get("External id")
            if e is not None:
                ext.setdefault(e, int(r))
        corr: dict[Any, int] = {}
        for r in view.cat_rows(KinetoCat.CUDA_RUNTIME, "cuda_driver", "privateuse1_runtime"):
            c = view.args(int(r)).get("correlation")
            if c is not None:
                corr[c] = int(r)
        for r in missing:
            a = view.args(r)
            src = corr.get(a.get("correlation"), -1) if a.get("correlation") is not None else -1
            if src < 0 and a.get("External id") is not None:
                src = ext.get(a.get("External id"), -1)
            if src >= 0:
                builder.add_flow(src, r, cat=Cat.DEVICE, name="launch")

    def _by_mapping(self, builder: TraceBuilder, view: HostView, rows: list[int]) -> list[int]:
        """Links rows whose ``nrt_sequence_id`` the mapping knows; returns the rows still unlinked."""
        from neuron_prof.model import KinetoCat

        ops = view.cat_rows(KinetoCat.CPU_OP)
        seq = np.asarray([view.args(int(r)).get("Sequence number", -2) for r in ops], dtype=np.int64)
        ts = view.ts[ops].astype(np.int64)
        nrt = [view.args(r).get("nrt_sequence_id") for r in rows]
        linked = mapping_links(self.index, seq, ts, nrt, view.ts[np.asarray(rows, dtype=np.int64)])
        for h, j in linked:
            builder.add_flow(int(ops[h]), rows[j], cat=Cat.DEVICE, name="launch")
        done = {j for _, j in linked}
        return [r for j, r in enumerate(rows) if j not in done]
