"""Quiet compiles: torch.profiler's Python tracer pauses inside a torch.compile compile and resumes after it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import torch
from torch.profiler import ProfilerActivity, profile

from neuron_prof.capture import _compile_quiet as cq


def _python_events(prof: profile) -> list[tuple[str, list[str]]]:
    """(name, names of the ops it or a C function it calls runs) per Python call of the recorded tree."""
    out = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        e = stack.pop()
        stack.extend(e.children)
        if e.tag.name == "PyCall":
            try:
                name = e.name
            except UnicodeDecodeError:  # the tracer keeps a view of a code object's name; Dynamo frees some
                continue
            kids = [g for c in e.children for g in ([c] if c.tag.name == "TorchOp" else c.children)]
            out.append((name, [k.name for k in kids if k.tag.name == "TorchOp"]))
    return out


def _after_compile(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x)


def _record(quiet: bool) -> list[tuple[str, list[str]]]:
    torch._dynamo.reset()
    fn = torch.compile(lambda t: torch.relu(t) * 2, backend="aot_eager", dynamic=False)
    q = cq.CompileQuiet()
    if quiet:
        assert q.install()
    try:
        with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
            fn(torch.randn(4, 3))
            _after_compile(torch.randn(2))
        return _python_events(prof)  # while `fn` and its code objects are alive
    finally:
        q.remove()


def test_a_compile_records_no_compiler_calls_and_the_calls_after_it_are_recorded() -> None:
    loud, quiet = _record(False), _record(True)
    # Dynamo's bytecode interpreter and make_fx's tracer run only inside a compile
    inside = ("torch/_dynamo/symbolic_convert.py", "torch/fx/experimental/proxy_tensor.py")
    assert sum(n.startswith(inside) for n, _ in loud) > 50, "the baseline records the compiler's calls"
    assert [n for n, _ in quiet if n.startswith(inside)] == []
    # resumed: the function called after the compile is recorded, with its own op under it
    after = [ops for n, ops in quiet if n.endswith(": _after_compile")]
    assert after == [["aten::sigmoid"]], after


def test_the_handler_is_restored_after_the_session() -> None:
    import torch._dynamo.callback as cb

    before = cb.callback_handler.install_callbacks
    q = cq.CompileQuiet()
    assert q.install()
    assert cb.callback_handler.install_callbacks is not before
    q.remove()
    assert cb.callback_handler.install_callbacks == before
    assert "install_callbacks" not in vars(cb.callback_handler)


def test_a_new_profiler_cycle_during_a_pause_is_not_overwritten() -> None:
    with profile(activities=[ProfilerActivity.CPU], with_stack=True):
        tracer = sys.getprofile()
        assert type(tracer).__name__ == "TraceContext"
        cq._pause()
        assert sys.getprofile() is None
        cq.new_cycle()  # the profiler may have stopped its tracer: resuming would write into freed buffers
        cq._resume()
        assert sys.getprofile() is None
    with profile(activities=[ProfilerActivity.CPU], with_stack=True):
        cq._pause()
        cq._pause()  # nested compile
        cq._resume()
        assert sys.getprofile() is None, "resumed inside the outer compile"
        cq._resume()
        assert sys.getprofile() is not None


def test_no_tracer_on_the_thread_is_left_alone() -> None:
    assert sys.getprofile() is None
    cq._pause()
    cq._resume()
    assert sys.getprofile() is None

    def other(*_: object) -> None:
        return None

    sys.setprofile(other)  # someone else's profiler: never paused
    try:
        cq._pause()
        assert sys.getprofile() is other
        cq._resume()
        assert sys.getprofile() is other
    finally:
        sys.setprofile(None)


def test_dynamo_imported_after_the_session_starts_is_patched_on_import() -> None:
    code = textwrap.dedent("""
        import sys, torch
        from neuron_prof.capture._compile_quiet import CompileQuiet
        assert "torch._dynamo.callback" not in sys.modules
        q = CompileQuiet(); q.install()
        import torch._dynamo
        h = torch._dynamo.callback.callback_handler
        assert "install_callbacks" in vars(h), "not patched on import"
        q.remove()
        assert "install_callbacks" not in vars(h)
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=110)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
