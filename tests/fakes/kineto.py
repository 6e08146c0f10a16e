"""Run a real torch.profiler capture and hand its events to a backend the way a capture session does."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from neuron_prof.backends.base import Backend, CaptureContext
from neuron_prof.model import TraceBuilder


def profile_with(backend: Backend, work: Callable[[], Any], options: dict[str, Any] | None = None,
                 record_shapes: bool = True, with_stack: bool = True,
                 export: Callable[[Any], Any] | None = None) -> tuple[TraceBuilder, CaptureContext]:
    """Run `work` under torch.profiler with `backend`'s options and probes; return the builder after contribute().

    The same route as a capture session: the operator recorder while it records, then the session's
    collector (exact stacks and device facts from the event tree, the Kineto JSON loaded with them).
    `export`: the backend's ``export_trace`` when it captures a device profile, as a session passes it."""
    from torch.profiler import profile

    from neuron_prof.capture._kineto import KinetoCollector
    from neuron_prof.capture._operators import OperatorRecorder

    ctx = CaptureContext(options=dict(options or {}), host_pid=os.getpid(), main_tid=threading.get_native_id())
    b = TraceBuilder()
    errors: list[str] = []
    collector = KinetoCollector(b, "<test>", lambda probe, e: errors.append(f"{probe}: {e!r}"),
                                with_stack=with_stack, device_ops=ctx.device_ops, export=export)
    kw: dict[str, Any] = dict(record_shapes=record_shapes, with_stack=with_stack, on_trace_ready=collector)
    kw.update(backend.profiler_options())
    backend.start(ctx)  # as a session does: probes before the profiler starts, stopped after it stops
    rec = OperatorRecorder()
    if with_stack:
        rec.install()
    try:
        with profile(**kw):
            ctx.start_ns = time.time_ns()
            work()
            ctx.end_ns = time.time_ns()
    finally:
        rec.remove()
    backend.stop(ctx)
    assert not errors, errors
    backend.contribute(b, ctx)
    return b, ctx
