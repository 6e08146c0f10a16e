"""Neuron Explorer's own Summary MFU beside ours (issue 37 item 2): a real torch.profiler trace with shapes (three
32x32 fp32 matmuls) in a capture folder with a documented Explorer profile (`tests.fakes.explorer_profile`:
Summary ``mfu_estimated_percent`` 41.5 over ``total_time`` 10 ms); `summary --json` and the report give both MFUs
and their difference, ours counted by hand here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuron_prof.analysis.efficiency.peaks import peak_for
from neuron_prof.cli import main
from tests.fakes.explorer_profile import write_profile
from tests.test_explorer_capture import _capture

N, CALLS = 32, 3


@pytest.fixture(scope="module")
def shapes_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(N, N)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(CALLS):
            x @ x
    path = tmp_path_factory.mktemp("host") / "trace.json"
    prof.export_chrome_trace(str(path))
    return path


def _summary(path: Path, capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    capsys.readouterr()
    assert main(["summary", str(path), "--json"]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_both_mfus_and_their_difference(tmp_path: Path, shapes_json: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pid_dir, _ = _capture(tmp_path, shapes_json)
    doc = _summary(pid_dir, capsys)
    eff = doc["totals"]["efficiency"]
    ex = eff["explorer"]
    total_time = doc["totals"]["neuron_explorer"]["summary"]["total_time"]
    assert ex["explorer_mfu_percent"] == 41.5 and total_time == pytest.approx(0.01)
    # ours by hand: 2 N^3 FLOPs a matmul, at the trn2 logical core's fp32 peak, over the profile's whole time
    flops = CALLS * 2 * N**3
    assert eff["flops"] == flops and eff["counted_calls"] == CALLS
    ours = 100 * flops / (peak_for("trn2.48xlarge").of("fp32") * 1e12) / total_time
    assert ex["ours_mfu_percent"] == pytest.approx(ours, abs=1e-4)
    assert ex["difference_points"] == pytest.approx(41.5 - ours, abs=1e-4)
    out = tmp_path / "r.html"
    assert main(["report", str(pid_dir), "-o", str(out)]) == 0
    sec = out.read_text().split('id="efficiency"', 1)[1].split("</section>", 1)[0]
    assert (f"MFU: device profile 41.50%, ours from shapes {ours:.2f}% "
            f"(difference {41.5 - ours:+.2f} points)") in sec


def test_without_shapes_ours_is_not_a_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_profile(tmp_path / "p")  # a device profile alone: no host op with shapes to count
    doc = _summary(tmp_path / "p", capsys)
    ex = doc["totals"]["efficiency"]["explorer"]
    assert ex["explorer_mfu_percent"] == 41.5
    assert "ours_mfu_percent" not in ex and "difference_points" not in ex and ex["ours_unknown"]
    out = tmp_path / "r.html"
    assert main(["report", str(tmp_path / "p"), "-o", str(out)]) == 0
    sec = out.read_text().split('id="efficiency"', 1)[1].split("</section>", 1)[0]
    assert "MFU: device profile 41.50%" in sec and "record_shapes" in sec
