"""CompileProbe on real torch.compile runs (backend="eager": no Inductor)."""

from __future__ import annotations

import os
import time

import pytest
import torch
import torch._dynamo

from neuron_prof.backends import CaptureContext, get_backend
from neuron_prof.model import Arg, Meta, TraceBuilder, TrackKind


def _run(fn, shapes, limit: int) -> tuple[TraceBuilder, CaptureContext]:
    torch._dynamo.reset()
    old = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = limit
    try:
        ctx = CaptureContext(host_pid=os.getpid(), start_ns=time.time_ns())
        backend = get_backend("cpu")
        backend.start(ctx)
        cf = torch.compile(fn, dynamic=False, backend="eager")
        for n in shapes:
            cf(torch.randn(n, 3))
        backend.stop(ctx)
        ctx.end_ns = time.time_ns()
        b = TraceBuilder()
        backend.contribute(b, ctx)
        return b, ctx
    finally:
        torch._dynamo.config.recompile_limit = old
        torch._dynamo.reset()


def _f(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).sum()


def _display(path: str) -> str:
    from neuron_prof.model.callsite import display_path

    return display_path(path)


def test_a_compile_is_placed_at_the_users_call_of_the_compiled_function() -> None:
    """Under profile(), each compile's call site is the line that called the compiled function (exact)."""
    import neuron_prof

    torch._dynamo.reset()
    cf = torch.compile(_f, dynamic=False, backend="eager")
    with neuron_prof.profile(None, quiet=True) as p:
        for n in (1, 2, 3):
            cf(torch.randn(n, 3))  # CALL
    torch._dynamo.reset()
    line = next(i for i, s in enumerate(open(__file__).read().splitlines(), 1) if s.endswith("# CALL"))
    t = p.trace
    rows = t.slices_on(TrackKind.COMPILE)
    assert len(rows) == 3
    for r in rows:
        a = t.slice_args(int(r))
        assert a[Arg.CALL_SITE] == f"{_display(__file__)}:{line}", a
        assert a["code"].endswith(f":{_f.__code__.co_firstlineno} _f")


def test_five_shapes_give_five_compiles_with_reasons() -> None:
    b, ctx = _run(_f, [1, 2, 3, 4, 5], limit=8)
    trace = b.build()
    rows = trace.slices_on(TrackKind.COMPILE)
    assert len(rows) == 5
    assert trace.tracks[trace.find_track(TrackKind.COMPILE)].name == "compile"
    args = [trace.slice_args(int(r)) for r in rows]
    assert [a[Arg.COMPILE_ID] for a in args] == ["0/0", "0/1", "0/2", "0/3", "0/4"]
    assert Arg.RECOMPILE_REASON not in args[0]
    for i in range(1, 5):
        assert f"expected {i}, actual {i + 1}" in args[i][Arg.RECOMPILE_REASON]
    # the compiled function itself (no profiler ran here, so there is no user call site to give)
    assert all(a["code"] == f"{_display(__file__)}:{_f.__code__.co_firstlineno} _f" for a in args)
    assert all(Arg.CALL_SITE not in a for a in args)
    assert all(a[Arg.COMPILE_KIND] == "torch.compile" for a in args)
    assert all(trace.slice_name(int(r)) == "_f" for r in rows)
    # durations are Dynamo's own, inside the captured window
    assert (trace.slices.dur_ns[rows] > 0).all()
    assert (trace.slices.ts_ns[rows] >= ctx.start_ns - 1000).all()
    assert (trace.slices.ts_ns[rows] + trace.slices.dur_ns[rows] <= ctx.end_ns + 1000).all()
    assert "entire_frame_compile" in args[0][Arg.PHASES]
    assert trace.metadata[Meta.BACKEND] == "cpu"
    assert trace.metadata[Meta.PROBE_ERRORS] == []
    assert len(trace.instants_on(TrackKind.COMPILE)) == 0


def test_recompile_limit_hit_is_recorded() -> None:
    b, _ = _run(_f, [1, 2, 3, 4, 5], limit=3)
    trace = b.build()
    assert len(trace.slices_on(TrackKind.COMPILE)) == 3
    inst = trace.instants_on(TrackKind.COMPILE)
    names = [trace.strings[int(trace.instants.name[i])] for i in inst]
    assert names == ["recompile limit hit"]
    a = trace.instant_args(int(inst[0]))
    assert a["limit"] == 3 and "recompile limit" in a["reason"].lower()


def _g(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    if y.sum().item() > 1e9:  # .item() breaks the graph
        y = y + 1
    return y.sum()


def test_graph_break_is_an_instant() -> None:
    b, _ = _run(_g, [2], limit=8)
    trace = b.build()
    inst = trace.instants_on(TrackKind.COMPILE)
    names = {trace.strings[int(trace.instants.name[i])] for i in inst}
    assert names == {"graph break"}
    assert "item" in trace.instant_args(int(inst[0]))["reason"]
    assert len(trace.slices_on(TrackKind.COMPILE)) == 2  # _g and its resume function


def test_failing_probe_is_recorded_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    import neuron_prof.backends.probes.compile as cp

    def boom() -> list[object]:
        raise RuntimeError("metrics moved")

    monkeypatch.setattr(cp, "_metrics", boom)
    ctx = CaptureContext(host_pid=os.getpid())
    backend = get_backend("cpu")
    backend.start(ctx)
    backend.stop(ctx)
    b = TraceBuilder()
    backend.contribute(b, ctx)
    assert ctx.errors[0]["probe"] == "compile" and "metrics moved" in ctx.errors[0]["error"]
    assert b.metadata[Meta.PROBE_ERRORS] == ctx.errors
