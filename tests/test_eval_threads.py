"""Evaluation passes are told on the thread that trains (issue 34's detection, `steps.evaluation`): module spans
on a backward thread, whose ops carry ``Fwd thread id`` and so build no graph of their own, are no evaluation.
The generated GPU training trace has such spans; every one of its 518 steps once counted as half evaluation."""

from __future__ import annotations

from pathlib import Path

from bench.gen_trace import write
from neuron_prof.analysis import Context
from neuron_prof.analysis.steps.evaluation import evaluation_passes
from neuron_prof.analysis.steps.phases import EVALUATION, step_phases
from neuron_prof.loaders import load


def test_a_training_trace_with_backward_module_spans_has_no_evaluation(tmp_path: Path) -> None:
    trace = load(write(30_000, tmp_path / "t.json"))
    ctx = Context(trace)
    assert len(ctx.steps) >= 5 and any(s.startswith("nn.Module: ") for s in trace.strings.as_list())
    assert evaluation_passes(trace) == []
    assert step_phases(ctx).count(EVALUATION) == 0
