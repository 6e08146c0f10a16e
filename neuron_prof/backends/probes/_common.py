"""Small helpers shared by probes: probe tracks, steps, sizes."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from neuron_prof.model import Arg, TrackKind
from neuron_prof.model.callsite import Site

if TYPE_CHECKING:
    from neuron_prof.backends.base import CaptureContext
    from neuron_prof.model import TraceBuilder

TRACK_NAMES = {
    TrackKind.COMPILE: "compile",
    TrackKind.FALLBACK: "CPU fallback",
    TrackKind.SYNC: "sync points",
    TrackKind.COLLECTIVE: "collectives",
    TrackKind.DTYPE: "dtype demotions",
}
_SORT = {TrackKind.COMPILE: -50, TrackKind.FALLBACK: -49, TrackKind.SYNC: -48, TrackKind.COLLECTIVE: -47,
         TrackKind.DTYPE: -46}


def host_process(builder: TraceBuilder, ctx: CaptureContext) -> int:
    """Index of the host process of this capture (created when Kineto gave none)."""
    rank = ctx.rank
    name = f"rank {rank} host" if rank is not None else None
    return builder.process(ctx.host_pid, name=None if ctx.host_pid in _known_pids(builder) else name, rank=rank)


def _known_pids(builder: TraceBuilder) -> set[int | str]:
    return {p.pid for p in builder.processes}


def probe_track(builder: TraceBuilder, ctx: CaptureContext, kind: str) -> int:
    """The host process's probe track of `kind` ("compile", "CPU fallback", ...)."""
    return builder.track(host_process(builder, ctx), TRACK_NAMES[kind], kind, sort_index=_SORT.get(kind))


def site_args(site: Site) -> dict[str, Any]:
    """What a probe event records about where it happened: call site, the user's stack, module, or why not."""
    out: dict[str, Any] = {}
    if site.call_site:
        out[Arg.CALL_SITE] = site.call_site
    if site.stack:
        out[Arg.STACK] = list(site.stack)
    if site.module:
        out[Arg.MODULE] = site.module
    if not site.call_site and site.reason:
        out["site_unknown"] = site.reason
    return out


def step_of(ts_ns: int, ctx: CaptureContext) -> int | None:
    """The step (as marked by Session.step()) that contains `ts_ns`, or None."""
    steps = ctx.steps
    if not steps:
        return None
    starts = [s[1] for s in steps]
    i = bisect.bisect_right(starts, ts_ns) - 1
    if i >= 0 and ts_ns <= steps[i][2]:
        return steps[i][0]
    return None


DTYPE_BYTES = {
    "float64": 8, "double": 8, "float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2,
    "c10::BFloat16": 2, "c10::Half": 2, "int64": 8, "long": 8, "long int": 8, "int32": 4, "int": 4, "int16": 2,
    "short": 2, "int8": 1, "uint8": 1, "byte": 1, "char": 1, "unsigned char": 1, "signed char": 1, "bool": 1, "complex64": 8,
    "complex128": 16, "c10::complex<float>": 8, "c10::complex<double>": 16, "float8_e4m3fn": 1,
    "float8_e5m2": 1, "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1,
}


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a dtype name as torch or Kineto write it (torch.float32, "float", "c10::Half")."""
    d = dtype.removeprefix("torch.")
    return DTYPE_BYTES.get(d, 0)
