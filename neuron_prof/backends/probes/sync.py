"""Sync-point probe: host waits on the device (``.item()``, ``.cpu()``, ``.tolist()``, ``.numpy()``, ``bool()``,
printing, ``torch.<device>.synchronize()``), with exact call site and wait time.

The methods are wrapped on ``torch.Tensor`` for the length of the capture and record only calls on non-CPU
tensors (a CPU ``.item()`` waits for nothing). A call made inside another recorded call (print → .cpu()) counts
once, as the outer one. The wait time is the call's host duration.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from neuron_prof.backends.probes._common import probe_track, restore_patches, step_of
from neuron_prof.backends.probes._probe import Probe
from neuron_prof.backends.probes.callsite import frame_call_site
from neuron_prof.model import Arg, Cat, TrackKind

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes._view import HostView
    from neuron_prof.model import TraceBuilder

# Tensor method -> sync kind
_METHODS = {"item": "item", "tolist": "item", "cpu": "cpu", "numpy": "cpu", "to": "cpu", "__bool__": "item",
            "__repr__": "print", "__format__": "print"}


def _to_host(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether a Tensor.to(...) call targets the CPU."""
    d = kwargs.get("device")
    if d is None and args:
        d = args[0]
    if d is None:
        return False
    try:
        import torch

        if isinstance(d, torch.Tensor):
            return d.device.type == "cpu"
        if isinstance(d, (str, torch.device)):
            return torch.device(d).type == "cpu"
    except Exception:  # noqa: BLE001  (dtype-only .to(...) calls and the like)
        return False
    return False


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
    """Wraps Tensor methods and the device module's synchronize() during the capture."""

    name = "sync"

    def __init__(self, device_type: str | None = None) -> None:
        super().__init__()
        self.device_type = device_type
        self.records: list[tuple[str, str, int, int, str, list[int]]] = []
        self._saved: list[tuple[Any, str, Any, bool]] = []
        self._local = threading.local()

    def start(self, ctx: CaptureContext) -> None:
        import torch

        for meth, kind in _METHODS.items():
            orig = getattr(torch.Tensor, meth, None)
            if orig is None:
                continue
            had = meth in torch.Tensor.__dict__
            self._saved.append((torch.Tensor, meth, orig if had else None, had))
            setattr(torch.Tensor, meth, self._wrap_method(meth, kind, orig))
        dev_mod = getattr(torch, self.device_type, None) if self.device_type else None
        sync = getattr(dev_mod, "synchronize", None)
        if callable(sync):
            self._saved.append((dev_mod, "synchronize", sync, True))
            setattr(dev_mod, "synchronize", self._wrap_sync(sync))

    def stop(self, ctx: CaptureContext) -> None:
        restore_patches(self._saved)

    def _wrap_method(self, meth: str, kind: str, orig: Any) -> Any:
        probe = self
        is_to = meth == "to"

        @functools.wraps(orig)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            local = probe._local
            if getattr(local, "depth", 0) or self.is_cpu or (is_to and not _to_host(args, kwargs)):
                return orig(self, *args, **kwargs)
            local.depth = 1
            t0 = time.time_ns()
            try:
                return orig(self, *args, **kwargs)
            finally:
                t1 = time.time_ns()
                local.depth = 0
                try:
                    probe.records.append((f"Tensor.{meth.strip('_')}", kind, t0, t1, frame_call_site(2),
                                          list(self.shape)))
                except Exception:  # noqa: BLE001
                    pass
                probe.overhead_ns += time.time_ns() - t1

        return wrapper

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
                    probe.records.append((f"{probe.device_type}.synchronize", "synchronize", t0, t1,
                                          frame_call_site(2), []))
                except Exception:  # noqa: BLE001
                    pass
                probe.overhead_ns += time.time_ns() - t1

        return wrapper

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        if not self.records:
            return
        track = probe_track(builder, ctx, TrackKind.SYNC)
        for name, kind, t0, t1, site, shape in self.records:
            module = _module_at(view, t0, t1)
            builder.add_slice(track, t0, max(t1 - t0, 0), name, Cat.SYNC, {
                k: v for k, v in {Arg.SYNC_KIND: kind, Arg.CALL_SITE: site, Arg.MODULE: module, Arg.SHAPE: shape,
                                  Arg.STEP: step_of(t0, ctx)}.items() if v not in (None, "")})


def _module_at(view: HostView, t0: int, t1: int) -> str:
    from neuron_prof.backends.probes.compile import _module_at as mod_at

    return mod_at(view, t0, t1 - t0)
