"""Capture with the real torch.profiler: files, counts checked independently, steps, schedule, decorator."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
import torch

import neuron_prof
from neuron_prof.capture import CaptureWarning, current_session
from tests._builders import json_complete_count, pftrace_slice_count, slice_names, tiny_model, train_step
from tests.conftest import pftrace_check


# ---- tests -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One profiled CPU training loop (3 steps) shared by the file/count tests."""
    out = tmp_path_factory.mktemp("cap") / "run1" / "trace.json"
    model, opt = tiny_model()
    losses = []
    with neuron_prof.profile(out, quiet=True) as prof:
        assert current_session() is prof
        for i in range(3):
            losses.append(train_step(model, opt, i))
            prof.step()
    assert current_session() is None
    return {"out": out, "prof": prof, "losses": losses}


def test_training_loop_writes_json_and_pftrace(captured: dict[str, Any]) -> None:
    out: Path = captured["out"]
    pf = out.with_suffix(".pftrace")
    assert captured["prof"].paths == [out, pf]
    assert out.stat().st_size > 0 and pf.stat().st_size > 0
    # No temporary files left beside the outputs.
    assert sorted(p.name for p in out.parent.iterdir()) == ["trace.json", "trace.pftrace"]


def test_pftrace_passes_checker(captured: dict[str, Any]) -> None:
    res = pftrace_check(captured["out"].with_suffix(".pftrace"))
    assert res.returncode == 0, res.stdout + res.stderr


def test_counts_agree_across_json_pftrace_and_load(captured: dict[str, Any]) -> None:
    out: Path = captured["out"]
    pf = out.with_suffix(".pftrace")
    n_json = json_complete_count(out)
    n_pf = pftrace_slice_count(pf)
    assert n_json > 100  # a real loop: linear, gelu, mse, backward, AdamW ops
    assert n_json == n_pf
    assert len(neuron_prof.load(out).slices) == n_json
    assert len(neuron_prof.load(pf).slices) == n_json
    assert len(captured["prof"].trace.slices) == n_json


def test_steps_and_metadata(captured: dict[str, Any]) -> None:
    prof = captured["prof"]
    trace = prof.trace
    md = trace.metadata
    steps = md["steps"]
    assert [s[0] for s in steps] == [0, 1, 2]
    start, end = md["wall_ns"]
    assert start <= steps[0][1] < steps[0][2] <= steps[1][1] < steps[2][2] <= end
    names = slice_names(trace)
    assert {"ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"} <= names
    assert {"aten::addmm", "aten::mse_loss"} <= names
    # The ProfilerStep#1 span in Kineto's timeline sits inside our recorded step 1 (same clock, Unix ns).
    sid = trace.strings.get("ProfilerStep#1")
    row = int((trace.slices.name == sid).nonzero()[0][0])
    ts, dur = int(trace.slices.ts_ns[row]), int(trace.slices.dur_ns[row])
    assert steps[1][1] - 1_000_000 <= ts and ts + dur <= steps[1][2] + 1_000_000
    assert md["backend"] == "cpu"
    assert md["torch_version"] == torch.__version__
    assert md["capture_exit"] == "ok"
    assert md["profiler_cycles"] == 1
    assert md["profiler_overhead_ns"] > 0
    assert md["rank"] is None and md["world_size"] is None
    # the profiled thread's schedstat at start, each step and stop (tests/test_capture_runqueue.py has the rest)
    rq = md["host_runqueue_ns"]
    assert len(rq) == 3 + 2 and [s[0] for s in rq] == sorted(s[0] for s in rq) and start <= rq[0][0]
    assert all(b[1] >= a[1] and b[2] >= a[2] for a, b in zip(rq, rq[1:])) and rq[-1][1] > rq[0][1]
    assert len(md["host_loadavg"]) == 2
    # Shapes are on, and every op gets the exact line of the user's statement that ran it (the model call
    # in train_step, called from the loop), written on the op the user's call made (aten::linear)
    loaded = neuron_prof.load(captured["out"])
    assert loaded.metadata["stack_lines"] == "exact"
    mm = loaded.strings.get("aten::addmm")
    rows = (loaded.slices.name == mm).nonzero()[0]
    assert "Input Dims" in loaded.slice_args(int(rows[0]))
    from neuron_prof.analysis import Context, sites_of

    builders = Path(__file__).with_name("_builders.py").read_text().splitlines()
    model_line = next(i for i, s in enumerate(builders, 1) if "loss = nn.functional.mse_loss(model(x), y)" in s)
    src = Path(__file__).read_text().splitlines()
    loop_line = next(i for i, s in enumerate(src, 1) if "losses.append(train_step(model, opt, i))" in s)
    sites = sites_of(Context(loaded))
    for r in rows.tolist():
        site = sites.of_row(int(r))
        assert site.call_site == f"tests/_builders.py:{model_line}", site
        assert [s.split(" ")[0].rsplit(":", 1)[1] for s in site.stack[-2:]] == [str(loop_line), str(model_line)]


