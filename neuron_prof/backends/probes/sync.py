"""Sync-point probe: the host waiting for the device, in every form, with exact call site and wait time.

Where the waits come from:

* host reads of device data found at the aten layer by capture (`neuron_prof.capture.DeviceOp`, kind "sync"):
  ``.item()``, ``float()/int()/bool()``, ``if t:``, ``.tolist()``, ``.cpu()``, ``.numpy()``, printing, copies to
  host, data-dependent shapes (``nonzero``, ``masked_select``, ``unique``). Read from the ops' recorded inputs,
  under every Python method, so a tensor subclass that overrides ``tolist`` or ``__repr__`` cannot hide one
  (it still has to copy to the host). One event per call of the user's code, lasting from the first op that
  read device data to the end of the last (the host's wait);
* the device module's ``synchronize()``, wrapped during the capture (the profiler's own drains excluded).
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from neuron_prof.backends.probes._common import probe_track, site_args, step_of
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.model import Arg, Cat, TrackKind
from neuron_prof.model.callsite import NO_STACK, Site, live_site, site_from_stack
from neuron_prof.patches import patch, restore_patches

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder

_OWN = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_OWN_PARTS = (os.path.join(_OWN, "capture"), os.path.join(_OWN, "backends"))
_TORCH_PROFILER = (os.sep + os.path.join("torch", "profiler") + os.sep,
                   os.sep + os.path.join("torch", "autograd", "profiler.py"))


def _from_profiler(frame: Any, depth: int = 6) -> bool:
    """Whether a call comes from neuron-prof itself or from torch.profiler (which drains the device on stop)."""
    while frame is not None and depth > 0:
        fn = frame.f_code.co_filename
        if fn.startswith(_OWN_PARTS) or any(p in fn for p in _TORCH_PROFILER):
            return True
        frame = frame.f_back
        depth -= 1
    return False


class SyncProbe(Probe):
    """Host waits on `device_type` devices: device-data reads found by capture, plus ``synchronize()``."""

    name = "sync"

    def __init__(self, device_type: str | None = None) -> None:
        super().__init__()
        self.device_type = device_type
        self.records: list[tuple[str, str, int, int, Site, list[int], str]] = []
        """(name, sync kind, start ns, end ns, site, shape, aten op) of synchronize() calls."""
        self._saved: list[tuple[Any, str, Any, bool]] = []
        self._local = threading.local()

    def start(self, ctx: CaptureContext) -> None:
        import torch

        dev_mod = getattr(torch, self.device_type, None) if self.device_type else None
        sync = getattr(dev_mod, "synchronize", None)
        if callable(sync):
            patch(dev_mod, "synchronize", self._wrap_sync(sync), self._saved)

    def stop(self, ctx: CaptureContext) -> None:
        restore_patches(self._saved)

    def _wrap_sync(self, orig: Any) -> Any:
        probe = self

        @functools.wraps(orig)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # the profiler's own drains (capture, other probes) are not the user's sync points
            if getattr(probe._local, "depth", 0) or _from_profiler(sys._getframe(1)):
                return orig(*args, **kwargs)
            probe._local.depth = 1
            t0 = time.time_ns()
            try:
                return orig(*args, **kwargs)
            finally:
                t1 = time.time_ns()
                probe._local.depth = 0
                try:  # a failure while recording must never replace the user's call's result
                    probe.records.append((f"{probe.device_type}.synchronize()", "synchronize", t0, t1, live_site(2),
                                          [], ""))
                except Exception:  # noqa: BLE001
                    probe.hook_errors += 1
                probe.overhead_ns += time.time_ns() - t1

        return wrapper

    def _device_reads(self, ctx: CaptureContext) -> list[tuple[str, str, int, int, Site, list[int], str]]:
        out = []
        for d in ctx.device_ops:
            if d.kind != "sync" or (self.device_type and d.device.split(":", 1)[0] != self.device_type):
                continue
            site = site_from_stack(d.stack, True, None) if d.stack else NO_STACK
            out.append((d.call or d.op, d.what, d.start_ns, d.end_ns, site, d.shape, d.op))
        return out

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        records = self._device_reads(ctx) + self.records
        if not records:
            return
        track = probe_track(builder, ctx, TrackKind.SYNC)
        for name, kind, t0, t1, site, shape, op in sorted(records, key=lambda r: r[2]):
            if not site.module:
                site = Site(site.call_site, site.stack, view.modules_at(t0, t1), site.reason, site.function)
            builder.add_slice(track, t0, max(t1 - t0, 0), name, Cat.SYNC, {
                k: v for k, v in {Arg.SYNC_KIND: kind, Arg.SHAPE: shape, Arg.OP: op, **site_args(site),
                                  Arg.STEP: step_of(t0, ctx)}.items() if v not in (None, "")})
