"""Launch flows for the device events Kineto itself put in the trace (``privateuse1_driver``, CUDA
``kernel``/``gpu_memcpy``): they only get flows here, never a second copy.

The Neuron device timeline itself comes from the runtime's capture processed by Neuron Explorer
(`runtime_profile`), on Trainium and on the emulated device alike: there is no runtime activity feed
(torch-neuronx-facts, "Corrections": "Device timeline").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from neuron_prof.backends.probes.probe import Probe
from neuron_prof.loaders.explorer.framework_mapping import mapping_links, parse_mapping
from neuron_prof.model import Cat

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder


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
