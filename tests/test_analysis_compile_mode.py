"""The first-call compile finding says which NEURON_LAUNCH_BLOCKING mode ran (the Neuron adapter's compile
events carry ``mode``; ``metadata["compile_cache"]`` the variable as the capture saw it)."""

from __future__ import annotations

import pytest

from neuron_prof.analysis import analyze
from neuron_prof.model import Arg, TraceBuilder, TrackKind
from tests._builders import one

MS = 1_000_000


def _trace(modes: list[str | None], launch: str | None):
    b = TraceBuilder()
    p = b.process(1, "python")
    host = b.thread_track(1, 1, "main")
    comp = b.track(p, "compile", TrackKind.COMPILE)
    for k, mode in enumerate(modes):
        t = k * 50 * MS
        b.add_slice(host, t, 30 * MS, f"aten::op{k}", "cpu_op")
        args = {Arg.COMPILE_KIND: "eager", Arg.SIGNATURE: f"op{k}[f32]", **({"mode": mode} if mode else {})}
        b.add_slice(comp, t + MS, 20 * MS, f"aten::op{k}", "neuron_prof.compile", args)
    if launch is not None:
        b.metadata["compile_cache"] = {"NEURON_LAUNCH_BLOCKING": launch,
                                       "modes": sorted({m for m in modes if m})}
    return b.build()


@pytest.mark.parametrize(("modes", "launch", "says"), [
    (["async", "async"], "0", "Compiles ran asynchronously (NEURON_LAUNCH_BLOCKING=0)"),
    (["blocking", "blocking"], "unset",
     "Compiles blocked the host (NEURON_LAUNCH_BLOCKING unset: the release default)"),
    (["blocking", "async"], "1", "Both modes ran (NEURON_LAUNCH_BLOCKING=1): 1 blocking compiles"),
])
def test_the_finding_names_the_mode(modes: list[str], launch: str, says: str) -> None:
    f = one(analyze(_trace(modes, launch)), "first_call_compile")
    assert says in f.advice and f.advice.index(says) > 0  # after what to do, not instead of it
    assert f.evidence["launch_modes"] == {m: modes.count(m) for m in set(modes)}
    assert f.evidence["NEURON_LAUNCH_BLOCKING"] == launch


def test_no_mode_no_sentence() -> None:
    """A trace whose compiles carry no mode (CUDA, torch.compile on CPU): nothing is claimed."""
    f = one(analyze(_trace([None, None], None)), "first_call_compile")
    assert "NEURON_LAUNCH_BLOCKING" not in f.advice and "launch_modes" not in f.evidence


@pytest.mark.parametrize(("launch", "key"), [("1", "compile_cache"), ("1", "runtime_profile"), ("0", "compile_cache"),
                                             ("unset", "runtime_profile"), (None, None)])
def test_launch_blocking_1_says_host_op_times_include_device_time(launch: str | None, key: str | None) -> None:
    """Issue 21 item 6: under NEURON_LAUNCH_BLOCKING=1 every op is synchronous (docs/trainium.md)."""
    t = _trace(["blocking"], None)
    if key is not None:
        t = t.replace(metadata={**t.metadata, key: {"NEURON_LAUNCH_BLOCKING": launch}})
    got = [f for f in analyze(t) if f.kind == "launch_blocking"]
    if launch == "1":
        (f,) = got
        assert f.severity == "info" and "host op times include device time" in f.title
    else:
        assert got == []
