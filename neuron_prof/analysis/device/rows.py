"""The device's work: slices on device tracks (one rule for every analysis that asks what the device did)."""

from __future__ import annotations

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.sites.nesting import Nesting, nesting
from neuron_prof.model import Cat, KinetoCat, TrackKind


def device_rows(ctx: Context) -> np.ndarray:
    """Rows of device work: slices on device tracks, without the GPU copies of user annotations."""
    rows = ctx.rows(TrackKind.DEVICE)
    return ctx.cat_rows(rows, (KinetoCat.GPU_USER_ANNOTATION,), keep=False)


def device_work_nesting(ctx: Context) -> Nesting:
    """Nesting of the device's work without the engine-busy spans (the op table's device side and the device
    time each host op launched both read it): computed once per context."""
    return ctx.memo("device_work_nesting",  # type: ignore[no-any-return]
                    lambda: nesting(ctx.trace, ctx.cat_rows(device_rows(ctx), (Cat.ENGINE_BUSY,), keep=False),
                                    ctx.empty, ctx))
