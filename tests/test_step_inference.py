"""Steps without prof.step(): inferred from real torch.profiler captures on CPU, checked against the
loop's own timestamps (time.time_ns(), the clock the loader puts Kineto events on)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

import neuron_prof
from neuron_prof.analysis.steps.boundaries import Steps, make_steps
from neuron_prof.model import Trace, TrackKind

N = 5
TOL = 200_000
"""ns: Kineto's clock and time.time_ns() agree within ~30 µs (torch-facts.md)."""


def _capture(tmp_path: Path, body: Callable[[], Any], **kw: Any) -> tuple[Trace, Any]:
    """Run `body` under a plain torch.profiler (as users do), export, load with neuron_prof."""
    with profile(activities=[ProfilerActivity.CPU], **kw) as prof:
        got = body()
    out = tmp_path / "t.json"
    prof.export_chrome_trace(str(out))
    return neuron_prof.load(out), got


def _model() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)), torch.randn(8, 16), torch.randn(8, 1)


def _host_rows(trace: Trace, lo: int, hi: int, cat: str = "cpu_op") -> np.ndarray:
    """cpu_op rows on host threads starting in [lo, hi] (the loops sleep 2 ms between iterations, so a
    clock error of tens of µs at the edges selects nothing of another iteration)."""
    sl = trace.slices
    cid = trace.strings.get(cat)
    on = np.isin(sl.track, trace.track_ids(TrackKind.THREAD)) & (sl.cat == cid)
    return np.flatnonzero(on & (sl.ts_ns >= lo) & (sl.ts_ns <= hi))


def _in_step(trace: Trace, st: Steps, rows: np.ndarray, k: int) -> None:
    assert len(rows), "nothing recorded in the window"
    idx = st.step_index(trace.slices.ts_ns[rows])
    assert (idx == k).all(), (k, sorted({trace.slice_name(int(r)) for r, i in zip(rows, idx) if i != k}))


# ---- (a) a training loop with AdamW, no prof.step() -----------------------------------------------
def _train_loop(n: int = N, opt_annotation: str | None = None) -> list[tuple[int, int, int]]:
    model, x, y = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    marks = []
    for _ in range(n):
        time.sleep(0.002)  # "data loading": belongs to the step it feeds
        t0 = time.time_ns()
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        t1 = time.time_ns()
        if opt_annotation:
            with record_function(opt_annotation):
                opt.step()
        else:
            opt.step()
        marks.append((t0, t1, time.time_ns()))
    return marks


@pytest.mark.parametrize("with_stack", [True, False])
def test_optimizer_steps_bound_each_iteration(tmp_path: Path, with_stack: bool) -> None:
    trace, marks = _capture(tmp_path, _train_loop, with_stack=with_stack)
    st = make_steps(trace)
    assert st.source == "inferred: optimizer step" and st.markers == ("Optimizer.step#AdamW.step",)
    assert len(st) == N and list(st.ids) == list(range(N))
    for k, (t0, t1, t2) in enumerate(marks):
        # THEN a step ends where its optimizer step ends, and the next starts there
        assert t1 - TOL <= st.end_ns[k] <= t2 + TOL
        if k:
            assert st.start_ns[k] == st.end_ns[k - 1]
        # forward, backward and the update of iteration k all lie in step k
        _in_step(trace, st, _host_rows(trace, t0, t2), k)
    # the first step starts at the first forward (or zero_grad), not at the profiler's start
    assert marks[0][0] - TOL <= st.start_ns[0] <= marks[0][1]
    assert st.warmup >= 1


def test_a_small_annotation_around_the_update_does_not_replace_the_optimizer_steps(tmp_path: Path) -> None:
    trace, _ = _capture(tmp_path, lambda: _train_loop(opt_annotation="## optimizer ##"), with_stack=True)
    st = make_steps(trace)
    assert st.source == "inferred: optimizer step" and len(st) == N


# ---- (b) an inference loop --------------------------------------------------------------------------
def _inference_loop() -> list[tuple[int, int, int]]:
    model, x, _ = _model()
    head = nn.Linear(1, 3)
    marks = []
    with torch.no_grad():
        for _ in range(N):
            time.sleep(0.002)
            t0 = time.time_ns()
            out = head(model(x))  # two outermost module calls per iteration
            t1 = time.time_ns()
            out.softmax(-1).argmax(-1)  # post-processing
            marks.append((t0, t1, time.time_ns()))
    return marks


def test_repeated_module_calls_are_iterations(tmp_path: Path) -> None:
    trace, marks = _capture(tmp_path, _inference_loop, with_stack=True)
    st = make_steps(trace)
    assert st.source == "inferred: module call"
    assert st.markers == ("nn.Module: Sequential_0", "nn.Module: Linear_2")
    assert len(st) == N
    for k, (t0, t1, t2) in enumerate(marks):
        assert t0 - TOL <= st.start_ns[k] <= t1  # starts at the iteration's first module call
        # its post-processing included (nothing marks the last one's end: it lasts a median step)
        _in_step(trace, st, _host_rows(trace, t0, t2 if k < N - 1 else t1), k)
    assert (st.end_ns[:-1] == st.start_ns[1:]).all()


