"""Step inference rules on small built traces, and on the real foreign traces in ../shared."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import neuron_prof
from neuron_prof.analysis.steps.boundaries import make_steps
from neuron_prof.analysis.steps.inference import infer_steps, periodic_groups
from neuron_prof.model import Trace, TraceBuilder, TrackKind
from neuron_prof.model._tables import FlowTable
from tests.conftest import KINETO_DIR

MS = 1_000_000
T0 = 1_700_000_000 * 10**9
OP, PY, ANN = "cpu_op", "python_function", "user_annotation"


def test_periodic_groups() -> None:
    a = np.array
    assert periodic_groups(a([1, 2, 1, 2, 1])) == [(0, 1, True), (2, 3, True), (4, 4, False)]
    assert periodic_groups(a([1, 1, 2] * 3)) == [(0, 2, True), (3, 5, True), (6, 8, True)]
    # no period: a new iteration at each occurrence of the first name
    assert periodic_groups(a([1, 1, 1, 2])) == [(0, 0, True), (1, 1, True), (2, 3, True)]
    assert periodic_groups(a([], dtype=np.int32)) == []


class Loop:
    """A host thread with `n` iterations 10 ms apart, each built by the caller from its start time."""

    def __init__(self, n: int = 5) -> None:
        self.b = TraceBuilder()
        self.main = self.b.thread_track(1, 1, "main")
        self.n = n
        self.starts = [T0 + k * 10 * MS for k in range(n)]

    def span(self, ts: int, dur: int, name: str, cat: str = OP, track: int | None = None) -> None:
        self.b.add_slice(self.main if track is None else track, ts, dur, name, cat)

    def build(self) -> Trace:
        return self.b.build()


def _train_iteration(lp: Loop, t: int, opts: tuple[str, ...] = ("AdamW",)) -> None:
    lp.span(t, 100_000, "Optimizer.zero_grad#AdamW.zero_grad", ANN)
    lp.span(t + 200_000, 2 * MS, "nn.Module: Net_0", PY)
    lp.span(t + 300_000, MS, "aten::mm")
    lp.span(t + 2_500_000, 3 * MS, "aten::mm_backward")
    for i, o in enumerate(opts):
        lp.span(t + 6 * MS + i * MS, 800_000, f"Optimizer.step#{o}.step", ANN)


def test_optimizer_steps_of_two_classes_are_one_iteration() -> None:
    lp = Loop()
    for t in lp.starts:
        _train_iteration(lp, t, ("Adam", "SGD"))  # a GAN: discriminator then generator
    lp.span(lp.starts[-1] + 10 * MS, MS, "Optimizer.step#Adam.step", ANN)  # the profile ended mid-iteration
    st = make_steps(lp.build())
    assert st.source == "inferred: optimizer step" and len(st) == lp.n
    assert st.markers == ("Optimizer.step#Adam.step", "Optimizer.step#SGD.step")
    assert st.start_ns[0] == lp.starts[0] and (st.end_ns == np.array(lp.starts) + 7 * MS + 800_000).all()


def test_an_optimizer_inside_another_is_one_step() -> None:
    lp = Loop()
    for t in lp.starts:
        _train_iteration(lp, t)
        lp.span(t + 5_900_000, MS, "Optimizer.step#Lookahead.step", ANN)  # wraps AdamW's step
    st = make_steps(lp.build())
    assert len(st) == lp.n and st.markers == ("Optimizer.step#Lookahead.step",)


def test_a_single_iteration_is_not_a_step_pattern() -> None:
    lp = Loop(1)
    _train_iteration(lp, lp.starts[0])
    assert infer_steps(lp.build()) is None and make_steps(lp.build()).source == "none"


def test_module_groups_start_at_the_model_and_the_last_lasts_the_median() -> None:
    lp = Loop()
    lp.span(T0 - 5 * MS, MS, "nn.Module: Embedding_0", PY)  # called once: setup, not an iteration
    for t in lp.starts:
        lp.span(t, 2 * MS, "nn.Module: Net_0", PY)
        lp.span(t + 3 * MS, MS, "aten::mul_backward")
        lp.span(t + 4 * MS, MS, "nn.Module: Block_0", PY)  # recomputed in backward (checkpointing)
    lp.span(lp.starts[-1] + 50 * MS, MS, "aten::save")  # long after the loop
    st = make_steps(lp.build())
    assert st.source == "inferred: module call" and st.markers == ("nn.Module: Net_0", "nn.Module: Block_0")
    assert list(st.start_ns) == lp.starts
    assert st.end_ns[-1] == lp.starts[-1] + 10 * MS  # a typical step, not up to aten::save


def test_an_annotation_holding_each_iteration_wins_and_a_partial_one_does_not() -> None:
    lp = Loop()
    for t in lp.starts:
        lp.span(t - MS, 9 * MS, "train_step", ANN)  # holds the whole iteration
        lp.span(t + 6 * MS - 50_000, 900_000, "## optimizer ##", ANN)  # holds only the update
        _train_iteration(lp, t)
    st = make_steps(lp.build())
    assert st.source == "inferred: user annotation" and st.markers == ("train_step",)
    assert list(st.start_ns) == [t - MS for t in lp.starts]
    # without train_step the update's annotation does not hold the forward: optimizer steps stay
    lp2 = Loop()
    for t in lp2.starts:
        lp2.span(t + 6 * MS - 50_000, 900_000, "## optimizer ##", ANN)
        _train_iteration(lp2, t)
    assert make_steps(lp2.build()).source == "inferred: optimizer step"


def test_an_annotation_around_part_of_the_iteration_does_not_replace_the_module_steps() -> None:
    lp = Loop()
    for t in lp.starts:
        lp.span(t, MS, "forward", ANN)
        lp.span(t + 10, MS - 20, "nn.Module: Detector_0", PY)
        lp.span(t + 20, MS - 40, "aten::conv2d")
        lp.span(t + 2 * MS, 5 * MS, "aten::nms")  # post-processing: most of the iteration's work
    st = make_steps(lp.build())
    assert st.source == "inferred: module call" and list(st.start_ns) == [t + 10 for t in lp.starts]
    assert (st.dur_ns[:-1] == 10 * MS).all() and st.end_ns[-1] == lp.starts[-1] + 7 * MS  # the trace's end


def test_annotations_alone_need_top_level_and_one_thread() -> None:
    lp = Loop()
    other = lp.b.thread_track(1, 2, "worker")
    for t in lp.starts:
        lp.span(t, 2 * MS, "infer", ANN)
        lp.span(t + 3 * MS, 2 * MS, "aten::cat")
        lp.span(t + 3 * MS + 10, MS, "fast_cat", ANN)  # inside an op: library detail
        lp.span(t + 6 * MS, MS, "request", ANN)
        lp.span(t + MS, 3 * MS, "request", ANN, track=other)  # concurrent requests, not a loop
    st = make_steps(lp.build())
    assert st.source == "inferred: user annotation" and st.markers == ("infer",)
    assert list(st.start_ns) == lp.starts and (st.dur_ns == 2 * MS).all()


def test_python_frames_and_profiler_step_around_an_annotation_are_fine() -> None:
    lp = Loop()
    lp.b.metadata["steps"] = []  # a capture without prof.step(): its ProfilerStep#0 is the whole region
    lp.span(T0 - MS, 60 * MS, "ProfilerStep#0", ANN)
    lp.span(T0 - MS, 60 * MS, "train.py(1): <module>", PY)
    for t in lp.starts:
        lp.span(t, 2 * MS, "step", ANN)
    st = make_steps(lp.build())
    assert st.source == "inferred: user annotation" and len(st) == lp.n


# ---- the real foreign traces ------------------------------------------------------------------------
def _host_profiler_steps(trace: Trace) -> set[int]:
    host = np.isin(trace.slices.track, trace.track_ids(TrackKind.THREAD))
    names = {trace.slice_name(int(i)) for i in np.flatnonzero(host)}
    return {int(n.split("#")[1]) for n in names if n.startswith("ProfilerStep#")}


def test_foreign_traces_keep_their_steps(kineto_trace: Path) -> None:
    tr = neuron_prof.load(kineto_trace)
    st = make_steps(tr)
    prof = _host_profiler_steps(tr)
    if prof:  # ProfilerStep# (CUDA, ROCm, CPU, NCCL traces): exactly as before
        assert st.source == "profiler" and set(st.ids.tolist()) == prof
    else:  # alexnet (nested benchmark annotations) and MTIA (per-request annotations on many threads)
        assert st.source == "none" and len(st) == 0


def _without_profiler_steps(path: Path) -> tuple[Trace, Trace]:
    tr = neuron_prof.load(path)
    keep = np.array([not tr.slice_name(i).startswith("ProfilerStep#") for i in range(len(tr.slices))])
    empty = FlowTable(**{c: np.zeros(0, dtype=d) for c, d in FlowTable.DTYPES.items()})
    return tr, tr.replace(slices=tr.slices.take(np.flatnonzero(keep)), flows=empty)


@pytest.mark.skipif(not KINETO_DIR.is_dir(), reason="../shared/traces absent")
def test_optimizer_steps_match_profiler_steps_on_real_traces() -> None:
    # NCCL DDP job: SGD once per ProfilerStep; inferred steps agree within 0.2 ms
    tr, bare = _without_profiler_steps(KINETO_DIR / "nccl_parser_config_nccl_data.json.gz")
    ref, st = make_steps(tr), make_steps(bare)
    assert st.source == "inferred: optimizer step" and len(st) == len(ref) == 3
    assert np.abs(st.start_ns - ref.start_ns).max() < 200_000 and np.abs(st.end_ns - ref.end_ns).max() < 200_000
    # Shampoo then EMAOptimizer each iteration: grouped into one step per ProfilerStep
    tr, bare = _without_profiler_steps(KINETO_DIR / "trace_filter_sampled_rank-0.json.gz")
    ref, st = make_steps(tr), make_steps(bare)
    assert st.markers == ("Optimizer.step#Shampoo.step", "Optimizer.step#EMAOptimizer.step") and len(st) == 2
    assert abs(int(st.dur_ns[1]) - int(ref.dur_ns[1])) < MS
