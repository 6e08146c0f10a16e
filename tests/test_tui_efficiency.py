"""MFU per line and per op in the TUI (issue 37 item 2): the Ops and Lines views' TFLOP/s, MFU and FLOP/B
columns at 160x48 (the numbers of `analysis.efficiency.rates`), the Lines detail pane at 80x24 where the columns
leave the screen, and blank cells, not 0, where no device time was measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import neuron_prof
from neuron_prof.analysis import Context
from neuron_prof.analysis.efficiency.rates import line_efficiency, op_efficiency
from neuron_prof.analysis.fmt import fmt_mfu, fmt_rate
from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.widgets.virtual_table import VirtualTable
from tests._builders import KINETO_BASE
from tests._tui_pilot import ready, screen_text, table
from tests.test_efficiency import AMD

needs_amd = pytest.mark.skipif(not AMD.exists(), reason="shared Kineto traces not present")


def _cells(t: VirtualTable, name_key: str, name: str) -> dict[str, str]:
    """The drawn text of the efficiency cells of the row named `name`."""
    r = next(int(r) for r in t.order if str(t.data[name_key][r]) == name)
    cols = {c.key: c for c, _ in t.shown_columns()}
    return {k: t.cell_text(cols[k], r).strip() for k in ("tflops", "mfu", "intensity") if k in cols}


async def _view(pilot, app: NeuronProfApp, key: str) -> VirtualTable:  # type: ignore[no-untyped-def]
    await pilot.press(key)
    for _ in range(200):
        await pilot.pause(0.02)
        if getattr(app.screen, "table", None) is not None:
            break
    return table(app)


@needs_amd
async def test_ops_and_lines_show_rates_and_shares_of_peak_at_160x48() -> None:
    trace = neuron_prof.load(AMD)
    ctx = Context(trace)
    ops, lines = op_efficiency(ctx), line_efficiency(ctx)
    i = list(ops.name).index("aten::addmm")
    want = ops.row(i)
    app = NeuronProfApp([trace])
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot, app)
        t = await _view(pilot, app, "4")
        header = next(ln for ln in screen_text(app).splitlines() if ln.startswith("op "))
        assert "TFLOP/s" in header and "MFU" in header and "FLOP/B" in header
        assert _cells(t, "name", "aten::addmm") == {"tflops": fmt_rate(want["tflops"]),
                                                    "mfu": fmt_mfu(want["mfu"]),
                                                    "intensity": fmt_rate(want["intensity"])}
        assert 0 < want["mfu"] < 1
        # an op with no counted call (a runtime call), a device kernel: blank, not 0
        assert _cells(t, "name", "hipLaunchKernel") == {"tflops": "", "mfu": "", "intensity": ""}
        dev = next(str(t.data["name"][r]) for r in t.order if t.data["where"][r] == "device")
        assert _cells(t, "name", dev) == {"tflops": "", "mfu": "", "intensity": ""}
        assert all(len(ln) <= 160 for ln in screen_text(app).splitlines())
        t = await _view(pilot, app, "9")
        row = lines.row(0)  # no stacks: the one "(no user line)" row
        assert _cells(t, "call_site", "(no user line)") == {"tflops": fmt_rate(row["tflops"]),
                                                            "mfu": fmt_mfu(row["mfu"]),
                                                            "intensity": fmt_rate(row["intensity"])}


@needs_amd
async def test_at_80x24_the_columns_give_way_and_the_line_pane_keeps_the_mfu() -> None:
    trace = neuron_prof.load(AMD)
    row = line_efficiency(Context(trace)).row(0)
    app = NeuronProfApp([trace])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        await _view(pilot, app, "4")
        lines = screen_text(app).splitlines()
        # the op names keep their 24 cells: the efficiency columns leave first (the intensity, then the MFU)
        assert all(len(ln) <= 80 for ln in lines) and "self" in lines[1] and "TFLOP/s" not in lines[1]
        assert {c.key: w for c, w in table(app).shown_columns()}["name"] >= 24
        await _view(pilot, app, "9")
        text = screen_text(app)
        assert "MFU" not in text.splitlines()[1]
        assert f"{fmt_rate(row['tflops'])} TFLOP/s, MFU {fmt_mfu(row['mfu'])}" in text


def _cpu_trace(tmp_path: Path) -> Path:
    """One step with a 4x8 @ 8x16 aten::mm on the host and no device at all: 2*4*8*16 FLOPs, no device time."""
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 50,
         "args": {"Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"]}},
    ]
    p = tmp_path / "cpu.json"
    p.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": KINETO_BASE, "traceEvents": ev}))
    return p


async def test_no_device_time_is_blank_not_zero(tmp_path: Path) -> None:
    trace = neuron_prof.load(_cpu_trace(tmp_path))
    ops = op_efficiency(Context(trace))
    i = list(ops.name).index("aten::mm")
    assert ops.flops[i] == 2 * 4 * 8 * 16 and ops.device_ns[i] == 0
    app = NeuronProfApp([trace])
    async with app.run_test(size=(160, 48)) as pilot:
        await ready(pilot, app)
        t = await _view(pilot, app, "4")
        # the intensity needs shapes only; the rate and the share need device time
        assert _cells(t, "name", "aten::mm") == {"tflops": "", "mfu": "",
                                                 "intensity": fmt_rate(ops.flops[i] / ops.bytes[i])}
        t = await _view(pilot, app, "9")
        got = _cells(t, "call_site", str(t.data["call_site"][t.order[0]]))
        assert got["tflops"] == "" and got["mfu"] == ""
