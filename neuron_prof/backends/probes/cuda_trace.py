"""CUDA trace-side probe: what Kineto's CUDA activities say, turned into sync points and launch links.

Works on the events already in the builder (a live capture or a loaded trace.json), so it is tested on real
CUDA traces:

* sync points: host waits in the CUDA runtime (``cudaDeviceSynchronize``, ``cudaStreamSynchronize``,
  ``cudaEventSynchronize``, blocking ``cudaMemcpy``) become sync events named after the op that waited
  (``aten::item`` → kind "item", ``aten::to``/``copy_`` → "cpu", none → "synchronize") with its call site;
* launch flows: kernels/memcpys whose runtime call is known by ``correlation`` but that have no incoming
  flow get one (Kineto writes ``ac2g`` flows, but not always).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from neuron_prof.backends._compat import op_key
from neuron_prof.backends.probes._common import probe_track, site_args, step_of
from neuron_prof.backends.probes._hostops import COPY_OPS, SYNC_OPS, ThreadOps
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.model import Arg, Cat, KinetoCat

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder

WAITS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize", "cudaMemcpy",
         "hipDeviceSynchronize", "hipStreamSynchronize", "hipEventSynchronize", "hipMemcpy")


class CudaTraceProbe(Probe):
    """Sync points from Kineto's CUDA runtime events (missing launch flows: device.KinetoDeviceLinkProbe)."""

    name = "cuda_trace"

    def __init__(self, min_wait_ns: int = 0) -> None:
        super().__init__()
        self.min_wait_ns = min_wait_ns

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        self._syncs(builder, ctx, view)

    def _syncs(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        rt = view.cat_rows(KinetoCat.CUDA_RUNTIME, "cuda_driver")
        waits = view.name_rows(lambda s: s in WAITS, rt)
        waits = waits[view.dur[waits] >= self.min_wait_ns]
        if not len(waits):
            return
        ops = ThreadOps(view)
        tracks = builder.tracks
        out = []
        for r in waits:
            r = int(r)
            host = ops.innermost(tracks[int(view.track[r])].tid, int(view.ts[r]), named=True)
            kind, name = _kind(view, host, view.name_of(r))
            site = view.site(host) if host >= 0 else view.site(r)
            out.append((r, name, {Arg.SYNC_KIND: kind, **site_args(site),
                                  "runtime_call": view.name_of(r), Arg.STEP: step_of(int(view.ts[r]), ctx)}))
        track = probe_track(builder, ctx, "sync")
        for r, name, args in out:
            s = builder.add_slice(track, int(view.ts[r]), int(view.dur[r]), name, Cat.SYNC,
                                  {k: v for k, v in args.items() if v not in (None, "")})
            builder.add_flow(r, s, cat=Cat.SYNC, name="wait")


def _kind(view: HostView, host: int, runtime: str) -> tuple[str, str]:
    if host < 0:
        return "synchronize", runtime
    name = view.name_of(host)
    k = op_key(name)
    if k in SYNC_OPS:
        return "item", name
    if k in COPY_OPS:
        return "cpu", name
    if "ynchronize" in runtime:
        return "synchronize", name
    return runtime, name
