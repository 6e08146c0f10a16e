"""Evaluation passes are told on the thread that trains (issue 34's detection, `steps.evaluation`): module spans
on a backward thread, whose ops carry ``Fwd thread id`` and so build no graph of their own, are no evaluation.
The generated GPU training trace has such spans; every one of its 518 steps once counted as half evaluation."""

from __future__ import annotations

from typing import Any

import pytest

from bench.gen_trace import write
from neuron_prof.analysis import Context
from neuron_prof.analysis.compile.events import eval_passes
from neuron_prof.analysis.steps.evaluation import evaluation_passes
from neuron_prof.analysis.steps.phases import EVALUATION, step_phases
from neuron_prof.loaders import load
from neuron_prof.model import ArgsStore, Trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return load(write(30_000, tmp_path_factory.mktemp("eval") / "t.json"))


def test_a_training_trace_with_backward_module_spans_has_no_evaluation(trace: Trace) -> None:
    ctx = Context(trace)
    assert len(ctx.steps) >= 5 and any(s.startswith("nn.Module: ") for s in trace.strings.as_list())
    assert evaluation_passes(trace) == []
    assert step_phases(ctx).count(EVALUATION) == 0


def test_the_passes_are_found_once_for_the_steps_their_phases_and_the_compiles(
        trace: Trace, monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[Any] = []
    real = ArgsStore.key_int_windows

    def counted(self: ArgsStore, *a: Any, **k: Any) -> Any:
        scans.append(a)
        return real(self, *a, **k)

    monkeypatch.setattr(ArgsStore, "key_int_windows", counted)
    ctx = Context(trace)
    assert len(ctx.steps) >= 5 and ctx.steps.warmup >= 1  # the warm-up is chosen on training time: passes read
    assert step_phases(ctx).count(EVALUATION) == 0 and eval_passes(ctx) == []
    assert len(scans) == 1  # one scan of the args blob: both keys in it
