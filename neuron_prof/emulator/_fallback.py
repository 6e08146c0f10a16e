"""Silent CPU fallback, as TorchNeuron does it for ops it cannot run on the device.

The host waits for the device (it needs the inputs), the inputs are copied device -> host, the op runs on
the host CPU, and the outputs are copied back host -> device. No warning: the only traces are the name in
get_fallback_ops() (bare names, deduplicated, no counts or times), a root-logger DEBUG line like the real
one, and the time it costs. Some linear-algebra ops (qr, svd, eigh) are not recorded at all, like the real
backend.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

import torch

from neuron_prof.emulator import _state
from neuron_prof.emulator._operands import host_seq_nr
from neuron_prof.emulator._timing import KIND_COPY_D2H, KIND_COPY_H2D, STREAM_DMA, copy_duration_ns

_root = logging.getLogger()
_profiling = torch.autograd._profiler_enabled
_span = torch._C._profiler._RecordFunctionFast


_NULL = contextlib.nullcontext()


def _nbytes(ts: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def run_on_host(rt: _state.Runtime, func: Any, info: Any, uargs: Any, ukwargs: Any, u: Any, dev: int) -> Any:
    """Run `func` on the host for device operands (through `info.kernel`); returns device tensors."""
    t0 = time.time_ns()
    clock = rt.clocks[dev]
    seq = host_seq_nr(u)
    in_bytes = _nbytes(u.ins)
    # The host profiler sees what a boxed CPU fallback does: copy the operands to the host (waiting for the
    # device), run the CPU kernel (its aten ops are recorded), copy the results back.
    with _span("aten::_to_cpu") if _profiling() else _NULL:
        waited = clock.wait()
        if in_bytes:
            clock.submit(
                f"{info.name} (copy to host)",
                copy_duration_ns(rt.cfg, in_bytes),
                STREAM_DMA,
                KIND_COPY_D2H,
                seq_nr=seq,
            )
            clock.wait()
    out = info.kernel(*uargs, **ukwargs)
    outs: list[torch.Tensor] = []
    # Fresh outputs are host tensors copied to the device: new wrappers, never aliases of the inputs' ids.
    with _span("aten::copy_") if _profiling() else _NULL:
        res = info.wrap(out, u, dev, outs)
        out_bytes = _nbytes(outs)
        if out_bytes:
            clock.submit(
                f"{info.name} (copy to device)",
                copy_duration_ns(rt.cfg, out_bytes),
                STREAM_DMA,
                KIND_COPY_H2D,
                seq_nr=seq,
            )
    if not info.silent:
        rt.fallback_names.add(info.name)
        if _root.isEnabledFor(logging.DEBUG):
            _root.debug("No implementation could handle operation %s. Falling back on CPU", info.name)
    rt.gt.add(
        "fallback",
        info.name,
        t0,
        time.time_ns(),
        dev,
        detail={"silent": info.silent, "waited_ns": waited, "bytes_in": in_bytes, "bytes_out": out_bytes},
    )
    return res
