"""The drill-in lists (a line's ops, an op's calls, the steps) share one screen: a title naming what is listed
and how many rows, the table focused, the key bar; esc and backspace go back to where they were opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuron_prof.tui.app import NeuronProfApp
from neuron_prof.tui.screens._drill import DrillScreen
from neuron_prof.tui.screens.lines import LineOpsScreen
from neuron_prof.tui.screens.ops import CallsScreen
from neuron_prof.tui.screens.steps import StepsScreen
from tests._demo_trace import demo_like_trace
from tests._tui_pilot import ready, screen_text
from tests.test_lines import _known_trace


def _title(app: NeuronProfApp) -> str:
    return screen_text(app).splitlines()[0].strip()


@pytest.mark.parametrize("back", ["escape", "backspace"])
async def test_line_ops_and_calls_share_the_drill_in_screen(back: str, tmp_path: Path) -> None:
    app = NeuronProfApp([_known_trace(tmp_path)])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        await pilot.press("9", "enter")
        await pilot.pause()
        # GIVEN the first line's ops (aten::mm and its backward), THEN a drill-in screen titled with the line
        assert isinstance(app.screen, LineOpsScreen) and isinstance(app.screen, DrillScreen)
        assert _title(app) == f"ops of train.py:10  ({len(app.screen.table.order)})"
        assert app.screen.focused is app.screen.table
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, CallsScreen) and isinstance(app.screen, DrillScreen)
        n = len(app.screen.table.order)
        assert _title(app).endswith(f"calls at train.py:10 of {app.screen.op_name}  ({n})") and n >= 1
        assert app.screen.focused is app.screen.table
        # WHEN esc or backspace, THEN back one screen at a time, to the lines view
        await pilot.press(back)
        await pilot.pause()
        assert isinstance(app.screen, LineOpsScreen)
        await pilot.press(back)
        await pilot.pause()
        assert app.current_mode == "lines" and not isinstance(app.screen, DrillScreen)


async def test_the_steps_share_the_drill_in_screen() -> None:
    app = NeuronProfApp([demo_like_trace()])
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app)
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, StepsScreen) and isinstance(app.screen, DrillScreen)
        assert _title(app).startswith("per step 10 steps")
        assert app.screen.focused is app.screen.table
        await pilot.press("escape")
        await pilot.pause()
        assert app.current_mode == "overview" and not isinstance(app.screen, DrillScreen)
