"""The TUI's Lines view (issue 23) at 80x24 and 160x48, with Pilot: key 9, the user's lines by cost with the
backward charged to its forward line, the line's source in context, enter for its ops and their calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.screens.lines import LineOpsScreen
from neuron_prof.tui.screens.ops import CallsScreen
from tests._tui_pilot import ready, screen_text, shown, table
from tests.test_lines import _known_trace

SIZES = [(80, 24), (160, 48)]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_lines_view(size: tuple[int, int], tmp_path: Path) -> None:
    app = NeuronProfApp([_known_trace(tmp_path)])
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        await pilot.press("9")
        await pilot.pause()
        assert app.current_mode == "lines"
        t = table(app)
        # GIVEN the trace's three lines, THEN the forward line with its backward comes first
        assert shown(t, "call_site")[:3] == ["train.py:10", "train.py:20", "train.py:12"]
        text = screen_text(app)
        lines = text.splitlines()
        assert lines[0].startswith(" 1 Over") and "9 Lines" in lines[0]
        header = next(ln for ln in lines if ln.startswith("line "))
        assert "host" in header and "device" in header
        row = next(ln for ln in lines if ln.startswith("train.py:10"))
        # host (forward + backward), its backward part, device
        assert row.split()[1:5] == ["150.0", "µs", "50.0", "µs"] and "30.0 µs" in row
        if size[0] >= 160:
            assert "MmBackward0" in row  # the backward's node
            assert "in bwd" in header and "backward of" in header
        # the source of the highlighted line, in context, from the file next to the trace
        assert "   10 line_10 = 10" in text and "    9 line_9 = 9" in text
        assert "+ backward: MmBackward0" in text
        assert all(len(ln) <= size[0] for ln in lines)
        # enter: the line's ops, forward and backward apart
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, LineOpsScreen)
        ops = app.screen.table
        got = dict(zip(shown(ops, "name"), shown(ops, "where")))
        assert got["aten::mm"] == "forward" and got["MmBackward0"] == "backward (MmBackward0)"
        assert "ops of train.py:10" in screen_text(app)
        # enter on an op: its calls, to jump to on the timeline
        ops.move_to(shown(ops, "name").index("MmBackward0"))
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, CallsScreen)
        assert "backward (MmBackward0) calls at train.py:10 of MmBackward0" in screen_text(app)
        await pilot.press("escape", "escape")
        await pilot.pause()
        assert app.current_mode == "lines"


@pytest.mark.parametrize("size", [(100, 30), (160, 48)], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_overview_shows_the_step_as_stacked_parts(size: tuple[int, int], tmp_path: Path) -> None:
    app = NeuronProfApp([_known_trace(tmp_path)])
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app)
        line = next(ln for ln in screen_text(app).splitlines() if "step mix" in ln)
        # the one step: 190 µs of host ops, 810 µs with neither host op nor device work; a bar of 10-40 cells
        # split 19:81 between them
        bar = line.split("step mix ")[1].split(" ")[0]
        assert set(bar) == {"█"} and 10 <= len(bar) <= 40
        assert "host 190.0 µs" in line and "idle 810.0 µs" in line
        cells = [seg for seg in app.screen._compositor.render_strips()
                 for seg in seg if seg.text and set(seg.text) == {"█"} and len(seg.text) > 1]
        widths = sorted(len(s.text) for s in cells)
        host = round(0.19 * len(bar))
        assert sum(widths) == len(bar) and widths == sorted([host, len(bar) - host])


async def test_overview_at_80x24_keeps_its_rows_for_findings(tmp_path: Path) -> None:
    app = NeuronProfApp([_known_trace(tmp_path)])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        assert "step mix" not in screen_text(app)
