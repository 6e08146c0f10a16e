"""The device's work: slices on device tracks (one rule for every analysis that asks what the device did)."""

from __future__ import annotations

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.model import KinetoCat, TrackKind


def device_rows(ctx: Context) -> np.ndarray:
    """Rows of device work: slices on device tracks, without the GPU copies of user annotations."""
    rows = ctx.rows(TrackKind.DEVICE)
    return ctx.cat_rows(rows, (KinetoCat.GPU_USER_ANNOTATION,), keep=False)
