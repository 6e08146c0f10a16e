"""dtype-demotion probe: float64 (and int64) reaching a device that computes them narrower (torch-neuronx:
float64 as float32; int64 may be cast to int32).

The events are capture's `neuron_prof.capture.DeviceOp` facts of kind "float64"/"int64", read at the aten
layer from the ops' recorded inputs: where such a tensor *reaches* the device (a factory with ``dtype=`` and
``device=``, ``.to(device)`` of a float64 host tensor, ``.double()``, a float64 default dtype), one per call of
the user's code, with its true shape. Later uses of the same tensor are not new demotions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from neuron_prof.backends.probes._common import probe_track, site_args, step_of
from neuron_prof.backends.probes.probe import Probe
from neuron_prof.model import Arg, Cat, TrackKind
from neuron_prof.model.callsite import site_from_stack
from neuron_prof.model.schema import EventName

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.backends.probes.view import HostView
    from neuron_prof.model import TraceBuilder

DEMOTION = EventName.DTYPE_DEMOTION
NAMES = {"float64": DEMOTION, "int64": EventName.INT64_DEMOTION, "float64_used_before": DEMOTION,
         "float64_first_use": DEMOTION}
"""DeviceOp kind -> event name; a float64 tensor's first use in the profile is a demotion event too, with `use`."""
USES = {"float64_used_before": "before", "float64_first_use": "first"}
"""The `use` arg: "before" (the tensor reached the device before the profile), "first" (it arrived inside)."""


class DtypeProbe(Probe):
    """Records float64 / int64 tensors reaching `device_type`."""

    name = "dtype"

    def __init__(self, device_type: str = "neuron") -> None:
        super().__init__()
        self.device_type = device_type

    def contribute(self, builder: TraceBuilder, ctx: CaptureContext, view: HostView) -> None:
        facts = [d for d in ctx.device_ops
                 if d.kind in NAMES and d.device.split(":", 1)[0] == self.device_type]
        if not facts:
            return
        track = probe_track(builder, ctx, TrackKind.DTYPE)
        for d in facts:
            site = site_from_stack(d.stack, True, None)
            builder.add_instant(track, d.start_ns, NAMES[d.kind], Cat.DTYPE, {
                Arg.OP: d.op, "how": d.what, "call": d.call, Arg.SHAPE: d.shape, Arg.DEVICE: d.device,
                **({"tensor": d.tensor} if d.tensor else {}), **({"use": USES[d.kind]} if d.kind in USES else {}),
                **site_args(site), Arg.STEP: step_of(d.start_ns, ctx)})