def test_without_stacks_an_inference_loop_has_no_signal(tmp_path: Path) -> None:
    trace, _ = _capture(tmp_path, _inference_loop)
    st = make_steps(trace)
    assert len(st) == 0 and st.source == "none"


def _dataloader_inference() -> list[tuple[int, int, int]]:
    """An inference loop over a DataLoader, then results gathered once right after it (a one-off op)."""
    model, _, _ = _model()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8 * N, 16)), batch_size=8)
    marks, preds = [], []
    with torch.no_grad():
        for (x,) in loader:
            t0 = time.time_ns()
            out = model(x)
            t1 = time.time_ns()
            preds.append(out.softmax(-1))  # post-processing
            time.sleep(0.004)
            marks.append((t0, t1, time.time_ns()))
    t_after = time.time_ns()
    torch.cat(preds).sum()  # after the loop: no iteration's work
    marks.append((t_after, time.time_ns(), 0))
    return marks


def test_a_dataloader_loop_ends_with_its_last_batch_fetch(tmp_path: Path) -> None:
    """An inferred iteration of a loop over a DataLoader runs from its batch fetch (a collate_fn's tensors are
    made in its step) to the next; the last ends at the fetch that finds no batch, not a median step later:
    what runs right after the loop belongs to no step."""
    trace, marks = _capture(tmp_path, _dataloader_inference, with_stack=True)
    after = marks.pop()
    st = make_steps(trace)
    assert st.source == "inferred: module call" and len(st) == N
    for k, (t0, _t1, t2) in enumerate(marks):
        _in_step(trace, st, _host_rows(trace, t0, t2), k)
    fetches = _host_rows(trace, 0, after[0], cat="user_annotation")
    fetches = fetches[np.argsort(trace.slices.ts_ns[fetches])]
    assert len(fetches) == N + 1  # enumerate(DataLoader)#...__next__: a batch each, then the one that ends the loop
    assert st.step_index(trace.slices.ts_ns[fetches]).tolist() == [*range(N), -1]
    rows = _host_rows(trace, after[0], after[1])
    assert len(rows) and (st.step_index(trace.slices.ts_ns[rows]) == -1).all()


# ---- (c) a user annotation per iteration ------------------------------------------------------------
def _annotated_loop(train: bool) -> list[tuple[int, int]]:
    model, x, y = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    marks = []
    for _ in range(N):
        time.sleep(0.002)
        t0 = time.time_ns()
        with record_function("train_step" if train else "infer"):
            if train:
                opt.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            else:
                with torch.no_grad():
                    model(x).argmax(-1)
        marks.append((t0, time.time_ns()))
    return marks


@pytest.mark.parametrize(("train", "with_stack"), [(True, True), (True, False), (False, False), (False, True)])
def test_a_user_annotation_is_the_step(tmp_path: Path, train: bool, with_stack: bool) -> None:
    trace, marks = _capture(tmp_path, lambda: _annotated_loop(train), with_stack=with_stack)
    st = make_steps(trace)
    assert st.source == "inferred: user annotation" and st.markers == ("train_step" if train else "infer",)
    assert len(st) == N
    for k, (t0, t2) in enumerate(marks):
        # THEN each step is the annotation's span, which lies inside the iteration's window
        assert t0 - TOL <= st.start_ns[k] and st.end_ns[k] <= t2 + TOL
        _in_step(trace, st, _host_rows(trace, t0, t2), k)
    # the sleeps between spans are in no step: the user drew the edges
    assert (st.start_ns[1:] - st.end_ns[:-1] >= 1_000_000).all()


# ---- (d) ProfilerStep# and prof.step() keep their steps ---------------------------------------------
def test_profiler_steps_are_kept(tmp_path: Path) -> None:
    model, x, y = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    out = tmp_path / "t.json"
    with profile(activities=[ProfilerActivity.CPU], with_stack=True,
                 schedule=schedule(wait=0, warmup=1, active=N, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(str(out))) as prof:
        for _ in range(N + 1):
            for _ in range(2):  # two optimizer steps per profiler step: inference would say 2N
                opt.zero_grad()
                nn.functional.mse_loss(model(x), y).backward()
                opt.step()
            prof.step()
    st = make_steps(neuron_prof.load(out))
    assert st.source == "profiler" and st.markers == ("ProfilerStep#",) and len(st) == N
    assert list(st.ids) == list(range(1, N + 1))


def test_profile_without_step_infers_and_with_step_is_marked() -> None:
    model, x, y = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def it() -> None:
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    with neuron_prof.profile(None, quiet=True, backend="cpu") as prof:
        for _ in range(N):
            it()
    tr = prof.trace
    assert tr is not None and tr.metadata["steps"] == []
    st = make_steps(tr)  # its one ProfilerStep#0 is the whole region: not a step
    assert st.source == "inferred: optimizer step" and len(st) == N
    # a foreign trace (no `steps` metadata) keeps its single ProfilerStep#
    foreign = make_steps(tr.replace(metadata={k: v for k, v in tr.metadata.items() if k != "steps"}))
    assert foreign.source == "profiler" and len(foreign) == 1
    with neuron_prof.profile(None, quiet=True, backend="cpu") as prof:
        for _ in range(3):
            it()
            prof.step()
    assert prof.trace is not None
    st = make_steps(prof.trace)
    assert st.source == "marked" and len(st) == 3 and st.summary()["source"] == "marked"
