"""Run a real torch.profiler capture and hand its events to a backend the way a capture session does."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from neuron_prof.backends.base import Backend, CaptureContext
from neuron_prof.model import TraceBuilder


def kineto_into(builder: TraceBuilder, data: dict[str, Any]) -> None:
    """Kineto JSON into `builder`: the project's loader when it is there, else the slices probes join with."""
    try:
        from neuron_prof.loaders.kineto_json import parse_kineto_into
    except ImportError:
        parse_kineto_into = None
    if parse_kineto_into is not None:
        parse_kineto_into(builder, data, "test")
        return
    base = int(data.get("baseTimeNanoseconds") or 0)
    for e in data.get("traceEvents", []):
        if e.get("ph") != "X" or "ts" not in e:
            continue
        builder.process(e.get("pid", 0))
        t = builder.thread_track(e.get("pid", 0), e.get("tid", 0))
        builder.add_slice(t, int(round(float(e["ts"]) * 1000)) + base, int(round(float(e.get("dur", 0)) * 1000)),
                          str(e.get("name", "")), str(e.get("cat", "")), e.get("args"))


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
    try:
        prof.export_chrome_trace(path)
        with open(path, "rb") as f:
            raw = f.read()
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError:  # Kineto sometimes writes invalid UTF-8 in stack strings
            import json

            data = json.loads(raw.decode("utf-8", errors="replace"), strict=False)
    finally:
        os.unlink(path)
    b = TraceBuilder()
    kineto_into(b, data)
    backend.contribute(b, ctx)
    return b, ctx
