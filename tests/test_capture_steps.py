"""`profile(steps=...)` and `run --steps` (issue 35 item 3): only the steps named are recorded in full, torch.profiler's
tracer is off in the others, and the trace's metadata and `summary` say which steps were kept and how many were not.

Real captures: a loop of 8 steps with one op of its own per step (``aten::mul`` by the step's number), so that each
recorded op tells which step it ran in.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_prof.capture._steps import window
from neuron_prof.cli import main
from neuron_prof.model import Meta, Trace

STEPS = 8
PROGRAM = textwrap.dedent("""\
    import torch
    m = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for i in range(8):
        m(torch.ones(2, 4) * i).sum().backward()
        opt.step()
        opt.zero_grad()
    """)


def _loop(prof: object) -> None:
    import torch

    x = torch.ones(4)
    for i in range(STEPS):
        torch.mul(x, i)
        prof.step()  # type: ignore[attr-defined]


def _names(t: Trace, name: str) -> list[int]:
    return [r for r in range(len(t.slices)) if t.slice_name(r) == name]


def _summary(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["summary", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # the console wraps long lines
    return out[out.index("Capture kept small"):].split(" Steps ")[0]


@pytest.fixture(scope="module")
def window_capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Trace, Path]]:
    import neuron_prof

    path = tmp_path_factory.mktemp("steps") / "t.json"
    with neuron_prof.profile(path, quiet=True, pftrace=False, steps=(2, 5)) as prof:
        _loop(prof)
    assert prof.trace is not None
    yield prof.trace, path


def test_steps_window_records_only_those_steps_ops(window_capture: tuple[Trace, Path]) -> None:
    t, _ = window_capture
    assert sorted(n for n in {t.slice_name(r) for r in range(len(t.slices))} if n.startswith("ProfilerStep#")) == \
        ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    muls = _names(t, "aten::mul")
    assert len(muls) == 3  # one per recorded step, none from the 5 others
    rows = t.metadata[Meta.STEPS]
    assert [r[0] for r in rows] == [2, 3, 4]  # the trace's steps are the recorded ones
    # every recorded op ran inside the window: the tracer was off before step 2 (but its warm-up) and after step 4
    lo, hi = rows[0][1], rows[-1][2]
    assert all(lo <= int(t.slices.ts_ns[r]) < hi for r in muls)


def test_steps_window_is_in_the_metadata_and_the_summary(window_capture: tuple[Trace, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    t, path = window_capture
    info = t.metadata[Meta.CAPTURE_REDUCED]["steps_recorded"]
    assert info["recorded_range"] == [2, 4] and info["steps_total"] == STEPS
    assert (info["not_recorded_before"], info["not_recorded_after"]) == (2, 3)
    line = _summary(path, capsys)
    assert "steps 2-4 recorded in full under --steps (of 8; not recorded: 2 steps before them" in line
    assert "3 steps after them" in line


def test_run_steps_records_the_first_n_optimizer_steps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text(PROGRAM)
    out = tmp_path / "r.json"
    assert main(["run", "-q", "--no-pftrace", "-o", str(out), "--steps", "3", str(script)]) == 0
    from neuron_prof import load

    t = load(out)
    assert [r[0] for r in t.metadata[Meta.STEPS]] == [0, 1, 2]  # a step = an optimizer.step() call
    assert len(_names(t, "Optimizer.step#SGD.step")) == 3
    info = t.metadata[Meta.CAPTURE_REDUCED]["steps_recorded"]
    assert (info["not_recorded_before"], info["not_recorded_after"]) == (0, 5)
    assert "steps 0-2 recorded in full under --steps (of 8; not recorded: 5 steps after them)" in _summary(out, capsys)


def test_run_steps_that_name_no_step_are_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.py"
    script.write_text("raise SystemExit(7)\n")
    for bad in ("x", "3:3", "0"):
        assert main(["run", "-q", "-o", str(tmp_path / "t.json"), "--steps", bad, str(script)]) == 2  # not 7
        assert "--steps" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()


def test_steps_accepts_a_count_a_window_or_a_range_and_nothing_else() -> None:
    assert window(None) is None and window(5) == (0, 5) and window((2, 5)) == (2, 5) and window((3, None)) == (3, None)
    assert window((0, None)) is None  # every step: no window
    assert window(range(1, 4)) == (1, 4) and window("2:6") == (2, 6) and window("4:") == (4, None) and window("3") == (0, 3)
    for bad in (0, -1, (5, 5), (4, 2), True, 2.0, range(0, 8, 2), "a:b", [1, 2]):
        with pytest.raises(ValueError, match="steps"):
            window(bad)  # type: ignore[arg-type]


def test_steps_and_a_schedule_are_not_both_given() -> None:
    import neuron_prof

    with pytest.raises(ValueError, match="not both"):
        neuron_prof.profile(None, steps=3, active=2)