def test_json_gz_output_and_pftrace_beside(tmp_path: Path) -> None:
    out = tmp_path / "t.json.gz"
    model, opt = tiny_model()
    with neuron_prof.profile(out, quiet=True) as prof:
        train_step(model, opt, 0)
    assert prof.paths == [out, tmp_path / "t.pftrace"]
    assert json_complete_count(out) == pftrace_slice_count(tmp_path / "t.pftrace") > 0


def test_output_none_keeps_trace_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    model, opt = tiny_model()
    with neuron_prof.profile(None) as prof:
        train_step(model, opt, 0)
    assert prof.paths == [] and list(tmp_path.iterdir()) == []
    assert prof.trace is not None and len(prof.trace.slices) > 10


def test_decorator_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "deco.json"
    model, opt = tiny_model()

    @neuron_prof.profile(out, pftrace=False)
    def train(n: int) -> list[float]:
        s = current_session()
        assert s is not None
        res = []
        for i in range(n):
            res.append(train_step(model, opt, i))
            s.step()
        return res

    losses = train(2)
    model2, opt2 = tiny_model()
    assert losses == [train_step(model2, opt2, i) for i in range(2)]  # results unchanged by profiling
    assert out.exists() and not (tmp_path / "deco.pftrace").exists()
    trace = neuron_prof.load(out)
    assert {"ProfilerStep#0", "ProfilerStep#1"} <= slice_names(trace)
    err = capsys.readouterr().err
    assert str(out) in err and "ui.perfetto.dev" in err  # where the trace went


def test_bare_decorator_writes_the_default_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/capture.md: used bare as `@neuron_prof.profile`, it decorates the function with the default output
    (trace.json and trace.pftrace in the working folder)."""
    monkeypatch.chdir(tmp_path)
    model, opt = tiny_model()

    @neuron_prof.profile
    def train() -> float:
        return train_step(model, opt, 0)

    model2, opt2 = tiny_model()
    assert train() == train_step(model2, opt2, 0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json", "trace.pftrace"]
    assert "aten::addmm" in slice_names(neuron_prof.load(tmp_path / "trace.json"))


def test_a_torch_profiler_schedule_is_used_as_given(tmp_path: Path) -> None:
    from torch.profiler import schedule

    model, opt = tiny_model()
    with neuron_prof.profile(tmp_path / "s.json", schedule=schedule(wait=2, warmup=0, active=1), quiet=True,
                             pftrace=False) as prof:
        for i in range(4):
            train_step(model, opt, i)
            prof.step()
    steps = {n for n in slice_names(prof.trace) if n.startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2"}  # cycles of wait 2, active 1: of steps 0-3 only step 2 is recorded


def test_schedule_records_only_active_steps(tmp_path: Path) -> None:
    out = tmp_path / "sched.json"
    model, opt = tiny_model()
    with neuron_prof.profile(out, wait=1, warmup=1, active=2, repeat=2, quiet=True) as prof:
        for i in range(9):
            train_step(model, opt, i)
            prof.step()
    trace = prof.trace
    steps = {n for n in slice_names(trace) if n.startswith("ProfilerStep#")}
    # cycles of wait 1, warmup 1, active 2: steps 2,3 then 6,7 are recorded
    assert steps == {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#6", "ProfilerStep#7"}
    assert trace.metadata["profiler_cycles"] == 2
    assert [s[0] for s in trace.metadata["steps"]] == list(range(9))
    assert json_complete_count(out) == len(trace.slices) == pftrace_slice_count(tmp_path / "sched.pftrace")


def test_nested_session_records_nothing_and_warns(tmp_path: Path) -> None:
    model, opt = tiny_model()
    with neuron_prof.profile(tmp_path / "outer.json", quiet=True) as outer:
        with pytest.warns(CaptureWarning, match="already recording"):
            with neuron_prof.profile(tmp_path / "inner.json", quiet=True) as inner:
                train_step(model, opt, 0)
        assert inner.trace is None
    assert not (tmp_path / "inner.json").exists()
    assert outer.trace is not None and (tmp_path / "outer.json").exists()
    assert "aten::addmm" in slice_names(outer.trace)


def test_start_stop_by_hand(tmp_path: Path) -> None:
    model, opt = tiny_model()
    s = neuron_prof.profile(tmp_path / "hand.json", quiet=True).start()
    train_step(model, opt, 0)
    s.step()
    trace = s.stop()
    assert trace is s.trace and trace is not None
    assert s.stop() is trace  # idempotent
    assert (tmp_path / "hand.json").exists()


def test_recursive_decorated_function_records_once(tmp_path: Path) -> None:
    out = tmp_path / "rec.json"

    @neuron_prof.profile(out, quiet=True, pftrace=False)
    def fact(n: int) -> int:
        torch.ones(2).logcumsumexp(0)
        return 1 if n <= 1 else n * fact(n - 1)

    with warnings.catch_warnings():
        warnings.simplefilter("error", CaptureWarning)  # no "already recording" for its own recursion
        assert fact(4) == 24
    trace = neuron_prof.load(out)
    sid = trace.strings.get("aten::logcumsumexp")
    assert int((trace.slices.name == sid).sum()) == 4  # all four calls in one trace
