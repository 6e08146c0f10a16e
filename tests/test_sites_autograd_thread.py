"""Exact sites of the backward that runs on autograd's device thread (`capture/_sites.py` walk).

torch.profiler's event tree hangs every op of autograd's device thread under the *first* `run_backward` call
of the profile (the builder keeps that thread's stack pointing at the forward thread's event it first
borrowed), so a walk that trusts the tree gives every backward the first `backward()` line. Each backward's
ops must carry the stack of the `backward()` call that was running when they ran.
"""

from __future__ import annotations

import inspect

import pytest
import torch

from neuron_prof.capture._autograd_threads import trace_autograd_threads
from neuron_prof.capture._sites import walk

pytestmark = pytest.mark.emulator_inprocess


@pytest.fixture(scope="module")
def tnx(emulated_torch_neuronx):  # type: ignore[no-untyped-def]
    return emulated_torch_neuronx


def _two_backwards() -> tuple[int, int]:
    """Two backward() calls a step, at two lines; returns those lines."""
    w = torch.randn(8, 8, device="neuron", requires_grad=True)
    first = inspect.currentframe().f_lineno + 2  # type: ignore[union-attr]
    for _ in range(2):
        (w * 2).sum().backward()
        (w @ w).sum().backward()
    return first, first + 1


def test_each_backward_on_the_device_thread_is_charged_to_its_own_backward_call(tnx) -> None:  # type: ignore[no-untyped-def]
    trace_autograd_threads()
    prof = torch.profiler.profile(with_stack=True)
    prof.start()
    try:
        mul_line, mm_line = _two_backwards()
    finally:
        prof.stop()
    sites = walk(prof)
    here = __file__.rsplit("/", 1)[-1]
    by_node: dict[str, set[int]] = {}
    for (_ns, name), stack in sites.op_stacks.items():
        if name.startswith("autograd::engine::evaluate_function: "):
            lines = {int(f.split("(", 1)[1].split(")")[0]) for f in stack.split(";")
                     if f.split("(", 1)[0].endswith(here) and f.endswith(": _two_backwards")}
            by_node.setdefault(name.rsplit(" ", 1)[1], set()).update(lines)
    assert by_node["MulBackward0"] == {mul_line}
    assert by_node["MmBackward0"] == {mm_line}
    # the same node of both backward() calls: each at its own line
    assert by_node["SumBackward0"] == {mul_line, mm_line}
    assert by_node["torch::autograd::AccumulateGrad"] == {mul_line, mm_line}
