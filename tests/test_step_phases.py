"""Step accounting on real torch.compile captures (issue 32 item 4): a steady step is one without compiles;
warm-up and recompiling steps are apart; every "per steady step" figure uses the same steps and its parts add
up to the steady step; when every step compiles the summary names no steady step; compile time is never
"not explained" device idle."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

import neuron_prof
from exporters.summary import totals_lines
from neuron_prof.analysis import Context
from neuron_prof.analysis.steps.breakdown import PARTS, step_breakdown
from neuron_prof.analysis.steps.phases import RECOMPILING, TRAINING, WARMUP, step_phases
from neuron_prof.analysis.totals import compute_totals
from neuron_prof.model import KinetoCat, Trace, TrackKind

RECOMPILE_AT = 6
"""The step whose new batch size makes Dynamo compile the frame again."""


def _capture(sizes: list[int]) -> Trace:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    cmodel = torch.compile(model, backend="eager", dynamic=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with neuron_prof.profile(None, quiet=True) as s:
        for bs in sizes:
            loss = cmodel(torch.randn(bs, 16)).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            s.step()
    torch._dynamo.reset()
    assert s.trace is not None
    return s.trace


@pytest.fixture(scope="module")
def traces() -> Iterator[tuple[Trace, Trace]]:
    yield (_capture([8] * RECOMPILE_AT + [12] * 3 + [8] * 3),  # one recompile, at RECOMPILE_AT
           _capture([4, 5, 6, 7, 9, 10]))  # a new shape every step (under the recompile limit of 8)


def _compiled_steps(t: Trace, ctx: Context) -> set[int]:
    """Steps in which a compile-track slice starts (read here from the trace, not from the phase model)."""
    rows = np.flatnonzero(np.isin(t.slices.track, t.track_ids(TrackKind.COMPILE)))
    k = ctx.steps.step_index(t.slices.ts_ns[rows])
    return {int(i) for i in k if i >= 0}


def test_the_steady_steps_exclude_the_compiling_ones_and_their_parts_add_up(traces: tuple[Trace, Trace]) -> None:
    t = traces[0]
    ctx = Context(t)
    ph = step_phases(ctx)
    compiled = _compiled_steps(t, ctx)
    assert RECOMPILE_AT in compiled and ph.phase[RECOMPILE_AT] == RECOMPILING
    assert ph.phase[0] == WARMUP
    steady = set(ph.steady.tolist())
    assert steady and not steady & compiled
    assert steady == {i for i, p in enumerate(ph.phase) if p == TRAINING}
    assert steady | compiled | set(range(ctx.steps.warmup)) == set(range(len(ctx.steps)))

    tot = compute_totals(t, ctx)
    dur = ctx.steps.dur_ns
    per = tot["steady_per_step"]
    # every per-steady-step figure over the same steps: the steps' summary, the per-step parts, the breakdown
    assert per["steps"] == tot["steps"]["steady_count"] == len(steady)
    assert per["step_ns"] == int(dur[sorted(steady)].sum()) // len(steady)
    assert tot["steps"]["steady_step_ns"] == int(np.median(dur[sorted(steady)]))
    assert sum(per["parts"].values()) == per["step_ns"]
    bd = step_breakdown(t, ctx)
    for i in steady:
        assert bd[i]["phase"] == TRAINING and sum(bd[i]["parts"].values()) == bd[i]["dur_ns"]
        assert bd[i]["parts"]["compile"] == 0
    assert set(per["parts"]) == set(PARTS)
    text = "\n".join(totals_lines(tot))
    assert "warm-up" in text and "1 recompiling" in text and f"{len(steady)} steady" in text
    assert f"mean of {len(steady)} steady steps" in text


def test_when_every_step_compiles_no_step_is_called_steady(traces: tuple[Trace, Trace]) -> None:
    t = traces[1]
    ctx = Context(t)
    ph = step_phases(ctx)
    assert _compiled_steps(t, ctx) >= set(range(ctx.steps.warmup, len(ctx.steps)))
    assert ph.all_compile and len(ph.steady) == 0
    tot = compute_totals(t, ctx)
    assert tot["steady_per_step"] is None and tot["steps"]["steady_step_ns"] is None
    text = "\n".join(totals_lines(tot))
    assert "every later step compiled: no steady step" in text and "steady step " not in text.replace(
        "no steady step", "")
    assert f"{len(ctx.steps) - ctx.steps.warmup} recompiling" in text and "0 steady" in text


def test_compile_time_is_never_unexplained_device_idle(traces: tuple[Trace, Trace]) -> None:
    """Host time in torch.compile's own phase spans is compile time for device idle too, with or without a
    compile-track record over it (Inductor's and Triton's work that Dynamo's records do not span)."""
    from neuron_prof.analysis.steps.phases import compile_rows

    t = traces[0]
    ctx = Context(t)
    comp = np.flatnonzero(np.isin(t.slices.track, t.track_ids(TrackKind.COMPILE)))
    rows = compile_rows(ctx)
    assert set(comp.tolist()) <= set(rows.tolist())
    assert any(t.slice_name(int(r)).endswith("(dynamo_timed)") for r in rows)  # the real capture has them

    # GIVEN a device idle 60 ms of each 100 ms step while the host is inside a compile span (no compile record)
    f = _idle_under("compile_fx_inner (dynamo_timed)", KinetoCat.USER_ANNOTATION)
    # THEN all of it is explained (compiling), none of it is the finding's cost
    assert f.evidence["explained_ns"] == f.evidence["idle_ns"] == 4 * 60 * MS and f.cost_ns == 0


MS = 1_000_000


def _idle_under(span: str, cat: str) -> Any:
    """The device_idle finding of a device idle 60 ms of each 100 ms step while the host is inside `span`."""
    from neuron_prof.analysis import analyze
    from neuron_prof.model import Cat, Meta, ProcessKind, TraceBuilder

    t0 = 1_700_000_000_000_000_000
    b = TraceBuilder()
    main = b.thread_track(1, 1, "main")
    dev = b.track(b.process("neuron:0", "neuron:0", kind=ProcessKind.DEVICE), "neuron:0 compute", TrackKind.DEVICE)
    for k in range(4):
        b.add_slice(dev, t0 + k * 100 * MS, 40 * MS, "aten::mm", Cat.DEVICE)
        b.add_slice(main, t0 + k * 100 * MS + 40 * MS, 60 * MS, span, cat)
    b.add_slice(dev, t0 + 400 * MS, MS, "aten::mm", Cat.DEVICE)
    b.metadata[Meta.WALL] = [t0, t0 + 401 * MS]
    [f] = [f for f in analyze(b.build()) if f.kind == "device_idle"]
    return f


@pytest.mark.parametrize("span", ["compile_fx_inner (dynamo_timed)", "entire_backward_compile", "backend_compile"])
def test_every_compile_phase_span_is_compile_time(span: str) -> None:
    """One rule for which host spans are compiling (`model.schema.is_compile_span`): a backward compiled on its
    first use (`entire_backward_compile`) is compile time for the step phases and device idle as Dynamo's are."""
    f = _idle_under(span, KinetoCat.CPU_OP)
    assert f.evidence["explained_ns"] == f.evidence["idle_ns"] == 4 * 60 * MS and f.cost_ns == 0
