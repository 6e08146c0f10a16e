"""Run a real torch.profiler capture and hand its events to a backend the way a capture session does."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from neuron_prof.backends.base import Backend, CaptureContext
from neuron_prof.model import TraceBuilder


def profile_with(backend: Backend, work: Callable[[], Any], options: dict[str, Any] | None = None,
                 record_shapes: bool = True, with_stack: bool = True) -> tuple[TraceBuilder, CaptureContext]:
    """Run `work` under torch.profiler with `backend`'s options and probes; return the builder after contribute()."""
    import torch
    from torch.profiler import profile

    ctx = CaptureContext(options=dict(options or {}), host_pid=os.getpid(), main_tid=threading.get_native_id())
    kw: dict[str, Any] = dict(record_shapes=record_shapes, with_stack=with_stack)
    if with_stack:
        kw["experimental_config"] = torch._C._profiler._ExperimentalConfig(verbose=True)
    kw.update(backend.profiler_options())
    backend.start(ctx)  # as a session does: probes before the profiler starts, stopped after it stops
    with profile(**kw) as prof:
        ctx.start_ns = time.time_ns()
        work()
        ctx.end_ns = time.time_ns()
    backend.stop(ctx)
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    b = TraceBuilder()
    try:
        prof.export_chrome_trace(path)
        # The same route as a capture: Kineto writes invalid UTF-8, raw control characters and, in long
        # traces with Python stacks, the odd broken string; the project's loader reads past all of them.
        from neuron_prof.capture._append import append_trace
        from neuron_prof.capture._kineto import load_in_process

        append_trace(b, load_in_process(path)[0])
    finally:
        os.unlink(path)
    backend.contribute(b, ctx)
    return b, ctx
