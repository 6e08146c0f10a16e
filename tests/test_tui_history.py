"""The step-time trend where the run history has runs of the same script (issue 36 item 3): the TUI overview's
history line (Pilot, at 80x24 and 160x48) and the HTML report's trend figure, steady step and findings count.

Three traces of one script (the demo-like trace at three speeds, the third with shape churn: one finding more),
each recorded in the history by `neuron-prof summary` as a user's would be: steady steps 20, 40 and 30 ms,
findings 7, 7 and 8."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from neuron_prof import history
from neuron_prof.cli import main
from neuron_prof.exporters.chrome_json import write_chrome_json
from neuron_prof.exporters.html_report import render_html_report
from neuron_prof.loaders import load
from neuron_prof.tui.app import NeuronProfApp
from tests._demo_trace import demo_like_trace
from tests._tui_pilot import first_screen, screen_text

SIZES = [(80, 24), (160, 48)]
SPARK = "▁▂▃▄▅▆▇█"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Path]]:
    d = tmp_path_factory.mktemp("trend")
    script = d / "train.py"
    script.write_text("")
    saved = os.environ.get("NEURON_PROF_DATA_DIR")
    os.environ["NEURON_PROF_DATA_DIR"] = str(d / "data")
    paths = []
    try:
        for i, (slow, churn) in enumerate(((1.0, False), (2.0, False), (1.5, True))):
            trace = demo_like_trace(slow=slow, churn=churn)
            trace.metadata["argv"] = [str(script), "--epochs", "1"]  # what a capture records of its command line
            paths.append(d / f"run{i}.json")
            write_chrome_json(trace, paths[-1])
            assert main(["summary", str(paths[-1])]) == 0
        yield paths
    finally:
        if saved is None:
            os.environ.pop("NEURON_PROF_DATA_DIR", None)
        else:
            os.environ["NEURON_PROF_DATA_DIR"] = saved


def test_the_trend_is_the_runs_of_the_script(runs: list[Path]) -> None:
    rows = history.trend_of(runs[-1])
    assert [r["trace_path"] for r in rows] == [str(p.resolve()) for p in runs]
    ser = history.trend_series(rows)
    assert ser["steady_ns"] == [r["steady_step_ns"] for r in rows]
    assert ser["findings"] == [sum(r["findings_by_kind"].values()) for r in rows]
    assert ser["steady_ns"] == [20_000_000, 40_000_000, 30_000_000] and ser["findings"] == [7, 7, 8]
    assert history.trend_of(runs[0].with_name("not-recorded.json")) == []


def _levels(values: list[int]) -> list[int]:
    """Each value's bar in a sparkline from the lowest (0) to the highest (7); all the same: the middle one."""
    lo, hi = min(values), max(values)
    return [3] * len(values) if hi == lo else [round((v - lo) / (hi - lo) * 7) for v in values]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_overview_shows_the_trend(runs: list[Path], size: tuple[int, int]) -> None:
    rows = history.trend_of(runs[-1])
    ser = history.trend_series(rows)
    app = NeuronProfApp([str(runs[-1])])
    async with app.run_test(size=size) as pilot:
        await first_screen(pilot, app)
        text = screen_text(app)
    (line,) = [ln for ln in text.splitlines() if "history 3 runs" in ln]
    assert len(line.rstrip()) <= size[0] and "…" not in line, line
    # the oldest and the latest run's steady step and findings, a sparkline of the three between
    m = re.search(r"steady (\S+ \S+) ([" + SPARK + r"]{3}) (\S+ \S+)\s+findings (\d+) ([" + SPARK + r"]{3}) (\d+)",
                  line)
    assert m, line
    assert (int(m[4]), int(m[6])) == (ser["findings"][0], ser["findings"][-1])
    assert [SPARK.index(c) for c in m[2]] == _levels(ser["steady_ns"])
    assert [SPARK.index(c) for c in m[5]] == _levels(ser["findings"])


async def test_no_history_no_line(runs: list[Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_PROF_DATA_DIR", str(tmp_path / "empty"))
    app = NeuronProfApp([str(runs[-1])])
    async with app.run_test(size=(160, 48)) as pilot:
        await first_screen(pilot, app)
        assert "history " not in screen_text(app)


def test_report_plots_steady_step_and_findings(runs: list[Path]) -> None:
    rows = history.trend_of(runs[-1])
    page = render_html_report(load(runs[-1]), trend=rows)
    m = re.search(r'<script type="application/json" id="np-figures">(.*?)</script>', page, re.DOTALL)
    assert m, "no figures"
    fig = json.loads(m[1])["fig-trend"]
    steady, found = fig["data"]
    ser = history.trend_series(rows)
    assert steady["y"] == pytest.approx([ns / 1e6 for ns in ser["steady_ns"]])
    assert found["y"] == ser["findings"] and found["yaxis"] == "y2"
    assert steady["x"] == found["x"] == [f"#{r['id']}" for r in rows]
