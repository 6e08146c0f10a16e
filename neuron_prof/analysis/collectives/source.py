"""Which slices are the collectives: one rule for the collective finding, device idle and the totals."""

from __future__ import annotations

import re

import numpy as np

from neuron_prof.analysis.context import Context
from neuron_prof.analysis.device.rows import device_rows
from neuron_prof.model import ProcessKind, Trace, TrackKind

KERNEL = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)
"""An NCCL/RCCL device kernel; group 1 is the collective (``AllReduce``)."""


def on_device(trace: Trace) -> np.ndarray:
    """Per track: whether its process is a device (a collective track there is the device's own view, e.g.
    Neuron Explorer's CcOp; on a host process it is where the host made the call)."""
    return np.array([trace.processes[t.process].kind == ProcessKind.DEVICE for t in trace.tracks], dtype=bool)


def collective_rows(trace: Trace, ctx: Context) -> np.ndarray:
    """The collectives, from one source: the host's collective tracks (where the host made each call), else the
    device's (Neuron Explorer's CcOp), else NCCL-style device kernels, else gloo host spans. The same
    all_reduce seen by the host and by the device is counted once. Computed once."""
    return ctx.memo("collective_rows", lambda: _collective_rows(trace, ctx))  # type: ignore[no-any-return]


def _collective_rows(trace: Trace, ctx: Context) -> np.ndarray:
    rows = ctx.rows(TrackKind.COLLECTIVE)
    if len(rows):
        host = rows[~on_device(trace)[trace.slices.track[rows]]]
        return host if len(host) else rows
    dev = device_rows(ctx)
    names = [i for i in range(len(trace.strings)) if KERNEL.match(trace.strings[i])]
    rows = dev[np.isin(trace.slices.name[dev], np.asarray(names, dtype=np.int32))]
    if len(rows):
        return rows
    gloo = [i for i in range(len(trace.strings)) if trace.strings[i].startswith("gloo:")]
    host = ctx.rows(TrackKind.THREAD)
    return host[np.isin(trace.slices.name[host], np.asarray(gloo, dtype=np.int32))]
