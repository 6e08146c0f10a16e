"""dtype-demotion probe: float64 tensors sent to a device that computes them as float32 (torch-neuronx).

Wraps ``Tensor.to``, ``Tensor.<device>()`` and ``torch.tensor`` during the capture; ``Module.to`` goes through
``Tensor.to``. One instant per transfer, with call site, shape and the call that did it.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import TYPE_CHECKING, Any

from neuron_prof.backends.probes._common import probe_track, restore_patches, step_of
from neuron_prof.backends.probes._probe import Probe
from neuron_prof.backends.probes.callsite import frame_call_site
from neuron_prof.model import Arg, Cat, TrackKind
from neuron_prof.model.schema import EventName

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes._view import HostView
    from neuron_prof.model import TraceBuilder

DEMOTION = EventName.DTYPE_DEMOTION


def _target(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str | None, Any]:
    """(device type, dtype) a .to(...) call asks for (None when not given)."""
    import torch

    dev, dt = kwargs.get("device"), kwargs.get("dtype")
    for a in args:
        if isinstance(a, torch.dtype):
            dt = a
        elif isinstance(a, (str, torch.device)) and dev is None:
            dev = a
        elif isinstance(a, torch.Tensor):
            dev, dt = a.device, a.dtype
    try:
        dtype_ = torch.device(dev).type if dev is not None else None
    except (RuntimeError, TypeError):
        dtype_ = None
    return dtype_, dt


class DtypeProbe(Probe):
    """Records float64 data moved to `device_type`."""

    name = "dtype"

    def __init__(self, device_type: str = "neuron") -> None:
        super().__init__()
        self.device_type = device_type
        self.records: list[tuple[int, str, list[int], str]] = []
        self._saved: list[tuple[Any, str, Any, bool]] = []
        self._local = threading.local()

    def start(self, ctx: CaptureContext) -> None:
        import torch

        f64 = torch.float64
        dev = self.device_type
        probe = self

        def patch(owner: Any, name: str, make: Any) -> None:
            orig = getattr(owner, name, None)
            if orig is None:
                return
            had = name in vars(owner)
            self._saved.append((owner, name, orig if had else None, had))
            setattr(owner, name, functools.wraps(orig)(make(orig)))

        def make_to(orig: Any) -> Any:
            def to(self: Any, *args: Any, **kwargs: Any) -> Any:
                if self.dtype is f64:
                    d, dt = _target(args, kwargs)
                    if d == dev and (dt is None or dt is f64) and self.device.type != dev:
                        probe._record("Tensor.to", list(self.shape))
                        return probe._inner(orig, self, *args, **kwargs)
                return orig(self, *args, **kwargs)
            return to

        def make_dev(orig: Any) -> Any:
            def to_dev(self: Any, *args: Any, **kwargs: Any) -> Any:
                if self.dtype is f64 and self.device.type != dev:
                    probe._record(f"Tensor.{dev}", list(self.shape))
                    return probe._inner(orig, self, *args, **kwargs)
                return orig(self, *args, **kwargs)
            return to_dev

        def make_tensor(orig: Any) -> Any:
            def tensor(*args: Any, **kwargs: Any) -> Any:
                out = probe._inner(orig, *args, **kwargs)
                if out.dtype is f64 and out.device.type == dev:
                    probe._record("torch.tensor", list(out.shape))
                return out
            return tensor

        # float64 made on the device directly (torch.zeros(..., dtype=torch.float64, device=...)) never moves:
        # the backend's own "computed in float32" warning is the signal (torch-neuronx warns; so does the
        # emulator). The warning is passed on unchanged.
        import warnings

        def make_showwarning(orig: Any) -> Any:
            def showwarning(message: Any, category: Any, filename: str, lineno: int, *a: Any, **k: Any) -> Any:
                text = str(message)
                if "float64" in text and "float32" in text:
                    probe._record(f"warning: {text[:120]}", [])
                return orig(message, category, filename, lineno, *a, **k)
            return showwarning

        patch(warnings, "showwarning", make_showwarning)
        patch(torch.Tensor, "to", make_to)
        patch(torch.Tensor, dev, make_dev)
        patch(torch, "tensor", make_tensor)

    def _record(self, op: str, shape: list[int]) -> None:
        if getattr(self._local, "busy", False):  # a transfer made inside a recorded one (.to -> backend -> .to)
            return
        t0 = time.perf_counter_ns()
        try:  # runs inside the user's own call: a failure here must not reach it
            self.records.append((time.time_ns(), op, shape, frame_call_site(3)))
        except Exception:  # noqa: BLE001
            self.hook_errors += 1
        self.overhead_ns += time.perf_counter_ns() - t0

    def _inner(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        local = self._local
        outer = getattr(local, "busy", False)
        local.busy = True
        try:
            return fn(*args, **kwargs)
        finally:
            local.busy = outer

    def stop(self, ctx: CaptureContext) -> None:
        restore_patches(self._saved)

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        if not self.records:
            return
        track = probe_track(builder, ctx, TrackKind.DTYPE)
        for ts, op, shape, site in self.records:
            builder.add_instant(track, ts, DEMOTION, Cat.DTYPE, {Arg.OP: op, Arg.SHAPE: shape, Arg.CALL_SITE: site,
                                                                 Arg.DEVICE: self.device_type,
                                                                 Arg.STEP: step_of(ts, ctx)})
